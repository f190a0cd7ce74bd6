# syscall-tracer: hw-iotrace (ptrace backend + LD_PRELOAD runner), libhwiowrap.so, tests.
IOTRACE_LIB := syscall-tracer/calls.c syscall-tracer/record.c syscall-tracer/desc.c
IOTRACE_SRC := $(IOTRACE_LIB) syscall-tracer/ptrace_backend.c syscall-tracer/seccomp_filter.c \
               syscall-tracer/preload_run.c syscall-tracer/spool.c

$(eval $(call hw_program,hw-iotrace,syscall-tracer/main.c $(IOTRACE_SRC),,))
$(eval $(call hw_shared_lib,libhwiowrap.so,syscall-tracer/hwiowrap.c $(IOTRACE_LIB),-ldl -lpthread))
$(eval $(call hw_ctest,test_iotrace_unit,syscall-tracer/tests/test_iotrace_unit.c $(IOTRACE_LIB),,))

# The program with a known sequence of I/O calls that the pytest tests trace (not a unit test).
IOTRACE_PROG := $(BUILD)/test-progs/iotrace-known-io
$(IOTRACE_PROG): $(BUILD)/obj/syscall-tracer/tests/known_io.o | check-libs
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(HW_LDFLAGS) $(LDFLAGS) -o $@ $^
PROGRAMS += $(IOTRACE_PROG)

# The workload of bench/bench_iotrace.py: one-byte writes to /dev/null, or untraced getppid().
IOTRACE_LOOP := $(BUILD)/test-progs/iotrace-write-loop
$(IOTRACE_LOOP): $(BUILD)/obj/syscall-tracer/tests/write_loop.o | check-libs
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(HW_LDFLAGS) $(LDFLAGS) -o $@ $^
PROGRAMS += $(IOTRACE_LOOP)
