// Search helpers for the placement policy's teacher (policy/teacher.py): lock every reachable
// placement of the pill at a spawn state where the planner says it locks, and let drm::step
// resolve the lock clean-up, clears and cascades (toPillPlacedStep $8C83) and the next throw
// (action_sendPill) itself.
// Plain C++17: never includes pybind11.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "game.h"
#include "planner.h"
#include "search_eval.h"

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
  uint8_t status = kPlanOk;                         // the parent's plan status (PlanStatus)
  std::array<uint8_t, kNumPlacements> reachable{};  // the parent's plan.reachable
  std::vector<Child> children;                      // one per reachable placement, ascending
};

// The state the planner's masks for placement `index` (locking on step `lock_frame`) leave
// behind, from a spawn state `s`, without stepping them: the lock frame's writes made directly.
// Field, frame counters, redraw row and pill pose are exactly the stepped ones; the held
// buttons are left released and the DAS counter unchanged. Used for look-ahead only: a
// placement that is played goes through the planner's real masks.
void lock_at(State& s, int index, int lock_frame);

// From a spawn state `s`: plans (drm::plan) and, for every reachable placement, lock_at() and
// then settle() (bounded by `max_settle` frames). Returns false (no children, status
// kPlanNoPill) when `s` is not a spawn state.
bool expand(const State& s, const PlanOptions& opt, int max_settle, Expansion& out);

// expand() of `s` with its falling pill's colours (pill_color) replaced by each of `pairs` in
// turn: out[i] is exactly expand() of that state. The planner depends on the colours only
// through "both halves alike" (a one-colour pill's rotations 2-3 are its rotations 0-1), so
// one plan serves every two-colour pair and one every one-colour pair: 2 plans for the 6
// unordered pairs instead of 6 (the play-time search's unseen third pill, policy/search.py).
// Returns false (every out[i] empty, status kPlanNoPill) when `s` is not a spawn state.
bool expand_colours(const State& s, const PlanOptions& opt, int max_settle,
                    const std::vector<std::array<uint8_t, 2>>& pairs, std::vector<Expansion>& out);

// The play-time search's unseen pill (policy/search.py SearchPlayer._third_ply), from spawn
// state `s` reached `frames` after the search's root: expand_colours() of `s` with `pairs`,
// every child's leaf_value() (frames counted from the root: frames + lock + settle), and the
// sum over pairs of probs[i] * (best child's value - mobility_penalty(children)). When some
// pair has no child (the planner cannot place it), the value is `s`'s own leaf instead.
// Returns false when `s` is not a spawn state (value untouched).
bool expected_best_leaf(const State& s, const PlanOptions& opt, int max_settle,
                        const std::vector<std::array<uint8_t, 2>>& pairs,
                        const std::vector<double>& probs, double frames, const LeafWeights& w,
                        double& value);

// One root line of policy.beam.BeamPlayer's beam: a live child of the root spawn state (at
// its own spawn state), its leaf value and the frames it took from the root.
struct BeamRoot {
  double value = 0.0;
  double frames = 0.0;
  State state{};
};

// policy.beam.BeamPlayer after its first pill. `ranked`: the root's live children, best first
// (ties in placement order). The beam keeps the `width` best lines whose boards (128 field
// bytes) differ: a line whose board equals one kept before it is dropped, so a copy does not
// take a place of the width. Lines at one depth have thrown the same pills from the reserve
// (the RNG is not stepped in play), so two with one board face the same pills at the same
// speed; what may differ is the frame counter's parity, which can shift a later drop by one
// frame (fallingPill_checkYMove [$8D80] reads Down on every other frame), and the copy kept is
// the better-ranked one, which got there in no more frames. Each kept line is expand()ed with
// its next pill and its children valued by leaf_value() (frames counted from the root), for
// `depth` more pills. The first depth at which some line clears the stage ends the search:
// the fastest such clear (the first found of equal value) is chosen. When no line is left
// alive at some depth, the best line of the depth before is chosen. Returns the position in
// `ranked` of the chosen line's root child; -1 when `ranked` is empty. Ranking is a stable
// sort by value, so the result is the reference beam's of tests/test_policy_beam.py.
// `cache` (may be null): expansions are taken from it and added to it (ExpansionCache), the
// same children as expand() makes, so the choice is the same with or without it.
// `first_values` (may be null): set to one value per `ranked` root child, the best value of
// its lines where the search ended (the last depth searched, or at the depth of the first
// clear: its fastest clear there, else its best live line there); -inf for a root child with
// no line there. The choice is the same with or without it.
class ExpansionCache;
int beam_search(const std::vector<BeamRoot>& ranked, int depth, int width, const PlanOptions& opt,
                int max_settle, const LeafWeights& w, ExpansionCache* cache = nullptr,
                std::vector<double>* first_values = nullptr);

// An expansion with its live children's board terms (board_terms() with one TermParams):
// kNumBoardTerms doubles a child, in child order (zeros for a child not playing).
struct ExpansionTerms {
  Expansion e;
  std::vector<double> terms;
};

// Expansions kept from one beam search to the next. The beam at pill N + 1 starts from one
// child of pill N's root, and about half of its expansions are of states pill N's beam
// expanded already (the same pills from the same boards). A state is looked up by its bytes
// with the sprite buffer's copy of the falling pill (spr_pill..spr_pill_color, written for
// the picture by fallingPill_spriteUpdate $872F and read by nothing in play) left out, with the
// plan options and the settle bound: the planned state and a child worked out by lock_at()
// differ only there. The children's board terms are kept with them (the evaluation's share of
// a search is about a quarter). Two generations are kept: next_search() drops the older, so
// the cache holds at most the expansions of two searches. Thread-safe (one mutex; an
// expansion is made outside it).
class ExpansionCache {
 public:
  // expand() of `s` and its children's terms with the TermParams of the last next_search()
  // (false: `s` is not a spawn state, and `out` is null), from the cache when some search
  // made it.
  bool get(const State& s, const PlanOptions& opt, int max_settle,
           std::shared_ptr<const ExpansionTerms>& out);
  // Starts a search whose leaves are valued with `p`: the expansions of the one before the
  // last are dropped, and every one when `p` differs from the last search's.
  void next_search(const TermParams& p);
  void clear();
  uint64_t hits() const;
  uint64_t misses() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const ExpansionTerms>> cur_, prev_;
  double blocker_ = 0.0, no_room_ = 0.0;
  std::vector<double> danger_;  // kFieldSize, or empty before the first search
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace drm
