"""The user's own Dr. Mario ROM file (iNES): checks that it is this game, then reads the tiles
the level screen is drawn with. Nothing read here is stored or shipped by the project.

What is checked, in order (``RomError``, a ValueError, names the first failure):

1. the iNES header: the magic bytes ``NES\\x1a``; 2 x 16 KiB PRG and 4 x 8 KiB CHR banks;
   mapper 1 (MMC1, board SEROM); the file size those imply (16 + 32768 + 32768 bytes, plus a
   512-byte trainer if the header declares one);
2. that the PRG holds the game's name string ``!DR.MARIO!`` (gameName_ROM $A008, which the
   game's reset code compares with RAM);
3. (``verify_crc=True``) the CRC-32 of PRG + CHR (the file without its header) is a known-good
   dump of the NTSC game: No-Intro / NesCartDB ``Dr. Mario (Japan, USA)`` 198C2F41 and
   ``Dr. Mario (Japan, USA) (Rev 1)`` (Rev A) DE581355. ``Dr. Mario (Europe)`` 9735D267 is
   recognised and refused: it is the PAL game, with other timings than the engine's.

What is read (docs/RENDER.md):

- CHR: the 4 KiB banks the game selects during a level (CHR_levelTiles_frame0 = 0 and
  CHR_levelTiles_frame1 = 1 for the background at $1000, CHR_levelSprites = 2 for sprites);
- PRG: the level backgrounds bkgLevel_1P and bkgLevel_2P, in copyBkgOrPalToPPU's format (PPU
  address, count, bytes; $FF ends), found by decoding the PRG and keeping the one stream that
  fills the whole nametable with an empty 1P bottle (columns 12-19), and the one with two empty
  2P bottles (columns 4-11 and 20-27, fieldRow_PPUADDR_2P_P1/_P2); the metasprite table
  jumpTable_sprites (one word per metasprite, the data right after it; each metasprite groups
  of (dy, tile, attribute, dx), $80 ends), found as the word table whose first entry points
  just past its end.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]

HEADER_SIZE = 16
TRAINER_SIZE = 512
PRG_SIZE = 2 * 16384
CHR_SIZE = 4 * 8192
MAPPER_MMC1 = 1
GAME_NAME = b"!DR.MARIO!"  # gameName_ROM $A008
PRG_BASE = 0x8000  # the 32 KiB PRG is mapped at $8000-$FFFF

KNOWN_GOOD_CRC32 = {
    0x198C2F41: "Dr. Mario (Japan, USA)",
    0xDE581355: "Dr. Mario (Japan, USA) (Rev 1)",
}
KNOWN_OTHER_CRC32 = {
    0x9735D267: "Dr. Mario (Europe), the PAL game (other timings than the Japan/USA game the "
    "engine reproduces)",
}

MAX_SLOTS = 128  # metasprite slots the renderer holds (engine/src/render.h kNumMetasprites)
CHR_BANK_BYTES = 4096
CHR_LEVEL_BANKS = (0, 1, 2)  # CHR_levelTiles_frame0, CHR_levelTiles_frame1, CHR_levelSprites


class RomError(ValueError):
    """The file is not an iNES image of NTSC Dr. Mario, or its data is not where the game has
    it (the message says what is wrong)."""


def read_rom(path: str | Path, verify_crc: bool = True) -> tuple[bytes, bytes, str]:
    """(PRG 32768 bytes, CHR 32768 bytes, name of the dump) of a checked Dr. Mario iNES file.

    Raises RomError for each failed check (module docstring), OSError if the file cannot be
    read.
    """
    path = Path(path)
    data = path.read_bytes()
    where = f"{path.name}"
    if len(data) < HEADER_SIZE or data[:4] != b"NES\x1a":
        raise RomError(f"{where} is not an iNES file (it does not start with 'NES' $1A)")
    header = data[:HEADER_SIZE]
    prg_banks, chr_banks = header[4], header[5]
    mapper = (header[6] >> 4) | (header[7] & 0xF0)
    if (header[7] & 0x0C) == 0x08:  # NES 2.0: bits 8-11 of the mapper in byte 8
        mapper |= (header[8] & 0x0F) << 8
    if prg_banks * 16384 != PRG_SIZE or chr_banks * 8192 != CHR_SIZE:
        raise RomError(
            f"{where}: the header declares {prg_banks * 16} KiB PRG and {chr_banks * 8} KiB CHR;"
            f" Dr. Mario has {PRG_SIZE // 1024} KiB PRG and {CHR_SIZE // 1024} KiB CHR"
        )
    if mapper != MAPPER_MMC1:
        raise RomError(f"{where}: mapper {mapper}; Dr. Mario uses mapper 1 (MMC1)")
    start = HEADER_SIZE + (TRAINER_SIZE if header[6] & 0x04 else 0)
    expected = start + PRG_SIZE + CHR_SIZE
    if len(data) != expected:
        raise RomError(f"{where}: {len(data)} bytes; an iNES Dr. Mario file has {expected}")
    prg = data[start : start + PRG_SIZE]
    chr_rom = data[start + PRG_SIZE : expected]
    if GAME_NAME not in prg:
        raise RomError(f"{where} is not Dr. Mario: its PRG lacks the game's name {GAME_NAME!r}")
    crc = zlib.crc32(prg + chr_rom)
    if crc in KNOWN_OTHER_CRC32:
        raise RomError(f"{where} is {KNOWN_OTHER_CRC32[crc]}; not supported")
    if crc in KNOWN_GOOD_CRC32:
        name = KNOWN_GOOD_CRC32[crc]
    elif verify_crc:
        known = ", ".join(f"{c:08X} {n}" for c, n in KNOWN_GOOD_CRC32.items())
        raise RomError(
            f"{where}: CRC-32 of PRG+CHR is {crc:08X}, not a known-good dump ({known}); "
            "pass verify_crc=False to use it anyway"
        )
    else:
        name = f"unverified Dr. Mario ROM (CRC-32 {crc:08X})"
    return prg, chr_rom, name


def chr_patterns(chr_rom: bytes) -> U8:
    """The level's pattern tables: uint8 [3, 256, 8, 8] colour indices 0..3 of CHR banks 0, 1
    (background, small virus frames 0 and 1) and 2 (sprites). An NES tile is 16 bytes: 8 rows
    of bit plane 0, then 8 rows of bit plane 1, bit 7 the leftmost pixel."""
    raw = np.frombuffer(chr_rom, np.uint8)
    banks = np.stack([raw[b * CHR_BANK_BYTES : (b + 1) * CHR_BANK_BYTES] for b in CHR_LEVEL_BANKS])
    tiles = banks.reshape(3, 256, 2, 8)
    bits = np.unpackbits(tiles, axis=-1).reshape(3, 256, 2, 8, 8)  # bit 7 first = leftmost
    return (bits[:, :, 0] | (bits[:, :, 1] << 1)).astype(np.uint8)


def decode_background(prg: bytes, offset: int) -> U8 | None:
    """Decode one copyBkgOrPalToPPU stream ($B6DC) at PRG offset `offset` into VRAM
    $2000-$23FF. Returns uint8 [1024], or None when the bytes there are not a stream that fills
    the whole first nametable (each entry: PPU address high, low, count: bit 7 writes down a
    column, bit 6 repeats one byte, 0 means 64; a byte >= $80 where an entry starts ends it;
    $4C <address> continues elsewhere, $60 returns)."""
    vram = np.zeros(1024, np.uint8)
    written = np.zeros(1024, bool)
    pos = offset
    stack: list[int] = []
    for _ in range(256):  # a real background has ~34 entries
        if not 0 <= pos < len(prg):
            return None
        first = prg[pos]
        if first >= 0x80:
            return vram if written.all() else None
        if first == 0x60:  # bkgData_restorePtr
            if not stack:
                return None
            pos = stack.pop() + 3  # past the $4C and its address
            continue
        if first == 0x4C:  # bkgData_changePtr
            if pos + 2 >= len(prg):
                return None
            stack.append(pos)
            pos = prg[pos + 1] | prg[pos + 2] << 8
            pos -= PRG_BASE
            continue
        if pos + 3 > len(prg):
            return None
        addr = first << 8 | prg[pos + 1]
        count = prg[pos + 2]
        step = 32 if count & 0x80 else 1
        repeat = bool(count & 0x40)
        n = count & 0x3F or 64
        data_len = 1 if repeat else n
        if pos + 3 + data_len > len(prg):
            return None
        for i in range(n):
            target = addr + i * step - 0x2000
            if not 0 <= target < 1024:
                return None
            vram[target] = prg[pos + 3] if repeat else prg[pos + 3 + i]
            written[target] = True
        pos += 3 + data_len
    return None


def _is_level_1p(vram: U8) -> bool:
    """The 1P level screen: the bottle interior (columns 12-19, rows 10-25) empty ($FF) and
    walled on both sides."""
    nt = vram[:960].reshape(30, 32)
    return bool((nt[10:26, 12:20] == 0xFF).all() and (nt[10:26, 11] != 0xFF).all()) and bool(
        (nt[10:26, 20] != 0xFF).all()
    )


def _is_level_2p(vram: U8) -> bool:
    """The 2P level screen: both bottle interiors (columns 4-11 and 20-27, rows 10-25; the
    rows of fieldRow_PPUADDR_2P_P1/_P2) empty ($FF) and walled on both sides."""
    nt = vram[:960].reshape(30, 32)
    for left in (4, 20):
        if not (nt[10:26, left : left + 8] == 0xFF).all():
            return False
        if (nt[10:26, left - 1] == 0xFF).any() or (nt[10:26, left + 8] == 0xFF).any():
            return False
    return True


def _find_background(prg: bytes, test: Callable[[U8], bool], what: str) -> U8:
    found = []
    for offset in range(len(prg) - 3):
        if prg[offset] != 0x20 or prg[offset + 1] != 0x00:  # starts at $2000
            continue
        vram = decode_background(prg, offset)
        if vram is not None and test(vram):
            found.append((offset, vram))
    if len(found) != 1:
        raise RomError(
            f"cannot find the {what} level background in the PRG ({len(found)} candidates)"
        )
    return found[0][1]


def find_level_background(prg: bytes) -> U8:
    """bkgLevel_1P decoded: uint8 [1024]. Raises RomError unless exactly one stream in the PRG
    decodes to a full nametable with the 1P bottle."""
    return _find_background(prg, _is_level_1p, "one-player")


def find_level_background_2p(prg: bytes) -> U8:
    """bkgLevel_2P decoded (toLevel [$817E] copies it for a two-player match): uint8 [1024].
    Raises RomError unless exactly one stream in the PRG decodes to a full nametable with both
    2P bottles."""
    return _find_background(prg, _is_level_2p, "two-player")


def _metasprite(prg: bytes, offset: int) -> U8 | None:
    parts: list[tuple[int, ...]] = []
    while 0 <= offset < len(prg) and prg[offset] != 0x80:
        if offset + 4 > len(prg) or len(parts) >= 64:
            return None
        parts.append(tuple(prg[offset : offset + 4]))
        offset += 4
    if not 0 <= offset < len(prg):
        return None
    return np.array(parts, np.uint8).reshape(-1, 4)


def find_metasprites(prg: bytes) -> dict[int, U8]:
    """jumpTable_sprites ($A8DC) and its metasprites: slot -> uint8 [k, 4]. Raises RomError
    unless exactly one word table in the PRG has its first entry pointing just past its end
    and every entry pointing at a well-formed metasprite after it."""

    def word(i: int) -> int:
        return prg[i] | prg[i + 1] << 8

    found = []
    for table in range(0, len(prg) - 2):
        first = word(table) - PRG_BASE
        size = first - table
        if size <= 0 or size % 2 or not 2 * 40 <= size <= 2 * MAX_SLOTS:
            continue
        ok = True
        sprites: dict[int, U8] = {}
        for slot in range(size // 2):
            target = word(table + 2 * slot) - PRG_BASE
            if target < first or target >= len(prg):
                ok = False
                break
            parts = _metasprite(prg, target)
            if parts is None:
                ok = False
                break
            sprites[slot] = parts
        if ok:
            found.append(sprites)
    if len(found) != 1:
        raise RomError(f"cannot find the metasprite table in the PRG ({len(found)} candidates)")
    return found[0]


def tileset_arrays(path: str | Path, verify_crc: bool = True) -> dict:
    """The arrays of an engine.TileSet read from a Dr. Mario iNES file (see engine.TileSet.
    from_ines): patterns, nametable, nametable_2p, metasprites, name. Raises RomError."""
    prg, chr_rom, name = read_rom(path, verify_crc=verify_crc)
    return {
        "patterns": chr_patterns(chr_rom),
        "nametable": find_level_background(prg),
        "nametable_2p": find_level_background_2p(prg),
        "metasprites": find_metasprites(prg),
        "name": f"{name} ({Path(path).name})",
    }
