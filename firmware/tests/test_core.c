/* Host unit tests of the firmware core (firmware/core): the link codec against
 * firmware/protocol_vectors.json, the frame queue, latch grouping, watchdog,
 * and a bounded random fuzz of the receiver.
 *
 * Build and run: bash firmware/ci.sh (or see it for the cc line).
 * Usage: test_core PATH/TO/protocol_vectors.json [fuzz_iterations]
 * The core's .c file is included so the tests can drive its static encoders. */
#include <stdio.h>
#include <stdlib.h>

#include "../core/nb_core.c"

static int g_pass, g_fail;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (cond) {                                                       \
      g_pass++;                                                       \
    } else {                                                          \
      g_fail++;                                                       \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fputc('\n', stderr);                                            \
    }                                                                 \
  } while (0)

/* ---- a reader for protocol_vectors.json's shape ----------------------------
 * Top level: an object whose values are numbers, strings or arrays of flat
 * objects (string or integer values only). That is all the file uses. */

#define MAX_FIELDS 24
typedef struct {
  char key[MAX_FIELDS][32];
  char val[MAX_FIELDS][640];
  int n;
} item_t;

static const char* skip_ws(const char* p) {
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || *p == ',') {
    p++;
  }
  return p;
}

static const char* read_string(const char* p, char* out, size_t cap) {
  size_t n = 0;
  if (*p != '"') {
    return NULL;
  }
  for (p++; *p && *p != '"'; p++) {
    if (*p == '\\') {
      p++; /* the file escapes nothing but quotes; keep the escaped char */
    }
    if (n + 1 < cap) {
      out[n++] = *p;
    }
  }
  out[n] = 0;
  return *p == '"' ? p + 1 : NULL;
}

/* Returns a pointer just after '[' of top-level array `name`, or NULL. */
static const char* find_array(const char* json, const char* name) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", name);
  const char* p = strstr(json, pat);
  if (!p) {
    return NULL;
  }
  p = skip_ws(p + strlen(pat));
  return *p == '[' ? p + 1 : NULL;
}

/* Parses the next flat object; returns the position after it, NULL at ']'. */
static const char* next_item(const char* p, item_t* it) {
  p = skip_ws(p);
  if (*p != '{') {
    return NULL;
  }
  p++;
  it->n = 0;
  for (;;) {
    p = skip_ws(p);
    if (*p == '}') {
      return p + 1;
    }
    if (it->n == MAX_FIELDS || !(p = read_string(p, it->key[it->n], 32))) {
      return NULL;
    }
    p = skip_ws(p);
    if (*p++ != ':') {
      return NULL;
    }
    p = skip_ws(p);
    if (*p == '"') {
      p = read_string(p, it->val[it->n], 640);
    } else {
      size_t n = 0;
      while (*p && *p != ',' && *p != '}' && n + 1 < 640) {
        it->val[it->n][n++] = *p++;
      }
      it->val[it->n][n] = 0;
    }
    if (!p) {
      return NULL;
    }
    it->n++;
  }
}

static const char* field(const item_t* it, const char* key) {
  for (int i = 0; i < it->n; i++) {
    if (strcmp(it->key[i], key) == 0) {
      return it->val[i];
    }
  }
  fprintf(stderr, "vector lacks field %s\n", key);
  exit(2);
}

static uint64_t num(const item_t* it, const char* key) {
  const char* v = field(it, key);
  if (strcmp(v, "true") == 0) {
    return 1;
  }
  if (strcmp(v, "false") == 0) {
    return 0;
  }
  return strtoull(v, NULL, 10);
}

static size_t hex(const item_t* it, const char* key, uint8_t* out, size_t cap) {
  const char* v = field(it, key);
  size_t n = strlen(v) / 2;
  if (n > cap) {
    fprintf(stderr, "hex field %s too long\n", key);
    exit(2);
  }
  for (size_t i = 0; i < n; i++) {
    unsigned b;
    sscanf(v + 2 * i, "%2x", &b);
    out[i] = (uint8_t)b;
  }
  return n;
}

static int err_code(const char* name) {
  static const char* names[] = {"OK",           "ERR_CRC",       "ERR_COBS",
                                "ERR_TOO_LONG", "ERR_TOO_SHORT", "ERR_UNKNOWN_TYPE",
                                "ERR_LENGTH",   "ERR_VERSION",   "ERR_NO_SESSION",
                                "ERR_RANGE",    "ERR_REPLAY",    "ERR_TAKEN_OVER"};
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
    if (strcmp(names[i], name) == 0) {
      return i;
    }
  }
  fprintf(stderr, "unknown error name %s\n", name);
  exit(2);
}

static char* slurp(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = malloc((size_t)n + 1);
  if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    exit(2);
  }
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* ---- helpers ------------------------------------------------------------ */

/* Decodes every message the core has queued for the host. */
typedef struct {
  int n;
  uint8_t type[64];
  uint8_t seq[64];
  uint8_t len[64];
  uint8_t body[64][NB_MAX_BODY];
} replies_t;

static void drain(nb_core_t* c, replies_t* r) {
  static nb_deframer_t d;
  uint8_t buf[NB_TX_BUF];
  uint32_t n = nb_tx(c, buf, sizeof buf);
  nb_deframer_reset(&d);
  r->n = 0;
  for (uint32_t i = 0; i < n; i++) {
    nb_msg_t m;
    int res = nb_deframer_push(&d, buf[i], &m);
    if (res == NB_OK && r->n < 64) {
      r->type[r->n] = m.type;
      r->seq[r->n] = m.seq;
      r->len[r->n] = m.body_len;
      memcpy(r->body[r->n], m.body, m.body_len);
      r->n++;
    } else if (res != NB_PUSH_NONE) {
      fprintf(stderr, "core sent a bad frame (error %d)\n", res);
      g_fail++;
    }
  }
}

static void send(nb_core_t* c, uint8_t type, uint8_t seq, const uint8_t* body, size_t len,
                 uint64_t now) {
  uint8_t wire[NB_MAX_WIRE];
  size_t n = nb_frame_encode(type, seq, body, len, wire);
  nb_rx(c, wire, (uint32_t)n, now);
}

/* HELLO with seq hello_seq: the session's next host message must have a later seq. */
static void open_session_seq(nb_core_t* c, uint64_t now, uint8_t hello_seq) {
  uint8_t b[2];
  replies_t r;
  nb_put16(b, NB_PROTO_VERSION);
  send(c, NB_HELLO, hello_seq, b, 2, now);
  drain(c, &r);
}

static void open_session(nb_core_t* c, uint64_t now) { open_session_seq(c, now, 0); }

/* A fresh core whose frame 0 is armed and whose session is open at t = 0. */
static void start_session(nb_core_t* c) {
  uint32_t word;
  nb_init(c, NULL);
  nb_poll(c, 0, &word);
  open_session(c, 0);
}

static void schedule_port(nb_core_t* c, uint8_t port, uint32_t first, const uint8_t* masks,
                          uint8_t n, uint64_t now) {
  uint8_t b[NB_SCHEDULE_HDR_LEN + NB_MAX_MASKS];
  b[0] = port;
  nb_put32(b + 1, first);
  b[5] = n;
  memcpy(b + NB_SCHEDULE_HDR_LEN, masks, n);
  send(c, NB_SCHEDULE, (uint8_t)(c->host_seq + 1u), b, NB_SCHEDULE_HDR_LEN + n,
       now); /* the next seq */
}

static void schedule(nb_core_t* c, uint32_t first, const uint8_t* masks, uint8_t n, uint64_t now) {
  schedule_port(c, 1, first, masks, n, now);
}

static void clear_port(nb_core_t* c, uint8_t port, uint64_t now) {
  send(c, NB_CLEAR, (uint8_t)(c->host_seq + 1u), &port, 1, now);
}

/* One NTSC console frame: two reads 120 us apart, as Dr. Mario's NMI does.
 * Polls like the main loop: before the frame, and after the window. */
#define FRAME_US 16639u
static uint8_t console_frame(nb_core_t* c, uint64_t t, uint32_t* pushes) {
  uint32_t word;
  if (nb_poll(c, t, &word)) {
    (*pushes)++;
  }
  uint8_t a = nb_latch(c, t);
  uint8_t b = nb_latch(c, t + 120);
  CHECK(a == b, "both reads of a frame get one byte (%02x vs %02x)", a, b);
  if (nb_poll(c, t + c->cfg.window_us, &word)) {
    (*pushes)++;
    CHECK(word == nb_pio_word(c->port[0].armed_mask), "pushed word matches the armed mask");
  }
  return a;
}

/* console_frame for both ports: returns port 1's byte, *p2 gets port 2's (both reads
 * equal on each port), and checks the words handed to the two state machines. */
static uint8_t console_frame2(nb_core_t* c, uint64_t t, uint32_t* pushes, uint8_t* p2) {
  uint32_t word;
  if (nb_poll(c, t, &word)) {
    (*pushes)++;
  }
  uint8_t a = nb_latch(c, t);
  uint8_t a2 = nb_port_read(c, 2);
  uint8_t b = nb_latch(c, t + 120);
  uint8_t b2 = nb_port_read(c, 2);
  CHECK(a == b && a2 == b2, "each port gets one byte per frame (%02x %02x, %02x %02x)", a, b, a2,
        b2);
  CHECK(a == nb_port_read(c, 1), "nb_latch returns port 1's byte");
  if (nb_poll(c, t + c->cfg.window_us, &word)) {
    (*pushes)++;
    CHECK(word == nb_pio_word(c->port[0].armed_mask) && word == nb_port_word(c, 1) &&
              nb_port_word(c, 2) == nb_pio_word(c->port[1].armed_mask),
          "pushed words match the armed masks");
  }
  *p2 = a2;
  return a;
}

static uint32_t status_frame(const replies_t* r, int i) { return nb_get32(r->body[i]); }

/* ---- tests -------------------------------------------------------------- */

static void test_crc_cobs(const char* json) {
  item_t it;
  const char* p = find_array(json, "crc16");
  CHECK(p != NULL, "crc16 vectors present");
  int n = 0;
  while (p && (p = next_item(p, &it))) {
    uint8_t d[256];
    size_t len = hex(&it, "data", d, sizeof d);
    CHECK(nb_crc16(d, len) == num(&it, "crc"), "crc of %s", field(&it, "data"));
    n++;
  }
  CHECK(n >= 2, "read %d crc vectors", n);

  p = find_array(json, "cobs");
  n = 0;
  while (p && (p = next_item(p, &it))) {
    uint8_t dec[300], enc[300], out[300];
    size_t dl = hex(&it, "decoded", dec, sizeof dec);
    size_t el = hex(&it, "encoded", enc, sizeof enc);
    size_t ol = nb_cobs_encode(dec, dl, out);
    CHECK(ol == el && memcmp(out, enc, el) == 0, "cobs encode vector %d", n);
    int r = nb_cobs_decode(enc, el, out, sizeof out);
    CHECK(r == (int)dl && memcmp(out, dec, dl) == 0, "cobs decode vector %d", n);
    n++;
  }
  CHECK(n >= 10, "read %d cobs vectors", n);
}

static const struct {
  const char* name;
  uint8_t type;
} k_types[] = {{"HELLO", NB_HELLO},   {"SCHEDULE", NB_SCHEDULE}, {"CLEAR", NB_CLEAR},
               {"CONFIG", NB_CONFIG}, {"PING", NB_PING},         {"HELLO_ACK", NB_HELLO_ACK},
               {"ACK", NB_ACK},       {"NACK", NB_NACK},         {"STATUS", NB_STATUS},
               {"PONG", NB_PONG},     {"INFO", NB_INFO},         {"INFO_ACK", NB_INFO_ACK}};

static uint8_t type_code(const char* name) {
  for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
    if (strcmp(k_types[i].name, name) == 0) {
      return k_types[i].type;
    }
  }
  fprintf(stderr, "unknown type %s\n", name);
  exit(2);
}

/* Makes the core itself produce the device message a vector describes. */
static size_t core_encode(const item_t* it, uint8_t type, uint8_t seq, uint8_t* out) {
  static nb_core_t c;
  nb_init(&c, NULL);
  nb_tx(&c, out, NB_TX_BUF);
  c.tx_seq = seq;
  nb_msg_t m = {0, 0, 0, NULL};
  switch (type) {
    case NB_HELLO_ACK: {
      uint8_t b[2];
      nb_put16(b, (uint16_t)num(it, "version"));
      c.cfg.window_us = (uint32_t)num(it, "window_us");
      c.cfg.watchdog_ms = (uint32_t)num(it, "watchdog_ms");
      c.cfg.boot_count = (uint32_t)num(it, "boot_count");
      c.cfg.reset_reason = (uint32_t)num(it, "reset_reason");
      m.type = NB_HELLO;
      m.body = b;
      m.body_len = 2;
      on_hello(&c, &m);
      CHECK(c.session == (num(it, "flags") & 1u), "session flag");
      CHECK((num(it, "flags") >> NB_HELLO_PORTS_SHIFT) == NB_PORTS_ALL, "both ports driven");
      break;
    }
    case NB_ACK:
      m.type = (uint8_t)num(it, "acked_type");
      m.seq = (uint8_t)num(it, "acked_seq");
      ack(&c, &m, (uint8_t)num(it, "accepted"), (uint8_t)num(it, "late"),
          (uint8_t)num(it, "too_far"));
      break;
    case NB_NACK:
      m.type = (uint8_t)num(it, "rejected_type");
      m.seq = (uint8_t)num(it, "rejected_seq");
      nack(&c, &m, (uint8_t)num(it, "error"));
      break;
    case NB_STATUS:
      c.port[1].mask = (uint8_t)num(it, "mask_p2");
      c.port[1].flags = (uint8_t)num(it, "flags_p2");
      c.port[1].queue_depth = (uint16_t)num(it, "queue_depth_p2");
      c.port[1].underruns = (uint32_t)num(it, "underruns_p2");
      c.port[1].late_schedules = (uint32_t)num(it, "late_schedules_p2");
      c.frame = (uint32_t)num(it, "frame");
      c.first_latch_us = num(it, "first_latch_us");
      c.latches = (uint8_t)num(it, "latches");
      c.port[0].mask = (uint8_t)num(it, "mask");
      c.port[0].flags = (uint8_t)num(it, "flags");
      c.n.last_error = (uint8_t)num(it, "last_error");
      c.port[0].queue_depth = (uint16_t)num(it, "queue_depth");
      c.n.watchdog_trips = (uint16_t)num(it, "watchdog_trips");
      c.port[0].underruns = (uint32_t)num(it, "underruns");
      c.port[0].late_schedules = (uint32_t)num(it, "late_schedules");
      c.n.protocol_errors = (uint32_t)num(it, "protocol_errors");
      c.n.arm_misses = (uint16_t)num(it, "arm_misses");
      c.n.tx_drops = (uint16_t)num(it, "tx_drops");
      send_status(&c);
      break;
    case NB_PONG: {
      uint8_t b[4];
      nb_put32(b, (uint32_t)num(it, "token"));
      m.type = NB_PING;
      m.body = b;
      m.body_len = 4;
      on_message(&c, &m, num(it, "device_us"));
      break;
    }
    case NB_INFO_ACK: {
      char board[17] = {0};
      uint8_t raw[16];
      hex(it, "board_raw", raw, sizeof raw);
      memcpy(board, raw, 16);
      nb_set_identity(&c, (uint8_t)num(it, "version_major"), (uint8_t)num(it, "version_minor"),
                      (uint8_t)num(it, "version_patch"), board);
      c.cfg.reset_reason = (uint32_t)num(it, "reset_reason");
      c.cfg.boot_count = (uint32_t)num(it, "boot_count");
      c.n.latches = (uint32_t)num(it, "latches");
      c.n.latches_lost = (uint32_t)num(it, "latches_lost");
      c.n.host_losses = (uint16_t)num(it, "host_losses");
      c.n.replays = (uint16_t)num(it, "replays");
      c.n.takeovers = (uint16_t)num(it, "takeovers");
      nb_set_ports(&c, (uint8_t)num(it, "port_bits"));
      m.type = NB_INFO;
      on_message(&c, &m, num(it, "device_us"));
      break;
    }
    default:
      return 0;
  }
  return nb_tx(&c, out, NB_TX_BUF);
}

/* Feeds a host message vector to a core in session; checks what it did. */
static void check_host_effect(const item_t* it, uint8_t type, const uint8_t* wire, size_t wl) {
  static nb_core_t c;
  replies_t r;
  nb_init(&c, NULL);
  if (type != NB_HELLO) {
    open_session_seq(&c, 10, (uint8_t)(num(it, "seq") - 1u)); /* the vector's seq is next */
  }
  if (type == NB_SCHEDULE) {
    c.armed_frame = (uint32_t)num(it, "first_frame") - 1u; /* console just before it */
  }
  nb_rx(&c, wire, (uint32_t)wl, 1000);
  drain(&c, &r);
  CHECK(r.n == 1, "one reply to %s, got %d", field(it, "name"), r.n);
  CHECK(c.n.protocol_errors == 0, "no protocol error for %s", field(it, "name"));
  if (r.n != 1) {
    return;
  }
  uint8_t masks[NB_MAX_MASKS];
  switch (type) {
    case NB_HELLO:
      CHECK(r.type[0] == NB_HELLO_ACK && c.session, "hello opens a session");
      break;
    case NB_SCHEDULE: {
      size_t n = hex(it, "masks", masks, sizeof masks);
      uint32_t first = (uint32_t)num(it, "first_frame");
      unsigned port = (unsigned)num(it, "port");
      const nb_port_t* p = &c.port[port - 1u];
      CHECK(r.type[0] == NB_ACK && r.body[0][2] == n, "schedule acked with %zu accepted", n);
      CHECK(p->queue_depth == n && c.port[2u - port].queue_depth == 0,
            "queue depth %u on port %u only", p->queue_depth, port);
      for (size_t i = 0; i < n; i++) {
        const nb_slot_t* s = &p->queue[(first + i) & QMASK];
        CHECK(s->valid && s->frame == first + i && s->mask == masks[i], "slot %zu", i);
      }
      break;
    }
    case NB_CONFIG:
      CHECK(r.type[0] == NB_ACK && c.cfg.window_us == num(it, "window_us") &&
                c.cfg.watchdog_ms == num(it, "watchdog_ms"),
            "config applied");
      break;
    case NB_PING:
      CHECK(r.type[0] == NB_PONG && nb_get32(r.body[0]) == num(it, "token") &&
                nb_get64(r.body[0] + 4) == 1000,
            "pong echoes the token and the device time");
      break;
    case NB_CLEAR:
      CHECK(r.type[0] == NB_ACK && r.body[0][0] == NB_CLEAR, "clear acked");
      break;
    case NB_INFO:
      CHECK(r.type[0] == NB_INFO_ACK && r.len[0] == NB_INFO_ACK_LEN &&
                nb_get64(r.body[0] + 8) == 1000,
            "info answered with the device time");
      break;
    default:
      break;
  }
  if (type != NB_HELLO && type != NB_INFO) {
    CHECK(r.body[0][1] == num(it, "seq") || r.type[0] == NB_PONG, "reply echoes seq");
  }
}

static void test_messages(const char* json) {
  item_t it;
  const char* p = find_array(json, "messages");
  int n = 0;
  while (p && (p = next_item(p, &it))) {
    uint8_t frame[NB_MAX_FRAME], wire[NB_MAX_WIRE], out[NB_TX_BUF];
    size_t fl = hex(&it, "decoded", frame, sizeof frame);
    size_t wl = hex(&it, "wire", wire, sizeof wire);
    uint8_t type = type_code(field(&it, "type"));
    uint8_t seq = (uint8_t)num(&it, "seq");
    const char* name = field(&it, "name");

    size_t ol = nb_frame_encode(type, seq, frame + 2, fl - 4, out);
    CHECK(ol == wl && memcmp(out, wire, wl) == 0, "frame encode: %s", name);

    nb_deframer_t d;
    nb_msg_t m;
    int res = NB_PUSH_NONE;
    nb_deframer_reset(&d);
    for (size_t i = 0; i < wl; i++) {
      res = nb_deframer_push(&d, wire[i], &m);
      if (i + 1 < wl) {
        CHECK(res == NB_PUSH_NONE, "no frame before the delimiter: %s", name);
      }
    }
    CHECK(res == NB_OK && m.type == type && m.seq == seq && m.body_len == fl - 4 &&
              memcmp(m.body, frame + 2, fl - 4) == 0,
          "deframe: %s", name);

    if (type & 0x80) {
      ol = core_encode(&it, type, seq, out);
      CHECK(ol == wl && memcmp(out, wire, wl) == 0, "core encodes %s", name);
    } else {
      check_host_effect(&it, type, wire, wl);
    }
    n++;
  }
  CHECK(n >= 10, "read %d message vectors", n);
}

static void test_invalid(const char* json) {
  item_t it;
  const char* p = find_array(json, "invalid");
  int n = 0;
  while (p && (p = next_item(p, &it))) {
    static nb_core_t c;
    uint8_t wire[512], out[NB_TX_BUF];
    size_t wl = hex(&it, "wire", wire, sizeof wire);
    int code = err_code(field(&it, "error"));
    nb_init(&c, NULL);
    open_session(&c, 0);
    nb_rx(&c, wire, (uint32_t)wl, 5);
    CHECK(c.n.protocol_errors == 1 && c.n.last_error == code, "%s: errors %u last %u",
          field(&it, "name"), c.n.protocol_errors, c.n.last_error);
    CHECK(nb_tx(&c, out, sizeof out) == 0, "%s: nothing answered", field(&it, "name"));
    CHECK(c.last_host_us == 0, "%s: not taken as a sign of life", field(&it, "name"));
    /* The receiver resynchronised: a valid frame right after is acted on. */
    uint8_t tok[4] = {1, 2, 3, 4};
    send(&c, NB_PING, 3, tok, 4, 6);
    replies_t r;
    drain(&c, &r);
    CHECK(r.n == 1 && r.type[0] == NB_PONG, "%s: resync", field(&it, "name"));
    n++;
  }
  CHECK(n >= 5, "read %d invalid vectors", n);

  p = find_array(json, "nack");
  n = 0;
  while (p && (p = next_item(p, &it))) {
    static nb_core_t c;
    uint8_t wire[NB_MAX_WIRE];
    size_t wl = hex(&it, "wire", wire, sizeof wire);
    replies_t r;
    nb_init(&c, NULL);
    if (num(&it, "session")) {
      open_session_seq(&c, 0, (uint8_t)(num(&it, "rejected_seq") - 1u));
    }
    nb_rx(&c, wire, (uint32_t)wl, 5);
    drain(&c, &r);
    CHECK(r.n == 1 && r.type[0] == NB_NACK && r.body[0][0] == num(&it, "rejected_type") &&
              r.body[0][1] == num(&it, "rejected_seq") &&
              r.body[0][2] == err_code(field(&it, "error")),
          "nack: %s", field(&it, "name"));
    CHECK(c.port[0].queue_depth == 0 && c.port[1].queue_depth == 0 && !nb_streaming(&c),
          "nack: %s changed nothing", field(&it, "name"));
    n++;
  }
  CHECK(n >= 5, "read %d nack vectors", n);
}

static void test_version_mismatch(void) {
  static nb_core_t c;
  replies_t r;
  uint8_t b[2];
  nb_init(&c, NULL);
  nb_put16(b, NB_PROTO_VERSION + 1);
  send(&c, NB_HELLO, 0, b, 2, 1);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_HELLO_ACK && !(r.body[0][2] & NB_HELLO_SESSION) &&
            nb_get16(r.body[0]) == NB_PROTO_VERSION,
        "mismatched HELLO answered with our version and a closed session");
  CHECK(!c.session && c.n.last_error == NB_ERR_VERSION, "version error counted");
  uint8_t m = 0x80;
  schedule(&c, 5, &m, 1, 2);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_NACK && r.body[0][2] == NB_ERR_NO_SESSION,
        "no schedule without a session");
}

/* Scheduled masks come out on their frames, both reads; underrun after. */
static void test_queue_and_grouping(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0, word = 0;
  nb_init(&c, NULL);
  CHECK(nb_poll(&c, 0, &word) && word == nb_pio_word(0), "first poll arms no buttons");
  CHECK(!nb_poll(&c, 1, &word), "nothing more to push");
  open_session(&c, 1);

  const uint8_t masks[8] = {0x80, 0x40, 0x20, 0x10, 0x08, 0x04, 0x02, 0x01};
  schedule(&c, 1, masks, 8, 2);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_ACK && r.body[0][2] == 8, "8 frames accepted");
  CHECK(c.port[0].queue_depth == 8 && c.port[0].streaming, "queue depth 8");

  uint64_t t = 100000;
  CHECK(console_frame(&c, t, &pushes) == 0, "frame 0 has no buttons");
  for (int f = 1; f <= 8; f++) {
    t += FRAME_US;
    uint8_t got = console_frame(&c, t, &pushes);
    CHECK(got == masks[f - 1], "frame %d reads %02x, want %02x", f, got, masks[f - 1]);
  }
  drain(&c, &r);
  CHECK(r.n == 9, "a status for each of 9 frames, got %d", r.n);
  for (int i = 0; i < r.n; i++) {
    CHECK(r.type[i] == NB_STATUS && status_frame(&r, i) == (uint32_t)i, "status %d", i);
    CHECK(r.body[i][12] == 2, "status %d: 2 latches", i);
    CHECK(nb_get64(r.body[i] + 4) == 100000 + (uint64_t)i * FRAME_US, "status %d: first-latch time",
          i);
    CHECK(r.body[i][13] == (i ? masks[i - 1] : 0), "status %d: mask served", i);
    CHECK(i == 0 || (r.body[i][14] & NB_FLAG_FROM_QUEUE), "status %d: from queue", i);
    /* STATUS goes out at the window's close, before the next frame is armed. */
    CHECK(nb_get16(r.body[i] + 16) == 8 - i, "status %d: queue depth %u", i,
          nb_get16(r.body[i] + 16));
  }
  CHECK(c.port[0].underruns == 1 && (c.port[0].armed_flags & NB_FLAG_UNDERRUN),
        "frame 9 armed as an underrun (counted on arming)");
  t += FRAME_US;
  CHECK(console_frame(&c, t, &pushes) == 0, "underrun reads no buttons");
  CHECK(c.port[0].underruns == 2, "underruns counted per frame: %u", c.port[0].underruns);
  CHECK(pushes == 10, "one PIO word per frame: %u", pushes);
  drain(&c, &r);
  CHECK(r.n == 1 && (r.body[0][14] & NB_FLAG_UNDERRUN) && nb_get32(r.body[0] + 20) == 1,
        "status shows the underrun");

  /* CLEAR ends the stream: no buttons without counting underruns. */
  clear_port(&c, 1, t);
  drain(&c, &r);
  t += FRAME_US;
  console_frame(&c, t, &pushes);
  t += FRAME_US;
  console_frame(&c, t, &pushes);
  CHECK(c.port[0].underruns == 2 && !c.port[0].streaming, "idle frames are not underruns");

  /* A stream that starts later: the frames before its first mask are idle. */
  uint32_t start = c.frame + 4;
  uint8_t one = 0x08;
  schedule(&c, start, &one, 1, t);
  drain(&c, &r);
  while (c.frame < start + 1) {
    t += FRAME_US;
    uint8_t got = console_frame(&c, t, &pushes);
    CHECK(got == (c.frame == start ? 0x08 : 0), "frame %u of a late-starting stream", c.frame);
  }
  CHECK(c.port[0].underruns == 4, "underruns only from the stream's first frame: %u",
        c.port[0].underruns);
}

static void test_window(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t word;
  start_session(&c);
  uint8_t m[2] = {0x11, 0x22};
  schedule(&c, 1, m, 2, 0);
  drain(&c, &r);

  nb_latch(&c, 1000);
  nb_latch(&c, 1000 + 4999); /* inside the 5 ms window */
  CHECK(c.frame == 0 && c.latches == 2, "latch at +4999 us grouped");
  CHECK(!nb_poll(&c, 1000 + 4999, &word), "window still open at +4999 us");
  CHECK(nb_poll(&c, 1000 + 5000, &word) && word == nb_pio_word(0x11), "closes at +5000 us");
  CHECK(nb_latch(&c, 1000 + 5001) == 0x11 && c.frame == 1, "next latch starts frame 1");
  for (int i = 0; i < 5; i++) {
    nb_latch(&c, 1000 + 5001 + 100 * (uint64_t)i);
  }
  CHECK(c.latches == 6, "all latches of a frame counted: %u", c.latches);

  /* An 8 ms window (VeriTAS) set by CONFIG groups a latch at +6 ms. */
  uint8_t cfg[8];
  nb_put32(cfg, 8000);
  nb_put32(cfg + 4, 500);
  send(&c, NB_CONFIG, 4, cfg, 8, 7000);
  drain(&c, &r);
  CHECK(r.n >= 1 && r.type[r.n - 1] == NB_ACK, "config acked");
  nb_poll(&c, 20000, &word);
  nb_latch(&c, 30000);
  nb_latch(&c, 36000);
  CHECK(c.frame == 2 && c.latches == 2, "8 ms window groups +6 ms");
}

static void test_late_and_far(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  nb_init(&c, NULL);
  open_session(&c, 0);
  uint64_t t = 1000;
  for (int f = 0; f < 5; f++, t += FRAME_US) {
    console_frame(&c, t, &pushes);
  }
  /* Frame 4 is current, 5 is armed: 3..5 are late, 6.. accepted. */
  uint8_t m[5] = {1, 2, 3, 4, 5};
  schedule(&c, 3, m, 5, t);
  drain(&c, &r);
  int a = r.n - 1;
  CHECK(r.type[a] == NB_ACK && r.body[a][2] == 2 && r.body[a][3] == 3 && r.body[a][4] == 0,
        "ack: 2 accepted, 3 late");
  CHECK(c.port[0].late_schedules == 3, "late counted per frame");
  uint8_t far[2] = {9, 9};
  schedule(&c, c.armed_frame + NB_QUEUE_CAP, far, 2, t);
  drain(&c, &r);
  CHECK(r.body[0][2] == 1 && r.body[0][4] == 1 && c.n.last_error == NB_ERR_RANGE,
        "one frame past the horizon rejected");
  CHECK(console_frame(&c, t, &pushes) == 0 && console_frame(&c, t + FRAME_US, &pushes) == 4,
        "late masks never served; accepted ones are");
}

static void test_watchdog(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  nb_init(&c, NULL);
  open_session(&c, 0);
  uint8_t m[60];
  memset(m, 0x80, sizeof m);
  schedule(&c, 1, m, 60, 0);
  uint64_t t = 1000;
  int f;
  uint8_t last_flags = 0;
  for (f = 0; f < 40; f++, t += FRAME_US) {
    uint8_t got = console_frame(&c, t, &pushes);
    drain(&c, &r);
    last_flags = r.n ? r.body[r.n - 1][14] : 0;
    /* 500 ms of silence trips at frame 30's first poll; frame 30's byte is
     * already in the PIO FIFO, frame 31 is the first armed without the host. */
    if (f >= 1 && f <= 30) {
      CHECK(got == 0x80, "frame %d served before the watchdog", f);
    }
    if (f >= 31) {
      CHECK(got == 0, "frame %d: no buttons after host silence", f);
    }
  }
  CHECK(c.n.watchdog_trips == 1 && c.port[0].queue_depth == 0 && !c.port[0].streaming,
        "watchdog tripped once");
  CHECK(c.port[0].underruns == 0, "silence is not counted as underruns");
  CHECK(last_flags & NB_FLAG_WATCHDOG, "status flags the watchdog");
  uint8_t tok[4] = {0};
  send(&c, NB_PING, 2, tok, 4, t);
  CHECK(!c.watchdog_expired, "a valid message clears the watchdog flag");
}

static void test_arm_miss(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t word;
  start_session(&c);
  uint8_t m[3] = {0x01, 0x02, 0x03};
  schedule(&c, 1, m, 3, 0);
  drain(&c, &r);
  nb_latch(&c, 1000);
  nb_poll(&c, 6000, &word); /* frame 1 armed: 0x01 */
  CHECK(nb_latch(&c, 1000 + FRAME_US) == 0x01, "frame 1 normal");
  /* The loop stalls: no poll between frame 1's window end and frame 2's latch. */
  uint8_t got = nb_latch(&c, 1000 + 2 * FRAME_US);
  uint8_t again = nb_latch(&c, 1000 + 2 * FRAME_US + 120);
  CHECK(got == 0x01 && again == 0x01, "missed frame repeats the PIO's byte on both reads");
  CHECK(c.n.arm_misses == 1 && (c.port[0].flags & NB_FLAG_ARM_MISS) && c.frame == 2,
        "miss counted");
  CHECK(c.port[0].queue_depth == 1, "the missed frame's mask was spent: depth %u",
        c.port[0].queue_depth);
  nb_poll(&c, 1000 + 2 * FRAME_US + 5000, &word);
  CHECK(word == nb_pio_word(0x03) && nb_latch(&c, 1000 + 3 * FRAME_US) == 0x03,
        "back in step on frame 3");
}

/* Defect 7: a window under the game's 222 us between its two reads splits frames. */
static void test_config_min_window(void) {
  static nb_core_t c;
  replies_t r;
  start_session(&c);
  uint8_t cfg[8];
  nb_put32(cfg, 200);
  nb_put32(cfg + 4, 500);
  send(&c, NB_CONFIG, 1, cfg, 8, 0);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_NACK && r.body[0][2] == NB_ERR_RANGE &&
            c.cfg.window_us == NB_DEFAULT_WINDOW_US,
        "CONFIG window 200 us refused");
  nb_put32(cfg, NB_MIN_WINDOW_US - 1u);
  send(&c, NB_CONFIG, 2, cfg, 8, 0);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_NACK, "CONFIG window %u us refused", NB_MIN_WINDOW_US - 1u);
  nb_put32(cfg, NB_MIN_WINDOW_US);
  send(&c, NB_CONFIG, 3, cfg, 8, 0);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_ACK && c.cfg.window_us == NB_MIN_WINDOW_US,
        "CONFIG window at the minimum accepted");
  CHECK(NB_MIN_WINDOW_US > 222u, "the minimum window covers Dr. Mario's two reads");
}

/* Defect 3: a word that did not reach the PIO must not be recorded as queued. */
static void test_put_failed(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t word;
  start_session(&c);
  uint8_t m[2] = {0x41, 0x42};
  schedule(&c, 1, m, 2, 0);
  drain(&c, &r);
  nb_latch(&c, 1000);
  CHECK(nb_poll(&c, 6000, &word) && word == nb_pio_word(0x41), "frame 1 handed out");
  nb_put_failed(&c); /* the FIFO was full or a latch raced it */
  CHECK(nb_poll(&c, 6001, &word) && word == nb_pio_word(0x41), "handed out again");
  nb_put_failed(&c);
  /* The latch comes before any retry: the PIO serves the previous byte (0). */
  uint8_t got = nb_latch(&c, 1000 + FRAME_US);
  CHECK(got == 0x00 && c.n.arm_misses == 1 && (c.port[0].flags & NB_FLAG_ARM_MISS),
        "unqueued word: previous byte served, ARM_MISS counted (got %02x)", got);
  CHECK(!nb_poll(&c, 1000 + FRAME_US + 1, &word), "the missed frame's word is not put late");
  nb_poll(&c, 1000 + FRAME_US + 5000, &word);
  CHECK(word == nb_pio_word(0x42) && nb_latch(&c, 1000 + 2 * FRAME_US) == 0x42, "back in step");
}

/* Defect 2: latch events the board lost are reported. */
static void test_latches_lost(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  start_session(&c);
  console_frame(&c, 1000, &pushes);
  drain(&c, &r);
  CHECK(r.n == 1 && !(r.body[0][14] & NB_FLAG_LATCH_LOST), "no loss, no flag");
  nb_latches_lost(&c, 3);
  console_frame(&c, 1000 + FRAME_US, &pushes);
  console_frame(&c, 1000 + 2 * FRAME_US, &pushes);
  drain(&c, &r);
  CHECK(r.n == 2 && (r.body[0][14] & NB_FLAG_LATCH_LOST) && !(r.body[1][14] & NB_FLAG_LATCH_LOST),
        "the next STATUS carries LATCH_LOST, once");
  send(&c, NB_INFO, (uint8_t)(c.host_seq + 1u), NULL, 0, 2 * FRAME_US);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_INFO_ACK && r.len[0] == NB_INFO_ACK_LEN &&
            nb_get32(r.body[0] + 20) == 3 && nb_get32(r.body[0] + 16) == 6,
        "INFO: 6 latches seen, 3 lost");
}

/* Defect 5: port close / USB unmount / suspend release the controller within a frame. */
static void test_host_lost(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  start_session(&c);
  uint8_t m[60];
  memset(m, 0x80, sizeof m);
  schedule(&c, 1, m, 60, 0);
  uint64_t t = 1000;
  for (int f = 0; f < 5; f++, t += FRAME_US) {
    console_frame(&c, t, &pushes);
  }
  drain(&c, &r);
  nb_host_lost(&c); /* frame 5 is armed (0x80, in the PIO) */
  CHECK(!c.session && !c.port[0].streaming && c.port[0].queue_depth == 0 && c.n.host_losses == 1,
        "host loss ends session and stream");
  CHECK(console_frame(&c, t, &pushes) == 0x80, "the armed frame is still served");
  t += FRAME_US;
  CHECK(console_frame(&c, t, &pushes) == 0 && (c.port[0].flags & NB_FLAG_HOST_LOST),
        "released on the next frame");
  CHECK(c.port[0].underruns == 0 && c.n.watchdog_trips == 0, "not an underrun, not the watchdog");
  drain(&c, &r);
  CHECK(r.n == 0, "no STATUS without a session");
  open_session(&c, t);
  CHECK(c.session && !c.host_lost, "a new HELLO opens a session again");
}

/* Issue 19 item 7: frame numbers do not wrap; a schedule past 2^32 - 1 is too far. */
static void test_schedule_wrap(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  start_session(&c);
  uint8_t keep[60];
  memset(keep, 0x11, sizeof keep);
  schedule(&c, 4, keep, 44, 0);
  drain(&c, &r);
  uint64_t t = 1000;
  for (int f = 0; f < 3; f++, t += FRAME_US) {
    console_frame(&c, t, &pushes);
  }
  uint8_t m[60];
  memset(m, 0xEE, sizeof m);
  schedule(&c, 0xFFFFFFF0u, m, 60, t);
  drain(&c, &r);
  int a = r.n - 1;
  CHECK(r.type[a] == NB_ACK && r.body[a][2] == 0 && r.body[a][3] == 0 && r.body[a][4] == 60,
        "0xFFFFFFF0 + 60: all too far (accepted %u late %u far %u)", r.body[a][2], r.body[a][3],
        r.body[a][4]);
  for (int f = 3; f < 25; f++, t += FRAME_US) { /* within the 500 ms host watchdog */
    uint8_t got = console_frame(&c, t, &pushes);
    CHECK(got == (f >= 4 ? 0x11 : 0), "frame %d keeps its mask (%02x)", f, got);
  }
}

/* Issue 19 item 7: a replayed sequence number is refused and counted. */
static void test_replay(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  start_session(&c);
  uint8_t a[4] = {0x01, 0x01, 0x01, 0x01}, b[4] = {0x02, 0x02, 0x02, 0x02};
  uint8_t body[10];
  body[0] = 1;
  nb_put32(body + 1, 1);
  body[5] = 4;
  memcpy(body + 6, a, 4);
  send(&c, NB_SCHEDULE, 5, body, 10, 0);
  memcpy(body + 6, b, 4);
  uint32_t err0 = c.n.protocol_errors;
  send(&c, NB_SCHEDULE, 5, body, 10, 0); /* same seq, other masks */
  send(&c, NB_SCHEDULE, 3, body, 10, 0); /* older seq */
  drain(&c, &r);
  CHECK(r.n == 3 && r.type[0] == NB_ACK && r.type[1] == NB_NACK && r.body[1][2] == NB_ERR_REPLAY &&
            r.type[2] == NB_NACK && r.body[2][1] == 3,
        "replays NACKed with REPLAY");
  CHECK(c.n.replays == 2 && c.n.protocol_errors == err0 + 2, "replays counted");
  console_frame(&c, 1000, &pushes);
  CHECK(console_frame(&c, 1000 + FRAME_US, &pushes) == 0x01, "the first schedule wins");
  send(&c, NB_SCHEDULE, 6, body, 10, 1000);
  drain(&c, &r);
  CHECK(r.type[r.n - 2 >= 0 ? r.n - 1 : 0] == NB_ACK, "the next seq is accepted");
  CHECK(r.n >= 1 && nb_get32(r.body[0] + 28) >= err0 + 2 && r.type[0] == NB_STATUS &&
            r.body[0][15] != 0,
        "STATUS reports the errors");
}

/* Issue 19 item 7: a foreign HELLO mid-session is reported to both hosts. */
static void test_takeover(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  start_session(&c);
  uint8_t m[8] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
  schedule(&c, 1, m, 8, 0);
  drain(&c, &r);
  uint8_t h[2];
  nb_put16(h, NB_PROTO_VERSION);
  send(&c, NB_HELLO, 0, h, 2, 10);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_HELLO_ACK &&
            r.body[0][2] ==
                (NB_HELLO_SESSION | NB_HELLO_TOOK_OVER | NB_PORTS_ALL << NB_HELLO_PORTS_SHIFT),
        "HELLO_ACK says it took over (flags %02x)", r.body[0][2]);
  CHECK(c.n.takeovers == 1 && c.n.last_error == NB_ERR_TAKEN_OVER, "takeover counted");
  console_frame(&c, 1000, &pushes);
  drain(&c, &r);
  CHECK(r.n == 1 && r.body[0][15] == NB_ERR_TAKEN_OVER, "STATUS.last_error TAKEN_OVER");
  send(&c, NB_HELLO, 1, h, 2, 2000);
  drain(&c, &r);
  CHECK(r.body[0][2] ==
            (NB_HELLO_SESSION | NB_HELLO_TOOK_OVER | NB_PORTS_ALL << NB_HELLO_PORTS_SHIFT),
        "every takeover flagged");
  static nb_core_t d;
  nb_init(&d, NULL);
  open_session(&d, 0);
  CHECK(d.n.takeovers == 0 && d.n.protocol_errors == 0, "a first HELLO is no takeover");
}

/* Port 2 (issue 38): its own schedule on the same latches, its own stream and underruns,
 * CLEAR per port, refusals for ports the board does not drive. */
static void test_two_ports(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t pushes = 0;
  uint8_t p2;
  start_session(&c);
  const uint8_t m1[4] = {0x80, 0x40, 0x20, 0x10}, m2[6] = {0x01, 0x02, 0x04, 0x08, 0x81, 0x42};
  schedule_port(&c, 1, 1, m1, 4, 0);
  schedule_port(&c, 2, 1, m2, 6, 0);
  drain(&c, &r);
  CHECK(r.n == 2 && r.type[0] == NB_ACK && r.body[0][2] == 4 && r.type[1] == NB_ACK &&
            r.body[1][2] == 6,
        "both schedules accepted");
  CHECK(c.port[0].queue_depth == 4 && c.port[1].queue_depth == 6, "one queue per port");
  uint64_t t = 1000;
  CHECK(console_frame2(&c, t, &pushes, &p2) == 0 && p2 == 0, "frame 0: no buttons on either");
  for (int f = 1; f <= 6; f++) {
    t += FRAME_US;
    uint8_t got = console_frame2(&c, t, &pushes, &p2);
    CHECK(got == (f <= 4 ? m1[f - 1] : 0) && p2 == m2[f - 1], "frame %d: port 1 %02x, port 2 %02x",
          f, got, p2);
  }
  CHECK(c.port[0].underruns == 3 && c.port[1].underruns == 1,
        "underruns per port, frame 7 armed: port 1 from frame 5, port 2 from 7 (%u / %u)",
        c.port[0].underruns, c.port[1].underruns);
  drain(&c, &r);
  CHECK(r.n == 7 && r.len[6] == NB_STATUS_LEN, "a STATUS per frame, %d bytes", r.len[6]);
  for (int i = 1; i < r.n; i++) {
    const uint8_t* b = r.body[i];
    CHECK(b[13] == (i <= 4 ? m1[i - 1] : 0) && b[36] == m2[i - 1], "status %d: both masks", i);
    CHECK((b[37] & NB_FLAG_FROM_QUEUE) && (b[37] & NB_FLAG_STREAMING), "status %d: port 2 flags",
          i);
    CHECK(nb_get16(b + 38) == 6 - i, "status %d: port 2 queue depth %u", i, nb_get16(b + 38));
  }
  CHECK((r.body[5][14] & NB_FLAG_UNDERRUN) && nb_get32(r.body[5] + 20) == 1 &&
            nb_get32(r.body[5] + 40) == 0,
        "status 5: port 1 underran, port 2 did not");
  CHECK(r.body[6][12] == 2, "the ports share the latches");

  /* CLEAR port 1 leaves port 2's stream; CLEAR 0 ends both. */
  uint8_t more[3] = {0x11, 0x22, 0x33};
  schedule_port(&c, 2, c.armed_frame + 1, more, 3, t);
  clear_port(&c, 1, t);
  drain(&c, &r);
  CHECK(r.n == 2 && r.type[1] == NB_ACK && r.body[1][0] == NB_CLEAR, "clear port 1 acked");
  CHECK(!c.port[0].streaming && c.port[1].streaming && c.port[1].queue_depth == 3,
        "port 2 keeps its stream");
  uint32_t u1 = c.port[0].underruns;
  t += FRAME_US;
  console_frame2(&c, t, &pushes, &p2); /* the frame armed before the schedule */
  t += FRAME_US;
  CHECK(console_frame2(&c, t, &pushes, &p2) == 0 && p2 == 0x11 && c.port[0].underruns == u1,
        "port 1 idle (not underruns), port 2 plays (%02x)", p2);
  clear_port(&c, 0, t);
  drain(&c, &r);
  CHECK(r.type[r.n - 1] == NB_ACK && !nb_streaming(&c) && c.port[1].queue_depth == 0,
        "clear port 0 ends every stream");

  /* Ports this board does not drive, and port numbers that do not exist. */
  uint8_t one = 0x80;
  const uint8_t bad_ports[2] = {0, 3};
  for (int i = 0; i < 2; i++) {
    schedule_port(&c, bad_ports[i], c.armed_frame + 1, &one, 1, t);
    drain(&c, &r);
    CHECK(r.n == 1 && r.type[0] == NB_NACK && r.body[0][2] == NB_ERR_RANGE,
          "schedule for port %u refused", bad_ports[i]);
  }
  clear_port(&c, 3, t);
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_NACK && r.body[0][2] == NB_ERR_RANGE, "clear port 3 refused");
  nb_set_ports(&c, 0x01);
  schedule_port(&c, 2, c.armed_frame + 1, &one, 1, t);
  clear_port(&c, 2, t);
  drain(&c, &r);
  CHECK(r.n == 2 && r.type[0] == NB_NACK && r.body[0][2] == NB_ERR_RANGE && r.type[1] == NB_NACK &&
            r.body[1][2] == NB_ERR_RANGE,
        "a one-port board refuses port 2");
  CHECK(c.port[1].queue_depth == 0 && !nb_streaming(&c), "refusals store nothing");
  send(&c, NB_INFO, (uint8_t)(c.host_seq + 1u), NULL, 0, t);
  drain(&c, &r);
  CHECK(r.n == 1 && r.body[0][30] == 0x01 && r.body[0][31] == 0, "INFO: ports 0x01");
  open_session(&c, t);
  CHECK(c.session, "session reopened");
  nb_set_ports(&c, NB_PORTS_ALL);
  uint8_t h[2];
  nb_put16(h, NB_PROTO_VERSION);
  send(&c, NB_HELLO, 7, h, 2, t);
  drain(&c, &r);
  CHECK(r.n == 1 && (r.body[0][2] >> NB_HELLO_PORTS_SHIFT) == NB_PORTS_ALL,
        "HELLO_ACK: both ports (flags %02x)", r.body[0][2]);
}

/* ARM_MISS, watchdog and host loss act on both ports alike. */
static void test_two_ports_faults(void) {
  static nb_core_t c;
  replies_t r;
  uint32_t word, pushes = 0;
  uint8_t p2;
  start_session(&c);
  uint8_t m1[3] = {0x01, 0x02, 0x03}, m2[3] = {0x10, 0x20, 0x30};
  schedule_port(&c, 1, 1, m1, 3, 0);
  schedule_port(&c, 2, 1, m2, 3, 0);
  drain(&c, &r);
  nb_latch(&c, 1000);
  nb_poll(&c, 6000, &word);
  CHECK(nb_latch(&c, 1000 + FRAME_US) == 0x01 && nb_port_read(&c, 2) == 0x10, "frame 1 normal");
  /* The loop stalls past frame 2's first latch: both ports repeat frame 1's byte. */
  CHECK(nb_latch(&c, 1000 + 2 * FRAME_US) == 0x01 && nb_port_read(&c, 2) == 0x10 &&
            nb_latch(&c, 1000 + 2 * FRAME_US + 120) == 0x01 && nb_port_read(&c, 2) == 0x10,
        "missed frame repeats each port's byte");
  CHECK(c.n.arm_misses == 1 && (c.port[0].flags & NB_FLAG_ARM_MISS) &&
            (c.port[1].flags & NB_FLAG_ARM_MISS) && c.port[1].queue_depth == 1,
        "one miss, flagged on both ports, both masks spent");
  nb_poll(&c, 1000 + 2 * FRAME_US + 5000, &word);
  CHECK(nb_latch(&c, 1000 + 3 * FRAME_US) == 0x03 && nb_port_read(&c, 2) == 0x30, "back in step");

  /* Host silence: the watchdog flushes both ports. */
  static nb_core_t d;
  start_session(&d);
  uint8_t a[60];
  memset(a, 0x80, sizeof a);
  schedule_port(&d, 2, 1, a, 60, 0);
  uint64_t t = 1000;
  for (int f = 0; f < 40; f++, t += FRAME_US) {
    uint8_t got = console_frame2(&d, t, &pushes, &p2);
    CHECK(got == 0 && p2 == ((f >= 1 && f <= 30) ? 0x80 : 0), "frame %d: port 2 %02x", f, p2);
    drain(&d, &r);
  }
  CHECK(d.n.watchdog_trips == 1 && !nb_streaming(&d) && d.port[1].underruns == 0,
        "watchdog on a port-2 stream");

  /* Host gone: both released within one frame. */
  static nb_core_t e;
  start_session(&e);
  schedule_port(&e, 1, 1, a, 20, 0);
  schedule_port(&e, 2, 1, a, 20, 0);
  t = 1000;
  for (int f = 0; f < 3; f++, t += FRAME_US) {
    console_frame2(&e, t, &pushes, &p2);
  }
  nb_host_lost(&e);
  CHECK(console_frame2(&e, t, &pushes, &p2) == 0x80 && p2 == 0x80, "the armed frame is served");
  t += FRAME_US;
  CHECK(
      console_frame2(&e, t, &pushes, &p2) == 0 && p2 == 0 && (e.port[1].flags & NB_FLAG_HOST_LOST),
      "both released on the next frame");
}

static void test_info(void) {
  static nb_core_t c;
  replies_t r;
  nb_config_t cfg;
  nb_config_default(&cfg);
  cfg.boot_count = 7;
  cfg.reset_reason = NB_RESET_WATCHDOG;
  nb_init(&c, &cfg);
  nb_set_identity(&c, 1, 2, 3, "a-board-name-longer-than-15");
  send(&c, NB_INFO, 9, NULL, 0, 123456789); /* works without a session, like PING */
  drain(&c, &r);
  CHECK(r.n == 1 && r.type[0] == NB_INFO_ACK && r.body[0][0] == 1 && r.body[0][1] == 2 &&
            r.body[0][2] == 3 && r.body[0][3] == NB_RESET_WATCHDOG &&
            nb_get32(r.body[0] + 4) == 7 && nb_get64(r.body[0] + 8) == 123456789u,
        "INFO: version, reset reason, boot count, time");
  CHECK(memcmp(r.body[0] + 32, "a-board-name-lo\0", 16) == 0, "board name cut to 15 + NUL");
  CHECK(r.body[0][30] == NB_PORTS_ALL && r.body[0][31] == 0, "INFO: both ports by default");
}

static void test_tx_full(void) {
  static nb_core_t c;
  uint32_t pushes = 0;
  nb_init(&c, NULL);
  open_session(&c, 0);
  uint64_t t = 1000;
  for (int f = 0; f < 60; f++, t += FRAME_US) {
    console_frame(&c, t, &pushes); /* nobody reads the TX buffer */
  }
  CHECK(c.n.tx_drops > 0 && c.tx_len <= NB_TX_BUF, "full TX buffer drops whole messages");
  replies_t r;
  drain(&c, &r);
  int gaps = 0;
  for (int i = 1; i < r.n; i++) {
    gaps += (uint8_t)(r.seq[i] - r.seq[i - 1]) != 1;
  }
  CHECK(r.n > 10 && gaps == 0, "what was kept is intact and in order (%d)", r.n);
  console_frame(&c, t, &pushes);
  replies_t r2;
  drain(&c, &r2);
  CHECK(r2.n == 1 && (uint8_t)(r2.seq[0] - r.seq[r.n - 1]) == 1 + c.n.tx_drops,
        "the seq gap equals the drops");
}

/* ---- fuzz ----------------------------------------------------------------
 * Oracle: an independent reference decoder (naive COBS, table-free CRC written
 * separately) counts the frames with a valid CRC; the core must answer exactly
 * that many and touch the queue only through them. */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)(g_rng >> 16);
}

static int ref_valid(const uint8_t* w, size_t n) {
  uint8_t out[1024];
  size_t o = 0, i = 0;
  if (n == 0 || n > NB_MAX_WIRE - 1) {
    return 0;
  }
  while (i < n) {
    size_t code = w[i++];
    if (code == 0 || i + code - 1 > n) {
      return 0;
    }
    for (size_t k = 1; k < code; k++) {
      out[o++] = w[i++];
    }
    if (code < 0xFF && i < n) {
      out[o++] = 0;
    }
  }
  if (o < 4 || o > NB_MAX_FRAME) {
    return 0;
  }
  uint32_t crc = 0xFFFF;
  for (size_t k = 0; k < o - 2; k++) {
    for (int b = 7; b >= 0; b--) {
      uint32_t bit = ((out[k] >> b) & 1u) ^ ((crc >> 15) & 1u);
      crc = ((crc << 1) & 0xFFFFu) ^ (bit ? 0x1021u : 0u);
    }
  }
  return crc == (uint32_t)(out[o - 2] | (out[o - 1] << 8));
}

static void test_fuzz(long iterations) {
  static nb_core_t c;
  uint8_t stream[4096];
  long acted = 0, expected = 0, rejected = 0;
  for (long it = 0; it < iterations; it++) {
    nb_init(&c, NULL);
    open_session(&c, 0);
    size_t n = 0;
    while (n < 2048) {
      uint32_t kind = rnd() % 4;
      if (kind == 0) { /* raw garbage, zero bytes sometimes */
        size_t k = 1 + rnd() % 80;
        for (size_t i = 0; i < k; i++) {
          stream[n++] = (rnd() % 5 == 0) ? 0 : (uint8_t)rnd();
        }
        continue;
      }
      uint8_t body[NB_MAX_BODY], wire[NB_MAX_WIRE];
      uint8_t type = (uint8_t)(1 + rnd() % 6);
      size_t bl = rnd() % 72;
      for (size_t i = 0; i < bl; i++) {
        body[i] = (uint8_t)rnd();
      }
      if (type == NB_SCHEDULE && bl >= NB_SCHEDULE_HDR_LEN) {
        body[0] = (uint8_t)(rnd() % 4); /* ports 1 and 2, and two that are refused */
        nb_put32(body + 1, rnd() % 600);
        body[5] = (uint8_t)(bl - NB_SCHEDULE_HDR_LEN);
      }
      size_t wl = nb_frame_encode(type, (uint8_t)rnd(), body, bl, wire);
      if (kind == 2) { /* mutate: flip, truncate, or drop a byte */
        size_t at = rnd() % (wl - 1);
        switch (rnd() % 3) {
          case 0:
            wire[at] ^= (uint8_t)(1u << (rnd() % 8));
            break;
          case 1:
            wire[at] = 0;
            wl = at + 1;
            break;
          default:
            memmove(wire + at, wire + at + 1, wl - at - 1);
            wl--;
        }
      }
      memcpy(stream + n, wire, wl);
      n += wl;
    }
    stream[n++] = 0;
    /* Oracle count of valid frames, delimiter to delimiter. */
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
      if (stream[i] == 0) {
        expected += ref_valid(stream + start, i - start);
        start = i + 1;
      }
    }
    /* Feed in random chunks with the queue checked between them. */
    uint32_t errors_before = c.n.protocol_errors;
    for (size_t off = 0; off < n;) {
      size_t k = 1 + rnd() % 64;
      if (k > n - off) {
        k = n - off;
      }
      nb_rx(&c, stream + off, (uint32_t)k, off);
      off += k;
      uint32_t word;
      nb_poll(&c, off, &word);
      replies_t r;
      drain(&c, &r);
      for (int i = 0; i < r.n; i++) {
        acted += r.type[i] != NB_STATUS;
      }
    }
    rejected += c.n.protocol_errors - errors_before;
    for (unsigned p = 0; p < NB_PORTS; p++) {
      const nb_port_t* port = &c.port[p];
      unsigned depth = 0;
      for (unsigned i = 0; i < NB_QUEUE_CAP; i++) {
        if (port->queue[i].valid) {
          depth++;
          int32_t ahead = (int32_t)(port->queue[i].frame - c.armed_frame);
          if (ahead <= 0 || ahead > (int32_t)NB_QUEUE_CAP || (port->queue[i].frame & QMASK) != i) {
            g_fail++;
            fprintf(stderr, "fuzz: port %u slot %u holds frame %u\n", p + 1, i,
                    port->queue[i].frame);
          }
        }
      }
      if (depth != port->queue_depth) {
        g_fail++;
        fprintf(stderr, "fuzz: port %u depth %u but %u valid slots\n", p + 1, port->queue_depth,
                depth);
      }
    }
  }
  CHECK(acted == expected, "replies %ld == frames with a valid CRC %ld", acted, expected);
  CHECK(expected > iterations && rejected > iterations, "fuzz saw both (%ld valid, %ld bad)",
        expected, rejected);
  printf("fuzz: %ld streams, %ld valid frames acted on, %ld frames rejected\n", iterations,
         expected, rejected);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s protocol_vectors.json [fuzz_iterations]\n", argv[0]);
    return 2;
  }
  char* json = slurp(argv[1]);
  CHECK(strstr(json, "\"protocol_version\": 2") != NULL, "vectors are for version 2");
  test_crc_cobs(json);
  test_messages(json);
  test_invalid(json);
  test_version_mismatch();
  test_queue_and_grouping();
  test_window();
  test_late_and_far();
  test_watchdog();
  test_arm_miss();
  test_tx_full();
  test_config_min_window();
  test_put_failed();
  test_latches_lost();
  test_host_lost();
  test_schedule_wrap();
  test_replay();
  test_takeover();
  test_info();
  test_two_ports();
  test_two_ports_faults();
  test_fuzz(argc > 2 ? atol(argv[2]) : 3000);
  free(json);
  printf("test_core: %d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
