"""One parser per concept of the command line (argparse ``type=`` callables): levels, seeds,
faults, numbers with their ranges, ports, paths. Each takes the text a user typed and returns
the value or raises ``argparse.ArgumentTypeError`` with what was expected, which ``hil`` prints
as one line with exit code 2 before any work starts (docs/RUN.md, "Bad input").

NaN and infinity are refused wherever a number is read; every range is closed and stated.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_LEVEL = 24  # lvCap $18: the game's chain stops climbing here
MAX_SEED = 0xFFFF  # the RNG state is 16 bits (rng0 $17, rng1 $18)

Bad = argparse.ArgumentTypeError


def integer(lo: int, hi: int) -> Callable[[str], int]:
    """An integer in [lo, hi], written in decimal or with a 0x / 0o / 0b prefix."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 0)
        except ValueError:
            raise Bad(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise Bad(f"{value} is outside {lo}..{hi}")
        return value

    parse.__name__ = "integer"
    return parse


def real(lo: float, hi: float, *, lo_open: bool = False) -> Callable[[str], float]:
    """A finite number in [lo, hi] ((lo, hi] with ``lo_open``); NaN and infinity refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise Bad(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise Bad(f"{text!r} is not a finite number")
        if value < lo or value > hi or (lo_open and value == lo):
            left = "(" if lo_open else "["
            raise Bad(f"{value:g} is outside {left}{lo:g}, {hi:g}]")
        return value

    parse.__name__ = "number"
    return parse


@dataclass(frozen=True)
class LevelItem:
    """One ``--levels`` item: level 0..24 and speed 0..2, or None to take ``--speed``."""

    level: int
    speed: int | None


def levels(text: str) -> list[LevelItem]:
    """``"LEVEL[:SPEED],..."``: at least one item, each level 0..24 and speed 0 (LOW), 1 (MED)
    or 2 (HI); an item without ``:SPEED`` takes ``--speed``."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise Bad(f"{text!r} is not a list of LEVEL[:SPEED] items (e.g. 0:0,10:1,20:2)")
    out = []
    for item in items:
        lv, colon, sp = item.partition(":")
        try:
            level = int(lv)
            speed = int(sp) if colon else None
        except ValueError:
            raise Bad(f"item {item!r} is not LEVEL or LEVEL:SPEED") from None
        if not 0 <= level <= MAX_LEVEL or (speed is not None and speed not in (0, 1, 2)):
            raise Bad(f"item {item!r}: level must be 0..{MAX_LEVEL} and speed 0..2")
        out.append(LevelItem(level, speed))
    return out


def seeds(text: str) -> list[int]:
    """``"SEED,..."``: at least one 16-bit RNG state (0..0xFFFF, decimal or 0x hex)."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise Bad(f"{text!r} is not a list of seeds (e.g. 0x8988,0x1234)")
    one = integer(0, MAX_SEED)
    out = []
    for item in items:
        try:
            out.append(one(item))
        except Bad as e:
            raise Bad(f"seed {e} (a 16-bit RNG state)") from None
    return out


@dataclass(frozen=True)
class FaultSpec:
    """One ``--fault FRAME:KIND[:AMOUNT]``: ``kind`` from :data:`FAULTS` at console frame
    ``frame`` (frames since the console started), ``amount`` in the kind's unit (frames or
    ms), its default when not given."""

    frame: int
    kind: str
    amount: float


# kind -> (unit, default, lo, hi, what it does); the consoles say which they take.
FAULTS: dict[str, tuple[str, float, float, float, str]] = {
    "drop_input": ("", 0, 0, 0, "the game ignores that frame's byte (a missed latch; sim)"),
    "garbage": ("", 0, 0, 0, "a red single appears at the bottom left (sim)"),
    "drop": ("frames", 3, 1, 600, "captured frames that never reach the host"),
    "repeat": ("frames", 3, 1, 600, "captures that repeat the picture before them"),
    "burst": ("ms", 200, 1, 5000, "the capture stalls, then delivers what it held at once"),
    "usb_stall": ("ms", 100, 1, 5000, "the controller's USB link passes nothing"),
    "unplug": ("ms", 1000, 0, 60000, "the controller is unplugged, then plugged back in"),
    "starve": ("ms", 1000, 1, 10000, "the host's loop gets no CPU"),
    "reset": ("ms", 8.3, 0, 16.6, "RESET: the game restarts, its frames this much later"),
}


def fault(text: str) -> FaultSpec:
    """``FRAME:KIND[:AMOUNT]`` (see :data:`FAULTS`); FRAME >= 0. ``FRAME`` alone is
    ``FRAME:drop_input`` (as before)."""
    frame_text, colon, rest = text.partition(":")
    kind, _, amount_text = rest.partition(":")
    if colon and not kind:
        raise Bad(f"{text!r}: KIND is missing after the colon (one of {', '.join(FAULTS)})")
    kinds = ", ".join(FAULTS)
    try:
        frame = int(frame_text)
    except ValueError:
        raise Bad(f"{text!r} is not FRAME:KIND[:AMOUNT] (KIND one of {kinds})") from None
    if frame < 0:
        raise Bad(f"{text!r}: FRAME must be 0 or more")
    kind = kind or "drop_input"  # FRAME alone: a missed latch (the first fault there was)
    if kind not in FAULTS:
        raise Bad(f"{text!r}: KIND must be one of {kinds}")
    unit, default, lo, hi, _ = FAULTS[kind]
    if not amount_text:
        return FaultSpec(frame, kind, float(default))
    if not unit:
        raise Bad(f"{text!r}: {kind} takes no amount")
    try:
        amount = real(lo, hi)(amount_text)
    except Bad as e:
        raise Bad(f"{text!r}: {kind}'s {unit} {e}") from None
    return FaultSpec(frame, kind, amount)


def port(text: str) -> str:
    """A serial port's name (``/dev/ttyACM0``, ``COM5``): not empty, no NUL."""
    if not text.strip() or "\0" in text:
        raise Bad(f"{text!r} is not a serial port name (e.g. /dev/ttyACM0)")
    return text


def in_file(text: str) -> Path:
    """A file that exists and can be read."""
    p = Path(text)
    if not text or "\0" in text:
        raise Bad(f"{text!r} is not a file name")
    if p.is_dir():
        raise Bad(f"{p} is a directory, not a file")
    if not p.is_file():
        raise Bad(f"{p}: no such file")
    if not os.access(p, os.R_OK):
        raise Bad(f"{p}: permission denied")
    return p


def out_file(text: str) -> Path:
    """A file to write: not a directory, not a FIFO or device, in a directory that exists (or
    can be made) and is writable."""
    if not text or "\0" in text:
        raise Bad(f"{text!r} is not a file name")
    p = Path(text)
    if p.is_dir():
        raise Bad(f"{p} is a directory, not a file")
    if p.exists() and not p.is_file():
        raise Bad(f"{p} is not a regular file (a FIFO or a device would block or lose the log)")
    _writable_parent(p)
    if p.exists() and not os.access(p, os.W_OK):
        raise Bad(f"{p}: permission denied")
    return p


def out_dir(text: str) -> Path:
    """A directory to write into: an existing directory, or one that can be made."""
    if not text or "\0" in text:
        raise Bad(f"{text!r} is not a directory name")
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise Bad(f"{p} is a file, not a directory")
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise Bad(f"{p}: permission denied")
        return p
    _writable_parent(p)
    return p


def _writable_parent(p: Path) -> None:
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise Bad(f"{p}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise Bad(f"{p}: permission denied")
