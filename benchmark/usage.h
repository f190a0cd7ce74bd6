/* The help texts of hw-bench and its commands (usage.c). */
#ifndef HB_USAGE_H
#define HB_USAGE_H
extern const char hb_usage_top[];
extern const char hb_usage_main[];
extern const char hb_usage_receive[];
extern const char hb_usage_sieve[];
extern const char hb_usage_pingpong[];
extern const char hb_usage_mkdata[];
extern const char hb_usage_probes[];
#endif
