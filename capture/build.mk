# capture/: hw-wirecap (libpcap capture with nanosecond stamps) and hw-pcapcols (pcap to columns).
CAPTURE_PCAPCOLS_LIB := capture/pcapcols.c capture/frameparse.c capture/addrdict.c capture/damage.c
CAPTURE_WIRECAP_LIB := capture/wirecap.c

$(eval $(call hw_program,hw-pcapcols,capture/pcapcols_main.c $(CAPTURE_PCAPCOLS_LIB),libpcap,))
$(eval $(call hw_ctest,test-frameparse,capture/tests/test_frameparse.c capture/frameparse.c capture/addrdict.c,,))
$(eval $(call hw_program,hw-wirecap,capture/wirecap_main.c $(CAPTURE_WIRECAP_LIB),libpcap,))
