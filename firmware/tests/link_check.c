/* Cross-compile link check (firmware/ci.sh): the core links for Cortex-M0+
 * against newlib alone, with no SDK and no host-only symbol. */
#include "nb_core.h"

static nb_core_t core;

int main(void) {
  uint8_t buf[64];
  uint32_t word = 0;
  nb_init(&core, 0);
  nb_rx(&core, buf, 0, 0);
  (void)nb_latch(&core, 1);
  nb_set_ports(&core, NB_PORTS_ALL);
  (void)nb_poll(&core, 2, &word);
  word += nb_port_word(&core, 2) + nb_port_read(&core, 2) + (uint32_t)nb_streaming(&core);
  return (int)(nb_tx(&core, buf, sizeof buf) + word + nb_core_size() + nb_config_size());
}
