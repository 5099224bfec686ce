"""The simulated console plays the game's level flow (engine.LevelFlow, docs/LEVEL_FLOW.md), and
`hil run --fast` plays it: the intro drawn virus by virus after Start, the tracker taking the
level start from those pictures, and a stage clear chained by Start to level + 1 at the same
speed with the score carried (the seed of the next level is where the last intro left the RNG)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import engine
from calibration import Profile
from hil.loop.runtime import LevelPlan
from hil.play import RunRequest, run

SMALL = {
    "name": "small_level_flow_test",
    "geometry": {"width": 320, "height": 240, "scale_x": 1.25, "scale_y": 1.0, "offset_x": 0.0},
    "color": {"range": "limited", "gamma": 1.05},
    "artifacts": {"noise": 1.5, "jpeg_quality": 70},
    "timing": {"capture_hz": 60.0, "latency_frames": 3.0, "jitter_ms": 2.0},
}


@pytest.fixture(scope="module")
def chained_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("profile") / "small.json"
    path.write_text(json.dumps(SMALL))
    log = path.parent / "run.jsonl"
    pictures: dict[int, int] = {}  # console frame -> viruses drawn in its picture

    def look(rt, frame):
        g = frame.truth["sim_frame"]
        facts = frame.truth["facts"]
        cells = np.asarray(facts.bottle) if facts is not None else None
        pictures[g] = -1 if cells is None else int(((cells & 0xF0) == 0xD0).sum())

    request = RunRequest(
        "sim",
        [LevelPlan(0, 1), LevelPlan(1, 1)],
        Profile.load(str(path)),
        lockstep=True,
        reader="oracle",
        policy="heuristic",
        max_frames=9000,
        seeds=[0x8988],
        console_seed=4,
    )
    summary, console = run(request, log_path=log, on_frame=look)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return summary, console, events, pictures


def test_two_levels_chained_by_start_in_step(chained_run):
    summary, console, events, _ = chained_run
    assert summary["levels_cleared"] == summary["levels_played"] == 2, summary
    assert summary["desyncs"] == 0 and summary["late_schedules"] == 0
    assert [(lv["desyncs"], lv["resyncs"]) for lv in summary["levels"]] == [(0, 0), (0, 0)]
    # The log's summary is the one returned (and printed), the console's section included.
    logged = [e for e in events if e["event"] == "summary"][-1]
    assert logged["sim"]["levels"] and logged["levels"] == summary["levels"]
    first, second = console.records
    assert (second.spec.level, second.spec.speed) == (1, 1)
    # The game's chain: the next level is made from the RNG where level 0's intro left it.
    assert second.spec.seed == engine.generate_level(0, 0x8988)["rng_after"]
    # Start was read by the stage clear's loop, 97 frames after the level's last step at the
    # earliest (checkVirusLeft), and no reset was needed.
    assert second.start_press >= first.end_frame - 1 + 97
    assert "console_reset" not in [e["event"] for e in events]
    # The tracker found each level's State 0 on the frame the console showed it.
    starts = [e["frame"] for e in events if e["event"] == "level_start"]
    assert starts == [first.start_frame, second.start_frame]


def test_the_intro_is_drawn_one_virus_a_frame(chained_run):
    _, console, _, pictures = chained_run
    rec = console.records[0]
    seen = sorted((g, n) for g, n in pictures.items() if rec.start_press < g <= rec.start_frame)
    counts = [n for _, n in seen if n >= 0]
    assert counts and counts[-1] == 4 and min(counts) == 0
    for (g0, n0), (g1, n1) in zip(seen, seen[1:], strict=False):
        if n0 >= 0 and n1 >= 0:
            assert 0 <= n1 - n0 <= g1 - g0  # never more than one new virus a frame


def test_a_starved_realtime_capture_drops_frames_the_console_no_longer_holds():
    """A capture thread that falls further behind than the console keeps pictures (a loaded
    host) drops those frames, as a capture card does, instead of dying on a KeyError."""
    from calibration import Profile
    from hil.consoles.sim import PICTURES_KEPT, SimConsole, SimLevel

    console = SimConsole(
        [SimLevel(4, 2, 0x8988)],
        Profile.load("ideal_720p_nearest"),
        realtime=True,
        pad=lambda g: 0,
    )
    try:
        # Run the console ahead of the host clock: frames 0..99 are gone before the capture
        # thread (started by the first newest()) reads its first frame.
        console.run_to_frame(PICTURES_KEPT + 100)
        assert not console.holds_picture(0) and console.holds_picture(PICTURES_KEPT + 99)
        frame = console.capture.newest(timeout_s=10.0)
        assert frame is not None
        assert frame.truth["sim_frame"] >= 100
        assert console.capture.skipped >= 100
    finally:
        console.close()


def test_each_level_result_counts_its_own_desyncs():
    """A level's entry in the summary has the desyncs and re-syncs made while it was played,
    not the run's running totals."""
    from types import SimpleNamespace

    from hil.loop.levels import Levels
    from hil.loop.runtime import LevelPlan
    from hil.loop.tracker import LevelState

    class Log:
        def write(self, event, **data):
            pass

    levels = Levels([LevelPlan(5, 1), LevelPlan(6, 1)], Log())
    tracker = SimpleNamespace(state=LevelState.ENDED, desyncs=3, resyncs=2, lv=None)
    tracker.lv = SimpleNamespace(
        level=5, speed=1, result="stage_clear", base=100, fc0=4, decided_spawn=40
    )
    levels.started()
    assert levels.next_due(5000, tracker, 100) is None  # the end is recorded; Start waits
    tracker.desyncs, tracker.resyncs = 4, 2
    levels.started()
    tracker.state = LevelState.TRACKING  # level 6 in play when the run is interrupted
    levels.finish(tracker, 6000, "interrupted")
    assert [(r["level"], r["desyncs"], r["resyncs"]) for r in levels.results] == [
        (5, 3, 2),
        (6, 1, 0),
    ]


def test_a_level_played_out_to_reach_the_options_screen_takes_no_listed_seed(tmp_path):
    """Level 0 twice: after the first clear, Start chains level 1, which the loop plays out to a
    game over to get back to the options screen; the second level 0 still gets the second seed
    (it took the third, the cycled first, when the chained level counted as one of the list)."""
    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL))
    request = RunRequest(
        "sim",
        [LevelPlan(0, 1), LevelPlan(0, 1)],
        Profile.load(str(path)),
        lockstep=True,
        reader="oracle",
        policy="heuristic",
        max_frames=20000,
        seeds=[0x8988, 0x1234],
        console_seed=4,
    )
    summary, console = run(request)
    assert summary["levels_cleared"] == summary["levels_played"] == 2, summary
    played = [(r.spec.level, r.spec.seed) for r in console.records]
    assert played[0] == (0, 0x8988) and played[-1] == (0, 0x1234), played
    assert any(level == 1 for level, _ in played[1:-1]), played  # the chain it played out
    assert console.levels_begun == 2 and console.finished


def test_each_level_records_what_real_time_cost_while_it_was_played():
    """A level's record has the growth of the run's counters while it was played (late
    schedules, underruns, stalls, ...) and its own pills' margins and longest stall."""
    from types import SimpleNamespace

    from hil.loop.levels import Levels
    from hil.loop.runtime import LevelPlan
    from hil.loop.stats import margin_summary
    from hil.loop.tracker import LevelState

    class Log:
        def write(self, event, **data):
            pass

    run = {"underruns": 2, "stalls": 1}
    margins: list[int] = [5]
    stalls = [{"ms": 30.0, "where": "read", "cpu_ms": 4.0}]

    def costs():
        return {
            **run,
            "_margins": len(margins),
            "margin": lambda b: margin_summary(margins[b.get("_margins", 0) :]),
            "_stalls": len(stalls),
            "longest_stall": lambda b: max(
                stalls[b.get("_stalls", 0) :], key=lambda x: x["ms"], default=None
            ),
        }

    levels = Levels([LevelPlan(5, 1), LevelPlan(6, 1)], Log(), costs=costs)
    tracker = SimpleNamespace(state=LevelState.TRACKING, desyncs=0, resyncs=0, lv=None)
    tracker.lv = SimpleNamespace(
        level=5, speed=1, result="stage_clear", base=100, fc0=4, decided_spawn=40
    )
    levels.started()
    run.update(underruns=5, stalls=3)
    margins += [12, -2, 30]
    stalls += [{"ms": 20.0, "where": "tracker", "cpu_ms": 18.0}]
    tracker.state = LevelState.ENDED
    levels.next_due(5000, tracker, 100)
    rec = levels.results[0]
    assert rec["underruns"] == 3 and rec["stalls"] == 2
    assert rec["margin"] == {"n": 3, "min": -2, "p1": -1.7, "p50": 12.0}
    assert rec["longest_stall"] == {"ms": 20.0, "where": "tracker", "cpu_ms": 18.0}
    assert "_margins" not in rec and "_stalls" not in rec
