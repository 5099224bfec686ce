/* Link codec for the Dr. Mario bridge controller: COBS framing, CRC-16, message
 * type and error numbers. Reference: firmware/PROTOCOL.md (this file implements
 * it; the byte-level vectors in firmware/protocol_vectors.json are checked by
 * firmware/tests/test_core.c and tests/test_protocol_vectors.py).
 *
 * Plain C99, no SDK includes: built for the RP2040 and for the host alike. */
#ifndef NB_PROTO_H
#define NB_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NB_PROTO_VERSION 2u

/* Sizes in bytes. A decoded frame is type, seq, body, CRC (PROTOCOL.md "Frame"). */
#define NB_FRAME_OVERHEAD 4u
#define NB_MAX_FRAME 128u
#define NB_MAX_BODY (NB_MAX_FRAME - NB_FRAME_OVERHEAD)
/* COBS adds one byte per started run of 254 bytes; plus the 0x00 delimiter. */
#define NB_MAX_WIRE (NB_MAX_FRAME + (NB_MAX_FRAME + 253u) / 254u + 1u)
#define NB_MAX_MASKS 64u /* masks in one SCHEDULE */

/* Message types. Host to device below 0x80, device to host from 0x80. */
enum nb_type {
  NB_HELLO = 0x01,
  NB_SCHEDULE = 0x02,
  NB_CLEAR = 0x03,
  NB_CONFIG = 0x04,
  NB_PING = 0x05,
  NB_INFO = 0x06,
  NB_HELLO_ACK = 0x81,
  NB_ACK = 0x82,
  NB_NACK = 0x83,
  NB_STATUS = 0x84,
  NB_PONG = 0x85,
  NB_INFO_ACK = 0x86,
};

/* Body sizes in bytes (SCHEDULE: header only; its masks follow). */
enum nb_body_len {
  NB_HELLO_LEN = 2,
  NB_SCHEDULE_HDR_LEN = 6, /* port u8, first_frame u32, count u8 */
  NB_CLEAR_LEN = 1,        /* port u8 (0: every port) */
  NB_CONFIG_LEN = 8,
  NB_PING_LEN = 4,
  NB_HELLO_ACK_LEN = 20,
  NB_ACK_LEN = 5,
  NB_NACK_LEN = 3,
  NB_STATUS_LEN = 48,
  NB_PONG_LEN = 12,
  NB_INFO_LEN = 0,
  NB_INFO_ACK_LEN = 48,
};

/* Error codes, as sent in NACK and STATUS.last_error (PROTOCOL.md "Errors"). */
enum nb_err {
  NB_OK = 0,
  NB_ERR_CRC = 1,
  NB_ERR_COBS = 2,
  NB_ERR_TOO_LONG = 3,
  NB_ERR_TOO_SHORT = 4,
  NB_ERR_UNKNOWN_TYPE = 5,
  NB_ERR_LENGTH = 6,
  NB_ERR_VERSION = 7,
  NB_ERR_NO_SESSION = 8,
  NB_ERR_RANGE = 9,
  NB_ERR_REPLAY = 10,     /* a host seq not after the session's last one: not acted on */
  NB_ERR_TAKEN_OVER = 11, /* a HELLO ended an open session (another host took over) */
};

/* CRC-16/IBM-3740 (alias CRC-16/CCITT-FALSE): poly 0x1021, init 0xFFFF, no
 * reflection, xorout 0; check value over "123456789" is 0x29B1. */
uint16_t nb_crc16(const uint8_t* data, size_t len);

/* COBS (Cheshire & Baker 1999) without the trailing delimiter. out needs
 * len + len/254 + 1 bytes. Returns the encoded length. */
size_t nb_cobs_encode(const uint8_t* in, size_t len, uint8_t* out);

/* Decodes one COBS block (no 0x00 inside). Returns the decoded length, or -1
 * when a code byte runs past the end, a 0x00 is found, or cap is exceeded. */
int nb_cobs_decode(const uint8_t* in, size_t len, uint8_t* out, size_t cap);

/* Builds a complete wire frame: COBS(type, seq, body, CRC LE) followed by 0x00.
 * wire needs NB_MAX_WIRE bytes. Returns its length, 0 if body_len > NB_MAX_BODY. */
size_t nb_frame_encode(uint8_t type, uint8_t seq, const uint8_t* body, size_t body_len,
                       uint8_t* wire);

/* One received message; body points into the deframer and is valid until the
 * next nb_deframer_push. */
typedef struct {
  uint8_t type;
  uint8_t seq;
  uint8_t body_len;
  const uint8_t* body;
} nb_msg_t;

/* Streaming receiver: bytes in, CRC-checked frames out. Resynchronises on the
 * next 0x00 after any error. */
typedef struct {
  uint8_t wire[NB_MAX_WIRE];
  uint8_t frame[NB_MAX_FRAME];
  uint16_t len;
  uint8_t overflow;
} nb_deframer_t;

#define NB_PUSH_NONE (-1) /* no frame ended with this byte */

void nb_deframer_reset(nb_deframer_t* d);

/* Feeds one byte. Returns NB_PUSH_NONE, NB_OK with *msg filled (CRC valid),
 * or an nb_err code for a frame that ended with this byte and was dropped. */
int nb_deframer_push(nb_deframer_t* d, uint8_t byte, nb_msg_t* msg);

/* Little-endian field helpers (PROTOCOL.md: every integer is little-endian). */
static inline void nb_put16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static inline void nb_put32(uint8_t* p, uint32_t v) {
  nb_put16(p, (uint16_t)v);
  nb_put16(p + 2, (uint16_t)(v >> 16));
}
static inline void nb_put64(uint8_t* p, uint64_t v) {
  nb_put32(p, (uint32_t)v);
  nb_put32(p + 4, (uint32_t)(v >> 32));
}
static inline uint16_t nb_get16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t nb_get32(const uint8_t* p) {
  return (uint32_t)nb_get16(p) | ((uint32_t)nb_get16(p + 2) << 16);
}
static inline uint64_t nb_get64(const uint8_t* p) {
  return (uint64_t)nb_get32(p) | ((uint64_t)nb_get32(p + 4) << 32);
}

#ifdef __cplusplus
}
#endif

#endif /* NB_PROTO_H */
