# benchmark/: the synthetic workload hw-bench and its C unit tests.
BENCH_LIB := benchmark/sieve.c benchmark/wire.c benchmark/clocksync.c benchmark/evlog.c \
             benchmark/child_common.c benchmark/sender.c benchmark/background.c benchmark/receiver.c \
             benchmark/coordinator.c benchmark/report.c benchmark/net.c benchmark/pingpong.c benchmark/mkdata.c \
             benchmark/probes.c

$(eval $(call hw_program,hw-bench,benchmark/main.c benchmark/usage.c $(BENCH_LIB),,-lm))
$(eval $(call hw_ctest,test-bench-units,benchmark/tests/test_units.c $(BENCH_LIB),,-lm))
# The added-latency yardstick of `hostwire overhead --program`: one-byte TCP round trips between
# the two namespaces (benchmark/tests/tcp_rr.c).
$(eval $(call hw_test_prog,tcp-rr,benchmark/tests/tcp_rr.c))
