/* Shared between the files of the hw-schedtrace library; not part of its interface. */
#ifndef HW_ST_INTERNAL_H
#define HW_ST_INTERNAL_H
#include <stddef.h>

#include "st.h"

void st_raw_path(const struct st_buffer *buf, int cpu, char *out, size_t len);
unsigned st_buffer_page_size(const struct st_buffer *buf);
const char *st_buffer_cmdlines(const struct st_buffer *buf);
const char *st_buffer_tgids(const struct st_buffer *buf);

/* The I/O system calls recorded with --syscalls: hw-iotrace's default set, by tracepoint name
 * (sys_enter_<name>, sys_exit_<name>; sendfile's is sendfile64). */
extern const char *const st_io_calls[];
extern const size_t st_n_io_calls;

/* TSV text escaping: tab, newline, carriage return and backslash become \t \n \r \\. */
void st_tsv_escape(char *out, size_t len, const char *in, size_t inlen);
#endif
