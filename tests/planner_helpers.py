"""Shared helpers of the planner tests: reaching a falling pill, the cells a placement writes
(docs/PLANNER.md's index mapping, written here from the table, not from the planner), and a
check that replays every placement of a plan through engine.step."""

from __future__ import annotations

import numpy as np

import engine
from engine import _core

PLAYING, FALLING = 1, 0


def to_falling(g: engine.Game, limit: int = 2000) -> bool:
    """Steps with no buttons until a pill falls; False on a terminal phase."""
    for _ in range(limit):
        if int(g.phase) == PLAYING and int(g.next_action) == FALLING:
            return True
        if int(g.phase) != PLAYING and int(g.phase) != 0:
            return False
        g.step(0)
    return False


def pill_cells(index: int, colors) -> dict[int, int]:
    """Field index -> cell code that confirmPlacement $8F62 writes for a placement index."""
    rot, row, col = index // 128, (index % 128) // 8, index % 8
    c0, c1 = int(colors[0]), int(colors[1])
    cells = {
        0: {(row, col): 0x60 | c0, (row, col + 1): 0x70 | c1},
        1: {(row, col): 0x50 | c0, (row - 1, col): 0x40 | c1},
        2: {(row, col + 1): 0x70 | c0, (row, col): 0x60 | c1},
        3: {(row - 1, col): 0x40 | c0, (row, col): 0x50 | c1},
    }[rot]
    return {r * 8 + c: v for (r, c), v in cells.items() if r >= 0}


def rising_edges(held: int, masks: np.ndarray) -> int:
    prev = np.concatenate(([held], masks[:-1])).astype(np.uint8)
    return int(np.unpackbits(masks & ~prev).sum())


def check_plan(g: engine.Game, prefix: np.ndarray | None = None, **kw) -> int:
    """Plans from g and replays every placement's masks through engine.step (a clone each):
    each must lock on exactly its lock frame, write exactly its placement's cells on the field it
    locked on, and rise exactly its presses; masks() must agree with all_masks(). Returns the
    number of placements checked."""
    p = _core.plan(g, prefix, **kw)
    placements = p.placements
    assert p.reachable.dtype == np.bool_ and p.reachable.shape == (512,)
    assert np.array_equal(np.flatnonzero(p.reachable), placements)
    if p.status == 2:
        assert len(placements) == 0
        return 0
    assert len(placements) > 0
    masks = p.all_masks()
    lock_frames = p.lock_frames
    assert [len(m) for m in masks] == lock_frames.tolist()
    frames, fields, presses = _core.replay_locks(g, masks)
    assert np.array_equal(frames, lock_frames)
    assert np.array_equal(presses, p.presses)
    assert presses[0] == rising_edges(int(g.btns_held), masks[0])
    if prefix is not None and p.status == 0:
        for m in masks:
            assert np.array_equal(m[: len(prefix)], prefix)
    # The field the pill locks on: the planned one once the pill falls (it cannot change while
    # a pill falls); between pills, the one the replay reaches one frame before the lock.
    h = g.clone()
    h.run(masks[0][:-1].copy())
    before = h.field.copy()
    colors = h.pill_colors.copy()
    for i, idx in enumerate(placements.tolist()):
        expected = before.copy()
        for pos, code in pill_cells(idx, colors).items():
            expected[pos] = code
        assert np.array_equal(fields[i], expected), idx
        if colors[0] == colors[1]:
            assert idx // 128 < 2  # identical colours: rotations 2/3 are reported as 0/1
    # masks() (one placement, its own search) agrees with all_masks() on frames and presses.
    k = len(placements) // 2
    one = p.masks(int(placements[k]))
    f1, _, pr1 = _core.replay_locks(g, [one])
    assert f1[0] == lock_frames[k] and pr1[0] == presses[k]
    return len(placements)
