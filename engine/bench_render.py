"""Renderer speed: ``python -m engine.bench render`` prints JSON.

Microseconds per ``render_frame`` call (clean-room tiles, into a preallocated ``out`` array, the
Python call included), one core (engine.bench pins the process). What is timed is what the
simulated console does: every frame of whole games, each rendered once, from state 0 until the
game ends (random inputs, random levels and speeds, fresh seeds); frames of ended games are not
rendered. Reports n, median, p99, mean and min. Goal: under 300 us per frame.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import engine


def bench_render(games: int = 12, seed: int = 0) -> dict:
    """Render every frame of ``games`` whole random-input games once; JSON-ready summary."""
    rng = np.random.default_rng(seed)
    tiles = engine.TileSet.clean_room()
    out = np.empty((240, 256, 3), np.uint8)
    engine.render_frame(engine.Game(0, 0, 2), tiles, out)  # warm-up: first-call set-up
    times: list[float] = []
    for _ in range(games):
        g = engine.Game(
            int(rng.integers(0, 21)), int(rng.integers(0, 3)), int(rng.integers(2, 1 << 16))
        )
        masks = (rng.integers(0, 256, size=40_000) & 0xCF).astype(np.uint8).tolist()
        for m in masks:
            if int(g.phase) >= engine.Phase.STAGE_CLEAR:
                break
            g.step(m)
            t0 = time.perf_counter_ns()
            engine.render_frame(g, tiles, out)
            times.append((time.perf_counter_ns() - t0) / 1000)
    times.sort()
    return {
        "counted": "render_frame calls, one per frame of whole games in play, each frame once",
        "games": games,
        "frames": len(times),
        "median_us": statistics.median(times),
        "p99_us": times[int(0.99 * (len(times) - 1))],
        "mean_us": statistics.fmean(times),
        "min_us": times[0],
        "goal_us": 300,
    }
