"""policy.ponder: the spawn state predicted during a pill's fall is the one the game reaches,
and the decision made ahead for the colours then on screen is the one the policy makes there."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from policy.play import Episode, Move, at_spawn, play, to_spawn
from policy.ponder import COLOUR_PAIRS_ORDERED, Ponder, play_pondered, predict
from policy.teacher import Teacher


def test_prediction_and_early_decision_equal_the_real_spawn() -> None:
    policy = Teacher(taps_only=True)  # reads the next pill's colours (its second ply)
    ponder = Ponder(policy)
    game = Episode(20, 2, 0x8000, 0).game()
    to_spawn(game)
    decision = policy.act(game)
    for _ in range(8):
        ahead = ponder.ahead(game, decision)
        assert sorted(ahead.decisions) == sorted(COLOUR_PAIRS_ORDERED)
        game.run(decision.masks)
        settle = to_spawn(game)
        assert at_spawn(game) and ahead.matches(game)
        assert ahead.window == len(decision.masks) + settle
        real = policy.act(game)
        early = ahead.decision(game.next_colors)
        assert early.placement == real.placement
        assert np.array_equal(early.masks, real.masks)
        decision = real
    # a different board is not the predicted one
    game.field[0] = 0xD0 if game.field[0] != 0xD0 else 0xD1
    assert not ahead.matches(game)


def test_pondered_game_is_the_played_game() -> None:
    ep = Episode(3, 2, 0x8010, 8)
    played = play(Teacher(taps_only=True), ep)
    st = play_pondered(Teacher(taps_only=True), ep)
    assert played.cleared and st.cleared
    assert st.frames == played.frames and len(st.margins) == played.pills - 1
    assert st.mismatches == 0
    assert all(m < w for m, w in zip(st.margins, st.windows, strict=True))


def test_a_decision_that_does_not_lock_is_refused() -> None:
    game = Episode(20, 2, 0x8000, 0).game()
    to_spawn(game)
    d = Teacher(taps_only=True).act(game)
    with pytest.raises(ValueError, match="did not lock"):
        predict(game, Move(d.placement, d.masks[:1]))
    # predict does not change the game it starts from
    before = game.state_bytes()
    predict(game, d)
    assert game.state_bytes() == before and int(game.phase) == int(engine.Phase.PLAYING)


def test_ponder_asks_a_policy_with_act_pairs_once_for_the_nine_pairs() -> None:
    """Ponder.ahead uses the policy's act_pairs (the search shares work between the pairs)
    instead of nine act calls, and its answers are the decisions."""
    teacher = Teacher(taps_only=True)

    class Shared:
        name = "shared"
        calls: list[list[tuple[int, int]]] = []

        def act(self, game: engine.Game) -> Move:
            raise AssertionError("act() called although act_pairs exists")

        def act_pairs(self, game, pairs):
            self.calls.append(list(pairs))
            out = {}
            for pair in pairs:
                h = game.clone()
                h.next_colors[:] = pair
                out[pair] = teacher.act(h)
            return out

    game = Episode(20, 2, 0x8002, 1).game()
    to_spawn(game)
    decision = teacher.act(game)
    shared = Shared()
    got = Ponder(shared).ahead(game, decision)
    want = Ponder(teacher).ahead(game, decision)
    assert shared.calls == [list(COLOUR_PAIRS_ORDERED)]
    assert {p: d.placement for p, d in got.decisions.items()} == {
        p: d.placement for p, d in want.decisions.items()
    }
