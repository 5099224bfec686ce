"""policy.beam: the beam search over the pills the reserve will throw."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import _core
from policy.beam import BeamPlayer
from policy.play import MAX_SETTLE_FRAMES, PLAYING, STAGE_CLEAR, Episode, play, to_spawn
from policy.teacher import Weights, leaf_values, packed_weights
from tests.test_policy_search import spawn_and_falling
from tests.test_policy_teacher import constructed


def test_the_last_viruses_cleared_now_are_the_choice() -> None:
    g = constructed()
    g.field[15 * 8 + 7] = 0xFF  # only the three reds left: the red-red pill beside them clears
    g.virus_left_bcd[...] = 0x03
    for depth in (1, 4):
        decision = BeamPlayer(depth=depth, width=4, taps_only=True).act(g)
        h = g.clone()
        h.run(decision.masks)
        to_spawn(h)
        assert int(h.phase) == STAGE_CLEAR, f"depth {depth} chose {decision.placement}"


@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_depth_one_is_the_best_one_ply_leaf_at_its_scale(scale: float) -> None:
    game = Episode(20, 2, 0x6010, 3).game()
    to_spawn(game)
    player = BeamPlayer(depth=1, taps_only=True, scale=scale)
    w = Weights().scaled(scale)
    for _ in range(4):
        e = _core.expand(game, taps_only=True, max_settle=MAX_SETTLE_FRAMES)
        t = (e.lock_frames + e.settle_frames).astype(np.float64)
        best = int(e.placements[int(np.argmax(leaf_values(e.fields, e.viruses, e.phases, t, w)))])
        move = player.act(game)
        assert move.placement == best
        game.run(move.masks)
        to_spawn(game)


def reference_beam(
    game: engine.Game, depth: int, width: int, distinct: bool, root_taps_only: bool = True
) -> int:
    """The first placement (index into the root's expansion) of the best line found by a beam
    over game clones; ``distinct``: keep one line a board at each depth. The pills after the
    first are planned taps_only, the first as ``root_taps_only`` says."""
    w = Weights().scaled(0.5)
    lines: list[tuple[float, int, engine.Game]] = [(0.0, -1, game)]  # (frames, first, state)
    for d in range(depth):
        ranked = []
        for t0, first, g in lines:
            taps = root_taps_only or d > 0
            e = _core.expand(g, taps_only=taps, max_settle=MAX_SETTLE_FRAMES)
            t = t0 + (e.lock_frames + e.settle_frames).astype(np.float64)
            v = leaf_values(e.fields, e.viruses, e.phases, t, w)
            for j in np.flatnonzero(np.asarray(e.phases) == PLAYING):
                board = np.asarray(e.fields)[j].tobytes()
                ranked.append((v[j], t[j], int(j) if first < 0 else first, e.child(int(j)), board))
        ranked.sort(key=lambda c: -c[0])
        lines, seen = [], set()
        for _, t, first, g, board in ranked:
            if distinct and board in seen:
                continue
            seen.add(board)
            lines.append((t, first, g))
            if len(lines) == width:
                break
    return lines[0][1]


def test_the_beam_keeps_one_line_a_board_and_that_changes_a_choice() -> None:
    """At pill 5 of seed 0x6102 two lines of the 4 x 8 beam reach one board; keeping both
    crowds out a line that would have won, so the choice differs from a beam that keeps
    copies. The player chooses as the reference beam that keeps one line a board."""
    game = Episode(20, 2, 0x6102, 1).game()
    to_spawn(game)
    player = BeamPlayer(depth=4, width=8, taps_only=True)
    for _ in range(4):
        game.run(player.act(game).masks)
        to_spawn(game)
    _, k = player.choose(game)
    assert k == reference_beam(game, 4, 8, distinct=True)
    assert k != reference_beam(game, 4, 8, distinct=False)
    # The default: the placement played planned in full, the look-ahead taps_only.
    e, k = BeamPlayer(depth=4, width=8).choose(game)
    assert (e.placements == _core.expand(game, max_settle=MAX_SETTLE_FRAMES).placements).all()
    assert k == reference_beam(game, 4, 8, distinct=True, root_taps_only=False)


def test_the_choice_follows_the_pills_the_reserve_holds() -> None:
    """The search plays the reserve's pills: changing the pills after the next one changes
    some choice along a game (policy.search's does not: its third pill is an expectation)."""
    game = Episode(20, 2, 0x6012, 1).game()
    to_spawn(game)
    player = BeamPlayer(depth=4, width=6, taps_only=True)
    differ = 0
    for _ in range(6):
        other = game.clone()
        other.reserve[:] = (np.asarray(game.reserve).astype(int) + 4) % 9  # other pills
        move = player.act(game)
        differ += move.placement != player.act(other).placement
        game.run(move.masks)
        to_spawn(game)
    assert differ >= 1


def test_the_beam_clears_a_level_with_planned_placements() -> None:
    r = play(BeamPlayer(depth=3, width=4, taps_only=True), Episode(6, 2, 0x6014, 2))
    assert r.cleared and r.pills > 0


def test_bad_sizes_and_a_state_not_at_a_spawn_raise() -> None:
    with pytest.raises(ValueError, match="depth and width"):
        BeamPlayer(depth=0)
    with pytest.raises(ValueError, match="depth and width"):
        BeamPlayer(width=0)
    with pytest.raises(ValueError, match="scale must be > 0"):
        BeamPlayer(scale=0.0)
    game = engine.Game(0, 2, 0x2468)  # state 0: the intro, no pill to plan yet
    with pytest.raises(ValueError, match="spawn state"):
        BeamPlayer(depth=2, width=2).choose(game)


def test_hil_beam_policy_chooses_from_the_falling_pill_the_same_for_every_pair() -> None:
    from hil.loop.runtime import make_policy
    from policy.play import COLOUR_PAIRS_ORDERED

    policy = make_policy("beam")
    game, falling, plan = spawn_and_falling(0x6016)
    idx = policy.choose(falling, plan.reachable)
    assert np.asarray(plan.reachable)[idx]
    assert idx == policy.player.act(game).placement
    assert policy.choose_pairs(falling, plan.reachable, COLOUR_PAIRS_ORDERED) == dict.fromkeys(
        COLOUR_PAIRS_ORDERED, idx
    )
    with pytest.raises(ValueError, match="no placement"):
        policy.choose(falling, np.zeros(512, bool))


def test_hil_beam_policys_quick_choice_is_a_smaller_beam_not_the_network() -> None:
    """Pondered first in real time, the quick choice plays when the full beam comes too late
    (a loaded machine): a beam over the same known pills at QUICK_BEAM, not the network,
    which stays the choice for a pill decided at its spawn."""
    from hil.loop.policies import QUICK_BEAM
    from hil.loop.runtime import make_policy

    policy = make_policy("beam")
    quick = policy.quick
    assert quick is not None and quick.quick is None and quick.net is policy.net
    assert (quick.player.depth, quick.player.width) == QUICK_BEAM
    assert QUICK_BEAM[0] * QUICK_BEAM[1] < policy.player.depth * policy.player.width
    game, falling, plan = spawn_and_falling(0x6016)
    idx = quick.choose(falling, plan.reachable)
    assert idx == BeamPlayer(*QUICK_BEAM).act(game).placement
    assert policy.choose_now(falling, plan.reachable) == policy.net.choose(falling, plan.reachable)


def test_expansions_kept_between_searches_leave_every_choice_as_it_was() -> None:
    """The beam at pill N + 1 expands many states the beam at pill N did (the same pills from
    the same boards); with reuse it takes them from the player's cache. The choices along a
    game are those of a player that expands everything again, and the cache holds at most
    two searches' expansions."""
    import pickle

    a, b = BeamPlayer(depth=5, width=12, reuse=False), BeamPlayer(depth=5, width=12)
    assert a.cache is None
    game = Episode(20, 2, 0x6018, 5).game()
    to_spawn(game)
    for _ in range(12):
        move = b.act(game)
        assert move.placement == a.act(game).placement
        assert len(b.cache) <= 2 * (1 + 4 * 12)
        game.run(move.masks)
        to_spawn(game)
    assert b.cache.hits > 0 and b.cache.misses > 0
    copy = pickle.loads(pickle.dumps(b))
    assert copy == b and copy._cache is None and copy.cache is not b.cache
    b.cache.clear()
    assert (b.cache.hits, b.cache.misses, len(b.cache)) == (0, 0, 0)


def test_the_engine_beam_checks_its_arguments() -> None:
    game = Episode(20, 2, 0x6010, 3).game()
    to_spawn(game)
    p, d = packed_weights(Weights())
    assert _core.beam([game], [0.0], [0.0], 0, 1, p, d) == 0  # no pill after the first
    with pytest.raises(ValueError, match="at least one"):
        _core.beam([], [], [], 2, 4, p, d)
    with pytest.raises(ValueError, match="values must be 1 numbers"):
        _core.beam([game], [0.0, 1.0], [0.0], 2, 4, p, d)
    with pytest.raises(ValueError, match="width"):
        _core.beam([game], [0.0], [0.0], 2, 0, p, d)
    with pytest.raises(TypeError, match="engine.Game"):
        _core.beam([game, "board"], [0.0, 0.0], [0.0, 0.0], 2, 4, p, d)
    with pytest.raises(TypeError):
        _core.beam([game], [0.0], [0.0], 2, 4, p, d, cache="not a cache")


def test_hil_beam_policy_works_out_the_next_pills_choice_ahead() -> None:
    """In real time the beam starts the next pill's choice as soon as it has made one: the
    level's pills are known, so the next spawn state follows from the placement. The loop's
    pondering of that spawn (hil.loop.ponder, from the predicted state) then takes that
    result, the same choice a beam without it makes; another state is a miss."""
    from hil.loop.policies import BeamPolicy
    from hil.loop.ponder import ponder
    from hil.loop.runtime import EnginePlanner

    planner = EnginePlanner()
    ahead = BeamPolicy(4, 8, with_quick=False)
    plain = BeamPolicy(4, 8, net=ahead.net, with_quick=False)
    ahead.start_prefetch(planner)
    try:
        game, falling, plan = spawn_and_falling(0x6018)
        idx = ahead.choose(falling, plan.reachable)
        assert idx == plain.choose(falling, plan.reachable)
        assert (ahead.prefetch.started, ahead.prefetch.hits) == (1, 0)
        masks = plan.masks(idx)
        got = ponder(0, 0, falling, masks, planner, ahead.choose, ahead.choose_pairs)
        want = ponder(0, 0, falling, masks, planner, plain.choose, plain.choose_pairs)
        assert got is not None and want is not None
        assert ahead.prefetch.hits == 1 and ahead.prefetch.misses == 0
        assert {p: c[0] for p, c in got.choices.items()} == {
            p: c[0] for p, c in want.choices.items()
        }
        assert ahead.prefetch.started == 2  # ... and the pill after it is under way
        other = Episode(20, 2, 0x601A, 0).game()  # another level's spawn: not the one ahead
        to_spawn(other)
        other.step(0)
        ahead.choose(other, engine.plan(other).reachable)
        assert ahead.prefetch.misses == 1
        assert plain.prefetch.started == 0  # off unless started (lockstep: the loop waits)
        summary = ahead.prefetch.summary()
        assert (summary["hits"], summary["misses"]) == (1, 1)
        assert summary["work_ms"]["n"] >= 1 and summary["work_ms"]["cpu_p50"] > 0
    finally:
        ahead.stop_prefetch()


def test_the_beams_values_are_each_first_placements_best_line_where_it_ends() -> None:
    """BeamPlayer.search (the labels of policy.train --labeller beam): a root child's value is
    the best value of its lines at the last depth, as a beam over game clones finds it; the
    chosen child is choose()'s and has the highest value; a child with no line there is
    below the chosen one by the margin and its own leaf value's gap to the best child."""
    depth, width = 4, 10
    game = Episode(20, 2, 0x6018, 5).game()
    to_spawn(game)
    player = BeamPlayer(depth=depth, width=width)
    for _ in range(6):
        game.run(player.act(game).masks)
        to_spawn(game)
    w = Weights().scaled(0.5)
    lines: list[tuple[float, float, int, engine.Game]] = [(0.0, 0.0, -1, game)]
    for d in range(depth):
        ranked = []
        for _, t0, first, g in lines:
            e = _core.expand(g, taps_only=d > 0 or player.taps_only, max_settle=MAX_SETTLE_FRAMES)
            t = t0 + (e.lock_frames + e.settle_frames).astype(np.float64)
            v = leaf_values(e.fields, e.viruses, e.phases, t, w)
            assert not (np.asarray(e.phases) == STAGE_CLEAR).any()
            for j in np.flatnonzero(np.asarray(e.phases) == PLAYING):
                board = np.asarray(e.fields)[j].tobytes()
                ranked.append((v[j], t[j], int(j) if first < 0 else first, e.child(int(j)), board))
        ranked.sort(key=lambda c: -c[0])
        lines, seen = [], set()
        for v_, t_, first, g, board in ranked:
            if board not in seen and len(lines) < width:
                seen.add(board)
                lines.append((v_, t_, first, g))
    best: dict[int, float] = {}
    for v_, _, first, _ in lines:
        best[first] = max(best.get(first, -np.inf), v_)
    root, k, values = BeamPlayer(depth=depth, width=width).search(game, margin=30.0)
    assert k == player.choose(game)[1] == lines[0][2]
    assert int(np.argmax(values)) == k
    assert len(best) >= 2  # the test sees a child with a line beside the chosen one
    for j, v_ in best.items():
        assert values[j] == pytest.approx(v_, abs=1e-9)
    t = (root.lock_frames + root.settle_frames).astype(np.float64)
    leaf = leaf_values(root.fields, root.viruses, root.phases, t, w)
    live = np.asarray(root.phases) == PLAYING
    others = [j for j in np.flatnonzero(live) if j not in best]
    assert others
    for j in others:
        assert values[j] == pytest.approx(values[k] - 30.0 - (leaf[live].max() - leaf[j]))
