"""policy.bench: the timings it prints as JSON."""

from __future__ import annotations

import json

import pytest

from policy import bench
from policy.beam import BeamPlayer


def test_bench_times_the_beam_on_level20_states(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--states", "3", "--teacher-states", "0", "--beam-states", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["onnx_decision"]["n"] == 3
    shipped = BeamPlayer()
    assert report["beam"] == f"{shipped.depth} x {shipped.width}, scale 0.5"
    assert report["beam_states"] == 2 and report["beam_decision"]["n"] == 2
    assert report["beam_decision"]["min_ms"] > 0
    assert "teacher_decision" not in report


def test_bench_times_the_beam_along_its_own_games_with_and_without_its_cache() -> None:
    report = bench.beam_game_timings(1, depth=3, width=6)
    assert report["beam_game_size"] == "3 x 6, scale 0.5"
    n = report["beam_game_decision"]["n"]
    assert n > 40 and report["beam_game_decision_no_reuse"]["n"] == n  # a whole game
    assert report["beam_cache_hits"] > 0
    assert report["beam_cache_hits"] + report["beam_cache_misses"] <= n * (1 + 2 * 6)


def test_bench_rejects_a_negative_count() -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["--beam-states", "-1"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        bench.main(["--beam-games", "-1"])
    assert exc.value.code == 2
