/* A guard around TinyUSB's RP2040 device driver for USB bus resets (firmware/README.md,
 * "USB bus reset").
 *
 * TinyUSB 0.18 (dcd_rp2040.c) zeroes the endpoint control words and clears its table of
 * non-control endpoints in the bus-reset interrupt (reset_non_control_endpoints), but a
 * transfer-complete event from before the reset may still be queued, and the stack's own
 * "configured" state is cleared only later, when tud_task() reaches the reset event. Until
 * then a new transfer on such an endpoint goes through the cleared entry, whose control and
 * buffer-control pointers are NULL: the CDC driver's next OUT read (from that queued event,
 * or tud_cdc_read), or a write flush from the main loop. hw_endpoint_start_next_buffer then
 * writes its control word to address 0, the boot ROM, and reads the buffer control there:
 * the ROM's first word is the initial stack pointer 0x20041F00 (pico-bootrom bootrom.ld:
 * _stacktop = SRAM end - 256), whose bit 10 TinyUSB takes as "buffer already AVAILABLE" and
 * panics (or the write to ROM faults first). Either way the main loop stops, the PIO keeps
 * shifting the last buttons out, and the pad is released only when the loop watchdog reboots
 * the chip (LOOP_WATCHDOG_MS) instead of at once (nb_host_lost).
 *
 * Linked with -Wl,--wrap=dcd_edpt_xfer (CMakeLists.txt): usbd.c's calls come here. A
 * transfer on an endpoint other than 0 starts only while that endpoint's control word in
 * DPRAM has ENABLE set (TinyUSB's reset handler zeroes it; dcd_edpt_open sets it again after
 * the next SET_CONFIGURATION; recheck both on a TinyUSB upgrade). Only the USB interrupt is
 * masked from the check to the start, so the reset handler cannot run in between while the
 * latch interrupt (nes_port.c) is never delayed. A refused transfer returns false, which
 * TinyUSB handles as a failed start: busy and claimed are cleared (usbd_edpt_xfer). */
#include <stdbool.h>
#include <stdint.h>

#include "hardware/irq.h"
#include "hardware/structs/usb.h"
#include "hardware/sync.h"

#define EP_CTRL_ENABLE (1u << 31) /* EPx_IN/OUT_CONTROL.ENABLE (RP2040 datasheet 4.1.2.5.1) */

bool __real_dcd_edpt_xfer(uint8_t rhport, uint8_t ep_addr, uint8_t* buffer, uint16_t total_bytes);
bool __wrap_dcd_edpt_xfer(uint8_t rhport, uint8_t ep_addr, uint8_t* buffer, uint16_t total_bytes);

bool __wrap_dcd_edpt_xfer(uint8_t rhport, uint8_t ep_addr, uint8_t* buffer, uint16_t total_bytes) {
  uint8_t num = ep_addr & 0x7f;
  if (num == 0 || num >= USB_NUM_ENDPOINTS) {
    return __real_dcd_edpt_xfer(rhport, ep_addr, buffer, total_bytes);
  }
  bool usb_irq = irq_is_enabled(USBCTRL_IRQ);
  irq_set_enabled(USBCTRL_IRQ, false);
  __dsb(); /* the NVIC write has taken effect before the check */
  __isb();
  uint32_t ctrl =
      (ep_addr & 0x80) ? usb_dpram->ep_ctrl[num - 1].in : usb_dpram->ep_ctrl[num - 1].out;
  bool started =
      (ctrl & EP_CTRL_ENABLE) && __real_dcd_edpt_xfer(rhport, ep_addr, buffer, total_bytes);
  if (usb_irq) {
    irq_set_enabled(USBCTRL_IRQ, true);
  }
  return started;
}
