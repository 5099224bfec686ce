"""Planner benchmark: microseconds per full plan on one core, median and p99, over a fixed set of
mid-game states at levels 0, 10 and 20 on LOW, MED and HI, and over empty boards. Prints JSON.

    python -m engine.bench_planner [--states N] [--repeats R]
    python -m engine.bench planner          (the same, pinned to one CPU)

A full plan is engine.plan(): every reachable placement with its lock frame and the 512-entry
reachable mask. Masks are rebuilt on demand, so they are timed apart: masks(i) for one placement
(what the bridge asks for), and plan() followed by all_masks() (every placement's masks and
presses, what a teacher search asks for). Each state is timed `repeats` times and its fastest
time kept (the machine is shared); `plan.first_call` is the first call on each state alone (what
the runtime pays: it plans each state once), so a state's repeats do not hide a cold cache.

Only states of real games count in `plan.mid_game`; `plan.empty_boards` (a level's state with
its viruses removed: the most reachable placements, no game ever shows it at spawn) is a stress
case reported apart, not mixed into the mid-game figures.

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
GOAL = {"median_us": 200, "p99_us": 2000}


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


def _best_us(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - t0) / 1e3)
    return best


def _time_plan(states: list[engine.Game], repeats: int, **kw) -> list[float]:
    return [_best_us(lambda g=g: _core.plan(g, **kw), repeats) for g in states]


def _first_call_us(states: list[engine.Game]) -> list[float]:
    """One plan() per state, each on a state not planned before in this process."""
    fresh = [g.clone() for g in states]
    return [_best_us(lambda g=g: _core.plan(g), 1) for g in fresh]


def _time_masks_one(states: list[engine.Game], repeats: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    out = []
    for g in states:
        p = _core.plan(g)
        idx = int(rng.choice(p.placements))
        out.append(_best_us(lambda p=p, idx=idx: p.masks(idx), repeats))
    return out


def _time_plan_all_masks(states: list[engine.Game], repeats: int) -> list[float]:
    return [_best_us(lambda g=g: _core.plan(g).all_masks(), repeats) for g in states]


def _summary(times: list[float]) -> dict:
    a = np.asarray(times)
    return {
        "n": int(a.size),
        "median_us": round(float(np.median(a)), 1),
        "p99_us": round(float(np.percentile(a, 99)), 1),
        "min_us": round(float(a.min()), 1),
        "max_us": round(float(a.max()), 1),
    }


def bench_planner(states_per_cell: int = 20, repeats: int = 5) -> dict:
    """Runs the benchmark in this process (the planner is single-threaded)."""
    result: dict = {"unit": "us per call, fastest of `repeats` per state", "goal": GOAL}
    cells: dict = {}
    mid: list[engine.Game] = []
    mid_times: list[float] = []
    first: list[float] = []
    for level in LEVELS:
        for speed, name in enumerate(SPEEDS):
            states = mid_game_states(level, speed, states_per_cell, seed=level * 10 + speed)
            first += _first_call_us(states)
            t = _time_plan(states, repeats)
            cells[f"L{level:02d}_{name}"] = _summary(t)
            mid += states
            mid_times += t
    empty: list[engine.Game] = []
    for speed in range(3):
        empty += empty_board_states(speed, max(2, states_per_cell // 2), 99 + speed)
    empty_times = _time_plan(empty, repeats)
    result["plan"] = {
        "mid_game": _summary(mid_times),
        "first_call": _summary(first),
        "empty_boards": _summary(empty_times),
        "cells": cells,
    }
    everything = mid
    result["masks_one_placement"] = _summary(_time_masks_one(everything, repeats, seed=7))
    result["plan_then_all_masks"] = _summary(_time_plan_all_masks(everything, repeats))
    result["placements_per_plan"] = round(
        float(np.mean([len(_core.plan(g)) for g in everything])), 1
    )
    nodes = np.array([_core.plan(g).nodes for g in everything])
    result["search_nodes_per_plan"] = {"median": int(np.median(nodes)), "max": int(nodes.max())}
    # What taps_only (no DAS, Left/Right on press frames only) gives up against the full search.
    missed = later = total = 0
    for g in everything:
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
    ap.add_argument("--states", type=int, default=20, help="states per (level, speed) cell")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per state (min kept)")
    args = ap.parse_args()
    print(json.dumps(bench_planner(args.states, args.repeats), indent=2))


if __name__ == "__main__":
    main()
