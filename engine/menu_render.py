"""Clean-room pictures of the screens before play: the title, the options screen, blank frames.

``render_menu(screen, level=, speed=, ...) -> uint8 [240, 256, 3]`` draws our own layout in the
project's style (the clean-room font and box tiles of engine/tiles, NES colours), with the
moving parts where the game puts them, so that a reader trained or matched on these pictures
looks at the right places (facts from the disassembly, docs/MENUS.md):

- title: the heart cursor at x $45 (spr_cursor_heart_x), y titleCursorYPos = $A7 (1 player) or
  $B7 (2 players), beside the "1 PLAYER GAME" / "2 PLAYER GAME" lines;
- options: the level number (two decimal digits, levelForDisplay) at VRAM $2157 (lvlNbP1_VRAMaddr:
  tile column 23, row 10); the level cursor sprite at x lvlCursor_XPos = $57 + 4 * level, y $53
  (player 1); the speed cursor (a box around LOW / MED / HI) at x speedCursor_XPos = $58, $80,
  $A4, y $87; the music box at x musicTypeBox_XPos = $38, $70, $A7, y $B7; the highlighted row
  (render_optionsOverlays [$8518] swaps attribute bytes) drawn in a brighter colour;
- the two-player options screen adds player 2's level number at VRAM $21B7 (lvlNbP2_VRAMaddr:
  tile column 23, row 13), its level cursor at y lvlCursor_YPos[p2] = $62 and its speed cursor
  at y speedCursor_YPos[p2] = $96 (updateOptions_cursors [$9B5C]).

Nothing here comes from the game's CHR or nametables. ``render_menu_state(menu)`` draws an
``engine.Menu`` frame (the demo as the engine's demo level screen, ``Game.demo()``).
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from engine import _core
from engine.constants import MenuScreen
from engine.render import NES_PALETTE, TileSet, render_frame

U8 = npt.NDArray[np.uint8]

LEVEL_DIGITS_XY = (23 * 8, 10 * 8)  # lvlNbP1_VRAMaddr $2157: tile column 23, row 10
LEVEL_DIGITS2_XY = (23 * 8, 13 * 8)  # lvlNbP2_VRAMaddr $21B7: tile column 23, row 13
LEVEL_CURSOR_X0, LEVEL_CURSOR_STEP, LEVEL_CURSOR_Y = 0x57, 4, 0x53  # lvlCursor_XPos/YPos
LEVEL_CURSOR2_Y = 0x62  # lvlCursor_YPos, player 2
SPEED_CURSOR_X, SPEED_CURSOR_Y = (0x58, 0x80, 0xA4), 0x87  # speedCursor_XPos/YPos
SPEED_CURSOR2_Y = 0x96  # speedCursor_YPos, player 2
MUSIC_BOX_X, MUSIC_BOX_Y = (0x38, 0x70, 0xA7), 0xB7  # musicTypeBox_XPos, spr_musicTypeBox_y
TITLE_CURSOR_X, TITLE_CURSOR_Y = 0x45, (0xA7, 0xB7)  # spr_cursor_heart_x, titleCursorYPos[1..2]

# NES colour numbers of our menu screens (our choice of colours).
BACKDROP_TITLE, BACKDROP_OPTIONS = 0x0C, 0x01
INK, INK_DIM, BLUE, RED, YELLOW, BLACK = 0x30, 0x10, 0x12, 0x16, 0x28, 0x0F
_HEART = [
    "........",
    ".11.11..",
    "1111111.",
    "1111111.",
    ".11111..",
    "..111...",
    "...1....",
    "........",
]
_ARROW = [
    "...1....",
    "..111...",
    ".11111..",
    "1111111.",
    "...1....",
    "...1....",
    "...1....",
    "........",
]


def _mask(rows: list[str]) -> npt.NDArray[np.bool_]:
    return np.array([[ch == "1" for ch in r] for r in rows], dtype=bool)


@functools.cache
def _glyphs() -> npt.NDArray[np.bool_]:
    """bool [256, 8, 8]: the clean-room background tiles' colour-1+ pixels (font at $00-$23)."""
    return TileSet.clean_room().patterns[0] > 0


def _rgb(colour: int) -> npt.NDArray[np.uint8]:
    return NES_PALETTE[colour]


def _text(img: U8, x: int, y: int, text: str, colour: int, scale: int = 1) -> None:
    g = _glyphs()
    for i, ch in enumerate(text):
        if ch == " ":
            continue
        tile = int(ch) if ch.isdigit() else 0x0A + ord(ch) - ord("A")
        m = g[tile]
        if scale > 1:
            m = np.kron(m, np.ones((scale, scale), bool))
        h, w = m.shape
        x0 = x + i * 8 * scale
        img[y : y + h, x0 : x0 + w][m] = _rgb(colour)


def _sprite(img: U8, x: int, y: int, mask: npt.NDArray[np.bool_], colour: int) -> None:
    """An 8x8 sprite with OAM position (x, y): its first line is y + 1 (the PPU's delay)."""
    y += 1
    h, w = mask.shape
    sub = img[y : y + h, x : x + w]
    sub[mask[: sub.shape[0], : sub.shape[1]]] = _rgb(colour)


def _frame(img: U8, x0: int, y0: int, x1: int, y1: int, colour: int) -> None:
    c = _rgb(colour)
    img[y0, x0:x1] = img[y1 - 1, x0:x1] = c
    img[y0:y1, x0] = img[y0:y1, x1 - 1] = c


def _fill(img: U8, x0: int, y0: int, x1: int, y1: int, colour: int) -> None:
    img[y0:y1, x0:x1] = _rgb(colour)


def render_title(players: int = 1, frame: int = 0) -> U8:
    """The title screen with the heart on ``players`` (1 or 2): uint8 [240, 256, 3]. ``frame``
    (the game's frameCounter) blinks our capsule's shine every 16 frames (titleAnim_speed)."""
    if players not in (1, 2):
        raise ValueError(f"players must be 1 or 2, got {players}")
    img = np.empty((240, 256, 3), np.uint8)
    img[:] = _rgb(BACKDROP_TITLE)
    _fill(img, 24, 32, 128, 96, BLUE)  # our capsule: a blue and a red half
    _fill(img, 128, 32, 232, 96, RED)
    _fill(img, 16, 40, 24, 88, BLUE)
    _fill(img, 232, 40, 240, 88, RED)
    if (frame >> 4) & 1:
        _fill(img, 40, 38, 216, 41, INK)
    _text(img, 56, 56, "DR MARIO", YELLOW, scale=2)
    _fill(img, 48, 152, 216, 208, BLACK)
    _text(img, 88, TITLE_CURSOR_Y[0] + 1, "1 PLAYER GAME", INK)
    _text(img, 88, TITLE_CURSOR_Y[1] + 1, "2 PLAYER GAME", INK)
    _sprite(img, TITLE_CURSOR_X, TITLE_CURSOR_Y[players - 1], _mask(_HEART), RED)
    return img


def render_options(
    level: int,
    speed: int,
    music: int = 0,
    section: int = 0,
    versus: tuple[int, int] | None = None,
) -> U8:
    """The options screen with ``level`` 0..20, ``speed`` 0..2, ``music`` 0..2 and the
    highlighted row ``section`` (0 level, 1 speed, 2 music): uint8 [240, 256, 3]. ``versus``:
    player 2's (level, speed) on the two-player screen (None: the one-player screen). Raises
    ValueError for a value out of range."""
    if not 0 <= level <= 20 or speed not in (0, 1, 2) or music not in (0, 1, 2):
        raise ValueError(f"level 0..20, speed and music 0..2; got {level}, {speed}, {music}")
    if section not in (0, 1, 2):
        raise ValueError(f"section must be 0, 1 or 2, got {section}")
    if versus is not None and (not 0 <= versus[0] <= 20 or versus[1] not in (0, 1, 2)):
        raise ValueError(f"player 2's level 0..20 and speed 0..2; got {versus}")
    img = np.empty((240, 256, 3), np.uint8)
    img[:] = _rgb(BACKDROP_OPTIONS)
    _text(img, 80, 40, "2 PLAYER GAME" if versus else "1 PLAYER GAME", INK)

    def ink(row: int) -> int:
        return INK if section == row else INK_DIM

    # Level row: the label, our slider (a tick per level under the cursor's path), the digits.
    _fill(img, 24, 56, 232, 104, BLACK)
    _text(img, 32, 64, "VIRUS LEVEL", ink(0))
    for k in range(21):
        x = LEVEL_CURSOR_X0 + LEVEL_CURSOR_STEP * k + 3
        _fill(img, x, 96, x + 1, 100 if k % 5 else 102, ink(0))
    _fill(img, LEVEL_CURSOR_X0 + 3, 94, LEVEL_CURSOR_X0 + 4 + 80, 95, ink(0))
    _fill(
        img,
        LEVEL_DIGITS_XY[0] - 4,
        LEVEL_DIGITS_XY[1] - 4,
        LEVEL_DIGITS_XY[0] + 20,
        LEVEL_DIGITS_XY[1] + 12,
        BACKDROP_OPTIONS,
    )
    _text(img, LEVEL_DIGITS_XY[0], LEVEL_DIGITS_XY[1], f"{level:02d}", INK)
    _sprite(img, LEVEL_CURSOR_X0 + LEVEL_CURSOR_STEP * level, LEVEL_CURSOR_Y, _mask(_ARROW), RED)
    if versus is not None:
        down = _mask(_ARROW)[::-1]
        _sprite(img, LEVEL_CURSOR_X0 + LEVEL_CURSOR_STEP * versus[0], LEVEL_CURSOR2_Y, down, BLUE)
    # Speed row.
    _fill(img, 24, 112, 232, 168 if versus else 160, BLACK)
    _text(img, 32, 120, "SPEED", ink(1))
    for x, word in zip(SPEED_CURSOR_X, ("LOW", "MED", "HI"), strict=True):
        _text(img, x + 4, SPEED_CURSOR_Y + 5, word, ink(1))
    sx = SPEED_CURSOR_X[speed]
    _frame(img, sx, SPEED_CURSOR_Y + 1, sx + 32, SPEED_CURSOR_Y + 17, YELLOW)
    if versus is not None:
        sx = SPEED_CURSOR_X[versus[1]]
        _fill(img, sx + 4, SPEED_CURSOR2_Y + 4, sx + 28, SPEED_CURSOR2_Y + 7, BLUE)
        x, y = LEVEL_DIGITS2_XY  # drawn over the rows' boxes
        _fill(img, x - 4, y - 2, x + 20, y + 10, BACKDROP_OPTIONS)
        _text(img, x, y, f"{versus[0]:02d}", INK)
    # Music row.
    _fill(img, 24, 168, 232, 216, BLACK)
    _text(img, 32, 172, "MUSIC TYPE", ink(2))
    for x, word in zip(MUSIC_BOX_X, ("FEVER", "CHILL", "OFF"), strict=True):
        _text(img, x + 4, MUSIC_BOX_Y + 5, word, ink(2))
    mx = MUSIC_BOX_X[music]
    _frame(img, mx, MUSIC_BOX_Y + 1, mx + 48, MUSIC_BOX_Y + 17, YELLOW)
    return img


def render_blank() -> U8:
    """Rendering off: the backdrop colour ($0F black) everywhere."""
    img = np.empty((240, 256, 3), np.uint8)
    img[:] = _rgb(BLACK)
    return img


def render_menu_state(menu: _core.Menu) -> U8:
    """The picture of an ``engine.Menu`` frame (its ``screen``): uint8 [240, 256, 3]."""
    screen = MenuScreen(menu.screen)
    if screen == MenuScreen.TITLE:
        return render_title(int(menu.players), int(menu.frame_counter))
    if screen == MenuScreen.OPTIONS:
        return render_options(int(menu.level), int(menu.speed), int(menu.music), int(menu.section))
    if screen == MenuScreen.DEMO:
        return render_frame(_core.Game.demo())
    return render_blank()
