// pybind11 registrations for planner.h: engine._core.plan(game, prefix=None,
// min_press_interval=0, taps_only=False) -> Plan. Only argument checks, marshalling and the
// Plan's mask cache live here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "game.h"
#include "planner.h"
#include "planner_check.h"
#include "py_args.h"
#include "py_game.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

// A plan with the masks asked for so far (masks are rebuilt on demand by the planner).
struct PyPlan {
  drm::Plan plan;
  bool have_all = false;
  std::vector<std::vector<uint8_t>> all;  // per placement, when have_all
  std::vector<int> presses;               // per placement, when have_all

  void ensure_all() {
    if (have_all) return;
    std::vector<std::vector<uint8_t>> masks;  // filled without the GIL, stored with it
    std::vector<int> counts;
    bool ok;
    {
      py::gil_scoped_release release;
      ok = drm::plan_all_masks(plan, masks, counts);
    }
    if (!ok) throw std::runtime_error("planner: could not rebuild the masks of a placement");
    if (have_all) return;  // another thread filled it meanwhile
    all.swap(masks);
    presses.swap(counts);
    have_all = true;
  }
};

// The Game's state through its public state_bytes() (Game lives in bindings.cpp's own TU).
drm::State state_of(const py::object& game) {
  if (py::isinstance<drm::PyGame>(game)) return game.cast<const drm::PyGame&>().s;
  if (!py::isinstance<py::bytes>(game)) {
    throw py::type_error("game must be an engine.Game (or its state_bytes())");
  }
  const std::string b = py::reinterpret_borrow<py::bytes>(game);
  if (b.size() != sizeof(drm::State)) {
    throw py::value_error("state must be " + std::to_string(sizeof(drm::State)) + " bytes, got " +
                          std::to_string(b.size()));
  }
  drm::State s;
  std::memcpy(&s, b.data(), sizeof(drm::State));
  return s;
}

// Position of a placement index in plan.placements, or KeyError.
size_t find(const drm::Plan& p, const py::handle& index) {
  const auto idx =
      pa::in_range(index, "placement", 0, drm::kNumPlacements - 1, "rotation*128 + row*8 + col");
  for (size_t i = 0; i < p.placements.size(); ++i)
    if (p.placements[i].index == idx) return i;
  throw py::key_error("placement " + std::to_string(idx) + " is not reachable");
}

template <typename T, typename F>
py::array_t<T> column(const drm::Plan& p, F f) {
  py::array_t<T> a(static_cast<py::ssize_t>(p.placements.size()));
  T* d = a.mutable_data();
  for (size_t i = 0; i < p.placements.size(); ++i) d[i] = static_cast<T>(f(p.placements[i]));
  return a;
}

py::array_t<uint8_t> to_array(const std::vector<uint8_t>& v) {
  py::array_t<uint8_t> a(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size());
  return a;
}

}  // namespace

void register_planner(py::module_& m) {
  py::class_<PyPlan>(m, "Plan", R"doc(Every lock pose reachable from one state (docs/PLANNER.md).

placements int16[P]: placement indices (rotation*128 + row*8 + col), ascending.
lock_frames int32[P]: the pill locks during the lock_frames[i]-th step from the planned state
(the fewest frames any inputs take to lock there).
masks(index) -> uint8[lock_frame]: per-frame masks from the planned state (prefix included),
rebuilt on demand; among the inputs that lock there on that frame, the fewest presses.
all_masks() -> list of uint8 arrays, one per placement (one search for all: use it when every
placement's masks are wanted). presses int32[P]: rising edges in each placement's masks (builds
all_masks()). reachable bool[512]. status: 0 ok, 1 the prefix locked the pill, 2 no pill.)doc")
      .def_property_readonly("placements",
                             [](const PyPlan& p) {
                               return column<int16_t>(p.plan,
                                                      [](const auto& x) { return x.index; });
                             })
      .def_property_readonly("lock_frames",
                             [](const PyPlan& p) {
                               return column<int32_t>(p.plan,
                                                      [](const auto& x) { return x.lock_frame; });
                             })
      .def_property_readonly("presses",
                             [](PyPlan& p) {
                               p.ensure_all();
                               py::array_t<int32_t> a(static_cast<py::ssize_t>(p.presses.size()));
                               for (size_t i = 0; i < p.presses.size(); ++i)
                                 a.mutable_data()[i] = p.presses[i];
                               return a;
                             })
      .def_property_readonly("reachable",
                             [](const PyPlan& p) {
                               py::array_t<bool> a(drm::kNumPlacements);
                               bool* d = a.mutable_data();
                               for (int i = 0; i < drm::kNumPlacements; ++i)
                                 d[i] = p.plan.reachable[i] != 0;
                               return a;
                             })
      .def_property_readonly("status", [](const PyPlan& p) { return p.plan.status; })
      .def_property_readonly("nodes", [](const PyPlan& p) { return p.plan.nodes; })
      .def("__len__", [](const PyPlan& p) { return p.plan.placements.size(); })
      .def(
          "lock_frame",
          [](const PyPlan& p, const py::handle& index) {
            return p.plan.placements[find(p.plan, index)].lock_frame;
          },
          py::arg("index"), "Lock frame of one placement (KeyError when unreachable).")
      .def(
          "masks",
          [](const PyPlan& p, const py::handle& index) {
            const size_t i = find(p.plan, index);
            if (p.have_all) return to_array(p.all[i]);
            std::vector<uint8_t> out;
            bool ok;
            {
              py::gil_scoped_release release;
              ok = drm::plan_masks(p.plan, p.plan.placements[i].index, out);
            }
            if (!ok) throw std::runtime_error("planner: could not rebuild a placement's masks");
            return to_array(out);
          },
          py::arg("index"),
          "uint8[lock_frame] masks from the planned state to the lock, inclusive (KeyError when "
          "unreachable).")
      .def(
          "all_masks",
          [](PyPlan& p) {
            p.ensure_all();
            py::list out;
            for (const auto& v : p.all) out.append(to_array(v));
            return out;
          },
          "Every placement's masks, in the order of placements (one search for all).");

  m.def(
      "replay_locks",
      [](const py::object& game, const py::sequence& masks_list) {
        const drm::State s = state_of(game);
        const auto n = static_cast<py::ssize_t>(py::len(masks_list));
        std::vector<py::array_t<uint8_t>> arrays;
        for (py::ssize_t i = 0; i < n; ++i) {
          py::object a = masks_list[i];
          if (!py::isinstance<py::array>(a) || a.cast<py::array>().ndim() != 1) {
            throw py::type_error("masks_list items must be 1-D numpy.ndarray of dtype uint8");
          }
          arrays.push_back(pa::uint8_vector(a, "masks", a.cast<py::array>().size()));
        }
        py::array_t<int32_t> frames(n), presses(n);
        py::array_t<uint8_t> fields({n, static_cast<py::ssize_t>(drm::kFieldSize)});
        for (py::ssize_t i = 0; i < n; ++i) {
          const auto r =
              drm::replay_locks(s, arrays[static_cast<size_t>(i)].data(),
                                static_cast<size_t>(arrays[static_cast<size_t>(i)].size()));
          frames.mutable_data()[i] = r.lock_frame;
          presses.mutable_data()[i] = r.presses;
          std::memcpy(fields.mutable_data(i, 0), r.field.data(), drm::kFieldSize);
        }
        return py::make_tuple(frames, fields, presses);
      },
      py::arg("game"), py::arg("masks_list"),
      R"doc(Steps each uint8 mask array from the game's state with engine.step (a check that uses
nothing of the planner). Returns (lock_frames int32[P]: 1-based frame of the first lock or 0,
fields uint8[P,128]: the field after that frame, presses int32[P]: rising edges up to it).)doc");

  m.def(
      "exhaustive_locks",
      [](const py::object& game, const py::handle& alphabet, const py::handle& max_states,
         const py::handle& interval) {
        const drm::State s = state_of(game);
        if (!py::isinstance<py::array>(alphabet)) {
          throw py::type_error("alphabet must be a 1-D numpy.ndarray of dtype uint8");
        }
        auto a = pa::uint8_vector(alphabet, "alphabet",
                                  py::reinterpret_borrow<py::array>(alphabet).size());
        const std::vector<uint8_t> alpha(a.data(), a.data() + a.size());
        const auto cap = static_cast<size_t>(
            pa::in_range(max_states, "max_states", 1, 1LL << 40, "states before giving up"));
        const int every = pa::press_interval(interval);
        std::vector<drm::ExhaustiveLock> out;
        bool complete;
        {
          py::gil_scoped_release release;
          complete = drm::exhaustive_locks(s, alpha, cap, out, every);
        }
        if (!complete) throw py::value_error("exhaustive search gave up past max_states states");
        const auto n = static_cast<py::ssize_t>(out.size());
        py::array_t<int32_t> frames(n), presses(n);
        py::array_t<uint8_t> fields({n, static_cast<py::ssize_t>(drm::kFieldSize)});
        for (py::ssize_t i = 0; i < n; ++i) {
          frames.mutable_data()[i] = out[static_cast<size_t>(i)].frame;
          presses.mutable_data()[i] = out[static_cast<size_t>(i)].presses;
          std::memcpy(fields.mutable_data(i, 0), out[static_cast<size_t>(i)].field.data(),
                      drm::kFieldSize);
        }
        return py::make_tuple(fields, frames, presses);
      },
      py::arg("game"), py::arg("alphabet"), py::arg("max_states") = 2000000,
      py::arg("min_press_interval") = 0,
      R"doc(Breadth-first search over whole engine states (engine.step with every mask of
alphabet, uint8[K]) from the game's state, written without the planner's model: every distinct
field a lock writes, with the fewest frames and then the fewest presses; min_press_interval as
for plan(). Returns (fields uint8[L,128], frames int32[L], presses int32[L]). ValueError past
max_states states.)doc");

  m.def(
      "plan",
      [](const py::object& game, const py::object& prefix, const py::handle& interval,
         bool taps_only) {
        drm::State s = state_of(game);
        drm::PlanOptions opt;
        opt.min_press_interval = pa::press_interval(interval);
        opt.taps_only = taps_only;
        std::string pre;
        if (!prefix.is_none()) {
          if (!py::isinstance<py::array>(prefix)) {
            throw py::type_error("prefix must be a 1-D numpy.ndarray of dtype uint8");
          }
          auto arr = py::reinterpret_borrow<py::array>(prefix);
          if (arr.ndim() != 1) throw py::value_error("prefix must be 1-D");
          auto c = pa::uint8_vector(prefix, "prefix", arr.size());
          pre.assign(reinterpret_cast<const char*>(c.data()), static_cast<size_t>(c.size()));
        }
        PyPlan out;
        {
          py::gil_scoped_release release;
          drm::plan(s, reinterpret_cast<const uint8_t*>(pre.data()), static_cast<int>(pre.size()),
                    opt, out.plan);
        }
        return out;
      },
      py::arg("game"), py::arg("prefix") = py::none(), py::arg("min_press_interval") = 0,
      py::arg("taps_only") = false,
      R"doc(Every reachable lock pose of the falling (or next) pill, with frame-exact masks.

game: an engine.Game (or its state_bytes()). prefix: uint8[k] masks already committed, stepped
first. min_press_interval: at most one new press every N frames (0: no limit). taps_only: Left
and Right only on press frames (no DAS); still exact on replay, may lock later or miss a pose.
Returns a Plan: lock frames are the fewest over the allowed inputs, masks break ties by fewer
presses (docs/PLANNER.md). Raises TypeError/ValueError on bad arguments, ValueError when the
falling pill's pose is not one the game can produce.)doc");
}
