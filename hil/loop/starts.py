"""Starting each level when the run's level flow says it is due: with the pad presses the
console gives (Console.start_level: Start on the options screen, the game's chain, RESET), or,
with a screen reader, closed-loop through the menus read off the pictures (hil.menus.MenuDriver).
A level that cannot be started ends the run with one line (``cannot_start``)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from hil.consoles.base import CannotStart, CaptureError, Console, Frame, LevelEnd, chains_to
from hil.loop.clock import FrameClock
from hil.loop.eventlog import EventLog
from hil.loop.levels import Levels
from hil.loop.stats import STALL_MS, Stats
from hil.loop.tracker import Tracker
from hil.loop.wire import Wire

# Readings of a blank picture in a row after which the menu start presses Start (a cutscene).
BLANK_START_READS = 240
# In the menus "no buttons" is kept this far ahead (frames): a screen read takes 30-110 ms on a
# busy 2-core machine, and with the loop's 30 frames the firmware ran out for 12-14 frames at
# the start of runs beside two CPU-bound processes. A menu press replaces what was fed.
MENU_FEED_FRAMES = 120


class LevelStarts:
    """See the module docstring. ``now``: the runtime's clock (ns). ``screens``: the screen
    reader (captured BGR -> perception.screens.ScreenReading) or None (the console's presses
    only). ``start_menu_frames``: console frames the menus may take. ``link_poll_s``: how long
    the menus wait for a capture at a time (the link is fed meanwhile). ``on_begin(start_frame,
    last_start, wait_for_start)``: called after the tracker begins a level (bot against bot:
    player 1's tracker begins the round too). ``both``: player 1's (level, speed) when the bot
    plays both ports (the match's options set on both, its Starts on port 1). ``end_frame()``:
    the frame the last level ended in, as best known (default the tracker's ``end_frame``)."""

    def __init__(
        self,
        console: Console,
        wire: Wire,
        clock: FrameClock,
        tracker: Tracker,
        levels: Levels,
        stats: Stats,
        log: EventLog,
        say: Callable[[str], None],
        now: Callable[[], int],
        *,
        screens: Callable[[Any], Any] | None,
        start_menu_frames: int,
        link_poll_s: float,
        on_begin: Callable[[int, int | None, bool], None] | None = None,
        both: tuple[int, int] | None = None,
        end_frame: Callable[[], int | None] | None = None,
    ) -> None:
        self.console = console
        self.source = console.capture
        self.wire = wire
        self.clock = clock
        self.tracker = tracker
        self.levels = levels
        self.stats = stats
        self.log = log
        self.say = say
        self.now = now
        self.screens = screens
        self.start_menu_frames = start_menu_frames
        self.link_poll_s = link_poll_s
        self.on_begin = on_begin
        self.both = both  # bot against bot: player 1's (level, speed), set on port 1
        # the frame the last level ended in, as best known (the console's start_level times
        # a Start from it); default the tracker's shadow
        self.end_frame = end_frame or (lambda: self.tracker.end_frame)
        self.cannot_start: str | None = None  # why the run could not start a level, if so
        self.menus_ran = False  # this frame's handling ran the menus (not a stall)

    def step(self) -> None:
        """Starts the next level when the level flow (hil.loop.levels) says it is due, the way
        the console starts it (Console.start_level)."""
        if not self.wire.linked or not self.clock.ready:
            return
        now_frame = self.clock.frame_at(self.now())
        nxt = self.levels.next_due(now_frame, self.tracker, self.stats.frames)
        if nxt is None:
            return
        first = self.wire.first_free()
        previous = self.levels.previous(self.end_frame())
        versus = self.tracker.cfg.opponent is not None
        if self.screens is not None and versus and not self.tracker.match_goes_on:
            self._match_start(nxt.level, nxt.speed)  # a match's first round, on the rig
            return
        chained = chains_to(previous, nxt.level, nxt.speed)
        if self.screens is not None and not versus and not chained:
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
            ok &= self.wire.send(first + k, masks[k : k + 60], "start", presses.port)
        if ok:
            self.levels.started()
            self.tracker.begin_level(
                nxt.level,
                nxt.speed,
                presses.start_frame,
                presses.last_start,
                wait_for_start=presses.start_unseen,
            )
            if self.on_begin is not None:
                self.on_begin(presses.start_frame, presses.last_start, presses.start_unseen)
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

    def _match_start(self, level: int, speed: int) -> None:
        """A two-player match's first round with a person on port 1 (the rig): the bot sets
        its ``level`` and ``speed`` on the two-player options screen with port 2 and the
        person's Start begins the match (hil.menus.VersusMenuDriver); the tracker takes player
        1's level and speed as the screen showed them, and waits for the round's start in the
        pictures. The run ends with one line (``cannot_start``) when the match began with the
        bot at other settings. With the bot on both ports (``both``: player 1's level and
        speed) it sets both players and presses Start on port 1 (hil.menus.BothMenuDriver)."""
        from hil.menus import BothMenuDriver, MenuError, VersusMenuDriver

        assert self.screens is not None
        self.menus_ran = True
        newest, send = self._menu_io([])
        try:
            if self.both is not None:
                _, send1 = self._menu_io([], port=1)
                both = BothMenuDriver(
                    newest, send, send1, self._read, max_frames=self.start_menu_frames
                )
                res = both.start_match(*self.both, level, speed, reset_ok=True)
            else:
                driver = VersusMenuDriver(newest, send, self._read, say=self.say)
                res = driver.start_match(level, speed)
        except (MenuError, ValueError, CaptureError) as e:
            self._cannot_start(f"cannot start the match at level {level} speed {speed}: {e}")
            return
        self.levels.started()
        self.tracker.cfg.opponent = (res.level1, res.speed1)
        unseen = self.both is None  # the person's Start: when is not seen
        self.tracker.begin_level(level, speed, res.start_frame, wait_for_start=unseen)
        if self.on_begin is not None:
            self.on_begin(res.start_frame, None, unseen)
        self.log.write(
            "start_pressed",
            frame=res.start_frame,
            level=level,
            speed=speed,
            p1_level=res.level1,
            p1_speed=res.speed1,
            menus=res.screens,
            menu_presses=res.presses,
            menu_frames=res.frames,
        )

    def _read(self, image: Any) -> Any:
        assert self.screens is not None
        return self.screens(image)

    def _menu_io(
        self, seen: list[str], port: int | None = None
    ) -> tuple[Callable[[], tuple[int, Any] | None], Callable[[Sequence[int]], int]]:
        """The menu drivers' two callables on this loop's capture and link (hil.menus): the
        newest captured picture and the console frame it shows (the link fed while waiting),
        and masks sent on controller ``port`` (None: the bot's) from the first frame a
        schedule can still reach."""
        from hil.menus import MenuError

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
            self.wire.poll()
            self.wire.feed(ahead=MENU_FEED_FRAMES)
            last[0], last[1] = time.perf_counter_ns(), time.thread_time_ns()
            if not self.wire.linked:
                raise MenuError("the controller link was lost while setting the options screen")
            frame = self.source.newest(self.link_poll_s)  # the feed goes on while it waits
            if frame is None or not self.clock.ready:
                return None
            self.stats.menu_frames += 1
            return self._shown_frame(frame), frame.image

        def send(masks: Sequence[int]) -> int:
            # Not time-critical: a frame of slack so a menu press is never late.
            first = self.wire.first_free(extra_ms=16.7)
            for k in range(0, len(masks), 60):  # SCHEDULE carries at most 64 frames
                if not self.wire.send(first + k, masks[k : k + 60], "menu", port):
                    raise MenuError("the controller link was lost while setting the options screen")
            return first

        return newest, send

    def _menu_start(self, level: int, speed: int, previous: LevelEnd | None) -> None:
        """Starts ``level`` at ``speed`` through the menus, closed-loop on the captured
        pictures (hil.menus.MenuDriver: from the title, the options screen, the demo, a stage
        clear or a game over; a finished level's screen by the soft reset). The run ends with
        one line (``cannot_start``) when the screen does not come to show the level."""
        from hil.menus import MenuDriver, MenuError

        assert self.screens is not None
        self.menus_ran = True
        seen: list[str] = []
        read = _menu_reader(self.screens, seen, previous)
        newest, send = self._menu_io(seen)
        # After a finished level, a level screen that stays is the game's chained level: left by
        # the soft reset soon (a stage clear read late has taken the reset's Start as its own).
        wait = 400 if previous is None else 90
        driver = MenuDriver(newest, send, read, max_frames=self.start_menu_frames, level_wait=wait)
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


def _menu_reader(
    screens: Callable[[Any], Any], seen: list[str], previous: LevelEnd | None
) -> Callable[[Any], Any]:
    """The screen reader as the menus read it: the kinds read are appended to ``seen``; a
    screen blank for BLANK_START_READS readings in a row reads as a game over (Start is
    pressed), and the demo read where no title came before it as the level."""
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
                (before and before[-1] in ("TITLE", "DEMO")) or (not before and previous is None)
            ):
                r = dataclasses.replace(r, kind="LEVEL")
        seen.append(r.kind)
        return r

    return read
