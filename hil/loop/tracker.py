"""The tracker: a shadow engine state kept in step with the console, checked against what is seen.

Frames and states (docs/RUN.md, "Frame clock"): console frame ``g`` is the firmware's g-th latch
group. A level that starts at base frame ``b`` has its engine state ``e = g - b`` in the picture
of frame g (render_frame of the state before frame g's step; the falling pill's sprites one
frame older again), and the byte latched in frame ``b + e`` is the mask of engine step
``e -> e + 1``. The firmware's STATUS says which byte every frame latched, so the shadow state
is exact as long as the level's start (b), the frameCounter phase at it and the board are
right; the pictures are used to find those, to check every prediction and to re-sync.

- :class:`FrameClock` maps firmware frames to host time from the STATUS messages (the device's
  latch timestamps and a min-filtered device-to-host offset) and answers "which frame can I
  still schedule" and "which frame does a capture that arrived at time A show".
- :class:`Tracker` aligns each level (hypotheses over the base frame and frameCounter mod 16,
  scored on the observations of the level intro and first throw), then keeps the confirmed
  shadow state (stepped with latched masks), predicts future frames with the scheduled masks,
  compares ``engine.screen_facts`` of the predicted state with every Observation (the sprite
  offset, the row-by-row redraw lag and the virus animation are part of the prediction), and
  reports events: level start, spawn (first visible frame), lock, clears, stage clear, top-out,
  desync. On a divergence it re-syncs the shadow state from the observation (board cells,
  pill pose and colours) and asks for a re-plan; if that does not explain what is seen it waits
  blind for the next spawn and re-anchors there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine import ScreenKind
from engine.constants import Phase
from hil.loop.clock import NES_HZ, FrameClock
from hil.loop.schedule import Schedule
from hil.loop.worker import Inline, Worker
from perception.observation import (
    COLS,
    ROWS,
    FallingPill,
    Observation,
    canonical_cells,
    observation_from_facts,
    unpaired_halves,
)
from perception.panel import level_viruses as virus_target

SPAWN_X, SPAWN_Y = 3, 15  # fallingPillX/Y as generateNextPill sets them


# ---- comparing predictions with observations ---------------------------------------------------


@dataclass(frozen=True)
class MatchConfig:
    """How strictly a prediction must agree with an observation.

    min_confidence: cells read with less are not compared, nor written into the shadow state
    on a re-sync (the prediction is exact; an unsure reading is perception's doubt, e.g. a
    virus colour misread on one animation frame); the same threshold holds for the next
    pill's reading and for the cells under a predicted falling pill that the reader did not
    see. cell_tolerance: confident cells allowed to differ (perception noise). compare_next /
    compare_throw / compare_virus_frame: use those facts when both sides know them."""

    min_confidence: float = 0.97
    cell_tolerance: int = 0
    compare_next: bool = True
    compare_throw: bool = True
    compare_virus_frame: bool = True


def _pill_hidden(pill: FallingPill, field: npt.NDArray[np.uint8]) -> bool:
    """True when the bottle already shows ``pill`` in the cells its sprites cover: the lock
    frame, whose picture has the locked pill's tiles under the last sprite (the sprite one
    line lower, fallingPill_spriteUpdate $872F), which a pixel reader cannot reliably tell
    from the tiles alone. Pill halves only ($4x-$8x), in the sprite's colours."""
    p = pill.drawn()
    for (r, c), color in zip(p.cells, p.colors, strict=True):
        if not (0 <= r < ROWS and 0 <= c < COLS):
            return False
        code = int(field[r, c])
        if not (0x40 <= code < 0x90) or (code & 0x0F) != color:
            return False
    return True


# What a reader's misread makes differ for a frame or two, and no input depends on: a run of
# captures that differ in these only needs TrackerConfig.soft_mismatch_frames to diverge.
_SOFT = frozenset({"board", "next"})


def _unsure_under(pill: FallingPill, obs: Observation, cfg: MatchConfig) -> bool:
    """True when ``obs`` read one of the bottle cells that ``pill``'s sprites cover with less
    than ``cfg.min_confidence``: a picture whose reader found no falling pill there is then no
    evidence that none is drawn. On the real game's frames the ROM-fitted reader missed a falling
    pill resting on viruses for up to 7 frames in a row, each time with those cells at 0.2-0.5
    (docs/RUN.md, "Tracking")."""
    conf = np.asarray(obs.confidence)
    for r, c in pill.drawn().cells:
        if 0 <= r < ROWS and 0 <= c < COLS and conf[r, c] < cfg.min_confidence:
            return True
    return False


def _same_picture(pred: ScreenKind, seen: ScreenKind) -> bool:
    """A predicted stage clear or top-out seen as a LEVEL picture: the console draws the bottle
    as in play for the first frames of those phases (the STAGE CLEAR / GAME OVER boxes come
    later, docs/RENDER.md "Terminal phases"), so a pixel reader cannot tell them yet."""
    return seen == ScreenKind.LEVEL and pred in (ScreenKind.STAGE_CLEAR, ScreenKind.TOP_OUT)


def _compared_differences(pred: Observation, obs: Observation, cfg: MatchConfig) -> Any:
    """bool [16, 8]: the cells the board comparison counts as different: read with
    ``cfg.min_confidence``, not under either falling pill's sprites, not a reading the game
    cannot show (_impossible_reads) or a half without its partner (unpaired_halves)."""
    sure = np.asarray(obs.confidence) >= cfg.min_confidence  # a new array
    for pill in (pred.falling, obs.falling):
        if pill is not None:  # the tiles under a falling pill's sprites are hidden
            for r, c in pill.cells:
                if 0 <= r < ROWS and 0 <= c < COLS:
                    sure[r, c] = False
    # Readings the game cannot show are not compared: the ROM-fitted reader took some red
    # viruses on the real game's picture for $B1 and a yellow right half for a yellow virus,
    # confidently, for hundreds of frames.
    sure &= ~_impossible_reads(pred.field, obs.field) & ~unpaired_halves(obs.field, clearing=False)
    return (np.asarray(pred.field) != np.asarray(obs.field)) & sure


def board_differences(pred: Observation, obs: Observation, cfg: MatchConfig) -> list[list[Any]]:
    """The compared cells that differ, for the event log: [row, col, predicted, seen,
    confidence] each (cell codes as hex strings, confidence rounded), at most 8."""
    out: list[list[Any]] = []
    conf = np.asarray(obs.confidence)
    for r, c in np.argwhere(_compared_differences(pred, obs, cfg))[:8]:
        r, c = int(r), int(c)
        p, o = int(pred.field[r][c]), int(obs.field[r][c])
        out.append([r, c, f"{p:02x}", f"{o:02x}", round(float(conf[r, c]), 3)])
    return out


def mismatches(
    pred: Observation, obs: Observation, cfg: MatchConfig, next_known: bool = True
) -> list[str]:
    """What differs between a predicted and an observed screen: a subset of "kind", "board",
    "pill", "next", "throw", "virus_frame" (empty: they agree)."""
    out = []
    if pred.kind != obs.kind and not _same_picture(pred.kind, obs.kind):
        out.append("kind")
    if pred.kind == ScreenKind.PAUSED or obs.kind == ScreenKind.PAUSED:
        return out
    diff = int(_compared_differences(pred, obs, cfg).sum())
    if diff > cfg.cell_tolerance:
        out.append("board")
    if pred.falling is not None and obs.falling is None and _pill_hidden(pred.falling, obs.field):
        pass  # the lock frame: the sprite over the same pill drawn in the bottle
    elif pred.falling is not None and obs.falling is None and _unsure_under(pred.falling, obs, cfg):
        pass  # no pill read where the reader was unsure of the cells the predicted one covers
    elif (pred.falling is None) != (obs.falling is None) or (
        pred.falling is not None
        and obs.falling is not None
        and pred.falling.drawn() != obs.falling.drawn()
    ):
        out.append("pill")
    if (
        cfg.compare_next
        and next_known
        and pred.next_colors is not None
        and obs.next is not None
        and obs.next.confidence >= cfg.min_confidence
        and pred.next_colors != obs.next_colors
    ):
        out.append("next")
    if (
        cfg.compare_throw
        and pred.next_throw_frame is not None
        and obs.next_throw_frame is not None
        and pred.next_throw_frame != obs.next_throw_frame
    ):
        out.append("throw")
    if (
        cfg.compare_virus_frame
        and pred.virus_frame is not None
        and obs.virus_frame is not None
        and pred.virus_frame != obs.virus_frame
    ):
        out.append("virus_frame")
    return out


def predicted_observation(game: engine.Game) -> Observation:
    """What a perfect reader would read off render_frame(game)."""
    return observation_from_facts(engine.screen_facts(game), source="prediction")


_SEND_PILL_FINISHED = 3  # nextAction action_sendPillFinished


def falling(game: engine.Game) -> bool:
    """A pill is falling in this state (nextAction = action_pillFalling, playing)."""
    return int(game.next_action) == 0 and int(game.phase) == Phase.PLAYING


# ---- the tracker ----------------------------------------------------------------------------


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
    which a level in play has ended, the console having left it (a RESET)."""

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


@dataclass
class Event:
    """One thing the tracker saw or did; ``data`` is JSON-ready."""

    name: str
    frame: int | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "frame": self.frame, **self.data}


class _Level:
    """Everything the tracker knows about the level in play."""

    def __init__(self, level: int, speed: int, start_frame: int) -> None:
        self.level = level
        self.speed = speed
        self.start_frame = start_frame  # the frame the Start that begins the level latched in
        self.last_start = start_frame  # ... at the latest (begin_level)
        # The base frame as the intro's pictures give it (None until the whole board is seen):
        # the first picture with every virus is the frame before State 0's.
        self.base_prior: int | None = None
        self.base: int | None = None
        self.fc0: int | None = None  # frameCounter mod 16 in state 0
        self.observations: list[tuple[range, Observation]] = []
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
        # compared on them. The tracker never knows the pill reserve.
        self.next_by_spawn: dict[int, tuple[int, int]] = {}
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
        self.votes: npt.NDArray[np.float32] | None = None  # [16, 8, 256] board votes
        self.soft_only = False  # the current disagreeing run differs in board or next only
        self.left_run = 0  # consecutive captures of no level while it is played
        self.voted = 0


class Tracker:
    """See the module docstring. ``log``: receives every Event as it happens."""

    def __init__(
        self,
        config: TrackerConfig,
        log: Callable[[Event], None] | None = None,
        *,
        clock: FrameClock | None = None,
        schedule: Schedule | None = None,
        worker: Worker | None = None,
    ) -> None:
        self.cfg = config
        # Where the intro's tables are built (hil.loop.worker: a thread in real time, here and
        # now in lockstep): 160 ms of work the loop's thread must not wait for.
        self.worker = worker if worker is not None else Inline()
        # While tracking, the virus animation frame is compared only when asked: it fixed the
        # frameCounter phase at alignment, and a pixel reader's relative label that slips on a
        # frame would be a false desync.
        self._track_match = replace(
            config.match,
            compare_virus_frame=config.match.compare_virus_frame and config.track_virus_frame,
        )
        # The loop's frame clock and schedule (read here; the runtime feeds them).
        self.clock = clock if clock is not None else FrameClock(config.hz, config.window_us)
        self.schedule = schedule if schedule is not None else Schedule()
        self.log = log or (lambda _e: None)
        self.state = LevelState.IDLE
        self.lv: _Level | None = None
        self.desyncs = 0
        self.resyncs = 0
        self.timing_slips = 0
        self.replan = False
        self.status_gaps = 0
        self.last_matched: int | None = None  # newest console frame matched by a capture
        self.frame_match: int | None = None  # the frame the last capture matched, or None
        self.levels_started = 0
        self._out: list[Event] = []  # events raised inside helpers, returned by on_frame

    # ---- inputs: statuses ------------------------------------------------------------------

    def on_status(self, frame: int, first_latch_us: int, mask: int, host_ns: int) -> None:
        """A STATUS: ``frame`` latched ``mask`` at device time ``first_latch_us``, received at
        ``host_ns``: into the clock and the schedule, then :meth:`advance`. (The runtime feeds
        its clock and schedule itself and calls :meth:`advance`.)"""
        self.clock.on_status(frame, first_latch_us, host_ns)
        self.schedule.on_latched(frame, mask)
        self.advance()

    def mask_of(self, frame: int) -> int:
        """The byte frame ``frame`` latched, or will latch as far as the host knows."""
        return self.schedule.mask_of(frame)

    def renumber(self, shift: int) -> None:
        """The firmware restarted and numbers console frame g as g - shift from now on (the
        level's frames; the clock and the schedule are renumbered by their owner)."""
        if self.lv is not None:
            if self.lv.base is not None:
                self.lv.base -= shift
            if self.lv.base_prior is not None:
                self.lv.base_prior -= shift
            self.lv.start_frame -= shift
            self.lv.observations = [
                (range(r.start - shift, r.stop - shift), o) for r, o in self.lv.observations
            ]
        if self.last_matched is not None:
            self.last_matched -= shift

    # ---- levels --------------------------------------------------------------------------------

    def begin_level(
        self, level: int, speed: int, start_frame: int, last_start: int | None = None
    ) -> None:
        """A Start press that begins ``level`` at ``speed`` latches in frame ``start_frame``
        or later, by ``last_start`` at the latest (default ``start_frame``): captures of frames
        before ``start_frame`` are ignored, and a board is taken from pictures short of the
        level's viruses only MAX_INTRO_FRAMES after ``last_start`` (the real game's loop,
        level 20 HI chained: Start held from 66 frames before the stage clear's loop read it,
        the board was voted while the intro still drew its last 2 viruses). The
        level's start is then taken from the pictures, as the game draws it (docs/LEVEL_FLOW.md):
        levelIntro [$9CAB] adds one virus a frame; the first picture that shows all
        ``(min(level, 20) + 1) * 4`` of them comes one frame before the engine's State 0, so a
        partly drawn bottle is never taken for the board, whatever the intro's length (addVirus
        retries, initData_level overrunning its frame) and on any console."""
        self.lv = _Level(level, speed, start_frame)
        self.lv.last_start = start_frame if last_start is None else max(start_frame, last_start)
        self.state = LevelState.ALIGNING
        self.levels_started += 1
        self.log(Event("level_expected", start_frame, {"level": level, "speed": speed}))

    @property
    def base(self) -> int | None:
        return None if self.lv is None else self.lv.base

    def _make_state0(self, fc0: int, lv: _Level | None = None) -> engine.Game:
        lv = lv if lv is not None else self.lv
        assert lv is not None and lv.board is not None
        g = engine.Game(lv.level, lv.speed, _usable_seed(lv.level), frame_counter=fc0)
        field = lv.board.reshape(-1)
        g.field[:] = field
        g.shown[:] = field
        n = int(((field & 0xF0) == 0xD0).sum())
        g.virus_left_bcd[()] = (n // 10) * 16 + n % 10
        if lv.next0 is not None:
            g.next_colors[:] = lv.next0
        return g

    def _align_step(
        self, lv: _Level, frames: range, obs: Observation, n: int, force: bool, now: int
    ) -> tuple[int, int, bool] | None:
        """One capture of the alignment, on the worker (hil.loop.worker: a thread in real time,
        inline in lockstep; its jobs run in order): the first builds the intro's tables for
        every frameCounter phase (:func:`intro_tables`) and scores the ``n`` captures seen so
        far, each later one scores its own; then :meth:`_align_choice`. About 7 ms a capture
        and 330 ms for the first: no frame of the loop waits for them."""
        if lv.base is not None:
            return None  # aligned meanwhile
        if not lv.tables:
            states = [self._make_state0(c, lv) for c in range(16)]
            lv.tables, lv.table_throw, lv.table_lock = intro_tables(states, self.cfg.intro_frames)
            w = self.cfg.align_window
            assert lv.base_prior is not None
            prior = lv.base_prior
            lv.misses = {(b, c): 0 for b in range(prior - w, prior + w + 1) for c in range(16)}
            for seen, o in lv.observations[:n]:
                self._score(lv, seen, o)
        else:
            self._score(lv, frames, obs)
        return self._align_choice(lv, n, force, now)

    def _score(self, lv: _Level, frames: range, obs: Observation) -> None:
        assert lv.board is not None
        whole: bool | None = None
        agree: dict[tuple[int, bool], bool] = {}  # (id of a prediction, next known) -> agrees
        for (b, c), miss in lv.misses.items():
            table = lv.tables[c]
            ok = False
            informative = False
            for g in frames:
                e = g - b
                if e < 0:
                    # The last virus is drawn by the NMI of the frame before State 0's picture:
                    # frame b - 1 shows the whole board, every earlier frame a partial one.
                    informative = True
                    if whole is None:
                        whole = obs.kind == ScreenKind.LEVEL and _same_board(obs, lv.board)
                    ok |= whole if e == -1 else not whole
                elif e < len(table):
                    informative = True
                    key = (id(table[e]), e < lv.table_throw[c])
                    if key not in agree:
                        agree[key] = not mismatches(
                            table[e], obs, self.cfg.match, next_known=key[1]
                        )
                    ok |= agree[key]
                if ok:
                    break
            if informative and not ok:
                lv.misses[(b, c)] = miss + 1

    def _align_choice(
        self, lv: _Level, n: int, force: bool, now: int
    ) -> tuple[int, int, bool] | None:
        """(base frame, frameCounter mod 16, ambiguous) once one hypothesis leads (or
        ``force``), else None; ``n``: the captures seen so far."""
        assert lv.base_prior is not None
        if not lv.misses:
            return None
        prior = lv.base_prior
        ranked = sorted(lv.misses.items(), key=lambda kv: (kv[1], abs(kv[0][0] - prior)))
        (b, c), best = ranked[0]
        runner_up = ranked[1][1] if len(ranked) > 1 else best + 99
        # b is pinned once the first pill is thrown (intro + throw frames tabulated).
        seen_enough = any(g - b >= 150 for frames, _ in lv.observations[:n] for g in frames)
        # While the first pill falls its decision is due: one contradicting capture decides.
        margin = 1 if lv.pill_seen is not None else 2
        # ... and the wait ends while the pill can still be steered (the no-input table says
        # when it would lock).
        if lv.pill_seen is not None:
            force |= lv.table_lock[c] - (now - b) <= self.cfg.lock_reserve
        if force or (runner_up >= best + margin and seen_enough):
            return b, c, runner_up < best + margin
        return None

    def _aligned(self) -> None:
        """Takes the alignment's finished jobs in order; tracking starts at the first that
        chose a hypothesis."""
        lv = self.lv
        assert lv is not None
        while lv.align_jobs and lv.align_jobs[0].done():
            choice = lv.align_jobs.pop(0).result()
            if choice is not None and lv.base is None:
                lv.align_jobs.clear()
                self._start_tracking(*choice)

    def _start_tracking(self, b: int, c: int, ambiguous: bool) -> None:
        lv = self.lv
        assert lv is not None
        lv.base, lv.fc0 = b, c
        state = self._make_state0(c)
        lv.viruses_missing = max(0, virus_target(lv.level) - int(state.virus_count))
        lv.history = {0: state.clone()}
        lv.spawns = {0: 0}
        if lv.next0 is not None:
            lv.next_by_spawn[0] = lv.next0
        lv.confirmed = 0
        self.state = LevelState.TRACKING
        self._out.append(
            Event(
                "level_start",
                b,
                {
                    "level": lv.level,
                    "speed": lv.speed,
                    "frame_counter_mod16": c,
                    "viruses": int(state.virus_count),
                    "ambiguous": ambiguous,
                    "misses": lv.misses.get((b, c), 0),
                },
            )
        )
        lv.observations.clear()
        self.advance()

    # ---- the shadow state ------------------------------------------------------------------------

    def advance(self) -> None:
        """Steps the confirmed state through every frame latched since."""
        lv = self.lv
        if (
            lv is None
            or lv.base is None
            or self.state
            not in (
                LevelState.TRACKING,
                LevelState.BLIND,
            )
        ):
            return
        last = self.clock.last_frame
        while lv.base + lv.confirmed <= last:
            g = lv.base + lv.confirmed
            if g not in self.schedule.latched:
                self.status_gaps += 1
            game = lv.history[lv.confirmed].clone()
            game.step(self.mask_of(g))
            lv.confirmed += 1
            lv.history[lv.confirmed] = game
            before = lv.spawns[lv.confirmed - 1]
            started = falling(game) and not falling(lv.history[lv.confirmed - 1])
            lv.spawns[lv.confirmed] = before + int(started)
            if started and lv.spawns[lv.confirmed] in lv.next_by_spawn:
                game.next_colors[:] = lv.next_by_spawn[lv.spawns[lv.confirmed]]
            old = lv.confirmed - 600
            lv.history.pop(old, None)
            lv.spawns.pop(old, None)

    def state_at(self, e: int) -> tuple[engine.Game, int] | None:
        """(state e of the level, spawns up to it): from history when confirmed, else
        predicted from the confirmed state with the scheduled masks. None when e is before
        the kept history."""
        lv = self.lv
        if lv is None or lv.base is None:
            return None
        if e <= lv.confirmed:
            if e not in lv.history:
                return None
            return lv.history[e], lv.spawns[e]
        game = lv.history[lv.confirmed].clone()
        spawns = lv.spawns[lv.confirmed]
        for k in range(lv.confirmed, e):
            was = falling(game)
            game.step(self.mask_of(lv.base + k))
            if falling(game) and not was:
                spawns += 1
                if spawns in lv.next_by_spawn:
                    game.next_colors[:] = lv.next_by_spawn[spawns]
        return game, spawns

    @property
    def end_frame(self) -> int | None:
        """The console frame whose step ended the level in the shadow state (the frame
        checkVirusLeft [$B269] or the top-out began in), or None when the shadow did not see
        it. The stage clear's Start loop reads the pad from 97 frames later
        (docs/LEVEL_FLOW.md)."""
        lv = self.lv
        if lv is None or lv.base is None:
            return None
        for e in sorted(lv.history):
            if Phase(int(lv.history[e].phase)) in (Phase.STAGE_CLEAR, Phase.TOP_OUT):
                return lv.base + e - 1
        return None

    def confirmed_state(self) -> tuple[int, engine.Game] | None:
        """(frame the next step latches in, a copy of the state before it)."""
        lv = self.lv
        if lv is None or lv.base is None or self.state != LevelState.TRACKING:
            return None
        return lv.base + lv.confirmed, lv.history[lv.confirmed].clone()

    # ---- observations -------------------------------------------------------------------------

    def shown_frames(self, arrival_ns: int) -> range:
        return self.clock.shown_frames(arrival_ns, self.cfg.latency_ns, self.cfg.jitter_ns)

    def on_frame(self, arrival_ns: int, obs: Observation) -> list[Event]:
        """One captured frame's observation; returns the events it caused (also logged)."""
        events: list[Event] = []
        if not self.clock.ready:
            return events
        frames = self.shown_frames(arrival_ns)
        self.frame_match = None
        lv = self.lv
        if lv is not None and frames.stop - 1 < lv.start_frame:
            return events  # still the screen before this level (the capture lags the console)
        if lv is not None:
            prev = lv.last_seen
            playing = self.state in (LevelState.TRACKING, LevelState.BLIND)
            if obs.kind == ScreenKind.STAGE_CLEAR and playing:
                if prev is None or prev.kind != ScreenKind.STAGE_CLEAR:
                    events.append(self._end("stage_clear", frames.stop - 1))
            elif obs.kind == ScreenKind.TOP_OUT and playing:
                events.append(self._end("top_out", frames.stop - 1))
            lv.left_run = lv.left_run + 1 if obs.kind == ScreenKind.OTHER and playing else 0
            if lv.left_run:
                # A screen that is no level while one is played: the console left it (its
                # RESET, a soft reset). Not compared; after left_frames captures the level
                # has ended ("left"), and the run plays it again.
                if lv.left_run >= self.cfg.left_frames:
                    events.append(self._end("left", frames.stop - 1))
            else:
                if self.state == LevelState.ALIGNING:
                    self._aligning(frames, obs)
                if self.state == LevelState.TRACKING:
                    events += self._tracking(frames, obs)
                elif self.state == LevelState.BLIND:
                    events += self._blind(frames, obs)
                if prev is not None and self.state != LevelState.ALIGNING:
                    events += self._seen_events(prev, obs, frames)
            lv.last_seen = obs
        events = self._out + events
        self._out = []
        for ev in events:
            self.log(ev)
        return events

    def _end(self, name: str, frame: int) -> Event:
        self.state = LevelState.ENDED
        self.replan = False
        if self.lv is not None:
            self.lv.result = name
        return Event(name, frame, {"level": self.lv.level if self.lv else None})

    def _aligning(self, frames: range, obs: Observation) -> None:
        lv = self.lv
        assert lv is not None
        lv.observations.append((frames, obs))
        if lv.board is None:
            target = virus_target(lv.level)
            # The whole board: every virus of the level in sight. After the longest intro the
            # board is surely complete, so a reader that misses a virus on every picture still
            # gets a board (its count is then what the pictures show).
            late = frames.start > lv.last_start + MAX_INTRO_FRAMES
            # The intro's board holds viruses only (a clearing tile there is a virus misread,
            # _as_virus): a picture with a pill half or a single is another screen read as a
            # level. The stage clear's STAGE CLEAR box, which the board model never learnt,
            # read as a LEVEL with 24 "viruses" among halves on the real game (HDMI profile,
            # chained to level 1 HI: the board was voted from it, 176 misses, a desync per
            # pill); its pictures come before the Start when the Start is held early.
            full = (obs.virus_count >= target and not _pill_cells(obs.field)) or (
                late and obs.virus_count > 0
            )
            if obs.kind == ScreenKind.LEVEL and full and obs.falling is None:
                if lv.votes is None:
                    lv.votes = np.zeros((ROWS, COLS, 256), np.float32)
                    lv.next0 = obs.next_colors
                    lv.base_prior = self._first_full(min(target, obs.virus_count), frames) + 1
                # The board is voted over board_frames pictures (the sum of confidence per cell
                # and code): a reader unsure of a virus on one animation frame is sure on the
                # other, and a board read wrong at the start stays wrong in the shadow.
                rows, cols = np.indices((ROWS, COLS))
                lv.votes[rows, cols, _as_virus(obs.field)] += np.asarray(obs.confidence, np.float32)
                lv.voted += 1
            if lv.votes is not None and (
                lv.voted >= self.cfg.board_frames or obs.falling is not None
            ):
                lv.board = lv.votes.argmax(axis=-1).astype(np.uint8)
        if lv.board is not None:
            # The first pill in sight: its decision is due. Its fall (no input yet, so still in
            # the tables) pins the base frame when the intro could not (a pixel reader sees no
            # throw frame), so watch it for align_wait frames before settling on the best
            # hypothesis.
            if obs.falling is not None and lv.pill_seen is None:
                lv.pill_seen = frames.stop - 1
            waited = lv.pill_seen is not None and frames.stop - 1 - lv.pill_seen >= (
                self.cfg.align_wait if obs.next_throw_frame is None else 0
            )
            job = self.worker.submit(
                self._align_step, lv, frames, obs, len(lv.observations), waited, frames.stop - 1
            )
            lv.align_jobs.append(job)
            self._aligned()

    def _first_full(self, target: int, frames: range) -> int:
        """The first frame a capture of this level showed ``target`` viruses or more (the
        current capture's when none before did)."""
        lv = self.lv
        assert lv is not None
        for seen, obs in lv.observations:
            if (
                obs.kind == ScreenKind.LEVEL
                and obs.virus_count >= target
                and not _pill_cells(obs.field)
            ):
                return seen.stop - 1
        return frames.stop - 1

    def _candidates(self, frames: Iterable[int]) -> list[tuple[int, Observation, int, bool]]:
        """(frame, predicted observation, spawns, next known) per candidate frame."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        out = []
        for g in frames:
            got = self.state_at(g - lv.base)
            if got is None:
                continue
            game, spawns = got
            # In action_sendPillFinished the preview already shows the reserve's next pill
            # (generateNextPill $8E9D), unknown here: the spawn counted one frame later learns
            # it. (On the real game this cost one unmatched capture at every spawn.)
            known = spawns in lv.next_by_spawn and int(game.next_action) != _SEND_PILL_FINISHED
            out.append((g, predicted_observation(game), spawns, known))
        return out

    def _tracking(self, frames: range, obs: Observation) -> list[Event]:
        lv = self.lv
        assert lv is not None and lv.base is not None
        events: list[Event] = []
        match = None
        worst: list[str] = []
        worst_pred: Observation | None = None
        for g, pred, spawns, known in reversed(self._candidates(frames)):
            diff = mismatches(pred, obs, self._track_match, known)
            if not diff:
                match = (g, pred, spawns)
                break
            if not worst or len(diff) < len(worst):
                worst, worst_pred = diff, pred
        if match is None:
            lv.mismatch_run += 1
            lv.run_obs.append((frames, obs))
            soft = set(worst) <= _SOFT or self._soft_beside(frames, obs)
            lv.soft_only = (lv.soft_only if lv.mismatch_run > 1 else True) and soft
            needed = self.cfg.soft_mismatch_frames if lv.soft_only else self.cfg.mismatch_frames
            if lv.mismatch_run >= needed:
                events += self._diverged(frames, obs, worst, worst_pred)
            return events
        lv.mismatch_run = 0
        lv.run_obs = []
        g, pred, spawns = match
        self.last_matched = self.frame_match = g
        if pred.kind in (ScreenKind.STAGE_CLEAR, ScreenKind.TOP_OUT):
            # The predicted end, confirmed by a picture of its board (see _same_picture).
            name = "stage_clear" if pred.kind == ScreenKind.STAGE_CLEAR else "top_out"
            return events + [self._end(name, g)]
        if spawns > lv.reported_spawn and pred.falling is not None:
            lv.reported_spawn = spawns
            if spawns not in lv.next_by_spawn and obs.next_colors is not None:
                self._learn_next(spawns, obs.next_colors)
            events.append(
                Event(
                    "spawn",
                    g,
                    {
                        "pill": spawns,
                        "colors": list(pred.falling.colors),
                        "next": None if obs.next_colors is None else list(obs.next_colors),
                    },
                )
            )
        return events

    def _soft_beside(self, frames: range, obs: Observation) -> bool:
        """True when a frame up to 2 before or 1 after ``frames`` differs from ``obs`` in
        board cells or the next pill only (not in nothing: that is a timing slip, see
        _diverged). A repeated capture (the card delivers its previous picture again) or a late
        one shows the falling pill of a frame before its range; if the reader also misread a
        cell on it, the pill's difference is the mapping's and the cell's is soft. Seen in
        the real game's loop (MJPEG profile, level 19 HI): a virus above a falling half of its
        colour read as empty on 3 captures, one of them a repeat; counted as a hard mismatch,
        the run diverged after 2 and its re-sync wrote the misread into the shadow (5 more
        desyncs in that level)."""
        beside = [*range(frames.start - 2, frames.start), frames.stop]
        for _g, pred, _spawns, known in self._candidates(beside):
            diff = mismatches(pred, obs, self._track_match, known)
            if diff and set(diff) <= _SOFT:
                return True
        return False

    def _learn_next(self, spawn: int, colors: tuple[int, int]) -> None:
        """The next pill's colours read after spawn ``spawn``: written into every state of that
        spawn (the reserve is not known to the tracker; generateNextPill $8E9D copied it
        there), and into those of later spawns' making from now on."""
        lv = self.lv
        assert lv is not None
        lv.next_by_spawn[spawn] = colors
        for e, game in lv.history.items():
            if lv.spawns.get(e) == spawn:
                game.next_colors[:] = colors

    @property
    def wants_virus_frame(self) -> bool:
        """Whether the next Observation's ``virus_frame`` is used: while no level is tracked
        (the alignment compares it), or always with ``track_virus_frame``. A reader may skip
        computing it otherwise."""
        return self.cfg.track_virus_frame or self.state not in (
            LevelState.TRACKING,
            LevelState.BLIND,
        )

    @property
    def decision_due(self) -> int | None:
        """The pill (spawn count) that is seen and not yet planned, or None."""
        lv = self.lv
        if lv is None or self.state != LevelState.TRACKING:
            return None
        if lv.reported_spawn > lv.decided_spawn:
            return lv.reported_spawn
        return None

    def decided(self, pill: int) -> None:
        if self.lv is not None:
            self.lv.decided_spawn = max(self.lv.decided_spawn, pill)
        self.replan = False

    # ---- divergence ---------------------------------------------------------------------------

    def _diverged(
        self, frames: range, obs: Observation, what: list[str], pred: Observation | None = None
    ) -> list[Event]:
        lv = self.lv
        assert lv is not None and lv.base is not None
        # A capture mapped to the wrong frame (latency drift, a late or repeated capture) is a
        # timing slip, not a different game: look a frame or two further either side.
        wide = range(frames.start - 2, frames.stop + 1)
        for g, pred, _s, known in reversed(self._candidates(wide)):
            if g not in frames and not mismatches(pred, obs, self._track_match, known):
                lv.mismatch_run = 0
                lv.run_obs = []
                lv.slip_run += 1
                self.timing_slips += 1
                shift = g - (frames.stop - 1) if g >= frames.stop else g - frames.start
                return [Event("timing_slip", g, {"shift_frames": shift, "run": lv.slip_run})]
        lv.slip_run = 0
        self.desyncs += 1
        g = frames.stop - 1
        detail: dict[str, Any] = {"what": what, "seen": obs.to_json()}
        if pred is not None and "board" in what:
            detail["cells"] = board_differences(pred, obs, self._track_match)
        events = [Event("desync", g, detail)]
        fixed = self._resync(lv.run_obs)
        lv.mismatch_run = 0
        lv.run_obs = []
        if fixed is not None:
            self.resyncs += 1
            self.replan = True
            at, how = fixed
            events.append(Event("resync", at, {"how": how}))
        else:
            self.state = LevelState.BLIND
            self.replan = False
            events.append(Event("blind", g, {"until": "the next spawn is seen"}))
        return events

    def _resync(self, run: list[tuple[range, Observation]]) -> tuple[int, str] | None:
        """Re-sync from the disagreeing captures: the state before the picture of the first
        one takes the observed board, pill pose and colours (and, if needed, a guess at the
        hidden pill microstate: speedCounter, held buttons, DAS counter); accepted when the
        prediction from it, with the latched masks, agrees with every capture of the run.
        Returns (frame, how) or None."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        for frames, obs in run:
            if obs.kind != ScreenKind.LEVEL:
                continue
            for g in reversed(frames):
                e = g - lv.base
                got = self.state_at(e - 1)
                if got is None:
                    continue
                before, spawns = got
                for variant in _MICROSTATE_GUESSES:
                    game = before.clone()
                    found = _write_board(
                        game, obs, self.cfg.match.min_confidence, lv.viruses_missing
                    )
                    if obs.falling is not None and falling(game):
                        _write_pill(game, obs.falling)
                        for name, value in variant:
                            getattr(game, name)[()] = value
                    elif variant:
                        continue
                    if obs.next_colors is not None:
                        game.next_colors[:] = obs.next_colors
                    if self._explains(e - 1, game, run):
                        if obs.next_colors is not None:
                            lv.next_by_spawn[spawns] = obs.next_colors
                        lv.viruses_missing -= found
                        self._rebase(e - 1, game, spawns)
                        guess = ", ".join(f"{n}={v}" for n, v in variant) or "none"
                        return g, f"board and pill from the capture; microstate guess: {guess}"
        return None

    def _explains(self, e0: int, game: engine.Game, run: list[tuple[range, Observation]]) -> bool:
        lv = self.lv
        assert lv is not None and lv.base is not None
        last = max(fr.stop - 1 for fr, _ in run) - lv.base
        preds: dict[int, Observation] = {}
        g = game.clone()
        for e in range(e0, last + 1):
            if e > e0:
                g.step(self.mask_of(lv.base + e - 1))
            preds[e] = predicted_observation(g)
        for frames, obs in run:
            cands = [f - lv.base for f in frames if f - lv.base > e0]
            if not cands:
                continue
            if all(mismatches(preds[e], obs, self._track_match) for e in cands):
                return False
        return True

    def _rebase(self, e: int, game: engine.Game, spawns: int) -> None:
        """Replace the history from state e on: ``game`` is state e; replay latched masks."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        for k in [k for k in lv.history if k >= e]:
            del lv.history[k]
            lv.spawns.pop(k, None)
        lv.history[e] = game
        lv.spawns[e] = spawns
        lv.confirmed = e
        self.advance()

    def _blind(self, frames: range, obs: Observation) -> list[Event]:
        """Waiting for a spawn to re-anchor: a falling pill at the spawn pose on a LEVEL screen."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        f = obs.falling
        if obs.kind != ScreenKind.LEVEL or f is None or (f.x, f.y, f.rotation) != (3, 15, 0):
            return []
        g = frames.stop - 1
        e = g - lv.base
        template = self._spawn_template(e)
        if template is None:
            return []
        game, spawns = template
        lv.viruses_missing -= _write_board(
            game, obs, self.cfg.match.min_confidence, lv.viruses_missing
        )
        game.pill_colors[:] = f.colors
        if obs.next_colors is not None:
            game.next_colors[:] = obs.next_colors
        n = obs.virus_count
        game.virus_left_bcd[()] = (n // 10) * 16 + n % 10
        # The sprite shows the pose of the state before; re-anchor that state.
        if obs.next_colors is not None:
            lv.next_by_spawn[spawns] = obs.next_colors
        self._rebase(e - 1, game, spawns)
        self.state = LevelState.TRACKING
        lv.reported_spawn = max(lv.reported_spawn, spawns)
        lv.decided_spawn = lv.reported_spawn - 1
        self.resyncs += 1
        return [
            Event("resync", g, {"how": "re-anchored at a spawn", "pill": spawns}),
            Event("spawn", g, {"pill": spawns, "colors": list(f.colors), "reanchored": True}),
        ]

    def _spawn_template(self, e: int) -> tuple[engine.Game, int] | None:
        """A state with a pill just spawned whose frameCounter fits state e - 1: the shadow
        stepped without buttons from its newest state until a pill falls, then moved to e - 1's
        frame parity and counter."""
        lv = self.lv
        assert lv is not None
        got = self.state_at(min(e - 1, lv.confirmed))
        if got is None:
            return None
        game, spawns = got
        game = game.clone()
        for _ in range(400):
            if falling(game):
                break
            was = falling(game)
            game.step(0)
            spawns += int(falling(game) and not was)
        if not falling(game):
            return None
        assert lv.fc0 is not None
        game.frame_counter[()] = (lv.fc0 + e - 1) & 0xFF
        game.pill_x[()] = SPAWN_X
        game.pill_y[()] = SPAWN_Y
        game.pill_rotation[()] = 0
        game.speed_counter[()] = 0
        return game, spawns

    # ---- events seen on screen --------------------------------------------------------------

    def _seen_events(self, prev: Observation, obs: Observation, frames: range) -> list[Event]:
        out = []
        g = self.last_matched if self.last_matched in frames else frames.stop - 1
        if prev.falling is not None and obs.falling is None and obs.kind == ScreenKind.LEVEL:
            p = prev.falling
            out.append(Event("lock", g, {"pose": [p.x, p.y, p.rotation]}))
        clearing = int(((obs.field & 0xF0) == 0xB0).sum())
        before = int(((prev.field & 0xF0) == 0xB0).sum())
        if clearing > before:
            out.append(Event("clear", g, {"cells": clearing}))
        return out


# ---- helpers -----------------------------------------------------------------------------------

# Guesses at the falling pill's hidden microstate after a divergence (what the picture cannot
# show): speedCounter $92, the held buttons $F7 (a missed or extra press), the DAS counter $93.
_MICROSTATE_GUESSES: list[tuple[tuple[str, int], ...]] = [
    (),
    (("btns_held", 0),),
    (("speed_counter", 0),),
    (("btns_held", 0), ("hor_velocity", 0)),
    (("hor_velocity", 0),),
    (("hor_velocity", 16),),
    (("btns_held", 0), ("speed_counter", 0)),
    (("btns_held", 0), ("speed_counter", 0), ("hor_velocity", 0)),
]


def intro_tables(
    states: list[engine.Game], frames: int
) -> tuple[dict[int, list[Observation]], dict[int, int], dict[int, int]]:
    """What a level shows from State 0 on without input, for each frameCounter phase c
    (``states[c]``, State 0 with frameCounter mod 16 = c): per c the predicted observation of
    ``frames`` frames, the first frame whose preview is a pill of the reserve (the first
    throw, unknown here) and the first frame after the first spawn without a falling pill
    (it locked). The states are stepped (the caller's copies)."""
    tables: dict[int, list[Observation]] = {}
    throws: dict[int, int] = {}
    locks: dict[int, int] = {}
    # Equal predictions are one object (most of a frame's 16 phases show the same picture),
    # so _score compares a capture with each once.
    seen: dict[tuple[Any, ...], Observation] = {}
    for c, g in enumerate(states):
        table = []
        for _ in range(frames):
            o = predicted_observation(g)
            table.append(seen.setdefault(_signature(o), o))
            g.step(0)
        tables[c] = table
        throws[c] = next(
            (e for e in range(1, len(table)) if table[e].next_colors != table[0].next_colors),
            len(table),
        )
        spawn = next((e for e in range(len(table)) if table[e].falling is not None), None)
        locks[c] = (
            len(table)
            if spawn is None
            else next((e for e in range(spawn, len(table)) if table[e].falling is None), len(table))
        )
    return tables, throws, locks


def _signature(o: Observation) -> tuple[Any, ...]:
    """What a predicted observation's comparison with a capture depends on."""
    return (
        int(o.kind),
        o.field.tobytes(),
        np.asarray(o.confidence).tobytes(),
        o.falling,
        o.next,
        o.intro,
        o.virus_frame,
    )


def _usable_seed(level: int) -> int:
    for seed in (0x8988, 0x1234, 0x4321):
        try:
            engine.generate_level(level, seed)
            return seed
        except ValueError:
            continue
    raise ValueError(f"no usable RNG seed for level {level}")


# Frames from the Start to the end of the longest intro: 6 frames of load, at most 145 addVirus
# calls (levels 20-24, over every seed: docs/LEVEL_GEN.md), one overrun frame, and a margin.
MAX_INTRO_FRAMES = 6 + 145 + 1 + 8


def _pill_cells(cells: npt.NDArray[np.uint8]) -> bool:
    """Whether ``cells`` (uint8 [16, 8] codes) hold a pill half or a single ($4x-$8x)."""
    kinds = np.asarray(cells) >> 4
    return bool(((kinds >= 0x4) & (kinds <= 0x8)).any())


def _as_virus(cells: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A level's starting board holds viruses only: a clearing code ($Bc) read there is the
    reader's take on a virus of colour c (see mismatches)."""
    cells = np.asarray(cells)
    return np.where((cells & 0xF0) == 0xB0, (cells & 0x0F) | 0xD0, cells).astype(np.uint8)


def _same_board(obs: Observation, board: npt.NDArray[np.uint8]) -> bool:
    return bool(np.array_equal(_as_virus(obs.field), board))


def _impossible_reads(
    expected: npt.NDArray[np.uint8], seen: npt.NDArray[np.uint8]
) -> npt.NDArray[np.bool_]:
    """Cells (same shape as the inputs, bool) whose reading no game in play can show, whatever
    happened since the shadow's state ``expected``: a virus ($Dc) seen where the shadow has no
    virus of colour c (viruses are placed only before play, by levelIntro [$9CAB]; in play a
    cell loses its virus and never gains one or changes its colour), and a virus seen as its
    colour's clearing tile ($Bc: no clear is made of viruses alone, a match needs a pill
    half). A reading there is the reader's error, not the shadow's."""
    expected, seen = np.asarray(expected), np.asarray(seen)
    virus_seen = (seen & 0xF0) == 0xD0
    return (virus_seen & (seen != expected)) | (
        ((expected & 0xF0) == 0xD0) & (seen == ((expected & 0x0F) | 0xB0))
    )


def _write_board(
    game: engine.Game, obs: Observation, min_confidence: float, viruses_missing: int = 0
) -> int:
    """Confident observed cells into the field and the shown nametable (canonical $Bx is shown
    as tile $Fx); readings no game can show (_impossible_reads: a virus where the shadow has
    none, a virus seen as its clearing tile) and pill halves read without their partner
    (perception.observation.unpaired_halves) keep the shadow's cell.

    ``viruses_missing``: viruses the shadow's level board lacks (it was voted from pictures
    that missed them): up to that many viruses read where the shadow has an empty cell are
    written in (the most confident first) and counted in virus_left_bcd. Returns how many.
    (The real game's loop, MJPEG profile, level 20 HI: a board voted with 82 of the 84
    viruses; every re-sync kept them out, 141 desyncs and a top-out.)"""
    conf = np.asarray(obs.confidence).reshape(-1)
    sure = conf >= min_confidence
    seen = canonical_cells(obs.field).reshape(-1)
    field = np.asarray(game.field)
    found = 0
    if viruses_missing > 0:
        new = sure & ((seen & 0xF0) == 0xD0) & (field.reshape(-1) == 0xFF)
        idx = np.flatnonzero(new)
        idx = idx[np.argsort(-conf[idx], kind="stable")][:viruses_missing]
        found = len(idx)
        if found:
            field[idx] = seen[idx]
            np.asarray(game.shown)[idx] = seen[idx]
            b = int(game.virus_left_bcd)
            n = (b >> 4) * 10 + (b & 0x0F) + found
            game.virus_left_bcd[()] = (n // 10) * 16 + n % 10
    sure &= ~_impossible_reads(field.reshape(-1), seen) & ~unpaired_halves(seen, clearing=False)
    shown = np.asarray(game.shown)
    field[sure] = seen[sure]
    tiles = seen.copy()
    clearing = (tiles & 0xF0) == 0xB0
    tiles[clearing] = tiles[clearing] + 0x40
    shown[sure] = tiles[sure]
    return found


def _write_pill(game: engine.Game, pill: FallingPill) -> None:
    game.pill_x[()] = pill.x
    game.pill_y[()] = pill.y
    game.pill_rotation[()] = pill.rotation
    game.pill_colors[:] = pill.colors
