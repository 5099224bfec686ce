"""The tracker's own types: its states (LevelState), its settings (TrackerConfig), the events it
raises (Event), and what it keeps of the level being played (TrackedLevel)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from hil.loop.clock import NES_HZ
from hil.loop.matching import (
    MatchConfig,
)
from perception.observation import (
    Observation,
)


class LevelState(Enum):
    IDLE = "idle"  # no level: waiting for the Start press
    ALIGNING = "aligning"  # Start pressed: finding the level's base frame and frameCounter
    TRACKING = "tracking"  # the shadow state follows the console
    BLIND = "blind"  # diverged beyond a patch: waiting for the next spawn to re-anchor
    ENDED = "ended"  # stage clear or top-out seen


@dataclass
class TrackerConfig:
    """latency_ns: capture chain delay from a picture's completion to the host (calibrated;
    the Profile's ``latency_frames``). jitter_ns: the most extra delay expected. mismatch_frames:
    consecutive disagreeing captures before a divergence is declared (one repeated or stale
    capture is not a divergence). align_window: base-frame hypotheses either side of the
    prior. intro_frames: zero-input frames tabulated for the alignment. align_wait: frames of
    the first pill's fall watched before an ambiguous alignment is settled, when the reader
    gives no throw frame (the pill is then decided on that much later), and at most until
    lock_reserve frames before the pill would lock without input. board_frames: intro pictures
    the level's board is voted over (two virus animation periods). track_virus_frame: compare
    the virus animation frame after the alignment too. soft_mismatch_frames: consecutive
    disagreeing captures before a divergence is declared when only board cells or the next
    pill's colours differ (a reader's misread cell or preview lasts a frame or two; a real
    difference stays, and neither moves the falling pill the inputs are planned for).
    left_frames: consecutive captures of a screen that is no level (ScreenKind.OTHER) after
    which a level in play has ended, the console having left it (a RESET). opponent: a
    two-player round (hil run --versus): the level and speed of the other player; the tracked
    bottle is then player ``player``'s (2, or 1 when the bot plays both ports), its shadow state
    the nbPlayers-2 Game of engine.attack, and the intro lasts as long as the bottle with more
    viruses takes to draw (levelIntro [$9CAB] adds one virus a frame to each bottle that still
    needs one)."""

    latency_ns: float = 0.0
    jitter_ns: float = 4e6
    hz: float = NES_HZ
    window_us: int = 5000
    mismatch_frames: int = 2
    align_window: int = 3
    intro_frames: int = 260
    align_wait: int = 60
    lock_reserve: int = 30
    board_frames: int = 16
    track_virus_frame: bool = False
    soft_mismatch_frames: int = 6
    left_frames: int = 30
    match: MatchConfig = field(default_factory=MatchConfig)
    opponent: tuple[int, int] | None = None
    player: int = 2


@dataclass
class Event:
    """One thing the tracker saw or did; ``data`` is JSON-ready."""

    name: str
    frame: int | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "frame": self.frame, **self.data}


class TrackedLevel:
    """Everything the tracker knows about the level in play."""

    def __init__(self, level: int, speed: int, start_frame: int) -> None:
        self.level = level
        self.speed = speed
        self.start_frame = start_frame  # the frame the Start that begins the level latched in
        self.last_start = start_frame  # ... at the latest (begin_level)
        # The Start's frame is not known (a person presses it): wait for the intro's first
        # picture (Tracker.begin_level)
        self.wait_start = False
        # The base frame as the intro's pictures give it (None until the whole board is seen):
        # the first picture with every virus is the frame before State 0's.
        self.base_prior: int | None = None
        # The earliest base frame the intro's pictures allow: a capture with the board still
        # partial showed a frame before the whole one. Below base_prior - align_window when the
        # loop read no picture for a while (a stall) as the board became whole.
        self.base_low: int | None = None
        self.base: int | None = None
        self.fc0: int | None = None  # frameCounter mod 16 in state 0
        self.observations: list[tuple[range, Observation]] = []
        self.points: list[int] = []  # per observation, its most likely frame (shown_frame)
        self.board: npt.NDArray[np.uint8] | None = None
        self.next0: tuple[int, int] | None = None
        self.tables: dict[int, list[Observation]] = {}
        self.align_jobs: list[Future[Any]] = []  # _align_step on the worker, in order
        self.table_throw: dict[int, int] = {}  # first e whose preview is not next0
        self.table_lock: dict[int, int] = {}  # first e after the first spawn without a pill
        self.misses: dict[tuple[int, int], int] = {}
        # Tracking:
        self.history: dict[int, engine.Game] = {}  # e -> confirmed state
        self.spawns: dict[int, int] = {}  # e -> spawn count up to e
        self.confirmed = 0  # newest e in history
        # The next pill's colours as read while the spawn count was k (the preview changes
        # only at a spawn: generateNextPill $8E9D); states with an unread count are not
        # compared on them.
        self.next_by_spawn: dict[int, tuple[int, int]] = {}
        # One player: the seeds that make this level's board and agree with every preview
        # read so far, each with its pill reserve (ids uint8[128]; hil.loop.alignment
        # .level_seeds); the states hold the first one's reserve. Empty: the reserve is
        # not known (the states hold some seed's).
        self.seeds: dict[int, npt.NDArray[np.uint8]] = {}
        self.reported_spawn = 0
        self.decided_spawn = 0
        self.mismatch_run = 0
        self.run_obs: list[tuple[range, Observation]] = []  # the current disagreeing captures
        self.slip_run = 0
        self.last_seen: Observation | None = None
        self.result: str | None = None  # "stage_clear" / "top_out" once seen
        self.pill_seen: int | None = None  # frame of the first capture with the first pill
        # Viruses the level's board lacks against the level's count (virus_target): a board
        # voted from pictures on which the reader missed a virus every time. Until they are
        # found, a virus read where the shadow has none may be the shadow's error.
        self.viruses_missing = 0
        # Two players (TrackerConfig.opponent): the opponent's (level, speed), and the frames
        # the intro goes on drawing the opponent's bottle after this one is whole.
        self.opponent: tuple[int, int] | None = None
        self.player = 2  # the tracked bottle's player (TrackerConfig.player)
        self.intro_lead = 0
        # A match's later round: the bytes initData_level [$8216] leaves as the zero page held
        # them, from this bottle's state at the last round's end (engine next_round); None: a
        # match's first round (zeros, as engine.Versus).
        self.stale: engine.Game | None = None
        self.end_frame: int | None = None  # the frame the level ended in (Tracker._end)
        self.clear_run = 0  # captures in a row read as a stage clear (two players)
        self.clear_first = 0  # ... the frame of the first
        # e -> (state e before the attack released there, spawns): Tracker._attack
        self.releases: dict[int, tuple[engine.Game, int]] = {}
        self.votes: npt.NDArray[np.float32] | None = None  # [16, 8, 256] board votes
        self.soft_only = False  # the current disagreeing run differs in board or next only
        self.left_run = 0  # consecutive captures of no level while it is played
        self.voted = 0
