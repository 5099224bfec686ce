"""The tracker's alignment: the level's base frame (the console frame of its state 0) and
frameCounter phase found from the captures of its intro and first pill, against tables of what
every phase would show (the board voted over several pictures first; docs/RUN.md, "The
tracker").

:class:`Alignment` works on the level it is given (hil.loop.tracked.TrackedLevel) and nothing
else of the tracker's: ``on_capture(lv, frames, obs)`` takes each capture of a level still
being aligned and returns the ``level_start`` Event once a hypothesis is chosen, the level then
holding its base frame, frameCounter phase and state 0 (the tracker starts tracking from there).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import engine
from engine import ScreenKind
from engine.constants import level_viruses as virus_target
from hil.loop.matching import (
    as_virus,
    mismatches,
    pill_cells,
    predicted_observation,
    same_board,
)
from hil.loop.tracked import Event, TrackedLevel, TrackerConfig
from hil.loop.worker import Worker
from perception.observation import (
    COLS,
    ROWS,
    Observation,
)

# Frames from the Start to the end of the longest intro: 6 frames of load, at most 145 addVirus
# calls (levels 20-24, over every seed: docs/LEVEL_GEN.md), one overrun frame, and a margin.
MAX_INTRO_FRAMES = 6 + 145 + 1 + 8
# Base-frame hypotheses below the prior at most (frames): the loop may read no picture for a
# stall of ~130 ms (8 frames) on a loaded 2-core machine just as the board becomes whole.
MAX_WINDOW_BACK = 24


def intro_tables(
    states: list[engine.Game], frames: int
) -> tuple[dict[int, list[Observation]], dict[int, int], dict[int, int]]:
    """What a level shows from State 0 on without input, for each frameCounter phase c
    (``states[c]``, State 0 with frameCounter mod 16 = c): per c the predicted observation of
    ``frames`` frames, the first frame whose preview is a pill of the reserve (the first
    throw, unknown here: generateNextPill has stepped pillsCounter) and the first frame after
    the first spawn without a falling pill (it locked). The states are stepped (the caller's
    copies)."""
    tables: dict[int, list[Observation]] = {}
    throws: dict[int, int] = {}
    locks: dict[int, int] = {}
    # Equal predictions are one object (most of a frame's 16 phases show the same picture),
    # so _score compares a capture with each once.
    seen: dict[tuple[Any, ...], Observation] = {}
    for c, g in enumerate(states):
        table = []
        counters = []  # pillsCounter: generateNextPill [$8E9D] steps it as it sets the preview
        for _ in range(frames):
            o = predicted_observation(g)
            table.append(seen.setdefault(_signature(o), o))
            counters.append(int(g.pills_counter))
            g.step(0)
        tables[c] = table
        # (not where the preview's colours change: the reserve's pill may have next0's colours)
        throws[c] = next(
            (e for e in range(1, len(table)) if counters[e] != counters[0]), len(table)
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


def level_seeds(
    level: int, board: np.ndarray, next0: tuple[int, int] | None
) -> dict[int, np.ndarray]:
    """The seeds whose level ``level`` is ``board`` (engine.seeds_for_field: the reserve is
    made from the same RNG state just before the viruses, generatePillsReserve [$82B0]), each
    with its pill reserve (ids uint8[128]), in ascending order; those whose reserve[1] (the
    preview shown during the intro, docs/LEVEL_GEN.md) has the colours ``next0`` first when
    any has (a preview misread keeps the others). Empty when no seed makes the board (a board
    misread, or a level that is not the game's own). About 90 ms at level 20."""
    seeds = engine.seeds_for_field(level, np.asarray(board, np.uint8).reshape(-1))
    reserves = {s: np.asarray(engine.generate_level(level, s)["pill_reserve"]) for s in seeds}
    if next0 is not None:
        agree = [s for s in seeds if engine.pill_colors(int(reserves[s][1])) == tuple(next0)]
        if agree:
            return {s: reserves[s] for s in agree}
    return reserves


def _usable_seed(level: int) -> int:
    for seed in (0x8988, 0x1234, 0x4321):
        try:
            engine.generate_level(level, seed)
            return seed
        except ValueError:
            continue
    raise ValueError(f"no usable RNG seed for level {level}")


class Alignment:
    """A level's base frame and frameCounter phase from its captures (see the module
    docstring). ``cfg``: the tracker's settings (board_frames, align_wait, align_window,
    intro_frames, lock_reserve, match); ``worker``: where the intro's tables are built and each
    capture scored (hil.loop.worker)."""

    def __init__(self, cfg: TrackerConfig, worker: Worker) -> None:
        self.cfg = cfg
        self.worker = worker

    def on_capture(
        self, lv: TrackedLevel, frames: range, obs: Observation, point: int | None = None
    ) -> Event | None:
        """One capture of level ``lv`` (not yet aligned) that shows console frames ``frames``
        (``point``: the most likely of them, FrameClock.shown_frame; None: the last): the
        board voted while the intro shows it whole, then the hypotheses scored on the worker.
        Returns the ``level_start`` Event when a finished job chose one (then ``lv`` holds
        base, fc0 and state 0: see :func:`_start`), else None."""
        lv.observations.append((frames, obs))
        lv.points.append(frames.stop - 1 if point is None else min(point, frames.stop - 1))
        if lv.board is None:
            target = virus_target(lv.level)
            # The whole board: every virus of the level in sight. After the longest intro the
            # board is surely complete, so a reader that misses a virus on every picture still
            # gets a board (its count is then what the pictures show).
            late = frames.start > lv.last_start + MAX_INTRO_FRAMES
            # The intro's board holds viruses only (a clearing tile there is a virus misread,
            # as_virus): a picture with a pill half or a single is another screen read as a
            # level. The stage clear's STAGE CLEAR box, which the board model never learnt,
            # read as a LEVEL with 24 "viruses" among halves on the real game (HDMI profile,
            # chained to level 1 HI: the board was voted from it, 176 misses, a desync per
            # pill); its pictures come before the Start when the Start is held early.
            full = (obs.virus_count >= target and not pill_cells(obs.field)) or (
                late and obs.virus_count > 0
            )
            if obs.kind == ScreenKind.LEVEL and full and obs.falling is None:
                if lv.votes is None:
                    lv.votes = np.zeros((ROWS, COLS, 256), np.float32)
                    lv.next0 = obs.next_colors
                    least = min(target, obs.virus_count)
                    first = _first_full(lv, least, frames)
                    lv.base_prior = first + 1 + lv.intro_lead
                    partial = _last_partial(lv, least, first)
                    if partial is not None:
                        # That capture showed a frame from ``partial`` on with the board not
                        # whole: whole from partial + 1 on, state 0 a frame later; less a frame
                        # of slack for the clock.
                        lv.base_low = partial + 1 + lv.intro_lead
                # The board is voted over board_frames pictures (the sum of confidence per cell
                # and code): a reader unsure of a virus on one animation frame is sure on the
                # other, and a board read wrong at the start stays wrong in the shadow.
                rows, cols = np.indices((ROWS, COLS))
                lv.votes[rows, cols, as_virus(obs.field)] += np.asarray(obs.confidence, np.float32)
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
            return self._aligned(lv)
        return None

    def _align_step(
        self, lv: TrackedLevel, frames: range, obs: Observation, n: int, force: bool, now: int
    ) -> tuple[int, int, bool] | None:
        """One capture of the alignment, on the worker (hil.loop.worker: a thread in real time,
        inline in lockstep; its jobs run in order): the first builds the intro's tables for
        every frameCounter phase (:func:`intro_tables`) and scores the ``n`` captures seen so
        far, each later one scores its own; then :meth:`_align_choice`. About 7 ms a capture
        and 330 ms for the first: no frame of the loop waits for them."""
        if lv.base is not None:
            return None  # aligned meanwhile
        if not lv.tables:
            if lv.opponent is None:  # one player: the level's pills from its board
                assert lv.board is not None
                lv.seeds = level_seeds(lv.level, lv.board, lv.next0)
            states = [_make_state0(lv, c) for c in range(16)]
            lv.tables, lv.table_throw, lv.table_lock = intro_tables(states, self.cfg.intro_frames)
            w = self.cfg.align_window
            assert lv.base_prior is not None
            both = _first_both_full(lv, lv.observations[:n])
            if both is not None:  # two players, both bottles read: the intro's end, exactly
                lv.base_prior = both + 1
            prior = lv.base_prior
            # The window reaches back to what the last partial board allows when the loop
            # missed the pictures of the board's completion (at most MAX_WINDOW_BACK frames).
            low = prior - w
            if lv.base_low is not None and both is None:
                low = max(min(low, lv.base_low), prior - MAX_WINDOW_BACK)
            lv.misses = {(b, c): 0 for b in range(low, prior + w + 1) for c in range(16)}
            for seen, o in lv.observations[:n]:
                self._score(lv, seen, o)
        else:
            self._score(lv, frames, obs)
        return self._align_choice(lv, n, force, now)

    def _score(self, lv: TrackedLevel, frames: range, obs: Observation) -> None:
        assert lv.board is not None
        whole: bool | None = None
        agree: dict[tuple[int, bool], bool] = {}  # (id of a prediction, next known) -> agrees
        # Two players: the intro ends when both bottles are whole (levelIntro [$9CAB] loops
        # while either player has a virus to add), and addVirus [$9D19] may place none in a
        # frame ("start again next frame"), so a bottle can take more frames than it has
        # viruses: the bottle with fewer is whole about intro_lead frames before the end, a
        # frame or two either way (the real game: 9 frames for 28 against 20 viruses). Where the
        # other bottle was read in the same picture, "whole" is both bottles whole, which
        # frame b - 1 shows exactly; a picture without it says nothing near the lead's frame.
        lead = lv.intro_lead
        both = lv.opponent is not None and obs.opponent_viruses is not None
        if both:
            lead = 0
        unsure = range(0) if both or not lead else range(-3 - lead, 2 - lead)
        for (b, c), miss in lv.misses.items():
            table = lv.tables[c]
            ok = False
            informative = False
            for g in frames:
                e = g - b
                if e < 0:
                    # The last virus is drawn by the NMI of the frame before State 0's picture:
                    # frame b - 1 shows the whole board, every earlier frame a partial one.
                    if e in unsure:
                        continue
                    informative = True
                    if whole is None:
                        whole = obs.kind == ScreenKind.LEVEL and same_board(obs, lv.board)
                        if both:
                            assert lv.opponent is not None and obs.opponent_viruses is not None
                            whole &= obs.opponent_viruses >= virus_target(lv.opponent[0])
                    ok |= whole if e >= -1 - lead else not whole
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
        self, lv: TrackedLevel, n: int, force: bool, now: int
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
        c = _first_of_run(c, {cc for (bb, cc), m in lv.misses.items() if bb == b and m == best})
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

    def _aligned(self, lv: TrackedLevel) -> Event | None:
        """Takes the alignment's finished jobs in order; the level starts at the first that
        chose a hypothesis (its ``level_start`` Event), else None."""
        while lv.align_jobs and lv.align_jobs[0].done():
            choice = lv.align_jobs.pop(0).result()
            if choice is not None and lv.base is None:
                lv.align_jobs.clear()
                return _start(lv, *choice)
        return None


def _start(lv: TrackedLevel, b: int, c: int, ambiguous: bool) -> Event:
    """Hypothesis (base frame ``b``, frameCounter mod 16 ``c``) chosen: ``lv`` gets its base,
    fc0, state 0 as its only confirmed state (spawn count 0, the preview read at the intro)
    and the viruses its board lacks; its intro's captures are dropped. Returns the
    ``level_start`` Event."""
    lv.base, lv.fc0 = b, c
    state = _make_state0(lv, c)
    lv.viruses_missing = max(0, virus_target(lv.level) - int(state.virus_count))
    lv.history = {0: state.clone()}
    lv.spawns = {0: 0}
    if lv.next0 is not None:
        lv.next_by_spawn[0] = lv.next0
    lv.confirmed = 0
    event = Event(
        "level_start",
        b,
        {
            "level": lv.level,
            "speed": lv.speed,
            "frame_counter_mod16": c,
            "viruses": int(state.virus_count),
            "ambiguous": ambiguous,
            "misses": lv.misses.get((b, c), 0),
            "seeds": len(lv.seeds),
        },
    )
    lv.observations.clear()
    lv.points.clear()
    return event


def _first_of_run(c: int, tied: set[int]) -> int:
    """Among frameCounter phases that explain the captures equally at one base frame, the
    first of their run (mod 16): a capture may show any frame of its range, the earlier ones
    too, so a phase later than the true one still finds a frame where its virus animation
    (the only thing frameCounter changes in a two-player intro: no throw) agrees; one earlier
    does not. ``c`` when the tied phases are not one run."""
    starts = [t for t in tied if (t - 1) % 16 not in tied]
    return starts[0] if len(starts) == 1 else c


def _first_both_full(lv: TrackedLevel, seen: list[tuple[range, Observation]]) -> int | None:
    """Two players: the first frame a capture showed both bottles whole (this one as the voted
    board, the other with its level's viruses, read in the same picture), or None (one
    player, the other bottle not read with this one, or not whole yet). levelIntro [$9CAB]
    ends when both are: the frame before state 0."""
    if lv.opponent is None or lv.board is None:
        return None
    target = virus_target(lv.opponent[0])
    for frames, obs in seen:
        other = obs.opponent_viruses
        if other is None or other < target or obs.kind != ScreenKind.LEVEL:
            continue
        if same_board(obs, lv.board) and not pill_cells(obs.field):
            return frames.stop - 1
    return None


def _last_partial(lv: TrackedLevel, target: int, first: int) -> int | None:
    """The first frame of the range of the newest capture of this level's intro before frame
    ``first`` with fewer than ``target`` viruses (the board still being drawn), or None."""
    best: int | None = None
    for seen, obs in lv.observations:
        if seen.stop - 1 >= first or obs.kind != ScreenKind.LEVEL or pill_cells(obs.field):
            continue
        if obs.virus_count < target and (best is None or seen.start > best):
            best = seen.start
    return best


def _first_full(lv: TrackedLevel, target: int, frames: range) -> int:
    """The most likely frame (``lv.points``) of the first capture of this level that showed
    ``target`` viruses or more (the current capture's last frame when none before did)."""
    for (_, obs), point in zip(lv.observations, lv.points, strict=True):
        if obs.kind == ScreenKind.LEVEL and obs.virus_count >= target and not pill_cells(obs.field):
            return point
    return frames.stop - 1


def _make_state0(lv: TrackedLevel, fc0: int) -> engine.Game:
    """The level's state 0 from its voted board and preview, frameCounter ``fc0`` (two
    players: the tracked player's nbPlayers-2 Game, engine.attack, with a later round's stale
    bytes as engine.Versus.next_round takes them). One player: made from the first of the
    level's seeds (``lv.seeds``, :func:`level_seeds`), so the state holds the level's pill
    reserve; from a seed that makes some level when no seed makes this board."""
    assert lv.board is not None
    if lv.opponent is None:
        seed = next(iter(lv.seeds), None)
        if seed is None:
            seed = _usable_seed(lv.level)
        g = engine.Game(lv.level, lv.speed, seed, frame_counter=fc0)
    else:
        seed = _usable_seed(max(lv.level, lv.opponent[0]))
        if lv.player == 1:
            v = engine.Versus(lv.level, lv.speed, *lv.opponent, seed, frame_counter=0)
            g = v.p1.game()
        else:
            v = engine.Versus(*lv.opponent, lv.level, lv.speed, seed, frame_counter=0)
            g = v.p2.game()
        g.frame_counter[...] = fc0
        if lv.stale is not None:  # a later round: initData_level [$8216] leaves these bytes
            for name in ("hor_velocity", "match_flag", "chain_length0", "score_multiplier"):
                getattr(g, name)[...] = getattr(lv.stale, name)
            g.attack_colors[:] = lv.stale.attack_colors
    field = lv.board.reshape(-1)
    g.field[:] = field
    g.shown[:] = field
    n = int(((field & 0xF0) == 0xD0).sum())
    g.virus_left_bcd[()] = (n // 10) * 16 + n % 10
    if lv.next0 is not None:
        g.next_colors[:] = lv.next0
    return g
