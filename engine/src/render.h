// The NES picture of a one-player level, from an engine State. Reference: nmi $8005 (OAM DMA,
// render_palChange_or_bkgOverlays $83A3, render_fieldRow $8331), updateSprites_lvl $87B2,
// fallingPill_spriteUpdate $872F, updateSprites_thrownPill $88C1, metaspriteUpdate $8906,
// smallVirusLvlAnim $89D9 (prg/drmario_prg_visual_*.asm, Nostaljipi/dr-mario-disassembly).
//
// render(s) is the picture the console scans out after its next NMI: if `s` is the state after
// step(F), the picture of frame F+1, drawn while the console latches mask F+1. That NMI uploads
// the sprite buffer built by frame F's main loop and redraws one more field row, so the picture is
// a pure function of `s` (docs/RENDER.md lists what lags).
//
// Plain C++17: no pybind11 here. Tile data (patterns, palettes, the level's background nametable,
// metasprites, an RGB palette) come from a TileData built once from a tile source.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "game.h"
#include "versus.h"

namespace drm {

constexpr int kScreenWidth = 256;   // NES pixels
constexpr int kScreenHeight = 240;  // NES pixels (all 240 lines, no overscan crop)
constexpr int kNumBanks = 3;        // pattern banks: background frame 0, frame 1, sprites
constexpr int kBankSprites = 2;
constexpr int kNumMetasprites = 128;  // metasprite slots, numbered as jumpTable_sprites $A8DC

// One sprite of a metasprite, as the game's data holds it (dy and dx are added mod 256).
struct SpritePart {
  uint8_t dy, tile, attr, dx;
};

// Everything the picture is drawn from that is not game state.
struct TileData {
  uint8_t pattern[kNumBanks][256][64];  // colour index 0..3 per pixel, row-major 8x8
  uint8_t palette[32];                  // PPU palette RAM $3F00-$3F1F as written (NES colours)
  uint8_t speed_color[3];               // bkgColor_basedOnSpeed: colour 3 of bkg 0, 1, 3
  uint8_t nametable[1024];              // VRAM $2000-$23FF: 960 tiles + 64 attribute bytes
  uint8_t nametable_2p[1024];           // the same for the two-player level (bkgLevel_2P)
  uint8_t rgb[64][3];                   // NES colour number -> RGB
  std::vector<SpritePart> metasprite[kNumMetasprites];
  // Derived by prepare(): each background tile already coloured with each palette
  // (palette RAM index 0..15 per pixel, 0 where transparent).
  uint8_t bg_block[2][256][4][64];
  void prepare();
};

struct RenderOptions {
  uint32_t top_score = 10000;  // points shown as TOP (the RAM's highScore x 10); power-on 10000
};

// What kind of picture a state gives.
enum ScreenKind : uint8_t {
  kScreenLevel = 0,       // the level: intro wait or play
  kScreenPaused = 1,      // background off, PAUSE in sprites
  kScreenStageClear = 2,  // first picture after the last virus was cleared
  kScreenTopOut = 3,      // first picture after a thrown pill could not be placed
  kScreenOther = 4,       // demo ended or soft reset: the console leaves the level
};

// One picture before rasterisation: the VRAM nametable, OAM and the PPU switches.
struct Frame {
  uint8_t vram[1024];  // $2000-$23FF after the NMI's uploads
  uint8_t bg_bank;     // 0 or 1: CHR bank of the background (small virus animation)
  bool bg_visible;     // PPUMASK background enable
  int oam_count;       // sprites used, in OAM order (lower index wins)
  SpritePart oam[64];  // stored as y, tile, attr, x (OAM byte order) in dy, tile, attr, dx
  ScreenKind kind;
};

// Builds the picture's VRAM, OAM and switches. `t` may be null (then no metasprites are
// placed: the falling and next pill are still drawn).
void build_frame(const State& s, const TileData* t, const RenderOptions& o, Frame& f);

// Rasterises a frame: palette RAM index (0..31, 0 = backdrop) per pixel, [240][256].
void rasterize_indices(const Frame& f, const TileData& t, uint8_t* indices);

// The RGB picture, [240][256][3] uint8.
void render(const State& s, const TileData& t, const RenderOptions& o, uint8_t* rgb);

// Palette RAM as the PPU holds it during the level for speed setting `speed` (mirrors and the
// speed colour applied): index 0..31 -> NES colour number.
void level_palette_ram(const TileData& t, int speed, uint8_t out[32]);

// A pill as the picture shows it (sprites).
struct PillOnScreen {
  bool drawn;
  uint8_t rotation;   // 0..3 as the game counts it
  uint8_t color[2];   // 1st and 2nd half colours: 0 yellow, 1 red, 2 blue
  int left, top;      // NES pixels: top-left of the pill's 16x8 or 8x16 box
  int width, height;  // NES pixels
};

struct Facts {
  ScreenKind kind;
  uint8_t bottle[kFieldSize];  // nametable tiles shown in the bottle, row 0 at the top
  PillOnScreen falling;        // the falling pill, as of the frame before `s`
  uint8_t falling_x;           // its column 0..7 as drawn
  uint8_t falling_y;           // its row counted from the bottom (15 = top) as drawn
  PillOnScreen next;           // the next pill, at rest or along the throw arc
  uint8_t throw_frame;         // pillThrownFrame: 0 at rest
  uint8_t bg_bank;             // 0 or 1: the small viruses' animation frame
};

void screen_facts(const State& s, Facts& out);

// --- Two players (docs/RENDER.md "Two players") ---
// The picture of a two-player round (engine.Versus) after the console's next NMI, with the
// same frame convention as render(): nmi $8005 (render_fieldRow_bothPlayers [$8307]: one row of
// each player per NMI, fieldRow_PPUADDR_2P_P1/_P2; @renderVictories of
// render_palChange_or_bkgOverlays [$83A3]: the crowns at crownsP1/P2_PPUADDR), toLevel [$817E]
// (bkgLevel_2P and the speed texts at speedText_P1/P2_VRAMaddr), palChange (palLevel_2P and
// setBkgColor_basedOnSpeed [$8627]), fallingPill_spriteUpdate [$872F] (X from
// fallingPill_startXPos $20 / $A0), updateSprites_lvl [$87B2] (next pills, level and virus
// digits as sprites) and updateSprites_2p_endGame [$887C].

// Builds the two-player picture's VRAM, OAM and switches (`t` may be null: no metasprites).
void build_versus_frame(const Versus& v, const TileData* t, Frame& f);

// The RGB picture, [240][256][3] uint8.
void render_versus(const Versus& v, const TileData& t, uint8_t* rgb);

// Palette RAM during a two-player round: palLevel_2P with the speed colour of `speed`.
void versus_palette_ram(const TileData& t, const Versus& v, uint8_t out[32]);

struct VersusFacts {
  ScreenKind kind;
  uint8_t bg_bank;
  uint8_t crowns[2];
  Facts player[2];  // kind, bottle, falling, next (throw_frame 0: no throw in 2P) per player
};

void versus_screen_facts(const Versus& v, VersusFacts& out);

}  // namespace drm
