"""Randomised tile appearance for training: a model trained on one tile set should not depend on
its exact pixels (a real console shows the ROM's drawings, other palettes, other TVs).

``randomize(tiles, rng)`` returns a perturbed copy of an ``engine.TileSet``; what it keeps is
what the game fixes: the tile numbers (cell codes), which palette entries the pill colours use,
the bottle's place, that a drawing is the same for the three pill colours, and that each cell
type has its own shape. What it changes, each with some probability:

- the field drawings (pill halves, single, virus frames, clearing tile): pixels removed from or
  added at the shape's border, holes inside, whole new random shapes for the virus and the
  clearing tile; the falling pill's sprite drawings follow the background ones or get their
  own small changes;
- the background around the bottle (the two pattern tiles, the box and glass tiles): new random
  patterns and colours;
- the speed colours and the colours of the background palettes other than the field's;
- the NES RGB palette: hue rotation, saturation and brightness (a TV's tint / colour / bright
  knobs) and a small independent change of every colour.
"""

from __future__ import annotations

import numpy as np

from engine import TileSet

BG_BANKS = (0, 1)
SPR_BANK = 2
PILL_TILES = (0x40, 0x50, 0x60, 0x70)  # top, bottom, left, right: background and sprite
SINGLE, VIRUS, CLEARING = 0x80, 0xD0, 0xF0  # templates: +0, +1, +2 for the three colours
BACKGROUND_TILES = (0xFC, 0xFD)  # the pattern around the bottle in the clean-room layout
GLASS_TILES = tuple(range(0xA0, 0xAC)) + tuple(range(0xB0, 0xB8))  # bottle walls, HUD boxes
FIELD_PALETTE = 2  # background palette 2 / sprite palette 2: the pill colours
YUV = np.array([[0.299, 0.587, 0.114], [-0.14713, -0.28886, 0.436], [0.615, -0.51499, -0.10001]])


def _template_mask(patterns: np.ndarray, bank: int, tile: int) -> np.ndarray:
    return patterns[bank, tile] != 0


def _write_template(patterns: np.ndarray, bank: int, tile: int, mask: np.ndarray) -> None:
    for k in range(3):
        patterns[bank, tile + k] = mask.astype(np.uint8) * (k + 1)


def _border(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inner border: set pixels next to an unset one, outer border: unset next to set)."""
    pad = np.pad(mask, 1)
    near_unset = np.zeros_like(mask)
    near_set = np.zeros_like(mask)
    for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        shifted = pad[1 + dy : 9 + dy, 1 + dx : 9 + dx]
        near_unset |= ~shifted
        near_set |= shifted
    return mask & near_unset, ~mask & near_set


def perturb_shape(mask: np.ndarray, rng: np.random.Generator, amount: int) -> np.ndarray:
    """bool [8, 8] -> bool [8, 8]: up to ``amount`` border pixels removed or added, maybe a hole.

    The shape stays recognisable (at least half of it is kept)."""
    out = mask.copy()
    for _ in range(int(rng.integers(0, amount + 1))):
        inner, outer = _border(out)
        pick = inner if rng.random() < 0.5 else outer
        ys, xs = np.nonzero(pick)
        if ys.size:
            i = int(rng.integers(ys.size))
            out[ys[i], xs[i]] = not out[ys[i], xs[i]]
    if rng.random() < 0.25:  # a dark detail inside (a shine or an outline gap on a real ROM)
        inner, _ = _border(out)
        ys, xs = np.nonzero(out & ~inner)
        if ys.size:
            i = int(rng.integers(ys.size))
            out[ys[i], xs[i]] = False
    if out.sum() < mask.sum() // 2:
        return mask.copy()
    return out


def random_shape(rng: np.random.Generator, density: float) -> np.ndarray:
    """A random left-right symmetric bool [8, 8] shape (a virus or clearing-tile stand-in)."""
    half = rng.random((8, 4)) < density
    shape = np.concatenate([half, half[:, ::-1]], axis=1)
    if rng.random() < 0.5:
        shape[0] = shape[-1] = False
    return shape


def _shift_palette(rgb: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    yuv = rgb.astype(np.float64) @ YUV.T
    angle = np.radians(rng.uniform(-12.0, 12.0))
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    yuv[:, 1:] = yuv[:, 1:] @ rot.T * rng.uniform(0.8, 1.2)
    yuv[:, 0] = yuv[:, 0] * rng.uniform(0.9, 1.1) + rng.uniform(-8.0, 8.0)
    out = yuv @ np.linalg.inv(YUV).T + rng.normal(0.0, 5.0, size=rgb.shape)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def randomize(tiles: TileSet, rng: np.random.Generator, shapes: bool = True) -> TileSet:
    """A perturbed copy of ``tiles`` (see the module docstring); deterministic for ``rng``.

    ``shapes=False`` keeps the drawings and palettes and only shifts the NES RGB palette (a
    model for one ROM's tiles: the console's and the capture's colours still vary)."""
    if not shapes:
        rgb = _shift_palette(tiles.rgb, rng) if rng.random() < 0.8 else tiles.rgb.copy()
        return tiles.replace(rgb=rgb, name=f"{tiles.name} (palette shifted)")
    patterns = tiles.patterns.copy()
    amount = int(rng.integers(0, 4))
    for tile in (*PILL_TILES, SINGLE):
        base = _template_mask(patterns, 0, tile)
        mask = perturb_shape(base, rng, amount) if amount else base
        for bank in BG_BANKS:
            _write_template(patterns, bank, tile, mask)
        if tile in PILL_TILES:
            sprite = mask if rng.random() < 0.7 else perturb_shape(mask, rng, 2)
            _write_template(patterns, SPR_BANK, tile, sprite)
    # New random shapes for the virus and the clearing tile only now and then: with them
    # often, the shape stopped telling a virus from a clearing cell, and the model learnt to
    # guess from the neighbours (a red virus beside red ones read as clearing).
    for bank in BG_BANKS:  # the two animation frames of the small viruses
        if rng.random() < 0.1:
            shape = random_shape(rng, rng.uniform(0.4, 0.7))
        else:
            shape = perturb_shape(_template_mask(patterns, bank, VIRUS), rng, amount)
        _write_template(patterns, bank, VIRUS, shape)
    if rng.random() < 0.1:
        shape = random_shape(rng, rng.uniform(0.25, 0.5))
    else:
        shape = perturb_shape(_template_mask(patterns, 0, CLEARING), rng, amount)
    for bank in BG_BANKS:
        _write_template(patterns, bank, CLEARING, shape)
    if rng.random() < 0.5:
        for tile in BACKGROUND_TILES:
            patterns[BG_BANKS, tile] = rng.integers(0, 4, size=(8, 8), dtype=np.uint8)
    if rng.random() < 0.3:
        for tile in GLASS_TILES:
            m = patterns[0, tile] != 0
            patterns[BG_BANKS, tile] = np.where(
                m, rng.integers(1, 4, size=(8, 8)), patterns[0, tile]
            ).astype(np.uint8)
    palettes = tiles.palettes.copy()
    speed_colors = tiles.speed_colors.copy()
    if rng.random() < 0.4:
        for pal in (0, 1, 3):
            palettes[pal * 4 + 1 : pal * 4 + 4] = rng.integers(0, 0x3D, size=3)
        speed_colors = rng.integers(0, 0x3D, size=3).astype(np.uint8)
    rgb = _shift_palette(tiles.rgb, rng) if rng.random() < 0.8 else tiles.rgb.copy()
    return tiles.replace(
        patterns=patterns,
        palettes=palettes,
        speed_colors=speed_colors,
        rgb=rgb,
        name=f"{tiles.name} (randomised)",
    )
