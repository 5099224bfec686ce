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
  by ``MIN_MARGIN``. ``python -m perception.panel --rom drmario.nes`` (held-out renders
  through the 5 shipped chains and 40 random ones, 200 pictures each): 8,904 of 8,904 LEVEL
  numbers right; with the clean-room tiles 8,900 right, 4 not read, none wrong.
- **Next pill in flight**: the next pill rests at OAM (190, 69)-(205, 76) (drawn from line
  70: NES x 190-205, y 70-77); on the throw arc that box is the window's black background.
  Its mean luma is scaled between the window's black beside it (x 210-215, the same lines:
  black in every frame of the level screen) and the digit tiles' paper (the panel's light
  colour) in the same picture: on 5 of those chains it was at most 0.05 in flight (throw
  frame 6 on) and at least 0.25 at rest; ``IN_FLIGHT_BELOW`` (0.15) is the cut. The same
  check, all 45 chains: 2,508 of 2,508 pictures in flight read so (clean-room: 2,506) and
  none of 5,755 at rest with the next pill drawn. The first throw frames, while the
  pill is still over the box, read as at rest (the decoder's rule then does not act: the
  kind head decides).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from perception.layout import CROP_X, CROP_Y

PANEL_FILE = "panel.npz"  # beside a prepared board model (the user's data directory)
PANEL_VERSION = 1  # its "version" array (absent in files written before it: read as 1)
LEVEL_DIGITS_YX = ((152, 216), (152, 224))  # NES (y, x) of the LEVEL number's tiles
VIRUS_UNITS_YX = (200, 224)  # the VIRUS counter's units digit ($233C): the glyphs' source
REST_BOX = (70, 190, 8, 16)  # NES (y, x, height, width) of the next pill at rest
BLACK_BOX = (70, 210, 8, 6)  # the window's black beside it
LUMA = np.array([0.299, 0.587, 0.114], np.float32)
MIN_CORRELATION = 0.6
MIN_MARGIN = 0.05
IN_FLIGHT_BELOW = 0.15
FLIGHT_FROM = 6  # throw frame from which the pill is away from its rest box


@dataclass(frozen=True)
class Panel:
    """What the panel shows: ``level`` (0-99, None when a digit is not read surely) and
    ``in_flight`` (the next pill's rest box is empty: the pill is on its throw arc, or none is
    drawn; None when the window's black and the digits' paper are too close to scale by)."""

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
    """Write :func:`glyphs` of ``tiles`` to ``path`` (npz, keys ``digits`` and ``version``)."""
    np.savez_compressed(path, digits=glyphs(tiles), version=np.int32(PANEL_VERSION))


def load_glyphs(path: str | Path) -> np.ndarray:
    """The glyphs :func:`save_glyphs` wrote. Raises ValueError for a file that holds none of
    shape [10, 8, 8] (an empty, truncated or foreign file, a directory), non-finite ones, or
    a ``version`` other than :data:`PANEL_VERSION`."""
    try:
        with open(path, "rb") as fh, np.load(fh) as f:  # the file closes on any error
            digits = np.asarray(f["digits"], np.float32)
            version = int(f["version"]) if "version" in f.files else PANEL_VERSION
    except Exception:  # noqa: BLE001 (numpy raises OSError, EOFError, BadZipFile, KeyError...)
        raise ValueError(
            f"{path}: no panel glyphs in this file (hil prepare writes it beside the model; "
            "prepare the ROM again)"
        ) from None
    if version != PANEL_VERSION:
        raise ValueError(
            f"{path}: field 'version': expected {PANEL_VERSION}, got {version} (prepare the ROM "
            "again)"
        )
    if digits.shape != (10, 8, 8):
        raise ValueError(f"{path}: panel glyphs of shape {digits.shape}, expected (10, 8, 8)")
    if not np.isfinite(digits).all():
        raise ValueError(f"{path}: panel glyphs that are not numbers (prepare the ROM again)")
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
        # the glyphs' paper (each glyph's pixels at or above its mean): the scale's light end
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


def check(
    tiles: Any, chains: int = 40, frames: int = 200, progress: bool = False
) -> dict[str, Any]:
    """The panel reader against the truth on held-out renders (perception.evaluate's games and
    chains: the 5 shipped profiles and ``chains`` random ones, ``frames`` pictures each, drawn
    with ``tiles``; the glyphs from the same tiles). Counts per chain and pooled: LEVEL numbers
    read right / not read / wrong over pictures with the bottle drawn; the next pill read in
    flight on pictures from throw frame ``FLIGHT_FROM`` on, and at rest pictures (next pill
    drawn, throw frame 0) read as flight."""
    from calibration.forward import NoiseSource
    from perception.data import EVAL_SEED, GameStream, capture_full, held_out_profiles
    from perception.preprocess import CropSampler

    reader = PanelReader(glyphs(tiles))
    keys = ("pictures", "level_right", "level_not_read", "level_wrong", "flight",
            "flight_read_flight", "rest", "rest_read_flight")  # fmt: skip
    out: dict[str, Any] = {"chains": {}}
    pooled = dict.fromkeys(keys, 0)
    for k, profile in enumerate(held_out_profiles(chains)):
        # seeded as perception.evaluate seeds its validation of this chain
        rng = np.random.default_rng([EVAL_SEED, 1000 + k])
        stream = iter(GameStream(rng, "eval", tiles, randomize_tiles=False, emit=0.03, hard=False))
        noise = NoiseSource(1000 + k)
        sampler = CropSampler(profile)
        n = dict.fromkeys(keys, 0)
        for _ in range(frames):
            shown = next(stream)
            lab = shown.labels
            if not lab.field_visible or lab.level < 0:
                continue
            got = reader.read(sampler(capture_full(profile, shown, noise)))
            n["pictures"] += 1
            n["level_right"] += got.level == lab.level
            n["level_not_read"] += got.level is None
            n["level_wrong"] += got.level is not None and got.level != lab.level
            if lab.next_throw >= FLIGHT_FROM:
                n["flight"] += 1
                n["flight_read_flight"] += bool(got.in_flight)
            elif lab.next_throw == 0 and lab.next_colors[0] >= 0:
                n["rest"] += 1
                n["rest_read_flight"] += bool(got.in_flight)
        out["chains"][profile.name] = n
        for key in keys:
            pooled[key] += n[key]
        if progress:
            print(f"{profile.name}: {n}", file=sys.stderr, flush=True)
    out["pooled"] = pooled
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m perception.panel [--rom ROM]``: :func:`check`, JSON on stdout."""
    import argparse
    import json

    p = argparse.ArgumentParser(
        prog="python -m perception.panel",
        description="How well the panel reader reads held-out renders (LEVEL number, flight)",
    )
    p.add_argument("--rom", help="your Dr. Mario ROM: its tiles (default: the clean-room ones)")
    p.add_argument("--chains", type=int, default=40, help="random capture chains (40)")
    p.add_argument("--frames", type=int, default=200, help="pictures per chain (200)")
    args = p.parse_args(argv)
    import engine

    try:
        tiles = engine.TileSet.from_ines(args.rom) if args.rom else engine.TileSet.clean_room()
    except (OSError, ValueError) as e:
        print(f"python -m perception.panel: --rom {e}", file=sys.stderr)
        return 2
    print(json.dumps(check(tiles, args.chains, args.frames, progress=True), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
