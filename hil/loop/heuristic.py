"""A stand-in placement policy for the runtime until the ONNX policy lands: one-ply greedy.

``HeuristicPolicy().choose(game, reachable) -> placement`` plays every reachable placement out
with the engine (the pill put at its lock pose and dropped, then the lock clean-up, drops and
matches of ``toPillPlacedStep`` $8C83 stepped until the next pill is thrown or the level ends)
and scores the board it leaves. The score is the project's own hand-written heuristic (viruses
killed, same-colour runs on viruses, viruses buried under other colours, holes, height, the
spawn columns kept free); it looks at neither the next pill nor deeper plies.

Placement index (docs/PLANNER.md): ``rotation * 128 + row * 8 + col``, row 0 at the top, the
pill's lower-left half at (row, col); ``fallingPillY`` = 15 - row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

import engine
from engine.constants import Phase
from engine.placement import NUM_PLACEMENTS, placement_pose

_SETTLE_FRAMES = 400  # lock clean-up + cascades + Mario's throw on LOW: well under this
_EMPTY = 0xFF
_VIRUS = 0xD0
_IDLE8 = np.zeros(8, np.uint8)


@dataclass(frozen=True)
class Weights:
    """Terms of the board cost, in rough "frames of work" (lower is better)."""

    virus: float = 40.0  # per virus left
    need: float = 50.0  # per pill half a virus still needs for its cheapest line of 4
    blocker: float = 1.5  # halves charged per other-colour cell stacked on a virus
    horizontal: float = 1.0  # extra halves charged to a horizontal line (harder to build)
    piece: float = 12.0  # per pill piece on the board (junk to clear later)
    hole: float = 35.0  # per empty cell right under a pill piece (an overhang)
    danger_rows: tuple[float, ...] = (600.0, 200.0, 60.0, 15.0)  # occupied spawn-area rows
    danger_cols: tuple[float, ...] = (0.4, 0.6, 0.85, 1.0, 1.0, 0.85, 0.6, 0.4)
    vsame: float = 12.0  # reward per vertical same-colour pair of occupied cells
    hsame: float = 3.0  # reward per horizontal same-colour pair
    vmix: float = 12.0  # per vertical pair of two colours (stacked junk is hard to clear)
    top_out: float = 1e7


def pose(index: int) -> tuple[int, int, int]:
    """Placement index 0..511 -> (pill_x, pill_y, rotation) as RAM $85, $86, $A5 hold them."""
    rotation, row, col = placement_pose(index)
    return col, 15 - row, rotation


def settle(game: engine.Game, index: int) -> engine.Game:
    """A copy of ``game`` (a pill falling) with the pill locked at ``index`` and the board
    resolved: stepped with no buttons until the next pill falls or the level ends. The pill is
    put at its pose and dropped at once (speedCounter forced over the table); the lock and
    everything after it are the engine's. Raises ValueError when no pill is falling."""
    if int(game.next_action) != 0 or Phase(int(game.phase)) != Phase.PLAYING:
        raise ValueError("settle needs a state with a falling pill (nextAction 0, playing)")
    g = game.clone()
    x, y, r = pose(index)
    g.pill_x[()] = x
    g.pill_y[()] = y
    g.pill_rotation[()] = r
    g.speed_counter[()] = 0xFE  # the next checkYMove drops, fails and locks
    g.step(0)
    # In chunks of 8 frames (C++ stepping): a few frames into the next pill's fall change
    # nothing on the board.
    for _ in range(_SETTLE_FRAMES // 8):
        if int(g.next_action) == 0 or Phase(int(g.phase)) != Phase.PLAYING:
            break
        g.run(_IDLE8)
    return g


def _run(line: npt.NDArray[np.uint8], k: int) -> tuple[int, int]:
    """(first, last) index of the same-colour run of occupied cells through ``line[k]``."""
    color = line[k] & 0x0F
    lo = k
    while lo > 0 and line[lo - 1] != _EMPTY and (line[lo - 1] & 0x0F) == color:
        lo -= 1
    hi = k
    while hi < line.size - 1 and line[hi + 1] != _EMPTY and (line[hi + 1] & 0x0F) == color:
        hi += 1
    return lo, hi


def board_cost(field: npt.ArrayLike, w: Weights) -> float:
    """The heuristic cost of a settled board (uint8[128] cell codes; lower is better)."""
    f = np.asarray(field, dtype=np.uint8).reshape(16, 8)
    filled = f != _EMPTY
    virus = (f & 0xF0) == _VIRUS
    cost = w.virus * int(virus.sum()) + w.piece * int((filled & ~virus).sum())
    pieces = filled & ~virus
    # Overhangs: an empty cell right under a pill piece (a half held up by its partner).
    # Empty cells under viruses are the level's and cost nothing.
    cost += w.hole * int((pieces[:-1] & ~filled[1:]).sum())
    color = f & 0x0F
    vpair = filled[:-1] & filled[1:]
    vsame = vpair & (color[:-1] == color[1:])
    hsame = filled[:, :-1] & filled[:, 1:] & (color[:, :-1] == color[:, 1:])
    cost -= w.vsame * int(vsame.sum()) + w.hsame * int(hsame.sum())
    cost += w.vmix * int((vpair & ~vsame).sum())
    for r, c in zip(*np.nonzero(virus), strict=True):
        column = f[:, c]
        top, bottom = _run(column, int(r))
        above = column[:top]
        blockers = int(((above != _EMPTY) & ((above & 0x0F) != (f[r, c] & 0x0F))).sum())
        need_v = max(0, 4 - (bottom - top + 1))
        if need_v > top:  # not enough rows above the run
            need_v += 4
        vertical = need_v + w.blocker * blockers
        left, right = _run(f[r], int(c))
        need_h = max(0, 4 - (right - left + 1))
        room = 0
        k = left - 1
        while k >= 0 and f[r, k] == _EMPTY:
            room += 1
            k -= 1
        k = right + 1
        while k < 8 and f[r, k] == _EMPTY:
            room += 1
            k += 1
        horizontal = need_h + w.horizontal + (4 if need_h > room else 0)
        cost += w.need * min(vertical, horizontal)
    danger = np.zeros((16, 8))
    danger[: len(w.danger_rows)] = np.outer(w.danger_rows, w.danger_cols)
    cost += float((danger * filled).sum())
    return cost


class HeuristicPolicy:
    """The runtime's stand-in policy (see the module docstring). Not the project's policy."""

    name = "heuristic"

    def __init__(self, weights: Weights | None = None) -> None:
        self.weights = weights or Weights()

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        """The best reachable placement index for ``game`` (a falling pill).

        reachable: bool[512] (engine Plan.reachable). Raises ValueError when nothing is
        reachable, the mask has the wrong size, or no pill is falling.
        """
        mask = np.asarray(reachable, dtype=bool).reshape(-1)
        if mask.shape != (NUM_PLACEMENTS,):
            raise ValueError(f"reachable must have 512 entries, got {mask.shape}")
        candidates = np.flatnonzero(mask)
        if candidates.size == 0:
            raise ValueError("no reachable placement to choose from")
        w = self.weights
        best, best_cost = int(candidates[0]), np.inf
        for idx in candidates:
            g = settle(game, int(idx))
            phase = Phase(int(g.phase))
            if phase == Phase.STAGE_CLEAR:
                return int(idx)
            cost = board_cost(g.field, w) + (w.top_out if phase == Phase.TOP_OUT else 0.0)
            if cost < best_cost:
                best, best_cost = int(idx), cost
        return best
