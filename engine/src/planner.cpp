// Reachability planner: breadth-first search by frame over the falling pill's microstate
// (x, y, rotation, speedCounter, horVelocity, held buttons, frameCounter parity, press cooldown).
// The per-frame transition re-implements action_pillFalling $8D66 of game.cpp exactly; the field
// does not change while a pill falls, so pillMoveValidation $90E3 becomes a 16x8 table per
// orientation built once per plan. tests/test_planner.py replays every plan through drm::step.
#include "planner.h"

#include <algorithm>
#include <cstring>

#include "nes_tables.h"

namespace drm {
namespace {

constexpr uint8_t kUsedButtons = kA | kB | kDown | kLeft | kRight;  // Up/Start/Select never help
constexpr uint16_t kNoFrame = 0xFFFF;

inline int popcount8(unsigned v) { return __builtin_popcount(v & 0xFF); }

// pillMoveValidation for a fixed field: valid[orientation][y][x], y 0..15 from the bottom.
struct Validity {
  bool v[2][16][8];
  explicit Validity(const State& s) {
    auto empty = [&](int pos) {
      pos &= 0xFF;
      return pos >= kFieldSize || s.field[pos] == kEmpty;
    };
    for (int y = 0; y < 16; ++y) {
      const int base = kPillFieldPosRelativeToPillY[y];
      for (int x = 0; x < 8; ++x) {
        v[0][y][x] = x < 7 && empty(base + x) && empty(base + x + 1);
        v[1][y][x] = empty(base + x) && empty(base + x - 8);
      }
    }
  }
  // x and y are the game's bytes (x may be $FF after a kick from column 0).
  bool ok(uint8_t x, uint8_t y, uint8_t rot) const {
    if (x > 7 || y > 15) return false;
    return v[rot & 1][y][x];
  }
};

struct Micro {
  uint8_t x, y, rot, sc, hv, held, cool;
};

inline uint64_t key_of(const Micro& m, unsigned parity) {
  return static_cast<uint64_t>(m.x) | static_cast<uint64_t>(m.y) << 3 |
         static_cast<uint64_t>(m.rot) << 7 | static_cast<uint64_t>(m.sc) << 9 |
         static_cast<uint64_t>(m.hv) << 17 | static_cast<uint64_t>(m.held) << 25 |
         static_cast<uint64_t>(parity) << 33 | static_cast<uint64_t>(m.cool) << 34;
}

// horVelocity only matters while Left or Right stays held; with neither held it is dead state.
inline void canonical(Micro& m) {
  m.held &= kUsedButtons;
  if ((m.held & (kLeft | kRight)) == 0) m.hv = 0;
}

// pillRotateValidation $8E70.
inline void rotate_validation(const Validity& val, Micro& m, uint8_t rot_copy, uint8_t x_copy) {
  if ((m.rot & 1) == 0) {
    if (val.ok(m.x, m.y, m.rot)) {
      if (m.held & kLeft) {  // double left
        m.x--;
        if (!val.ok(m.x, m.y, m.rot)) m.x++;
      }
      return;
    }
    m.x--;  // kick
  }
  if (val.ok(m.x, m.y, m.rot)) return;
  m.rot = rot_copy;
  m.x = x_copy;
}

// One frame of action_pillFalling with `mask` held. `odd` is frameCounter's parity after the
// NMI's increment. Returns true when the pill locks; the lock pose is then m.x, m.y, m.rot.
inline bool falling_frame(const Validity& val, uint8_t limit, bool odd, uint8_t mask, Micro& m) {
  const uint8_t pressed = mask & static_cast<uint8_t>(~m.held);
  m.held = mask;
  // checkYMove $8D80
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
    if (m.y == 0xFF || !val.ok(m.x, m.y, m.rot)) {
      m.y++;
      return true;
    }
  }
  // checkXMove $8DCF
  bool move = true;
  if ((pressed & (kLeft | kRight)) == 0) {
    if ((mask & (kLeft | kRight)) == 0) {
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
        if (!val.ok(m.x, m.y, m.rot)) {
          m.x--;
          m.hv = 0x0F;
        }
      }
    }
    if (mask & kLeft) {
      if (m.x != 0) {
        m.x--;
        if (!val.ok(m.x, m.y, m.rot)) {
          m.x++;
          m.hv = 0x0F;
        }
      }
    }
  }
  // checkRotate $8E3B
  const uint8_t rot_copy = m.rot;
  const uint8_t x_copy = m.x;
  if (pressed & kA) {
    m.rot = (m.rot - 1) & 3;
    rotate_validation(val, m, rot_copy, x_copy);
  }
  if (pressed & kB) {
    m.rot = (m.rot + 1) & 3;
    rotate_validation(val, m, rot_copy, x_copy);
  }
  return false;
}

// The 32 masks over A, B, Down, Left, Right; fewest buttons first so that equal-press ties
// keep the plainer mask.
struct Alphabet {
  uint8_t m[32];
  Alphabet() {
    const uint8_t bits[5] = {kDown, kLeft, kRight, kA, kB};
    int n = 0;
    for (int c = 0; c <= 5; ++c)
      for (int i = 0; i < 32; ++i)
        if (popcount8(static_cast<unsigned>(i)) == c) {
          uint8_t mask = 0;
          for (int b = 0; b < 5; ++b)
            if (i & (1 << b)) mask |= bits[b];
          m[n++] = mask;
        }
  }
};
const Alphabet kAlphabet;

struct Best {
  uint16_t frame = kNoFrame;
  uint16_t presses = 0;
  int32_t node = -1;
  uint8_t mask = 0;
};

}  // namespace

Planner::Planner() {
  mask_bits_ = 16;
  slots_.assign(size_t{1} << mask_bits_, Slot{0, -1, 0});
  nodes_.reserve(1 << 14);
}

void Planner::grow() {
  const size_t cap = size_t{1} << (mask_bits_ + 1);
  std::vector<Slot> slots(cap, Slot{0, -1, 0});
  const size_t m = cap - 1;
  for (const Slot& s : slots_) {
    if (s.stamp != gen_) continue;
    size_t h = (s.key * 0x9E3779B97F4A7C15ull) >> (64 - (mask_bits_ + 1));
    while (slots[h].stamp == gen_) h = (h + 1) & m;
    slots[h] = s;
  }
  slots_.swap(slots);
  mask_bits_++;
}

int32_t Planner::find(uint64_t key) const {
  const size_t m = slots_.size() - 1;
  size_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - mask_bits_);
  while (slots_[h].stamp == gen_) {
    if (slots_[h].key == key) return slots_[h].node;
    h = (h + 1) & m;
  }
  return -1;
}

int32_t Planner::find_or_add(uint64_t key, const Node& n, bool& added) {
  if (2 * (used_ + 1) > slots_.size()) grow();
  const size_t m = slots_.size() - 1;
  size_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - mask_bits_);
  while (slots_[h].stamp == gen_) {
    if (slots_[h].key == key) {
      added = false;
      return slots_[h].node;
    }
    h = (h + 1) & m;
  }
  const int32_t idx = static_cast<int32_t>(nodes_.size());
  slots_[h] = Slot{key, idx, gen_};
  nodes_.push_back(n);
  used_++;
  added = true;
  return idx;
}

void Planner::plan(const State& s0, const uint8_t* prefix, int prefix_len, const PlanOptions& opt,
                   Plan& out) {
  out.status = kPlanOk;
  out.placements.clear();
  out.masks.clear();
  out.reachable.fill(0);
  out.nodes = 0;

  if (s0.demo) {  // the demo's own input table drives the pill, not the masks
    out.status = kPlanNoPill;
    return;
  }
  std::vector<uint8_t> lead;  // masks before the search's first frame (prefix, wait frames)
  State t = s0;
  int presses0 = 0;
  int since_press = 1 << 20;  // frames since the last press frame, for the rate profile
  auto lead_step = [&](uint8_t mask) -> bool {  // true when this frame locked the pill
    const uint8_t rising = mask & static_cast<uint8_t>(~t.btns_held);
    presses0 += popcount8(rising);
    since_press = rising ? 0 : since_press + 1;
    const uint8_t px = t.pill_x, py = t.pill_y, pr = t.pill_rotation;
    const bool falling = t.phase == kPhasePlaying && t.next_action == kActPillFalling;
    step(t, mask);
    lead.push_back(mask);
    if (falling && t.lock_event) {
      int rot = pr & 3;
      if (t.pill_color[0] == t.pill_color[1]) rot &= 1;
      const int idx = placement_index(rot, 15 - py, px);
      out.status = kPlanLockedInPrefix;
      out.placements.push_back({static_cast<uint16_t>(idx), static_cast<uint16_t>(lead.size()),
                                static_cast<uint16_t>(presses0), 0});
      out.masks = lead;
      out.reachable[idx] = 1;
      return true;
    }
    return false;
  };
  for (int i = 0; i < prefix_len; ++i)
    if (lead_step(prefix[i])) return;

  // Frames until the pill falls: no buttons, but the last one (the frame that turns
  // action_sendPillFinished into action_pillFalling) holds what the search picks.
  int waited = 0;
  while (!(t.phase == kPhasePlaying &&
           (t.next_action == kActPillFalling || t.next_action == kActSendPillFinished))) {
    if (t.phase != kPhasePlaying || t.level_fail || waited > 4000) {
      out.status = kPlanNoPill;
      return;
    }
    lead_step(0);
    ++waited;
  }

  const Validity val(t);
  const uint8_t limit = kSpeedCounterTable[kBaseSpeedSettingValue[t.speed_setting] + t.speed_ups];
  const int interval = std::max(0, opt.min_press_interval);
  const bool same = t.pill_color[0] == t.pill_color[1];
  const uint8_t hold_forbidden = opt.taps_only ? (kA | kB | kLeft | kRight) : (kA | kB);

  // Roots.
  ++gen_;
  if (gen_ == 0) {
    for (Slot& sl : slots_) sl.stamp = 0;
    gen_ = 1;
  }
  used_ = 0;
  nodes_.clear();
  bool root_has_mask = false;
  unsigned root_fc;
  auto cool_after = [&](int since) -> uint8_t {
    // frames that must still pass before the next press frame
    if (interval <= 1) return 0;
    return static_cast<uint8_t>(std::max(0, interval - 1 - since));
  };
  if (t.next_action == kActPillFalling) {
    Micro m{t.pill_x,       t.pill_y,    t.pill_rotation,        t.speed_counter,
            t.hor_velocity, t.btns_held, cool_after(since_press)};
    canonical(m);
    root_fc = t.frame_counter;
    Node n{m.x, m.y, m.rot, m.sc, m.hv, m.held, m.cool, 0, -1, 0, 0, 0};
    bool added;
    find_or_add(key_of(m, root_fc & 1), n, added);
  } else {
    // The choice frame: step the real engine once per held mask.
    root_has_mask = true;
    root_fc = static_cast<uint8_t>(t.frame_counter + 1);
    for (uint8_t mask : kAlphabet.m) {
      const uint8_t rising = mask & static_cast<uint8_t>(~t.btns_held);
      if (interval > 0 && rising && (popcount8(rising) > 1 || cool_after(since_press) > 0))
        continue;
      State c = t;
      step(c, mask);
      if (c.phase != kPhasePlaying || c.next_action != kActPillFalling) {
        out.status = kPlanNoPill;  // top-out on spawn
        return;
      }
      Micro m{c.pill_x,
              c.pill_y,
              c.pill_rotation,
              c.speed_counter,
              c.hor_velocity,
              c.btns_held,
              static_cast<uint8_t>(rising ? cool_after(0) : cool_after(since_press + 1))};
      canonical(m);
      Node n{m.x,    m.y,    m.rot, m.sc, m.hv,
             m.held, m.cool, 0,     -1,   static_cast<uint16_t>(popcount8(rising)),
             mask,   0};
      bool added;
      const int32_t i = find_or_add(key_of(m, root_fc & 1), n, added);
      if (!added && nodes_[i].presses > n.presses) nodes_[i] = n;
    }
  }
  const int base = static_cast<int>(lead.size()) + (root_has_mask ? 1 : 0);

  std::array<Best, kNumPlacements> best;
  size_t begin = 0;
  for (int layer = 0; begin < nodes_.size() && base + layer < opt.max_frames; ++layer) {
    const size_t end = nodes_.size();
    const bool odd = ((root_fc + layer + 1) & 1) != 0;
    const unsigned next_parity = odd ? 1 : 0;
    const uint16_t frame = static_cast<uint16_t>(base + layer + 1);
    for (size_t i = begin; i < end; ++i) {
      const Node cur = nodes_[i];
      const Micro from{cur.x, cur.y, cur.rot, cur.sc, cur.hv, cur.held, cur.cool};
      for (uint8_t mask : kAlphabet.m) {
        // Dominated masks (exact for frames, then presses): holding A or B past its press
        // frame changes nothing but forbids the next press; releasing Down where it cannot
        // fast-drop (even frames, or with Left/Right) only costs a later press.
        if (mask & from.held & hold_forbidden) continue;
        if (interval == 0 && (!odd || (mask & (kLeft | kRight))) && ((mask ^ from.held) & kDown))
          continue;
        const uint8_t rising = mask & static_cast<uint8_t>(~from.held);
        if (interval > 0 && rising && (from.cool > 0 || popcount8(rising) > 1)) continue;
        Micro m = from;
        const uint16_t presses = static_cast<uint16_t>(cur.presses + popcount8(rising));
        if (falling_frame(val, limit, odd, mask, m)) {
          int rot = m.rot & 3;
          if (same) rot &= 1;
          Best& b = best[placement_index(rot, 15 - m.y, m.x)];
          if (b.frame == kNoFrame || (b.frame == frame && presses < b.presses)) {
            b = {frame, presses, static_cast<int32_t>(i), mask};
          }
          continue;
        }
        if (interval > 1) {
          m.cool = rising ? static_cast<uint8_t>(interval - 1)
                          : static_cast<uint8_t>(from.cool ? from.cool - 1 : 0);
        }
        canonical(m);
        const uint64_t key = key_of(m, next_parity);
        const int32_t seen = find(key);
        if (seen >= 0) {  // known: earlier (dominates) or in the next layer (keep fewer presses)
          if (static_cast<size_t>(seen) >= end && nodes_[seen].presses > presses) {
            nodes_[seen].parent = static_cast<int32_t>(i);
            nodes_[seen].presses = presses;
            nodes_[seen].mask = mask;
          }
          continue;
        }
        // Dominance: the same microstate with A/B released and Down held can do everything
        // this one can (A/B held only forbid a press; Down held is free to keep or release).
        const uint8_t h = m.held;
        const uint8_t strong = static_cast<uint8_t>((h & ~(kA | kB)) | kDown);
        if (strong != h) {
          uint8_t cand[3];
          int nc = 0;
          cand[nc++] = strong;
          if ((h & (kA | kB)) && !(h & kDown)) {
            cand[nc++] = static_cast<uint8_t>(h & ~(kA | kB));
            cand[nc++] = static_cast<uint8_t>(h | kDown);
          }
          bool dominated = false;
          for (int c = 0; c < nc && !dominated; ++c) {
            Micro d = m;
            d.held = cand[c];
            const int32_t k = find(key_of(d, next_parity));
            dominated = k >= 0 && (static_cast<size_t>(k) < end || nodes_[k].presses <= presses);
          }
          if (dominated) continue;
        }
        Node n{m.x,     m.y,  m.rot, m.sc, m.hv, m.held, m.cool, 0, static_cast<int32_t>(i),
               presses, mask, 0};
        bool added;
        find_or_add(key, n, added);
      }
    }
    begin = end;
  }
  out.nodes = nodes_.size();

  std::vector<uint8_t> path;
  for (int idx = 0; idx < kNumPlacements; ++idx) {
    const Best& b = best[idx];
    if (b.frame == kNoFrame) continue;
    path.clear();
    path.push_back(b.mask);
    int32_t i = b.node;
    for (; nodes_[i].parent >= 0; i = nodes_[i].parent) path.push_back(nodes_[i].mask);
    if (root_has_mask) path.push_back(nodes_[i].mask);
    const uint32_t off = static_cast<uint32_t>(out.masks.size());
    out.masks.insert(out.masks.end(), lead.begin(), lead.end());
    out.masks.insert(out.masks.end(), path.rbegin(), path.rend());
    out.placements.push_back(
        {static_cast<uint16_t>(idx), b.frame, static_cast<uint16_t>(presses0 + b.presses), off});
    out.reachable[idx] = 1;
  }
}

void plan(const State& s, const uint8_t* prefix, int prefix_len, const PlanOptions& opt,
          Plan& out) {
  thread_local Planner planner;
  planner.plan(s, prefix, prefix_len, opt, out);
}

}  // namespace drm
