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
# Two players: frames after a round's end before whose it was is read off the bottle (the
# NMI redraws one row a frame: 16 frames show the whole field).
ROUND_SETTLE_FRAMES = 20


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
        matches: int | None = None,
    ) -> None:
        self.plans = list(plans)
        # Two players: each level is a round; the run ends after this many matches.
        self.matches = matches
        self.versus = VersusScore()
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
        # Bot against bot: player 1's tracker (the Runtime's Seat); each round's record gets
        # its result as player 1 saw it and its desyncs and re-syncs (``p1``).
        self.p1: Tracker | None = None
        self._counted_p1 = (0, 0)

    def next_due(self, now_frame: int, tracker: Tracker, frames_seen: int) -> LevelPlan | None:
        """The level to start now, if one is due: the first once the console has been seen
        for a moment (``frames_seen`` captured frames), the next ``start_wait_frames`` after the
        tracker saw the last one end (recorded then). None otherwise; :attr:`done` once every
        level has been played (or a top-out ended the run)."""
        state = tracker.state
        if state == LevelState.ENDED and self.ended_at_frame is None:
            self.ended_at_frame = now_frame
            if self.matches is None:
                self._record_end(tracker)
        if (
            self.matches is not None
            and state == LevelState.ENDED
            and self.ended_at_frame is not None
            and len(self.results) <= self.index
            and now_frame - self.ended_at_frame >= ROUND_SETTLE_FRAMES
        ):
            # two players: whose bottle ended the round is read once the bottles are redrawn
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
        if self.p1 is not None:
            d0, r0 = self._counted_p1
            p1 = self.p1
            self._counted_p1 = (p1.desyncs, p1.resyncs)
            rec["p1"] = {
                "result": round_result(p1),
                "base_frame": None if p1.lv is None else p1.lv.base,
                "pills": None if p1.lv is None else p1.lv.decided_spawn,
                "desyncs": p1.desyncs - d0,
                "resyncs": p1.resyncs - r0,
            }
        if self.matches is not None:
            rec["round"] = self.versus.add(round_result(tracker))
            tracker.match_goes_on = any(self.versus.victories)
            if self.versus.matches_done >= self.matches:
                self.done = True
        self.results.append(rec)
        self.log.write("level_end", **rec, rss_mb=rss_mb(), peak_rss_mb=peak_rss_mb())
        # (two players: a round lost by a top-out is played on, the match goes on)
        if result == "top_out" and self.stop_on_top_out and self.matches is None:
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


def round_result(tracker: Tracker) -> str:
    """How a two-player round ended for the bot: "won_clear" (its bottle holds no virus),
    "lost_clear" (the opponent cleared first), "lost_top_out" (its rows 8-15 emptied:
    emptyLowerFieldOnLose_2P [$96D0] empties the loser's lower half the frame after the
    top-out), "won_top_out" (the opponent's were), or "unknown". The picture's kind says that
    the round ended (STAGE_CLEAR, TOP_OUT: hil.loop.tracker), not whose bottle ended it. A
    clear is the bot's when its shadow at the end or its bottle as the tracker last saw it
    (ROUND_SETTLE_FRAMES after the end) holds no virus: a virus's clear tile, frozen
    mid-animation while the end screen waits, was read as a virus on the real game, and a
    shadow that lost the bottle under load may be wrong. A top-out is told by the bottle (the
    rows redrawn)."""
    lv = tracker.lv
    seen = None if lv is None else lv.last_seen
    if lv is None or seen is None or lv.result not in ("stage_clear", "top_out"):
        return "unknown"
    if lv.result == "stage_clear":
        cleared = seen.virus_count == 0
        if lv.base is not None and lv.end_frame is not None:
            got = tracker.state_at(lv.end_frame - lv.base)
            cleared |= got is not None and int(got[0].virus_left) == 0
        return "won_clear" if cleared else "lost_clear"
    emptied = bool((seen.field[8:] == 0xFF).all())
    return "lost_top_out" if emptied else "won_top_out"


class VersusScore:
    """Rounds and matches of a two-player run, counted from the rounds' results: a match is
    won by the first to 3 rounds won (playerLoses_endScreen [$959A]); a draw or an unknown
    round counts for neither."""

    def __init__(self) -> None:
        self.rounds: dict[str, int] = {}
        self.victories = [0, 0]  # (the bot, the opponent) in the match in play
        self.matches_done = 0
        self.matches_won = 0

    def add(self, result: str) -> dict[str, Any]:
        """One round's ``result`` (:func:`round_result`); returns the round's record."""
        self.rounds[result] = self.rounds.get(result, 0) + 1
        if result.startswith("won"):
            self.victories[0] += 1
        elif result.startswith("lost"):
            self.victories[1] += 1
        rec = {
            "result": result,
            "match": self.matches_done + 1,
            "victories": list(self.victories),
        }
        if 3 in self.victories:
            self.matches_done += 1
            self.matches_won += int(self.victories[0] == 3)
            self.victories = [0, 0]
        return rec

    def summary(self) -> dict[str, Any]:
        played = sum(self.rounds.values())
        won = sum(v for k, v in self.rounds.items() if k.startswith("won"))
        return {
            "rounds": played,
            "rounds_won": won,
            "rounds_lost": sum(v for k, v in self.rounds.items() if k.startswith("lost")),
            "round_results": dict(sorted(self.rounds.items())),
            "matches": self.matches_done,
            "matches_won": self.matches_won,
            "matches_lost": self.matches_done - self.matches_won,
            "victories_in_play": list(self.victories),
        }


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
