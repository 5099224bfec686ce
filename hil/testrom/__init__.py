"""The project's own NES test ROM: shows the controller byte the console read, every frame.

``testrom.s`` (ca65 assembly, written for this project: no Nintendo code, data or graphics) and
``nrom.cfg`` (ld65 memory map, iNES mapper 0) are the source; :func:`build` assembles them with
cc65's ``ca65`` and ``ld65`` into a build directory. The built image is committed beside them
(``testrom.nes``, the project's own code, 24,592 bytes) so that running it needs no assembler:
:func:`image` returns it, and tests/test_testrom_build.py checks that the source rebuilds it byte
for byte (``python -m hil.testrom --update`` rewrites it after a change to the source).

Each NMI the ROM strobes the controller, reads it twice and ANDs the reads (as Dr. Mario's
getInputs [$B7E1] does), counts the NMI and draws the byte as 8 boxes (filled = pressed; A on
the left, Right on the right) with its hex value below. After every 64th NMI its main loop keeps
NMI off for two vblanks (two frames that read no controller, like Dr. Mario's screen loads).

The constants below are the facts the Python side reads (RAM addresses, pixel positions); they
mirror the ``.s`` file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import numpy.typing as npt

SOURCE_DIR = Path(__file__).resolve().parent
SOURCE = SOURCE_DIR / "testrom.s"
LINKER_CONFIG = SOURCE_DIR / "nrom.cfg"
ROM_NAME = "testrom.nes"
ROM_SIZE = 16 + 16384 + 8192  # iNES header, 16 KiB PRG, 8 KiB CHR
IMAGE = SOURCE_DIR / ROM_NAME  # the committed build of SOURCE

# RAM (testrom.s header comment)
PAD = 0x10  # the AND of the two reads of the latest NMI
READ1 = 0x11  # the first read
READ2 = 0x12  # the second read
NMI_COUNT = 0x13  # 16-bit little-endian count of NMIs (one per frame that read the pad)
LAG_COUNT = 0x15  # vblanks spent with NMI off (8-bit)

LAG_EVERY = 64  # NMI off for LAG_FRAMES vblanks after each NMI whose count is a multiple of this
LAG_FRAMES = 2

# Screen: box i (bit 7 - i: A, B, Select, Start, Up, Down, Left, Right) covers NES pixels
# x BOX_X0 + BOX_PITCH * i .. + BOX_SIZE - 1, y BOX_Y0 .. + BOX_SIZE - 1; filled when pressed,
# a one-pixel outline when not. White ($30) on black ($0F).
BOX_X0 = 32
BOX_Y0 = 96
BOX_PITCH = 24
BOX_SIZE = 16


class RomBuildError(RuntimeError):
    """The test ROM cannot be built (cc65 missing, assembler or linker error)."""


def default_build_dir() -> Path:
    """``build/testrom`` in the source checkout (git-ignored)."""
    return SOURCE_DIR.parents[1] / "build" / "testrom"


def image() -> Path:
    """The committed test ROM image (iNES, 24,592 bytes), built from ``testrom.s``.

    Raises RomBuildError when it is missing or of the wrong size (a damaged checkout).
    """
    if not IMAGE.is_file() or IMAGE.stat().st_size != ROM_SIZE:
        raise RomBuildError(
            f"{IMAGE} is missing or damaged: rebuild it with python -m hil.testrom --update (cc65)"
        )
    return IMAGE


def build(out_dir: str | Path | None = None) -> Path:
    """Assemble and link the test ROM into ``out_dir`` (default :func:`default_build_dir`).

    Returns the path of the iNES file (24592 bytes). Rebuilds only when the source or linker
    config is newer than the ROM. Raises RomBuildError when ``ca65``/``ld65`` are not installed
    (Debian/Ubuntu: ``apt-get install cc65``) or fail (the message carries their output).
    """
    out = Path(out_dir) if out_dir is not None else default_build_dir()
    rom = out / ROM_NAME
    newest = max(SOURCE.stat().st_mtime, LINKER_CONFIG.stat().st_mtime)
    if rom.is_file() and rom.stat().st_mtime >= newest and rom.stat().st_size == ROM_SIZE:
        return rom
    tools = {name: shutil.which(name) for name in ("ca65", "ld65")}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        raise RomBuildError(
            f"{' and '.join(missing)} not found: the test ROM is built with cc65 "
            "(Debian/Ubuntu: apt-get install cc65)"
        )
    out.mkdir(parents=True, exist_ok=True)
    obj = out / "testrom.o"
    steps = [
        [str(tools["ca65"]), "-o", str(obj), str(SOURCE)],
        [str(tools["ld65"]), "-C", str(LINKER_CONFIG), "-o", str(rom), str(obj)],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            rom.unlink(missing_ok=True)
            raise RomBuildError(
                f"{Path(cmd[0]).name} failed ({done.returncode}): {done.stderr or done.stdout}"
            )
    if rom.stat().st_size != ROM_SIZE:
        raise RomBuildError(f"{rom}: {rom.stat().st_size} bytes, expected {ROM_SIZE}")
    return rom


def box_centers() -> list[tuple[int, int]]:
    """(x, y) NES pixel at the centre of each box, A first: inside a filled box it is white,
    inside an outline it is black."""
    half = BOX_SIZE // 2
    return [(BOX_X0 + BOX_PITCH * i + half, BOX_Y0 + half) for i in range(8)]


def decode_boxes(picture: npt.NDArray[np.uint8]) -> int:
    """The byte the boxes show in an NES picture, RGB or BGR uint8 [240, 256, 3].

    Each box is judged by the mean brightness of its 8x8 centre (white filled, black outline),
    so a scaled, blurred or compressed capture mapped back to NES pixels still decodes. Raises
    ValueError for an array of another shape.
    """
    img = np.asarray(picture)
    if img.shape != (240, 256, 3):
        raise ValueError(f"expected an NES picture [240, 256, 3], got {list(img.shape)}")
    value = 0
    for x, y in box_centers():
        patch = img[y - 4 : y + 4, x - 4 : x + 4].astype(np.float32)
        value = (value << 1) | int(patch.mean() > 127.5)
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m hil.testrom [OUT_DIR] [--update]``: build the ROM with cc65 and print its path;
    ``--update`` also writes the build over the committed image."""
    import argparse
    import shutil
    import sys

    parser = argparse.ArgumentParser(prog="python -m hil.testrom", description=main.__doc__)
    parser.add_argument("out_dir", nargs="?", help="build directory (default build/testrom)")
    parser.add_argument("--update", action="store_true", help="write the build to " + str(IMAGE))
    args = parser.parse_args(argv)
    try:
        rom = build(args.out_dir)
    except RomBuildError as e:
        print(f"hil.testrom: {e}", file=sys.stderr)
        return 2
    if args.update:
        shutil.copyfile(rom, IMAGE)
        rom = IMAGE
    print(rom)
    return 0
