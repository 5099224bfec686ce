"""``hil run``: the closed loop, a pipeline: console -> capture -> reader -> tracker -> decision
-> schedule, each stage owning its state (docs/RUN.md, "One frame of the loop"): the console
(hil.consoles.base.Console: capture, controller port, clock, level start), the frame clock
(hil.loop.clock), the schedule (hil.loop.schedule), the reader (hil.loop.observation), the
tracker (hil.loop.tracker), the decision (hil.loop.decision), the level flow (hil.loop.levels);
:func:`play` runs it on any console.

One thread does the work, frame by frame:

1. take the newest captured frame (never a backlog);
2. read it (``reader(frame) -> Observation``);
3. read the firmware's STATUS messages (which byte each console frame latched) into the tracker;
4. let the tracker map the capture onto the console frame clock, check its prediction, and
   report events (level start, spawn, lock, clear, stage clear, top-out, desync);
5. at a spawn's first visible frame (or after a re-sync): find the first console frame a
   schedule sent now can still reach, predict the state there from the latched and scheduled
   masks (the committed prefix), plan every reachable placement from it, let the policy choose,
   send that placement's masks;
6. keep the firmware's queue fed with "no buttons" a few frames ahead (no underruns, the
   watchdog fed), press Start to begin each level, update the live view, log.

Every step is logged to a JSONL event log (one object per line, flushed per line); the run ends
with a summary (levels cleared, frames, desyncs, late schedules, latency percentiles, peak RSS)
printed and logged. A vanished controller port: a clear message, the controller released (the
firmware's watchdog does it when the host is gone), reconnection with backoff; the capture
keeps being read and logged meanwhile.

This module imports neither torch nor training code (tests check it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from hil.consoles.base import CaptureError, Console, Frame
from hil.link.controller import Controller
from hil.link.link import LinkFatal
from hil.loop import report
from hil.loop.clock import FrameClock
from hil.loop.decision import Decision, Planner, Policy
from hil.loop.eventlog import EventLog
from hil.loop.levels import LevelPlan, Levels
from hil.loop.observation import Reader
from hil.loop.policies import (  # noqa: F401 - the names hil.play and the tests import here
    make_policy,
    next_pill_observations,
    pick_policy,
    pick_reader,
)
from hil.loop.schedule import Schedule
from hil.loop.starts import LevelStarts
from hil.loop.stats import STALL_MS, Laps, Stats
from hil.loop.tracker import Event, Tracker, TrackerConfig
from hil.loop.wire import Wire
from hil.loop.worker import make_worker
from perception.observation import Observation

U8 = npt.NDArray[np.uint8]


# ---- the pluggable pieces ---------------------------------------------------------------------


class EnginePlanner:
    """engine.plan, exact search or taps-only (docs/PLANNER.md)."""

    def __init__(self, taps_only: bool = False) -> None:
        self.taps_only = taps_only
        self.name = "engine.plan taps_only" if taps_only else "engine.plan"

    def __call__(self, game: engine.Game, prefix: U8) -> engine.Plan:
        return engine.plan(game, prefix=prefix if len(prefix) else None, taps_only=self.taps_only)


# ---- settings and summary ------------------------------------------------------------------


def parse_levels(text: str, speed: int) -> list[LevelPlan]:
    """``"LEVEL[:SPEED],..."`` (``hil run --levels``, ``hil bench --levels``) -> LevelPlans;
    an item without a speed gets ``speed``. Raises ValueError naming a malformed item."""
    out = []
    for item in text.split(","):
        lv, _, sp = item.strip().partition(":")
        try:
            out.append(LevelPlan(int(lv), int(sp) if sp else speed))
        except ValueError:
            raise ValueError(f"--levels item {item!r} is not LEVEL or LEVEL:SPEED") from None
    return out


LOCKSTEP_LINK_TIMEOUT_S = 10.0  # link write/reply timeout when the console waits (--fast)


@dataclass
class RunSettings:
    """What ``hil run`` does; see ``hil run --help`` and docs/RUN.md."""

    levels: list[LevelPlan]
    latency_frames: float = 0.0  # capture chain latency (calibrated), console frames
    jitter_ms: float = 0.0  # extra delivery delay sigma; the tracker allows 4 sigma + 1 ms
    max_frames: int = 200_000  # console frames before the run stops
    start_wait_frames: int = 30  # after a level ends, before pressing Start
    start_menu_frames: int = 9_000  # console frames the menus may take to start a level
    feed_frames: int = 12  # "no buttons" kept scheduled this far ahead (lockstep)
    # ... in real time: the host may be held up for that long (a busy machine) before the
    # firmware runs out of frames (an underrun); a plan replaces what it needs of them.
    realtime_feed_frames: int = 30
    margin_ms: float = 3.0  # transport margin on top of the measured decision time
    ponder: bool = True  # decide pill N+1 during pill N's fall (hil.loop.ponder)
    stop_on_top_out: bool = False
    reconnect_timeout_s: float = 30.0
    frame_timeout_s: float = 2.0  # no captured frame for this long: the capture is lost
    # Two players (hil run --versus): the opponent's (level, speed); the bot plays player 2 on
    # controller port 2, each level of ``levels`` is a round, and the run ends after
    # ``matches`` matches (first to 3 rounds won) or when the rounds run out.
    opponent: tuple[int, int] | None = None
    matches: int = 1
    # ... and player 1 too, on controller port 1, at ``opponent``'s level and speed (bot
    # against bot: hil run --versus --both): a second tracker, schedule and decision (Seat)
    both: bool = False


REALTIME_SWITCH_INTERVAL_S = 0.001  # the interpreter's switch interval while in real time


# ---- the runtime ----------------------------------------------------------------------------


@dataclass
class Seat:
    """Player 1's stages when the bot plays both controller ports (``RunSettings.both``): its
    own tracker (player 1's bottle), schedule (port 1's frames) and decision (its policy,
    pondering on workers of its own); the frame clock, the link, the reader, the level flow and
    the statistics are the run's."""

    tracker: Tracker
    schedule: Schedule
    decision: Decision
    worker: Any
    slow_worker: Any


class Runtime:
    """The loop of the module docstring on ``console`` (its ``now_ns`` is the runtime's clock:
    ``time.monotonic_ns`` on a rig, the console's own in lockstep). ``view``: called with a dict
    per handled frame (see hil.loop.view)."""

    def __init__(
        self,
        settings: RunSettings,
        console: Console,
        reader: Reader,
        policy: Policy,
        planner: Planner,
        *,
        log: EventLog | None = None,
        view: Callable[[dict[str, Any]], None] | None = None,
        say: Callable[[str], None] | None = None,
        on_frame: Callable[[Runtime, Frame], None] | None = None,
        screens: Callable[[Any], Any] | None = None,
        p1_policy: Policy | None = None,
    ) -> None:
        if not settings.levels:
            raise ValueError("hil run needs at least one level to play")
        if settings.both and (settings.opponent is None or p1_policy is None):
            raise ValueError("the bot plays both ports in a two-player run, with player 1's policy")
        self.s = settings
        self.console = console
        self.source = console.capture
        self.reader = reader
        self.now = console.now_ns  # the runtime's clock (ns)
        self.log = log or EventLog(None)
        self.view = view
        self.say = say or (lambda m: print(m, file=sys.stderr))
        self.on_frame = on_frame
        # The screen reader (captured BGR -> perception.screens.ScreenReading): with one, a
        # level that is not the game's own next one is started by hil.menus.MenuDriver from
        # the pictures; without, by the console's start_level.
        self.screens = screens
        self._stages(settings, console)
        self._link_and_decision(settings, console, policy, planner)
        self.p1 = self._seat(settings, console, p1_policy, planner) if settings.both else None
        self.levels.p1 = None if self.p1 is None else self.p1.tracker
        self.last_obs: Observation | None = None
        # Starting each level: the console's presses, or the menus read off the pictures.
        self.starts = LevelStarts(
            console,
            self.wire,
            self.clock,
            self.tracker,
            self.levels,
            self.stats,
            self.log,
            self.say,
            self.now,
            screens=screens,
            start_menu_frames=settings.start_menu_frames,
            link_poll_s=self.LINK_POLL_S,
            on_begin=self._p1_begin if self.p1 is not None else None,
            both=settings.opponent if settings.both else None,
            end_frame=self._round_end if settings.opponent is not None else None,
        )
        self.stall_log: list[dict[str, Any]] = []  # every stall: ms, where, cpu_ms
        self._last_small: U8 | None = None  # the last captured picture, subsampled
        self.interrupted = False
        # Why the run stopped before every level was played (the unfinished level's result).
        self.end_reason = "unfinished"
        self.link_fatal: str | None = None  # why the link cannot work (LinkFatal), if so
        self.t_start = time.perf_counter()

    def _stages(self, settings: RunSettings, console: Console) -> None:
        """The pipeline's stages, each with its own state: the frame clock, the schedule, the
        workers, the tracker, the controller link, the statistics, the level flow."""
        period = 1e9 / 60.0988
        jitter_ns = (4.0 * settings.jitter_ms + 1.0) * 1e6
        config = TrackerConfig(
            latency_ns=settings.latency_frames * period,
            jitter_ns=jitter_ns,
            opponent=settings.opponent,
        )
        self.config = config
        self.clock = FrameClock(config.hz, config.window_us)
        self.schedule = Schedule()
        self.p1_schedule = Schedule() if settings.both else None  # port 1's (Seat)
        # Work no frame may wait for (pondering, the intro's tables): a thread in real time
        # (hil.loop.worker).
        self.worker = make_worker(console.lockstep)
        self.slow_worker = make_worker(console.lockstep)  # the full policy after a quick one
        self.tracker = Tracker(
            config,
            log=self._tracker_event,
            clock=self.clock,
            schedule=self.schedule,
            worker=self.worker,
        )
        # In lockstep the console waits for the runtime, so a write or reply that stalls on a
        # busy host is not a lost device (seen at load 20: a 0.5 s pty write timeout dropped the
        # link and a pill); a real-time console keeps the firmware's 0.5 s.
        self.ctl = Controller(
            lambda: console.port,
            self.log,
            self.say,
            timeout_s=LOCKSTEP_LINK_TIMEOUT_S if console.lockstep else 0.5,
            now_ns=console.now_ns,
            # bot against bot: the link keeps STATUS as the firmware sends it, both ports'
            nes_port=1 if settings.opponent is None or settings.both else 2,
            needs=(1, 2) if settings.both else None,
        )
        self.stats = Stats()
        self.feed_frames = (
            settings.feed_frames
            if console.lockstep
            else max(settings.feed_frames, settings.realtime_feed_frames)
        )
        self.levels = Levels(
            settings.levels,
            self.log,
            start_wait_frames=settings.start_wait_frames,
            stop_on_top_out=settings.stop_on_top_out,
            costs=self.costs,
            matches=settings.matches if settings.opponent is not None else None,
        )

    def _link_and_decision(
        self, settings: RunSettings, console: Console, policy: Policy, planner: Planner
    ) -> None:
        """The link as the loop uses it (hil.loop.wire) and the decision (hil.loop.decision)."""
        # The link as the loop uses it (hil.loop.wire): STATUS in, SCHEDULE out, reconnects.
        self.wire = Wire(
            self.ctl,
            self.clock,
            self.schedule,
            self.stats,
            self.log,
            self.now,
            on_latched=self._latched,
            on_renumber=self._renumbered,
            margin_ms=settings.margin_ms,
            feed_frames=self.feed_frames,
            port=2 if self.p1_schedule is not None else None,
            others=None if self.p1_schedule is None else {1: self.p1_schedule},
        )
        # The decision (hil.loop.decision): the policy, the planner, the placement last sent;
        # it reaches the link through the Runtime's helpers.
        self.decision = Decision(
            policy,
            planner,
            self.tracker,
            self.schedule,
            first_free=self.wire.first_free,
            feed=lambda ahead: self.wire.feed(ahead=ahead),
            send=self.wire.send,
            lockstep=console.lockstep,
            feed_frames=self.feed_frames,
            log=self.log.write,
            stats=self.stats,
            ponder=settings.ponder,
            now_frame=lambda: self.clock.frame_at(self.now()),
            horizon=self.wire.horizon,
            worker=self.worker,
            slow_worker=self.slow_worker,
        )

    def _seat(
        self, settings: RunSettings, console: Console, policy: Policy | None, planner: Planner
    ) -> Seat:
        """Player 1's stages (:class:`Seat`) on port 1: its tracker sees player 2 as its
        opponent; its events are logged with ``player: 1``."""
        from dataclasses import replace

        assert settings.opponent is not None and policy is not None
        assert self.p1_schedule is not None
        lp = settings.levels[0]
        config = replace(self.config, opponent=(lp.level, lp.speed), player=1)
        worker = make_worker(console.lockstep)
        slow_worker = make_worker(console.lockstep)
        tracker = Tracker(
            config,
            log=lambda ev: self.log.write(
                ev.name, player=1, **{k: v for k, v in ev.to_json().items() if k != "event"}
            ),
            clock=self.clock,
            schedule=self.p1_schedule,
            worker=worker,
        )
        decision = Decision(
            policy,
            planner,
            tracker,
            self.p1_schedule,
            first_free=self.wire.first_free,
            feed=lambda ahead: self.wire.feed(ahead=ahead, port=1),
            send=lambda first, masks, what: self.wire.send(first, masks, what, port=1),
            lockstep=console.lockstep,
            feed_frames=self.feed_frames,
            log=lambda name, **data: self.log.write(name, player=1, **data),
            stats=self.stats,
            ponder=settings.ponder,
            now_frame=lambda: self.clock.frame_at(self.now()),
            horizon=self.wire.horizon,
            worker=worker,
            slow_worker=slow_worker,
        )
        return Seat(tracker, self.p1_schedule, decision, worker, slow_worker)

    def _latched(self) -> None:
        """A STATUS was taken: each tracker steps its shadow state."""
        self.tracker.advance()
        if self.p1 is not None:
            self.p1.tracker.advance()

    def _p1_begin(self, start_frame: int, last_start: int | None, wait: bool) -> None:
        """A round's Start was sent (hil.loop.starts): player 1's tracker begins it too, at
        player 1's level and speed."""
        assert self.p1 is not None and self.s.opponent is not None
        self.p1.tracker.match_goes_on = self.tracker.match_goes_on
        level, speed = self.s.opponent
        self.p1.tracker.begin_level(level, speed, start_frame, last_start, wait_for_start=wait)

    def _round_end(self) -> int | None:
        """Two players: the frame the last round ended in. A shadow that reached its own end
        (a clear, a top-out) knows it exactly; a round ended by the opponent's clear leaves the
        loser's shadow short of it, so then the other player's shadow (bot against bot), else
        the frame the tracker saw the end in (at or after the real one: a Start timed from it
        comes late, never early)."""
        for tracker in self.trackers:
            if tracker.end_frame is not None:
                return tracker.end_frame
        lv = self.tracker.lv
        return None if lv is None else lv.end_frame

    @property
    def trackers(self) -> list[Tracker]:
        """The run's trackers: player 2's (or the one player's), then player 1's (both)."""
        return [self.tracker] + ([self.p1.tracker] if self.p1 is not None else [])

    @property
    def cannot_start(self) -> str | None:
        """Why the run could not start a level (one line), None when it could."""
        return self.starts.cannot_start

    @property
    def done(self) -> bool:
        """Every level played, or the run ends (a top-out on a rig, a level it cannot start)."""
        return self.levels.done

    @property
    def level_index(self) -> int:
        """Index into ``settings.levels`` of the level in play (-1 before the first)."""
        return self.levels.index

    @property
    def results(self) -> list[dict[str, Any]]:
        """One record per level played (level_end events)."""
        return self.levels.results

    @property
    def last_placement(self) -> dict[str, Any] | None:
        """The placement last sent (Decision.last): pill, placement, rotation, row, col,
        lock_frame; None before the first."""
        return self.decision.last

    # ---- logging ----------------------------------------------------------------------------

    def _renumbered(self, shift: int) -> None:
        """A restarted firmware numbers frame g as g - shift from now on (hil.loop.wire)."""
        for tracker in self.trackers:
            tracker.renumber(shift)
        self.levels.renumber(shift)

    def _tracker_event(self, ev: Event) -> None:
        self.log.write(ev.name, **{k: v for k, v in ev.to_json().items() if k != "event"})

    # ---- levels -------------------------------------------------------------------------------

    # ---- the loop ------------------------------------------------------------------------

    def warm_up(self) -> None:
        """The first call of each model before the console starts, not on its first frames:
        an onnxruntime session's first run takes 100-400 ms (the reader's, the policy's), and
        a real-time console does not wait. No state of the run changes."""
        warm = getattr(self.reader, "warm_up", None)
        if warm is not None:
            warm()
        self.decision.warm_up()

    def run(self) -> dict[str, Any]:
        """Plays until every level has ended, the frame budget is spent, the capture ends, or
        the link stays lost past ``reconnect_timeout_s``. Returns the summary (also logged)."""
        self.log.write("run_start", settings=asdict(self.s), capture=self.source.describe())
        switch = sys.getswitchinterval()
        if not self.console.lockstep:
            # The loop's thread gets the interpreter back from the worker's Python within a
            # millisecond, not the default 5.
            sys.setswitchinterval(REALTIME_SWITCH_INTERVAL_S)
        try:
            self.wire.connect(self.say)
            while not self.done:
                if not self._step():
                    break
        except LinkFatal as exc:
            self.say(str(exc))
            self.link_fatal = str(exc)
            self.end_reason = "link_fatal"
        except KeyboardInterrupt:  # Ctrl-C, and SIGTERM / SIGHUP (hil run turns them into it)
            self.interrupted = True
            self.log.write("interrupted")
            self.end_reason = "interrupted"
        finally:
            self.wire.release()
            self.worker.close()
            self.slow_worker.close()
            self.decision.close()
            if self.p1 is not None:
                self.p1.worker.close()
                self.p1.slow_worker.close()
                self.p1.decision.close()
            sys.setswitchinterval(switch)
        now = self.clock.frame_at(self.now()) if self.clock.ready else None
        self.levels.finish(self.tracker, now, self.end_reason)
        return self.summary()

    def _step(self) -> bool:
        if not self.wire.reconnect(self.s.reconnect_timeout_s):
            self.say("controller link did not come back; ending the run")
            self.log.write("gave_up", reason="controller link lost")
            self.end_reason = "link_lost"
            return False
        try:
            frame = self._next_frame()
        except CaptureError as exc:
            self.log.write("capture_end", message=str(exc))
            self.say(f"the capture ended: {exc}")
            self.end_reason = "capture_end"
            return False
        if frame is None:
            self.stats.capture_losses += 1
            self.log.write("capture_timeout", timeout_s=self.s.frame_timeout_s)
            self.say(f"no captured frame for {self.s.frame_timeout_s} s (capture unplugged?)")
            return True
        t_got = time.perf_counter_ns()
        lap = Laps(t_got)
        events: list[Event] = []
        self.stats.frames += 1
        if self._repeated(frame):
            # The card sent the picture before again (it stalled, or its clock beat the
            # console's): no new information, and its newer time would make it look stale.
            self.stats.repeated_frames += 1
        else:
            if hasattr(self.reader, "virus_label"):
                self.reader.virus_label = any(t.wants_virus_frame for t in self.trackers)
            obs1 = None
            if self.p1 is not None:
                obs1, obs = self.reader.pair(frame)  # type: ignore[attr-defined]
            else:
                obs = self.reader(frame)
            t_read = lap("read")
            self.stats.read_ms.append((t_read - t_got) / 1e6)
            # The statuses are read after the decision (below), off the path from a frame's
            # arrival to the schedule on the wire: the tracker's shadow state and the decision
            # take the masks of frames not yet reported from what was scheduled
            # (Schedule.mask_of), and the newest status is of a frame the capture shows only
            # ~latency frames later.
            events = self.tracker.on_frame(frame.time_ns, obs)
            if self.p1 is not None and obs1 is not None:
                events += self.p1.tracker.on_frame(frame.time_ns, obs1)
            self.last_obs = obs
            self._latency_sample(frame)
            self._shown_check(frame)
            lap("tracker")
        self.decision.on_frame(t_got, linked=self.wire.linked)
        if self.p1 is not None:
            self.p1.decision.on_frame(t_got, linked=self.wire.linked)
        lap("decision")
        self.wire.poll()
        lap("link")
        self.starts.step()
        lap("level_start")
        self.wire.feed()
        lap("feed")
        if not self.starts.menus_ran:  # (the menus read their frames in a loop of their own)
            self.stats.handle_ms.append((time.perf_counter_ns() - t_got) / 1e6)
        if self.on_frame is not None:
            self.on_frame(self, frame)
            lap("recording")
        if self.view is not None:
            self.view(self.snapshot(frame, events))
            lap("view")
        self._stall(lap)
        last = self.stats.last_frame
        if last is not None and self.stats.first_frame is not None:
            if last - self.stats.first_frame >= self.s.max_frames:
                self.log.write("frame_budget_spent", frames=self.s.max_frames)
                self.end_reason = "frame_budget"
                return False
        return True

    # While waiting for the next captured frame the link is read every LINK_POLL_S.
    LINK_POLL_S = 0.001

    def _repeated(self, frame: Frame) -> bool:
        """The captured picture is the one before it again, byte for byte (compared on every
        4th row and column: 0.1 ms at 720p). A picture with noise never repeats by chance; a
        noiseless one that repeats shows an unchanged screen, which tells nothing new."""
        small = np.ascontiguousarray(frame.image[::4, ::4])
        same = self._last_small is not None and np.array_equal(small, self._last_small)
        self._last_small = small
        return same

    def _stall(self, lap: Laps) -> None:
        """A frame whose handling took longer than a console frame is a stall: logged with
        where the time went, the longest kept for the summary."""
        total = lap.total_ms()
        if total < STALL_MS or self.starts.menus_ran:
            # (A level started from the menus reads its frames in MenuDriver's own loop.)
            self.starts.menus_ran = False
            return
        where = max(lap.parts, key=lambda k: lap.parts[k])
        parts = {k: round(v, 2) for k, v in lap.parts.items()}
        cpu = round(lap.cpu_ms(), 2)
        self.stats.stalls += 1
        frame = self.tracker.last_matched
        self.stall_log.append({"ms": round(total, 2), "where": where, "cpu_ms": cpu})
        if total > self.stats.longest_stall.get("ms", 0.0):
            self.stats.longest_stall = {
                "ms": round(total, 2),
                "where": where,
                "cpu_ms": cpu,
                "frame": frame,
            }
        self.log.write(
            "stall", ms=round(total, 2), where=where, cpu_ms=cpu, parts=parts, frame=frame
        )

    def _next_frame(self) -> Frame | None:
        """The next captured frame (None after ``frame_timeout_s`` without one), reading the
        controller link while it waits. A STATUS is stamped with the host time it is read at,
        and FrameClock takes the device-to-host offset from the least late of them: read only
        once per captured frame, after the frame's handling, every STATUS was read 2 ms late
        or more for seconds at a time (the phase between captures and latches drifts by one
        frame in ~10 s at 60 Hz against 60.0988), so the clock put each latch ~2 ms late,
        captures taken near a frame boundary were given the frame before the one they show,
        and the level start's alignment chose a frameCounter phase one off in 9 of 10
        real-time level-20 runs on the simulated console (docs/RUN.md, "Frame clock")."""
        deadline = time.monotonic() + self.s.frame_timeout_s
        while True:
            left = deadline - time.monotonic()
            frame = self.source.newest(max(0.0, min(self.LINK_POLL_S, left)))
            if frame is not None or left <= 0:
                return frame
            self.wire.poll()
            # A card that stalls or drops frames for longer than the firmware's watchdog
            # (500 ms) must not silence the host: the feed and its pings go on while waiting
            # (30 dropped captures tripped the watchdog 5 times in 5 on the real game).
            self.wire.feed()

    def _latency_sample(self, frame: Frame) -> None:
        g = self.tracker.frame_match
        clock = self.clock
        if g is None or not clock.ready:
            return
        done = clock.latch_ns(g) + clock.period_ns
        self.stats.capture_latency_frames.append((frame.time_ns - done) / clock.period_ns)

    # Captures outside their frames logged per run (shown_outside events; all are counted).
    SHOWN_OUTSIDE_LOGGED = 50

    def _shown_check(self, frame: Frame) -> None:
        """Where the console knows which of its frames a capture shows (the truth's
        ``console_frame``: the simulated console, the emulator), whether it lies in the frames
        the clock mapping says the capture can show (Tracker.shown_frames): a capture outside
        them is compared with the wrong frames' predictions. Counted (``shown_frames_outside``
        in the summary) and the first SHOWN_OUTSIDE_LOGGED logged (``shown_outside``); with the
        truth's ``latch_host_ns`` the clock mapping's error goes to ``clock_error_ms``."""
        truth = getattr(frame, "truth", None)
        if not isinstance(truth, dict):
            return
        g = truth.get("console_frame")
        if g is None or not self.clock.ready or truth.get("card_repeat"):
            return  # (a card's repeat shows an older frame than its arrival says: not the clock)
        shown = self.tracker.shown_frames(frame.time_ns)
        self.stats.shown_checked += 1
        latch = truth.get("latch_host_ns")
        if latch is not None:
            self.stats.clock_error_ms.append((self.clock.latch_ns(int(g)) - latch) / 1e6)
        if g in shown:
            return
        self.stats.shown_outside += 1
        if self.stats.shown_outside <= self.SHOWN_OUTSIDE_LOGGED:
            self.log.write(
                "shown_outside",
                frame=int(g),
                shown=[shown.start, shown.stop - 1],
                clock_samples=self.clock.samples,
                clock_error_ms=None
                if latch is None
                else round((self.clock.latch_ns(int(g)) - latch) / 1e6, 3),
            )

    # ---- reporting ------------------------------------------------------------------------

    def costs(self) -> dict[str, Any]:
        """What real time has cost so far (hil.loop.report.costs)."""
        return report.costs(self)

    def snapshot(self, frame: Frame, events: list[Event]) -> dict[str, Any]:
        """What the live view shows (hil.loop.report.snapshot)."""
        return report.snapshot(self, frame, events)

    def summary(self) -> dict[str, Any]:
        """The run's summary (hil.loop.report.summary), also logged."""
        return report.summary(self)


# ---- one run ------------------------------------------------------------------------------


def play(
    settings: RunSettings,
    console: Console,
    reader: Reader,
    policy: Policy,
    planner: Planner,
    *,
    log: EventLog | None = None,
    view: Callable[[dict[str, Any]], None] | None = None,
    say: Callable[[str], None] | None = None,
    on_frame: Callable[[Runtime, Frame], None] | None = None,
    screens: Callable[[Any], Any] | None = None,
    p1_policy: Policy | None = None,
) -> dict[str, Any]:
    """``hil run`` on any console (hil.consoles.base.Console: the simulated one, the emulator,
    the rig): the capture chain's latency and jitter are the console's, the console starts, the
    Runtime plays ``settings.levels``, the console closes. Returns the summary with the
    console's own section (``console.report()``: "sim", "emu"). ``p1_policy``: player 1's
    policy when the bot plays both ports (``settings.both``). Raises what the console's
    ``start`` raises (the emulator's menus: EmuError). The caller closes the console."""
    settings.latency_frames = console.latency_frames
    settings.jitter_ms = console.jitter_ms
    rt = Runtime(
        settings,
        console,
        reader,
        policy,
        planner,
        log=log,
        view=view,
        say=say,
        on_frame=on_frame,
        screens=screens,
        p1_policy=p1_policy,
    )
    rt.warm_up()
    console.start()
    return rt.run()
