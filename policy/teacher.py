"""The teacher: an exact search over placements with the engine, and a board evaluation.

At a spawn state the teacher expands every reachable placement of the current pill
(engine._core.expand: each placement locked on the planner's lock frame, then the engine itself
resolves the clean-up, clears, cascades and the next throw), evaluates the boards at the next
spawn, keeps the best `beam` of them and expands each again with the visible next pill (2-ply).
A leaf's value is, in frames (higher is better):

    - (frames from the root spawn to the leaf's spawn)            the time spent
    - virus * viruses left                                         work still to do
    - the board terms (Weights)                                    how hard that work is

and a stage clear is worth CLEAR - frames, a top-out TOPPED + frames (a later one is less
bad). A first-ply child's value is its best leaf, less a penalty when the next pill's reachable
set is small. docs/POLICY.md gives the reasoning and the measured strength.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

import engine
from engine import _core
from policy.play import MAX_SETTLE_FRAMES, PLAYING, STAGE_CLEAR, TOP_OUT, Move

CLEAR = 1.0e7
TOPPED = -1.0e7

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Weights:
    """Leaf evaluation weights, all in frames (docs/POLICY.md)."""

    virus: float = 40.0  # per virus left
    half: float = 39.0  # per pill half still needed to clear the viruses (estimate)
    blocker: float = 1.0  # per half needed to clear the runs stacked above a vertical line
    no_room: float = 2.0  # halves charged per missing cell of room for a line of 4
    piece: float = 20.0  # per pill piece on the board (junk to clear later)
    hole: float = 15.0  # per empty cell with an occupied cell somewhere above it
    vsame: float = 0.0  # per cell resting on a cell of its colour
    on_virus: float = 0.0  # per pill piece resting on a virus of another colour
    hsame: float = 0.0  # per same-colour horizontal neighbour pair
    bury: float = 40.0  # per half needed to dig down to a virus (shared by its line)
    bump: float = 5.0  # per row of height difference between neighbouring columns
    access: float = 0.0  # per empty cell short of `access_target` reachable from the spawn
    access_target: float = 24.0  # cells: rows 0-2 of an empty bottle
    mobility: float = 10.0  # x (placements short of `mobility_target`)^2 for the next pill (2-ply)
    mobility_target: float = 20.0  # reachable placements (about 30 on an open top)
    # Occupied cells near the spawn (row 0, columns 3-4) shrink the next pills' reachable sets
    # and end the game when the spawn cells fill (action_sendPill: pillMoveValidation fails):
    # a cell at (row, col) costs danger_rows[row] * danger_cols[col] frames.
    danger_rows: tuple[float, ...] = (400.0, 140.0, 45.0, 12.0)
    danger_cols: tuple[float, ...] = (0.45, 0.6, 0.85, 1.0, 1.0, 0.85, 0.6, 0.45)

    def scaled(self, factor: float) -> Weights:
        """These weights with every term in frames multiplied by ``factor`` (the board's terms
        against the frames a line spends: below 1 a search prefers the faster line). The
        counts (blocker, no_room in halves; the targets in cells and placements) stay."""
        frames = (
            "virus", "half", "piece", "hole", "vsame", "on_virus", "hsame", "bury", "bump",
            "access", "mobility",
        )  # fmt: skip
        return replace(
            self,
            danger_rows=tuple(r * factor for r in self.danger_rows),
            **{k: getattr(self, k) * factor for k in frames},
        )

    def danger(self) -> F64:
        """float64[128]: the frames charged per occupied cell, row-major."""
        return _danger(self.danger_rows, self.danger_cols).copy()

    def packed(self) -> F64:
        """float64[15], the order engine._core.leaf_values and expected_best_leaf read: virus,
        half, piece, hole, vsame, on_virus, hsame, bury, bump, access, access_target,
        mobility, mobility_target, blocker, no_room."""
        return np.array(
            [
                self.virus, self.half, self.piece, self.hole, self.vsame, self.on_virus,
                self.hsame, self.bury, self.bump, self.access, self.access_target,
                self.mobility, self.mobility_target, self.blocker, self.no_room,
            ],
            dtype=np.float64,
        )  # fmt: skip


@functools.lru_cache(maxsize=64)
def _danger(rows_: tuple[float, ...], cols: tuple[float, ...]) -> F64:
    rows = np.zeros(16)
    rows[: len(rows_)] = rows_
    out = np.outer(rows, np.asarray(cols, dtype=np.float64)).reshape(-1)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=64)
def packed_weights(w: Weights) -> tuple[F64, F64]:
    """(Weights.packed(), Weights.danger()) of `w`, made once per distinct Weights (read-only
    arrays, for the engine's leaf evaluation in the search's inner loops)."""
    p, d = w.packed(), w.danger()
    p.flags.writeable = False
    d.flags.writeable = False
    return p, d


def _runs(occ: npt.NDArray[np.bool_], col: npt.NDArray[np.int8], axis: int):
    """Same-colour run lengths along `axis` ending at each cell from before (fwd) and from
    after (bwd); 0 on empty cells."""
    a = np.moveaxis(occ, axis, -1)
    c = np.moveaxis(col, axis, -1)
    n = a.shape[-1]
    fwd = np.zeros(a.shape, np.int16)
    bwd = np.zeros(a.shape, np.int16)
    fwd[..., 0] = a[..., 0]
    for i in range(1, n):
        same = a[..., i] & (c[..., i] == c[..., i - 1])
        fwd[..., i] = np.where(a[..., i], np.where(same, fwd[..., i - 1] + 1, 1), 0)
    bwd[..., n - 1] = a[..., n - 1]
    for i in range(n - 2, -1, -1):
        same = a[..., i] & (c[..., i] == c[..., i + 1])
        bwd[..., i] = np.where(a[..., i], np.where(same, bwd[..., i + 1] + 1, 1), 0)
    return np.moveaxis(fwd, -1, axis), np.moveaxis(bwd, -1, axis)


def _empty_runs(empty: npt.NDArray[np.bool_], axis: int):
    """Consecutive empty cells ending at each cell, from before (fwd) and from after (bwd)."""
    a = np.moveaxis(empty, axis, -1)
    n = a.shape[-1]
    fwd = np.zeros(a.shape, np.int16)
    bwd = np.zeros(a.shape, np.int16)
    fwd[..., 0] = a[..., 0]
    for i in range(1, n):
        fwd[..., i] = np.where(a[..., i], fwd[..., i - 1] + 1, 0)
    bwd[..., n - 1] = a[..., n - 1]
    for i in range(n - 2, -1, -1):
        bwd[..., i] = np.where(a[..., i], bwd[..., i + 1] + 1, 0)
    return np.moveaxis(fwd, -1, axis), np.moveaxis(bwd, -1, axis)


def board_terms_numpy(fields: npt.ArrayLike, w: Weights | None = None) -> dict[str, F64]:
    """Board estimates used by the evaluation, vectorised: fields uint8[N, 128] ->
    float64[N] each (occupied: float64[N, 128]).

    halves: pill halves still needed to clear every virus, each virus taking the cheaper of a
    vertical and a horizontal line of 4 through it (shared by the viruses already in that
    line), a cell of another colour stacked on a vertical line charged `blocker` halves, a
    virus with no room for either line `no_line`. piece: pill pieces on the board. holes:
    empty cells below an occupied cell of their column.
    """
    w = w or Weights()
    f = np.asarray(fields, dtype=np.uint8).reshape(-1, 16, 8)
    n = f.shape[0]
    kind = f >> 4
    occ = (kind >= 0x04) & (kind <= 0x0D) & (kind != 0x0B)
    virus = kind == 0x0D
    col = np.where(occ, f & 0x0F, 9).astype(np.int8)  # 9: no colour
    rows = np.arange(16, dtype=np.int16)[None, :, None]
    cols = np.arange(8, dtype=np.int16)[None, None, :]

    # Vertical lines.
    up, down = _runs(occ, col, axis=1)
    top = rows - up + 1  # run's top row (valid on occupied cells)
    bottom = rows + down - 1
    lv = up + down - 1
    topc = np.clip(top, 0, 15).astype(np.int64)
    # Digging: a run above must be cleared (4 - its length halves) before a line below can
    # grow up through it; dig[r] sums that over the runs wholly above row r.
    run_need = np.maximum(4 - lv, 0)
    run_cost = np.where(
        occ & (down == 1), run_need + w.no_room * np.maximum(0, run_need - top), 0
    ).astype(np.float64)
    dig = np.cumsum(run_cost, axis=1) - run_cost
    dig_top = np.take_along_axis(dig, topc, axis=1)
    room_v = top  # rows above the run: the line needs 4 - lv of them once dug free
    need_v = (4 - lv) + w.blocker * dig_top + w.no_room * np.maximum(0, (4 - lv) - room_v)
    vcum = np.concatenate([np.zeros((n, 1, 8), np.int16), np.cumsum(virus, 1, dtype=np.int16)], 1)
    bottom_c = np.clip(bottom + 1, 0, 16).astype(np.int64)
    nv_v = np.take_along_axis(vcum, bottom_c, 1) - np.take_along_axis(vcum, topc, 1)

    # Horizontal lines.
    left, right = _runs(occ, col, axis=2)
    lh = left + right - 1
    supported = np.ones_like(occ)
    supported[:, :-1] = occ[:, 1:]
    covered = np.logical_or.accumulate(occ, axis=1)
    # cells a half can be dropped into and rest in: empty, supported, nothing above
    e_fwd, e_bwd = _empty_runs(~covered & supported, axis=2)
    lcol = cols - left  # the cell left of the run
    rcol = cols + right  # the cell right of the run
    room_l = np.where(
        lcol >= 0, np.take_along_axis(e_fwd, np.clip(lcol, 0, 7).astype(np.int64), 2), 0
    )
    room_r = np.where(
        rcol <= 7, np.take_along_axis(e_bwd, np.clip(rcol, 0, 7).astype(np.int64), 2), 0
    )
    need_h = (4 - lh) + w.no_room * np.maximum(0, (4 - lh) - room_l - room_r)
    hcum = np.concatenate([np.zeros((n, 16, 1), np.int16), np.cumsum(virus, 2, dtype=np.int16)], 2)
    nv_h = np.take_along_axis(hcum, np.clip(rcol, 0, 8).astype(np.int64), 2) - np.take_along_axis(
        hcum, np.clip(lcol + 1, 0, 8).astype(np.int64), 2
    )

    share = np.minimum(need_v / np.maximum(nv_v, 1), need_h / np.maximum(nv_h, 1))
    halves = np.where(virus, share, 0.0).sum(axis=(1, 2))
    bury = np.where(virus, dig_top / np.maximum(nv_v, 1), 0.0).sum(axis=(1, 2))
    heights = 16 - np.argmax(np.concatenate([occ, np.ones_like(occ[:, :1])], axis=1), axis=1)
    bump = np.abs(np.diff(heights, axis=1)).sum(axis=1).astype(np.float64)
    piece = (occ & ~virus).sum(axis=(1, 2)).astype(np.float64)
    vsame = (occ[:, :-1] & occ[:, 1:] & (col[:, :-1] == col[:, 1:])).sum(axis=(1, 2))
    on_virus = (occ[:, :-1] & ~virus[:, :-1] & virus[:, 1:] & (col[:, :-1] != col[:, 1:])).sum(
        axis=(1, 2)
    )
    hsame = (occ[:, :, :-1] & occ[:, :, 1:] & (col[:, :, :-1] == col[:, :, 1:])).sum(axis=(1, 2))
    holes = (covered & ~occ).sum(axis=(1, 2)).astype(np.float64)
    # Empty cells a falling half could reach from the spawn cells (row 0, columns 3-4) moving
    # sideways and down: how much room the next pills have.
    empty = ~occ
    reach = np.zeros_like(empty)
    reach[:, 0, 3:5] = empty[:, 0, 3:5]
    for _ in range(128):
        grown = reach.copy()
        grown[:, :, 1:] |= reach[:, :, :-1]
        grown[:, :, :-1] |= reach[:, :, 1:]
        grown[:, 1:, :] |= reach[:, :-1, :]
        grown &= empty
        if np.array_equal(grown, reach):
            break
        reach = grown
    access = reach.sum(axis=(1, 2)).astype(np.float64)
    return {
        "holes": holes,
        "bury": bury,
        "bump": bump,
        "access": access,
        "vsame": vsame.astype(np.float64),
        "on_virus": on_virus.astype(np.float64),
        "hsame": hsame.astype(np.float64),
        "halves": halves,
        "piece": piece,
        "danger": occ.reshape(n, -1).astype(np.float64) @ w.danger(),
    }


TERMS = (
    "halves",
    "bury",
    "piece",
    "holes",
    "bump",
    "access",
    "vsame",
    "on_virus",
    "hsame",
    "danger",
)


def board_terms(fields: npt.ArrayLike, w: Weights | None = None) -> dict[str, F64]:
    """board_terms_numpy computed in C++ (engine._core.board_terms, search_eval.cpp): the same
    float64[N] counts per key (tests/test_policy_teacher.py compares the two)."""
    w = w or Weights()
    f = np.ascontiguousarray(fields, dtype=np.uint8).reshape(-1, 128)
    out = _core.board_terms(f, w.blocker, w.no_room, w.danger())
    return {k: out[:, i] for i, k in enumerate(TERMS)}


def leaf_values(
    fields: npt.ArrayLike,
    viruses: npt.ArrayLike,
    phases: npt.ArrayLike,
    frames: npt.ArrayLike,
    w: Weights,
) -> F64:
    """Values (frames, higher is better) of N leaves: fields uint8[N, 128], viruses int[N],
    phases uint8[N] (engine.Phase after settling), frames int[N] spent since the root.
    leaf_values_numpy's formula, computed in C++ (engine._core.leaf_values, search_eval.cpp
    leaf_value: the same operations in the same order, so the same doubles)."""
    f = np.ascontiguousarray(fields, dtype=np.uint8).reshape(-1, 128)
    p, d = packed_weights(w)
    return _core.leaf_values(f, viruses, phases, frames, p, d)


def leaf_values_numpy(
    fields: npt.ArrayLike,
    viruses: npt.ArrayLike,
    phases: npt.ArrayLike,
    frames: npt.ArrayLike,
    w: Weights,
) -> F64:
    """Values (frames, higher is better) of N leaves: fields uint8[N, 128], viruses int[N],
    phases uint8[N] (engine.Phase after settling), frames int[N] spent since the root. The
    reference formula (numpy); leaf_values is the same in C++."""
    t = np.asarray(frames, dtype=np.float64)
    ph = np.asarray(phases)
    terms = board_terms(fields, w)
    v = (
        -t
        - w.virus * np.asarray(viruses, dtype=np.float64)
        - w.half * terms["halves"]
        - w.piece * terms["piece"]
        - w.hole * terms["holes"]
        + w.vsame * terms["vsame"]
        - w.on_virus * terms["on_virus"]
        + w.hsame * terms["hsame"]
        - w.bury * terms["bury"]
        - w.bump * terms["bump"]
        - w.access * np.maximum(0.0, w.access_target - terms["access"])
        - terms["danger"]
    )
    v = np.where(ph == STAGE_CLEAR, CLEAR - t, v)
    v = np.where(ph == TOP_OUT, TOPPED + t, v)
    return v


@dataclass
class Teacher:
    """Exact 2-ply search (depth=2) or the greedy one-ply heuristic (depth=1).

    beam: first-ply children expanded with the next pill (the best by one-ply value).
    taps_only: plan with engine.plan's taps_only search (faster, may miss placements).
    """

    depth: int = 2
    beam: int = 8
    taps_only: bool = False
    weights: Weights = field(default_factory=Weights)
    name: str = "teacher"

    def __post_init__(self) -> None:
        if self.depth not in (1, 2):
            raise ValueError(f"depth must be 1 or 2, got {self.depth}")
        if self.beam < 1:
            raise ValueError(f"beam must be >= 1, got {self.beam}")

    def _expand(self, game: engine.Game) -> _core.Expansion:
        return _core.expand(game, taps_only=self.taps_only, max_settle=MAX_SETTLE_FRAMES)

    def search(self, game: engine.Game) -> tuple[_core.Expansion, F64, npt.NDArray[np.bool_]]:
        """(expansion of `game`, value per child float64[P], searched bool[P]).

        values of children outside the beam are their one-ply values minus a margin that keeps
        them below every searched child. Raises ValueError when `game` has no pill to plan.
        """
        e = self._expand(game)
        if len(e) == 0:
            raise ValueError(f"no placement to choose: plan status {e.status}")
        t1 = e.lock_frames + e.settle_frames
        v1 = leaf_values(e.fields, e.viruses, e.phases, t1, self.weights)
        searched = np.zeros(len(e), dtype=bool)
        if self.depth == 1:
            searched[:] = True
            return e, v1, searched
        values = v1.copy()
        alive = np.flatnonzero(e.phases == PLAYING)
        order = alive[np.argsort(-v1[alive], kind="stable")][: self.beam]
        for k in order:
            e2 = self._expand(e.child(int(k)))
            if len(e2) == 0:  # cannot happen at a spawn state that did not top out
                continue
            t2 = t1[k] + e2.lock_frames + e2.settle_frames
            w = self.weights
            short = max(0.0, w.mobility_target - len(e2))
            values[k] = leaf_values(e2.fields, e2.viruses, e2.phases, t2, w).max()
            values[k] -= w.mobility * short * short
            searched[k] = True
        terminal = e.phases != PLAYING
        searched |= terminal
        if (~searched).any():
            floor = values[searched].min() if searched.any() else 0.0
            values[~searched] = np.minimum(values[~searched], floor) - 1.0
        return e, values, searched

    def act(self, game: engine.Game) -> Move:
        e, values, _ = self.search(game)
        idx = int(e.placements[int(np.argmax(values))])
        # expand() locks placements without stepping masks; the one played uses the planner's.
        return Move(idx, _core.plan(game, taps_only=self.taps_only).masks(idx))
