/* Dr. Mario bridge controller firmware: wires the core (firmware/core) to USB CDC
 * (TinyUSB, used directly: raw bytes, no stdio) and to the console port (nes_port.c).
 * Behaviour: firmware/README.md; link: firmware/PROTOCOL.md. */
#include "boot_info.h"
#include "hardware/gpio.h"
#include "hardware/watchdog.h"
#include "nb_core.h"
#include "nes_port.h"
#include "pico/stdlib.h"
#include "pico/time.h"
#include "tusb.h"

#include BOARD_HEADER

#define LOOP_WATCHDOG_MS 100 /* a stuck main loop reboots; the host sees boot_count + 1 */

static nb_core_t core;

static void usb_io(uint64_t now) {
  uint8_t buf[64];
  while (tud_cdc_available()) {
    uint32_t n = tud_cdc_read(buf, sizeof buf);
    nb_rx(&core, buf, n, now);
  }
  if (!tud_cdc_connected()) {
    /* No host (USB absent or port closed): drop replies and statuses, so a host
     * that connects later does not get stale ones first. */
    while (nb_tx(&core, buf, sizeof buf)) {
    }
    return;
  }
  uint32_t room;
  while ((room = tud_cdc_write_available()) > 0) {
    uint32_t n = nb_tx(&core, buf, room < sizeof buf ? room : sizeof buf);
    if (!n) {
      break;
    }
    tud_cdc_write(buf, n);
  }
  tud_cdc_write_flush();
}

int main(void) {
  nb_config_t cfg;
  nb_config_default(&cfg);
  boot_info(&cfg.boot_count, &cfg.reset_reason);
  nb_init(&core, &cfg);

  uint32_t word;
  nb_poll(&core, time_us_64(), &word); /* frame 0: no buttons */
  nes_port_init(word);

  gpio_init(BOARD_PIN_LED);
  gpio_set_dir(BOARD_PIN_LED, GPIO_OUT);
  tud_init(0);
  watchdog_enable(LOOP_WATCHDOG_MS, true);

  for (;;) {
    watchdog_update();
    tud_task();
    uint64_t t;
    while (nes_port_next_latch(&t)) {
      nb_latch(&core, t);
    }
    uint64_t now = time_us_64();
    usb_io(now);
    if (nb_poll(&core, now, &word)) {
      nes_port_put(word);
    }
    gpio_put(BOARD_PIN_LED, core.streaming);
  }
}
