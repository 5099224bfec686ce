// Reachability planner: every lock pose a falling pill can reach, with its frame-exact inputs.
// Reference: the falling-pill routines of game.cpp (action_pillFalling $8D66: checkYMove $8D80,
// checkXMove $8DCF, checkRotate $8E3B, pillRotateValidation $8E70, pillMoveValidation $90E3,
// confirmPlacement $8F62), re-implemented over sets of pill positions and checked against
// drm::step by tests/test_planner*.py. Plain C++17: never includes pybind11.
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
  // restricted alphabet whose plans are still exact when replayed, but may lock later or miss
  // poses. Kept for callers that want tap-only inputs; the full search is as fast.
  bool taps_only = false;
};

struct PlannedPlacement {
  uint16_t index;       // placement index 0..511
  uint16_t lock_frame;  // 1-based: the pill locks during the lock_frame-th step from the state
};

// Why a plan has no search of its own.
enum PlanStatus : uint8_t {
  kPlanOk = 0,
  kPlanLockedInPrefix = 1,  // the prefix itself locked the pill: one placement, the prefix's
  kPlanNoPill = 2,          // not playing (intro, pause, game over, demo) or a top-out on spawn
};

// The result of Planner::plan: every reachable placement with the fewest frames any allowed
// inputs take to lock there. Masks are rebuilt on demand (plan_masks, plan_all_masks) from what
// is kept here: the state the search started from and the masks that led to it.
struct Plan {
  uint8_t status = kPlanOk;
  std::vector<PlannedPlacement> placements;         // sorted by placement index
  std::array<uint8_t, kNumPlacements> reachable{};  // 1 where a placement is reachable
  size_t nodes = 0;  // position sets expanded by the search (diagnostics)

  // --- what plan_masks needs (opaque to callers) ---
  State root{};               // the state the search starts from (after the lead masks)
  std::vector<uint8_t> lead;  // prefix, then no-button frames until the pill can be steered
  PlanOptions options;        // as given
  bool root_chooses = false;  // root is one frame before the first falling frame
  int lead_presses = 0;       // rising edges in lead
  int since_press = 1 << 20;  // frames since the lead's last press frame (rate profile)
};

// A reusable planner (its buffers are kept between calls; not thread-safe, one per thread).
class Planner {
 public:
  // Plans from `s` after the `prefix_len` committed masks of `prefix` are stepped by drm::step.
  // `s` may be mid-fall (next_action 0) or between pills (lock clean-up, throw): the frames until
  // the next pill falls are filled with no buttons except the last one, whose held buttons the
  // search chooses (they are the first falling frame's "held on the previous frame").
  // Throws std::invalid_argument when the falling pill's pose is one the game cannot produce
  // (column > 7, row > 15, rotation > 3, or a horizontal pill in column 7).
  void plan(const State& s, const uint8_t* prefix, int prefix_len, const PlanOptions& opt,
            Plan& out);

  // The per-frame masks of one placement of `p`, from the planned state (prefix included) to the
  // lock frame inclusive: lock_frame masks, the fewest rising edges among the inputs that lock
  // there on that frame; `presses` (if given) gets that number (prefix included). Returns false
  // (out empty) when `index` is not a reachable placement of `p`.
  bool masks(const Plan& p, int index, std::vector<uint8_t>& out, int* presses = nullptr);

  // masks() for every placement of `p` (out[i] and presses[i] for p.placements[i]) from one
  // search: cheaper than one masks() call per placement when all are wanted.
  bool all_masks(const Plan& p, std::vector<std::vector<uint8_t>>& out, std::vector<int>& presses);

  // One control state (speed counter, DAS counter, held buttons, press cooldown and presses,
  // packed in `key`) with the set of pill positions in it: bit y*8 + x of s[rotation], y the
  // game's fallingPillY (0 = bottom row).
  struct Entry {
    uint64_t key;
    unsigned __int128 s[4];
  };
  struct Search;  // one search's tables (planner.cpp)

 private:
  bool setup(Search& S, const Plan& p, int target);
  void run_round(Search& S, bool keep_history);
  bool backtrack(const Search& S, const Plan& p, int index, std::vector<uint8_t>& out,
                 int* presses);

  std::vector<Entry> cur_, next_;
  std::vector<std::vector<Entry>> history_;
  std::vector<uint64_t> slot_key_;
  std::vector<uint32_t> slot_idx_;
  std::vector<uint32_t> slot_stamp_;
  std::vector<uint32_t> order_;
  std::vector<uint8_t> path_;
  uint32_t stamp_ = 0;
};

// Convenience: one thread-local Planner.
void plan(const State& s, const uint8_t* prefix, int prefix_len, const PlanOptions& opt, Plan& out);
bool plan_masks(const Plan& p, int index, std::vector<uint8_t>& out, int* presses = nullptr);
bool plan_all_masks(const Plan& p, std::vector<std::vector<uint8_t>>& out,
                    std::vector<int>& presses);

}  // namespace drm
