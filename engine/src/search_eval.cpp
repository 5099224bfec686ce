// Teacher board counts (search_eval.h); mirrors policy.teacher.board_terms_numpy step by step.
#include "search_eval.h"

#include <algorithm>
#include <cstdlib>

namespace drm {
namespace {

constexpr int kRows = 16;
constexpr int kCols = 8;

}  // namespace

void board_terms(const uint8_t* field, const TermParams& p, double* out) {
  bool occ[kRows][kCols], virus[kRows][kCols], covered[kRows][kCols], ext[kRows][kCols];
  int col[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const uint8_t v = field[r * kCols + c];
      const int kind = v >> 4;
      occ[r][c] = kind >= 0x4 && kind <= 0xD && kind != 0xB;
      virus[r][c] = kind == 0xD;
      col[r][c] = occ[r][c] ? (v & 0x0F) : 9;
    }
  }
  for (int c = 0; c < kCols; ++c) {
    bool any = false;
    for (int r = 0; r < kRows; ++r) {
      any = any || occ[r][c];
      covered[r][c] = any;
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) ext[r][c] = !covered[r][c] && (r == kRows - 1 || occ[r + 1][c]);

  // Vertical runs: length ending at each cell from above (up) and from below (down).
  int up[kRows][kCols], down[kRows][kCols];
  for (int c = 0; c < kCols; ++c) {
    for (int r = 0; r < kRows; ++r) {
      const bool same = r > 0 && occ[r][c] && col[r][c] == col[r - 1][c];
      up[r][c] = occ[r][c] ? (same ? up[r - 1][c] + 1 : 1) : 0;
    }
    for (int r = kRows - 1; r >= 0; --r) {
      const bool same = r < kRows - 1 && occ[r][c] && col[r][c] == col[r + 1][c];
      down[r][c] = occ[r][c] ? (same ? down[r + 1][c] + 1 : 1) : 0;
    }
  }
  // dig[r][c]: halves to clear the runs wholly above row r (each counted at its bottom cell).
  double dig[kRows][kCols];
  for (int c = 0; c < kCols; ++c) {
    double acc = 0.0;
    for (int r = 0; r < kRows; ++r) {
      dig[r][c] = acc;
      if (occ[r][c] && down[r][c] == 1) {
        const int lv = up[r][c] + down[r][c] - 1;
        const int top = r - up[r][c] + 1;
        const int need = std::max(4 - lv, 0);
        acc += need + p.no_room * std::max(0, need - top);
      }
    }
  }
  // Horizontal runs and the droppable empty cells beside them.
  int left[kRows][kCols], right[kRows][kCols], e_fwd[kRows][kCols], e_bwd[kRows][kCols];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      const bool same = c > 0 && occ[r][c] && col[r][c] == col[r][c - 1];
      left[r][c] = occ[r][c] ? (same ? left[r][c - 1] + 1 : 1) : 0;
      e_fwd[r][c] = ext[r][c] ? (c > 0 ? e_fwd[r][c - 1] : 0) + 1 : 0;
    }
    for (int c = kCols - 1; c >= 0; --c) {
      const bool same = c < kCols - 1 && occ[r][c] && col[r][c] == col[r][c + 1];
      right[r][c] = occ[r][c] ? (same ? right[r][c + 1] + 1 : 1) : 0;
      e_bwd[r][c] = ext[r][c] ? (c < kCols - 1 ? e_bwd[r][c + 1] : 0) + 1 : 0;
    }
  }

  double halves = 0.0, bury = 0.0;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      if (!virus[r][c]) continue;
      const int lv = up[r][c] + down[r][c] - 1;
      const int top = r - up[r][c] + 1;
      const int bottom = r + down[r][c] - 1;
      const double dig_top = dig[top][c];
      const double need_v =
          (4 - lv) + p.blocker * dig_top + p.no_room * std::max(0, (4 - lv) - top);
      int nv_v = 0;
      for (int k = top; k <= bottom; ++k) nv_v += virus[k][c];
      const int lh = left[r][c] + right[r][c] - 1;
      const int lcol = c - left[r][c], rcol = c + right[r][c];
      const int room_l = lcol >= 0 ? e_fwd[r][lcol] : 0;
      const int room_r = rcol <= kCols - 1 ? e_bwd[r][rcol] : 0;
      const double need_h = (4 - lh) + p.no_room * std::max(0, (4 - lh) - room_l - room_r);
      int nv_h = 0;
      for (int k = lcol + 1; k < rcol; ++k) nv_h += virus[r][k];
      halves += std::min(need_v / std::max(nv_v, 1), need_h / std::max(nv_h, 1));
      bury += dig_top / std::max(nv_v, 1);
    }
  }

  int heights[kCols];
  for (int c = 0; c < kCols; ++c) {
    int top = kRows;
    for (int r = 0; r < kRows; ++r) {
      if (occ[r][c]) {
        top = r;
        break;
      }
    }
    heights[c] = kRows - top;
  }
  double bump = 0.0;
  for (int c = 0; c + 1 < kCols; ++c) bump += std::abs(heights[c] - heights[c + 1]);

  // Flood fill from the spawn cells (row 0, columns 3-4) through empty cells, sideways and down.
  bool reach[kRows][kCols] = {};
  int stack[kRows * kCols], n = 0;
  for (int c = 3; c <= 4; ++c) {
    if (!occ[0][c]) {
      reach[0][c] = true;
      stack[n++] = c;
    }
  }
  int access = n;
  while (n > 0) {
    const int cell = stack[--n];
    const int r = cell / kCols, c = cell % kCols;
    const int nbr[3][2] = {{r, c - 1}, {r, c + 1}, {r + 1, c}};
    for (const auto& q : nbr) {
      if (q[0] >= kRows || q[1] < 0 || q[1] >= kCols) continue;
      if (occ[q[0]][q[1]] || reach[q[0]][q[1]]) continue;
      reach[q[0]][q[1]] = true;
      stack[n++] = q[0] * kCols + q[1];
      ++access;
    }
  }

  double piece = 0, holes = 0, vsame = 0, on_virus = 0, hsame = 0, danger = 0;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kCols; ++c) {
      piece += occ[r][c] && !virus[r][c];
      holes += covered[r][c] && !occ[r][c];
      if (occ[r][c] && p.danger != nullptr) danger += p.danger[r * kCols + c];
      if (r + 1 < kRows && occ[r][c] && occ[r + 1][c]) {
        vsame += col[r][c] == col[r + 1][c];
        on_virus += !virus[r][c] && virus[r + 1][c] && col[r][c] != col[r + 1][c];
      }
      if (c + 1 < kCols && occ[r][c] && occ[r][c + 1]) hsame += col[r][c] == col[r][c + 1];
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

}  // namespace drm
