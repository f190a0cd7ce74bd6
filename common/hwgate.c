#include "hwgate.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hwio.h"

int hw_gate_start(struct hw_gate *g, const char *tool, char *const argv[], hw_gate_prepare_fn prepare, void *arg,
                  struct hw_err *err)
{
    int go[2];
    g->pid = -1;
    g->go_fd = -1;
    if (pipe2(go, O_CLOEXEC) < 0) {
        hw_seterr(err, "failed to create a pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        hw_seterr(err, "failed to fork: %s", strerror(errno));
        close(go[0]);
        close(go[1]);
        return -1;
    }
    if (pid == 0) {
        char c;
        close(go[1]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (hw_read_all(go[0], &c, 1) != 0)
            _exit(127);   /* shut without opening */
        close(go[0]);
        if (prepare && prepare(arg) != 0)
            _exit(127);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "%s: failed to run %s: %s\n", tool, argv[0], strerror(errno));
        _exit(127);
    }
    close(go[0]);
    g->pid = pid;
    g->go_fd = go[1];
    return 0;
}

int hw_gate_open(struct hw_gate *g, struct hw_err *err)
{
    if (g->go_fd < 0)
        return 0;
    /* a child that is gone must not take the starter down with SIGPIPE */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    sigaction(SIGPIPE, &ign, &old);
    int rc = hw_write_all(g->go_fd, "g", 1);
    sigaction(SIGPIPE, &old, NULL);
    close(g->go_fd);
    g->go_fd = -1;
    if (rc < 0) {
        hw_seterr(err, "failed to start pid %d: %s", (int)g->pid, strerror(-rc));
        return -1;
    }
    return 0;
}

void hw_gate_shut(struct hw_gate *g)
{
    if (g->go_fd >= 0)
        close(g->go_fd);
    g->go_fd = -1;
}
