"""Shared conventions (ARCHITECTURE.md): button bits, cell codes, phases and speeds.

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
    # Two players only (engine.Versus, docs/VERSUS.md):
    ROUND_LOST = 7  # a fail flag was seen: anyPlayerLoses [$9542] runs next frame
    ROUND_OVER = 8  # the round is decided, the match is not (Versus.next_round)
    MATCH_OVER = 9  # a player has 3 victories


class FlowStage(IntEnum):
    """Where engine.LevelFlow is (engine/src/level_flow.h, docs/LEVEL_FLOW.md)."""

    LOAD = 0  # toLevel $817E + initData_level $8216 (modes 2, 3)
    VIRUSES = 1  # levelIntro $9CAB: one addVirus call per frame (mode 8)
    PLAY = 2  # the engine's State: levelIntro_delay, then mode 4
    STAGE_CLEAR = 3  # checkVirusLeft $B269: waits, the box, Start
    CUTSCENE = 4  # toNextLevel $9E66: cutscene or ending, Start
    GAME_OVER = 5  # anyPlayerLoses $9542, playerLoses_endScreen $959A, Start
    OPTIONS = 6  # back on the options screen (terminal)
    SOFT_RESET = 7  # A+B+Select+Start (terminal)
    PAUSED = 8  # checkPauseReset's pause loop before play


class FlowScreen(IntEnum):
    """What the picture of a LevelFlow frame shows."""

    OPTIONS = 0
    BLANK = 1  # rendering off while a screen loads
    LEVEL = 2
    CUTSCENE = 3
    LOADING = (
        4  # first frame with rendering on after a load: the screen not yet scrolled into place
    )


class MenuStage(IntEnum):
    """Where engine.Menu is (engine/src/menu.h, docs/MENUS.md)."""

    TITLE_LOAD = 0  # toTitle $982A loading the title screen
    TITLE = 1  # @title_mainLoop
    OPTIONS_LOAD = 2  # toDemo_orOptions $9961 loading the options screen
    OPTIONS = 3  # @options_mainLoop
    DEMO = 4  # the attract demo (its play not modelled)
    START = 5  # Start read on the options screen (terminal: engine.LevelFlow from here)


class MenuScreen(IntEnum):
    """What the picture of a Menu frame shows."""

    TITLE = 0
    OPTIONS = 1
    BLANK = 2  # rendering off while a screen loads
    DEMO = 3  # the demo's level screen


class Speed(IntEnum):
    LOW = 0
    MED = 1
    HI = 2


TERMINAL_PHASES = frozenset({Phase.STAGE_CLEAR, Phase.TOP_OUT, Phase.DEMO_END, Phase.SOFT_RESET})


def level_viruses(level: int) -> int:
    """The viruses a level starts with, as initData_level [$8216] asks for them:
    ``(min(level, 20) + 1) * 4`` (4 at level 0, 84 from level 20 on)."""
    return (min(level, 20) + 1) * 4
