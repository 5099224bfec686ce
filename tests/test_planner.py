"""Reachability planner (engine._core.plan): what a caller sees. The placement index mapping and
dedupe, plans from between pills, the demo, committed prefixes (also one that locks the pill),
the rate profile, taps_only, masks() against all_masks(), and argument errors.

Soundness over many states: tests/test_planner_soundness.py. Completeness and optimality against
exhaustive searches over whole engine states: tests/test_planner_completeness.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from planner_helpers import FALLING, check_plan, pill_cells, to_falling

import engine
from engine import _core


def spawned(level: int = 10, speed: int = 1, seed: int = 0x1234) -> engine.Game:
    g = engine.Game(level, speed, seed)
    assert to_falling(g)
    return g


def test_placement_index_is_rotation_row_col_of_the_lock_pose() -> None:
    g = spawned()
    p = _core.plan(g)
    assert check_plan(g) == len(p)
    # The pose one frame before the lock (the drop that fails comes first in a frame).
    idx = int(p.placements[np.argmax(p.lock_frames == p.lock_frames.max())])
    masks = p.masks(idx)
    g2 = g.clone()
    g2.run(masks[:-1].copy())
    rot, y, x = int(g2.pill_rotation), int(g2.pill_y), int(g2.pill_x)
    same = int(g2.pill_colors[0]) == int(g2.pill_colors[1])
    assert idx == (rot & (1 if same else 3)) * 128 + (15 - y) * 8 + x
    assert set(pill_cells(idx, g2.pill_colors)) <= set(range(128))


def test_identical_colours_report_rotations_two_and_three_as_zero_and_one() -> None:
    for seed in range(2, 400, 2):
        g = spawned(seed=seed)
        if int(g.pill_colors[0]) == int(g.pill_colors[1]):
            break
    else:
        pytest.fail("no single-colour pill in the seeds tried")
    p = _core.plan(g)
    assert np.all(p.placements < 256)
    check_plan(g)


def test_between_pills_the_plan_starts_from_the_throw() -> None:
    g = engine.Game(10, 1, 0x1234)
    assert int(g.phase) == 0  # levelIntro: no pill falls yet
    p = _core.plan(g)
    assert p.status == 2 and len(p) == 0
    assert _core.plan(engine.Game.demo()).status == 2  # the demo ignores the pad
    to_falling(g)
    p = _core.plan(g)
    g.run(p.masks(int(p.placements[0])))
    assert int(g.next_action) != FALLING  # lock clean-up and throw: the plan waits for the spawn
    assert check_plan(g) > 0
    wait = 0  # frames of clean-up and throw before the frame whose held buttons the plan picks
    h = g.clone()
    while int(h.next_action) != 3:  # action_sendPillFinished
        h.step(0)
        wait += 1
    for m in _core.plan(g).all_masks():
        assert wait > 0 and not m[:wait].any()


def test_a_prefix_that_locks_the_pill_is_the_only_placement() -> None:
    g = spawned(20, 2)
    g.speed_ups[...] = 49  # gravity every frame
    prefix = np.full(40, 4, np.uint8)  # hold Down: the pill lands straight below
    p = _core.plan(g, prefix)
    assert p.status == 1 and len(p) == 1
    lock = int(p.lock_frames[0])
    assert lock < len(prefix)
    assert np.array_equal(p.masks(int(p.placements[0])), prefix[:lock])
    check_plan(g, prefix)


def test_plans_from_mid_fall_with_a_prefix_keep_the_prefix() -> None:
    g = spawned(5, 0)
    p = _core.plan(g)
    masks = p.masks(int(p.placements[-1]))
    g.run(masks[:5].copy())  # mid-fall, holding whatever the plan held
    prefix = np.array([2, 2, 0x82, 0], np.uint8)
    assert check_plan(g, prefix) > 0


def test_rate_profile_spaces_presses() -> None:
    g = spawned(12, 2, 0x0BAD)
    g.speed_ups[...] = 30
    free = _core.plan(g)
    for n in (2, 4, 8):
        check_plan(g, None, min_press_interval=n)
        p = _core.plan(g, min_press_interval=n)
        assert set(p.placements.tolist()) <= set(free.placements.tolist())
        for idx, m in zip(p.placements.tolist(), p.all_masks(), strict=True):
            assert p.lock_frame(idx) >= free.lock_frame(idx)
            held, last = int(g.btns_held), -(10**6)
            for f, mask in enumerate(m.tolist()):
                rising = mask & ~held & 0xFF
                if rising:
                    assert bin(rising).count("1") == 1 and f - last >= n
                    last = f
                held = mask


def test_taps_only_plans_are_sound_and_never_beat_the_full_search() -> None:
    g = spawned(3, 0, 0x0777)
    for _ in range(3):
        check_plan(g, None, taps_only=True)
        full, taps = _core.plan(g), _core.plan(g, taps_only=True)
        assert set(taps.placements.tolist()) <= set(full.placements.tolist())
        for idx, m in zip(taps.placements.tolist(), taps.all_masks(), strict=True):
            assert taps.lock_frame(idx) >= full.lock_frame(idx)
            held = int(g.btns_held)
            for mask in m.tolist():  # Left/Right never held on from the frame before
                assert not (mask & held & 0x03)
                held = mask
        g.run(full.masks(int(full.placements[0])))
        to_falling(g)


def test_masks_and_all_masks_agree() -> None:
    g = spawned(15, 1, 0x2468)
    p = _core.plan(g)
    q = _core.plan(g)
    all_masks = q.all_masks()
    for i, idx in enumerate(p.placements.tolist()):
        one = p.masks(idx)
        frames, fields, presses = _core.replay_locks(g, [one, all_masks[i]])
        assert frames[0] == frames[1] == p.lock_frame(idx)
        assert presses[0] == presses[1] == q.presses[i]
        assert np.array_equal(fields[0], fields[1])
    assert np.array_equal(q.masks(int(q.placements[0])), all_masks[0])  # served from the cache


def test_bad_arguments_raise_clear_errors() -> None:
    g = spawned()
    p = _core.plan(g)
    with pytest.raises(KeyError, match="not reachable"):
        p.masks(int(np.flatnonzero(~p.reachable)[0]))
    with pytest.raises(ValueError, match="placement must be 0..511"):
        p.masks(512)
    with pytest.raises(ValueError, match="min_press_interval"):
        _core.plan(g, min_press_interval=-1)
    with pytest.raises(TypeError, match="prefix"):
        _core.plan(g, [1, 2])
    with pytest.raises(ValueError, match="1-D"):
        _core.plan(g, np.zeros((2, 2), np.uint8))
    with pytest.raises(TypeError, match="engine.Game"):
        _core.plan(42)
    with pytest.raises(ValueError, match="bytes"):
        _core.plan(b"short")


def test_a_pose_the_game_cannot_produce_is_a_value_error() -> None:
    g = spawned()
    g.pill_x[...] = 7  # a horizontal pill in column 7 would stick out of the bottle
    with pytest.raises(ValueError, match="pose is not one the game can produce"):
        _core.plan(g)
    g.pill_x[...] = 3
    g.pill_y[...] = 16
    with pytest.raises(ValueError, match="y=16"):
        _core.plan(g)


def test_a_pill_overlapping_the_field_locks_where_it_is() -> None:
    g = spawned()
    g.field[4 * 8 + 3] = 0xD0  # a virus where the pill is (row 4 = pill_y 11) and below it
    g.field[5 * 8 + 3] = 0xD0
    g.pill_y[...] = 11
    g.speed_counter[...] = 200  # gravity on the next frame: the drop fails
    p = _core.plan(g)
    assert p.placements.tolist() == [4 * 8 + 3] and p.lock_frames.tolist() == [1]
    check_plan(g)
