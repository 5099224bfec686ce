"""Engine throughput: ``python -m engine.bench`` prints JSON.

Frames per second on one core (the process is pinned to one CPU where the OS allows it) for
one game stepped from Python one frame per call, one game stepped in C++ over a mask array, and
a batch of games stepped with ``Batch.run`` (no allocation per step). Inputs are random masks
(no Start/Select). Reports the median and min over repeats, as opencv_zoo's benchmark does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import engine


def _pin_one_core() -> int | None:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def _timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _summary(frames: int, times: list[float]) -> dict:
    fps = [frames / t for t in times]
    return {"frames_per_run": frames, "median_fps": statistics.median(fps), "max_fps": max(fps)}


def bench_engine(batch_size: int = 1024, frames: int = 2000, repeats: int = 5) -> dict:
    rng = np.random.default_rng(0)
    masks = (rng.integers(0, 256, size=(frames, batch_size)) & 0xCF).astype(np.uint8)
    levels = rng.integers(0, 21, size=batch_size)
    speeds = rng.integers(0, 3, size=batch_size)
    seeds = rng.integers(2, 0x10000, size=batch_size)

    def python_loop() -> None:
        g = engine.Game(10, 1, 0x8988)
        for m in masks[:, 0].tolist():
            g.step(m)

    def single_run() -> None:
        g = engine.Game(10, 1, 0x8988)
        for _ in range(50):
            g.run(masks[:, 0])

    def batch_run() -> None:
        b = engine.Batch(levels, speeds, seeds)
        b.run(masks)

    # Batch construction (level generation) is timed apart and subtracted.
    build = statistics.median(_timed(lambda: engine.Batch(levels, speeds, seeds), repeats))
    batch_times = [t - build for t in _timed(batch_run, repeats)]
    return {
        "python_step": _summary(frames, _timed(python_loop, repeats)),
        "single_run": _summary(frames * 50, _timed(single_run, repeats)),
        "batch_run": {**_summary(frames * batch_size, batch_times), "batch_size": batch_size},
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
