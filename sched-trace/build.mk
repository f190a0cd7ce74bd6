# hw-schedtrace: the tracefs collector (library part st_*.c; thin main.c) and its tests.
ST_LIB := sched-trace/st_buffer.c sched-trace/st_stats.c sched-trace/st_datwrite.c \
          sched-trace/st_datread.c sched-trace/st_convert.c sched-trace/st_lifetimes.c sched-trace/st_pidtree.c \
          sched-trace/st_record.c sched-trace/st_uring.c

$(eval $(call hw_program,hw-schedtrace,sched-trace/main.c $(ST_LIB),libtracefs libtraceevent,-lpthread))
$(eval $(call hw_ctest,test-schedtrace,sched-trace/tests/st_test.c $(ST_LIB),libtracefs libtraceevent,-lpthread))

# Test program (not installed): two processes ping-pong one byte over two pipes and block at a
# start and an end barrier, so a test can count their context switches exactly.
$(BUILD)/test/st-pingpong: $(BUILD)/obj/sched-trace/tests/st_pingpong.o
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(HW_LDFLAGS) $(LDFLAGS) -o $@ $^
PROGRAMS += $(BUILD)/test/st-pingpong
# st_uring.c on hand-made io_uring events (no kernel needed)
$(eval $(call hw_ctest,test-st-uring,sched-trace/tests/st_uring_test.c sched-trace/st_uring.c,libtraceevent))
