"""The iNES reader on synthetic ROM images built here (never the game's ROM): clear errors for
files that are not Dr. Mario, and rendering from the CHR/PRG of a well-formed image."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

import engine
from engine import Button, RomError, ines

PRG_SIZE, CHR_SIZE = 32768, 32768


def chr_bytes(patterns: np.ndarray) -> bytes:
    """CHR ROM with the three level banks (4 KiB each) in NES 2-bit-plane format."""
    planes = np.stack([patterns & 1, (patterns >> 1) & 1], axis=2)  # [3, 256, 2, 8, 8]
    banks = np.packbits(planes, axis=-1).reshape(3, 4096)
    out = np.zeros(CHR_SIZE, np.uint8)
    out[: 3 * 4096] = banks.ravel()
    return out.tobytes()


def background_stream(vram: np.ndarray) -> bytes:
    """A copyBkgOrPalToPPU stream for a whole nametable: a repeat entry for each uniform row,
    a plain entry otherwise, one column rewritten downwards, then $FF."""
    out = bytearray()
    for row in range(32):
        data = vram[row * 32 : row * 32 + 32]
        addr = 0x2000 + row * 32
        if (data == data[0]).all():
            out += bytes([addr >> 8, addr & 0xFF, 0x40 | 32, data[0]])
        else:
            out += bytes([addr >> 8, addr & 0xFF, 32]) + data.tobytes()
    column = vram[:960].reshape(30, 32)[:, 5]
    out += bytes([0x20, 0x05, 0x80 | 30]) + column.tobytes()
    return bytes(out) + b"\xff"


def metasprite_table(metasprites: dict[int, np.ndarray], base: int, slots: int = 71) -> bytes:
    """jumpTable_sprites at CPU address `base`: `slots` words, then each metasprite + $80."""
    data = bytearray()
    pointers = []
    for slot in range(slots):
        pointers.append(base + 2 * slots + len(data))
        parts = metasprites.get(slot, np.zeros((0, 4), np.uint8))
        data += parts.tobytes() + b"\x80"
    table = b"".join(p.to_bytes(2, "little") for p in pointers)
    return table + bytes(data)


def build_rom(
    tiles: engine.TileSet,
    *,
    mapper: int = 1,
    prg_banks: int = 2,
    chr_banks: int = 4,
    name: bool = True,
    trainer: bool = False,
) -> bytes:
    prg = bytearray(PRG_SIZE)
    if name:
        prg[0x2008:0x2012] = ines.GAME_NAME
    # A decoy background (the same screen with a full bottle) before the real one.
    decoy = tiles.nametable.copy()
    decoy[10 * 32 + 12 : 10 * 32 + 20] = 0x40
    stream = background_stream(decoy)
    prg[0x3000 : 0x3000 + len(stream)] = stream
    stream = background_stream(tiles.nametable)
    prg[0x3936 : 0x3936 + len(stream)] = stream
    # The 2P background (bkgLevel_2P), after a decoy with player 2's bottle full.
    decoy = tiles.nametable_2p.copy()
    decoy[10 * 32 + 20 : 10 * 32 + 28] = 0x40
    stream = background_stream(decoy)
    prg[0x4000 : 0x4000 + len(stream)] = stream
    stream = background_stream(tiles.nametable_2p)
    prg[0x4613 : 0x4613 + len(stream)] = stream
    table = metasprite_table(tiles.metasprites, 0x8000 + 0x28DC)
    prg[0x28DC : 0x28DC + len(table)] = table
    flags6 = (mapper & 0x0F) << 4 | (0x04 if trainer else 0)
    header = b"NES\x1a" + bytes([prg_banks, chr_banks, flags6, mapper & 0xF0]) + bytes(8)
    return header + (bytes(512) if trainer else b"") + bytes(prg) + chr_bytes(tiles.patterns)


@pytest.fixture(scope="module")
def clean() -> engine.TileSet:
    return engine.TileSet.clean_room()


@pytest.fixture
def rom(tmp_path: Path, clean: engine.TileSet) -> Path:
    path = tmp_path / "synthetic.nes"
    path.write_bytes(build_rom(clean))
    return path


def write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "test.nes"
    path.write_bytes(data)
    return path


def test_not_an_ines_file(tmp_path):
    with pytest.raises(RomError, match="not an iNES file"):
        engine.TileSet.from_ines(write(tmp_path, b"PK\x03\x04 a zip, not a ROM"))
    with pytest.raises(RomError, match="not an iNES file"):
        engine.TileSet.from_ines(write(tmp_path, b"NES"))


def test_wrong_sizes(tmp_path, clean):
    with pytest.raises(RomError, match="16 KiB PRG and 32 KiB CHR; Dr. Mario has 32 KiB PRG"):
        engine.TileSet.from_ines(write(tmp_path, build_rom(clean, prg_banks=1)))
    with pytest.raises(RomError, match="8 KiB CHR"):
        engine.TileSet.from_ines(write(tmp_path, build_rom(clean, chr_banks=1)))
    data = build_rom(clean)
    with pytest.raises(RomError, match="65452 bytes; an iNES Dr. Mario file has 65552"):
        engine.TileSet.from_ines(write(tmp_path, data[:-100]))
    with pytest.raises(RomError, match="65553 bytes"):
        engine.TileSet.from_ines(write(tmp_path, data + b"\x00"))


def test_wrong_mapper(tmp_path, clean):
    with pytest.raises(RomError, match="mapper 4; Dr. Mario uses mapper 1"):
        engine.TileSet.from_ines(write(tmp_path, build_rom(clean, mapper=4)))


def test_not_dr_mario(tmp_path, clean):
    with pytest.raises(RomError, match="is not Dr. Mario"):
        engine.TileSet.from_ines(write(tmp_path, build_rom(clean, name=False)))


def test_unknown_crc_is_rejected_unless_asked(rom):
    crc = zlib.crc32(rom.read_bytes()[16:])
    with pytest.raises(RomError, match=f"{crc:08X}, not a known-good dump.*verify_crc=False"):
        engine.TileSet.from_ines(rom)
    assert engine.TileSet.from_ines(rom, verify_crc=False).name.startswith("unverified")


def test_european_game_is_named_and_refused(rom, monkeypatch):
    crc = zlib.crc32(rom.read_bytes()[16:])
    monkeypatch.setitem(ines.KNOWN_OTHER_CRC32, crc, ines.KNOWN_OTHER_CRC32[0x9735D267])
    with pytest.raises(RomError, match=r"Dr. Mario \(Europe\), the PAL game"):
        engine.TileSet.from_ines(rom, verify_crc=False)


def test_known_good_crc_is_accepted(rom, monkeypatch):
    crc = zlib.crc32(rom.read_bytes()[16:])
    monkeypatch.setitem(ines.KNOWN_GOOD_CRC32, crc, "Dr. Mario (test)")
    assert engine.TileSet.from_ines(rom).name.startswith("Dr. Mario (test)")


def test_renders_from_the_roms_chr_and_prg(rom, clean):
    # The synthetic ROM carries the clean-room tiles, background and metasprites in the game's
    # formats: reading them back must give the very same pictures.
    tiles = engine.TileSet.from_ines(rom, verify_crc=False)
    assert np.array_equal(tiles.patterns, clean.patterns)
    assert np.array_equal(tiles.nametable, clean.nametable)
    for slot, parts in clean.metasprites.items():
        assert np.array_equal(tiles.metasprites[slot], parts)
    g = engine.Game(8, 2, 0x2345)
    for frame in range(260):
        if frame % 37 == 0:
            assert np.array_equal(engine.render_frame(g, tiles), engine.render_frame(g, clean))
        g.step(Button.DOWN if frame % 5 else Button.A)


def test_renders_versus_from_the_roms_prg(rom, clean):
    tiles = engine.TileSet.from_ines(rom, verify_crc=False)
    assert np.array_equal(tiles.nametable_2p, clean.nametable_2p)
    v = engine.Versus(5, 0, 9, 2, 0x4321)
    for frame in range(700):
        if frame % 41 == 0:
            assert np.array_equal(engine.render_versus(v, tiles), engine.render_versus(v, clean))
        v.step(Button.DOWN if frame % 4 else Button.A, Button.LEFT if frame % 6 else Button.DOWN)


def test_missing_2p_background_is_a_clear_error(tmp_path, clean):
    data = bytearray(build_rom(clean))
    data[16 + 0x4613] = 0x00
    with pytest.raises(RomError, match="cannot find the two-player level background"):
        engine.TileSet.from_ines(write(tmp_path, bytes(data)), verify_crc=False)


def test_trainer_is_skipped(tmp_path, clean):
    tiles = engine.TileSet.from_ines(
        write(tmp_path, build_rom(clean, trainer=True)), verify_crc=False
    )
    assert np.array_equal(tiles.patterns, clean.patterns)


def test_missing_background_is_a_clear_error(tmp_path, clean):
    data = bytearray(build_rom(clean))
    data[16 + 0x3936] = 0x00  # break the real background's first PPU address
    with pytest.raises(RomError, match="cannot find the one-player level background"):
        engine.TileSet.from_ines(write(tmp_path, bytes(data)), verify_crc=False)


def test_background_stream_jump_and_return():
    # $4C <address> continues at another stream, $60 comes back after the $4C.
    prg = bytearray(PRG_SIZE)
    sub = bytes([0x23, 0xC0, 0x40 | 0, 0x55, 0x60])  # the attribute table, then return
    jump = bytes([0x4C]) + (0x8000 + 0x1000).to_bytes(2, "little")
    stream = bytearray()
    for k in range(15):  # 15 repeat entries of 64 tiles ($40 | 0): rows 0-29
        addr = 0x2000 + 64 * k
        stream += bytes([addr >> 8, addr & 0xFF, 0x40 | 0, 0x11])
    prg[0:] = bytes(stream) + jump + b"\xff" + bytes(PRG_SIZE - len(stream) - 4)
    prg[0x1000 : 0x1000 + len(sub)] = sub
    vram = ines.decode_background(bytes(prg), 0)
    assert vram is not None
    assert (vram[:960] == 0x11).all() and (vram[960:] == 0x55).all()
