// Game rules: prg/drmario_prg_game_logic.asm (action_pillFalling $8D66, checkDrop $8CA4,
// checkHorMatch, checkVerMatch $9479, updateField $92EB, generateNextPill $8E9D,
// confirmPlacement $8F62, action_sendPill) and nmi $8005 / getInputs $B7E1 /
// getInputs_checkMode $9144. Each routine below is written from the disassembly's behaviour,
// byte for byte, including its quirks; comments name the quirk where one matters.
#include "game.h"

#include <cstring>

#include "nes_tables.h"

namespace drm {
namespace {

// RAM $0400+Y for Y = 0..255. The game indexes the field with an 8-bit Y from a pointer to
// $0400, so reads past row 15 (or below row 0, which wrap to $F8..$FF) land in $0480-$04FF.
// initField_bothPlayers fills $0400-$05FF with $FF and nothing else writes $0480-$04FF in
// one-player mode, so those reads see an empty cell.
inline uint8_t rd(const State& s, unsigned pos) {
  pos &= 0xFF;
  return pos < kFieldSize ? s.field[pos] : static_cast<uint8_t>(kEmpty);
}

inline void wr(State& s, unsigned pos, uint8_t v) {
  pos &= 0xFF;
  if (pos < kFieldSize) s.field[pos] = v;
}

// scoreMultiplier_table ($A239) and the ROM bytes after it (bkgColor_basedOnSpeed $A244,
// virusPlacement_colorBits $A247, bigVirusHurt_YOffset $A24B): the game indexes past the table's
// 11 entries when one pill sequence kills more than 10 viruses.
// Past the end of the ROM bytes listed here the engine keeps the last one (0: 256 loops).
constexpr uint8_t kAfterScoreMultiplierTable[] = {10,  3,   0,   1,   2,   4,   0,   252, 248, 244,
                                                  242, 241, 240, 241, 242, 244, 248, 252, 0};

uint8_t score_loops(uint8_t multiplier) {
  constexpr unsigned n = sizeof(kScoreMultiplierTable);
  constexpr unsigned m = sizeof(kAfterScoreMultiplierTable);
  if (multiplier < n) return kScoreMultiplierTable[multiplier];
  if (multiplier - n < m) return kAfterScoreMultiplierTable[multiplier - n];
  return kAfterScoreMultiplierTable[m - 1];
}

uint8_t pill_index(const State& s, uint8_t counter) {
  counter &= kReserveSize - 1;  // the game masks it with pillsReserveSize-1
  if (!s.demo) return s.reserve[counter];
  // demo_pills ($CF80, 45 bytes) continues into demo_pills_UNUSED up to 128 entries.
  constexpr int n = sizeof(kDemoPills);
  return counter < n ? kDemoPills[counter] : kDemoPillsUnused[counter - n];
}

// confirmPlacement $8F62: writes the pill's halves as tiles; a half above row 0 is dropped.
void confirm_placement(State& s) {
  const uint8_t base =
      static_cast<uint8_t>(kPillFieldPosRelativeToPillY[s.pill_y & 0x0F] + s.pill_x);
  const int x = (s.pill_rotation & 3) * 4;
  for (int k = 0; k < 4; ++k) {
    const uint8_t off = kHalfPillPosOffset[x + k];
    if (off == 0x63) break;
    const uint8_t pos = static_cast<uint8_t>(off + base);
    if (pos < kFieldSize)
      s.field[pos] = static_cast<uint8_t>(kHalfPillShape[x + k] + s.pill_color[k & 1]);
  }
  s.status = s.pill_y ^ 0x0F;
  s.lock_event = 1;
}

// generateNextPill $8E9D.
void generate_next_pill(State& s) {
  s.pill_color[0] = s.next_color[0];
  s.pill_color[1] = s.next_color[1];
  s.pill_rotation = 0;
  const uint8_t idx = pill_index(s, s.pills_counter);
  s.next_color[0] = kColorCombinationLeft[idx % 9];
  s.next_color[1] = kColorCombinationRight[idx % 9];
  s.pills_counter = (s.pills_counter + 1) & (kReserveSize - 1);
  s.pill_thrown_frame = 0;
  s.next_rotation = 0;
  s.pill_x = 3;   // pillStartingX
  s.pill_y = 15;  // pillStartingY
  // The BCD pill counter; a speed-up every time its low digit wraps to 0 (every 10 pills).
  s.pills_decimal++;
  if ((s.pills_decimal & 0x0F) >= 0x0A) s.pills_decimal += 6;
  if ((s.pills_decimal & 0xF0) >= 0xA0) {
    s.pills_decimal += 0x60;
    s.pills_hundreds++;
  }
  if ((s.pills_hundreds & 0x0F) >= 0x0A) s.pills_hundreds += 6;
  if ((s.pills_hundreds & 0xF0) >= 0xA0) {
    s.pills_decimal = 0x99;
    s.pills_hundreds = 0x99;
  }
  if (s.pills_decimal == 0 || (s.pills_decimal & 0x0F) == 0) {
    if (s.speed_ups != kSpeedUpsMax) s.speed_ups++;
  }
  s.combo_counter = 0;
}

// virusDestroyed $942A (with scoreIncrease for one player).
void virus_destroyed(State& s) {
  uint32_t loops = score_loops(s.score_multiplier);
  if (loops == 0) loops = 256;  // dex from 0 wraps: the loop runs 256 times
  s.score += loops * (s.speed_setting + 1u) * 100u;
  if (s.score > 9999990u) s.score = 9999990u;
  s.score_multiplier++;
  if (s.virus_left != 0) {
    s.virus_left--;
    if ((s.virus_left & 0x0F) == 0x0F) s.virus_left -= 6;
  }
  s.status = 0x0F;
}

void clear_cell(State& s, uint8_t pos) {
  if ((s.field[pos] & 0xF0) == kVirus) {
    virus_destroyed(s);
    if (s.virus_left == 0) s.victories++;
  }
  s.field[pos] = (s.field[pos] & 0x0F) | kCleared;
}

// checkHorMatch: rows top to bottom, starting cells in columns 0..4.
void check_hor_match(State& s) {
  unsigned pos = 0;
  for (;;) {
    unsigned tmp = pos;
    int chain = 0;
    const uint8_t v = s.field[pos];
    bool next_field_pos = false;
    if (v >= kJustEmptied) {
      next_field_pos = true;
    } else {
      const uint8_t color = v & 0x0F;
      for (;;) {
        tmp = (tmp + 1) & 0xFF;
        if ((tmp & 7) == 0) break;
        if ((rd(s, tmp) & 0x0F) != color) break;
        ++chain;
      }
      if (chain >= 3) {
        s.combo_counter++;
        s.chain_length0 = static_cast<uint8_t>(chain);
        s.chain_length = static_cast<uint8_t>(s.chain_length + chain + 1);
        const unsigned last = tmp;
        for (unsigned p = pos; p != last; p = (p + 1) & 0xFF)
          clear_cell(s, static_cast<uint8_t>(p));
        s.match_flag++;
        tmp = last;
      }
      pos = tmp;
    }
    if (next_field_pos) pos++;
    // @checkReach_rightLimit
    if ((pos & 7) != 0 && (pos & 7) < 5) continue;
    if (pos == kFieldSize) break;
    if ((pos & 7) != 0) pos = (pos & 0x78) + 8;
    if (pos == kFieldSize) break;
  }
  s.pill_placed_step++;
}

// checkVerMatch $9479: columns left to right, starting cells above row 13.
void check_ver_match(State& s) {
  unsigned pos = 0;
  for (;;) {
    unsigned tmp = pos;
    int chain = 0;
    const uint8_t v = s.field[pos & 0x7F];
    if (pos < kFieldSize && v < kJustEmptied) {
      const uint8_t color = v & 0x0F;
      for (;;) {
        tmp = (tmp + 8) & 0xFF;
        if ((tmp & 0xF8) == 0) break;
        if ((rd(s, tmp) & 0x0F) != color) break;
        ++chain;
      }
      if (chain >= 3) {
        s.combo_counter++;
        s.chain_length0 = static_cast<uint8_t>(chain);
        s.chain_length = static_cast<uint8_t>(s.chain_length + chain + 1);
        const unsigned last = tmp;
        for (unsigned p = pos; p != last; p = (p + 8) & 0xFF)
          clear_cell(s, static_cast<uint8_t>(p));
        s.match_flag++;
        tmp = last;
      }
      pos = tmp;
    } else {
      pos = (pos + 8) & 0xFF;
    }
    if (pos < kFieldSize - 8 * 3) continue;  // lastRow_forMatch
    pos = (pos + 1) & 7;
    if (pos == 0) break;
  }
  s.pill_placed_step++;
}

// updateField $92EB: cleared tiles become "just emptied"; halves that lost their partner
// become singles.
void update_field(State& s) {
  for (int p = kFieldSize - 1; p >= 0; --p) {
    const uint8_t v = s.field[p];
    const uint8_t type = v & 0xF0;
    const uint8_t single = (v & 0x0F) | kSingleHalf;
    if (type == kCleared) {
      s.field[p] = v | kJustEmptied;
    } else if (type == kTopHalf) {
      const uint8_t t = rd(s, p + 8) & 0xF0;
      if (t != 0x90 && t != kBottomHalf) s.field[p] = single;
    } else if (type == kBottomHalf) {
      const uint8_t t = rd(s, p - 8) & 0xF0;
      if (t != 0x90 && t != kTopHalf) s.field[p] = single;
    } else if (type == kLeftHalf) {
      const uint8_t t = rd(s, p + 1) & 0xF0;
      if (t != 0xA0 && t != kRightHalf) s.field[p] = single;
    } else if (type == kRightHalf) {
      const uint8_t t = rd(s, p - 1) & 0xF0;
      if (t != 0xA0 && t != kLeftHalf) s.field[p] = single;
    }
  }
  s.pill_placed_step++;
  s.status = 0x0F;
  if (s.match_flag) s.pill_placed_step = 1;  // pillPlaced_nextStep1: drops, then match again
}

// checkDrop $8CA4: one pass, bottom right to top left, of unsupported pieces falling one row.
// It waits (does nothing) until the redraw of the previous change has finished.
void check_drop(State& s) {
  if (s.status != 0xFF) return;
  int drops = 0;
  unsigned off = kFieldSize - 1;
  for (;;) {
    if (rd(s, off) >= kJustEmptied) {
      wr(s, off, kEmpty);
      unsigned top = (off - 8) & 0xFF;
      const uint8_t t = rd(s, top);
      const uint8_t type = t & 0xF0;
      if (t >= 0xA0 || type == kLeftHalf) {
        // a middle/cleared/virus/empty cell, or a left half (its right half was checked)
      } else if (type == kRightHalf) {
        unsigned top_left = top;
        unsigned left = off;
        bool blocked = false;
        for (;;) {
          top_left = (top_left - 1) & 0xFF;
          left = (left - 1) & 0xFF;
          if (rd(s, left) < kJustEmptied) {
            blocked = true;
            break;
          }
          if ((rd(s, top_left) & 0xF0) == kLeftHalf) break;
        }
        if (!blocked) {
          for (;;) {
            wr(s, off, rd(s, top));
            wr(s, top, kEmpty);
            if (off == left) break;
            off = (off - 1) & 0xFF;
            top = (top - 1) & 0xFF;
            ++drops;
          }
        }
      } else {
        wr(s, off, t);
        wr(s, top, kEmpty);
        ++drops;
      }
    }
    off = (off - 1) & 0xFF;
    if (off == 0xFF) break;
  }
  s.status = 0x0F;
  if (drops == 0) {
    s.pill_placed_step++;
  } else {
    s.pill_placed_step--;
  }
}

void pill_placed(State& s) {
  switch (s.pill_placed_step) {
    case 0:  // resetCombo
      s.score_multiplier = 0;
      s.pill_placed_step++;
      break;
    case 1:
    case 2:  // incPillPlacedStep (unused steps of the unmodified ROM: one frame each)
      s.pill_placed_step++;
      break;
    case 3:
      check_drop(s);
      break;
    case 4:  // resetMatchFlag
      s.match_flag = 0;
      s.pill_placed_step++;
      break;
    case 5:
      check_hor_match(s);
      break;
    case 6:
      check_ver_match(s);
      break;
    case 7:
      update_field(s);
      break;
    default:  // 8: resetPillPlacedStep
      s.pill_placed_step = 0;
      s.next_action++;
      break;
  }
}

// fallingPill_checkYMove $8D80.
void check_y_move(State& s) {
  bool lower = false;
  if ((s.frame_counter & 0x01) && (s.btns_held & 0x0F) == kDown) {
    lower = true;  // fast drop: odd frames only, Down the only d-pad button
  } else {
    s.speed_counter++;
    s.speed_index = s.speed_ups;
    // Indices are clamped only so that a state edited through the writable views cannot read
    // outside the tables; the game itself never exceeds them (speed_ups <= 49, 31 + 49 = 80).
    unsigned index = kBaseSpeedSettingValue[s.speed_setting % kNumSpeeds] + s.speed_index;
    if (index >= sizeof(kSpeedCounterTable)) index = sizeof(kSpeedCounterTable) - 1;
    const uint8_t limit = kSpeedCounterTable[index];
    lower = limit < s.speed_counter;
  }
  if (!lower) return;
  s.pill_y--;
  s.speed_counter = 0;
  if (!pill_move_valid(s) || s.pill_y == 0xFF) {
    s.pill_y++;
    confirm_placement(s);
    s.next_action++;  // to action_pillPlaced
  }
}

// fallingPill_checkXMove $8DCF: DAS with hor_accel_speed $10 and hor_max_speed $06.
void check_x_move(State& s) {
  if ((s.btns_pressed & (kLeft | kRight)) == 0) {
    if ((s.btns_held & (kLeft | kRight)) == 0) return;
    s.hor_velocity++;
    if (static_cast<int8_t>(s.hor_velocity - 0x10) < 0) return;
    s.hor_velocity = 0x10 - 0x06;
  } else {
    s.hor_velocity = 0;
  }
  if (s.btns_held & kRight) {
    const uint8_t limit = static_cast<uint8_t>((s.pill_rotation & 1) + 6);
    if (limit != s.pill_x) {
      s.pill_x++;
      if (!pill_move_valid(s)) {
        s.pill_x--;
        s.hor_velocity = 0x0F;
      }
    }
  }
  if (s.btns_held & kLeft) {
    if (s.pill_x != 0) {
      s.pill_x--;
      if (!pill_move_valid(s)) {
        s.pill_x++;
        s.hor_velocity = 0x0F;
      }
    }
  }
}

// pillRotateValidation $8E70.
void rotate_validation(State& s, uint8_t rot_copy, uint8_t x_copy) {
  if ((s.pill_rotation & 1) == 0) {
    if (pill_move_valid(s)) {
      if (s.btns_held & kLeft) {  // the "double left": one more column when Left is held
        s.pill_x--;
        if (!pill_move_valid(s)) s.pill_x++;
      }
      return;
    }
    s.pill_x--;  // wall kick to the left
  }
  if (pill_move_valid(s)) return;
  s.pill_rotation = rot_copy;
  s.pill_x = x_copy;
}

// fallingPill_checkRotate $8E3B: A turns clockwise (rotation - 1), B counter-clockwise.
void check_rotate(State& s) {
  const uint8_t rot_copy = s.pill_rotation;
  const uint8_t x_copy = s.pill_x;
  if (s.btns_pressed & kA) {
    s.pill_rotation = (s.pill_rotation - 1) & 3;
    rotate_validation(s, rot_copy, x_copy);
  }
  if (s.btns_pressed & kB) {
    s.pill_rotation = (s.pill_rotation + 1) & 3;
    rotate_validation(s, rot_copy, x_copy);
  }
}

// action_sendPill: Mario throws the next pill (every frame on MED/HI, odd frames on LOW).
void send_pill(State& s) {
  if (s.speed_setting == 0 && (s.frame_counter & 0x01) == 0) return;
  for (;;) {
    s.pill_thrown_frame++;
    const uint8_t xp = kPillThrownAnimXPos[s.pill_thrown_frame % sizeof(kPillThrownAnimXPos)];
    if (xp == 0xFF) break;
    if ((xp & 0xF0) == 0xF0) {
      s.mario_throw_frame = xp & 0x07;
      continue;
    }
    if ((s.pill_thrown_frame & 1) == 0) s.next_rotation = (s.next_rotation - 1) & 3;
    return;
  }
  generate_next_pill(s);
  s.next_rotation = 0;
  s.pill_thrown_frame = 0;
  s.next_action = kActSendPillFinished;
  if (!pill_move_valid(s)) {
    confirm_placement(s);
    s.level_fail = 1;
  }
}

// fallingPill_spriteUpdate $872F: runs first in action_pillFalling, before any move.
void draw_falling_pill(State& s) {
  s.spr_pill = 1;
  s.spr_pill_x = s.pill_x;
  s.spr_pill_y = s.pill_y;
  s.spr_pill_rotation = s.pill_rotation;
  s.spr_pill_color[0] = s.pill_color[0];
  s.spr_pill_color[1] = s.pill_color[1];
}

// render_fieldRow $8331: one field row to the nametable, a cleared cell as "just emptied".
void render_field_row(State& s) {
  if (s.status >= kFieldSize / 8) return;  // only a state edited through the views gets here
  const int base = s.status * 8;
  for (int i = base; i < base + 8; ++i) {
    const uint8_t v = s.field[i];
    s.shown[i] = (v & 0xF0) == kCleared ? static_cast<uint8_t>((v & 0x0F) | kJustEmptied) : v;
  }
}

void next_action(State& s) {
  switch (s.next_action) {
    case kActPillFalling:
      s.chain_length = 0;
      draw_falling_pill(s);
      check_y_move(s);
      check_x_move(s);
      check_rotate(s);
      break;
    case kActPillPlaced:
      pill_placed(s);
      break;
    case kActCheckAttack:  // one player: no attacks
      s.next_action = kActIncNextAction;
      break;
    case kActSendPillFinished:
      s.next_action = kActPillFalling;
      break;
    case kActIncNextAction:
      s.next_action++;
      break;
    case kActSendPill:
      send_pill(s);
      break;
    default:  // action_doNothing
      break;
  }
}

// The demo's CPU player (getInputs_checkMode $9144, @inDemo): (buttons, duration) pairs.
void demo_inputs(State& s) {
  if (s.demo_counter != 0) {
    s.demo_counter--;
    s.btns_pressed = 0;
    s.btns_held = s.demo_inputs;
    return;
  }
  const uint8_t next = kDemoInstructionSet[s.demo_ptr++ & 511];
  s.btns_pressed = (s.demo_inputs ^ next) & next;
  s.demo_inputs = next;
  s.demo_counter = kDemoInstructionSet[s.demo_ptr++ & 511];
  if (s.demo_ptr >= 512) {
    s.phase = kPhaseDemoEnd;  // @exitDemo: back to the title screen
    return;
  }
  s.btns_held = s.demo_inputs;
}

// checkPauseReset, after the mode's work in the same main-loop pass.
void check_pause_reset(State& s) {
  if (s.demo) return;  // in the demo only Start matters, handled with the inputs
  if (s.btns_held == 0xF0) {
    s.phase = kPhaseSoftReset;
    return;
  }
  if (s.enable_pause && (s.btns_pressed & kStart)) s.phase = kPhasePaused;
}

}  // namespace

// pillMoveValidation $90E3: true when the pill's cells are inside the bottle and empty.
bool pill_move_valid(const State& s) {
  if ((s.pill_rotation & 1) == 0) {
    if (s.pill_x & 0x80) return false;
    if (((s.pill_x + 0xF9) & 0x80) == 0) return false;  // x >= 7
  }
  if (s.pill_y & 0x80) return false;
  const uint8_t base =
      static_cast<uint8_t>(kPillFieldPosRelativeToPillY[s.pill_y & 0x0F] + s.pill_x);
  const int x = (s.pill_rotation & 1) * 4;
  for (int k = 0; k < 4; ++k) {
    if (rd(s, base + kRelativeFieldPosHalfPills[x + k]) != kEmpty) return false;
  }
  return true;
}

int virus_count(const State& s) {
  int n = 0;
  for (int i = 0; i < kFieldSize; ++i) n += (s.field[i] & 0xF0) == kVirus;
  return n;
}

static void init_common(State& s, int level, int speed, uint8_t frame_counter) {
  std::memset(&s, 0, sizeof(State));
  std::memset(s.field, kEmpty, sizeof(s.field));
  s.level = static_cast<uint8_t>(level);
  s.speed_setting = static_cast<uint8_t>(speed);
  s.frame_counter = frame_counter;
  s.enable_pause = 0xFF;
  s.next_action = kActSendPill;
  // initData_level: two generateNextPill calls (the first falling pill is overwritten by the
  // first throw, so play starts with reserve[1]), then the pill counter restarts at 1.
}

static void finish_init(State& s) {
  generate_next_pill(s);
  generate_next_pill(s);
  s.pills_decimal = 0x01;
  s.speed_ups = 0;  // initData_level zeroes lvlsOver20 before copying it (see docs/ENGINE.md)
  s.speed_index = 0;
  s.status = 0x0F;
  s.wait_frames = kLevelIntroDelay;
  s.phase = kPhaseIntro;
}

bool init_level(State& s, int level, int speed, const uint8_t* field, const uint8_t* reserve,
                uint8_t virus_left_bcd, uint8_t frame_counter, uint8_t rng0, uint8_t rng1) {
  if (level < 0 || level > kMaxLevel || speed < 0 || speed >= kNumSpeeds) return false;
  for (int i = 0; i < kReserveSize; ++i)
    if (reserve[i] > 8) return false;
  init_common(s, level, speed, frame_counter);
  std::memcpy(s.field, field, kFieldSize);
  // levelIntro's addVirus sets status to each new virus's row before the NMI that follows it,
  // so every virus is on screen when levelIntro_delay starts: the nametable matches the field.
  std::memcpy(s.shown, field, kFieldSize);
  std::memcpy(s.reserve, reserve, kReserveSize);
  s.virus_left = virus_left_bcd;
  s.rng[0] = rng0;
  s.rng[1] = rng1;
  finish_init(s);
  return true;
}

void init_demo(State& s, uint8_t frame_counter, int input_lead) {
  init_common(s, 10, 1, frame_counter);
  s.demo = 1;
  s.virus_left = 0x44;  // demo_virus
  std::memcpy(s.field, kDemoField, kFieldSize);
  // The demo copies demo_field to RAM with no NMI in between: the nametable still holds the
  // empty bottle of bkgLevel_1P, redrawn row by row from here on.
  std::memset(s.shown, kEmpty, kFieldSize);
  finish_init(s);
  for (int i = 0; i < input_lead; ++i) demo_inputs(s);
}

void nmi_render_row(State& s) {
  if (s.status == 0xFF) return;
  render_field_row(s);
  s.status--;
}

void step(State& s, uint8_t buttons) {
  s.frame++;
  s.lock_event = 0;
  // --- NMI ---
  if (s.phase >= kPhaseStageClear) return;
  if (s.status != 0xFF) {  // render_fieldRow: one row per frame, bottom to top
    render_field_row(s);
    s.status--;
  }
  s.frame_counter++;
  if (s.demo) {
    // getInputs reads the real pad first; a Start press there ends the demo.
    if ((buttons & static_cast<uint8_t>(~s.btns_held)) == kStart) {
      s.phase = kPhaseDemoEnd;
      return;
    }
    demo_inputs(s);
    if (s.phase == kPhaseDemoEnd) return;
  } else {
    s.btns_pressed = buttons & static_cast<uint8_t>(~s.btns_held);
    s.btns_held = buttons;
  }
  // --- main loop --- (visualAudioUpdate_NMI cleared the sprite buffer after the NMI)
  s.spr_pill = 0;
  switch (s.phase) {
    case kPhaseIntro:
      if (--s.wait_frames == 0) {
        s.phase = kPhasePlaying;
        check_pause_reset(s);
      }
      break;
    case kPhasePaused:
      if (s.btns_pressed == kStart) {
        s.phase = kPhasePlaying;
      } else if (s.btns_held == 0xF0) {
        s.phase = kPhaseSoftReset;
      }
      break;
    case kPhasePlaying:
      next_action(s);
      // checkVirusLeft, then the level fail flag (mainLoop_level @checkVirusLeft_checkFail).
      if (s.virus_left == 0) {
        s.phase = kPhaseStageClear;
      } else if (s.level_fail) {
        s.phase = kPhaseTopOut;
      } else {
        check_pause_reset(s);
      }
      break;
    default:
      break;
  }
}

}  // namespace drm
