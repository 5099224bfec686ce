// Python registrations for level_flow.h (LevelFlow: the game's level flow around play). Only
// argument checks and marshalling live here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "level_flow.h"
#include "level_gen.h"
#include "py_args.h"
#include "py_game.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

struct PyFlow {
  drm::Flow f;
};

py::array_t<uint8_t> copy_cells(const uint8_t* cells) {
  py::array_t<uint8_t> out(drm::kFieldSize);
  std::memcpy(out.mutable_data(), cells, drm::kFieldSize);
  return out;
}

PyFlow make_flow(const py::handle& level_arg, const py::handle& speed_arg,
                 const py::handle& seed_arg, const py::handle& fc_arg, const py::handle& held_arg,
                 bool late_init) {
  const int level = static_cast<int>(
      pa::in_range(level_arg, "level", 0, drm::kMaxSelectableLevel, "options screen levels 0..20"));
  const int speed = static_cast<int>(pa::in_range(speed_arg, "speed", 0, 2, "0 LOW, 1 MED, 2 HI"));
  const auto seed = static_cast<uint16_t>(
      pa::in_range(seed_arg, "seed", 0, 0xFFFF, "RNG state $17 << 8 | $18 after the Start frame"));
  const auto fc = static_cast<uint8_t>(pa::in_range(
      fc_arg, "frame_counter", 0, 255, "frameCounter $43 after the Start frame's NMI"));
  const auto held = static_cast<uint8_t>(
      pa::in_range(held_arg, "held", 0, 255, "the mask read in the Start frame"));
  if ((held & drm::kStart) == 0) {
    throw py::value_error("held must include Start (0x10): the flow begins on a Start frame");
  }
  // A seed that cannot make the level (0 or 1 from level 2) would hang the console's intro.
  drm::Rng probe = drm::Rng::from_state(seed);
  drm::LevelSetup setup{};
  try {
    drm::generate_level(level, probe, setup);
  } catch (const std::domain_error& e) {
    throw py::value_error(std::string("seed cannot make this level: ") + e.what());
  }
  PyFlow p;
  drm::flow_from_options_start(p.f, level, speed, seed, fc, held, late_init);
  return p;
}

}  // namespace

void register_level_flow(py::module_& m) {
  py::class_<PyFlow> flow(m, "LevelFlow",
                          R"doc(The game's level flow around play, one NMI frame per step.

LevelFlow(level, speed, seed, frame_counter=0, held=0x10, late_init=False): the game right after the frame whose
NMI read Start on the options screen (frame 0). level 0..20, speed 0 LOW / 1 MED / 2 HI, seed
the RNG state ($17 << 8 | $18) after that frame (the options loop steps it once per frame,
toLevel [$817E] steps none), frame_counter frameCounter ($43) after that frame's NMI, held the
mask read in it (must include Start 0x10), late_init whether initData_level overruns its frame
(the first virus on the 7th frame after Start, not the 6th: see the late_init property). step(buttons) runs toLevel (mode 2),
initData_level [$8216] (mode 3), levelIntro [$9CAB] (mode 8: one addVirus [$9D19] call per frame),
then the engine's play (mode 4) from its State 0, the stage clear [$B269] with its Start wait and
the next level (level + 1, same speed, score carried), or the game over. docs/LEVEL_FLOW.md.
Raises ValueError (out of range, Start not held, a seed that cannot make the level) or TypeError.)doc");
  flow.def(py::init(&make_flow), py::arg("level"), py::arg("speed"), py::arg("seed"),
           py::arg("frame_counter") = 0, py::arg("held") = static_cast<int>(drm::kStart),
           py::arg("late_init") = false)
      .def_property(
          "late_init", [](const PyFlow& p) { return p.f.late_init != 0; },
          [](PyFlow& p, bool v) { p.f.late_init = v ? 1 : 0; },
          "Whether the next initData_level [$8216] overruns its frame (one frame more before "
          "the first virus; CPU timing the engine does not model, see docs/LEVEL_FLOW.md). "
          "Consumed when initData_level runs.")
      .def(
          "step",
          [](PyFlow& p, const py::handle& buttons) {
            drm::flow_step(p.f, static_cast<uint8_t>(pa::in_range(buttons, "buttons", 0, 255,
                                                                  "mask A $80 .. Right $01")));
          },
          py::arg("buttons"), "Advance exactly one NMI frame with this button mask read.")
      .def(
          "run",
          [](PyFlow& p, const py::handle& masks_obj) {
            if (!py::isinstance<py::array>(masks_obj))
              throw py::type_error("masks must be a 1-D numpy.ndarray of dtype uint8");
            auto arr = py::reinterpret_borrow<py::array>(masks_obj);
            auto masks = pa::uint8_vector(masks_obj, "masks", arr.size());
            const uint8_t* d = masks.data();
            for (py::ssize_t i = 0; i < masks.size(); ++i) drm::flow_step(p.f, d[i]);
          },
          py::arg("masks"), "Step once per entry of a uint8[N] mask array.")
      .def(
          "clone", [](const PyFlow& p) { return PyFlow{p.f}; }, "An independent copy.")
      .def(
          "poke_cell",
          [](PyFlow& p, const py::handle& index, const py::handle& code) {
            const auto i = pa::in_range(index, "index", 0, drm::kFieldSize - 1, "field cell");
            const auto v = static_cast<uint8_t>(pa::in_range(code, "code", 0, 255, "cell code"));
            p.f.s.field[i] = v;
            p.f.s.shown[i] = v;
          },
          py::arg("index"), py::arg("code"),
          "Write a cell into RAM and the nametable alike (a disturbance for tests and fault "
          "injection; the game never does this).")
      .def_property_readonly(
          "game", [](const PyFlow& p) { return drm::PyGame{p.f.s}; },
          "A copy of the game state as modelled (an engine.Game: field, shown, counters; in "
          "play, the engine's State, frame counted from State 0).")
      .def_property_readonly(
          "field", [](const PyFlow& p) { return copy_cells(p.f.s.field); },
          "uint8[128] p1_field ($0400) now, row 0 at the top (a copy).")
      .def_property_readonly(
          "shown", [](const PyFlow& p) { return copy_cells(p.f.s.shown); },
          "uint8[128] the bottle's nametable cells after this frame's NMI (a copy).")
      .def_property_readonly(
          "frame", [](const PyFlow& p) { return p.f.frame; },
          "Frames stepped since the options Start frame (frame 0).")
      .def_property_readonly(
          "stage", [](const PyFlow& p) { return p.f.stage; }, "engine.FlowStage value.")
      .def_property_readonly(
          "screen", [](const PyFlow& p) { return p.f.screen; },
          "engine.FlowScreen value: what the picture of this frame shows.")
      .def_property_readonly(
          "mode", [](const PyFlow& p) { return p.f.mode; },
          "The game's mode byte $46 after this frame.")
      .def_property_readonly(
          "level", [](const PyFlow& p) { return p.f.level; },
          "p1_level $0316 (the next level's number once the clear counted it).")
      .def_property_readonly("speed", [](const PyFlow& p) { return p.f.speed; })
      .def_property_readonly(
          "score", [](const PyFlow& p) { return p.f.score; },
          "Points, carried from level to level.")
      .def_property_readonly(
          "rng", [](const PyFlow& p) { return p.f.rng; }, "RNG state $17 << 8 | $18.")
      .def_property_readonly("virus_left",
                             [](const PyFlow& p) { return drm::bcd_to_int(p.f.s.virus_left); })
      .def_property_readonly(
          "add_virus_calls", [](const PyFlow& p) { return p.f.add_virus_calls; },
          "levelIntro's addVirus calls so far in this level (one a frame).")
      .def_property_readonly("levels_started", [](const PyFlow& p) { return p.f.levels_started; })
      .def_property_readonly(
          "start_frame", [](const PyFlow& p) { return p.f.start_frame; },
          "Frame whose NMI read the Start that began the current level (0 for the first).")
      .def_property_readonly(
          "state0_frame", [](const PyFlow& p) { return p.f.state0_frame; },
          "Frame after which the level's engine State 0 holds (levelIntro_delay begins); -1 "
          "until then.")
      .def_property_readonly(
          "play_frame", [](const PyFlow& p) { return p.f.play_frame; },
          "Frame whose main loop set mode 4; -1 until then.")
      .def_property_readonly(
          "pill_frame", [](const PyFlow& p) { return p.f.pill_frame; },
          "First frame whose buttons the falling pill reacts to (action_pillFalling runs); -1 "
          "until then.")
      .def_property_readonly(
          "end_frame", [](const PyFlow& p) { return p.f.end_frame; },
          "Frame the level ended (stage clear or top-out); -1 until then.")
      .def_property_readonly(
          "terminal", [](const PyFlow& p) { return drm::flow_terminal(p.f); },
          "True on the options screen after a game over, or after a reset.");
  m.def(
      "cutscene_before",
      [](const py::handle& level, const py::handle& speed) {
        return drm::cutscene_before(
            static_cast<int>(pa::in_range(level, "level", 0, drm::kMaxLevel, "next level")),
            static_cast<int>(pa::in_range(speed, "speed", 0, 2, "0 LOW, 1 MED, 2 HI")));
      },
      py::arg("level"), py::arg("speed"),
      "Whether toNextLevel [$9E66] plays a cutscene (or the ending) before `level`: "
      "cutscene_objectFlying_basedOnSpeedAndLvl [$A012], or level 21.");
}
