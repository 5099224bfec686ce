"""``hil run --sim``: the whole loop against the simulated console (the engine on the firmware's
C core behind a pty, pictures through a capture profile).

The module constants below say what is played. Until perception's and the policy's ONNX models
are on main they are the oracle reader, the heuristic stand-in policy, one low level and a
small picture with the timing of a cheap USB MJPEG stick (3 frames of latency, 2 ms jitter,
drops and repeats, MJPEG, noise), so the tests stay quick. The full CI run of issue 8 is a
matter of switching them to the FULL_CI_* values (docs/RUN.md, "The CI run").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hil.runtime import LevelPlan, RunSettings, SimOptions, run_sim

# What CI plays once the ONNX reader and policy land (issue 8): 5 seeded levels spanning 0-20
# on all three speeds, each to stage clear, in lockstep through the shipped 720p MJPEG profile,
# and one whole level in real time.
FULL_CI_LEVELS = [(0, 0, 0x8988), (5, 1, 0x1234), (10, 2, 0x4321), (15, 0, 0x2222), (20, 1, 0x0777)]
FULL_CI_PROFILE = "mjpeg_720p_q70"
FULL_CI_READER = "onnx"
FULL_CI_POLICY = "onnx"
FULL_CI_REAL_TIME_FRAMES = None  # the whole level

LEVELS = [(0, 2, 0x8988)]  # (level, speed, seed)
PROFILE = None  # None: SMALL_MJPEG below
READER = "oracle"
POLICY = "heuristic"
REAL_TIME_FRAMES: int | None = 720  # console frames of the real-time run (None: a level)

SMALL_MJPEG = {
    "name": "small_mjpeg_test",
    "geometry": {"width": 320, "height": 240, "scale_x": 1.25, "scale_y": 1.0, "offset_x": 0.0},
    "color": {"range": "limited", "gamma": 1.05},
    "artifacts": {"noise": 1.5, "jpeg_quality": 70},
    "timing": {
        "capture_hz": 60.0,
        "latency_frames": 3.0,
        "jitter_ms": 2.0,
        "drop_rate": 0.002,
        "repeat_rate": 0.002,
    },
}


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory) -> str:
    if PROFILE is not None:
        return PROFILE
    path = tmp_path_factory.mktemp("profile") / "small_mjpeg_test.json"
    path.write_text(json.dumps(SMALL_MJPEG))
    return str(path)


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sim_fast_plays_levels_to_stage_clear_without_torch(tmp_path, profile_path):
    log = tmp_path / "run.jsonl"
    levels = ",".join(f"{lv}:{sp}" for lv, sp, _ in LEVELS)
    seeds = ",".join(str(seed) for _, _, seed in LEVELS)
    argv = [
        "run", "--fast", "--levels", levels, "--seed", seeds, "--profile", profile_path,
        "--view", "none", "--reader", READER, "--policy", POLICY, "--log", str(log),
        "--frames", str(40_000 * len(LEVELS)), "--record", str(tmp_path / "rec"),
    ]  # fmt: skip
    code = (
        "import sys, json\n"
        "from hil.cli import main\n"
        f"rc = main({argv!r})\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')\n"
        "             or m.endswith('.train') or m.startswith('onnx.'))\n"
        "print('MODULES', json.dumps(bad))\n"
        "sys.exit(rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    stdout = out.stdout
    modules = json.loads(stdout[stdout.rindex("MODULES") + 7 :])
    assert modules == []  # the runtime imports neither torch nor training code
    summary = json.loads(stdout[stdout.index("{") : stdout.rindex("MODULES")])
    assert summary["levels_cleared"] == summary["levels_played"] == len(LEVELS)
    assert [(r["level"], r["speed"]) for r in summary["levels"]] == [(a, b) for a, b, _ in LEVELS]
    assert summary["desyncs"] == 0 and summary["late_schedules"] == 0
    assert summary["underruns"] == 0 and summary["watchdog_trips"] == 0
    assert summary["decisions"] == sum(r["pills"] for r in summary["levels"]) > 0
    assert 0 < summary["peak_rss_mb"] < 600
    lat = summary["capture_latency_frames"]
    assert 3.0 <= lat["p50"] <= 4.5  # 3 frames + sampling + jitter, as the profile says
    events = read_log(log)
    names = [e["event"] for e in events]
    for name in ("run_start", "link_up", "start_pressed", "level_start", "spawn", "plan"):
        assert name in names
    assert names.count("stage_clear") == len(LEVELS) and names[-1] == "summary"
    assert events[-1]["levels_cleared"] == len(LEVELS)
    plans = [e for e in events if e["event"] == "plan"]
    assert all(p["first_frame"] <= p["lock_frame"] for p in plans)
    # The raw capture was recorded, with what was read off each frame.
    from hil.recording import Recording

    recorded = list(Recording(tmp_path / "rec").frames())
    assert len(recorded) == summary["captured_frames"]
    assert recorded[-1][1]["observation"]["kind"] == "STAGE_CLEAR"


def unplug_at(unplug: int, replug: int | None):
    """An on_frame hook pulling the controller's cable at captured frame ``unplug``."""
    seen: dict[str, int] = {}

    def hook(rt, frame):
        console = rt.source.console
        if frame.index == unplug:
            console.unplug()
            seen["unplug"] = console.frame
        if replug is not None and frame.index == replug:
            console.replug()
            seen["replug"] = console.frame

    return hook, seen


def test_an_unplugged_controller_is_released_and_reconnected(tmp_path, profile_path):
    log = tmp_path / "unplug.jsonl"
    hook, seen = unplug_at(420, 520)
    said: list[str] = []
    settings = RunSettings(levels=[LevelPlan(0, 2)], fast=True, max_frames=8000)
    summary, console = run_sim(
        settings,
        SimOptions(profile=profile_path),
        reader=READER,
        policy=POLICY,
        log_path=log,
        on_frame=hook,
        say=said.append,
    )
    assert summary["link_losses"] == 1
    assert any("lost" in m and "reconnecting" in m for m in said)
    names = [e["event"] for e in read_log(log)]
    assert names.count("link_up") == 2 and "link_reconnect_attempt" in names
    renumbered = [e for e in read_log(log) if e["event"] == "frames_renumbered"]
    assert renumbered and renumbered[0]["shift"] == seen["replug"]
    # Released: once the firmware's watchdog (500 ms = 30 frames) saw the host gone, the
    # console read no buttons until the controller came back.
    assert set(console.masks[seen["unplug"] + 31 : seen["replug"]]) == {0}
    # Nothing lost: the level is played on after the reconnection, in step.
    assert summary["levels_cleared"] == 1 and summary["desyncs"] == 0


def test_a_controller_that_stays_away_ends_the_run_with_a_summary(tmp_path, profile_path):
    log = tmp_path / "gone.jsonl"
    hook, _ = unplug_at(300, None)
    settings = RunSettings(
        levels=[LevelPlan(0, 2)], fast=True, max_frames=8000, reconnect_timeout_s=1.0
    )
    summary, _ = run_sim(
        settings, SimOptions(profile=profile_path), log_path=log, on_frame=hook, say=lambda m: None
    )
    events = read_log(log)
    names = [e["event"] for e in events]
    assert "link_lost" in names and "gave_up" in names and names[-1] == "summary"
    assert summary["link_losses"] == 1 and summary["levels_cleared"] == 0


def test_real_time_sim_keeps_in_step(profile_path):
    level, speed, seed = LEVELS[0]
    frames = REAL_TIME_FRAMES or 40_000
    settings = RunSettings(levels=[LevelPlan(level, speed)], fast=False, max_frames=frames)
    summary, console = run_sim(
        settings, SimOptions(profile=profile_path, seeds=[seed]), reader=READER, policy=POLICY
    )
    summary.pop("latency_ms")
    assert summary["decisions"] >= 2, summary
    assert summary["desyncs"] == 0 and summary["late_schedules"] == 0, summary
    if REAL_TIME_FRAMES is None:
        assert summary["levels_cleared"] == 1, summary
    else:
        assert summary["console_frames"] >= REAL_TIME_FRAMES - 20
    assert summary["capture"]["realtime"] and summary["capture"]["delivered"] > 600
    # Real time: the console ran at 60.0988 Hz while the runtime handled the captures.
    assert summary["wall_s"] >= summary["console_frames"] / 60.0988 * 0.95


def test_bench_and_latency_calibration_print_json(profile_path):
    bench = subprocess.run(
        [sys.executable, "-m", "hil.cli", "bench", "--frames", "420", "--speed", "2",
         "--profile", profile_path, "--reader", "oracle"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-2000:]
    report = json.loads(bench.stdout)
    for key in ("capture_to_observation_ms", "spawn_to_wire_ms"):
        assert report[key]["median"] <= report[key]["p99"]
    assert report["goal"]["p99_ms"] == 8.0
    cal = subprocess.run(
        [sys.executable, "-m", "hil.cli", "calibrate", "latency", "--fast", "--presses", "8",
         "--profile", profile_path, "--reader", "oracle"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert cal.returncode == 0, cal.stderr[-2000:]
    result = json.loads(cal.stdout)
    assert result["presses"] == 8
    # The smallest sample is the latency (3 frames) plus a little sampling delay.
    assert 3.0 <= result["latency_frames"] < 3.7
