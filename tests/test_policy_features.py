"""policy.features: the observation tensors shared by training, the ONNX model and the bridge."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from policy.features import (
    BOARD_PLANES,
    EXTRAS,
    SpawnInput,
    board_planes,
    encode,
    extras_vector,
)
from policy.play import to_spawn


def spawn_game(level: int = 10, speed: int = 1, seed: int = 0x1234) -> engine.Game:
    g = engine.Game(level, speed, seed)
    to_spawn(g)
    return g


def test_shapes_and_dtypes_from_a_game() -> None:
    g = spawn_game()
    board, extras = encode(SpawnInput.from_game(g))
    assert board.shape == (1, BOARD_PLANES, 16, 8) and board.dtype == np.float32
    assert extras.shape == (1, EXTRAS) and extras.dtype == np.float32
    # every cell is exactly one of empty / virus colour / piece colour
    assert np.array_equal(board[0, :7].sum(axis=0), np.ones((16, 8), np.float32))
    assert int(board[0, 1:4].sum()) == g.virus_count


def test_planes_follow_the_cell_codes() -> None:
    f = np.full(128, 0xFF, np.uint8)
    f[0] = 0xD2  # blue virus at row 0, col 0
    f[8 * 15 + 3] = 0x61  # red left half at row 15, col 3
    f[8 * 15 + 4] = 0x70  # yellow right half
    f[8 * 14 + 3] = 0x40  # yellow top half at row 14, col 3 ...
    f[8 * 15 + 5] = 0x82  # blue single
    f[8 * 15 + 6] = 0xB1  # cleared: empty for the policy
    p = board_planes(f[None])[0]
    assert p[3, 0, 0] == 1 and p[0, 0, 0] == 0
    assert p[5, 15, 3] == 1 and p[9, 15, 3] == 1  # red piece whose partner is to the right
    assert p[4, 15, 4] == 1 and p[10, 15, 4] == 1  # yellow piece, partner to the left
    assert p[4, 14, 3] == 1 and p[7, 14, 3] == 1  # top half: partner below
    assert p[6, 15, 5] == 1 and p[7:11, 15, 5].sum() == 0
    assert p[0, 15, 6] == 1


def test_extras_layout() -> None:
    x = extras_vector([[2, 0]], [[1, 1]], [20], [2], [49], [84])[0]
    assert list(x[0:3]) == [0, 0, 1] and list(x[3:6]) == [1, 0, 0]
    assert list(x[6:9]) == [0, 1, 0] and list(x[9:12]) == [0, 1, 0]
    assert x[12] == 1.0 and list(x[13:16]) == [0, 0, 1] and x[16] == 1.0 and x[17] == 1.0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"pill_colors": (0, 3)}, "pill_colors"),
        ({"speed": 3}, "speed"),
        ({"level": 25}, "level"),
        ({"field": np.zeros(100, np.uint8)}, "field"),
    ],
)
def test_bad_observations_raise_value_error(change: dict, message: str) -> None:
    obs = SpawnInput.from_game(spawn_game())
    bad = SpawnInput(**{**obs.__dict__, **change})
    with pytest.raises(ValueError, match=message):
        encode(bad)
