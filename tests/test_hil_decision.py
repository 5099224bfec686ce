"""hil.loop.decision: the decision stage between the tracker and the schedule, on a stand-in
tracker (a confirmed spawn state) and link (callables that record what is sent)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import engine
from engine.placement import pill_falling
from hil.loop.decision import Decision
from hil.loop.runtime import EnginePlanner
from hil.loop.schedule import Schedule
from hil.loop.stats import Stats
from hil.loop.tracker import LevelState, TrackerConfig


class Deepest:
    name = "deepest"

    def choose(self, game: engine.Game, reachable) -> int:
        return int(np.flatnonzero(np.asarray(reachable))[-1])


class FakeTracker:
    """The tracker's side the decision reads: a confirmed state at frame g0, a pill due."""

    def __init__(self, g0: int, game: engine.Game) -> None:
        self.conf = (g0, game)
        self.decision_due: int | None = 1
        self.replan = False
        self.state = LevelState.TRACKING
        self.lv = SimpleNamespace(reported_spawn=1)
        self.cfg = TrackerConfig(latency_ns=3 * 1e9 / 60.0988)
        self.done: list[int] = []

    def confirmed_state(self):
        return self.conf

    def decided(self, pill: int) -> None:
        self.done.append(pill)
        self.decision_due = None


def spawn_state() -> engine.Game:
    game = engine.Game(3, 1, 0x8988)
    while not pill_falling(game):
        game.step(0)
    return game


def make(game: engine.Game, g0: int, first: int, fast: bool = True, sent_ok: bool = True):
    sent: list[tuple[int, list[int], str]] = []
    fed: list[int] = []
    logged: list[tuple[str, dict]] = []
    tracker = FakeTracker(g0, game)
    schedule = Schedule()
    schedule.on_schedule(g0, [0] * (first - g0 + 10))  # "no buttons" fed ahead

    def send(f: int, masks, what: str) -> bool:
        sent.append((f, list(masks), what))
        return sent_ok

    d = Decision(
        Deepest(),
        EnginePlanner(),
        tracker,  # type: ignore[arg-type]
        schedule,
        first_free=lambda extra: first,
        feed=fed.append,
        send=send,
        lockstep=fast,
        feed_frames=8,
        log=lambda name, **data: logged.append((name, data)),
        stats=Stats(),
    )
    return d, tracker, sent, fed, logged


def test_a_due_pill_is_planned_from_the_first_free_frame_and_sent():
    game = spawn_state()
    d, tracker, sent, fed, logged = make(game, g0=100, first=103)
    d.on_frame(0, linked=True)
    assert tracker.done == [1] and fed == []  # lockstep: no feed ahead
    ((first, masks, what),) = sent
    assert first == 103 and what == "plan"
    # the plan from the confirmed state, its first 3 frames (the committed prefix) not resent
    plan = engine.plan(game, prefix=np.zeros(3, np.uint8))
    idx = int(np.flatnonzero(np.asarray(plan.reachable))[-1])
    full = plan.masks(idx)
    assert masks[: len(full) - 3] == [int(m) for m in full[3:]]
    assert d.last is not None and d.last["placement"] == idx
    assert d.last["lock_frame"] == 100 + len(full) - 1
    assert [name for name, _ in logged] == ["plan"] and d.stats.decisions == 1


def test_nothing_is_decided_without_the_link_and_a_refused_send_is_not_a_decision():
    game = spawn_state()
    d, tracker, sent, _, _ = make(game, g0=0, first=0)
    d.on_frame(0, linked=False)
    assert sent == [] and tracker.done == [] and d.stats.decisions == 0
    d, tracker, sent, _, _ = make(game, g0=0, first=0, sent_ok=False)
    d.on_frame(0, linked=True)
    assert len(sent) == 1 and tracker.done == [] and d.last is None


def test_a_pill_that_locks_before_the_first_free_frame_is_missed():
    game = spawn_state()
    d, tracker, sent, _, logged = make(game, g0=0, first=2000)
    d.decide(1, 0)
    assert sent == [] and tracker.done == [1] and d.stats.missed_decisions == 1
    assert logged[0][0] == "no_plan" and "locks before" in logged[0][1]["reason"]


def test_the_real_time_margin_is_the_longest_recent_decision():
    game = spawn_state()
    d, _, _, fed, _ = make(game, g0=0, first=0, fast=False)
    assert d.margin_ms() == 50.0
    d.on_frame(0, linked=True)
    assert fed and fed[0] >= 60  # "no buttons" fed well past the decision first
    assert d.margin_ms() == max(d.recent_ms) and len(d.recent_ms) == 1
    fast, _, _, _, _ = make(game, g0=0, first=0)
    assert fast.margin_ms() == 0.0


def test_in_real_time_no_buttons_are_fed_past_the_pondering_before_it_starts(monkeypatch):
    """Pondering (the search: p99 ~150 ms, 9 frames) can outlast the feed's few frames ahead
    and the pill's lock: "no buttons" is fed PONDER_FEED_FRAMES ahead first (the real-time
    run's underruns fell from 44 to 11), and not in lockstep."""
    import hil.loop.decision as dec

    game = spawn_state()
    plan = engine.plan(game)
    full = plan.masks(int(np.flatnonzero(np.asarray(plan.reachable))[-1]))
    for fast in (False, True):
        d, _, _, fed, _ = make(game, g0=0, first=0, fast=fast)
        d.ponder = True
        seen: list[list[int]] = []
        monkeypatch.setattr(
            dec, "ponder", lambda *a, seen=seen, fed=fed, **k: seen.append(list(fed))
        )
        d._ponder(1, 0, game, full)
        assert len(seen) == 1
        if fast:
            assert seen[0] == []
        else:
            assert seen[0] and seen[0][-1] >= dec.PONDER_FEED_FRAMES


def test_in_real_time_the_full_policys_ponder_replaces_the_quick_one_while_it_can():
    """A policy with a quick choice (the search's prior network) is pondered with it first in
    real time, so a plan goes out before the spawn even when the full policy finishes late;
    the full policy's choice replaces it (its plan sent over the quick one's, "no buttons" past
    its end) while the spawn is still ahead of the first free frame, and is dropped after."""
    from concurrent.futures import Future

    from hil.loop.ponder import Ahead
    from policy.play import COLOUR_PAIRS_ORDERED as PAIRS

    game = spawn_state()

    def ahead(spawn: int, idx: int, masks: list[int]) -> Ahead:
        m = np.asarray(masks, np.uint8)
        return Ahead(2, spawn, game.clone(), dict.fromkeys(PAIRS, (idx, m)), m)

    def done(a: Ahead) -> Future:
        f: Future = Future()
        f.set_result(a)
        return f

    for first, replaced in ((100, True), (260, False)):
        d, tracker, sent, _, logged = make(game, g0=0, first=first, fast=False)
        d.horizon = lambda: 10_000

        def send(f, masks, what, d=d, sent=sent):
            sent.append((f, list(masks), what))  # as the runtime's, into the schedule
            d.schedule.on_schedule(f, masks)
            return True

        d.send = send
        d._ahead_level = tracker.lv
        quick = ahead(250, 7, [2, 2, 0, 4, 4, 4])
        quick.ms, quick.cpu_ms = 12.0, 9.0
        d._pending = [(done(quick), 1, tracker.lv, "quick")]
        d._collect()
        assert d.ahead is quick and d.ponder_stats.pondered == 1
        if first <= 250:
            assert sent[-1][1][-6:] == [2, 2, 0, 4, 4, 4] and quick.sent_frame is not None
        full = ahead(250, 9, [1, 4, 4])
        full.ms, full.cpu_ms = 400.0, 150.0
        d._pending = [(done(full), 1, tracker.lv, "full")]
        d._collect()
        if replaced:
            assert d.ahead is full and d.ponder_stats.refined == 1
            f, masks, what = sent[-1]
            assert what == "ponder" and masks[250 - f : 250 - f + 6] == [1, 4, 4, 0, 0, 0]
        else:
            assert d.ahead is quick and d.ponder_stats.refined_late == 1
        # Each pondering's wall and CPU time is kept per policy, used or too late.
        work = d.ponder_stats.summary()["work_ms"]
        assert work["quick"] == {
            "n": 1,
            "wall_p50": 12.0,
            "wall_p99": 12.0,
            "cpu_p50": 9.0,
            "cpu_p99": 9.0,
        }
        assert work["full"]["n"] == 1 and work["full"]["wall_p50"] == 400.0
        assert work["full"]["cpu_p99"] == 150.0


class Ahead(Deepest):
    """A policy that works out its next choice on a thread of its own (BeamPolicy)."""

    def __init__(self) -> None:
        self.started: list[object] = []
        self.stopped = 0
        self.prefetch = SimpleNamespace(summary=lambda: {"hits": 0})

    def start_prefetch(self, planner) -> None:
        self.started.append(planner)

    def stop_prefetch(self) -> None:
        self.stopped += 1


def test_a_policys_prefetch_starts_in_real_time_with_pondering_only():
    """Lockstep waits for every decision, so a choice worked out ahead would buy nothing; in
    real time the policy gets the runtime's planner, is stopped at the end, and its counts go
    into the summary's ponder."""
    for lockstep, ponder, started in (
        (True, True, False),
        (False, False, False),
        (False, True, True),
    ):
        policy = Ahead()
        planner = EnginePlanner()
        d = idle_decision(policy, planner, lockstep, ponder)
        assert policy.started == ([planner] if started else [])
        assert d.ponder_summary()["prefetch"] == {"hits": 0}
        d.close()
        assert policy.stopped == 1
    plain = make(spawn_state(), g0=0, first=0, fast=False)[0]
    assert plain.ponder_summary()["prefetch"] is None  # a policy without one


class Counted(Ahead):
    """Ahead, counting its full choices and its choices for a pill due now."""

    def __init__(self) -> None:
        super().__init__()
        self.full = self.now = 0

    def choose(self, game: engine.Game, reachable) -> int:
        self.full += 1
        return super().choose(game, reachable)

    def choose_now(self, game: engine.Game, reachable) -> int:
        self.now += 1
        return super().choose(game, reachable)


def test_the_warm_up_choice_is_the_one_for_a_pill_due_now():
    """Before the console starts, one choice warms the policy's network (its first run is
    slow). In real time it is the quick choice, so a policy that works out its next choice
    ahead does not start one for a state that never comes; in lockstep the one choice there
    is."""
    for lockstep, full, now in ((False, 0, 1), (True, 1, 0)):
        policy = Counted()
        d = idle_decision(policy, EnginePlanner(), lockstep, True)
        d.warm_up()
        assert (policy.full, policy.now) == (full, now)
        d.close()


def idle_decision(policy, planner, lockstep: bool, ponder: bool) -> Decision:
    """A Decision on a tracker that holds one spawn state, with nothing wired to a console."""
    return Decision(
        policy,
        planner,
        FakeTracker(0, spawn_state()),  # type: ignore[arg-type]
        Schedule(),
        first_free=lambda extra: 0,
        feed=lambda n: None,
        send=lambda f, masks, what: True,
        lockstep=lockstep,
        feed_frames=8,
        log=lambda name, **data: None,
        stats=Stats(),
        ponder=ponder,
        now_frame=lambda: 0,
        horizon=lambda: None,
    )
