"""Renderer speed: ``python -m engine.bench render`` prints JSON.

Microseconds per ``render_frame`` call (clean-room tiles, into a preallocated ``out`` array, the
Python call included) over states sampled from games played with random inputs: median, p99,
mean and min, one core (engine.bench pins the process). Goal: under 300 us per frame.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import engine


def sample_states(count: int, seed: int = 0) -> list[engine.Game]:
    """`count` states from games at random levels/speeds stepped with random inputs."""
    rng = np.random.default_rng(seed)
    states: list[engine.Game] = []
    while len(states) < count:
        g = engine.Game(
            int(rng.integers(0, 21)), int(rng.integers(0, 3)), int(rng.integers(2, 1 << 16))
        )
        masks = (rng.integers(0, 256, size=1200) & 0xCF).astype(np.uint8)
        for i, m in enumerate(masks):
            g.step(int(m))
            if i % 40 == 7:
                states.append(g.clone())
            if int(g.phase) >= engine.Phase.STAGE_CLEAR:
                break
    return states[:count]


def bench_render(states: int = 200, repeats: int = 25) -> dict:
    games = sample_states(states)
    tiles = engine.TileSet.clean_room()
    out = np.empty((240, 256, 3), np.uint8)
    for g in games:  # warm-up
        engine.render_frame(g, tiles, out)
    times = []
    for _ in range(repeats):
        for g in games:
            t0 = time.perf_counter_ns()
            engine.render_frame(g, tiles, out)
            times.append((time.perf_counter_ns() - t0) / 1000)
    times.sort()
    return {
        "frames": len(times),
        "states": len(games),
        "median_us": statistics.median(times),
        "p99_us": times[int(0.99 * (len(times) - 1))],
        "mean_us": statistics.fmean(times),
        "min_us": times[0],
        "goal_us": 300,
    }
