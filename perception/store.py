"""Where prepared perception models live, and which model a run uses (no torch needed).

``hil prepare --rom ROM`` (perception.prepare) fits a board model to the graphics of the
user's own Dr. Mario ROM and stores it in the user's data directory (platformdirs), keyed by
the CRC-32 of the ROM's PRG + CHR (the file without its iNES header, as engine.ines checks it):

    <user data dir>/models/<CRC32>/board.onnx          the model
    <user data dir>/models/<CRC32>/board.report.md     its held-out accuracy (+ .json)

The ROM itself is never copied. A Profile written by ``hil calibrate --rom`` or
``hil prepare --profile`` names the ROM (``Profile.rom_crc32``), so ``hil run``, ``hil replay``
and ``hil calibrate latency`` find the rig's model from the profile alone.
``DRMARIO_BRIDGE_DATA`` overrides the data directory (tests, several users on one machine).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calibration import Profile

APP_NAME = "drmario-bridge"
SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "board.onnx"
MODEL_FILE = "board.onnx"


def data_dir() -> Path:
    """The user's data directory for this project (``DRMARIO_BRIDGE_DATA`` or platformdirs)."""
    env = os.environ.get("DRMARIO_BRIDGE_DATA")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def rom_crc32(path: str | Path, verify_crc: bool = True) -> str:
    """The CRC-32 of a Dr. Mario iNES file's PRG + CHR as 8 upper-case hex digits.

    Raises engine.RomError (a ValueError) for a file that is not Dr. Mario (engine.ines.read_rom
    checks), OSError when it cannot be read."""
    from engine.ines import read_rom

    prg, chr_rom, _ = read_rom(path, verify_crc=verify_crc)
    return f"{zlib.crc32(prg + chr_rom):08X}"


def prepared_dir(crc: str) -> Path:
    """The folder of the model prepared for the ROM with this CRC-32 (may not exist)."""
    return data_dir() / "models" / crc.upper()


def prepared_model(crc: str) -> Path | None:
    """The prepared model's ONNX file for this ROM, or None when none was prepared."""
    path = prepared_dir(crc) / MODEL_FILE
    return path if path.is_file() else None


@dataclass(frozen=True)
class ModelChoice:
    """The model a run uses: ``path`` and ``why`` (a line for the user)."""

    path: Path
    why: str


def choose_model(model: str | Path | None = None, profile: Profile | None = None) -> ModelChoice:
    """Which board model to read ``profile``'s captures with.

    ``model`` (``--model PATH``) wins; else the model prepared for the profile's ROM
    (``profile.rom_crc32``) when there is one; else the shipped clean-room model (it serves the
    simulated console; a real console needs ``hil prepare``). Raises FileNotFoundError for a
    ``model`` that is no file."""
    if model is not None:
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"--model: no such file {path}")
        return ModelChoice(path, f"perception model {path} (--model)")
    if profile is not None and profile.rom_crc32:
        found = prepared_model(profile.rom_crc32)
        if found is not None:
            from perception.panel import PANEL_FILE

            older = (
                ""
                if (found.parent / PANEL_FILE).exists()
                else f"; no {PANEL_FILE} beside it, so the screen kind reads without the LEVEL "
                "number: run `hil prepare` again"
            )
            return ModelChoice(
                found, f"perception model {found} (prepared for ROM {profile.rom_crc32}{older})"
            )
        return ModelChoice(
            SHIPPED_MODEL,
            f"perception model {SHIPPED_MODEL} (clean-room; no model prepared for ROM "
            f"{profile.rom_crc32}: run `hil prepare --rom YOUR_ROM`)",
        )
    return ModelChoice(SHIPPED_MODEL, f"perception model {SHIPPED_MODEL} (clean-room)")
