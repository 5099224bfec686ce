"""``hil run --versus``: the bot as player 2 on controller port 2 against a scripted player 1 on
the simulated two-player console (hil.consoles.sim_versus), the loop's rounds and matches
counted from what it sees, and the attacks it receives tracked (engine.attack)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import engine
from hil.loop.levels import VersusScore


def hil(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hil.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_short_match_is_played_to_its_end_and_counted_as_the_console_played_it():
    """CI's short two-player match: level 0, lockstep, the ground-truth reader (the default
    for --versus while the shipped model does not read the two-player screen: it says so)."""
    run = hil(
        "run", "--versus", "--fast", "--profile", "ideal_720p_nearest",
        "--level", "0", "--speed", "1", "--p1", "greedy", "--frames", "20000", "--view", "none",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--versus reads with the simulated console's truth" in run.stderr
    s = json.loads(run.stdout)
    vs, truth = s["versus"], s["sim"]["rounds"]
    assert vs["matches"] == 1 and vs["rounds"] == len(truth) >= 3
    assert s["desyncs"] == 0 and s["missed_decisions"] == 0 and s["underruns"] == 0
    # every round's result as the loop read it is the console's: who won, and how
    for rec, real in zip(s["levels"], truth, strict=True):
        mine = rec["round"]["result"]
        assert mine.startswith("won") == (real["winner"] == 2), (mine, real)
        assert mine.endswith("clear") == (real["end"] == "clear"), (mine, real)
    won = sum(r["winner"] == 2 for r in truth)
    assert vs["rounds_won"] == won and (vs["matches_won"] == 1) == (won == 3)
    assert "matches played" in run.stderr


def test_attacks_on_the_bot_are_tracked_without_a_desync():
    run = hil(
        "run", "--versus", "--fast", "--reader", "oracle", "--profile", "ideal_720p_nearest",
        "--level", "8", "--speed", "1", "--p1", "greedy", "--frames", "6000", "--view", "none",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-2000:]  # the match is not over in 6000 frames
    s = json.loads(run.stdout)
    assert s["versus"]["attacks_seen"] >= 2
    assert s["desyncs"] == 0 and s["missed_decisions"] == 0


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--p1-level", "3"], "--p1-level is for --versus"),
        (["--matches", "2"], "--matches is for --versus"),
        (["--versus", "--levels", "1,2"], "--versus plays one level"),
        (["--versus", "--level", "21"], "two-player levels are 0..20"),
        (["--versus", "--fast", "--firmware"], "leave out --firmware"),
        (["--strength", "3"], "--strength is for --versus"),
        (["--policy", "search-attack"], "--policy search-attack is for --versus"),
        (["--versus", "--strength", "6"], "6 is outside 1..5"),
        (["--versus", "--policy", "beam"], "--policy beam is for one player"),
    ],
)
def test_bad_versus_options_are_one_line_and_exit_2(argv, says):
    run = hil("run", "--view", "none", *argv, timeout=60)
    assert run.returncode == 2, run.stderr
    assert says in run.stderr and run.stderr.strip().count("\n") == 0, run.stderr


def test_versus_on_the_rig_needs_screens_that_read_the_two_player_options(tmp_path):
    """The rig's --versus sets the bot's level on the two-player options screen, read off the
    picture: without screens prepared for the ROM that read it, one line and exit 2."""
    import os

    import cv2

    video = tmp_path / "cap.avi"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 60, (1280, 720))
    for _ in range(10):
        w.write(np.zeros((720, 1280, 3), np.uint8))
    w.release()
    pty, tty = os.openpty()
    try:
        run = hil("run", "--versus", "--port", os.ttyname(tty), "--capture", str(video),
                  "--view", "none", timeout=60)  # fmt: skip
    finally:
        os.close(pty)
        os.close(tty)
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0, run.stderr
    assert "prepare your ROM's screens" in run.stderr


@pytest.mark.parametrize("flag", [["--p1", "idle"], ["--p1-level", "3"], ["--p1-wait", "10"]])
def test_the_simulated_player_1s_options_are_refused_on_the_rig(flag):
    run = hil("run", "--versus", "--port", "/dev/ttyACM9", "--capture", "0", "--view", "none",
              *flag, timeout=60)  # fmt: skip
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0, run.stderr
    assert "on the rig player 1 is the person on port 1" in run.stderr


def test_a_person_s_late_start_is_waited_for_in_the_pictures():
    """--p1-wait: player 1 presses each Start 600 frames after the game would take it, and the
    loop is not told when (as on the rig, where a person presses it). The last round's end,
    shown meanwhile, must not be taken for the next round's board: every base is the
    console's, no desync (without the wait for the start in the pictures: every base 8 frames
    early, 7 desyncs)."""
    run = hil(
        "run", "--versus", "--fast", "--reader", "oracle", "--profile", "ideal_720p_nearest",
        "--level", "2", "--speed", "1", "--p1", "greedy", "--frames", "40000", "--view", "none",
        "--p1-wait", "600",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    s = json.loads(run.stdout)
    truth = s["sim"]["rounds"]
    assert s["versus"]["rounds"] == len(truth) >= 3 and s["desyncs"] == 0
    assert [r["base_frame"] for r in s["levels"]] == [r["start_frame"] for r in truth]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--no-crc"], "x.nes"),  # not Dr. Mario: the ROM's own one line
        (["--emu-game", "testrom"], "the test ROM has no two-player mode"),
    ],
)
def test_versus_on_the_emulator_refuses_what_is_not_the_game(tmp_path, argv, says):
    rom = tmp_path / "x.nes"
    rom.write_bytes(b"NES\x1a" + bytes(12) + bytes(16384 * 2 + 8192))
    run = hil("run", "--versus", "--emu", str(rom), "--view", "none", *argv, timeout=60)
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0, run.stderr
    assert says in run.stderr


def test_matches_are_first_to_three_rounds():
    score = VersusScore()
    results = ["won_clear", "lost_top_out", "won_top_out", "lost_clear", "won_clear"]
    records = [score.add(r) for r in results]
    assert records[-1]["victories"] == [3, 2] and score.matches_done == 1
    assert score.matches_won == 1 and score.victories == [0, 0]
    for r in ["lost_clear"] * 3:
        score.add(r)
    s = score.summary()
    assert s["matches"] == 2 and s["matches_won"] == 1 and s["matches_lost"] == 1
    assert s["rounds"] == 8 and s["rounds_won"] == 3 and s["rounds_lost"] == 5
    score.add("unknown")  # counts for neither
    assert score.victories == [0, 0]


def test_player_facts_of_a_round_are_the_lone_players_screen_facts():
    rng = np.random.default_rng(3)
    v = engine.Versus(5, 1, 9, 2, 0x3131, 40)
    for f in range(600):
        v.step(0, int(rng.choice([0, 0, 1, 2, 4, 0x80])) if f % 2 == 0 else 0)
        if int(v.phase) != int(engine.Phase.PLAYING) and f > 200:
            break
        facts = engine.versus_screen_facts(v).player(1)
        alone = engine.screen_facts(v.player(1).game())
        assert facts.kind == alone.kind and (facts.bottle == alone.bottle).all()
        pose = [
            None if f is None else (f.x, f.y, f.rotation, tuple(f.colors))
            for f in (facts.falling, alone.falling)
        ]
        assert pose[0] == pose[1]  # (the sprites' boxes are each screen's own)
        nxt = [None if n is None else tuple(n.colors) for n in (facts.next, alone.next)]
        assert nxt[0] == nxt[1]


def _obs(kind, viruses=4, intro=False):
    from perception.observation import Observation

    field = np.full((16, 8), 0xFF, np.uint8)
    field.reshape(-1)[-viruses:] = 0xD1 if viruses else 0xFF
    return Observation(kind=kind, field=field, intro=intro)


def test_the_screen_kind_of_a_two_player_picture_comes_from_both_bottles():
    from hil.loop.observation import versus_kind

    level, clear = engine.ScreenKind.LEVEL, engine.ScreenKind.STAGE_CLEAR
    # player 1 cleared: player 2's crop shows a bottle in play, the round is over
    assert versus_kind(_obs(level, 0), _obs(level, 5)).kind == clear
    assert versus_kind(_obs(level, 3), _obs(level, 0)).kind == clear
    assert versus_kind(_obs(level, 3), _obs(level, 5)).kind == level
    assert versus_kind(_obs(level, 3), _obs(clear, 5)).kind == level  # a misread kind
    # the intro draws the bottles from empty: not a clear
    assert versus_kind(_obs(level, 0, intro=True), _obs(level, 0, intro=True)).kind == level
    # the loser's sign is in the loser's crop; the pause's text in player 1's
    top = engine.ScreenKind.TOP_OUT
    assert versus_kind(_obs(top, 3), _obs(level, 5)).kind == top
    paused = engine.ScreenKind.PAUSED
    assert versus_kind(_obs(paused, 0), _obs(engine.ScreenKind.OTHER, 0)).kind == paused


def test_the_first_throw_is_found_when_the_reserves_pill_looks_like_the_preview():
    """The alignment knows the next pill only until the first generateNextPill [$8E9D] in
    its tables; a reserve whose pill has the preview's colours must not hide that frame (every
    frameCounter phase then missed a capture of the real preview, and the wrong one won)."""
    from hil.loop.alignment import intro_tables

    g = engine.Versus(0, 1, 0, 1, 0x8988, 0).p2.game()
    plain = g.clone()
    g.reserve[:] = g.next_colors[0] * 3 + g.next_colors[1]  # every pill as the preview
    (_, throws, _), (_, plain_throws, _) = intro_tables([g], 200), intro_tables([plain], 200)
    assert throws[0] == plain_throws[0] < 200


def test_tied_frame_counter_phases_choose_the_first_of_their_run():
    from hil.loop.alignment import _first_of_run

    assert _first_of_run(0, {14, 15, 0, 1, 2, 3}) == 14  # the run wraps around 16
    assert _first_of_run(2, {1, 2, 3}) == 1
    assert _first_of_run(5, {1, 5}) == 5  # two runs: no choice made


def _attack_scene():
    """Player 2's lone Game of a 4 / 4 MED round played without input to its first
    action_checkAttack (frame ``e``), a tracker following it from state 0 (base frame 0), and
    the pictures of each frame from there without an attack and with one of 2 halves."""
    from engine.attack import receive_attack, released_attack
    from hil.loop.matching import predicted_observation
    from hil.loop.tracked import LevelState, TrackedLevel
    from hil.loop.tracker import Tracker, TrackerConfig

    g = engine.Versus(4, 1, 4, 1, 0x8988, 0).p2.game()
    tracker = Tracker(TrackerConfig(opponent=(4, 1)))
    lv = TrackedLevel(4, 1, 0)
    lv.opponent, lv.base, lv.history, lv.spawns = (4, 1), 0, {0: g.clone()}, {0: 0}
    tracker.lv, tracker.state = lv, LevelState.TRACKING
    e = 0
    while True:
        before = int(g.next_action)
        g.step(0)
        e += 1
        if released_attack(before, g):
            break
    plain, attacked = g.clone(), g.clone()
    receive_attack(attacked, 2, [1, 2])
    pictures: dict[str, list] = {"plain": [], "attacked": []}
    for _ in range(40):
        pictures["plain"].append(predicted_observation(plain))
        pictures["attacked"].append(predicted_observation(attacked))
        plain.step(0)
        attacked.step(0)
    return tracker, e, pictures


def test_a_late_picture_before_the_next_pill_is_not_taken_for_an_attack():
    """The bottle without an attack shows the next pill 4 frames after action_checkAttack;
    an attack's halves are drawn up to 16 frames after it. A capture a frame or two later
    than the clock says, just before the pill, is not an attack (real time, real game: the
    attack taken so made a desync at the next pill)."""
    tracker, e, pictures = _attack_scene()
    spawn = next(k for k, o in enumerate(pictures["plain"]) if o.falling is not None)
    drawn = next(k for k, o in enumerate(pictures["attacked"]) if (o.field & 0xF0 == 0x80).any())
    assert 0 < spawn < drawn  # the window where a late picture looks like an attack
    late = pictures["plain"][spawn - 1]
    events = tracker._tracking(range(e + spawn + 1, e + spawn + 2), late)
    assert not tracker.lv.releases and tracker.attacks == 0
    assert tracker.lv.mismatch_run == 1 and tracker.lv.soft_only  # counted soft, no desync
    assert "desync" not in [ev.name for ev in events]
    # the next capture shows the pill: tracked on without an attack
    events = tracker._tracking(range(e + spawn + 2, e + spawn + 3), pictures["plain"][spawn + 2])
    assert events == [] or all(ev.name == "spawn" for ev in events)
    assert tracker.lv.mismatch_run == 0 and tracker.attacks == 0


def test_an_attack_not_yet_drawn_is_taken_then_its_colours_are_read_when_drawn():
    tracker, e, pictures = _attack_scene()
    found = []
    for k in range(2, 30):
        events = tracker._tracking(range(e + k, e + k + 1), pictures["attacked"][k])
        found += [ev for ev in events if ev.name in ("attack", "desync", "attack_withdrawn")]
    assert [ev.name for ev in found][:1] == ["attack"] and "desync" not in [ev.name for ev in found]
    assert found[-1].name == "attack" and found[-1].data["colors"] == [1, 2]
    assert tracker.attacks == 1 and tracker.lv.mismatch_run == 0


def test_an_attack_the_pictures_then_contradict_is_withdrawn():
    """A capture much later than the clock says, before the next pill, is taken for an attack
    not yet drawn; once the pill is seen, only the bottle without it explains the pictures."""
    tracker, e, pictures = _attack_scene()
    spawn = next(k for k, o in enumerate(pictures["plain"]) if o.falling is not None)
    names_seen = []
    for k, shown in ((spawn + 5, spawn - 1), (spawn + 6, spawn + 6), (spawn + 7, spawn + 7)):
        events = tracker._tracking(range(e + k, e + k + 1), pictures["plain"][shown])
        names_seen += [ev.name for ev in events]
    assert names_seen[:2] == ["attack", "attack_withdrawn"], names_seen
    assert tracker.attacks == 0 and not tracker.lv.releases and tracker.lv.mismatch_run == 0


def _spawned(level: int, seed: int) -> engine.Game:
    from engine.placement import pill_falling

    g = engine.Versus(level, 1, level, 1, seed, seed & 0xFF).p2.game()
    while not pill_falling(g):
        g.step(0)
    return g


def test_a_weaker_bot_places_some_pills_at_random_and_each_pill_alike_when_asked_again():
    """hil run --versus --strength: at strength s a pill is placed at random with
    policy.versus.STRENGTH_RANDOM[s] (0.75 at 1), the draw made from the pill's state."""
    from hil.loop.heuristic import HeuristicPolicy
    from hil.loop.policies import Handicapped

    base = HeuristicPolicy()
    full, weak = Handicapped(base, 5), Handicapped(base, 1, seed=3)
    assert weak.name == "heuristic@1" and full.name == "heuristic"
    differ = 0
    states = [_spawned(level, seed) for level in range(0, 20, 2) for seed in (0x10, 0x22, 0x4A)]
    for g in states:
        reachable = engine.plan(g).reachable
        best = base.choose(g, reachable)
        assert full.choose(g, reachable) == best
        pick = weak.choose(g, reachable)
        assert reachable[pick]
        assert weak.choose(g.clone(), reachable) == weak.choose_now(g, reachable) == pick
        differ += pick != best
    assert 0.45 * len(states) <= differ <= 0.95 * len(states), differ
    with pytest.raises(ValueError, match="strength must be 1..5"):
        Handicapped(base, 0)


def test_the_bot_plays_the_attack_search_at_a_chosen_strength():
    run = hil(
        "run", "--versus", "--fast", "--reader", "oracle", "--profile", "ideal_720p_nearest",
        "--level", "6", "--speed", "1", "--p1", "greedy", "--policy", "search-attack",
        "--strength", "4", "--frames", "2500", "--view", "none",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-2000:]  # the match is not over in 2500 frames
    s = json.loads(run.stdout)
    assert s["policy"] == "search-attack@4"
    assert s["decisions"] >= 10 and s["desyncs"] == 0 and s["missed_decisions"] == 0


def test_a_network_player_one_plays_in_real_time():
    """In real time the console runs in a process of its own: player 1's ONNX policy is built
    there (its session cannot be sent), not in the loop's."""
    run = hil(
        "run", "--versus", "--p1", "onnx", "--level", "2", "--speed", "1",
        "--frames", "900", "--view", "none", timeout=300,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-2000:]  # the match is not over in 900 frames
    s = json.loads(run.stdout)
    assert s["console_frames"] >= 900 and s["decisions"] >= 1
