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
simulated console. Beside this module: hil.consoles.emu_menus (the menus driven from RAM),
hil.consoles.emu_run (EmuRun, the Console of ``hil run --emu``), hil.consoles.emu_commands
(``hil emu selftest``, ``hil emu start``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from calibration import CaptureModel, Profile, TimingModel
from engine import RomError
from engine.ines import read_rom
from engine.nes import Machine as Emulator  # what an ``emulator`` factory makes (tests: stand-ins)
from engine.nes import Nes
from engine.ram import DrMarioRam
from hil import testrom
from hil.consoles.base import Frame
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


@dataclass(frozen=True)
class EmuFrame:
    """One emulated video frame.

    ``video_frame``: emulator steps since power-on, from 0. ``time_us``: its start on the console
    clock (us). ``console_frame``: the firmware's number of the latch group read in this frame,
    or None for a lag frame (no controller read). ``mask``: the byte the game read (A = 0x80 ...
    Right = 0x01), None on a lag frame. ``picture``: RGB uint8 [240, 256, 3], the picture
    rendered after this frame's NMI (a copy). ``pad1``: a two-player console
    (:attr:`EmulatedNes.pad1`): player 1's byte on port 1 in this frame (``mask`` is then
    port 2's, the firmware's); None otherwise.
    """

    video_frame: int
    time_us: int
    console_frame: int | None
    mask: int | None
    picture: U8
    pad1: int | None = None


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
            self.nes = Nes(emulator(os.fspath(path))) if emulator else Nes.open(path)
        except (RuntimeError, OSError) as e:  # cynes: "The ROM Mapper is not supported." etc.
            raise RomError(f"{path.name}: the emulator cannot load it ({e})") from None
        self._own_device = device is None
        self.device: Any = device if device is not None else VirtualDevice()
        self.start_us = int(start_us)
        self.read_gap_us = int(read_gap_us)
        self.video_frame = 0  # video frames stepped so far
        self.console_frame = -1  # the firmware's number of the latest latch group; -1: none yet
        self.lag_frames = 0  # video frames without a controller read
        self._counter = self.nes.ram(self.facts.nmi_counter)
        self._resync = 0  # frames after a RESET whose NMI counter steps are not trusted
        # A controller whose armed byte cannot be seen (the firmware image in rp2040js,
        # hil.link.vdevice.EmulatedFirmware) is read at the frame's time before the frame is
        # emulated; whether the frame reads it at all is found out first (_probe_reads) and
        # its reads are planned one frame ahead (made at their time while the emulated
        # firmware serves the host). None: not known yet.
        self._pull = not hasattr(self.device, "pio_words")
        self._next_reads: bool | None = None
        # A two-player console (hil run --versus): player 1's byte for the next latch group,
        # from its console frame number (a person or a script on port 1); the firmware then
        # serves port 2. None: the firmware serves port 1 and port 2 reads nothing.
        self.pad1: Callable[[int], int] | None = None

    # ---- the console ---------------------------------------------------------------------

    def frame_time_us(self, video_frame: int) -> int:
        """Start of ``video_frame`` on the console clock (us)."""
        return round(self.start_us + video_frame * NTSC_FRAME_US)

    def armed_mask(self) -> int:
        """The byte the firmware serves at the next latch: the last word its core handed to
        the PIO (nb_pio_word: mask in bits 31..24)."""
        words = self.device.pio_words if self.pad1 is None else self.device.pio_words_p2
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
            if self.pad1 is not None:
                raise EmuError("a two-player console needs the firmware's C core, not rp2040js")
            return self._step_pull(t_us)
        mask = self.armed_mask()
        pad1 = None if self.pad1 is None else self.pad1(self.console_frame + 1) & 0xFF
        picture = self._emulate(mask if pad1 is None else pad1 | mask << 8)
        count = self.nes.ram(self.facts.nmi_counter)
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
            frame = EmuFrame(self.video_frame, t_us, None, None, picture, pad1)
        elif nmis == 1:
            got = self._latch(t_us, close_window)
            self.console_frame += 1
            if got != mask:
                raise EmuError(
                    f"console frame {self.console_frame}: the firmware served {got:#04x} but "
                    f"had armed {mask:#04x} (an ARM_MISS?)"
                )
            frame = EmuFrame(self.video_frame, t_us, self.console_frame, mask, picture, pad1)
        else:
            raise EmuError(
                f"{self.facts.name}'s NMI counter (RAM ${self.facts.nmi_counter:04X}) moved by "
                f"{nmis} in video frame {self.video_frame}; one NMI per frame is possible"
            )
        self.video_frame += 1
        return frame

    def _latch(self, t_us: int, close_window: bool) -> int:
        """The frame's two controller reads on the firmware's port (2 when :attr:`pad1` plays
        port 1): the byte served; with ``close_window`` the latch window closes too."""
        dev, gap = self.device, self.read_gap_us
        if self.pad1 is None:
            if close_window:
                return int(dev.latch(t_us, reads=2, read_gap_us=gap))
            reads = [int(dev.read(t_us)), int(dev.read(t_us + gap))]
        else:
            if close_window:
                return int(dev.latch_ports(t_us, reads=2, read_gap_us=gap)[1])
            reads = [int(dev.read_ports(t_us)[1]), int(dev.read_ports(t_us + gap)[1])]
        if reads[0] != reads[1]:
            raise EmuError(f"the two reads of video frame {self.video_frame} differ")
        return reads[0]

    def _emulate(self, mask: int) -> U8:
        """One video frame with ``mask`` on the pad: its picture (a copy). Raises EmuError."""
        picture = self.nes.step(mask)
        if self.nes.crashed:
            raise EmuError(
                f"the emulated CPU hit an invalid opcode in video frame {self.video_frame}"
            )
        return picture

    def _probe_reads(self) -> bool:
        """Whether the next video frame's NMI reads the controller: the frame emulated with
        no buttons from a saved state, which is then restored (the game decides whether its
        NMI runs before it reads the pad, so the byte cannot change the answer)."""
        snap = self.nes.save()
        before = self.nes.ram(self.facts.nmi_counter)
        self.nes.step(0, picture=False)
        reads = (self.nes.ram(self.facts.nmi_counter) - before) & 0xFF == 1
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
        self._counter = self.nes.ram(self.facts.nmi_counter)
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
        return self.nes.ram(address)

    def ram_block(self, address: int, size: int) -> U8:
        """``size`` bytes of RAM from ``address``: uint8 [size] (ValueError outside RAM)."""
        return self.nes.ram_block(address, size)

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
