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
static bool host_was_there;

static void usb_io(uint64_t now) {
  uint8_t buf[64];
  while (tud_cdc_available()) {
    uint32_t n = tud_cdc_read(buf, sizeof buf);
    nb_rx(&core, buf, n, now);
  }
  /* The host is there while USB is mounted, not suspended, and the port is open (DTR).
   * When it goes, the controller is released at once (defect: presses kept playing
   * until the host watchdog), not after watchdog_ms. */
  bool host = tud_mounted() && !tud_suspended() && tud_cdc_connected();
  if (host_was_there && !host) {
    nb_host_lost(&core);
  }
  host_was_there = host;
  if (!host) {
    /* Drop replies and statuses, so a host that connects later does not get stale
     * ones first. */
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
  nb_set_identity(&core, NB_FW_VERSION_MAJOR, NB_FW_VERSION_MINOR, NB_FW_VERSION_PATCH, BOARD_NAME);
  nb_set_ports(&core, nes_port_ports());

  uint32_t word;
  nb_poll(&core, time_us_64(), &word); /* frame 0: no buttons */
  nes_port_init(word, nb_port_word(&core, 2));

  gpio_init(BOARD_PIN_LED);
  gpio_set_dir(BOARD_PIN_LED, GPIO_OUT);
  tud_init(0);
  watchdog_enable(LOOP_WATCHDOG_MS, true);

  for (;;) {
    watchdog_update();
    tud_task();
    /* The time is read before the latches are drained: every latch up to `now` is then
     * in the core before nb_poll(now) decides whether the frame's window has closed. */
    uint64_t now = time_us_64();
    uint64_t t;
    while (nes_port_next_latch(&t)) {
      nb_latch(&core, t);
    }
    nb_latches_lost(&core, nes_port_take_dropped_latches());
    usb_io(now);
    if (nb_poll(&core, now, &word) && !nes_port_put(word, nb_port_word(&core, 2))) {
      nb_put_failed(&core);
    }
    gpio_put(BOARD_PIN_LED, nb_streaming(&core));
  }
}
