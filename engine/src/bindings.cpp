// pybind11 registrations for engine._core: Game (one console), Batch (N consoles stepped with the
// GIL released, state exposed as strided NumPy views without copies) and level generation.
// Rules live in game.cpp / level_gen.cpp; this file only checks arguments and marshals.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "game.h"
#include "level_gen.h"
#include "py_args.h"
#include "py_game.h"
#include "rng.h"

namespace py = pybind11;
using drm::State;
namespace pa = drm::py_args;

void register_level_flow(py::module_& m);
void register_level_gen(py::module_& m);
void register_menu(py::module_& m);
void register_planner(py::module_& m);
void register_render(py::module_& m);
void register_search(py::module_& m);
void register_versus(py::module_& m);

namespace {

// A level state made the way the console makes it: generate_level then init_level.
State make_level(const py::handle& level_arg, const py::handle& speed_arg,
                 const py::handle& seed_arg, const py::handle& fc_arg) {
  const int level = static_cast<int>(
      pa::in_range(level_arg, "level", 0, drm::kMaxLevel, "0..20 selectable, 21..24 by clears"));
  const int speed = static_cast<int>(pa::in_range(speed_arg, "speed", 0, 2, "0 LOW, 1 MED, 2 HI"));
  const auto seed = static_cast<uint16_t>(
      pa::in_range(seed_arg, "seed", 0, 0xFFFF, "16-bit RNG state $17 << 8 | $18"));
  const auto fc = static_cast<uint8_t>(
      pa::in_range(fc_arg, "frame_counter", 0, 255, "frameCounter $43 as levelIntro_delay starts"));
  drm::Rng rng = drm::Rng::from_state(seed);
  drm::LevelSetup setup{};
  try {
    drm::generate_level(level, rng, setup);
  } catch (const std::domain_error& e) {
    throw py::value_error(std::string("seed cannot make this level: ") + e.what());
  }
  State s;
  if (!drm::init_level(s, level, speed, setup.field.data(), setup.pill_reserve.data(),
                       setup.virus_count_bcd, fc, rng.hi, rng.lo)) {
    throw py::value_error("invalid level setup");
  }
  return s;
}

State make_demo(const py::handle& fc_arg, const py::handle& lead_arg) {
  const auto fc =
      static_cast<uint8_t>(pa::in_range(fc_arg, "frame_counter", 0, 255, "frameCounter"));
  const int lead =
      static_cast<int>(pa::in_range(lead_arg, "input_lead", 0, 64, "demo input frames"));
  State s;
  drm::init_demo(s, fc, lead);
  return s;
}

using Game = drm::PyGame;

// A NumPy view of one State member across a contiguous array of States.
template <typename T>
py::array member_view(State* base, size_t count, size_t offset, py::handle owner,
                      py::ssize_t inner = 0) {
  char* ptr = reinterpret_cast<char*>(base) + offset;
  std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(count)};
  std::vector<py::ssize_t> strides{static_cast<py::ssize_t>(sizeof(State))};
  if (inner > 0) {
    shape.push_back(inner);
    strides.push_back(sizeof(T));
  }
  return py::array(py::dtype::of<T>(), shape, strides, ptr, owner);
}

struct Batch {
  std::vector<State> states;
};

#define DRM_FIELD_VIEW(name, member, type, inner) \
  {name, offsetof(State, member), sizeof(type), inner}

struct ViewSpec {
  const char* name;
  size_t offset;
  size_t size;
  int inner;
};

// The state members exposed by name (bytes unless noted): RAM mirrors, see game.h.
const ViewSpec kViews[] = {
    DRM_FIELD_VIEW("field", field, uint8_t, drm::kFieldSize),
    DRM_FIELD_VIEW("reserve", reserve, uint8_t, drm::kReserveSize),
    DRM_FIELD_VIEW("shown", shown, uint8_t, drm::kFieldSize),
    DRM_FIELD_VIEW("status", status, uint8_t, 0),
    DRM_FIELD_VIEW("pill_colors", pill_color, uint8_t, 2),
    DRM_FIELD_VIEW("pill_x", pill_x, uint8_t, 0),
    DRM_FIELD_VIEW("pill_y", pill_y, uint8_t, 0),
    DRM_FIELD_VIEW("pill_rotation", pill_rotation, uint8_t, 0),
    DRM_FIELD_VIEW("next_colors", next_color, uint8_t, 2),
    DRM_FIELD_VIEW("next_rotation", next_rotation, uint8_t, 0),
    DRM_FIELD_VIEW("pill_placed_step", pill_placed_step, uint8_t, 0),
    DRM_FIELD_VIEW("next_action", next_action, uint8_t, 0),
    DRM_FIELD_VIEW("speed_ups", speed_ups, uint8_t, 0),
    DRM_FIELD_VIEW("speed_setting", speed_setting, uint8_t, 0),
    DRM_FIELD_VIEW("speed_counter", speed_counter, uint8_t, 0),
    DRM_FIELD_VIEW("hor_velocity", hor_velocity, uint8_t, 0),
    DRM_FIELD_VIEW("chain_length0", chain_length0, uint8_t, 0),
    DRM_FIELD_VIEW("match_flag", match_flag, uint8_t, 0),
    DRM_FIELD_VIEW("score_multiplier", score_multiplier, uint8_t, 0),
    DRM_FIELD_VIEW("attack_colors", attack_colors, uint8_t, 4),
    DRM_FIELD_VIEW("level", level, uint8_t, 0),
    DRM_FIELD_VIEW("virus_left_bcd", virus_left, uint8_t, 0),
    DRM_FIELD_VIEW("pills_counter", pills_counter, uint8_t, 0),
    DRM_FIELD_VIEW("pills_decimal", pills_decimal, uint8_t, 0),
    DRM_FIELD_VIEW("frame_counter", frame_counter, uint8_t, 0),
    DRM_FIELD_VIEW("btns_held", btns_held, uint8_t, 0),
    DRM_FIELD_VIEW("btns_pressed", btns_pressed, uint8_t, 0),
    DRM_FIELD_VIEW("pill_thrown_frame", pill_thrown_frame, uint8_t, 0),
    DRM_FIELD_VIEW("phase", phase, uint8_t, 0),
    DRM_FIELD_VIEW("lock_event", lock_event, uint8_t, 0),
    DRM_FIELD_VIEW("spr_pill", spr_pill, uint8_t, 0),
    DRM_FIELD_VIEW("spr_pill_x", spr_pill_x, uint8_t, 0),
    DRM_FIELD_VIEW("spr_pill_y", spr_pill_y, uint8_t, 0),
    DRM_FIELD_VIEW("spr_pill_rotation", spr_pill_rotation, uint8_t, 0),
    DRM_FIELD_VIEW("spr_pill_colors", spr_pill_color, uint8_t, 2),
    DRM_FIELD_VIEW("mario_throw_frame", mario_throw_frame, uint8_t, 0),
    DRM_FIELD_VIEW("level_fail", level_fail, uint8_t, 0),
    DRM_FIELD_VIEW("rng", rng, uint8_t, 2),
    DRM_FIELD_VIEW("score", score, uint32_t, 0),
    DRM_FIELD_VIEW("frame", frame, uint32_t, 0),
};

py::array view_by_spec(const ViewSpec& v, State* base, size_t count, py::handle owner) {
  if (v.size == 4) return member_view<uint32_t>(base, count, v.offset, owner, v.inner);
  return member_view<uint8_t>(base, count, v.offset, owner, v.inner);
}

py::array game_view(Game& g, const ViewSpec& v, py::handle owner) {
  py::array a = view_by_spec(v, &g.s, 1, owner);
  return v.inner > 0 ? py::array(a[py::int_(0)]) : py::array(a.attr("reshape")(py::tuple()));
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "NES-exact one-player Dr. Mario engine (see docs/ENGINE.md).";
  m.attr("STATE_BYTES") = sizeof(State);
  m.attr("FIELD_SIZE") = drm::kFieldSize;

  py::class_<Game> game(m, "Game", R"doc(One console running one-player Dr. Mario.

Game(level, speed, seed, frame_counter=0): the state as levelIntro_delay begins, the board and
pill reserve made by generate_level(level, seed). level 0..24, speed 0 LOW / 1 MED / 2 HI,
seed the 16-bit RNG state ($17 << 8 | $18) as initData_level starts, frame_counter the value
of frameCounter ($43) at that moment (its parity decides the fast-drop and LOW-throw frames).
Raises ValueError (out of range) or TypeError (not an integer).)doc");
  game.def(py::init([](const py::handle& level, const py::handle& speed, const py::handle& seed,
                       const py::handle& fc) { return Game{make_level(level, speed, seed, fc)}; }),
           py::arg("level"), py::arg("speed"), py::arg("seed"), py::arg("frame_counter") = 0)
      .def_static(
          "demo",
          [](const py::handle& fc, const py::handle& lead) { return Game{make_demo(fc, lead)}; },
          py::arg("frame_counter") = 1, py::arg("input_lead") = 7,
          "The attract-mode demo (level 10 MED, demo_field $CF00, demo_pills $CF80, "
          "demo_instructionSet $D000). The defaults align engine frame f with frame f of "
          "tests/data/nes_demo_trace.json (docs/ENGINE.md).")
      .def(
          "step",
          [](Game& g, const py::handle& buttons) {
            drm::step(g.s, static_cast<uint8_t>(pa::in_range(buttons, "buttons", 0, 255,
                                                             "mask A $80 .. Right $01")));
          },
          py::arg("buttons"), "Advance exactly one NES frame with this button mask held.")
      .def(
          "run",
          [](Game& g, const py::handle& masks_obj) {
            auto masks = py::array_t<uint8_t, py::array::c_style>::ensure(masks_obj);
            if (!masks || masks.ndim() != 1 || !py::isinstance<py::array>(masks_obj) ||
                !py::reinterpret_borrow<py::array>(masks_obj).dtype().is(
                    py::dtype::of<uint8_t>())) {
              throw py::type_error("masks must be a 1-D numpy.ndarray of dtype uint8");
            }
            const uint8_t* p = masks.data();
            const py::ssize_t n = masks.shape(0);
            py::gil_scoped_release release;
            long long in_play = 0;
            for (py::ssize_t i = 0; i < n; ++i) {
              in_play += g.s.phase < drm::kPhaseStageClear;
              drm::step(g.s, p[i]);
            }
            return in_play;
          },
          py::arg("masks"),
          "Step once per entry of a uint8[N] mask array (GIL released). Returns the number of "
          "those frames stepped while the game was in play (not yet cleared, topped out or "
          "ended); an ended game still counts frames but nothing else changes.")
      .def(
          "clone", [](const Game& g) { return Game{g.s}; }, "An independent copy (a memcpy).")
      .def("__copy__", [](const Game& g) { return Game{g.s}; })
      .def("__deepcopy__", [](const Game& g, py::dict) { return Game{g.s}; })
      .def(
          "state_bytes",
          [](const Game& g) {
            return py::bytes(reinterpret_cast<const char*>(&g.s), sizeof(State));
          },
          "The whole state as bytes (for hashing and equality).")
      .def_static(
          "from_state_bytes",
          [](const py::bytes& data) {
            const std::string raw = data;
            if (raw.size() != sizeof(State))
              throw py::value_error("state bytes: " + std::to_string(raw.size()) +
                                    " bytes, this engine's state has " +
                                    std::to_string(sizeof(State)));
            Game g{};
            std::memcpy(&g.s, raw.data(), sizeof(State));
            return g;
          },
          py::arg("data"),
          "The Game whose state_bytes() is `data` (bytes of this engine build's state_bytes, "
          "e.g. a level's state 0 in a run's summary). Raises ValueError on another length.")
      .def("__eq__",
           [](const Game& a, const Game& b) { return std::memcmp(&a.s, &b.s, sizeof(State)) == 0; })
      .def_property_readonly("pill_valid", [](const Game& g) { return drm::pill_move_valid(g.s); })
      .def_property_readonly("virus_count", [](const Game& g) { return drm::virus_count(g.s); })
      .def_property_readonly("virus_left",
                             [](const Game& g) { return drm::bcd_to_int(g.s.virus_left); })
      .def_property_readonly("is_demo", [](const Game& g) { return g.s.demo != 0; });
  for (const ViewSpec& v : kViews) {
    game.def_property_readonly(
        v.name, [v](py::object self) { return game_view(self.cast<Game&>(), v, self); },
        "Live NumPy view of the state member (see game.h for the RAM address).");
  }

  py::class_<Batch> batch(m, "Batch", R"doc(N independent games stepped together.

Batch(levels, speeds, seeds, frame_counters=None): int arrays (or scalars) of length N.
step(buttons uint8[N]) advances every game one frame with the GIL released and no allocation.
Members (field [N,128], pill_x [N], ...) are live strided views into the games' memory.)doc");
  batch
      .def(py::init([](py::object levels, py::object speeds, py::object seeds, py::object fcs) {
             auto np = py::module_::import("numpy");
             py::array l = np.attr("atleast_1d")(levels);
             py::array sp = np.attr("broadcast_to")(speeds, l.attr("shape"));
             py::array se = np.attr("broadcast_to")(seeds, l.attr("shape"));
             py::array fc =
                 np.attr("broadcast_to")(fcs.is_none() ? py::int_(0) : fcs, l.attr("shape"));
             if (l.ndim() != 1 || l.size() == 0)
               throw py::value_error("levels must be 1-D, N >= 1");
             Batch b;
             b.states.reserve(static_cast<size_t>(l.size()));
             for (py::ssize_t i = 0; i < l.size(); ++i) {
               b.states.push_back(
                   make_level(l[py::int_(i)], sp[py::int_(i)], se[py::int_(i)], fc[py::int_(i)]));
             }
             return b;
           }),
           py::arg("levels"), py::arg("speeds"), py::arg("seeds"),
           py::arg("frame_counters") = py::none())
      .def("__len__", [](const Batch& b) { return b.states.size(); })
      .def(
          "step",
          [](Batch& b, const py::handle& buttons) {
            auto arr =
                pa::uint8_vector(buttons, "buttons", static_cast<py::ssize_t>(b.states.size()));
            const uint8_t* p = arr.data();
            State* s = b.states.data();
            const size_t n = b.states.size();
            py::gil_scoped_release release;
            for (size_t i = 0; i < n; ++i) drm::step(s[i], p[i]);
          },
          py::arg("buttons"), "Advance every game one frame; buttons: uint8[N].")
      .def(
          "run",
          [](Batch& b, const py::handle& buttons) {
            if (!py::isinstance<py::array>(buttons)) {
              throw py::type_error("buttons must be a numpy.ndarray uint8[T, N]");
            }
            auto arr = py::reinterpret_borrow<py::array>(buttons);
            if (arr.ndim() != 2 || arr.shape(1) != static_cast<py::ssize_t>(b.states.size())) {
              throw py::value_error("buttons must have shape (T, N)");
            }
            auto c = pa::uint8_vector(buttons, "buttons", arr.size());
            const uint8_t* p = c.data();
            const py::ssize_t t_max = arr.shape(0);
            State* s = b.states.data();
            const size_t n = b.states.size();
            py::gil_scoped_release release;
            long long in_play = 0;
            for (py::ssize_t t = 0; t < t_max; ++t) {
              for (size_t i = 0; i < n; ++i) {
                in_play += s[i].phase < drm::kPhaseStageClear;
                drm::step(s[i], p[t * n + i]);
              }
            }
            return in_play;
          },
          py::arg("buttons"),
          "Advance T frames; buttons: uint8[T, N] (GIL released). Returns the number of game "
          "frames (of the T * N) stepped while that game was in play.")
      .def(
          "get",
          [](const Batch& b, const py::handle& i) {
            const auto k = pa::in_range(i, "index", 0, static_cast<long long>(b.states.size()) - 1,
                                        "game index");
            return Game{b.states[static_cast<size_t>(k)]};
          },
          py::arg("index"), "A copy of game i.")
      .def(
          "set",
          [](Batch& b, const py::handle& i, const Game& g) {
            const auto k = pa::in_range(i, "index", 0, static_cast<long long>(b.states.size()) - 1,
                                        "game index");
            b.states[static_cast<size_t>(k)] = g.s;
          },
          py::arg("index"), py::arg("game"), "Overwrite game i with a copy of `game`.");
  for (const ViewSpec& v : kViews) {
    batch.def_property_readonly(
        v.name,
        [v](py::object self) {
          Batch& b = self.cast<Batch&>();
          return view_by_spec(v, b.states.data(), b.states.size(), self);
        },
        "Live strided NumPy view, shape (N,) or (N, k).");
  }

  register_level_flow(m);
  register_menu(m);
  register_level_gen(m);
  register_planner(m);
  register_render(m);
  register_search(m);
  register_versus(m);
}
