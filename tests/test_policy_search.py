"""policy.search: the play-time search takes the clearing move, plays only planned placements,
and decides from what the player sees (never the engine's hidden pill reserve)."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import _core
from policy.play import MAX_SETTLE_FRAMES, Episode, play, to_spawn
from policy.search import COLOUR_PAIRS, PlayedPly, SearchPlayer
from policy.teacher import Teacher, Weights
from tests.test_policy_teacher import constructed


def test_search_picks_the_clearing_move() -> None:
    g = constructed()
    for depth in (2, 3):
        decision = SearchPlayer(depth=depth, taps_only=True).act(g)
        h = g.clone()
        h.run(decision.masks)
        to_spawn(h)
        assert h.virus_count == 1, f"depth {depth} chose {decision.placement}"


def test_depth_two_without_prior_is_the_teacher() -> None:
    game = Episode(20, 2, 0x6000, 0).game()
    to_spawn(game)
    for _ in range(5):
        a = SearchPlayer(depth=2, prior_k=0, taps_only=True).act(game)
        b = Teacher(taps_only=True).act(game)
        assert a.placement == b.placement
        game.run(a.masks)
        to_spawn(game)


def test_decisions_ignore_the_hidden_pill_reserve() -> None:
    game = Episode(20, 2, 0x6002, 1).game()
    to_spawn(game)
    other = game.clone()
    other.reserve[:] = np.roll(np.asarray(game.reserve), 5) ^ 1  # different pills after next
    player = SearchPlayer(beam=4, beam3=2, width3=1, taps_only=True)
    assert player.act(game).placement == player.act(other).placement


def test_search_plays_a_level_with_planned_placements() -> None:
    r = play(SearchPlayer(beam=4, beam3=2, width3=1, taps_only=True), Episode(2, 2, 0x6004, 2))
    assert r.cleared and r.pills > 0


def test_colour_pairs_are_a_distribution_and_bad_settings_raise() -> None:
    assert sum(p for _, p in COLOUR_PAIRS) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="depth"):
        SearchPlayer(depth=4)
    with pytest.raises(ValueError, match="beam"):
        SearchPlayer(beam3=0)


def test_expand_colours_is_one_expand_per_colour_pair() -> None:
    """The third ply's engine call: every pair (the 9 ordered ones) gives exactly what expand()
    gives on a copy with those colours, on states with clears and chains along a game."""
    pairs = [(a, b) for a in range(3) for b in range(3)]
    game = Episode(14, 1, 0x6006, 3).game()
    to_spawn(game)
    fields = ("placements", "reachable", "lock_frames", "settle_frames", "clear_rounds")
    fields += ("viruses", "phases", "fields")
    cleared = 0
    for _ in range(12):
        got = _core.expand_colours(game, pairs, taps_only=True, max_settle=MAX_SETTLE_FRAMES)
        assert len(got) == len(pairs)
        for (a, b), e in zip(pairs, got, strict=True):
            h = game.clone()
            h.pill_colors[:] = (a, b)
            want = _core.expand(h, taps_only=True, max_settle=MAX_SETTLE_FRAMES)
            assert e.status == want.status and len(e) == len(want) > 0
            for name in fields:
                assert np.array_equal(getattr(e, name), getattr(want, name)), (a, b, name)
            k = len(e) - 1
            assert np.array_equal(e.child(k).field, want.child(k).field)
            assert e.child(k).frame == want.child(k).frame
            cleared += int((e.viruses < game.virus_count).any())
        game.run(Teacher(depth=1, taps_only=True).act(game).masks)
        to_spawn(game)
    assert cleared > 0, "no pair clears a virus: the test covers no clear"


def test_expand_colours_checks_its_arguments() -> None:
    game = Episode(5, 2, 0x6008, 4).game()
    with pytest.raises(ValueError, match="spawn"):
        _core.expand_colours(game, [(0, 1)])  # before the first spawn
    to_spawn(game)
    with pytest.raises(ValueError, match="colour"):
        _core.expand_colours(game, [(0, 3)])
    with pytest.raises(ValueError, match="2 colours"):
        _core.expand_colours(game, [(0, 1, 2)])
    assert _core.expand_colours(game, []) == []


def test_endgame_weights_apply_from_the_virus_threshold() -> None:
    game = Episode(5, 2, 0x600A, 5).game()
    to_spawn(game)
    late = Weights(half=80.0)
    n = int(game.virus_count)
    assert SearchPlayer(endgame_viruses=n, endgame_weights=late).weights_for(game) is late
    assert SearchPlayer(endgame_viruses=n - 1, endgame_weights=late).weights_for(game) == Weights()
    assert SearchPlayer(endgame_viruses=99).weights_for(game) == Weights()


def test_a_falling_pills_played_ply_is_the_spawns_expansion_one_frame_later() -> None:
    """The live loop decides from the falling pill (one frame after the spawn state): its
    first ply played with the planner's masks has the same children as expand() at the spawn,
    each one frame shorter, and the search picks the same placement from it."""
    game = Episode(20, 2, 0x6006, 3).game()
    to_spawn(game)
    player = SearchPlayer(beam=4, beam3=2, width3=1)
    for _ in range(4):
        falling = game.clone()
        falling.step(0)
        e = _core.expand(game, max_settle=MAX_SETTLE_FRAMES)
        p = PlayedPly(falling, engine.plan(falling))
        assert np.array_equal(np.asarray(e.placements), p.placements)
        assert np.array_equal(np.asarray(e.fields), p.fields)
        assert np.array_equal(np.asarray(e.viruses), p.viruses)
        assert np.array_equal(np.asarray(e.phases), p.phases)
        spent = np.asarray(e.lock_frames) + np.asarray(e.settle_frames)
        assert np.array_equal(spent - 1, p.lock_frames + p.settle_frames)
        for k in (0, len(p) - 1):
            assert np.array_equal(np.asarray(e.child(k).field), np.asarray(p.child(k).field))
        ev, v = player.search(game)
        pv, w = player.search(falling, p)
        assert int(ev.placements[int(np.argmax(v))]) == int(pv.placements[int(np.argmax(w))])
        decision = player.act(game)
        game.run(decision.masks)
        to_spawn(game)


def test_hil_search_policy_chooses_the_searchs_placement_from_the_falling_pill() -> None:
    from hil.loop.runtime import make_policy

    policy = make_policy("search")
    player = policy.player  # the shipped search with the ONNX prior
    game = Episode(20, 2, 0x6008, 0).game()
    to_spawn(game)
    falling = game.clone()
    falling.step(0)
    plan = engine.plan(falling)
    idx = policy.choose(falling, plan.reachable)
    assert np.asarray(plan.reachable)[idx]
    assert idx == player.act(game).placement
    with pytest.raises(ValueError, match="no placement"):
        policy.choose(falling, np.zeros(512, bool))
