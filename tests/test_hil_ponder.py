"""Pondering in the live loop (hil.loop.ponder): pill N+1 decided during pill N's fall from the
shadow state, its masks sent before its spawn, and taken only when the tracker confirms the
spawn state; `hil run --fast` with and without it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine
from engine.placement import pill_falling
from hil.cli import main
from hil.loop.heuristic import HeuristicPolicy
from hil.loop.ponder import ponder
from hil.loop.runtime import EnginePlanner
from policy.play import COLOUR_PAIRS_ORDERED as PAIRS


def to_spawn(game: engine.Game) -> int:
    n = 0
    while not pill_falling(game):
        game.step(0)
        n += 1
    return n


@pytest.fixture(scope="module")
def decided():
    """A level-10 HI game at its first spawn and the heuristic's masks for that pill."""
    game = engine.Game(10, 2, 0x8988, frame_counter=7)
    to_spawn(game)
    planner, policy = EnginePlanner(), HeuristicPolicy()
    plan = planner(game, np.zeros(0, np.uint8))
    masks = np.asarray(plan.masks(policy.choose(game, plan.reachable)), np.uint8)
    return game, masks, planner, policy


def test_the_predicted_spawn_is_the_state_the_game_reaches(decided):
    game, masks, planner, policy = decided
    a = ponder(1, 1000, game, masks, planner, policy.choose)
    assert a is not None and a.pill == 2
    real = game.clone()
    real.run(masks)
    settle = to_spawn(real)
    assert a.spawn == 1000 + len(masks) + settle
    assert bytes(a.predicted.state_bytes()) == bytes(real.state_bytes())
    assert set(a.choices) == set(PAIRS)
    for idx, m in a.choices.values():  # each choice is the plan of its placement from the spawn
        plan = planner(real, np.zeros(0, np.uint8))
        assert np.array_equal(m, plan.masks(idx))
        assert np.array_equal(m[: len(a.common)], a.common)
    assert bytes(game.state_bytes()) != bytes(real.state_bytes())  # the input was not changed


def test_a_policys_choose_pairs_replaces_its_nine_choose_calls(decided):
    """ponder() asks a policy with choose_pairs for the 9 next pills at once and uses its
    answers as the choices; without it, choose() per pair."""
    game, masks, planner, policy = decided
    base = ponder(1, 0, game, masks, planner, policy.choose)
    asked = []

    def choose_pairs(state, reachable, pairs):
        asked.append(list(pairs))
        return {p: policy.choose(_with_next(state, p), reachable) for p in pairs}

    def refuse(state, reachable):
        raise AssertionError("choose() called although choose_pairs answered")

    a = ponder(1, 0, game, masks, planner, refuse, choose_pairs)
    assert asked == [list(PAIRS)]
    assert a is not None and base is not None
    assert {p: c[0] for p, c in a.choices.items()} == {p: c[0] for p, c in base.choices.items()}
    assert np.array_equal(a.common, base.common)


def _with_next(state, pair):
    h = state.clone()
    h.next_colors[:] = pair
    return h


def test_take_plays_the_choice_only_when_the_spawn_state_is_confirmed(decided):
    game, masks, planner, policy = decided
    a = ponder(1, 0, game, masks, planner, policy.choose)
    assert a is not None
    real = game.clone()
    real.run(masks)
    to_spawn(real)
    pair = (int(real.next_colors[0]), int(real.next_colors[1]))
    idx, m = a.choices[pair]
    played = {a.spawn + k: int(x) for k, x in enumerate(m)}
    got = a.take(real, 2, pair, lambda f: played.get(f, 0), a.spawn + 3)
    assert got is not None and got[0] == idx and got[2] == 3
    # the whole plan went out before the spawn and has played: taken, nothing left to send
    done = a.take(real, 2, pair, lambda f: played.get(f, 0), a.spawn + len(m) + 5)
    assert done is not None and done[0] == idx and done[2] == len(m)
    # not read, another spawn count, another board, a frame that pressed otherwise
    assert a.take(real, 2, None, played.get, a.spawn) is None
    assert a.take(real, 3, pair, played.get, a.spawn) is None
    other = real.clone()
    other.field[0] = 0xD1 if int(other.field[0]) != 0xD1 else 0xD2
    assert a.take(other, 2, pair, played.get, a.spawn) is None
    assert "predicted" in a.reason
    if any(int(x) for x in m[:4]):
        assert a.take(real, 2, pair, lambda f: 0, a.spawn + 4) is None
        assert "pressed otherwise" in a.reason


def test_hil_run_ponders_with_0_desyncs_and_reports_the_margin(tmp_path, capsys, small_profile):
    out = tmp_path / "s.json"
    rc = main(
        ["run", "--fast", "--view", "none", "--levels", "1:2", "--reader", "oracle",
         "--policy", "heuristic", "--log", str(tmp_path / "log.jsonl"), "--profile", small_profile]
    )  # fmt: skip
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    out.write_text(json.dumps(summary))
    p = summary["ponder"]
    assert summary["levels_cleared"] == 1 and summary["desyncs"] == 0
    assert summary["missed_decisions"] == 0 and summary["late_schedules"] == 0
    assert p["pondered"] > 0 and p["taken"] > 0 and p["whole_plan_before_spawn"] > 0
    assert p["taken"] + p["decided_at_spawn_instead"] <= p["pondered"]
    assert p["margin_frames"]["max"] > 0  # some pills went on the wire before their spawn
    at_spawn = p["margin_at_spawn_frames"]["n"] if p["margin_at_spawn_frames"] else 0
    assert p["margin_frames"]["n"] == p["taken"]  # each pondered plan taken has its margin
    assert p["margin_frames"]["n"] + at_spawn == summary["decisions"]


def test_no_ponder_decides_every_pill_at_its_spawn(tmp_path, capsys, small_profile):
    rc = main(
        ["run", "--fast", "--view", "none", "--levels", "1:2", "--reader", "oracle",
         "--policy", "heuristic", "--no-ponder", "--frames", "700", "--profile", small_profile]
    )  # fmt: skip
    assert rc in (0, 1)  # 700 frames: the level may not be over
    p = json.loads(capsys.readouterr().out)["ponder"]
    assert p["pondered"] == 0 and p["margin_frames"] is None
    assert p["margin_at_spawn_frames"]["max"] <= 0


def test_the_search_ponders_one_placement_for_every_next_pill(decided):
    """SearchPolicy.choose_pairs: the placement best on average over the 9 next pills, for
    all of them, even where each pair prefers another (here pair i prefers child i mod 2 by
    20 frames; child 2 is the best on average), so the pondered plan agrees and goes on the
    wire whole before the spawn."""
    from hil.loop.runtime import make_policy
    from policy.search import SearchPlayer

    game = decided[0]
    policy = make_policy("search")
    plan = engine.plan(game)
    placements = np.asarray(plan.placements[:3], np.int16)

    class Stub:
        mean_over_pairs = SearchPlayer.mean_over_pairs  # the real average over this stub's

        def search_pairs(self, g, pairs, first):
            class E:
                pass

            e = E()
            e.placements = placements
            out = {}
            for i, p in enumerate(pairs):
                v = np.zeros(3)
                v[i % 2] = 20.0
                v[2] = 11.5
                out[p] = v
            return e, out

    policy.player = Stub()
    got = policy.choose_pairs(game, plan.reachable, PAIRS)
    assert got == {p: int(placements[2]) for p in PAIRS}


def test_choices_that_differ_before_the_spawn_can_be_seen_are_committed_to_one(decided):
    """Nine choices that press otherwise within ``commit_frames`` of the spawn could only be
    told apart once the spawn is seen, too late to play them: the policy's choice over every
    next pill (``choose_mean``) is taken for all of them and the whole plan goes out before
    the spawn; choices that agree that long are kept as they are."""
    game, masks, planner, policy = decided
    plan = planner(_spawn_after(game, masks), np.zeros(0, np.uint8))
    reachable = np.flatnonzero(np.asarray(plan.reachable))
    far = [int(i) for i in reachable if len(plan.masks(int(i))) > 12]
    # Two placements whose plans part on their first frames, one chosen per next pill.
    a_idx = far[0]
    b_idx = next(i for i in far if plan.masks(i)[0] != plan.masks(a_idx)[0])

    def split(state, reach):
        return a_idx if int(state.next_colors[0]) == 0 else b_idx

    means: list[int] = []

    def mean(state, reach, pairs):
        means.append(len(pairs))
        return b_idx

    kept = ponder(1, 0, game, masks, planner, split, None, 0, mean)
    assert kept is not None and not kept.without_next and not kept.agreed and not means
    committed = ponder(1, 0, game, masks, planner, split, None, 9, mean)
    assert committed is not None and committed.without_next and means == [9]
    assert {c[0] for c in committed.choices.values()} == {b_idx}
    assert committed.agreed and np.array_equal(committed.common, plan.masks(b_idx))


def _spawn_after(game, masks):
    g = game.clone()
    g.run(masks)
    to_spawn(g)
    return g
