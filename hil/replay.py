"""Offline capture replay: ``hil replay VIDEO [--profile P] [--out DIR]``.

Reads a recording (:mod:`hil.recording`: video + ground-truth sidecar) or any video file, reads
the board on every frame, detects game events from consecutive readings, asks a policy what it
would have chosen at each spawn, and writes (docs/EMU.md, "hil replay"):

- ``replay.jsonl``: one JSON object per line, flushed per line: ``{"type": "reading", ...}``
  for every frame, ``{"type": "event", ...}`` (spawn, lock, clear, stage_clear, top_out) and
  ``{"type": "decision", ...}`` as they happen, a final ``{"type": "summary", ...}``;
- ``annotated.mp4`` (MPEG-4; ``annotated.avi``, MJPEG, where OpenCV has no FFmpeg): each
  captured frame with the board read marked over the bottle, the falling pill read and the
  placement the policy chose for the current pill outlined, and a side panel with the board
  read drawn as a grid, the events and the decision.

Stand-ins, until the real pieces land on main (each output line names what produced it):

- reader: :class:`TruthReader` takes the reading from the recording's ground-truth sidecar (the
  picture's facts ``hil sim record`` wrote: the bottle as drawn, the pill's sprites, the next
  pill, the screen kind). perception's BoardReader (captured frame + Profile -> Observation)
  plugs in as any ``Reader``; a video without a sidecar cannot be replayed before it exists
  (ReplayError says so).
- policy: :class:`StandInPolicy` plans the reachable placements with ``engine.plan`` on a game
  rebuilt from the reading and takes the deepest one. Anything with ``name`` and
  ``act(game) -> decision`` with ``.placement`` (policy.PlacementPolicy) plugs in.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

import cv2
import numpy as np
import numpy.typing as npt

import engine
from calibration import Profile
from engine.constants import Phase
from hil.recording import META_FILE, Frame, Recording, RecordingError

U8 = npt.NDArray[np.uint8]
EMPTY = 0xFF
JSONL_FILE = "replay.jsonl"
# annotated video: MPEG-4 part 2 through FFmpeg (~13 KB a 720p frame), else MJPEG (always built)
VIDEO_CODECS = [
    ("annotated.mp4", "mp4v", cv2.CAP_FFMPEG),
    ("annotated.avi", "MJPG", cv2.CAP_OPENCV_MJPEG),
]
BOTTLE_X, BOTTLE_Y, CELL = 96, 80, 8  # NES pixels of field cell (0, 0); DESIGN.md
# BGR of the pill/virus colours 0 yellow, 1 red, 2 blue (NES $28, $15, $21 as engine draws them)
COLOR_BGR = [tuple(int(v) for v in engine.NES_PALETTE[i][::-1]) for i in (0x28, 0x15, 0x21)]
CHOICE_BGR = (0, 255, 0)  # the policy's placement
PILL_BGR = (255, 255, 255)  # the falling pill read


class ReplayError(ValueError):
    """A video or recording that cannot be replayed; the message says which file and why."""


@dataclass(frozen=True)
class PillReading:
    """A pill as read: x column 0..7, y row counted from the bottom (15 = top row), rotation
    0..3 (RAM $A5), colours (1st half, 2nd half) 0 yellow, 1 red, 2 blue."""

    x: int
    y: int
    rotation: int
    colors: tuple[int, int]


@dataclass(frozen=True)
class Reading:
    """What a reader saw in one captured frame (a minimal Observation until perception's lands).

    ``kind``: ``"level"`` (intro or play), ``"paused"``, ``"stage_clear"``, ``"top_out"`` or
    ``"other"``. ``field``: uint8 [16, 8] NES cell codes (DESIGN.md), row 0 at the top.
    ``pill``: the falling pill or None. ``next_colors``: the next pill's colours or None.
    ``virus_left``: the HUD's count or None. ``console_frame``: the console frame the picture
    shows, when the source knows it. ``source``: who read it. ``pill_state_frame``: the
    engine frame count of the game state whose pill pose was read, when the source knows it
    (simulated recordings).
    """

    kind: str
    field: U8
    pill: PillReading | None
    next_colors: tuple[int, int] | None
    virus_left: int | None
    console_frame: int | None
    source: str
    pill_state_frame: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "field": [bytes(row).hex() for row in self.field],
            "pill": asdict(self.pill) if self.pill else None,
            "next_colors": list(self.next_colors) if self.next_colors else None,
            "virus_left": self.virus_left,
            "console_frame": self.console_frame,
            "source": self.source,
        }


class Reader(Protocol):
    """Reads one captured frame; ``truth`` is the sidecar line when the source has one."""

    name: str

    def __call__(self, frame: Frame, truth: dict[str, Any] | None) -> Reading: ...


_KIND_OF_SCREEN = {  # engine.ScreenKind names
    "LEVEL": "level",
    "PAUSED": "paused",
    "STAGE_CLEAR": "stage_clear",
    "TOP_OUT": "top_out",
}
_KIND_OF_PHASE = {
    Phase.INTRO: "level",
    Phase.PLAYING: "level",
    Phase.PAUSED: "paused",
    Phase.STAGE_CLEAR: "stage_clear",
    Phase.TOP_OUT: "top_out",
}


class TruthReader:
    """Stand-in reader: the recording's ground-truth sidecar (``hil sim record``).

    It reads what the picture shows, as perception will: the sidecar's ``screen`` facts
    (``engine.screen_facts`` of the rendered frame: the bottle as the nametable holds it, which
    lags the field by up to 16 rows of redraw; the falling pill's sprites, a frame behind the
    state; the next pill; the screen kind). Sidecars without ``screen`` (older recordings) are
    read from the game's RAM instead (``field``, ``pill``, ``next``, ``phase``).
    """

    name = "truth sidecar: the picture's facts (stand-in for perception)"

    def __call__(self, frame: Frame, truth: dict[str, Any] | None) -> Reading:
        if truth is None:
            raise ReplayError(
                "the truth reader needs a recording's ground-truth sidecar; this source has none"
            )
        try:
            screen = truth.get("screen")
            state_frame = truth.get("state_frame", truth.get("frame"))
            if screen is not None:
                rows, p, nxt = screen["bottle"], screen.get("falling"), screen.get("next")
                kind = _KIND_OF_SCREEN.get(screen["kind"], "other")
                # the sprites show the pill as of the state one frame before (RENDER.md)
                pill_frame = None if state_frame is None else int(state_frame) - 1
            else:
                rows, p, nxt = truth["field"], truth.get("pill"), truth.get("next")
                kind = _KIND_OF_PHASE.get(Phase[truth["phase"]], "other")
                pill_frame = None if state_frame is None else int(state_frame)
            grid = np.frombuffer(b"".join(bytes.fromhex(r) for r in rows), np.uint8)
            pill = (
                PillReading(int(p["x"]), int(p["y"]), int(p["rotation"]), _pair(p["colors"]))
                if p
                else None
            )
            return Reading(
                kind=kind,
                field=grid.reshape(16, 8).copy(),
                pill=pill,
                next_colors=_pair(nxt["colors"]) if nxt else None,
                virus_left=truth.get("virus_left"),
                console_frame=truth.get("console_frame"),
                source=self.name,
                pill_state_frame=pill_frame,
            )
        except (KeyError, ValueError, TypeError) as e:
            raise ReplayError(f"frame {frame.index}: sidecar line not understood ({e!r})") from None


def _pair(values: Any) -> tuple[int, int]:
    a, b = values
    return int(a), int(b)


# ---- events --------------------------------------------------------------------------------


def placement_index(rotation: int, row: int, col: int) -> int:
    """docs/PLANNER.md: rotation * 128 + row * 8 + col."""
    return rotation * 128 + row * 8 + col


def placement_cells(index: int) -> list[tuple[int, int]]:
    """The (row, col) cells a placement writes (docs/PLANNER.md), the top half of a vertical
    pill in row 0 included (it is drawn above the bottle)."""
    rotation, row, col = index // 128, (index % 128) // 8, index % 8
    if rotation % 2 == 0:
        return [(row, col), (row, col + 1)]
    return [(row, col), (row - 1, col)]


def _occupied(grid: U8) -> npt.NDArray[np.bool_]:
    hi = grid & 0xF0
    return (grid != EMPTY) & (hi != 0xB0) & (hi != 0xF0)


def lock_placement(before: U8, after: U8, colors: tuple[int, int]) -> int | None:
    """The placement index of a pill of ``colors`` (1st, 2nd half) that locked between two
    field readings, from the pill-half cells that appeared (docs/PLANNER.md's table; rotations
    2 and 3 reported as 0 and 1 when both colours are equal). A vertical pill locked in row 0
    shows only its bottom half. None when the new cells are not one such pill."""
    new = np.argwhere(~_occupied(before) & _occupied(after))
    cells = {(int(r), int(c)): int(after[r, c]) for r, c in new}
    same = colors[0] == colors[1]
    for (r, c), code in cells.items():
        kind, color = code & 0xF0, code & 0x0F
        if kind == 0x60 and cells.get((r, c + 1), 0) & 0xF0 == 0x70:
            pair = (color, cells[(r, c + 1)] & 0x0F)  # (left, right)
            rotations = (0, 2)
        elif kind == 0x50 and cells.get((r - 1, c), 0) & 0xF0 == 0x40:
            pair = (color, cells[(r - 1, c)] & 0x0F)  # (bottom, top)
            rotations = (1, 3)
        elif kind == 0x50 and r == 0:
            other = colors[1] if color == colors[0] else colors[0]
            pair, rotations = (color, other), (1, 3)
        else:
            continue
        if pair == colors:
            return placement_index(rotations[0], r, c)
        if pair[::-1] == colors:
            return placement_index(rotations[0] if same else rotations[1], r, c)
        return None
    return None


@dataclass(frozen=True)
class Event:
    """A game event seen in the capture: ``kind`` spawn, lock, clear, stage_clear or top_out;
    ``index`` the captured frame it was first seen in; ``console_frame`` when known; ``data``
    (spawn: pill; lock: placement, cells; clear: cells, virus_left)."""

    kind: str
    index: int
    console_frame: int | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "event",
            "event": self.kind,
            "index": self.index,
            "console_frame": self.console_frame,
            **self.data,
        }


class EventDetector:
    """Events from consecutive readings (call :meth:`update` once per captured frame, in order).

    - spawn: a falling pill appears, or is read higher than the frame before (a new pill whose
      gap was not captured);
    - lock: the pill's halves appear in the field. The picture redraws the bottle one row per
      frame after a change, so the halves may appear a few frames after the pill's sprites went
      away (and a vertical pill's top half a frame before its bottom half): from the moment the
      pill is gone (or cells appear under it), the detector waits up to ``lock_wait`` frames for
      the new cells to form the pill (placement from them), else takes the last pose read;
    - clear: more cells are clearing ($Bx) than the frame before;
    - stage_clear / top_out: the screen kind turns to it.
    """

    def __init__(self, lock_wait: int = 20) -> None:
        self.lock_wait = lock_wait
        self.prev: Reading | None = None
        self.pill: PillReading | None = None  # the pill falling (last pose read)
        self.last: PillReading | None = None  # the pill that locked last
        self.base: U8 | None = None  # the field while it fell (a falling pill changes nothing)
        self.pending: tuple[PillReading, U8, int] | None = None  # gone, cells not yet complete

    def update(self, index: int, r: Reading) -> list[Event]:
        events: list[Event] = []
        prev = self.prev
        cf = r.console_frame
        ref = self.pill or self.last  # a locked pill's sprites may linger a frame
        new_pill = r.pill is not None and (
            ref is None or r.pill.y > ref.y or r.pill.colors != ref.colors
        )
        if self.pill is not None and (r.pill is None or new_pill or self._grew(r.field)):
            assert self.base is not None
            self.pending = (self.pill, self.base, index)
            self.last, self.pill = self.pill, None
        if self.pending is not None:
            events += self._try_lock(index, r, force=new_pill)
        if prev is not None:
            clearing = int(((r.field & 0xF0) == 0xB0).sum())
            was = int(((prev.field & 0xF0) == 0xB0).sum())
            if clearing > was:
                events.append(
                    Event("clear", index, cf, {"cells": clearing - was, "virus_left": r.virus_left})
                )
            if r.kind != prev.kind and r.kind in ("stage_clear", "top_out"):
                events.append(Event(r.kind, index, cf, {"virus_left": r.virus_left}))
        if r.pill is not None and (new_pill or self.pill is not None):
            if new_pill:
                events.append(Event("spawn", index, cf, {"pill": asdict(r.pill)}))
            self.pill = r.pill
            self.base = r.field
        self.prev = r
        return events

    def _grew(self, grid: U8) -> bool:
        assert self.base is not None
        return bool((~_occupied(self.base) & _occupied(grid)).any())

    def _try_lock(self, index: int, r: Reading, force: bool) -> list[Event]:
        assert self.pending is not None
        pill, base, since = self.pending
        placement = lock_placement(base, r.field, pill.colors)
        if placement is None and not force and index - since < self.lock_wait:
            return []
        if placement is None:  # the cells never formed this pill: the last pose read
            placement = placement_index(pill.rotation, 15 - pill.y, pill.x)
        new = np.argwhere(~_occupied(base) & _occupied(r.field))
        self.pending = None
        data = {
            "placement": placement,
            "colors": list(pill.colors),
            "cells": [[int(a), int(b)] for a, b in new],
        }
        return [Event("lock", index, r.console_frame, data)]


# ---- decisions -------------------------------------------------------------------------------


class Decider(Protocol):
    """A placement policy: policy.PlacementPolicy or :class:`StandInPolicy`."""

    name: str

    def act(self, game: engine.Game) -> Any: ...


@dataclass(frozen=True)
class StandInDecision:
    placement: int
    masks: U8
    reachable: int


class StandInPolicy:
    """Stand-in until the ONNX policy lands: all reachable placements from ``engine.plan``
    (``taps_only`` for the faster search), the deepest one taken (largest row, then the column
    nearest the middle, then the smallest index)."""

    name = "stand-in: deepest reachable placement (until the ONNX policy lands)"

    def __init__(self, taps_only: bool = False) -> None:
        self.taps_only = taps_only

    def act(self, game: engine.Game) -> StandInDecision:
        plan = engine.plan(game, taps_only=self.taps_only)
        if len(plan) == 0:
            raise ValueError(f"no placement to choose: plan status {plan.status}")
        placements = [int(p) for p in plan.placements]
        best = max(placements, key=lambda i: ((i % 128) // 8, -abs(i % 8 - 3.5), -i))
        return StandInDecision(best, plan.masks(best), len(placements))


def game_from_reading(r: Reading, level: int, speed: int) -> engine.Game:
    """An engine game in the state a reading shows at a spawn: the field, the falling pill and
    the next pill; gravity counter, DAS, held buttons and speed-ups are unknown from a picture
    and start at 0; frameCounter (its parity times the fast drop) is ``pill_state_frame`` when
    the source knows it (a simulated game starts at 0), else 0. Raises ValueError without a
    falling pill."""
    if r.pill is None:
        raise ValueError("a decision needs a falling pill in the reading")
    g = engine.Game(level, speed, 0x8988)
    g.field[:] = r.field.reshape(-1)
    g.pill_x[...] = r.pill.x
    g.pill_y[...] = r.pill.y
    g.pill_rotation[...] = r.pill.rotation
    g.pill_colors[:] = r.pill.colors
    if r.next_colors is not None:
        g.next_colors[:] = r.next_colors
    g.phase[...] = int(Phase.PLAYING)
    g.next_action[...] = 0  # action_pillFalling
    for name in ("speed_counter", "hor_velocity", "btns_held", "btns_pressed", "speed_ups"):
        getattr(g, name)[...] = 0
    g.frame_counter[...] = (r.pill_state_frame or 0) & 0xFF
    g.status[...] = 0xFF  # no row redraw pending
    return g


# ---- sources ---------------------------------------------------------------------------------


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


def open_source(path: str | Path, profile: Profile | None = None) -> Source:
    """A recording directory (or its video file) or any video file OpenCV decodes.

    ``profile`` overrides the recording's (needed for a plain video; default
    ideal_720p_nearest). Raises ReplayError for a missing path, an undecodable video, or
    frames whose size does not match the profile.
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
        return Source(frames, prof, fps, len(rec), meta, str(rec_dir), True)
    if p.is_dir():
        raise ReplayError(f"{p} is a directory but not a recording (no {META_FILE})")
    cap = cv2.VideoCapture(str(p))
    if not cap.isOpened():
        raise ReplayError(f"{p}: OpenCV cannot decode this file as a video")
    ok, first = cap.read()
    if not ok:
        cap.release()
        raise ReplayError(f"{p}: OpenCV opened it but reads no frame (not a video, or empty)")
    prof = profile or Profile.load("ideal_720p_nearest")
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


# ---- drawing ---------------------------------------------------------------------------------


def _to_capture(profile: Profile, x: float, y: float) -> tuple[int, int]:
    g = profile.geometry
    return (
        round(g.offset_x + (x - g.crop_left) * g.scale_x),
        round(g.offset_y + (y - g.crop_top) * g.scale_y),
    )


def _cell_box(profile: Profile, row: int, col: int) -> tuple[tuple[int, int], tuple[int, int]]:
    x, y = BOTTLE_X + col * CELL, BOTTLE_Y + row * CELL
    return _to_capture(profile, x, y), _to_capture(profile, x + CELL, y + CELL)


def annotate(
    image: U8,
    profile: Profile,
    reading: Reading,
    choice: int | None,
    lines: list[str],
) -> U8:
    """The annotated frame: captured BGR ``image`` [H, W, 3] with a side panel, uint8
    [H, W + panel_width(H), 3].

    On the capture: a marker in the corner of every occupied cell read (in the colour read; a
    disc for a virus, a square for a pill half, a cross for a clearing cell), the falling pill
    read outlined in white, the policy's placement in green. In the panel: the board read drawn
    as a grid with the same pill and placement, then ``lines`` of text.
    """
    h, w = image.shape[:2]
    cap = image.copy()
    t = max(1, round(profile.geometry.scale_y / 2))
    for (r, c), code in np.ndenumerate(reading.field):
        (x0, y0), (x1, y1) = _cell_box(profile, r, c)
        m = max(3, (x1 - x0) // 3)
        _mark(cap, int(code), (x0 + 1, y0 + 1, x0 + 1 + m, y0 + 1 + m), border=True)
    pill = reading.pill
    pill_index = placement_index(pill.rotation % 2, 15 - pill.y, pill.x) if pill else None
    if pill_index is not None:
        (x0, y0), (x1, y1) = _placement_box(profile, pill_index)
        cv2.rectangle(cap, (x0, y0), (x1 - 1, y1 - 1), PILL_BGR, t)
    if choice is not None:
        (x0, y0), (x1, y1) = _placement_box(profile, choice)
        cv2.rectangle(cap, (x0, y0), (x1 - 1, y1 - 1), CHOICE_BGR, t + 1)
    pw = panel_width(h)
    panel = np.full((h, pw, 3), 24, np.uint8)
    cell = max(4, (h // 2) // 16)
    ox, oy = max(4, (pw - 8 * cell) // 2), max(4, h // 40)
    cv2.rectangle(panel, (ox - 1, oy - 1), (ox + 8 * cell, oy + 16 * cell), (90, 90, 90), 1)
    for (r, c), code in np.ndenumerate(reading.field):
        x, y = ox + c * cell, oy + r * cell
        _mark(panel, int(code), (x + 1, y + 1, x + cell - 1, y + cell - 1), border=False)
    for index, color, thick in ((pill_index, PILL_BGR, 1), (choice, CHOICE_BGR, 2)):
        if index is None:
            continue
        cells = placement_cells(index)
        r0, r1 = min(r for r, _ in cells), max(r for r, _ in cells)
        c0, c1 = min(c for _, c in cells), max(c for _, c in cells)
        top = oy + r0 * cell
        cv2.rectangle(
            panel,
            (ox + c0 * cell, top),
            (ox + (c1 + 1) * cell - 1, oy + (r1 + 1) * cell - 1),
            color,
            thick,
        )
    scale = max(0.3, h / 1600)
    step = max(10, round(28 * scale))
    y = oy + 16 * cell + step + 4
    chars = max(16, int(pw / (19 * scale)))
    for text in lines:
        for part in textwrap.wrap(text, chars) or [""]:
            cv2.putText(
                panel,
                part,
                (6, y),
                cv2.FONT_HERSHEY_SIMPLEX,
                scale,
                (235, 235, 235),
                1,
                cv2.LINE_AA,
            )
            y += step
    return np.concatenate([cap, panel], axis=1)


def panel_width(height: int) -> int:
    """Width of the annotated video's side panel for captures ``height`` pixels high."""
    return max(200, round(height * 0.6))


def _mark(img: U8, code: int, box: tuple[int, int, int, int], border: bool) -> None:
    if code == EMPTY or code & 0xF0 == 0xF0:
        return
    x0, y0, x1, y1 = box
    color = COLOR_BGR[(code & 0x0F) % 3]
    kind = code & 0xF0
    if border:
        cv2.rectangle(img, (x0 - 1, y0 - 1), (x1 + 1, y1 + 1), (0, 0, 0), -1)
    if kind == 0xD0:
        cv2.circle(img, ((x0 + x1) // 2, (y0 + y1) // 2), max(1, (x1 - x0) // 2), color, -1)
    elif kind == 0xB0:
        cv2.line(img, (x0, y0), (x1, y1), color, 1)
        cv2.line(img, (x0, y1), (x1, y0), color, 1)
    else:
        cv2.rectangle(img, (x0, y0), (x1, y1), color, -1)


def _placement_box(profile: Profile, index: int) -> tuple[tuple[int, int], tuple[int, int]]:
    cells = placement_cells(index)
    (x0, y0), _ = _cell_box(profile, min(r for r, _ in cells), min(c for _, c in cells))
    _, (x1, y1) = _cell_box(profile, max(r for r, _ in cells), max(c for _, c in cells))
    return (x0, y0), (x1, y1)


# ---- the replay ------------------------------------------------------------------------------


@dataclass
class ReplaySummary:
    frames: int = 0
    events: dict[str, int] = field(default_factory=dict)
    decisions: int = 0
    agreed: int = 0  # decisions equal to the placement the player then locked
    compared: int = 0
    reader: str = ""
    policy: str = ""
    out_dir: str = ""
    video: str | None = None  # the annotated video's path


def replay(
    source: Source,
    out_dir: str | Path,
    *,
    reader: Reader | None = None,
    policy: Decider | None = None,
    level: int | None = None,
    speed: int | None = None,
    max_frames: int | None = None,
    video: bool = True,  # write the annotated video
    log: TextIO | None = None,
    progress: bool = False,
) -> ReplaySummary:
    """Replay ``source`` into ``out_dir`` (created): replay.jsonl and the annotated video (module
    docstring). ``reader`` defaults to TruthReader, ``policy`` to StandInPolicy. ``level`` and
    ``speed`` (the policy needs them) default to the recording's. Events and decisions are
    printed to ``log`` as they happen. Raises ReplayError (bad source, unknown level/speed).
    """
    reader = reader or TruthReader()
    policy = policy or StandInPolicy()
    level = level if level is not None else source.meta.get("level")
    speed = speed if speed is not None else source.meta.get("speed")
    if level is None or speed is None:
        raise ReplayError("the policy needs the level and speed: pass --level and --speed")
    if not 0 <= int(level) <= 24 or int(speed) not in (0, 1, 2):
        raise ReplayError(f"level must be 0..24 and speed 0..2, got {level} and {speed}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    g = source.profile.geometry
    writer: cv2.VideoWriter | None = None
    video_path: Path | None = None
    if video:
        size = (g.width + panel_width(g.height), g.height)
        for name, fourcc, api in VIDEO_CODECS:
            writer = cv2.VideoWriter(
                str(out / name), api, cv2.VideoWriter.fourcc(*fourcc), source.fps, size
            )
            if writer.isOpened():
                video_path = out / name
                break
            writer = None
        if writer is None:
            raise ReplayError(f"OpenCV cannot write a video into {out} (MPEG-4 or MJPEG)")
    summary = ReplaySummary(
        reader=reader.name,
        policy=policy.name,
        out_dir=str(out),
        video=str(video_path) if video_path else None,
    )
    detector = EventDetector()
    choice: int | None = None
    pending: dict[str, Any] | None = None  # the decision awaiting the player's lock
    recent: list[str] = []
    frames = source.frames
    if progress:
        from rich.progress import track

        frames = iter(track(frames, total=source.count, description="replay"))

    def emit(f: TextIO, obj: dict[str, Any]) -> None:
        f.write(json.dumps(obj, separators=(",", ":")) + "\n")
        f.flush()

    def say(text: str) -> None:
        recent.append(text)
        del recent[:-3]
        if log is not None:
            print(text, file=log, flush=True)

    try:
        with (out / JSONL_FILE).open("w") as jl:
            emit(
                jl,
                {
                    "type": "start",
                    "source": source.name,
                    "profile": source.profile.name,
                    "reader": reader.name,
                    "policy": policy.name,
                    "level": int(level),
                    "speed": int(speed),
                },
            )
            for frame, truth in frames:
                if max_frames is not None and summary.frames >= max_frames:
                    break
                reading = reader(frame, truth)
                emit(
                    jl,
                    {"type": "reading", "index": frame.index, "time_ns": frame.time_ns}
                    | reading.to_json(),
                )
                for ev in detector.update(frame.index, reading):
                    summary.events[ev.kind] = summary.events.get(ev.kind, 0) + 1
                    emit(jl, ev.to_json())
                    say(_describe_event(ev))
                    if ev.kind == "lock" and pending is not None:
                        pending["played"] = ev.data["placement"]
                        pending["agree"] = pending["placement"] == ev.data["placement"]
                        summary.compared += 1
                        summary.agreed += int(pending["agree"])
                        emit(jl, {"type": "decision_outcome", **pending})
                        pending = None
                        choice = None
                    if ev.kind == "spawn":
                        decision = _decide(policy, reading, int(level), int(speed))
                        decision.update(index=frame.index, console_frame=ev.console_frame)
                        emit(jl, {"type": "decision", **decision})
                        summary.decisions += "placement" in decision
                        choice = decision.get("placement")
                        pending = decision if choice is not None else None
                        say(_describe_decision(decision))
                if writer is not None:
                    head = [
                        f"{source.profile.name}  frame {frame.index}"
                        + (
                            f"  console frame {reading.console_frame}"
                            if reading.console_frame is not None
                            else ""
                        ),
                        f"reader: {reader.name}",
                        f"policy: {policy.name}",
                    ]
                    writer.write(
                        annotate(frame.image, source.profile, reading, choice, head + recent)
                    )
                summary.frames += 1
            emit(jl, {"type": "summary", **asdict(summary)})
    finally:
        if writer is not None:
            writer.release()
    return summary


def _decide(policy: Decider, reading: Reading, level: int, speed: int) -> dict[str, Any]:
    try:
        game = game_from_reading(reading, level, speed)
        d = policy.act(game)
    except ValueError as e:
        return {"policy": policy.name, "error": str(e)}
    placement = int(d.placement)
    out: dict[str, Any] = {
        "policy": policy.name,
        "placement": placement,
        "rotation": placement // 128,
        "row": (placement % 128) // 8,
        "col": placement % 8,
        "frames_to_lock": int(len(d.masks)),
    }
    if hasattr(d, "reachable"):
        out["reachable"] = int(d.reachable)
    return out


def _describe_event(ev: Event) -> str:
    at = f"frame {ev.index}" + (
        f" (console {ev.console_frame})" if ev.console_frame is not None else ""
    )
    d = ev.data
    if ev.kind == "spawn":
        p = d["pill"]
        return f"{at}: spawn, colours {tuple(p['colors'])}"
    if ev.kind == "lock":
        i = d["placement"]
        return f"{at}: lock at placement {i} (rot {i // 128}, row {(i % 128) // 8}, col {i % 8})"
    if ev.kind == "clear":
        return f"{at}: clear, {d['cells']} cells, viruses left {d['virus_left']}"
    return f"{at}: {ev.kind.replace('_', ' ')}"


def _describe_decision(d: dict[str, Any]) -> str:
    if "placement" not in d:
        return f"  decision: none ({d.get('error')})"
    extra = f" of {d['reachable']} reachable" if "reachable" in d else ""
    return (
        f"  decision: placement {d['placement']} (rot {d['rotation']}, row {d['row']}, "
        f"col {d['col']}){extra}, lock in {d['frames_to_lock']} frames"
    )


def choose_reader(name: str, source: Source) -> Reader:
    """``truth``: the recording's ground-truth sidecar (the stand-in); ``perception``:
    perception's BoardReader, which has not landed yet. Raises ReplayError when the reader
    cannot read this source, saying what would."""
    if name == "perception":
        raise ReplayError(
            "perception's BoardReader has not landed in this build yet; replay a recording "
            "with its ground-truth sidecar (--reader truth)"
        )
    if name != "truth":
        raise ReplayError(f"reader must be 'truth' or 'perception', got {name!r}")
    if not source.has_truth:
        raise ReplayError(
            f"{source.name} has no ground-truth sidecar (not a recording): reading a plain "
            "video needs perception's BoardReader, which has not landed yet"
        )
    return TruthReader()


def main_replay(
    path: str,
    out: str | None,
    profile_name: str | None,
    reader_name: str,
    level: int | None,
    speed: int | None,
    taps_only: bool,
    max_frames: int | None,
    quiet: bool,
) -> int:
    """The ``hil replay`` command (hil/cli.py). Raises SystemExit with a message on errors."""
    try:
        profile = Profile.load(profile_name) if profile_name else None
        source = open_source(path, profile)
        reader = choose_reader(reader_name, source)
        src = Path(source.name)
        out_dir = Path(out) if out else src.with_name(src.stem + "_replay")
        summary = replay(
            source,
            out_dir,
            reader=reader,
            policy=StandInPolicy(taps_only=taps_only),
            level=level,
            speed=speed,
            max_frames=max_frames,
            log=sys.stdout,
            progress=not quiet,
        )
    except (ReplayError, ValueError, FileNotFoundError) as e:
        raise SystemExit(f"hil replay: {e}") from None
    ev = ", ".join(f"{k} {v}" for k, v in sorted(summary.events.items())) or "none"
    print(
        f"{summary.frames} frames replayed; events: {ev}; {summary.decisions} decisions "
        f"({summary.agreed} of {summary.compared} equal to what was played); "
        f"written to {Path(summary.out_dir) / JSONL_FILE}"
        + (f" and {summary.video}" if summary.video else "")
    )
    return 0
