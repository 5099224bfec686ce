"""hil.recording: video + JSONL sidecar written and read back; clear errors for bad files."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from calibration import CaptureModel, Geometry, Profile
from hil.recording import Recording, RecordingError, RecordingWriter

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


def test_mjpeg_round_trip_is_close(tmp_path):
    frames = captured_frames(6)
    write(tmp_path / "rec", frames, codec="mjpeg", mjpeg_quality=95)
    rec = Recording(tmp_path / "rec")
    assert rec.video_path.suffix == ".avi"
    errors = [np.abs(f.image.astype(int) - frames[i]).mean() for i, (f, _) in enumerate(rec)]
    assert len(errors) == 6
    # As close as one JPEG generation at that quality (4:2:0 chroma costs most on these tiles).
    for err, frame in zip(errors, frames, strict=True):
        _, buf = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 95])
        jpeg_err = np.abs(cv2.imdecode(buf, cv2.IMREAD_COLOR).astype(int) - frame).mean()
        assert 0 < err <= 1.25 * jpeg_err + 0.5


def test_sidecar_is_flushed_per_line(tmp_path):
    w = RecordingWriter(tmp_path / "rec", PROFILE)
    frames = captured_frames(3)
    for i, f in enumerate(frames):
        w.write(f, time_ns=i, truth={"k": i})
        lines = (tmp_path / "rec" / "frames.jsonl").read_text().splitlines()
        assert len(lines) == i + 1 and json.loads(lines[-1])["k"] == i
    w.close()


def test_writer_rejects_bad_input(tmp_path):
    with pytest.raises(RecordingError, match="codec must be one of ffv1, mjpeg"):
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
    with pytest.raises(RecordingError, match="unreadable recording header"):
        Recording(rec)
