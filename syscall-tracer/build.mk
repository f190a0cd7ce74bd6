# syscall-tracer: hw-iotrace (ptrace backend + LD_PRELOAD runner), libhwiowrap.so, tests.
IOTRACE_LIB := syscall-tracer/calls.c syscall-tracer/record.c syscall-tracer/desc.c syscall-tracer/lifetimes.c
IOTRACE_SRC := $(IOTRACE_LIB) syscall-tracer/ptrace_backend.c syscall-tracer/seccomp_filter.c \
               syscall-tracer/preload_run.c syscall-tracer/region.c syscall-tracer/region_drain.c

$(eval $(call hw_program,hw-iotrace,syscall-tracer/main.c $(IOTRACE_SRC),,))
# The library formats nothing (hw-iotrace writes the TSV): the call table and fd descriptions
# only. -z defs: a symbol it lacks fails the link, not the traced program.
$(eval $(call hw_shared_lib,libhwiowrap.so,syscall-tracer/hwiowrap.c syscall-tracer/calls.c syscall-tracer/desc.c syscall-tracer/lifetimes.c,-ldl -lpthread -z defs))
$(eval $(call hw_ctest,test_iotrace_unit,syscall-tracer/tests/test_iotrace_unit.c $(IOTRACE_LIB) \
                 syscall-tracer/region.c syscall-tracer/region_drain.c,,))

# Programs the pytest tests and perf/bench_iotrace.py run: a known sequence of I/O calls; the
# benchmark's workload (one-byte writes to /dev/null, or untraced getppid()); the reference
# tracer that does nothing but the two ptrace stops per traced call; and 8 threads writing while
# the process ends under them (exit from one thread, SIGKILL, exec), each counting its calls.
$(eval $(call hw_test_prog,iotrace-known-io,syscall-tracer/tests/known_io.c))
$(eval $(call hw_test_prog,iotrace-write-loop,syscall-tracer/tests/write_loop.c))
$(eval $(call hw_test_prog,iotrace-ptrace-floor,syscall-tracer/tests/ptrace_floor.c))
$(eval $(call hw_test_prog,iotrace-thread-end,syscall-tracer/tests/thread_end.c))
