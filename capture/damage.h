/* Locating the damage in a capture file that libpcap stopped reading: walks the file's record
 * (pcap) or block (pcapng) structure from the start and names the first record that is cut short
 * or impossible. */
#ifndef CAP_DAMAGE_H
#define CAP_DAMAGE_H
#include <stdint.h>
#include <stddef.h>

struct cap_damage {
    int found;            /* 0: the structure looks whole (the error lies elsewhere) */
    int64_t offset;       /* byte offset of the damaged record or block */
    int64_t frame;        /* 1-based number of the frame that record holds or would hold */
    char what[200];       /* e.g. "file cut inside the header of frame 12" */
};

/* Returns 0 on success (result in *out), -1 if the file cannot be read (errno set). */
int cap_damage_locate(const char *path, struct cap_damage *out);
#endif
