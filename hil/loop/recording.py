"""Recordings: captured frames in a video file with a JSONL sidecar of ground truth per frame.

A recording is a directory (docs/CAPTURE.md, "Recordings"; docs/RUN.md, "Recordings"):

- ``recording.json``: format version, codec, video file name, frame size, frame rate, the
  capture Profile, and what produced it (level, speed, seed, reader, ...); written when the
  recording opens, and again when it is closed with ``"closed": true`` and the frame count
  (a recording without them was cut short: a crash, SIGKILL, power loss);
- ``capture.mkv``: Matroska written by OpenCV's FFmpeg backend, in one of :data:`CODECS`
  (``ffv1`` lossless, ``mpeg4`` MPEG-4 part 2, ``mjpeg``). Matroska is written as a stream of
  clusters with no index needed to read it, so a file cut off at any byte still decodes up to
  its last whole cluster (checked by killing a writer with SIGKILL). Frame ``i`` of the video is
  line ``i`` of the sidecar. Older recordings in ``capture.avi`` (MJPEG) are still read;
- ``frames.jsonl``: one JSON object per captured frame, written and flushed (to the OS, which
  keeps it if the process dies; fsync every :data:`FSYNC_EVERY` frames against power loss) as
  the frame is written: ``index`` (0, 1, 2, ... : checked on reading), ``time_ns`` and whatever
  the producer gives (``hil sim record``: device index, console frame(s), field, falling and
  next pill, phase; ``hil run``: the observation, the matched console frame, the level in play,
  the decision sent).

:class:`RecordingWriter` writes one, :class:`Recording` reads it back as (:class:`Frame`,
sidecar line) pairs, streaming (memory does not grow with the length). A missing or
undecodable video, a missing or empty sidecar, a sidecar line that is not JSON or whose
``index`` is not its line number raises :class:`RecordingError` (a ValueError) naming the file
and line. A recording cut short (an unfinished last sidecar line, a video shorter than the
sidecar) is read up to its last whole frame: ``Recording.warnings`` says what was left out.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, overload

import cv2
import numpy as np

from calibration import Profile
from hil.consoles.base import Frame

FORMAT_VERSION = 2
META_FILE = "recording.json"
TRUTH_FILE = "frames.jsonl"
FSYNC_EVERY = 600  # frames (10 s): the sidecar and video reach the disk at least this often
# codec name -> (FourCC, file name, OpenCV backend). Sizes per 1280x720 frame of the simulated
# `mjpeg_720p_q70` capture (noise and JPEG artefacts; docs/RUN.md "Recordings"): ffv1 ~534 KB
# (lossless: 115 GB an hour), mjpeg ~95 KB (20 GB an hour, mean error 2.4 grey levels), mpeg4
# ~26 KB (5.6 GB an hour, mean error 3.4 grey levels).
CODECS: dict[str, tuple[str, str, int]] = {
    "ffv1": ("FFV1", "capture.mkv", cv2.CAP_FFMPEG),
    "mpeg4": ("mp4v", "capture.mkv", cv2.CAP_FFMPEG),
    "mjpeg": ("MJPG", "capture.mkv", cv2.CAP_FFMPEG),
}
LEGACY_VIDEOS = ("capture.avi",)  # FORMAT_VERSION 1 wrote MJPEG AVI (not crash-safe)
VIDEO_FILES = (*sorted({n for _, n, _ in CODECS.values()}), *LEGACY_VIDEOS)
RECORDING_FILES = (META_FILE, TRUTH_FILE, *VIDEO_FILES)  # any of them: a recording is there
MAX_SIDE = 8192  # NES pixels or capture pixels: a frame side no capture card gives
RUN_READERS = ("auto", "onnx", "oracle")  # hil run --reader, recorded in "source"


def jsonable(o: Any) -> Any:
    """``json.dumps`` default for NumPy scalars and arrays; raises TypeError for anything else
    (a sidecar never stores a value it cannot read back)."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


class RecordingError(ValueError):
    """A recording that cannot be written or read; the message names the file."""


def check_target(out_dir: str | Path, overwrite: bool) -> Path:
    """Checks, without writing anything, that a recording can be written to ``out_dir``: it
    is not a file, and holds no recording unless ``overwrite``; its nearest existing parent is
    a writable directory. Returns the path. Raises RecordingError saying why not."""
    d = Path(out_dir)
    if d.exists() and not d.is_dir():
        raise RecordingError(f"{d} is a file, not a directory for a recording")
    held = [n for n in RECORDING_FILES if (d / n).exists() or (d / n).is_symlink()]
    if held and not overwrite:
        raise RecordingError(
            f"{d} already holds a recording ({', '.join(held)}; kept: --overwrite replaces "
            "it, or choose another directory)"
        )
    parent = d
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise RecordingError(f"{d}: cannot write into {parent} (permission denied)")
    return d


def _field_error(path: Path, field: str, expected: str, got: Any) -> RecordingError:
    shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
    return RecordingError(f"{path}: field {field!r}: expected {expected}, got {shown}")


def check_header(meta: Any, path: Path) -> dict[str, Any]:
    """Validates a recording.json object (``path``: its file, for the message) against the
    recording schema of format versions 1 to :data:`FORMAT_VERSION` and returns it:

    - ``version``: int 1..FORMAT_VERSION (absent: 1); ``format`` (absent in version 1):
      ``"drmario-bridge recording"``;
    - ``video``: one of :data:`VIDEO_FILES`, ``truth`` (absent: frames.jsonl): frames.jsonl,
      both bare names (a recording's files are inside it, never a path elsewhere);
    - ``width``, ``height``: int 1..:data:`MAX_SIDE` (pixels); ``fps`` (optional): a number
      in (0, 1000]; ``profile``: an object (checked by ``Profile.from_dict``);
    - ``closed`` (optional): bool; ``frames`` (optional): int >= 0; ``source`` (optional): an
      object whose ``reader``, if present, is one of :data:`RUN_READERS` and whose ``level``
      and ``speed``, if present, are ints 0..24 and 0..2 or null.

    Raises RecordingError naming the file, the field and what was expected.
    """
    if not isinstance(meta, dict):
        raise _field_error(path, "(top level)", "a JSON object", type(meta).__name__)
    version = meta.get("version", 1)
    if type(version) is not int or not 1 <= version <= FORMAT_VERSION:
        raise _field_error(path, "version", f"an integer 1..{FORMAT_VERSION}", version)
    fmt = meta.get("format", "drmario-bridge recording" if version == 1 else None)
    if fmt != "drmario-bridge recording":
        raise _field_error(path, "format", "'drmario-bridge recording'", fmt)
    if meta.get("video") not in VIDEO_FILES:
        raise _field_error(path, "video", f"one of {', '.join(VIDEO_FILES)}", meta.get("video"))
    if meta.get("truth", TRUTH_FILE) != TRUTH_FILE:
        raise _field_error(path, "truth", repr(TRUTH_FILE), meta.get("truth"))
    for name in ("width", "height"):
        v = meta.get(name)
        if type(v) is not int or not 1 <= v <= MAX_SIDE:
            raise _field_error(path, name, f"an integer 1..{MAX_SIDE} (pixels)", v)
    fps = meta.get("fps")
    if fps is not None and (type(fps) not in (int, float) or not 0 < fps <= 1000):
        raise _field_error(path, "fps", "a number in (0, 1000] (frames a second)", fps)
    if not isinstance(meta.get("profile"), dict):
        raise _field_error(path, "profile", "a capture profile object", meta.get("profile"))
    if not isinstance(meta.get("closed", False), bool):
        raise _field_error(path, "closed", "true or false", meta.get("closed"))
    frames = meta.get("frames")
    if frames is not None and (type(frames) is not int or frames < 0):
        raise _field_error(path, "frames", "an integer >= 0", frames)
    source = meta.get("source", {})
    if not isinstance(source, dict):
        raise _field_error(path, "source", "an object", source)
    if "reader" in source and source["reader"] not in RUN_READERS:
        raise _field_error(
            path, "source.reader", f"one of {', '.join(RUN_READERS)}", source["reader"]
        )
    for name, top in (("level", 24), ("speed", 2)):
        v = source.get(name)
        if v is not None and (type(v) is not int or not 0 <= v <= top):
            raise _field_error(path, f"source.{name}", f"an integer 0..{top} or null", v)
    return meta


def _inside(d: Path, name: str) -> Path:
    """``d / name``, refused (RecordingError) when it resolves outside ``d`` (a symbolic link
    to elsewhere)."""
    p = d / name
    if p.is_symlink() or p.exists():
        if not p.resolve().is_relative_to(d.resolve()):
            raise RecordingError(f"{p}: points outside the recording ({p.resolve()})")
    return p


class RecordingWriter:
    """Writes a recording directory frame by frame; use as a context manager.

    ``out_dir`` is created if needed; an existing recording there raises RecordingError unless
    ``overwrite`` (nothing is removed before that check passes). ``codec``: one of
    :data:`CODECS`. The frame size and rate come from ``profile`` (geometry,
    timing.capture_hz); ``meta`` is stored in recording.json under ``"source"``.
    ``mjpeg_quality`` is kept for callers of format 1 and recorded; FFmpeg's MJPEG encoder
    takes its own quantiser.
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
        self.dir = check_target(out_dir, overwrite)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RecordingError(f"{self.dir}: cannot create the directory ({e})") from None
        fourcc, name, backend = CODECS[codec]
        g = profile.geometry
        self.size = (g.width, g.height)
        self.count = 0
        self.video_path = self.dir / name
        for stale in [self.dir / META_FILE, self.dir / TRUTH_FILE] + [
            self.dir / n for n in {*(n for _, n, _ in CODECS.values()), *LEGACY_VIDEOS}
        ]:
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
        self.header: dict[str, Any] = {
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
            "closed": False,
        }
        self._write_header()
        self._truth = (self.dir / TRUTH_FILE).open("w", encoding="utf-8")

    def _write_header(self) -> None:
        tmp = self.dir / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(self.header, indent=2) + "\n")
        os.replace(tmp, self.dir / META_FILE)  # never a half-written header

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
        line = json.dumps(
            {"index": self.count, "time_ns": int(time_ns), **(truth or {})},
            separators=(",", ":"),
            default=jsonable,
        )
        self._video.write(np.ascontiguousarray(image))
        self._truth.write(line + "\n")
        self._truth.flush()
        self.count += 1
        if self.count % FSYNC_EVERY == 0:
            os.fsync(self._truth.fileno())
        return self.count - 1

    def close(self, **extra: Any) -> None:
        """Closes the video (its trailer written) and the sidecar, and marks recording.json
        closed with the frame count; ``extra`` (JSON-ready) is added to the header."""
        if self._video is not None:
            self._video.release()
            self._video = None
            self._truth.close()
            self.header.update(closed=True, frames=self.count, **extra)
            self._write_header()

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Sidecar(Sequence[dict[str, Any]]):
    """The sidecar's lines, read from the file when asked (a byte offset per line is kept:
    8 bytes a frame). Built by :class:`Recording`, which checks every line once."""

    def __init__(self, path: Path, offsets: array, count: int) -> None:
        self.path = path
        self._offsets = offsets
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)
        with self.path.open("rb") as f:
            f.seek(self._offsets[i])
            return dict(json.loads(f.readline()))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.lines()

    def lines(self, start: int = 0) -> Iterator[dict[str, Any]]:
        """The lines from ``start`` on, streamed."""
        if start >= self._count:
            return
        with self.path.open("rb") as f:
            f.seek(self._offsets[start])
            for _ in range(start, self._count):
                yield dict(json.loads(f.readline()))


class Recording:
    """A recording directory opened for reading: ``for frame, truth in Recording(path)``.

    ``meta``: recording.json. ``profile``: the capture Profile it was made with. ``truth``: the
    sidecar's lines (a Sequence of dicts, read lazily). ``warnings``: what a recording cut short
    loses (empty for a whole one). Raises RecordingError when recording.json, the video or the
    sidecar is missing or unreadable, or a sidecar line is broken or out of order (the message
    names the file and line).
    """

    def __init__(self, path: str | Path) -> None:
        self.dir = Path(path)
        meta_path = self.dir / META_FILE
        if not meta_path.is_file():
            raise RecordingError(f"{self.dir} is not a recording: no {META_FILE}")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            raise RecordingError(f"{meta_path}: unreadable recording header ({e})") from None
        self.meta: dict[str, Any] = check_header(meta, meta_path)
        self.video_path = _inside(self.dir, self.meta["video"])
        self.size = (self.meta["width"], self.meta["height"])
        try:
            self.profile = Profile.from_dict(self.meta["profile"])
        except (KeyError, TypeError, ValueError) as e:
            raise RecordingError(f"{meta_path}: field 'profile': {e}") from None
        self.warnings: list[str] = []
        truth_path = _inside(self.dir, self.meta.get("truth", TRUTH_FILE))
        if not truth_path.is_file():
            raise RecordingError(
                f"{self.dir}: the ground-truth sidecar {truth_path.name} is missing"
            )
        offsets, count = self._scan(truth_path)
        if not self.video_path.is_file():
            raise RecordingError(f"{self.dir}: the video {self.video_path.name} is missing")
        cap = self._open()
        cap.release()
        self.truth = Sidecar(truth_path, offsets, count)
        if self.meta.get("version", 1) >= 2 and not self.meta.get("closed"):
            self.warnings.append(
                f"{meta_path.name}: the recording was not closed (cut short by a crash, "
                f"SIGKILL or power loss); {count} whole sidecar lines"
            )
        elif self.meta.get("closed") and self.meta.get("frames") != count:
            raise RecordingError(
                f"{truth_path}: {count} lines, but {META_FILE} says {self.meta.get('frames')} "
                "frames were written (lines lost or added)"
            )

    def _scan(self, truth_path: Path) -> tuple[array, int]:
        """Checks every line once (JSON, ``index`` equal to its position); keeps offsets."""
        offsets = array("q")
        pos = 0
        with truth_path.open("rb") as f:
            for n, raw in enumerate(f, start=1):
                start, pos = pos, pos + len(raw)
                where = f"{truth_path}:{n}"
                if not raw.endswith(b"\n"):  # the last line, unfinished: the writer was cut off
                    self.warnings.append(
                        f"{where}: unfinished last line left out (the recording was cut short)"
                    )
                    break
                try:
                    line = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise RecordingError(f"{where}: not JSON ({e})") from None
                except RecursionError:
                    raise RecordingError(f"{where}: not JSON (nested too deep)") from None
                index = line.get("index") if isinstance(line, dict) else None
                if index != len(offsets):
                    raise RecordingError(
                        f"{where}: frame index {index!r} where {len(offsets)} was due (lines "
                        "missing, added or reordered: the video and sidecar would not align)"
                    )
                if not isinstance(line.get("time_ns"), int):
                    raise RecordingError(f"{where}: no integer time_ns")
                offsets.append(start)
        if not offsets:
            raise RecordingError(f"{truth_path}: no frames (an empty sidecar)")
        return offsets, len(offsets)

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

    @property
    def closed(self) -> bool:
        """True when the writer closed it (False: cut short, or a format 1 recording)."""
        return bool(self.meta.get("closed"))

    def __len__(self) -> int:
        return len(self.truth)

    def __iter__(self) -> Iterator[tuple[Frame, dict[str, Any]]]:
        return self.frames()

    def frames(
        self, start: int = 0, on_short: str = "raise"
    ) -> Iterator[tuple[Frame, dict[str, Any]]]:
        """(Frame, sidecar line) for every frame from ``start``. A video with fewer frames than
        the sidecar: ``on_short="raise"`` raises RecordingError when a closed recording's video
        ends early; a recording that was cut short (not closed) ends at its last whole frame
        with a warning appended to ``warnings``, as does ``on_short="stop"`` for any."""
        cap = self._open()
        try:
            if start:
                cap.set(cv2.CAP_PROP_POS_FRAMES, start)
            for i, t in enumerate(self.truth.lines(start), start=start):
                ok, image = cap.read()
                if not ok:
                    msg = (
                        f"{self.video_path}: the video ends after {i} frames, "
                        f"but {TRUTH_FILE} has {len(self.truth)} lines"
                    )
                    if on_short == "raise" and (self.closed or self.meta.get("version", 1) < 2):
                        raise RecordingError(msg)
                    self.warnings.append(msg + f"; frames {i}.. left out")
                    return
                yield Frame(image=image, time_ns=int(t["time_ns"]), index=int(t["index"])), t
        finally:
            cap.release()


def _truth_json(truth: dict[str, Any]) -> dict[str, Any]:
    """A capture's ground truth (the emulator's RAM-checked shadow) as JSON: ScreenFacts
    become their kind, bottle rows (hex), falling pill and next pill."""
    out: dict[str, Any] = {}
    for k, v in truth.items():
        if k == "facts":
            if v is None:
                out[k] = None
                continue
            out[k] = {
                "kind": int(v.kind),
                "bottle": [bytes(np.asarray(r, np.uint8)).hex() for r in v.bottle],
                "falling": None
                if v.falling is None
                else [
                    int(v.falling.x),
                    int(v.falling.y),
                    int(v.falling.rotation),
                    [int(c) for c in v.falling.colors],
                ],
                "next": None if v.next is None else [int(c) for c in v.next.colors],
                "virus_frame": int(v.virus_frame),
            }
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
    return out


class RunRecorder:
    """``hil run --record DIR``: an on_frame hook for hil.loop.runtime.Runtime writing each captured
    frame with what the run made of it (sidecar: ``console_frame`` matched, ``observation``,
    ``level`` [level, speed] in play, ``decision`` on the frame a placement was sent).

    Nothing is written until the first frame arrives, so a run that fails to start (no
    capture, no port, bad input) leaves an existing directory as it was; ``check_target``
    refuses an existing recording unless ``overwrite`` before the run starts. ``meta`` goes to
    recording.json's ``source`` (hil replay takes the reader, levels, profile from it).
    """

    def __init__(
        self,
        out_dir: str | Path,
        profile: Profile,
        codec: str,
        meta: dict[str, Any],
        overwrite: bool = False,
    ) -> None:
        if codec not in CODECS:
            raise RecordingError(f"codec must be one of {', '.join(CODECS)}, got {codec!r}")
        self.dir = check_target(out_dir, overwrite)
        self.profile = profile
        self.codec = codec
        self.meta = meta
        self.overwrite = overwrite
        self.writer: RecordingWriter | None = None
        self._placement: object = None
        self.busy = False  # True while a frame is being written (signals wait for it)

    def __call__(self, rt: Any, frame: Any) -> None:
        self.busy = True
        try:
            if self.writer is None:
                self.writer = RecordingWriter(
                    self.dir, self.profile, self.codec, self.meta, overwrite=self.overwrite
                )
            obs = rt.last_obs
            line: dict[str, Any] = {
                "capture_index": int(frame.index),
                "console_frame": rt.tracker.frame_match,
                "observation": None if obs is None else obs.to_json(),
                "level": None,
            }
            if 0 <= rt.level_index < len(rt.s.levels):
                lp = rt.s.levels[rt.level_index]
                line["level"] = [lp.level, lp.speed]
            truth = getattr(frame, "truth", None)
            if truth is not None:
                line["truth"] = _truth_json(truth)
            if rt.last_placement is not None and rt.last_placement is not self._placement:
                self._placement = rt.last_placement
                line["decision"] = dict(rt.last_placement)
            self.writer.write(frame.image, frame.time_ns, line)
        finally:
            self.busy = False

    def close(self, **extra: Any) -> None:
        if self.writer is not None:
            self.writer.close(**extra)
