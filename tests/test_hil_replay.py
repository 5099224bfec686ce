"""hil replay: a simulated recording replayed offline; its events against the player's own
placements, its decisions against the planner on the true game state, the annotated video,
the event rules on hand-made readings, and the errors a user meets."""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

import engine
from calibration import Geometry, Profile
from hil.cli import main
from hil.recording import RecordingWriter
from hil.replay import (
    CHOICE_BGR,
    EventDetector,
    PillReading,
    Reading,
    StandInPolicy,
    lock_placement,
    open_source,
    panel_width,
    placement_cells,
    placement_index,
    replay,
)
from hil.sim import SimCapture, SimSettings

SETTINGS = SimSettings(level=2, speed=2, seed=0x2468, player_seed=3, taps_only=True)
FRAMES = 420


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory):
    """A small recording (320x240 capture) of a random-placement game, and the SimCapture that
    played it (its player's placements and masks are the ground truth of the checks)."""
    profile = Profile(name="small_240p", geometry=Geometry.centered(320, 240))
    out = tmp_path_factory.mktemp("rec")
    sim = SimCapture(SETTINGS, profile, capture_seed=1)
    meta = {"producer": "test", "level": SETTINGS.level, "speed": SETTINGS.speed}
    with RecordingWriter(out, profile, meta=meta) as writer:
        for frame, truth in sim.frames(FRAMES):
            writer.write(frame.image, frame.time_ns, truth)
    return out, sim


def true_spawn_plans(sim: SimCapture) -> list[engine.Plan]:
    """Plans (taps only) of the game's spawn states: the first state of each falling pill."""
    game = engine.Game(SETTINGS.level, SETTINGS.speed, SETTINGS.seed)
    plans, was = [], False
    for mask in sim.masks:
        falling = engine.Phase(int(game.phase)) == engine.Phase.PLAYING and not game.next_action
        if falling and not was:
            plans.append(engine.plan(game, taps_only=True))
        was = falling
        game.step(mask)
    return plans


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_replay_finds_the_played_placements_and_decides_at_each_spawn(recording, tmp_path):
    rec, sim = recording
    log = io.StringIO()
    summary = replay(open_source(rec), tmp_path, policy=StandInPolicy(taps_only=True), log=log)
    out = lines(tmp_path / "replay.jsonl")
    assert out[0]["type"] == "start" and out[-1]["type"] == "summary"
    readings = [o for o in out if o["type"] == "reading"]
    assert [r["index"] for r in readings] == list(range(FRAMES)) == list(range(summary.frames))
    locks = [o for o in out if o.get("event") == "lock"]
    spawns = [o for o in out if o.get("event") == "spawn"]
    # The lock events name exactly the placements the player chose, in order.
    assert len(locks) >= 3
    assert [e["placement"] for e in locks] == sim.player.placements[: len(locks)]
    assert len(spawns) in (len(locks), len(locks) + 1)
    decisions = [o for o in out if o["type"] == "decision"]
    assert len(decisions) == len(spawns) == summary.decisions
    # Each decision was planned on a game rebuilt from the picture at the spawn: it must see
    # exactly the reachable set of the true spawn state (the engine replayed with the player's
    # masks) and take its deepest placement, locking on the same frame.
    truth = true_spawn_plans(sim)
    for d, plan in zip(decisions, truth, strict=False):
        placements = [int(p) for p in plan.placements]
        deepest = max(placements, key=lambda i: ((i % 128) // 8, -abs(i % 8 - 3.5), -i))
        assert (d["reachable"], d["placement"]) == (len(placements), deepest)
        assert d["frames_to_lock"] == int(plan.lock_frames[placements.index(deepest)])
    outcomes = [o for o in out if o["type"] == "decision_outcome"]
    assert [o["played"] for o in outcomes] == [e["placement"] for e in locks]
    assert "spawn" in log.getvalue() and "decision: placement" in log.getvalue()

    # The annotated video: one frame per reading, the capture plus the side panel, and the
    # chosen placement outlined in green on the capture while its pill falls.
    cap = cv2.VideoCapture(summary.video)
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == FRAMES
    d, lock = decisions[0], locks[0]
    cap.set(cv2.CAP_PROP_POS_FRAMES, (d["index"] + lock["index"]) // 2)
    ok, image = cap.read()
    cap.release()
    g = Profile(name="x", geometry=Geometry.centered(320, 240)).geometry
    assert ok and image.shape == (240, 320 + panel_width(240), 3)
    rows = [r for r, _ in placement_cells(d["placement"])]
    x = round(g.offset_x + (96 + 8 * d["col"]) * g.scale_x)  # the outline's left edge
    y0 = round(g.offset_y + (80 + 8 * min(rows)) * g.scale_y)
    y1 = round(g.offset_y + (80 + 8 * max(rows) + 8) * g.scale_y)
    edge = np.array([image[y, x] for y in range(y0 + 1, y1 - 1)], np.int32)
    assert np.median(np.abs(edge - CHOICE_BGR).sum(axis=1)) < 150


def reading(field, pill=None, kind="level", virus_left=4):
    return Reading(kind, field, pill, (0, 1), virus_left, None, "test")


def test_event_rules_on_hand_made_readings():
    empty = np.full((16, 8), 0xFF, np.uint8)
    det = EventDetector()
    pill = PillReading(x=3, y=15, rotation=0, colors=(1, 2))
    assert [e.kind for e in det.update(0, reading(empty))] == []
    assert [e.kind for e in det.update(1, reading(empty, pill))] == ["spawn"]
    locked = empty.copy()
    locked[15, 2], locked[15, 3] = 0x62, 0x71  # left half blue, right half red: rotation 2
    events = det.update(2, reading(locked))
    assert [e.kind for e in events] == ["lock"]
    assert events[0].data["placement"] == placement_index(2, 15, 2)
    clearing = locked.copy()
    clearing[15, 2] = 0xB2
    assert [e.kind for e in det.update(3, reading(clearing, virus_left=3))] == ["clear"]
    assert [e.kind for e in det.update(4, reading(clearing, kind="stage_clear"))] == ["stage_clear"]
    det = EventDetector()
    det.update(0, reading(empty, pill))
    assert [e.kind for e in det.update(1, reading(empty, kind="top_out"))] == ["top_out"]


def test_lock_waits_for_the_row_by_row_redraw():
    empty = np.full((16, 8), 0xFF, np.uint8)
    pill = PillReading(x=4, y=6, rotation=1, colors=(1, 2))  # vertical, bottom half in row 9
    top, both = empty.copy(), empty.copy()
    top[8, 4] = both[8, 4] = 0x42
    both[9, 4] = 0x51
    det = EventDetector()
    kinds = [
        [e.kind for e in det.update(i, reading(f, p))]
        for i, (f, p) in enumerate(
            [(empty, pill), (empty, None), (top, None), (both, None), (both, None)]
        )
    ]
    assert kinds == [["spawn"], [], [], ["lock"], []]
    assert det.update(5, reading(both)) == []
    # Cells drawn while the pill's sprites still show: one lock, and the lingering sprites
    # are not a new pill; the next pill is.
    det = EventDetector()
    det.update(0, reading(empty, pill))
    events = det.update(1, reading(both, pill))
    assert [e.kind for e in events] == ["lock"]
    assert events[0].data["placement"] == placement_index(1, 9, 4)
    assert det.update(2, reading(both, pill)) == []
    nxt = PillReading(x=3, y=15, rotation=0, colors=(1, 2))
    assert [e.kind for e in det.update(3, reading(both, nxt))] == ["spawn"]
    # Cells that never form the pill: after lock_wait frames, the last pose read.
    det = EventDetector(lock_wait=3)
    det.update(0, reading(empty, pill))
    late = [det.update(i, reading(top)) for i in range(1, 6)]
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


def test_cli_replay_and_its_errors(recording, tmp_path, capsys):
    rec, _ = recording
    out = tmp_path / "out"
    args = ["replay", str(rec), "--out", str(out), "--taps-only", "--quiet", "--frames", "200"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "spawn" in printed and "200 frames replayed" in printed
    assert (out / "replay.jsonl").is_file()

    junk = tmp_path / "junk.mkv"
    junk.write_bytes(b"not a video at all" * 100)
    with pytest.raises(SystemExit, match="hil replay: .*junk.mkv: OpenCV cannot decode"):
        main(["replay", str(junk)])
    with pytest.raises(SystemExit, match="no such file or directory"):
        main(["replay", str(tmp_path / "missing.mkv")])
    plain = tmp_path / "plain.avi"
    writer = cv2.VideoWriter(
        str(plain), cv2.CAP_OPENCV_MJPEG, cv2.VideoWriter.fourcc(*"MJPG"), 60, (1280, 720)
    )
    writer.write(np.zeros((720, 1280, 3), np.uint8))
    writer.release()
    with pytest.raises(SystemExit, match="no ground-truth sidecar.*perception"):
        main(["replay", str(plain)])
    with pytest.raises(SystemExit, match="frames are 1280x720, profile 'square_1080p_area'"):
        main(["replay", str(plain), "--profile", "square_1080p_area"])
    with pytest.raises(SystemExit, match="BoardReader has not landed"):
        main(["replay", str(rec), "--reader", "perception"])
