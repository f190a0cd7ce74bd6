# syscall-tracer: hw-iotrace (ptrace backend + LD_PRELOAD runner), libhwiowrap.so, tests.
IOTRACE_LIB := syscall-tracer/calls.c syscall-tracer/record.c syscall-tracer/desc.c
IOTRACE_SRC := $(IOTRACE_LIB) syscall-tracer/ptrace_backend.c syscall-tracer/seccomp_filter.c \
               syscall-tracer/preload_run.c syscall-tracer/spool.c

$(eval $(call hw_program,hw-iotrace,syscall-tracer/main.c $(IOTRACE_SRC),,))
$(eval $(call hw_shared_lib,libhwiowrap.so,syscall-tracer/hwiowrap.c $(IOTRACE_LIB),-ldl -lpthread))
$(eval $(call hw_ctest,test_iotrace_unit,syscall-tracer/tests/test_iotrace_unit.c $(IOTRACE_LIB),,))

# Programs the pytest tests and perf/bench_iotrace.py run: a known sequence of I/O calls; the
# benchmark's workload (one-byte writes to /dev/null, or untraced getppid()); and the reference
# tracer that does nothing but the two ptrace stops per traced call.
$(eval $(call hw_test_prog,iotrace-known-io,syscall-tracer/tests/known_io.c))
$(eval $(call hw_test_prog,iotrace-write-loop,syscall-tracer/tests/write_loop.c))
$(eval $(call hw_test_prog,iotrace-ptrace-floor,syscall-tracer/tests/ptrace_floor.c))
