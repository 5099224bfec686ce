"""`hil emu selftest` and `hil emu start`: the emulator path proved on the test ROM, and the
real game taken to a level for a look."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import engine
from engine.ram import (
    DrMarioRam,
)
from hil import testrom
from hil.consoles.emu import (
    EmulatedNes,
    Emulator,
    MaskFeeder,
)
from hil.consoles.emu_menus import navigate_menus
from hil.link.link import Link
from hil.link.vdevice import VirtualDevice


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
