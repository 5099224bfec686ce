/* Board glue for the console side: the nes4021 PIO program on controller port 1 and, if the
 * board header has pins for it, port 2 (one state machine each, one shared LATCH), and the
 * latch interrupt that timestamps each latch for the core. */
#ifndef NES_PORT_H
#define NES_PORT_H

#include <stdbool.h>
#include <stdint.h>

/* The controller ports this board drives: bit 0 port 1, bit 1 port 2 (nb_set_ports). */
uint8_t nes_port_ports(void);

/* Loads the PIO program and starts one state machine per port (pins from the board header)
 * with that port's first word in its TX FIFO, and enables the latch interrupt. */
void nes_port_init(uint32_t first_word, uint32_t first_word2);

/* Pops the time (us, time_us_64) of the oldest latch not yet taken; false if none. */
bool nes_port_next_latch(uint64_t* t_us);

/* Queues the next frame's words, word for port 1 and word2 for port 2 (nb_poll hands out
 * one per port per frame, after the latch window, so the 4-deep FIFOs never fill). Both or
 * neither: returns false, and puts nothing, if a FIFO was full or a latch arrived since the
 * last nes_port_next_latch() returned false (that latch was served the previous words: the
 * core counts an ARM_MISS). */
bool nes_port_put(uint32_t word, uint32_t word2);

/* Latch events lost (the main loop fell 64 latches behind) since the previous call. */
uint32_t nes_port_take_dropped_latches(void);

#endif
