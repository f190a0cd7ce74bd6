# procsample/: hw-procsample, the /proc sampler of real hosts (docs/hosts.md), and its unit test.
PROCSAMPLE_LIB := procsample/psample.c

$(eval $(call hw_program,hw-procsample,procsample/main.c $(PROCSAMPLE_LIB),,))
$(eval $(call hw_ctest,test-procsample,procsample/tests/test_psample.c $(PROCSAMPLE_LIB),,))
