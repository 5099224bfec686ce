"""What every console kind gives the loop: captured frames on the console's clock, the
controller port, the clock, and how a level is started (docs/RUN.md, "Consoles").

- :class:`Frame` and :class:`CaptureSource`: a capture source hands the runtime the newest
  captured frame it has not handed out yet, dropping older ones (a live pipeline must never work
  through a backlog: a stale picture is worse than a skipped one).
- :class:`Console`: the one interface the simulated console (hil.consoles.sim), the emulator
  (hil.consoles.emu) and the real rig (hil.consoles.rig) implement; ``hil run`` plays any of
  them through hil.loop.runtime.play and never asks which one it drives.

Times are the runtime clock's nanoseconds (``time.monotonic_ns`` on a rig, the console's own
clock in lockstep).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

import engine
from engine.constants import Button


@dataclass
class Frame:
    """One captured frame (ARCHITECTURE.md): ``image`` BGR uint8 [H, W, 3]; ``time_ns`` when the
    host received it (runtime clock, ns); ``index`` delivered-frame number from 0 (gaps: frames the
    source dropped because a newer one came first); ``truth`` ground truth the simulated
    console attaches (None for real captures)."""

    image: np.ndarray
    time_ns: int
    index: int
    truth: dict[str, Any] | None = field(default=None, repr=False)


class CaptureError(RuntimeError):
    """A capture source cannot deliver: absent, unplugged, or an unreadable file."""


class NewestFrame:
    """The newest frame a capture thread has made, handed to the reader once (a live pipeline
    never works through a backlog): :meth:`put` from the capture's thread, :meth:`take` from
    the runtime's."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._latest: Frame | None = None
        self._taken = -1

    def put(self, frame: Frame) -> bool:
        """Makes ``frame`` the newest; True when it replaced one nobody took (skipped)."""
        with self._cond:
            replaced = self._latest is not None and self._latest.index > self._taken
            self._latest = frame
            self._cond.notify_all()
            return replaced

    def wake(self) -> None:
        """Wakes a waiting :meth:`take` (the capture failed or ended: its ``failed`` says)."""
        with self._cond:
            self._cond.notify_all()

    def take(self, timeout_s: float, failed: Callable[[], str | None]) -> Frame | None:
        """The newest frame not taken yet; None when none comes within ``timeout_s``. Raises
        CaptureError with ``failed()``'s message when it returns one while waiting."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._latest is None or self._latest.index <= self._taken:
                why = failed()
                if why is not None:
                    raise CaptureError(why)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            frame = self._latest
            self._taken = frame.index
            return frame


class CaptureSource(Protocol):
    """What the runtime reads frames from (see the module docstring)."""

    name: str

    def newest(self, timeout_s: float) -> Frame | None:
        """The newest frame not yet returned; None when none arrives within ``timeout_s``.
        Raises CaptureError when the source has ended or is lost for good."""
        ...

    def describe(self) -> dict[str, Any]:
        """The mode in use (size, rate, pixel format) and counters, JSON-ready."""
        ...

    def close(self) -> None: ...


# ---- starting a level ------------------------------------------------------------------------

# checkVirusLeft [$B269]: waitFor_A_frames($40), ($10), ($10), then the Start loop's first read.
STAGE_CLEAR_START_FRAMES = 0x40 + 0x10 + 0x10 + 1


class CannotStart(ValueError):
    """The console cannot start the level asked for (the message says why); the run ends."""


@dataclass(frozen=True)
class LevelEnd:
    """The level played before, as the loop saw it: ``result`` "stage_clear", "top_out" or
    "unknown"; ``end_frame`` the console frame whose step ended it in the tracker's shadow state
    (None when unseen)."""

    level: int
    speed: int
    result: str
    end_frame: int | None


@dataclass(frozen=True)
class StartPresses:
    """How a console starts a level with the controller: ``masks`` (button masks, RAM order)
    for console frames ``first_frame`` on, and ``start_frame`` the frame whose NMI reads the
    Start that begins the level (the tracker's ``begin_level``; it need not be exact: captures
    of earlier frames are ignored). ``reset``: the console was reset first (logged).
    ``start_unseen``: the console cannot say when the Start comes (a person presses it: player 1
    of a two-player match on the rig, or a simulated player 1 told to wait); the tracker then
    waits for the level's start in the pictures (hil.loop.tracker.Tracker.begin_level).
    ``port``: the controller port the masks are for (None: the bot's own; 1 when the bot plays
    both ports and player 1 begins a two-player round)."""

    first_frame: int
    masks: list[int]
    start_frame: int
    reset: bool = False
    start_unseen: bool = False
    port: int | None = None

    @property
    def last_start(self) -> int:
        """The last frame whose mask holds Start: the Start that begins the level latches by
        then at the latest (a stage clear's loop reads a held Start from its 97th frame,
        which may come after ``start_frame``; a cutscene needs a second press)."""
        held = [i for i, m in enumerate(self.masks) if m & int(Button.START)]
        return self.first_frame + (held[-1] if held else 0)


# A two-player round's end to the first frame the game takes player 1's Start for the next:
# 114 after a clear (checkVirusLeft [$B269]: noVirusLeft_delay $40, the STAGE CLEAR box, two
# statusUpdate_delay $10), 98 after a top-out (playerLoses_endScreen [$959A]: endScreen_delay
# $40, fullStatusUpdate); measured on the real game (original release). Pressed once, later.
VERSUS_START_AFTER_END = 120
# ... and after a match's last round: the options screen, from 194 frames after its end.
VERSUS_START_AFTER_MATCH = 200


def versus_round_start(
    first_frame: int, previous: LevelEnd | None, after: int = VERSUS_START_AFTER_END
) -> StartPresses:
    """A two-player round begun by the bot on port 1 (bot against bot): Start once, for one
    frame, ``after`` frames after the last round's end (``previous.end_frame``, as the loop
    knows it; at ``first_frame`` when unknown or past). One press only: a second, after the
    game took the first, would pause the next round (checkPauseReset [$979E])."""
    end = None if previous is None else previous.end_frame
    start = first_frame if end is None else max(first_frame, end + after)
    masks = [0] * (start - first_frame) + [int(Button.START), 0]
    return StartPresses(first_frame, masks, start, port=1)


def chains_to(previous: LevelEnd | None, level: int, speed: int) -> bool:
    """The game's own next level: ``previous`` was cleared and (level, speed) is its level + 1
    (up to lvCap $18) at the same speed (checkVirusLeft [$B269])."""
    return (
        previous is not None
        and previous.result == "stage_clear"
        and (level, speed) == (min(previous.level + 1, 24), previous.speed)
    )


def press_start(first_frame: int) -> StartPresses:
    """Start pressed for one frame on the options screen (the console shows it set to the
    level: the simulated console's next level, the emulator's menus, the rig's user)."""
    return StartPresses(first_frame, [int(Button.START), 0], first_frame)


def next_level_presses(
    first_frame: int, previous: LevelEnd, level: int, speed: int
) -> StartPresses:
    """From a cleared level to the next one: the stage clear's loop reads Start pressed or held
    from 97 frames after the level's last step (docs/LEVEL_FLOW.md), known from the shadow
    state: Start is held from ``first_frame`` until a few frames past it (no new press, so the
    next level's checkPauseReset sees none); before a cutscene (engine.cutscene_before) a fresh
    press follows, which its loop needs."""
    end = previous.end_frame
    accept = (end if end is not None else first_frame) + STAGE_CLEAR_START_FRAMES
    hold_to = max(first_frame, accept) + 8
    masks = [int(Button.START)] * (hold_to - first_frame + 1) + [0]
    if engine.cutscene_before(level, speed):
        masks += [0] * 6 + [int(Button.START), 0]
    return StartPresses(first_frame, masks, min(first_frame, accept))


def start_with_pad(
    level: int,
    speed: int,
    first_frame: int,
    previous: LevelEnd | None,
    reset: Callable[[], None] | None = None,
) -> StartPresses:
    """The level start every console kind shares today: the game's chain after a stage clear
    (:func:`next_level_presses`), else Start on the options screen (:func:`press_start`); a new
    game after one was played needs the console's RESET (``reset``; None: the console has
    none). Raises CannotStart when the level can be reached neither way. A menu driver that
    sets the level on the options screen from its pictures plugs in here."""
    if chains_to(previous, level, speed):
        assert previous is not None
        return next_level_presses(first_frame, previous, level, speed)
    if previous is None:
        return press_start(first_frame)
    if reset is None:
        raise CannotStart(
            f"level {level} speed {speed} is not the game's next level and this console "
            "cannot be reset; ending the run"
        )
    reset()
    return StartPresses(first_frame, [int(Button.START), 0], first_frame, reset=True)


# ---- the console --------------------------------------------------------------------------


class Console(Protocol):
    """One console the loop plays (BizHawk's IEmulator, libretro's retro_run: the runtime never
    asks which kind). ``name``: "sim", "emu" or "rig". ``capture``: the capture source, its
    frames' ``time_ns`` on :meth:`now_ns`'s clock. ``latency_frames`` / ``jitter_ms``: the
    capture chain's delay (console frames) and its spread (ms), for the tracker.
    ``lockstep``: the console waits for the host (its time moves only when the capture is
    read; ``hil run --fast``), else it runs in real time and never waits."""

    name: str
    latency_frames: float
    jitter_ms: float

    @property
    def lockstep(self) -> bool: ...

    @property
    def capture(self) -> CaptureSource:
        """The console's capture source (its frames on :meth:`now_ns`'s clock)."""
        ...

    @property
    def port(self) -> str:
        """The controller port's path now (the firmware's serial port; a pty may change on
        replug)."""
        ...

    def now_ns(self) -> int:
        """The runtime's clock (ns): ``time.monotonic_ns`` in real time, the console's own
        clock in lockstep (the runtime's work then takes no console time)."""
        ...

    def start(self) -> None:
        """The console runs from now (its clock's 0)."""
        ...

    def close(self) -> None: ...

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """How ``level`` at ``speed`` is started from console frame ``first_frame`` on (the
        first frame a schedule sent now can reach): the controller masks to send. ``previous``:
        the level played before in this run (None for the first). Raises CannotStart."""
        ...

    def report(self) -> dict[str, Any]:
        """What this console adds to the run's summary (JSON-ready; {} for nothing)."""
        ...
