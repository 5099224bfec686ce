"""Offline capture replay: ``hil replay VIDEO [--profile P] [--out DIR]``.

Reads a recording (:mod:`hil.loop.recording`: video + ground-truth sidecar) or any video file, reads
the board on every frame, detects game events from consecutive readings, asks a policy what it
would have chosen at each spawn, and writes (docs/EMU.md, "hil replay"):

- ``replay.jsonl``: one JSON object per line, flushed per line: ``{"type": "reading", ...}``
  for every frame, ``{"type": "event", ...}`` (spawn, lock, clear, stage_clear, top_out) and
  ``{"type": "decision", ...}`` as they happen, a final ``{"type": "summary", ...}`` (or
  ``{"type": "error", ...}`` when the source fails part way);
- ``annotated.mp4`` (MPEG-4; ``annotated.avi``, MJPEG, where OpenCV has no FFmpeg): each
  captured frame with the board read marked over the bottle, the falling pill read and the
  placement the policy chose for the current pill outlined, and a side panel with the board
  read drawn as a grid, the events and the decision.

The pieces (each output line names what produced it):

- reader (``--reader``): :class:`PerceptionReader` (the default ``auto``): perception's
  BoardReader (perception/models/board.onnx, ONNX Runtime) for the capture's Profile, as the
  live loop reads it (``hil.loop.observation.OnnxReader``). It needs the profile: the
  recording's, or ``--profile`` for a plain video (``hil calibrate --input VIDEO --out
  profile.json`` fits one). :class:`TruthReader` (``truth``) takes the reading from a
  recording's ground-truth sidecar instead (the picture's facts ``hil sim record`` wrote). When
  perception reads a recording that has a sidecar, every reading is also compared with the
  truth (cells, falling pill, next pill, screen kind; counts in the summary). Every reader
  gives perception's Observation (the type the live loop reads) and the source's
  :class:`FrameFacts` (what a sidecar says beyond the picture).
- policy (``--policy``): :class:`OnnxPlacementPolicy` (the default ``auto``): the policy
  room's network (policy/models/policy.onnx) choosing among the placements ``engine.plan``
  finds reachable from a game rebuilt from the reading at the spawn. :class:`DeepestPolicy`
  (``deepest``) takes the deepest reachable placement instead (a baseline).

Nothing here imports torch (replay is a runtime path; tests check it).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TextIO

import cv2
import numpy as np
import numpy.typing as npt

import engine
from calibration import Profile
from engine import ScreenKind
from engine.constants import Phase
from hil.loop.observation import OnnxReader
from hil.loop.recording import META_FILE, Frame, Recording, RecordingError
from perception.observation import (
    FallingPill,
    NextPill,
    Observation,
    blank_observation,
    canonical_cells,
)

U8 = npt.NDArray[np.uint8]
EMPTY = 0xFF
JSONL_FILE = "replay.jsonl"
# annotated video: MPEG-4 part 2 through FFmpeg (~13 KB a 720p frame), else MJPEG (always built)
VIDEO_CODECS = [
    ("annotated.mp4", "mp4v", cv2.CAP_FFMPEG),
    ("annotated.avi", "MJPG", cv2.CAP_OPENCV_MJPEG),
]
BOTTLE_X, BOTTLE_Y, CELL = 96, 80, 8  # NES pixels of field cell (0, 0); ARCHITECTURE.md
# BGR of the pill/virus colours 0 yellow, 1 red, 2 blue (NES $28, $15, $21 as engine draws them)
COLOR_BGR = [tuple(int(v) for v in engine.NES_PALETTE[i][::-1]) for i in (0x28, 0x15, 0x21)]
CHOICE_BGR = (0, 255, 0)  # the policy's placement
PILL_BGR = (255, 255, 255)  # the falling pill read


class ReplayError(ValueError):
    """A video or recording that cannot be replayed; the message says which file and why."""


@dataclass(frozen=True)
class FrameFacts:
    """What a replay source says of a captured frame beyond its picture: no picture tells these,
    so they are not part of the Observation (perception.observation, what every reader returns
    for the picture itself). A recording's sidecar holds them; a plain video has none.

    ``console_frame``: the console frame the picture shows, when the source knows it.
    ``virus_left``: the HUD's virus count (the truth sidecar) or the viruses in the bottle read
    (the other readers), None when unknown. ``pill_state_frame``: the engine frame count of the
    game state whose pill pose the picture shows, when the source knows it (the truth of
    simulated recordings: it sets the frameCounter of the game rebuilt for a decision).
    """

    console_frame: int | None = None
    virus_left: int | None = None
    pill_state_frame: int | None = None


def pill_json(p: FallingPill | None) -> dict[str, Any] | None:
    """A pill as the replay's JSON lines write it: {x, y, rotation, colors}, or None."""
    if p is None:
        return None
    return {"x": p.x, "y": p.y, "rotation": p.rotation, "colors": p.colors}


def reading_json(obs: Observation, facts: FrameFacts) -> dict[str, Any]:
    """The replay.jsonl ``reading`` line's fields of one frame: ``kind`` (the engine.ScreenKind
    name in lower case: level, paused, stage_clear, top_out, other), ``field`` (16 hex rows),
    ``pill``, ``next_colors``, ``virus_left``, ``console_frame``, ``source`` (the reader),
    ``min_confidence`` (4 decimals; 1.0 for a reader that knows)."""
    return {
        "kind": obs.kind.name.lower(),
        "field": [bytes(row).hex() for row in obs.field],
        "pill": pill_json(obs.falling),
        "next_colors": list(obs.next_colors) if obs.next_colors else None,
        "virus_left": facts.virus_left,
        "console_frame": facts.console_frame,
        "source": obs.source,
        "min_confidence": round(obs.min_confidence, 4),
    }


class Reader(Protocol):
    """Reads one captured frame; ``truth`` is the sidecar line when the source has one. Returns
    the Observation of the picture and the source's FrameFacts of it."""

    name: str

    def __call__(
        self, frame: Frame, truth: dict[str, Any] | None
    ) -> tuple[Observation, FrameFacts]: ...


def _screen_kind(name: str) -> ScreenKind:
    """An engine.ScreenKind name (a sidecar's) -> the kind. Raises ValueError for any other
    name (a sidecar that names a kind no screen has is not one this replay can mean)."""
    kind = ScreenKind.__members__.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"screen kind {name!r} is not one of {', '.join(ScreenKind.__members__)}")
    return kind


_KIND_OF_PHASE = {
    Phase.INTRO: ScreenKind.LEVEL,
    Phase.PLAYING: ScreenKind.LEVEL,
    Phase.PAUSED: ScreenKind.PAUSED,
    Phase.STAGE_CLEAR: ScreenKind.STAGE_CLEAR,
    Phase.TOP_OUT: ScreenKind.TOP_OUT,
}


def _next_pill(colors: Any) -> NextPill | None:
    return None if not colors else NextPill(_pair(colors))


class TruthReader:
    """The recording's ground-truth sidecar (``hil sim record``): no pixels read.

    It gives what the picture shows, the facts perception is trained to read: the sidecar's
    ``screen`` facts (``engine.screen_facts`` of the rendered frame: the bottle as the nametable
    holds it, which lags the field by up to 16 rows of redraw; the falling pill's sprites, a
    frame behind the state; the next pill; the screen kind). Sidecars without ``screen`` (older
    recordings) are read from the game's RAM instead (``field``, ``pill``, ``next``, ``phase``).
    Raises ReplayError for a source without a sidecar or a line it cannot understand.
    """

    name = "truth: the recording's ground-truth sidecar"

    def __call__(
        self, frame: Frame, truth: dict[str, Any] | None
    ) -> tuple[Observation, FrameFacts]:
        if truth is None:
            raise ReplayError(
                "the truth reader needs a recording's ground-truth sidecar; this source has none"
            )
        try:
            screen = truth.get("screen")
            state_frame = truth.get("state_frame", truth.get("frame"))
            if screen is not None:
                rows, p, nxt = screen["bottle"], screen.get("falling"), screen.get("next")
                kind = _screen_kind(screen["kind"])
                # the sprites show the pill as of the state one frame before (RENDER.md)
                pill_frame = None if state_frame is None else int(state_frame) - 1
            else:
                rows, p, nxt = truth["field"], truth.get("pill"), truth.get("next")
                kind = _KIND_OF_PHASE.get(Phase[truth["phase"]], ScreenKind.OTHER)
                pill_frame = None if state_frame is None else int(state_frame)
            grid = np.frombuffer(b"".join(bytes.fromhex(r) for r in rows), np.uint8)
            pill = (
                FallingPill(int(p["x"]), int(p["y"]), int(p["rotation"]), _pair(p["colors"]))
                if p
                else None
            )
            obs = Observation(
                kind=kind,
                field=canonical_cells(grid.reshape(16, 8)),
                falling=pill,
                next=_next_pill(nxt["colors"]) if nxt else None,
                source=self.name,
            )
            facts = FrameFacts(
                console_frame=truth.get("console_frame"),
                virus_left=truth.get("virus_left"),
                pill_state_frame=pill_frame,
            )
            return obs, facts
        except (KeyError, ValueError, TypeError) as e:
            raise ReplayError(f"frame {frame.index}: sidecar line not understood ({e!r})") from None


class RunReader:
    """The readings a ``hil run`` made while it played, from its recording's sidecar (the
    ``observation`` of each frame: the ONNX reader's or the simulator's oracle's): no pixels
    read. Raises ReplayError for a line without one."""

    name = "run: the readings hil run made, from the recording's sidecar"

    def __call__(
        self, frame: Frame, truth: dict[str, Any] | None
    ) -> tuple[Observation, FrameFacts]:
        if truth is None or "observation" not in truth:
            raise ReplayError(f"frame {frame.index}: the sidecar line has no observation")
        obs = truth["observation"]
        if obs is None:
            return blank_observation(source=self.name), FrameFacts()
        try:
            grid = np.frombuffer(b"".join(bytes.fromhex(r) for r in obs["field"]), np.uint8)
            f = obs.get("falling")
            low = obs.get("min_confidence")  # the sidecar keeps the lowest cell confidence only
            seen = Observation(
                kind=_screen_kind(obs["kind"]),
                field=grid.reshape(16, 8).copy(),
                falling=None
                if f is None
                else FallingPill(int(f[0]), int(f[1]), int(f[2]), _pair(f[3])),
                next=_next_pill(obs.get("next")),
                confidence=np.full((16, 8), 1.0 if low is None else low, np.float32),
                source=self.name,
            )
            facts = FrameFacts(
                console_frame=truth.get("console_frame"), virus_left=seen.virus_count
            )
            return seen, facts
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise ReplayError(
                f"frame {frame.index}: sidecar observation not understood ({e!r})"
            ) from None


class PerceptionReader:
    """The live loop's ONNX reader (hil.loop.observation.OnnxReader: perception's BoardReader,
    ONNX Runtime, one thread) on the captured pixels: its Observation, named after this reader.

    ``profile``: the capture chain's calibration.Profile; ``model``: the ONNX file (default
    ``perception.store.choose_model``: the model ``hil prepare`` made for the profile's ROM,
    else the shipped perception/models/board.onnx). The Observation is the one hil run reads: the
    bottle as shown (canonical cells), the falling pill as drawn (rotation 0/1, colours in drawn
    order: a picture cannot tell rotation 2 from 0), the next pill's colours, the screen kind. It
    reads neither the HUD nor the console frame: FrameFacts' ``virus_left`` is the viruses in the
    bottle read, ``console_frame`` None. Raises ValueError for a missing or bad model, and for a
    frame whose shape is not the profile's.
    """

    def __init__(self, profile: Profile, model: str | Path | None = None) -> None:
        self.live = OnnxReader(profile, model)
        self.live.virus_label = False  # the replay compares no virus animation frame
        self.model_line = self.live.model_line
        self.name = f"perception: BoardReader ({_short_path(self.live.path)})"

    def __call__(
        self, frame: Frame, truth: dict[str, Any] | None
    ) -> tuple[Observation, FrameFacts]:
        obs = replace(self.live(frame), source=self.name)
        return obs, FrameFacts(virus_left=obs.virus_count)


def _short_path(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (for labels)."""
    root = Path(__file__).resolve().parents[2]
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def _pair(values: Any) -> tuple[int, int]:
    a, b = values
    return int(a), int(b)


def _drawn_pill(p: FallingPill | None) -> FallingPill | None:
    return None if p is None else p.drawn()


def compare_readings(read: Observation, truth: Observation) -> dict[str, Any]:
    """How a reading agrees with the truth's reading of the same frame: ``cells`` (cells of
    the 16x8 bottle read as the truth has them, 0..128; None when the truth shows no bottle,
    kind OTHER), ``pill`` (the falling pill as drawn, or both none), ``next`` (the next
    pill's colours, or both none), ``kind`` (the screen kind), each True/False."""
    shown = truth.kind != ScreenKind.OTHER
    return {
        "cells": int((read.field == truth.field).sum()) if shown else None,
        "pill": _drawn_pill(read.falling) == _drawn_pill(truth.falling),
        "next": read.next_colors == truth.next_colors,
        "kind": read.kind == truth.kind,
    }


@dataclass
class Agreement:
    """Counts of :func:`compare_readings` over a replay: ``frames`` compared, ``board_frames``
    (the truth shows the bottle), ``cells_equal`` of ``board_frames * 128`` cells,
    ``boards_exact`` (all 128 cells), ``pill``, ``next``, ``kind`` (frames equal)."""

    frames: int = 0
    board_frames: int = 0
    cells_equal: int = 0
    boards_exact: int = 0
    pill: int = 0
    next: int = 0
    kind: int = 0

    def add(self, c: dict[str, Any]) -> None:
        self.frames += 1
        if c["cells"] is not None:
            self.board_frames += 1
            self.cells_equal += c["cells"]
            self.boards_exact += int(c["cells"] == 16 * 8)
        self.pill += int(c["pill"])
        self.next += int(c["next"])
        self.kind += int(c["kind"])

    def describe(self, against: str = "truth") -> str:
        def pct(n: int, d: int) -> str:
            return f"{100 * n / d:.2f} %" if d else "-"

        return (
            f"vs {against} over {self.frames} frames: "
            f"cells {pct(self.cells_equal, 128 * self.board_frames)}"
            f", boards exact {pct(self.boards_exact, self.board_frames)}"
            f", pill {pct(self.pill, self.frames)}, next {pct(self.next, self.frames)}"
            f", kind {pct(self.kind, self.frames)}"
        )


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

    - spawn: a falling pill appears, or is read higher than the frame before or with other
      colours (a new pill whose gap was not captured). A reader that gives the pill as drawn
      (perception: rotation 0/1, colours in drawn order) swaps the colours when the pill turns
      to rotation 2 or 3, so colours are compared as a pair regardless of order, and the pill's
      colours in the game's order are taken from its spawn (rotation 0 draws them in order);
    - lock: the pill's halves appear in the field. The picture redraws the bottle one row per
      frame after a change, so the halves may appear a few frames after the pill's sprites went
      away (and a vertical pill's top half a frame before its bottom half): from the moment the
      pill is gone (or cells appear under it), the detector waits up to ``lock_wait`` frames for
      the new cells to form the pill (placement from them, with the spawn's colours), else
      takes the last pose read;
    - clear: more cells are clearing ($Bx) than the frame before;
    - stage_clear / top_out: the screen kind turns to it.
    """

    def __init__(self, lock_wait: int = 20) -> None:
        self.lock_wait = lock_wait
        self.prev: Observation | None = None
        self.pill: FallingPill | None = None  # the pill falling (last pose read)
        self.last: FallingPill | None = None  # the pill that locked last
        self.base: U8 | None = None  # the field while it fell (a falling pill changes nothing)
        self.colors: tuple[int, int] | None = None  # the falling pill's, game order (spawn)
        # the pill gone, its cells not yet complete: (last pose, colours, field, since)
        self.pending: tuple[FallingPill, tuple[int, int], U8, int] | None = None

    def update(self, index: int, r: Observation, facts: FrameFacts | None = None) -> list[Event]:
        """The events frame ``index`` shows: ``r`` its Observation, ``facts`` what the source
        says beyond the picture (the console frame and virus count the events carry)."""
        facts = FrameFacts() if facts is None else facts
        events: list[Event] = []
        prev = self.prev
        cf = facts.console_frame
        pill = r.falling
        ref = self.pill or self.last  # a locked pill's sprites may linger a frame
        new_pill = pill is not None and (
            ref is None or pill.y > ref.y or sorted(pill.colors) != sorted(ref.colors)
        )
        if self.pill is not None and (pill is None or new_pill or self._grew(r.field)):
            assert self.base is not None and self.colors is not None
            self.pending = (self.pill, self.colors, self.base, index)
            self.last, self.pill = self.pill, None
        if self.pending is not None:
            events += self._try_lock(index, r.field, cf, force=new_pill)
        if prev is not None:
            clearing = int(((r.field & 0xF0) == 0xB0).sum())
            was = int(((prev.field & 0xF0) == 0xB0).sum())
            if clearing > was:
                events.append(
                    Event(
                        "clear",
                        index,
                        cf,
                        {"cells": clearing - was, "virus_left": facts.virus_left},
                    )
                )
            if r.kind != prev.kind and r.kind in (ScreenKind.STAGE_CLEAR, ScreenKind.TOP_OUT):
                name = r.kind.name.lower()
                events.append(Event(name, index, cf, {"virus_left": facts.virus_left}))
        if pill is not None and (new_pill or self.pill is not None):
            if new_pill:
                events.append(Event("spawn", index, cf, {"pill": pill_json(pill)}))
                self.colors = pill.colors
            self.pill = pill
            self.base = r.field
        self.prev = r
        return events

    def _grew(self, grid: U8) -> bool:
        assert self.base is not None
        return bool((~_occupied(self.base) & _occupied(grid)).any())

    def _try_lock(self, index: int, grid: U8, cf: int | None, force: bool) -> list[Event]:
        assert self.pending is not None
        pill, colors, base, since = self.pending
        placement = lock_placement(base, grid, colors)
        if placement is None and not force and index - since < self.lock_wait:
            return []
        if placement is None:  # the cells never formed this pill: the last pose read
            rotation = pill.rotation
            if rotation < 2 and pill.colors != colors and pill.colors[::-1] == colors:
                rotation += 2  # drawn as rotation 0/1 with the halves swapped
            placement = placement_index(rotation, 15 - pill.y, pill.x)
        new = np.argwhere(~_occupied(base) & _occupied(grid))
        self.pending = None
        data = {
            "placement": placement,
            "colors": list(colors),
            "cells": [[int(a), int(b)] for a, b in new],
        }
        return [Event("lock", index, cf, data)]


# ---- decisions -------------------------------------------------------------------------------


class Decider(Protocol):
    """A placement policy for a spawn state: :class:`OnnxPlacementPolicy` or
    :class:`DeepestPolicy`. ``act`` raises ValueError when there is nothing to choose."""

    name: str

    def act(self, game: engine.Game) -> PolicyDecision: ...


@dataclass(frozen=True)
class PolicyDecision:
    """``placement`` index (docs/PLANNER.md), ``masks`` uint8 [frames] (the planner's inputs to
    lock it there, one per frame), ``reachable`` placements it was chosen among."""

    placement: int
    masks: U8
    reachable: int


def _plan(game: engine.Game, taps_only: bool) -> engine.Plan:
    plan = engine.plan(game, taps_only=taps_only)
    if len(plan) == 0:
        raise ValueError(f"no placement to choose: plan status {plan.status}")
    return plan


class OnnxPlacementPolicy:
    """The policy room's network (policy.onnx_policy.PlacementPolicy, ONNX Runtime, one
    thread) choosing among the placements ``engine.plan`` finds reachable (``taps_only`` for
    the faster search), on ``policy.features.SpawnInput.from_game`` of the rebuilt game, as
    ``hil run`` asks it (hil/loop/runtime.py, make_policy("onnx")). ``model``: the ONNX file
    (default policy/models/policy.onnx). Raises FileNotFoundError for a missing model."""

    def __init__(self, model: str | Path | None = None, taps_only: bool = False) -> None:
        from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

        path = Path(model) if model is not None else DEFAULT_MODEL
        self.net = PlacementPolicy(path)
        self.taps_only = taps_only
        self.name = f"onnx placement policy ({_short_path(path)})"

    def act(self, game: engine.Game) -> PolicyDecision:
        from policy.features import SpawnInput

        plan = _plan(game, self.taps_only)
        best = int(self.net.choose(SpawnInput.from_game(game), plan.reachable))
        return PolicyDecision(best, plan.masks(best), len(plan))

    def act_without_next(self, game: engine.Game) -> int:
        """The placement ``hil run`` commits to for a pill pondered before its successor's
        colours are shown (hil.loop.ponder, ``choose_mean``): best on average over them."""
        from hil.loop.ponder import PAIRS
        from hil.loop.runtime import next_pill_observations

        plan = _plan(game, self.taps_only)
        return self.net.choose_mean(next_pill_observations(game, PAIRS), plan.reachable)


class DeepestPolicy:
    """A baseline: all reachable placements from ``engine.plan`` (``taps_only`` for the faster
    search), the deepest one taken (largest row, then the column nearest the middle, then the
    smallest index)."""

    name = "deepest reachable placement (baseline)"

    def __init__(self, taps_only: bool = False) -> None:
        self.taps_only = taps_only

    def act(self, game: engine.Game) -> PolicyDecision:
        plan = _plan(game, self.taps_only)
        placements = [int(p) for p in plan.placements]
        best = max(placements, key=lambda i: ((i % 128) // 8, -abs(i % 8 - 3.5), -i))
        return PolicyDecision(best, plan.masks(best), len(placements))


def speed_ups_at_spawn(pills: int) -> int:
    """Speed-ups in effect at the ``pills``-th spawn of a level (1 = its first pill).

    initData_level leaves the BCD pill counter at 1; every pill sent adds one
    (generateNextPill $8E9D) and each time its low digit wraps to 0 a speed-up is added, at
    most 49 (kSpeedUpsMax $31); engine/src/game.cpp finish_init and generate_next_pill. So the
    n-th pill falls with (n + 1) // 10 speed-ups. Raises ValueError for a negative count.
    """
    if pills < 0:
        raise ValueError(f"pills must be >= 0, got {pills}")
    return min(49, (pills + 1) // 10)


def game_from_reading(
    r: Observation,
    level: int,
    speed: int,
    speed_ups: int = 0,
    pill_state_frame: int | None = None,
) -> engine.Game:
    """An engine game in the state an Observation shows at a spawn: the field, the falling pill
    and the next pill, ``speed_ups`` (counted from the spawns seen, :func:`speed_ups_at_spawn`);
    gravity counter, DAS and held buttons are unknown from a picture and start at 0 (as they
    are at a spawn); frameCounter (its parity times the fast drop) is ``pill_state_frame``
    (FrameFacts) when the source knows it (a simulated game starts at 0), else 0. Raises
    ValueError without a falling pill or with speed_ups outside 0..49."""
    pill = r.falling
    if pill is None:
        raise ValueError("a decision needs a falling pill in the reading")
    if not 0 <= speed_ups <= 49:
        raise ValueError(f"speed_ups must be 0..49, got {speed_ups}")
    g = engine.Game(level, speed, 0x8988)
    g.field[:] = r.field.reshape(-1)
    g.pill_x[...] = pill.x
    g.pill_y[...] = pill.y
    g.pill_rotation[...] = pill.rotation
    g.pill_colors[:] = pill.colors
    if r.next_colors is not None:
        g.next_colors[:] = r.next_colors
    g.phase[...] = int(Phase.PLAYING)
    g.next_action[...] = 0  # action_pillFalling
    for name in ("speed_counter", "hor_velocity", "btns_held", "btns_pressed"):
        getattr(g, name)[...] = 0
    g.speed_ups[...] = speed_ups
    g.frame_counter[...] = (pill_state_frame or 0) & 0xFF
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
    reading: Observation,
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
    pill = reading.falling
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
    """What a replay did: ``frames`` read, ``events`` by kind, ``decisions`` made, of them
    ``compared`` with the placement then played and ``agreed``; ``agreement``: the reader
    against the recording's truth (:class:`Agreement` as a dict) or None when not compared."""

    frames: int = 0
    events: dict[str, int] = field(default_factory=dict)
    decisions: int = 0
    agreed: int = 0  # decisions equal to the placement the player then locked
    compared: int = 0
    reader: str = ""
    policy: str = ""
    out_dir: str = ""
    video: str | None = None  # the annotated video's path
    agreement: dict[str, int] | None = None
    compared_with: str | None = None  # whose readings ``agreement`` counts against
    # hil run recordings: the placements the run sent, and how many the replay chose alike
    live_decisions: int = 0
    live_compared: int = 0
    live_agreed: int = 0
    warnings: list[str] = field(default_factory=list)


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
    compare_truth: bool = True,
    log: TextIO | None = None,
    progress: bool = False,
) -> ReplaySummary:
    """Replay ``source`` into ``out_dir`` (created): replay.jsonl and the annotated video (module
    docstring). ``reader`` defaults to :class:`PerceptionReader` for the source's profile,
    ``policy`` to :class:`OnnxPlacementPolicy`. ``level`` and ``speed`` (the policy needs
    them) default to the recording's. With ``compare_truth``, a source with a sidecar read by
    another reader than the truth is compared with it frame by frame (``truth_agree`` in each
    reading line, :class:`Agreement` counts in the summary). Events and decisions are printed
    to ``log`` as they happen.

    Raises ReplayError, before anything is written, for an unknown level/speed or a bad
    ``max_frames``; and when the source fails part way (a video shorter than its sidecar, a
    frame the reader refuses): then replay.jsonl ends with an ``error`` line saying so, the
    annotated video holds the frames before it, and the message names both.
    """
    run = source.meta.get("producer") == "hil run"  # the level in play is in each line
    level = level if level is not None else source.meta.get("level")
    speed = speed if speed is not None else source.meta.get("speed")
    if not run and (level is None or speed is None):
        raise ReplayError("the policy needs the level and speed: pass --level and --speed")
    if (
        level is not None
        and speed is not None
        and (not 0 <= int(level) <= 24 or int(speed) not in (0, 1, 2))
    ):
        raise ReplayError(f"level must be 0..24 and speed 0..2, got {level} and {speed}")
    if max_frames is not None and max_frames < 1:
        raise ReplayError(f"frames must be at least 1, got {max_frames}")
    reader = reader or PerceptionReader(source.profile)
    policy = policy or OnnxPlacementPolicy()
    comparator: Reader | None = None
    if compare_truth and source.has_truth:
        comparator = RunReader() if run else TruthReader()
        if reader.name == comparator.name:
            comparator = None
    truth_reader = comparator
    agreement = Agreement() if truth_reader is not None else None
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReplayError(f"--out {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ReplayError(f"--out {out}: cannot create it ({e.strerror or e})") from None
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
        compared_with=truth_reader.name if truth_reader else None,
    )
    played: tuple[int, int] | None = None  # hil run: the level in play, from the sidecar
    detector = EventDetector()
    choice: int | None = None
    pending: dict[str, Any] | None = None  # the decision awaiting the player's lock
    pills = 0  # spawns seen in this level (speed-ups)
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
                    "compared_with": truth_reader.name if truth_reader else None,
                    "level": None if level is None else int(level),
                    "speed": None if speed is None else int(speed),
                    "warnings": list(source.warnings),
                },
            )
            try:
                for frame, truth in frames:
                    if max_frames is not None and summary.frames >= max_frames:
                        break
                    reading, facts = reader(frame, truth)
                    line = {"type": "reading", "index": frame.index, "time_ns": frame.time_ns}
                    line |= reading_json(reading, facts)
                    agree: dict[str, Any] | None = None
                    if truth_reader is not None and agreement is not None:
                        agree = compare_readings(reading, truth_reader(frame, truth)[0])
                        agreement.add(agree)
                        line["truth_agree"] = agree
                    emit(jl, line)
                    if reading.kind == ScreenKind.OTHER:
                        pills = 0
                    if run and truth is not None:
                        lv = truth.get("level")
                        now = None if lv is None else (int(lv[0]), int(lv[1]))
                        if now != played:
                            played, pills = now, 0
                        level, speed = (None, None) if now is None else now
                    for ev in detector.update(frame.index, reading, facts):
                        summary.events[ev.kind] = summary.events.get(ev.kind, 0) + 1
                        emit(jl, ev.to_json())
                        say(_describe_event(ev))
                        if ev.kind in ("stage_clear", "top_out"):
                            pills = 0
                        if ev.kind == "lock" and pending is not None:
                            pending["played"] = ev.data["placement"]
                            pending["agree"] = pending["placement"] == ev.data["placement"]
                            summary.compared += 1
                            summary.agreed += int(pending["agree"])
                            emit(jl, {"type": "decision_outcome", **pending})
                            pending = None
                            choice = None
                        if ev.kind == "spawn":
                            pills += 1
                            if level is None or speed is None:
                                decision: dict[str, Any] = {
                                    "policy": policy.name,
                                    "error": "no level in play",
                                }
                            else:
                                decision = _decide(
                                    policy,
                                    reading,
                                    facts,
                                    int(level),
                                    int(speed),
                                    speed_ups_at_spawn(pills),
                                )
                            decision.update(index=frame.index, console_frame=ev.console_frame)
                            emit(jl, {"type": "decision", **decision})
                            summary.decisions += "placement" in decision
                            choice = decision.get("placement")
                            pending = decision if choice is not None else None
                            say(_describe_decision(decision))
                    live = truth.get("decision") if run and truth is not None else None
                    if live is not None:
                        summary.live_decisions += 1
                        # A pill the run committed before its successor's colours were on
                        # screen is compared with the same kind of choice.
                        key = "placement_without_next" if live.get("without_next") else "placement"
                        mine = None if pending is None else pending.get(key)
                        out_line = {
                            "type": "live_decision",
                            "index": frame.index,
                            "pill": live.get("pill"),
                            "live": live.get("placement"),
                            "replay": mine,
                            "agree": mine is not None and mine == live.get("placement"),
                        }
                        if mine is not None:
                            summary.live_compared += 1
                            summary.live_agreed += int(out_line["agree"])
                        emit(jl, out_line)
                        say(
                            f"  the run sent placement {live.get('placement')}: "
                            + ("same" if out_line["agree"] else f"replay chose {mine}")
                        )
                    if writer is not None:
                        head = [
                            f"{source.profile.name}  frame {frame.index}"
                            + (
                                f"  console frame {facts.console_frame}"
                                if facts.console_frame is not None
                                else ""
                            ),
                            f"reader: {reader.name}",
                            f"policy: {policy.name}",
                        ]
                        if agree is not None:
                            head.append(_describe_agree(agree, "run" if run else "truth"))
                        writer.write(
                            annotate(frame.image, source.profile, reading, choice, head + recent)
                        )
                    summary.frames += 1
            except (ValueError, OSError) as e:  # ReplayError, RecordingError, a refused frame
                emit(jl, {"type": "error", "index": summary.frames, "message": str(e)})
                raise ReplayError(
                    f"{e} (after {summary.frames} frames replayed: {out / JSONL_FILE} ends with "
                    "this error"
                    + (f", {video_path} holds the frames before it)" if video_path else ")")
                ) from None
            if agreement is not None:
                summary.agreement = asdict(agreement)
            summary.warnings = list(source.warnings)
            emit(jl, {"type": "summary", **asdict(summary)})
    finally:
        if writer is not None:
            writer.release()
    return summary


def _decide(
    policy: Decider,
    reading: Observation,
    facts: FrameFacts,
    level: int,
    speed: int,
    speed_ups: int,
) -> dict[str, Any]:
    try:
        game = game_from_reading(reading, level, speed, speed_ups, facts.pill_state_frame)
        d = policy.act(game)
    except ValueError as e:
        return {"policy": policy.name, "error": str(e), "speed_ups": speed_ups}
    placement = int(d.placement)
    without_next = getattr(policy, "act_without_next", None)
    extra = {} if without_next is None else {"placement_without_next": without_next(game)}
    return {
        **extra,
        "policy": policy.name,
        "placement": placement,
        "rotation": placement // 128,
        "row": (placement % 128) // 8,
        "col": placement % 8,
        "frames_to_lock": int(len(d.masks)),
        "reachable": int(d.reachable),
        "speed_ups": speed_ups,
    }


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
        return f"  decision ({d['policy']}): none ({d.get('error')})"
    return (
        f"  decision ({d['policy']}): placement {d['placement']} (rot {d['rotation']}, "
        f"row {d['row']}, col {d['col']}) of {d['reachable']} reachable, lock in "
        f"{d['frames_to_lock']} frames"
    )


def _describe_agree(a: dict[str, Any], against: str = "truth") -> str:
    def ok(v: bool) -> str:
        return "ok" if v else "DIFFERS"

    cells = "-" if a["cells"] is None else f"{a['cells']}/128"
    return (
        f"vs {against}: cells {cells}, pill {ok(a['pill'])}, next {ok(a['next'])}, "
        f"kind {ok(a['kind'])}"
    )


READERS = ("auto", "perception", "truth")
POLICIES = ("auto", "onnx", "deepest")


def choose_reader(name: str, source: Source, model: str | Path | None = None) -> Reader:
    """``auto`` or ``perception``: :class:`PerceptionReader` for the source's profile
    (``model``: another board ONNX file); ``truth``: the recording's ground-truth sidecar.
    Raises ReplayError for an unknown name, a missing or bad model, or a truth reader on a
    source without a sidecar."""
    if name not in READERS:
        raise ReplayError(f"reader must be one of {', '.join(READERS)}, got {name!r}")
    if source.meta.get("producer") == "hil run":
        # The reader the run used: its oracle readings are in the sidecar (no pixels to read
        # them from); "truth" is those recorded readings too.
        if name == "truth" or (name == "auto" and source.meta.get("reader") == "oracle"):
            return RunReader()
    if name == "truth":
        if not source.has_truth:
            raise ReplayError(
                f"{source.name} has no ground-truth sidecar (not a recording): --reader truth "
                "reads only recordings; perception (--reader auto) reads any video"
            )
        return TruthReader()
    recorded = source.meta.get("model") if source.meta.get("producer") == "hil run" else None
    from_run = model is None and recorded is not None and Path(str(recorded)).is_file()
    if from_run:  # the run read with --model: read with the same file
        model = recorded
    try:
        reader = PerceptionReader(source.profile, model)
    except (FileNotFoundError, ValueError) as e:
        raise ReplayError(f"perception's board reader: {e}") from None
    if from_run:
        reader.model_line = f"perception model {recorded} (the run's --model, in the recording)"
    elif model is None and recorded:
        reader.model_line += f"; the run's --model {recorded} is gone"
    return reader


def choose_policy(name: str, taps_only: bool = False, model: str | Path | None = None) -> Decider:
    """``auto`` or ``onnx``: :class:`OnnxPlacementPolicy` (``model``: another policy ONNX
    file); ``deepest``: :class:`DeepestPolicy`. ``taps_only``: the planner's faster search.
    Raises ReplayError for an unknown name or a missing or bad model."""
    if name not in POLICIES:
        raise ReplayError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}")
    if name == "deepest":
        return DeepestPolicy(taps_only=taps_only)
    try:
        return OnnxPlacementPolicy(model, taps_only=taps_only)
    except (FileNotFoundError, ValueError) as e:
        raise ReplayError(f"the ONNX placement policy: {e}") from None


def main_replay(
    path: str,
    out: str | None,
    profile_name: str | None,
    reader_name: str,
    policy_name: str,
    level: int | None,
    speed: int | None,
    taps_only: bool,
    max_frames: int | None,
    quiet: bool,
    model: str | None = None,
) -> int:
    """The ``hil replay`` command (hil/cli.py). Raises SystemExit with a message on errors.
    ``model``: the board model (``--model``; default perception.store.choose_model)."""
    try:
        profile = Profile.load(profile_name) if profile_name else None
        source = open_source(path, profile)
        reader = choose_reader(reader_name, source, model)
        if isinstance(reader, PerceptionReader):
            print(f"hil replay: {reader.model_line}", file=sys.stderr)
        decider = choose_policy(policy_name, taps_only=taps_only)
        src = Path(source.name)
        out_dir = Path(out) if out else src.with_name(src.stem + "_replay")
        summary = replay(
            source,
            out_dir,
            reader=reader,
            policy=decider,
            level=level,
            speed=speed,
            max_frames=max_frames,
            log=sys.stdout,
            progress=not quiet,
        )
    except (ReplayError, ValueError, OSError) as e:
        raise SystemExit(f"hil replay: {e}") from None
    for w in summary.warnings:
        print(f"hil replay: warning: {w}", file=sys.stderr)
    ev = ", ".join(f"{k} {v}" for k, v in sorted(summary.events.items())) or "none"
    print(
        f"{summary.frames} frames replayed; events: {ev}; {summary.decisions} decisions "
        f"by {summary.policy} ({summary.agreed} of {summary.compared} equal to the placement "
        f"then seen to lock); "
        f"written to {Path(summary.out_dir) / JSONL_FILE}"
        + (f" and {summary.video}" if summary.video else "")
    )
    if summary.agreement is not None:
        against = "truth"
        if summary.compared_with == RunReader.name:
            oracle = source.meta.get("reader") == "oracle"
            against = "the truth (the run's oracle readings)" if oracle else "the run's readings"
        print(f"{summary.reader} {Agreement(**summary.agreement).describe(against)}")
    if summary.live_decisions:
        print(
            f"decisions the run sent: {summary.live_decisions}; the replay chose the same "
            f"placement as the run sent for {summary.live_agreed} of the {summary.live_compared} "
            f"it decided (a reading that differs from the run's can change a decision)"
        )
    return 0
