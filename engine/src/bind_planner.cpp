// pybind11 registrations for planner.h: engine._core.plan(game, prefix=None,
// min_press_interval=0) -> Plan. Only argument checks and marshalling live here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>

#include "game.h"
#include "planner.h"
#include "py_args.h"
#include "py_game.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

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

const drm::PlannedPlacement& find(const drm::Plan& p, const py::handle& index) {
  const auto idx =
      pa::in_range(index, "placement", 0, drm::kNumPlacements - 1, "rotation*128 + row*8 + col");
  for (const auto& pl : p.placements)
    if (pl.index == idx) return pl;
  throw py::key_error("placement " + std::to_string(idx) + " is not reachable");
}

template <typename T, typename F>
py::array_t<T> column(const drm::Plan& p, F f) {
  py::array_t<T> a(static_cast<py::ssize_t>(p.placements.size()));
  T* d = a.mutable_data();
  for (size_t i = 0; i < p.placements.size(); ++i) d[i] = static_cast<T>(f(p.placements[i]));
  return a;
}

}  // namespace

void register_planner(py::module_& m) {
  py::class_<drm::Plan>(m, "Plan", R"doc(Every lock pose reachable from one state (docs/PLANNER.md).

placements int16[P]: placement indices (rotation*128 + row*8 + col), ascending.
lock_frames int32[P]: the pill locks during the lock_frames[i]-th step from the planned state.
presses int32[P]: rising button edges in that placement's masks.
masks(index) -> uint8[lock_frame]: per-frame masks from the planned state (prefix included).
reachable bool[512]. status: 0 ok, 1 the prefix locked the pill, 2 no pill to plan.)doc")
      .def_property_readonly("placements",
                             [](const drm::Plan& p) {
                               return column<int16_t>(p, [](const auto& x) { return x.index; });
                             })
      .def_property_readonly("lock_frames",
                             [](const drm::Plan& p) {
                               return column<int32_t>(p,
                                                      [](const auto& x) { return x.lock_frame; });
                             })
      .def_property_readonly("presses",
                             [](const drm::Plan& p) {
                               return column<int32_t>(p, [](const auto& x) { return x.presses; });
                             })
      .def_property_readonly("reachable",
                             [](const drm::Plan& p) {
                               py::array_t<bool> a(drm::kNumPlacements);
                               bool* d = a.mutable_data();
                               for (int i = 0; i < drm::kNumPlacements; ++i)
                                 d[i] = p.reachable[i] != 0;
                               return a;
                             })
      .def_readonly("status", &drm::Plan::status)
      .def_readonly("nodes", &drm::Plan::nodes)
      .def("__len__", [](const drm::Plan& p) { return p.placements.size(); })
      .def(
          "lock_frame",
          [](const drm::Plan& p, const py::handle& index) { return find(p, index).lock_frame; },
          py::arg("index"), "Lock frame of one placement (KeyError when unreachable).")
      .def(
          "masks",
          [](const drm::Plan& p, const py::handle& index) {
            const auto& pl = find(p, index);
            py::array_t<uint8_t> a(pl.lock_frame);
            std::memcpy(a.mutable_data(), p.masks.data() + pl.mask_offset, pl.lock_frame);
            return a;
          },
          py::arg("index"),
          "uint8[lock_frame] masks from the planned state to the lock, inclusive.");

  m.def(
      "plan",
      [](const py::object& game, const py::object& prefix, const py::handle& interval,
         bool taps_only) {
        drm::State s = state_of(game);
        drm::PlanOptions opt;
        opt.min_press_interval = static_cast<int>(
            pa::in_range(interval, "min_press_interval", 0, 255, "frames between new presses"));
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
        drm::Plan out;
        {
          py::gil_scoped_release release;
          drm::plan(s, reinterpret_cast<const uint8_t*>(pre.data()), static_cast<int>(pre.size()),
                    opt, out);
        }
        return out;
      },
      py::arg("game"), py::arg("prefix") = py::none(), py::arg("min_press_interval") = 0,
      py::arg("taps_only") = false,
      R"doc(Every reachable lock pose of the falling (or next) pill, with frame-exact masks.

game: an engine.Game (or its state_bytes()). prefix: uint8[k] masks already committed, stepped
first. min_press_interval: at most one new press every N frames (0: no limit). taps_only: Left
and Right only on press frames (no DAS); faster, still exact on replay, may lock later or miss
a pose. Returns a Plan; masks are minimal in frames to lock, ties broken by fewer presses, over
the allowed inputs (docs/PLANNER.md). Raises TypeError/ValueError on bad arguments.)doc");
}
