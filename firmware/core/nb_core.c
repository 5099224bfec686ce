/* Controller core: host link handling, frame queue and latch grouping.
 * Behaviour is specified in firmware/PROTOCOL.md; see nb_core.h for the API. */
#include "nb_core.h"

#include <string.h>

#define QMASK (NB_QUEUE_CAP - 1u)
#define INC16(x) ((x) = (uint16_t)((x) == 0xFFFFu ? (x) : (x) + 1u))

#if (NB_QUEUE_CAP & QMASK) != 0
#error "NB_QUEUE_CAP must be a power of two"
#endif

void nb_config_default(nb_config_t* cfg) {
  cfg->window_us = NB_DEFAULT_WINDOW_US;
  cfg->watchdog_ms = NB_DEFAULT_WATCHDOG_MS;
  cfg->boot_count = 0;
  cfg->reset_reason = NB_RESET_POWER_ON;
}

uint32_t nb_core_size(void) { return (uint32_t)sizeof(nb_core_t); }
uint32_t nb_config_size(void) { return (uint32_t)sizeof(nb_config_t); }

/* ---- outgoing messages ------------------------------------------------- */

static void tx_msg(nb_core_t* c, uint8_t type, const uint8_t* body, size_t len) {
  uint8_t wire[NB_MAX_WIRE];
  size_t n = nb_frame_encode(type, c->tx_seq, body, len, wire);
  /* The sequence number advances even for a dropped message, so the host
   * sees every loss as a gap. */
  c->tx_seq++;
  if (n == 0 || n > (size_t)(NB_TX_BUF - c->tx_len)) {
    INC16(c->n.tx_drops);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    c->tx[(c->tx_head + c->tx_len + i) % NB_TX_BUF] = wire[i];
  }
  c->tx_len = (uint16_t)(c->tx_len + n);
}

uint32_t nb_tx(nb_core_t* c, uint8_t* out, uint32_t cap) {
  uint32_t n = c->tx_len < cap ? c->tx_len : cap;
  for (uint32_t i = 0; i < n; i++) {
    out[i] = c->tx[(c->tx_head + i) % NB_TX_BUF];
  }
  c->tx_head = (uint16_t)((c->tx_head + n) % NB_TX_BUF);
  c->tx_len = (uint16_t)(c->tx_len - n);
  return n;
}

static void count_error(nb_core_t* c, uint8_t code) {
  c->n.protocol_errors++;
  c->n.last_error = code;
}

static void nack(nb_core_t* c, const nb_msg_t* m, uint8_t code) {
  uint8_t b[NB_NACK_LEN] = {m->type, m->seq, code};
  count_error(c, code);
  tx_msg(c, NB_NACK, b, sizeof b);
}

static void ack(nb_core_t* c, const nb_msg_t* m, uint8_t accepted, uint8_t late, uint8_t far) {
  uint8_t b[NB_ACK_LEN] = {m->type, m->seq, accepted, late, far};
  tx_msg(c, NB_ACK, b, sizeof b);
}

/* The port's fields of a STATUS (PROTOCOL.md "STATUS": port 1 at offsets 13, 14, 16, 20,
 * 24; port 2 at 36, 37, 38, 40, 44). */
static void put_port_status(const nb_core_t* c, const nb_port_t* p, uint8_t* mask, uint8_t* flags,
                            uint8_t* depth, uint8_t* underruns, uint8_t* late) {
  *mask = p->mask;
  *flags = (uint8_t)(p->flags | (c->latch_lost ? NB_FLAG_LATCH_LOST : 0u));
  nb_put16(depth, p->queue_depth);
  nb_put32(underruns, p->underruns);
  nb_put32(late, p->late_schedules);
}

static void send_status(nb_core_t* c) {
  uint8_t b[NB_STATUS_LEN];
  nb_put32(b + 0, c->frame);
  nb_put64(b + 4, c->first_latch_us);
  b[12] = c->latches;
  put_port_status(c, &c->port[0], b + 13, b + 14, b + 16, b + 20, b + 24);
  b[15] = c->n.last_error;
  nb_put16(b + 18, c->n.watchdog_trips);
  nb_put32(b + 28, c->n.protocol_errors);
  nb_put16(b + 32, c->n.arm_misses);
  nb_put16(b + 34, c->n.tx_drops);
  put_port_status(c, &c->port[1], b + 36, b + 37, b + 38, b + 40, b + 44);
  c->n.last_error = NB_OK;
  c->latch_lost = false;
  tx_msg(c, NB_STATUS, b, sizeof b);
}

/* ---- frame queue ------------------------------------------------------- */

static void flush_port(nb_port_t* p) {
  for (uint32_t i = 0; i < NB_QUEUE_CAP; i++) {
    p->queue[i].valid = 0;
  }
  p->queue_depth = 0;
  p->streaming = false;
}

static void flush_queue(nb_core_t* c) {
  for (uint32_t i = 0; i < NB_PORTS; i++) {
    flush_port(&c->port[i]);
  }
}

/* Removes and returns the port's slot for frame, or NULL when nothing is scheduled. */
static nb_slot_t* take_slot(nb_port_t* p, uint32_t frame) {
  nb_slot_t* s = &p->queue[frame & QMASK];
  if (!s->valid || s->frame != frame) {
    return NULL;
  }
  s->valid = 0;
  p->queue_depth--;
  return s;
}

static bool any_streaming(const nb_core_t* c) {
  for (uint32_t i = 0; i < NB_PORTS; i++) {
    if (c->port[i].streaming) {
      return true;
    }
  }
  return false;
}

/* True once the host's stream on this port has reached frame: from the first frame it
 * scheduled (since HELLO/CLEAR/watchdog) on, a frame without a mask is an
 * underrun; frames before it are just idle. */
static bool in_stream(const nb_port_t* p, uint32_t frame) {
  return p->streaming && (int32_t)(frame - p->stream_first) >= 0;
}

/* Decides frame's byte on every port: the scheduled mask, else "no buttons". */
static void arm(nb_core_t* c, uint32_t frame) {
  for (uint32_t i = 0; i < NB_PORTS; i++) {
    nb_port_t* p = &c->port[i];
    nb_slot_t* s = take_slot(p, frame);
    uint8_t flags = in_stream(p, frame) ? NB_FLAG_STREAMING : 0u;
    if (s) {
      p->armed_mask = s->mask;
      flags |= NB_FLAG_FROM_QUEUE;
    } else {
      p->armed_mask = 0;
      if (flags & NB_FLAG_STREAMING) {
        p->underruns++;
        flags |= NB_FLAG_UNDERRUN;
      }
    }
    if (c->watchdog_expired) {
      flags |= NB_FLAG_WATCHDOG;
    }
    if (c->host_lost) {
      flags |= NB_FLAG_HOST_LOST;
    }
    p->armed_flags = flags;
  }
  c->armed_frame = frame;
  c->armed_pending = true;
}

/* ---- host messages ----------------------------------------------------- */

static void on_hello(nb_core_t* c, const nb_msg_t* m) {
  if (m->body_len != NB_HELLO_LEN) {
    nack(c, m, NB_ERR_LENGTH);
    return;
  }
  /* A HELLO while a session is open ends it: another host (or a restarted one) took
   * over. Counted, and reported to both: TAKEN_OVER in STATUS.last_error and
   * NB_HELLO_TOOK_OVER in this HELLO_ACK. */
  bool took_over = c->session;
  if (took_over) {
    INC16(c->n.takeovers);
    count_error(c, NB_ERR_TAKEN_OVER);
  }
  c->session = nb_get16(m->body) == NB_PROTO_VERSION;
  if (!c->session) {
    count_error(c, NB_ERR_VERSION);
  }
  c->host_seq = m->seq;
  c->host_lost = false;
  flush_queue(c);
  uint8_t b[NB_HELLO_ACK_LEN];
  nb_put16(b + 0, NB_PROTO_VERSION);
  b[2] = (uint8_t)((c->session ? NB_HELLO_SESSION : 0u) | (took_over ? NB_HELLO_TOOK_OVER : 0u) |
                   (uint8_t)(c->ports << NB_HELLO_PORTS_SHIFT));
  b[3] = (uint8_t)c->cfg.reset_reason;
  nb_put16(b + 4, NB_QUEUE_CAP);
  nb_put16(b + 6, NB_MAX_FRAME);
  nb_put32(b + 8, c->cfg.window_us);
  nb_put32(b + 12, c->cfg.watchdog_ms);
  nb_put32(b + 16, c->cfg.boot_count);
  tx_msg(c, NB_HELLO_ACK, b, sizeof b);
}

/* The port of a SCHEDULE or CLEAR (1 or 2), or NULL when this board does not drive it. */
static nb_port_t* port_of(nb_core_t* c, uint8_t port) {
  if (port < 1u || port > NB_PORTS || !(c->ports & (1u << (port - 1u)))) {
    return NULL;
  }
  return &c->port[port - 1u];
}

static void on_schedule(nb_core_t* c, const nb_msg_t* m) {
  uint8_t count = m->body_len >= NB_SCHEDULE_HDR_LEN ? m->body[5] : 0u;
  if (count == 0 || count > NB_MAX_MASKS || m->body_len != NB_SCHEDULE_HDR_LEN + count) {
    nack(c, m, NB_ERR_LENGTH);
    return;
  }
  nb_port_t* p = port_of(c, m->body[0]);
  if (!p) {
    nack(c, m, NB_ERR_RANGE);
    return;
  }
  uint32_t first = nb_get32(m->body + 1);
  uint8_t accepted = 0, late = 0, far = 0;
  for (uint8_t i = 0; i < count; i++) {
    /* Frame numbers do not wrap (PROTOCOL.md "Frame numbers"): first + i is computed
     * without wrapping, so frames past 2^32 - 1 are beyond the horizon, never frames
     * near 0; frames up to the armed one are decided (late). */
    int64_t ahead = (int64_t)first + (int64_t)i - (int64_t)c->armed_frame;
    if (ahead <= 0) {
      late++;
    } else if (ahead > (int64_t)NB_QUEUE_CAP) {
      far++;
    } else {
      uint32_t f = first + i;
      nb_slot_t* s = &p->queue[f & QMASK];
      if (!s->valid) {
        p->queue_depth++;
      }
      s->frame = f;
      s->mask = m->body[NB_SCHEDULE_HDR_LEN + i];
      s->valid = 1;
      accepted++;
      if (!p->streaming || (int32_t)(f - p->stream_first) < 0) {
        p->stream_first = f;
      }
      p->streaming = true;
    }
  }
  p->late_schedules += late;
  if (far) {
    count_error(c, NB_ERR_RANGE);
  }
  ack(c, m, accepted, late, far);
}

static void on_config(nb_core_t* c, const nb_msg_t* m) {
  if (m->body_len != NB_CONFIG_LEN) {
    nack(c, m, NB_ERR_LENGTH);
    return;
  }
  uint32_t window = nb_get32(m->body), watchdog = nb_get32(m->body + 4);
  if (window < NB_MIN_WINDOW_US || window > NB_MAX_WINDOW_US || watchdog < NB_MIN_WATCHDOG_MS ||
      watchdog > NB_MAX_WATCHDOG_MS) {
    nack(c, m, NB_ERR_RANGE);
    return;
  }
  c->cfg.window_us = window;
  c->cfg.watchdog_ms = watchdog;
  ack(c, m, 0, 0, 0);
}

static void on_info(nb_core_t* c, const nb_msg_t* m, uint64_t now_us) {
  if (m->body_len != NB_INFO_LEN) {
    nack(c, m, NB_ERR_LENGTH);
    return;
  }
  uint8_t b[NB_INFO_ACK_LEN];
  memset(b, 0, sizeof b);
  memcpy(b, c->fw_version, 3);
  b[3] = (uint8_t)c->cfg.reset_reason;
  nb_put32(b + 4, c->cfg.boot_count);
  nb_put64(b + 8, now_us);
  nb_put32(b + 16, c->n.latches);
  nb_put32(b + 20, c->n.latches_lost);
  nb_put16(b + 24, c->n.host_losses);
  nb_put16(b + 26, c->n.replays);
  nb_put16(b + 28, c->n.takeovers);
  b[30] = c->ports;
  memcpy(b + 32, c->board, sizeof c->board);
  tx_msg(c, NB_INFO_ACK, b, sizeof b);
}

static void on_message(nb_core_t* c, const nb_msg_t* m, uint64_t now_us) {
  /* Any frame with a valid CRC proves the host alive. */
  c->last_host_us = now_us;
  c->watchdog_expired = false;
  if (m->type == NB_HELLO) {
    on_hello(c, m);
    return;
  }
  /* In a session, host seqs advance (PROTOCOL.md "seq"): one at or behind the last
   * acted on (up to 128 back) is a replay, refused before anything else. */
  if (c->session) {
    uint8_t d = (uint8_t)(m->seq - c->host_seq);
    if (d == 0 || d >= 0x80u) {
      INC16(c->n.replays);
      nack(c, m, NB_ERR_REPLAY);
      return;
    }
    c->host_seq = m->seq;
  }
  switch (m->type) {
    case NB_INFO:
      on_info(c, m, now_us);
      return;
    case NB_PING:
      if (m->body_len != NB_PING_LEN) {
        nack(c, m, NB_ERR_LENGTH);
      } else {
        uint8_t b[NB_PONG_LEN];
        memcpy(b, m->body, 4);
        nb_put64(b + 4, now_us);
        tx_msg(c, NB_PONG, b, sizeof b);
      }
      return;
    case NB_SCHEDULE:
    case NB_CLEAR:
    case NB_CONFIG:
      break;
    default:
      nack(c, m, NB_ERR_UNKNOWN_TYPE);
      return;
  }
  if (!c->session) {
    nack(c, m, NB_ERR_NO_SESSION);
  } else if (m->type == NB_SCHEDULE) {
    on_schedule(c, m);
  } else if (m->type == NB_CONFIG) {
    on_config(c, m);
  } else if (m->body_len != NB_CLEAR_LEN) {
    nack(c, m, NB_ERR_LENGTH);
  } else if (m->body[0] == 0) {
    flush_queue(c); /* port 0: every port */
    ack(c, m, 0, 0, 0);
  } else {
    nb_port_t* p = port_of(c, m->body[0]);
    if (p) {
      flush_port(p);
      ack(c, m, 0, 0, 0);
    } else {
      nack(c, m, NB_ERR_RANGE);
    }
  }
}

void nb_rx(nb_core_t* c, const uint8_t* data, uint32_t len, uint64_t now_us) {
  for (uint32_t i = 0; i < len; i++) {
    nb_msg_t m;
    int r = nb_deframer_push(&c->rx, data[i], &m);
    if (r == NB_OK) {
      on_message(c, &m, now_us);
    } else if (r != NB_PUSH_NONE) {
      count_error(c, (uint8_t)r);
    }
  }
}

/* ---- console side ------------------------------------------------------ */

void nb_put_failed(nb_core_t* c) {
  c->fifo_full = false;
  c->armed_pending = true;
}

void nb_latches_lost(nb_core_t* c, uint32_t n) {
  if (n) {
    c->n.latches_lost += n;
    c->latch_lost = true;
  }
}

void nb_host_lost(nb_core_t* c) {
  if (c->session || any_streaming(c)) {
    INC16(c->n.host_losses);
  }
  flush_queue(c);
  c->session = false;
  c->host_lost = true;
  /* Replies and statuses for the departed host are of no use to the next one. */
  c->tx_len = 0;
}

void nb_set_identity(nb_core_t* c, uint8_t major, uint8_t minor, uint8_t patch, const char* board) {
  c->fw_version[0] = major;
  c->fw_version[1] = minor;
  c->fw_version[2] = patch;
  memset(c->board, 0, sizeof c->board);
  for (size_t i = 0; board && board[i] && i < sizeof c->board - 1; i++) {
    c->board[i] = board[i];
  }
}

void nb_set_ports(nb_core_t* c, uint8_t ports) { c->ports = (uint8_t)(ports & NB_PORTS_ALL); }

bool nb_streaming(const nb_core_t* c) { return any_streaming(c); }

uint8_t nb_port_read(const nb_core_t* c, uint8_t port) {
  return port >= 1u && port <= NB_PORTS ? c->port[port - 1u].x_mask : 0u;
}

uint32_t nb_port_word(const nb_core_t* c, uint8_t port) {
  return nb_pio_word(port >= 1u && port <= NB_PORTS ? c->port[port - 1u].fifo_mask : 0u);
}

void nb_init(nb_core_t* c, const nb_config_t* cfg) {
  memset(c, 0, sizeof *c);
  c->ports = NB_PORTS_ALL;
  if (cfg) {
    c->cfg = *cfg;
  } else {
    nb_config_default(&c->cfg);
  }
  nb_deframer_reset(&c->rx);
  arm(c, 0); /* frame 0: no buttons, handed to the PIO by the first nb_poll */
}

static void close_frame(nb_core_t* c) {
  c->window_open = false;
  if (c->session) {
    send_status(c);
  }
}

NB_RAMFUNC uint8_t nb_latch(nb_core_t* c, uint64_t t_us) {
  bool missed_close = false;
  c->n.latches++;
  if (c->window_open && t_us >= c->first_latch_us && t_us - c->first_latch_us >= c->cfg.window_us) {
    close_frame(c); /* nb_poll did not run between the window's end and now */
    missed_close = true;
  }
  /* What the PIO does on every latch: "pull noblock" takes the FIFO word if
   * one is there, else the program keeps serving X. */
  if (c->fifo_full) {
    for (uint32_t i = 0; i < NB_PORTS; i++) {
      c->port[i].x_mask = c->port[i].fifo_mask;
    }
    c->fifo_full = false;
  }
  if (c->window_open) {
    if (c->latches < 0xFFu) {
      c->latches++;
    }
    return c->port[0].x_mask;
  }
  uint32_t frame = c->any_frame ? c->frame + 1u : 0u;
  if (missed_close || c->armed_pending || c->armed_frame != frame) {
    /* This frame's byte never reached the PIO before its first latch: the
     * console gets the previous byte on every read of the frame, and the
     * frame's scheduled mask (if any) is spent. */
    INC16(c->n.arm_misses);
    for (uint32_t i = 0; i < NB_PORTS; i++) {
      nb_port_t* p = &c->port[i];
      if (c->armed_frame != frame) {
        (void)take_slot(p, frame);
      }
      p->flags = (uint8_t)(NB_FLAG_ARM_MISS | (in_stream(p, frame) ? NB_FLAG_STREAMING : 0u));
    }
    c->armed_frame = frame;
    c->armed_pending = false;
  } else {
    for (uint32_t i = 0; i < NB_PORTS; i++) {
      c->port[i].flags = c->port[i].armed_flags;
    }
  }
  c->any_frame = true;
  c->window_open = true;
  c->frame = frame;
  c->first_latch_us = t_us;
  c->latches = 1;
  for (uint32_t i = 0; i < NB_PORTS; i++) {
    c->port[i].mask = c->port[i].x_mask;
  }
  return c->port[0].x_mask;
}

NB_RAMFUNC bool nb_poll(nb_core_t* c, uint64_t now_us, uint32_t* pio_word) {
  if (any_streaming(c) && now_us > c->last_host_us &&
      now_us - c->last_host_us >= (uint64_t)c->cfg.watchdog_ms * 1000u) {
    flush_queue(c);
    c->watchdog_expired = true;
    INC16(c->n.watchdog_trips);
  }
  if (c->window_open && now_us >= c->first_latch_us &&
      now_us - c->first_latch_us >= c->cfg.window_us) {
    close_frame(c);
    arm(c, c->frame + 1u);
  }
  if (!c->armed_pending) {
    return false;
  }
  c->armed_pending = false;
  c->fifo_full = true;
  for (uint32_t i = 0; i < NB_PORTS; i++) {
    c->port[i].fifo_mask = c->port[i].armed_mask;
  }
  *pio_word = nb_pio_word(c->port[0].armed_mask);
  return true;
}
