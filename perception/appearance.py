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
  knobs) and a small independent change of every colour;
- a whole new family of field drawings (``FAMILY_RATE``, ``drawing_family``): pill halves,
  single, viruses and clearing tile drawn from scratch, with a size and a place inside the cell,
  rounded corners on a half's far side, a gap or a join toward its partner, and detail pixels
  (a shine, a virus's eyes) in another palette entry of the field's palette; a virus may be
  drawn differently for each colour. Real ROMs do all of these: the original release's pill
  tiles are 7 x 7 in the top-left of the cell with a shine in another colour's entry, and its
  three virus colours have three drawings (CHR tiles $D0-$D2).
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
FAMILY_RATE = 0.5  # share of the randomised tile sets whose field drawings are a new family
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


def _round_corners(block: np.ndarray, radius: dict[str, int]) -> np.ndarray:
    """Clear the pixels near the named corners ("tl", "tr", "bl", "br") of the set area of
    ``block`` (bool [8, 8]): radius r clears the pixels whose distance in x + y from the
    corner pixel is under r (1: the corner pixel, 2: and its two neighbours)."""
    out = block.copy()
    ys, xs = np.nonzero(block)
    if not ys.size:
        return out
    y0, y1, x0, x1 = ys.min(), ys.max(), xs.min(), xs.max()
    yy, xx = np.mgrid[0:8, 0:8]
    for name, r in radius.items():
        cy = y0 if name[0] == "t" else y1
        cx = x0 if name[1] == "l" else x1
        out &= ~((np.abs(yy - cy) + np.abs(xx - cx)) < r)
    return out


def drawing_family(rng: np.random.Generator) -> dict[int, list[np.ndarray]]:
    """A new family of field drawings: {tile: [drawing of colour 0, 1, 2]} for the pill halves
    ($40 top, $50 bottom, $60 left, $70 right), the single ($80), the virus's two animation
    frames (keys ``VIRUS`` and ``VIRUS + 0x100``: banks 0 and 1) and the clearing tile ($F0).

    A drawing is int8 [8, 8]: 0 transparent (palette entry 0), 1 the colour's own entry, 2 a
    detail pixel (``palette_details`` says which entry). Every type keeps its own shape: a half
    is a block with its far side's corners rounded and its partner's side square (reaching the
    cell's edge, or one pixel short of it), the single has all four corners rounded."""
    size = int(rng.integers(5, 9))
    ox, oy = (int(v) for v in rng.integers(0, 9 - size, size=2))
    block = np.zeros((8, 8), bool)
    block[oy : oy + size, ox : ox + size] = True
    far = int(rng.integers(1, 3 if size < 7 else 4))  # a small block stays a block
    near = int(far > 1 and rng.random() < 0.25)  # the partner's side stays squarer
    join = rng.random() < 0.5
    shapes: dict[int, np.ndarray] = {}
    for tile, toward in ((0x40, "b"), (0x50, "t"), (0x60, "r"), (0x70, "l")):
        b = block.copy()
        if join:  # reach the partner's edge of the cell
            if toward == "b":
                b[oy:, ox : ox + size] = True
            elif toward == "t":
                b[: oy + size, ox : ox + size] = True
            elif toward == "r":
                b[oy : oy + size, ox:] = True
            else:
                b[oy : oy + size, : ox + size] = True
        corners = {"tl": far, "tr": far, "bl": far, "br": far}
        for c in corners:
            if toward in c:
                corners[c] = near
        shapes[tile] = _round_corners(b, corners)
    single = int(rng.integers(max(1, far - 1), 4))
    shapes[SINGLE] = _round_corners(block, {c: single for c in ("tl", "tr", "bl", "br")})
    out: dict[int, list[np.ndarray]] = {}
    shine = rng.random() < 0.6
    for tile, mask in shapes.items():
        d = mask.astype(np.int8)
        if shine:  # a highlight line one pixel inside the top or left edge, along the cell
            ys, xs = np.nonzero(mask)
            if rng.random() < 0.5 or tile in (0x40, 0x50):
                col = xs.min() + 1
                rows = np.arange(ys.min() + 1, ys.max())
                d[rows, col] = np.where(mask[rows, col], 2, d[rows, col])
            else:
                row = ys.min() + 1
                cols = np.arange(xs.min() + 1, xs.max())
                d[row, cols] = np.where(mask[row, cols], 2, d[row, cols])
        out[tile] = [d, d, d]
    per_colour = rng.random() < 0.5
    eyes = rng.random() < 0.6
    vsize = int(rng.integers(5, 9))
    vx, vy = (int(v) for v in rng.integers(0, 9 - vsize, size=2))

    def virus() -> np.ndarray:
        shape = np.zeros((8, 8), np.int8)
        half = rng.random((vsize, (vsize + 1) // 2)) < rng.uniform(0.45, 0.75)
        full = np.concatenate([half, half[:, ::-1][:, vsize % 2 :]], axis=1)
        shape[vy : vy + vsize, vx : vx + vsize] = full
        if eyes:
            for _ in range(int(rng.integers(1, 3))):
                y, x = int(rng.integers(0, vsize)), int(rng.integers(0, vsize // 2))
                shape[vy + y, vx + x] = shape[vy + y, vx + vsize - 1 - x] = 2
        return shape

    frames = [virus() for _ in range(3 if per_colour else 1)]
    frames = frames * 3 if len(frames) == 1 else frames
    out[VIRUS] = frames
    moved = []  # the second animation frame: some rows of the first drawn anew
    for f in frames:
        g = f.copy()
        rows = rng.random(8) < 0.4
        redrawn = virus()
        g[rows] = redrawn[rows]
        moved.append(g)
    out[VIRUS + 0x100] = moved
    if rng.random() < 0.5:  # a ring: the block's outline
        ring = _round_corners(_border(block)[0], {c: 1 for c in ("tl", "tr", "bl", "br")})
        clear = ring if ring.any() else block
    else:
        clear = random_shape(rng, rng.uniform(0.25, 0.5))
    out[CLEARING] = [clear.astype(np.int8)] * 3
    return out


def palette_details(rng: np.random.Generator) -> list[int]:
    """The palette entry (0..3) of the detail pixels of each colour's drawings: another pill
    colour's entry (the original release: yellow's shine in entry 3, red's and blue's in 1), one
    entry for all three, or 0 (a hole)."""
    mode = rng.random()
    if mode < 0.5:
        shift = int(rng.integers(1, 3))
        return [(k + shift) % 3 + 1 for k in range(3)]
    if mode < 0.8:
        return [int(rng.integers(1, 4))] * 3
    return [0, 0, 0]


def _write_drawings(
    patterns: np.ndarray, bank: int, tile: int, drawings: list[np.ndarray], details: list[int]
) -> None:
    for k in range(3):
        d = drawings[k]
        patterns[bank, tile + k] = np.where(d == 1, k + 1, np.where(d == 2, details[k], 0))


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
    if rng.random() < FAMILY_RATE:
        family = drawing_family(rng)
        details = palette_details(rng)
        for tile, drawings in family.items():
            banks = (1,) if tile == VIRUS + 0x100 else (0,) if tile == VIRUS else BG_BANKS
            for bank in banks:
                _write_drawings(patterns, bank, tile & 0xFF, drawings, details)
            if tile in PILL_TILES:  # the falling pill's sprites
                _write_drawings(patterns, SPR_BANK, tile, drawings, details)
        return _recolour(tiles, patterns, rng, "new drawings")
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
    return _recolour(tiles, patterns, rng, "randomised")


def _recolour(tiles: TileSet, patterns: np.ndarray, rng: np.random.Generator, what: str) -> TileSet:
    """The background, glass, palette and NES RGB changes shared by both kinds of drawings."""
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
        name=f"{tiles.name} ({what})",
    )
