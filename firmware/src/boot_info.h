/* Boot counter and reset cause, reported to the host in HELLO_ACK. */
#ifndef BOOT_INFO_H
#define BOOT_INFO_H

#include <stdint.h>

/* Counts this boot (watchdog scratch registers 0-1 survive every reset but a
 * power cycle) and classifies its cause as an nb_reset_reason. */
void boot_info(uint32_t* boot_count, uint32_t* reset_reason);

#endif
