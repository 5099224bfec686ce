"""policy.search: the play-time search takes the clearing move, plays only planned placements,
and decides from what the player sees (never the engine's hidden pill reserve)."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import _core
from policy.play import MAX_SETTLE_FRAMES, Episode, play, to_spawn
from policy.search import _PROBS, COLOUR_PAIRS, LateSearch, PlayedPly, PonderedSearch, SearchPlayer
from policy.teacher import Teacher, Weights, leaf_values_numpy, packed_weights
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


def spawn_and_falling(seed: int) -> tuple[engine.Game, engine.Game, engine.Plan]:
    """A level-20 HI game's first spawn state, the state a frame later (the pill falling, as
    the live loop decides) and engine.plan of the latter."""
    game = Episode(20, 2, seed, 0).game()
    to_spawn(game)
    falling = game.clone()
    falling.step(0)
    return game, falling, engine.plan(falling)


def test_hil_search_policy_chooses_the_searchs_placement_from_the_falling_pill() -> None:
    from hil.loop.runtime import make_policy

    policy = make_policy("search")
    player = policy.player  # the shipped search with the ONNX prior
    game, falling, plan = spawn_and_falling(0x6008)
    idx = policy.choose(falling, plan.reachable)
    assert np.asarray(plan.reachable)[idx]
    assert idx == player.act(game).placement
    with pytest.raises(ValueError, match="no placement"):
        policy.choose(falling, np.zeros(512, bool))


def test_hil_search_policys_choose_pairs_is_the_best_on_average_over_the_next_pills() -> None:
    """The live loop's pondering (hil.loop.ponder) asks for all 9 next pills at once: one
    placement for all, the best by the mean over the pairs of the values search() gives on a
    copy with each, from the falling pill (PlayedPly); on pills where the pairs' own choices
    (choose() on each copy) differ."""
    from hil.loop.runtime import make_policy
    from policy.ponder import COLOUR_PAIRS_ORDERED

    policy = make_policy("search")
    game = Episode(20, 2, 0x6012, 3).game()
    to_spawn(game)
    varied = 0
    for _ in range(2):
        falling = game.clone()
        falling.step(0)
        plan = engine.plan(falling)
        many = policy.choose_pairs(falling, plan.reachable, COLOUR_PAIRS_ORDERED)
        values, own = [], set()
        for pair in COLOUR_PAIRS_ORDERED:
            h = falling.clone()
            h.next_colors[:] = pair
            e, v = policy.player.search(h, PlayedPly(h, engine.plan(h)))
            values.append(v)
            own.add(policy.choose(h, plan.reachable))
        best = policy._best(e, np.mean(values, axis=0), plan.reachable)
        assert many == {pair: best for pair in COLOUR_PAIRS_ORDERED}
        varied += len(own) > 1
        game.run(Teacher(depth=1, taps_only=True).act(game).masks)
        to_spawn(game)
    assert varied > 0, "the next pill never changed the choice: the test shows nothing"


def _third_ply_reference(player: SearchPlayer, g2: engine.Game, t0: float, w: Weights) -> float:
    """The third ply as policy/search.py computed it in Python before the engine did it in one
    call: expand_colours, teacher.leaf_values_numpy per pair, best less mobility, weighted."""
    es = _core.expand_colours(g2, [p for p, _ in COLOUR_PAIRS], max_settle=MAX_SETTLE_FRAMES)
    if any(len(e3) == 0 for e3 in es):
        return float(
            leaf_values_numpy(np.asarray(g2.field)[None], [int(g2.virus_count)], [1], [t0], w)[0]
        )
    total = 0.0
    for e3, (_, p) in zip(es, COLOUR_PAIRS, strict=True):
        v = leaf_values_numpy(
            e3.fields, e3.viruses, e3.phases, t0 + e3.lock_frames + e3.settle_frames, w
        )
        total += p * (float(v.max()) - player._mobility(len(e3), w))
    return total


def test_the_engines_third_ply_is_the_python_formula_bit_for_bit() -> None:
    """engine._core.expected_best_leaf (search.cpp) gives the same double as the numpy formula,
    along a game with clears, for the shipped weights and for weights that use every term."""
    player = SearchPlayer(taps_only=True)
    every = Weights(vsame=3.0, on_virus=7.0, hsame=2.0, access=1.5, mobility=4.0)
    game = Episode(12, 2, 0x600C, 6).game()
    to_spawn(game)
    checked = 0
    for i in range(14):
        for w in (Weights(), every):
            p, d = packed_weights(w)
            t0 = 37.0 + i
            got = _core.expected_best_leaf(game, [c for c, _ in COLOUR_PAIRS], _PROBS, t0, p, d)
            assert got == _third_ply_reference(player, game, t0, w)
            checked += 1
        game.run(Teacher(depth=1, taps_only=True).act(game).masks)
        to_spawn(game)
    assert checked == 28
    with pytest.raises(ValueError, match="15 numbers"):
        _core.expected_best_leaf(game, [(0, 1)], [1.0], 0.0, np.zeros(14), d)
    with pytest.raises(ValueError, match="one per pair"):
        _core.expected_best_leaf(game, [(0, 1)], [0.5, 0.5], 0.0, p, d)


def test_expected_best_leaves_is_expected_best_leaf_for_each_state() -> None:
    """The batched third ply (one call, the interpreter lock released once) gives each state's
    expected_best_leaf, bit for bit; a state not at a spawn is named, frames must match."""
    game = Episode(20, 2, 0x600C, 2).game()
    to_spawn(game)
    e = _core.expand(game, max_settle=MAX_SETTLE_FRAMES)
    live = [k for k in range(len(e)) if int(e.phases[k]) == 1][:12]
    games = [e.child(k) for k in live]
    frames = [float(40 + k) for k in live]
    p, d = packed_weights(Weights())
    pairs = [c for c, _ in COLOUR_PAIRS]
    got = _core.expected_best_leaves(games, frames, pairs, _PROBS, p, d)
    assert got.dtype == np.float64 and len(got) == len(games) >= 8
    for g, t, v in zip(games, frames, got, strict=True):
        assert v == _core.expected_best_leaf(g, pairs, _PROBS, t, p, d)
    assert len(_core.expected_best_leaves([], [], pairs, _PROBS, p, d)) == 0
    falling = games[1].clone()
    falling.step(0)
    with pytest.raises(ValueError, match=r"games\[1\] must be at a spawn state"):
        _core.expected_best_leaves([games[0], falling], frames[:2], pairs, _PROBS, p, d)
    with pytest.raises(ValueError, match="one per game"):
        _core.expected_best_leaves(games, frames[:-1], pairs, _PROBS, p, d)


def test_the_pairs_share_third_ply_values_and_give_search_s_values_bit_for_bit(monkeypatch) -> None:
    """search_pairs computes a third-ply value once for a state two next pills reach at the
    same frame (a pair and its mirror): fewer states valued by the engine than a search() per
    pair, the same values per child, bit for bit, for every pair."""
    import policy.search as search_mod
    from policy.onnx_policy import PlacementPolicy
    from policy.ponder import COLOUR_PAIRS_ORDERED

    calls = {"n": 0}
    real = search_mod._core

    class Counting:
        def __getattr__(self, name: str):
            return getattr(real, name)

        def expected_best_leaves(self, games, *a, **k):
            calls["n"] += len(games)
            return real.expected_best_leaves(games, *a, **k)

    monkeypatch.setattr(search_mod, "_core", Counting())
    player = SearchPlayer(prior=PlacementPolicy())
    game = Episode(20, 2, 0x6012, 3).game()
    to_spawn(game)
    _, by_pair = player.search_pairs(game, COLOUR_PAIRS_ORDERED)
    shared = calls["n"]
    calls["n"] = 0
    for pair in COLOUR_PAIRS_ORDERED:
        h = game.clone()
        h.next_colors[:] = pair
        _, v = player.search(h)
        assert np.array_equal(v, by_pair[pair]), pair
    assert 0 < shared < calls["n"]


def test_act_pairs_is_act_for_each_next_pill() -> None:
    """SearchPlayer.act_pairs (the pondering's shared work: first ply, prior batch, second-ply
    plans) makes exactly act()'s decision on a copy with each next pill, along a game."""
    from policy.onnx_policy import PlacementPolicy
    from policy.ponder import COLOUR_PAIRS_ORDERED

    player = SearchPlayer(beam=4, beam3=2, width3=1, prior=PlacementPolicy(), taps_only=True)
    game = Episode(20, 2, 0x600E, 7).game()
    to_spawn(game)
    varied = 0
    for _ in range(4):
        many = player.act_pairs(game, COLOUR_PAIRS_ORDERED)
        assert sorted(many) == sorted(COLOUR_PAIRS_ORDERED)
        varied += len({d.placement for d in many.values()}) > 1
        for pair in COLOUR_PAIRS_ORDERED:
            h = game.clone()
            h.next_colors[:] = pair
            want = player.act(h)
            assert many[pair].placement == want.placement, pair
            assert np.array_equal(many[pair].masks, want.masks)
        game.run(many[tuple(int(c) for c in game.next_colors)].masks)
        to_spawn(game)
    assert varied > 0, "the next pill never changed the decision: the test shows nothing"
    with pytest.raises(ValueError, match="spawn state"):
        player.act_pairs(Episode(5, 2, 0x6010, 0).game(), [(0, 1)])  # before the first spawn


def test_the_live_loops_decisions_late_by_five_frames_or_pondered_without_the_next_pill() -> None:
    """policy.eval's search-late5 and search-ponder: the late decision presses nothing for 5
    frames, then plays the search's choice from the state there (the next pill known), to its
    lock; the pondered one is the placement best on average over the 9 next pills, from the
    spawn."""
    player = SearchPlayer()
    game = Episode(20, 2, 0x6012, 3).game()
    to_spawn(game)
    late = LateSearch(player, 5).act(game)
    assert not late.masks[:5].any() and len(late.masks) > 5
    g = game.clone()
    g.run(np.zeros(5, np.uint8))
    e, v = player.search(g, PlayedPly(g, engine.plan(g)))
    assert late.placement == int(e.placements[int(np.argmax(v))])
    g = game.clone()
    g.run(late.masks)
    assert int(g.lock_event)
    pondered = PonderedSearch(player).act(game)
    values = []
    for pair in [(a, b) for a in range(3) for b in range(3)]:
        h = game.clone()
        h.next_colors[:] = pair
        e, v = player.search(h)
        values.append(v)
    assert pondered.placement == int(e.placements[int(np.argmax(np.mean(values, axis=0)))])
    g = game.clone()
    g.run(pondered.masks)
    assert int(g.lock_event)
