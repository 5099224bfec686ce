"""The committed release image (firmware/dist): it is a well-formed RP2040 UF2, and it was
built from the firmware sources as they are now (firmware/tools/uf2.py, firmware/build.sh)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "firmware" / "dist"


def _uf2_module():
    spec = importlib.util.spec_from_file_location("nb_uf2", ROOT / "firmware" / "tools" / "uf2.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["nb_uf2"] = mod
    spec.loader.exec_module(mod)
    return mod


uf2 = _uf2_module()
BOARDS = sorted(p.stem for p in DIST.glob("*.json"))


def test_one_image_per_board() -> None:
    boards = sorted(p.stem.removeprefix("nes_bridge_") for p in DIST.glob("*.json"))
    headers = sorted(p.stem for p in (ROOT / "firmware" / "boards").glob("*.h"))
    assert boards == headers


@pytest.mark.parametrize("name", BOARDS)
def test_image_built_from_current_sources(name: str) -> None:
    man = json.loads((DIST / f"{name}.json").read_text())
    assert man["sources_sha256"] == uf2.sources_hash(), (
        "firmware sources changed since the committed UF2 was built: rebuild it with "
        "firmware/build.sh (firmware/README.md, 'Rebuild')"
    )
    assert man["source_files"] == [
        p.relative_to(uf2.FIRMWARE).as_posix() for p in uf2.source_files()
    ]
    data = (DIST / man["uf2"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == man["uf2_sha256"]
    assert man["pico_sdk"] == {"tag": "2.2.0", "commit": "a1438dff1d38bd9c65dbd693f0e5db4b9ae91779"}
    assert man["tinyusb"] == {"commit": "86ad6e56c1700e85f1c5678607a762cfe3aa2f47"}


@pytest.mark.parametrize("name", BOARDS)
def test_image_is_a_bootable_rp2040_uf2(name: str) -> None:
    man = json.loads((DIST / f"{name}.json").read_text())
    data = (DIST / man["uf2"]).read_bytes()
    base, image = uf2.uf2_to_image(data)
    assert base == 0x10000000 and len(data) // 512 == man["uf2_blocks"]
    assert len(image) >= man["image_bytes"] > len(image) - 256
    # boot2 (256 bytes, CRC-checked by the boot ROM), then the vector table at 0x100:
    # initial SP in SRAM, reset handler a Thumb address in flash or SRAM.
    sp, reset = struct.unpack_from("<II", image, 0x100)
    assert 0x20000000 < sp <= 0x20042000
    assert reset & 1 and (0x10000000 <= reset < 0x11000000 or 0x20000000 <= reset < 0x20042000)
    assert b"Dr. Mario bridge controller" in image


def test_uf2_round_trip_and_errors() -> None:
    image = bytes(range(256)) * 3 + b"\x01\x02"
    data = uf2.bin_to_uf2(image)
    assert len(data) == 4 * 512
    base, back = uf2.uf2_to_image(data)
    assert base == 0x10000000 and back[: len(image)] == image and back[len(image) :] == bytes(254)
    with pytest.raises(ValueError):
        uf2.uf2_to_image(data[:-1])
    bad = bytearray(data)
    bad[512 + 12] ^= 1  # second block's address
    with pytest.raises(ValueError):
        uf2.uf2_to_image(bytes(bad))
    with pytest.raises(ValueError):
        uf2.bin_to_uf2(b"")


def test_source_hash_sees_a_change(tmp_path: Path) -> None:
    for p in uf2.source_files():
        dst = tmp_path / p.relative_to(uf2.FIRMWARE)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(p.read_bytes())
    h0 = uf2.sources_hash(tmp_path)
    assert h0 == uf2.sources_hash()
    main = tmp_path / "src" / "main.c"
    main.write_bytes(main.read_bytes() + b"\n")
    assert uf2.sources_hash(tmp_path) != h0
