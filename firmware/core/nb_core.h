/* The controller's brain, board-independent: the host link (firmware/PROTOCOL.md),
 * the frame queue of button masks keyed by absolute console frame number, and the
 * grouping of console latches into frames. No SDK includes: the same sources run
 * on the RP2040 (firmware/src/main.c wires them to USB and PIO) and on the host
 * (firmware/host: the virtual device behind hil.link.vdevice and the C unit tests).
 *
 * Time is microseconds (us) on one monotonic clock supplied by the caller: the
 * RP2040's time_us_64() on hardware, the simulated console's clock on the host.
 * Console frames are numbered from 0 (the first latch group after reset).
 *
 * Controller ports: the NES latches both ports with one line (OUT0, a $4016 write) and
 * clocks each with its own ($4016 reads clock port 1, $4017 reads port 2), so a frame is
 * one latch group for both; each port has its own schedule, queue, stream and underruns
 * (PROTOCOL.md "Controller ports"). Ports are numbered 1 and 2, as on the console.
 *
 * Not thread-safe: call every function from one thread (on the RP2040: the main
 * loop; the latch interrupt only records timestamps, see firmware/src/nes_port.c).
 *
 * Usage, once per main-loop pass:
 *   for each latch timestamp t recorded since the last pass: nb_latch(core, t);
 *   nb_rx(core, bytes_from_usb, n, now);
 *   if (nb_poll(core, now, &word)) put word (port 1) and nb_port_word(core, 2) (port 2)
 *     into the two PIO state machines' TX FIFOs;
 *   n = nb_tx(core, buf, cap): send buf[0..n) to the host. */
#ifndef NB_CORE_H
#define NB_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "nb_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Places the time-critical functions (nb_latch, nb_poll) in RAM when the board
 * build defines it, e.g. NB_RAMFUNC=__attribute__((section(".time_critical.nb")))
 * (pico-sdk's linker scripts copy .time_critical* to SRAM). */
#ifndef NB_RAMFUNC
#define NB_RAMFUNC
#endif

#define NB_QUEUE_CAP 256u          /* frames (power of two), about 4.3 s of play */
#define NB_TX_BUF 1024u            /* bytes of replies and statuses awaiting USB */
#define NB_DEFAULT_WINDOW_US 5000u /* latch grouping window (TAStm32 uses 5 ms) */
#define NB_DEFAULT_WATCHDOG_MS 500u
/* Above the 222 us between Dr. Mario's two reads of a frame (getInputs [$B7E1]) with
 * room for a slow game's reads; a shorter window would split a frame in two. */
#define NB_MIN_WINDOW_US 1000u
#define NB_MAX_WINDOW_US 15000u /* below one NTSC frame (16 639 us) */
#define NB_MIN_WATCHDOG_MS 20u
#define NB_MAX_WATCHDOG_MS 60000u
#define NB_PORTS 2u        /* NES controller ports a core can serve: 1 and 2 */
#define NB_PORTS_ALL 0x03u /* port bit mask: bit 0 port 1, bit 1 port 2 */

/* STATUS.flags bits (PROTOCOL.md "STATUS"). */
#define NB_FLAG_FROM_QUEUE 0x01u /* the mask came from the host's schedule */
#define NB_FLAG_STREAMING 0x02u  /* frame at or after the stream's first scheduled frame */
#define NB_FLAG_UNDERRUN 0x04u   /* streaming, but nothing scheduled for this frame */
#define NB_FLAG_WATCHDOG 0x08u   /* the host watchdog expired when this frame was armed */
#define NB_FLAG_ARM_MISS 0x10u   /* the loop armed too late: previous byte repeated */
#define NB_FLAG_LATCH_LOST 0x20u /* the board lost latch events since the previous STATUS */
#define NB_FLAG_HOST_LOST 0x40u  /* armed after the host closed the port / USB went away */
/* HELLO_ACK.flags bits. */
#define NB_HELLO_SESSION 0x01u   /* versions match, session open */
#define NB_HELLO_TOOK_OVER 0x02u /* this HELLO ended another open session */
#define NB_HELLO_PORTS_SHIFT 2u  /* bits 2..3: the ports this firmware drives (nb_set_ports) */

/* Reset causes reported in HELLO_ACK (filled by the board glue). */
enum nb_reset_reason {
  NB_RESET_POWER_ON = 0,
  NB_RESET_WATCHDOG = 1,
  NB_RESET_OTHER = 2,
};

typedef struct {
  uint32_t window_us;   /* latch grouping window */
  uint32_t watchdog_ms; /* host silence that stops the stream */
  uint32_t boot_count;  /* boots since power-on, reported in HELLO_ACK */
  uint32_t reset_reason;
} nb_config_t;

typedef struct {
  uint32_t frame;
  uint8_t mask;
  uint8_t valid;
} nb_slot_t;

/* One controller port's schedule and what its data line serves. */
typedef struct {
  nb_slot_t queue[NB_QUEUE_CAP];
  uint16_t queue_depth;
  bool streaming;          /* host has scheduled this port since HELLO/CLEAR/watchdog */
  uint32_t stream_first;   /* earliest frame scheduled since streaming began */
  uint32_t underruns;      /* cumulative: frames of the stream with nothing scheduled */
  uint32_t late_schedules; /* cumulative: frames scheduled at or before the armed frame */
  uint8_t mask;            /* the current frame's byte */
  uint8_t flags;           /* the current frame's STATUS flags */
  uint8_t armed_mask;      /* the next frame's byte (nb_core_t.armed_frame) */
  uint8_t armed_flags;
  /* Mirror of the port's PIO state machine: the word waiting in its TX FIFO, and the
   * mask in X (served when the FIFO is empty). */
  uint8_t fifo_mask;
  uint8_t x_mask;
} nb_port_t;

/* Cumulative since reset; each appears in STATUS (PROTOCOL.md). Underruns and late
 * schedules are per port (nb_port_t). */
typedef struct {
  uint32_t protocol_errors; /* frames dropped or NACKed */
  uint16_t watchdog_trips;
  uint16_t arm_misses; /* frames whose byte could not be armed in time */
  uint16_t tx_drops;   /* device messages dropped for a full TX buffer */
  uint8_t last_error;  /* since the previous STATUS */
  /* Reported in INFO (PROTOCOL.md "INFO"). */
  uint32_t latches;      /* latch events seen */
  uint32_t latches_lost; /* latch events the board lost (nb_latches_lost) */
  uint16_t host_losses;  /* port closes, USB unmounts/suspends while streaming or in session */
  uint16_t replays;      /* host messages refused as replayed (REPLAY) */
  uint16_t takeovers;    /* HELLOs that ended an open session (TAKEN_OVER) */
} nb_counters_t;

/* All state; allocate statically (nb_core_size() tells foreign callers). */
typedef struct {
  nb_config_t cfg;
  nb_deframer_t rx;
  nb_counters_t n;
  nb_port_t port[NB_PORTS]; /* [0] is port 1 */
  uint8_t ports;            /* the ports this board drives (NB_PORTS_ALL bits) */
  bool session;             /* HELLO with a matching version received */
  uint8_t host_seq;         /* seq of the last host message acted on in the session */
  bool host_lost;           /* host gone (nb_host_lost) and not back with a HELLO */
  bool latch_lost;          /* latch events lost since the previous STATUS */
  uint8_t fw_version[3];    /* major, minor, patch (nb_set_identity) */
  char board[16];           /* board name, NUL-padded */
  bool watchdog_expired;    /* host silent since the watchdog tripped */
  uint8_t tx_seq;
  uint64_t last_host_us;
  /* Current frame (latch group). */
  bool any_frame;
  bool window_open;
  uint32_t frame;
  uint64_t first_latch_us;
  uint8_t latches;
  /* The next frame's bytes (nb_port_t.armed_mask), decided when the current window
   * closes. */
  uint32_t armed_frame;
  bool armed_pending; /* decided, not yet handed to the PIO by nb_poll */
  bool fifo_full;     /* the ports' TX FIFOs hold a word (nb_port_t.fifo_mask) */
  /* Outgoing bytes (ring). */
  uint16_t tx_head;
  uint16_t tx_len;
  uint8_t tx[NB_TX_BUF];
} nb_core_t;

/* Fills cfg with the defaults above. */
void nb_config_default(nb_config_t* cfg);

/* Resets everything; cfg NULL means defaults. The first nb_poll hands out the
 * "no buttons" word for frame 0. */
void nb_init(nb_core_t* c, const nb_config_t* cfg);

/* A console latch (rising LATCH edge, both ports) at t_us. Returns the mask the console
 * reads on port 1 on this latch (project bit order, A = 0x80), i.e. what the port-1 PIO
 * serves; nb_port_read() tells any port's. */
uint8_t nb_latch(nb_core_t* c, uint64_t t_us) NB_RAMFUNC;

/* The mask port (1 or 2) serves on the reads of the current latch (after nb_latch); 0 for
 * another port number. */
uint8_t nb_port_read(const nb_core_t* c, uint8_t port);

/* Advances time to now_us: closes the latch window, queues that frame's STATUS,
 * decides the next frame's bytes and checks the host watchdog. Returns true and
 * sets *pio_word to port 1's word when a word must go into each port's PIO TX FIFO now
 * (port 2's: nb_port_word(c, 2)). */
bool nb_poll(nb_core_t* c, uint64_t now_us, uint32_t* pio_word) NB_RAMFUNC;

/* The PIO word for port (1 or 2) that the last nb_poll returning true handed out. */
uint32_t nb_port_word(const nb_core_t* c, uint8_t port);

/* The ports this board drives (bit 0 port 1, bit 1 port 2; nb_init sets NB_PORTS_ALL),
 * reported in HELLO_ACK and INFO; a SCHEDULE or CLEAR for another port is refused
 * (NACK RANGE). */
void nb_set_ports(nb_core_t* c, uint8_t ports);

/* True while the host streams on any port (the board's LED). */
bool nb_streaming(const nb_core_t* c);

/* The word nb_poll handed out did not reach the PIO (its TX FIFO was full, or a latch
 * came between the latch drain and the put): the core forgets it was queued and hands
 * it out again on the next nb_poll; if a latch comes first, that frame is an ARM_MISS. */
void nb_put_failed(nb_core_t* c);

/* The board lost n latch events (its timestamp ring overflowed): counted, and the next
 * STATUS carries NB_FLAG_LATCH_LOST. Frame numbers after a loss may lag the console's. */
void nb_latches_lost(nb_core_t* c, uint32_t n);

/* The host went away without a word: port closed (DTR low), USB unmounted or
 * suspended. Flushes the queue, ends the stream and the session (the next host sends
 * HELLO); frames armed from now read no buttons and carry NB_FLAG_HOST_LOST. The byte
 * already armed is still served: the controller is released within one frame. */
void nb_host_lost(nb_core_t* c);

/* Firmware version and board name reported in INFO (board: up to 15 characters). */
void nb_set_identity(nb_core_t* c, uint8_t major, uint8_t minor, uint8_t patch, const char* board);

/* Bytes from the host (any chunking); acts on each frame with a valid CRC. */
void nb_rx(nb_core_t* c, const uint8_t* data, uint32_t len, uint64_t now_us);

/* Moves up to cap pending bytes for the host into out; returns the count. */
uint32_t nb_tx(nb_core_t* c, uint8_t* out, uint32_t cap);

/* sizeof(nb_core_t) / sizeof(nb_config_t), for callers that allocate it opaquely. */
uint32_t nb_core_size(void);
uint32_t nb_config_size(void);

/* The 32-bit word the PIO program (firmware/src/nes4021.pio) shifts out MSB
 * first, one bit per console clock, into DATA's pin direction (1 = driven low =
 * pressed). Bits 31..24 are the mask in NES order (A first); the 24 ones that
 * follow read as "1" bits after the 8th, as an official pad's 4021 does (its
 * serial input is grounded). */
static inline uint32_t nb_pio_word(uint8_t mask) { return ((uint32_t)mask << 24) | 0x00FFFFFFu; }

#ifdef __cplusplus
}
#endif

#endif /* NB_CORE_H */
