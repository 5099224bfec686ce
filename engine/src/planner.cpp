// Reachability planner: a breadth-first search by frame over sets of pill positions. One search
// node is a control state (speedCounter $92, horVelocity $93, held buttons, press cooldown,
// presses so far) with the 512-bit set of (x, y, rotation) poses that reach it on that frame;
// one frame of action_pillFalling $8D66 (checkYMove $8D80, checkXMove $8DCF, checkRotate $8E3B
// with pillRotateValidation $8E70) moves a whole set with shifts and masks of the per-plan
// pillMoveValidation $90E3 table. The field cannot change while a pill falls. docs/PLANNER.md
// has the design and its exactness argument; tests/test_planner*.py replay every plan through
// drm::step and compare with an exhaustive search over whole engine states.
#include "planner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "nes_tables.h"

namespace drm {
namespace {

using u128 = unsigned __int128;
using Entry = Planner::Entry;

constexpr uint8_t kUsedButtons = kA | kB | kDown | kLeft | kRight;  // Up/Start/Select never help
constexpr uint8_t kLR = kLeft | kRight;
constexpr uint8_t kAB = kA | kB;
constexpr uint16_t kNoFrame = 0xFFFF;
constexpr uint8_t kHvBlocked = 0x0F;  // checkXMove: a blocked move leaves horVelocity at $0F

constexpr u128 every_row(uint8_t byte) {
  u128 v = 0;
  for (int i = 0; i < 16; ++i) v |= static_cast<u128>(byte) << (8 * i);
  return v;
}
constexpr u128 kCol0 = every_row(0x01);
constexpr u128 kCol6 = every_row(0x40);
constexpr u128 kCol7 = every_row(0x80);

// Bits set in a button mask (a table: __builtin_popcount is a library call without -mpopcnt).
constexpr uint8_t kPop8[32] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
                               1, 2, 2, 3, 2, 3, 3, 4, 2, 3, 3, 4, 3, 4, 4, 5};
inline int popcount8(unsigned v) { return kPop8[v & 0x1F] + kPop8[(v >> 5) & 0x07]; }
inline int ctz128(u128 v) {
  const uint64_t lo = static_cast<uint64_t>(v);
  return lo ? __builtin_ctzll(lo) : 64 + __builtin_ctzll(static_cast<uint64_t>(v >> 64));
}
inline bool bit(u128 v, int i) { return ((v >> i) & 1) != 0; }
// The rows y < k, every column (k = 0..16).
inline u128 rows_below(int k) {
  return k >= 16 ? ~static_cast<u128>(0) : (static_cast<u128>(1) << (8 * k)) - 1;
}

struct Set {
  u128 r[4];
};
inline bool any(const Set& s) { return (s.r[0] | s.r[1] | s.r[2] | s.r[3]) != 0; }

// pillMoveValidation for a fixed field: v[orientation] bit y*8 + x, y 0..15 from the bottom.
struct Geometry {
  u128 v[2];
  explicit Geometry(const State& s) : v{0, 0} {
    auto empty = [&](int pos) {
      pos &= 0xFF;  // the game's 8-bit field index: rows past the bottle read $FF (empty)
      return pos >= kFieldSize || s.field[pos] == kEmpty;
    };
    for (int y = 0; y < 16; ++y) {
      const int base = kPillFieldPosRelativeToPillY[y];
      for (int x = 0; x < 8; ++x) {
        const u128 b = static_cast<u128>(1) << (y * 8 + x);
        if (x < 7 && empty(base + x) && empty(base + x + 1)) v[0] |= b;
        if (empty(base + x) && empty(base + x - 8)) v[1] |= b;
      }
    }
  }
  // x and y are the game's bytes (x is $FF after a kick from column 0).
  bool ok(uint8_t x, uint8_t y, uint8_t rot) const {
    if (x > 7 || y > 15) return false;
    return bit(v[rot & 1], y * 8 + x);
  }
};

// ---- control states --------------------------------------------------------------------------

struct Ctrl {
  uint8_t sc;    // speedCounter
  uint8_t hv;    // horVelocity (0 while neither Left nor Right is held: it is dead then)
  uint8_t held;  // buttons held on the last frame, kUsedButtons only
  uint8_t cool;  // frames before the rate profile allows the next press
  uint16_t presses;
};

// held A/B/Down | presses << 8 | held Left/Right << 24 | cool << 32 | hv << 40 | sc << 48: the
// bits from 24 up are the "base" within which dominance is checked; sorting by key orders a
// base's nodes by presses.
inline uint64_t pack(const Ctrl& c) {
  return static_cast<uint64_t>(c.held & (kAB | kDown)) | static_cast<uint64_t>(c.presses) << 8 |
         static_cast<uint64_t>(c.held & kLR) << 24 | static_cast<uint64_t>(c.cool) << 32 |
         static_cast<uint64_t>(c.hv) << 40 | static_cast<uint64_t>(c.sc) << 48;
}
inline Ctrl unpack(uint64_t k) {
  return Ctrl{static_cast<uint8_t>(k >> 48), static_cast<uint8_t>(k >> 40),
              static_cast<uint8_t>(k | (k >> 24)), static_cast<uint8_t>(k >> 32),
              static_cast<uint16_t>(k >> 8)};
}
// A/B/Down held as 0..7 (A 4, B 2, Down 1), for the dominance tables.
inline int abd_index(uint64_t key) {
  return static_cast<int>(((key >> 5) & 4) | ((key >> 5) & 2) | ((key >> 2) & 1));
}

// ---- one frame over a set of positions -------------------------------------------------------

// checkXMove's Right: x + 1 unless x is the last column for the orientation (6 horizontal, 7
// vertical); into an occupied or outside pose it stays and horVelocity becomes $0F.
inline void move_right(u128 s, u128 v, bool vertical, u128& out, u128& blocked) {
  const u128 cand = s & ~(vertical ? kCol7 : kCol6 | kCol7);  // no attempt at the last column
  const u128 ok = cand & (v >> 1);
  out = (s & ~cand) | (ok << 1);
  blocked = cand & ~ok;
}
inline void move_left(u128 s, u128 v, u128& out, u128& blocked) {
  const u128 cand = s & ~kCol0;
  const u128 ok = cand & (v << 1);
  out = (s & ~cand) | (ok >> 1);
  blocked = cand & ~ok;
}

// pillRotateValidation $8E70 for the poses `q` turning into orientation `vt` (its validity):
// `succ` in the new rotation's coordinates, `fail` (reverted) in the old one's.
inline void rotate_one(u128 q, u128 vt, bool to_horizontal, bool left, u128& succ, u128& fail) {
  if (!to_horizontal) {
    succ = q & vt;
    fail = q & ~vt;
    return;
  }
  const u128 ok = q & vt;
  u128 s = ok;
  if (left) {  // the "double left": one more column when Left is held and it fits
    const u128 dl = ok & ~kCol0 & (vt << 1);
    s = (ok & ~dl) | (dl >> 1);
  }
  const u128 bad = q & ~vt;
  const u128 kick = bad & ~kCol0 & (vt << 1);  // wall kick: one column to the left
  succ = s | (kick >> 1);
  fail = bad & ~kick;
}

// checkRotate $8E3B with one of A (dir -1) or B (dir +1) pressed.
inline void rotate_set(Set& s, int dir, bool left, const Geometry& g) {
  Set o{{0, 0, 0, 0}};
  for (int r = 0; r < 4; ++r) {
    if (!s.r[r]) continue;
    const int t = (r + dir) & 3;
    u128 succ, fail;
    rotate_one(s.r[r], g.v[t & 1], (t & 1) == 0, left, succ, fail);
    o.r[t] |= succ;
    o.r[r] |= fail;
  }
  s = o;
}

// checkRotate with A and B pressed on one frame: A turns, then B turns the result; a failed B
// reverts to the pose before A (rot_copy, x_copy), so the pieces are tracked in A's source.
inline void rotate_both(Set& s, bool left, const Geometry& g) {
  Set o{{0, 0, 0, 0}};
  for (int r = 0; r < 4; ++r) {
    const u128 q = s.r[r];
    if (!q) continue;
    const int t = (r + 3) & 3;
    const u128 vt = g.v[t & 1];
    u128 same_x, left_x, fail_a;  // A's outcomes, in r's coordinates
    if ((t & 1) == 0) {
      const u128 ok = q & vt;
      const u128 dl = left ? ok & ~kCol0 & (vt << 1) : 0;
      const u128 bad = q & ~vt;
      const u128 kick = bad & ~kCol0 & (vt << 1);
      same_x = ok & ~dl;
      left_x = dl | kick;
      fail_a = bad & ~kick;
    } else {
      same_x = q & vt;
      left_x = 0;
      fail_a = q & ~vt;
    }
    const u128 vr = g.v[r & 1];
    const bool r_horizontal = (r & 1) == 0;
    u128 succ, fail;
    rotate_one(same_x, vr, r_horizontal, left, succ, fail);  // B: t + 1 = r
    o.r[r] |= succ | fail;
    rotate_one(left_x >> 1, vr, r_horizontal, left, succ, fail);
    o.r[r] |= succ | (fail << 1);
    const int u = (r + 1) & 3;  // A reverted: B from the original pose
    rotate_one(fail_a, g.v[u & 1], (u & 1) == 0, left, succ, fail);
    o.r[u] |= succ;
    o.r[r] |= fail;
  }
  s = o;
}

// ---- one frame for one pose (backtracking) ---------------------------------------------------

struct Micro {
  uint8_t x, y, rot, sc, hv, held, cool;
};

// pillRotateValidation $8E70.
inline void rotate_validation(const Geometry& g, Micro& m, uint8_t rot_copy, uint8_t x_copy) {
  if ((m.rot & 1) == 0) {
    if (g.ok(m.x, m.y, m.rot)) {
      if (m.held & kLeft) {
        m.x--;
        if (!g.ok(m.x, m.y, m.rot)) m.x++;
      }
      return;
    }
    m.x--;
  }
  if (g.ok(m.x, m.y, m.rot)) return;
  m.rot = rot_copy;
  m.x = x_copy;
}

// One frame of action_pillFalling with `mask` held, written as game.cpp does it (one pose).
// `odd`: frameCounter's parity after the NMI's increment. Returns true when the pill locks.
bool falling_frame(const Geometry& g, uint8_t limit, bool odd, uint8_t mask, Micro& m) {
  const uint8_t pressed = mask & static_cast<uint8_t>(~m.held);
  m.held = mask;
  bool lower;
  if (odd && (mask & 0x0F) == kDown) {
    lower = true;
  } else {
    m.sc++;
    lower = limit < m.sc;
  }
  if (lower) {
    m.y--;
    m.sc = 0;
    if (m.y == 0xFF || !g.ok(m.x, m.y, m.rot)) {
      m.y++;
      return true;
    }
  }
  bool move = true;
  if ((pressed & kLR) == 0) {
    if ((mask & kLR) == 0) {
      move = false;
    } else {
      m.hv++;
      if (static_cast<int8_t>(m.hv - 0x10) < 0) {
        move = false;
      } else {
        m.hv = 0x10 - 0x06;
      }
    }
  } else {
    m.hv = 0;
  }
  if (move) {
    if (mask & kRight) {
      const uint8_t lim = static_cast<uint8_t>((m.rot & 1) + 6);
      if (lim != m.x) {
        m.x++;
        if (!g.ok(m.x, m.y, m.rot)) {
          m.x--;
          m.hv = kHvBlocked;
        }
      }
    }
    if (mask & kLeft) {
      if (m.x != 0) {
        m.x--;
        if (!g.ok(m.x, m.y, m.rot)) {
          m.x++;
          m.hv = kHvBlocked;
        }
      }
    }
  }
  const uint8_t rot_copy = m.rot;
  const uint8_t x_copy = m.x;
  if (pressed & kA) {
    m.rot = (m.rot - 1) & 3;
    rotate_validation(g, m, rot_copy, x_copy);
  }
  if (pressed & kB) {
    m.rot = (m.rot + 1) & 3;
    rotate_validation(g, m, rot_copy, x_copy);
  }
  if ((mask & kLR) == 0) m.hv = 0;
  return false;
}

}  // namespace

// ---- the search ------------------------------------------------------------------------------

struct Planner::Search {
  Geometry g;
  uint8_t limit = 0;
  int interval = 0;
  bool same = false;  // both halves one colour: rotations r and r+2 are one placement
  bool taps = false;  // taps_only
  // Count presses (the tie-break, for masks()) or only frames (plan(): fewer nodes, since a
  // node then differs by no press count and, with no rate profile, by no held Down).
  bool count_presses = true;
  unsigned root_fc = 0;
  int base = 0;  // frames before the first searched one (lead, choice frame)
  int max_frames = 0;
  std::vector<Entry> roots;
  Set reach;             // poses the untimed move graph reaches from the start pose
  Set unfound;           // lock poses whose first lock frame is not known yet
  Set useful;            // poses from which an unfound lock pose can be reached (untimed)
  u128 useful_rows = 0;  // every column of the rows where `useful` has a pose
  // Per cell (y*8 + x): the fewest checkXMove moves the pill needs in row y to get there after
  // dropping into the row (compute_slides).
  uint8_t slide[128];
  uint8_t unfound_cells[128];  // cells (y*8 + x) where an unfound pose lies
  int n_unfound_cells = 0;
  int deadline[128];    // per cell (y*8 + x): this search trusts locks there up to this frame
  bool capped = false;  // this round cut a node or a lock by a deadline
  struct Best {
    uint16_t frame = kNoFrame;
    uint16_t presses = 0;
    uint16_t layer = 0;  // the frontier layer the locking node was in
    uint32_t entry = 0;
    uint8_t mask = 0;
    uint8_t pos = 0;  // y*8 + x of the lock pose
    uint8_t rot = 0;
  };
  std::array<Best, kNumPlacements> best;
  int found_this_frame[kNumPlacements];
  int n_found = 0;
  size_t expanded = 0;
  // Per frame and speedCounter: where a node may still be (cap_region's cache).
  u128 cap_rows[256];
  u128 cap_cells[256];
  uint32_t cap_stamp[256];
  uint32_t cap_gen = 0;

  explicit Search(const State& t) : g(t) { std::memset(cap_stamp, 0, sizeof(cap_stamp)); }

  int placement_of(int rot, int pos) const {
    return placement_index(same ? (rot & 1) : rot, 15 - (pos >> 3), pos & 7);
  }

  // e[n] (n = 1..17): the fewest frames until the n-th drop attempt from a node with speedCounter
  // `sc` whose next frame has parity `odd_next`: a fast drop on every odd frame, gravity as
  // checkYMove does it. Dropping as soon as possible is fastest for every n (a drop resets
  // speedCounter to 0 whatever caused it), so this is a lower bound for any inputs.
  void first_drops(uint8_t sc, bool odd_next, int e[18]) const {
    int count = 0;
    uint8_t s = sc;
    for (int k = 1; count < 17; ++k) {
      bool drop;
      if (odd_next == ((k & 1) == 1)) {
        drop = true;
      } else {
        s++;
        drop = limit < s;
      }
      if (drop) {
        s = 0;
        e[++count] = k;
      }
    }
  }

  // Where a node at frame `now` with speedCounter `sc` (next frame's parity `odd_next`) can still
  // lock on an unfound pose of some cell (y, x) by deadline[cell]: `cells` over y*8 + x, and
  // `rows`, the rows of `cells`. It needs (its row - y + 1) drop attempts (first_drops); a net
  // move of d columns right needs d checkXMove moves, never on two frames in a row, so the lock
  // comes 2d frames after `now` at the soonest; d columns left, with one X move every other
  // frame and A and B (each pressed every other frame) adding the kick or the double left,
  // 2*ceil(d/3).
  void cap_region(uint8_t sc, bool odd_next, int now, u128& rows, u128& cells) const {
    int e[18];
    first_drops(sc, odd_next, e);
    uint8_t drops_by[64];  // drop attempts possible within a budget of b frames
    for (int b = 0, n = 0; b < 64; ++b) {
      while (n < 17 && e[n + 1] <= b) ++n;
      drops_by[b] = static_cast<uint8_t>(n);
    }
    rows = 0;
    cells = 0;
    for (int i = 0; i < n_unfound_cells; ++i) {
      const int c = unfound_cells[i];
      const int budget = deadline[c] - now;
      if (budget < 1) continue;
      const int y = c >> 3, x = c & 7;
      int n = std::min(drops_by[std::min(budget, 63)], static_cast<uint8_t>(16 - y));
      if (n == 0) continue;
      if (slide[c] > 0) {  // from above: drop into row y, then slide[c] X moves, then the lock
        const int left = budget - (2 * slide[c] - 1);
        n = std::min(n, 1 + (left < 0 ? 0 : drops_by[std::min(left, 63)]));
      }
      const u128 band = rows_below(y + n) & ~rows_below(y);
      const int half = budget / 2;
      const int lo = std::max(0, x - half), hi = std::min(7, x + 3 * half);
      const unsigned colbits = (0xFFu << lo) & (0xFFu >> (7 - hi));
      rows |= band;
      cells |= band & (kCol0 * static_cast<u128>(colbits));
    }
  }

  // slide[]: per row, a breadth-first search over (column, orientation) where X moves cost one
  // and turns (with the kick and the double left) cost nothing, from the poses the pill can drop
  // into the row from (the same pose, reached by the untimed move graph, in the row above), or
  // from the start pose in its own row. A lower bound: the X moves of a real path in the row are at
  // least that many, never on two frames in a row, and the first can come on the frame the pill
  // drops into the row.
  void compute_slides(int x0, int y0, int rot0) {
    std::memset(slide, 0, sizeof(slide));
    for (int y = 0; y <= y0; ++y) {
      const uint8_t vh = static_cast<uint8_t>(g.v[0] >> (8 * y));
      const uint8_t vv = static_cast<uint8_t>(g.v[1] >> (8 * y));
      uint8_t h, v;  // reached poses, horizontal and vertical, by column bits
      if (y == y0) {
        h = (rot0 & 1) ? 0 : static_cast<uint8_t>(1u << x0);
        v = (rot0 & 1) ? static_cast<uint8_t>(1u << x0) : 0;
      } else {  // dropped into from a pose the untimed graph reaches in the row above
        h = vh & static_cast<uint8_t>((reach.r[0] | reach.r[2]) >> (8 * y + 8));
        v = vv & static_cast<uint8_t>((reach.r[1] | reach.r[3]) >> (8 * y + 8));
      }
      auto turns = [&]() {  // free: turn in place, or into horizontal one column left
        for (;;) {
          const uint8_t h2 = h | (vh & (v | static_cast<uint8_t>(v >> 1)));
          const uint8_t v2 = v | (vv & h);
          if (h2 == h && v2 == v) return;
          h = h2;
          v = v2;
        }
      };
      turns();
      uint8_t seen_h = 0, seen_v = 0;
      for (int k = 0; k < 16 && (h | v); ++k) {
        const uint8_t new_h = h & static_cast<uint8_t>(~seen_h);
        const uint8_t new_v = v & static_cast<uint8_t>(~seen_v);
        for (int x = 0; x < 8; ++x)
          if (((new_h | new_v) >> x) & 1) {
            uint8_t& sl = slide[y * 8 + x];
            if (!(((seen_h | seen_v) >> x) & 1)) sl = static_cast<uint8_t>(k);
          }
        seen_h |= h;
        seen_v |= v;
        h = seen_h | (vh & static_cast<uint8_t>((seen_h << 1) | (seen_h >> 1)));
        v = seen_v | (vv & static_cast<uint8_t>((seen_v << 1) | (seen_v >> 1)));
        turns();
        if (h == seen_h && v == seen_v) break;
      }
    }
  }

  // The backward closure of `unfound` over the untimed move graph (down, left, right, turns with
  // the kick and the double left into valid poses): outside it only found poses can lock.
  void update_useful() {
    Set w = unfound;
    n_unfound_cells = 0;
    const u128 cells = unfound.r[0] | unfound.r[1] | unfound.r[2] | unfound.r[3];
    for (u128 b = cells; b; b &= b - 1)
      unfound_cells[n_unfound_cells++] = static_cast<uint8_t>(ctz128(b));
    for (;;) {
      Set p;
      Set wv;
      for (int r = 0; r < 4; ++r) wv.r[r] = w.r[r] & g.v[r & 1];
      for (int r = 0; r < 4; ++r) {
        u128 x = wv.r[r] << 8;
        x |= (wv.r[r] >> 1) & ~kCol7;
        x |= (wv.r[r] << 1) & ~kCol0;
        x |= wv.r[(r + 1) & 3] | wv.r[(r + 3) & 3];
        if ((r & 1) == 1) x |= ((wv.r[(r + 1) & 3] | wv.r[(r + 3) & 3]) << 1) & ~kCol0;
        p.r[r] = w.r[r] | x;
      }
      if (p.r[0] == w.r[0] && p.r[1] == w.r[1] && p.r[2] == w.r[2] && p.r[3] == w.r[3]) break;
      w = p;
    }
    useful = w;
    const u128 any_pose = w.r[0] | w.r[1] | w.r[2] | w.r[3];
    useful_rows = 0;
    for (int y = 0; y < 16; ++y)
      if (static_cast<uint8_t>(any_pose >> (8 * y)))
        useful_rows |= static_cast<u128>(0xFF) << (8 * y);
  }

  // The forward closure of `start` over the same graph.
  // ---- a relaxed model without gravity ----
  // Drops only as fast drops (odd frames, and then no X move on that frame), at most one X move
  // on any other frame, any number of turns (with the kick and the double left) every frame. It
  // allows everything the game allows except gravity, so its bounds hold for a node whose
  // gravity cannot come before the last deadline (speedCounter + frames left <= the limit).
  bool odd_frame(int f) const { return ((root_fc + static_cast<unsigned>(f - base)) & 1) != 0; }

  // Poses from which turns reach `a`, and poses turns reach from `a` (fixpoints).
  void turns_back(Set& a) const {
    for (;;) {
      Set b = a;
      for (int r = 0; r < 4; ++r) {
        for (int t : {(r + 1) & 3, (r + 3) & 3}) {
          const u128 at = a.r[t] & g.v[t & 1];
          b.r[r] |= at;
          if ((t & 1) == 0) b.r[r] |= (at << 1) & ~kCol0;  // kick / double left into x-1
        }
      }
      if (b.r[0] == a.r[0] && b.r[1] == a.r[1] && b.r[2] == a.r[2] && b.r[3] == a.r[3]) return;
      a = b;
    }
  }
  void turns_fwd(Set& a) const {
    for (;;) {
      Set b = a;
      for (int r = 0; r < 4; ++r) {
        for (int t : {(r + 1) & 3, (r + 3) & 3}) {
          b.r[t] |= a.r[r] & g.v[t & 1];
          if ((t & 1) == 0) b.r[t] |= ((a.r[r] & ~kCol0) >> 1) & g.v[t & 1];
        }
      }
      if (b.r[0] == a.r[0] && b.r[1] == a.r[1] && b.r[2] == a.r[2] && b.r[3] == a.r[3]) return;
      a = b;
    }
  }

  // alive[f - base]: the poses from which, at frame f, the relaxed model still locks on some
  // unfound pose by its cell's deadline (backward from the last deadline).
  std::vector<Set> alive;
  int last_deadline = 0;
  void compute_alive() {
    last_deadline = base;
    for (int i = 0; i < n_unfound_cells; ++i)
      last_deadline = std::max(last_deadline, deadline[unfound_cells[i]]);
    alive.clear();
    const int n = last_deadline - base;
    if (n <= 0 || n > 256) return;  // no bound (a very large slack: the round is exhaustive)
    alive.assign(static_cast<size_t>(n) + 1, Set{{0, 0, 0, 0}});
    for (int f = last_deadline - 1; f >= base; --f) {
      Set tb = alive[static_cast<size_t>(f + 1 - base)];
      turns_back(tb);
      Set& a = alive[static_cast<size_t>(f - base)];
      for (int r = 0; r < 4; ++r) {
        const u128 v = g.v[r & 1];
        const u128 in = tb.r[r] & v;
        a.r[r] = tb.r[r] | ((in >> 1) & ~kCol7) | ((in << 1) & ~kCol0);  // wait, or one X move
      }
      if (odd_frame(f + 1)) {
        u128 cells = 0;  // a fast drop on frame f + 1 locks there by the cell's deadline
        for (int i = 0; i < n_unfound_cells; ++i)
          if (deadline[unfound_cells[i]] >= f + 1)
            cells |= static_cast<u128>(1) << unfound_cells[i];
        for (int r = 0; r < 4; ++r)
          a.r[r] |= ((tb.r[r] & g.v[r & 1]) << 8) | (unfound.r[r] & cells);
      }
    }
  }

  // The relaxed model's first lock frame (absolute) on every pose from the start, per cell (the
  // fewest over rotations); kNoFrame where it never locks.
  void relaxed_first_locks(int x0, int y0, int rot0, int first[128]) const {
    for (int c = 0; c < 128; ++c) first[c] = kNoFrame;
    Set reach{{0, 0, 0, 0}};
    reach.r[rot0] = static_cast<u128>(1) << (y0 * 8 + x0);
    turns_fwd(reach);
    bool stable_once = false;
    for (int f = base + 1; f < base + 512; ++f) {
      Set nx;
      for (int r = 0; r < 4; ++r) {
        const u128 v = g.v[r & 1];
        nx.r[r] =
            reach.r[r] | (((reach.r[r] & ~kCol7) << 1) & v) | (((reach.r[r] & ~kCol0) >> 1) & v);
      }
      turns_fwd(nx);
      if (odd_frame(f)) {
        Set d;
        for (int r = 0; r < 4; ++r) {
          const u128 v = g.v[r & 1];
          const u128 lock = reach.r[r] & ~(v << 8);
          for (u128 b = lock; b; b &= b - 1) {
            const int c = ctz128(b);
            if (first[c] == kNoFrame) first[c] = f;
          }
          d.r[r] = (reach.r[r] >> 8) & v;
        }
        turns_fwd(d);
        for (int r = 0; r < 4; ++r) nx.r[r] |= d.r[r];
      }
      const bool same = nx.r[0] == reach.r[0] && nx.r[1] == reach.r[1] && nx.r[2] == reach.r[2] &&
                        nx.r[3] == reach.r[3];
      if (same && stable_once && odd_frame(f)) return;
      stable_once = same;
      reach = nx;
    }
  }

  void update_reach(const Set& start) {
    Set f = start;
    for (;;) {
      Set n;
      for (int r = 0; r < 4; ++r) {
        const u128 v = g.v[r & 1];
        u128 x = (f.r[r] >> 8) & v;
        x |= ((f.r[r] & ~kCol7) << 1) & v;
        x |= ((f.r[r] & ~kCol0) >> 1) & v;
        const u128 turn = f.r[(r + 1) & 3] | f.r[(r + 3) & 3];
        x |= turn & v;
        if ((r & 1) == 0) x |= ((turn & ~kCol0) >> 1) & v;
        n.r[r] = f.r[r] | x;
      }
      if (n.r[0] == f.r[0] && n.r[1] == f.r[1] && n.r[2] == f.r[2] && n.r[3] == f.r[3]) break;
      f = n;
    }
    reach = f;
  }
};

namespace {

// Frames until the pill can be steered, and the state the search starts from. Returns false
// when there is nothing to plan (status set in `out`).
bool lead_in(const State& s0, const uint8_t* prefix, int prefix_len, Plan& out) {
  out.lead.clear();
  out.lead_presses = 0;
  out.since_press = 1 << 20;
  out.root_chooses = false;
  if (s0.demo) {  // the demo's own input table drives the pill, not the masks
    out.status = kPlanNoPill;
    return false;
  }
  State& t = out.root;
  t = s0;
  auto lead_step = [&](uint8_t mask) -> bool {  // true when this frame locked the pill
    const uint8_t rising = mask & static_cast<uint8_t>(~t.btns_held);
    out.lead_presses += popcount8(rising);
    out.since_press = rising ? 0 : out.since_press + 1;
    const uint8_t px = t.pill_x, py = t.pill_y, pr = t.pill_rotation;
    const bool falling = t.phase == kPhasePlaying && t.next_action == kActPillFalling;
    step(t, mask);
    out.lead.push_back(mask);
    if (falling && t.lock_event) {
      int rot = pr & 3;
      if (t.pill_color[0] == t.pill_color[1]) rot &= 1;
      const int idx = placement_index(rot, 15 - py, px);
      out.status = kPlanLockedInPrefix;
      out.placements.push_back(
          {static_cast<uint16_t>(idx), static_cast<uint16_t>(out.lead.size())});
      out.reachable[idx] = 1;
      return true;
    }
    return false;
  };
  for (int i = 0; i < prefix_len; ++i)
    if (lead_step(prefix[i])) return false;
  // Frames until the pill falls: no buttons, but the last one (the frame that turns
  // action_sendPillFinished into action_pillFalling) holds what the search picks.
  int waited = 0;
  while (!(t.phase == kPhasePlaying &&
           (t.next_action == kActPillFalling || t.next_action == kActSendPillFinished))) {
    if (t.phase != kPhasePlaying || t.level_fail || waited > 4000) {
      out.status = kPlanNoPill;
      return false;
    }
    lead_step(0);
    ++waited;
  }
  out.root_chooses = t.next_action == kActSendPillFinished;
  const bool horizontal = (t.pill_rotation & 1) == 0;
  if (t.pill_x > 7 || t.pill_y > 15 || t.pill_rotation > 3 || (horizontal && t.pill_x == 7)) {
    throw std::invalid_argument(
        "the falling pill's pose is not one the game can produce: x=" + std::to_string(t.pill_x) +
        " y=" + std::to_string(t.pill_y) + " rotation=" + std::to_string(t.pill_rotation) +
        " (x 0..7, 0..6 when horizontal; y 0..15; rotation 0..3)");
  }
  return true;
}

uint8_t cool_after(int interval, int since) {
  // frames that must still pass before the next press frame
  if (interval <= 1) return 0;
  return static_cast<uint8_t>(std::max(0, interval - 1 - since));
}

inline uint32_t hash_key(uint64_t k, uint32_t mask) {
  return static_cast<uint32_t>((k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

}  // namespace

// Tables, roots and goal poses of one search. Returns false on a top-out on spawn.
bool Planner::setup(Search& S, const Plan& p, int target) {
  const State& t = p.root;
  const PlanOptions& opt = p.options;
  S.interval = std::max(0, opt.min_press_interval);
  S.taps = opt.taps_only;
  S.same = t.pill_color[0] == t.pill_color[1];
  S.max_frames = opt.max_frames;
  {
    unsigned index = kBaseSpeedSettingValue[t.speed_setting % kNumSpeeds] + t.speed_ups;
    if (index >= sizeof(kSpeedCounterTable)) index = sizeof(kSpeedCounterTable) - 1;
    S.limit = kSpeedCounterTable[index];  // checkYMove: speedCounterTable[base + speedUps]
  }
  const Geometry& g = S.g;
  const int interval = S.interval;

  // Roots.
  S.roots.clear();
  const uint8_t held0 = t.btns_held & kUsedButtons;
  const int root_pos = t.pill_y * 8 + t.pill_x;
  if (!p.root_chooses) {
    Ctrl c{t.speed_counter, (held0 & kLR) ? t.hor_velocity : uint8_t{0}, held0,
           cool_after(interval, p.since_press), 0};
    Entry e{pack(c), {0, 0, 0, 0}};
    e.s[t.pill_rotation] = static_cast<u128>(1) << root_pos;
    S.roots.push_back(e);
    S.root_fc = t.frame_counter;
  } else {
    // The choice frame: its held buttons are the first falling frame's previous ones.
    S.root_fc = static_cast<uint8_t>(t.frame_counter + 1);
    for (int m = 0; m < 32; ++m) {
      const uint8_t mask =
          static_cast<uint8_t>(((m & 1) ? kRight : 0) | ((m & 2) ? kLeft : 0) |
                               ((m & 4) ? kDown : 0) | ((m & 8) ? kB : 0) | ((m & 16) ? kA : 0));
      const uint8_t rising = mask & static_cast<uint8_t>(~t.btns_held);
      if (interval > 0 && rising &&
          (popcount8(rising) > 1 || cool_after(interval, p.since_press) > 0))
        continue;
      if (S.taps && (mask & kLR)) continue;
      State c = t;
      step(c, mask);
      if (c.phase != kPhasePlaying || c.next_action != kActPillFalling) return false;
      Ctrl k{c.speed_counter, (mask & kLR) ? c.hor_velocity : uint8_t{0}, mask,
             rising ? cool_after(interval, 0) : cool_after(interval, p.since_press + 1),
             static_cast<uint16_t>(popcount8(rising))};
      Entry e{pack(k), {0, 0, 0, 0}};
      e.s[c.pill_rotation] = static_cast<u128>(1) << (c.pill_y * 8 + c.pill_x);
      S.roots.push_back(e);
    }
  }
  S.base = static_cast<int>(p.lead.size()) + (p.root_chooses ? 1 : 0);

  // Lock poses to find: every valid pose with no valid pose below that the untimed move graph
  // reaches from the start (and the start pose itself if it overlaps the field: it locks there).
  Set start{{0, 0, 0, 0}};
  start.r[t.pill_rotation] = static_cast<u128>(1) << root_pos;
  S.update_reach(start);
  S.compute_slides(t.pill_x, t.pill_y, t.pill_rotation);
  for (int r = 0; r < 4; ++r) S.unfound.r[r] = S.reach.r[r] & g.v[r & 1] & ~(g.v[r & 1] << 8);
  if (!g.ok(t.pill_x, t.pill_y, t.pill_rotation))
    S.unfound.r[t.pill_rotation] |= static_cast<u128>(1) << root_pos;
  if (target != -1) {  // masks(): one placement; all_masks() (-2): the plan's placements
    for (int r = 0; r < 4; ++r) {
      u128 only = 0;
      for (u128 b = S.unfound.r[r]; b; b &= b - 1) {
        const int pos = ctz128(b);
        const int idx = S.placement_of(r, pos);
        if (target >= 0 ? idx == target : p.reachable[idx] != 0)
          only |= static_cast<u128>(1) << pos;
      }
      S.unfound.r[r] = only;
    }
  }
  S.update_useful();
  return true;
}

// One breadth-first pass by frame from the roots. Locks are recorded for unfound poses no later
// than their cell's deadline; poses that cannot lock on any unfound pose by its deadline (the
// bounds of cap_region) or at all (outside `useful`) are dropped from the nodes.
void Planner::run_round(Search& S, bool keep_history) {
  const Geometry& g = S.g;
  const int interval = S.interval;
  std::vector<Entry>& cur = cur_;
  std::vector<Entry>& next = next_;
  cur = S.roots;
  if (keep_history) {
    history_.clear();
    history_.push_back(cur);
  }
  S.capped = false;
  if (slot_key_.empty()) {
    slot_key_.assign(1024, 0);
    slot_idx_.assign(1024, 0);
    slot_stamp_.assign(1024, 0);
  }
  for (int layer = 0; !cur.empty() && S.base + layer < S.max_frames; ++layer) {
    const bool odd = ((S.root_fc + layer + 1) & 1) != 0;
    const uint16_t frame = static_cast<uint16_t>(S.base + layer + 1);
    next.clear();
    if (++stamp_ == 0) {
      std::fill(slot_stamp_.begin(), slot_stamp_.end(), 0);
      stamp_ = 1;
    }
    uint32_t smask = static_cast<uint32_t>(slot_key_.size() - 1);
    const Set& W = S.useful;
    const bool have_alive = frame - S.base < static_cast<int>(S.alive.size());
    const Set* alive = have_alive ? &S.alive[static_cast<size_t>(frame - S.base)] : nullptr;
    const int frames_left = S.last_deadline - frame;
    auto emit = [&](const Set& s, uint64_t key, u128 region, uint8_t sc) {
      u128 a = s.r[0] & W.r[0], b = s.r[1] & W.r[1], c = s.r[2] & W.r[2], d = s.r[3] & W.r[3];
      if ((a | b | c | d) & ~region) S.capped = true;
      a &= region;
      b &= region;
      c &= region;
      d &= region;
      if (alive && sc + frames_left <= S.limit) {  // no gravity before the last deadline
        const u128 a1 = a & alive->r[0], b1 = b & alive->r[1], c1 = c & alive->r[2],
                   d1 = d & alive->r[3];
        if ((a ^ a1) | (b ^ b1) | (c ^ c1) | (d ^ d1)) S.capped = true;
        a = a1;
        b = b1;
        c = c1;
        d = d1;
      }
      if ((a | b | c | d) == 0) return;
      if (2 * (next.size() + 1) > slot_key_.size()) {  // grow and rehash
        const size_t cap = slot_key_.size() * 2;
        slot_key_.assign(cap, 0);
        slot_idx_.assign(cap, 0);
        slot_stamp_.assign(cap, 0);
        stamp_ = 1;
        smask = static_cast<uint32_t>(cap - 1);
        for (uint32_t i = 0; i < next.size(); ++i) {
          uint32_t h = hash_key(next[i].key, smask);
          while (slot_stamp_[h] == stamp_) h = (h + 1) & smask;
          slot_key_[h] = next[i].key;
          slot_idx_[h] = i;
          slot_stamp_[h] = stamp_;
        }
      }
      uint32_t h = hash_key(key, smask);
      while (slot_stamp_[h] == stamp_) {
        if (slot_key_[h] == key) {
          Entry& e = next[slot_idx_[h]];
          e.s[0] |= a;
          e.s[1] |= b;
          e.s[2] |= c;
          e.s[3] |= d;
          return;
        }
        h = (h + 1) & smask;
      }
      slot_key_[h] = key;
      slot_idx_[h] = static_cast<uint32_t>(next.size());
      slot_stamp_[h] = stamp_;
      next.push_back(Entry{key, {a, b, c, d}});
    };
    if (++S.cap_gen == 0) {
      std::memset(S.cap_stamp, 0, sizeof(S.cap_stamp));
      S.cap_gen = 1;
    }
    auto cap_for = [&](uint8_t sc) {
      if (S.cap_stamp[sc] != S.cap_gen) {
        S.cap_stamp[sc] = S.cap_gen;
        S.cap_region(sc, !odd, frame, S.cap_rows[sc], S.cap_cells[sc]);
      }
    };
    const uint8_t keep_held = (S.count_presses || interval > 0)
                                  ? kUsedButtons
                                  : static_cast<uint8_t>(kUsedButtons & ~kDown);
    S.n_found = 0;
    auto record_locks = [&](const Set& lock, uint32_t ei, uint8_t mask, uint16_t presses) {
      for (int r = 0; r < 4; ++r) {
        for (u128 bits = lock.r[r] & S.unfound.r[r]; bits; bits &= bits - 1) {
          const int pos = ctz128(bits);
          if (frame > S.deadline[pos]) {
            S.capped = true;
            continue;
          }
          const int idx = S.placement_of(r, pos);
          Search::Best& b = S.best[idx];
          if (b.frame == kNoFrame) {
            S.found_this_frame[S.n_found++] = idx;
          } else if (b.frame != frame || b.presses <= presses) {
            continue;
          }
          b = {frame,
               presses,
               static_cast<uint16_t>(layer),
               ei,
               mask,
               static_cast<uint8_t>(pos),
               static_cast<uint8_t>(r)};
        }
      }
    };

    for (uint32_t ei = 0; ei < cur.size(); ++ei) {
      const Entry& e = cur[ei];
      ++S.expanded;
      const Ctrl c = unpack(e.key);
      const uint8_t H = c.held;
      const uint8_t sc1 = static_cast<uint8_t>(c.sc + 1);
      const bool gravity = S.limit < sc1;
      const bool can_press = interval == 0 || c.cool == 0;
      // checkYMove: the drop (gravity, or the fast drop on odd frames with Down alone).
      Set ydrop, lock;
      bool have_drop = false;
      auto drop = [&]() {
        if (have_drop) return;
        have_drop = true;
        for (int r = 0; r < 4; ++r) {
          const u128 v = g.v[r & 1];
          lock.r[r] = e.s[r] & ~(v << 8);
          ydrop.r[r] = (e.s[r] >> 8) & v;
        }
      };
      if (gravity) {
        drop();
        record_locks(lock, ei, H & kDown, c.presses);
      } else if (odd && (can_press || (H & kDown))) {
        drop();
        const uint8_t rising = (H & kDown) ? 0 : 1;
        record_locks(lock, ei, kDown,
                     static_cast<uint16_t>(c.presses + (S.count_presses ? rising : 0)));
      }
      const uint8_t free_ab = kAB & static_cast<uint8_t>(~H);
      for (int lri = 0; lri < 4; ++lri) {
        static constexpr uint8_t kLrChoices[4] = {0, kRight, kLeft, kLeft | kRight};
        const uint8_t lr = kLrChoices[lri];
        if (S.taps && (lr & H)) continue;
        uint8_t downs[2];
        int nd = 0;
        if (interval == 0 && !(odd && lr == 0)) {
          downs[nd++] = H & kDown;  // Down cannot act: keep it as it is (exact, see docs)
        } else {
          downs[nd++] = 0;
          downs[nd++] = kDown;
        }
        for (int di = 0; di < nd; ++di) {
          const uint8_t m0 = lr | downs[di];
          const uint8_t rise0 = m0 & static_cast<uint8_t>(~H);
          if (interval > 0 && rise0 && (!can_press || popcount8(rise0) > 1)) continue;
          const bool fast = odd && m0 == kDown;
          const bool dropping = fast || gravity;
          Set ys;
          uint8_t sc2;
          if (dropping) {
            drop();
            ys = ydrop;
            sc2 = 0;
          } else {
            for (int r = 0; r < 4; ++r) ys.r[r] = e.s[r];
            sc2 = sc1;
          }
          // The deadline cut: rows now (rows do not change after checkYMove), cells at emit.
          cap_for(sc2);
          const u128 rows = S.cap_rows[sc2];
          const u128 region = S.cap_cells[sc2];
          u128 cut = 0;
          for (int r = 0; r < 4; ++r) {
            cut |= ys.r[r] & ~rows;
            ys.r[r] &= rows;
          }
          if (cut & S.useful_rows) S.capped = true;
          if (!any(ys)) continue;
          // checkXMove.
          const uint8_t pressed_lr = lr & static_cast<uint8_t>(~H);
          bool move = false;
          uint8_t hv2 = 0;
          if (pressed_lr) {
            move = true;
            hv2 = 0;
          } else if (lr) {
            hv2 = static_cast<uint8_t>(c.hv + 1);
            if (static_cast<int8_t>(hv2 - 0x10) >= 0) {
              hv2 = 0x10 - 0x06;
              move = true;
            }
          }
          Set n = ys, bl{{0, 0, 0, 0}};
          if (move) {
            for (int r = 0; r < 4; ++r) {
              const u128 v = g.v[r & 1];
              u128 o = n.r[r], b = 0;
              if (lr & kRight) move_right(o, v, (r & 1) != 0, o, b);
              if (lr & kLeft) {
                u128 o2, b2, o3, b3;
                move_left(o, v, o2, b2);
                move_left(b, v, o3, b3);
                o = o2;
                b = b2 | o3 | b3;
              }
              n.r[r] = o;
              bl.r[r] = b;
            }
          }
          const bool has_bl = any(bl);
          // checkRotate, for each choice of new A/B presses.
          for (int abi = 0; abi < 4; ++abi) {
            static constexpr uint8_t kAbChoices[4] = {0, kA, kB, kA | kB};
            const uint8_t ab = kAbChoices[abi];
            if (ab & ~free_ab) continue;
            const uint8_t M = m0 | ab;
            const uint8_t rising = M & static_cast<uint8_t>(~H);
            if (interval > 0 && rising && (!can_press || popcount8(rising) > 1)) continue;
            Ctrl k{sc2, hv2, static_cast<uint8_t>(M & keep_held), 0,
                   static_cast<uint16_t>(c.presses + (S.count_presses ? popcount8(rising) : 0))};
            if (interval > 1) {
              k.cool = rising ? static_cast<uint8_t>(interval - 1)
                              : static_cast<uint8_t>(c.cool ? c.cool - 1 : 0);
            }
            const bool left = (M & kLeft) != 0;
            Set n2 = n, b2 = bl;
            if (ab == kA || ab == kB) {
              rotate_set(n2, ab == kA ? -1 : 1, left, g);
              if (has_bl) rotate_set(b2, ab == kA ? -1 : 1, left, g);
            } else if (ab) {
              rotate_both(n2, left, g);
              if (has_bl) rotate_both(b2, left, g);
            }
            if (!lr) k.hv = 0;
            emit(n2, pack(k), region, sc2);
            if (has_bl) {
              k.hv = kHvBlocked;
              emit(b2, pack(k), region, sc2);
            }
          }
        }
      }
    }

    // Poses first locked on this frame are final: drop them from the goal.
    if (S.n_found > 0) {
      for (int i = 0; i < S.n_found; ++i) {
        const int idx = S.found_this_frame[i];
        const int pos = (15 - ((idx & 127) >> 3)) * 8 + (idx & 7);
        const int rot = idx >> 7;
        S.unfound.r[rot] &= ~(static_cast<u128>(1) << pos);
        if (S.same) S.unfound.r[rot + 2] &= ~(static_cast<u128>(1) << pos);
      }
      S.update_useful();
    }
    if (!any(S.unfound)) break;

    // Dominance within one base (speed counter, DAS counter, Left/Right, cooldown): a pose is
    // dropped from a node when another node of the frame has it with A/B no more held, Down no
    // less held, and no more presses (one more when Down must still be pressed). Nodes of a base
    // come by presses; below[c] is the union of the lower press levels' sets per A/B/Down.
    cur.clear();
    order_.resize(next.size());
    for (uint32_t i = 0; i < next.size(); ++i) order_[i] = i;
    std::sort(order_.begin(), order_.end(),
              [&](uint32_t a, uint32_t b) { return next[a].key < next[b].key; });
    auto keep = [&](Entry& e) {
      u128 any_left = 0;
      for (int r = 0; r < 4; ++r) {
        e.s[r] &= S.useful.r[r];
        any_left |= e.s[r];
      }
      if (any_left) cur.push_back(e);
    };
    size_t i = 0;
    while (i < order_.size()) {
      size_t j = i + 1;
      const uint64_t basek = next[order_[i]].key >> 24;
      while (j < order_.size() && (next[order_[j]].key >> 24) == basek) ++j;
      if (j == i + 1) {
        keep(next[order_[i]]);
        i = j;
        continue;
      }
      Set below[8], level[8];
      unsigned have_below = 0;
      for (size_t a = i; a < j;) {
        const uint64_t presses_of = (next[order_[a]].key >> 8) & 0xFFFF;
        size_t b = a;
        unsigned have_level = 0;
        for (; b < j && ((next[order_[b]].key >> 8) & 0xFFFF) == presses_of; ++b) {
          const int c = abd_index(next[order_[b]].key);
          for (int r = 0; r < 4; ++r) level[c].r[r] = next[order_[b]].s[r];
          have_level |= 1u << c;
        }
        for (size_t k = a; k < b; ++k) {
          Entry& e = next[order_[k]];
          const int ce = abd_index(e.key);
          u128 dom[4] = {0, 0, 0, 0};
          for (int c = 0; c < 8; ++c) {
            if ((c & 6) & ~(ce & 6)) continue;          // holds A or B where e does not
            const bool penalty = (ce & 1) && !(c & 1);  // e holds Down, c must press it
            if (penalty && interval > 0) continue;
            if ((have_below >> c) & 1)
              for (int r = 0; r < 4; ++r) dom[r] |= below[c].r[r];
            if (!penalty && c != ce && ((have_level >> c) & 1))
              for (int r = 0; r < 4; ++r) dom[r] |= level[c].r[r];
          }
          Entry kept = e;
          for (int r = 0; r < 4; ++r) kept.s[r] &= ~dom[r];
          keep(kept);
        }
        for (int c = 0; c < 8; ++c) {
          if (!((have_level >> c) & 1)) continue;
          if ((have_below >> c) & 1) {
            for (int r = 0; r < 4; ++r) below[c].r[r] |= level[c].r[r];
          } else {
            below[c] = level[c];
          }
        }
        have_below |= have_level;
        a = b;
      }
      i = j;
    }
    if (keep_history) history_.push_back(cur);
  }
}

void Planner::plan(const State& s0, const uint8_t* prefix, int prefix_len, const PlanOptions& opt,
                   Plan& out) {
  out.status = kPlanOk;
  out.placements.clear();
  out.reachable.fill(0);
  out.nodes = 0;
  out.options = opt;
  if (!lead_in(s0, prefix, prefix_len, out)) return;
  Search S(out.root);
  S.count_presses = false;
  if (!setup(S, out, -1)) return;  // a top-out on spawn: no placements
  // Rounds of growing slack: a round trusts a lock in cell c only up to the start's bound to c
  // (cap_region's: drops, columns, slide) plus the slack, and keeps only nodes that could still
  // make such a lock. A pose found within its deadline is exact (every node on a faster or
  // equally fast path met every deadline test); the others wait for a later round. A round that
  // cut nothing was exhaustive: what is still unfound is unreachable.
  int e[18];
  const Ctrl rc = unpack(S.roots[0].key);
  S.first_drops(rc.sc, ((S.root_fc + 1) & 1) != 0, e);
  const int y0 = out.root.pill_y, x0 = out.root.pill_x;
  int relaxed[128];
  S.relaxed_first_locks(x0, y0, out.root.pill_rotation, relaxed);
  const int gravity = rc.sc <= S.limit ? S.limit + 1 - rc.sc : 1;  // frames to the first gravity
  int fastest[128];  // cap_region's bound from the start to each cell
  for (int c = 0; c < 128; ++c) {
    const int y = c >> 3, x = c & 7;
    fastest[c] = y <= y0 ? std::max({e[y0 - y + 1], 2 * std::max(0, x - x0),
                                     2 * ((std::max(0, x0 - x) + 2) / 3)})
                         : 0;
    if (y < y0 && S.slide[c] > 0) fastest[c] = std::max(fastest[c], e[y0 - y] + 2 * S.slide[c] - 1);
    // The relaxed model holds until the first frame gravity can come.
    if (fastest[c]) {
      const int bound = relaxed[c] == kNoFrame ? 1 << 20 : relaxed[c] - S.base;
      fastest[c] = std::max(fastest[c], std::min(bound, gravity));
    }
  }
  for (int slack = 0; slack <= 2 * S.max_frames; slack = slack ? slack * 2 : 2) {
    for (int c = 0; c < 128; ++c) S.deadline[c] = fastest[c] ? S.base + fastest[c] + slack : 0;
    S.compute_alive();
    run_round(S, false);
    if (!any(S.unfound) || !S.capped) break;
    S.update_useful();
  }
  out.nodes = S.expanded;
  for (int idx = 0; idx < kNumPlacements; ++idx) {
    const Search::Best& b = S.best[idx];
    if (b.frame == kNoFrame) continue;
    out.placements.push_back({static_cast<uint16_t>(idx), b.frame});
    out.reachable[idx] = 1;
  }
}

bool Planner::backtrack(const Search& S, const Plan& p, int index, std::vector<uint8_t>& out,
                        int* presses) {
  const Search::Best& b = S.best[index];
  if (b.frame == kNoFrame) return false;
  // Walk back from the locking node: each node's mask is its held buttons; its parent is a pose
  // of the previous layer that one frame of that mask takes onto it.
  path_.clear();
  path_.push_back(b.mask);
  int layer = b.layer;
  uint32_t ei = b.entry;
  int pos = b.pos, rot = b.rot;
  while (layer > 0) {
    const Ctrl ce = unpack(history_[layer][ei].key);
    const uint8_t M = ce.held;
    const bool odd = ((S.root_fc + layer) & 1) != 0;
    const int y = pos >> 3, x = pos & 7;
    // The parent is in the same row, or one row up when this frame dropped (speedCounter 0);
    // within 3 columns (one X move left or right, up to two more left from turns).
    const u128 cols = every_row(static_cast<uint8_t>((0x7Fu << x) >> 3));
    u128 rows = static_cast<u128>(0xFF) << (y * 8);
    if (ce.sc == 0 && y < 15) rows |= static_cast<u128>(0xFF) << (y * 8 + 8);
    const u128 near = rows & cols;
    bool found = false;
    const std::vector<Entry>& prev = history_[layer - 1];
    for (uint32_t fi = 0; fi < prev.size() && !found; ++fi) {
      const Ctrl cf = unpack(prev[fi].key);
      if (M & cf.held & kAB) continue;
      const uint8_t rising = M & static_cast<uint8_t>(~cf.held);
      if (S.taps && (M & cf.held & kLR)) continue;
      if (S.interval > 0 && rising && (popcount8(rising) > 1 || cf.cool > 0)) continue;
      if (cf.presses + (S.count_presses ? popcount8(rising) : 0) != ce.presses) continue;
      if (ce.sc != 0 && static_cast<uint8_t>(cf.sc + 1) != ce.sc) continue;
      for (int r = 0; r < 4 && !found; ++r) {
        for (u128 bits = prev[fi].s[r] & near; bits; bits &= bits - 1) {
          const int q = ctz128(bits);
          Micro m{static_cast<uint8_t>(q & 7),
                  static_cast<uint8_t>(q >> 3),
                  static_cast<uint8_t>(r),
                  cf.sc,
                  cf.hv,
                  cf.held,
                  cf.cool};
          if (falling_frame(S.g, S.limit, odd, M, m)) continue;
          uint8_t cool = 0;
          if (S.interval > 1) {
            cool = rising ? static_cast<uint8_t>(S.interval - 1)
                          : static_cast<uint8_t>(cf.cool ? cf.cool - 1 : 0);
          }
          if (m.x == x && m.y == y && m.rot == rot && m.sc == ce.sc && m.hv == ce.hv &&
              cool == ce.cool) {
            found = true;
            pos = q;
            rot = r;
            ei = fi;
            break;
          }
        }
      }
    }
    if (!found) return false;  // cannot happen: every node has a parent in the layer before
    path_.push_back(M);
    --layer;
  }
  if (p.root_chooses) path_.push_back(unpack(history_[0][ei].key).held);
  out = p.lead;
  out.insert(out.end(), path_.rbegin(), path_.rend());
  if (presses) *presses = p.lead_presses + b.presses;
  return true;
}

bool Planner::masks(const Plan& p, int index, std::vector<uint8_t>& out, int* presses) {
  out.clear();
  if (index < 0 || index >= kNumPlacements || !p.reachable[index]) return false;
  if (p.status == kPlanLockedInPrefix) {
    out = p.lead;
    if (presses) *presses = p.lead_presses;
    return true;
  }
  int lock_frame = 0;
  for (const PlannedPlacement& pl : p.placements)
    if (pl.index == index) lock_frame = pl.lock_frame;
  Search S(p.root);
  if (!setup(S, p, index)) return false;
  for (int c = 0; c < 128; ++c) S.deadline[c] = lock_frame;
  S.compute_alive();
  run_round(S, true);
  return backtrack(S, p, index, out, presses);
}

bool Planner::all_masks(const Plan& p, std::vector<std::vector<uint8_t>>& out,
                        std::vector<int>& presses) {
  out.assign(p.placements.size(), {});
  presses.assign(p.placements.size(), 0);
  if (p.placements.empty()) return true;
  if (p.status == kPlanLockedInPrefix) {
    out[0] = p.lead;
    presses[0] = p.lead_presses;
    return true;
  }
  Search S(p.root);
  if (!setup(S, p, -2)) return false;
  // Each cell's deadline: the latest first-lock frame among the plan's poses there.
  for (int c = 0; c < 128; ++c) S.deadline[c] = 0;
  for (const PlannedPlacement& pl : p.placements) {
    const int c = (15 - ((pl.index & 127) >> 3)) * 8 + (pl.index & 7);
    S.deadline[c] = std::max(S.deadline[c], static_cast<int>(pl.lock_frame));
  }
  S.compute_alive();
  run_round(S, true);
  for (size_t i = 0; i < p.placements.size(); ++i)
    if (!backtrack(S, p, p.placements[i].index, out[i], &presses[i])) return false;
  return true;
}

void plan(const State& s, const uint8_t* prefix, int prefix_len, const PlanOptions& opt,
          Plan& out) {
  thread_local Planner planner;
  planner.plan(s, prefix, prefix_len, opt, out);
}

bool plan_masks(const Plan& p, int index, std::vector<uint8_t>& out, int* presses) {
  thread_local Planner planner;
  return planner.masks(p, index, out, presses);
}

bool plan_all_masks(const Plan& p, std::vector<std::vector<uint8_t>>& out,
                    std::vector<int>& presses) {
  thread_local Planner planner;
  return planner.all_masks(p, out, presses);
}

}  // namespace drm
