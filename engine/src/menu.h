// The game's screens before play, frame for frame: the title (toTitle [$982A] @title_mainLoop),
// the options screen (toDemo_orOptions [$9961] @options_mainLoop with updateLvlCursor [$9ADF],
// updateSpeedCursor [$9B37]) and the attract demo's timer and exit, up to the frame whose NMI
// read Start on the options screen (where engine Flow, level_flow.h, takes over).
// prg/drmario_prg_game_logic.asm; loading frame counts measured on the real game
// (docs/MENUS.md). Plain C++17, no pybind11. A Menu is a POD.
#pragma once

#include <cstdint>

namespace drm {

enum MenuStage : uint8_t {
  kMenuTitleLoad = 0,    // toTitle loading the title screen (rendering off, one lag frame)
  kMenuTitle = 1,        // @title_mainLoop
  kMenuOptionsLoad = 2,  // toDemo_orOptions loading the options screen
  kMenuOptions = 3,      // @options_mainLoop
  kMenuDemo = 4,         // the attract demo (its play is not modelled: it runs kDemoFrames)
  kMenuStart = 5,        // Start read on the options screen: terminal, a Flow begins here
};

// What the picture of a Menu frame shows.
enum MenuScreen : uint8_t {
  kMenuScreenTitle = 0,
  kMenuScreenOptions = 1,
  kMenuScreenBlank = 2,  // rendering off while a screen loads (backdrop colour only)
  kMenuScreenDemo = 3,   // the demo's level screen (level 10 MED)
};

inline constexpr int kMenuMaxLevel = 20;       // selectableLvCap $14
inline constexpr int kOptionsChangeSpeed = 8;  // options_change_speed: level auto-repeat
inline constexpr int kDemoStartDelay = 8;      // demoStart_delay: frameCounter wraps on the title
inline constexpr int kDemoFrames = 5708;       // measured: demo Start frame to back on the title
inline constexpr uint8_t kTitleCursorY[3] = {0x00, 0xA7, 0xB7};  // titleCursorYPos
inline constexpr uint8_t kTitleCursorX = 0x45;                   // spr_cursor_heart_x
inline constexpr uint8_t kLevelCursorX0 = 0x57;                  // lvlCursor_XPos: $57 + 4 * level
inline constexpr uint8_t kLevelCursorY = 0x53;                   // lvlCursor_YPos (player 1)
inline constexpr uint8_t kSpeedCursorX[3] = {0x58, 0x80, 0xA4};  // speedCursor_XPos
inline constexpr uint8_t kSpeedCursorY = 0x87;                   // speedCursor_YPos (player 1)
inline constexpr uint8_t kMusicBoxX[3] = {0x38, 0x70, 0xA7};     // musicTypeBox_XPos
inline constexpr uint8_t kMusicBoxY = 0xB7;                      // spr_musicTypeBox_y

struct Menu {
  uint32_t frame;         // NMI frames stepped since the Menu was made
  uint32_t stage_frame;   // frames since the stage began
  uint16_t rng;           // $17 << 8 | $18 (the options loop steps it once a frame)
  uint8_t stage;          // MenuStage
  uint8_t screen;         // MenuScreen of this frame's picture
  uint8_t mode;           // the game's mode byte $46 after the frame
  uint8_t level;          // p1_level $0316
  uint8_t speed;          // p1_speedSetting $030B
  uint8_t music;          // musicType $0731
  uint8_t section;        // optionSectionHighlight $65: 0 level, 1 speed, 2 music
  uint8_t hor_velocity;   // p1_horVelocity $0313 (the level cursor's auto-repeat counter)
  uint8_t players;        // nbPlayers $0727 (the title's cursor)
  uint8_t wait_frames;    // waitFrames $51 (title: frameCounter wraps toward the demo)
  uint8_t frame_counter;  // frameCounter $43 after the frame's NMI
  uint8_t held;           // p1_btns_held $F7 read in the frame
  uint8_t pressed;        // p1_btns_pressed $F5 (held and not held in the previous NMI)
  uint8_t demo;           // flag_demo set ($FE): the attract demo is running
};

// The game on its title screen, first frame of @title_mainLoop to come (`frame_counter` the
// value after the previous NMI, `held` the buttons read there).
void menu_at_title(Menu& m, int level, int speed, int music, uint16_t rng, uint8_t frame_counter,
                   uint8_t held = 0);
// The game on the options screen, its loop running (as after a game over's Start has loaded
// it); section 0 (level).
void menu_at_options(Menu& m, int level, int speed, int music, uint16_t rng, uint8_t frame_counter,
                     uint8_t held = 0);
// One NMI frame with `buttons` read by the game's controller read (getInputs [$B7E1]).
void menu_step(Menu& m, uint8_t buttons);

}  // namespace drm
