# capture/: hw-wirecap (libpcap capture with nanosecond stamps), hw-pcapcols (pcap to columns) and
# libhwpcapcols.so (the same conversion into memory, which hostwire.read.pcap loads).
CAPTURE_PCAPCOLS_LIB := capture/pcapcols.c capture/pcapcols_rows.c capture/pcapcols_parts.c capture/pcapcols_segments.c capture/colpool.c capture/frameparse.c \
                        capture/addrdict.c capture/damage.c
CAPTURE_WIRECAP_LIB := capture/wirecap.c

$(eval $(call hw_program,hw-pcapcols,capture/pcapcols_main.c $(CAPTURE_PCAPCOLS_LIB),libpcap,-lpthread))
$(eval $(call hw_shared_lib,libhwpcapcols.so,$(CAPTURE_PCAPCOLS_LIB) $(HW_COMMON),$$(call pkg_libs,libpcap) -lpthread -lm -z defs))
$(eval $(call hw_ctest,test-frameparse,capture/tests/test_frameparse.c capture/frameparse.c capture/addrdict.c,,))
$(eval $(call hw_ctest,test-pcapcols-parts,capture/tests/test_pcapcols_parts.c $(CAPTURE_PCAPCOLS_LIB),libpcap,-lpthread))
$(eval $(call hw_program,hw-wirecap,capture/wirecap_main.c $(CAPTURE_WIRECAP_LIB),libpcap,))
