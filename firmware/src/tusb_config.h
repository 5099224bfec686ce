/* TinyUSB configuration: one CDC-ACM interface, device mode, full speed. The pico-sdk's
 * tinyusb_device target defines CFG_TUSB_MCU and CFG_TUSB_OS. */
#ifndef TUSB_CONFIG_H
#define TUSB_CONFIG_H

#define CFG_TUD_ENABLED 1
#define CFG_TUSB_RHPORT0_MODE OPT_MODE_DEVICE
#define CFG_TUD_ENDPOINT0_SIZE 64

#define CFG_TUD_CDC 1
#define CFG_TUD_MSC 0
#define CFG_TUD_HID 0
#define CFG_TUD_MIDI 0
#define CFG_TUD_VENDOR 0

/* Host->device traffic is small (SCHEDULE <= 130 bytes); device->host is ~43 bytes of
 * STATUS per frame plus replies: 1 KB covers several frames of a slow host. */
#define CFG_TUD_CDC_RX_BUFSIZE 256
#define CFG_TUD_CDC_TX_BUFSIZE 1024
#define CFG_TUD_CDC_EP_BUFSIZE 64

#endif
