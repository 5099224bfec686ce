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

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from hil.consoles.base import CannotStart, CaptureError, Console, Frame, LevelEnd, chains_to
from hil.link.controller import Controller
from hil.link.link import Link, LinkError, LinkFatal
from hil.loop.clock import FrameClock, Renumbering
from hil.loop.decision import Decision, Planner, Policy
from hil.loop.eventlog import EventLog
from hil.loop.levels import LevelPlan, Levels, peak_rss_mb
from hil.loop.observation import Reader
from hil.loop.policies import (  # noqa: F401 - the names hil.play and the tests import here
    make_policy,
    next_pill_observations,
    pick_policy,
    pick_reader,
)
from hil.loop.schedule import Schedule
from hil.loop.stats import STALL_MS, Laps, Stats, margin_summary, percentiles
from hil.loop.tracker import Event, Tracker, TrackerConfig
from hil.loop.worker import make_worker
from perception.observation import Observation

U8 = npt.NDArray[np.uint8]
# Readings of a blank picture in a row after which the menu start presses Start (a cutscene).
BLANK_START_READS = 240


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


MAX_SCHEDULE = 64  # masks one SCHEDULE carries (firmware/PROTOCOL.md)
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


REALTIME_SWITCH_INTERVAL_S = 0.001  # the interpreter's switch interval while in real time
# In the menus "no buttons" is kept this far ahead (frames): a screen read takes 30-110 ms on a
# busy 2-core machine, and with the loop's 30 frames the firmware ran out for 12-14 frames at
# the start of runs beside two CPU-bound processes. A menu press replaces what was fed.
MENU_FEED_FRAMES = 120


# ---- the runtime ----------------------------------------------------------------------------


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
    ) -> None:
        if not settings.levels:
            raise ValueError("hil run needs at least one level to play")
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
        self.cannot_start: str | None = None
        period = 1e9 / 60.0988
        jitter_ns = (4.0 * settings.jitter_ms + 1.0) * 1e6
        # The pipeline's stages, each with its own state: the frame clock (firmware frames <->
        # host time), the schedule (every frame's byte as the host knows it), the tracker
        # (the shadow state, checked against each observation), the level flow.
        config = TrackerConfig(latency_ns=settings.latency_frames * period, jitter_ns=jitter_ns)
        self.clock = FrameClock(config.hz, config.window_us)
        self.schedule = Schedule()
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
        )
        # The decision (hil.loop.decision): the policy, the planner, the placement last sent;
        # it reaches the link through the Runtime's helpers.
        self.decision = Decision(
            policy,
            planner,
            self.tracker,
            self.schedule,
            first_free=self._first_free,
            feed=lambda ahead: self._feed(ahead=ahead),
            send=self._schedule,
            lockstep=console.lockstep,
            feed_frames=self.feed_frames,
            log=self.log.write,
            stats=self.stats,
            ponder=settings.ponder,
            now_frame=lambda: self.clock.frame_at(self.now()),
            horizon=self._horizon,
            worker=self.worker,
            slow_worker=self.slow_worker,
        )
        self.last_ping_frame = -(10**9)
        self.last_obs: Observation | None = None
        # After a reconnection, until the firmware's frames are placed on the run's numbers:
        # the placing, and the STATUS messages held meanwhile.
        self.renumbering: Renumbering | None = None
        self._held: list[tuple[Any, int]] = []
        self._menus_ran = False  # this frame's handling ran the menus (not a stall)
        self.stall_log: list[dict[str, Any]] = []  # every stall: ms, where, cpu_ms
        self._last_small: U8 | None = None  # the last captured picture, subsampled
        # underruns, watchdog trips, arm misses of the firmware's earlier boots in this run
        self._counter_base = (0, 0, 0)
        self.interrupted = False
        # Why the run stopped before every level was played (the unfinished level's result).
        self.end_reason = "unfinished"
        self.link_fatal: str | None = None  # why the link cannot work (LinkFatal), if so
        self.t_start = time.perf_counter()

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

    def _tracker_event(self, ev: Event) -> None:
        self.log.write(ev.name, **{k: v for k, v in ev.to_json().items() if k != "event"})

    # ---- link helpers -------------------------------------------------------------------------

    def _poll(self) -> None:
        link = self.ctl.link
        if link is None:
            return
        try:
            link.poll()
        except LinkError as exc:
            self._link_lost(exc)
            return
        # Every STATUS the link has read (also those read while a request waited for its
        # reply), taken out of its bounded deque: Link.poll's return value would miss those,
        # and once the deque is full (4096) it reports nothing new.
        statuses = list(link.statuses)
        link.statuses.clear()
        self._anomalies(link)
        now = self.now()
        arrived = [(st, now) for st in statuses]
        if self.renumbering is not None:
            for st in statuses:
                self.renumbering.on_status(st.frame, st.first_latch_us, now)
            self._held += arrived
            arrived = self._renumber()
        for st, at in arrived:
            self.clock.on_status(st.frame, st.first_latch_us, at)
            self.schedule.on_latched(st.frame, st.mask)
            self.tracker.advance()
            if self.stats.first_frame is None:
                self.stats.first_frame = st.frame
            self.stats.last_frame = st.frame
            # The firmware's counters are cumulative since its boot; a firmware that restarted
            # (replugged) counts from 0 again on top of what the run had seen.
            base = self._counter_base
            underruns = base[0] + st.underruns
            trips = base[1] + st.watchdog_trips
            if underruns > self.stats.underruns or trips > self.stats.watchdog_trips:
                self.log.write(
                    "underrun" if underruns > self.stats.underruns else "watchdog_trip",
                    frame=st.frame,
                    underruns=underruns,
                    watchdog_trips=trips,
                    fed_to=self.schedule.feed_end,
                )
            self.stats.underruns = max(self.stats.underruns, underruns)
            self.stats.watchdog_trips = max(self.stats.watchdog_trips, trips)
            self.stats.arm_misses = max(self.stats.arm_misses, base[2] + st.arm_misses)

    def _renumber(self) -> list[tuple[Any, int]]:
        """After a reconnection: once the firmware's new numbering is placed on the run's
        (hil.loop.clock.Renumbering), moves everything numbered by frame to it and returns
        the STATUS messages held meanwhile with their arrival times, to be taken in order; []
        until then."""
        r = self.renumbering
        assert r is not None
        shift = r.shift
        if shift is None:
            return []
        self.renumbering = None
        held, self._held = self._held, []
        if not self.clock.ready:
            return held
        # The firmware's clock may have begun again too: learn it afresh, from what was held
        # and the console's phase on the old grid.
        grid = r.grid_sample(shift)
        self.clock.reset()
        for device_us, host_ns in [*r.pongs, *([grid] if grid else [])]:
            self.clock.on_pong(device_us, host_ns)
        if shift:
            self.tracker.renumber(shift)
            self.schedule.renumber(shift)
            self.levels.renumber(shift)
            if self.stats.first_frame is not None:
                self.stats.first_frame -= shift
        self.log.write(
            "frames_renumbered",
            shift=shift,
            estimate=round(r.estimate or 0.0, 3),
            statuses=len(r.statuses),
            first_new_frame=r.statuses[0][0],
        )
        return held

    def _anomalies(self, link: Link) -> None:
        """Logs what the link found wrong in the device's replies (hil.link.Anomaly) and
        counts each kind for the summary."""
        while link.anomalies:
            a = link.anomalies.popleft()
            n = self.stats.link_anomalies
            n[a.kind] = n.get(a.kind, 0) + 1
            self.log.write("link_anomaly", kind=a.kind, detail=a.detail)

    def _ping(self) -> None:
        link = self.ctl.link
        if link is None:
            return
        try:
            pong = link.ping()
        except LinkError as exc:
            self._link_lost(exc)
            return
        # The reply's arrival bounds the offset from above (the min filter keeps the best).
        if self.renumbering is not None:  # a firmware that may have restarted its clock
            self.renumbering.on_pong(pong.device_us, self.now())
        else:
            self.clock.on_pong(pong.device_us, self.now())

    def _link_lost(self, exc: Exception) -> None:
        self.stats.link_losses += 1
        self.ctl.lost(exc)
        # The firmware serves the frame it had armed when the host went, then no buttons:
        # what was scheduled up to the frame armed now played (as far as the host can tell;
        # the frames after the last STATUS read are not known otherwise), nothing after it.
        now = self.now()
        armed = self.clock.first_schedulable(now) - 1 if self.clock.ready else -1
        self.schedule.released(max(armed, self.clock.last_frame))

    def _schedule(self, first: int, masks: Sequence[int], what: str) -> bool:
        """Schedules ``masks`` from console frame ``first``. A hole between what was scheduled
        before and ``first`` would be an underrun for each frame in it (the firmware streams
        from its first frame): it is filled with "no buttons" where it can still be reached.
        False when the link is gone."""
        link = self.ctl.link
        if link is None or not masks or self.renumbering is not None:
            # (After a reconnection the firmware may count frames from 0 again: nothing is
            # scheduled until its STATUS messages say how they are numbered now.)
            return False
        hole = self.schedule.hole(first, self._first_free()) if first > 0 else range(0)
        if hole:
            if len(hole) + len(masks) > MAX_SCHEDULE:
                if not self._send(hole.start, [0] * len(hole), "feed"):
                    return False
            else:
                masks, first = [0] * len(hole) + list(masks), hole.start
        return self._send(first, masks, what)

    def _send(self, first: int, masks: Sequence[int], what: str) -> bool:
        link = self.ctl.link
        if link is None or not masks:
            return False
        data = bytes(int(m) & 0xFF for m in masks)
        try:
            ack = link.schedule(first, data)
        except LinkError as exc:
            self._link_lost(exc)
            return False
        self.stats.schedules += 1
        self._anomalies(link)
        self.schedule.on_schedule(first, data)
        self.schedule.last_tx_frame = self.clock.frame_at(self.now())
        if ack.late or ack.too_far:
            self.stats.late_schedules += int(ack.late > 0)
            self.stats.late_frames += ack.late
            self.log.write(
                "late_schedule",
                what=what,
                first_frame=first,
                count=len(data),
                late=ack.late,
                too_far=ack.too_far,
            )
        return True

    def _horizon(self) -> int | None:
        """The last console frame a SCHEDULE sent now may fill: the firmware's queue past the
        newest STATUS, less a margin of 8 frames (None while the link or a status is missing)."""
        link = self.ctl.link
        if link is None or link.last_status_frame is None or link.hello is None:
            return None
        return link.last_status_frame + link.hello.queue_capacity - 8

    def _first_free(self, extra_ms: float = 0.0) -> int:
        clock = self.clock
        margin = self.s.margin_ms + extra_ms
        if clock.samples < 60:  # the offset and period are still rough
            margin += 5.0
        return clock.first_schedulable(self.now(), margin * 1e6)

    def _feed(self, ahead: int | None = None) -> None:
        """Keeps "no buttons" scheduled ``feed_frames`` ahead; pings when quiet."""
        clock, sched = self.clock, self.schedule
        if self.ctl.link is None or not clock.ready:
            return
        now_frame = clock.frame_at(self.now())
        want = now_frame + (ahead if ahead is not None else self.feed_frames)
        if sched.feed_end < want - self.feed_frames // 2:  # top up in chunks
            # Not time-critical: a frame of slack so a feed is never late itself.
            first = max(sched.feed_end + 1, self._first_free(extra_ms=16.7))
            if want >= first:
                self._schedule(first, [0] * (want - first + 1), "feed")
        if now_frame - self.last_ping_frame >= 30 or now_frame - sched.last_tx_frame >= 6:
            # Keeps the watchdog fed, and each PONG refines the device-to-host clock offset.
            self._ping()
            sched.last_tx_frame = self.last_ping_frame = now_frame

    # ---- levels -------------------------------------------------------------------------------

    def _level_flow(self) -> None:
        """Starts the next level when the level flow (hil.loop.levels) says it is due, the way
        the console starts it (Console.start_level)."""
        if self.ctl.link is None or not self.clock.ready:
            return
        now_frame = self.clock.frame_at(self.now())
        nxt = self.levels.next_due(now_frame, self.tracker, self.stats.frames)
        if nxt is None:
            return
        first = self._first_free()
        previous = self.levels.previous(self.tracker.end_frame)
        if self.screens is not None and not chains_to(previous, nxt.level, nxt.speed):
            self._menu_start(nxt.level, nxt.speed, previous)
            return
        try:
            presses = self.console.start_level(nxt.level, nxt.speed, first, previous)
        except CannotStart as e:
            self._cannot_start(str(e))
            return
        if presses.reset:
            self.log.write("console_reset")
        masks, first = presses.masks, presses.first_frame
        ok = True
        for k in range(0, len(masks), 60):  # SCHEDULE carries at most 64 frames
            ok &= self._schedule(first + k, masks[k : k + 60], "start")
        if ok:
            self.levels.started()
            self.tracker.begin_level(nxt.level, nxt.speed, presses.start_frame, presses.last_start)
            self.log.write(
                "start_pressed", frame=presses.start_frame, level=nxt.level, speed=nxt.speed
            )

    def _cannot_start(self, message: str) -> None:
        self.say(message)
        self.log.write("cannot_start", message=message)
        self.cannot_start = message
        self.levels.done = True

    def _shown_frame(self, frame: Frame) -> int:
        """The console frame a captured frame shows, at the low end of the capture chain's
        latency and jitter (a decision on it then never rests on a picture older than it
        thinks)."""
        cfg = self.tracker.cfg
        return self.clock.frame_at(frame.time_ns - cfg.latency_ns - cfg.jitter_ns) - 1

    def _menu_start(self, level: int, speed: int, previous: LevelEnd | None) -> None:
        """Starts ``level`` at ``speed`` through the menus, closed-loop on the captured
        pictures (hil.menus.MenuDriver: from the title, the options screen, the demo, a stage
        clear or a game over; a finished level's screen by the soft reset). The run ends with
        one line (``cannot_start``) when the screen does not come to show the level."""
        from hil.menus import MenuDriver, MenuError

        assert self.screens is not None
        self._menus_ran = True
        screens = self.screens
        seen: list[str] = []
        blank = [0]

        def read(image: Any) -> Any:
            # The attract demo runs only from the title (toTitle's waitFrames): a level screen
            # read as the demo (a level's intro, its bottle nearly empty like the demo's) when
            # no title came before it is the level (its Start would pause it).
            r = screens(image)
            # A screen that stays blank (or unknown to the reader: the cutscene between
            # levels, toNextLevel [$9E66], which the simulated console draws black) waits
            # for Start: pressed once every BLANK_START_READS readings, as on a game over.
            blank[0] = blank[0] + 1 if r.kind == "BLANK" else 0
            if blank[0] >= BLANK_START_READS:
                blank[0] = 0
                r = dataclasses.replace(r, kind="GAME_OVER")
            if r.kind == "DEMO":
                before = [k for k in seen if k != "BLANK"]
                if not (
                    (before and before[-1] in ("TITLE", "DEMO"))
                    or (not before and previous is None)
                ):
                    r = dataclasses.replace(r, kind="LEVEL")
            seen.append(r.kind)
            return r

        last = [time.perf_counter_ns(), time.thread_time_ns()]

        def newest() -> tuple[int, Any] | None:
            # A pass of the menus' loop longer than 6 frames is logged (menu_stall: not a
            # stall of the loop, the menus are not time-critical, but it says where the time of
            # a run's start went).
            t, cpu = time.perf_counter_ns(), time.thread_time_ns()
            if t - last[0] > 6 * STALL_MS * 1e6:
                self.log.write(
                    "menu_stall",
                    ms=round((t - last[0]) / 1e6, 2),
                    cpu_ms=round((cpu - last[1]) / 1e6, 2),
                    screens=seen[-3:],
                )
            self._poll()
            self._feed(ahead=MENU_FEED_FRAMES)
            last[0], last[1] = time.perf_counter_ns(), time.thread_time_ns()
            if self.ctl.link is None:
                raise MenuError("the controller link was lost while setting the options screen")
            frame = self.source.newest(self.LINK_POLL_S)  # the feed goes on while it waits
            if frame is None or not self.clock.ready:
                return None
            self.stats.menu_frames += 1
            return self._shown_frame(frame), frame.image

        def send(masks: Sequence[int]) -> int:
            # Not time-critical: a frame of slack so a menu press is never late.
            first = self._first_free(extra_ms=16.7)
            for k in range(0, len(masks), 60):  # SCHEDULE carries at most 64 frames
                if not self._schedule(first + k, masks[k : k + 60], "menu"):
                    raise MenuError("the controller link was lost while setting the options screen")
            return first

        # After a finished level, a level screen that stays is the game's chained level: left by
        # the soft reset soon (a stage clear read late has taken the reset's Start as its own).
        wait = 400 if previous is None else 90
        driver = MenuDriver(
            newest, send, read, max_frames=self.s.start_menu_frames, level_wait=wait
        )
        try:
            res = driver.start(level, speed, reset_ok=previous is not None)
        except (MenuError, ValueError) as e:
            self._cannot_start(f"cannot start level {level} speed {speed}: {e}")
            return
        except CaptureError as e:
            self.log.write("capture_end", message=str(e))
            self._cannot_start(f"cannot start level {level} speed {speed}: {e}")
            return
        self.levels.started()
        self.tracker.begin_level(level, speed, res.start_frame)
        self.log.write(
            "start_pressed",
            frame=res.start_frame,
            level=level,
            speed=speed,
            menus=res.screens,
            menu_presses=res.presses,
            menu_frames=res.frames,
        )

    # ---- the loop ------------------------------------------------------------------------

    def warm_up(self) -> None:
        """The first call of each model before the console starts, not on its first frames:
        an onnxruntime session's first run takes 100-400 ms (the reader's, the policy's), and
        a real-time console does not wait. No state of the run changes."""
        warm = getattr(self.reader, "warm_up", None)
        if warm is not None:
            warm()
        game = engine.Game(0, 1, 0x8988)
        for _ in range(400):
            if int(game.next_action) == 0 and int(game.phase) == 1:
                break
            game.step(0)
        plan = self.decision.planner(game, np.zeros(0, np.uint8))
        if len(plan):
            self.decision.policy.choose(game, plan.reachable)

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
            if not self.ctl.connect():
                self.say(
                    f"cannot open the controller port {self.ctl._path()} "
                    f"({self.ctl.last_error}); retrying"
                )
                self.ctl.lost_at = self.ctl.now_s()
            else:
                self._ping()
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
            self._release()
            self.worker.close()
            self.slow_worker.close()
            sys.setswitchinterval(switch)
        now = self.clock.frame_at(self.now()) if self.clock.ready else None
        self.levels.finish(self.tracker, now, self.end_reason)
        return self.summary()

    def _step(self) -> bool:
        if self.ctl.link is None:
            if self.ctl.maybe_reconnect():
                self.renumbering, self._held = Renumbering(self.clock), []
                if self.ctl.restarted:  # a new boot: its counters start from 0
                    st = self.stats
                    self._counter_base = (st.underruns, st.watchdog_trips, st.arm_misses)
                self._ping()
            elif (
                self.ctl.lost_at is not None
                and self.ctl.now_s() - self.ctl.lost_at > self.s.reconnect_timeout_s
            ):
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
                self.reader.virus_label = self.tracker.wants_virus_frame
            obs = self.reader(frame)
            t_read = lap("read")
            self.stats.read_ms.append((t_read - t_got) / 1e6)
            # The statuses are read after the decision (below), off the path from a frame's
            # arrival to the schedule on the wire: the tracker's shadow state and the decision
            # take the masks of frames not yet reported from what was scheduled
            # (Schedule.mask_of), and the newest status is of a frame the capture shows only
            # ~latency frames later.
            events = self.tracker.on_frame(frame.time_ns, obs)
            self.last_obs = obs
            self._latency_sample(frame)
            lap("tracker")
        self.decision.on_frame(t_got, linked=self.ctl.link is not None)
        lap("decision")
        self._poll()
        lap("link")
        self._level_flow()
        lap("level_start")
        self._feed()
        lap("feed")
        if not self._menus_ran:  # (the menus read their frames in a loop of their own)
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
        if total < STALL_MS or self._menus_ran:
            # (A level started from the menus reads its frames in MenuDriver's own loop.)
            self._menus_ran = False
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
            self._poll()
            # A card that stalls or drops frames for longer than the firmware's watchdog
            # (500 ms) must not silence the host: the feed and its pings go on while waiting
            # (30 dropped captures tripped the watchdog 5 times in 5 on the real game).
            self._feed()

    def _latency_sample(self, frame: Frame) -> None:
        g = self.tracker.frame_match
        clock = self.clock
        if g is None or not clock.ready:
            return
        done = clock.latch_ns(g) + clock.period_ns
        self.stats.capture_latency_frames.append((frame.time_ns - done) / clock.period_ns)

    def _release(self) -> None:
        link = self.ctl.link
        if link is not None:
            try:
                link.clear()  # the controller goes back to "no buttons"
            except LinkError:
                pass
            link.close()
            self.ctl.link = None

    # ---- reporting ------------------------------------------------------------------------

    def costs(self) -> dict[str, Any]:
        """What real time has cost so far, as counters a level's record takes the growth of
        (hil.loop.levels.Levels): late schedules and frames, underruns, watchdog trips,
        missed decisions, timing slips, stalls of the loop, captures the loop missed (passed
        over for a newer one or dropped by a card that could not keep up), repeated captures;
        and, computed per level, its pills' margins (frames from the first input on the wire
        to the spawn: ``margin`` of the pondered pills, ``margin_at_spawn`` of those decided at
        their spawn) and its longest stall."""
        st = self.stats
        cap = getattr(self.source, "missed", None)  # captures the loop never read
        margins = self.decision.ponder_stats.margins
        at_spawn = self.decision.ponder_stats.at_spawn_margins
        stalls = self.stall_log
        return {
            "late_schedules": st.late_schedules,
            "late_frames": st.late_frames,
            "underruns": st.underruns,
            "watchdog_trips": st.watchdog_trips,
            "missed_decisions": st.missed_decisions,
            "timing_slips": self.tracker.timing_slips,
            "stalls": st.stalls,
            "repeated_frames": st.repeated_frames,
            "missed_frames": cap() if callable(cap) else 0,
            "_margins": len(margins),
            "margin": lambda b: margin_summary(margins[b.get("_margins", 0) :]),
            "_at_spawn": len(at_spawn),
            "margin_at_spawn": lambda b: margin_summary(at_spawn[b.get("_at_spawn", 0) :]),
            "_stalls": len(stalls),
            "longest_stall": lambda b: max(
                stalls[b.get("_stalls", 0) :], key=lambda x: x["ms"], default=None
            ),
        }

    def snapshot(self, frame: Frame, events: list[Event]) -> dict[str, Any]:
        """What the live view shows: the board read, the tracker, the placement, latencies."""
        tr = self.tracker
        st = self.stats
        return {
            "image": frame.image,
            "frame_index": frame.index,
            "console_frame": tr.last_matched,
            "observation": self.last_obs,
            "state": tr.state.value,
            "level": None if tr.lv is None else tr.lv.level,
            "placement": self.last_placement,
            "events": [e.name for e in events],
            "desyncs": tr.desyncs,
            "late": st.late_schedules,
            "read_ms": st.read_ms.last,
            "handle_p99_ms": percentiles(list(st.handle_ms.recent)),
            "spawn_to_wire_ms": st.spawn_to_wire_ms.last,
            "capture_latency_frames": st.capture_latency_frames.last,
        }

    def summary(self) -> dict[str, Any]:
        st = self.stats
        tr = self.tracker
        cleared = sum(r["result"] == "stage_clear" for r in self.results)
        out = {
            "levels": self.results,
            "levels_asked": len(self.s.levels),
            "levels_played": len(self.results),
            "levels_cleared": cleared,
            "levels_failed": len(self.results) - cleared,
            "levels_retried": self.levels.retries,
            "console_frames": 0
            if st.first_frame is None or st.last_frame is None
            else st.last_frame - st.first_frame + 1,
            "captured_frames": st.frames,
            "repeated_frames": st.repeated_frames,
            "menu_frames": st.menu_frames,
            "decisions": st.decisions,
            "missed_decisions": st.missed_decisions,
            "desyncs": tr.desyncs,
            "resyncs": tr.resyncs,
            "timing_slips": tr.timing_slips,
            "late_schedules": st.late_schedules,
            "late_frames": st.late_frames,
            "schedules": st.schedules,
            "underruns": st.underruns,
            "watchdog_trips": st.watchdog_trips,
            "arm_misses": st.arm_misses,
            "status_gaps": tr.status_gaps,
            "link_losses": st.link_losses,
            "link_anomalies": {
                k: st.link_anomalies.get(k, 0) + self.ctl.anomalies.get(k, 0)
                for k in sorted({*st.link_anomalies, *self.ctl.anomalies})
            },
            "interrupted": self.interrupted,
            "cannot_start": self.cannot_start,
            "link_fatal": self.link_fatal,
            "log_error": self.log.error,
            "capture_timeouts": st.capture_losses,
            "stalls": st.stalls,
            "longest_stall": st.longest_stall or None,
            "latency_ms": {
                "capture_to_observation": percentiles(st.read_ms),
                "frame_handling": percentiles(st.handle_ms),
                "spawn_to_wire": percentiles(st.spawn_to_wire_ms),
                "planner": percentiles(st.plan_ms),
                "policy": percentiles(st.policy_ms),
                "spawn_to_wire_without_planner_and_policy": percentiles(st.overhead_ms),
            },
            "capture_latency_frames": percentiles(st.capture_latency_frames),
            "ponder": self.decision.ponder_stats.summary(),
            "peak_rss_mb": peak_rss_mb(),
            "wall_s": round(time.perf_counter() - self.t_start, 3),
            "reader": getattr(self.reader, "name", "?"),
            "policy": getattr(self.decision.policy, "name", "?"),
            "planner": getattr(self.decision.planner, "name", "?"),
            "capture": self.source.describe(),
        }
        out.update(self.console.report())  # the console's own section: "sim", "emu", "rig"
        self.log.write("summary", **out)
        return out


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
) -> dict[str, Any]:
    """``hil run`` on any console (hil.consoles.base.Console: the simulated one, the emulator,
    the rig): the capture chain's latency and jitter are the console's, the console starts, the
    Runtime plays ``settings.levels``, the console closes. Returns the summary with the
    console's own section (``console.report()``: "sim", "emu"). Raises what the console's
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
    )
    rt.warm_up()
    console.start()
    return rt.run()
