// Python registrations for render.h: TileData (built once from NumPy arrays), render_frame,
// the palette-index picture, the frame's VRAM/OAM and the screen facts. Only argument checks
// and marshalling live here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>

#include "py_args.h"
#include "py_game.h"
#include "render.h"
#include "render_tables.h"

namespace py = pybind11;
namespace pa = drm::py_args;

namespace {

// A C-contiguous uint8 array of exactly this shape, or TypeError/ValueError naming it.
py::array_t<uint8_t> uint8_shaped(const py::handle& obj, const char* name,
                                  std::initializer_list<py::ssize_t> shape) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error(std::string(name) + " must be a numpy.ndarray of dtype uint8");
  }
  auto arr = py::reinterpret_borrow<py::array>(obj);
  if (!arr.dtype().is(py::dtype::of<uint8_t>())) {
    throw py::type_error(std::string(name) + " must have dtype uint8, got " +
                         py::str(arr.dtype()).cast<std::string>());
  }
  bool ok = arr.ndim() == static_cast<py::ssize_t>(shape.size());
  std::string want = "(";
  int k = 0;
  for (py::ssize_t d : shape) {
    if (ok && arr.shape(k) != d) ok = false;
    want += (k ? ", " : "") + std::to_string(d);
    ++k;
  }
  want += shape.size() == 1 ? ",)" : ")";
  if (!ok) {
    throw py::value_error(std::string(name) + " must have shape " + want + ", got " +
                          py::str(arr.attr("shape")).cast<std::string>());
  }
  return py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(arr);
}

std::unique_ptr<drm::TileData> make_tile_data(const py::handle& patterns,
                                              const py::handle& palettes,
                                              const py::handle& speed_colors,
                                              const py::handle& nametable, const py::handle& rgb,
                                              const py::dict& metasprites,
                                              const py::handle& nametable_2p) {
  auto t = std::make_unique<drm::TileData>();
  auto pat = uint8_shaped(patterns, "patterns", {drm::kNumBanks, 256, 8, 8});
  auto pal = uint8_shaped(palettes, "palettes", {32});
  auto spd = uint8_shaped(speed_colors, "speed_colors", {3});
  auto nt = uint8_shaped(nametable, "nametable", {1024});
  auto nt2 = uint8_shaped(nametable_2p, "nametable_2p", {1024});
  auto col = uint8_shaped(rgb, "rgb", {64, 3});
  const uint8_t* p = pat.data();
  for (py::ssize_t i = 0; i < pat.size(); ++i) {
    if (p[i] > 3) throw py::value_error("patterns must hold colour indices 0..3");
  }
  for (py::ssize_t i = 0; i < 32; ++i) {
    if (pal.data()[i] > 0x3F) throw py::value_error("palettes must hold NES colours 0..63");
  }
  for (py::ssize_t i = 0; i < 3; ++i) {
    if (spd.data()[i] > 0x3F) throw py::value_error("speed_colors must hold NES colours 0..63");
  }
  std::memcpy(t->pattern, p, sizeof(t->pattern));
  std::memcpy(t->palette, pal.data(), 32);
  std::memcpy(t->speed_color, spd.data(), 3);
  std::memcpy(t->nametable, nt.data(), 1024);
  std::memcpy(t->nametable_2p, nt2.data(), 1024);
  std::memcpy(t->rgb, col.data(), sizeof(t->rgb));
  for (auto item : metasprites) {
    const auto index = pa::in_range(item.first, "metasprite index", 0, drm::kNumMetasprites - 1,
                                    "jumpTable_sprites slot");
    if (!py::isinstance<py::array>(item.second)) {
      throw py::type_error("a metasprite must be a numpy.ndarray uint8 [k, 4]");
    }
    auto arr = py::reinterpret_borrow<py::array>(item.second);
    const py::ssize_t k = arr.ndim() == 2 ? arr.shape(0) : -1;
    if (k < 0 || k > 64) throw py::value_error("a metasprite must have shape (k, 4), k <= 64");
    auto parts = uint8_shaped(arr, "metasprite", {k, 4});
    auto& dst = t->metasprite[index];
    dst.clear();
    for (py::ssize_t i = 0; i < k; ++i) {
      const uint8_t* q = parts.data() + 4 * i;
      dst.push_back(drm::SpritePart{q[0], q[1], q[2], q[3]});
    }
  }
  t->prepare();
  return t;
}

drm::RenderOptions options(const py::handle& top_score) {
  drm::RenderOptions o;
  o.top_score = static_cast<uint32_t>(
      pa::in_range(top_score, "top_score", 0, 9999990, "points, shown as 7 digits"));
  return o;
}

py::array_t<uint8_t> checked_out(const py::handle& out, std::initializer_list<py::ssize_t> shape) {
  if (out.is_none()) return py::array_t<uint8_t>(std::vector<py::ssize_t>(shape));
  auto arr = uint8_shaped(out, "out", shape);
  if (!arr.writeable()) throw py::value_error("out must be writeable");
  if (!py::reinterpret_borrow<py::array>(out).is(arr)) {
    throw py::value_error("out must be C-contiguous");
  }
  return arr;
}

py::dict pill_dict(const drm::PillOnScreen& p) {
  py::dict d;
  d["rotation"] = p.rotation;
  d["colors"] = py::make_tuple(p.color[0], p.color[1]);
  d["box"] = py::make_tuple(p.left, p.top, p.width, p.height);
  return d;
}

py::dict facts_dict(const drm::Facts& f) {
  py::array_t<uint8_t> bottle({16, 8});
  std::memcpy(bottle.mutable_data(), f.bottle, drm::kFieldSize);
  py::dict d;
  d["kind"] = static_cast<int>(f.kind);
  d["bottle"] = bottle;
  d["bg_bank"] = f.bg_bank;
  py::object none = py::none();
  if (f.falling.drawn) {
    py::dict p = pill_dict(f.falling);
    p["x"] = f.falling_x;
    p["y"] = f.falling_y;
    d["falling"] = p;
  } else {
    d["falling"] = none;
  }
  if (f.next.drawn) {
    py::dict p = pill_dict(f.next);
    p["throw_frame"] = f.throw_frame;
    d["next"] = p;
  } else {
    d["next"] = none;
  }
  return d;
}

py::dict layout_dict(const drm::Frame& f) {
  py::array_t<uint8_t> vram(1024);
  std::memcpy(vram.mutable_data(), f.vram, 1024);
  py::array_t<uint8_t> oam({static_cast<py::ssize_t>(f.oam_count), py::ssize_t{4}});
  for (int i = 0; i < f.oam_count; ++i) {
    uint8_t* q = oam.mutable_data() + 4 * i;
    q[0] = f.oam[i].dy;
    q[1] = f.oam[i].tile;
    q[2] = f.oam[i].attr;
    q[3] = f.oam[i].dx;
  }
  py::dict d;
  d["vram"] = vram;
  d["oam"] = oam;
  d["bg_bank"] = f.bg_bank;
  d["bg_visible"] = f.bg_visible;
  d["kind"] = static_cast<int>(f.kind);
  return d;
}

}  // namespace

void register_render(py::module_& m) {
  m.def(
      "render_constants",
      [] {
        py::dict d;
        d["palettes"] = py::bytes(reinterpret_cast<const char*>(drm::kPalLevel1P), 32);
        d["speed_colors"] = py::bytes(reinterpret_cast<const char*>(drm::kBkgColorBasedOnSpeed), 3);
        return d;
      },
      "The level's palettes: palettes (palLevel_1P, 32 bytes: $3F00-$3F1F) and speed_colors "
      "(bkgColor_basedOnSpeed, 3 bytes).");

  py::class_<drm::TileData>(m, "TileData",
                            "Tile data prepared for the renderer (build it with engine.TileSet).")
      .def(py::init(&make_tile_data), py::arg("patterns"), py::arg("palettes"),
           py::arg("speed_colors"), py::arg("nametable"), py::arg("rgb"), py::arg("metasprites"),
           py::arg("nametable_2p"));

  m.def(
      "render_frame",
      [](const drm::PyGame& g, const drm::TileData& t, const py::handle& out,
         const py::handle& top_score) {
        const drm::RenderOptions o = options(top_score);
        auto arr = checked_out(out, {drm::kScreenHeight, drm::kScreenWidth, 3});
        uint8_t* dst = arr.mutable_data();
        {
          py::gil_scoped_release release;
          drm::render(g.s, t, o, dst);
        }
        return arr;
      },
      py::arg("game"), py::arg("tiles"), py::arg("out") = py::none(), py::arg("top_score") = 10000,
      "RGB picture uint8 [240, 256, 3] (see engine.render_frame).");

  m.def(
      "render_indices",
      [](const drm::PyGame& g, const drm::TileData& t, const py::handle& top_score) {
        drm::Frame f;
        drm::build_frame(g.s, &t, options(top_score), f);
        py::array_t<uint8_t> arr({drm::kScreenHeight, drm::kScreenWidth});
        drm::rasterize_indices(f, t, arr.mutable_data());
        return arr;
      },
      py::arg("game"), py::arg("tiles"), py::arg("top_score") = 10000,
      "Palette RAM index (0..31, 0 = backdrop) per pixel, uint8 [240, 256].");

  m.def(
      "level_palette_ram",
      [](const drm::TileData& t, const py::handle& speed) {
        const int sp = static_cast<int>(pa::in_range(speed, "speed", 0, 2, "0 LOW, 1 MED, 2 HI"));
        py::array_t<uint8_t> arr(32);
        drm::level_palette_ram(t, sp, arr.mutable_data());
        return arr;
      },
      py::arg("tiles"), py::arg("speed"),
      "PPU palette RAM during a level at this speed: uint8 [32] NES colour numbers.");

  m.def(
      "frame_layout",
      [](const drm::PyGame& g, const drm::TileData* t, const py::handle& top_score) {
        drm::Frame f;
        drm::build_frame(g.s, t, options(top_score), f);
        return layout_dict(f);
      },
      py::arg("game"), py::arg("tiles") = py::none(), py::arg("top_score") = 10000,
      "The picture before rasterising: vram uint8 [1024] ($2000-$23FF), oam uint8 [n, 4] "
      "(Y, tile, attribute, X in OAM order), bg_bank, bg_visible, kind.");

  m.def(
      "screen_facts",
      [](const drm::PyGame& g) {
        drm::Facts f;
        drm::screen_facts(g.s, f);
        return facts_dict(f);
      },
      py::arg("game"), "What the next picture shows (see engine.screen_facts).");

  m.def(
      "render_versus",
      [](const drm::PyVersus& g, const drm::TileData& t, const py::handle& out) {
        auto arr = checked_out(out, {drm::kScreenHeight, drm::kScreenWidth, 3});
        uint8_t* dst = arr.mutable_data();
        {
          py::gil_scoped_release release;
          drm::render_versus(g.v, t, dst);
        }
        return arr;
      },
      py::arg("versus"), py::arg("tiles"), py::arg("out") = py::none(),
      "RGB picture uint8 [240, 256, 3] of a two-player round (see engine.render_versus).");

  m.def(
      "render_versus_indices",
      [](const drm::PyVersus& g, const drm::TileData& t) {
        drm::Frame f;
        drm::build_versus_frame(g.v, &t, f);
        py::array_t<uint8_t> arr({drm::kScreenHeight, drm::kScreenWidth});
        drm::rasterize_indices(f, t, arr.mutable_data());
        return arr;
      },
      py::arg("versus"), py::arg("tiles"),
      "Palette RAM index (0..31, 0 = backdrop) per pixel of the two-player picture, uint8 "
      "[240, 256].");

  m.def(
      "versus_palette_ram",
      [](const drm::PyVersus& g, const drm::TileData& t) {
        py::array_t<uint8_t> arr(32);
        drm::versus_palette_ram(t, g.v, arr.mutable_data());
        return arr;
      },
      py::arg("versus"), py::arg("tiles"),
      "PPU palette RAM during a two-player round: uint8 [32] NES colour numbers.");

  m.def(
      "versus_frame_layout",
      [](const drm::PyVersus& g, const drm::TileData* t) {
        drm::Frame f;
        drm::build_versus_frame(g.v, t, f);
        return layout_dict(f);
      },
      py::arg("versus"), py::arg("tiles") = py::none(),
      "The two-player picture before rasterising: vram, oam, bg_bank, bg_visible, kind.");

  m.def(
      "versus_screen_facts",
      [](const drm::PyVersus& g) {
        drm::VersusFacts f;
        drm::versus_screen_facts(g.v, f);
        py::dict d;
        d["kind"] = static_cast<int>(f.kind);
        d["bg_bank"] = f.bg_bank;
        d["crowns"] = py::make_tuple(f.crowns[0], f.crowns[1]);
        d["players"] = py::make_tuple(facts_dict(f.player[0]), facts_dict(f.player[1]));
        return d;
      },
      py::arg("versus"),
      "What the next two-player picture shows (see engine.versus_screen_facts).");
}
