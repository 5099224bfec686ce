"""The emulator console: the user's own NES ROM in cynes, its controller fed by the firmware core.

:class:`EmulatedNes` runs a ROM in `cynes <https://pypi.org/project/cynes/>`_ (a cycle-level NES
emulator, headless) one video frame at a time. The controller byte of every frame comes from a
:class:`hil.link.vdevice.VirtualDevice` (the firmware's C core on a pseudo-terminal), so the host
schedules masks with :class:`hil.link.Link` exactly as it does for the real RP2040, and the
firmware's queue, late/underrun and watchdog logic is the real one.

How controller reads map onto frames (docs/EMU.md):

- ``cynes.NES.step()`` runs the CPU until the PPU starts the next vblank (scanline 241, dot 1);
  the NMI raised there runs at the start of the following ``step``. So one ``step`` holds one NMI
  and the picture rendered after it (``EmuFrame.picture`` shows what that NMI drew).
- cynes takes the pad state once per ``step`` (``NES.controller``): every strobe in that frame
  loads the same byte, so the two reads of Dr. Mario's NMI (getInputs [$B7E1]) see one byte, as
  the firmware's latch window gives them on the console. A byte cannot change within a frame.
- The firmware numbers console frames by latch groups, not by video frames: a frame in which
  the game reads no controller (NMI off while it loads a screen) is no console frame. The
  console detects reads by a RAM byte the game's NMI increments once per NMI, each NMI reading
  the pad (``GameFacts.nmi_counter``: Dr. Mario's frameCounter $43, nmi [$8005]). Before a
  frame it sets the pad to the byte the firmware has armed for its next latch (the last word
  the core handed to the PIO); after the frame, if the NMI ran, it plays the latch group on the
  device (:meth:`VirtualDevice.latch`), which must return that same byte, else it only moves
  the device clock.

Times are the console clock in microseconds (NTSC, 1e6 / 60.0988 us per video frame from
``start_us``); the device sees them, not the wall clock, so the emulator may run faster than
real time (~3 ms a frame here) and the host keeps the device watchdog fed on console time.

:class:`EmuCapture` puts the frames through a Profile's timing and forward model, like the
simulated console. :func:`navigate_menus` drives Dr. Mario from power-on through the title and
options screens to the chosen level, speed and music, through the same schedule path.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

import engine
from calibration import CaptureModel, Profile, TimingModel
from engine import RomError
from engine.ines import read_rom
from engine.ram import (  # noqa: F401 - MUSIC: the names `hil emu` and the tools import here
    MAX_MENU_LEVEL,
    MODE_OPTIONS,
    MODE_PLAY,
    MODE_TO_LEVEL,
    MUSIC,
    DrMarioRam,
    menu_press,
    open_nes,
)
from hil import testrom
from hil.consoles.base import Frame, LevelEnd, StartPresses, start_with_pad
from hil.consoles.paced import CaptureFault, ChainCapture, PacedConsole
from hil.link.link import Link
from hil.link.vdevice import VirtualDevice

NTSC_FRAME_US = 1e6 / 60.0988  # one NTSC video frame (us)
DR_MARIO_READ_GAP_US = 222  # first latch to second latch of getInputs (firmware/PROTOCOL.md)
FRAMES_KEPT = 600  # video frames (pictures, facts) an EmuRun keeps (10 s)
RESET_RESYNC_FRAMES = 12  # video frames after RESET before the NMI counter is trusted again
FIRMWARE_START_US = 1_000_000  # the firmware image's clock when the emulator's frame 0 begins
U8 = npt.NDArray[np.uint8]


class EmuError(RuntimeError):
    """The emulated console did something the model cannot follow (CPU crash, an NMI counter
    that jumped, a latch that got another byte than the one the emulator used)."""


@dataclass(frozen=True)
class GameFacts:
    """What EmulatedNes must know about a ROM: its name and the RAM address of a byte its NMI
    increments once per NMI, every NMI reading the controller (the latch detector)."""

    name: str
    nmi_counter: int


# nmi [$8005] increments frameCounter ($43) and calls getInputs_checkMode [$9144], which reads
# the pad (getInputs [$B7E1]) in play and in the demo alike. Nothing else writes $43 after init.
DR_MARIO = GameFacts("Dr. Mario", 0x43)
TEST_ROM = GameFacts("hil test ROM", testrom.NMI_COUNT)  # its low byte
GAMES = {"drmario": DR_MARIO, "testrom": TEST_ROM}


class Emulator(Protocol):
    """The part of ``cynes.NES`` EmulatedNes uses (tests may pass a stand-in)."""

    controller: int

    def step(self, frames: int = 1) -> U8: ...

    def __getitem__(self, address: int) -> int: ...

    def reset(self) -> None: ...

    def save(self) -> Any: ...

    def load(self, state: Any) -> None: ...

    @property
    def has_crashed(self) -> bool: ...


@dataclass(frozen=True)
class EmuFrame:
    """One emulated video frame.

    ``video_frame``: emulator steps since power-on, from 0. ``time_us``: its start on the console
    clock (us). ``console_frame``: the firmware's number of the latch group read in this frame,
    or None for a lag frame (no controller read). ``mask``: the byte the game read (A = 0x80 ...
    Right = 0x01), None on a lag frame. ``picture``: RGB uint8 [240, 256, 3], the picture
    rendered after this frame's NMI (a copy).
    """

    video_frame: int
    time_us: int
    console_frame: int | None
    mask: int | None
    picture: U8


class EmulatedNes:
    """An NES ROM in cynes with its controller on the firmware core (module docstring): the
    emulated machine, not a Console (EmuRun is the Console that runs it).

    ``rom_path``: the user's iNES file. ``game``: ``"drmario"`` (default; the file is checked
    with engine's iNES reader: NTSC Dr. Mario, ``verify_crc`` against known-good dumps) or
    ``"testrom"`` (the project's test ROM, :mod:`hil.testrom`; only the iNES magic is checked).
    ``device``: the VirtualDevice to read the pad from (one is created, and closed by
    :meth:`close`, when None); a host talks to it with ``Link(console.device.port)``.
    ``start_us``: console time of video frame 0. ``emulator``: factory of the emulator from a
    path (default ``cynes.NES``).

    Raises RomError (a ValueError) for a missing file, a file that is not the game, or one
    cynes cannot load (unsupported mapper); ValueError for an unknown ``game``.
    """

    def __init__(
        self,
        rom_path: str | Path,
        device: VirtualDevice | None = None,
        *,
        game: str = "drmario",
        verify_crc: bool = True,
        start_us: int = 0,
        read_gap_us: int = DR_MARIO_READ_GAP_US,
        emulator: Callable[[str], Emulator] | None = None,
    ) -> None:
        if game not in GAMES:
            raise ValueError(f"game must be one of {', '.join(GAMES)}, got {game!r}")
        path = Path(rom_path)
        if not path.is_file():
            raise RomError(f"{path}: no such ROM file")
        self.facts = GAMES[game]
        self.game = game
        if game == "drmario":
            _, _, self.rom_name = read_rom(path, verify_crc=verify_crc)
        else:
            with path.open("rb") as f:
                if f.read(4) != b"NES\x1a":
                    raise RomError(f"{path.name} is not an iNES file (no 'NES' $1A header)")
            self.rom_name = f"{self.facts.name} ({path.name})"
        try:
            self.nes = (emulator or open_nes)(os.fspath(path))
        except (RuntimeError, OSError) as e:  # cynes: "The ROM Mapper is not supported." etc.
            raise RomError(f"{path.name}: the emulator cannot load it ({e})") from None
        self._own_device = device is None
        self.device: Any = device if device is not None else VirtualDevice()
        self.start_us = int(start_us)
        self.read_gap_us = int(read_gap_us)
        self.video_frame = 0  # video frames stepped so far
        self.console_frame = -1  # the firmware's number of the latest latch group; -1: none yet
        self.lag_frames = 0  # video frames without a controller read
        self._counter = int(self.nes[self.facts.nmi_counter])
        self._resync = 0  # frames after a RESET whose NMI counter steps are not trusted
        # A controller whose armed byte cannot be seen (the firmware image in rp2040js,
        # hil.link.vdevice.EmulatedFirmware) is read at the frame's time before the frame is
        # emulated; whether the frame reads it at all is found out first (_probe_reads) and
        # its reads are planned one frame ahead (made at their time while the emulated
        # firmware serves the host). None: not known yet.
        self._pull = not hasattr(self.device, "pio_words")
        self._next_reads: bool | None = None

    # ---- the console ---------------------------------------------------------------------

    def frame_time_us(self, video_frame: int) -> int:
        """Start of ``video_frame`` on the console clock (us)."""
        return round(self.start_us + video_frame * NTSC_FRAME_US)

    def armed_mask(self) -> int:
        """The byte the firmware serves at the next latch: the last word its core handed to
        the PIO (nb_pio_word: mask in bits 31..24)."""
        words = self.device.pio_words
        return (words[-1] >> 24) & 0xFF if words else 0

    def next_schedulable_frame(self) -> int:
        """The first console frame a SCHEDULE sent now can still fill: the one after the armed
        frame (firmware/PROTOCOL.md, "SCHEDULE and the frame queue")."""
        return self.console_frame + 2

    def step(self, close_window: bool = True) -> EmuFrame:
        """Emulate one video frame (see the module docstring). ``close_window`` False: the
        frame's controller reads only; the caller closes its latch window later
        (``device.advance(time_us + window_us)``: the STATUS and the next frame's byte), as a
        real-time console does ``window_us`` after the reads. Raises EmuError."""
        t_us = self.frame_time_us(self.video_frame)
        if self._pull:
            return self._step_pull(t_us)
        mask = self.armed_mask()
        picture = self._emulate(mask)
        count = int(self.nes[self.facts.nmi_counter])
        nmis = (count - self._counter) & 0xFF
        self._counter = count
        if self._resync > 0:
            # After RESET the game clears RAM: the counter's step means nothing until it counts
            # again (a frame it jumped in is taken as one without a read).
            self._resync -= 1
            nmis = nmis if nmis <= 1 else 0
        frame: EmuFrame
        if nmis == 0:
            self.device.advance(t_us)
            self.lag_frames += 1
            frame = EmuFrame(self.video_frame, t_us, None, None, picture)
        elif nmis == 1:
            if close_window:
                got = self.device.latch(t_us, reads=2, read_gap_us=self.read_gap_us)
            else:
                got = self.device.read(t_us)
                if self.device.read(t_us + self.read_gap_us) != got:
                    raise EmuError(f"the two reads of video frame {self.video_frame} differ")
            self.console_frame += 1
            if got != mask:
                raise EmuError(
                    f"console frame {self.console_frame}: the firmware served {got:#04x} but "
                    f"had armed {mask:#04x} (an ARM_MISS?)"
                )
            frame = EmuFrame(self.video_frame, t_us, self.console_frame, mask, picture)
        else:
            raise EmuError(
                f"{self.facts.name}'s NMI counter (RAM ${self.facts.nmi_counter:04X}) moved by "
                f"{nmis} in video frame {self.video_frame}; one NMI per frame is possible"
            )
        self.video_frame += 1
        return frame

    def _emulate(self, mask: int) -> U8:
        """One video frame with ``mask`` on the pad: its picture (a copy). Raises EmuError."""
        self.nes.controller = mask
        picture = np.array(self.nes.step(1), dtype=np.uint8, copy=True)
        if self.nes.has_crashed:
            raise EmuError(
                f"the emulated CPU hit an invalid opcode in video frame {self.video_frame}"
            )
        return picture

    def _probe_reads(self) -> bool:
        """Whether the next video frame's NMI reads the controller: the frame emulated with
        no buttons from a saved state, which is then restored (the game decides whether its
        NMI runs before it reads the pad, so the byte cannot change the answer)."""
        snap = self.nes.save()
        before = int(self.nes[self.facts.nmi_counter])
        self.nes.controller = 0
        self.nes.step(1)
        reads = (int(self.nes[self.facts.nmi_counter]) - before) & 0xFF == 1
        self.nes.load(snap)
        return reads

    def _step_pull(self, t_us: int) -> EmuFrame:
        """One video frame with a controller read at the frame's time (see __init__)."""
        reads = self._probe_reads() if self._next_reads is None else self._next_reads
        mask = 0
        if reads:
            mask = int(self.device.read(t_us))
            if int(self.device.read(t_us + self.read_gap_us)) != mask:
                raise EmuError(f"the two reads of video frame {self.video_frame} differ")
        picture = self._emulate(mask)
        self._counter = int(self.nes[self.facts.nmi_counter])
        frame = EmuFrame(self.video_frame, t_us, None, None, picture)
        if reads:
            self.console_frame += 1
            frame = EmuFrame(self.video_frame, t_us, self.console_frame, mask, picture)
        else:
            self.device.advance(t_us)
            self.lag_frames += 1
        self.video_frame += 1
        # The next frame's reads are planned now, before the host talks to the firmware again.
        self._next_reads = self._probe_reads()
        if self._next_reads:
            nxt = self.frame_time_us(self.video_frame)
            self.device.plan_reads([nxt, nxt + self.read_gap_us])
        return frame

    def reset(self) -> None:
        """The console's RESET button (the game restarts at its title; RAM is kept, as on the
        console, and the game clears what it uses)."""
        self.nes.reset()
        self._resync = RESET_RESYNC_FRAMES
        self._next_reads = None

    def ram(self, address: int) -> int:
        """One byte of the console's 2 KiB RAM ($0000-$07FF). Raises ValueError outside it
        (reading PPU/APU registers through the emulator would change their state)."""
        if not 0 <= int(address) <= 0x7FF:
            raise ValueError(f"RAM address must be in $0000-$07FF, got ${int(address):X}")
        return int(self.nes[int(address)])

    def ram_block(self, address: int, size: int) -> U8:
        """``size`` bytes of RAM from ``address``: uint8 [size]."""
        if size < 0 or not 0 <= address <= address + size - 1 <= 0x7FF:
            raise ValueError(f"RAM block ${address:X}+{size} is outside $0000-$07FF")
        return np.fromiter((self.nes[a] for a in range(address, address + size)), np.uint8, size)

    def truth(self) -> dict[str, Any]:
        """JSON-ready facts from RAM (Dr. Mario: mode, level, speed, viruses, field; the test
        ROM: its pad byte and counters)."""
        if self.game == "testrom":
            return {
                "pad": self.ram(testrom.PAD),
                "reads": [self.ram(testrom.READ1), self.ram(testrom.READ2)],
                "nmi_count": self.ram(testrom.NMI_COUNT) | self.ram(testrom.NMI_COUNT + 1) << 8,
                "lag_count": self.ram(testrom.LAG_COUNT),
            }
        field = self.ram_block(DrMarioRam.FIELD, 128)
        bcd = self.ram(DrMarioRam.VIRUS_LEFT)
        return {
            "mode": self.ram(DrMarioRam.MODE),
            "level": self.ram(DrMarioRam.LEVEL),
            "speed": self.ram(DrMarioRam.SPEED),
            "virus_left": (bcd >> 4) * 10 + (bcd & 0x0F),
            "field": [bytes(row).hex() for row in field.reshape(16, 8)],
        }

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Closes the VirtualDevice if this console created it."""
        if self._own_device:
            self.device.close()

    def __enter__(self) -> EmulatedNes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MaskFeeder:
    """Schedules a table of masks ahead of an EmulatedNes, on console time, as a live host does.

    ``masks``: console frame -> mask (None: leave that frame unscheduled; it reads no buttons,
    an underrun while streaming). Call it before every :meth:`EmulatedNes.step`: it keeps the
    frames up to ``ahead`` console frames past the latest latch scheduled, in SCHEDULE messages
    of at most ``chunk`` frames, and PINGs when ``keepalive_frames`` video frames pass without a
    message (the device watchdog, 500 ms = 30 frames, runs on console time, not wall time).
    ``acks`` collects every SCHEDULE's Ack. Raises ValueError for bad settings.
    """

    def __init__(
        self,
        link: Link,
        masks: Mapping[int, int | None],
        *,
        ahead: int = 48,
        chunk: int = 16,
        keepalive_frames: int = 12,
    ) -> None:
        if not masks:
            raise ValueError("no masks to schedule")
        if not 1 <= chunk <= 64 or not chunk <= ahead <= 250 or keepalive_frames < 1:
            raise ValueError(
                f"need 1 <= chunk <= 64, chunk <= ahead <= 250, keepalive_frames >= 1; got "
                f"chunk {chunk}, ahead {ahead}, keepalive_frames {keepalive_frames}"
            )
        self.link = link
        self.masks = dict(masks)
        self.first, self.last = min(self.masks), max(self.masks)
        self.sent = self.first - 1  # every frame up to here has been handled
        self.ahead, self.chunk, self.keepalive_frames = ahead, chunk, keepalive_frames
        self.spoke = 0  # video frame of the last message
        self.acks: list[Any] = []

    def __call__(self, console: EmulatedNes) -> None:
        if self.sent < self.first - 1:
            self.sent = self.first - 1
        while self.sent < min(console.console_frame + self.ahead, self.last):
            start = self.sent + 1
            run: list[int] = []
            while start + len(run) <= self.last and len(run) < self.chunk:
                m = self.masks.get(start + len(run))
                if m is None:
                    break
                run.append(m)
            if run:
                self.acks.append(self.link.schedule(start, run))
                self.spoke = console.video_frame
            self.sent = start + max(len(run), 1) - 1
        if console.video_frame - self.spoke >= self.keepalive_frames:
            self.link.ping(console.video_frame)
            self.spoke = console.video_frame


class EmuCapture:
    """An EmulatedNes seen through a capture chain: yields (Frame, truth) per captured frame.

    The timing model (``profile.timing``, seeded by ``capture_seed``) says which video frame each
    captured frame shows, counted from the console's video frame when ``frames`` starts; the
    console is stepped to it and its picture put through the forward model. ``on_frame`` (if
    given) is called with every EmuFrame stepped, so a host can schedule between frames.
    ``truth``: ``device_index``, ``video_frame``, ``console_frame`` (latest latch group at or
    before it, -1 if none), ``mask`` (that group's byte) and :meth:`EmulatedNes.truth`.
    """

    def __init__(
        self,
        console: EmulatedNes,
        profile: Profile,
        capture_seed: int = 0,
        on_frame: Callable[[EmuFrame], None] | None = None,
    ) -> None:
        self.console = console
        self.profile = profile
        self.model = CaptureModel(profile, seed=capture_seed)
        self.timing = TimingModel(
            profile.timing, seed=capture_seed, combing=profile.artifacts.combing
        )
        self.on_frame = on_frame
        self._last: EmuFrame | None = None  # the latest video frame stepped
        self._before_last: EmuFrame | None = None  # the one before it (interlace combing)
        self._latched: EmuFrame | None = None  # the latest frame that read the controller

    def _advance_to(self, video_frame: int) -> EmuFrame:
        while self._last is None or self._last.video_frame < video_frame:
            self._before_last, self._last = self._last, self.console.step()
            if self._last.console_frame is not None:
                self._latched = self._last
            if self.on_frame is not None:
                self.on_frame(self._last)
        return self._last

    def frames(self, max_frames: int) -> Iterator[tuple[Frame, dict[str, Any]]]:
        """Up to ``max_frames`` captured frames (BGR, the profile's size) and their truth."""
        if max_frames < 1:
            raise ValueError(f"max_frames must be at least 1, got {max_frames}")
        base = self.console.video_frame
        sched = self.timing.schedule(max_frames)
        for i in range(len(sched)):
            shown = self._advance_to(base + int(sched.console_frame[i]))
            before = self._before_last
            image = self.model(shown.picture, previous=before.picture if before else None)
            latched = self._latched
            truth = {
                "device_index": int(sched.device_index[i]),
                "video_frame": shown.video_frame,
                "console_frame": latched.console_frame if latched is not None else -1,
                "mask": latched.mask if latched is not None else 0,
                **self.console.truth(),
            }
            yield Frame(image=image, time_ns=int(sched.time_ns[i]), index=i), truth


# ---- Dr. Mario's menus -------------------------------------------------------------------


@dataclass(frozen=True)
class MenuResult:
    """Where :func:`navigate_menus` left the game.

    ``level``, ``speed``, ``music``: read back from RAM. ``seed``: the RNG state ($17 << 8 |
    $18) as initData_level [$8216] starts, so ``engine.Game(level, speed, seed)`` is this level
    (docs/LEVEL_GEN.md, "What the seed is"). ``start_frame``: the console frame on which Start
    was read on the options screen. ``presses``: buttons pressed. ``video_frames``: frames
    emulated by the navigation. ``play_frame``: the first console frame in mode play
    (mainLoop_level) when asked to wait for it, else None.
    """

    level: int
    speed: int
    music: int
    seed: int
    start_frame: int
    presses: int
    video_frames: int
    play_frame: int | None


def navigate_menus(
    console: EmulatedNes,
    link: Link,
    level: int,
    speed: int,
    music: int | None = None,
    *,
    max_frames: int = 4000,
    wait_for_play: bool = False,
    keepalive_frames: int = 12,
    press_start: bool = True,
) -> MenuResult:
    """Take Dr. Mario from power-on, the title, the attract demo or the options screen to the
    start of ``level`` (0..20) at ``speed`` (0 LOW, 1 MED, 2 HI), with ``music`` (0 fever,
    1 chill, 2 off; None leaves it), through ``link`` (a Link to ``console.device``).

    Closed loop on the game's RAM: each console frame gets one scheduled byte (the stream never
    underruns); a press lasts one frame and the next decision waits until RAM shows its effect,
    so a press the game ignored (a screen still loading) is simply repeated. ``press_start``
    False: stop on the options screen once level, speed (and music) are set, before Start
    (``start_frame`` and ``seed`` are then -1; the caller presses Start). The device
    watchdog is fed on console time (a PING when ``keepalive_frames`` video frames pass without
    a message). Ends with the stream cleared when the game leaves the options screen (or, with
    ``wait_for_play``, at its first frame of play). Raises ValueError for a target out of range
    or a console that is not Dr. Mario, EmuError when ``max_frames`` pass first.
    """
    if console.game != "drmario":
        raise ValueError(f"menu navigation is for Dr. Mario, not {console.facts.name}")
    if not 0 <= level <= MAX_MENU_LEVEL:
        raise ValueError(f"level must be 0..{MAX_MENU_LEVEL} on the options screen, got {level}")
    if speed not in (0, 1, 2):
        raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {speed}")
    if music is not None and music not in (0, 1, 2):
        raise ValueError(f"music must be 0 (fever), 1 (chill), 2 (off) or None, got {music}")
    r = DrMarioRam
    first_video = console.video_frame
    scheduled = console.next_schedulable_frame() - 1  # the last frame given a byte
    wait_until = 0  # no decision until this console frame has latched (the game reads the pad)
    presses = 0
    last_message = console.video_frame
    start_frame = seed = -1
    seen_options = False  # a level counts only once the options screen has been passed
    while console.video_frame - first_video < max_frames:
        target = console.next_schedulable_frame()
        while scheduled < target:
            scheduled += 1
            mask = 0
            if scheduled == target and console.console_frame >= wait_until:
                mask = menu_press(console.ram, level, speed, music)
                on_options = console.ram(r.MODE) == MODE_OPTIONS and not console.ram(r.DEMO)
                if mask == int(engine.Button.START) and on_options and not press_start:
                    link.clear()
                    return MenuResult(
                        level=console.ram(r.LEVEL),
                        speed=console.ram(r.SPEED),
                        music=console.ram(r.MUSIC),
                        seed=-1,
                        start_frame=-1,
                        presses=presses,
                        video_frames=console.video_frame - first_video,
                        play_frame=None,
                    )
                if mask:
                    presses += 1
                    wait_until = scheduled
            link.schedule(scheduled, [mask])
            last_message = console.video_frame
        if console.video_frame - last_message >= keepalive_frames:
            link.ping(console.video_frame)
            last_message = console.video_frame
        ev = console.step()
        mode, demo = console.ram(r.MODE), console.ram(r.DEMO)
        seen_options |= mode == MODE_OPTIONS and not demo
        if start_frame < 0 and seen_options and mode >= MODE_TO_LEVEL and not demo:
            # Start was read in the options loop; toLevel [$817E] steps no RNG.
            start_frame = console.console_frame
            seed = console.ram(r.RNG) << 8 | console.ram(r.RNG + 1)
            if not wait_for_play:
                break
        if start_frame >= 0 and mode == MODE_PLAY and ev.console_frame is not None:
            break
    else:
        raise EmuError(
            f"menu navigation did not reach level {level} within {max_frames} video frames "
            f"(mode {console.ram(r.MODE)}, level {console.ram(r.LEVEL)}, "
            f"speed {console.ram(r.SPEED)})"
        )
    link.clear()
    return MenuResult(
        level=console.ram(r.LEVEL),
        speed=console.ram(r.SPEED),
        music=console.ram(r.MUSIC),
        seed=seed,
        start_frame=start_frame,
        presses=presses,
        video_frames=console.video_frame - first_video,
        play_frame=console.console_frame if wait_for_play else None,
    )


# ---- hil run --emu: the emulator as the console the runtime plays ---------------------------


class EmuRun(PacedConsole):
    """``hil run --emu ROM``: the user's Dr. Mario in cynes as a console the Runtime plays
    (hil.consoles.base.Console, like hil.consoles.sim.SimConsole: a capture source on the
    console's frame clock, the controller port, and how a level is started). Video frame ``v``
    (counted from :meth:`start`) is emulated at console time ``v * T`` (T = 1e9 / 60.0988 ns)
    with the byte the firmware core armed for it; its latch window closes ``window_us`` later,
    when the core sends the frame's STATUS and arms the next one. ``realtime``: a thread paces
    that on the wall clock and never waits for the host (hil.consoles.paced); else lockstep:
    the emulator runs up to each captured frame's arrival time. Each picture goes through the
    Profile's timing and forward model (hil.consoles.paced.ChainCapture).

    :meth:`start` drives the menus through the firmware core (:meth:`prepare`: navigate_menus,
    without Start) to ``level`` and ``speed`` on the options screen when ``ram_menus``, and
    reads them back from the game's RAM; :meth:`start_level` then presses Start, and after each
    stage clear holds Start as the game asks, so the game chains level after level. Without
    ``ram_menus`` the game runs from power-on and the runtime's menu driver starts each level
    from the pictures.

    Ground truth for ``--reader oracle``: an engine.LevelFlow shadow of the game, begun at the
    frame the options screen took Start (RNG and frameCounter read from RAM) and fed the same
    masks; each frame its field and mode are checked against RAM (``ram_mismatches``), and
    the one bit it cannot derive (initData_level overrunning its frame) is read off RAM by
    replaying the flow. ``truth["facts"]`` is screen_facts of the shadow's shown state (None on
    screens the engine does not draw). ``capture_faults``: hil.consoles.paced.CaptureFault
    (real time). Raises RomError, EmuError, ValueError.
    """

    def __init__(
        self,
        rom: str | Path,
        level: int,
        speed: int,
        profile: Profile,
        *,
        capture_seed: int = 0,
        max_frames: int = 200_000,
        verify_crc: bool = True,
        emulator: Callable[[str], Emulator] | None = None,
        game: str = "drmario",
        ram_menus: bool = True,
        realtime: bool = False,
        capture_faults: Sequence[CaptureFault] = (),
        link_faults: Sequence[Any] = (),
        device: Any = None,
    ) -> None:
        if not 0 <= level <= MAX_MENU_LEVEL:
            raise ValueError(
                f"level must be 0..{MAX_MENU_LEVEL} on the options screen, got {level}"
            )
        if speed not in (0, 1, 2):
            raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {speed}")
        # The firmware image's clock has run since its boot (about a second to enumerate):
        # frames begin at 1 s on it, as on the simulated console.
        start_us = 0 if device is None else FIRMWARE_START_US
        self.emu = EmulatedNes(
            rom, device, verify_crc=verify_crc, emulator=emulator, game=game, start_us=start_us
        )
        self.emu._own_device = True  # the run closes whatever controller it was given
        if isinstance(self.emu.device, VirtualDevice):
            self.emu.device.lockstep = not realtime
        self.game = game
        self.level, self.speed = level, speed
        self.start_latches: list[int] = []  # console frames that latched Start
        self.profile = profile
        self.period_ns = 1e9 / profile.timing.console_hz
        self.base_video = 0  # video frame that is the capture schedule's frame 0
        self._frames: dict[int, tuple[EmuFrame, Any]] = {}  # video frame -> (frame, facts)
        self._pending_close: int | None = None  # video frame whose latch window is open
        self._shift_ns = 0.0  # frames run this much later than frame 0's phase (RESETs)
        self._origin_us = 0  # the firmware's clock at console time 0 (start)
        self.flow: engine.LevelFlow | None = None
        self._snap: tuple[engine.LevelFlow, list[int]] | None = None
        self._late_checked = False
        self.ram_mismatches = 0
        self.levels: list[dict[str, Any]] = []
        self.late_inits = 0  # levels whose initData_level overran its frame (read off RAM)
        self._init_pacing(realtime)
        self._init_faults(link_faults)
        self.capture = ChainCapture(
            self,
            profile,
            name="emu",
            max_frames=max_frames,
            capture_seed=capture_seed,
            faults=capture_faults,
        )
        self.latency_frames = profile.timing.latency_frames
        self.jitter_ms = profile.timing.jitter_ms
        self.menu: MenuResult | None = None
        # True: :meth:`start` sets the options screen by RAM (navigate_menus, a known RNG
        # seed: tools and tests); False: the game runs from power-on and the runtime's menu
        # driver starts each level from the pictures (hil run --emu).
        self.ram_menus = ram_menus

    # ---- the Console interface -------------------------------------------------------------

    name = "emu"

    @property
    def port(self) -> str:
        return self.emu.device.port

    @property
    def device(self) -> Any:
        """The controller the game reads (the firmware core on a pty)."""
        return self.emu.device

    def now_ns(self) -> int:
        """The runtime's clock (PacedConsole.now_ns); in lockstep with the firmware image in
        rp2040js, its clock where that is later: serving the host's bytes runs it on, and a
        reply stamped with an earlier time would look early (as on the simulated console)."""
        now = super().now_ns()
        clock = getattr(self.emu.device, "clock_us", None)
        if clock is None or self.realtime:
            return now
        with self._lock:
            dev = self.host_ns((clock() - self._origin_us) * 1000.0)
        return max(now, dev)

    def unplug(self) -> None:
        """Pulls the controller's USB cable: the pty goes away; the game reads no buttons once
        the firmware has noticed (nb_host_lost)."""
        self.emu.device.unplug()

    def replug(self) -> str:
        """Plugs a freshly booted controller in (its frames count from 0 again); returns the
        new port path."""
        with self._lock:
            self.emu.device.close()
            self.emu.device = VirtualDevice()
            self.emu.device.lockstep = not self.realtime
            self.emu._own_device = True
            self.emu.console_frame = -1
            return self.emu.device.port

    def console_reset(self, t_ns: float, shift_ns: float) -> None:
        """The console's RESET (an injected fault): the game restarts at its title, and its
        video timing at another phase, ``shift_ns`` later (a real console's PPU restarts its
        frame; the capture card, on its own clock, samples the frames at the new phase)."""
        self.emu.reset()
        self.flow, self._snap = None, None
        self._shift_ns += shift_ns
        self.emu.start_us += round(shift_ns / 1000)
        self.capture.shift_phase(t_ns, self._shift_ns)

    def prepare(self) -> MenuResult | None:
        """Menus to ``level``/``speed`` on the options screen (no Start); checks them back.
        The test ROM has no menus (None)."""
        if self.game != "drmario":
            self.base_video = self.emu.video_frame
            return None
        with Link(self.emu.device.port) as link:
            res = navigate_menus(self.emu, link, self.level, self.speed, press_start=False)
        if (res.level, res.speed) != (self.level, self.speed):
            raise EmuError(
                f"the options screen shows level {res.level} speed {res.speed}, not the "
                f"level {self.level} speed {self.speed} asked for; not playing it"
            )
        self.base_video = self.emu.video_frame
        return res

    def start(self) -> None:
        """Drives the menus to the first level (:meth:`prepare`) when ``ram_menus``, else
        leaves the game at power-on for the runtime's menu driver; the clock's 0 is then (in
        real time the console runs from here)."""
        if self.ram_menus:
            self.menu = self.prepare()
        else:
            self.base_video = self.emu.video_frame
        # The firmware's clock at console time 0: it runs on through a RESET, whose frames
        # come at another phase (console_reset moves the frames' times, not the clock).
        self._origin_us = self.emu.frame_time_us(self.base_video)
        self._start_pacing()

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """Start on the options screen :meth:`prepare` set, then the game's chain (no RESET:
        a game is a chain of levels). Raises CannotStart for any other level."""
        return start_with_pad(level, speed, first_frame, previous)

    def report(self) -> dict[str, Any]:
        """``{"emu": ...}``: the ROM, the menus, the levels the game began, the LevelFlow
        shadow's RAM check, lag frames, and in real time how late the console ran its frames
        (``pacing``). ``menu_presses``: the presses of the RAM-driven menus (``ram_menus``),
        None when the runtime's picture-driven menus started the levels (their presses and
        frames are in the log's ``start_pressed`` events); ``start_latches``: the console
        frames that latched Start, kept for the test ROM (no game) only."""
        return {
            "emu": {
                "rom": self.emu.rom_name,
                "profile": self.profile.name,
                "game": self.game,
                "realtime": self.realtime,
                "menu_presses": None if self.menu is None else self.menu.presses,
                "start_latches": self.start_latches[:16],
                "levels_seen": self.levels,
                "shadow_ram_mismatch_frames": self.ram_mismatches,
                "late_init_levels": self.late_inits,
                "video_frames": self.emu.video_frame,
                "lag_frames": self.emu.lag_frames,
                "pacing": self.pacing.report(),
                "faults": self.fault_counts | self.capture.fault_counts,
            }
        }

    def close(self) -> None:
        self._stop_pacing()
        self.capture.close()
        self.emu.close()

    # ---- stepping ----------------------------------------------------------------------------

    def _window_ns(self) -> float:
        return self.emu.device.window_us() * 1000.0

    def _frame_ns(self, v: int) -> float:
        """Console time at which video frame ``v`` begins (its NMI and controller reads)."""
        return (v - self.base_video) * self.period_ns + self._shift_ns

    def _next_event_ns(self) -> float:
        due = self._frame_ns(self.emu.video_frame)
        if self._pending_close is not None:
            due = min(due, self._frame_ns(self._pending_close) + self._window_ns())
        return due

    def _advance_to(self, t_ns: float) -> None:
        """Runs every event up to console time ``t_ns``: video frame v is emulated at v * T
        (its controller reads, on the byte the core armed), its latch window closes
        ``window_us`` later (VirtualDevice.advance: the STATUS goes out, the next frame is
        armed)."""
        with self._lock:
            window = self._window_ns()
            while True:
                due = self._frame_ns(self.emu.video_frame)
                if self._pending_close is not None:
                    close = self._frame_ns(self._pending_close) + window
                    if close <= due and close <= t_ns:
                        self._close(self._pending_close)
                        continue
                if due > t_ns:
                    break
                if self._pending_close is not None:
                    self._close(self._pending_close)
                if self._fault_tick(self.emu.video_frame - self.base_video, due):
                    continue  # reset: the frame begins later, on the new phase
                self._step()
            self._now_ns = int(t_ns)
            # The device's clock runs with the console's: messages the host sent are taken,
            # and STATUS/PONG stamped, at the time the host sees now.
            self.emu.device.advance(self._origin_us + int(t_ns / 1000))

    def _close(self, v: int) -> None:
        self.emu.device.advance(self.emu.frame_time_us(v) + self.emu.device.window_us())
        self._pending_close = None

    def _step(self) -> None:
        if self.game != "drmario":  # the test ROM: the console and its pad, no game
            ev = self.emu.step(close_window=False)
            if ev.mask is not None and ev.mask & engine.Button.START:
                self.start_latches.append(int(ev.console_frame or 0))
            self._keep(ev, None)
            return
        r = DrMarioRam
        mode_before = self.emu.ram(r.MODE)
        before = self.flow.game if self.flow is not None and not self.flow.terminal else None
        ev = self.emu.step(close_window=False)
        mask = int(ev.mask or 0)
        mode = self.emu.ram(r.MODE)
        facts = None
        if mode_before == MODE_OPTIONS and mode == MODE_TO_LEVEL and not self.emu.ram(r.DEMO):
            seed = self.emu.ram(r.RNG) << 8 | self.emu.ram(r.RNG + 1)
            self.flow = engine.LevelFlow(
                self.emu.ram(r.LEVEL),
                self.emu.ram(r.SPEED),
                seed,
                frame_counter=self.emu.ram(0x43),
                held=mask | int(engine.Button.START),
            )
            self._snap, self._late_checked = None, False
        elif self.flow is not None and not self.flow.terminal:
            self._shadow(mask)
            if self.flow.screen == engine.FlowScreen.LEVEL and before is not None:
                facts = engine.screen_facts(before)
        self._keep(ev, facts)

    def _keep(self, ev: EmuFrame, facts: Any) -> None:
        self._frames[ev.video_frame] = (ev, facts)
        self._frames.pop(ev.video_frame - FRAMES_KEPT, None)
        if ev.console_frame is not None:
            self._pending_close = ev.video_frame

    def _shadow(self, mask: int) -> None:
        """Steps the LevelFlow shadow one frame and checks it against RAM."""
        flow = self.flow
        assert flow is not None
        levels = flow.levels_started
        flow.step(mask)
        if self._snap is not None:
            self._snap[1].append(mask)
        if flow.levels_started != levels:
            self._late_checked = False
        if flow.stage == engine.FlowStage.LOAD and flow.mode == 3:
            self._snap = (flow.clone(), [])
        field = self.emu.ram_block(DrMarioRam.FIELD, 128)
        game_virus = bool(((field & 0xF0) == 0xD0).any())
        flow_virus = bool(((flow.field & 0xF0) == 0xD0).any())
        if not self._late_checked and flow_virus:
            self._late_checked = True
            if not game_virus and self._snap is not None:  # initData_level overran its frame
                snap, masks = self._snap
                flow = snap.clone()
                flow.late_init = True
                for m in masks:
                    flow.step(m)
                self.flow = flow
                self.late_inits += 1
        if flow.play_frame == flow.frame:
            self.levels.append({"level": int(flow.level), "speed": int(flow.speed)})
        if self.emu.ram(DrMarioRam.MODE) != flow.mode or not np.array_equal(field, flow.field):
            self.ram_mismatches += 1

    # ---- what the capture card sees (hil.consoles.paced.Shown) ---------------------------------

    def picture(self, console_index: int) -> tuple[EmuFrame, Any]:
        """(EmuFrame, facts) of video frame ``base_video + console_index``. Raises KeyError."""
        return self._frames[self.base_video + console_index]

    def picture_status(self, g: int) -> int:
        """0: video frame g + 1 (from :meth:`start`) is not emulated yet, so frame g's picture
        is not whole; 1: whole and kept; -1: gone (the last FRAMES_KEPT are kept)."""
        if self.emu.video_frame - self.base_video <= g + 1:
            return 0
        return 1 if self.base_video + g in self._frames else -1

    def shown(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        """Frame g's picture (RGB uint8 [240, 256, 3]) and truth: ``console_frame`` (the
        firmware's latch group, None on a lag frame), ``video_frame``, ``facts``,
        ``ram_mismatches`` (so far). Raises KeyError."""
        ev, facts = self.picture(g)
        return ev.picture, {
            "console_frame": ev.console_frame,
            "video_frame": ev.video_frame,
            "facts": facts,
            "ram_mismatches": self.ram_mismatches,
        }


# ---- commands ----------------------------------------------------------------------------


def selftest(frames: int = 600, seed: int = 0, out_dir: str | Path | None = None) -> dict[str, Any]:
    """The test ROM's proof of the emulator path (``hil emu selftest``): random masks for
    ``frames`` console frames (every 50th left unscheduled, so it must read 0) scheduled through
    Link -> VirtualDevice -> EmulatedNes; each latched frame's byte is checked in the ROM's RAM
    and in its picture. ``out_dir`` None runs the committed image (:func:`hil.testrom.image`);
    a directory builds the source there first (needs cc65). Returns JSON-ready counts and timing.
    Raises RomBuildError when the image cannot be had, ValueError for ``frames`` < 1."""
    if frames < 1:
        raise ValueError(f"frames must be at least 1, got {frames}")
    rom = testrom.image() if out_dir is None else testrom.build(out_dir)
    rng = np.random.default_rng(seed)
    first = 2
    masks: dict[int, int | None] = {
        first + i: (None if i % 50 == 49 else int(m))
        for i, m in enumerate(rng.integers(0, 256, frames))
    }
    with VirtualDevice() as dev, Link(dev.port) as link:
        console = EmulatedNes(rom, dev, game="testrom")
        feed = MaskFeeder(link, masks)
        ram_bad = pixel_bad = checked = 0
        t0 = time.perf_counter()
        while console.console_frame < first + frames - 1:
            feed(console)
            ev = console.step()
            if ev.console_frame is None or ev.console_frame < first:
                continue
            want = masks[ev.console_frame] or 0
            ram_bad += console.ram(testrom.PAD) != want
            pixel_bad += testrom.decode_boxes(ev.picture) != want
            checked += 1
        elapsed = time.perf_counter() - t0
        status = link.wait_status(first + frames - 1)
    return {
        "rom": str(rom),
        "console_frames_checked": checked,
        "unscheduled_frames": sum(m is None for m in masks.values()),
        "ram_mismatches": ram_bad,
        "pixel_mismatches": pixel_bad,
        "lag_frames": console.lag_frames,
        "underruns": status.underruns,
        "late_schedules": status.late_schedules,
        "watchdog_trips": status.watchdog_trips,
        "video_frames": console.video_frame,
        "ms_per_video_frame": round(elapsed * 1e3 / max(console.video_frame, 1), 3),
    }


def start_game(
    rom: str | Path,
    level: int,
    speed: int,
    music: int | None = None,
    *,
    png: str | Path | None = None,
    verify_crc: bool = True,
    emulator: Callable[[str], Emulator] | None = None,
) -> dict[str, Any]:
    """``hil emu start``: power on the user's Dr. Mario ROM, navigate the menus to ``level``
    and ``speed`` through the virtual device, wait for the first frame of play, and compare
    the emulator's field (RAM $0400) with ``engine.Game(level, speed, seed)``'s. ``png``: write
    that frame's picture there (the user's own ROM's graphics, written only where asked).
    Returns JSON-ready facts. ``emulator`` as in EmulatedNes. Raises RomError, EmuError,
    ValueError."""
    console = EmulatedNes(rom, verify_crc=verify_crc, emulator=emulator)
    with console, Link(console.device.port) as link:
        result = navigate_menus(console, link, level, speed, music, wait_for_play=True)
        ram_field = console.ram_block(DrMarioRam.FIELD, 128)
        shown = console.step()
    game = engine.Game(result.level, result.speed, result.seed)
    engine_field = np.asarray(game.field, np.uint8)
    if png is not None:
        import cv2

        Path(png).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(png), np.ascontiguousarray(shown.picture[..., ::-1]))
    diff = np.flatnonzero(ram_field != engine_field)
    return {
        "rom": console.rom_name,
        "level": result.level,
        "speed": result.speed,
        "music": result.music,
        "seed": f"0x{result.seed:04X}",
        "start_frame": result.start_frame,
        "play_frame": result.play_frame,
        "presses": result.presses,
        "video_frames": result.video_frames,
        "lag_frames": console.lag_frames,
        "engine_field_matches": diff.size == 0,
        "field_differences": [int(i) for i in diff[:16]],
    }


def print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, indent=2))
