"""What a run measures while it runs: streaming aggregates (Series), the counters (Stats), a
frame's laps (Laps), and the summaries' percentiles. Memory does not grow with the run."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# A frame's handling longer than this is a stall (one console frame, ms).
STALL_MS = 1e3 / 60.0988


class Series:
    """A streaming aggregate of one per-frame number (flat memory on long runs): count, exact
    max and min, the last value, the last ``recent`` values, and a histogram of log-spaced bins 1 %
    wide (keyed by sign and bin; about 2,100 keys at most from 1e-6 to 1e3 in either sign, in
    practice a few hundred), from which :meth:`percentiles` reads p50/p90/p99 to within 0.5 %
    of the exact value."""

    STEP = math.log1p(0.01)

    def __init__(self, recent: int = 600) -> None:
        self.n = 0
        self.max = -math.inf
        self.min = math.inf
        self.last: float | None = None
        self.recent: deque[float] = deque(maxlen=recent)
        self.bins: dict[int, int] = {}

    def append(self, value: float) -> None:
        v = float(value)
        self.max = max(self.max, v)
        self.min = min(self.min, v)
        self.last = v
        self.recent.append(v)
        key = self._key(v)
        self.bins[key] = self.bins.get(key, 0) + 1
        self.n += 1  # last: a signal raised in between leaves the count and the bins agreeing

    def _key(self, v: float) -> int:
        if abs(v) < 1e-6:
            return 0
        k = round(math.log(abs(v) / 1e-6) / self.STEP) + 1
        return k if v > 0 else -k

    def _value(self, key: int) -> float:
        if key == 0:
            return 0.0
        v = 1e-6 * math.exp((abs(key) - 1) * self.STEP)
        return v if key > 0 else -v

    def __len__(self) -> int:
        return self.n

    def percentiles(self) -> dict[str, float] | None:
        """{n, p50, p90, p99, max} (nearest-rank percentiles read off the bins; numpy's
        interpolated ones may lie between two neighbouring values), None when empty."""
        if not self.n:
            return None
        keys = sorted(self.bins)
        counts = np.cumsum([self.bins[k] for k in keys])
        total = int(counts[-1])  # the values binned (a signal may land inside append)
        out: dict[str, float] = {"n": self.n}
        for name, q in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99)):
            rank = min(total - 1, max(0, math.ceil(q * total) - 1))
            i = int(np.searchsorted(counts, rank + 1))
            out[name] = round(min(self._value(keys[i]), self.max), 3)
        out["max"] = round(self.max, 3)
        return out


@dataclass
class Stats:
    """Numbers gathered while running, as streaming aggregates (the summary's percentiles
    come from them; memory does not grow with the run's length)."""

    frames: int = 0
    menu_frames: int = 0  # captured frames the menu driver read (not handled by the loop)
    read_ms: Series = field(default_factory=Series)
    handle_ms: Series = field(default_factory=Series)
    spawn_to_wire_ms: Series = field(default_factory=Series)
    plan_ms: Series = field(default_factory=Series)
    policy_ms: Series = field(default_factory=Series)
    overhead_ms: Series = field(default_factory=Series)  # spawn_to_wire - planner - policy
    capture_latency_frames: Series = field(default_factory=Series)
    late_schedules: int = 0
    late_frames: int = 0
    schedules: int = 0
    decisions: int = 0
    missed_decisions: int = 0
    link_losses: int = 0
    capture_losses: int = 0
    underruns: int = 0
    watchdog_trips: int = 0
    arm_misses: int = 0
    stalls: int = 0  # frames whose handling took longer than a console frame
    repeated_frames: int = 0  # captures that repeated the picture before them
    # Captures whose console frame the console's ground truth gives (the simulated console,
    # the emulator), and those of them outside the frames the clock said they could show.
    shown_checked: int = 0
    shown_outside: int = 0
    # The clock mapping's error where the console knows the latch times (FrameClock.latch_ns
    # of a captured frame minus the truth's; ms, > 0: the clock puts the frame later).
    clock_error_ms: Series = field(default_factory=Series)
    longest_stall: dict[str, Any] = field(default_factory=dict)  # ms, where, frame
    first_frame: int | None = None
    last_frame: int | None = None
    link_anomalies: dict[str, int] = field(default_factory=dict)


def percentiles(values: Sequence[float] | Series) -> dict[str, float] | None:
    """{n, p50, p90, p99, max} of values (rounded to 3 decimals), None when empty."""
    if isinstance(values, Series):
        return values.percentiles()
    if not values:
        return None
    a = np.asarray(values, dtype=np.float64)
    q = np.percentile(a, [50, 90, 99])
    return {
        "n": int(a.size),
        "p50": round(float(q[0]), 3),
        "p90": round(float(q[1]), 3),
        "p99": round(float(q[2]), 3),
        "max": round(float(a.max()), 3),
    }


class Laps:
    """Where one frame's handling went: ``lap(name)`` adds the time since the last lap to
    ``parts[name]`` (ms) and returns now (perf_counter ns)."""

    def __init__(self, t0_ns: int) -> None:
        self.t0 = self.last = t0_ns
        self.cpu0 = time.thread_time_ns()
        self.parts: dict[str, float] = {}

    def __call__(self, name: str) -> int:
        now = time.perf_counter_ns()
        self.parts[name] = self.parts.get(name, 0.0) + (now - self.last) / 1e6
        self.last = now
        return now

    def total_ms(self) -> float:
        return (self.last - self.t0) / 1e6

    def cpu_ms(self) -> float:
        """CPU time this thread used since the start (ms): far below :meth:`total_ms`, the
        thread waited for a core or the interpreter lock rather than worked."""
        return (time.thread_time_ns() - self.cpu0) / 1e6


def margin_summary(margins: Sequence[int]) -> dict[str, Any] | None:
    """min, p1, p50 of some pills' margins (frames; hil.loop.ponder), None for none."""
    if not margins:
        return None
    a = np.asarray(margins, float)
    return {
        "n": len(margins),
        "min": int(a.min()),
        "p1": round(float(np.percentile(a, 1)), 1),
        "p50": round(float(np.percentile(a, 50)), 1),
    }
