/* USB descriptors: one CDC-ACM function (a serial port: /dev/ttyACM*, COMn) with an
 * interface association, so every OS binds its built-in CDC driver. */
#include <string.h>

#include "pico/stdlib.h"
#include "tusb.h"

/* pid.codes test VID/PID (0x1209/0x0001), for development only: give a distributed
 * build its own PID. Hosts find the port by name, not by these numbers. */
#define USB_VID 0x1209
#define USB_PID 0x0001
#define USB_BCD_DEVICE 0x0100

enum { ITF_CDC_NOTIF = 0, ITF_CDC_DATA, ITF_COUNT };
enum { EP_CDC_NOTIF = 0x81, EP_CDC_OUT = 0x02, EP_CDC_IN = 0x82 };
enum { STR_LANG = 0, STR_MANUFACTURER, STR_PRODUCT, STR_CDC };

static const tusb_desc_device_t device_desc = {
    .bLength = sizeof(tusb_desc_device_t),
    .bDescriptorType = TUSB_DESC_DEVICE,
    .bcdUSB = 0x0200,
    .bDeviceClass = TUSB_CLASS_MISC, /* interface association */
    .bDeviceSubClass = MISC_SUBCLASS_COMMON,
    .bDeviceProtocol = MISC_PROTOCOL_IAD,
    .bMaxPacketSize0 = CFG_TUD_ENDPOINT0_SIZE,
    .idVendor = USB_VID,
    .idProduct = USB_PID,
    .bcdDevice = USB_BCD_DEVICE,
    .iManufacturer = STR_MANUFACTURER,
    .iProduct = STR_PRODUCT,
    /* No serial number: the RP2040's only unique id is the flash chip's, read through
     * boot-ROM flash routines; without them the image runs on a ROM-less emulator
     * (firmware/emu). Hosts find the port by name. */
    .iSerialNumber = 0,
    .bNumConfigurations = 1,
};

#define CONFIG_LEN (TUD_CONFIG_DESC_LEN + TUD_CDC_DESC_LEN)

static const uint8_t config_desc[] = {
    TUD_CONFIG_DESCRIPTOR(1, ITF_COUNT, 0, CONFIG_LEN, 0x00, 100),
    TUD_CDC_DESCRIPTOR(ITF_CDC_NOTIF, STR_CDC, EP_CDC_NOTIF, 8, EP_CDC_OUT, EP_CDC_IN, 64),
};

const uint8_t* tud_descriptor_device_cb(void) { return (const uint8_t*)&device_desc; }

const uint8_t* tud_descriptor_configuration_cb(uint8_t index) {
  (void)index;
  return config_desc;
}

static const char* const strings[] = {
    [STR_MANUFACTURER] = "drmario-bridge",
    [STR_PRODUCT] = "Dr. Mario bridge controller",
    [STR_CDC] = "NES controller link",
};

const uint16_t* tud_descriptor_string_cb(uint8_t index, uint16_t langid) {
  static uint16_t out[1 + 32];
  const char* s;
  (void)langid;
  if (index == STR_LANG) {
    out[1] = 0x0409; /* English (US) */
    out[0] = (uint16_t)((TUSB_DESC_STRING << 8) | 4);
    return out;
  }
  if (index < sizeof strings / sizeof strings[0] && strings[index]) {
    s = strings[index];
  } else {
    return NULL;
  }
  size_t n = strlen(s);
  if (n > 32) {
    n = 32;
  }
  for (size_t i = 0; i < n; i++) {
    out[1 + i] = (uint8_t)s[i];
  }
  out[0] = (uint16_t)((TUSB_DESC_STRING << 8) | (2 * n + 2));
  return out;
}
