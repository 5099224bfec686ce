"""policy.search: the play-time search takes the clearing move, plays only planned placements,
and decides from what the player sees (never the engine's hidden pill reserve)."""

from __future__ import annotations

import numpy as np
import pytest

from policy.play import Episode, play, to_spawn
from policy.search import COLOUR_PAIRS, SearchPlayer
from policy.teacher import Teacher
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
