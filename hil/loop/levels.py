"""The level flow of a run, in one place: which of the user's levels is in play, when the next
one is due, and what each one came to.

The runtime asks :meth:`Levels.next_due` once per handled frame; when a level is due it asks the
console how to start it (``Console.start_level``: the controller masks), schedules them, and
reports :meth:`Levels.started`. The tracker says when a level has ended (its state ENDED, from
the pictures); the next one is started ``start_wait_frames`` later. How a level is started is
the console's (hil.consoles.base); when is this module's.
"""

from __future__ import annotations

import resource
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hil.consoles.base import LevelEnd
from hil.loop.tracker import LevelState, Tracker

# Levels played again, in a run, after the console left them (a RESET).
MAX_RETRIES = 10


@dataclass
class LevelPlan:
    """A level the runtime asks the console for (the user's selection)."""

    level: int
    speed: int


class _Log(Protocol):
    def write(self, name: str, **data: Any) -> None: ...


class Levels:
    """See the module docstring. ``plans``: the levels to play, in order. ``stop_on_top_out``:
    the run ends at a top-out (a console without a RESET the host can press)."""

    def __init__(
        self,
        plans: Sequence[LevelPlan],
        log: _Log,
        *,
        start_wait_frames: int = 30,
        stop_on_top_out: bool = False,
        costs: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.plans = list(plans)
        # The run's cumulative counters (the runtime's: late schedules, underruns, stalls,
        # ...); each level's record gets what they grew by while it was played.
        self.costs = costs or (lambda: {})
        self._costs0: dict[str, Any] = {}
        self.log = log
        self.start_wait_frames = start_wait_frames
        self.stop_on_top_out = stop_on_top_out
        self.index = -1  # index into plans of the level in play
        self.results: list[dict[str, Any]] = []
        self.ended_at_frame: int | None = None
        self.done = False
        self.retries = 0  # levels played again after the console left them
        self._counted = (0, 0)  # the tracker's (desyncs, resyncs) at the last level's end

    def next_due(self, now_frame: int, tracker: Tracker, frames_seen: int) -> LevelPlan | None:
        """The level to start now, if one is due: the first once the console has been seen
        for a moment (``frames_seen`` captured frames), the next ``start_wait_frames`` after the
        tracker saw the last one end (recorded then). None otherwise; :attr:`done` once every
        level has been played (or a top-out ended the run)."""
        state = tracker.state
        if state == LevelState.ENDED and self.ended_at_frame is None:
            self.ended_at_frame = now_frame
            self._record_end(tracker)
        waiting = state == LevelState.IDLE or (
            state == LevelState.ENDED
            and self.ended_at_frame is not None
            and now_frame - self.ended_at_frame >= self.start_wait_frames
        )
        if not waiting or self.done:
            return None
        if self.index + 1 >= len(self.plans):
            self.done = True
            return None
        if state == LevelState.IDLE and frames_seen < 10:
            return None  # see the console for a moment first
        return self.plans[self.index + 1]

    def previous(self, end_frame: int | None) -> LevelEnd | None:
        """The level played before (None before the first); ``end_frame``: the frame its last
        step ran in (the tracker's shadow state)."""
        if self.index < 0:
            return None
        prev = self.plans[self.index]
        result = self.results[-1]["result"] if self.results else "unknown"
        return LevelEnd(prev.level, prev.speed, result, end_frame)

    def started(self) -> None:
        """The next level's start was sent."""
        self.index += 1
        self.ended_at_frame = None
        self._costs0 = self.costs()

    def renumber(self, shift: int) -> None:
        """The firmware restarted and numbers console frame g as g - shift from now on."""
        if self.ended_at_frame is not None:
            self.ended_at_frame -= shift

    def _record_end(self, tracker: Tracker) -> None:
        lv = tracker.lv
        if lv is None or self.index < 0:
            return
        result = lv.result or "unknown"
        start = lv.base
        rec = {
            "level": lv.level,
            "speed": lv.speed,
            "result": result,
            "base_frame": start,
            "frame_counter_mod16": lv.fc0,
            "frames": None
            if start is None or self.ended_at_frame is None
            else self.ended_at_frame - start,
            "pills": lv.decided_spawn,
            **self._count(tracker),
        }
        self.results.append(rec)
        self.log.write("level_end", **rec, rss_mb=rss_mb(), peak_rss_mb=peak_rss_mb())
        if result == "top_out" and self.stop_on_top_out:
            self.done = True
        if result == "left" and self.retries < MAX_RETRIES:
            # The console left the level (its RESET): the same level is played again.
            self.retries += 1
            self.plans.insert(self.index + 1, self.plans[self.index])
            self.log.write("level_retry", level=lv.level, speed=lv.speed, retries=self.retries)

    def _count(self, tracker: Tracker) -> dict[str, Any]:
        """The tracker's desyncs and re-syncs since the last level ended, and what real time
        cost while this level was played (the runtime's counters since its start: see
        hil.loop.runtime.Runtime.costs)."""
        d0, r0 = self._counted
        self._counted = (tracker.desyncs, tracker.resyncs)
        out: dict[str, Any] = {"desyncs": tracker.desyncs - d0, "resyncs": tracker.resyncs - r0}
        now, before = self.costs(), self._costs0
        for k, v in now.items():
            if k.startswith("_"):  # where the per-level figures begin
                continue
            if callable(v):  # a per-level figure computed from where the level began
                out[k] = v(before)
            elif isinstance(v, int | float):
                out[k] = v - before.get(k, 0)
        return out

    def finish(self, tracker: Tracker, now_frame: int | None, why: str) -> None:
        """The run ends (``why``: "interrupted", "frame_budget", "capture_end", "link_lost",
        "link_fatal"):
        a level the tracker saw end is recorded as it ended; one still in play counts as
        played with ``why`` as its result, not cleared."""
        if self.index < 0 or len(self.results) > self.index:
            return
        if tracker.state == LevelState.ENDED:
            self.ended_at_frame = now_frame
            self._record_end(tracker)
            return
        lp = self.plans[self.index]
        rec = {"level": lp.level, "speed": lp.speed, "result": why, "frames": None}
        rec.update(self._count(tracker))
        self.results.append(rec)
        self.log.write("level_end", **rec)


def rss_mb() -> float | None:
    """Resident memory of this process now (MB; /proc/self/statm), None where unavailable."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * resource.getpagesize() / (1024 * 1024), 1)


def peak_rss_mb() -> float:
    """Peak resident memory of this process (resource.getrusage; MB)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)
