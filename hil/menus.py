"""Starting a level with the controller, checked on the picture (issue 16): the menu driver.

``MenuDriver(newest, send, read).start(level, speed)`` takes the game from the title screen,
the options screen, the attract demo, a stage clear or a game over to the options screen, sets
the level (0..20) and the speed (0 LOW, 1 MED, 2 HI) there with the game's own buttons, reads
both back from the picture, and presses Start; it raises MenuError rather than start a level the
screen does not show. It needs no RAM, so the same code drives the real console (the rig's
capture and the Pico on port 1), the emulator and the simulated console. What it presses, from
the disassembly (docs/MENUS.md):

- title (toTitle [$982A]): Up if the heart is on 2 players, then Start;
- attract demo: Start (checkPauseReset @checkStartBtn_demo: back to the title);
- game over (playerLoses_endScreen [$959A]): Start (the options screen);
- stage clear, or a level in play when ``reset_ok``: A+B+Select+Start held (checkPauseReset's
  soft reset: the title). A stage clear's plain Start would chain to level + 1, not to the
  options screen. The stage clear has no reset check of its own: its Start loop (checkVirusLeft
  [$B269], open from 97 frames after the last virus, the box from 64) takes the held Start as
  the chain's, and the main loop's checkPauseReset [$979E] resets only if the four buttons are
  still held 2 frames later (the real game: a hold of 3 frames from the loop's first frame
  resets, 2 chain). So on a stage clear the driver holds them ``STAGE_CLEAR_RESET_HOLD`` (48)
  frames, longer than from the box's first picture to the loop's opening plus 3;
- options (toDemo_orOptions [$9961]): the highlighted row is not read from the picture but
  made known: it is the level row when the screen has just loaded, else two Up taps put it
  there (no wraparound). On the level row one tap (a one-frame press, updateLvlCursor [$9ADF])
  moves the level one step; Down, then taps on the speed row (updateSpeedCursor [$9B37]). When
  two successive pictures show the wanted level and speed, Start.

The console interface is two callables, so any console can be plugged in:

- ``newest() -> (frame, picture) | None``: the newest picture and the console frame it shows
  (None when there is none newer yet; a blocking source may wait first);
- ``send(masks) -> first``: puts ``masks`` (ints, one per console frame) on the controller for
  the next console frames it can still fill; returns the console frame of the first;
- ``read(picture) -> perception.screens.ScreenReading``: the screen reader (e.g.
  ``lambda p: reader.read(p, profile)`` for a capture, ``reader.read_nes`` for NES pictures).

A decision waits for a picture of frame ``last press + settle_frames`` or later (the game acts on
a press in its frame, the next NMI draws it). ``SimMenuConsole`` is the simulated console's
menus (engine.Menu, engine.LevelFlow, clean-room pictures) behind the same two callables.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import engine
from engine.constants import Button, FlowStage, MenuScreen, MenuStage
from perception.screens import ScreenReading

RESET = int(Button.A | Button.B | Button.SELECT | Button.START)  # btns_reset
# Frames the soft reset is held on a stage clear: its Start loop opens 33 frames after the box
# is drawn, and the reset needs the buttons held on the loop's first frame and 2 more (above).
STAGE_CLEAR_RESET_HOLD = 48
UP, DOWN, LEFT, RIGHT = int(Button.UP), int(Button.DOWN), int(Button.LEFT), int(Button.RIGHT)
START = int(Button.START)
SPEEDS = ("LOW", "MED", "HI")


# A level screen's kinds (perception.screens): the two-player level screen, which the screen
# reader's level prototypes do not hold, may read as any of them
LEVEL_SCREENS = ("LEVEL", "DEMO", "STAGE_CLEAR", "GAME_OVER")


class MenuError(RuntimeError):
    """The driver could not start the asked level (one line for the user)."""


@dataclass
class StartResult:
    """A level started. ``level``, ``speed``: as read on the options screen before Start.
    ``start_frame``: the console frame whose controller read held Start. ``screens``: the
    screens met on the way (kind names in order, repeats folded). ``presses``: masks sent that
    were not 0. ``frames``: console frames from the first picture read to the Start frame."""

    level: int
    speed: int
    start_frame: int
    screens: list[str] = field(default_factory=list)
    presses: int = 0
    frames: int = 0


class MenuDriver:
    """See the module docstring. ``settle_frames``: frames after a press before a picture
    counts (>= 2). ``max_frames``: console frames a ``start`` may take before MenuError
    (the demo alone can take 5,708). ``level_wait``: frames a level screen may show (the end
    of a level drawing its box) before the driver resets (``reset_ok``) or gives up."""

    def __init__(
        self,
        newest: Callable[[], tuple[int, Any] | None],
        send: Callable[[Sequence[int]], int],
        read: Callable[[Any], ScreenReading],
        *,
        settle_frames: int = 3,
        max_frames: int = 9000,
        level_wait: int = 400,
    ) -> None:
        if settle_frames < 2:
            raise ValueError(f"settle_frames must be >= 2, got {settle_frames}")
        self.newest = newest
        self.send = send
        self.read = read
        self.settle = settle_frames
        self.max_frames = max_frames
        self.level_wait = level_wait
        self._ready = -1  # no decision on a picture of an earlier frame
        self._frame = -1  # the newest frame seen
        self._first = -1
        self._presses = 0
        self._screens: list[str] = []

    def _send(self, masks: Sequence[int]) -> int:
        first = int(self.send([int(m) for m in masks]))
        self._presses += sum(1 for m in masks if m)
        self._ready = first + len(masks) - 1 + self.settle
        return first

    def _tap(self, mask: int, times: int = 1) -> None:
        self._send([mask, 0] * times)

    def _look(self) -> ScreenReading:
        """The reading of the first picture of a frame >= the ready frame."""
        polls = 0
        while True:
            got = self.newest()
            if got is None:
                polls += 1
                if polls > 100_000:
                    raise MenuError("the capture gave no new picture")
                continue
            frame, picture = got
            self._frame = int(frame)
            if self._first < 0:
                self._first = self._frame
            if self._frame - self._first > self.max_frames:
                raise MenuError(
                    f"no level started within {self.max_frames} console frames "
                    f"(screens seen: {' > '.join(self._screens[-8:])})"
                )
            if self._frame < self._ready:
                continue
            r = self.read(picture)
            if not self._screens or self._screens[-1] != r.kind:
                self._screens.append(r.kind)
            return r

    def start(self, level: int, speed: int, *, reset_ok: bool = False) -> StartResult:
        """Menus to ``level`` (0..20) at ``speed`` (0..2) and Start (module docstring).

        ``reset_ok``: a level in play may be left by the soft reset (else MenuError). Raises
        ValueError for a target out of range, MenuError when the screen does not come to show
        the target (the level is then not started) or ``max_frames`` pass."""
        if not 0 <= level <= 20:
            raise ValueError(f"level must be 0..20 on the options screen, got {level}")
        if speed not in (0, 1, 2):
            raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {speed}")
        self._first, self._presses, self._screens = -1, 0, []
        section: int | None = None  # the highlighted row when known
        prev = ""
        confirmed = 0
        level_since = -1
        tries = 0
        while True:
            r = self._look()
            kind = r.kind
            if kind != "LEVEL":
                level_since = -1
            if kind != "OPTIONS":
                confirmed = 0
            if kind == "BLANK":
                self._ready = self._frame + 1
            elif kind == "TITLE":
                section = None
                self._tap(UP if r.players == 2 else START)
            elif kind in ("DEMO", "GAME_OVER"):
                section = None
                self._tap(START)
            elif kind == "STAGE_CLEAR":
                section = None
                self._send([RESET] * STAGE_CLEAR_RESET_HOLD + [0])
            elif kind == "LEVEL":
                if level_since < 0:
                    level_since = self._frame
                if self._frame - level_since > self.level_wait:
                    if not reset_ok:
                        raise MenuError(
                            "a level is in play: finish it or allow the soft reset "
                            "(A+B+Select+Start) to reach the options screen"
                        )
                    self._send([RESET] * 4 + [0])
                    level_since = -1
                else:
                    self._ready = self._frame + 1
            elif kind == "OPTIONS":
                if section is None:
                    # Just loaded (from the title or a game over): the level row
                    # (toDemo_orOptions sets optionSectionHighlight = 0); else unknown.
                    if prev in ("BLANK", "TITLE", "GAME_OVER"):
                        section = 0
                    else:
                        self._tap(UP, 2)
                        section = 0
                        prev = kind
                        continue
                assert r.level is not None and r.speed is not None
                corrected = self._correct_option(r, level, speed, section)
                if corrected is not None:
                    confirmed = 0
                    tries += 1
                    section = corrected
                else:
                    confirmed += 1
                    if confirmed >= 2:
                        return self._press_start(level, speed)
                    self._ready = self._frame + 1
                if tries > 12:
                    raise MenuError(
                        f"the options screen shows level {r.level} {SPEEDS[r.speed]} after "
                        f"{tries} corrections, not level {level} {SPEEDS[speed]}: not starting"
                    )
            prev = kind

    def _correct_option(self, r: Any, level: int, speed: int, section: int) -> int | None:
        """One correction toward ``level`` and ``speed`` on the options screen read as ``r``
        (the highlight moved to the row, or the row's value stepped); returns the row then
        highlighted (0 level, 1 speed), None when both already match."""
        assert r.level is not None and r.speed is not None
        if r.level != level:
            if section != 0:
                self._tap(UP, section)
            else:
                self._tap(RIGHT if r.level < level else LEFT, abs(level - r.level))
            return 0
        if r.speed != speed:
            if section != 1:
                self._tap(DOWN if section == 0 else UP)
            else:
                self._tap(RIGHT if r.speed < speed else LEFT, abs(speed - r.speed))
            return 1
        return None

    def _started(self, first: int, what: str) -> int:
        """Start was sent for frame ``first``: MenuError (``what`` did not begin) when the next
        picture still shows the options screen; else ``first``."""
        if self._look().kind == "OPTIONS":
            raise MenuError(f"Start on the options screen did not begin {what}")
        return first

    def _press_start(self, level: int, speed: int) -> StartResult:
        first = self._started(self._send([START, 0]), "a level")
        return StartResult(
            level=level,
            speed=speed,
            start_frame=first,
            screens=list(self._screens),
            presses=self._presses,
            frames=first - self._first,
        )


@dataclass
class VersusStartResult:
    """A two-player match begun by player 1's Start (:class:`VersusMenuDriver`). ``level``,
    ``speed``: player 2's (the bot's), ``level1``, ``speed1``: player 1's, as the last
    two-player options picture showed them; ``start_frame``: that picture's console frame (the
    Start latched then or later: when is not seen); ``screens``, ``presses``, ``frames`` as
    :class:`StartResult`."""

    level: int
    speed: int
    level1: int
    speed1: int
    start_frame: int
    screens: list[str] = field(default_factory=list)
    presses: int = 0
    frames: int = 0


class VersusMenuDriver(MenuDriver):
    """Player 2's part of a two-player match's options screen: the rig with a person on port 1
    and the Pico on port 2 (docs/VERSUS.md, "On the rig"). The person chooses 2 players on the
    title, moves the highlight and presses Start: pad 2 has no say over them. Each player moves
    its own level and speed while their row is highlighted (toDemo_orOptions [$9961],
    updateLvlCursor [$9ADF], updateSpeedCursor [$9B37] on each pad), so the bot taps its
    cursors on port 2 whenever the options screen shows two players and the row of a setting
    still wrong is highlighted, reading them back off the picture (perception.screens: player
    2's level number, both speed cursors, the highlighted row; a picture counts when the one
    before it read the same). ``say`` tells the person what
    the bot waits for (once each). The constructor's other arguments are MenuDriver's;
    ``max_frames`` bounds the wait for the person (default 10 minutes)."""

    def __init__(
        self,
        newest: Callable[[], tuple[int, Any] | None],
        send: Callable[[Sequence[int]], int],
        read: Callable[[Any], ScreenReading],
        *,
        settle_frames: int = 3,
        max_frames: int = 36_000,
        say: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(newest, send, read, settle_frames=settle_frames, max_frames=max_frames)
        self.say = say or (lambda _m: None)
        self._said: set[str] = set()

    def _tell(self, key: str, message: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self.say(message)

    def start_match(self, level: int, speed: int) -> VersusStartResult:
        """Player 2's ``level`` (0..20) and ``speed`` (0..2) set on the two-player options
        screen, then the person's Start awaited (the class docstring). Raises ValueError for a
        target out of range, MenuError when the match began with player 2 at other settings
        (the Start came first) or ``max_frames`` passed."""
        if not 0 <= level <= 20:
            raise ValueError(f"level must be 0..20 on the options screen, got {level}")
        if speed not in (0, 1, 2):
            raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {speed}")
        self._first, self._presses, self._screens = -1, 0, []
        last: ScreenReading | None = None  # the newest settled two-player options reading
        last_frame = -1
        seen: tuple[Any, ...] = ()  # the reading of the picture before
        want = f"level {level} {SPEEDS[speed]}"
        while True:
            r = self._look()
            now = (r.kind, r.players, r.level, r.speed, r.level2, r.speed2, r.section)
            settled, seen = now == seen, now
            if not settled:
                # A picture counts when the one before read the same: the options screen's last
                # picture as the Start is taken shows its cursors otherwise, and its first as it
                # loads is read as a one-player one (the real game).
                self._ready = self._frame + 1
                continue
            if r.kind == "OPTIONS" and r.players == 2 and r.level2 is not None:
                last, last_frame = r, self._frame
                if r.level2 != level and r.section == 0:
                    self._tap(RIGHT if r.level2 < level else LEFT, abs(level - r.level2))
                elif r.speed2 != speed and r.section == 1:
                    assert r.speed2 is not None
                    self._tap(RIGHT if r.speed2 < speed else LEFT, abs(speed - r.speed2))
                else:
                    if r.level2 != level:
                        self._tell("level", f"player 2 sets its {want}: highlight VIRUS LEVEL")
                    elif r.speed2 != speed:
                        self._tell("speed", f"player 2 sets its {want}: highlight SPEED")
                    else:
                        self._tell("ready", f"player 2 is at {want}: press Start when ready")
                    self._ready = self._frame + 1
                continue
            if r.kind == "OPTIONS":
                self._tell("players", "the bot is player 2: choose 2 PLAYER GAME on the title")
            elif r.kind in LEVEL_SCREENS and last is not None:  # the match began
                if (last.level2, last.speed2) != (level, speed):
                    raise MenuError(
                        f"the match began with player 2 at level {last.level2} "
                        f"{SPEEDS[last.speed2 or 0]}, not {want}: Start came before the bot "
                        "had set its level and speed"
                    )
                assert last.level is not None and last.speed is not None
                return VersusStartResult(
                    level=level,
                    speed=speed,
                    level1=last.level,
                    speed1=last.speed,
                    start_frame=last_frame,
                    screens=list(self._screens),
                    presses=self._presses,
                    frames=last_frame - self._first,
                )
            elif r.kind == "TITLE":
                last = None
                self._tell("title", "the bot is player 2: choose 2 PLAYER GAME on the title")
            else:
                self._tell("wait", "the bot waits for the two-player options screen")
            self._ready = self._frame + 1


class BothMenuDriver(MenuDriver):
    """A two-player match's options screen with the bot on both ports (bot against bot, no
    person): port 1 (``send1``, as ``send``) chooses 2 players on the title (Down, then Start:
    title_cursor), moves the highlight and presses Start; each port taps its own player's level
    and speed while their row is highlighted (toDemo_orOptions [$9961]: only pad 1 moves the
    highlight, each pad its own cursors). Everything is read back off the picture
    (perception.screens: both players' level and speed, the highlighted row, the players), a
    picture counting when the one before it read the same. From another screen it goes to the
    title as :class:`MenuDriver` does (B on a one-player options screen: @backToTitle). The
    constructor's other arguments are MenuDriver's."""

    def __init__(
        self,
        newest: Callable[[], tuple[int, Any] | None],
        send: Callable[[Sequence[int]], int],
        send1: Callable[[Sequence[int]], int],
        read: Callable[[Any], ScreenReading],
        *,
        settle_frames: int = 3,
        max_frames: int = 9000,
        level_wait: int = 400,
    ) -> None:
        super().__init__(
            newest,
            send,
            read,
            settle_frames=settle_frames,
            max_frames=max_frames,
            level_wait=level_wait,
        )
        self.send1 = send1

    def _tap1(self, mask: int, times: int = 1) -> int:
        """Taps on port 1; returns the frame of the first."""
        masks = [mask, 0] * times
        first = int(self.send1(masks))
        self._presses += times
        self._ready = max(self._ready, first + len(masks) - 1 + self.settle)
        return first

    def start_match(
        self, level1: int, speed1: int, level: int, speed: int, *, reset_ok: bool = False
    ) -> VersusStartResult:
        """Player 1 at ``level1``/``speed1`` (port 1), player 2 at ``level``/``speed`` (port 2)
        on the two-player options screen, then Start on port 1. Raises ValueError for a target
        out of range, MenuError when the screen does not come to show them within
        ``max_frames`` or Start did not begin the match."""
        for lv, sp in ((level1, speed1), (level, speed)):
            if not 0 <= lv <= 20:
                raise ValueError(f"level must be 0..20 on the options screen, got {lv}")
            if sp not in (0, 1, 2):
                raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {sp}")
        self._first, self._presses, self._screens = -1, 0, []
        seen: tuple[Any, ...] = ()
        confirmed = 0
        level_since = -1
        while True:
            r = self._look()
            now = (r.kind, r.players, r.level, r.speed, r.level2, r.speed2, r.section)
            settled, seen = now == seen, now
            if r.kind != "LEVEL":
                level_since = -1
            if not settled or r.kind == "BLANK":
                self._ready = self._frame + 1
                continue
            if r.kind != "OPTIONS" or r.players != 2:
                confirmed = 0
            if r.kind == "TITLE":
                self._tap1(DOWN if r.players != 2 else START)
            elif r.kind in ("DEMO", "GAME_OVER"):
                self._tap1(START)
            elif r.kind == "OPTIONS" and r.players != 2:
                self._tap1(int(Button.B))  # @backToTitle: choose 2 players there
            elif r.kind == "OPTIONS":
                if r.section == 2:
                    self._tap1(UP)
                    continue
                if r.section is None or r.level is None or r.level2 is None:
                    self._ready = self._frame + 1
                    continue
                if self._set_row(r, (level1, speed1), (level, speed)):
                    confirmed = 0
                    continue
                confirmed += 1
                if confirmed < 2:
                    self._ready = self._frame + 1
                    continue
                first = self._started(self._tap1(START), "the match")
                return VersusStartResult(
                    level=level,
                    speed=speed,
                    level1=level1,
                    speed1=speed1,
                    start_frame=first,
                    screens=list(self._screens),
                    presses=self._presses,
                    frames=first - self._first,
                )
            elif r.kind in ("LEVEL", "STAGE_CLEAR"):
                if level_since < 0:
                    level_since = self._frame
                if self._frame - level_since > self.level_wait:
                    if not reset_ok:
                        raise MenuError(
                            "a level is in play: finish it or allow the soft reset "
                            "(A+B+Select+Start) to reach the title"
                        )
                    first = int(self.send1([RESET] * STAGE_CLEAR_RESET_HOLD + [0]))
                    self._ready = first + STAGE_CLEAR_RESET_HOLD + self.settle
                    level_since = -1
                else:
                    self._ready = self._frame + 1
            else:
                self._ready = self._frame + 1

    def _set_row(self, r: ScreenReading, want1: tuple[int, int], want2: tuple[int, int]) -> bool:
        """One step toward both players' settings on the highlighted row (each port taps its
        own cursor; port 1 moves the highlight once the row is right for both, to SPEED and
        back to VIRUS LEVEL); False when every setting already matches."""
        section = r.section
        assert section in (0, 1)
        got1 = (r.level, r.speed)[section]
        got2 = (r.level2, r.speed2)[section]
        w1, w2 = want1[section], want2[section]
        moved = False
        if got1 != w1:
            assert got1 is not None
            self._tap1(RIGHT if got1 < w1 else LEFT, abs(w1 - got1))
            moved = True
        if got2 != w2:
            assert got2 is not None
            self._tap(RIGHT if got2 < w2 else LEFT, abs(w2 - got2))
            moved = True
        if moved:
            return True
        other = 1 - section
        if (r.level, r.speed, r.level2, r.speed2) == (*want1, *want2):
            return False
        if (r.level, r.speed)[other] != want1[other] or (r.level2, r.speed2)[other] != want2[other]:
            self._tap1(DOWN if section == 0 else UP)
            return True
        return False


class SimMenuConsole:
    """The simulated console's screens for the menu driver: engine.Menu (title, options,
    demo) and engine.LevelFlow (a level after Start, its stage clear and game over), drawn with
    the clean-room pictures (engine.menu_render, engine.render_frame), optionally through a
    capture profile. Lockstep: ``newest()`` runs one console frame and returns the picture
    shown ``lag`` frames ago; ``send(masks)`` schedules from ``lead`` frames ahead (as the
    firmware's queue: the armed frame cannot change). ``screen``: "title" or "options" to
    begin on. ``seed``: the RNG on the title. Raises ValueError for bad arguments."""

    def __init__(
        self,
        screen: str = "title",
        *,
        level: int = 0,
        speed: int = 1,
        profile: Any = None,
        lag: int = 2,
        lead: int = 2,
        seed: int = 0x8988,
        frame_counter: int = 0,
        capture_seed: int = 0,
    ) -> None:
        if lag < 0 or lead < 1:
            raise ValueError("lag must be >= 0 and lead >= 1")
        self.menu: engine.Menu | None = engine.Menu(
            screen, level=level, speed=speed, rng=seed, frame_counter=frame_counter
        )
        self.flow: engine.LevelFlow | None = None
        self.frame = -1  # the last console frame run
        self.lag, self.lead = lag, lead
        self.masks: dict[int, int] = {}
        self.starts: list[tuple[int, int, int]] = []  # (frame, level, speed) of each Start
        self.model = None
        if profile is not None:
            from calibration import CaptureModel

            self.model = CaptureModel(profile, seed=capture_seed)
        self._shown: deque[tuple[int, np.ndarray]] = deque()

    def send(self, masks: Sequence[int]) -> int:
        first = max(self.frame + self.lead, max(self.masks, default=-1) + 1)
        for i, m in enumerate(masks):
            self.masks[first + i] = int(m)
        return first

    def _picture(self) -> np.ndarray:
        from engine.menu_render import render_blank, render_menu_state

        if self.flow is not None:
            screen = engine.FlowScreen(self.flow.screen)
            if screen in (engine.FlowScreen.LEVEL, engine.FlowScreen.LOADING):
                return engine.render_frame(self.flow.game)
            if screen == engine.FlowScreen.OPTIONS:
                from engine.menu_render import render_options

                return render_options(int(self.flow.level), int(self.flow.speed))
            return render_blank()
        assert self.menu is not None
        return render_menu_state(self.menu)

    def step(self) -> None:
        """One console frame with the scheduled mask."""
        self.frame += 1
        mask = self.masks.pop(self.frame, 0)
        if self.flow is not None:
            self.flow.step(mask)
            stage = FlowStage(self.flow.stage)
            if stage == FlowStage.OPTIONS:  # a game over's Start: the options screen loads
                f = self.flow
                self.menu = engine.Menu(
                    "options", level=min(int(f.level), 20), speed=int(f.speed), rng=int(f.rng)
                )
                self.flow = None
            elif stage == FlowStage.SOFT_RESET:
                f = self.flow
                self.menu = engine.Menu(
                    "title", level=min(int(f.level), 20), speed=int(f.speed), rng=int(f.rng)
                )
                self.flow = None
        else:
            m = self.menu
            assert m is not None
            m.step(mask)
            if m.stage == MenuStage.START:
                self.starts.append((self.frame, int(m.level), int(m.speed)))
                self.flow = engine.LevelFlow(
                    int(m.level), int(m.speed), int(m.rng), int(m.frame_counter), held=mask
                )
                self.menu = None
        self._shown.append((self.frame, self._picture()))
        while len(self._shown) > self.lag + 1:
            self._shown.popleft()

    def newest(self) -> tuple[int, np.ndarray]:
        """Runs one console frame; the picture of frame ``frame - lag`` (through the profile
        when one was given: captured BGR, else NES RGB)."""
        self.step()
        frame, pic = self._shown[0]
        if self.model is not None:
            pic = self.model(pic)
        return frame, pic

    @property
    def screen(self) -> str:
        """What the console shows now (for tests): a MenuScreen or FlowStage name."""
        if self.flow is not None:
            return FlowStage(self.flow.stage).name
        assert self.menu is not None
        return MenuScreen(self.menu.screen).name
