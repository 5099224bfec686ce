// Python registrations for level_gen.h: generatePillsReserve [$82B0] + addVirus [$9D19] and
// randomNumberGenerator [$B78B]. Only argument checks and marshalling live here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>
#include <vector>

#include "level_gen.h"
#include "py_args.h"
#include "rng.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

uint16_t to_seed(const py::handle& value) {
  return static_cast<uint16_t>(
      pa::in_range(value, "seed", 0, 0xFFFF, "16-bit RNG state $17 << 8 | $18"));
}

int to_level(const py::handle& value) {
  return static_cast<int>(pa::in_range(value, "level", 0, drm::kMaxLevel,
                                       "0..20 selectable, 21..24 reached by clears"));
}

template <size_t N>
py::array_t<uint8_t> to_array(const std::array<uint8_t, N>& bytes) {
  py::array_t<uint8_t> result(static_cast<py::ssize_t>(N));
  std::memcpy(result.mutable_data(), bytes.data(), N);
  return result;
}

py::dict generate_level_py(const py::handle& level_arg, const py::handle& seed_arg) {
  const int level = to_level(level_arg);
  const uint16_t seed = to_seed(seed_arg);
  drm::Rng rng = drm::Rng::from_state(seed);
  drm::LevelSetup setup{};
  drm::generate_level(level, rng, setup);

  py::array_t<uint8_t> colors(
      {static_cast<py::ssize_t>(drm::kPillReserveSize), static_cast<py::ssize_t>(2)});
  auto view = colors.mutable_unchecked<2>();
  for (int i = 0; i < drm::kPillReserveSize; ++i) {
    const drm::PillColors c = drm::pill_colors(setup.pill_reserve[i]);
    view(i, 0) = c.left;
    view(i, 1) = c.right;
  }

  py::dict out;
  out["level"] = level;
  out["seed"] = seed;
  out["field"] = to_array(setup.field);
  out["virus_count"] = setup.virus_count;
  out["virus_count_bcd"] = setup.virus_count_bcd;
  out["pill_reserve"] = to_array(setup.pill_reserve);
  out["pill_colors"] = colors;
  out["max_height"] = setup.max_height;
  out["top_row"] = setup.top_row;
  out["rng_after_reserve"] = setup.rng_after_reserve;
  out["rng_after"] = setup.rng_after;
  out["add_virus_calls"] = setup.add_virus_calls;
  return out;
}

// Every even seed (2..0xFFFE) whose level `level` has exactly `field`'s viruses. The reserve is
// generated before the viruses from the same state (initData_level $8216), so a seed found
// here also gives the level's pills; seeds s and s | 1 make the same level (bit 0 is shifted
// out by the first step), so only even ones are listed. Seeds 0/1 (the locked RNG) are left
// out: the console hangs on them from level 2.
py::list seeds_for_field_py(const py::handle& level_arg, const py::handle& field_arg) {
  const int level = to_level(level_arg);
  const auto field =
      py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(field_arg);
  if (!field || field.size() != drm::kFieldSize) {
    throw py::value_error("field must be " + std::to_string(drm::kFieldSize) +
                          " cell codes (uint8[16, 8] or [128])");
  }
  std::array<uint8_t, drm::kFieldSize> want{};
  std::memcpy(want.data(), field.data(), drm::kFieldSize);
  std::vector<int> found;
  {
    py::gil_scoped_release release;
    for (int seed = 2; seed <= 0xFFFE; seed += 2) {
      drm::Rng rng = drm::Rng::from_state(static_cast<uint16_t>(seed));
      drm::LevelSetup setup{};
      drm::generate_level(level, rng, setup);
      if (setup.field == want) found.push_back(seed);
    }
  }
  py::list out;
  for (int seed : found) out.append(seed);
  return out;
}

}  // namespace

void register_level_gen(py::module_& m) {
  m.def("generate_level", &generate_level_py, py::arg("level"), py::arg("seed"),
        R"doc(One-player level start as the NES does it (initData_level $8216, levelIntro $9CAB).

seed: 16-bit RNG state ($17 << 8 | $18) when initData_level starts, i.e. after the options
screen's last per-frame step. level: 0..24 (21..24 only by clearing 20; 84 viruses).
Returns a dict: field uint8[128] (RAM $0400-$047F, row 0 top; $Dc virus of colour c, $FF
empty), virus_count (int), virus_count_bcd (p1_virusLeft as RAM holds it), pill_reserve
uint8[128] (RAM $0780-$07FF, ids 0..8), pill_colors uint8[128, 2] (left, right; 0 yellow,
1 red, 2 blue), max_height, top_row, rng_after_reserve, rng_after (state as the level
starts), add_virus_calls (frames of the virus loop), level, seed.
Raises ValueError for a level or seed out of range, or for seed 0/1 (RNG locked at 0) at
levels 2+, where the console hangs placing viruses; TypeError for a non-integer.)doc");
  m.def("seeds_for_field", &seeds_for_field_py, py::arg("level"), py::arg("field"),
        R"doc(The even seeds (2..0xFFFE) whose level `level` is `field`: list[int], ascending.

field: uint8[16, 8] or [128] cell codes as generate_level returns them (RAM $0400-$047F;
viruses $Dc, empty $FF). The reserve comes from the same seed (generatePillsReserve $82B0
before addVirus $9D19), so one seed found names the level's 128 pills; boards can coincide
between seeds (docs/LEVEL_GEN.md), so the list may hold more than one, or none for a board
no seed makes. About 17 ms at level 0, 90 ms at level 20 (32,767 levels generated, the
interpreter lock released).
Raises ValueError for a level out of range or a field of the wrong size.)doc");
  m.def(
      "rng_step", [](const py::handle& seed) { return drm::rng_step(to_seed(seed)); },
      py::arg("seed"),
      "One randomNumberGenerator ($B78B) step of the 16-bit state ($17 << 8 | $18); 0 stays 0.");
  m.def(
      "pill_colors",
      [](const py::handle& pill_id) {
        const auto id = static_cast<uint8_t>(pa::in_range(pill_id, "pill_id", 0, 8, "9 ids"));
        const drm::PillColors c = drm::pill_colors(id);
        return py::make_tuple(c.left, c.right);
      },
      py::arg("pill_id"),
      "(left, right) colours of a pill id (colorCombination_left $A817 / _right $A820).");
}
