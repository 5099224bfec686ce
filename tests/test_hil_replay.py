"""hil replay: a recording made by ``hil sim record`` replayed offline with perception's ONNX
board reader and the ONNX placement policy (readings against the recording's truth, events
against the player's own placements, decisions against the policy on the true spawn states,
the annotated video), the truth reader with the deepest-placement baseline, the event rules
on hand-made readings, the speed-up count against the engine, and the errors a user meets."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

import engine
from calibration import Geometry, Profile
from hil.cli import main
from hil.replay import (
    CHOICE_BGR,
    EventDetector,
    FrameFacts,
    LivePolicy,
    PerceptionReader,
    TruthReader,
    choose_policy,
    choose_reader,
    game_from_reading,
    lock_placement,
    open_source,
    panel_width,
    placement_cells,
    placement_index,
    replay,
    speed_ups_at_spawn,
)
from hil.sim_record import RandomPlayer, SimSettings, level_frames, sim_console
from perception.observation import FallingPill, NextPill, Observation
from policy.features import SpawnInput
from policy.onnx_policy import PlacementPolicy

SETTINGS = SimSettings(level=2, speed=2, seed=0x2468, player_seed=3, taps_only=True)
FRAMES = 420
PROFILE = Profile(name="small_240p", geometry=Geometry.centered(320, 240))
# Perception against the truth on this recording (420 frames, measured): 53759 of 53760 cells,
# 419 of 420 boards exact (one cell of a pill half mid-redraw), falling pill, next pill and
# screen kind 420 of 420. On a longer one (level 5 HI, 1475 frames to a top-out): cells
# 99.990 %, boards 98.8 %, falling pill 99.66 %, next and kind 100 %. The floors leave room for
# a retrained model without letting a broken reader through.
FLOOR_CELLS, FLOOR_BOARDS, FLOOR_PILL, FLOOR_NEXT, FLOOR_KIND = 0.9999, 0.98, 0.98, 0.98, 0.98


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory):
    """A small recording (320x240 capture) written by ``hil sim record``, and the simulated
    console played again the same way (its player's placements and the states it played from
    are the ground truth)."""
    out = tmp_path_factory.mktemp("rec")
    PROFILE.save(out / "small_240p.json")
    s = SETTINGS
    args = ["sim", "record", "--profile", str(out / "small_240p.json"), "--out", str(out / "rec")]
    args += ["--level", str(s.level), "--speed", str(s.speed), "--seed", hex(s.seed)]
    args += ["--player-seed", str(s.player_seed), "--taps-only", "--frames", str(FRAMES)]
    assert main([*args, "--quiet"]) == 0
    # hil sim record's console (capture seed 0); the pad sees every state the game steps from
    console, player = sim_console(SETTINGS, PROFILE, max_frames=400 + 3 * FRAMES)
    sim = PlayedConsole(player)
    console.pad = sim.pad
    assert sum(1 for _ in level_frames(console, FRAMES)) == FRAMES
    console.close()
    return out / "rec", sim


class PlayedConsole:
    """The player of the replayed console, and the game's spawn states (the first state of
    each falling pill) as the console stepped them."""

    def __init__(self, player: RandomPlayer) -> None:
        self.player = player
        self.spawns: list[engine.Game] = []
        self.was = False

    def pad(self, game: engine.Game | None) -> int:
        if game is not None:
            falling = engine.Phase(int(game.phase)) == engine.Phase.PLAYING and not game.next_action
            if falling and not self.was:
                self.spawns.append(game.clone())
            self.was = falling
        return self.player.pad(game)


def true_spawn_states(sim: PlayedConsole) -> list[engine.Game]:
    return sim.spawns


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_replay_with_perception_and_the_onnx_policy(recording, tmp_path):
    rec, sim = recording
    source = open_source(rec)
    reader, policy = choose_reader("auto", source), choose_policy("auto", taps_only=True)
    assert isinstance(reader, PerceptionReader) and isinstance(policy, LivePolicy)
    log = io.StringIO()
    summary = replay(source, tmp_path, reader=reader, policy=policy, log=log)
    out = lines(tmp_path / "replay.jsonl")
    assert out[0]["type"] == "start" and out[-1]["type"] == "summary"
    assert (
        out[0]["reader"] == reader.name == "perception: BoardReader (perception/models/board.onnx)"
    )
    assert out[0]["policy"] == "onnx placement policy (policy/models/policy.onnx)"
    assert out[0]["compared_with"] == TruthReader.name
    readings = [o for o in out if o["type"] == "reading"]
    assert [r["index"] for r in readings] == list(range(FRAMES)) == list(range(summary.frames))
    assert {r["source"] for r in readings} == {reader.name}

    # Reading: every frame compared with the truth, the counts in the summary are theirs.
    agree = summary.agreement
    assert agree is not None and agree["frames"] == agree["board_frames"] == FRAMES
    assert agree["cells_equal"] == sum(r["truth_agree"]["cells"] for r in readings)
    for key in ("pill", "next", "kind"):
        assert agree[key] == sum(r["truth_agree"][key] for r in readings)
    assert agree["cells_equal"] >= FLOOR_CELLS * 128 * FRAMES
    assert agree["boards_exact"] >= FLOOR_BOARDS * FRAMES
    assert agree["pill"] >= FLOOR_PILL * FRAMES and agree["next"] >= FLOOR_NEXT * FRAMES
    assert agree["kind"] >= FLOOR_KIND * FRAMES

    # Events: the lock events name exactly the placements the player chose, in order.
    locks = [o for o in out if o.get("event") == "lock"]
    spawns = [o for o in out if o.get("event") == "spawn"]
    assert len(locks) >= 3
    assert [e["placement"] for e in locks] == sim.player.placements[: len(locks)]
    assert len(spawns) in (len(locks), len(locks) + 1)

    # Decisions: made at each spawn by the ONNX policy on the game rebuilt from perception's
    # reading; each must be what the policy chooses on the true spawn state, among the same
    # reachable set.
    decisions = [o for o in out if o["type"] == "decision"]
    assert len(decisions) == len(spawns) == summary.decisions
    net = PlacementPolicy()
    states = true_spawn_states(sim)
    assert len(states) >= len(decisions)
    for d, state in zip(decisions, states, strict=False):
        plan = engine.plan(state, taps_only=True)
        chosen = net.choose(SpawnInput.from_game(state), plan.reachable)
        assert d["policy"] == policy.name
        assert (d["reachable"], d["placement"]) == (len(plan), chosen)
        assert d["speed_ups"] == int(state.speed_ups)
        # A picture does not show frameCounter, whose parity times the fast drop: the rebuilt
        # game starts it at 0, so the lock may come a frame off.
        assert abs(d["frames_to_lock"] - len(plan.masks(chosen))) <= 1
    outcomes = [o for o in out if o["type"] == "decision_outcome"]
    assert [o["played"] for o in outcomes] == [e["placement"] for e in locks]
    assert "decision (onnx placement policy" in log.getvalue()

    # The annotated video: one frame per reading, the capture plus the side panel, and the
    # chosen placement outlined in green on the capture while its pill falls.
    cap = cv2.VideoCapture(summary.video)
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == FRAMES
    d, lock = decisions[0], locks[0]
    cap.set(cv2.CAP_PROP_POS_FRAMES, (d["index"] + lock["index"]) // 2)
    ok, image = cap.read()
    cap.release()
    g = PROFILE.geometry
    assert ok and image.shape == (240, 320 + panel_width(240), 3)
    rows = [r for r, _ in placement_cells(d["placement"])]
    x = round(g.offset_x + (96 + 8 * d["col"]) * g.scale_x)  # the outline's left edge
    y0 = round(g.offset_y + (80 + 8 * min(rows)) * g.scale_y)
    y1 = round(g.offset_y + (80 + 8 * max(rows) + 8) * g.scale_y)
    edge = np.array([image[y, x] for y in range(y0 + 1, y1 - 1)], np.int32)
    assert np.median(np.abs(edge - CHOICE_BGR).sum(axis=1)) < 150


def test_truth_reader_with_the_deepest_baseline(recording, tmp_path):
    rec, sim = recording
    source = open_source(rec)
    reader = choose_reader("truth", source)
    summary = replay(
        source,
        tmp_path,
        reader=reader,
        policy=choose_policy("deepest", taps_only=True),
        video=False,
    )
    out = lines(tmp_path / "replay.jsonl")
    assert summary.agreement is None and summary.video is None
    assert not any("truth_agree" in o for o in out)
    locks = [o["placement"] for o in out if o.get("event") == "lock"]
    assert len(locks) >= 3 and locks == sim.player.placements[: len(locks)]
    decisions = [o for o in out if o["type"] == "decision"]
    for d, state in zip(decisions, true_spawn_states(sim), strict=False):
        plan = engine.plan(state, taps_only=True)
        placements = [int(p) for p in plan.placements]
        deepest = max(placements, key=lambda i: ((i % 128) // 8, -abs(i % 8 - 3.5), -i))
        assert (d["reachable"], d["placement"]) == (len(placements), deepest)
        # The true state has the console's frameCounter, the rebuilt game 0 (a picture does not
        # show it; its parity times the fast drop): the lock may come a frame off.
        assert abs(d["frames_to_lock"] - int(plan.lock_frames[placements.index(deepest)])) <= 1


def test_replay_asks_the_live_loops_policies(recording):
    """Every --policy is the live loop's policy behind the live loop's planner: on each true spawn
    state the replay's choice is what hil run's policy chooses among the planner's reachable
    placements (the heuristic here: no model, cheap)."""
    from hil.loop.heuristic import HeuristicPolicy
    from hil.loop.runtime import EnginePlanner

    _, sim = recording
    decider = choose_policy("heuristic", taps_only=True)
    live, planner = HeuristicPolicy(), EnginePlanner(taps_only=True)
    states = true_spawn_states(sim)
    assert len(states) >= 3
    for state in states:
        plan = planner(state, np.zeros(0, np.uint8))
        d = decider.act(state)
        assert d.placement == live.choose(state, plan.reachable)
        assert d.reachable == len(plan) and np.array_equal(d.masks, plan.masks(d.placement))
    assert decider.act_without_next(states[0]) is None  # the heuristic has no choose_mean


def test_speed_ups_at_spawn_follow_the_engine():
    """The n-th pill of a level falls with the engine's speed-ups (played to 31 pills)."""
    game = engine.Game(10, 1, 0x8988)
    pills, seen = 0, []
    while pills < 31:
        assert engine.Phase(int(game.phase)) in (engine.Phase.INTRO, engine.Phase.PLAYING)
        if engine.Phase(int(game.phase)) == engine.Phase.PLAYING and not game.next_action:
            pills += 1
            seen.append((int(game.speed_ups), speed_ups_at_spawn(pills)))
            plan = engine.plan(game, taps_only=True)
            best = max((int(p) for p in plan.placements), key=lambda i: (i % 128) // 8)
            game.run(plan.masks(best))
        else:
            game.step(0)
    assert [a for a, _ in seen] == [b for _, b in seen]
    assert {a for a, _ in seen} == {0, 1, 2, 3}
    assert speed_ups_at_spawn(10_000) == 49
    with pytest.raises(ValueError, match="pills must be >= 0"):
        speed_ups_at_spawn(-1)
    r = Observation(
        engine.ScreenKind.LEVEL, np.full((16, 8), 0xFF, np.uint8), FallingPill(3, 15, 0, (1, 2))
    )
    assert int(game_from_reading(r, 10, 1, speed_ups=7).speed_ups) == 7
    with pytest.raises(ValueError, match="speed_ups must be 0..49"):
        game_from_reading(r, 10, 1, speed_ups=50)


def reading(field, pill=None, kind="level", virus_left=4):
    """A hand-made frame as a replay reader gives it: (Observation, FrameFacts)."""
    obs = Observation(engine.ScreenKind[kind.upper()], field, pill, NextPill((0, 1)), source="test")
    return obs, FrameFacts(virus_left=virus_left)


def test_event_rules_on_hand_made_readings():
    empty = np.full((16, 8), 0xFF, np.uint8)
    det = EventDetector()
    pill = FallingPill(x=3, y=15, rotation=0, colors=(1, 2))
    assert [e.kind for e in det.update(0, *reading(empty))] == []
    assert [e.kind for e in det.update(1, *reading(empty, pill))] == ["spawn"]
    locked = empty.copy()
    locked[15, 2], locked[15, 3] = 0x62, 0x71  # left half blue, right half red: rotation 2
    events = det.update(2, *reading(locked))
    assert [e.kind for e in events] == ["lock"]
    assert events[0].data["placement"] == placement_index(2, 15, 2)
    clearing = locked.copy()
    clearing[15, 2] = 0xB2
    assert [e.kind for e in det.update(3, *reading(clearing, virus_left=3))] == ["clear"]
    assert [e.kind for e in det.update(4, *reading(clearing, kind="stage_clear"))] == [
        "stage_clear"
    ]
    det = EventDetector()
    det.update(0, *reading(empty, pill))
    assert [e.kind for e in det.update(1, *reading(empty, kind="top_out"))] == ["top_out"]


def test_lock_waits_for_the_row_by_row_redraw():
    empty = np.full((16, 8), 0xFF, np.uint8)
    pill = FallingPill(x=4, y=6, rotation=1, colors=(1, 2))  # vertical, bottom half in row 9
    top, both = empty.copy(), empty.copy()
    top[8, 4] = both[8, 4] = 0x42
    both[9, 4] = 0x51
    det = EventDetector()
    kinds = [
        [e.kind for e in det.update(i, *reading(f, p))]
        for i, (f, p) in enumerate(
            [(empty, pill), (empty, None), (top, None), (both, None), (both, None)]
        )
    ]
    assert kinds == [["spawn"], [], [], ["lock"], []]
    assert det.update(5, *reading(both)) == []
    # Cells drawn while the pill's sprites still show: one lock, and the lingering sprites
    # are not a new pill; the next pill is.
    det = EventDetector()
    det.update(0, *reading(empty, pill))
    events = det.update(1, *reading(both, pill))
    assert [e.kind for e in events] == ["lock"]
    assert events[0].data["placement"] == placement_index(1, 9, 4)
    assert det.update(2, *reading(both, pill)) == []
    nxt = FallingPill(x=3, y=15, rotation=0, colors=(1, 2))
    assert [e.kind for e in det.update(3, *reading(both, nxt))] == ["spawn"]
    # Cells that never form the pill: after lock_wait frames, the last pose read.
    det = EventDetector(lock_wait=3)
    det.update(0, *reading(empty, pill))
    late = [det.update(i, *reading(top)) for i in range(1, 6)]
    assert [len(e) for e in late] == [0, 0, 0, 1, 0]
    assert late[3][0].data["placement"] == placement_index(1, 9, 4)


@pytest.mark.parametrize(
    ("cells", "colors", "expected"),
    [
        ({(15, 2): 0x61, (15, 3): 0x72}, (1, 2), placement_index(0, 15, 2)),
        ({(15, 2): 0x62, (15, 3): 0x71}, (1, 2), placement_index(2, 15, 2)),
        ({(9, 4): 0x51, (8, 4): 0x42}, (1, 2), placement_index(1, 9, 4)),
        ({(9, 4): 0x52, (8, 4): 0x41}, (1, 2), placement_index(3, 9, 4)),
        ({(9, 4): 0x50, (8, 4): 0x40}, (0, 0), placement_index(1, 9, 4)),  # deduped
        ({(15, 0): 0x60, (15, 1): 0x70}, (0, 0), placement_index(0, 15, 0)),
        ({(0, 5): 0x52}, (1, 2), placement_index(3, 0, 5)),  # top half above the bottle
        ({(15, 2): 0x60, (15, 3): 0x72}, (1, 2), None),  # not this pill's colours
    ],
)
def test_lock_placement_follows_the_planner_table(cells, colors, expected):
    before = np.full((16, 8), 0xFF, np.uint8)
    before[15, 7] = 0xD0  # a virus stays
    after = before.copy()
    for (r, c), code in cells.items():
        after[r, c] = code
    assert lock_placement(before, after, colors) == expected


def test_a_drawn_pill_turning_is_not_a_new_pill():
    """Perception gives the pill as drawn: rotation 2 reads as rotation 0 with the colours
    swapped. That is the same pill, and its lock keeps the game's rotation (from the spawn's
    colour order)."""
    empty = np.full((16, 8), 0xFF, np.uint8)
    det = EventDetector()
    assert [e.kind for e in det.update(0, *reading(empty, FallingPill(3, 15, 0, (1, 2))))] == [
        "spawn"
    ]
    assert det.update(1, *reading(empty, FallingPill(3, 14, 1, (1, 2)))) == []
    assert det.update(2, *reading(empty, FallingPill(2, 13, 0, (2, 1)))) == []  # rotation 2
    locked = empty.copy()
    locked[15, 2], locked[15, 3] = 0x62, 0x71
    events = det.update(3, *reading(locked))
    assert [e.kind for e in events] == ["lock"]
    assert events[0].data["placement"] == placement_index(2, 15, 2)
    assert events[0].data["colors"] == [1, 2]
    # Cells that never form the pill: the last pose read, rotation 2 recovered from the colours.
    det = EventDetector(lock_wait=1)
    det.update(0, *reading(empty, FallingPill(3, 15, 0, (1, 2))))
    det.update(1, *reading(empty, FallingPill(2, 0, 0, (2, 1))))
    odd = empty.copy()
    odd[15, 6] = 0x80
    assert det.update(2, *reading(odd)) == []
    late = det.update(3, *reading(odd))
    assert late[0].data["placement"] == placement_index(2, 15, 2)


def plain_video(path: Path, size: tuple[int, int]) -> Path:
    writer = cv2.VideoWriter(
        str(path), cv2.CAP_OPENCV_MJPEG, cv2.VideoWriter.fourcc(*"MJPG"), 60, size
    )
    writer.write(np.zeros((size[1], size[0], 3), np.uint8))
    writer.release()
    return path


def test_cli_replay_and_its_errors(recording, tmp_path, capsys):
    rec, _ = recording
    out = tmp_path / "out"
    args = ["replay", str(rec), "--out", str(out), "--taps-only", "--quiet", "--frames", "200"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "spawn" in printed and "200 frames replayed" in printed
    assert "decision (onnx placement policy (policy/models/policy.onnx)): placement" in printed
    assert "by onnx placement policy" in printed
    assert "perception: BoardReader (perception/models/board.onnx) vs truth over 200 frames" in (
        printed
    )
    assert lines(out / "replay.jsonl")[-1]["type"] == "summary"

    def refused(argv: list[str], match: str) -> None:
        never = tmp_path / "never"
        with pytest.raises(SystemExit, match=match):
            main([*argv, "--out", str(never), "--quiet"])
        assert not never.exists()  # refused before anything was written

    junk = tmp_path / "junk.mkv"
    junk.write_bytes(b"not a video at all" * 100)
    refused(["replay", str(junk)], "hil replay: .*junk.mkv: OpenCV cannot decode")
    refused(["replay", str(tmp_path / "missing.mkv")], "no such file or directory")
    plain = plain_video(tmp_path / "plain.avi", (1280, 720))
    refused(
        ["replay", str(plain)],
        "plain video .*pass the capture's profile with --profile, or fit one first with "
        "`hil calibrate --input .*plain.avi --out profile.json`",
    )
    refused(
        ["replay", str(plain), "--profile", "square_1080p_area"],
        "frames are 1280x720, profile 'square_1080p_area' is 1920x1080",
    )
    refused(
        ["replay", str(plain), "--profile", "ideal_720p_nearest", "--reader", "truth"],
        "no ground-truth sidecar",
    )
    refused(["replay", str(rec), "--profile", "mjpeg_720p_q70"], "frames are 320x240")
    with pytest.raises(SystemExit) as exc:  # argparse: one line, exit 2, nothing written
        main(["replay", str(rec), "--frames", "0", "--out", str(tmp_path / "never"), "--quiet"])
    assert exc.value.code == 2 and not (tmp_path / "never").exists()
    assert "argument --frames: 0 is outside 1..100000000" in capsys.readouterr().err
    broken = tmp_path / "broken"
    shutil.copytree(rec, broken)
    (broken / "capture.mkv").write_bytes(b"junk" * 1000)
    refused(["replay", str(broken)], "capture.mkv: OpenCV cannot decode")

    # A source that fails part way: the sidecar promises one frame more than the video holds.
    short, n = tmp_path / "short", 40
    short.mkdir()
    meta = json.loads((rec / "recording.json").read_text())
    (short / "recording.json").write_text(json.dumps(meta | {"frames": n + 1}))
    sidecar = (rec / "frames.jsonl").read_text().splitlines()[: n + 1]
    (short / "frames.jsonl").write_text("\n".join(sidecar) + "\n")
    cap = cv2.VideoCapture(str(rec / "capture.mkv"))
    video = cv2.VideoWriter(
        str(short / "capture.mkv"), cv2.CAP_FFMPEG, cv2.VideoWriter.fourcc(*"FFV1"), 60, (320, 240)
    )
    for _ in range(n):
        video.write(cap.read()[1])
    video.release()
    cap.release()
    with pytest.raises(SystemExit, match=f"video ends after {n} frames.*ends with this error"):
        main(["replay", str(short), "--out", str(tmp_path / "part"), "--quiet", "--taps-only"])
    last = lines(tmp_path / "part" / "replay.jsonl")[-1]
    assert last["type"] == "error" and last["index"] == n
    assert f"the video ends after {n} frames" in last["message"]
    part = cv2.VideoCapture(str(tmp_path / "part" / "annotated.mp4"))
    assert int(part.get(cv2.CAP_PROP_FRAME_COUNT)) == n  # the frames before it, readable
    part.release()


def test_replay_imports_no_torch(recording, tmp_path):
    """Replay is a runtime path: perception's reader and the ONNX policy run without torch."""
    rec, _ = recording
    code = (
        "import sys\n"
        "from hil.cli import main\n"
        f"main(['replay', {str(rec)!r}, '--out', {str(tmp_path / 'o')!r}, '--frames', '160', "
        "'--quiet', '--taps-only'])\n"
        "bad = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "print('TORCH', bad)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "decision (onnx placement policy" in done.stdout
    assert "TORCH []" in done.stdout
