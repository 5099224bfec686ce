/* Pin map: Raspberry Pi Pico (RP2040). Board differences are data: copy this file
 * for another board and build with -DNB_BOARD=<name> (firmware/README.md, "Wiring").
 * GPn = RP2040 GPIO n; "pin" = the Pico's header pin. */
#ifndef BOARD_PICO_H
#define BOARD_PICO_H

#define BOARD_NAME "pico"
/* LATCH: OUT0 reaches both controller ports (pin 3 of each), one line: either port's. */
#define BOARD_PIN_LATCH 2 /* GP2, pin 4 <- console OUT0 (port pin 3) via 5 V -> 3.3 V buffer */
/* Controller port 1 (player 1). */
#define BOARD_PIN_CLOCK 3 /* GP3, pin 5 <- port 1 CLK (port pin 2) via 5 V -> 3.3 V buffer */
#define BOARD_PIN_DATA 4  /* GP4, pin 6 -> open-drain buffer -> port 1 D0 (port pin 4) */
/* Controller port 2 (player 2). A board without these drives port 1 only. */
#define BOARD_PIN_CLOCK2 5 /* GP5, pin 7 <- port 2 CLK (port pin 2) via 5 V -> 3.3 V buffer */
#define BOARD_PIN_DATA2 6  /* GP6, pin 9 -> open-drain buffer -> port 2 D0 (port pin 4) */
#define BOARD_PIN_LED 25   /* on-board LED: on while a host session streams (either port) */
#define BOARD_PIO pio0
#define BOARD_PIO_IRQ PIO0_IRQ_0
#define BOARD_PIO_SM 0u  /* port 1's state machine; its latch events are timestamped */
#define BOARD_PIO_SM2 1u /* port 2's, the same program */

#endif
