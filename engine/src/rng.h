// randomNumberGenerator [$B78B] (prg/drmario_prg_general.asm), via the generateRandNum macro.
//
// The game only ever calls it with X = rng0 ($17) and Y = rngSize (2): one call shifts the
// two bytes right as one 16-bit register, $17 first. Packing $17 as the high byte makes the
// step a plain right shift of a uint16_t with the feedback bit entering at bit 15.
#pragma once

#include <cstdint>

namespace drm {

// Power-on / reset value: init ($803B) stores rngSeed ($89) to $17 and rngSeed-1 to $18.
inline constexpr uint16_t kRngPowerOnState = 0x8988;

// One call of randomNumberGenerator on a packed state (hi = $17, lo = $18).
// Feedback = bit 1 of $17 XOR bit 1 of $18 (state bits 9 and 1); it enters bit 7 of $17,
// bit 0 of $17 moves into bit 7 of $18 and bit 0 of $18 falls out.
// The all-zero state maps to itself (feedback 0): the register locks at 0 forever. The
// console never reaches it: $8988 lies on a cycle of 32,767 non-zero states.
inline constexpr uint16_t rng_step(uint16_t state) {
  const unsigned feedback = ((state >> 9) ^ (state >> 1)) & 1u;
  return static_cast<uint16_t>((feedback << 15) | (state >> 1));
}

// RAM $17/$18 as the game holds them.
struct Rng {
  uint8_t hi;  // rng0, RAM $17: the byte addVirus reads for the height, the reserve for pills
  uint8_t lo;  // rng1, RAM $18: the byte addVirus reads for the column and random colour

  static constexpr Rng from_state(uint16_t state) {
    return Rng{static_cast<uint8_t>(state >> 8), static_cast<uint8_t>(state & 0xFF)};
  }
  constexpr uint16_t state() const { return static_cast<uint16_t>((hi << 8) | lo); }

  // generateRandNum: advance once; callers then read hi and/or lo.
  void step() { *this = from_state(rng_step(state())); }
};

}  // namespace drm
