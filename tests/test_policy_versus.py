"""policy.versus: seeded two-player matches between placement policies (docs/VERSUS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import engine
from policy.versus import Config, Match, main, make_player, matches, play_match, run_matches

DO_NOTHING = 4
# Small, fast matches: level 3 (16 viruses), HI.
CFG = Config("greedy", "greedy", strength1=3)


def attack_columns(size: int, frame_counter: int) -> list[int]:
    """checkReleaseAttack [$9C1B]'s top-row columns (tests/test_engine_versus.py)."""
    c = frame_counter & (1 if size >= 4 else 3)
    return [c + k * (4 if size == 2 else 2) for k in range(min(size, 4))]


def test_match_is_deterministic_and_the_winner_has_three_victories() -> None:
    ms = matches(3, 2, 3, 2, 2, 0x8000)
    a = run_matches(ms, CFG, progress=False)
    b = run_matches(ms[1:], CFG, progress=False)  # a match alone plays as in a run
    assert [m.as_dict() for m in a[1:]] == [m.as_dict() for m in b]
    for m in a:
        assert m.winner in (1, 2) and m.victories[m.winner - 1] == 3
        assert m.victories[2 - m.winner] < 3
        assert sum(r.winner == m.winner for r in m.rounds) == 3
        assert all(r.end in ("clear", "top-out", "draw") for r in m.rounds)
    # another seed range plays other matches
    c = run_matches(matches(3, 2, 3, 2, 1, 0x9000), CFG, progress=False)
    assert c[0].as_dict()["rounds"] != a[0].as_dict()["rounds"]


def test_ray_workers_play_the_same_matches() -> None:
    pytest.importorskip("ray")  # the train extra; CI installs it
    ms = matches(3, 2, 3, 2, 2, 0x8000)
    a = run_matches(ms, CFG, workers=1, progress=False)
    b = run_matches(ms, CFG, workers=2, progress=False)
    assert [m.as_dict() for m in a] == [m.as_dict() for m in b]


def test_attacks_counted_are_the_engines_releases() -> None:
    """Each release seen independently (the receiver's checkAttack turning into pillPlaced,
    the size the sender held at the receiver's pass, from a copy of the frame with the
    receiver's pass skipped) is counted once, with its halves in the garbage's columns."""
    seen = [[0, 0], [0, 0]]  # per sender: attacks, halves

    def on_step(before: engine.Versus, after: engine.Versus) -> None:
        for recv in range(2):
            if int(before.player(recv).next_action) != 2:
                continue
            if int(after.player(recv).next_action) != 1:
                continue
            send = 1 - recv
            if recv == 0:
                n = int(before.p2.attack_size)  # p2's pass runs after p1's
            else:
                probe = before.clone()
                probe.p2.next_action[()] = DO_NOTHING
                probe.step(int(before.p1.btns_held), 0)
                n = int(probe.p1.attack_size)
                colours = list(probe.p1.attack_colors)
            if recv == 0:
                colours = list(before.p2.attack_colors)
            assert n >= 2
            k = min(n, 4)
            top = np.asarray(after.player(recv).field)[:8]
            for i, col in enumerate(attack_columns(k, int(after.frame_counter))):
                assert top[col] == 0x80 | colours[i]
            seen[send][0] += 1
            seen[send][1] += k

    players = [make_player("greedy", 5, CFG, Match(8, 1, 8, 1, 0x8010, 8), i) for i in range(2)]
    m = play_match(players, Match(8, 1, 8, 1, 0x8010, 8), on_step=on_step)
    counted = [
        [sum(r.attacks[i] for r in m.rounds), sum(r.halves[i] for r in m.rounds)] for i in range(2)
    ]
    assert counted == seen
    assert sum(s[0] for s in seen) >= 2  # the match had attacks to count


@pytest.mark.parametrize(
    "argv",
    [
        ["--p1", "nope"],
        ["--level1", "30"],
        ["--speed", "fast"],
        ["--strength2", "9"],
        ["--matches", "0"],
        ["--workers", "0"],
        ["--matches", "x"],
        ["--seed-start", "0x10000"],
    ],
)
def test_argument_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() and "Traceback" not in err


def test_cli_writes_table_json_and_png(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "vs"
    argv = ["--p1", "random", "--p2", "greedy", "--level1", "2", "--level2", "2", "--speed", "hi"]
    rc = main([*argv, "--matches", "1", "--workers", "1", "--no-progress", "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "versus.json").read_text())
    assert len(doc["matches"]) == 1 and doc["summary"]["players"][1]["name"] == "greedy"
    assert doc["matches"][0]["winner"] == 2  # random loses to greedy
    assert (out / "versus.png").stat().st_size > 1000
    out_text = capsys.readouterr().out
    assert "greedy" in out_text and "median frames a round" in out_text


def test_chain_lines_from_cells_removed_and_clear_rounds() -> None:
    from policy.search import attack_halves, chain_lines

    parent = np.full(128, 0xFF, np.uint8)
    parent[120:128] = 0xD0  # 8 viruses
    fields = np.repeat(parent[None], 5, axis=0)
    fields[1, 120:122] = 0xFF  # 2 gone, the pill's 2 halves landed: 2 removed, no line
    fields[1, 100:102] = 0x80
    fields[2, 120:124] = 0xFF  # 4 gone + the pill: 6 removed, 1 line
    fields[3, 120:128] = 0xFF  # 10 removed: 2 lines
    fields[4, 121:128] = 0xFF  # 9 removed, 3 chain rounds: 3 lines
    lines = chain_lines(parent, fields, [0, 0, 1, 1, 3])
    assert list(lines) == [0, 0, 1, 2, 3]
    assert list(attack_halves([0, 1, 2, 3, 4, 6])) == [0, 0, 2, 3, 4, 4]


def test_attack_search_without_bonus_is_the_search() -> None:
    from policy.play import to_spawn
    from policy.search import AttackSearch, SearchPlayer

    game = engine.Game(12, 1, 0x8020, 3)
    to_spawn(game)
    plain = SearchPlayer()
    for _ in range(4):  # a few spawns along the search's own game
        e, v = plain.search(game)
        _, va = AttackSearch(attack=0.0).search(game)
        assert np.array_equal(v, va)
        game.run(plain.act(game).masks)
        to_spawn(game)
