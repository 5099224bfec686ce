"""The decision: the loop's stage between the tracker and the schedule (docs/RUN.md, "A decision").

When the tracker says a pill's decision is due (the first capture that shows it, or a re-sync
while a pill falls), :class:`Decision` finds the first console frame a schedule sent now can
still reach, predicts the state there from the latched and scheduled masks (the committed
prefix), plans every reachable placement from the confirmed state, lets the policy choose among
them and sends that placement's masks from that frame on. It owns the policy, the planner, the
placement last sent and the recent decision times (the real-time margin); it reaches the
controller link only through the three callables the Runtime gives it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

import engine
from hil.loop.schedule import Schedule
from hil.loop.tracker import LevelState, Tracker

U8 = npt.NDArray[np.uint8]


class Policy(Protocol):
    """``choose(game, reachable) -> placement index``: game is the predicted state where the
    first new input takes effect (a falling pill), reachable bool[512] from the planner."""

    name: str

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int: ...


class Planner(Protocol):
    """``plan(game, prefix) -> engine.Plan`` (docs/PLANNER.md): prefix = committed masks."""

    name: str

    def __call__(self, game: engine.Game, prefix: U8) -> engine.Plan: ...


class DecisionStats(Protocol):
    """The Runtime's Stats fields a decision adds to (hil.loop.runtime.Stats)."""

    decisions: int
    missed_decisions: int
    spawn_to_wire_ms: Any
    plan_ms: Any
    policy_ms: Any
    overhead_ms: Any


def falling_at(game: engine.Game) -> bool:
    """A pill is falling in this state (nextAction = action_pillFalling, phase playing)."""
    return int(game.next_action) == 0 and int(game.phase) == 1


class Decision:
    """The decision stage (see the module docstring).

    ``policy``, ``planner``: the pluggable pieces. ``tracker``, ``schedule``: the stages it
    reads (the confirmed state, each frame's mask). ``first_free(extra_ms) -> frame``: the
    first console frame a schedule sent now can reach with ``extra_ms`` more margin;
    ``feed(ahead)``: keep "no buttons" scheduled ``ahead`` frames on; ``send(first, masks,
    what) -> bool``: schedule ``masks`` from frame ``first`` (False when the link refused or is
    gone). ``fast``: lockstep (no time passes while deciding, no margin). ``feed_frames``: the
    run's feed depth (frames). ``log(name, **data)``: the event log. ``stats``: the Runtime's
    Stats. ``last``: the placement last sent ({pill, placement, rotation, row, col,
    lock_frame}) or None.
    """

    def __init__(
        self,
        policy: Policy,
        planner: Planner,
        tracker: Tracker,
        schedule: Schedule,
        *,
        first_free: Callable[[float], int],
        feed: Callable[[int], None],
        send: Callable[[int, Sequence[int], str], bool],
        fast: bool,
        feed_frames: int,
        log: Callable[..., None],
        stats: DecisionStats,
    ) -> None:
        self.policy = policy
        self.planner = planner
        self.tracker = tracker
        self.schedule = schedule
        self.first_free = first_free
        self.feed = feed
        self.send = send
        self.fast = fast
        self.feed_frames = feed_frames
        self.log = log
        self.stats = stats
        self.recent_ms: deque[float] = deque(maxlen=5)
        self.last: dict[str, Any] | None = None

    def margin_ms(self) -> float:
        """Extra margin for the first frame a decision aims at: none in lockstep, else the
        longest of the last 5 decisions (50 ms before the first)."""
        if self.fast:
            return 0.0
        return max(self.recent_ms) if self.recent_ms else 50.0

    def on_frame(self, t_seen_ns: int, linked: bool) -> None:
        """After the tracker handled a capture (``t_seen_ns``: when it was taken, perf_counter
        ns): decide the pill whose decision is due, or re-plan the falling pill after a
        re-sync. Nothing while the controller link is down (``linked`` False)."""
        tr = self.tracker
        pill = tr.decision_due if linked else None
        if pill is not None:
            self.decide(pill, t_seen_ns)
        elif tr.replan and tr.state == LevelState.TRACKING and linked:
            conf = tr.confirmed_state()
            if conf is not None and falling_at(conf[1]):
                self.decide(tr.lv.reported_spawn if tr.lv else 0, t_seen_ns)
            tr.replan = False

    def decide(self, pill: int, t_seen_ns: int) -> None:
        """Plans, chooses and sends pill ``pill``'s placement (see the module docstring); a
        pill it cannot place in time is logged as ``no_plan`` and counted missed."""
        tr = self.tracker
        conf = tr.confirmed_state()
        if conf is None:
            return
        self.stats.decisions += 1
        extra = self.margin_ms()
        if not self.fast:
            # "No buttons" well past the time the decision may take: no underrun meanwhile
            # (the plan replaces what it needs; only frames armed before it is sent count as
            # the committed prefix).
            self.feed(max(60, int(3 * extra / 16.6) + 2 * self.feed_frames))
        for _attempt in range(4):
            conf = tr.confirmed_state()
            assert conf is not None
            g0, game = conf
            first = max(self.first_free(extra), g0)
            prefix = np.array([self.schedule.mask_of(g) for g in range(g0, first)], np.uint8)
            decision = game.clone()
            decision.run(prefix)
            if not falling_at(decision):
                # The pill locks before the first frame we can still reach (engine.plan would
                # plan the next pill, whose next-pill colours are not seen yet): missed.
                self._missed(pill, first, len(prefix), "the pill locks before the first free frame")
                return
            t0 = time.perf_counter_ns()
            try:
                plan = self.planner(game, prefix)
                t1 = time.perf_counter_ns()
                if plan.status != 0 or len(plan) == 0:
                    self._missed(pill, first, len(prefix), f"plan status {int(plan.status)}")
                    return
                idx = int(self.policy.choose(decision, plan.reachable))
            except ValueError as exc:  # one bad decision must not end the run
                self._missed(pill, first, len(prefix), f"error: {exc}")
                return
            t2 = time.perf_counter_ns()
            full = plan.masks(idx)  # from the confirmed state, prefix included, to the lock
            masks = full[len(prefix) :]
            if not self.fast and self.first_free(0.0) > first:
                extra = (t2 - t0) / 1e6 + 5.0  # took too long: the prefix grew; again
                continue
            # Frames scheduled before beyond the new plan (an older plan) are released.
            tail = max(0, self.schedule.feed_end - (first + len(masks) - 1))
            t_wire = time.perf_counter_ns()
            sent = self.send(first, [*masks, *([0] * tail)], "plan")
            t_ack = time.perf_counter_ns()
            if not sent:
                return
            tr.decided(pill)
            lock_frame = g0 + len(full) - 1
            wire_ms = (t_wire - t_seen_ns) / 1e6
            self.stats.spawn_to_wire_ms.append(wire_ms)
            self.stats.plan_ms.append((t1 - t0) / 1e6)
            self.stats.policy_ms.append((t2 - t1) / 1e6)
            self.stats.overhead_ms.append(wire_ms - (t2 - t0) / 1e6)
            self.recent_ms.append((t_ack - t0) / 1e6)
            self.last = {
                "pill": pill,
                "placement": idx,
                "rotation": idx // 128,
                "row": (idx % 128) // 8,
                "col": idx % 8,
                "lock_frame": lock_frame,
            }
            self.log(
                "plan",
                pill=pill,
                placement=idx,
                first_frame=first,
                prefix=len(prefix),
                lock_frame=lock_frame,
                reachable=len(plan),
                plan_ms=round((t1 - t0) / 1e6, 3),
                policy_ms=round((t2 - t1) / 1e6, 3),
                spawn_to_wire_ms=round(wire_ms, 3),
                ack_ms=round((t_ack - t_wire) / 1e6, 3),
            )
            return
        self.stats.missed_decisions += 1
        self.log("no_plan", pill=pill, reason="could not keep up with the console")
        tr.decided(pill)

    def _missed(self, pill: int, first: int, prefix: int, reason: str) -> None:
        self.stats.missed_decisions += 1
        self.log("no_plan", pill=pill, first_frame=first, prefix=prefix, reason=reason)
        self.tracker.decided(pill)
