"""Falling-pill rules from the disassembly, checked on hand-built situations."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import Button, Phase


def _to_falling(game: engine.Game) -> engine.Game:
    """Step with no input until the first pill falls (phase PLAYING, next_action 0)."""
    for _ in range(400):
        if int(game.phase) == Phase.PLAYING and int(game.next_action) == 0:
            return game
        game.step(0)
    raise AssertionError("pill never started falling")


@pytest.fixture
def falling() -> engine.Game:
    return _to_falling(engine.Game(0, 0, 0x8988))


def test_intro_lasts_levelintro_delay_then_throw(falling):
    # levelIntro_delay $80 frames, 1 frame back in the main loop, then the throw (22 frames
    # on MED/HI, 2 frames per animation step on LOW) and sendPillFinished.
    g = engine.Game(0, 1, 0x8988)
    n = 0
    while not (int(g.phase) == Phase.PLAYING and int(g.next_action) == 0):
        g.step(0)
        n += 1
    assert n == 128 + 22 + 1
    assert (int(g.pill_x), int(g.pill_y), int(g.pill_rotation)) == (3, 15, 0)


def test_first_pill_is_reserve_entry_one():
    g = engine.Game(5, 2, 0x1234)
    lvl = engine.generate_level(5, 0x1234)
    g = _to_falling(g)
    want = engine.pill_colors(int(lvl["pill_reserve"][1]))
    assert tuple(int(c) for c in g.pill_colors) == want
    assert tuple(int(c) for c in g.next_colors) == engine.pill_colors(int(lvl["pill_reserve"][2]))


def test_das_moves_on_press_then_16_then_every_6(falling):
    g = falling
    xs = []
    for _ in range(40):
        g.step(Button.RIGHT)
        xs.append(int(g.pill_x))
    moves = [i + 1 for i in range(1, 40) if xs[i] != xs[i - 1]]
    assert xs[0] == 4  # moved on the press frame
    assert moves[:2] == [17, 23]  # then after 16 frames, then every 6 (until the wall at 6)


def test_blocked_move_charges_das(falling):
    g = falling
    for _ in range(6):
        g.step(Button.LEFT)  # press, then hold against...
    # walk to the wall at column 0, then keep holding: a blocked move sets the counter to 15
    for _ in range(60):
        g.step(Button.LEFT)
        if int(g.pill_x) == 0:
            break
    g.step(Button.LEFT)
    assert int(g.pill_x) == 0
    assert int(g.hor_velocity) in range(0, 16)


def test_rotation_a_clockwise_b_counter_clockwise(falling):
    g = falling.clone()
    g.step(Button.A)
    assert int(g.pill_rotation) == 3
    g = falling.clone()
    g.step(Button.B)
    assert int(g.pill_rotation) == 1
    g.step(Button.B)  # held, not a new press: no rotation
    assert int(g.pill_rotation) == 1


def test_wall_kick_to_the_left():
    g = _to_falling(engine.Game(0, 0, 0x8988))
    for _ in range(3):
        g.step(Button.B)  # rotate to vertical
        g.step(0)
    assert int(g.pill_rotation) & 1 == 1
    for _ in range(20):  # vertical pill to column 7
        g.step(Button.RIGHT)
        g.step(0)
    assert int(g.pill_x) == 7
    g.step(Button.B)  # back to horizontal: x=7 is outside, so it kicks to 6
    assert int(g.pill_rotation) & 1 == 0 and int(g.pill_x) == 6


def test_soft_drop_only_odd_frames_and_down_only(falling):
    g = falling.clone()
    y0 = int(g.pill_y)
    for _ in range(10):
        g.step(Button.DOWN)
    assert y0 - int(g.pill_y) == 5  # one row per 2 frames
    g = falling.clone()
    for _ in range(10):
        g.step(Button.DOWN | Button.LEFT)  # another d-pad button: no soft drop
    assert int(g.pill_y) == y0


def test_lock_writes_both_halves_and_stays_paired(falling):
    g = falling
    while not int(g.lock_event):
        g.step(Button.DOWN)
    f = g.field
    row = 15 - int(g.pill_y)
    x = int(g.pill_x)
    assert f[row * 8 + x] & 0xF0 == 0x60 and f[row * 8 + x + 1] & 0xF0 == 0x70


def test_pause_and_unpause(falling):
    g = falling
    g.step(Button.START)
    assert int(g.phase) == Phase.PAUSED
    y = int(g.pill_y)
    for _ in range(100):
        g.step(0)
    assert int(g.pill_y) == y and int(g.phase) == Phase.PAUSED
    g.step(Button.START)
    assert int(g.phase) == Phase.PLAYING


def test_top_out_when_spawn_blocked():
    g = _to_falling(engine.Game(0, 2, 0x8988))
    for _ in range(5000):
        if int(g.phase) != Phase.PLAYING:
            break
        g.step(Button.DOWN if int(g.next_action) == 0 else 0)
    assert int(g.phase) == Phase.TOP_OUT


def test_stage_clear_after_last_virus():
    # A hand-made state: one virus with three same-colour singles stacked above it, and a
    # pill of that colour dropped onto them completes a vertical four.
    g = engine.Game(0, 1, 0x8988)
    f = g.field
    f[:] = 0xFF
    g2 = _to_falling(g)
    f = g2.field
    f[15 * 8 + 3] = 0xD0 | int(g2.pill_colors[0])
    f[14 * 8 + 3] = 0x80 | int(g2.pill_colors[0])
    f[13 * 8 + 3] = 0x80 | int(g2.pill_colors[0])
    # virus counter must agree with the board for the stage to clear: set it via BCD 1
    g2.virus_left_bcd[...] = 1
    for _ in range(3000):
        if int(g2.phase) != Phase.PLAYING:
            break
        g2.step(Button.DOWN if int(g2.next_action) == 0 else 0)
    assert int(g2.phase) == Phase.STAGE_CLEAR
    assert g2.virus_left == 0 and g2.virus_count == 0


def test_views_are_live_and_batch_matches_single_games():
    b = engine.Batch(np.array([0, 10, 20]), np.array([0, 1, 2]), np.array([1, 2, 3]) * 999)
    singles = [
        engine.Game(lv, sp, sd) for lv, sp, sd in [(0, 0, 999), (10, 1, 1998), (20, 2, 2997)]
    ]
    rng = np.random.default_rng(0)
    for _ in range(800):
        masks = rng.integers(0, 256, size=3, dtype=np.uint8) & 0xCF  # no Start/Select
        b.step(masks)
        for g, m in zip(singles, masks, strict=True):
            g.step(int(m))
    for i, g in enumerate(singles):
        assert b.get(i) == g
        assert np.array_equal(b.field[i], g.field)
