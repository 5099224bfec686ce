"""The project's clean-room tile set: drawings in cleanroom.txt and font.txt, and our own layouts
of the one-player and two-player level screens.

Nothing here comes from the game's CHR or nametable data. The facts kept are positions and
numbers the game's code writes (docs/RENDER.md): the bottle interior at tile columns 12-19, rows
10-25; the HUD digits at the VRAM addresses of render_palChange_or_bkgOverlays; field cell codes
as tile numbers; digits $00-$09 and letters $0A-$23 as tile numbers.

``load_cleanroom()`` parses the text files (a few milliseconds) into the arrays of
``engine.TileSet``; ``tools/cleanroom_preview.py`` draws a picture of the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ART = HERE / "cleanroom.txt"
FONT = HERE / "font.txt"

BANK_BG0, BANK_BG1, BANK_SPR = 0, 1, 2
_BANKS = {
    "bg": (BANK_BG0, BANK_BG1),
    "bg0": (BANK_BG0,),
    "bg1": (BANK_BG1,),
    "spr": (BANK_SPR,),
    "all": (BANK_BG0, BANK_BG1, BANK_SPR),
}
_SYMBOLS = {".": 0, "1": 1, "2": 2, "3": 3}
_ENTRIES = ("tile", "sprite", "mirror", "same", "glyph")
FIRST_SPRITE_ART_TILE = 0xA0  # tiles cut from sprite drawings are numbered from here
FIRST_LETTER_TILE = 0x0A  # the game's letter numbering: A = $0A ... Z = $23
BLANK = 0xFE  # black tile of the HUD boxes (textLevelSpeed pads " HI" with $FE)
EMPTY = 0xFF  # empty field cell


class ArtError(ValueError):
    """A drawing in the clean-room files is malformed (the message names file and line)."""


@dataclass
class CleanRoom:
    patterns: np.ndarray  # uint8 [3, 256, 8, 8]: background frame 0, frame 1, sprites
    nametable: np.ndarray  # uint8 [1024]: VRAM $2000-$23FF, tiles + attribute table
    nametable_2p: np.ndarray  # uint8 [1024]: the same for the two-player level
    metasprites: dict[int, np.ndarray]  # slot -> uint8 [k, 4] (dy, tile, attr, dx)
    names: dict[str, int]  # background tile name -> number


def _cell(symbol: str, c: int | None, where: str) -> int:
    if symbol == "c":
        if c is None:
            raise ArtError(f"{where}: 'c' used but no colour given")
        return c
    if symbol not in _SYMBOLS:
        raise ArtError(f"{where}: unknown symbol {symbol!r}")
    return _SYMBOLS[symbol]


def _grid(rows: list[str], c: int | None, where: str) -> np.ndarray:
    width = len(rows[0])
    if any(len(r) != width for r in rows) or width % 8 or len(rows) % 8:
        raise ArtError(f"{where}: rows must all have one length, a multiple of 8 (and as many)")
    return np.array([[_cell(ch, c, where) for ch in r] for r in rows], dtype=np.uint8)


def _blocks(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, header, art rows) for each entry of a drawing file."""
    out: list[tuple[int, str, list[str]]] = []
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if set(line) <= set(_SYMBOLS) | {"c"} and out:
            out[-1][2].append(line)
        elif line.split()[0] in _ENTRIES:
            out.append((number, line, []))
        else:
            raise ArtError(
                f"{path.name}:{number}: neither a drawing row (symbols . 1 2 3 c) nor an entry"
            )
    return out


def _font(patterns: np.ndarray) -> None:
    for number, header, rows in _blocks(FONT):
        where = f"{FONT.name}:{number}"
        parts = header.split()
        if len(parts) != 2 or parts[0] != "glyph" or len(rows) != 7:
            raise ArtError(f"{where}: expected 'glyph <char>' and 7 rows")
        char = parts[1]
        if char.isdigit():
            tile = int(char)
        elif "A" <= char <= "Z":
            tile = FIRST_LETTER_TILE + ord(char) - ord("A")
        else:
            raise ArtError(f"{where}: glyph must be 0-9 or A-Z")
        if any(len(r) != 5 or set(r) - {"1", "."} for r in rows):
            raise ArtError(f"{where}: glyph rows are 5 of '1' and '.'")
        cell = np.zeros((8, 8), np.uint8)
        cell[:7, 1:6] = np.array([[ch == "1" for ch in r] for r in rows], np.uint8)
        patterns[:, tile] = cell  # background and sprite tables alike


def _sprite_tiles(
    art: np.ndarray, palette: int, dx: int, dy: int, patterns: np.ndarray, next_tile: list[int]
) -> np.ndarray:
    parts = []
    for ty in range(art.shape[0] // 8):
        for tx in range(art.shape[1] // 8):
            cell = art[ty * 8 : ty * 8 + 8, tx * 8 : tx * 8 + 8]
            if not cell.any():
                continue
            found = np.flatnonzero(
                (patterns[BANK_SPR, FIRST_SPRITE_ART_TILE : next_tile[0]] == cell).all(axis=(1, 2))
            )
            if found.size:
                tile = FIRST_SPRITE_ART_TILE + int(found[0])
            else:
                tile = next_tile[0]
                if tile > 0xFF:
                    raise ArtError("sprite drawings need more than the free sprite tiles")
                patterns[BANK_SPR, tile] = cell
                next_tile[0] += 1
            parts.append(((dy + ty * 8) & 0xFF, tile, palette, (dx + tx * 8) & 0xFF))
    return np.array(parts, dtype=np.uint8).reshape(-1, 4)


def _art(patterns: np.ndarray) -> tuple[dict[int, np.ndarray], dict[str, int]]:
    metasprites: dict[int, np.ndarray] = {}
    names: dict[str, int] = {}
    drawings: dict[str, list[str]] = {}
    next_tile = [FIRST_SPRITE_ART_TILE]
    for number, header, rows in _blocks(ART):
        where = f"{ART.name}:{number}"
        parts = header.split()
        kind = parts[0]
        if kind == "tile":
            if len(parts) != 4 or parts[1] not in _BANKS or len(rows) != 8:
                raise ArtError(f"{where}: expected 'tile <banks> <hex> <name>' and 8 rows")
            tile = int(parts[2], 16)
            templated = any("c" in r for r in rows)
            for k in range(3 if templated else 1):
                grid = _grid(rows, k + 1 if templated else None, where)
                for bank in _BANKS[parts[1]]:
                    patterns[bank, tile + k] = grid
            names[parts[3]] = tile
        elif kind in ("sprite", "mirror", "same"):
            body = header.split("=")
            head = body[0].split()
            if len(head) != 7:
                raise ArtError(f"{where}: expected '{kind} <slot> <palette> <c> <dx> <dy> <name>'")
            slot, palette = int(head[1], 16), int(head[2])
            c = None if head[3] == "-" else int(head[3])
            dx, dy, name = int(head[4]), int(head[5]), head[6]
            if kind == "sprite":
                drawing = rows
            else:
                if len(body) != 2 or body[1].strip() not in drawings or rows:
                    raise ArtError(f"{where}: '{kind} ... = <earlier sprite name>' and no rows")
                drawing = drawings[body[1].strip()]
                if kind == "mirror":
                    drawing = [r[::-1] for r in drawing]
            drawings[name] = drawing
            grid = _grid(drawing, c, where)
            metasprites[slot] = _sprite_tiles(grid, palette, dx, dy, patterns, next_tile)
        else:
            raise ArtError(f"{where}: unknown entry {kind!r}")
    return metasprites, names


def _text(nt: np.ndarray, col: int, row: int, text: str) -> None:
    for i, ch in enumerate(text):
        if ch == " ":
            tile = BLANK
        elif ch.isdigit():
            tile = int(ch)
        else:
            tile = FIRST_LETTER_TILE + ord(ch) - ord("A")
        nt[row, col + i] = tile


def _box(nt: np.ndarray, n: dict[str, int], c0: int, r0: int, c1: int, r1: int) -> None:
    nt[r0 : r1 + 1, c0 : c1 + 1] = BLANK
    nt[r0, c0 + 1 : c1] = nt[r1, c0 + 1 : c1] = n["box-horizontal"]
    nt[r0 + 1 : r1, c0] = nt[r0 + 1 : r1, c1] = n["box-vertical"]
    nt[r0, c0], nt[r0, c1] = n["box-top-left"], n["box-top-right"]
    nt[r1, c0], nt[r1, c1] = n["box-bottom-left"], n["box-bottom-right"]


def _bottle(nt: np.ndarray, n: dict[str, int], left: int) -> None:
    """A bottle whose interior is columns left..left+7, rows 10-25, its neck above columns
    left+3 and left+4 (rows 6-9)."""
    right = left + 7
    nt[10:26, left : right + 1] = EMPTY
    nt[10:26, left - 1], nt[10:26, right + 1] = n["wall-left"], n["wall-right"]
    nt[26, left : right + 1] = n["floor"]
    nt[26, left - 1], nt[26, right + 1] = n["corner-bottom-left"], n["corner-bottom-right"]
    nt[9, left : right + 1] = n["shoulder"]
    nt[9, left - 1], nt[9, right + 1] = n["corner-top-left"], n["corner-top-right"]
    nt[6:10, left + 3 : left + 5] = BLANK
    nt[9, left + 2], nt[9, left + 5] = n["neck-join-left"], n["neck-join-right"]
    nt[7:9, left + 2], nt[7:9, left + 5] = n["wall-left"], n["wall-right"]
    nt[6, left + 2], nt[6, left + 5] = n["neck-rim-left"], n["neck-rim-right"]


def _attributes(pal: np.ndarray) -> np.ndarray:
    """The 64-byte attribute table of a palette number per 16x16 pixels (uint8 [15, 16])."""
    attr = np.zeros((8, 8), np.uint8)
    padded = np.zeros((16, 16), np.uint8)
    padded[:15] = pal
    for ay in range(8):
        for ax in range(8):
            q = padded[ay * 2 : ay * 2 + 2, ax * 2 : ax * 2 + 2]
            attr[ay, ax] = q[0, 0] | q[0, 1] << 2 | q[1, 0] << 4 | q[1, 1] << 6
    return attr.ravel()


def _layout_2p(n: dict[str, int]) -> np.ndarray:
    """Our two-player level screen: 32x30 tiles and the attribute table.

    Facts kept (docs/RENDER.md "Two players"): the bottle interiors at columns 4-11 and 20-27,
    rows 10-25 (fieldRow_PPUADDR_2P_P1/_P2); the speed texts at $20EC and $20F1 (row 7,
    columns 12-14 and 17-19); the crowns' 2x2 tiles at crownsP1_PPUADDR (columns 14-15) and
    crownsP2_PPUADDR (columns 16-17), rows 12-17; room for the sprite digits (level y 44-51,
    viruses y 192-199, x 109-147) and the next pills (x 56-71 and 184-199, y 52-59).
    """
    nt = np.empty((30, 32), np.uint8)
    yy, xx = np.mgrid[0:30, 0:32]
    nt[:] = np.where((xx + yy) % 2 == 0, n["pattern-a"], n["pattern-b"])
    _bottle(nt, n, 4)
    _bottle(nt, n, 20)
    # The middle: level digits (sprites) under LEVEL, the speed texts, the crowns, the viruses.
    _box(nt, n, 11, 2, 20, 8)
    _text(nt, 13, 3, "LEVEL")
    nt[9:27, 13:19] = BLANK
    _text(nt, 13, 10, "WINS")
    _text(nt, 13, 22, "VIRUS")
    pal = np.zeros((15, 16), np.uint8)
    pal[5:13, 2:6] = 2
    pal[5:13, 10:14] = 2
    return np.concatenate([nt.ravel(), _attributes(pal)])


def _layout(n: dict[str, int]) -> np.ndarray:
    """Our level screen: 32x30 tiles and the attribute table (docs/RENDER.md has a picture)."""
    nt = np.empty((30, 32), np.uint8)
    yy, xx = np.mgrid[0:30, 0:32]
    nt[:] = np.where((xx + yy) % 2 == 0, n["pattern-a"], n["pattern-b"])
    # The bottle: interior columns 12-19, rows 10-25 (fieldRow_PPUADDR_1P), a neck at 15-16.
    _bottle(nt, n, 12)
    # Score box: TOP at $2102 and SCORE at $2162 (row 8 / row 11, columns 2-7, then a fixed 0).
    _box(nt, n, 1, 6, 9, 13)
    _text(nt, 2, 7, "TOP")
    _text(nt, 2, 8, "0010000")
    _text(nt, 2, 10, "SCORE")
    _text(nt, 2, 11, "0000000")
    # Level facts: level $227B (row 19), speed $22DA (row 22), viruses $233B (row 25).
    _box(nt, n, 25, 17, 31, 27)
    _text(nt, 26, 18, "LEVEL")
    _text(nt, 26, 21, "SPEED")
    _text(nt, 26, 24, "VIRUS")
    # The doctor's window (sprites at x 192-215, y 76-115) and the lens of the big viruses
    # (their circling path spans x 16-64, y 136-191).
    _box(nt, n, 22, 7, 29, 16)
    nt[15:27, 1:10] = BLANK
    nt[15, 2:9], nt[26, 2:9] = n["lens-horizontal-top"], n["lens-horizontal-bottom"]
    nt[16:26, 1], nt[16:26, 9] = n["lens-vertical-left"], n["lens-vertical-right"]
    nt[15, 1], nt[15, 9] = n["lens-top-left"], n["lens-top-right"]
    nt[26, 1], nt[26, 9] = n["lens-bottom-left"], n["lens-bottom-right"]
    # Attributes: palette 2 (the pill colours) in the bottle, palette 0 elsewhere.
    pal = np.zeros((15, 16), np.uint8)
    pal[5:13, 6:10] = 2
    return np.concatenate([nt.ravel(), _attributes(pal)])


def load_cleanroom() -> CleanRoom:
    """Parse the drawings and lay out the screen. Raises ArtError for a malformed file."""
    patterns = np.zeros((3, 256, 8, 8), np.uint8)
    _font(patterns)
    metasprites, names = _art(patterns)
    # PAUSE (metasprite slot 0) in our letters, 8 pixels apart, sprite palette 0.
    pause = [FIRST_LETTER_TILE + ord(ch) - ord("A") for ch in "PAUSE"]
    metasprites[0] = np.array([(0, t, 0, 8 * i) for i, t in enumerate(pause)], np.uint8)
    return CleanRoom(patterns, _layout(names), _layout_2p(names), metasprites, names)
