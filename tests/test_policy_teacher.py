"""policy.teacher: the exact search picks the clearing move on a constructed board; the engine
play-outs it relies on (engine._core.expand / settle) agree with stepping the game."""

from __future__ import annotations

import numpy as np

import engine
from engine import _core
from policy.play import at_spawn, to_spawn
from policy.teacher import Teacher


def constructed(level: int = 0) -> engine.Game:
    """Level-0 HI game at its first spawn with the board replaced: red viruses at row 15,
    columns 0-2, a blue virus at column 7, and a red-red pill to play."""
    g = engine.Game(level, engine.Speed.HI, 0x2468)
    to_spawn(g)
    g.field[:] = 0xFF
    for c in (0, 1, 2):
        g.field[15 * 8 + c] = 0xD1
    g.field[15 * 8 + 7] = 0xD2
    g.virus_left_bcd[...] = 0x04
    g.pill_colors[:] = 1  # red, red
    g.next_colors[:] = (0, 2)
    return g


def test_teacher_picks_the_clearing_move() -> None:
    g = constructed()
    for depth in (1, 2):
        decision = Teacher(depth=depth, taps_only=True).act(g)
        h = g.clone()
        h.run(decision.masks)
        to_spawn(h)
        assert h.virus_count == 1, f"depth {depth} chose {decision.placement}"


def test_expand_matches_stepping_the_game() -> None:
    g = engine.Game(12, engine.Speed.MED, 0x1357)
    to_spawn(g)
    e = _core.expand(g, taps_only=True)
    assert len(e) == len(e.plan) > 0
    for k in range(0, len(e), 5):
        idx = int(e.placements[k])
        h = g.clone()
        h.run(e.plan.masks(idx))
        assert int(h.lock_event) == 1
        frames = to_spawn(h)
        assert frames == e.settle_frames[k]
        assert np.array_equal(h.field, e.fields[k])
        assert h.virus_count == e.viruses[k] and int(h.phase) == e.phases[k]
        assert h == e.child(k) and (at_spawn(h) or int(h.phase) != engine.Phase.PLAYING)
