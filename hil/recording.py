"""Recordings: captured frames in a video file with a JSONL sidecar of ground truth per frame.

A recording is a directory (docs/CAPTURE.md, "Recordings"):

- ``recording.json``: format version, codec, video file name, frame size, frame rate, the
  capture Profile, and what produced it (level, speed, seed, ...);
- ``capture.mkv`` (FFV1, lossless) or ``capture.avi`` (MJPEG), written with OpenCV; frame ``i``
  of the video is line ``i`` of the sidecar;
- ``frames.jsonl``: one JSON object per captured frame, flushed as it is written (a crash keeps
  every line written before it): ``index``, ``time_ns`` and whatever ground truth the producer
  gives (``hil sim record``: device index, console frame(s), field, falling and next pill, phase).

:class:`RecordingWriter` writes one, :class:`Recording` reads it back as (:class:`Frame`,
truth) pairs. A missing or undecodable video, a missing sidecar or a sidecar that does not
match the video raises :class:`RecordingError` (a ValueError) saying which file and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import cv2
import numpy as np

from calibration import Profile

FORMAT_VERSION = 1
META_FILE = "recording.json"
TRUTH_FILE = "frames.jsonl"
# codec name -> (FourCC, file name, OpenCV backend)
CODECS: dict[str, tuple[str, str, int]] = {
    "ffv1": ("FFV1", "capture.mkv", cv2.CAP_FFMPEG),
    "mjpeg": ("MJPG", "capture.avi", cv2.CAP_OPENCV_MJPEG),
}


class RecordingError(ValueError):
    """A recording that cannot be written or read; the message names the file."""


@dataclass(frozen=True)
class Frame:
    """One captured frame as a capture source delivers it (DESIGN.md data flow).

    ``image``: BGR uint8 [height, width, 3]. ``time_ns``: capture (host receive) time in ns.
    ``index``: delivered frame number, from 0.
    """

    image: np.ndarray
    time_ns: int
    index: int


class RecordingWriter:
    """Writes a recording directory frame by frame; use as a context manager.

    ``out_dir`` is created if needed; an existing recording there raises RecordingError unless
    ``overwrite``. ``codec``: ``"ffv1"`` (lossless MKV) or ``"mjpeg"`` (AVI, ``mjpeg_quality``
    1..100). The frame size and rate come from ``profile`` (geometry, timing.capture_hz);
    ``meta`` is stored in recording.json under ``"source"``.
    """

    def __init__(
        self,
        out_dir: str | Path,
        profile: Profile,
        codec: str = "ffv1",
        meta: dict[str, Any] | None = None,
        mjpeg_quality: int = 90,
        overwrite: bool = False,
    ) -> None:
        if codec not in CODECS:
            raise RecordingError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")
        if not 1 <= int(mjpeg_quality) <= 100:
            raise RecordingError(f"mjpeg_quality must be in [1, 100], got {mjpeg_quality}")
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        if (self.dir / META_FILE).exists() and not overwrite:
            raise RecordingError(f"{self.dir} already holds a recording (overwrite=True replaces)")
        fourcc, name, backend = CODECS[codec]
        g = profile.geometry
        self.size = (g.width, g.height)
        self.count = 0
        self.video_path = self.dir / name
        for stale in (self.dir / n for _, n, _ in CODECS.values()):
            stale.unlink(missing_ok=True)
        self._video: cv2.VideoWriter | None = cv2.VideoWriter(
            str(self.video_path),
            backend,
            cv2.VideoWriter.fourcc(*fourcc),
            profile.timing.capture_hz,
            self.size,
        )
        if not self._video.isOpened():
            self._video = None
            raise RecordingError(
                f"OpenCV cannot write {codec} video to {self.video_path} "
                f"(backend {backend}; is this OpenCV built with FFmpeg?)"
            )
        if codec == "mjpeg":
            self._video.set(cv2.VIDEOWRITER_PROP_QUALITY, float(mjpeg_quality))
        header = {
            "format": "drmario-bridge recording",
            "version": FORMAT_VERSION,
            "codec": codec,
            "video": name,
            "truth": TRUTH_FILE,
            "width": g.width,
            "height": g.height,
            "fps": profile.timing.capture_hz,
            "mjpeg_quality": int(mjpeg_quality) if codec == "mjpeg" else None,
            "profile": profile.to_dict(),
            "source": meta or {},
        }
        (self.dir / META_FILE).write_text(json.dumps(header, indent=2) + "\n")
        self._truth = (self.dir / TRUTH_FILE).open("w")

    def write(self, image: np.ndarray, time_ns: int, truth: dict[str, Any] | None = None) -> int:
        """Append one captured frame (BGR uint8 [height, width, 3]) and its sidecar line.

        ``time_ns``: capture time. ``truth``: JSON-ready ground truth for this frame. Returns
        the frame's index. Raises RecordingError for a frame of another shape or dtype.
        """
        w, h = self.size
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8 or image.shape != (h, w, 3):
            got = f"{image.dtype} {list(image.shape)}" if isinstance(image, np.ndarray) else image
            raise RecordingError(f"frames must be BGR uint8 [{h}, {w}, 3], got {got}")
        if self._video is None:
            raise RecordingError(f"{self.video_path}: the recording is closed")
        self._video.write(np.ascontiguousarray(image))
        line = {"index": self.count, "time_ns": int(time_ns), **(truth or {})}
        self._truth.write(json.dumps(line, separators=(",", ":")) + "\n")
        self._truth.flush()
        self.count += 1
        return self.count - 1

    def close(self) -> None:
        if self._video is not None:
            self._video.release()
            self._truth.close()
            self._video = None

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Recording:
    """A recording directory opened for reading: ``for frame, truth in Recording(path)``.

    ``meta``: recording.json. ``profile``: the capture Profile it was made with. ``truth``: the
    sidecar's lines (list of dicts). Raises RecordingError when recording.json, the video or the
    sidecar is missing or unreadable, or when they do not agree (size, frame count).
    """

    def __init__(self, path: str | Path) -> None:
        self.dir = Path(path)
        meta_path = self.dir / META_FILE
        if not meta_path.is_file():
            raise RecordingError(f"{self.dir} is not a recording: no {META_FILE}")
        try:
            self.meta: dict[str, Any] = json.loads(meta_path.read_text())
            self.video_path = self.dir / self.meta["video"]
            self.size = (int(self.meta["width"]), int(self.meta["height"]))
            self.profile = Profile.from_dict(self.meta["profile"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise RecordingError(f"{meta_path}: unreadable recording header ({e})") from None
        truth_path = self.dir / self.meta.get("truth", TRUTH_FILE)
        if not truth_path.is_file():
            raise RecordingError(
                f"{self.dir}: the ground-truth sidecar {truth_path.name} is missing"
            )
        self.truth: list[dict[str, Any]] = []
        with truth_path.open() as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    self.truth.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise RecordingError(f"{truth_path}:{n}: not JSON ({e})") from None
        if not self.video_path.is_file():
            raise RecordingError(f"{self.dir}: the video {self.video_path.name} is missing")
        cap = self._open()
        cap.release()

    def _open(self) -> cv2.VideoCapture:
        cap = cv2.VideoCapture(str(self.video_path))
        if not cap.isOpened():
            raise RecordingError(f"{self.video_path}: OpenCV cannot decode this video")
        w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        if (w, h) != self.size:
            cap.release()
            raise RecordingError(
                f"{self.video_path}: frames are {w}x{h}, recording.json says "
                f"{self.size[0]}x{self.size[1]}"
            )
        return cap

    def __len__(self) -> int:
        return len(self.truth)

    def __iter__(self) -> Iterator[tuple[Frame, dict[str, Any]]]:
        return self.frames()

    def frames(self, start: int = 0) -> Iterator[tuple[Frame, dict[str, Any]]]:
        """(Frame, truth) for every frame from ``start``; RecordingError if the video is short."""
        cap = self._open()
        try:
            if start:
                cap.set(cv2.CAP_PROP_POS_FRAMES, start)
            for i in range(start, len(self.truth)):
                ok, image = cap.read()
                if not ok:
                    raise RecordingError(
                        f"{self.video_path}: the video ends after {i} frames, "
                        f"but {TRUTH_FILE} has {len(self.truth)} lines"
                    )
                t = self.truth[i]
                yield Frame(image=image, time_ns=int(t["time_ns"]), index=int(t["index"])), t
        finally:
            cap.release()
