"""``hil run``'s wiring: a console of each kind built from the command's options and played
through the one loop (hil.loop.runtime.play).

- :func:`run_sim`: the simulated console (hil.consoles.sim.SimConsole), the default;
- :func:`run_emu`: the user's ROM in cynes (hil.consoles.emu.EmuRun), ``--emu ROM``;
- :func:`run_rig`: the real rig (hil.consoles.rig.RigConsole), ``--port`` and ``--capture``.

Each builds its console, the board reader, the policy and the planner, and hands them to
``play``; nothing else differs between them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration import Profile
from hil.consoles.base import Frame
from hil.loop.observation import make_reader
from hil.loop.runtime import (
    EnginePlanner,
    EventLog,
    RunSettings,
    Runtime,
    make_policy,
    play,
)


@dataclass
class SimOptions:
    """The simulated console behind ``hil run --sim``: level seeds (one per level, cycled),
    the capture profile, seeds, faults to inject."""

    profile: str = "mjpeg_720p_q70"
    seeds: list[int] = field(default_factory=lambda: [0x8988])
    capture_seed: int = 0
    console_seed: int = 0
    faults: list[Any] = field(default_factory=list)
    # A UF2 path: the controller is that firmware image in rp2040js (hil.link.vdevice.
    # EmulatedFirmware, lockstep only) instead of the C core on a pty.
    firmware: str | None = None
    # The screen the console shows when the run begins ("title": as powered on; "options").
    screen: str = "title"


def run_sim(
    settings: RunSettings,
    sim: SimOptions,
    *,
    reader: str = "oracle",
    policy: str = "heuristic",
    taps_only: bool = False,
    log_path: str | Path | None = None,
    view: Callable[[dict[str, Any]], None] | None = None,
    say: Callable[[str], None] | None = None,
    on_frame: Callable[[Runtime, Frame], None] | None = None,
    model: str | Path | None = None,
) -> tuple[dict[str, Any], Any]:
    """Plays ``settings.levels`` on a SimConsole; returns (summary, console). ``model``: the
    board model of the onnx reader (make_reader). Raises ValueError for bad options."""
    from hil.consoles.sim import SimConsole, SimLevel

    profile = Profile.load(sim.profile)
    levels = [
        SimLevel(lp.level, lp.speed, sim.seeds[i % len(sim.seeds)])
        for i, lp in enumerate(settings.levels)
    ]
    device = None
    if sim.firmware is not None:
        from hil.link.vdevice import EmulatedFirmware, EmulatorError

        if not settings.fast:
            raise ValueError("--firmware runs in lockstep only: add --fast")
        try:
            device = EmulatedFirmware(sim.firmware, driven=True)
        except EmulatorError as e:
            raise ValueError(str(e)) from None
    console = SimConsole(
        levels,
        profile,
        realtime=not settings.fast,
        capture_seed=sim.capture_seed,
        console_seed=sim.console_seed,
        max_frames=settings.max_frames + 600,
        faults=sim.faults,
        device=device,
        screen=sim.screen,
    )
    log = EventLog(log_path)
    try:
        board_reader = make_reader(reader, profile, model)
        summary = play(
            settings,
            console,
            board_reader,
            make_policy(policy),
            EnginePlanner(taps_only),
            log=log,
            view=view,
            say=say,
            on_frame=on_frame,
            screens=sim_screens(profile),
        )
    finally:
        log.close()
        console.close()
    return summary, console


def sim_screens(profile: Profile) -> Callable[[Any], Any]:
    """The screen reader of the simulated console's captures: the clean-room prototypes
    (perception.screens.clean_room_prototypes) read through ``profile``."""
    from perception.screens import ScreenReader, clean_room_prototypes

    reader = ScreenReader(clean_room_prototypes())
    return lambda image: reader.read(image, profile)


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
    reader = ScreenReader.load(path)
    return lambda image: reader.read(image, profile)


def _screens_from_rom(
    rom: str | Path, profile: Profile, say: Callable[[str], None]
) -> Callable[[Any], Any] | None:
    """``--emu`` has the ROM, so a missing screens.npz is taken from it here, as ``hil
    prepare`` does (perception.screens.rom_prototypes: the ROM in cynes, 1-2 minutes on this
    machine), and stored by the ROM's CRC for later runs. None when the file is not the game
    (its title does not reach the options screen; the run then sets the options by RAM, and
    EmuRun refuses a ROM that is not Dr. Mario)."""
    from engine import RomError
    from perception.screens import SCREENS_FILE, rom_prototypes
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


def run_emu(
    settings: RunSettings,
    rom: str | Path,
    *,
    profile: str | Profile = "mjpeg_720p_q70",
    reader: str = "oracle",
    policy: str = "heuristic",
    taps_only: bool = False,
    capture_seed: int = 0,
    log_path: str | Path | None = None,
    view: Callable[[dict[str, Any]], None] | None = None,
    say: Callable[[str], None] | None = None,
    on_frame: Callable[[Any, Any], None] | None = None,
    emulator: Callable[[str], Any] | None = None,
    game: str = "drmario",
    model: str | Path | None = None,
    verify_crc: bool = True,
) -> dict[str, Any]:
    """``hil run --emu ROM``: plays ``settings.levels`` (a chain: level + 1 at the same speed
    after each stage clear, as the game goes) on the ROM in cynes through the same Runtime,
    tracker and firmware core as the simulated console; returns the summary. ``game``
    "testrom": the project's test ROM (hil.testrom) through the same path; it has no game, so
    the Start the runtime presses is only seen latched (CI). ``reader`` "onnx" reads with
    ``model``, else the model ``hil prepare`` made for this ROM, else the shipped one
    (perception.store.choose_model; said once through ``say``). Raises RomError (missing, wrong
    or corrupt ROM), EmuError, ValueError (levels that are not one game), FileNotFoundError (a
    ``model`` that is no file). ``verify_crc`` False accepts a dump of unknown CRC (``hil
    run --no-crc``)."""
    from hil.consoles.emu import EmuRun

    levels = settings.levels
    first = levels[0]
    prof = profile if isinstance(profile, Profile) else Profile.load(profile)
    if game == "drmario":
        prof = naming_rom(prof, rom, verify_crc)  # this ROM's prepared model and screens
    screens = rom_screens(prof) if game == "drmario" else None
    if game == "drmario" and screens is None:
        screens = _screens_from_rom(rom, prof, say or (lambda m: print(m, file=sys.stderr)))
    if screens is None:
        for a, b in zip(levels, levels[1:], strict=False):
            if (b.level, b.speed) != (min(a.level + 1, 24), a.speed):
                raise ValueError(
                    "--emu without prepared screens plays one game: the levels must follow "
                    "the game's chain (level + 1, the same speed); use --level L --speed S "
                    "--max-levels N, or hil prepare --rom ROM"
                )
    if game == "drmario" and screens is None:
        (say or (lambda m: print(m, file=sys.stderr)))(
            "hil run: no screens for this ROM: the options screen is set by RAM, not from the "
            "picture"
        )
    console = EmuRun(
        rom,
        first.level,
        first.speed,
        prof,
        capture_seed=capture_seed,
        max_frames=settings.max_frames + 1200 + (9_000 if screens is not None else 0),
        emulator=emulator,
        game=game,
        ram_menus=screens is None,
        verify_crc=verify_crc,
    )
    log = EventLog(log_path)
    try:
        board_reader = make_reader(reader, prof, model)
        model_line = getattr(board_reader, "model_line", None)  # the ONNX reader says its model
        if model_line:
            (say or (lambda m: print(m, file=sys.stderr)))(f"hil run: {model_line}")
        return play(
            settings,
            console,
            board_reader,
            make_policy(policy),
            EnginePlanner(taps_only),
            log=log,
            view=view,
            say=say,
            on_frame=on_frame,
            screens=screens,
        )
    finally:
        log.close()
        console.close()


def run_rig(
    settings: RunSettings,
    profile: Profile,
    *,
    port: str,
    capture: str | None,
    latency_frames: float | None = None,
    reader: str = "onnx",
    policy: str = "heuristic",
    taps_only: bool = False,
    model: str | Path | None = None,
    model_line: str | None = None,
    log_path: str | Path | None = None,
    view: Callable[[dict[str, Any]], None] | None = None,
    on_frame: Callable[[Runtime, Frame], None] | None = None,
) -> dict[str, Any]:
    """The real rig: a capture device (or a video file, paced in real time) and the controller
    on the serial port ``port``. ``latency_frames``: the measured chain latency, else the
    profile's. ``model_line`` is printed once the capture is open. Stops at a top-out (the
    console cannot be reset). Raises ValueError for a capture that cannot be opened."""
    from hil.consoles.base import CaptureError, CaptureSource
    from hil.consoles.rig import DeviceCapture, FileCapture, RigConsole

    if capture is None:
        raise ValueError("the real rig needs --capture (a capture device such as /dev/video0)")
    log = EventLog(log_path)
    settings.stop_on_top_out = True
    source: CaptureSource
    try:
        if Path(capture).is_file():
            source = FileCapture(capture, realtime=True)
        else:
            dev: str | int = int(capture) if capture.isdigit() else capture
            source = DeviceCapture(
                dev,
                width=profile.geometry.width,
                height=profile.geometry.height,
                fps=profile.timing.capture_hz,
                on_event=lambda e: log.write(e.pop("event"), **e),
            )
    except CaptureError as e:
        log.close()
        raise ValueError(str(e)) from None
    console = RigConsole(
        source,
        port,
        latency_frames if latency_frames is not None else profile.timing.latency_frames,
        profile.timing.jitter_ms,
    )
    if model_line is not None:
        print(model_line, file=sys.stderr)
    screens = rom_screens(profile)
    if screens is None:
        print(
            "hil run: no screens prepared for the profile's ROM (hil prepare --rom ROM): set "
            "the options screen to the first level yourself; Start is pressed for you",
            file=sys.stderr,
        )
    try:
        return play(
            settings,
            console,
            make_reader(reader, profile, model),
            make_policy(policy),
            EnginePlanner(taps_only),
            log=log,
            view=view,
            on_frame=on_frame,
            screens=screens,
        )
    finally:
        console.close()
        log.close()
