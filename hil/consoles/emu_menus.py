"""Dr. Mario's menus driven from the game's RAM through the firmware core: power-on, the title
and the options screen to a level, speed and music (tools and tests; `hil run --emu` starts
levels from the pictures, hil.menus), or to a two-player match's levels and speeds (`hil run
--versus --emu`, hil.consoles.emu_versus)."""

from __future__ import annotations

from dataclasses import dataclass

import engine
from engine.ram import (
    MAX_MENU_LEVEL,
    MODE_OPTIONS,
    MODE_PLAY,
    MODE_TO_LEVEL,
    P2_LEVEL,
    P2_SPEED,
    DrMarioRam,
    menu_press,
    versus_menu_press,
)
from hil.consoles.emu import (
    EmuError,
    EmulatedNes,
)
from hil.link.link import Link


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
    versus: tuple[int, int] | None = None,
    pad1: dict[int, int] | None = None,
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

    ``versus``: player 1's (level, speed) of a two-player match (engine.ram.versus_menu_press:
    2 players on the title, each player's level and speed with its own pad); ``level`` and
    ``speed`` are then player 2's, whose presses go through ``link`` (its port 2), and player
    1's into ``pad1`` (console frame -> byte; the console plays them on port 1,
    :attr:`EmulatedNes.pad1`). The result's level and speed are player 2's.
    """
    _check_target(console, level, speed, music)
    if versus is not None:
        _check_target(console, *versus, None)
        if pad1 is None:
            raise ValueError("a two-player menu needs pad1, player 1's presses")
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
                if versus is None:
                    mask = p1_press = menu_press(console.ram, level, speed, music)
                else:
                    p1_press, mask = versus_menu_press(
                        console.ram, (versus[0], level), (versus[1], speed)
                    )
                on_options = console.ram(r.MODE) == MODE_OPTIONS and not console.ram(r.DEMO)
                if p1_press == int(engine.Button.START) and on_options and not press_start:
                    link.clear()
                    return _result(console, -1, -1, presses, first_video, None, versus)
                if pad1 is not None and versus is not None:
                    pad1[scheduled] = p1_press
                if mask or (versus is not None and p1_press):
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
    play = console.console_frame if wait_for_play else None
    return _result(console, seed, start_frame, presses, first_video, play, versus)


def _check_target(console: EmulatedNes, level: int, speed: int, music: int | None) -> None:
    """ValueError for a console that is not Dr. Mario or a target out of range."""
    if console.game != "drmario":
        raise ValueError(f"menu navigation is for Dr. Mario, not {console.facts.name}")
    if not 0 <= level <= MAX_MENU_LEVEL:
        raise ValueError(f"level must be 0..{MAX_MENU_LEVEL} on the options screen, got {level}")
    if speed not in (0, 1, 2):
        raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {speed}")
    if music is not None and music not in (0, 1, 2):
        raise ValueError(f"music must be 0 (fever), 1 (chill), 2 (off) or None, got {music}")


def _result(
    console: EmulatedNes,
    seed: int,
    start_frame: int,
    presses: int,
    first_video: int,
    play_frame: int | None,
    versus: tuple[int, int] | None = None,
) -> MenuResult:
    """Where the navigation left the game, read back from RAM (a two-player match's:
    player 2's level and speed)."""
    r = DrMarioRam
    return MenuResult(
        level=console.ram(r.LEVEL if versus is None else P2_LEVEL),
        speed=console.ram(r.SPEED if versus is None else P2_SPEED),
        music=console.ram(r.MUSIC),
        seed=seed,
        start_frame=start_frame,
        presses=presses,
        video_frames=console.video_frame - first_video,
        play_frame=play_frame,
    )
