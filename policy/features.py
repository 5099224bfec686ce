"""The policy's input at a spawn (SpawnInput) and its tensors: one definition for training,
the ONNX model and the bridge.

A decision is made at a spawn state (docs/POLICY.md): the board, the pill about to fall, the
next pill shown beside the bottle, and the game settings the bridge knows (level, speed) or
reads off the screen (virus count) or counts (speed-ups = pills thrown // 10, capped at 49,
generateNextPill $8E9D). Everything here is numpy; nothing imports torch.

Tensors (``B`` = batch):

- ``board`` float32 [B, 11, 16, 8]: one-hot planes over the field (row 0 at the top, as in
  RAM $0400-$047F). Planes 0 empty; 1-3 virus yellow/red/blue; 4-6 pill half or single
  yellow/red/blue; 7-10 where a half's partner is: below (a top half $4x), above (a bottom
  half $5x), right (a left half $6x), left (a right half $7x). Cleared ($Bx) and just-emptied
  ($Fx) cells count as empty (they are gone by the next spawn).
- ``extras`` float32 [B, 18]: current pill colours (1st, 2nd) one-hot 2x3, next pill colours
  one-hot 2x3, level / 20, speed one-hot (LOW, MED, HI), speed-ups / 49, viruses / 84.
- ``mask`` bool [B, 512]: the planner's reachable placements (index rotation*128 + row*8 +
  col, docs/PLANNER.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

BOARD_PLANES = 11
EXTRAS = 18
ROWS, COLS = 16, 8
MAX_LEVEL = 24
MAX_SPEED_UPS = 49  # kSpeedUpsMax $31
MAX_VIRUSES = 84  # level 20 and above: (20 + 1) * 4

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class SpawnInput:
    """What the policy needs at a spawn, from an engine.Game or from perception + tracker.

    field: uint8[128] or [16, 8] NES cell codes (ARCHITECTURE.md). pill_colors / next_colors: two
    colours each, 0 yellow, 1 red, 2 blue (1st half, 2nd half). level 0..24, speed 0 LOW /
    1 MED / 2 HI, speed_ups 0..49, virus_count 0..84.
    """

    field: U8
    pill_colors: tuple[int, int]
    next_colors: tuple[int, int]
    level: int
    speed: int
    speed_ups: int
    virus_count: int

    @staticmethod
    def from_game(game: Any) -> SpawnInput:
        """The observation of an engine.Game (normally at a spawn state)."""
        return SpawnInput(
            field=np.array(game.field, dtype=np.uint8),
            pill_colors=(int(game.pill_colors[0]), int(game.pill_colors[1])),
            next_colors=(int(game.next_colors[0]), int(game.next_colors[1])),
            level=int(game.level),
            speed=int(game.speed_setting),
            speed_ups=int(game.speed_ups),
            virus_count=int(game.virus_count),
        )

    def validate(self) -> None:
        """Raises ValueError naming the first field that is out of range."""
        f = np.asarray(self.field)
        if f.dtype != np.uint8 or f.size != ROWS * COLS:
            raise ValueError(f"field must be uint8 with 128 cells, got {f.dtype} {f.shape}")
        for name, colors in (("pill_colors", self.pill_colors), ("next_colors", self.next_colors)):
            if len(colors) != 2 or not all(0 <= int(c) <= 2 for c in colors):
                raise ValueError(f"{name} must be two colours 0..2, got {colors}")
        for name, value, hi in (
            ("level", self.level, MAX_LEVEL),
            ("speed", self.speed, 2),
            ("speed_ups", self.speed_ups, MAX_SPEED_UPS),
            ("virus_count", self.virus_count, 128),
        ):
            if not 0 <= int(value) <= hi:
                raise ValueError(f"{name} must be 0..{hi}, got {value}")


def board_planes(fields: npt.ArrayLike) -> F32:
    """One-hot planes of fields uint8[B, 128] (or [B, 16, 8]) -> float32[B, 11, 16, 8]."""
    f = np.asarray(fields)
    if f.dtype != np.uint8:
        raise ValueError(f"fields must be uint8 cell codes, got {f.dtype}")
    f = f.reshape(-1, ROWS, COLS)
    kind = f >> 4
    color = f & 0x0F
    empty = (kind >= 0x0B) & (kind != 0x0D)  # $Bx cleared, $Ex/$Fx just emptied / empty
    virus = kind == 0x0D
    piece = (kind >= 0x04) & (kind <= 0x08)
    out = np.zeros((f.shape[0], BOARD_PLANES, ROWS, COLS), dtype=np.float32)
    out[:, 0] = empty
    for c in range(3):
        out[:, 1 + c] = virus & (color == c)
        out[:, 4 + c] = piece & (color == c)
    for i, k in enumerate((0x04, 0x05, 0x06, 0x07)):
        out[:, 7 + i] = kind == k
    return out


def extras_vector(
    pill_colors: npt.ArrayLike,
    next_colors: npt.ArrayLike,
    level: npt.ArrayLike,
    speed: npt.ArrayLike,
    speed_ups: npt.ArrayLike,
    virus_count: npt.ArrayLike,
) -> F32:
    """float32[B, 18] from pill_colors int[B, 2], next_colors int[B, 2] and int[B] scalars."""
    pc = np.asarray(pill_colors, dtype=np.int64).reshape(-1, 2)
    nc = np.asarray(next_colors, dtype=np.int64).reshape(-1, 2)
    b = pc.shape[0]
    if nc.shape[0] != b:
        raise ValueError(f"pill_colors has {b} rows but next_colors {nc.shape[0]}")
    if (
        pc.min(initial=0) < 0
        or pc.max(initial=0) > 2
        or nc.min(initial=0) < 0
        or nc.max(initial=0) > 2
    ):
        raise ValueError("colours must be 0 yellow, 1 red, 2 blue")
    sp = np.broadcast_to(np.asarray(speed, dtype=np.int64), (b,))
    if sp.min(initial=0) < 0 or sp.max(initial=0) > 2:
        raise ValueError("speed must be 0 LOW, 1 MED, 2 HI")
    eye = np.eye(3, dtype=np.float32)
    out = np.empty((b, EXTRAS), dtype=np.float32)
    out[:, 0:3] = eye[pc[:, 0]]
    out[:, 3:6] = eye[pc[:, 1]]
    out[:, 6:9] = eye[nc[:, 0]]
    out[:, 9:12] = eye[nc[:, 1]]
    out[:, 12] = np.broadcast_to(np.asarray(level, dtype=np.float32), (b,)) / 20.0
    out[:, 13:16] = eye[sp]
    out[:, 16] = np.broadcast_to(np.asarray(speed_ups, dtype=np.float32), (b,)) / MAX_SPEED_UPS
    out[:, 17] = np.broadcast_to(np.asarray(virus_count, dtype=np.float32), (b,)) / MAX_VIRUSES
    return out


def encode(obs: SpawnInput) -> tuple[F32, F32]:
    """(board float32[1, 11, 16, 8], extras float32[1, 18]) for one observation.

    Raises ValueError when the observation is out of range (SpawnInput.validate).
    """
    obs.validate()
    board = board_planes(np.asarray(obs.field, dtype=np.uint8).reshape(1, -1))
    extras = extras_vector(
        [obs.pill_colors],
        [obs.next_colors],
        [obs.level],
        [obs.speed],
        [obs.speed_ups],
        [obs.virus_count],
    )
    return board, extras
