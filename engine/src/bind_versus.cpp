// pybind11 registration of engine.Versus (two-player Dr. Mario, versus.h, docs/VERSUS.md).
// Rules live in game.cpp / level_gen.cpp; this file only checks arguments and marshals.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "py_args.h"
#include "py_game.h"
#include "versus.h"

namespace py = pybind11;
namespace pa = drm::py_args;
using drm::PyVersus;
using drm::State;
using drm::Versus;

namespace {

// One player of a PyVersus, kept alive by the Python object it came from.
struct PyVersusPlayer {
  py::object owner;  // the engine.Versus
  int index;
  State& s() const { return owner.cast<PyVersus&>().v.p[index]; }
};

struct MemberSpec {
  const char* name;
  size_t offset;
  int inner;  // 0: a scalar byte view
};

#define DRM_M(name, member, inner) {name, offsetof(State, member), inner}
const MemberSpec kPlayerViews[] = {
    DRM_M("field", field, drm::kFieldSize),
    DRM_M("shown", shown, drm::kFieldSize),
    DRM_M("status", status, 0),
    DRM_M("pill_colors", pill_color, 2),
    DRM_M("pill_x", pill_x, 0),
    DRM_M("pill_y", pill_y, 0),
    DRM_M("pill_rotation", pill_rotation, 0),
    DRM_M("next_colors", next_color, 2),
    DRM_M("pill_placed_step", pill_placed_step, 0),
    DRM_M("next_action", next_action, 0),
    DRM_M("level", level, 0),
    DRM_M("speed_setting", speed_setting, 0),
    DRM_M("speed_ups", speed_ups, 0),
    DRM_M("speed_counter", speed_counter, 0),
    DRM_M("hor_velocity", hor_velocity, 0),
    DRM_M("virus_left_bcd", virus_left, 0),
    DRM_M("pills_counter", pills_counter, 0),
    DRM_M("combo_counter", combo_counter, 0),
    DRM_M("attack_size", attack_size, 0),
    DRM_M("attack_colors", attack_colors, 4),
    DRM_M("victories", victories, 0),
    DRM_M("level_fail", level_fail, 0),
    DRM_M("btns_held", btns_held, 0),
    DRM_M("btns_pressed", btns_pressed, 0),
    DRM_M("lock_event", lock_event, 0),
};
#undef DRM_M

py::array player_view(const PyVersusPlayer& p, const MemberSpec& m, py::handle self) {
  auto* ptr = reinterpret_cast<uint8_t*>(&p.s()) + m.offset;
  if (m.inner > 0) {
    return py::array(py::dtype::of<uint8_t>(), {static_cast<py::ssize_t>(m.inner)}, {1}, ptr, self);
  }
  return py::array(py::dtype::of<uint8_t>(), std::vector<py::ssize_t>{}, std::vector<py::ssize_t>{},
                   ptr, self);
}

int level_arg(const py::handle& h, const char* name) {
  return static_cast<int>(
      pa::in_range(h, name, 0, drm::kMaxSelectableLevel, "0..20 (the options screen's range)"));
}

int speed_arg(const py::handle& h, const char* name) {
  return static_cast<int>(pa::in_range(h, name, 0, 2, "0 LOW, 1 MED, 2 HI"));
}

uint8_t mask_arg(const py::handle& h, const char* name) {
  return static_cast<uint8_t>(pa::in_range(h, name, 0, 255, "mask A $80 .. Right $01"));
}

}  // namespace

void register_versus(py::module_& m) {
  py::class_<PyVersusPlayer> player(m, "VersusPlayer", R"doc(One player of an engine.Versus.

Live views of the player's bytes (see game.h / versus.h for the RAM addresses; player 1's
block is $0300-$032F and p1_field $0400, player 2's $0380-$03AF and $0500). `game()` is a copy
of the player's state as an engine.Game (for the planner: the falling pill moves as in 1P).)doc");
  for (const MemberSpec& spec : kPlayerViews) {
    player.def_property_readonly(
        spec.name,
        [spec](py::object self) {
          return player_view(self.cast<const PyVersusPlayer&>(), spec, self);
        },
        "Live NumPy view of the player's state member.");
  }
  player
      .def_property_readonly(
          "virus_left", [](const PyVersusPlayer& p) { return drm::bcd_to_int(p.s().virus_left); },
          "The virus counter (virusLeft, BCD in RAM) as an int.")
      .def_property_readonly(
          "virus_count", [](const PyVersusPlayer& p) { return drm::virus_count(p.s()); },
          "Viruses on the field.")
      .def(
          "game", [](const PyVersusPlayer& p) { return drm::PyGame{p.s()}; },
          "A copy of this player's state as an engine.Game.");

  py::class_<PyVersus> versus(m, "Versus", R"doc(Two-player (versus) Dr. Mario, frame for frame.

Versus(level1, speed1, level2, speed2, seed, frame_counter=0): a match's first round as
levelIntro_delay begins. levels 0..20, speeds 0 LOW / 1 MED / 2 HI, seed the RNG state
($17 << 8 | $18) the options screen left when Start was pressed, frame_counter frameCounter
($43) at the start of levelIntro_delay. One pill reserve (initData_level [$8216]), the viruses
interleaved p1, p2 per intro frame from the one RNG (levelIntro [$9CAB]); equal levels give
identical boards. See docs/VERSUS.md.)doc");
  versus
      .def(py::init([](const py::handle& l1, const py::handle& s1, const py::handle& l2,
                       const py::handle& s2, const py::handle& seed, const py::handle& fc) {
             PyVersus out;
             const auto sd = static_cast<uint16_t>(
                 pa::in_range(seed, "seed", 0, 0xFFFF, "16-bit RNG state $17 << 8 | $18"));
             const auto f = static_cast<uint8_t>(
                 pa::in_range(fc, "frame_counter", 0, 255, "frameCounter $43"));
             bool ok;
             try {
               ok = drm::init_versus(out.v, level_arg(l1, "level1"), speed_arg(s1, "speed1"),
                                     level_arg(l2, "level2"), speed_arg(s2, "speed2"), sd, f);
             } catch (const std::domain_error& e) {
               throw py::value_error(std::string("seed cannot make this round: ") + e.what());
             }
             if (!ok) throw py::value_error("invalid versus setup");
             return out;
           }),
           py::arg("level1"), py::arg("speed1"), py::arg("level2"), py::arg("speed2"),
           py::arg("seed"), py::arg("frame_counter") = 0)
      .def_static(
          "from_ram",
          [](const py::bytes& ram, const py::handle& phase) {
            const std::string r = ram;
            if (r.size() != 0x800) throw py::value_error("ram must be 2048 bytes ($0000-$07FF)");
            PyVersus out;
            drm::versus_from_ram(
                out.v, reinterpret_cast<const uint8_t*>(r.data()),
                static_cast<uint8_t>(pa::in_range(phase, "phase", 0, 9, "engine.Phase")));
            return out;
          },
          py::arg("ram"), py::arg("phase") = 1,
          "A state loaded from the game's RAM $0000-$07FF (both $30-byte blocks, both fields, "
          "the reserve $0780, frameCounter $43, rng $17/$18, pads $F5-$F8, enablePause $54), in "
          "the given engine phase (default PLAYING).")
      .def(
          "step",
          [](PyVersus& g, const py::handle& b1, const py::handle& b2) {
            drm::versus_step(g.v, mask_arg(b1, "mask1"), mask_arg(b2, "mask2"));
          },
          py::arg("mask1"), py::arg("mask2"),
          "Advance exactly one NES frame with pad 1 = mask1 and pad 2 = mask2 held.")
      .def(
          "next_round",
          [](PyVersus& g, const py::handle& fc) {
            const auto f =
                static_cast<uint8_t>(pa::in_range(fc, "frame_counter", 0, 255, "frameCounter $43"));
            if (!drm::next_versus_round(g.v, f))
              throw py::value_error("next_round needs phase ROUND_OVER");
          },
          py::arg("frame_counter") = 0,
          "From ROUND_OVER: the next round as its levelIntro_delay begins (the RNG continues, "
          "levels, speeds and victories kept).")
      .def(
          "clone", [](const PyVersus& g) { return PyVersus{g.v}; },
          "An independent copy (a memcpy).")
      .def("__copy__", [](const PyVersus& g) { return PyVersus{g.v}; })
      .def("__deepcopy__", [](const PyVersus& g, py::dict) { return PyVersus{g.v}; })
      .def(
          "player",
          [](py::object self, const py::handle& i) {
            return PyVersusPlayer{self,
                                  static_cast<int>(pa::in_range(i, "player", 0, 1, "0 or 1"))};
          },
          py::arg("index"), "Player 1 (0) or player 2 (1): live views of its state.")
      .def_property_readonly("p1", [](py::object self) { return PyVersusPlayer{self, 0}; })
      .def_property_readonly("p2", [](py::object self) { return PyVersusPlayer{self, 1}; })
      .def(
          "block",
          [](const PyVersus& g, const py::handle& i) {
            uint8_t out[0x30];
            drm::versus_block(g.v, static_cast<int>(pa::in_range(i, "player", 0, 1, "0 or 1")), out,
                              nullptr);
            return py::bytes(reinterpret_cast<const char*>(out), sizeof(out));
          },
          py::arg("index"),
          "The player's $30-byte RAM block as the engine models it (unmodelled bytes 0; "
          "BLOCK_KNOWN says which).")
      .def(
          "state_bytes",
          [](const PyVersus& g) {
            return py::bytes(reinterpret_cast<const char*>(&g.v), sizeof(Versus));
          },
          "The whole state as bytes.")
      .def_property_readonly("phase", [](const PyVersus& g) { return g.v.p[0].phase; })
      .def_property_readonly("frame_counter",
                             [](const PyVersus& g) { return g.v.p[0].frame_counter; })
      .def_property_readonly(
          "rng", [](const PyVersus& g) { return (g.v.p[0].rng[0] << 8) | g.v.p[0].rng[1]; })
      .def_property_readonly("reserve",
                             [](const PyVersus& g) {
                               return py::bytes(reinterpret_cast<const char*>(g.v.p[0].reserve),
                                                drm::kReserveSize);
                             })
      .def_property_readonly("who_won", [](const PyVersus& g) { return g.v.who_won; })
      .def_property_readonly("who_failed", [](const PyVersus& g) { return g.v.who_failed; })
      .def_property_readonly("rounds", [](const PyVersus& g) { return g.v.rounds; })
      .def_property_readonly("intro_frames", [](const PyVersus& g) { return g.v.intro_frames; })
      .def_property_readonly("frame", [](const PyVersus& g) { return g.v.frame; })
      .def_property_readonly(
          "victories",
          [](const PyVersus& g) { return py::make_tuple(g.v.p[0].victories, g.v.p[1].victories); })
      .def_property_readonly(
          "crowns", [](const PyVersus& g) { return py::make_tuple(g.v.crowns[0], g.v.crowns[1]); },
          "Crowns the picture shows (p1, p2): the victories at the round's start.");
  uint8_t out[0x30];
  uint8_t known[0x30];
  Versus probe{};
  drm::versus_block(probe, 0, out, known);
  py::list k;
  for (int i = 0; i < 0x30; ++i)
    if (known[i]) k.append(i);
  m.attr("BLOCK_KNOWN") = py::tuple(k);
}
