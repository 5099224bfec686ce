"""policy.eval: seeded, deterministic evaluation; the CLI writes its JSON and plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.eval import Config, evaluate, main, parse_levels, parse_speeds

CFG = Config(model=None, taps_only=True, max_frames=2500)


def test_evaluation_is_deterministic_for_its_seeds() -> None:
    a, rows_a = evaluate(["random", "greedy"], [20], [2], 2, CFG, progress=False)
    b, rows_b = evaluate(["random", "greedy"], [20], [2], 2, CFG, progress=False)
    assert a == b and rows_a == rows_b
    assert {r.seed for _, r in a} == {0x8000, 0x8002}
    # a different seed range plays different games
    c, _ = evaluate(["random"], [20], [2], 2, CFG, seed_start=0x9000, progress=False)
    assert [r for _, r in c] != [r for n, r in a if n == "random"]


def test_ray_workers_play_the_same_games() -> None:
    pytest.importorskip("ray")  # the train extra; CI installs it
    a, rows_a = evaluate(["random", "greedy"], [20], [2], 2, CFG, progress=False)
    b, rows_b = evaluate(["random", "greedy"], [20], [2], 2, CFG, workers=2, progress=False)
    assert a == b and rows_a == rows_b


def test_cli_writes_table_json_and_png(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "ev"
    args = ["--levels", "20", "--speeds", "hi", "--episodes", "1", "--policies", "random"]
    rc = main([*args, "--taps-only", "--max-frames", "2000", "--workers", "1", "--out", str(out)])
    assert rc == 0
    doc = json.loads((out / "eval.json").read_text())
    assert doc["summary"][0]["policy"] == "random" and len(doc["games"]) == 1
    assert (out / "eval.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "clear %" in printed and "p10" in printed
    # level 20 HI has a human record: a row of its own below the policies, in the JSON too
    assert doc["human_records"] == [
        {
            "policy": "human record",
            "level": 20,
            "speed": "hi",
            "seconds": 123.57,
            "median_frames": 7426.0,
        }
    ]
    assert "human record" in printed and "7426" in printed


def test_distribution_and_human_rows() -> None:
    """Each row has p10 <= median <= p90 over its cleared games; the human record is shown only
    for a (level, speed) the table has."""
    from policy.eval import human_rows

    _, rows = evaluate(["greedy"], [0], [2], 3, CFG, progress=False)
    (r,) = rows
    assert r["clear_rate"] > 0
    assert r["p10_frames"] <= r["median_frames"] <= r["p90_frames"]
    assert human_rows(rows) == []


def test_argument_parsing() -> None:
    assert parse_levels("0-3,20") == [0, 1, 2, 3, 20]
    assert parse_speeds("hi,low") == [0, 2]
    with pytest.raises(ValueError, match="0..24"):
        parse_levels("0-30")
    with pytest.raises(ValueError, match="low, med, hi"):
        parse_speeds("fast")


@pytest.mark.parametrize(
    ("policy", "sizes", "defaults", "given"),
    [
        ("search", ("beam3", "width3"), (12, 4), {"search_beam3": 8, "search_width3": 2}),
        ("beam", ("depth", "width"), (16, 80), {"beam_depth": 3, "beam_width": 5}),
    ],
)
def test_a_players_sizes_reach_it_and_are_checked(
    policy: str,
    sizes: tuple[str, str],
    defaults: tuple[int, int],
    given: dict[str, int],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    from policy.eval import make_policy
    from policy.play import Episode

    ep = Episode(20, 2, 0x8000, 0)
    shipped = make_policy(policy, CFG, ep)
    assert tuple(getattr(shipped, a) for a in sizes) == defaults
    chosen = make_policy(policy, Config(None, True, 2500, **given), ep)
    assert tuple(getattr(chosen, a) for a in sizes) == tuple(given.values())
    first, second = given
    flag = "--" + second.replace("_", "-")
    out = tmp_path / "ev"
    args = ["--levels", "0", "--speeds", "hi", "--episodes", "1", "--policies", policy]
    assert main([*args, flag, "1", "--workers", "1", "--out", str(out)]) == 0
    doc = json.loads((out / "eval.json").read_text())
    assert (doc["args"][first], doc["args"][second]) == (defaults[0], 1)
    assert doc["summary"][0]["policy"] == policy and doc["summary"][0]["clear_rate"] == 1.0
    with pytest.raises(SystemExit) as e:
        main(["--policies", policy, flag, "0", "--out", str(tmp_path)])
    assert e.value.code == 2 and f"{flag} must be >= 1" in capsys.readouterr().err


def test_the_beams_scale_reaches_it_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from policy.beam import BeamPlayer
    from policy.eval import make_policy
    from policy.play import Episode

    ep = Episode(20, 2, 0x8000, 0)
    shipped = make_policy("beam", CFG, ep)
    chosen = make_policy("beam", Config(None, True, 2500, beam_scale=0.7), ep)
    assert isinstance(shipped, BeamPlayer) and isinstance(chosen, BeamPlayer)
    assert (shipped.scale, chosen.scale) == (0.5, 0.7)
    out = tmp_path / "ev"
    args = ["--levels", "0", "--speeds", "hi", "--episodes", "1", "--policies", "beam"]
    sizes = ["--beam-depth", "2", "--beam-width", "2"]
    assert main([*args, *sizes, "--beam-scale", "0.7", "--workers", "1", "--out", str(out)]) == 0
    assert json.loads((out / "eval.json").read_text())["args"]["beam_scale"] == 0.7
    with pytest.raises(SystemExit) as e:
        main(["--policies", "beam", "--beam-scale", "0", "--out", str(tmp_path)])
    assert e.value.code == 2 and "--beam-scale must be > 0" in capsys.readouterr().err
