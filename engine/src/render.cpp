// The NES picture of a one-player level: nmi $8005, render_fieldRow $8331,
// render_palChange_or_bkgOverlays $83A3, updateSprites_lvl $87B2, fallingPill_spriteUpdate $872F,
// updateSprites_thrownPill $88C1, metaspriteUpdate $8906, smallVirusLvlAnim $89D9,
// checkPauseReset $979E (the pause picture). The PPU side follows the NES PPU: 8x8 sprites from
// the $0000 pattern table, background from $1000, 8 sprites per line in OAM order, a sprite's
// first line one below its OAM Y, background priority per sprite.
#include "render.h"

#include <cstring>

#include "nes_tables.h"
#include "render_tables.h"

namespace drm {
namespace {

constexpr int kVramRow = 32;
constexpr int kAttrOffset = 960;
constexpr uint8_t kOamHidden = 0xEF;  // a sprite at Y >= $EF is below the picture
// The big viruses dance on the music's beat (musicBeatDuration, not modelled by the engine);
// this nominal beat is FEVER's $0D + 1 frames.
constexpr uint32_t kNominalBeatFrames = 14;

int vram_offset(int ppu_addr) { return ppu_addr - 0x2000; }

void put_bcd(uint8_t* vram, int ppu_addr, uint8_t bcd) {
  vram[vram_offset(ppu_addr)] = bcd >> 4;
  vram[vram_offset(ppu_addr) + 1] = bcd & 0x0F;
}

// Six score digits as the RAM's score bytes hold them (points / 10; the trailing 0 is in the
// background nametable).
void put_score(uint8_t* vram, int ppu_addr, uint32_t points) {
  uint32_t v = points / 10;
  if (v > 999999) v = 999999;
  for (int i = 5; i >= 0; --i) {
    vram[vram_offset(ppu_addr) + i] = static_cast<uint8_t>(v % 10);
    v /= 10;
  }
}

inline uint8_t shown_tile(uint8_t v) {
  return (v & 0xF0) == kCleared ? static_cast<uint8_t>((v & 0x0F) | kJustEmptied) : v;
}

// The bottle as the next NMI leaves it: the nametable now, plus row `status` copied again.
void bottle_tiles(const State& s, uint8_t* out) {
  std::memcpy(out, s.shown, kFieldSize);
  if (s.status < kFieldSize / 8) {
    for (int i = s.status * 8; i < s.status * 8 + 8; ++i) out[i] = shown_tile(s.field[i]);
  }
}

void add_sprite(Frame& f, uint8_t y, uint8_t tile, uint8_t attr, uint8_t x) {
  if (f.oam_count >= 64) return;
  f.oam[f.oam_count++] = SpritePart{y, tile, attr, x};
}

// halfPill_spriteUpdate $8782 for both halves of a pill.
void add_pill(Frame& f, uint8_t rotation, const uint8_t color[2], uint8_t x, uint8_t y) {
  int i = kPillSpriteDataIndex[8 + (rotation & 3)];  // size 2
  for (int half = 0; half < 2; ++half) {
    if (kPillSpriteData[i] == 0xFF) return;
    add_sprite(f, static_cast<uint8_t>(kPillSpriteData[i] + y),
               static_cast<uint8_t>(kPillSpriteData[i + 1] + color[half]), kPillSpriteData[i + 2],
               static_cast<uint8_t>(kPillSpriteData[i + 3] + x));
    i += 4;
  }
}

void add_metasprite(Frame& f, const TileData* t, int index, uint8_t x, uint8_t y) {
  if (t == nullptr || index < 0 || index >= kNumMetasprites) return;
  for (const SpritePart& p : t->metasprite[index]) {
    add_sprite(f, static_cast<uint8_t>(p.dy + y), p.tile, p.attr, static_cast<uint8_t>(p.dx + x));
  }
}

// updateSprites_thrownPill: position along pillThrownAnim_XPos/YPos, 4 pixels more on both axes
// while the pill is vertical.
void thrown_pill_position(const State& s, uint8_t& x, uint8_t& y) {
  const unsigned frame = s.pill_thrown_frame % sizeof(kPillThrownAnimXPos);
  const uint8_t off = static_cast<uint8_t>((s.next_rotation & 1) * 4);
  x = static_cast<uint8_t>(kPillThrownAnimXPos[frame] + off);
  y = static_cast<uint8_t>(kPillThrownAnimYPos[frame] + off);
}

// bigVirusLvlAnim $89E4, approximated: a big virus is drawn while its colour has viruses on the
// field; its dance frame and place on the circling path (bigVirus_XPos/YPos, the three 21
// positions apart) follow a nominal beat of the engine's frame count; no hurt animation.
void add_big_viruses(Frame& f, const TileData* t, const State& s) {
  int count[3] = {0, 0, 0};
  for (int i = 0; i < kFieldSize; ++i) {
    if ((s.field[i] & 0xF0) == kVirus && (s.field[i] & 0x0F) < 3) count[s.field[i] & 0x0F]++;
  }
  const uint32_t beat = s.frame / kNominalBeatFrames;
  const int dance = s.level_fail ? 0 : static_cast<int>(beat & 3);
  const int pos = static_cast<int>((beat / 2) & 63);
  // Drawn yellow, red, blue; bigVirus_spriteIndex lists red, blue, yellow.
  constexpr int kColor[3] = {0, 1, 2};
  constexpr int kPathOffset[3] = {0, 21, 42};
  constexpr int kIndexBase[3] = {8, 0, 4};
  for (int k = 0; k < 3; ++k) {
    if (count[kColor[k]] == 0) continue;
    add_metasprite(f, t, kBigVirusSpriteIndex[kIndexBase[k] + dance],
                   kBigVirusXPos[pos + kPathOffset[k]], kBigVirusYPos[pos + kPathOffset[k]]);
  }
}

uint8_t falling_pill_oam_x(uint8_t col) {
  return static_cast<uint8_t>(col * 8 + kFallingPillStartXPos[0]);
}

ScreenKind kind_of(const State& s) {
  switch (s.phase) {
    case kPhasePaused:
      return s.spr_pill ? kScreenLevel : kScreenPaused;
    case kPhaseStageClear:
      return kScreenStageClear;
    case kPhaseTopOut:
      return kScreenTopOut;
    case kPhaseDemoEnd:
    case kPhaseSoftReset:
      return kScreenOther;
    default:
      return kScreenLevel;
  }
}

void fill_pill_box(PillOnScreen& p, uint8_t rotation, uint8_t oam_x, uint8_t oam_y) {
  p.rotation = rotation & 3;
  const bool vertical = (rotation & 1) != 0;
  p.left = oam_x;
  p.top = oam_y + 1 - (vertical ? 8 : 0);  // a sprite's first line is one below its OAM Y
  p.width = vertical ? 8 : 16;
  p.height = vertical ? 16 : 8;
}

}  // namespace

void TileData::prepare() {
  for (int bank = 0; bank < 2; ++bank)
    for (int tile = 0; tile < 256; ++tile)
      for (int pal = 0; pal < 4; ++pal)
        for (int i = 0; i < 64; ++i) {
          const uint8_t c = pattern[bank][tile][i] & 3;
          bg_block[bank][tile][pal][i] = c ? static_cast<uint8_t>(pal * 4 + c) : 0;
        }
}

void level_palette_ram(const TileData& t, int speed, uint8_t out[32]) {
  // copyBkgOrPalToPPU writes $3F00..$3F1F in order; $3F10/$3F14/$3F18/$3F1C are mirrors of
  // $3F00/$3F04/$3F08/$3F0C, so the later sprite writes land there too.
  std::memcpy(out, t.palette, 32);
  for (int i = 0; i < 4; ++i) out[i * 4] = out[16 + i * 4];
  // setBkgColor_basedOnSpeed $8627: colour 3 of background palettes 0, 1 and 3.
  const uint8_t c = t.speed_color[(speed % 3 + 3) % 3];
  out[3] = out[7] = out[15] = c;
  for (int i = 0; i < 32; ++i) out[i] &= 0x3F;
}

void build_frame(const State& s, const TileData* t, const RenderOptions& o, Frame& f) {
  f.kind = kind_of(s);
  f.oam_count = 0;
  f.bg_visible = f.kind != kScreenPaused;
  // smallVirusLvlAnim runs in the next frame's main loop, after the NMI's frameCounter += 1 and
  // before the beam reaches the bottle (line 80).
  f.bg_bank = static_cast<uint8_t>(((s.frame_counter + 1) & 0xFF) / kSmallVirusAnimSpeed & 1);
  if (t != nullptr) {
    std::memcpy(f.vram, t->nametable, sizeof(f.vram));
  } else {
    std::memset(f.vram, 0xFF, sizeof(f.vram));
  }

  // The bottle (render_fieldRow) and the 1P overlays (render_palChange_or_bkgOverlays,
  // prepLevelVisual_1P's speed text).
  uint8_t bottle[kFieldSize];
  bottle_tiles(s, bottle);
  for (int r = 0; r < 16; ++r) {
    const int addr = kFieldRowPpuAddr1P[2 * r] << 8 | kFieldRowPpuAddr1P[2 * r + 1];
    std::memcpy(f.vram + vram_offset(addr), bottle + r * 8, 8);
  }
  put_score(f.vram, kHighScoreVram, o.top_score);
  put_score(f.vram, kScoreVram, s.score);
  put_bcd(f.vram, kLevelNbVram, kLevelForDisplay[s.level < 30 ? s.level : 29]);
  for (int i = 0; i < 3; ++i)
    f.vram[vram_offset(kSpeedText1PVram) + i] = kTextLevelSpeed[(s.speed_setting % 3) * 4 + i];
  put_bcd(f.vram, kVirusLeftVram, s.virus_left);

  if (f.kind == kScreenPaused) {  // the pause loop: only the PAUSE text
    add_metasprite(f, t, kMetaspritePause, kPauseX, kPauseY);
    return;
  }
  // Sprite buffer order: the falling pill (nextAction), then updateSprites_lvl.
  if (s.spr_pill) {
    add_pill(f, s.spr_pill_rotation, s.spr_pill_color, falling_pill_oam_x(s.spr_pill_x),
             kFallingPillYPos[s.spr_pill_y & 0x0F]);
  }
  if (s.phase == kPhasePaused) return;  // the frame Start paused: the level sprites are skipped
  add_big_viruses(f, t, s);
  if (s.level_fail) {
    add_metasprite(f, t, kMetaspriteMarioFail, kMarioX, kMarioY);
    return;
  }
  add_metasprite(f, t, kMetaspriteMarioThrow0 + (s.mario_throw_frame & 3), kMarioX, kMarioY);
  uint8_t x, y;
  thrown_pill_position(s, x, y);
  add_pill(f, s.next_rotation, s.next_color, x, y);
}

void rasterize_indices(const Frame& f, const TileData& t, uint8_t* idx) {
  // Background: 32x30 tiles, palette from the attribute table (one byte per 32x32 pixels).
  if (f.bg_visible) {
    const int bank = f.bg_bank & 1;
    for (int ty = 0; ty < 30; ++ty) {
      for (int tx = 0; tx < 32; ++tx) {
        const uint8_t tile = f.vram[ty * kVramRow + tx];
        const uint8_t attr = f.vram[kAttrOffset + (ty >> 2) * 8 + (tx >> 2)];
        const int pal = (attr >> (((ty & 2) << 1) | (tx & 2))) & 3;
        const uint8_t* src = t.bg_block[bank][tile][pal];
        uint8_t* dst = idx + (ty * 8) * kScreenWidth + tx * 8;
        for (int r = 0; r < 8; ++r) std::memcpy(dst + r * kScreenWidth, src + r * 8, 8);
      }
    }
  } else {
    std::memset(idx, 0, kScreenWidth * kScreenHeight);
  }
  if (f.oam_count == 0) return;
  // Sprites, line by line: the first 8 in OAM order whose 8 lines cover the line; the first
  // opaque sprite pixel in OAM order takes the pixel even when it sits behind the background.
  for (int line = 0; line < kScreenHeight; ++line) {
    int found[8];
    int n = 0;
    for (int i = 0; i < f.oam_count && n < 8; ++i) {
      const int top = f.oam[i].dy + 1;
      if (f.oam[i].dy < kOamHidden && line >= top && line < top + 8) found[n++] = i;
    }
    if (n == 0) continue;
    uint8_t* row = idx + line * kScreenWidth;
    bool taken[kScreenWidth + 8];
    std::memset(taken, 0, sizeof(taken));
    for (int k = 0; k < n; ++k) {
      const SpritePart& sp = f.oam[found[k]];
      int r = line - (sp.dy + 1);
      if (sp.attr & 0x80) r = 7 - r;  // vertical flip
      const uint8_t* pat = t.pattern[kBankSprites][sp.tile] + r * 8;
      const uint8_t base = static_cast<uint8_t>(16 + (sp.attr & 3) * 4);
      const bool behind = (sp.attr & 0x20) != 0;
      for (int c = 0; c < 8; ++c) {
        const int x = sp.dx + c;
        if (x >= kScreenWidth || taken[x]) continue;
        const uint8_t ci = pat[(sp.attr & 0x40) ? 7 - c : c] & 3;
        if (ci == 0) continue;
        taken[x] = true;
        if (!behind || (row[x] & 3) == 0) row[x] = static_cast<uint8_t>(base + ci);
      }
    }
  }
}

namespace {

// Palette RAM indices to RGB through palette RAM `pal`.
void indices_to_rgb(const uint8_t* idx, const TileData& t, const uint8_t pal[32], uint8_t* rgb) {
  uint8_t lut[32][3];
  for (int i = 0; i < 32; ++i) std::memcpy(lut[i], t.rgb[pal[i]], 3);
  // Palette index 0, 4, 8, ... of any palette shows the backdrop ($3F00).
  for (int i = 0; i < 32; i += 4) std::memcpy(lut[i], lut[0], 3);
  for (int i = 0; i < kScreenWidth * kScreenHeight; ++i) {
    const uint8_t* c = lut[idx[i] & 31];
    rgb[3 * i] = c[0];
    rgb[3 * i + 1] = c[1];
    rgb[3 * i + 2] = c[2];
  }
}

}  // namespace

void render(const State& s, const TileData& t, const RenderOptions& o, uint8_t* rgb) {
  Frame f;
  build_frame(s, &t, o, f);
  static thread_local uint8_t idx[kScreenWidth * kScreenHeight];
  rasterize_indices(f, t, idx);
  uint8_t pal[32];
  level_palette_ram(t, s.speed_setting, pal);
  indices_to_rgb(idx, t, pal, rgb);
}

void screen_facts(const State& s, Facts& out) {
  Frame f;
  const RenderOptions o;
  build_frame(s, nullptr, o, f);
  out.kind = f.kind;
  out.bg_bank = f.bg_bank;
  bottle_tiles(s, out.bottle);
  out.falling = PillOnScreen{};
  out.next = PillOnScreen{};
  out.falling_x = s.spr_pill_x;
  out.falling_y = s.spr_pill_y;
  out.throw_frame = s.pill_thrown_frame;
  if (f.kind == kScreenPaused) return;
  if (s.spr_pill) {
    PillOnScreen& p = out.falling;
    p.drawn = true;
    p.color[0] = s.spr_pill_color[0];
    p.color[1] = s.spr_pill_color[1];
    fill_pill_box(p, s.spr_pill_rotation, falling_pill_oam_x(s.spr_pill_x),
                  kFallingPillYPos[s.spr_pill_y & 0x0F]);
  }
  if (s.phase != kPhasePaused && !s.level_fail) {
    PillOnScreen& p = out.next;
    uint8_t x, y;
    thrown_pill_position(s, x, y);
    p.drawn = true;
    p.color[0] = s.next_color[0];
    p.color[1] = s.next_color[1];
    fill_pill_box(p, s.next_rotation, x, y);
  }
}

// ---------------------------------------------------------------------------------------------
// Two players.

namespace {

ScreenKind versus_kind(const Versus& v) {
  const State& a = v.p[0];
  switch (a.phase) {
    case kPhasePaused:
      return (a.spr_pill || v.p[1].spr_pill) ? kScreenLevel : kScreenPaused;
    case kPhaseRoundLost:
      return kScreenTopOut;
    case kPhaseRoundOver:
    case kPhaseMatchOver:
      return (v.who_failed != 0 || a.level_fail || v.p[1].level_fail) ? kScreenTopOut
                                                                      : kScreenStageClear;
    case kPhaseDemoEnd:
    case kPhaseSoftReset:
      return kScreenOther;
    default:
      return kScreenLevel;
  }
}

// fallingPill_spriteUpdate [$872F]: fallingPill_startXPos[2 + player] ($20 p1, $A0 p2).
uint8_t falling_pill_oam_x_2p(int player, uint8_t col) {
  return static_cast<uint8_t>(col * 8 + kFallingPillStartXPos[2 + (player & 1)]);
}

const uint8_t* field_rows_2p(int player) {
  return player == 0 ? kFieldRowPpuAddr2PP1 : kFieldRowPpuAddr2PP2;
}

// updateSprites_lvl [$87B2] @updateSprites_2p_nextPill: both next pills are drawn with
// currentP_nextPillRotation, the zero page as p2's pass of the main loop left it.
void next_pill_position_2p(int player, uint8_t& x, uint8_t& y) {
  x = static_cast<uint8_t>(player == 0 ? kNextPill2PP1X : kNextPill2PP2X);
  y = static_cast<uint8_t>(player == 0 ? kNextPill2PP1Y : kNextPill2PP2Y);
}

// spriteUpdate_2p_nb: two digit sprites (tiles $00-$09) of a BCD byte, 8 pixels apart.
void add_digits_2p(Frame& f, uint8_t y, uint8_t bcd, uint8_t x) {
  add_sprite(f, y, static_cast<uint8_t>(bcd >> 4), kTxt2PAttr, x);
  add_sprite(f, y, static_cast<uint8_t>(bcd & 0x0F), kTxt2PAttr,
             static_cast<uint8_t>(x + kSprTxtWidth));
}

// The next pills are hidden once whoFailed or whoWon is set. The game's whoWon ($55) is still
// 0 in every state the engine holds (checkVirusLeft sets it after its waits), so only
// whoFailed (set by anyPlayerLoses) counts.
bool next_pills_shown_2p(const Versus& v) { return v.who_failed == 0; }

}  // namespace

void versus_palette_ram(const TileData& t, const Versus& v, uint8_t out[32]) {
  // palChange loads palLevel_2P (the same bytes as palLevel_1P) and setBkgColor_basedOnSpeed
  // with currentP_speedSetting: player 2's speed (docs/RENDER.md "Two players").
  level_palette_ram(t, v.p[1].speed_setting, out);
}

void build_versus_frame(const Versus& v, const TileData* t, Frame& f) {
  const State& a = v.p[0];
  f.kind = versus_kind(v);
  f.oam_count = 0;
  f.bg_visible = f.kind != kScreenPaused;
  f.bg_bank = static_cast<uint8_t>(((a.frame_counter + 1) & 0xFF) / kSmallVirusAnimSpeed & 1);
  if (t != nullptr) {
    std::memcpy(f.vram, t->nametable_2p, sizeof(f.vram));
  } else {
    std::memset(f.vram, 0xFF, sizeof(f.vram));
  }
  for (int i = 0; i < 2; ++i) {
    const State& s = v.p[i];
    uint8_t bottle[kFieldSize];
    bottle_tiles(s, bottle);
    const uint8_t* rows = field_rows_2p(i);
    for (int r = 0; r < 16; ++r) {
      const int addr = rows[2 * r] << 8 | rows[2 * r + 1];
      std::memcpy(f.vram + vram_offset(addr), bottle + r * 8, 8);
    }
    const int speed_addr = i == 0 ? kSpeedTextP1Vram : kSpeedTextP2Vram;
    for (int k = 0; k < 3; ++k)
      f.vram[vram_offset(speed_addr) + k] = kTextLevelSpeed[(s.speed_setting % 3) * 4 + k];
    const uint16_t* crowns = i == 0 ? kCrownsP1Vram : kCrownsP2Vram;
    for (int k = 0; k < v.crowns[i] && k < 3; ++k) {
      const int o = vram_offset(crowns[k]);
      f.vram[o] = kCrownTopLeft;
      f.vram[o + 1] = kCrownTopRight;
      f.vram[o + kVramRow] = kCrownBottomLeft;
      f.vram[o + kVramRow + 1] = kCrownBottomRight;
    }
  }
  if (f.kind == kScreenPaused) {
    add_metasprite(f, t, kMetaspritePause, kPauseX, kPauseY);
    return;
  }
  // Sprite buffer order: p1's then p2's falling pill (mainLoop_level), then updateSprites_lvl.
  for (int i = 0; i < 2; ++i) {
    const State& s = v.p[i];
    if (s.spr_pill) {
      add_pill(f, s.spr_pill_rotation, s.spr_pill_color, falling_pill_oam_x_2p(i, s.spr_pill_x),
               kFallingPillYPos[s.spr_pill_y & 0x0F]);
    }
  }
  if (a.phase == kPhasePaused) return;  // the frame Start paused: updateSprites_lvl skipped
  if (next_pills_shown_2p(v)) {
    for (int i = 0; i < 2; ++i) {
      uint8_t x, y;
      next_pill_position_2p(i, x, y);
      add_pill(f, v.p[1].next_rotation, v.p[i].next_color, x, y);
    }
  }
  add_digits_2p(f, kLvlNb2PY, kLevelForDisplay[v.p[0].level < 30 ? v.p[0].level : 29], kLvlNb2PP1X);
  add_digits_2p(f, kLvlNb2PY, kLevelForDisplay[v.p[1].level < 30 ? v.p[1].level : 29], kLvlNb2PP2X);
  add_digits_2p(f, kVirusLeft2PY, v.p[0].virus_left, kVirusLeft2PP1X);
  add_digits_2p(f, kVirusLeft2PY, v.p[1].virus_left, kVirusLeft2PP2X);
  // updateSprites_2p_endGame [$887C]: the loser's X sign and the red virus holding it.
  if (v.who_failed == 1 || v.who_failed == 2) {
    const uint8_t x = kRedLoseVirusXPos[v.who_failed];
    add_metasprite(f, t, kMetaspriteLoseXSign, x, kRedLoseVirusY);
    const int frame = (a.frame_counter & kRedLoseVirusSpeed) ? 1 : 0;
    add_metasprite(f, t, kRedLoseVirusSprite[frame], x, kRedLoseVirusY);
  }
}

void render_versus(const Versus& v, const TileData& t, uint8_t* rgb) {
  Frame f;
  build_versus_frame(v, &t, f);
  static thread_local uint8_t idx[kScreenWidth * kScreenHeight];
  rasterize_indices(f, t, idx);
  uint8_t pal[32];
  versus_palette_ram(t, v, pal);
  indices_to_rgb(idx, t, pal, rgb);
}

void versus_screen_facts(const Versus& v, VersusFacts& out) {
  Frame f;
  build_versus_frame(v, nullptr, f);
  out.kind = f.kind;
  out.bg_bank = f.bg_bank;
  out.crowns[0] = v.crowns[0] < 3 ? v.crowns[0] : 3;
  out.crowns[1] = v.crowns[1] < 3 ? v.crowns[1] : 3;
  for (int i = 0; i < 2; ++i) {
    const State& s = v.p[i];
    Facts& p = out.player[i];
    p.kind = f.kind;
    p.bg_bank = f.bg_bank;
    bottle_tiles(s, p.bottle);
    p.falling = PillOnScreen{};
    p.next = PillOnScreen{};
    p.falling_x = s.spr_pill_x;
    p.falling_y = s.spr_pill_y;
    p.throw_frame = 0;
    if (f.kind == kScreenPaused) continue;
    if (s.spr_pill) {
      p.falling.drawn = true;
      p.falling.color[0] = s.spr_pill_color[0];
      p.falling.color[1] = s.spr_pill_color[1];
      fill_pill_box(p.falling, s.spr_pill_rotation, falling_pill_oam_x_2p(i, s.spr_pill_x),
                    kFallingPillYPos[s.spr_pill_y & 0x0F]);
    }
    if (v.p[0].phase != kPhasePaused && next_pills_shown_2p(v)) {
      uint8_t x, y;
      next_pill_position_2p(i, x, y);
      p.next.drawn = true;
      p.next.color[0] = s.next_color[0];
      p.next.color[1] = s.next_color[1];
      fill_pill_box(p.next, v.p[1].next_rotation, x, y);
    }
  }
}

}  // namespace drm
