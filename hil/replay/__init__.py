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
- policy (``--policy``): the live loop's policies asked as ``hil run`` asks them
  (:class:`LivePolicy`: hil.loop.runtime.EnginePlanner plans every reachable placement of a game
  rebuilt from the reading at the spawn, hil.loop.policies chooses): ``auto``/``onnx`` the
  policy room's network (policy/models/policy.onnx), ``search`` and ``heuristic`` as in
  ``hil run``, ``deepest`` a baseline (:class:`DeepestPolicy`: the deepest reachable placement).

Nothing here imports torch (replay is a runtime path; tests check it).

The parts, one module each: sources (recordings and videos), readers (and the comparison
with the truth), events, policies, annotate (the annotated video), core (the loop and the
command).
"""

from engine.placement import placement_index
from hil.replay.annotate import CHOICE_BGR, annotate, panel_width
from hil.replay.common import ReplayError
from hil.replay.core import ReplaySummary, main_replay, replay
from hil.replay.events import (
    Event,
    EventDetector,
    lock_placement,
    placement_cells,
)
from hil.replay.policies import (
    DeepestPolicy,
    LivePolicy,
    choose_policy,
    game_from_reading,
    speed_ups_at_spawn,
)
from hil.replay.readers import (
    FrameFacts,
    PerceptionReader,
    RunReader,
    TruthReader,
    choose_reader,
)
from hil.replay.sources import Source, open_source

__all__ = [
    "CHOICE_BGR",
    "DeepestPolicy",
    "Event",
    "EventDetector",
    "FrameFacts",
    "LivePolicy",
    "PerceptionReader",
    "ReplayError",
    "ReplaySummary",
    "RunReader",
    "Source",
    "TruthReader",
    "annotate",
    "choose_policy",
    "choose_reader",
    "game_from_reading",
    "lock_placement",
    "main_replay",
    "open_source",
    "panel_width",
    "placement_cells",
    "placement_index",
    "replay",
    "speed_ups_at_spawn",
]
