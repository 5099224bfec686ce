"""Completeness and optimality of the reachability planner against exhaustive searches over whole
engine states that share nothing with the planner's model: on fuzzed boards, every lock the
exhaustive search finds is a placement of the plan with the same fewest frames and the same
fewest presses, and the plan finds nothing else.

Two exhaustive searches: engine._core.exhaustive_locks (C++, breadth-first over whole
drm::State values with every mask of an alphabet) on many boards, and a plain-Python one over
Game.clone()/step() on two small boards.
"""

from __future__ import annotations

import numpy as np
import pytest
from planner_helpers import to_falling

import engine
from engine import _core

# A, B, Down, Left, Right: the planner's alphabet. With Up as well (Up only blocks the fast drop,
# Start pauses, Select does nothing) for a few boards, to show nothing is lost without it.
ALPHABET = np.array([m for m in range(256) if not m & 0x38], np.uint8)
WITH_UP = np.array([m for m in range(256) if not m & 0x30], np.uint8)


def fuzzed_board(rng: np.random.Generator, free_rows: int) -> engine.Game:
    """A ragged stack with holes and overhangs below `free_rows` empty rows; the pill at spawn
    or a few random frames into its fall (held buttons, DAS charge, speed counter)."""
    g = engine.Game(
        int(rng.integers(0, 21)), int(rng.integers(0, 3)), int(rng.integers(0, 1 << 16))
    )
    to_falling(g)
    field = np.full(128, 0xFF, np.uint8)
    for r in range(free_rows, 16):
        fill = rng.random(8) < rng.uniform(0.4, 0.8)
        field[r * 8 : r * 8 + 8] = np.where(fill, 0xD0 | rng.integers(0, 3, 8), 0xFF)
    for c in range(8):  # overhangs over holes make tucks and slides
        if rng.random() < 0.35:
            field[(free_rows - 1) * 8 + c] = 0xD1
            field[free_rows * 8 + c] = 0xFF
    field[3] = field[4] = 0xFF  # the spawn cells
    g.field[:] = field
    g.speed_ups[...] = int(rng.integers(32, 50))
    g.speed_counter[...] = int(rng.integers(0, 4))
    g.hor_velocity[...] = int(rng.integers(0, 16))
    g.btns_held[...] = int(rng.choice([0, 0, 1, 2, 4, 0x80, 0x41, 0x06]))
    for _ in range(int(rng.integers(0, 4))):
        g.step(int(rng.choice([0, 1, 2, 4, 0x80, 0x41, 0x05, 0x03])))
    return g


def plan_outcomes(g: engine.Game, **kw) -> dict[bytes, tuple[int, int]]:
    """Field after the lock -> (lock frame, presses) for every placement, by replaying its masks."""
    p = _core.plan(g, **kw)
    frames, fields, presses = _core.replay_locks(g, p.all_masks())
    assert np.array_equal(frames, p.lock_frames)
    return {fields[i].tobytes(): (int(frames[i]), int(presses[i])) for i in range(len(p))}


@pytest.mark.parametrize("seed", range(30))
def test_plan_matches_exhaustive_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = fuzzed_board(rng, free_rows=int(rng.integers(3, 6)))
    if int(g.next_action) != 0 or int(g.phase) != 1:
        g = fuzzed_board(rng, free_rows=3)  # the lead-in locked the pill: a fresh board
    alphabet = WITH_UP if seed % 12 == 0 else ALPHABET
    fields, frames, presses = _core.exhaustive_locks(g, alphabet)
    truth = {fields[i].tobytes(): (int(frames[i]), int(presses[i])) for i in range(len(frames))}
    assert truth  # every falling pill locks somewhere
    assert plan_outcomes(g) == truth


@pytest.mark.parametrize("seed", range(100, 106))
def test_plan_from_between_pills_matches_exhaustive_search(seed: int) -> None:
    """From the lock clean-up of the previous pill: the search also chooses what is held on the
    frame before the new pill falls (exhaustively: every mask on every frame of the wait)."""
    rng = np.random.default_rng(seed)
    g = fuzzed_board(rng, free_rows=3)
    g.speed_ups[...] = 49
    p = _core.plan(g)
    g.run(p.masks(int(p.placements[0])))
    g.run(np.zeros(int(rng.integers(0, 4)), np.uint8))
    assert int(g.next_action) != 0  # between pills
    fields, frames, presses = _core.exhaustive_locks(g, ALPHABET)
    truth = {fields[i].tobytes(): (int(frames[i]), int(presses[i])) for i in range(len(frames))}
    assert plan_outcomes(g) == truth


@pytest.mark.parametrize("seed", range(200, 212))
def test_plan_with_a_rate_profile_matches_exhaustive_search(seed: int) -> None:
    """At most one new press every N frames: the same fewest frames and presses."""
    rng = np.random.default_rng(seed)
    g = fuzzed_board(rng, free_rows=int(rng.integers(3, 5)))
    if int(g.next_action) != 0 or int(g.phase) != 1:
        g = fuzzed_board(rng, free_rows=3)
    n = int(rng.choice([2, 3, 4, 6]))
    fields, frames, presses = _core.exhaustive_locks(g, ALPHABET, min_press_interval=n)
    truth = {fields[i].tobytes(): (int(frames[i]), int(presses[i])) for i in range(len(frames))}
    assert plan_outcomes(g, min_press_interval=n) == truth


# --- a plain-Python exhaustive search (slow: two small boards) --------------------------------


def byte_offset(g: engine.Game, member: str) -> int:
    """Offset of a one-byte State member in state_bytes(), found by flipping it."""
    h = g.clone()
    a = np.frombuffer(h.state_bytes(), np.uint8)
    getattr(h, member)[...] ^= 1
    b = np.frombuffer(h.state_bytes(), np.uint8)
    (where,) = np.flatnonzero(a != b)
    return int(where)


def python_exhaustive(g: engine.Game) -> dict[bytes, int]:
    """Min lock frame for every field a lock can write, by BFS over full engine states with A, B,
    Down, Left, Right (a state seen earlier with the same frameCounter parity is not expanded
    again)."""
    fc = byte_offset(g, "frame_counter")
    n = len(g.state_bytes())

    def key(h: engine.Game) -> bytes:
        b = bytearray(h.state_bytes())
        b[fc] &= 1
        return bytes(b[: n - 4])  # without the frame count (the last member)

    masks = [int(m) for m in ALPHABET]
    best: dict[bytes, int] = {}
    seen = {key(g)}
    layer = [g]
    frame = 0
    while layer:
        frame += 1
        nxt = []
        for s in layer:
            for m in masks:
                h = s.clone()
                h.step(m)
                if int(h.lock_event):
                    best.setdefault(h.field.tobytes(), frame)
                    continue
                k = key(h)
                if k not in seen:
                    seen.add(k)
                    nxt.append(h)
        layer = nxt
    return best


@pytest.mark.parametrize("seed", [1, 5])
def test_plan_matches_python_exhaustive_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    g = fuzzed_board(rng, free_rows=3)
    g.speed_ups[...] = 49
    truth = python_exhaustive(g)
    got = {f: frame for f, (frame, _) in plan_outcomes(g).items()}
    assert got == truth
