/* Console side of the board: nes4021 on BOARD_PIO, one state machine per controller port,
 * latch timestamps from port 1's RX FIFO. Both machines see the same LATCH (the console's
 * OUT0 goes to both ports); port 2's latch events are only drained. The interrupt does the
 * one thing that cannot wait for the main loop: it reads the clock when a latch happens
 * (the STATUS timestamp the host locks its clock to). */
#include "nes_port.h"

#include "hardware/irq.h"
#include "hardware/pio.h"
#include "hardware/timer.h"
#include "nes4021.pio.h"
#include "pico/stdlib.h"

#include BOARD_HEADER

#define RING 64u /* latches; a power of two */

#ifdef BOARD_PIN_DATA2
#define PORT2 1
#else
#define PORT2 0
#endif

static uint64_t ring[RING];
static volatile uint32_t ring_head; /* written by the interrupt only */
static volatile uint32_t ring_tail; /* written by the main loop only */
static volatile uint32_t dropped;

/* Runs from SRAM: an XIP cache miss would delay the timestamp by microseconds. */
static void __not_in_flash_func(latch_irq)(void) {
  uint64_t t = time_us_64();
#if PORT2
  while (!pio_sm_is_rx_fifo_empty(BOARD_PIO, BOARD_PIO_SM2)) {
    (void)pio_sm_get(BOARD_PIO, BOARD_PIO_SM2); /* the same latch, seen by port 2 */
  }
#endif
  while (!pio_sm_is_rx_fifo_empty(BOARD_PIO, BOARD_PIO_SM)) {
    (void)pio_sm_get(BOARD_PIO, BOARD_PIO_SM);
    uint32_t head = ring_head;
    if (head - ring_tail < RING) {
      ring[head % RING] = t;
      __compiler_memory_barrier(); /* the slot is written before it is published */
      ring_head = head + 1u;
    } else {
      dropped++;
    }
  }
}

uint8_t nes_port_ports(void) { return PORT2 ? 0x03u : 0x01u; }

void nes_port_init(uint32_t first_word, uint32_t first_word2) {
  uint offset = pio_add_program(BOARD_PIO, &nes4021_program);
  pio_set_irq0_source_enabled(
      BOARD_PIO, (enum pio_interrupt_source)(pis_sm0_rx_fifo_not_empty + BOARD_PIO_SM), true);
#if PORT2
  /* Port 2's latch events interrupt too, so none is left in its FIFO to fail nes_port_put. */
  pio_set_irq0_source_enabled(
      BOARD_PIO, (enum pio_interrupt_source)(pis_sm0_rx_fifo_not_empty + BOARD_PIO_SM2), true);
#endif
  irq_set_exclusive_handler(BOARD_PIO_IRQ, latch_irq);
  irq_set_priority(BOARD_PIO_IRQ, PICO_HIGHEST_IRQ_PRIORITY);
  irq_set_enabled(BOARD_PIO_IRQ, true);
  nes4021_program_init(BOARD_PIO, BOARD_PIO_SM, offset, BOARD_PIN_LATCH, BOARD_PIN_CLOCK,
                       BOARD_PIN_DATA, first_word);
#if PORT2
  nes4021_program_init(BOARD_PIO, BOARD_PIO_SM2, offset, BOARD_PIN_LATCH, BOARD_PIN_CLOCK2,
                       BOARD_PIN_DATA2, first_word2);
#else
  (void)first_word2;
#endif
}

bool nes_port_next_latch(uint64_t* t_us) {
  uint32_t tail = ring_tail;
  if (tail == ring_head) {
    return false;
  }
  __compiler_memory_barrier();
  *t_us = ring[tail % RING];
  __compiler_memory_barrier(); /* the slot is read before it is handed back */
  ring_tail = tail + 1u;
  return true;
}

bool nes_port_put(uint32_t word, uint32_t word2) {
  /* With the latch interrupt masked, a latch since the main loop drained the ring
   * shows in the ring or an RX FIFO: then the PIO already served that latch the
   * previous word, and putting this one now would hand it to the frame's next read.
   * Both ports' words go in together, so the ports never arm different frames. */
  irq_set_enabled(BOARD_PIO_IRQ, false);
  bool ok = ring_head == ring_tail && pio_sm_is_rx_fifo_empty(BOARD_PIO, BOARD_PIO_SM) &&
            !pio_sm_is_tx_fifo_full(BOARD_PIO, BOARD_PIO_SM);
#if PORT2
  ok = ok && pio_sm_is_rx_fifo_empty(BOARD_PIO, BOARD_PIO_SM2) &&
       !pio_sm_is_tx_fifo_full(BOARD_PIO, BOARD_PIO_SM2);
#endif
  if (ok) {
    pio_sm_put(BOARD_PIO, BOARD_PIO_SM, word);
#if PORT2
    pio_sm_put(BOARD_PIO, BOARD_PIO_SM2, word2);
#endif
  }
#if !PORT2
  (void)word2;
#endif
  irq_set_enabled(BOARD_PIO_IRQ, true);
  return ok;
}

uint32_t nes_port_take_dropped_latches(void) {
  irq_set_enabled(BOARD_PIO_IRQ, false); /* the interrupt writes it */
  uint32_t n = dropped;
  dropped = 0;
  irq_set_enabled(BOARD_PIO_IRQ, true);
  return n;
}
