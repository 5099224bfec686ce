"""Where a replay's frames come from: a recording (hil.loop.recording) or any video file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration import Profile
from hil.consoles.base import CaptureError
from hil.consoles.rig import FileCapture
from hil.loop.recording import META_FILE, Frame, Recording, RecordingError
from hil.replay.common import ReplayError


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
    try:
        cap = FileCapture(p, clock=lambda: 0, default_fps=_default_fps(profile))
    except CaptureError:
        raise ReplayError(f"{p}: OpenCV cannot decode this file as a video") from None
    try:
        first = cap.newest(0.0)
    except CaptureError:
        cap.close()
        raise ReplayError(
            f"{p}: OpenCV opened it but reads no frame (not a video, or empty)"
        ) from None
    assert first is not None  # (lockstep: the next frame, or CaptureError at the end)
    if profile is None:
        cap.close()
        raise ReplayError(
            f"{p} is a plain video (no recording.json naming its capture profile): pass the "
            f"capture's profile with --profile, or fit one first with `hil calibrate --input "
            f"{p} --out profile.json`"
        )
    _check_size(profile, (first.image.shape[1], first.image.shape[0]), p)
    return Source(_video_frames(cap, first), profile, cap.fps, cap.count, {}, str(p), False)


def _default_fps(profile: Profile | None) -> float:
    """A video's frame rate where its file states none: the profile's capture rate."""
    return profile.timing.capture_hz if profile is not None else 60.0


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


def _video_frames(cap: FileCapture, first: Frame) -> Iterator[tuple[Frame, dict[str, Any] | None]]:
    """The rig's video capture in lockstep (hil.consoles.rig.FileCapture): every frame in
    order, ``time_ns`` i / fps from 0."""
    try:
        frame: Frame | None = first
        while frame is not None:
            yield frame, None
            try:
                frame = cap.newest(0.0)
            except CaptureError:  # the end of the file
                frame = None
    finally:
        cap.close()


def to_capture(profile: Profile, x: float, y: float) -> tuple[int, int]:
    g = profile.geometry
    return (
        round(g.offset_x + (x - g.crop_left) * g.scale_x),
        round(g.offset_y + (y - g.crop_top) * g.scale_y),
    )
