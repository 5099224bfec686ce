"""Shared conventions (DESIGN.md): button bits, cell codes, phases and speeds.

Button bits are the game's RAM order (getInputs $B7E1); cell codes are the field RAM encoding
($0400-$047F; defines/drmario_constants.asm).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag


class Button(IntFlag):
    RIGHT = 0x01
    LEFT = 0x02
    DOWN = 0x04
    UP = 0x08
    START = 0x10
    SELECT = 0x20
    B = 0x40
    A = 0x80


class Cell(IntEnum):
    """High nibble of a field byte; the low nibble is the colour (0 yellow, 1 red, 2 blue)."""

    TOP = 0x40
    BOTTOM = 0x50
    LEFT = 0x60
    RIGHT = 0x70
    SINGLE = 0x80
    CLEARED = 0xB0
    VIRUS = 0xD0
    JUST_EMPTIED = 0xF0
    EMPTY = 0xFF


class Phase(IntEnum):
    """Where the game's main loop is (engine/src/game.h)."""

    INTRO = 0
    PLAYING = 1
    PAUSED = 2
    STAGE_CLEAR = 3
    TOP_OUT = 4
    DEMO_END = 5
    SOFT_RESET = 6


class Speed(IntEnum):
    LOW = 0
    MED = 1
    HI = 2


TERMINAL_PHASES = frozenset({Phase.STAGE_CLEAR, Phase.TOP_OUT, Phase.DEMO_END, Phase.SOFT_RESET})
