"""Where a replay's frames come from: a recording (hil.loop.recording) or any video file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from calibration import Profile
from hil.loop.recording import META_FILE, Frame, Recording, RecordingError
from hil.loop.replay.common import ReplayError


@dataclass
class Source:
    """Frames to replay: (Frame, sidecar line or None) pairs, the Profile, the frame rate and
    what the producer said (level, speed, ...)."""

    frames: Iterator[tuple[Frame, dict[str, Any] | None]]
    profile: Profile
    fps: float
    count: int | None
    meta: dict[str, Any]
    name: str
    has_truth: bool
    # what a recording cut short leaves out (grows while frames are read)
    warnings: list[str] = field(default_factory=list)


def open_source(path: str | Path, profile: Profile | None = None) -> Source:
    """A recording directory (or its video file) or any video file OpenCV decodes.

    ``profile`` overrides the recording's; a plain video needs it. Raises ReplayError for a
    missing path, an undecodable video, a plain video without ``profile``, or frames whose size
    does not match the profile.
    """
    p = Path(path)
    if not p.exists():
        raise ReplayError(f"{p}: no such file or directory")
    rec_dir = p if p.is_dir() else p.parent
    if (rec_dir / META_FILE).is_file() and (p.is_dir() or p.name == _video_name(rec_dir)):
        try:
            rec = Recording(rec_dir)
        except RecordingError as e:
            raise ReplayError(str(e)) from None
        prof = profile or rec.profile
        _check_size(prof, rec.size, rec.video_path)
        frames: Iterator[tuple[Frame, dict[str, Any] | None]] = iter(rec)
        fps = float(rec.meta.get("fps") or prof.timing.capture_hz)
        meta = dict(rec.meta.get("source", {}))
        return Source(frames, prof, fps, len(rec), meta, str(rec_dir), True, rec.warnings)
    if p.is_dir():
        raise ReplayError(f"{p} is a directory but not a recording (no {META_FILE})")
    cap = cv2.VideoCapture(str(p))
    if not cap.isOpened():
        raise ReplayError(f"{p}: OpenCV cannot decode this file as a video")
    ok, first = cap.read()
    if not ok:
        cap.release()
        raise ReplayError(f"{p}: OpenCV opened it but reads no frame (not a video, or empty)")
    if profile is None:
        cap.release()
        raise ReplayError(
            f"{p} is a plain video (no recording.json naming its capture profile): pass the "
            f"capture's profile with --profile, or fit one first with `hil calibrate --input "
            f"{p} --out profile.json`"
        )
    prof = profile
    _check_size(prof, (first.shape[1], first.shape[0]), p)
    fps = cap.get(cv2.CAP_PROP_FPS) or prof.timing.capture_hz
    count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    return Source(_video_frames(cap, first, fps), prof, float(fps), count, {}, str(p), False)


def _video_name(rec_dir: Path) -> str | None:
    try:
        return str(json.loads((rec_dir / META_FILE).read_text()).get("video"))
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def _check_size(profile: Profile, size: tuple[int, int], where: Path) -> None:
    g = profile.geometry
    if size != (g.width, g.height):
        raise ReplayError(
            f"{where}: frames are {size[0]}x{size[1]}, profile {profile.name!r} is "
            f"{g.width}x{g.height}; pass the capture's profile with --profile"
        )


def _video_frames(
    cap: cv2.VideoCapture, first: np.ndarray, fps: float
) -> Iterator[tuple[Frame, dict[str, Any] | None]]:
    try:
        image: np.ndarray | None = first
        i = 0
        while image is not None:
            yield Frame(image=image, time_ns=round(i * 1e9 / fps), index=i), None
            ok, nxt = cap.read()
            image = np.asarray(nxt) if ok else None
            i += 1
    finally:
        cap.release()


def to_capture(profile: Profile, x: float, y: float) -> tuple[int, int]:
    g = profile.geometry
    return (
        round(g.offset_x + (x - g.crop_left) * g.scale_x),
        round(g.offset_y + (y - g.crop_top) * g.scale_y),
    )
