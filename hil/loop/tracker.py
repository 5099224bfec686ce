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

The tracker holds two parts, each working on the level it is given (TrackedLevel):
:class:`hil.loop.alignment.Alignment` (the level's base frame and phase, from its intro) and
:class:`hil.loop.resync.Resync` (a divergence: timing slip, re-sync or blind; it asks the shadow
state only what hil.loop.resync.Shadow names). Both return the events they raise; the tracker
keeps the level's state (LevelState), the counters and the shadow state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

import engine
from engine import ScreenKind
from engine.attack import attack_cells, receive_attack, released_attack
from engine.constants import Phase
from engine.constants import level_viruses as virus_target
from engine.placement import pill_falling
from hil.loop.alignment import Alignment
from hil.loop.clock import FrameClock
from hil.loop.matching import (
    SEND_PILL_FINISHED,
    SOFT_MISMATCHES,
    mismatches,
    pill_cells,
    predicted_observation,
)
from hil.loop.resync import Resync
from hil.loop.schedule import Schedule
from hil.loop.tracked import Event, LevelState, TrackedLevel, TrackerConfig
from hil.loop.worker import Inline, Worker
from perception.observation import (
    Observation,
)

# Two players: how far back from a disagreeing capture a release of an attack is looked for
# (frames; the capture chain's latency and the mismatch run are a few).
ATTACK_LOOKBACK = 40
# Two players: a capture this many frames later than the clock says may look like an attack
# whose halves are not drawn yet (Tracker._attack).
LATE_FRAMES = 3
# Two players: this bottle frozen as the opponent's clear leaves it (Tracker._frozen_by_opponent)
# ends the round once it has been seen so in this many captures in a row spanning this many
# frames (the real game holds it 64 frames, noVirusLeft_delay); and how far before the first of
# them the round may have ended (frames).
FROZEN_CAPTURES = 6
FROZEN_FRAMES = 16
VERSUS_CLEAR_CAPTURES = 3  # captures in a row read as a two-player stage clear that end a round
FROZEN_LOOKBACK = 6


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
        self.lv: TrackedLevel | None = None
        self.desyncs = 0
        self.resyncs = 0
        self.attacks = 0  # two players: attacks found on the tracked bottle (_attack)
        # Two players: the next round is one of the same match (hil.loop.levels sets it after
        # each round): its state 0 takes the stale bytes of this round's end (TrackedLevel.stale).
        self.match_goes_on = False
        self.timing_slips = 0
        self.replan = False
        self.status_gaps = 0
        self.last_matched: int | None = None  # newest console frame matched by a capture
        self.frame_match: int | None = None  # the frame the last capture matched, or None
        self.levels_started = 0
        self.alignment = Alignment(config, self.worker)
        self.resync = Resync(config, self._track_match, self)

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
            self.lv.points = [g - shift for g in self.lv.points]
        if self.last_matched is not None:
            self.last_matched -= shift

    # ---- levels --------------------------------------------------------------------------------

    def begin_level(
        self,
        level: int,
        speed: int,
        start_frame: int,
        last_start: int | None = None,
        *,
        wait_for_start: bool = False,
    ) -> None:
        """A Start press that begins ``level`` at ``speed`` latches in frame ``start_frame``
        or later, by ``last_start`` at the latest (default ``start_frame``): captures of frames
        before ``start_frame`` are ignored, and a board is taken from pictures short of the
        level's viruses only MAX_INTRO_FRAMES after ``last_start`` (a Start held before the
        game reads it must not let a board be voted while the intro still draws it). The
        level's start is then taken from the pictures, as the game draws it (docs/LEVEL_FLOW.md):
        levelIntro [$9CAB] adds one virus a frame; the first picture that shows all
        ``(min(level, 20) + 1) * 4`` of them comes one frame before the engine's State 0, so a
        partly drawn bottle is never taken for the board, whatever the intro's length (addVirus
        retries, initData_level overrunning its frame) and on any console.

        ``wait_for_start``: the Start's frame is not known (a person presses it, at any time
        after ``start_frame``): captures are ignored while they show a pill in the bottle (the
        last round's end, shown until the Start) or no virus (another screen, the screen
        loading, the fields cleared before the next round's intro, fullStatusUpdate [$96FD]);
        the first with viruses and no pill (the intro: levelIntro adds one a frame) goes on to
        the alignment (a ``start_seen`` event), ``last_start`` then the latest of those
        captures' frames less the viruses drawn. Without it, the last round's end, still shown
        while the person waits, would be taken for the intro's board once
        ``MAX_INTRO_FRAMES`` passed. (A round that ended with viruses and no pill in this
        bottle would end the wait at once.)"""
        prev = self.lv
        self.lv = TrackedLevel(level, speed, start_frame)
        self.lv.last_start = start_frame if last_start is None else max(start_frame, last_start)
        self.lv.wait_start = wait_for_start
        if self.cfg.opponent is not None:
            if self.match_goes_on and prev is not None and prev.base is not None and prev.history:
                end = prev.confirmed
                if prev.end_frame is not None:
                    end = min(end, max(0, prev.end_frame - prev.base))
                self.lv.stale = prev.history.get(end, prev.history[prev.confirmed])
            self.lv.opponent = self.cfg.opponent
            self.lv.player = self.cfg.player
            self.lv.intro_lead = max(0, virus_target(self.cfg.opponent[0]) - virus_target(level))
        self.state = LevelState.ALIGNING
        self.levels_started += 1
        self.log(Event("level_expected", start_frame, {"level": level, "speed": speed}))

    @property
    def base(self) -> int | None:
        return None if self.lv is None else self.lv.base

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
            started = pill_falling(game) and not pill_falling(lv.history[lv.confirmed - 1])
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
            was = pill_falling(game)
            game.step(self.mask_of(lv.base + k))
            if pill_falling(game) and not was:
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

    def rebase(self, e: int, game: engine.Game, spawns: int) -> None:
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
        if lv is not None and lv.wait_start:
            level_shown = obs.kind != ScreenKind.OTHER
            if level_shown and pill_cells(obs.field):
                return events  # the last round's end, shown until the person's Start
            # no pill: another screen, the screen loading, the fields cleared, or the intro
            # adding its viruses one a frame (levelIntro [$9CAB]) since about Start + load
            drawn = obs.virus_count if level_shown else 0
            lv.last_start = max(lv.last_start, frames.stop - 1 - drawn)
            if not drawn:
                return events
            lv.wait_start = False
            self.log(Event("start_seen", lv.last_start, {"viruses": drawn}))
        if lv is not None:
            prev = lv.last_seen
            playing = self.state in (LevelState.TRACKING, LevelState.BLIND)
            lv.clear_run = lv.clear_run + 1 if obs.kind == ScreenKind.STAGE_CLEAR else 0
            if obs.kind == ScreenKind.STAGE_CLEAR and playing and self.cfg.opponent is not None:
                # Two players: the stage clear is read off the bottles' virus counts
                # (hil.loop.observation.versus_kind), so one misread of the opponent's last
                # virus would end the round: VERSUS_CLEAR_CAPTURES in a row end it, at the
                # first (one from the oracle, which knows); the captures before are not
                # compared.
                if lv.clear_run == 1:
                    lv.clear_first = frames.stop - 1
                if lv.clear_run == (1 if obs.source == "oracle" else VERSUS_CLEAR_CAPTURES):
                    events.append(self._end("stage_clear", lv.clear_first))
                return events
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
                    point = self.clock.shown_frame(arrival_ns, self.cfg.latency_ns)
                    events += self._aligning(lv, frames, obs, point)
                if self.state == LevelState.TRACKING:
                    events += self._tracking(frames, obs)
                elif self.state == LevelState.BLIND:
                    events += self._blind(lv, frames, obs)
                if prev is not None and self.state != LevelState.ALIGNING:
                    events += self._seen_events(prev, obs, frames)
            lv.last_seen = obs
        for ev in events:
            self.log(ev)
        return events

    def _end(self, name: str, frame: int) -> Event:
        self.state = LevelState.ENDED
        self.replan = False
        if self.lv is not None:
            self.lv.result = name
            self.lv.end_frame = frame
        return Event(name, frame, {"level": self.lv.level if self.lv else None})

    def _aligning(
        self, lv: TrackedLevel, frames: range, obs: Observation, point: int
    ) -> list[Event]:
        """A capture while the level is aligned; tracking starts once the alignment chose."""
        started = self.alignment.on_capture(lv, frames, obs, point)
        if started is None:
            return []
        self.state = LevelState.TRACKING
        self.advance()
        return [started]

    def _diverged(
        self, frames: range, obs: Observation, what: list[str], pred: Observation | None
    ) -> list[Event]:
        """A divergence (hil.loop.resync): its events counted, and a re-plan asked after a
        re-sync, or the level tracked blind."""
        assert self.lv is not None
        events = self.resync.diverged(self.lv, frames, obs, what, pred)
        names = [ev.name for ev in events]
        self.timing_slips += names.count("timing_slip")
        self.desyncs += names.count("desync")
        self.resyncs += names.count("resync")
        if "resync" in names:
            self.replan = True
        elif "blind" in names:
            self.state = LevelState.BLIND
            self.replan = False
        return events

    def _blind(self, lv: TrackedLevel, frames: range, obs: Observation) -> list[Event]:
        """A capture while blind: tracking again once a spawn re-anchors the shadow."""
        events = self.resync.reanchor(lv, frames, obs)
        if events:
            self.state = LevelState.TRACKING
            self.resyncs += 1
        return events

    def candidates(self, frames: Iterable[int]) -> list[tuple[int, Observation, int, bool]]:
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
            known = spawns in lv.next_by_spawn and int(game.next_action) != SEND_PILL_FINISHED
            out.append((g, predicted_observation(game), spawns, known))
        return out

    def _tracking(self, frames: range, obs: Observation, attack_tried: bool = False) -> list[Event]:
        lv = self.lv
        assert lv is not None and lv.base is not None
        events: list[Event] = []
        match = None
        worst: list[str] = []
        worst_pred: Observation | None = None
        for g, pred, spawns, known in reversed(self.candidates(frames)):
            diff = mismatches(pred, obs, self._track_match, known)
            if not diff:
                match = (g, pred, spawns)
                break
            if not worst or len(diff) < len(worst):
                worst, worst_pred = diff, pred
        hidden = False  # an attack not drawn yet, or a late picture, would explain it
        if match is None and self.cfg.opponent is not None and not attack_tried:
            attack, hidden = self._attack(frames, obs)
            if attack is not None:
                # (once: an attack that explains the capture only up to the next pill's
                # colours leaves a soft mismatch, counted as any other)
                events.append(attack)
                return events + self._tracking(frames, obs, attack_tried=True)
        if match is None:
            lv.mismatch_run += 1
            lv.run_obs.append((frames, obs))
            soft = hidden or set(worst) <= SOFT_MISMATCHES or self.resync.soft_beside(frames, obs)
            lv.soft_only = (lv.soft_only if lv.mismatch_run > 1 else True) and soft
            needed = self.cfg.soft_mismatch_frames if lv.soft_only else self.cfg.mismatch_frames
            if lv.mismatch_run >= needed:
                frozen = self._frozen_by_opponent(lv)
                if frozen is not None:
                    span = frames.stop - 1 - lv.run_obs[0][0].start
                    if lv.mismatch_run < FROZEN_CAPTURES or span < FROZEN_FRAMES:
                        return events
                    end = self._end("stage_clear", frozen)
                    end.data["how"] = "frozen"  # (else the screen or the shadow said so)
                    return events + [end]
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

    def _frozen_by_opponent(self, lv: TrackedLevel) -> int | None:
        """Two players: the frame the round ended by the opponent's clear, when every capture of
        the mismatch run shows this bottle frozen there, else None (one player: None).

        checkVirusLeft [$B269] stops both players the frame the opponent's last virus goes;
        this bottle then shows its field as it was, without the falling pill. The opponent's
        bottle says so with no virus left (hil.loop.observation.versus_kind), but on the real
        game its last virus's clear tile, frozen mid-animation, was read as a virus for the 64
        frames before the STAGE CLEAR box. So: no capture of the run shows a falling pill, and
        each shows the field the shadow had at one frame within FROZEN_LOOKBACK before the
        run's first capture (that frame is returned)."""
        if self.cfg.opponent is None or not lv.run_obs or lv.base is None:
            return None
        if any(o.falling is not None or o.kind != ScreenKind.LEVEL for _, o in lv.run_obs):
            return None
        first = lv.run_obs[0][0].start
        for g in range(first, first - FROZEN_LOOKBACK - 1, -1):
            got = self.state_at(g - lv.base)
            if got is None:
                continue
            board = predicted_observation(got[0]).field
            if all(np.array_equal(o.field, board) for _, o in lv.run_obs):
                return g
        return None

    def _attack(self, frames: range, obs: Observation) -> tuple[Event | None, bool]:
        """Two players: a capture the shadow does not explain may show an attack the opponent
        released on the tracked bottle (engine.attack): at the newest step within
        ATTACK_LOOKBACK frames where the shadow ran action_checkAttack, each attack (2, 3 or 4
        halves, every colour) is applied and predicted to the capture's frames; the first that
        explains it replaces the history from there (an ``attack`` Event). Returns (that Event
        or None, pending).

        The halves are drawn only when render_fieldRow [$8331] reaches row 0, up to 16 frames
        after the release, while the bottle without the attack shows the next pill 4 frames
        after it (action_sendPill [$9FA1]: no throw in two players). An attack that explains
        the capture only with its halves not yet drawn is taken unless the capture is as well
        a picture of the LATE_FRAMES frames before its own, from a capture chain a little
        later than the clock says (on the real game in real time, attacks taken on such
        pictures made a desync at the next pill: docs/notes/2026-11-29-versus-realtime.md).
        Then ``pending`` is True (no attack taken yet; the caller counts a soft mismatch).

        A release found before is tried again with every colour when a later capture
        disagrees (a half drawn later shows its colour), and withdrawn (an
        ``attack_withdrawn`` Event: the history without it from there) when only the state
        without it explains the capture."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        newest = frames.stop - 1 - lv.base
        found = None
        for e in range(newest, max(0, newest - ATTACK_LOOKBACK), -1):
            if e in lv.releases:  # an attack found here before: its colours tried again
                found = (e, *lv.releases[e])
                break
            before, after = self.state_at(e - 1), self.state_at(e)
            if before is None or after is None:
                break
            if released_attack(int(before[0].next_action), after[0]):
                found = (e, after[0].clone(), after[1])
                break
        if found is None:
            return None, False
        e, state, spawns = found
        retry = e in lv.releases
        plain = predicted_observation(state).field
        for size in (2, 3, 4):
            cells = attack_cells(size, int(state.frame_counter))
            for colors in itertools.product(range(3), repeat=len(cells)):
                trial = state.clone()
                receive_attack(trial, size, colors)
                seen = self._explains(trial, e, frames, obs)
                if seen is None:
                    continue
                if not retry and not _shows_halves(seen.field, plain) and self._late(frames, obs):
                    return None, True  # (no other size or colour is drawn either)
                self.attacks += int(not retry)  # releases, not retries
                lv.releases[e] = (state, spawns)
                self.rebase(e, trial, spawns)
                return (
                    Event(
                        "attack",
                        lv.base + e,
                        {"halves": size, "colors": list(colors), "columns": cells},
                    ),
                    False,
                )
        if retry and self._explains(state, e, frames, obs) is not None:
            del lv.releases[e]
            self.attacks -= 1
            self.rebase(e, state.clone(), spawns)
            return Event("attack_withdrawn", lv.base + e, {}), False
        return None, False

    def _late(self, frames: range, obs: Observation) -> bool:
        """Whether the shadow shows ``obs`` in one of the LATE_FRAMES frames before
        ``frames``."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        e = frames.start - LATE_FRAMES - lv.base
        got = self.state_at(e)
        if got is None:
            return False
        return (
            self._explains(got[0], e, range(frames.start - LATE_FRAMES, frames.start), obs)
            is not None
        )

    def _explains(
        self, state: engine.Game, e: int, frames: range, obs: Observation
    ) -> Observation | None:
        """The prediction of ``state`` (state e of the level), stepped with the latched and
        scheduled masks, that shows ``obs`` in one of ``frames``, else None."""
        lv = self.lv
        assert lv is not None and lv.base is not None
        game = state.clone()
        k = e
        for g in frames:
            while lv.base + k < g:
                game.step(self.mask_of(lv.base + k))
                k += 1
            if lv.base + k == g:
                pred = predicted_observation(game)
                if not mismatches(pred, obs, self._track_match, False):
                    return pred
        return None

    def _learn_next(self, spawn: int, colors: tuple[int, int]) -> None:
        """The next pill's colours read after spawn ``spawn``: written into every state of that
        spawn (generateNextPill $8E9D copied them there from the reserve, which the states
        hold only when the level's seed is known), and into those of later spawns' making
        from now on. While several seeds make the level's board, those whose reserve shows
        other colours there are dropped (:meth:`_narrow_seeds`)."""
        lv = self.lv
        assert lv is not None
        lv.next_by_spawn[spawn] = colors
        for e, game in lv.history.items():
            if lv.spawns.get(e) == spawn:
                game.next_colors[:] = colors
        if len(lv.seeds) > 1:
            self._narrow_seeds(spawn, colors)

    def _narrow_seeds(self, spawn: int, colors: tuple[int, int]) -> None:
        """Keeps the level's seeds whose reserve has ``colors`` as the next pill after spawn
        ``spawn`` (reserve[spawn + 1]: the first pill thrown is reserve[1], docs/LEVEL_GEN.md)
        and writes the first one's reserve into the states when it changed. A reading no seed
        agrees with (a misread preview) changes nothing; one seed left is kept whatever is
        read. Logs a ``seeds`` event when the count changes."""
        lv = self.lv
        assert lv is not None
        k = (spawn + 1) % len(next(iter(lv.seeds.values())))
        keep = {s: r for s, r in lv.seeds.items() if engine.pill_colors(int(r[k])) == tuple(colors)}
        if not keep or len(keep) == len(lv.seeds):
            return
        first = next(iter(keep))
        if first != next(iter(lv.seeds)):
            for game in lv.history.values():
                game.reserve[:] = keep[first]
        lv.seeds = keep
        self.log(Event("seeds", None, {"pill": spawn, "seeds": len(keep)}))

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


def _shows_halves(field: np.ndarray, plain: np.ndarray) -> bool:
    """Whether a predicted bottle ``field`` (uint8[16, 8] or [128], cell codes) shows a single
    half ($8x) that the bottle without the attack, ``plain``, does not have there."""
    f = np.asarray(field).reshape(-1)
    return bool(np.any((f != np.asarray(plain).reshape(-1)) & ((f & 0xF0) == 0x80)))
