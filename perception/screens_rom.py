"""Pictures of the user's own ROM with their truth, for the screen reader (perception.screens).

``rom_pictures(rom, seed)`` runs the ROM in cynes (the user's file, read at run time; nothing
is stored but the features perception.screens keeps in the user's data directory) along a
script of random menu and game input, and yields each picture with the screen the game's RAM
says it shows: mode $46, flag_demo $0741, p1_level $0316, p1_speedSetting $030B, nbPlayers
$0727, p1_field $0400 (a text box in its rows 1-9: STAGE CLEAR or GAME OVER) and p1_virusLeft
$0324. A picture is what the NMI of its frame drew, so it shows the RAM as the previous frame
left it; it is labelled with that (``truth_lag`` 1). The script: the title (its cursor moved),
the options screen (every level, speed and highlighted row reached by the game's own buttons),
the two-player options screen (both pads; p2_level $0396, p2_speedSetting $038B,
optionSectionHighlight $65), back to the title with B, levels started from the options screen
and played with random input,
a stage clear (p1_virusLeft set to 0 in RAM during play: checkVirusLeft [$B269] then clears the
field and shows its box as after a real clear), the next level chained by Start, a top-out and
its GAME OVER box, Start back to the options screen, and the attract demo (the title left idle
for 8 wraps of frameCounter) ended by Start. ``tools/screens_check.py`` measures the reader on
the same kind of script with another seed, through capture profiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from engine.constants import Button
from engine.nes import Nes
from engine.ram import P2_LEVEL, P2_SPEED, DrMarioRam
from perception.screens import (
    BLANK,
    BLANK_STD,
    DEMO,
    GAME_OVER,
    LEVEL,
    OPTIONS,
    STAGE_CLEAR,
    TITLE,
    PrototypeBuilder,
    ScreenPrototypes,
    add_all,
)

U8 = npt.NDArray[np.uint8]

R = DrMarioRam
B = Button
RIGHT, LEFT, DOWN, UP = int(B.RIGHT), int(B.LEFT), int(B.DOWN), int(B.UP)
START, SELECT, B_BTN, A_BTN = int(B.START), int(B.SELECT), int(B.B), int(B.A)


def field_has_box(field: npt.NDArray[np.uint8]) -> bool:
    """Letter tiles ($0A-$23) in rows 1-9 of the field: the STAGE CLEAR or GAME OVER box."""
    top = np.asarray(field)[8:80]
    return bool(((top >= 0x0A) & (top <= 0x23)).sum() >= 5)


def is_blank(pic: U8) -> bool:
    """Rendering off: the picture nearly uniform (every 4th pixel checked)."""
    return float(pic[::4, ::4].std()) < BLANK_STD


class RomRun:
    """The ROM in cynes (engine.nes.Nes), one video frame per ``step``, with the truth of each
    picture. Raises engine.RomError when cynes cannot load the file."""

    def __init__(self, rom: str | Path) -> None:
        self.nes = Nes.open(rom)
        self.truth = self.read_truth()

    def ram(self, a: int) -> int:
        """One byte of RAM ($0000-$07FF; ValueError outside it)."""
        return self.nes.ram(a)

    def read_truth(self) -> tuple[int, dict[str, int]]:
        """(kind, truth) the RAM says the next picture shows (before the blank rule)."""
        r = self.ram
        mode, demo = r(R.MODE), r(R.DEMO)
        if demo:
            return DEMO, {}
        if mode == 0:
            return TITLE, {"players": r(R.PLAYERS)}
        if mode == 1:
            players = r(R.PLAYERS)
            truth = {"level": r(R.LEVEL), "speed": r(R.SPEED), "players": players}
            truth["section"] = r(R.OPTION_SECTION)
            if players == 2:
                truth.update(level2=r(P2_LEVEL), speed2=r(P2_SPEED))
            return OPTIONS, truth
        field = self.nes.ram_block(R.FIELD + 8, 72)
        if field_has_box(np.concatenate([np.zeros(8, np.uint8), field])):
            return (STAGE_CLEAR if r(R.VIRUS_LEFT) == 0 else GAME_OVER), {}
        return LEVEL, {}

    def step(self, mask: int) -> tuple[U8, int, dict[str, int]]:
        """One video frame: (picture RGB uint8 [240, 256, 3], kind, truth of the picture)."""
        pic = self.nes.step(mask)
        if self.nes.crashed:
            from engine import RomError

            raise RomError("the emulated CPU hit an invalid opcode: not the game's program")
        kind, truth = self.truth  # the RAM the NMI of this frame drew from
        self.truth = self.read_truth()
        if is_blank(pic):
            kind, truth = BLANK, {}
        return pic, kind, truth


def menu_press(run: RomRun, level: int, speed: int, section: int) -> int:
    """The button toward (level, speed, highlighted row) on the options screen (0: there)."""
    r = run.ram
    now = r(R.OPTION_SECTION)
    for sec, have, want in ((0, r(R.LEVEL), level), (1, r(R.SPEED), speed)):
        if have != want:
            if now != sec:
                return DOWN if now < sec else UP
            return RIGHT if have < want else LEFT
    if now != section:
        return DOWN if now < section else UP
    return 0


def versus_menu_press(
    run: RomRun, levels: tuple[int, int], speeds: tuple[int, int], section: int
) -> int:
    """The buttons toward both players' (level, speed) and the highlighted row on the
    two-player options screen (0: there): pad 1 in bits 0-7, pad 2 in bits 8-15. Each player
    moves its own level and speed while the row is highlighted (toDemo_orOptions [$9961]);
    pad 1 moves the highlight."""
    r = run.ram
    now = r(R.OPTION_SECTION)
    for sec, have, want in (
        (0, (r(R.LEVEL), r(P2_LEVEL)), levels),
        (1, (r(R.SPEED), r(P2_SPEED)), speeds),
    ):
        if have != want:
            if now != sec:
                return DOWN if now < sec else UP
            m = [0 if h == w else RIGHT if h < w else LEFT for h, w in zip(have, want, strict=True)]
            return m[0] | m[1] << 8
    if now != section:
        return DOWN if now < section else UP
    return 0


def rom_pictures(
    rom: str | Path,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    *,
    combos: int = 189,
    versus_combos: int = 189,
    levels: tuple[tuple[int, int], ...] = ((0, 2), (9, 1), (17, 0)),
    every: int = 3,
    demo_every: int = 3,
) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """(picture, kind, truth) along the script of the module docstring. ``combos``: options
    settings (level, speed, row) visited, of the 189; ``versus_combos``: two-player options
    settings visited (player 2's level through 0..20 in turn, the rest drawn); ``levels``:
    (level, speed) games started;
    ``every``: keep one frame in this many outside the options screen (all pictures on it
    whose setting just settled are kept); ``demo_every``: the same in the demo. Raises
    engine.RomError when cynes cannot run the file."""
    rng = np.random.default_rng(seed)
    run = RomRun(rom)
    say = progress or (lambda msg: None)

    def go(mask: int, keep: int = every) -> Iterator[tuple[U8, int, dict[str, int]]]:
        pic, kind, truth = run.step(mask)
        if run.nes.frames % keep == 0 or kind in (BLANK,):
            yield pic, kind, truth

    say("title")
    for k in range(150):
        yield from go(int(rng.choice([0, 0, 0, 0, UP, DOWN, SELECT])) if k % 4 == 0 else 0)
    for _ in range(20):
        if run.ram(R.PLAYERS) == 1:
            break
        yield from go(UP)
        yield from go(0)
    say("options")
    for _ in range(50):
        if run.ram(R.MODE) == 1:
            break
        yield from go(START)
        for _ in range(4):
            yield from go(0)
    else:
        from engine import RomError

        raise RomError(f"{Path(rom).name}: Start on its title does not reach the options screen")
    targets = [(lv, sp, sec) for lv in range(21) for sp in range(3) for sec in range(3)]
    order = rng.permutation(len(targets))[:combos]
    for n, t in enumerate(order):
        level, speed, section = targets[int(t)]
        yield from _reach(go, lambda: menu_press(run, level, speed, section))  # noqa: B023
        if n % 40 == 39:
            say(f"options {n + 1}/{len(order)}")
    yield from _versus_options(run, go, rng, versus_combos, say)
    for _ in range(2):  # B back to the title and Start again
        yield from go(B_BTN)
        for _ in range(12):
            yield from go(0)
        yield from go(START)
        for _ in range(8):
            yield from go(0)
    for level, speed in levels:
        say(f"level {level} speed {speed}")
        for part in (_clear, _top_out):
            for _ in range(60):  # to the options screen (the title after a reset)
                if run.ram(R.MODE) == 1 and not run.ram(R.DEMO):
                    break
                yield from go(START if run.ram(R.MODE) == 0 else 0)
                for _ in range(5):
                    yield from go(0)
            for _ in range(400):
                mask = menu_press(run, level, speed, 0)
                if mask == 0:
                    break
                yield from go(mask)
                yield from go(0)
            yield from go(START)
            yield from part(run, go, rng)
    say("demo")
    yield from go(B_BTN)
    for _ in range(3000):
        if run.ram(R.DEMO):
            break
        yield from go(0, keep=20)
    for _ in range(2400):
        yield from go(0, keep=demo_every)
    for _ in range(3):
        yield from go(START)
        for _ in range(20):
            yield from go(0)


def _reach(
    go: Callable[..., Iterator[tuple[U8, int, dict[str, int]]]], press: Callable[[], int]
) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """An options setting reached: ``press()`` (the buttons toward it, 0 when there) one frame
    in two, every picture kept, then 3 frames of the setting settled."""
    for _ in range(400):
        mask = press()
        if mask == 0:
            break
        yield from go(mask, keep=1)
        yield from go(0, keep=1)
    for _ in range(3):
        yield from go(0, keep=1)


def _versus_options(
    run: RomRun,
    go: Callable[..., Iterator[tuple[U8, int, dict[str, int]]]],
    rng: np.random.Generator,
    combos: int,
    say: Callable[[str], None],
) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """From the options screen: B to the title, Down to 2 players, Start; ``combos`` settings of
    the two-player options screen reached with both pads; Start, a two-player round's intro and
    play with random input on both pads (its level screen, which the one-player prototypes do
    not hold), the soft reset; then Up to 1 player, Start: the one-player options screen
    again."""
    for players, move in ((2, DOWN), (1, UP)):
        for _ in range(3):
            if run.ram(R.MODE) == 0:
                break
            yield from go(B_BTN)
            for _ in range(12):
                yield from go(0)
        for _ in range(20):
            if run.ram(R.PLAYERS) == players:
                break
            yield from go(move)
            yield from go(0)
        for _ in range(50):
            if run.ram(R.MODE) == 1:
                break
            yield from go(START)
            for _ in range(4):
                yield from go(0)
        if players == 1:
            return
        for n in range(combos):
            levels = (int(rng.integers(21)), n % 21)
            speeds = (int(rng.integers(3)), int(rng.integers(3)))
            section = int(rng.integers(3))
            yield from _reach(go, lambda: versus_menu_press(run, levels, speeds, section))  # noqa: B023
            if n % 40 == 39:
                say(f"two-player options {n + 1}/{combos}")
        say("two-player level screen")
        yield from go(START)
        moves = [0, 0, 0, 0, LEFT, RIGHT, A_BTN, B_BTN, DOWN]
        for _ in range(420):
            yield from go(int(rng.choice(moves)) | int(rng.choice(moves)) << 8)
        for _ in range(6):
            yield from go(A_BTN | B_BTN | SELECT | START)
        for _ in range(12):
            yield from go(0)


def _clear(
    run: RomRun,
    go: Callable[..., Iterator[tuple[U8, int, dict[str, int]]]],
    rng: np.random.Generator,
) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """A level started: the intro, random play, a stage clear (p1_virusLeft set to 0 in RAM),
    its box, then the soft reset (A+B+Select+Start held) to the title."""
    moves = [0, 0, 0, 0, LEFT, RIGHT, A_BTN, B_BTN]
    for _ in range(300):
        yield from go(int(rng.choice(moves)))
        if run.ram(R.MODE) not in (2, 3, 4, 8):
            break
    for _ in range(600):
        if run.ram(R.MODE) == 4:
            break
        yield from go(0)
    if run.ram(R.MODE) == 4:
        run.nes.poke(R.VIRUS_LEFT, 0)  # checkVirusLeft [$B269] ends the level in this frame
        for _ in range(160):
            yield from go(0)
    for _ in range(6):
        yield from go(A_BTN | B_BTN | SELECT | START)
    for _ in range(6):
        yield from go(0)


def _top_out(
    run: RomRun,
    go: Callable[..., Iterator[tuple[U8, int, dict[str, int]]]],
    rng: np.random.Generator,
) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """A level started and left to top out (Down held: faster), its GAME OVER box, Start to
    the options screen."""
    for _ in range(20000):
        yield from go(int(rng.choice([0, DOWN, DOWN])))
        if run.ram(R.MODE) == 7:
            break
    for _ in range(260):
        yield from go(0)
    for _ in range(40):
        yield from go(START)
        yield from go(0)
        if run.ram(R.MODE) == 1:
            break
    for _ in range(6):
        yield from go(0)


def rom_prototypes(
    rom: str | Path, progress: Callable[[str], None] | None = None, seed: int = 0
) -> ScreenPrototypes:
    """Prototypes of the user's own ROM: run in cynes, labelled from the game's RAM
    (:func:`rom_pictures`). Raises engine.RomError for a file cynes cannot run."""
    b = PrototypeBuilder()
    add_all(b, rom_pictures(rom, seed=seed, progress=progress))
    return b.build(f"rom:{Path(rom).name}")
