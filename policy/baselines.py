"""Baselines for policy.eval: a uniformly random reachable placement, and the greedy one-ply
heuristic (the teacher's board evaluation without the next pill)."""

from __future__ import annotations

import numpy as np

import engine
from engine import _core
from policy.play import Move
from policy.teacher import Teacher, Weights


class RandomPolicy:
    """A uniformly random reachable placement; `seed` makes a game's choices reproducible."""

    name = "random"

    def __init__(self, seed: int = 0, taps_only: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.taps_only = taps_only

    def act(self, game: engine.Game) -> Move:
        plan = _core.plan(game, taps_only=self.taps_only)
        if len(plan) == 0:
            raise ValueError(f"no placement to choose: plan status {plan.status}")
        idx = int(plan.placements[int(self.rng.integers(len(plan)))])
        return Move(idx, plan.masks(idx))


def greedy(taps_only: bool = False, weights: Weights | None = None) -> Teacher:
    """The greedy one-ply heuristic: every reachable placement played out by the engine, the
    best board by the teacher's evaluation, no look at the next pill."""
    return Teacher(depth=1, taps_only=taps_only, weights=weights or Weights(), name="greedy")
