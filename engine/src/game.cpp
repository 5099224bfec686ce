// Game rules: prg/drmario_prg_game_logic.asm (action_pillFalling $8D66, checkDrop $8CA4,
// checkHorMatch, checkVerMatch $9479, updateField $92EB, generateNextPill $8E9D,
// confirmPlacement $8F62, action_sendPill) and nmi $8005 / getInputs $B7E1 /
// getInputs_checkMode $9144. Each routine below is written from the disassembly's behaviour,
// byte for byte, including its quirks; comments name the quirk where one matters.
#include "game.h"

#include <cstring>

#include "nes_tables.h"
#include "versus.h"

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

// virusDestroyed [$942A] with scoreIncrease [$9004], which returns at once when nbPlayers != 1:
// no score and no scoreMultiplier increment in two-player mode.
void virus_destroyed(State& s) {
  if (s.players == 2) {
    if (s.virus_left != 0) {
      s.virus_left--;
      if ((s.virus_left & 0x0F) == 0x0F) s.virus_left -= 6;
    }
    s.status = 0x0F;
    return;
  }
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

// updateAttackColor [$945B], called by checkHorMatch / checkVerMatch right after
// comboCounter++ in both modes: the match's colour is kept for combo lines 1..4.
inline void update_attack_color(State& s, uint8_t color) {
  const uint8_t c = s.combo_counter;
  if (c != 0 && c <= 4) s.attack_colors[c - 1] = color;
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
        update_attack_color(s, color);
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
        update_attack_color(s, color);
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

// action_sendPill [$9FA1], one-player part: one step of Mario's throw animation. Returns true
// when the animation has ended and the pill goes to the field this frame.
bool throw_animation(State& s) {
  if (s.speed_setting == 0 && (s.frame_counter & 0x01) == 0) return false;
  for (;;) {
    s.pill_thrown_frame++;
    const uint8_t xp = kPillThrownAnimXPos[s.pill_thrown_frame % sizeof(kPillThrownAnimXPos)];
    if (xp == 0xFF) return true;
    if ((xp & 0xF0) == 0xF0) {
      s.mario_throw_frame = xp & 0x07;
      continue;
    }
    if ((s.pill_thrown_frame & 1) == 0) s.next_rotation = (s.next_rotation - 1) & 3;
    return false;
  }
}

// action_sendPill [$9FA1]: Mario throws the next pill (every frame on MED/HI, odd frames on
// LOW). With two players (nbPlayers != 1) it jumps straight to @pillThrown_toField.
void send_pill(State& s) {
  if (s.players != 2 && !throw_animation(s)) return;
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

// action_checkAttack [$9BEE] in two-player mode: checkComboCounterForAttack [$9C03] banks this
// player's combo, then checkReleaseAttack [$9C1B] drops the opponent's stored attack into this
// player's top row (field positions from frameCounter; cells overwritten whatever they hold).
void check_attack(State& s, State& other) {
  if (s.combo_counter >= 2) s.attack_size = static_cast<uint8_t>(s.attack_size + s.combo_counter);
  s.combo_counter = 0;
  const uint8_t n = other.attack_size;
  if (n < 2) {
    s.next_action = kActIncNextAction;
    return;
  }
  // attackSize_2_pos / _3_pos = 3, _4_pos = 1; gaps 3, 1, 1 (defines/drmario_constants.asm).
  int count, gap;
  uint8_t y;
  if (n == 2) {
    count = 2, gap = 4, y = s.frame_counter & 3;
  } else if (n == 3) {
    count = 3, gap = 2, y = s.frame_counter & 3;
  } else {
    count = 4, gap = 2, y = s.frame_counter & 1;
  }
  for (int i = 0; i < count; ++i, y = static_cast<uint8_t>(y + gap))
    s.field[y] = static_cast<uint8_t>(other.attack_colors[i] | kSingleHalf);
  other.attack_size = 0;  // sizes above 4 send 4 halves; the rest is lost
  s.next_action = kActPillPlaced;
}

// nextAction [$9BD3]. `other` is the opponent in two-player mode, nullptr in one-player mode.
void next_action(State& s, State* other) {
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
    case kActCheckAttack:  // action_checkAttack [$9BEE]: attacks only when nbPlayers == 2
      if (s.players == 2 && other != nullptr) {
        check_attack(s, *other);
      } else {
        s.next_action = kActIncNextAction;
      }
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
      next_action(s, nullptr);
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

// ---------------------------------------------------------------------------------------------
// Two players (versus.h, docs/VERSUS.md).

namespace {

// emptyLowerFieldOnLose_2P [$96D0]: rows 8..15 (lowerFieldPos $40) emptied, status $0F.
void empty_lower_field(State& s) {
  std::memset(s.field + 0x40, kEmpty, kFieldSize - 0x40);
  s.status = 0x0F;
}

void match_over(Versus& v) {  // mode_playerLoses_endScreen from mainLoop_level at 3 victories
  v.p[0].phase = kPhaseMatchOver;
  v.who_won = v.p[0].victories == kVictoriesRequired ? 1 : 2;
}

// anyPlayerLoses [$9542], the frame after mainLoop_level saw a fail flag. currentP_status ($80)
// holds p2_status there (render_fieldRow_bothPlayers [$8307] leaves it so), and the routine
// stores it back to each player: a player who did not fail gets p2's row counter.
void any_player_loses(Versus& v) {
  State& a = v.p[0];
  State& b = v.p[1];
  a.enable_pause = 0;
  uint8_t zp_status = b.status;
  if (!a.level_fail) {
    a.victories++;
  } else {
    empty_lower_field(a);
    zp_status = 0x0F;
    v.who_failed = 1;
  }
  a.status = zp_status;
  if (!b.level_fail) {
    b.victories++;
  } else if (a.level_fail) {
    // renderDraw_bothPlayers [$9692]: the DRAW box (txtBox_draw) is written into both fields
    // from position $28; the engine does not model its tiles.
    zp_status = 0x0F;
    v.who_failed = 0;
  } else {
    empty_lower_field(b);
    zp_status = 0x0F;
    v.who_failed = 2;
  }
  b.status = zp_status;
  // playerLoses_endScreen [$959A]: the match is over when either player has 3 victories.
  if (a.victories == kVictoriesRequired || b.victories == kVictoriesRequired) {
    a.phase = kPhaseMatchOver;
    v.who_won = a.victories == kVictoriesRequired ? 1 : 2;
  } else {
    a.phase = kPhaseRoundOver;
  }
}

// mainLoop_level [$9B8D] with nbPlayers = 2.
void main_loop_level_2p(Versus& v) {
  State& a = v.p[0];
  State& b = v.p[1];
  next_action(a, &b);  // p1RAM_toCurrentP; nextAction; currentP_toP1
  if (a.victories == kVictoriesRequired) return match_over(v);  // p2's pass is skipped
  next_action(b, &a);
  if (b.victories == kVictoriesRequired) return match_over(v);
  // checkVirusLeft [$B269]: a cleared bottle ends the round inside the call (stage clear, the
  // Start wait, initField_bothPlayers); the victory was counted when the last virus went.
  const bool cleared = a.virus_left == 0 || b.virus_left == 0;
  if (cleared) {
    a.status = 0x0F;  // @noVirusLeft_atLeast1p: p1_status = p2_status = $0F before the waits
    b.status = 0x0F;
    v.who_won = (a.virus_left == 0 && b.virus_left == 0) ? 0 : (a.virus_left == 0 ? 1 : 2);
    a.phase = kPhaseRoundOver;
  }
  if (a.level_fail || b.level_fail) {  // mode = mode_anyPlayerLoses, both nextActions doNothing
    a.phase = kPhaseRoundLost;
    a.next_action = kActDoNothing;
    b.next_action = kActDoNothing;
    return;
  }
  if (!cleared) check_pause_reset(a);  // pad 1 only
}

}  // namespace

void versus_step(Versus& v, uint8_t b1, uint8_t b2) {
  State& a = v.p[0];
  State& b = v.p[1];
  v.frame++;
  a.frame++;
  b.frame++;
  a.lock_event = 0;
  b.lock_event = 0;
  if (a.phase >= kPhaseStageClear && a.phase != kPhaseRoundLost) return;
  // --- NMI: render_fieldRow_bothPlayers, frameCounter, getInputs (both pads alike) ---
  nmi_render_row(a);
  nmi_render_row(b);
  a.frame_counter++;
  b.frame_counter = a.frame_counter;
  a.btns_pressed = b1 & static_cast<uint8_t>(~a.btns_held);
  a.btns_held = b1;
  b.btns_pressed = b2 & static_cast<uint8_t>(~b.btns_held);
  b.btns_held = b2;
  // --- main loop ---
  a.spr_pill = 0;
  b.spr_pill = 0;
  switch (a.phase) {
    case kPhaseIntro:
      if (--a.wait_frames == 0) {
        a.phase = kPhasePlaying;
        check_pause_reset(a);
      }
      break;
    case kPhasePaused:
      if (a.btns_pressed == kStart) {
        a.phase = kPhasePlaying;
      } else if (a.btns_held == 0xF0) {
        a.phase = kPhaseSoftReset;
      }
      break;
    case kPhasePlaying:
      main_loop_level_2p(v);
      break;
    case kPhaseRoundLost:
      any_player_loses(v);
      break;
    default:
      break;
  }
  b.phase = a.phase;
}

bool init_versus_round(Versus& v, const int level[2], const int speed[2],
                       const uint8_t victories[2], Rng& rng, uint8_t frame_counter,
                       const State* stale) {
  for (int i = 0; i < 2; ++i) {
    if (level[i] < 0 || level[i] > kMaxSelectableLevel || speed[i] < 0 || speed[i] >= kNumSpeeds)
      return false;
  }
  VersusSetup setup;
  generate_versus_round(level[0], level[1], rng, setup);
  // initData_level [$8216]: the zero-page image, partly zeroed, two generateNextPill.
  State img;
  if (stale != nullptr) {
    img = *stale;
  } else {
    std::memset(&img, 0, sizeof(State));
  }
  const State keep = img;
  std::memset(&img, 0, sizeof(State));
  img.hor_velocity = keep.hor_velocity;
  img.match_flag = keep.match_flag;
  img.chain_length0 = keep.chain_length0;
  img.score_multiplier = keep.score_multiplier;
  std::memcpy(img.attack_colors, keep.attack_colors, sizeof(img.attack_colors));
  img.players = 2;
  img.enable_pause = 0xFF;
  img.next_action = kActSendPill;
  std::memcpy(img.reserve, setup.pill_reserve.data(), kReserveSize);
  generate_next_pill(img);
  generate_next_pill(img);
  img.pills_decimal = 0x01;
  img.speed_ups = 0;  // lvlsOver20 is 0 here (docs/ENGINE.md)
  img.speed_index = 0;
  img.frame_counter = frame_counter;
  img.rng[0] = rng.hi;
  img.rng[1] = rng.lo;
  img.status = 0x0F;  // levelIntro @levelIntro_finished: p1_status = p2_status = $0F
  img.wait_frames = kLevelIntroDelay;
  img.phase = kPhaseIntro;
  for (int i = 0; i < 2; ++i) {
    State& s = v.p[i];
    s = img;
    s.level = static_cast<uint8_t>(level[i]);  // restoreStatsAndOptions
    s.speed_setting = static_cast<uint8_t>(speed[i]);
    s.victories = victories[i];
    std::memcpy(s.field, setup.field[i].data(), kFieldSize);
    std::memcpy(s.shown, setup.field[i].data(), kFieldSize);
    s.virus_left = setup.virus_count_bcd[i];
    v.crowns[i] = victories[i];
  }
  v.who_won = 0;
  v.who_failed = 0;
  v.rounds++;
  v.intro_frames = static_cast<uint8_t>(setup.intro_frames > 255 ? 255 : setup.intro_frames);
  v.frame = 0;
  return true;
}

bool init_versus(Versus& v, int level1, int speed1, int level2, int speed2, uint16_t seed,
                 uint8_t frame_counter) {
  std::memset(&v, 0, sizeof(Versus));
  const int level[2] = {level1, level2};
  const int speed[2] = {speed1, speed2};
  const uint8_t victories[2] = {0, 0};
  Rng rng = Rng::from_state(seed);
  return init_versus_round(v, level, speed, victories, rng, frame_counter, nullptr);
}

bool next_versus_round(Versus& v, uint8_t frame_counter) {
  if (v.p[0].phase != kPhaseRoundOver) return false;
  const int level[2] = {v.p[0].level, v.p[1].level};
  const int speed[2] = {v.p[0].speed_setting, v.p[1].speed_setting};
  const uint8_t victories[2] = {v.p[0].victories, v.p[1].victories};
  Rng rng{v.p[0].rng[0], v.p[0].rng[1]};
  const State stale = v.p[1];  // approximation of the zero-page image (docs/VERSUS.md)
  return init_versus_round(v, level, speed, victories, rng, frame_counter, &stale);
}

namespace {

// (block offset, byte in State) pairs for the modelled bytes of a player's $30-byte block.
struct BlockByte {
  uint8_t offset;
  size_t member;
};

#define DRM_BB(off, m) \
  BlockByte { off, offsetof(State, m) }
const BlockByte kBlock[] = {
    DRM_BB(0x00, status),
    DRM_BB(0x01, pill_color[0]),
    DRM_BB(0x02, pill_color[1]),
    DRM_BB(0x05, pill_x),
    DRM_BB(0x06, pill_y),
    DRM_BB(0x07, pill_placed_step),
    DRM_BB(0x09, level_fail),
    DRM_BB(0x0A, speed_ups),
    DRM_BB(0x0B, speed_setting),
    DRM_BB(0x0E, chain_length0),
    DRM_BB(0x0F, combo_counter),
    DRM_BB(0x10, pills_decimal),
    DRM_BB(0x11, pills_hundreds),
    DRM_BB(0x12, speed_counter),
    DRM_BB(0x13, hor_velocity),
    DRM_BB(0x14, match_flag),
    DRM_BB(0x16, level),
    DRM_BB(0x17, next_action),
    DRM_BB(0x18, attack_size),
    DRM_BB(0x1A, next_color[0]),
    DRM_BB(0x1B, next_color[1]),
    DRM_BB(0x1E, victories),
    DRM_BB(0x20, speed_index),
    DRM_BB(0x21, chain_length),
    DRM_BB(0x22, next_rotation),
    DRM_BB(0x24, virus_left),
    DRM_BB(0x25, pill_rotation),
    DRM_BB(0x27, pills_counter),
    DRM_BB(0x29, attack_colors[0]),
    DRM_BB(0x2A, attack_colors[1]),
    DRM_BB(0x2B, attack_colors[2]),
    DRM_BB(0x2C, attack_colors[3]),
    DRM_BB(0x2D, score_multiplier),
};
#undef DRM_BB

}  // namespace

void versus_block(const Versus& v, int i, uint8_t out[0x30], uint8_t* known) {
  std::memset(out, 0, 0x30);
  if (known != nullptr) std::memset(known, 0, 0x30);
  const auto* base = reinterpret_cast<const uint8_t*>(&v.p[i & 1]);
  for (const BlockByte& b : kBlock) {
    out[b.offset] = base[b.member];
    if (known != nullptr) known[b.offset] = 1;
  }
}

void versus_from_ram(Versus& v, const uint8_t ram[0x800], uint8_t phase) {
  std::memset(&v, 0, sizeof(Versus));
  for (int i = 0; i < 2; ++i) {
    State& s = v.p[i];
    auto* base = reinterpret_cast<uint8_t*>(&s);
    const uint8_t* block = ram + 0x300 + 0x80 * i;
    for (const BlockByte& b : kBlock) base[b.member] = block[b.offset];
    std::memcpy(s.field, ram + 0x400 + 0x100 * i, kFieldSize);
    std::memcpy(s.shown, s.field, kFieldSize);
    std::memcpy(s.reserve, ram + 0x780, kReserveSize);
    s.players = 2;
    s.frame_counter = ram[0x43];
    s.rng[0] = ram[0x17];
    s.rng[1] = ram[0x18];
    s.btns_pressed = ram[0xF5 + i];
    s.btns_held = ram[0xF7 + i];
    s.pill_thrown_frame = ram[0x7D];
    s.wait_frames = ram[0x51];
    s.enable_pause = ram[0x54];
    s.phase = phase;
  }
  v.who_won = ram[0x55];
  v.who_failed = ram[0x61];
  v.crowns[0] = v.p[0].victories;  // as drawn during a round (versus.h)
  v.crowns[1] = v.p[1].victories;
  v.rounds = 1;
}

}  // namespace drm
