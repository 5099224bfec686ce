"""Where perception looks on the NES screen, and the label codes it predicts.

The model sees one crop of the NES picture (NES pixels, RGB): x 88-231, y 16-223, 144 x 208
pixels, 18 x 26 cells of 8 x 8. It holds the bottle interior (x 96-159, y 80-207: tile columns
12-19, rows 10-25 of the nametable, ARCHITECTURE.md), the row above it in the neck (where a vertical
pill's upper half is drawn at the top row), the next pill at rest (OAM (190, 69)) and its whole
throw arc (``pillThrownAnim_XPos/YPos``: x 120-205, y 21-91 with the +4 of a vertical pill),
the doctor (metasprite at ($C0, $4B), 24 x 40 pixels) and the LEVEL / SPEED / VIRUS box (tile
columns 26-28, rows 18-25). Cell (r, c) of the crop covers NES x ``88 + 8c``, y ``16 + 8r``;
the bottle's field cell (row, col) is crop cell (row + 8, col + 1).

Cell classes (``N_CELL_CLASSES`` = 22): 0 empty, then ``1 + 3 * type + colour`` for the types
top $4x, bottom $5x, left $6x, right $7x, single $8x, clearing $Bx (drawn as tile $Fx by
``render_fieldRow``) and virus $Dx, colour 0 yellow, 1 red, 2 blue (ARCHITECTURE.md cell codes).

Sprite classes (``N_SPRITE_CLASSES`` = 4) per cell of the bottle plus the neck row above it
(17 x 8 cells, row 0 = the neck): 0 no falling-pill sprite, ``1 + colour`` a pill half of that
colour. The falling pill's sprites are drawn one line below the grid (OAM Y + 1), so a half in
field row r covers lines 81 + 8r .. 88 + 8r; it is assigned to cell row r.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

CROP_X, CROP_Y = 88, 16  # NES pixels: top-left corner of the crop
CROP_W, CROP_H = 144, 208  # NES pixels
CELL = 8  # NES pixels per cell
CROP_COLS, CROP_ROWS = CROP_W // CELL, CROP_H // CELL  # 18 x 26 cells
FIELD_ROWS, FIELD_COLS = 16, 8
BOTTLE_X, BOTTLE_Y = 96, 80  # NES pixels of field cell (0, 0)
FIELD_ROW0 = (BOTTLE_Y - CROP_Y) // CELL  # 8: crop cell row of field row 0
FIELD_COL0 = (BOTTLE_X - CROP_X) // CELL  # 1: crop cell column of field column 0
SPRITE_ROWS = FIELD_ROWS + 1  # the neck row above the field, then the 16 field rows
SPRITE_ROW0 = FIELD_ROW0 - 1  # 7: crop cell row of the neck row

# The two-player screen is read through the same crop, one per player, each placed so that
# the player's bottle sits where the one-player bottle does (field cell (0, 0) at crop pixel
# (8, 64)): p1's bottle at x 32-95, p2's at x 160-223, y 80-207 (fieldRow_PPUADDR_2P_P1 $2144,
# _P2 $2154; docs/RENDER.md "Two players"). The next pill at rest, OAM ($38, $33) / ($B8, $33),
# is then at crop (32, 35), inside the next head's area. p2's crop runs 40 pixels past the
# picture's right edge; they read 0 (perception.preprocess).
VIEW_X = 88  # NES x of the one-player crop's left edge (CROP_X)
VERSUS_VIEW_X = (24, 152)  # NES x of player 1's and player 2's crops

EMPTY_CODE = 0xFF
CELL_TYPES = (
    0x40,
    0x50,
    0x60,
    0x70,
    0x80,
    0xB0,
    0xD0,
)  # top bottom left right single clearing virus
COLORS = ("yellow", "red", "blue")  # cell code low nibble 0, 1, 2
N_CELL_CLASSES = 1 + 3 * len(CELL_TYPES)
N_SPRITE_CLASSES = 1 + 3
N_COLORS = 3

# class -> cell code (RAM encoding: clearing cells as $Bx, ARCHITECTURE.md)
CLASS_TO_CODE = np.array(
    [EMPTY_CODE] + [t | c for t in CELL_TYPES for c in range(3)], dtype=np.uint8
)


def _code_to_class() -> np.ndarray:
    table = np.full(256, -1, dtype=np.int64)
    for k, code in enumerate(CLASS_TO_CODE):
        table[code] = k
    for c in range(3):  # the screen shows a clearing cell ($Bx) as tile $Fx
        table[0xF0 | c] = table[0xB0 | c]
    return table


CODE_TO_CLASS = _code_to_class()
CODE_TO_CLASS.flags.writeable = False
CLASS_TO_CODE.flags.writeable = False


def cell_classes(codes: np.ndarray) -> np.ndarray:
    """Cell codes (RAM $Bx or screen tile $Fx for clearing cells) -> int64 classes, same shape.

    Raises ValueError for a byte that is no cell code (e.g. a virus of colour 3).
    """
    codes = np.asarray(codes, dtype=np.uint8)
    out = CODE_TO_CLASS[codes]
    if (out < 0).any():
        bad = sorted({f"${int(v):02X}" for v in codes[out < 0]})
        raise ValueError(f"not a field cell code: {', '.join(bad)}")
    return out


class KindLabel(IntEnum):
    """The kind head's six classes (the model's output order, the training labels): what a
    captured frame shows. Observation.kind is engine.ScreenKind with Observation.intro;
    perception.observation.kind_of_label / label_of_kind map between the two."""

    GAMEPLAY = 0  # a level being played: the field, falling pill and next pill are read
    LEVEL_INTRO = 1  # the opening wait (levelIntro_delay) and the first throw: no falling pill yet
    STAGE_CLEAR = 2  # the last virus is gone
    GAME_OVER = 3  # the top-out: the doctor's fail pose
    PAUSED = 4  # the pause screen: background off, PAUSE text
    OTHER = 5  # not a level picture (menus, a blank or unrelated frame)


N_KINDS = len(KindLabel)
