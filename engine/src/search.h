// Search helpers for the placement policy's teacher (policy/teacher.py): play every reachable
// placement of the pill at a spawn state through drm::step and let the game resolve the lock
// clean-up, clears and cascades (toPillPlacedStep $8C83) and the next throw (action_sendPill)
// itself. Nothing here models the rules: it only replays planner masks and steps the engine.
// Plain C++17: never includes pybind11.
#pragma once

#include <cstdint>
#include <vector>

#include "game.h"
#include "planner.h"

namespace drm {

// A spawn state: playing, and nextAction is action_sendPillFinished, i.e. the throw has just
// called generateNextPill (the new pill's colours and the next pill's are set) and the next
// step turns it into action_pillFalling. This is where the policy decides and where the
// planner starts a between-pills plan.
inline bool at_spawn(const State& s) {
  return s.phase == kPhasePlaying && s.next_action == kActSendPillFinished;
}

inline bool is_terminal(const State& s) { return s.phase >= kPhaseStageClear; }

// What settle() saw while the game resolved a lock.
struct SettleInfo {
  int32_t frames = 0;        // steps taken (no buttons)
  int32_t clear_rounds = 0;  // updateField passes that followed a match (1 = no chain)
};

// Steps with no buttons until a spawn state or a terminal phase (or `max_frames` steps, then
// returns with frames == max_frames). A state already at spawn or terminal is left as is.
SettleInfo settle(State& s, int max_frames);

// One placement played out: the planner's masks to the lock, then settle().
struct Child {
  uint16_t index = 0;         // placement index (docs/PLANNER.md)
  int32_t lock_frame = 0;     // frames from the parent spawn state to the lock (planner)
  int32_t settle_frames = 0;  // frames from the lock to the next spawn state (or terminal)
  int32_t clear_rounds = 0;   // match rounds in the clean-up (chains)
  int32_t viruses = 0;        // viruses on the field after settle
  State state{};              // the child at its spawn state (or terminal)
};

struct Expansion {
  Plan plan;                    // the parent's plan (status, reachable, masks)
  std::vector<Child> children;  // one per plan.placements entry, same order
};

// Plans from `s` (a spawn state, mid-fall or between pills; see Planner::plan) and plays every
// reachable placement. `max_settle` bounds settle() per child.
void expand(const State& s, const PlanOptions& opt, int max_settle, Expansion& out);

}  // namespace drm
