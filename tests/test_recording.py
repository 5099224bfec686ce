"""hil.loop.recording: video + JSONL sidecar written and read back; clear errors for bad files."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calibration import CaptureModel, Geometry, Profile
from hil.loop.recording import Recording, RecordingError, RecordingWriter
from perception.store import SHIPPED_MODEL

PROFILE = Profile(name="small", geometry=Geometry.centered(320, 256, interpolation="area"))


def captured_frames(n: int, profile: Profile = PROFILE) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    palette = rng.integers(0, 256, (6, 3), dtype=np.uint8)
    model = CaptureModel(profile)
    frames = []
    for _ in range(n):
        tiles = palette[rng.integers(0, 6, (30, 32))]
        nes = np.ascontiguousarray(np.repeat(np.repeat(tiles, 8, axis=0), 8, axis=1))
        frames.append(model(nes))
    return frames


def write(path, frames, codec="ffv1", **kw):
    with RecordingWriter(path, PROFILE, codec=codec, meta={"level": 3}, **kw) as w:
        for i, f in enumerate(frames):
            w.write(f, time_ns=1000 * i + 7, truth={"console_frame": 2 * i, "pill": None})
    return w


def test_ffv1_round_trip_is_lossless(tmp_path):
    frames = captured_frames(12)
    write(tmp_path / "rec", frames)
    rec = Recording(tmp_path / "rec")
    assert len(rec) == 12 and rec.profile == PROFILE
    assert rec.meta["codec"] == "ffv1" and rec.meta["source"] == {"level": 3}
    assert rec.meta["fps"] == PROFILE.timing.capture_hz
    got = list(rec)
    assert len(got) == 12
    for i, (frame, truth) in enumerate(got):
        np.testing.assert_array_equal(frame.image, frames[i])
        assert (frame.index, frame.time_ns) == (i, 1000 * i + 7)
        assert truth == {"index": i, "time_ns": 1000 * i + 7, "console_frame": 2 * i, "pill": None}
    later = list(rec.frames(start=5))
    assert len(later) == 7
    np.testing.assert_array_equal(later[0][0].image, frames[5])


# Mean absolute error per frame on these random 8x8-pixel tiles (the hardest content for a
# block codec; on the simulated 720p capture it is 2.4 and 3.4 grey levels): FFmpeg's MJPEG
# ~8.7, MPEG-4 ~9.5; a broken stream (misaligned or garbage frames) is ~80.
@pytest.mark.parametrize(("codec", "max_error"), [("mjpeg", 12.0), ("mpeg4", 14.0)])
def test_lossy_round_trips_are_close(tmp_path, codec, max_error):
    frames = captured_frames(6)
    write(tmp_path / "rec", frames, codec=codec)
    rec = Recording(tmp_path / "rec")
    assert rec.video_path.name == "capture.mkv" and rec.meta["codec"] == codec
    errors = [np.abs(f.image.astype(int) - frames[i]).mean() for i, (f, _) in enumerate(rec)]
    assert len(errors) == 6
    assert all(0 < e < max_error for e in errors), errors


def test_sidecar_is_flushed_per_line(tmp_path):
    w = RecordingWriter(tmp_path / "rec", PROFILE)
    frames = captured_frames(3)
    for i, f in enumerate(frames):
        w.write(f, time_ns=i, truth={"k": i})
        lines = (tmp_path / "rec" / "frames.jsonl").read_text().splitlines()
        assert len(lines) == i + 1 and json.loads(lines[-1])["k"] == i
    w.close()


def test_writer_rejects_bad_input(tmp_path):
    with pytest.raises(RecordingError, match="codec must be one of ffv1, mpeg4, mjpeg"):
        RecordingWriter(tmp_path / "a", PROFILE, codec="h264")
    with RecordingWriter(tmp_path / "b", PROFILE) as w:
        with pytest.raises(
            RecordingError, match=r"BGR uint8 \[256, 320, 3\], got uint8 \[240, 256, 3\]"
        ):
            w.write(np.zeros((240, 256, 3), np.uint8), time_ns=0)
    with pytest.raises(RecordingError, match="already holds a recording"):
        RecordingWriter(tmp_path / "b", PROFILE)
    RecordingWriter(tmp_path / "b", PROFILE, overwrite=True).close()


def test_reader_errors_name_the_file(tmp_path):
    with pytest.raises(RecordingError, match="is not a recording: no recording.json"):
        Recording(tmp_path / "nothing")
    frames = captured_frames(4)
    rec = tmp_path / "rec"
    write(rec, frames)

    (rec / "capture.mkv").rename(rec / "moved.mkv")
    with pytest.raises(RecordingError, match="the video capture.mkv is missing"):
        Recording(rec)
    (rec / "capture.mkv").write_bytes(b"not a video" * 100)
    with pytest.raises(RecordingError, match="capture.mkv: OpenCV cannot decode this video"):
        Recording(rec)
    (rec / "moved.mkv").rename(rec / "capture.mkv")

    with (rec / "frames.jsonl").open("a") as f:
        f.write(json.dumps({"index": 4, "time_ns": 9}) + "\n")
    with pytest.raises(RecordingError, match="5 lines, but recording.json says 4 frames"):
        Recording(rec)
    meta = json.loads((rec / "recording.json").read_text())
    (rec / "recording.json").write_text(json.dumps(meta | {"frames": 5}))
    with pytest.raises(RecordingError, match="ends after 4 frames, but frames.jsonl has 5 lines"):
        list(Recording(rec))
    with (rec / "frames.jsonl").open("a") as f:
        f.write("{broken\n")
    with pytest.raises(RecordingError, match=r"frames.jsonl:6: not JSON"):
        Recording(rec)
    (rec / "frames.jsonl").unlink()
    with pytest.raises(RecordingError, match="sidecar frames.jsonl is missing"):
        Recording(rec)
    (rec / "recording.json").write_text("{}")
    with pytest.raises(RecordingError, match="recording.json: field .video.: expected one of"):
        Recording(rec)


# ---- through the commands a user types ---------------------------------------------------------

SMALL = {
    "name": "small_rec_test",
    "geometry": {"width": 320, "height": 240, "scale_x": 1.25, "scale_y": 1.0, "offset_x": 0.0},
    "artifacts": {"noise": 1.5, "jpeg_quality": 70},
    "timing": {"capture_hz": 60.0, "latency_frames": 3.0, "jitter_ms": 2.0},
}


def hil(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hil.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def refused(r: subprocess.CompletedProcess[str], *needles: str) -> str:
    err = r.stderr.strip()
    assert r.returncode == 2 and "Traceback" not in err, (r.returncode, err[-2000:])
    assert len(err.splitlines()) == 1, err
    assert all(n in err for n in needles), err
    return err


def snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("profile") / "small_rec_test.json"
    path.write_text(json.dumps(SMALL))
    return str(path)


@pytest.fixture(scope="module")
def sim_rec(tmp_path_factory: pytest.TempPathFactory, profile: str) -> Path:
    """120 frames of `hil sim record` (ffv1), level 3."""
    out = tmp_path_factory.mktemp("simrec") / "rec"
    r = hil(
        "sim", "record", "--profile", profile, "--out", str(out), "--level", "3", "--frames", "120"
    )
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def run_rec(tmp_path_factory: pytest.TempPathFactory, profile: str) -> tuple[Path, dict]:
    """`hil run --fast --record` of level 0 MED with the oracle reader (the default codec)."""
    out = tmp_path_factory.mktemp("runrec") / "rec"
    args = ["run", "--fast", "--view", "none", "--profile", profile, "--reader", "oracle"]
    r = hil(*args, "--level", "0", "--record", str(out))
    assert r.returncode == 0, r.stderr
    return out, json.loads(r.stdout)


def test_an_existing_recording_is_never_overwritten_without_asking(tmp_path, profile, sim_rec):
    rec = tmp_path / "rec"
    shutil.copytree(sim_rec, rec)
    before = snapshot(rec)
    base = ["run", "--fast", "--view", "none", "--profile", profile, "--record", str(rec)]
    refused(hil(*base), "hil run: --record", "already holds a recording", "--overwrite")
    # --overwrite, but the run fails before its first frame (no capture device 99, as in the
    # issue; a port that is no serial device): the writer never opened, the recording is whole.
    rig = ["run", "--view", "none", "--profile", profile, "--record", str(rec), "--overwrite"]
    leader, follower = pty.openpty()
    try:
        r = hil(*rig, "--port", os.ttyname(follower), "--capture", "99")
    finally:
        os.close(leader)
        os.close(follower)
    refused(r, "hil run: cannot open capture device 99")
    refused(hil(*rig, "--port", "/dev/null", "--capture", "99"), "--port /dev/null")
    sim = ["sim", "record", "--profile", profile, "--out", str(rec), "--frames", "5"]
    refused(hil(*sim), "hil sim record", "already holds a recording")
    assert snapshot(rec) == before
    assert len(Recording(rec)) == len(Recording(sim_rec))


def test_hil_run_recording_replays_with_no_flags(run_rec, tmp_path):
    rec_dir, summary = run_rec
    rec = Recording(rec_dir)
    assert rec.closed and rec.meta["codec"] == "mpeg4"
    assert rec.meta["source"]["producer"] == "hil run" and rec.meta["source"]["reader"] == "oracle"
    assert len(rec) == summary["captured_frames"] == rec.meta["frames"]
    # an hour of 320x240 play (216,000 frames) in a few GB, not the old MJPEG AVI's tens
    per_frame = rec.video_path.stat().st_size / len(rec)
    assert per_frame < 12_000, per_frame
    sent = [t["decision"]["placement"] for t in rec.truth if "decision" in t]
    assert len(sent) == summary["decisions"] - summary["missed_decisions"] > 10
    out = tmp_path / "out"
    r = hil("replay", str(rec_dir), "--quiet", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"{len(rec)} frames replayed" in r.stdout
    assert f"for {len(sent)} of the {len(sent)} it decided" in r.stdout, r.stdout
    lines = [json.loads(x) for x in (out / "replay.jsonl").read_text().splitlines()]
    live = [x for x in lines if x["type"] == "live_decision"]
    assert [x["live"] for x in live] == sent and all(x["agree"] for x in live)
    assert (out / "annotated.mp4").stat().st_size > 0
    # perception on the pixels instead, compared frame by frame with what the run read
    r = hil("replay", str(rec_dir), "--quiet", "--out", str(tmp_path / "p"), "--reader")
    assert r.returncode == 2  # --reader needs a value: argparse's one line
    r = hil(
        "replay", str(rec_dir), "--quiet", "--out", str(tmp_path / "p"),
        "--reader", "perception", "--frames", "400",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "vs the truth (the run's oracle readings) over 400 frames" in r.stdout, r.stdout


def test_a_run_with_the_onnx_reader_replays_to_the_same_readings(tmp_path, profile):
    """Lossless (ffv1): the replay reads exactly what the run read, every frame."""
    rec = tmp_path / "rec"
    # the run reads with --model (a copy of the shipped model): the replay reads with it too
    model = tmp_path / "mine" / "board.onnx"
    model.parent.mkdir()
    shutil.copyfile(SHIPPED_MODEL, model)
    args = ["run", "--fast", "--view", "none", "--profile", profile, "--reader", "onnx"]
    args += ["--model", str(model)]
    r = hil(*args, "--frames", "700", "--record", str(rec), "--record-codec", "ffv1")
    assert r.returncode in (0, 1), r.stderr  # 700 frames: the level is not over
    r = hil("replay", str(rec), "--quiet", "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert f"perception model {model} (the run's --model, in the recording)" in r.stderr
    n = len(Recording(rec))
    assert f"vs the run's readings over {n} frames: cells 100.00 %" in r.stdout, r.stdout
    assert "pill 100.00 %, next 100.00 %, kind 100.00 %" in r.stdout, r.stdout
    model.unlink()  # gone: the default choice reads, and the line says the run's is gone
    r = hil("replay", str(rec), "--quiet", "--out", str(tmp_path / "out2"), "--frames", "50")
    assert r.returncode == 0 and f"the run's --model {model} is gone" in r.stderr, r.stderr


def cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.fixture
def broken(tmp_path, sim_rec) -> Path:
    rec = tmp_path / "rec"
    shutil.copytree(sim_rec, rec)
    return rec


def replay_truth(rec: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return hil("replay", str(rec), "--quiet", "--reader", "truth", "--policy", "deepest",
               "--out", str(out))  # fmt: skip


def test_an_empty_sidecar_is_refused(broken, tmp_path):
    (broken / "frames.jsonl").write_text("")
    refused(replay_truth(broken, tmp_path / "o"), "hil replay:", "frames.jsonl: no frames")


def test_deleted_sidecar_lines_are_refused_naming_the_line(broken, tmp_path):
    lines = (broken / "frames.jsonl").read_text().splitlines(keepends=True)
    (broken / "frames.jsonl").write_text("".join(lines[:40] + lines[61:]))
    err = refused(replay_truth(broken, tmp_path / "o"), "frames.jsonl:41: frame index 61")
    assert "would not align" in err


def test_a_wrong_index_is_refused(broken, tmp_path):
    lines = (broken / "frames.jsonl").read_text().splitlines(keepends=True)
    lines[7] = json.dumps(json.loads(lines[7]) | {"index": 70}) + "\n"
    (broken / "frames.jsonl").write_text("".join(lines))
    refused(replay_truth(broken, tmp_path / "o"), "frames.jsonl:8: frame index 70 where 7")


def test_a_cut_recording_replays_to_its_last_whole_frame_with_a_warning(broken, tmp_path):
    """As a crash leaves it: recording.json not closed, the sidecar's last line unfinished."""
    meta = json.loads((broken / "recording.json").read_text())
    (broken / "recording.json").write_text(json.dumps(meta | {"closed": False}))
    side = broken / "frames.jsonl"
    cut(side, len(side.read_bytes()) - 50)
    r = replay_truth(broken, tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "119 frames replayed" in r.stdout
    assert "warning" in r.stderr and "frames.jsonl:120: unfinished last line" in r.stderr


def test_a_closed_recording_whose_video_is_short_is_refused(broken, tmp_path):
    video = broken / "capture.mkv"
    cut(video, len(video.read_bytes()) // 3)
    r = replay_truth(broken, tmp_path / "o")
    refused(r, "hil replay:", "the video ends after", "frames.jsonl has 120 lines")
