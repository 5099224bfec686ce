"""hil.consoles.rig: the sources ``hil run`` reads frames from (newest-only semantics)."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest

from hil.consoles.base import CaptureError
from hil.consoles.rig import DeviceCapture, FileCapture, fourcc_str


def write_video(path, n=12, fps=60.0):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), fps, (64, 48))
    assert writer.isOpened()
    for i in range(n):
        img = np.full((48, 64, 3), (i * 20) % 256, np.uint8)  # frame i: grey level 20 i
        writer.write(img)
    writer.release()


def test_file_capture_lockstep_returns_every_frame_then_ends(tmp_path):
    path = tmp_path / "clip.avi"
    write_video(path)
    src = FileCapture(path, clock=lambda: 1_000)
    got = [src.newest(1.0) for _ in range(12)]
    assert [f.index for f in got if f is not None] == list(range(12))
    levels = [int(f.image.mean()) for f in got if f is not None]
    assert levels == sorted(levels) and abs(levels[5] - 100) <= 3
    assert got[3] is not None and got[3].time_ns == 1_000 + round(3 * 1e9 / 60.0)
    with pytest.raises(CaptureError, match="end of"):
        src.newest(1.0)
    src.close()


def test_file_capture_in_real_time_skips_what_the_caller_missed(tmp_path):
    path = tmp_path / "clip.avi"
    write_video(path, n=30, fps=60.0)
    src = FileCapture(path, realtime=True)
    first = src.newest(1.0)
    time.sleep(0.2)  # 12 frames go by while the caller is busy
    later = src.newest(1.0)
    assert first is not None and later is not None
    assert later.index >= first.index + 8 and src.skipped >= 7
    src.close()


def test_missing_files_and_devices_are_clear_errors(tmp_path):
    with pytest.raises(CaptureError, match="no video file"):
        FileCapture(tmp_path / "nope.avi")
    with pytest.raises(CaptureError, match="cannot open capture device"):
        DeviceCapture(str(tmp_path / "video99"), reconnect=False)


def test_fourcc_names():
    assert fourcc_str(cv2.VideoWriter.fourcc(*"MJPG")) == "MJPG"
    assert fourcc_str(cv2.VideoWriter.fourcc(*"YUYV")) == "YUYV"
