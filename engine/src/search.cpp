// Teacher search helpers (search.h): lock each planned placement, then let drm::step resolve it.
#include "search.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_set>

#include "nes_tables.h"

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

void lock_at(State& s, int index, int lock_frame) {
  const int rot = index / 128, row = (index % 128) / 8, col = index % 8;
  // What the lock_frame steps of the planner's masks leave behind (action_pillFalling $8D66
  // frames, then the failed drop of checkYMove $8D80 calling confirmPlacement $8F62): frame
  // counters advanced, the pill at its lock pose, the speed counter reset, the next action
  // action_pillPlaced. The held buttons are taken as released and the DAS counter as unchanged
  // (the only state the masks would leave differently; docs/POLICY.md).
  s.frame += static_cast<uint32_t>(lock_frame);
  s.frame_counter = static_cast<uint8_t>(s.frame_counter + lock_frame);
  s.btns_held = 0;
  s.btns_pressed = 0;
  s.chain_length = 0;
  s.speed_index = s.speed_ups;
  s.speed_counter = 0;
  s.pill_x = static_cast<uint8_t>(col);
  s.pill_y = static_cast<uint8_t>(15 - row);
  s.pill_rotation = static_cast<uint8_t>(rot);
  // confirmPlacement $8F62, as game.cpp writes it.
  const uint8_t base = static_cast<uint8_t>(kPillFieldPosRelativeToPillY[s.pill_y & 0x0F] + col);
  for (int k = 0; k < 4; ++k) {
    const uint8_t off = kHalfPillPosOffset[rot * 4 + k];
    if (off == 0x63) break;
    const uint8_t pos = static_cast<uint8_t>(off + base);
    if (pos < kFieldSize)
      s.field[pos] = static_cast<uint8_t>(kHalfPillShape[rot * 4 + k] + s.pill_color[k & 1]);
  }
  s.status = s.pill_y ^ 0x0F;
  s.lock_event = 1;
  s.next_action = kActPillPlaced;
  s.pill_placed_step = 0;
}

namespace {

// Every planned placement of `p` locked (lock_at) on a copy of `s` and settled.
void play_out(const State& s, const Plan& p, int max_settle, Expansion& out) {
  out.status = p.status;
  out.reachable = p.reachable;
  out.children.resize(p.placements.size());
  for (size_t i = 0; i < p.placements.size(); ++i) {
    const PlannedPlacement& pl = p.placements[i];
    Child& c = out.children[i];
    c.index = pl.index;
    c.lock_frame = pl.lock_frame;
    c.state = s;
    lock_at(c.state, pl.index, pl.lock_frame);
    const SettleInfo info = settle(c.state, max_settle);
    c.settle_frames = info.frames;
    c.clear_rounds = info.clear_rounds;
    c.viruses = virus_count(c.state);
  }
}

}  // namespace

bool expand(const State& s, const PlanOptions& opt, int max_settle, Expansion& out) {
  out.children.clear();
  out.reachable.fill(0);
  if (!at_spawn(s)) {
    out.status = kPlanNoPill;
    return false;
  }
  static thread_local Plan p;
  plan(s, nullptr, 0, opt, p);
  play_out(s, p, max_settle, out);
  return true;
}

bool expand_colours(const State& s, const PlanOptions& opt, int max_settle,
                    const std::vector<std::array<uint8_t, 2>>& pairs, std::vector<Expansion>& out) {
  out.assign(pairs.size(), Expansion{});
  if (!at_spawn(s)) {
    for (Expansion& e : out) e.status = kPlanNoPill;
    return false;
  }
  static thread_local Plan plans[2];  // [0] two-colour pill, [1] one-colour pill
  bool planned[2] = {false, false};
  for (size_t i = 0; i < pairs.size(); ++i) {
    State t = s;
    t.pill_color[0] = pairs[i][0];
    t.pill_color[1] = pairs[i][1];
    const int same = pairs[i][0] == pairs[i][1] ? 1 : 0;
    if (!planned[same]) {
      plan(t, nullptr, 0, opt, plans[same]);
      planned[same] = true;
    }
    play_out(t, plans[same], max_settle, out[i]);
  }
  return true;
}

bool expected_best_leaf(const State& s, const PlanOptions& opt, int max_settle,
                        const std::vector<std::array<uint8_t, 2>>& pairs,
                        const std::vector<double>& probs, double frames, const LeafWeights& w,
                        double& value) {
  static thread_local std::vector<Expansion> es;
  if (!expand_colours(s, opt, max_settle, pairs, es)) return false;
  for (const Expansion& e : es) {
    if (e.children.empty()) {
      value = leaf_value(s.field, virus_count(s), kPhasePlaying, frames, w);
      return true;
    }
  }
  // policy/search.py's order: per pair, the best leaf less the penalty, times its probability.
  double total = 0.0;
  for (size_t i = 0; i < es.size(); ++i) {
    double best = -std::numeric_limits<double>::infinity();
    for (const Child& c : es[i].children) {
      const double t = frames + static_cast<double>(c.lock_frame + c.settle_frames);
      best = std::max(best, leaf_value(c.state.field, c.viruses, c.state.phase, t, w));
    }
    total += probs[i] * (best - mobility_penalty(static_cast<int>(es[i].children.size()), w));
  }
  value = total;
  return true;
}

namespace {

// A child of the beam's current depth: its value, frames from the root, the root child it
// came from, and where it is (expansion, child).
struct BeamCandidate {
  double value;
  double frames;
  int first;
  int exp;
  int child;
};

struct BeamLine {
  double frames;
  int first;
  State state;
  double value;
};

// Positions of the first `width` of `n` ranked boards (field_of(i): kFieldSize bytes) that
// differ from every board kept before them.
template <typename FieldOf>
std::vector<size_t> distinct_best(size_t n, size_t width, FieldOf field_of) {
  std::unordered_set<std::string> seen;
  std::vector<size_t> keep;
  for (size_t i = 0; i < n && keep.size() < width; ++i) {
    if (seen.emplace(reinterpret_cast<const char*>(field_of(i)), kFieldSize).second) {
      keep.push_back(i);
    }
  }
  return keep;
}

}  // namespace

namespace {

std::string cache_key(const State& s, const PlanOptions& opt, int max_settle) {
  State k = s;
  k.spr_pill = 0;
  k.spr_pill_x = 0;
  k.spr_pill_y = 0;
  k.spr_pill_rotation = 0;
  k.spr_pill_color[0] = 0;
  k.spr_pill_color[1] = 0;
  const int32_t extra[4] = {opt.min_press_interval, opt.max_frames, opt.taps_only ? 1 : 0,
                            max_settle};
  std::string key(reinterpret_cast<const char*>(&k), sizeof(State));
  key.append(reinterpret_cast<const char*>(extra), sizeof(extra));
  return key;
}

}  // namespace

bool ExpansionCache::get(const State& s, const PlanOptions& opt, int max_settle,
                         std::shared_ptr<const ExpansionTerms>& out) {
  out.reset();
  if (!at_spawn(s)) return false;
  std::string key = cache_key(s, opt, max_settle);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cur_.find(key);
    if (it != cur_.end()) {
      ++hits_;
      out = it->second;
      return true;
    }
    it = prev_.find(key);
    if (it != prev_.end()) {
      ++hits_;
      out = it->second;
      cur_.emplace(std::move(key), out);
      return true;
    }
    ++misses_;
  }
  auto e = std::make_shared<ExpansionTerms>();
  expand(s, opt, max_settle, e->e);
  TermParams p;
  double danger[kFieldSize] = {};
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.blocker = blocker_;
    p.no_room = no_room_;
    std::copy(danger_.begin(), danger_.end(), danger);  // (empty before any next_search())
  }
  p.danger = danger;
  e->terms.assign(e->e.children.size() * kNumBoardTerms, 0.0);
  for (size_t i = 0; i < e->e.children.size(); ++i) {
    const Child& c = e->e.children[i];
    if (c.state.phase == kPhasePlaying)
      board_terms(c.state.field, p, e->terms.data() + i * kNumBoardTerms);
  }
  out = e;
  std::lock_guard<std::mutex> lock(mu_);
  cur_.emplace(std::move(key), out);
  return true;
}

void ExpansionCache::next_search(const TermParams& p) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool same = !danger_.empty() && p.blocker == blocker_ && p.no_room == no_room_ &&
                    std::equal(danger_.begin(), danger_.end(), p.danger);
  if (!same) {
    cur_.clear();
    prev_.clear();
    blocker_ = p.blocker;
    no_room_ = p.no_room;
    danger_.assign(p.danger, p.danger + kFieldSize);
  }
  prev_.swap(cur_);
  cur_.clear();
}

void ExpansionCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  cur_.clear();
  prev_.clear();
  hits_ = misses_ = 0;
}

uint64_t ExpansionCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

uint64_t ExpansionCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

size_t ExpansionCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = cur_.size();
  for (const auto& kv : prev_) n += cur_.count(kv.first) ? 0 : 1;
  return n;
}

int beam_search(const std::vector<BeamRoot>& ranked, int depth, int width, const PlanOptions& opt,
                int max_settle, const LeafWeights& w, ExpansionCache* cache,
                std::vector<double>* first_values) {
  if (ranked.empty()) return -1;
  const size_t wd = static_cast<size_t>(std::max(width, 1));
  std::vector<BeamLine> beam;
  for (size_t i : distinct_best(ranked.size(), wd, [&](size_t k) { return ranked[k].state.field; }))
    beam.push_back({ranked[i].frames, static_cast<int>(i), ranked[i].state, ranked[i].value});
  // The best value each root child's lines reach where the search ends (-inf: none there).
  const auto note_first = [&](int first, double value) {
    double& f = (*first_values)[static_cast<size_t>(first)];
    f = std::max(f, value);
  };
  if (first_values != nullptr)
    first_values->assign(ranked.size(), -std::numeric_limits<double>::infinity());
  if (cache != nullptr) cache->next_search(w.terms);
  std::vector<std::shared_ptr<const ExpansionTerms>> exps;
  std::vector<BeamCandidate> cand;
  for (int d = 0; d < depth; ++d) {
    exps.assign(beam.size(), nullptr);
    cand.clear();
    bool cleared = false;
    double clear_value = 0.0;
    int clear_first = -1;
    for (size_t b = 0; b < beam.size(); ++b) {
      if (cache != nullptr) {
        if (!cache->get(beam[b].state, opt, max_settle, exps[b])) continue;
      } else {
        auto made = std::make_shared<ExpansionTerms>();
        if (!expand(beam[b].state, opt, max_settle, made->e)) continue;
        exps[b] = std::move(made);
      }
      const Expansion& e = exps[b]->e;
      const double* terms = exps[b]->terms.empty() ? nullptr : exps[b]->terms.data();
      // The fastest clear of this expansion (the first of equal value), then of the depth.
      int best = -1;
      double best_value = 0.0;
      for (size_t j = 0; j < e.children.size(); ++j) {
        const Child& c = e.children[j];
        const double t = beam[b].frames + static_cast<double>(c.lock_frame + c.settle_frames);
        const double v =
            terms != nullptr
                ? leaf_value_of_terms(terms + j * kNumBoardTerms, c.viruses, c.state.phase, t, w)
                : leaf_value(c.state.field, c.viruses, c.state.phase, t, w);
        if (c.state.phase == kPhaseStageClear) {
          if (best < 0 || v > best_value) {
            best = static_cast<int>(j);
            best_value = v;
          }
        } else if (c.state.phase == kPhasePlaying) {
          cand.push_back({v, t, beam[b].first, static_cast<int>(b), static_cast<int>(j)});
        }
      }
      if (best >= 0 && first_values != nullptr) note_first(beam[b].first, best_value);
      if (best >= 0 && (!cleared || best_value > clear_value)) {
        cleared = true;
        clear_value = best_value;
        clear_first = beam[b].first;
      }
    }
    if (cleared) {
      // A root child with no clear at this depth: its best live line here.
      if (first_values != nullptr)
        for (const BeamCandidate& c : cand) note_first(c.first, c.value);
      return clear_first;
    }
    if (cand.empty()) break;  // every line tops out within this depth
    std::stable_sort(cand.begin(), cand.end(), [](const BeamCandidate& a, const BeamCandidate& b) {
      return a.value > b.value;
    });
    const auto field_of = [&](size_t k) {
      return exps[static_cast<size_t>(cand[k].exp)]
          ->e.children[static_cast<size_t>(cand[k].child)]
          .state.field;
    };
    std::vector<BeamLine> next;
    for (size_t i : distinct_best(cand.size(), wd, field_of)) {
      const BeamCandidate& c = cand[i];
      next.push_back(
          {c.frames, c.first,
           exps[static_cast<size_t>(c.exp)]->e.children[static_cast<size_t>(c.child)].state,
           c.value});
    }
    beam.swap(next);
  }
  if (first_values != nullptr)
    for (const BeamLine& l : beam) note_first(l.first, l.value);
  return beam.front().first;
}

}  // namespace drm
