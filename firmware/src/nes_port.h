/* Board glue for the console side: the nes4021 PIO program on the controller port,
 * and the latch interrupt that timestamps each latch for the core. */
#ifndef NES_PORT_H
#define NES_PORT_H

#include <stdbool.h>
#include <stdint.h>

/* Loads and starts the PIO program (pins from the board header) with first_word in its
 * TX FIFO, and enables the latch interrupt. */
void nes_port_init(uint32_t first_word);

/* Pops the time (us, time_us_64) of the oldest latch not yet taken; false if none. */
bool nes_port_next_latch(uint64_t* t_us);

/* Queues the next frame's word (nb_poll hands out one per frame, after the latch
 * window, so the 4-deep FIFO never fills). Returns false, and puts nothing, if the
 * FIFO was full or a latch arrived since the last nes_port_next_latch() returned
 * false (that latch was served the previous word: the core counts an ARM_MISS). */
bool nes_port_put(uint32_t word);

/* Latch events lost (the main loop fell 64 latches behind) since the previous call. */
uint32_t nes_port_take_dropped_latches(void);

#endif
