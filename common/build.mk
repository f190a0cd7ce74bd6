# common/: the helpers every hostwire tool links (hw_program and hw_ctest add HW_COMMON to each
# program and unit test), and their unit test.
HW_COMMON := common/hwargs.c common/hwerr.c common/hwgate.c common/hwio.c common/hwjson.c common/hwsafe.c \
             common/hwsignal.c \
             common/hwsyscalls.c

$(eval $(call hw_ctest,test-common,common/tests/test_common.c,,))
