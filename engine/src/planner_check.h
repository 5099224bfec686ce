// Checks for the planner that use nothing of its model, only drm::step on whole game states:
// a batched replay of mask sequences, and an exhaustive breadth-first search over whole engine
// states (every distinct lock, the fewest frames, then the fewest presses). Used by
// tests/test_planner*.py. Plain C++17: never includes pybind11.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "game.h"

namespace drm {

// What stepping `masks` from `s` did: the 1-based frame of the first lock (confirmPlacement),
// or 0 when none; the field right after that frame; rising button edges up to that frame.
struct ReplayResult {
  int lock_frame = 0;
  int presses = 0;
  std::array<uint8_t, kFieldSize> field{};
};

inline ReplayResult replay_locks(const State& s0, const uint8_t* masks, size_t n) {
  ReplayResult r;
  State s = s0;
  uint8_t held = s0.btns_held;
  for (size_t i = 0; i < n; ++i) {
    r.presses += __builtin_popcount(static_cast<unsigned>(masks[i] & static_cast<uint8_t>(~held)));
    held = masks[i];
    step(s, masks[i]);
    if (s.lock_event) {
      r.lock_frame = static_cast<int>(i) + 1;
      std::memcpy(r.field.data(), s.field, kFieldSize);
      return r;
    }
  }
  std::memcpy(r.field.data(), s.field, kFieldSize);
  return r;
}

struct ExhaustiveLock {
  std::array<uint8_t, kFieldSize> field;
  int frame;
  int presses;
};

// Breadth-first search by frame over whole states from `s0`, stepping every mask of `alphabet`
// from every state. A state seen on an earlier frame with the same frameCounter parity is not
// expanded again (the rules read the frame number only through that parity, and last frame's
// new presses not at all); on one frame the fewest presses (rising edges) to reach a state are
// kept. With `min_press_interval` N > 0 a frame may raise one button only, N frames or more
// after the last frame that raised one (the planner's rate profile; no press before the start).
// Returns false when more than `max_states` states were seen (the search gave up); `out` then
// holds what was found.
inline bool exhaustive_locks(const State& s0, const std::vector<uint8_t>& alphabet,
                             size_t max_states, std::vector<ExhaustiveLock>& out,
                             int min_press_interval = 0) {
  out.clear();
  const int n = min_press_interval;
  auto normalized = [](const State& s, int since) {
    State k = s;
    k.frame = 0;
    k.frame_counter &= 1;
    k.lock_event = 0;
    // btns_pressed is dead (the next NMI rewrites it before anything reads it): it holds the
    // frames since the last press frame instead, which the rate profile reads.
    k.btns_pressed = static_cast<uint8_t>(since);
    return k;
  };
  auto hash = [](const State& k) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    const auto* b = reinterpret_cast<const unsigned char*>(&k);
    for (size_t i = 0; i + 8 <= sizeof(State); i += 8) {
      uint64_t w;
      std::memcpy(&w, b + i, 8);
      h = (h ^ w) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    return h;
  };
  // Every state seen: its normalized bytes, the frame it was first seen on and its index in
  // that frame's layer. Open addressing over indices into `keys`.
  std::vector<State> keys;
  std::vector<std::pair<int, uint32_t>> where;
  std::vector<uint32_t> slots(1 << 12, 0);
  auto find_or_add = [&](const State& k, int frame, uint32_t index) -> int64_t {
    if (2 * (keys.size() + 1) > slots.size()) {
      std::vector<uint32_t> bigger(slots.size() * 2, 0);
      for (uint32_t i = 0; i < keys.size(); ++i) {
        size_t h = hash(keys[i]) & (bigger.size() - 1);
        while (bigger[h]) h = (h + 1) & (bigger.size() - 1);
        bigger[h] = i + 1;
      }
      slots.swap(bigger);
    }
    size_t h = hash(k) & (slots.size() - 1);
    while (slots[h]) {
      const uint32_t i = slots[h] - 1;
      if (std::memcmp(&keys[i], &k, sizeof(State)) == 0) return i;
      h = (h + 1) & (slots.size() - 1);
    }
    slots[h] = static_cast<uint32_t>(keys.size()) + 1;
    keys.push_back(k);
    where.push_back({frame, index});
    return -1;
  };
  std::unordered_map<std::string, size_t> lock_index;  // field bytes -> out index
  struct Node {
    State s;
    int presses;
    int since;  // frames since the last press frame, at most n
  };
  std::vector<Node> layer{{s0, 0, n}};
  find_or_add(normalized(s0, n), 0, 0);
  for (int frame = 1; !layer.empty(); ++frame) {
    std::vector<Node> next;
    for (const Node& node : layer) {
      const State& s = node.s;
      for (uint8_t m : alphabet) {
        const unsigned rising = m & static_cast<uint8_t>(~s.btns_held);
        if (n > 0 && rising && (__builtin_popcount(rising) > 1 || node.since < n - 1)) continue;
        const int since = rising ? 0 : std::min(node.since + 1, n);
        State t = s;
        const int p = node.presses + __builtin_popcount(rising);
        step(t, m);
        if (t.lock_event) {
          const std::string f(reinterpret_cast<const char*>(t.field), kFieldSize);
          auto it = lock_index.find(f);
          if (it == lock_index.end()) {
            ExhaustiveLock l;
            std::memcpy(l.field.data(), t.field, kFieldSize);
            l.frame = frame;
            l.presses = p;
            lock_index.emplace(f, out.size());
            out.push_back(l);
          } else if (out[it->second].frame == frame && p < out[it->second].presses) {
            out[it->second].presses = p;
          }
          continue;
        }
        const int64_t seen =
            find_or_add(normalized(t, since), frame, static_cast<uint32_t>(next.size()));
        if (seen < 0) {
          next.push_back({t, p, since});
        } else if (where[seen].first == frame && p < next[where[seen].second].presses) {
          next[where[seen].second].presses = p;
        }
      }
    }
    if (keys.size() > max_states) return false;
    layer.swap(next);
  }
  return true;
}

}  // namespace drm
