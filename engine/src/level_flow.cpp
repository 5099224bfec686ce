// The level flow (level_flow.h): the frames around play, from the disassembly's main loop
// (init @mainLoop [$815E]: the mode routine, checkPauseReset [$979E], visualAudioUpdate_NMI
// [$B66E], which waits for the next NMI). A mode routine that waits for NMIs inside (toLevel,
// initData_level, levelIntro, waitFor_A_frames [$9711], the Start loops) holds the main loop across
// frames; each wait is one frame here. Frame p of a stage is the NMI p frames after the stage's
// first frame, then the main-loop work up to the next wait.
#include "level_flow.h"

#include <cstring>

namespace drm {
namespace {

// txtBox_stageClear [data/drmario_data_game.asm], written from p1_field+0 by displayStageClear
// [$B351] after it fills the field with $FF. Nametable tile codes (letters _A_ = $0A ...).
constexpr uint8_t kTxtBoxStageClear[80] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x8B, 0x8C, 0x8C, 0x8C, 0x8C, 0x8C, 0x8C, 0x8D,
    0x8E, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x8F, 0x8E, 0x1C, 0x1D, 0x0A, 0x10, 0x0E, 0xFE, 0x8F,
    0x8E, 0xFE, 0x0C, 0x15, 0x0E, 0x0A, 0x1B, 0x8F, 0x8E, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x8F,
    0x8E, 0x1D, 0x1B, 0x22, 0xFE, 0xFE, 0xFE, 0x8F, 0x8E, 0xFE, 0xFE, 0x17, 0x0E, 0x21, 0x1D, 0x8F,
    0x8E, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x8F, 0xED, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEF};

// txtBox_gameOver, written from p1_field + txtBox_gameOver_fieldPos ($10) by renderGameOver
// [$96E4].
constexpr int kGameOverFieldPos = 0x10;
constexpr uint8_t kTxtBoxGameOver[56] = {
    0x8B, 0x8C, 0x8C, 0x8C, 0x8C, 0x8C, 0x8C, 0x8D, 0x8E, 0xFE, 0xFE, 0xFE, 0xFE, 0xFE,
    0xFE, 0x8F, 0x8E, 0xFE, 0x10, 0x0A, 0x16, 0x0E, 0xFE, 0x8F, 0x8E, 0xFE, 0xFE, 0xFE,
    0xFE, 0xFE, 0xFE, 0x8F, 0x8E, 0xFE, 0x18, 0x1F, 0x0E, 0x1B, 0xFE, 0x8F, 0x8E, 0xFE,
    0xFE, 0xFE, 0xFE, 0xFE, 0xFE, 0x8F, 0xED, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEF};

// cutscene_objectFlying_basedOnSpeedAndLvl [$A012]: 32 bytes per speed, indexed by the level
// about to start; only the non-zero entries (levels 6, 11, 16 at MED and HI; 21 on LOW too,
// through toNextLevel's `cmp #selectableLvCap + 1`).
constexpr uint8_t kCutsceneMed[3] = {6, 11, 16};

constexpr uint8_t kModeInitData = 3;
constexpr uint8_t kModeToLevel = 2;
constexpr uint8_t kModePlay = 4;
constexpr uint8_t kModeAnyPlayerLoses = 5;
constexpr uint8_t kModeEndScreen = 7;
constexpr uint8_t kModeIntro = 8;
constexpr uint8_t kModeOptions = 1;
constexpr uint8_t kBtnsReset = 0xF0;  // btns_reset: A+B+Select+Start

// The NMI of a frame outside play: row redraw, frameCounter, the pad (getInputs [$B7E1]).
void nmi(Flow& f, uint8_t buttons) {
  nmi_render_row(f.s);
  f.s.frame_counter++;
  f.s.btns_pressed = buttons & static_cast<uint8_t>(~f.s.btns_held);
  f.s.btns_held = buttons;
}

// checkPauseReset [$979E] where the main loop runs it before play. Returns true when it took
// over (soft reset or pause).
bool check_pause_reset(Flow& f) {
  if (f.s.btns_held == kBtnsReset) {
    f.stage = kFlowSoftReset;
    f.mode = 0;  // mode_toTitle
    return true;
  }
  if (f.enable_pause && (f.s.btns_pressed & kStart)) {
    f.resume_stage = f.stage;
    f.stage = kFlowPaused;
    return true;
  }
  return false;
}

void fill_field(Flow& f, uint8_t value) { std::memset(f.s.field, value, kFieldSize); }

// initData_level [$8216] with generatePillsReserve [$82B0]: the reserve, the first two pills, the
// counters; p1_status = 0 (currentP_status = 0, copied to p1 by currentP_toP1), mode 8.
void init_data_level(Flow& f) {
  Rng rng = Rng::from_state(f.rng);
  std::array<uint8_t, kPillReserveSize> reserve{};
  generate_pill_reserve(rng, reserve);
  f.rng = rng.state();
  uint8_t field[kFieldSize];
  std::memcpy(field, f.s.field, kFieldSize);
  uint8_t shown[kFieldSize];
  std::memcpy(shown, f.s.shown, kFieldSize);
  const uint8_t fc = f.s.frame_counter;
  const uint8_t held = f.s.btns_held;
  const uint8_t pressed = f.s.btns_pressed;
  init_level(f.s, f.level, f.speed, field, reserve.data(), 0, fc, rng.hi, rng.lo);
  std::memcpy(f.s.shown, shown, kFieldSize);
  f.s.btns_held = held;
  f.s.btns_pressed = pressed;
  f.s.score = f.score;
  f.s.status = 0;
  f.to_add = static_cast<uint8_t>(virus_target(f.level));
  f.add_virus_calls = 0;
  f.enable_pause = 0xFF;
  f.mode = kModeIntro;
}

void begin_load(Flow& f, bool chained) {
  f.stage = kFlowLoad;
  f.chained = chained ? 1 : 0;
  f.stage_frame = chained ? 1 : 0;  // the chain's frame x+1 is the options path's frame s+2
  f.start_frame = static_cast<int32_t>(f.frame);
  f.state0_frame = f.play_frame = f.pill_frame = f.end_frame = -1;
  f.levels_started++;
}

// toLevel [$817E] (options path only) and initData_level, frames 1..5 after the Start frame.
void step_load(Flow& f) {
  switch (f.stage_frame) {
    case 1:  // toLevel waits in audioUpdate_NMI_disableRendering: the options picture stays
      break;
    case 2:  // rendering off, bkgLevel_1P copied with NMI off (an empty bottle), rendering on
      f.screen = kScreenBlank;
      std::memset(f.s.shown, kEmpty, kFieldSize);
      break;
    case 3:
      f.screen = kScreenLoading;
      if (!f.chained) {  // toLevel's end: initField_bothPlayers, score 0, victories 0
        fill_field(f, kEmpty);
        f.score = 0;
        f.s.score = 0;
      }
      f.mode = kModeInitData;
      check_pause_reset(f);  // enablePause is 0 on the options path, $FF on the chain
      break;
    case 4:
      f.screen = kScreenLevel;
      init_data_level(f);
      f.late_pending = f.late_init;
      f.late_init = 0;
      break;
    default:
      if (f.late_pending) {  // the overrun: this frame's NMI went by during initData_level
        f.late_pending = 0;
        f.stage_frame--;
        break;
      }  // 5: initData_level returns into the main loop: checkPauseReset, then levelIntro
      f.stage = kFlowViruses;
      f.stage_frame = 0;
      if (check_pause_reset(f)) f.resume_stage = kFlowViruses;
      break;
  }
}

// levelIntro [$9CAB]: one addVirus per frame while viruses are left to add; the frame after the
// last one sets p1_status = $0F and enters waitFor_A_frames(levelIntro_delay): the engine's
// State 0 (init_level's state, with the pad bytes and the score the flow has).
void step_viruses(Flow& f) {
  if (f.to_add == 0) {
    f.s.status = 0x0F;
    f.s.wait_frames = kLevelIntroDelay;
    f.s.phase = kPhaseIntro;
    f.s.rng[0] = static_cast<uint8_t>(f.rng >> 8);
    f.s.rng[1] = static_cast<uint8_t>(f.rng & 0xFF);
    f.s.frame = 0;
    f.stage = kFlowPlay;
    f.stage_frame = 0;
    f.state0_frame = static_cast<int32_t>(f.frame);
    return;
  }
  Rng rng = Rng::from_state(f.rng);
  std::array<uint8_t, kFieldSize> field;
  std::memcpy(field.data(), f.s.field, kFieldSize);
  const int pos = add_virus_call(f.level, rng, field, f.to_add);
  f.rng = rng.state();
  f.add_virus_calls++;
  if (pos >= 0) {
    std::memcpy(f.s.field, field.data(), kFieldSize);
    f.s.virus_left = bcd_increment(f.s.virus_left);
    f.s.status = static_cast<uint8_t>(pos >> 3);
    f.to_add--;
  }
}

void step_play(Flow& f, uint8_t buttons) {
  State& s = f.s;
  if (f.pill_frame < 0 && s.phase == kPhasePlaying && s.next_action == kActPillFalling)
    f.pill_frame = static_cast<int32_t>(f.frame);
  const uint8_t before = s.phase;
  step(s, buttons);
  f.score = s.score;
  if (before == kPhaseIntro && s.phase != kPhaseIntro) {
    f.play_frame = static_cast<int32_t>(f.frame);
    f.mode = kModePlay;
  }
  switch (s.phase) {
    case kPhaseStageClear:  // checkVirusLeft: p1_status = $0F, waitFor_A_frames(noVirusLeft)
      s.status = 0x0F;
      f.stage = kFlowStageClear;
      f.stage_frame = 0;
      f.end_frame = static_cast<int32_t>(f.frame);
      break;
    case kPhaseTopOut:  // mainLoop_level: mode anyPlayerLoses
      f.stage = kFlowGameOver;
      f.stage_frame = 0;
      f.mode = kModeAnyPlayerLoses;
      f.end_frame = static_cast<int32_t>(f.frame);
      check_pause_reset(f);  // mainLoop_level returns: the main loop's checkPauseReset runs
      break;
    case kPhaseSoftReset:
      f.stage = kFlowSoftReset;
      f.mode = 0;
      break;
    default:
      break;
  }
}

void prep_next_level(Flow& f) {  // toNextLevel @prepNextLevel: field cleared, screen reloaded
  fill_field(f, kEmpty);
  begin_load(f, true);
}

// checkVirusLeft [$B269] after the last virus: waitFor_A_frames($40), displayStageClear,
// waitFor_A_frames($10), p1_level + 1 (up to lvCap $18), waitFor_A_frames($10), then one NMI per
// loop until Start is pressed or held (the loop reads p1_btns_pressed | p1_btns_held).
void step_stage_clear(Flow& f) {
  const uint32_t q = f.stage_frame;
  if (q == kNoVirusLeftDelay) {
    fill_field(f, kEmpty);
    std::memcpy(f.s.field, kTxtBoxStageClear, sizeof(kTxtBoxStageClear));
    f.s.status = 0x0F;
  } else if (q == kNoVirusLeftDelay + kStatusUpdateDelay) {
    if (f.level != kMaxLevel) f.level++;
    f.s.status = 0x0F;
  } else if (q == kNoVirusLeftDelay + 2 * kStatusUpdateDelay) {
    f.s.status = 0x0F;
  } else if (q > kNoVirusLeftDelay + 2 * kStatusUpdateDelay &&
             ((f.s.btns_pressed | f.s.btns_held) & kStart)) {
    if (cutscene_before(f.level, f.speed)) {
      f.stage = kFlowCutscene;
      f.stage_frame = 0;
    } else {
      prep_next_level(f);
    }
  }
}

// toNextLevel [$9E66] @prepCutscene_orEnding: rendering off, the cutscene screen, rendering on,
// then one NMI per loop until p1_btns_pressed is exactly Start.
void step_cutscene(Flow& f) {
  if (f.stage_frame == 1) {
    f.screen = kScreenBlank;
    f.s.status = 0xFF;
  } else if (f.stage_frame == 2) {
    f.screen = kScreenCutscene;
  } else if (f.stage_frame > 2 && f.s.btns_pressed == kStart) {
    prep_next_level(f);
  }
}

// mode anyPlayerLoses [$9542] (one frame), then playerLoses_endScreen [$959A]: waitFor_A_frames
// ($40), waitFor_A_frames($80), the GAME OVER box, one NMI per loop until Start is pressed.
void step_game_over(Flow& f) {
  const uint32_t q = f.stage_frame;
  if (q == 1) {
    f.enable_pause = 0;
    f.mode = kModeEndScreen;
    check_pause_reset(f);
  } else if (q == 2 + kEndScreenDelay + kEndLevelDelay) {
    fill_field(f, kEmpty);
    std::memcpy(f.s.field + kGameOverFieldPos, kTxtBoxGameOver, sizeof(kTxtBoxGameOver));
    f.s.status = 0x0F;
  } else if (q > 2 + kEndScreenDelay + kEndLevelDelay && (f.s.btns_pressed & kStart)) {
    fill_field(f, 0xFE);
    f.mode = kModeOptions;
    f.stage = kFlowOptions;
  }
}

}  // namespace

bool cutscene_before(int next_level, int speed) {
  if (next_level == kMaxSelectableLevel + 1) return true;
  if (speed == 0 || next_level > kMaxSelectableLevel) return false;
  for (uint8_t l : kCutsceneMed)
    if (l == next_level) return true;
  return false;
}

bool flow_from_options_start(Flow& f, int level, int speed, uint16_t rng_state,
                             uint8_t frame_counter, uint8_t held, bool late_init) {
  if (level < 0 || level > kMaxSelectableLevel || speed < 0 || speed >= kNumSpeeds) return false;
  std::memset(&f, 0, sizeof(Flow));
  std::memset(f.s.field, kEmpty, kFieldSize);
  std::memset(f.s.shown, kEmpty, kFieldSize);
  f.s.status = 0xFF;  // toDemo_orOptions set p1_status = $FF
  f.s.frame_counter = frame_counter;
  f.s.btns_held = held;
  f.s.btns_pressed = held;
  f.s.level = static_cast<uint8_t>(level);
  f.s.speed_setting = static_cast<uint8_t>(speed);
  f.s.phase = kPhaseIntro;
  f.level = static_cast<uint8_t>(level);
  f.speed = static_cast<uint8_t>(speed);
  f.rng = rng_state;
  f.mode = kModeToLevel;
  f.screen = kScreenOptions;
  f.enable_pause = 0;  // toDemo_orOptions disables pause
  f.late_init = late_init ? 1 : 0;
  begin_load(f, false);
  return true;
}

void flow_step(Flow& f, uint8_t buttons) {
  if (flow_terminal(f)) {
    f.frame++;
    return;
  }
  f.frame++;
  if (f.stage != kFlowPaused) f.stage_frame++;
  if (f.stage == kFlowPlay) {
    step_play(f, buttons);
    return;
  }
  nmi(f, buttons);
  switch (f.stage) {
    case kFlowLoad:
      step_load(f);
      break;
    case kFlowViruses:
      step_viruses(f);
      break;
    case kFlowStageClear:
      step_stage_clear(f);
      break;
    case kFlowCutscene:
      step_cutscene(f);
      break;
    case kFlowGameOver:
      step_game_over(f);
      break;
    case kFlowPaused:  // the pause loop: Start alone resumes, the reset combination resets
      if (f.s.btns_pressed == kStart) {
        f.stage = f.resume_stage;
      } else if (f.s.btns_held == kBtnsReset) {
        f.stage = kFlowSoftReset;
        f.mode = 0;
      }
      break;
    default:
      break;
  }
}

}  // namespace drm
