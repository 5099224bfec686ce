// Two-player ("versus") NES Dr. Mario, frame for frame (docs/VERSUS.md). Each player is one
// State of game.h: the fields of its $30-byte RAM block (p1 $0300-$032F, p2 $0380-$03AF, copied
// to zero page $80-$AF while the player runs), its field (p1_field $0400, p2_field $0500), its
// pad and its share of the per-frame work. The rules are game.cpp's one-player routines; the
// places where the disassembly branches on nbPlayers ($0727) test State::players == 2.
//
// Shared bytes (one copy in the game) are kept in p[0] and mirrored into p[1] where a player's
// routine reads them: frameCounter $43 and pillsReserve $0780 (both players hold the same
// reserve and each advances its own pillsCounter through it). The match's phase, wait_frames,
// enable_pause and rng are p[0]'s.
#pragma once

#include <cstdint>

#include "game.h"
#include "level_gen.h"

namespace drm {

constexpr uint8_t kVictoriesRequired = 3;  // config_victoriesRequired $0725 (set in init)

struct Versus {
  State p[2];            // p[0] player 1, p[1] player 2
  uint8_t who_won;       // whoWon $55: 0 none or a draw, 1, 2 (checkVirusLeft / end screen)
  uint8_t who_failed;    // whoFailed $61: 0, 1, 2 (anyPlayerLoses [$9542])
  uint8_t rounds;        // rounds started in this match (1 after the constructor)
  uint8_t intro_frames;  // the last round start's levelIntro loop frames (one virus each)
  uint32_t frame;        // frames stepped since the match state was made
  // The crowns the nametable shows (victories drawn by render_palChange_or_bkgOverlays
  // @renderVictories [$83A3]): the victories at the round's start (initData_level's vu_all has
  // them drawn at its first NMI); the end screens draw the newest one after their waits, which
  // the engine does not model, so this stays put during a round.
  uint8_t crowns[2];
};

// The state as levelIntro_delay begins in a round: initData_level [$8216] (one reserve, two
// generateNextPill, the image copied to both players with their own victories, level and
// speed), then levelIntro's interleaved virus loop from `rng`. `frame_counter` is frameCounter
// at that moment. The bytes initData_level leaves as zero page held them (horVelocity,
// attackColors, matchFlag, chainLength_0based, scoreMultiplier) are taken from `stale`, the
// $30-byte image it starts from (nullptr: zeros). Returns false on an out-of-range argument.
bool init_versus_round(Versus& v, const int level[2], const int speed[2],
                       const uint8_t victories[2], Rng& rng, uint8_t frame_counter,
                       const State* stale);

// A new match: init_versus_round with no victories, from the RNG state `seed` the options
// screen left when Start was pressed.
bool init_versus(Versus& v, int level1, int speed1, int level2, int speed2, uint16_t seed,
                 uint8_t frame_counter);

// The next round of the same match from a RoundOver state: the RNG continues, levels and speeds
// are kept (no level increase in 2P), the victories carried. Returns false unless the phase is
// kPhaseRoundOver.
bool next_versus_round(Versus& v, uint8_t frame_counter);

// One NES frame with pad 1 = `b1` and pad 2 = `b2`:
// NMI: render_fieldRow_bothPlayers [$8307] (one row of p1, then one of p2), frameCounter += 1,
// getInputs [$B7E1] for both pads; then mainLoop_level [$9B8D]: p1's nextAction, the victories
// check, p2's nextAction, the victories check, checkVirusLeft [$B269] (round won on a cleared
// bottle), the fail flags (mode_anyPlayerLoses), checkPauseReset [$979E] on pad 1.
void versus_step(Versus& v, uint8_t b1, uint8_t b2);

// The $30-byte RAM block of player i as the engine models it, in RAM order; `known` (if not
// null) gets 1 for the offsets the engine models and 0 for those it leaves 0.
void versus_block(const Versus& v, int i, uint8_t out[0x30], uint8_t* known);

// Loads a state from the game's RAM ($0000-$07FF): both blocks, both fields, the reserve,
// frameCounter, the RNG, both pads, enablePause. `phase` is the engine phase to assume
// (the mode byte alone does not say where a wait loop is).
void versus_from_ram(Versus& v, const uint8_t ram[0x800], uint8_t phase);

}  // namespace drm
