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


def _time_us(states: list[engine.Game], repeats: int, taps_only: bool = False) -> list[float]:
    times = []
    for g in states:
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            _core.plan(g, taps_only=taps_only)
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
    mid_taps: list[float] = []
    all_states: list[engine.Game] = []
    for level in LEVELS:
        for speed, name in enumerate(SPEEDS):
            states = mid_game_states(level, speed, states_per_cell, seed=level * 10 + speed)
            all_states += states
            t = _time_us(states, repeats)
            mid += t
            mid_taps += _time_us(states, repeats, taps_only=True)
            result["cells"][f"L{level:02d}_{name}"] = _summary(t)
    empty_states: list[engine.Game] = []
    for speed in range(3):
        empty_states += empty_board_states(speed, max(2, states_per_cell // 2), 99 + speed)
    result["mid_game"] = _summary(mid)
    result["empty_boards"] = _summary(_time_us(empty_states, repeats))
    result["mid_game_taps_only"] = _summary(mid_taps)
    result["empty_boards_taps_only"] = _summary(_time_us(empty_states, repeats, taps_only=True))
    # what taps_only gives up: placements it misses, and frames it loses on the ones it finds
    missed = later = total = 0
    for g in all_states:
        full, taps = _core.plan(g), _core.plan(g, taps_only=True)
        fl = dict(zip(full.placements.tolist(), full.lock_frames.tolist(), strict=True))
        tl = dict(zip(taps.placements.tolist(), taps.lock_frames.tolist(), strict=True))
        total += len(fl)
        missed += len(set(fl) - set(tl))
        later += sum(1 for k, v in tl.items() if v > fl[k])
    result["taps_only_vs_full"] = {"placements": total, "missed": missed, "later": later}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=6, help="states per (level, speed) cell")
    ap.add_argument("--repeats", type=int, default=1, help="timed plans per state (min kept)")
    args = ap.parse_args()
    print(json.dumps(bench_planner(args.states, args.repeats), indent=2))


if __name__ == "__main__":
    main()
