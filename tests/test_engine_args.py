"""Bad arguments raise clear Python exceptions; nothing crashes the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import engine


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"level": -1, "speed": 0, "seed": 1}, ValueError, "level must be 0..24"),
        ({"level": 25, "speed": 0, "seed": 1}, ValueError, "level must be 0..24"),
        ({"level": 0, "speed": 3, "seed": 1}, ValueError, "speed must be 0..2"),
        ({"level": 0, "speed": 0, "seed": 1 << 16}, ValueError, "seed must be 0..65535"),
        ({"level": 0, "speed": 0, "seed": -5}, ValueError, "seed must be"),
        ({"level": 0, "speed": 0, "seed": 1.5}, TypeError, "cannot be interpreted as an integer"),
        ({"level": "3", "speed": 0, "seed": 1}, TypeError, "cannot be interpreted as an integer"),
        ({"level": 0, "speed": 0, "seed": 1, "frame_counter": 256}, ValueError, "frame_counter"),
    ],
)
def test_game_rejects_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        engine.Game(**kwargs)


def test_locked_rng_seed_is_a_value_error():
    with pytest.raises(ValueError):
        engine.Game(10, 0, 0)


def test_step_rejects_bad_masks():
    g = engine.Game(0, 0, 1)
    with pytest.raises(ValueError, match="buttons"):
        g.step(256)
    with pytest.raises(TypeError):
        g.step(None)
    with pytest.raises(TypeError):
        g.run([1, 2, 3])
    with pytest.raises(TypeError):
        g.run(np.zeros(4, dtype=np.int64))


def test_batch_rejects_bad_arrays():
    b = engine.Batch(np.array([0, 1]), 0, 5)
    with pytest.raises(ValueError, match="2 elements"):
        b.step(np.zeros(3, dtype=np.uint8))
    with pytest.raises(TypeError, match="uint8"):
        b.step(np.zeros(2, dtype=np.int32))
    with pytest.raises(ValueError, match="C-contiguous"):
        b.step(np.zeros(4, dtype=np.uint8)[::2])
    with pytest.raises(ValueError, match="index"):
        b.get(2)
    with pytest.raises(ValueError, match="level"):
        engine.Batch(np.array([0, 30]), 0, 5)


def test_state_edited_out_of_range_does_not_crash():
    # The views are writable (for setting up positions); nonsense values must not read outside
    # the game's tables.
    g = engine.Game(0, 0, 9)
    for _ in range(160):
        g.step(0)
    g.speed_setting[...] = 250
    g.speed_ups[...] = 250
    g.pills_counter[...] = 255
    g.pill_rotation[...] = 77
    for _ in range(2000):
        g.step(0x04)
    assert int(g.frame) == 2160
