// The title, the options screen and the attract demo's timer, frame for frame (menu.h).
// Authority: Nostaljipi/dr-mario-disassembly, prg/drmario_prg_game_logic.asm, retail build.
#include "menu.h"

#include "rng.h"

namespace drm {

namespace {

constexpr uint8_t kRight = 0x01, kLeft = 0x02, kDown = 0x04, kUp = 0x08;
constexpr uint8_t kStartBtn = 0x10, kSelect = 0x20, kB = 0x40;
constexpr uint8_t kModeTitle = 0, kModeOptions = 1, kModeToLevel = 2;
// Frames of the screen loads, counted in NMIs from the frame whose press began them (frame 0);
// measured on the real game (docs/MENUS.md). toTitle: NMI 1 still shows the old screen, NMI 2
// (audioUpdate_NMI_disableRendering) is blank, the copy and antiPiracy_checksum then run past
// one vblank with NMI off (a lag frame, no NMI), NMI 3 (audioUpdate_NMI_enableRendering) shows
// the title and the loop's first pass reads its buttons for Up/Down/Select only (the Start
// check sits after the loop's NMI wait). toDemo_orOptions: NMI 1 the old screen, NMI 2 blank,
// NMI 3 the options screen and the loop's first full pass.
constexpr uint32_t kTitleFirstPass = 3;
constexpr uint32_t kOptionsFirstPass = 3;
// Where Start ends the demo (checkPauseReset's @checkStartBtn_demo, run where the mode routine
// returns to the main loop): frames 4 and 6 of its load (toLevel / initData_level return, as
// frames 3 and 5 of level_flow.h after the options Start) and every frame of its play (mode 4)
// from frame 135; measured on the real game.
constexpr uint32_t kDemoPlayFrame = 135;
constexpr uint32_t kDemoLoadChecks[2] = {4, 6};

void enter(Menu& m, uint8_t stage, uint8_t mode) {
  m.stage = stage;
  m.stage_frame = 0;
  m.mode = mode;
}

// @title_mainLoop's checks of Up, Down and Select (the loop's top, after its NMI wait).
void title_cursor(Menu& m) {
  const uint8_t p = m.pressed;
  if (p == kUp && m.players != 1) {
    m.players = 1;
    m.wait_frames = 0;
  }
  // With Down pressed the accumulator no longer holds the buttons when Select is compared
  // (the retail build's missing lda): Select counts only when it is the only new press.
  if (p == kDown && m.players != 2) {
    m.players = 2;
    m.wait_frames = 0;
  }
  if (p == kSelect) {
    m.players ^= 3;
    m.wait_frames = 0;
  }
}

// updateLvlCursor [$9ADF]: a press of Left or Right moves at once, holding repeats every 7
// frames (horVelocity counts to options_change_speed, then restarts at 1).
void level_cursor(Menu& m) {
  if (m.hor_velocity == 0) {
    if ((m.pressed & (kLeft | kRight)) == 0) return;
    m.hor_velocity = kOptionsChangeSpeed - 1;
  }
  if ((m.held & (kLeft | kRight)) == 0) {
    m.hor_velocity = 0;
    return;
  }
  if (++m.hor_velocity < kOptionsChangeSpeed) return;
  m.hor_velocity = 1;
  if ((m.held & kRight) && m.level != kMenuMaxLevel) ++m.level;
  if ((m.held & kLeft) && m.level != 0) --m.level;
}

// updateSpeedCursor [$9B37]: one step per press, Right or Left alone.
void speed_cursor(Menu& m) {
  if (m.pressed == kRight && m.speed != 2) ++m.speed;
  if (m.pressed == kLeft && m.speed != 0) --m.speed;
}

// One pass of @options_mainLoop after its NMI.
void options_pass(Menu& m) {
  Rng r = Rng::from_state(m.rng);
  r.step();  // generateRandNum
  m.rng = r.state();
  if (m.pressed == kB) {  // @backToTitle
    enter(m, kMenuTitleLoad, kModeTitle);
    return;
  }
  if (m.pressed == kStartBtn) {  // @toInitGame: inc mode (toLevel)
    enter(m, kMenuStart, kModeToLevel);
    return;
  }
  if (m.section == 0) level_cursor(m);
  if (m.section == 1) speed_cursor(m);
  if (m.section == 2) {  // only player 1 changes the music, no wraparound
    if ((m.pressed & kRight) && m.music != 2) ++m.music;
    if ((m.pressed & kLeft) && m.music != 0) --m.music;
  }
  if (m.pressed == kUp && m.section != 0) --m.section;
  if (m.pressed == kDown && m.section != 2) ++m.section;
}

void init(Menu& m, int level, int speed, int music, uint16_t rng, uint8_t fc, uint8_t held) {
  m = Menu{};
  m.level = static_cast<uint8_t>(level);
  m.speed = static_cast<uint8_t>(speed);
  m.music = static_cast<uint8_t>(music);
  m.rng = rng;
  m.frame_counter = fc;
  m.held = held;
  m.players = 1;
}

}  // namespace

void menu_at_title(Menu& m, int level, int speed, int music, uint16_t rng, uint8_t frame_counter,
                   uint8_t held) {
  init(m, level, speed, music, rng, frame_counter, held);
  m.stage = kMenuTitle;
  m.screen = kMenuScreenTitle;
  m.mode = kModeTitle;
}

void menu_at_options(Menu& m, int level, int speed, int music, uint16_t rng, uint8_t frame_counter,
                     uint8_t held) {
  init(m, level, speed, music, rng, frame_counter, held);
  m.stage = kMenuOptions;
  m.screen = kMenuScreenOptions;
  m.mode = kModeOptions;
}

void menu_step(Menu& m, uint8_t buttons) {
  if (m.stage == kMenuStart) return;
  ++m.frame;
  ++m.stage_frame;
  // nmi [$8005]: frameCounter, then getInputs: pressed = the buttons not held last NMI.
  ++m.frame_counter;
  m.pressed = static_cast<uint8_t>(buttons & ~m.held);
  m.held = buttons;
  switch (m.stage) {
    case kMenuTitleLoad:
      m.demo = 0;  // toTitle clears flag_demo before its first NMI wait
      m.screen = m.stage_frame == 1 ? m.screen : kMenuScreenBlank;
      if (m.stage_frame >= kTitleFirstPass) {
        enter(m, kMenuTitle, kModeTitle);
        m.wait_frames = 0;
        m.demo = 0;
        m.screen = kMenuScreenTitle;
        title_cursor(m);
      }
      return;
    case kMenuTitle:
      m.screen = kMenuScreenTitle;
      if (m.frame_counter == 0 && ++m.wait_frames == kDemoStartDelay) {  // @toDemo
        enter(m, kMenuDemo, kModeOptions);
        m.demo = 1;
        return;
      }
      if (m.pressed == kStartBtn) {  // @incMode
        enter(m, kMenuOptionsLoad, kModeOptions);
        return;
      }
      title_cursor(m);
      return;
    case kMenuOptionsLoad:
      m.screen = m.stage_frame == 1 ? m.screen : kMenuScreenBlank;
      if (m.stage_frame >= kOptionsFirstPass) {
        enter(m, kMenuOptions, kModeOptions);
        m.section = 0;
        if (m.level > kMenuMaxLevel) m.level = kMenuMaxLevel;
        m.screen = kMenuScreenOptions;
        options_pass(m);
      }
      return;
    case kMenuOptions:
      m.screen = kMenuScreenOptions;
      options_pass(m);
      return;
    case kMenuDemo: {
      m.screen = m.stage_frame < 3 ? kMenuScreenBlank : kMenuScreenDemo;
      const bool checks = m.stage_frame >= kDemoPlayFrame || m.stage_frame == kDemoLoadChecks[0] ||
                          m.stage_frame == kDemoLoadChecks[1];
      if (checks && m.pressed == kStartBtn) {
        enter(m, kMenuTitleLoad, kModeTitle);
      } else if (m.stage_frame >= static_cast<uint32_t>(kDemoFrames)) {
        // The demo's inputs ran out: getInputs_checkMode sets mode 0 in the NMI and toTitle
        // runs (clearing flag_demo) in this same frame.
        enter(m, kMenuTitleLoad, kModeTitle);
        m.demo = 0;
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace drm
