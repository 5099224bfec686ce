// Level-generation tables of data/drmario_data_game.asm (Nostaljipi/dr-mario-disassembly),
// values as in shared/reference/nes_tables.json; each names its label and ROM address.
#pragma once

#include <cstdint>

namespace drm::level_gen_tables {

// addVirus_maxHeight_basedOnLvl [$A3F8]: highest allowed virus height (rows above the floor,
// 0 = bottom row) per level, indexed by the uncapped level. 35 entries; levels 0..24 are used.
inline constexpr uint8_t kMaxHeightByLevel[35] = {9,  9,  9,  9,  9,  9,  9,  9,  9,  9,  9,  9,
                                                  9,  9,  9,  10, 10, 11, 11, 12, 12, 12, 12, 12,
                                                  12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12};

// pill_fieldPos_relativeToPillY [$A48E]: height -> field index of that row's column 0.
inline constexpr uint8_t kFieldPosOfHeight[16] = {0x78, 0x70, 0x68, 0x60, 0x58, 0x50, 0x48, 0x40,
                                                  0x38, 0x30, 0x28, 0x20, 0x18, 0x10, 0x08, 0x00};

// virusColor_random [$A807]: colour of every fourth virus, indexed by rng1 & $0F.
inline constexpr uint8_t kVirusColorRandom[16] = {0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0, 0, 1, 2, 1};

// virusPlacement_colorBits [$A247]: cell colour (byte & 3) -> bit; index 3 is the empty
// cell's $FF & 3, which marks nothing.
inline constexpr uint8_t kColorBits[4] = {0x01, 0x02, 0x04, 0x00};

// colorCombination_left [$A817] / colorCombination_right [$A820]: pill id 0..8 -> colours.
inline constexpr uint8_t kColorCombinationLeft[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2};
inline constexpr uint8_t kColorCombinationRight[9] = {0, 1, 2, 0, 1, 2, 0, 1, 2};

}  // namespace drm::level_gen_tables
