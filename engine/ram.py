"""The game's RAM as the real console holds it: addresses, modes, and the menu driver that reads
them. One map for every tool that runs a user's ROM in an emulator (hil.consoles.emu,
perception.screens_rom, perception.realcheck, tools/).

Addresses and meanings are those of the public disassembly (defines/drmario_ram_zp.asm,
defines/drmario_ram.asm; routines named with the address the disassembly's comments give, Rev A's:
docs/ENGINE.md, "Addresses").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.constants import Button
from engine.ines import RomError


class DrMarioRam:
    """RAM addresses of Dr. Mario (player 1), from the disassembly's defines."""

    RNG = 0x17  # rng0, rng1 ($17, $18): state = $17 << 8 | $18 (docs/LEVEL_GEN.md)
    FRAME_COUNTER = 0x43  # frameCounter: +1 in every NMI
    MODE = 0x46  # mode: 0 title, 1 options/demo, 2 toLevel, 3 initData_level, 4 play, 8 intro
    OPTION_SECTION = 0x65  # optionSectionHighlight: 0 level, 1 speed, 2 music
    HELD = 0xF7  # p1_btns_held
    SPRITES = 0x0200  # OAM shadow (sprite y, tile, attributes, x; 64 sprites)
    SPEED = 0x030B  # p1_speedSetting
    HOR_VELOCITY = 0x0313  # p1_horVelocity (DAS counter)
    LEVEL = 0x0316  # p1_level
    VIRUS_LEFT = 0x0324  # p1_virusLeft (BCD)
    FIELD = 0x0400  # p1_field: 128 bytes, row * 8 + col (docs/ARCHITECTURE.md, cell codes)
    PLAYERS = 0x0727  # nbPlayers
    MUSIC = 0x0731  # musicType: 0 fever, 1 chill, 2 off
    DEMO = 0x0741  # flag_demo: 0 not in the attract demo


MODE_TITLE, MODE_OPTIONS, MODE_TO_LEVEL, MODE_INIT_LEVEL, MODE_PLAY = 0, 1, 2, 3, 4
MAX_MENU_LEVEL = 20  # selectableLvCap $14: the options screen's highest level
MUSIC = {"fever": 0, "chill": 1, "off": 2}


def menu_press(ram: Callable[[int], int], level: int, speed: int, music: int | None) -> int:
    """The button to press now (engine.Button bits; 0: none needed), from the game's RAM read
    through ``ram(address) -> byte``, toward the options screen set to ``level`` (0..20),
    ``speed`` (0 LOW, 1 MED, 2 HI) and ``music`` (None: left as it is).

    Title ($46 = 0): Up to 1 player (nbPlayers), then Start (toTitle [$982A]). The attract demo
    (flag_demo set): Start ends it. Options ($46 = 1, toDemo_orOptions [$9961]): the level moves
    one step per press of Left/Right (updateLvlCursor [$9ADF]; a one-frame press moves once),
    speed and music one step per press, each only while its section is highlighted (Up/Down
    move the highlight); Start when all three match.
    """
    r = DrMarioRam
    if ram(r.DEMO):
        return int(Button.START)
    mode = ram(r.MODE)
    if mode == MODE_TITLE:
        return int(Button.UP if ram(r.PLAYERS) != 1 else Button.START)
    if mode != MODE_OPTIONS:
        return 0
    section = ram(r.OPTION_SECTION)
    wants = [(0, ram(r.LEVEL), level), (1, ram(r.SPEED), speed)]
    if music is not None:
        wants.append((2, ram(r.MUSIC), music))
    for sec, now, want in wants:
        if now == want:
            continue
        if section != sec:
            return int(Button.DOWN if section < sec else Button.UP)
        return int(Button.RIGHT if now < want else Button.LEFT)
    return int(Button.START)


P2_LEVEL, P2_SPEED = 0x0396, 0x038B  # p2_level, p2_speedSetting


def versus_menu_press(
    ram: Callable[[int], int], levels: tuple[int, int], speeds: tuple[int, int]
) -> tuple[int, int]:
    """The buttons to press now on pad 1 and pad 2 (engine.Button bits; (0, 0): none needed)
    toward a two-player match with player 1 and 2 at ``levels`` (0..20) and ``speeds``.

    Title: Down to 2 players (nbPlayers $0727), then Start. Options (toDemo_orOptions [$9961]):
    each player moves its own level and speed with its own pad while the section is
    highlighted (pad 1's Up/Down moves the highlight), pad 1's Start when both match. Press on
    alternate frames: the game acts on press edges."""
    r = DrMarioRam
    if ram(r.DEMO):
        return int(Button.START), 0
    mode = ram(r.MODE)
    if mode == MODE_TITLE:
        return int(Button.DOWN if ram(r.PLAYERS) != 2 else Button.START), 0
    if mode != MODE_OPTIONS:
        return 0, 0
    section = ram(r.OPTION_SECTION)
    for sec, now, want in (
        (0, (ram(r.LEVEL), ram(P2_LEVEL)), levels),
        (1, (ram(r.SPEED), ram(P2_SPEED)), speeds),
    ):
        if tuple(now) == tuple(want):
            continue
        if section != sec:
            return int(Button.DOWN if section < sec else Button.UP), 0
        m = [0, 0]
        for i in range(2):
            if now[i] != want[i]:
                m[i] = int(Button.RIGHT if now[i] < want[i] else Button.LEFT)
        return m[0], m[1]
    return int(Button.START), 0


POWER_ON_BYTE = 24  # cynes 0.1.2's saved state: the byte open_nes clears


def open_nes(path: str | os.PathLike[str]) -> Any:
    """The ROM at ``path`` in cynes (a ``cynes.NES``: ``step(frames)`` -> RGB uint8 [240, 256,
    3], ``controller`` the pad's byte, ``nes[address]`` RAM). Raises RomError naming the file
    when the emulator cannot load it (a missing file, a mapper cynes lacks)."""
    import cynes

    try:
        nes = cynes.NES(os.fspath(path))
    except (RuntimeError, OSError) as e:  # cynes: "The ROM Mapper is not supported." etc.
        raise RomError(f"{Path(path).name}: the emulator cannot load it ({e})") from None
    # One byte of cynes' power-on state (offset 24 of its saved state, cynes 0.1.2) is left
    # uninitialised: it is 0 in a fresh process, but a heap that held other data (an
    # onnxruntime session) can leave it non-zero, and then the game's first NMI comes a frame
    # later (frameCounter $43 one behind for the whole run; measured on the original release).
    # Set to 0, every process runs the same game.
    state = nes.save()
    if state[POWER_ON_BYTE] != 0:
        state[POWER_ON_BYTE] = 0
        nes.load(state)
    return nes
