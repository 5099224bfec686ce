"""``hil run --sim``: the whole loop against the simulated console (the engine on the firmware's
C core behind a pty, pictures through a capture profile).

The CI run of issue 8 (docs/RUN.md, "The CI run"): 5 seeded levels spanning levels 0-20 and all
three speeds, each to stage clear, in lockstep through the shipped 720p MJPEG profile (3 frames of
latency, 2 ms jitter, drops and repeats, noise) with perception's ONNX reader and the ONNX
policy, in two processes side by side (the machine's two cores); and one whole level in real
time. The link tests use a small picture and the oracle reader: they are about the serial link.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from calibration import Profile
from hil.loop.runtime import LevelPlan
from hil.play import RunRequest, run

# (level, speed, seed): training-range seeds the shipped policy clears (policy.eval measures its
# clear rate on held-out seeds; this run is about the stack keeping in step), two groups played
# by two `hil run` processes at once, 13,000-16,000 console frames each.
GROUPS = [
    [(0, 0, 0x8988), (5, 1, 0x6666), (15, 2, 0x7A7A)],
    [(10, 2, 0x2222), (20, 2, 0x1234)],
]
PROFILE = "mjpeg_720p_q70"
READER = "onnx"
POLICY = "onnx"
REAL_TIME_LEVEL = (0, 2, 0x8988)


@pytest.fixture(scope="module")
def profile_path(small_profile: str) -> str:
    return small_profile


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def start_run(levels, log: Path, record: Path | None) -> subprocess.Popen:
    """`hil run --fast` of ``levels`` in a fresh interpreter that then lists the modules it
    imported that the runtime must not (torch, training code)."""
    argv = [
        "run", "--fast", "--levels", ",".join(f"{lv}:{sp}" for lv, sp, _ in levels),
        "--seed", ",".join(str(seed) for _, _, seed in levels), "--profile", PROFILE,
        "--view", "none", "--reader", READER, "--policy", POLICY, "--log", str(log),
        "--frames", str(40_000 * len(levels)),
    ] + (["--record", str(record)] if record is not None else [])  # fmt: skip
    code = (
        "import sys, json\n"
        "from hil.cli import main\n"
        f"rc = main({argv!r})\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')\n"
        "             or m.endswith('.train') or m.startswith('onnx.'))\n"
        "print('MODULES', json.dumps(bad))\n"
        "sys.exit(rc)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def check_run(proc: subprocess.Popen, levels, log: Path) -> dict:
    stdout, stderr = proc.communicate()
    assert proc.returncode == 0, stderr[-2000:]
    modules = json.loads(stdout[stdout.rindex("MODULES") + 7 :])
    assert modules == []  # the runtime imports neither torch nor training code
    summary = json.loads(stdout[stdout.index("{") : stdout.rindex("MODULES")])
    assert summary["reader"] == "onnx" and summary["policy"] == "onnx"
    assert [(r["level"], r["speed"]) for r in summary["levels"]] == [(a, b) for a, b, _ in levels]
    assert [r["result"] for r in summary["levels"]] == ["stage_clear"] * len(levels), summary
    assert summary["levels_cleared"] == summary["levels_played"] == len(levels)
    assert summary["desyncs"] == 0 and summary["late_schedules"] == 0, summary
    assert summary["underruns"] == 0 and summary["watchdog_trips"] == 0
    assert summary["decisions"] == sum(r["pills"] for r in summary["levels"]) > 0
    assert 0 < summary["peak_rss_mb"] < 600
    assert summary["sim"]["profile"] == PROFILE
    lat = summary["capture_latency_frames"]
    assert 3.0 <= lat["p50"] <= 4.5  # 3 frames + sampling + jitter, as the profile says
    # Every capture's frame (the console's truth) lies among the frames the clock gave it.
    assert summary["shown_frames_checked"] >= summary["captured_frames"] // 2 > 0, summary
    assert summary["shown_frames_outside"] == 0, summary
    events = read_log(log)
    names = [e["event"] for e in events]
    for name in ("run_start", "link_up", "start_pressed", "level_start", "spawn", "plan"):
        assert name in names
    assert names.count("stage_clear") == len(levels) and names[-1] == "summary"
    assert events[-1]["levels_cleared"] == len(levels)
    assert events[-1]["capture"]["width"] == 1280 and events[-1]["capture"]["height"] == 720
    plans = [e for e in events if e["event"] == "plan"]
    assert all(p["first_frame"] <= p["lock_frame"] for p in plans)
    return summary


@pytest.mark.long
def test_sim_fast_plays_five_levels_to_stage_clear_with_onnx_models(tmp_path):
    logs = [tmp_path / f"run{k}.jsonl" for k in range(len(GROUPS))]
    record = tmp_path / "rec"
    procs = [
        start_run(group, log, record if k == 0 else None)
        for k, (group, log) in enumerate(zip(GROUPS, logs, strict=True))
    ]
    try:
        summaries = [check_run(p, g, log) for p, g, log in zip(procs, GROUPS, logs, strict=True)]
    finally:
        for p in procs:  # a failed check leaves the other process and its pipes open
            if p.poll() is None:
                p.kill()
            for pipe in (p.stdout, p.stderr):
                if pipe is not None:
                    pipe.close()
            p.wait()
    played = [(r["level"], r["speed"]) for s in summaries for r in s["levels"]]
    assert {lv for lv, _ in played} >= {0, 20} and {sp for _, sp in played} == {0, 1, 2}
    assert sum(len(s["levels"]) for s in summaries) >= 5
    # The raw capture was recorded, with what was read off each frame.
    from hil.loop.recording import Recording

    count, last = 0, None
    for _image, meta in Recording(record).frames():  # one 720p frame at a time
        count, last = count + 1, meta
    assert count == summaries[0]["captured_frames"]
    assert last is not None and len(last["observation"]["field"]) == 16


def unplug_at(unplug: int, replug: int | None):
    """An on_frame hook pulling the controller's cable at captured frame ``unplug``."""
    seen: dict[str, Any] = {}

    def hook(rt, frame):
        console = rt.source.console
        if frame.index == unplug:
            console.unplug()
            seen["unplug"] = console.frame
        if replug is not None and frame.index == replug:
            console.replug()
            seen["replug"] = console.frame
            # what the console read while away, taken now: it keeps only the last minute
            away = range(seen["unplug"] + 31, seen["replug"])
            seen["read_while_away"] = {console.masks.get(f, -1) for f in away}

    return hook, seen


def test_an_unplugged_controller_is_released_and_reconnected(tmp_path, profile_path):
    log = tmp_path / "unplug.jsonl"
    hook, seen = unplug_at(420, 520)
    said: list[str] = []
    request = RunRequest(
        "sim",
        [LevelPlan(0, 2)],
        Profile.load(profile_path),
        lockstep=True,
        reader="oracle",
        policy="heuristic",
        max_frames=8000,
    )
    summary, console = run(request, log_path=log, on_frame=hook, say=said.append)
    assert summary["link_losses"] == 1
    assert any("lost" in m and "reconnecting" in m for m in said)
    names = [e["event"] for e in read_log(log)]
    assert names.count("link_up") == 2 and "link_reconnect_attempt" in names
    renumbered = [e for e in read_log(log) if e["event"] == "frames_renumbered"]
    assert renumbered and renumbered[0]["shift"] == seen["replug"]
    # Released: once the firmware's watchdog (500 ms = 30 frames) saw the host gone, the
    # console read no buttons until the controller came back.
    assert seen["read_while_away"] == {0}
    # Nothing lost: the level is played on after the reconnection, in step.
    assert summary["levels_cleared"] == 1 and summary["desyncs"] == 0


def test_a_controller_that_stays_away_ends_the_run_with_a_summary(tmp_path, profile_path):
    log = tmp_path / "gone.jsonl"
    hook, _ = unplug_at(300, None)
    request = RunRequest(
        "sim",
        [LevelPlan(0, 2)],
        Profile.load(profile_path),
        lockstep=True,
        max_frames=8000,
        tuning={"reconnect_timeout_s": 1.0},
    )
    summary, _ = run(request, log_path=log, on_frame=hook, say=lambda m: None)
    events = read_log(log)
    names = [e["event"] for e in events]
    assert "link_lost" in names and "gave_up" in names and names[-1] == "summary"
    assert summary["link_losses"] == 1 and summary["levels_cleared"] == 0


def test_real_time_sim_plays_a_level_in_step():
    level, speed, seed = REAL_TIME_LEVEL
    request = RunRequest(
        "sim",
        [LevelPlan(level, speed)],
        Profile.load(PROFILE),
        seeds=[seed],
        reader=READER,
        policy=POLICY,
        max_frames=20_000,
    )
    summary, console = run(request)
    summary.pop("latency_ms")
    assert summary["levels_cleared"] == 1, summary
    assert summary["desyncs"] == 0, summary
    # In real time the host must keep up: on a machine whose cores the other test workers
    # (pytest -n auto) and their subprocesses keep busy, a plan can still reach the firmware
    # after its first frame's latch now and then (measured at load 10-20: 1 per level); the
    # runtime logs it and plays on in step, which is what this test is about.
    assert summary["late_schedules"] <= 2, summary
    assert summary["capture"]["realtime"] and summary["capture"]["delivered"] > 600
    # Real time: the console ran at 60.0988 Hz while the runtime handled the captures.
    assert summary["wall_s"] >= summary["console_frames"] / 60.0988 * 0.95


@pytest.mark.long
def test_real_time_level_start_finds_the_frame_and_phase_then_stays_in_step(tmp_path):
    """Real time, level 20 HI: the alignment finds the level's base frame and its
    frameCounter phase mod 16 up to the shift of 8 no pixel reader can see
    (hil.loop.observation.VirusAnimation), and the level is then tracked with no slip or
    desync. While the runtime read the link only once per captured frame, the frame clock
    was ~2 ms late and 9 of 10 such runs chose a phase one off (12-19 desyncs in 900
    frames). Long: real time on a shared machine is load-sensitive, so it runs alone."""
    log = tmp_path / "run.jsonl"
    request = RunRequest(
        "sim",
        [LevelPlan(20, 2)],
        Profile.load(PROFILE),
        seeds=[0x8000],
        reader=READER,
        policy=POLICY,
        max_frames=900,
    )
    summary, console = run(request, log_path=log)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    start = next(e for e in events if e["event"] == "level_start")
    truth = console.report()["sim"]["levels"][0]
    assert start["frame"] == truth["start_frame"], (start, truth)
    assert (start["frame_counter_mod16"] - truth["frame_counter_mod16"]) % 8 == 0, (start, truth)
    assert summary["decisions"] >= 8, summary
    assert summary["desyncs"] == 0 and summary["timing_slips"] == 0, summary
    # The clock mapping is never early (no STATUS is read before it was sent) and every
    # capture's frame is among its candidates.
    assert summary["clock_error_ms"]["min"] > -0.01, summary["clock_error_ms"]
    assert summary["shown_frames_checked"] > 0 and summary["shown_frames_outside"] == 0, summary


def test_bench_and_latency_calibration_print_json(profile_path):
    bench = subprocess.run(
        [sys.executable, "-m", "hil.cli", "bench", "--frames", "420", "--levels", "0:2",
         "--profile", profile_path, "--reader", "oracle"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-2000:]
    report = json.loads(bench.stdout)
    for key in ("capture_to_observation_ms", "spawn_to_wire_ms"):
        assert report[key]["median"] <= report[key]["p99"]
    assert report["goal"]["p99_ms"] == 8.0
    assert report["settings"]["levels"] == [[0, 2]]
    cal = subprocess.run(
        [sys.executable, "-m", "hil.cli", "calibrate", "latency", "--fast", "--presses", "8",
         "--profile", profile_path, "--reader", "oracle", "--no-write"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert cal.returncode == 0, cal.stderr[-2000:]
    result = json.loads(cal.stdout)
    assert result["presses"] == 8
    # The smallest sample is the latency (3 frames) plus a little sampling delay.
    assert 3.0 <= result["latency_frames"] < 3.7
