/* A guard around TinyUSB's RP2040 device driver for USB bus resets (firmware/README.md,
 * "USB bus reset").
 *
 * TinyUSB 0.18 (dcd_rp2040.c) clears its table of non-control endpoints in the bus-reset
 * interrupt (reset_non_control_endpoints), but a transfer-complete event from before the
 * reset may still be queued. tud_task() then hands it to the CDC driver, which starts the
 * next OUT read on the endpoint the reset closed (usbd_edpt_xfer has no "configured" check):
 * hw_endpoint_xfer_start goes through the cleared entry, whose buffer-control pointer is
 * NULL. Address 0 is the boot ROM's vector table, whose first word is the initial stack
 * pointer 0x20041F00 (pico-bootrom bootrom.ld: _stacktop = SRAM end - 256); bit 10 is set,
 * which TinyUSB reads as "buffer already AVAILABLE" and panics. The main loop stops, the PIO
 * keeps shifting the last buttons out, and the pad is released only when the loop watchdog
 * reboots the chip (LOOP_WATCHDOG_MS) instead of at once (nb_host_lost). A write flush that
 * the reset interrupt lands in does the same on the IN endpoint.
 *
 * Linked with -Wl,--wrap=dcd_edpt_xfer (CMakeLists.txt): usbd.c's calls come here. A
 * transfer on an endpoint other than 0 starts only while the controller has that endpoint
 * enabled (its DPRAM EP_CTRL ENABLE bit, which the reset clears and a SET_CONFIGURATION
 * sets again). Interrupts are off from the check to the start, so a reset cannot fall in
 * between. A refused transfer returns false, which TinyUSB handles as a failed start: the
 * endpoint is released, and usbd_reset() clears it when the reset event is processed. */
#include <stdbool.h>
#include <stdint.h>

#include "hardware/structs/usb.h"
#include "hardware/sync.h"

#define EP_CTRL_ENABLE (1u << 31) /* RP2040 datasheet 4.1.2.5.1, EPx_IN/OUT_CONTROL.ENABLE */

bool __real_dcd_edpt_xfer(uint8_t rhport, uint8_t ep_addr, uint8_t* buffer, uint16_t total_bytes);
bool __wrap_dcd_edpt_xfer(uint8_t rhport, uint8_t ep_addr, uint8_t* buffer, uint16_t total_bytes);

bool __wrap_dcd_edpt_xfer(uint8_t rhport, uint8_t ep_addr, uint8_t* buffer, uint16_t total_bytes) {
  uint8_t num = ep_addr & 0x7f;
  if (num == 0 || num >= USB_NUM_ENDPOINTS) {
    return __real_dcd_edpt_xfer(rhport, ep_addr, buffer, total_bytes);
  }
  uint32_t irq = save_and_disable_interrupts();
  uint32_t ctrl =
      (ep_addr & 0x80) ? usb_dpram->ep_ctrl[num - 1].in : usb_dpram->ep_ctrl[num - 1].out;
  bool started =
      (ctrl & EP_CTRL_ENABLE) && __real_dcd_edpt_xfer(rhport, ep_addr, buffer, total_bytes);
  restore_interrupts(irq);
  return started;
}
