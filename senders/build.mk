# senders/: small programs that send in one style each (io_uring, splice, MSG_ZEROCOPY, the
# vector calls), recorded by tests/test_record_sendstyles.py.
SENDERS_COMMON := senders/net_common.c
$(eval $(call hw_test_prog,uring-send,senders/uring_send.c $(SENDERS_COMMON),-luring))
$(eval $(call hw_test_prog,splice-send,senders/splice_send.c $(SENDERS_COMMON)))
$(eval $(call hw_test_prog,zerocopy-send,senders/zerocopy_send.c $(SENDERS_COMMON)))
$(eval $(call hw_test_prog,vector-send,senders/vector_send.c $(SENDERS_COMMON)))
