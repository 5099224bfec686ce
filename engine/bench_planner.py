"""Planner benchmark: microseconds per full plan (every reachable placement with its masks) on
one core, median and p99, over a fixed set of mid-game states at levels 0, 10 and 20 on LOW,
MED and HI, and over empty boards. Prints JSON.

    python -m engine.bench_planner [--states N] [--repeats R]

A mid-game state: the level's board after a seeded number of pills (0..11) placed at seeded
random reachable placements, speed-ups as the game counts them (one per 10 pills).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import engine
from engine import _core

LEVELS = (0, 10, 20)
SPEEDS = ("LOW", "MED", "HI")


def _to_falling(g: engine.Game) -> bool:
    for _ in range(2000):
        if int(g.phase) == 1 and int(g.next_action) == 0:
            return True
        if int(g.phase) > 2:
            return False
        g.step(0)
    return False


def mid_game_states(level: int, speed: int, n: int, seed: int) -> list[engine.Game]:
    rng = np.random.default_rng(seed)
    out: list[engine.Game] = []
    while len(out) < n:
        g = engine.Game(level, speed, int(rng.integers(0, 1 << 16)), int(rng.integers(0, 256)))
        ok = _to_falling(g)
        for _ in range(int(rng.integers(0, 12))):
            if not ok:
                break
            p = _core.plan(g)
            if len(p) == 0:
                ok = False
                break
            g.run(p.masks(int(rng.choice(p.placements))))
            ok = _to_falling(g)
        if ok:
            out.append(g)
    return out


def empty_board_states(speed: int, n: int, seed: int) -> list[engine.Game]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        g = engine.Game(0, speed, int(rng.integers(0, 1 << 16)), int(rng.integers(0, 256)))
        _to_falling(g)
        g.field[:] = 0xFF
        out.append(g)
    return out


def _time_us(states: list[engine.Game], repeats: int) -> list[float]:
    times = []
    for g in states:
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            _core.plan(g)
            best = min(best, (time.perf_counter_ns() - t0) / 1e3)
        times.append(best)
    return times


def _summary(times: list[float]) -> dict:
    a = np.asarray(times)
    return {
        "n": int(a.size),
        "median_us": round(float(np.median(a)), 1),
        "p99_us": round(float(np.percentile(a, 99)), 1),
        "min_us": round(float(a.min()), 1),
        "max_us": round(float(a.max()), 1),
    }


def bench_planner(states_per_cell: int = 6, repeats: int = 1) -> dict:
    """Runs the benchmark in this process (one core: the planner is single-threaded)."""
    result: dict = {"unit": "us per full plan", "cells": {}}
    mid: list[float] = []
    for level in LEVELS:
        for speed, name in enumerate(SPEEDS):
            states = mid_game_states(level, speed, states_per_cell, seed=level * 10 + speed)
            t = _time_us(states, repeats)
            mid += t
            result["cells"][f"L{level:02d}_{name}"] = _summary(t)
    empty: list[float] = []
    for speed in range(3):
        empty += _time_us(empty_board_states(speed, max(2, states_per_cell // 2), 99 + speed), repeats)
    result["mid_game"] = _summary(mid)
    result["empty_boards"] = _summary(empty)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=6, help="states per (level, speed) cell")
    ap.add_argument("--repeats", type=int, default=1, help="timed plans per state (min kept)")
    args = ap.parse_args()
    print(json.dumps(bench_planner(args.states, args.repeats), indent=2))


if __name__ == "__main__":
    main()
