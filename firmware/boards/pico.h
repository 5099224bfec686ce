/* Pin map: Raspberry Pi Pico (RP2040). Board differences are data: copy this file
 * for another board and build with -DNB_BOARD=<name> (firmware/README.md, "Wiring").
 * GPn = RP2040 GPIO n; "pin" = the Pico's header pin. */
#ifndef BOARD_PICO_H
#define BOARD_PICO_H

#define BOARD_NAME "pico"
#define BOARD_PIN_LATCH 2 /* GP2, pin 4 <- console OUT0 (port pin 3) via 5 V -> 3.3 V buffer */
#define BOARD_PIN_CLOCK 3 /* GP3, pin 5 <- console CLK (port pin 2) via 5 V -> 3.3 V buffer */
#define BOARD_PIN_DATA 4  /* GP4, pin 6 -> open-drain buffer -> console D0 (port pin 4) */
#define BOARD_PIN_LED 25  /* on-board LED: on while a host session streams */
#define BOARD_PIO pio0
#define BOARD_PIO_IRQ PIO0_IRQ_0
#define BOARD_PIO_SM 0u

#endif
