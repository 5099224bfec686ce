"""The replay's readers (perception on the pixels, the recording's truth, the run's own readings)
and how readings compare with the truth."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from calibration import Profile
from engine import ScreenKind
from engine.constants import Phase
from hil.loop.observation import OnnxReader
from hil.loop.recording import Frame
from hil.replay.common import ReplayError, short_path
from hil.replay.sources import Source
from perception.observation import (
    FallingPill,
    NextPill,
    Observation,
    blank_observation,
    canonical_cells,
)


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
        self.name = f"perception: BoardReader ({short_path(self.live.path)})"

    def __call__(
        self, frame: Frame, truth: dict[str, Any] | None
    ) -> tuple[Observation, FrameFacts]:
        obs = replace(self.live(frame), source=self.name)
        return obs, FrameFacts(virus_left=obs.virus_count)


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


READERS = ("auto", "perception", "truth")


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
