"""UF2 writer and release manifest for the firmware image (firmware/README.md, "Rebuild").

UF2 (Microsoft's USB flashing format, as the RP2040 boot ROM reads it): 512-byte blocks,
each carrying 256 bytes of the image at its flash address, with the RP2040 family id
0xE48BFF56. The manifest (JSON) records the SHA-256 of the firmware sources the image was
built from (``source_files``), so tests/test_firmware_dist.py fails when a source changes
and the committed UF2 was not rebuilt.

    python firmware/tools/uf2.py BIN UF2            # image at 0x10000000 -> UF2
    python firmware/tools/uf2.py --manifest UF2 OUT.json --sdk-tag T --sdk-commit C \
        --tinyusb-commit C --compiler "arm-none-eabi-gcc ..."
    python firmware/tools/uf2.py --sources-hash     # prints the source hash
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
from pathlib import Path

MAGIC_START0 = 0x0A324655
MAGIC_START1 = 0x9E5D5157
MAGIC_END = 0x0AB16F30
FLAG_FAMILY_ID = 0x00002000
RP2040_FAMILY_ID = 0xE48BFF56
FLASH_BASE = 0x10000000
PAYLOAD = 256  # bytes of image per block
BLOCK = 512

FIRMWARE = Path(__file__).resolve().parent.parent
# What the image is built from (relative to firmware/); tests, docs and host/ are not.
SOURCE_GLOBS = ("CMakeLists.txt", "src/*", "core/*.c", "core/*.h", "boards/*.h", "tools/uf2.py")


def bin_to_uf2(image: bytes, base: int = FLASH_BASE, family: int = RP2040_FAMILY_ID) -> bytes:
    """UF2 bytes for ``image`` (a flat binary) starting at flash address ``base``; the last
    block is padded with zeros. Raises ValueError for an empty image."""
    if not image:
        raise ValueError("empty image")
    n = (len(image) + PAYLOAD - 1) // PAYLOAD
    out = bytearray()
    for i in range(n):
        chunk = image[i * PAYLOAD : (i + 1) * PAYLOAD].ljust(PAYLOAD, b"\0")
        head = struct.pack(
            "<8I",
            MAGIC_START0,
            MAGIC_START1,
            FLAG_FAMILY_ID,
            base + i * PAYLOAD,
            PAYLOAD,
            i,
            n,
            family,
        )
        block = head + chunk
        block += b"\0" * (BLOCK - 4 - len(block)) + struct.pack("<I", MAGIC_END)
        out += block
    return bytes(out)


def uf2_to_image(data: bytes) -> tuple[int, bytes]:
    """Inverse of :func:`bin_to_uf2`: ``(base address, flat image)``. Raises ValueError on a
    malformed file (size, magics, family, non-contiguous or out-of-order blocks)."""
    if not data or len(data) % BLOCK:
        raise ValueError(f"UF2 size {len(data)} is not a multiple of {BLOCK}")
    n_blocks = len(data) // BLOCK
    image = bytearray()
    base = None
    for i in range(n_blocks):
        blk = data[i * BLOCK : (i + 1) * BLOCK]
        m0, m1, flags, addr, size, no, n, fam = struct.unpack_from("<8I", blk)
        (end,) = struct.unpack_from("<I", blk, BLOCK - 4)
        if (m0, m1, end) != (MAGIC_START0, MAGIC_START1, MAGIC_END):
            raise ValueError(f"block {i}: bad magic")
        if not flags & FLAG_FAMILY_ID or fam != RP2040_FAMILY_ID:
            raise ValueError(f"block {i}: not an RP2040 block (family 0x{fam:08x})")
        if no != i or n != n_blocks or size != PAYLOAD:
            raise ValueError(f"block {i}: numbered {no}/{n}, size {size}")
        if base is None:
            base = addr
        if addr != base + i * PAYLOAD:
            raise ValueError(f"block {i}: address 0x{addr:08x} is not contiguous")
        image += blk[32 : 32 + size]
    assert base is not None
    return base, bytes(image)


def source_files(root: Path = FIRMWARE) -> list[Path]:
    """The firmware sources the image is built from, sorted by path relative to root."""
    files = {p for g in SOURCE_GLOBS for p in root.glob(g) if p.is_file()}
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def sources_hash(root: Path = FIRMWARE) -> str:
    """SHA-256 (hex) over each source's relative path and bytes (line endings as stored)."""
    h = hashlib.sha256()
    for p in source_files(root):
        rel = p.relative_to(root).as_posix().encode()
        data = p.read_bytes().replace(b"\r\n", b"\n")
        h.update(rel + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="BIN UF2, or UF2 OUT.json with --manifest")
    ap.add_argument("--manifest", action="store_true")
    ap.add_argument("--sources-hash", action="store_true")
    ap.add_argument("--board", default="pico")
    ap.add_argument("--sdk-tag", default="")
    ap.add_argument("--sdk-commit", default="")
    ap.add_argument("--tinyusb-commit", default="")
    ap.add_argument("--compiler", default="")
    a = ap.parse_args(argv)
    if a.sources_hash:
        print(sources_hash())
        return 0
    if len(a.paths) != 2:
        print("uf2.py: need two paths (see --help)", file=sys.stderr)
        return 2
    src, dst = Path(a.paths[0]), Path(a.paths[1])
    if not src.is_file():
        print(f"uf2.py: no such file: {src}", file=sys.stderr)
        return 2
    if a.manifest:
        uf2 = src.read_bytes()
        _, image = uf2_to_image(uf2)
        doc = {
            "uf2": src.name,
            "board": a.board,
            "uf2_sha256": hashlib.sha256(uf2).hexdigest(),
            "image_bytes": len(image),
            "uf2_blocks": len(uf2) // BLOCK,
            "sources_sha256": sources_hash(),
            "source_files": [p.relative_to(FIRMWARE).as_posix() for p in source_files()],
            "pico_sdk": {"tag": a.sdk_tag, "commit": a.sdk_commit},
            "tinyusb": {"commit": a.tinyusb_commit},
            "compiler": a.compiler,
        }
        dst.write_text(json.dumps(doc, indent=2) + "\n")
    else:
        dst.write_bytes(bin_to_uf2(src.read_bytes()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
