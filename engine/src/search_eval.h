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

// The teacher's leaf weights (policy.teacher.Weights), frames per unit of each term.
struct LeafWeights {
  double virus = 0, half = 0, piece = 0, hole = 0, vsame = 0, on_virus = 0, hsame = 0, bury = 0,
         bump = 0, access = 0, access_target = 0;
  double mobility = 0, mobility_target = 0;  // the next pill's reachable-set penalty
  TermParams terms;
};

// A stage clear's and a top-out's leaf values are kLeafClear - frames and kLeafTopped + frames.
constexpr double kLeafClear = 1.0e7;
constexpr double kLeafTopped = -1.0e7;

// policy.teacher.leaf_values for one leaf (frames, higher is better): `frames` spent since the
// root, `viruses` left, `phase` (Phase) after settling. Same operations in the same order as
// the numpy formula, so the same double.
double leaf_value(const uint8_t* field, int viruses, int phase, double frames,
                  const LeafWeights& w);

// leaf_value() with the board's terms `t` (board_terms() of the field with w.terms) given:
// the same double.
double leaf_value_of_terms(const double* t, int viruses, int phase, double frames,
                           const LeafWeights& w);

// The penalty for a next pill with `reachable` placements: mobility * max(0, target - n)^2.
double mobility_penalty(int reachable, const LeafWeights& w);

}  // namespace drm
