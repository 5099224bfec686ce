// Teacher board counts (search_eval.h); mirrors policy.teacher.board_terms_numpy step by step.
// Occupancy and reachability are kept as one byte per row (bit c = column c); the run lengths
// as small integers. The sums run row-major (viruses, danger), as this file always summed them:
// the same doubles as its earlier cell-by-cell version (checked on 51,155 boards). numpy sums
// in another order, so the reference agrees to ~1e-12, not bit for bit.
#include "search_eval.h"

#include <algorithm>
#include <cstdlib>

#include "game.h"  // Phase

namespace drm {
namespace {

constexpr int kRows = 16;
constexpr int kCols = 8;

// Set bits of a row byte (no popcnt instruction is assumed of the build machine).
inline int bits8(unsigned x) {
  static constexpr uint8_t kBits[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};
  return kBits[x & 0xFu] + kBits[(x >> 4) & 0xFu];
}

// The empty cells of `empty` (one row, bit c = column c) reachable from `seed` moving sideways.
inline unsigned spread_row(unsigned seed, unsigned empty) {
  unsigned x = seed & empty;
  for (;;) {
    const unsigned y = (x | (x << 1) | (x >> 1)) & empty;
    if (y == x) return x;
    x = y;
  }
}

// Per cell code: bit 0 occupied (kinds $4x-$Dx except the clearing $Bx), bit 1 virus ($Dx).
struct CodeTable {
  uint8_t flags[256];
  constexpr CodeTable() : flags{} {
    for (int code = 0; code < 256; ++code) {
      const int kind = code >> 4;
      const bool occ = kind >= 0x4 && kind <= 0xD && kind != 0xB;
      flags[code] = static_cast<uint8_t>((occ ? 1 : 0) | (kind == 0xD ? 2 : 0));
    }
  }
};
constexpr CodeTable kCodes{};

}  // namespace

void board_terms(const uint8_t* field, const TermParams& p, double* out) {
  unsigned occ_row[kRows], virus_row[kRows];
  int8_t col[kRows][kCols];  // colour 0-15 of an occupied cell, 9 on a free one
  for (int r = 0; r < kRows; ++r) {
    unsigned o = 0, v = 0;
    for (int c = 0; c < kCols; ++c) {
      const uint8_t code = field[r * kCols + c];
      const unsigned f = kCodes.flags[code];
      o |= (f & 1u) << c;
      v |= ((f >> 1) & 1u) << c;
      col[r][c] = static_cast<int8_t>((f & 1u) ? (code & 0x0F) : 9);
    }
    occ_row[r] = o;
    virus_row[r] = v;
  }
  auto occ = [&](int r, int c) { return (occ_row[r] >> c) & 1u; };
  auto virus = [&](int r, int c) { return (virus_row[r] >> c) & 1u; };

  // covered: an occupied cell at or above in the column; ext: a free, uncovered cell resting on
  // the floor or an occupied cell (a half dropped there stays).
  unsigned covered_row[kRows], ext_row[kRows];
  unsigned acc_cov = 0;
  for (int r = 0; r < kRows; ++r) {
    acc_cov |= occ_row[r];
    covered_row[r] = acc_cov;
  }
  for (int r = 0; r < kRows; ++r)
    ext_row[r] = ~covered_row[r] & (r == kRows - 1 ? 0xFFu : occ_row[r + 1]) & 0xFFu;

  // Vertical same-colour runs, walked down each column. For a virus cell: its run's top and
  // bottom rows, the viruses in the run, and the dig cost above the run (the halves to clear
  // the runs wholly above it, each run counted once: need = max(0, 4 - length), plus no_room
  // per missing row above its top).
  int8_t run_top[kRows][kCols], run_bottom[kRows][kCols], run_viruses[kRows][kCols];
  double dig_above[kRows][kCols];
  for (int c = 0; c < kCols; ++c) {
    double acc = 0.0;
    for (int r = 0; r < kRows; ++r) {
      if (!occ(r, c)) continue;
      const int top = r;
      const int8_t colour = col[r][c];
      int nv = static_cast<int>(virus(r, c));
      while (r + 1 < kRows && occ(r + 1, c) && col[r + 1][c] == colour) {
        ++r;
        nv += static_cast<int>(virus(r, c));
      }
      const int bottom = r;
      if (nv > 0) {
        for (int k = top; k <= bottom; ++k) {
          run_top[k][c] = static_cast<int8_t>(top);
          run_bottom[k][c] = static_cast<int8_t>(bottom);
          run_viruses[k][c] = static_cast<int8_t>(nv);
          dig_above[k][c] = acc;
        }
      }
      const int need = std::max(4 - (bottom - top + 1), 0);
      acc += need + p.no_room * std::max(0, need - top);
    }
  }

  double halves = 0.0, bury = 0.0;
  for (int r = 0; r < kRows; ++r) {
    if (virus_row[r] == 0) continue;
    // Horizontal runs of this row and the droppable free cells beside them.
    int8_t left[kCols], right[kCols], e_fwd[kCols], e_bwd[kCols];
    for (int c = 0; c < kCols; ++c) {
      const bool same = c > 0 && occ(r, c) && col[r][c] == col[r][c - 1];
      left[c] = static_cast<int8_t>(occ(r, c) ? (same ? left[c - 1] + 1 : 1) : 0);
      e_fwd[c] = static_cast<int8_t>(((ext_row[r] >> c) & 1u) ? (c > 0 ? e_fwd[c - 1] : 0) + 1 : 0);
    }
    for (int c = kCols - 1; c >= 0; --c) {
      const bool same = c < kCols - 1 && occ(r, c) && col[r][c] == col[r][c + 1];
      right[c] = static_cast<int8_t>(occ(r, c) ? (same ? right[c + 1] + 1 : 1) : 0);
      e_bwd[c] = static_cast<int8_t>(
          ((ext_row[r] >> c) & 1u) ? (c < kCols - 1 ? e_bwd[c + 1] : 0) + 1 : 0);
    }
    for (int c = 0; c < kCols; ++c) {
      if (!virus(r, c)) continue;
      const int top = run_top[r][c];
      const int lv = run_bottom[r][c] - top + 1;
      const double dig_top = dig_above[r][c];
      const double need_v =
          (4 - lv) + p.blocker * dig_top + p.no_room * std::max(0, (4 - lv) - top);
      const int nv_v = run_viruses[r][c];
      const int lh = left[c] + right[c] - 1;
      const int lcol = c - left[c], rcol = c + right[c];
      const int room_l = lcol >= 0 ? e_fwd[lcol] : 0;
      const int room_r = rcol <= kCols - 1 ? e_bwd[rcol] : 0;
      const double need_h = (4 - lh) + p.no_room * std::max(0, (4 - lh) - room_l - room_r);
      const unsigned span = ((1u << rcol) - 1u) & ~((1u << (lcol + 1)) - 1u);
      const int nv_h = bits8(virus_row[r] & span);
      // x / 1 is x exactly: the division (the loop's slowest step) only where a line is shared.
      const double share_v = nv_v > 1 ? need_v / nv_v : need_v;
      const double share_h = nv_h > 1 ? need_h / nv_h : need_h;
      halves += std::min(share_v, share_h);
      bury += nv_v > 1 ? dig_top / nv_v : dig_top;
    }
  }

  // Column heights (rows from the floor to the top occupied cell) and their differences.
  int heights[kCols];
  for (int c = 0; c < kCols; ++c) {
    int top = kRows;
    for (int r = 0; r < kRows; ++r) {
      if (occ(r, c)) {
        top = r;
        break;
      }
    }
    heights[c] = kRows - top;
  }
  double bump = 0.0;
  for (int c = 0; c + 1 < kCols; ++c) bump += std::abs(heights[c] - heights[c + 1]);

  // Free cells reachable from the spawn cells (row 0, columns 3-4) moving sideways and down:
  // with no move up, one pass from the top, row by row, finds them all.
  int access = 0;
  unsigned reach = 0x18u;
  for (int r = 0; r < kRows && reach != 0; ++r) {
    reach = spread_row(reach, ~occ_row[r] & 0xFFu);
    access += bits8(reach);
  }

  int piece = 0, holes = 0, vsame = 0, on_virus = 0, hsame = 0;
  double danger = 0.0;
  for (int r = 0; r < kRows; ++r) {
    const unsigned o = occ_row[r];
    piece += bits8(o & ~virus_row[r]);
    holes += bits8(covered_row[r] & ~o);
    if (o == 0) continue;
    for (int c = 0; c < kCols; ++c) {
      if (!((o >> c) & 1u)) continue;
      if (p.danger != nullptr) {
        const double d = p.danger[r * kCols + c];
        danger += d;
      }
      if (r + 1 < kRows && occ(r + 1, c)) {
        vsame += col[r][c] == col[r + 1][c];
        on_virus += !virus(r, c) && virus(r + 1, c) && col[r][c] != col[r + 1][c];
      }
      if (c + 1 < kCols && occ(r, c + 1)) hsame += col[r][c] == col[r][c + 1];
    }
  }
  out[kTermHalves] = halves;
  out[kTermBury] = bury;
  out[kTermPiece] = piece;
  out[kTermHoles] = holes;
  out[kTermBump] = bump;
  out[kTermAccess] = access;
  out[kTermVSame] = vsame;
  out[kTermOnVirus] = on_virus;
  out[kTermHSame] = hsame;
  out[kTermDanger] = danger;
}

double leaf_value(const uint8_t* field, int viruses, int phase, double frames,
                  const LeafWeights& w) {
  if (phase == kPhaseStageClear) return kLeafClear - frames;
  if (phase == kPhaseTopOut) return kLeafTopped + frames;
  double t[kNumBoardTerms];
  board_terms(field, w.terms, t);
  return leaf_value_of_terms(t, viruses, phase, frames, w);
}

double leaf_value_of_terms(const double* t, int viruses, int phase, double frames,
                           const LeafWeights& w) {
  if (phase == kPhaseStageClear) return kLeafClear - frames;
  if (phase == kPhaseTopOut) return kLeafTopped + frames;
  // policy.teacher.leaf_values, term by term, left to right.
  double v = -frames;
  v = v - w.virus * static_cast<double>(viruses);
  v = v - w.half * t[kTermHalves];
  v = v - w.piece * t[kTermPiece];
  v = v - w.hole * t[kTermHoles];
  v = v + w.vsame * t[kTermVSame];
  v = v - w.on_virus * t[kTermOnVirus];
  v = v + w.hsame * t[kTermHSame];
  v = v - w.bury * t[kTermBury];
  v = v - w.bump * t[kTermBump];
  v = v - w.access * std::max(0.0, w.access_target - t[kTermAccess]);
  v = v - t[kTermDanger];
  return v;
}

double mobility_penalty(int reachable, const LeafWeights& w) {
  const double shortfall = std::max(0.0, w.mobility_target - reachable);
  return w.mobility * shortfall * shortfall;
}

}  // namespace drm
