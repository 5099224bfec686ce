"""``hil run``'s one path: a :class:`RunRequest` (what the command line asked, already checked),
a console factory (:func:`open_console`: the simulated console, the emulator or the rig, each
with its screen reader and whether it runs in lockstep), and :func:`run`, which builds the
reader, policy and planner and plays the console through the one loop
(hil.loop.runtime.play). Nothing else differs between the console kinds.

- ``sim``: hil.consoles.sim.SimConsole, the default;
- ``emu``: hil.consoles.emu_run.EmuRun, the user's ROM in cynes (``--emu ROM``);
- ``rig``: hil.consoles.rig.RigConsole, a capture card and the RP2040 (``--port``).

Lockstep (``--fast``: the console waits for the host) is the console's property; the rig is
never in lockstep.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from calibration import Profile
from hil.args import FaultSpec
from hil.consoles.base import Console, Frame
from hil.loop.eventlog import EventLog
from hil.loop.levels import LevelPlan
from hil.loop.observation import make_reader
from hil.loop.policies import Handicapped
from hil.loop.runtime import (
    EnginePlanner,
    RunSettings,
    Runtime,
    make_policy,
    pick_policy,
    pick_reader,
    play,
)

KINDS = ("sim", "emu", "rig")
# The faults each console kind can inject (hil.args.FAULTS); the rig's faults are real ones.
CONSOLE_FAULTS = {
    "sim": {"drop_input", "garbage", "drop", "repeat", "burst", "usb_stall", "unplug", "starve"},
    "emu": {"drop", "repeat", "burst", "usb_stall", "unplug", "starve", "reset"},
    "rig": set(),
}
# Faults of the controller's link and of the host (hil.consoles.paced.PacedConsole).
LINK_FAULTS = ("usb_stall", "unplug", "starve", "reset")
# Faults that need the console to run in real time (in lockstep nothing can starve or stall).
REALTIME_FAULTS = {"drop", "repeat", "burst", "usb_stall", "starve", "reset"}
ORACLE_NOTE = {
    "sim": "the simulated console's ground truth stands in for perception",
    "emu": "the engine's LevelFlow shadow of the game, checked against its RAM every frame, "
    "stands in for perception",
    "emu versus": "the engine's Versus shadow of the game, loaded from its RAM at each round's "
    "play and checked against it every frame, stands in for perception",
}


class RunError(ValueError):
    """The run cannot start (the message says why, in the command line's words)."""


VERSUS_OPPONENTS = ("idle", "random", "greedy", "onnx")


@dataclass
class VersusRequest:
    """A two-player run: player 1's level 0..20, speed and player (``p1``: one of
    VERSUS_OPPONENTS, a placement policy of policy.versus played by the simulated console),
    the matches to play (first to 3 rounds won) and the bot's ``strength`` 1..5
    (hil.loop.policies.Handicapped; 5: the full player). ``both``: the bot plays player 1 too,
    on controller port 1 (bot against bot; ``p1`` is then not used)."""

    level1: int
    speed1: int
    p1: str = "greedy"
    matches: int = 1
    strength: int = 5
    p1_wait: int = 0  # frames player 1's Start comes late, unannounced (sim and emu)
    both: bool = False


@dataclass
class RunRequest:
    """What ``hil run`` plays and how (docs/RUN.md; hil.cli builds it from checked options).

    ``console``: "sim", "emu" or "rig". ``levels``: played in order (the game's chain where a
    level is the last one's level + 1 at its speed). ``lockstep``: the console waits for the
    host (``--fast``; sim and emu only). ``reader``: auto, onnx or oracle (sim and emu: their
    ground truth); ``policy``: auto, onnx, search or heuristic; ``model``: the board model
    (default: perception.store.choose_model). ``faults``: injected by the console (hil.args
    .FaultSpec; :data:`CONSOLE_FAULTS`). ``firmware``: the controller is this UF2 in rp2040js
    (sim and emu, lockstep). Sim: ``seeds`` (one per level, cycled), ``console_seed``,
    ``screen``. Emu: ``rom``, ``game`` ("drmario" or "testrom"), ``verify_crc``. Rig:
    ``port``, ``capture``, ``latency_frames`` (else the profile's)."""

    console: str
    levels: list[LevelPlan]
    profile: Profile
    lockstep: bool = False
    reader: str = "auto"
    policy: str = "auto"
    taps_only: bool = False
    ponder: bool = True
    max_frames: int = 200_000
    model: Path | None = None
    faults: list[FaultSpec] = field(default_factory=list)
    capture_seed: int = 0
    firmware: Path | None = None
    seeds: list[int] = field(default_factory=lambda: [0x8988])
    console_seed: int = 0
    screen: str = "title"
    rom: Path | None = None
    game: str = "drmario"
    verify_crc: bool = True
    port: str | None = None
    capture: str | None = None
    latency_frames: float | None = None
    # Two players (``hil run --versus``): the bot is player 2 at ``levels[0]``; the opponent
    # (player 1) plays ``versus.p1`` at ``versus.level1`` / ``versus.speed1``.
    versus: VersusRequest | None = None
    # RunSettings fields the command line does not set (tests, benchmarks)
    tuning: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """What no console can do with these options. Raises RunError."""
        if self.console not in KINDS:
            raise RunError(f"unknown console {self.console!r}")
        if not self.levels:
            raise RunError("no level to play")
        if self.console == "rig":
            if self.lockstep:
                raise RunError("--fast is for the simulated console and --emu (lockstep)")
            if self.capture is None:
                raise RunError("the real rig needs --capture (a capture device, /dev/video0)")
            if self.firmware is not None:
                raise RunError("--firmware is for the simulated console and --emu")
        if self.firmware is not None and not self.lockstep:
            raise RunError("--firmware runs in lockstep only: add --fast")
        if self.reader == "oracle" and self.console == "rig":
            raise RunError("--reader oracle reads a console's ground truth: sim and --emu only")
        if self.versus is not None:
            self._check_versus(self.versus)
        for f in self.faults:
            if f.kind not in CONSOLE_FAULTS[self.console]:
                takes = ", ".join(sorted(CONSOLE_FAULTS[self.console])) or "none"
                raise RunError(
                    f"--fault {f.kind} is not one the {self.console} console can inject "
                    f"(it takes: {takes})"
                )
            if f.kind in REALTIME_FAULTS and self.lockstep:
                raise RunError(f"--fault {f.kind} needs real time: leave out --fast")

    def _check_versus(self, vs: VersusRequest) -> None:
        if self.console == "rig" and vs.p1_wait:
            raise RunError(
                "--p1-wait is for the simulated console and --emu: on the rig a "
                "person presses Start"
            )
        if self.console == "emu" and self.game != "drmario":
            raise RunError("--versus plays Dr. Mario; the test ROM has no two-player mode")
        if self.firmware is not None:
            raise RunError("--versus runs the firmware's C core (both ports); leave out --firmware")
        if self.faults:
            raise RunError("--fault is for one-player runs")
        lp = self.levels[0]
        if any((p.level, p.speed) != (lp.level, lp.speed) for p in self.levels):
            raise RunError("--versus plays one level and speed (player 2's): give --level, --speed")
        if not 0 <= lp.level <= 20 or not 0 <= vs.level1 <= 20:
            raise RunError("two-player levels are 0..20 (the options screen)")
        if vs.p1 not in VERSUS_OPPONENTS:
            raise RunError(f"--p1 must be one of {', '.join(VERSUS_OPPONENTS)}")
        if not 1 <= vs.matches <= 1000:
            raise RunError(f"--matches must be 1..1000, got {vs.matches}")

    @property
    def oracle_note(self) -> str | None:
        """What stands in for perception when the oracle reads (None: the rig has none)."""
        versus = " versus" if self.versus is not None and self.console == "emu" else ""
        return ORACLE_NOTE.get(self.console + versus)


@dataclass
class Opened:
    """A console built for a run: the console, its screen reader (None: levels start by RAM
    or by the user, docs/RUN.md), the profile the run reads with (naming the ROM for emu)."""

    console: Console
    screens: Callable[[Any], Any] | None
    profile: Profile


# ---- the console factory ------------------------------------------------------------------


def open_console(req: RunRequest, say: Callable[[str], None], log: EventLog) -> Opened:
    """The console ``req.console`` asks for, built and not yet started (``log``: where the
    capture device logs its events). Raises RunError, RomError (emu), EmuError (emu),
    OSError."""
    opener = {"sim": _open_sim, "emu": _open_emu, "rig": _open_rig}[req.console]
    return opener(req, say, log)


def _firmware(req: RunRequest) -> Any:
    if req.firmware is None:
        return None
    from hil.link.vdevice import EmulatedFirmware, EmulatorError

    try:
        return EmulatedFirmware(req.firmware, driven=True)
    except EmulatorError as e:
        raise RunError(str(e)) from None


def _versus_setup(req: RunRequest) -> tuple[Any, Any]:
    """The match options and player 1's pad (hil.consoles.sim_versus) of a --versus run."""
    from hil.consoles.sim_versus import Opponent, VersusSetup
    from policy.versus import Config, Match, make_player

    vs = req.versus
    assert vs is not None
    lp = req.levels[0]
    setup = VersusSetup(vs.level1, vs.speed1, lp.level, lp.speed, tuple(req.seeds))
    if vs.both:
        return setup, None  # player 1's pad is the firmware's port 1: the bot's
    if vs.p1 == "idle":
        return setup, Opponent(None)
    match = Match(vs.level1, vs.speed1, lp.level, lp.speed, req.seeds[0], 0)
    # built where the console runs (its own process in real time)
    make = functools.partial(make_player, vs.p1, 5, Config(vs.p1, "onnx"), match, 0)
    return setup, Opponent(None, make=make)


def _open_sim_versus(req: RunRequest) -> Opened:
    from hil.consoles.sim_versus import SimVersusConsole

    setup, opponent = _versus_setup(req)
    build = functools.partial(
        SimVersusConsole,
        setup,
        req.profile,
        opponent=opponent,
        realtime=not req.lockstep,
        capture_seed=req.capture_seed,
        console_seed=req.console_seed,
        max_frames=req.max_frames + 600,
        p1_wait=req.versus.p1_wait if req.versus else 0,
    )
    console = _console_here(build, req) if req.lockstep else _console_process(build, req, "sim")
    return Opened(console, None, req.profile)


def _open_sim(req: RunRequest, say: Callable[[str], None], log: EventLog) -> Opened:
    from hil.consoles.sim import Fault, SimConsole, SimLevel

    if req.versus is not None:
        return _open_sim_versus(req)

    levels = [
        SimLevel(lp.level, lp.speed, req.seeds[i % len(req.seeds)])
        for i, lp in enumerate(req.levels)
    ]
    build = functools.partial(
        SimConsole,
        levels,
        req.profile,
        realtime=not req.lockstep,
        capture_seed=req.capture_seed,
        console_seed=req.console_seed,
        max_frames=req.max_frames + 600,
        faults=[Fault(f.frame, f.kind) for f in req.faults if f.kind in ("drop_input", "garbage")],
        screen=req.screen,
        capture_faults=capture_faults(req.faults),
        link_faults=[f for f in req.faults if f.kind in LINK_FAULTS],
    )
    console = _console_here(build, req) if req.lockstep else _console_process(build, req, "sim")
    return Opened(console, sim_screens(req.profile), req.profile)


def _console_here(build: Callable[..., Any], req: RunRequest) -> Any:
    """Lockstep: the console in this process (its controller the firmware image in rp2040js
    with ``--firmware``)."""
    return build(device=_firmware(req))


def _console_process(build: Callable[..., Any], req: RunRequest, name: str) -> Any:
    """Real time: the console in a process of its own (hil.consoles.process)."""
    from hil.consoles.process import ConsoleProcess

    g = req.profile.geometry
    return ConsoleProcess(
        build,
        name=name,
        latency_frames=req.profile.timing.latency_frames,
        jitter_ms=req.profile.timing.jitter_ms,
        frame_bytes=g.width * g.height * 3,
        capture_name=name,
    )


def capture_faults(faults: list[FaultSpec]) -> list[Any]:
    """The capture card's faults among ``faults`` (hil.consoles.paced.CaptureFault)."""
    from hil.consoles.paced import CaptureFault

    out = []
    for f in faults:
        if f.kind in ("drop", "repeat"):
            out.append(CaptureFault(f.frame, f.kind, frames=int(f.amount)))
        elif f.kind == "burst":
            out.append(CaptureFault(f.frame, f.kind, ms=f.amount))
    return out


def _open_emu_versus(req: RunRequest, say: Callable[[str], None]) -> Opened:
    """The real game in two players. With screens prepared for the ROM that read the
    two-player options screen, it is played as on the rig: player 1 a person at the menus (from
    the title, each Start unannounced), the bot setting its level and speed off the picture
    (hil.menus.VersusMenuDriver); else the options screen is set by RAM."""
    from hil.consoles.emu_versus import EmuVersusRun

    assert req.rom is not None
    prof = naming_rom(req.profile, req.rom, req.verify_crc)
    setup, opponent = _versus_setup(req)
    both = req.versus is not None and req.versus.both
    screens = rom_screens(prof) if _reads_versus_options(prof) else None
    if screens is None:
        say(
            "hil run: no two-player screens prepared for this ROM (hil prepare --rom ROM): "
            "the options screen is set by RAM"
            + (", each round started by player 1's script" if both else "")
        )
    elif both:
        say(
            "hil run: bot against bot as on the rig: both players' options set off the picture "
            "and every Start pressed by the bot on port 1"
        )
    else:
        say(
            "hil run: the two-player options screen is set as on the rig: off the picture, "
            "player 1 a person at the menus"
        )
    build = functools.partial(
        EmuVersusRun,
        req.rom,
        setup,
        prof,
        opponent=opponent,
        capture_seed=req.capture_seed,
        max_frames=req.max_frames + 1200,
        verify_crc=req.verify_crc,
        realtime=not req.lockstep,
        link_faults=[f for f in req.faults if f.kind in LINK_FAULTS],
        p1_wait=req.versus.p1_wait if req.versus else 0,
        person=screens is not None and not both,
        bot_menus=screens is not None and both,
    )
    console = _console_here(build, req) if req.lockstep else _console_process(build, req, "emu")
    return Opened(console, screens, prof)


def _open_emu(req: RunRequest, say: Callable[[str], None], log: EventLog) -> Opened:
    from hil.consoles.emu_run import EmuRun

    assert req.rom is not None
    if req.versus is not None:
        return _open_emu_versus(req, say)
    drmario = req.game == "drmario"
    prof = naming_rom(req.profile, req.rom, req.verify_crc) if drmario else req.profile
    screens = rom_screens(prof) if drmario else None
    if drmario and screens is None:
        screens = _screens_from_rom(req.rom, prof, say)
    if screens is None:
        for a, b in zip(req.levels, req.levels[1:], strict=False):
            if (b.level, b.speed) != (min(a.level + 1, 24), a.speed):
                raise RunError(
                    "--emu without prepared screens plays one game: the levels must follow "
                    "the game's chain (level + 1, the same speed); use --level L --speed S "
                    "--max-levels N, or hil prepare --rom ROM"
                )
    if drmario and screens is None:
        say(
            "hil run: no screens for this ROM: the options screen is set by RAM, not from the "
            "picture"
        )
    first = req.levels[0]
    build = functools.partial(
        EmuRun,
        req.rom,
        first.level,
        first.speed,
        prof,
        capture_seed=req.capture_seed,
        max_frames=req.max_frames + 1200 + (9_000 if screens is not None else 0),
        game=req.game,
        ram_menus=screens is None,
        verify_crc=req.verify_crc,
        realtime=not req.lockstep,
        capture_faults=capture_faults(req.faults),
        link_faults=[f for f in req.faults if f.kind in LINK_FAULTS],
    )
    console = _console_here(build, req) if req.lockstep else _console_process(build, req, "emu")
    return Opened(console, screens, prof)


def _open_rig(req: RunRequest, say: Callable[[str], None], log: EventLog) -> Opened:
    from hil.consoles.base import CaptureError, CaptureSource
    from hil.consoles.rig import DeviceCapture, FileCapture, RigConsole

    assert req.capture is not None and req.port is not None
    profile = req.profile
    source: CaptureSource
    try:
        if Path(req.capture).is_file():
            source = FileCapture(req.capture, realtime=True)
        else:
            dev: str | int = int(req.capture) if req.capture.isdigit() else req.capture
            source = DeviceCapture(
                dev,
                width=profile.geometry.width,
                height=profile.geometry.height,
                fps=profile.timing.capture_hz,
                on_event=lambda e: log.write(e.pop("event"), **e),
            )
    except CaptureError as e:
        raise RunError(str(e)) from None
    latency = req.latency_frames
    console = RigConsole(
        source,
        req.port,
        latency if latency is not None else profile.timing.latency_frames,
        profile.timing.jitter_ms,
        versus=req.versus is not None,
        both=req.versus is not None and req.versus.both,
    )
    screens = rom_screens(profile)
    if req.versus is not None and (screens is None or not _reads_versus_options(profile)):
        console.close()
        raise RunError(
            "--versus on the rig reads the two-player options screen: prepare your ROM's "
            "screens (hil prepare --rom YOUR_ROM --profile PROFILE; a prepare from before "
            "two-player support must be run again)"
        )
    if screens is None:
        say(
            "hil run: no screens prepared for the profile's ROM (hil prepare --rom ROM): set "
            "the options screen to the first level yourself; Start is pressed for you"
        )
    return Opened(console, screens, profile)


# ---- screens -----------------------------------------------------------------------------


def _reads_versus_options(profile: Profile) -> bool:
    """Whether the screens prepared for the profile's ROM read the two-player options screen
    (perception.screens: prototypes of player 2's level number; absent from older files)."""
    from perception.screens import ScreenPrototypes, prepared_screens

    path = prepared_screens(profile.rom_crc32) if profile.rom_crc32 else None
    try:
        return path is not None and len(ScreenPrototypes.load(path).digits2) > 0
    except (ValueError, OSError):
        return False


def sim_screens(profile: Profile) -> Callable[[Any], Any]:
    """The screen reader of the simulated console's captures: the clean-room prototypes
    (perception.screens.clean_room_prototypes) read through ``profile``."""
    from perception.screens import ScreenReader, clean_room_prototypes

    return _warmed(ScreenReader(clean_room_prototypes()), profile)


def rom_screens(profile: Profile) -> Callable[[Any], Any] | None:
    """The screen reader of a real game's captures: the prototypes ``hil prepare`` built for
    the profile's ROM (``profile.rom_crc32``; perception.screens.prepared_screens, beside the
    board model in the data directory), read through ``profile``; None when none were
    prepared."""
    from perception.screens import ScreenReader, prepared_screens

    if not profile.rom_crc32:
        return None
    path = prepared_screens(profile.rom_crc32)
    if path is None:
        return None
    return _warmed(ScreenReader.load(path), profile)


def _warmed(reader: Any, profile: Profile) -> Callable[[Any], Any]:
    """``reader`` (perception.screens.ScreenReader) as a callable of a captured frame, read
    once first: the first read maps the profile's geometry and pages the prototypes in (110
    ms on a busy 2-core machine, 30-50 ms after), before a real-time console starts; every
    matcher once (ScreenReader.warm_up: the two-player options screen's first read took 266
    ms, quiet)."""
    g = profile.geometry
    noise = np.random.default_rng(0).integers(0, 256, (g.height, g.width, 3), np.uint8)
    reader.read(noise, profile)
    reader.warm_up()
    return lambda image: reader.read(image, profile)


def _screens_from_rom(
    rom: str | Path, profile: Profile, say: Callable[[str], None]
) -> Callable[[Any], Any] | None:
    """``--emu`` has the ROM, so a missing screens.npz is taken from it here, as ``hil
    prepare`` does (perception.screens_rom.rom_prototypes: the ROM in cynes, 1-2 minutes on this
    machine), and stored by the ROM's CRC for later runs. None when the file is not the game
    (its title does not reach the options screen; the run then sets the options by RAM, and
    EmuRun refuses a ROM that is not Dr. Mario)."""
    from engine import RomError
    from perception.screens import SCREENS_FILE
    from perception.screens_rom import rom_prototypes
    from perception.store import prepared_dir

    say(
        "hil run: no screens prepared for this ROM yet: taking the title, options, stage-clear "
        "and game-over pictures from it in the emulator (1-2 minutes, once; hil prepare does "
        "the same)"
    )
    try:
        protos = rom_prototypes(rom)
    except (RomError, ValueError) as e:
        say(f"hil run: no screen prototypes from this ROM ({e})")
        return None
    out = prepared_dir(profile.rom_crc32)
    out.mkdir(parents=True, exist_ok=True)
    protos.save(out / SCREENS_FILE)
    say(f"hil run: screens stored in {out / SCREENS_FILE}")
    return rom_screens(profile)


def naming_rom(profile: Profile, rom: str | Path, verify_crc: bool = True) -> Profile:
    """``profile`` naming the Dr. Mario ROM ``rom`` by its CRC-32 (perception.store.rom_crc32)
    when it names none: the model and screens ``hil prepare`` made for that ROM are then found
    by it, by the run and by ``hil replay`` of its recording. Raises RomError (a ValueError)
    for a file that is not Dr. Mario (or, with ``verify_crc``, no known-good dump), OSError
    when it cannot be read."""
    if profile.rom_crc32:
        return profile
    from perception.store import rom_crc32

    return profile.replace(rom_crc32=rom_crc32(rom, verify_crc=verify_crc))


# ---- one run -----------------------------------------------------------------------------


def run(
    req: RunRequest,
    *,
    log_path: str | Path | None = None,
    view: Callable[[dict[str, Any]], None] | None = None,
    say: Callable[[str], None] | None = None,
    on_frame: Callable[[Runtime, Frame], None] | None = None,
) -> tuple[dict[str, Any], Console]:
    """Plays ``req`` (:class:`RunRequest`) on the console it names; returns (summary, the
    closed console). Says once which board model reads and what stands in for it. Raises
    RunError (bad options, a level the console cannot start from them), RomError, EmuError,
    OSError (the console cannot be built), ValueError (a bad model)."""
    say = say or (lambda m: print(m, file=sys.stderr))
    req.check()
    try:
        reader_kind = pick_reader(req.reader, sim=req.console in ORACLE_NOTE)
        if (
            req.versus is not None
            and req.console == "sim"
            and req.reader == "auto"
            and req.model is None
        ):
            # the shipped board model has not learnt the two-player screen (docs/PERCEPTION.md
            # "The two-player screen"): the simulated console's truth reads it
            reader_kind = "oracle"
            say(
                "hil run: --versus reads with the simulated console's truth: the shipped board "
                "model does not read the two-player screen yet (--reader onnx --model M for "
                "one that does)"
            )
        policy_kind = pick_policy(req.policy)
    except ValueError as e:
        raise RunError(str(e)) from None
    log = EventLog(log_path)
    try:
        # The console first: cynes leaves a byte of its power-on state uninitialised (offset
        # 24 of its saved state in 0.1.2), so what the heap held before (an onnxruntime
        # session) moved the game's first NMI by a frame and --emu --fast runs differed.
        opened = open_console(req, say, log)
    except BaseException:
        log.close()
        raise
    console = opened.console
    try:
        both = req.versus is not None and req.versus.both
        try:
            policy = make_policy(policy_kind)
            if req.versus is not None and req.versus.strength < 5:
                policy = Handicapped(policy, req.versus.strength)
            # bot against bot: player 1 plays the same policy, at full strength, its own copy
            p1_policy = make_policy(policy_kind) if both else None
        except ValueError as e:
            raise RunError(str(e)) from None
        reader = make_reader(
            reader_kind,
            opened.profile,
            req.model,
            player=2 if req.versus is not None else 1,
            both=both,
        )
        model_line = getattr(reader, "model_line", None)  # the ONNX reader names its model
        if model_line:
            say(f"hil run: {model_line}")
        if reader_kind == "oracle":
            say(f"hil run: --reader oracle: {req.oracle_note}")
        settings = RunSettings(
            levels=list(req.levels),
            max_frames=req.max_frames,
            ponder=req.ponder,
            stop_on_top_out=req.console == "rig",  # a rig's console cannot be reset
            opponent=None if req.versus is None else (req.versus.level1, req.versus.speed1),
            matches=1 if req.versus is None else req.versus.matches,
            both=both,
            **req.tuning,
        )
        summary = play(
            settings,
            console,
            reader,
            policy,
            EnginePlanner(req.taps_only),
            log=log,
            view=view,
            say=say,
            on_frame=on_frame,
            screens=opened.screens,
            p1_policy=p1_policy,
        )
    finally:
        log.close()
        console.close()
    return summary, console
