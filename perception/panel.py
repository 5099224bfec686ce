"""The level screen's panel, read without training: the LEVEL number and whether the next pill
is at rest in the doctor's hand or on its throw arc.

The board model cannot tell one picture apart (docs/PERCEPTION.md, "Screen kinds"): a later
pill's throw over a board that holds viruses only again (its first pill cleared with viruses)
looks like the first pill's throw, which is LEVEL_INTRO. The intro's board holds the level's
whole count of viruses (4 (level + 1), at most 84: level_init's virus count), a later board
fewer, so the LEVEL number and the board's count tell them apart (perception.decode uses it).

- **LEVEL number**: two digit tiles at nametable $227B-$227C (NES x 216-231, y 152-159; two
  digits always, "03" for level 3), read by normalised correlation of their luma with the 10
  digit glyphs the game draws (``glyphs``: rendered by the engine from the tiles the model
  was trained on, the VIRUS counter's units digit, nametable $233C, set to 0-9). A digit is
  read only when its best glyph correlates at least ``MIN_CORRELATION`` and beats the second
  by ``MIN_MARGIN``: held-out renders through the 5 shipped chains and 12 random ones read
  5,051 of 5,051 LEVEL numbers right, the worst best correlation 0.85 and margin 0.12
  (random chain 11, the worst chain).
- **Next pill in flight**: the next pill rests at OAM (190, 69)-(205, 76) (drawn from line
  70: NES x 190-205, y 70-77); on the throw arc that box is the window's black background.
  Its mean luma is scaled between the window's black beside it (x 210-215, the same lines:
  black in every frame of the level screen) and the digit tiles' paper (the panel's light
  colour) in the same picture: held-out renders (the chains above, 200 frames each) gave at
  most 0.05 in flight (throw frame 6 on) and at least 0.25 at rest, except a picture with no
  next pill drawn; ``IN_FLIGHT_BELOW`` (0.15) is the cut. The first throw frames, while the
  pill is still over the box, read as at rest (the decoder's rule then does not act: the
  kind head decides).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perception.layout import CROP_X, CROP_Y

PANEL_FILE = "panel.npz"  # beside a prepared board model (the user's data directory)
LEVEL_DIGITS_YX = ((152, 216), (152, 224))  # NES (y, x) of the LEVEL number's tiles
VIRUS_UNITS_YX = (200, 224)  # the VIRUS counter's units digit ($233C): the glyphs' source
REST_BOX = (70, 190, 8, 16)  # NES (y, x, height, width) of the next pill at rest
BLACK_BOX = (70, 210, 8, 6)  # the window's black beside it
LUMA = np.array([0.299, 0.587, 0.114], np.float32)
MIN_CORRELATION = 0.6
MIN_MARGIN = 0.05
IN_FLIGHT_BELOW = 0.15


@dataclass(frozen=True)
class Panel:
    """What the panel shows: ``level`` (0-99, None when a digit is not read surely) and
    ``in_flight`` (the next pill's rest box is empty: the pill is on its throw arc, or none is
    drawn; None when the digits' ink and paper do not give a scale)."""

    level: int | None
    in_flight: bool | None


def glyphs(tiles: Any) -> np.ndarray:
    """The game's digit glyphs: float32 [10, 8, 8] luma (0-255), digit d at index d, rendered
    by the engine with ``tiles`` (engine.TileSet: a ROM's or the clean-room one)."""
    import engine

    out = np.zeros((10, 8, 8), np.float32)
    y, x = VIRUS_UNITS_YX
    for d in range(10):
        game = engine.Game(0, 1, 1234, 0)
        game.virus_left_bcd[...] = d
        picture = engine.render_frame(game, tiles)
        out[d] = picture[y : y + 8, x : x + 8].astype(np.float32) @ LUMA
    return out


def save_glyphs(tiles: Any, path: str | Path) -> None:
    """Write :func:`glyphs` of ``tiles`` to ``path`` (npz, key ``digits``)."""
    np.savez_compressed(path, digits=glyphs(tiles))


def load_glyphs(path: str | Path) -> np.ndarray:
    """The glyphs :func:`save_glyphs` wrote. Raises ValueError for a file that holds none of
    shape [10, 8, 8]."""
    try:
        with np.load(path) as f:
            digits = np.asarray(f["digits"], np.float32)
    except (OSError, KeyError, ValueError):
        raise ValueError(
            f"{path}: no panel glyphs in this file (hil prepare writes it beside the model; "
            "prepare the ROM again)"
        ) from None
    if digits.shape != (10, 8, 8):
        raise ValueError(f"{path}: panel glyphs of shape {digits.shape}, expected (10, 8, 8)")
    return digits


def _normalised(a: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    a = a - a.mean(axis=(-2, -1), keepdims=True)
    norm = np.sqrt((a * a).sum(axis=(-2, -1), keepdims=True))
    return a / np.maximum(norm, 1e-6)


class PanelReader:
    """Reads a :class:`Panel` from the board model's crop (RGB uint8 [208, 144, 3], NES pixels
    from x 88, y 16: perception.layout) with the digit ``glyphs`` (float32 [10, 8, 8])."""

    def __init__(self, digits: np.ndarray) -> None:
        if digits.shape != (10, 8, 8):
            raise ValueError(f"digit glyphs of shape {digits.shape}, expected (10, 8, 8)")
        self.templates = _normalised(digits.astype(np.float32))
        # the glyphs' paper (the lighter half of each glyph's pixels): the scale's light end
        self.paper = digits >= digits.mean(axis=(1, 2), keepdims=True)

    def read(self, crop: np.ndarray) -> Panel:
        digits: list[int] = []
        paper: list[float] = []
        for y, x in LEVEL_DIGITS_YX:
            cell = _luma(crop, (y, x, 8, 8))
            scores = (self.templates * _normalised(cell)).sum(axis=(1, 2))
            best, second = np.argsort(-scores)[:2]
            if scores[best] < MIN_CORRELATION or scores[best] - scores[second] < MIN_MARGIN:
                return Panel(None, None)
            digits.append(int(best))
            paper.append(float(cell[self.paper[best]].mean()))
        level = 10 * digits[0] + digits[1]
        black = float(_luma(crop, BLACK_BOX).mean())
        light = float(np.mean(paper))
        if light - black < 16.0:  # no contrast to scale by
            return Panel(level, None)
        box = float(_luma(crop, REST_BOX).mean())
        return Panel(level, (box - black) / (light - black) < IN_FLIGHT_BELOW)


def _luma(crop: np.ndarray, box: tuple[int, int, int, int]) -> npt.NDArray[np.float32]:
    """Luma (0-255) of an NES box (y, x, height, width) of the crop."""
    y, x, h, w = box
    part = crop[y - CROP_Y : y - CROP_Y + h, x - CROP_X : x - CROP_X + w]
    return part.astype(np.float32) @ LUMA


def level_viruses(level: int) -> int:
    """The viruses a level starts with: 4 (level + 1), at most 84 (level_init's count; the
    game caps the level it counts from at 20)."""
    return min(4 * (level + 1), 84)
