// The game's level flow around play, frame for frame: Start on the options screen -> toLevel
// [$817E] (mode 2) -> initData_level [$8216] (mode 3) -> levelIntro [$9CAB] (mode 8: one addVirus
// [$9D19] call per frame, then levelIntro_delay) -> mainLoop_level [$9B8D] (mode 4, the engine's
// State and step) -> checkVirusLeft [$B269] (stage clear, Start) -> toNextLevel [$9E66] -> mode 3
// again, or anyPlayerLoses [$9542] / playerLoses_endScreen [$959A] (game over, Start -> options).
// prg/drmario_prg_level_init.asm, prg/drmario_prg_game_logic.asm, prg/drmario_prg_level_end.asm,
// prg/drmario_prg_game_init.asm (the main loop: mode routine, checkPauseReset, one NMI wait).
//
// Plain C++17, no pybind11. A Flow is a POD like State: it holds the engine's State and, around
// play, runs the frames the game spends in its other modes (see docs/LEVEL_FLOW.md).
#pragma once

#include <cstdint>

#include "game.h"
#include "level_gen.h"

namespace drm {

enum FlowStage : uint8_t {
  kFlowLoad = 0,        // toLevel + initData_level: level screen loaded, pill reserve made
  kFlowViruses = 1,     // levelIntro's loop: one addVirus call per frame
  kFlowPlay = 2,        // the engine's State: levelIntro_delay, mainLoop_level, pause
  kFlowStageClear = 3,  // checkVirusLeft: waits, the STAGE CLEAR box, waits for Start
  kFlowCutscene = 4,    // toNextLevel's cutscene (or the ending), waits for a Start press
  kFlowGameOver = 5,    // anyPlayerLoses, playerLoses_endScreen: GAME OVER box, waits for Start
  kFlowOptions = 6,     // back to the options screen after a game over (terminal)
  kFlowSoftReset = 7,   // A+B+Select+Start held where checkPauseReset ran (terminal)
  kFlowPaused = 8,      // checkPauseReset's pause loop before play; resumes where it left
};

// What the picture shows (the bottle's cells come from State::shown on the level screen).
enum FlowScreen : uint8_t {
  kScreenOptions = 0,   // the options screen (the frames before toLevel disables rendering)
  kScreenBlank = 1,     // rendering off while a screen loads (backdrop colour only)
  kScreenLevel = 2,     // the level screen
  kScreenCutscene = 3,  // a cutscene or the ending (not drawn by the engine)
  // The first frame with rendering back on after a screen load: the level screen, but the PPU
  // scroll not yet reset (the picture sits about 46 lines low, no sprites, no counters).
  kScreenLoading = 4,
};

// Frame counts of the flow, from the disassembly (docs/LEVEL_FLOW.md derives each).
inline constexpr int kFirstVirusFrame = 6;       // options Start frame s -> first addVirus at s+6
inline constexpr int kNoVirusLeftDelay = 0x40;   // noVirusLeft_delay
inline constexpr int kStatusUpdateDelay = 0x10;  // statusUpdate_delay
inline constexpr int kEndScreenDelay = 0x40;     // endScreen_delay
inline constexpr int kEndLevelDelay = 0x80;      // endLevel_delay

struct Flow {
  State s;               // the game as modelled (field, shown, counters); the engine's in play
  uint32_t frame;        // frames stepped since the Start frame that began the flow (frame 0)
  uint32_t stage_frame;  // frames since the stage began (the stage's script position)
  int32_t start_frame;   // frame whose NMI read the Start that began the current level
  int32_t state0_frame;  // frame after which the current level's engine State 0 holds
  int32_t play_frame;    // frame whose main loop set mode 4 (mainLoop_level); -1 until then
  int32_t pill_frame;    // first frame whose buttons the falling pill reacts to; -1 until then
  int32_t end_frame;     // frame the level ended (stage clear or top-out); -1 until then
  uint32_t score;        // carried from level to level (toLevel zeroes it, toNextLevel keeps it)
  uint16_t rng;          // $17 << 8 | $18
  uint16_t add_virus_calls;  // levelIntro's addVirus calls so far in this level
  uint8_t stage;             // FlowStage
  uint8_t resume_stage;      // the stage a pause returns to
  uint8_t screen;            // FlowScreen
  uint8_t mode;              // the game's mode byte $46 as it is after the frame
  uint8_t level;             // p1_level $0316 (incremented during the stage clear)
  uint8_t speed;             // p1_speedSetting $030B
  uint8_t to_add;            // p1_virusToAdd
  uint8_t enable_pause;      // enablePause
  uint8_t chained;           // the current level was entered from a stage clear
  uint8_t levels_started;    // levels begun by this flow (1 after the options Start)
  // initData_level's frame overran the next NMI, so its closing NMI wait took one frame more
  // and every later frame of the level comes one frame later (the first virus on the 7th frame
  // after Start instead of the 6th). Whether it overruns depends on CPU cycles the engine does
  // not model (the sound driver's work in that frame: on the real game it follows the music's
  // note events, not the board), so it is an input: set it before the load reaches initData
  // (the tracker measures it from the picture). Applies to the next initData_level only.
  uint8_t late_init;
  uint8_t late_pending;  // the overrun frame is still to come
};

// The flow right after the Start frame on the options screen: `level` 0..20, `speed` 0..2,
// `rng_state` the RNG after that frame ($17 << 8 | $18; the options loop steps it before it reads
// Start, and toLevel steps none), `frame_counter` frameCounter after that frame's NMI, `held`
// the buttons read in it. Returns false for an argument out of range.
bool flow_from_options_start(Flow& f, int level, int speed, uint16_t rng_state,
                             uint8_t frame_counter, uint8_t held, bool late_init = false);

// One NMI frame with `buttons` read by both of the game's reads (as drm::step).
void flow_step(Flow& f, uint8_t buttons);

// True for kFlowOptions and kFlowSoftReset (nothing more happens without the menus).
inline bool flow_terminal(const Flow& f) {
  return f.stage == kFlowOptions || f.stage == kFlowSoftReset;
}

// Whether toNextLevel plays a cutscene (or the ending) before `next_level` at `speed`:
// cutscene_objectFlying_basedOnSpeedAndLvl [$A012] is non-zero, or next_level is 21.
bool cutscene_before(int next_level, int speed);

}  // namespace drm
