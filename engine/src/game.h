// One-player NES Dr. Mario, frame for frame. Reference: Nostaljipi/dr-mario-disassembly,
// prg/drmario_prg_game_logic.asm (mainLoop_level $9B9F.., nextAction $9BD3, action_pillFalling
// $8D66, toPillPlacedStep $8C83, action_sendPill) and prg/drmario_prg_game_init.asm (nmi $8005).
//
// Plain C++17: this header never includes pybind11. The whole game is one POD struct, so a clone
// is a memcpy and a batch of games is a contiguous array of them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "level_gen.h"  // kFieldSize, kMaxLevel, LevelSetup

namespace drm {

// Button bits, in the game's RAM order (getInputs $B7E1; ARCHITECTURE.md).
enum Button : uint8_t {
  kRight = 0x01,
  kLeft = 0x02,
  kDown = 0x04,
  kUp = 0x08,
  kStart = 0x10,
  kSelect = 0x20,
  kB = 0x40,
  kA = 0x80,
};

// Field cell codes (defines/drmario_constants.asm).
enum Cell : uint8_t {
  kTopHalf = 0x40,
  kBottomHalf = 0x50,
  kLeftHalf = 0x60,
  kRightHalf = 0x70,
  kSingleHalf = 0x80,
  kCleared = 0xB0,
  kVirus = 0xD0,
  kJustEmptied = 0xF0,
  kEmpty = 0xFF,
};

// currentP_nextAction values of the unmodified ROM (removeMoreUnused = 0).
enum NextAction : uint8_t {
  kActPillFalling = 0,
  kActPillPlaced = 1,
  kActCheckAttack = 2,
  kActSendPillFinished = 3,
  kActDoNothing = 4,
  kActIncNextAction = 5,
  kActSendPill = 6,
};

// Where the game's main loop is. Not a RAM byte: it stands for the game's `mode` plus the wait
// loops (waitFor_A_frames, the pause loop) that hold the main loop across NMIs.
enum Phase : uint8_t {
  kPhaseIntro = 0,       // levelIntro's levelIntro_delay wait ($80 frames), before the first throw
  kPhasePlaying = 1,     // mode_mainLoop_level: one nextAction per frame
  kPhasePaused = 2,      // checkPauseReset's pause loop
  kPhaseStageClear = 3,  // no virus left: checkVirusLeft took over (terminal for the engine)
  kPhaseTopOut = 4,      // a thrown pill could not be placed: level fail (terminal)
  kPhaseDemoEnd = 5,     // the demo's input table ran out, or Start was pressed (terminal)
  kPhaseSoftReset = 6,   // A+B+Select+Start held: back to the title (terminal)
  // Two players only (versus.h):
  kPhaseRoundLost = 7,  // mode_anyPlayerLoses: a fail flag was set; anyPlayerLoses next frame
  kPhaseRoundOver = 8,  // the round is decided, the match is not (terminal: next_round)
  kPhaseMatchOver = 9,  // a player reached config_victoriesRequired (terminal)
};

constexpr int kReserveSize = 128;
constexpr int kNumSpeeds = 3;
constexpr int kSpeedUpsMax = 0x31;
constexpr uint8_t kLevelIntroDelay = 0x80;  // levelIntro_delay (US/JP build)

// The game state. Byte fields mirror the RAM variables named in their comments (zero page
// $80-$AF is currentP_*, copied from p1_* each frame in one-player mode).
struct State {
  uint8_t field[kFieldSize];      // p1_field $0400-$047F, row 0 at the top
  uint8_t reserve[kReserveSize];  // pillsReserve $0780: colour combination index 0..8 per pill
  // The bottle's nametable tiles as the PPU holds them after the last NMI (VRAM $214C.., rows of
  // fieldRow_PPUADDR_1P): render_fieldRow $8331 copies field row `status` here once per NMI, a
  // cleared cell ($Bx) written as $Fx. Row 0 at the top, like `field`.
  uint8_t shown[kFieldSize];

  uint8_t status;             // currentP_status $80: next field row to redraw, $FF when idle
  uint8_t pill_color[2];      // currentP_fallingPill1stColor/2nd $81-$82
  uint8_t pill_x;             // currentP_fallingPillX $85: column of the 1st half's cell, 0..7
  uint8_t pill_y;             // currentP_fallingPillY $86: row counted from the bottom, 15 = top
  uint8_t pill_placed_step;   // currentP_pillPlacedStep $87
  uint8_t level_fail;         // currentP_levelFailFlag $89
  uint8_t speed_ups;          // currentP_speedUps $8A
  uint8_t speed_setting;      // currentP_speedSetting $8B: 0 LOW, 1 MED, 2 HI
  uint8_t chain_length0;      // currentP_chainLength_0based $8E
  uint8_t combo_counter;      // currentP_comboCounter $8F
  uint8_t pills_decimal;      // currentP_pillsCounter_decimal $90 (BCD)
  uint8_t pills_hundreds;     // currentP_pillsCounter_hundreds $91 (BCD)
  uint8_t speed_counter;      // currentP_speedCounter $92
  uint8_t hor_velocity;       // currentP_horVelocity $93: the DAS counter
  uint8_t match_flag;         // currentP_matchFlag $94
  uint8_t level;              // currentP_level $96
  uint8_t next_action;        // currentP_nextAction $97
  uint8_t next_color[2];      // currentP_nextPill1stColor/2nd $9A-$9B
  uint8_t speed_index;        // currentP_speedIndex $A0
  uint8_t chain_length;       // currentP_chainLength $A1
  uint8_t next_rotation;      // currentP_nextPillRotation $A2 (spins while thrown)
  uint8_t virus_left;         // currentP_virusLeft $A4 (BCD)
  uint8_t pill_rotation;      // currentP_fallingPillRotation $A5: 0..3
  uint8_t pills_counter;      // currentP_pillsCounter $A7: index of the next reserve entry
  uint8_t score_multiplier;   // currentP_scoreMultiplier $AD
  uint8_t frame_counter;      // frameCounter $43, incremented every NMI
  uint8_t btns_pressed;       // p1_btns_pressed $F5: new presses this frame
  uint8_t btns_held;          // p1_btns_held $F7
  uint8_t pill_thrown_frame;  // pillThrownFrame: index into pillThrownAnim_XPos/YPos
  uint8_t mario_throw_frame;  // marioThrowFrame: Mario's throw sprite
  uint8_t wait_frames;        // waitFrames: the countdown of waitFor_A_frames
  uint8_t enable_pause;       // enablePause
  uint8_t rng[2];             // rng0 $17, rng1 $18 (not advanced during play)
  uint8_t demo;               // flag_demo: nonzero while the attract-mode demo plays
  uint8_t demo_inputs;        // demo_inputs $70
  uint8_t demo_counter;       // counterDemoInstruction $69
  uint8_t phase;              // Phase
  uint8_t victories;          // currentP_victories $9E
  // Two players only (nbPlayers $0727 = 2; 0 or 1 is the one-player game): the disassembly's
  // `cmp #$02` / `cmp #$01` branches on nbPlayers test this byte.
  uint8_t players;
  uint8_t attack_size;       // currentP_attackSize $98: combo lines stored for the opponent
  uint8_t attack_colors[4];  // currentP_attackColors $A9-$AC (updateAttackColor [$945B])
  uint8_t lock_event;        // 1 on the frame a falling pill locked (confirmPlacement), else 0
  // The falling pill as fallingPill_spriteUpdate $872F put it in the sprite buffer during this
  // frame's main loop (before the pill moved); the next NMI uploads it to OAM. spr_pill is 1 when
  // the buffer holds the pill, 0 when action_pillFalling did not run this frame.
  uint8_t spr_pill;
  uint8_t spr_pill_x;         // currentP_fallingPillX as drawn
  uint8_t spr_pill_y;         // currentP_fallingPillY as drawn
  uint8_t spr_pill_rotation;  // currentP_fallingPillRotation as drawn
  uint8_t spr_pill_color[2];  // currentP_fallingPill1stColor/2nd as drawn
  uint16_t demo_ptr;          // offset of ptr_demoInstruction into demo_instructionSet, 0..512
  uint32_t score;             // points (the screen shows score digits with a trailing 0)
  uint32_t frame;             // frames stepped since the level state was made
};

// Fills `s` with the state at the start of levelIntro_delay for a level whose viruses and pill
// reserve were already generated. `field` holds 128 cell codes, `reserve` 128 combination
// indices 0..8, `virus_left_bcd` the BCD virus counter, `frame_counter` the value of frameCounter
// at that moment. Returns false (and leaves `s` undefined) when an argument is out of range.
bool init_level(State& s, int level, int speed, const uint8_t* field, const uint8_t* reserve,
                uint8_t virus_left_bcd, uint8_t frame_counter, uint8_t rng0, uint8_t rng1);

// The attract-mode demo (levelIntro @startDemo): level 10, MED, demo_field, demo_pills and the
// demo_instructionSet input table. `input_lead` is the number of NMIs whose demo input processing
// ran before the returned state (the demo's inputs start before levelIntro's delay does).
void init_demo(State& s, uint8_t frame_counter, int input_lead);

// Advances exactly one NMI frame: the NMI (row redraw, frameCounter, controller read with
// `buttons` as both of the game's reads) and then the main loop's work until it waits for the
// next NMI. Terminal phases only count frames.
void step(State& s, uint8_t buttons);

// The NMI's share of a frame outside play (render_fieldRow_bothPlayers $8307 / render_fieldRow
// $8331, then frameCounter += 1): field row `status` to `shown` and status - 1, unless status is
// $FF. The level flow (level_flow.h) runs it in the frames before and after play.
void nmi_render_row(State& s);

// Helpers shared with the planner and the bindings.
bool pill_move_valid(const State& s);  // pillMoveValidation $90E3
int virus_count(const State& s);       // viruses on the field (not the BCD counter)
inline int bcd_to_int(uint8_t v) { return (v >> 4) * 10 + (v & 0x0F); }

}  // namespace drm
