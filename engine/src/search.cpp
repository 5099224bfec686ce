// Teacher search helpers (search.h): replay planner masks, then let drm::step resolve the lock.
#include "search.h"

namespace drm {

SettleInfo settle(State& s, int max_frames) {
  SettleInfo info;
  while (!at_spawn(s) && !is_terminal(s) && info.frames < max_frames) {
    // updateField (pill placed step 7) after a match sends the game back to the drops: one
    // clear round (toPillPlacedStep $8C83, pillPlaced_nextStep1).
    if (s.phase == kPhasePlaying && s.next_action == kActPillPlaced && s.pill_placed_step == 7 &&
        s.match_flag != 0) {
      ++info.clear_rounds;
    }
    step(s, 0);
    ++info.frames;
  }
  return info;
}

void expand(const State& s, const PlanOptions& opt, int max_settle, Expansion& out) {
  plan(s, nullptr, 0, opt, out.plan);
  out.children.resize(out.plan.placements.size());
  for (size_t i = 0; i < out.plan.placements.size(); ++i) {
    const PlannedPlacement& p = out.plan.placements[i];
    Child& c = out.children[i];
    c.index = p.index;
    c.lock_frame = p.lock_frame;
    c.state = s;
    const uint8_t* m = out.plan.masks.data() + p.mask_offset;
    for (int f = 0; f < p.lock_frame; ++f) step(c.state, m[f]);
    const SettleInfo info = settle(c.state, max_settle);
    c.settle_frames = info.frames;
    c.clear_rounds = info.clear_rounds;
    c.viruses = virus_count(c.state);
  }
}

}  // namespace drm
