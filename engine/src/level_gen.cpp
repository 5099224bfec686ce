// generatePillsReserve [$82B0] (prg/drmario_prg_level_init.asm) and addVirus [$9D19]
// (prg/drmario_prg_game_logic.asm) as run by initData_level [$8216] and levelIntro [$9CAB].
// Reproduces the retail build (optimize = 0, bugfix = 0); the differences are noted inline.
#include "level_gen.h"

#include <stdexcept>
#include <string>

#include "tables_level_gen.h"

namespace drm {
namespace {

namespace t = level_gen_tables;

constexpr int kRowSize = 8;          // rowSize
constexpr int kPillIdCount = 9;      // colorCombination_right - colorCombination_left
constexpr int kVerticalCheck = 16;   // virusPlacement_verOffset (same $10 for every speed)
constexpr int kHorizontalCheck = 2;  // virusPlacement_horOffset (same $02 for every speed)

// addVirus reads neighbours through a pointer to $0400 with an 8-bit index, so a check
// below the bottom row reads $0480-$048F. initField_bothPlayers fills $0400-$05FF with $FF
// and nothing writes there afterwards, so those bytes read as an empty cell. (A check above
// row 0 would read $04F0-$04FF, also $FF, but viruses never sit in rows 0..2.)
uint8_t cell_or_empty(const std::array<uint8_t, kFieldSize>& field, int index) {
  index &= 0xFF;
  return index < kFieldSize ? field[index] : kCellEmpty;
}

uint8_t color_bit(uint8_t cell) { return t::kColorBits[cell & 0x03]; }

// One addVirus call. Returns the index written, or -1 when the scan ran off the end of the
// field, in which case the game retries with fresh RNG on the next frame.
int add_virus(int level, Rng& rng, std::array<uint8_t, kFieldSize>& field, int to_add) {
  // Height: re-roll until rng0 & $0F is at most the level's maximum.
  int height;
  do {
    rng.step();
    height = rng.hi & 0x0F;
  } while (height > t::kMaxHeightByLevel[level]);
  // The column comes from the same step's rng1.
  int pos = t::kFieldPosOfHeight[height] + (rng.lo & (kRowSize - 1));

  // Colours cycle yellow, (random), blue, red as virusToAdd counts down: virusToAdd & 3 is the
  // colour, and 3 asks virusColor_random (indexed by rng1 after one more step). This keeps
  // every group of four viruses with at least one of each colour.
  int color = to_add & 0x03;
  if (color == 3) {  // retail: "bne"; the bugfix build's "bcc" behaves the same here
    rng.step();
    color = t::kVirusColorRandom[rng.lo & 0x0F];
  }

  for (; pos < kFieldSize; ++pos) {
    if (field[pos] != kCellEmpty) continue;
    // Collect the colours two cells away up, down, left and right; left/right only when
    // that cell is in the same row.
    uint8_t seen = color_bit(cell_or_empty(field, pos - kVerticalCheck));
    seen |= color_bit(cell_or_empty(field, pos + kVerticalCheck));
    const int column = pos & (kRowSize - 1);
    if (column >= kHorizontalCheck) seen |= color_bit(field[pos - kHorizontalCheck]);
    if (column < kRowSize - kHorizontalCheck) seen |= color_bit(field[pos + kHorizontalCheck]);
    if (seen == 0x07) continue;  // all three colours near: try the next cell in reading order
    // Walk the colour down (red -> yellow -> blue -> red ...) until one is not near.
    while (t::kColorBits[color] & seen) color = color == 0 ? 2 : color - 1;
    field[pos] = static_cast<uint8_t>(kCellVirus | color);
    return pos;
  }
  return -1;
}

}  // namespace

// Packed-BCD increment as addVirus does it on currentP_virusLeft (only the low digit is
// fixed up; fine for the game's maximum of 84).
uint8_t bcd_increment(uint8_t value) {
  ++value;
  if ((value & 0x0F) == 0x0A) value = static_cast<uint8_t>(value + 6);
  return value;
}

int add_virus_call(int level, Rng& rng, std::array<uint8_t, kFieldSize>& field, int to_add) {
  if (level < 0 || level > kMaxLevel || to_add <= 0) return -1;
  return add_virus(level, rng, field, to_add);
}

int virus_target(int level) {
  const int capped = level > kMaxSelectableLevel ? kMaxSelectableLevel : level;
  return (capped + 1) * 4;
}

PillColors pill_colors(uint8_t pill_id) {
  if (pill_id >= kPillIdCount) {
    throw std::invalid_argument("pill id must be 0..8, got " + std::to_string(pill_id));
  }
  return PillColors{t::kColorCombinationLeft[pill_id], t::kColorCombinationRight[pill_id]};
}

void generate_pill_reserve(Rng& rng, std::array<uint8_t, kPillReserveSize>& reserve) {
  // Each id is the previous id plus rng0 & $0F, reduced mod 9 by repeated subtraction.
  int pill_id = 0;
  for (int index = kPillReserveSize - 1; index >= 0; --index) {
    rng.step();
    pill_id = (pill_id + (rng.hi & 0x0F)) % kPillIdCount;
    reserve[index] = static_cast<uint8_t>(pill_id);
  }
}

void generate_level(int level, Rng& rng, LevelSetup& out) {
  if (level < 0 || level > kMaxLevel) {
    throw std::invalid_argument("level must be 0.." + std::to_string(kMaxLevel) + ", got " +
                                std::to_string(level));
  }
  // initData_level: the reserve first; generateNextPill and the rest use no RNG.
  generate_pill_reserve(rng, out.pill_reserve);
  out.rng_after_reserve = rng.state();

  // levelIntro: toLevel already cleared the field; one addVirus per frame until done.
  out.field.fill(kCellEmpty);
  int to_add = virus_target(level);
  uint8_t left_bcd = 0;
  int calls = 0;
  while (to_add > 0) {
    if (++calls > kMaxAddVirusCalls) {
      throw std::runtime_error("addVirus found no room after " + std::to_string(calls - 1) +
                               " calls; the console would hang here");
    }
    if (add_virus(level, rng, out.field, to_add) >= 0) {
      --to_add;
      left_bcd = bcd_increment(left_bcd);
    } else if (rng.state() == 0) {
      // A locked-up RNG (state 0, reached only from seeds 0 and 1) rolls height 0, column 0
      // forever: only the bottom row is ever tried, so once it is full the console loops in
      // levelIntro for good (levels 2 and up). Fail now instead of spinning to the guard.
      throw std::domain_error("RNG state 0 (seed 0 or 1) can place at most 8 viruses; level " +
                              std::to_string(level) + " needs " +
                              std::to_string(virus_target(level)) +
                              " and the console would hang in levelIntro");
    }
  }
  out.virus_count = virus_target(level);
  out.virus_count_bcd = left_bcd;
  out.max_height = t::kMaxHeightByLevel[level];
  out.top_row = 15 - out.max_height;
  out.rng_after = rng.state();
  out.add_virus_calls = calls;
}

void generate_versus_round(int level1, int level2, Rng& rng, VersusSetup& out) {
  for (int level : {level1, level2}) {
    if (level < 0 || level > kMaxLevel) {
      throw std::invalid_argument("level must be 0.." + std::to_string(kMaxLevel) + ", got " +
                                  std::to_string(level));
    }
  }
  generate_pill_reserve(rng, out.pill_reserve);
  out.field[0].fill(kCellEmpty);
  out.field[1].fill(kCellEmpty);
  const bool same = level1 == level2;
  // p1: (min(level, 20) + 1) * 4; p2: (level + 1) * 4 with no cap (initData_level).
  int to_add[2] = {virus_target(level1), (level2 + 1) * 4};
  const int levels[2] = {level1, level2};
  uint8_t bcd[2] = {0, 0};
  int frames = 0;
  while (to_add[0] > 0 || to_add[1] > 0) {
    if (++frames > kMaxAddVirusCalls) {
      throw std::runtime_error("addVirus found no room after " + std::to_string(frames - 1) +
                               " frames; the console would hang here");
    }
    for (int p = 0; p < (same ? 1 : 2); ++p) {
      if (to_add[p] == 0) continue;  // addVirus returns before stepping the RNG
      const int pos = add_virus(levels[p], rng, out.field[p], to_add[p]);
      if (pos < 0) continue;
      if (same) out.field[1][pos] = out.field[0][pos];
      --to_add[p];
      bcd[p] = bcd_increment(bcd[p]);
    }
    if (same) {
      to_add[1] = to_add[0];  // currentP_toP2 copies p1's image to p2
      bcd[1] = bcd[0];
    }
    if (rng.state() == 0) {
      throw std::domain_error("RNG state 0 (seed 0 or 1): the console would hang in levelIntro");
    }
  }
  out.virus_count_bcd[0] = bcd[0];
  out.virus_count_bcd[1] = bcd[1];
  out.intro_frames = frames;
  out.rng_after = rng.state();
}

}  // namespace drm
