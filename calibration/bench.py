"""Forward-model and inverse timings: ``python -m calibration.bench`` prints JSON.

Milliseconds per frame on one core (``cv2.setNumThreads(1)``, the process pinned to one CPU
where the OS allows it): the forward model (NES frame -> 1920x1080 capture) for each
interpolation with nothing else, with MJPEG at quality 70, and with every artifact of the
composite profile, and each artifact alone on a 1080p capture; ``to_nes`` for a 1080p and a
720p capture. The NES frame is a tiled picture
(8x8 tiles of NES-like colours; JPEG cost depends on content). Reports median, trimmed mean
(middle 80 %) and min over repeats after warm-up, as opencv_zoo's benchmark does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace

import cv2
import numpy as np

from calibration.forward import CaptureModel, NoiseSource, degrade, to_nes
from calibration.profile import Artifacts, Color, Geometry, Profile

PALETTE = np.array(
    [[0, 0, 0], [252, 252, 252], [248, 56, 0], [60, 188, 252], [248, 184, 0], [0, 168, 0]],
    dtype=np.uint8,
)


def tiled_frame(seed: int = 0) -> np.ndarray:
    """uint8 RGB [240, 256, 3]: 8x8 tiles of NES-like colours with a pixel pattern inside."""
    rng = np.random.default_rng(seed)
    tiles = PALETTE[rng.integers(0, len(PALETTE), (30, 32))]
    frame = np.repeat(np.repeat(tiles, 8, axis=0), 8, axis=1)
    dots = rng.random((240, 256)) < 0.1
    frame[dots] = PALETTE[1]
    return np.ascontiguousarray(frame)


def _pin_one_core() -> int | None:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def _time_ms(fn: Callable[[], object], warmup: int, repeats: int) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    cut = len(times) // 10
    trimmed = times[cut : len(times) - cut] or times
    return {
        "median_ms": round(statistics.median(times), 3),
        "trimmed_mean_ms": round(statistics.fmean(trimmed), 3),
        "min_ms": round(times[0], 3),
    }


def bench(warmup: int = 3, repeats: int = 30) -> dict:
    nes = tiled_frame()
    results: dict[str, dict] = {}

    def forward_case(name: str, profile: Profile) -> None:
        model = CaptureModel(profile, seed=0)
        results[name] = _time_ms(lambda: model(nes, previous=nes), warmup, repeats)

    for interp in ("nearest", "bilinear", "area"):
        g = Geometry.centered(1920, 1080, interpolation=interp)
        forward_case(f"forward_1080p_{interp}", Profile(geometry=g))
        forward_case(
            f"forward_1080p_{interp}_mjpeg70",
            Profile(geometry=g, artifacts=Artifacts(jpeg_quality=70)),
        )
    composite = Profile.load("composite_480p_combing")
    g = Geometry.centered(1920, 1080, interpolation="bilinear", crop=(8, 8, 4, 4))
    everything = replace(composite.artifacts, jpeg_quality=70)
    forward_case("forward_1080p_everything", composite.replace(geometry=g, artifacts=everything))
    forward_case("forward_1080p_bilinear_colour", Profile(geometry=g, color=composite.color))
    # Each artifact alone on a 1080p capture (steps 3-8 of the forward model).
    captured_1080p = CaptureModel(Profile(geometry=g))(nes)
    noise = NoiseSource(0)
    steps = {
        "hsmooth_1.2": Artifacts(hsmooth=1.2),
        "blur_0.5": Artifacts(blur=0.5),
        "sharpen_0.6": Artifacts(sharpen=0.6),
        "noise_4": Artifacts(noise=4.0),
        "chroma_4:2:2": Artifacts(chroma="4:2:2"),
        "chroma_4:2:0": Artifacts(chroma="4:2:0"),
        "mjpeg_70": Artifacts(jpeg_quality=70),
    }
    for name, artifacts in steps.items():

        def step(a: Artifacts = artifacts) -> np.ndarray:
            return degrade(a, captured_1080p, noise)

        results[f"step_1080p_{name}"] = _time_ms(step, warmup, repeats)
    for width, height in ((1920, 1080), (1280, 720)):
        p = Profile(geometry=Geometry.centered(width, height), color=Color())
        captured = CaptureModel(p)(nes)

        def inverse(p: Profile = p, c: np.ndarray = captured) -> np.ndarray:
            return to_nes(p, c)

        results[f"to_nes_{height}p"] = _time_ms(inverse, 10, 200)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibration.bench", description=__doc__)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    cpu = _pin_one_core()
    cv2.setNumThreads(1)
    result = {
        "results": bench(args.warmup, args.repeats),
        "cpu": cpu,
        "opencv": cv2.__version__,
        "threads": cv2.getNumThreads(),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
