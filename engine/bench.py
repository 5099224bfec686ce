"""Engine throughput: ``python -m engine.bench`` prints JSON.

Frames per second on one core (the process is pinned to one CPU where the OS allows it). Only
frames of games in play are counted: a game that has been cleared or has topped out steps for
almost nothing, so its frames would flatter the figure. Three ways of stepping:

- ``python_step``: whole games from state 0 on fresh seeds, one ``Game.step`` call per frame,
  for exactly the frames each game is in play (its length is found untimed beforehand).
- ``single_run``: the same whole games, each stepped in C++ over its mask array (``Game.run``).
- ``batch_run``: a batch of games stepped with ``Batch.run`` (no allocation per step); each game
  that ends is replaced by a new game on a fresh seed between chunks of frames, and only the
  frames of games in play are counted (``Batch.run`` returns that count); the fraction of
  game-frames in play is reported.

Inputs are random masks (no Start/Select), so games top out after a few thousand frames.
Reports the median and max over repeats, as opencv_zoo's benchmark does; every figure names what
it counted and n.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

import engine

TERMINAL = int(engine.Phase.STAGE_CLEAR)  # phases from here on are ended games
GAME_LIMIT = 40_000  # frames: a random-input game ends long before this


def _pin_one_core() -> int | None:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def _fps(runs: list[tuple[int, float]]) -> dict:
    """Median and max frames/s over repeats of (frames counted, seconds)."""
    fps = [n / t for n, t in runs]
    return {"median_fps": statistics.median(fps), "max_fps": max(fps)}


def _repeat(fn: Callable[[int], tuple[int, float]], repeats: int) -> list[tuple[int, float]]:
    fn(-1)  # warm-up on its own seeds
    return [fn(r) for r in range(repeats)]


def bench_engine(batch_size: int = 1024, frames: int = 2000, repeats: int = 5, games: int = 20):
    """Throughput of the three ways of stepping; ``frames`` is the batch's length per repeat,
    ``games`` the number of whole games per repeat for the single-game figures."""
    rng = np.random.default_rng(0)
    masks = (rng.integers(0, 256, size=GAME_LIMIT) & 0xCF).astype(np.uint8)
    batch_masks = (rng.integers(0, 256, size=(frames, batch_size)) & 0xCF).astype(np.uint8)
    chunk = 100

    def seeds(rep: int, n: int) -> np.ndarray:
        return np.random.default_rng(1000 + rep).integers(2, 0x10000, size=n)

    def whole_games(rep: int) -> list[tuple[int, int]]:
        """(seed, frames in play) of each game of a repeat, found untimed beforehand."""
        out = []
        for seed in seeds(rep, games).tolist():
            out.append((seed, engine.Game(10, 1, seed).run(masks)))
        return out

    def python_step(rep: int) -> tuple[int, float]:
        plays = whole_games(rep)
        started = [(engine.Game(10, 1, seed), masks[:n].tolist()) for seed, n in plays]
        t0 = time.perf_counter()  # level generation is not timed
        for g, ms in started:
            for m in ms:
                g.step(m)
        return sum(n for _, n in plays), time.perf_counter() - t0

    def single_run(rep: int) -> tuple[int, float]:
        plays = whole_games(rep)
        started = [(engine.Game(10, 1, seed), masks[:n]) for seed, n in plays]
        t0 = time.perf_counter()  # level generation is not timed
        for g, ms in started:
            g.run(ms)
        return sum(n for _, n in plays), time.perf_counter() - t0

    stats: dict[str, float] = {}

    def batch_run(rep: int) -> tuple[int, float]:
        r = np.random.default_rng(2000 + rep)
        levels = r.integers(0, 21, size=batch_size)
        speeds = r.integers(0, 3, size=batch_size)
        b = engine.Batch(levels, speeds, r.integers(2, 0x10000, size=batch_size))
        counted, stepping, replaced = 0, 0.0, 0
        for at in range(0, frames, chunk):
            t0 = time.perf_counter()
            counted += b.run(batch_masks[at : at + chunk])
            stepping += time.perf_counter() - t0
            for i in np.flatnonzero(b.phase >= TERMINAL).tolist():  # new game, fresh seed
                b.set(i, engine.Game(int(levels[i]), int(speeds[i]), int(r.integers(2, 0x10000))))
                replaced += 1
        stats["in_play_fraction"] = counted / (frames * batch_size)
        stats["games_replaced"] = replaced
        return counted, stepping

    py = _repeat(python_step, repeats)
    single = _repeat(single_run, repeats)
    batch = _repeat(batch_run, repeats)
    return {
        "python_step": {
            **_fps(py),
            "counted": "frames of whole games in play, level 10 MED, random masks",
            "games_per_repeat": games,
            "frames_per_repeat": py[0][0],
        },
        "single_run": {
            **_fps(single),
            "counted": "frames of whole games in play (Game.run), level 10 MED, random masks",
            "games_per_repeat": games,
            "frames_per_repeat": single[0][0],
        },
        "batch_run": {
            **_fps(batch),
            "counted": "game-frames in play (Batch.run's count); ended games replaced by "
            "fresh seeds between chunks of 100 frames; level generation not timed",
            "batch_size": batch_size,
            "frames_per_game_slot": frames,
            "in_play_frames_per_repeat": batch[0][0],
            "in_play_fraction": round(stats["in_play_fraction"], 4),
            "games_replaced_per_repeat": stats["games_replaced"],
        },
        "repeats": repeats,
        "goal_batch_fps_per_core": 10_000_000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
    parser.add_argument(
        "what", nargs="?", default="engine", choices=["engine", "planner", "render"]
    )
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    cpu = _pin_one_core()
    if args.what == "render":
        from engine.bench_render import bench_render

        result = bench_render()
    elif args.what == "planner":
        try:
            from engine.bench_planner import bench_planner
        except ImportError:
            print(json.dumps({"error": "the planner is not built yet"}))
            return 1
        result = bench_planner(repeats=args.repeats)
    else:
        result = bench_engine(args.batch_size, args.frames, args.repeats)
    result["cpu"] = cpu
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
