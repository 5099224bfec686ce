// Python registrations for menu.h (Menu: the title, options screen and demo timer). Only
// argument checks and marshalling live here.
#include <pybind11/pybind11.h>

#include "menu.h"
#include "py_args.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

struct PyMenu {
  drm::Menu m;
};

PyMenu make_menu(const std::string& screen, const py::handle& level, const py::handle& speed,
                 const py::handle& music, const py::handle& rng, const py::handle& fc,
                 const py::handle& held) {
  const int l = static_cast<int>(pa::in_range(level, "level", 0, drm::kMenuMaxLevel, "0..20"));
  const int s = static_cast<int>(pa::in_range(speed, "speed", 0, 2, "0 LOW, 1 MED, 2 HI"));
  const int mu = static_cast<int>(pa::in_range(music, "music", 0, 2, "0 fever, 1 chill, 2 off"));
  const auto r =
      static_cast<uint16_t>(pa::in_range(rng, "rng", 1, 0xFFFF, "RNG state $17 << 8 | $18"));
  const auto f = static_cast<uint8_t>(pa::in_range(fc, "frame_counter", 0, 255, "$43"));
  const auto h = static_cast<uint8_t>(pa::in_range(held, "held", 0, 255, "buttons held"));
  PyMenu p;
  if (screen == "title") {
    drm::menu_at_title(p.m, l, s, mu, r, f, h);
  } else if (screen == "options") {
    drm::menu_at_options(p.m, l, s, mu, r, f, h);
  } else {
    throw py::value_error("screen must be 'title' or 'options', got '" + screen + "'");
  }
  return p;
}

}  // namespace

void register_menu(py::module_& m) {
  py::class_<PyMenu> menu(m, "Menu", R"doc(The game's screens before play, one NMI frame per step.

Menu(screen="title", level=0, speed=1, music=0, rng=0x8988, frame_counter=0, held=0): the game on
its title screen (toTitle [$982A] @title_mainLoop) or with the options screen's loop running
(toDemo_orOptions [$9961] @options_mainLoop), p1_level, p1_speedSetting and musicType as given.
step(buttons): one NMI frame. Title: Up/Down/Select move the heart (nbPlayers), Start loads the
options screen (the loop's first pass reads the 3rd frame's buttons), 8 wraps of frameCounter
without a change start the attract demo. Options: generateRandNum each frame; Up/Down move the
highlighted row (level, speed, music; no wraparound); on the level row a press of Left or Right
moves the level at once and holding repeats every 7 frames (updateLvlCursor [$9ADF]), 0..20; on
the speed row a press of Right or Left alone moves one step (updateSpeedCursor [$9B37]); B loads
the title; Start ends the menus (stage MenuStage.START, mode 2): engine.LevelFlow(level, speed,
rng, frame_counter, held) is the game from there. docs/MENUS.md.
Raises ValueError for arguments out of range.)doc");
  menu.def(py::init(&make_menu), py::arg("screen") = "title", py::arg("level") = 0,
           py::arg("speed") = 1, py::arg("music") = 0, py::arg("rng") = 0x8988,
           py::arg("frame_counter") = 0, py::arg("held") = 0)
      .def(
          "step",
          [](PyMenu& p, const py::handle& buttons) {
            drm::menu_step(p.m, static_cast<uint8_t>(pa::in_range(buttons, "buttons", 0, 255,
                                                                  "mask A $80 .. Right $01")));
          },
          py::arg("buttons"), "Advance exactly one NMI frame with this button mask read.")
      .def(
          "clone", [](const PyMenu& p) { return PyMenu{p.m}; }, "An independent copy.")
      .def_property_readonly("frame", [](const PyMenu& p) { return p.m.frame; })
      .def_property_readonly("stage_frame", [](const PyMenu& p) { return p.m.stage_frame; })
      .def_property_readonly(
          "stage", [](const PyMenu& p) { return p.m.stage; }, "engine.MenuStage value.")
      .def_property_readonly(
          "screen", [](const PyMenu& p) { return p.m.screen; },
          "engine.MenuScreen value: what the picture of this frame shows.")
      .def_property_readonly(
          "mode", [](const PyMenu& p) { return p.m.mode; }, "mode byte $46 after the frame.")
      .def_property_readonly(
          "level", [](const PyMenu& p) { return p.m.level; }, "p1_level $0316.")
      .def_property_readonly(
          "speed", [](const PyMenu& p) { return p.m.speed; }, "p1_speedSetting $030B.")
      .def_property_readonly(
          "music", [](const PyMenu& p) { return p.m.music; }, "musicType $0731.")
      .def_property_readonly(
          "section", [](const PyMenu& p) { return p.m.section; },
          "optionSectionHighlight $65: 0 level, 1 speed, 2 music.")
      .def_property_readonly(
          "hor_velocity", [](const PyMenu& p) { return p.m.hor_velocity; },
          "p1_horVelocity $0313 (the level cursor's auto-repeat).")
      .def_property_readonly(
          "players", [](const PyMenu& p) { return p.m.players; }, "nbPlayers $0727.")
      .def_property_readonly(
          "wait_frames", [](const PyMenu& p) { return p.m.wait_frames; }, "waitFrames $51.")
      .def_property_readonly(
          "frame_counter", [](const PyMenu& p) { return p.m.frame_counter; }, "$43.")
      .def_property_readonly(
          "rng", [](const PyMenu& p) { return p.m.rng; }, "RNG state $17 << 8 | $18.")
      .def_property_readonly(
          "held", [](const PyMenu& p) { return p.m.held; }, "Buttons read this frame.")
      .def_property_readonly(
          "demo", [](const PyMenu& p) { return p.m.demo != 0; }, "flag_demo set.")
      .def_property_readonly(
          "started", [](const PyMenu& p) { return p.m.stage == drm::kMenuStart; },
          "True once Start was read on the options screen (terminal).");
}
