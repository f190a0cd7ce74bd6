/* C unit tests of st_uring.c on hand-made io_uring events (the formats of Linux 6.18's
 * io_uring_submit_req, io_uring_file_get and io_uring_complete, parsed by libtraceevent): each
 * completion joined to its own submission and file, however many are in flight and in whatever
 * order they complete; zero-copy notifications, completions without a request and operations
 * that carry no bytes give no record; what never completed is given back at the end. */
#include <event-parse.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hwtest.h"
#include "../st_uring.h"

#define COMMON "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n" \
               "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n" \
               "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" \
               "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"

static const char submit_fmt[] = "name: io_uring_submit_req\nID: 11\nformat:\n" COMMON
    "\tfield:void * ctx;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:void * req;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:unsigned long long user_data;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:u8 opcode;\toffset:32;\tsize:1;\tsigned:0;\n"
    "\tfield:unsigned long long flags;\toffset:40;\tsize:8;\tsigned:0;\n"
    "\tfield:bool sq_thread;\toffset:48;\tsize:1;\tsigned:0;\n"
    "\tfield:__data_loc char[] op_str;\toffset:52;\tsize:4;\tsigned:0;\n\n"
    "print fmt: \"req %p\", REC->req\n";
static const char file_fmt[] = "name: io_uring_file_get\nID: 12\nformat:\n" COMMON
    "\tfield:void * ctx;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:void * req;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 user_data;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:int fd;\toffset:32;\tsize:4;\tsigned:1;\n\n"
    "print fmt: \"req %p\", REC->req\n";
static const char complete_fmt[] = "name: io_uring_complete\nID: 13\nformat:\n" COMMON
    "\tfield:void * ctx;\toffset:8;\tsize:8;\tsigned:0;\n"
    "\tfield:void * req;\toffset:16;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 user_data;\toffset:24;\tsize:8;\tsigned:0;\n"
    "\tfield:int res;\toffset:32;\tsize:4;\tsigned:1;\n"
    "\tfield:unsigned cflags;\toffset:36;\tsize:4;\tsigned:0;\n"
    "\tfield:u64 extra1;\toffset:40;\tsize:8;\tsigned:0;\n"
    "\tfield:u64 extra2;\toffset:48;\tsize:8;\tsigned:0;\n\n"
    "print fmt: \"req %p\", REC->req\n";

static struct tep_handle *tep;
static struct tep_event *ev_submit, *ev_file, *ev_complete;
static unsigned char data[128];
static struct tep_record rec = {.data = data};

static struct tep_event *parse(const char *fmt, int id)
{
    CHECK(tep_parse_event(tep, fmt, strlen(fmt), "io_uring") == 0);
    return tep_find_event(tep, id);
}

static void header(struct tep_event *ev, unsigned long long ts, int pid, uint64_t req)
{
    memset(data, 0, sizeof(data));
    uint16_t type = (uint16_t)ev->id;
    memcpy(data, &type, 2);
    memcpy(data + 4, &pid, 4);
    memcpy(data + 16, &req, 8);
    rec.ts = ts;
    rec.size = sizeof(data);
}

static int submit(struct st_uring *u, unsigned long long ts, int pid, uint64_t req, uint8_t opcode, const char *op)
{
    header(ev_submit, ts, pid, req);
    data[32] = opcode;
    uint32_t loc = (uint32_t)(strlen(op) + 1) << 16 | 60;
    memcpy(data + 52, &loc, 4);
    memcpy(data + 60, op, strlen(op) + 1);
    struct st_uring_op out;
    return st_uring_record(u, ev_submit, &rec, &out);
}

static void file(struct st_uring *u, unsigned long long ts, uint64_t req, int fd)
{
    header(ev_file, ts, 0, req);
    memcpy(data + 32, &fd, 4);
    struct st_uring_op out;
    CHECK_EQ_LL(st_uring_record(u, ev_file, &rec, &out), 0);
}

static int complete(struct st_uring *u, unsigned long long ts, uint64_t req, int res, unsigned cflags,
                    struct st_uring_op *out)
{
    header(ev_complete, ts, 0, req);
    memcpy(data + 32, &res, 4);
    memcpy(data + 36, &cflags, 4);
    return st_uring_record(u, ev_complete, &rec, out);
}

static struct st_uring *fresh(void)
{
    struct st_uring *u = st_uring_new();
    CHECK(u && st_uring_bind(u, ev_submit) && st_uring_bind(u, ev_file) && st_uring_bind(u, ev_complete));
    return u;
}

static void test_one_operation(void)
{
    struct st_uring *u = fresh();
    struct st_uring_op op;
    CHECK_EQ_LL(submit(u, 100, 42, 0xffff888000001000ull, 26, "SEND_ZC"), 0);
    file(u, 110, 0xffff888000001000ull, 5);
    file(u, 111, 0xffff888000001000ull, 9);            /* a second file (splice's input): not the one written */
    CHECK_EQ_LL(complete(u, 200, 0xffff888000001000ull, 4096, 2, &op), 1);   /* IORING_CQE_F_MORE */
    CHECK(strcmp(op.call, "uring_send_zc") == 0);
    CHECK_EQ_LL(op.t_submit, 100);
    CHECK_EQ_LL(op.t_done, 200);
    CHECK_EQ_LL(op.tid, 42);
    CHECK_EQ_LL(op.fd, 5);
    CHECK_EQ_LL(op.result, 4096);
    /* its notification comes from a request of its own, never submitted, flagged NOTIF */
    CHECK_EQ_LL(complete(u, 300, 0xffff888000002000ull, 0, 8, &op), 0);
    CHECK_EQ_LL(complete(u, 301, 0, 7, 0, &op), 0);     /* an extra CQE without a request */
    /* a read carries no bytes out: no record */
    CHECK_EQ_LL(submit(u, 400, 42, 0xffff888000003000ull, 22, "READ"), 0);
    CHECK_EQ_LL(complete(u, 410, 0xffff888000003000ull, 100, 0, &op), 0);
    /* a registered file: no file event, fd -1 */
    CHECK_EQ_LL(submit(u, 500, 43, 0xffff888000004000ull, 2, "WRITEV"), 0);
    CHECK_EQ_LL(complete(u, 510, 0xffff888000004000ull, -32, 0, &op), 1);
    CHECK(strcmp(op.call, "uring_writev") == 0);
    CHECK_EQ_LL(op.fd, -1);
    CHECK_EQ_LL(op.result, -32);
    CHECK_EQ_LL(st_uring_next_pending(u, &op), 0);
    st_uring_free(u);
}

/* 3000 operations in flight on addresses 64 bytes apart (many share a home slot), completed in a
 * shuffled order: every completion finds its own submission; 100 never complete. */
static void test_many_in_flight(void)
{
    enum { N = 3000, OPEN = 100 };
    struct st_uring *u = fresh();
    static int order[N];
    for (int i = 0; i < N; i++) {
        CHECK_EQ_LL(submit(u, (unsigned long long)i, 1000 + i, 0xffff888000000000ull + 64ull * (uint64_t)i, 26,
                           "SEND"), 0);
        file(u, (unsigned long long)i, 0xffff888000000000ull + 64ull * (uint64_t)i, i);
        order[i] = i;
    }
    srand(7);
    for (int i = N - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int joined = 0;
    for (int k = 0; k < N - OPEN; k++) {
        int i = order[k];
        struct st_uring_op op;
        if (complete(u, 10000 + (unsigned long long)k, 0xffff888000000000ull + 64ull * (uint64_t)i, i, 0, &op) == 1)
            joined += op.fd == i && op.tid == 1000 + i && op.t_submit == i && op.result == i;
    }
    CHECK_EQ_LL(joined, N - OPEN);
    int pending = 0, right = 1;
    struct st_uring_op op;
    while (st_uring_next_pending(u, &op)) {
        pending++;
        int i = (int)op.fd, open = 0;
        for (int k = N - OPEN; k < N; k++)
            open |= order[k] == i;
        right &= open && op.tid == 1000 + i;
    }
    CHECK_EQ_LL(pending, OPEN);
    CHECK(right);
    st_uring_free(u);
}

HW_TEST_MAIN(
    tep = tep_alloc();
    tep_set_long_size(tep, 8);
    tep_set_file_bigendian(tep, TEP_LITTLE_ENDIAN);
    tep_set_local_bigendian(tep, TEP_LITTLE_ENDIAN);
    ev_submit = parse(submit_fmt, 11);
    ev_file = parse(file_fmt, 12);
    ev_complete = parse(complete_fmt, 13);
    if (ev_submit && ev_file && ev_complete) {
        test_one_operation();
        test_many_in_flight();
    }
    tep_free(tep);
)
