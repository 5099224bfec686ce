// initData_level [$8216] -> generatePillsReserve [$82B0], then levelIntro [$9CAB] -> addVirus
// [$9D19] (prg/drmario_prg_level_init.asm, prg/drmario_prg_game_logic.asm): everything a
// one-player level start does with the RNG, in the game's order.
#pragma once

#include <array>
#include <cstdint>

#include "rng.h"

namespace drm {

inline constexpr int kFieldSize = 128;          // fieldSize: 16 rows x 8 columns, row 0 at the top
inline constexpr int kPillReserveSize = 128;    // pillsReserveSize, RAM $0780-$07FF
inline constexpr int kMaxSelectableLevel = 20;  // selectableLvCap ($14)
inline constexpr int kMaxLevel = 24;            // lvCap ($18): 1P clears stop incrementing here
inline constexpr uint8_t kCellEmpty = 0xFF;     // fieldPosEmpty
inline constexpr uint8_t kCellVirus = 0xD0;     // virus, low nibble = colour

// Guard against a board on which no virus can ever be placed: the console would spin in
// levelIntro forever. No seed on the console orbit gets near it (levels 0..24 need at most
// a few hundred calls); hitting it raises std::runtime_error instead of hanging.
inline constexpr int kMaxAddVirusCalls = 1 << 20;

struct PillColors {
  uint8_t left;   // colorCombination_left: 0 yellow, 1 red, 2 blue
  uint8_t right;  // colorCombination_right
};

struct LevelSetup {
  std::array<uint8_t, kFieldSize> field;  // p1_field $0400-$047F after the last virus
  // pillsReserve $0780-$07FF: pill ids 0..8, entry 127 generated first. The game reads it
  // with currentP_pillsCounter, which starts at 0 and wraps at 128.
  std::array<uint8_t, kPillReserveSize> pill_reserve;
  int virus_count;             // viruses placed: (min(level, 20) + 1) * 4
  uint8_t virus_count_bcd;     // p1_virusLeft ($0324) as RAM holds it: packed BCD, e.g. 84 -> $84
  int max_height;              // addVirus_maxHeight_basedOnLvl[level]: rows above the floor
  int top_row;                 // highest field row a virus can occupy: 15 - max_height
  uint16_t rng_after_reserve;  // state when levelIntro starts placing viruses
  uint16_t rng_after;          // state when the level starts ($17 << 8 | $18)
  // addVirus calls in levelIntro's loop; each is followed by one NMI wait, so this is also
  // the number of frames the virus loop takes (before levelIntro_delay).
  int add_virus_calls;
};

// Viruses the game asks for: (level + 1) * 4 with the level capped at selectableLvCap.
int virus_target(int level);

// Left/right colours of a reserve entry (0..8).
PillColors pill_colors(uint8_t pill_id);

// generatePillsReserve: 128 RNG steps, ids written from index 127 down to 0.
void generate_pill_reserve(Rng& rng, std::array<uint8_t, kPillReserveSize>& reserve);

// One addVirus [$9D19] call as levelIntro [$9CAB] makes it, once per frame: `to_add` is
// virusToAdd before the call. Returns the field index written (0..127), or -1 when the scan ran
// off the end of the field (no virus this frame; the game calls again next frame).
int add_virus_call(int level, Rng& rng, std::array<uint8_t, kFieldSize>& field, int to_add);

// Packed-BCD +1 as addVirus does it on virusLeft (only the low digit is fixed up).
uint8_t bcd_increment(uint8_t value);

// Everything level init does with the RNG, for one player at `level` (0..kMaxLevel).
// `rng` holds the state when initData_level starts (see docs/LEVEL_GEN.md: the state after
// the options screen's last step) and is left as the level starts.
// Throws std::invalid_argument for a level outside 0..kMaxLevel, std::domain_error when the
// RNG locks at 0 before all viruses fit (seeds 0 and 1 from level 2 up: the console hangs).
void generate_level(int level, Rng& rng, LevelSetup& out);

// A two-player round's start (docs/VERSUS.md): initData_level [$8216] makes one reserve for both
// players, then levelIntro [$9CAB] adds one virus per frame for player 1 and, when the levels
// differ, one for player 2 after it, both from the one RNG; with equal levels addVirus
// (@addSameVirus_p2) writes each of player 1's viruses into p2_field too (identical boards).
struct VersusSetup {
  std::array<uint8_t, kFieldSize> field[2];  // p1_field $0400, p2_field $0500
  std::array<uint8_t, kPillReserveSize> pill_reserve;
  uint8_t virus_count_bcd[2];  // p1_virusLeft $0324, p2_virusLeft $03A4
  int intro_frames;            // levelIntro loop iterations (one NMI wait each)
  uint16_t rng_after;          // RNG state after the last virus
};

// Everything a two-player round start does with the RNG. Levels 0..kMaxLevel (player 1's virus
// count is capped at level 20, player 2's is not: the options screen keeps both at 0..20).
// Throws like generate_level.
void generate_versus_round(int level1, int level2, Rng& rng, VersusSetup& out);

}  // namespace drm
