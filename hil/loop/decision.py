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

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

import engine
from engine.placement import pill_falling, placement_pose
from hil.loop.ponder import Ahead, PonderStats, ponder
from hil.loop.schedule import Schedule
from hil.loop.tracker import LevelState, Tracker
from hil.loop.worker import Inline, Worker

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
    """The Runtime's Stats fields a decision adds to (hil.loop.stats.Stats)."""

    decisions: int
    missed_decisions: int
    spawn_to_wire_ms: Any
    plan_ms: Any
    policy_ms: Any
    overhead_ms: Any


def placement_record(
    pill: int, idx: int, lock_frame: int, without_next: bool = False
) -> dict[str, Any]:
    """The placement last sent as ``Decision.last`` keeps it: placement index 0..511 split into
    rotation, row and column (docs/ARCHITECTURE.md), the console frame of the lock, and
    ``without_next``: chosen before the next pill's colours were shown (hil.loop.ponder)."""
    rotation, row, col = placement_pose(idx)
    return {
        "pill": pill,
        "placement": idx,
        "rotation": rotation,
        "row": row,
        "col": col,
        "lock_frame": lock_frame,
        "without_next": without_next,
    }


# Frames of "no buttons" kept scheduled while a pill is pondered in real time (500 ms).
PONDER_FEED_FRAMES = 30
# Frames after a spawn, beyond the capture's latency, before a choice taken when the spawn is
# seen can act (the picture completes a frame later, the tracker sees it, the first free frame
# is a frame or two on): measured 7-9 from spawn to the first frame sent at 3 frames of latency.
COMMIT_MARGIN_FRAMES = 6


class Decision:
    """The decision stage (see the module docstring).

    ``policy``, ``planner``: the pluggable pieces. ``tracker``, ``schedule``: the stages it
    reads (the confirmed state, each frame's mask). ``first_free(extra_ms) -> frame``: the
    first console frame a schedule sent now can reach with ``extra_ms`` more margin;
    ``feed(ahead)``: keep "no buttons" scheduled ``ahead`` frames on; ``send(first, masks,
    what) -> bool``: schedule ``masks`` from frame ``first`` (False when the link refused or is
    gone). ``lockstep``: the console waits (no time passes while deciding, no margin).
    ``feed_frames``: the run's feed depth (frames). ``log(name, **data)``: the event log.
    ``stats``: the Runtime's Stats. ``last``: the placement last sent ({pill, placement,
    rotation, row, col, lock_frame}) or None. ``ponder``: decide pill N+1 during pill N's fall
    (hil.loop.ponder);
    ``now_frame() -> frame``: the console frame now (the frame clock); ``horizon() -> frame |
    None``: the last frame a schedule sent now may reach (the firmware's queue), None while
    unknown. ``ponder_stats``: what pondering did (the summary's ``ponder``).
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
        lockstep: bool,
        feed_frames: int,
        log: Callable[..., None],
        stats: DecisionStats,
        ponder: bool = False,
        now_frame: Callable[[], int] | None = None,
        horizon: Callable[[], int | None] | None = None,
        worker: Worker | None = None,
        slow_worker: Worker | None = None,
    ) -> None:
        self.policy = policy
        # Pondering runs here (hil.loop.worker): a thread in real time, inline in lockstep.
        self.worker = worker if worker is not None else Inline()
        # ... and the full policy's, after a quick choice, on a thread of its own: a search
        # still running for a pill already spawned (250-1,000 ms on a busy machine) made the
        # next pill's quick choice and the next level's alignment wait behind it.
        self.slow_worker = slow_worker if slow_worker is not None else self.worker
        # pondering jobs on the worker, in order: (job, pill, the tracker's level, "quick" or
        # "full")
        self._pending: list[tuple[Future[Any], int, object, str]] = []
        # A decision due now in real time takes the policy's quick choice where it has one
        # (the search's prior network, ~2 ms instead of ~100): the pill is already falling.
        self.choose_now = (
            policy.choose if lockstep else getattr(policy, "choose_now", policy.choose)
        )
        self.planner = planner
        self.tracker = tracker
        self.schedule = schedule
        self.first_free = first_free
        self.feed = feed
        self.send = send
        self.lockstep = lockstep
        self.feed_frames = feed_frames
        self.log = log
        self.stats = stats
        self.recent_ms: deque[float] = deque(maxlen=5)
        self.last: dict[str, Any] | None = None
        self.ponder = ponder and now_frame is not None and horizon is not None
        self.now_frame = now_frame or (lambda: 0)
        self.horizon = horizon or (lambda: None)
        self.ahead: Ahead | None = None  # pill N+1 pondered during pill N's fall
        self._ahead_level: object = None  # the tracker's level it was pondered in
        self.ponder_stats = PonderStats()
        # In real time a policy that can work out the next pill's choice from its own
        # (policies.BeamPolicy, on the level's known pills) does so on a thread of its own.
        start = getattr(policy, "start_prefetch", None)
        if self.ponder and not lockstep and start is not None:
            start(planner)

    def warm_up(self) -> None:
        """One choice on a level-0 spawn before the console starts: the first run of an
        onnxruntime session (the policy's network) takes 100-400 ms, and a real-time console
        does not wait. It is the choice made for a pill due now (``choose_now``), so a policy
        that works out its next choice ahead (BeamPolicy.start_prefetch) does not start one
        for a state that never comes."""
        game = engine.Game(0, 1, 0x8988)
        for _ in range(400):
            if pill_falling(game):
                break
            game.step(0)
        plan = self.planner(game, np.zeros(0, np.uint8))
        if len(plan):
            self.choose_now(game, plan.reachable)

    def close(self) -> None:
        """Stops the policy's own thread, if it has one (nothing waits for it)."""
        stop = getattr(self.policy, "stop_prefetch", None)
        if stop is not None:
            stop()

    def ponder_summary(self) -> dict[str, Any]:
        """The summary's ``ponder``: PonderStats.summary, and the policy's prefetch counts
        (``prefetch``; None for a policy without them)."""
        prefetch = getattr(self.policy, "prefetch", None)
        return self.ponder_stats.summary() | {
            "prefetch": None if prefetch is None else prefetch.summary()
        }

    def margin_ms(self) -> float:
        """Extra margin for the first frame a decision aims at: none in lockstep, else the
        longest of the last 5 decisions (50 ms before the first)."""
        if self.lockstep:
            return 0.0
        return max(self.recent_ms) if self.recent_ms else 50.0

    def on_frame(self, t_seen_ns: int, linked: bool) -> None:
        """After the tracker handled a capture (``t_seen_ns``: when it was taken, perf_counter
        ns): decide the pill whose decision is due, or re-plan the falling pill after a
        re-sync. Nothing while the controller link is down (``linked`` False)."""
        tr = self.tracker
        self._collect()
        pill = tr.decision_due if linked else None
        if pill is not None:
            self.decide(pill, t_seen_ns)
        elif tr.replan and tr.state == LevelState.TRACKING and linked:
            conf = tr.confirmed_state()
            if conf is not None and pill_falling(conf[1]):
                self.decide(tr.lv.reported_spawn if tr.lv else 0, t_seen_ns)
            tr.replan = False
        if linked:
            self.send_ahead()

    def decide(self, pill: int, t_seen_ns: int) -> None:
        """Plans, chooses and sends pill ``pill``'s placement (see the module docstring); a
        pill it cannot place in time is logged as ``no_plan`` and counted missed."""
        tr = self.tracker
        conf = tr.confirmed_state()
        if conf is None or self._pondered(pill, t_seen_ns):
            return
        self.ahead = None
        self.stats.decisions += 1
        extra = self.margin_ms()
        if not self.lockstep:
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
            if not pill_falling(decision):
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
                idx = int(self.choose_now(decision, plan.reachable))
            except ValueError as exc:  # one bad decision must not end the run
                self._missed(pill, first, len(prefix), f"error: {exc}")
                return
            t2 = time.perf_counter_ns()
            full = plan.masks(idx)  # from the confirmed state, prefix included, to the lock
            masks = full[len(prefix) :]
            if not self.lockstep and self.first_free(0.0) > first:
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
            times = (t_seen_ns, t0, t1, t2, t_wire, t_ack)
            self._sent(pill, idx, first, len(prefix), lock_frame, len(plan), times)
            self._ponder(pill, g0, game, full)
            return
        self.stats.missed_decisions += 1
        self.log("no_plan", pill=pill, reason="could not keep up with the console")
        tr.decided(pill)

    def _pondered(self, pill: int, t_seen_ns: int) -> bool:
        """True when pill ``pill``'s pondered plan was taken (it is on the wire); a pondering
        still running for it is dropped (decided now instead)."""
        if self.ahead is not None and self.ahead.pill == pill:
            # (not _drop_pending here: taking the pill ponders the next one, whose jobs would
            # be cancelled; the next pondering's start cancels what is stale)
            return self._take_ahead(pill, t_seen_ns)
        if self._pending and self._pending[0][1] + 1 == pill:
            # Its pondering has not finished: decided now, the late result dropped.
            self._drop_pending()
            self.ponder_stats.unfinished += 1
            self.ponder_stats.replanned += 1
            self.log("ponder_replan", pill=pill, reason="its pondering had not finished")
        return False

    def _sent(
        self,
        pill: int,
        idx: int,
        first: int,
        prefix: int,
        lock_frame: int,
        reachable: int,
        times: tuple[int, int, int, int, int, int],
    ) -> None:
        """A plan decided at the spawn is on the wire: its margin, timings and log line.
        ``times``: perf_counter ns when the pill was seen, the planner began, the policy
        began, the plan was sent, and acknowledged."""
        t_seen_ns, t0, t1, t2, t_wire, t_ack = times
        spawn = self._spawn_frame(pill)
        if spawn is not None:  # decided at its spawn, not pondered
            self.ponder_stats.at_spawn_margins.append(spawn - self.now_frame())
        wire_ms = (t_wire - t_seen_ns) / 1e6
        self.stats.spawn_to_wire_ms.append(wire_ms)
        self.stats.plan_ms.append((t1 - t0) / 1e6)
        self.stats.policy_ms.append((t2 - t1) / 1e6)
        self.stats.overhead_ms.append(wire_ms - (t2 - t0) / 1e6)
        self.recent_ms.append((t_ack - t0) / 1e6)
        self.last = placement_record(pill, idx, lock_frame)
        self.log(
            "plan",
            pill=pill,
            placement=idx,
            first_frame=first,
            prefix=prefix,
            lock_frame=lock_frame,
            reachable=reachable,
            plan_ms=round((t1 - t0) / 1e6, 3),
            policy_ms=round((t2 - t1) / 1e6, 3),
            spawn_to_wire_ms=round(wire_ms, 3),
            ack_ms=round((t_ack - t_wire) / 1e6, 3),
        )

    # ---- pondering (hil.loop.ponder) ----------------------------------------------------------

    def _spawn_frame(self, pill: int) -> int | None:
        """The console frame pill ``pill`` could first be moved in, from the tracker's history."""
        lv = self.tracker.lv
        base = getattr(lv, "base", None)
        if base is None:
            return None
        es = [e for e, n in getattr(lv, "spawns", {}).items() if n == pill]
        return None if not es else base + min(es)

    def _ponder(self, pill: int, g0: int, game: engine.Game, full: Any) -> None:
        """Has pill ``pill + 1`` decided now, during pill ``pill``'s fall, on the worker;
        :meth:`_collect` takes the result and sends what it can. In real time a policy with a
        quick choice (``quick``: the search's prior network) is pondered with it first, so a
        plan is on the wire before the spawn even when the full policy (the search, ~250-1000
        ms on a busy machine) finishes too late; the full policy's choice replaces it when it
        comes while the spawn is still ahead."""
        self.ahead = None
        self._drop_pending()
        if not self.ponder:
            return
        if not self.lockstep:
            # "No buttons" past the pondering (the search's p99 is ~150 ms, 9 frames, more than
            # the feed keeps ahead): the pill may lock meanwhile, and the frames after its plan
            # would be underruns. The pondered plan replaces what it needs from the spawn on.
            self.feed(max(PONDER_FEED_FRAMES, 2 * self.feed_frames))
        # A choice made when the spawn is seen acts this many frames after it (latency, the
        # capture's frame, the reaction); choices that differ before then are committed.
        period_ns = 1e9 / self.tracker.cfg.hz
        commit = math.ceil(self.tracker.cfg.latency_ns / period_ns) + COMMIT_MARGIN_FRAMES
        self.ponder_stats.commit_frames = commit
        quick = None if self.lockstep else getattr(self.policy, "quick", None)
        for policy in ([quick] if quick is not None else []) + [self.policy]:
            worker = (
                self.slow_worker if quick is not None and policy is self.policy else self.worker
            )
            job = worker.submit(
                ponder,
                pill,
                g0,
                game.clone(),
                np.array(full, np.uint8),
                self.planner,
                policy.choose,
                getattr(policy, "choose_pairs", None),
                commit,
                getattr(policy, "choose_mean", None),
            )
            kind = "quick" if policy is quick else "full"
            self._pending.append((job, pill, self.tracker.lv, kind))
        self._collect()

    def _drop_pending(self) -> None:
        """Cancels the ponderings still queued on the worker and forgets them (one already
        running finishes; its result is not taken). Left queued, they kept the worker on
        pills already spawned: beside two CPU-bound processes the search's queue grew pill
        by pill until every pill of 19 HI was decided at its spawn, and 20 HI's alignment,
        queued behind them, came after its top-out."""
        for job, *_ in self._pending:
            job.cancel()
        self._pending = []

    def _collect(self) -> None:
        """Takes the ponderings the worker has finished, in order: the pill after ``pill``,
        ready before its spawn (dropped when the level changed meanwhile); a later one (the
        full policy's after the quick one's) replaces the earlier while its plan can still
        go out before the spawn, else it is dropped."""
        while self._pending and self._pending[0][0].done():
            job, pill, level, kind = self._pending.pop(0)
            try:
                a = job.result()
            except ValueError as exc:  # a bad choice must not end the run
                self.log("ponder_failed", pill=pill + 1, reason=str(exc))
                continue
            if a is not None:
                self.ponder_stats.add_work(kind, a)
            if a is None or level is not self.tracker.lv:
                continue
            old = self.ahead
            if old is not None and old.pill == a.pill:
                if a.spawn < self.first_free(self.margin_ms()):
                    self.ponder_stats.refined_late += 1
                    continue  # too late to replace what went out: the quick choice plays
                self.ponder_stats.refined += 1
            else:
                self.ponder_stats.pondered += 1
            self.ahead, self._ahead_level = a, level
            self.ponder_stats.ms.append(a.ms)
            self.send_ahead()

    def send_ahead(self) -> None:
        """Schedules the pondered pill's common masks from its spawn, once they fit in the
        firmware's queue (``horizon``) and the spawn is still ahead of the first free frame."""
        a, tr = self.ahead, self.tracker
        if a is None or a.sent_frame is not None or a.late or not len(a.common):
            return
        if tr.state != LevelState.TRACKING or tr.lv is not self._ahead_level:
            return
        first = self.first_free(0.0)
        if a.spawn < first:
            a.late = True
            self.ponder_stats.late += 1
            return
        horizon = self.horizon()
        if horizon is None or a.spawn + len(a.common) - 1 > horizon:
            return  # not in the queue's reach yet: a later frame sends it
        start = max(min(self.schedule.feed_end + 1, a.spawn), first)
        # "No buttons" over what an earlier plan had scheduled beyond these (a quick choice
        # this one replaces).
        tail = max(0, self.schedule.feed_end - (a.spawn + len(a.common) - 1))
        masks = [0] * (a.spawn - start) + [int(m) for m in a.common] + [0] * tail
        if self.send(start, masks, "ponder"):
            a.sent_frame = self.now_frame()
            self.ponder_stats.sent_early += 1
            self.ponder_stats.whole += int(a.agreed)

    def _take_ahead(self, pill: int, t_seen_ns: int) -> bool:
        """Plays the pondered choice for ``pill`` if the tracker confirms its spawn state
        (Ahead.take); False: decide at the spawn instead."""
        a, tr = self.ahead, self.tracker
        assert a is not None
        self.ahead = None
        lv = tr.lv
        conf = tr.confirmed_state()
        got = None
        if lv is not None and lv is self._ahead_level and lv.base is not None and conf:
            got = tr.state_at(a.spawn - lv.base)
        taken = None
        if got is not None and conf is not None and lv is not None:
            state, spawns = got
            first = max(self.first_free(self.margin_ms()), conf[0], a.spawn)
            taken = a.take(state, spawns, lv.next_by_spawn.get(pill), self.schedule.mask_of, first)
        if taken is None or lv is None:
            self.ponder_stats.replanned += 1
            self.log("ponder_replan", pill=pill, reason=a.reason or "the level changed")
            return False
        idx, masks, start = taken
        t0 = time.perf_counter_ns()
        rest = [int(m) for m in masks[start:]]
        send_from = a.spawn + start
        if rest:
            tail = max(0, self.schedule.feed_end - (send_from + len(rest) - 1))
            if not self.send(send_from, [*rest, *([0] * tail)], "plan"):
                return True  # the link is down: nothing more to do for this pill
        first_sent = a.sent_frame if a.sent_frame is not None else self.now_frame()
        self.stats.decisions += 1
        self.ponder_stats.taken += 1
        self.ponder_stats.margins.append(a.spawn - first_sent)
        tr.decided(pill)
        wire_ms = (time.perf_counter_ns() - t_seen_ns) / 1e6
        self.stats.spawn_to_wire_ms.append(wire_ms)
        lock_frame = a.spawn + len(masks) - 1
        self.last = placement_record(pill, idx, lock_frame, a.without_next)
        self.log(
            "plan",
            pill=pill,
            placement=idx,
            without_next=a.without_next,
            first_frame=a.spawn,  # the plan's first frame (its masks went out ahead)
            sent_from=send_from,  # the first frame sent now (the rest had gone or played)
            prefix=start,
            lock_frame=lock_frame,
            pondered=True,
            margin_frames=a.spawn - first_sent,
            ponder_ms=round(a.ms, 3),
            ponder_cpu_ms=round(a.cpu_ms, 3),
            spawn_to_wire_ms=round(wire_ms, 3),
            take_ms=round((time.perf_counter_ns() - t0) / 1e6, 3),
        )
        state = a.predicted.clone()
        state.next_colors[:] = lv.next_by_spawn[pill]
        self._ponder(pill, a.spawn, state, masks)
        return True

    def _missed(self, pill: int, first: int, prefix: int, reason: str) -> None:
        self.stats.missed_decisions += 1
        self.log("no_plan", pill=pill, first_frame=first, prefix=prefix, reason=reason)
        self.tracker.decided(pill)
