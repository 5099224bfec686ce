#include "boot_info.h"

#include "hardware/structs/watchdog.h"
#include "hardware/watchdog.h"
#include "nb_core.h"
#include "pico/stdlib.h"

#define BOOT_MAGIC 0x4E424254u /* "NBBT": scratch[0] holds a count, not power-on noise */

/* The pico-sdk keeps scratch[4..7] for its reboot magic; 0..3 are the application's. */
void boot_info(uint32_t* boot_count, uint32_t* reset_reason) {
  if (watchdog_hw->scratch[1] != BOOT_MAGIC) {
    watchdog_hw->scratch[0] = 0;
    watchdog_hw->scratch[1] = BOOT_MAGIC;
  }
  *boot_count = ++watchdog_hw->scratch[0];
  /* watchdog_enable_caused_reboot(), not watchdog_caused_reboot(): the boot ROM also
   * reboots through the watchdog (after a UF2 is copied to the BOOTSEL drive), and that
   * is no "firmware stuck". Only a timeout of the watchdog we enabled counts. */
  if (watchdog_enable_caused_reboot()) {
    *reset_reason = NB_RESET_WATCHDOG;
  } else {
    *reset_reason = *boot_count == 1 ? NB_RESET_POWER_ON : NB_RESET_OTHER;
  }
}
