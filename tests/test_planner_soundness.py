"""Soundness of the reachability planner as a property over many random mid-game states: for
every plan, replaying each placement's masks through engine.step from the same state locks the
pill at exactly that placement on exactly its lock frame, with exactly its presses.

States: seeded games at random levels 0-20 and speed-ups 0-49 on each speed, played by random
reachable placements; at every spawn the planner plans from the spawn, from mid-fall (a random
cut of a random plan, so the pill may be moving, DAS-charged, holding buttons), from mid-fall
with a random committed prefix, and now and then from the lock clean-up before the next spawn,
some with a rate profile (min_press_interval 2..8). At least 10,000 planned states in all.
"""

from __future__ import annotations

import numpy as np
import pytest
from planner_helpers import check_plan, to_falling

import engine
from engine import _core

STATES_PER_SPEED = 3400  # 3 speeds: >= 10,000 planned states
PREFIX_MASKS = np.array([0, 1, 2, 4, 5, 6, 0x40, 0x80, 0x41, 0x82, 0xC0, 3], np.uint8)


def plan_from(g: engine.Game, rng: np.random.Generator, prefix: np.ndarray | None) -> int:
    interval = int(rng.choice([2, 3, 4, 8])) if rng.random() < 0.15 else 0
    check_plan(g, prefix, min_press_interval=interval)
    return 1


@pytest.mark.parametrize("speed", [0, 1, 2])
def test_every_placement_replays_to_its_lock(speed: int) -> None:
    rng = np.random.default_rng(2024 + speed)
    planned = placements = games = 0
    while planned < STATES_PER_SPEED:
        games += 1
        g = engine.Game(
            int(rng.integers(0, 21)), speed, int(rng.integers(0, 1 << 16)), int(rng.integers(256))
        )
        g.speed_ups[...] = int(rng.integers(0, 50))
        while planned < STATES_PER_SPEED and to_falling(g):
            p = _core.plan(g)
            if len(p) == 0:  # top-out on spawn
                break
            planned += plan_from(g, rng, None)  # at spawn
            placements += len(p)
            masks = p.masks(int(rng.choice(p.placements)))
            cut = int(rng.integers(0, len(masks)))
            h = g.clone()
            h.run(masks[:cut].copy())  # mid-fall: moving, DAS-charged, holding buttons
            planned += plan_from(h, rng, None)
            prefix = rng.choice(PREFIX_MASKS, size=int(rng.integers(1, 6)))
            planned += plan_from(h, rng, prefix)  # inputs already in flight
            g.run(masks)  # the pill locks
            if rng.random() < 0.1:  # between pills: lock clean-up, cascades, the throw
                h = g.clone()
                h.run(np.zeros(int(rng.integers(0, 30)), np.uint8))
                planned += plan_from(h, rng, None)
    assert planned >= STATES_PER_SPEED and placements > 10 * games
