// Reachability planner: every lock pose a falling pill can reach, with its frame-exact inputs.
// Reference: the falling-pill routines of game.cpp (action_pillFalling $8D66: checkYMove $8D80,
// checkXMove $8DCF, checkRotate $8E3B, pillRotateValidation $8E70, pillMoveValidation $90E3,
// confirmPlacement $8F62), re-implemented over a compact microstate and checked against
// drm::step by tests/test_planner.py. Plain C++17: never includes pybind11.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "game.h"

namespace drm {

// Placement index (docs/PLANNER.md): rotation * 128 + row * 8 + col, with the NES's own pill
// coordinates at lock: rotation = fallingPillRotation (0..3), row = 15 - fallingPillY (0 = top),
// col = fallingPillX. (row, col) is the pill's lower-left cell. When both halves have the same
// colour, rotations 2 and 3 write the same cells as 0 and 1 and are reported as 0 and 1.
constexpr int kNumPlacements = 512;
inline int placement_index(int rotation, int row, int col) {
  return rotation * 128 + row * 8 + col;
}

struct PlanOptions {
  // At most one new press every N frames (0 = no limit): a frame in which some button rises
  // is a press frame; it may raise only one button and comes >= N frames after the previous.
  int min_press_interval = 0;
  int max_frames = 4096;  // search horizon from the plan's start, frames
  // Left/Right only on press frames (no DAS, no held-Left double-left, no Left+Right hold): a
  // smaller search whose plans are still exact when replayed, but may lock later or miss poses.
  bool taps_only = false;
};

struct PlannedPlacement {
  uint16_t index;        // placement index 0..511
  uint16_t lock_frame;   // 1-based: the pill locks during the lock_frame-th step from the state
  uint16_t presses;      // rising edges in masks (prefix included)
  uint32_t mask_offset;  // masks[mask_offset .. mask_offset + lock_frame) in Plan::masks
};

// Why a plan has no placements.
enum PlanStatus : uint8_t {
  kPlanOk = 0,
  kPlanLockedInPrefix = 1,  // the prefix itself locked the pill: one placement, the prefix's
  kPlanNoPill = 2,          // not playing (intro, pause, game over, demo) or a top-out on spawn
};

struct Plan {
  uint8_t status = kPlanOk;
  std::vector<PlannedPlacement> placements;         // sorted by placement index
  std::vector<uint8_t> masks;                       // all placements' masks, concatenated
  std::array<uint8_t, kNumPlacements> reachable{};  // 1 where a placement is reachable
  size_t nodes = 0;                                 // search nodes expanded (diagnostics)
};

// A reusable planner (its buffers are kept between calls; not thread-safe, one per thread).
class Planner {
 public:
  Planner();
  // Plans from `s` after the `prefix_len` committed masks of `prefix` are stepped by drm::step.
  // `s` may be mid-fall (next_action 0) or between pills (lock clean-up, throw): the frames until
  // the next pill falls are filled with no buttons except the last one, whose held buttons the
  // search chooses (they are the first falling frame's "held on the previous frame").
  // Each placement's masks start at `s` (the prefix included) and end on its lock frame.
  void plan(const State& s, const uint8_t* prefix, int prefix_len, const PlanOptions& opt,
            Plan& out);

 private:
  struct Node {
    uint8_t x, y, rot, sc, hv, held, cool, pad;
    int32_t parent;
    uint16_t presses;
    uint8_t mask;
    uint8_t pad2;
  };
  int32_t find(uint64_t key) const;
  int32_t find_or_add(uint64_t key, const Node& n, bool& added);
  void grow();

  std::vector<Node> nodes_;
  struct Slot {
    uint64_t key;
    int32_t node;
    uint32_t stamp;  // == gen_ when the slot is used by the current plan
  };
  std::vector<Slot> slots_;
  uint32_t gen_ = 0;
  size_t mask_bits_ = 0;
  size_t used_ = 0;
};

// Convenience: one thread-local Planner.
void plan(const State& s, const uint8_t* prefix, int prefix_len, const PlanOptions& opt, Plan& out);

}  // namespace drm
