"""policy.teacher: the exact search picks the clearing move on a constructed board; the engine
play-outs it relies on (engine._core.expand / settle) agree with stepping the game."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import _core
from policy.play import at_spawn, to_spawn
from policy.teacher import (
    Teacher,
    Weights,
    board_terms,
    board_terms_numpy,
    leaf_values,
    leaf_values_numpy,
    packed_weights,
)


def constructed(level: int = 0) -> engine.Game:
    """Level-0 HI game at its first spawn with the board replaced: red viruses at row 15,
    columns 0-2, a blue virus at column 7, and a red-red pill to play."""
    g = engine.Game(level, engine.Speed.HI, 0x2468)
    to_spawn(g)
    g.field[:] = 0xFF
    for c in (0, 1, 2):
        g.field[15 * 8 + c] = 0xD1
    g.field[15 * 8 + 7] = 0xD2
    g.virus_left_bcd[...] = 0x04
    g.pill_colors[:] = 1  # red, red
    g.next_colors[:] = (0, 2)
    return g


def test_teacher_picks_the_clearing_move() -> None:
    g = constructed()
    for depth in (1, 2):
        decision = Teacher(depth=depth, taps_only=True).act(g)
        h = g.clone()
        h.run(decision.masks)
        to_spawn(h)
        assert h.virus_count == 1, f"depth {depth} chose {decision.placement}"


def test_expand_matches_stepping_the_game() -> None:
    g = engine.Game(12, engine.Speed.MED, 0x1357)
    to_spawn(g)
    for _ in range(6):  # a few pills in, so that placements clear and cascade
        g.run(Teacher(depth=1, taps_only=True).act(g).masks)
        to_spawn(g)
    e = _core.expand(g, taps_only=True)
    plan = _core.plan(g, taps_only=True)
    assert np.array_equal(e.placements, plan.placements) and len(e) > 0
    assert np.array_equal(e.reachable, plan.reachable)
    assert (e.viruses < g.virus_count).any(), "no placement clears: the test covers no clear"
    for k in range(len(e)):
        idx = int(e.placements[k])
        h = g.clone()
        h.run(plan.masks(idx))
        assert int(h.lock_event) == 1
        frames = to_spawn(h)
        assert frames == e.settle_frames[k]
        assert np.array_equal(h.field, e.fields[k])
        assert h.virus_count == e.viruses[k] and int(h.phase) == e.phases[k]
        assert at_spawn(h) or int(h.phase) != engine.Phase.PLAYING
        # lock_at leaves the held buttons released and the DAS counter as it was: the rest of
        # the state is the stepped one
        c = e.child(k)
        assert int(c.frame) == int(h.frame) and int(c.frame_counter) == int(h.frame_counter)
        assert np.array_equal(c.pill_colors, h.pill_colors) and int(c.status) == int(h.status)


def test_expand_needs_a_spawn_state() -> None:
    g = engine.Game(3, engine.Speed.LOW, 0x0BEE)  # in levelIntro_delay: no pill yet
    with pytest.raises(ValueError, match="spawn state"):
        _core.expand(g)


def test_board_terms_cpp_matches_numpy() -> None:
    """The C++ evaluation (search_eval.cpp) is the numpy reference, term for term."""
    rng = np.random.default_rng(5)
    codes = np.array([0xFF, 0xFF, 0xFF, 0xD0, 0xD1, 0xD2, 0x40, 0x51, 0x62, 0x70, 0x81, 0xB2])
    fields = rng.choice(codes, size=(300, 128)).astype(np.uint8)
    fields[:100, :48] = 0xFF  # open tops, as in play
    w = Weights()
    fast, ref = board_terms(fields, w), board_terms_numpy(fields, w)
    assert set(fast) == set(ref)
    for key in ref:
        np.testing.assert_allclose(fast[key], ref[key], rtol=1e-12, atol=1e-9, err_msg=key)


def random_leaves(seed: int, n: int, open_tops: int):
    """n random leaves: fields uint8[n, 128] (the first ``open_tops`` with rows 0-4 empty, as
    in play), viruses, phases (playing, stage clear, top-out) and frames."""
    rng = np.random.default_rng(seed)
    codes = np.array([0xFF, 0xFF, 0xFF, 0xD0, 0xD1, 0xD2, 0x40, 0x51, 0x62, 0x70, 0x81, 0xB2])
    fields = rng.choice(codes, size=(n, 128)).astype(np.uint8)
    fields[:open_tops, :40] = 0xFF
    viruses = rng.integers(0, 85, n)
    phases = rng.choice([1, 1, 1, 3, 4], n).astype(np.uint8)
    frames = rng.integers(0, 5000, n)
    return fields, viruses, phases, frames


def test_leaf_values_cpp_is_the_numpy_formula_bit_for_bit() -> None:
    """engine._core.leaf_values (search_eval.cpp leaf_value) is leaf_values_numpy, double for
    double, with every phase and weights that use every term."""
    fields, viruses, phases, frames = random_leaves(6, 400, 150)
    for w in (Weights(), Weights(vsame=3.0, on_virus=7.0, hsame=2.0, access=1.5, bump=0.3)):
        fast = leaf_values(fields, viruses, phases, frames, w)
        ref = leaf_values_numpy(fields, viruses, phases, frames, w)
        assert np.array_equal(fast, ref)
        assert (fast[phases == 3] > 9e6).all() and (fast[phases == 4] < -9e6).all()
    with pytest.raises(ValueError, match="one per board"):
        _core.leaf_values(fields, viruses[:3], phases, frames, *packed_weights(Weights()))


def test_scaled_weights_scale_the_board_against_the_frames() -> None:
    """Weights.scaled(s): a live leaf's value less its frames is s times the teacher's (every
    term in frames scaled, the counts kept); a stage clear and a top-out are valued as before."""
    fields, viruses, phases, frames = random_leaves(7, 200, 80)
    frames = frames.astype(np.float64)
    w = Weights(vsame=3.0, on_virus=7.0, hsame=2.0, access=1.5, blocker=2.0)
    half = w.scaled(0.5)
    assert (half.blocker, half.no_room, half.access_target) == (2.0, w.no_room, w.access_target)
    base = leaf_values(fields, viruses, phases, frames, w)
    scaled = leaf_values(fields, viruses, phases, frames, half)
    live = phases == 1
    np.testing.assert_allclose(scaled[live] + frames[live], 0.5 * (base[live] + frames[live]))
    assert np.array_equal(scaled[~live], base[~live])
    assert w.scaled(1.0) == w
