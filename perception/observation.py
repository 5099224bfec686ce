"""Observation: what perception read from one captured frame (BoardReader's output).

Coordinates follow the game: field index = row * 8 + column, row 0 at the top (RAM
$0400-$047F); a pill's ``y`` counts rows from the bottom like RAM $86 (15 = top row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perception.layout import ScreenKind


@dataclass(frozen=True)
class FallingPill:
    """The falling pill as its sprites are drawn.

    x: column 0..7 of its left (horizontal) or bottom (vertical) half. y: row of that half
    counted from the bottom, 0..15 (16 would be a horizontal pill drawn in the neck above the
    field, which the game never does). rotation: 0 horizontal, 1 vertical. colors: (left,
    right) or (bottom, top), 0 yellow 1 red 2 blue - the order the game's rotation 0 / 1 draws
    its (1st, 2nd) half in. A picture cannot tell rotation 2 from 0 or 3 from 1 (the same two
    halves, swapped), so a pill in rotation 2 reads as rotation 0 with its colours swapped.
    confidence: the probability of this reading under the model (both halves, their colours).
    """

    x: int
    y: int
    rotation: int
    colors: tuple[int, int]
    confidence: float

    @property
    def cells(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Field (row from the top, column) of the (1st, 2nd) half in ``colors`` order."""
        row = 15 - self.y
        if self.rotation == 0:
            return (row, self.x), (row, self.x + 1)
        return (row, self.x), (row - 1, self.x)


def canonical_pill(x: int, y: int, rotation: int, colors: tuple[int, int]) -> tuple:
    """(x, y, rotation % 2, colours in drawn order) of a pill in the game's terms: what the
    picture of that pill shows (rotation 2 and 3 draw the 1st half right / on top)."""
    c0, c1 = colors
    if rotation >= 2:
        c0, c1 = c1, c0
    return (x, y, rotation % 2, (c0, c1))


@dataclass(frozen=True)
class NextPill:
    """The next pill, at rest beside the doctor or flying along its throw arc.

    colors: (1st half, 2nd half) in the game's order (RAM nextPill colours), 0 yellow 1 red
    2 blue; in flight the pill turns, and the model reads the order from where on the arc it is.
    confidence: the probability of this reading (drawn, and both colours).
    """

    colors: tuple[int, int]
    confidence: float


@dataclass(frozen=True)
class Observation:
    """One captured frame read.

    field: uint8 [16, 8] cell codes as ARCHITECTURE.md defines them (high nibble $4x top, $5x
        bottom, $6x left, $7x right, $8x single, $Bx clearing - the screen draws it as tile
        $Fx -, $Dx virus, $FF empty; low nibble the colour), the bottle as the PICTURE shows it
        (it lags the game state by up to 16 frames while rows are redrawn).
    confidence: float32 [16, 8] the model's probability of each cell's code, times the
        probability that no falling-pill sprite covers the cell (an occluded cell is a guess:
        on the lock frame the locked pill is drawn under the sprite).
    falling: the falling pill's sprites, or None when none is drawn.
    next: the next pill, or None when none is drawn.
    kind: what the frame shows (ScreenKind); ``field`` means something only for GAMEPLAY,
        LEVEL_INTRO, STAGE_CLEAR and GAME_OVER (the bottle is drawn).
    kind_confidence: the probability of ``kind``.
    """

    field: np.ndarray
    confidence: np.ndarray
    falling: FallingPill | None
    next: NextPill | None
    kind: ScreenKind
    kind_confidence: float

    @property
    def board_visible(self) -> bool:
        """True when the bottle is drawn (the field can be trusted as far as its confidence)."""
        return self.kind in (
            ScreenKind.GAMEPLAY,
            ScreenKind.LEVEL_INTRO,
            ScreenKind.STAGE_CLEAR,
            ScreenKind.GAME_OVER,
        )

    @property
    def min_confidence(self) -> float:
        """The lowest cell confidence: a cheap flag for a frame worth a second look."""
        return float(self.confidence.min())
