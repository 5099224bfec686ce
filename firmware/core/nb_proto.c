/* Link codec: CRC-16/IBM-3740, COBS, frame build and the streaming receiver.
 * Spec: firmware/PROTOCOL.md. */
#include "nb_proto.h"

#include <string.h>

uint16_t nb_crc16(const uint8_t* data, size_t len) {
  uint16_t crc = 0xFFFFu;
  for (size_t i = 0; i < len; i++) {
    crc ^= (uint16_t)(data[i] << 8);
    for (int b = 0; b < 8; b++) {
      crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
    }
  }
  return crc;
}

size_t nb_cobs_encode(const uint8_t* in, size_t len, uint8_t* out) {
  size_t code_at = 0; /* where the current block's code byte goes */
  size_t o = 1;
  uint8_t code = 1;
  for (size_t i = 0; i < len; i++) {
    if (in[i] != 0) {
      out[o++] = in[i];
      if (++code < 0xFF) {
        continue;
      }
      /* A full block of 254 data bytes has no implied zero; the canonical
       * encoding opens the next block only if more input follows. */
      out[code_at] = code;
      if (i + 1 == len) {
        return o;
      }
    } else {
      out[code_at] = code;
    }
    code_at = o++;
    code = 1;
  }
  out[code_at] = code;
  return o;
}

int nb_cobs_decode(const uint8_t* in, size_t len, uint8_t* out, size_t cap) {
  size_t i = 0;
  size_t o = 0;
  while (i < len) {
    uint8_t code = in[i++];
    if (code == 0 || i + (size_t)(code - 1) > len) {
      return -1;
    }
    for (uint8_t k = 1; k < code; k++) {
      if (in[i] == 0 || o >= cap) {
        return -1;
      }
      out[o++] = in[i++];
    }
    /* Every block but a full one (0xFF) and the last implies one zero. */
    if (code != 0xFF && i < len) {
      if (o >= cap) {
        return -1;
      }
      out[o++] = 0;
    }
  }
  return (int)o;
}

size_t nb_frame_encode(uint8_t type, uint8_t seq, const uint8_t* body, size_t body_len,
                       uint8_t* wire) {
  uint8_t frame[NB_MAX_FRAME];
  if (body_len > NB_MAX_BODY) {
    return 0;
  }
  frame[0] = type;
  frame[1] = seq;
  if (body_len) {
    memcpy(frame + 2, body, body_len);
  }
  nb_put16(frame + 2 + body_len, nb_crc16(frame, 2 + body_len));
  size_t n = nb_cobs_encode(frame, body_len + NB_FRAME_OVERHEAD, wire);
  wire[n] = 0x00;
  return n + 1;
}

void nb_deframer_reset(nb_deframer_t* d) {
  d->len = 0;
  d->overflow = 0;
}

int nb_deframer_push(nb_deframer_t* d, uint8_t byte, nb_msg_t* msg) {
  if (byte != 0x00) {
    if (d->len < NB_MAX_WIRE - 1u) {
      d->wire[d->len++] = byte;
    } else {
      d->overflow = 1; /* keep discarding until the delimiter */
    }
    return NB_PUSH_NONE;
  }
  uint16_t len = d->len;
  uint8_t overflow = d->overflow;
  nb_deframer_reset(d);
  if (overflow) {
    return NB_ERR_TOO_LONG;
  }
  if (len == 0) {
    return NB_PUSH_NONE; /* back-to-back delimiters: idle filler, not an error */
  }
  int n = nb_cobs_decode(d->wire, len, d->frame, sizeof d->frame);
  if (n < 0) {
    return NB_ERR_COBS;
  }
  if ((size_t)n < NB_FRAME_OVERHEAD) {
    return NB_ERR_TOO_SHORT;
  }
  size_t data_len = (size_t)n - 2u;
  if (nb_crc16(d->frame, data_len) != nb_get16(d->frame + data_len)) {
    return NB_ERR_CRC;
  }
  msg->type = d->frame[0];
  msg->seq = d->frame[1];
  msg->body_len = (uint8_t)(data_len - 2u);
  msg->body = d->frame + 2;
  return NB_OK;
}
