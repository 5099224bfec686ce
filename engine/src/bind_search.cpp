// pybind11 registrations for search.h: engine._core.settle(game) and engine._core.expand(game)
// -> Expansion, used by the placement policy's teacher. Only argument checks and marshalling.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <array>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "game.h"
#include "planner.h"
#include "py_args.h"
#include "py_game.h"
#include "search.h"
#include "search_eval.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

drm::PyGame& game_of(const py::object& game) {
  if (!py::isinstance<drm::PyGame>(game)) throw py::type_error("game must be an engine.Game");
  return game.cast<drm::PyGame&>();
}

// The planner's options of expand() and expand_colours(), checked.
drm::PlanOptions plan_options(bool taps_only, const py::handle& interval) {
  drm::PlanOptions opt;
  opt.min_press_interval = pa::press_interval(interval);
  opt.taps_only = taps_only;
  return opt;
}

int settle_limit(const py::handle& max_settle) {
  return static_cast<int>(
      pa::in_range(max_settle, "max_settle", 0, 1 << 20, "frames to settle at most"));
}

template <typename T, typename F>
py::array_t<T> per_child(const drm::Expansion& e, F f) {
  py::array_t<T> a(static_cast<py::ssize_t>(e.children.size()));
  T* d = a.mutable_data();
  for (size_t i = 0; i < e.children.size(); ++i) d[i] = static_cast<T>(f(e.children[i]));
  return a;
}

// Colour pairs [(first, second), ...], each colour 0-2.
std::vector<std::array<uint8_t, 2>> colour_pairs(const py::handle& pairs) {
  std::vector<std::array<uint8_t, 2>> cs;
  for (py::handle pair : pairs) {
    std::array<uint8_t, 2> c{};
    size_t n = 0;
    for (py::handle v : pair) {
      if (n >= 2) throw py::value_error("each pair must hold 2 colours (0-2)");
      c[n++] = static_cast<uint8_t>(pa::in_range(v, "colour", 0, 2, "0 yellow, 1 red, 2 blue"));
    }
    if (n != 2) throw py::value_error("each pair must hold 2 colours (0-2)");
    cs.push_back(c);
  }
  return cs;
}

// fields uint8[N, 128] (C-contiguous), checked: N boards of kFieldSize cell codes.
py::array_t<uint8_t> boards(const py::handle& fields) {
  if (!py::isinstance<py::array>(fields)) {
    throw py::type_error("fields must be a numpy.ndarray uint8[N, 128]");
  }
  const auto arr = py::reinterpret_borrow<py::array>(fields);
  if (arr.size() % drm::kFieldSize != 0) {
    throw py::value_error("fields must hold N boards of 128 cells, got " +
                          std::to_string(arr.size()) + " cells");
  }
  return pa::uint8_vector(fields, "fields", arr.size());
}

// float64 array of exactly n numbers (a copy).
std::vector<double> doubles(const py::handle& obj, const char* name, py::ssize_t n,
                            const char* what) {
  auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!a || a.size() != n) {
    throw py::value_error(std::string(name) + " must be " + std::to_string(n) + " numbers (" +
                          what + ")");
  }
  return std::vector<double>(a.data(), a.data() + n);
}

constexpr py::ssize_t kPackedWeights = 15;
constexpr const char* kPackedDoc =
    "policy.teacher.Weights.packed(): virus, half, piece, hole, vsame, on_virus, hsame, bury, "
    "bump, access, access_target, mobility, mobility_target, blocker, no_room";

// LeafWeights from Weights.packed() and Weights.danger(); `danger` keeps the charges alive.
drm::LeafWeights leaf_weights(const py::handle& packed, const py::handle& danger_obj,
                              std::vector<double>& danger) {
  const std::vector<double> v = doubles(packed, "weights", kPackedWeights, kPackedDoc);
  danger = doubles(danger_obj, "danger", drm::kFieldSize, "frames per occupied cell");
  drm::LeafWeights w;
  // kPackedDoc's order
  double* const slot[kPackedWeights] = {&w.virus,
                                        &w.half,
                                        &w.piece,
                                        &w.hole,
                                        &w.vsame,
                                        &w.on_virus,
                                        &w.hsame,
                                        &w.bury,
                                        &w.bump,
                                        &w.access,
                                        &w.access_target,
                                        &w.mobility,
                                        &w.mobility_target,
                                        &w.terms.blocker,
                                        &w.terms.no_room};
  for (py::ssize_t i = 0; i < kPackedWeights; ++i) *slot[i] = v[static_cast<size_t>(i)];
  w.terms.danger = danger.data();
  return w;
}

// The arguments expected_best_leaf and expected_best_leaves share, checked. Not copied: `w`
// points into `danger`.
struct ThirdPly {
  std::vector<std::array<uint8_t, 2>> pairs;
  std::vector<double> probs;
  std::vector<double> danger;
  drm::LeafWeights w;
  drm::PlanOptions opt;
  int settle_max;

  ThirdPly(const py::handle& pairs_obj, const py::handle& probs_obj, const py::handle& weights,
           const py::handle& danger_obj, bool taps_only, const py::handle& max_settle)
      : pairs(colour_pairs(pairs_obj)),
        probs(doubles(probs_obj, "probs", static_cast<py::ssize_t>(pairs.size()), "one per pair")),
        w(leaf_weights(weights, danger_obj, danger)),
        opt(plan_options(taps_only, py::int_(0))),
        settle_max(settle_limit(max_settle)) {}
  ThirdPly(const ThirdPly&) = delete;
  ThirdPly& operator=(const ThirdPly&) = delete;

  bool value(const drm::State& s, double frames, double& v) const {
    return drm::expected_best_leaf(s, opt, settle_max, pairs, probs, frames, w, v);
  }
};

}  // namespace

void register_search(py::module_& m) {
  py::class_<drm::Expansion>(m, "Expansion", R"doc(Every reachable placement played out.

status: the plan status (0 ok, 2 no pill to plan); reachable bool[512]. Per child k
(placements ascending):
placements int16[P]; lock_frames int32[P] (frames from the expanded state to the lock);
settle_frames int32[P] (frames from the lock to the next spawn state, or to the terminal
phase); clear_rounds int32[P] (match rounds in the clean-up, 2+ is a chain); viruses int32[P]
(viruses on the field after settling); phases uint8[P] (engine.Phase after settling);
fields uint8[P, 128] (the board after settling); child(k) -> Game (a copy of that state).)doc")
      .def_property_readonly("status", [](const drm::Expansion& e) { return e.status; })
      .def_property_readonly("reachable",
                             [](const drm::Expansion& e) {
                               py::array_t<bool> a(drm::kNumPlacements);
                               bool* d = a.mutable_data();
                               for (int i = 0; i < drm::kNumPlacements; ++i)
                                 d[i] = e.reachable[i] != 0;
                               return a;
                             })

      .def("__len__", [](const drm::Expansion& e) { return e.children.size(); })
      .def_property_readonly("placements",
                             [](const drm::Expansion& e) {
                               return per_child<int16_t>(e, [](const auto& c) { return c.index; });
                             })
      .def_property_readonly("lock_frames",
                             [](const drm::Expansion& e) {
                               return per_child<int32_t>(
                                   e, [](const auto& c) { return c.lock_frame; });
                             })
      .def_property_readonly("settle_frames",
                             [](const drm::Expansion& e) {
                               return per_child<int32_t>(
                                   e, [](const auto& c) { return c.settle_frames; });
                             })
      .def_property_readonly("clear_rounds",
                             [](const drm::Expansion& e) {
                               return per_child<int32_t>(
                                   e, [](const auto& c) { return c.clear_rounds; });
                             })
      .def_property_readonly("viruses",
                             [](const drm::Expansion& e) {
                               return per_child<int32_t>(e,
                                                         [](const auto& c) { return c.viruses; });
                             })
      .def_property_readonly("phases",
                             [](const drm::Expansion& e) {
                               return per_child<uint8_t>(
                                   e, [](const auto& c) { return c.state.phase; });
                             })
      .def_property_readonly(
          "fields",
          [](const drm::Expansion& e) {
            const auto n = static_cast<py::ssize_t>(e.children.size());
            py::array_t<uint8_t> a({n, static_cast<py::ssize_t>(drm::kFieldSize)});
            uint8_t* d = a.mutable_data();
            for (size_t i = 0; i < e.children.size(); ++i)
              std::memcpy(d + i * drm::kFieldSize, e.children[i].state.field, drm::kFieldSize);
            return a;
          })
      .def(
          "child",
          [](const drm::Expansion& e, const py::handle& k) {
            const auto i = pa::in_range(k, "k", 0, static_cast<long long>(e.children.size()) - 1,
                                        "child position, not a placement index");
            return drm::PyGame{e.children[static_cast<size_t>(i)].state};
          },
          py::arg("k"), "A copy of child k's state as an engine.Game.");

  m.def(
      "board_terms",
      [](const py::handle& fields, double blocker, double no_room, const py::handle& danger) {
        const auto f = boards(fields);
        const py::ssize_t n = f.size() / drm::kFieldSize;
        auto d = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(danger);
        if (!d || d.size() != drm::kFieldSize) {
          throw py::value_error("danger must be 128 numbers (frames per occupied cell)");
        }
        py::array_t<double> out({n, static_cast<py::ssize_t>(drm::kNumBoardTerms)});
        drm::TermParams p;
        p.blocker = blocker;
        p.no_room = no_room;
        p.danger = d.data();
        const uint8_t* src = f.data();
        double* dst = out.mutable_data();
        {
          py::gil_scoped_release release;
          for (py::ssize_t i = 0; i < n; ++i)
            drm::board_terms(src + i * drm::kFieldSize, p, dst + i * drm::kNumBoardTerms);
        }
        return out;
      },
      py::arg("fields"), py::arg("blocker"), py::arg("no_room"), py::arg("danger"),
      R"doc(Teacher board counts float64[N, 10] for fields uint8[N, 128] (search_eval.h): halves,
bury, piece, holes, bump, access, vsame, on_virus, hsame, danger. blocker, no_room: halves
(policy.teacher.Weights); danger: float64[128] frames per occupied cell.)doc");

  m.def(
      "leaf_values",
      [](const py::handle& fields, const py::handle& viruses, const py::handle& phases,
         const py::handle& frames, const py::handle& weights, const py::handle& danger) {
        const auto f = boards(fields);
        const py::ssize_t n = f.size() / drm::kFieldSize;
        const std::vector<double> vir = doubles(viruses, "viruses", n, "one per board");
        const std::vector<double> ph = doubles(phases, "phases", n, "one per board");
        const std::vector<double> t = doubles(frames, "frames", n, "one per board");
        std::vector<double> dg;
        const drm::LeafWeights w = leaf_weights(weights, danger, dg);
        py::array_t<double> out(n);
        double* dst = out.mutable_data();
        const uint8_t* src = f.data();
        {
          py::gil_scoped_release release;
          for (py::ssize_t i = 0; i < n; ++i)
            dst[i] = drm::leaf_value(src + i * drm::kFieldSize, static_cast<int>(vir[i]),
                                     static_cast<int>(ph[i]), t[i], w);
        }
        return out;
      },
      py::arg("fields"), py::arg("viruses"), py::arg("phases"), py::arg("frames"),
      py::arg("weights"), py::arg("danger"),
      R"doc(policy.teacher.leaf_values in C++ (search_eval.h leaf_value): float64[N] values
(frames, higher is better) of fields uint8[N, 128] with viruses[N] left, phases[N]
(engine.Phase) and frames[N] spent since the root. weights: Weights.packed() (15 numbers);
danger: Weights.danger() (128). Raises ValueError/TypeError on bad shapes.)doc");

  m.def(
      "expected_best_leaf",
      [](const py::object& game, const py::handle& pairs, const py::handle& probs, double frames,
         const py::handle& weights, const py::handle& danger, bool taps_only,
         const py::handle& max_settle) {
        const drm::State s = game_of(game).s;
        const ThirdPly a(pairs, probs, weights, danger, taps_only, max_settle);
        double value = 0.0;
        bool ok;
        {
          py::gil_scoped_release release;
          ok = a.value(s, frames, value);
        }
        if (!ok) {
          throw py::value_error(
              "game must be at a spawn state (playing, nextAction action_sendPillFinished); "
              "use engine._core.settle(game) first");
        }
        return value;
      },
      py::arg("game"), py::arg("pairs"), py::arg("probs"), py::arg("frames"), py::arg("weights"),
      py::arg("danger"), py::arg("taps_only") = false, py::arg("max_settle") = 10000,
      R"doc(The play-time search's unseen pill in one call (search.h expected_best_leaf): from
spawn state `game`, reached `frames` after the root, expand_colours() with `pairs`; per pair
its best child's leaf value (frames counted from the root) less the mobility penalty of its
child count, weighted by probs and summed. When a pair has no child, `game`'s own leaf value.
weights: Weights.packed(); danger: Weights.danger(). Raises ValueError when `game` is not at
a spawn state.)doc");

  m.def(
      "expected_best_leaves",
      [](const py::sequence& games, const py::handle& frames, const py::handle& pairs,
         const py::handle& probs, const py::handle& weights, const py::handle& danger,
         bool taps_only, const py::handle& max_settle) {
        std::vector<drm::State> states;
        states.reserve(games.size());
        for (py::handle g : games)
          states.push_back(game_of(py::reinterpret_borrow<py::object>(g)).s);
        const auto n = static_cast<py::ssize_t>(states.size());
        const std::vector<double> t = doubles(frames, "frames", n, "one per game");
        const ThirdPly a(pairs, probs, weights, danger, taps_only, max_settle);
        py::array_t<double> out(n);
        double* v = out.mutable_data();
        py::ssize_t bad = -1;
        {
          py::gil_scoped_release release;
          for (py::ssize_t i = 0; i < n && bad < 0; ++i) {
            if (!a.value(states[static_cast<size_t>(i)], t[static_cast<size_t>(i)], v[i])) {
              bad = i;
            }
          }
        }
        if (bad >= 0) {
          throw py::value_error("games[" + std::to_string(bad) +
                                "] must be at a spawn state (playing, nextAction "
                                "action_sendPillFinished); use engine._core.settle(game) first");
        }
        return out;
      },
      py::arg("games"), py::arg("frames"), py::arg("pairs"), py::arg("probs"), py::arg("weights"),
      py::arg("danger"), py::arg("taps_only") = false, py::arg("max_settle") = 10000,
      R"doc(expected_best_leaf for many spawn states in one call: float64[N], games[i] reached
frames[i] after the root (N games, N frames), the interpreter lock released once for all of
them (the search's third ply from a thread beside the live loop's: one call per state waited
for the lock after each). Raises ValueError naming the first game not at a spawn state, or
when frames does not hold one number per game.)doc");

  m.def(
      "settle",
      [](const py::object& game, const py::handle& max_frames) {
        drm::PyGame& g = game_of(game);
        const int n = static_cast<int>(
            pa::in_range(max_frames, "max_frames", 0, 1 << 20, "frames to step at most"));
        const drm::SettleInfo info = drm::settle(g.s, n);
        return py::make_tuple(info.frames, info.clear_rounds);
      },
      py::arg("game"), py::arg("max_frames") = 10000,
      R"doc(Step `game` in place with no buttons until the next spawn state (playing, nextAction
action_sendPillFinished) or a terminal phase, at most max_frames steps. Returns
(frames stepped, match rounds seen). A game already at spawn or terminal is not stepped.)doc");

  m.def(
      "expand_colours",
      [](const py::object& game, const py::handle& pairs, bool taps_only,
         const py::handle& interval, const py::handle& max_settle) {
        const drm::State s = game_of(game).s;
        const auto cs = colour_pairs(pairs);
        const drm::PlanOptions opt = plan_options(taps_only, interval);
        const int settle_max = settle_limit(max_settle);
        std::vector<drm::Expansion> out;
        bool ok;
        {
          py::gil_scoped_release release;
          ok = drm::expand_colours(s, opt, settle_max, cs, out);
        }
        if (!ok) {
          throw py::value_error(
              "game must be at a spawn state (playing, nextAction action_sendPillFinished); "
              "use engine._core.settle(game) first");
        }
        py::list res;
        for (auto& e : out) res.append(py::cast(std::move(e)));
        return res;
      },
      py::arg("game"), py::arg("pairs"), py::arg("taps_only") = false,
      py::arg("min_press_interval") = 0, py::arg("max_settle") = 10000,
      R"doc(expand() of `game` with the falling pill's colours (pill_colors) replaced by each
(first, second) pair of `pairs` (colours 0 yellow, 1 red, 2 blue) in turn: a list of
Expansion, one per pair, each exactly what expand() gives on a copy with those colours. The
plan is made once for the two-colour pairs and once for the one-colour pairs (the planner
depends on the colours only through whether they are alike). Raises ValueError when `game`
is not at a spawn state or a colour is out of range, TypeError on bad arguments.)doc");

  py::class_<drm::ExpansionCache>(m, "ExpansionCache", R"doc(Expansions kept from one beam search
to the next (search.h ExpansionCache): pass it as engine._core.beam's `cache` to every search
of one game. It holds the expansions of the last two searches (each up to
1 + (depth - 1) x width of them, ~25 KB each); thread-safe.)doc")
      .def(py::init<>())
      .def_property_readonly("hits", &drm::ExpansionCache::hits, "Expansions taken from the cache.")
      .def_property_readonly("misses", &drm::ExpansionCache::misses,
                             "Expansions made (and added to it).")
      .def("clear", &drm::ExpansionCache::clear, "Drops every expansion and zeroes the counts.")
      .def("__len__", &drm::ExpansionCache::size);

  // engine._core.beam and beam_values: the roots, sizes and weights from Python, the search
  // with the interpreter lock released; `first_values` as beam_search's.
  const auto run_beam = [](const py::handle& states, const py::handle& values,
                           const py::handle& frames, const py::handle& depth,
                           const py::handle& width, const py::handle& weights,
                           const py::handle& danger, bool taps_only, const py::handle& max_settle,
                           drm::ExpansionCache* cache, std::vector<double>* first_values) {
    std::vector<drm::BeamRoot> ranked;
    for (py::handle g : states) {
      drm::BeamRoot r;
      r.state = game_of(py::reinterpret_borrow<py::object>(g)).s;
      ranked.push_back(r);
    }
    if (ranked.empty()) throw py::value_error("states must hold at least one engine.Game");
    const auto n = static_cast<py::ssize_t>(ranked.size());
    const std::vector<double> v = doubles(values, "values", n, "one per state");
    const std::vector<double> t = doubles(frames, "frames", n, "one per state");
    for (size_t i = 0; i < ranked.size(); ++i) {
      ranked[i].value = v[i];
      ranked[i].frames = t[i];
    }
    const int d =
        static_cast<int>(pa::in_range(depth, "depth", 0, 1 << 10, "pills after the first"));
    const int wd = static_cast<int>(pa::in_range(width, "width", 1, 1 << 16, "lines kept a pill"));
    std::vector<double> dg;
    const drm::LeafWeights w = leaf_weights(weights, danger, dg);
    const drm::PlanOptions opt = plan_options(taps_only, py::int_(0));
    const int settle_max = settle_limit(max_settle);
    py::gil_scoped_release release;
    return drm::beam_search(ranked, d, wd, opt, settle_max, w, cache, first_values);
  };

  m.def(
      "beam",
      [run_beam](const py::handle& states, const py::handle& values, const py::handle& frames,
                 const py::handle& depth, const py::handle& width, const py::handle& weights,
                 const py::handle& danger, bool taps_only, const py::handle& max_settle,
                 drm::ExpansionCache* cache) {
        return run_beam(states, values, frames, depth, width, weights, danger, taps_only,
                        max_settle, cache, nullptr);
      },
      py::arg("states"), py::arg("values"), py::arg("frames"), py::arg("depth"), py::arg("width"),
      py::arg("weights"), py::arg("danger"), py::arg("taps_only") = false,
      py::arg("max_settle") = 10000, py::arg("cache") = nullptr,
      R"doc(policy.beam.BeamPlayer's beam after its first pill (search.h beam_search), with the
interpreter lock released. cache: an ExpansionCache shared by the searches of one game (None:
none), which leaves the choice as it is and saves the expansions the search before made. states: the root's live children (engine.Game at their spawn
states), best first; values, frames: float64[N], their leaf values and the frames each took
from the root. Keeps the `width` best lines with distinct boards for `depth` more pills and
returns the position in `states` of the chosen line's root child. weights: Weights.packed();
danger: Weights.danger(). Raises ValueError on an empty `states` or bad sizes, TypeError on
a non-Game.)doc");

  m.def(
      "beam_values",
      [run_beam](const py::handle& states, const py::handle& values, const py::handle& frames,
                 const py::handle& depth, const py::handle& width, const py::handle& weights,
                 const py::handle& danger, bool taps_only, const py::handle& max_settle,
                 drm::ExpansionCache* cache) {
        std::vector<double> fv;
        const int k = run_beam(states, values, frames, depth, width, weights, danger, taps_only,
                               max_settle, cache, &fv);
        py::array_t<double> out(static_cast<py::ssize_t>(fv.size()));
        std::copy(fv.begin(), fv.end(), out.mutable_data());
        return py::make_tuple(k, out);
      },
      py::arg("states"), py::arg("values"), py::arg("frames"), py::arg("depth"), py::arg("width"),
      py::arg("weights"), py::arg("danger"), py::arg("taps_only") = false,
      py::arg("max_settle") = 10000, py::arg("cache") = nullptr,
      R"doc(engine._core.beam with each root line's value: returns (position, values), the position
as beam's and values float64[N], one per state: the best leaf value (frames, higher is better) of
that root child's lines where the search ended (its last depth; at the depth where a line first
clears the stage, its fastest clear there, else its best live line there); -inf where none of
its lines is there. The same arguments and errors as beam.)doc");

  m.def(
      "expand",
      [](const py::object& game, bool taps_only, const py::handle& interval,
         const py::handle& max_settle) {
        const drm::State s = game_of(game).s;
        const drm::PlanOptions opt = plan_options(taps_only, interval);
        const int settle_max = settle_limit(max_settle);
        drm::Expansion out;
        bool ok;
        {
          py::gil_scoped_release release;
          ok = drm::expand(s, opt, settle_max, out);
        }
        if (!ok) {
          throw py::value_error(
              "game must be at a spawn state (playing, nextAction action_sendPillFinished); "
              "use engine._core.settle(game) first");
        }
        return out;
      },
      py::arg("game"), py::arg("taps_only") = false, py::arg("min_press_interval") = 0,
      py::arg("max_settle") = 10000,
      R"doc(From a spawn state: plan (engine.plan) and lock every reachable placement on the
planner's lock frame (search.h lock_at: the board, frame counters and redraw row the masks
would leave; held buttons released, DAS counter unchanged), then step with no buttons until
the next spawn state or a terminal phase. Returns an Expansion. Raises ValueError when `game`
is not at a spawn state, TypeError/ValueError on bad arguments.)doc");
}
