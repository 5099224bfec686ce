// Board counts for the placement policy's teacher evaluation (policy/teacher.py, docs/POLICY.md):
// the C++ twin of policy.teacher.board_terms_numpy, which stays the reference (a test compares
// them). Works on field cell codes (RAM $0400-$047F layout, ARCHITECTURE.md). Plain C++17.
#pragma once

#include <cstdint>

#include "level_gen.h"  // kFieldSize

namespace drm {

enum BoardTerm : int {
  kTermHalves = 0,  // pill halves still needed to clear every virus (estimate)
  kTermBury,        // halves needed to dig down to each virus, shared by its vertical line
  kTermPiece,       // pill pieces on the board
  kTermHoles,       // empty cells with an occupied cell above them in their column
  kTermBump,        // sum of |height difference| of neighbouring columns
  kTermAccess,      // empty cells a half can reach from the spawn cells moving sideways/down
  kTermVSame,       // cells resting on a cell of their colour
  kTermOnVirus,     // pill pieces resting on a virus of another colour
  kTermHSame,       // same-colour horizontal neighbour pairs
  kTermDanger,      // sum of danger[cell] over occupied cells
  kNumBoardTerms,
};

struct TermParams {
  double blocker = 1.0;            // halves per half needed to clear the runs above a vertical line
  double no_room = 2.0;            // halves per missing cell of room for a line of 4
  const double* danger = nullptr;  // kFieldSize charges per occupied cell (row-major)
};

// Fills out[kNumBoardTerms] for one board of kFieldSize cell codes.
void board_terms(const uint8_t* field, const TermParams& p, double* out);

}  // namespace drm
