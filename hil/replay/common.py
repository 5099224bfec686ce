"""Shared by the replay's parts: its error, the JSONL file name, small helpers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]


EMPTY = 0xFF


JSONL_FILE = "replay.jsonl"


class ReplayError(ValueError):
    """A video or recording that cannot be replayed; the message says which file and why."""


def short_path(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (for labels)."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)
