"""The tracker's re-sync: a capture that no prediction explains is a timing slip when a frame
or two beside explains it, else a desync; the state before it then takes the board and pill
read off the captures (with guesses at the pill's hidden microstate) when the prediction from
there explains every capture of the run, else the tracker goes blind until the next spawn
re-anchors it (docs/RUN.md, "The tracker").

:class:`Resync` works on the level it is given (hil.loop.tracked.TrackedLevel) and asks the
tracker's shadow state only what :class:`Shadow` names (states and predictions, the latched
masks, and a history replaced from a state on). It returns the events it raises; the tracker
counts them and changes its own state (blind, tracking, a re-plan)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import engine
from engine import ScreenKind
from engine.placement import pill_falling
from hil.loop.matching import (
    SOFT_MISMATCHES,
    MatchConfig,
    board_differences,
    mismatches,
    predicted_observation,
    write_board,
    write_pill,
)
from hil.loop.tracked import Event, TrackedLevel, TrackerConfig
from perception.observation import (
    Observation,
)

SPAWN_X, SPAWN_Y = 3, 15  # fallingPillX/Y as generateNextPill sets them

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


class Shadow(Protocol):
    """What the re-sync asks of the tracker's shadow state (hil.loop.tracker.Tracker), for the
    level being tracked: ``state_at(e)``: (state e, spawns up to it), or None before the
    kept history; ``candidates(frames)``: (frame, predicted observation, spawns, next pill
    known) per frame; ``mask_of(frame)``: the byte the frame latched (or will, as far as the
    host knows); ``rebase(e, game, spawns)``: the history from state e on replaced by
    ``game`` and the latched masks stepped from it."""

    def state_at(self, e: int) -> tuple[engine.Game, int] | None: ...

    def candidates(self, frames: Iterable[int]) -> list[tuple[int, Observation, int, bool]]: ...

    def mask_of(self, frame: int) -> int: ...

    def rebase(self, e: int, game: engine.Game, spawns: int) -> None: ...


class Resync:
    """A divergence's handling (see the module docstring). ``cfg``: the tracker's settings (its
    ``match.min_confidence`` for the cells written from a capture); ``match``: how a prediction
    is compared while tracking; ``shadow``: the tracker's shadow state."""

    def __init__(self, cfg: TrackerConfig, match: MatchConfig, shadow: Shadow) -> None:
        self.cfg = cfg
        self.match = match
        self.shadow = shadow

    def diverged(
        self,
        lv: TrackedLevel,
        frames: range,
        obs: Observation,
        what: list[str],
        pred: Observation | None = None,
    ) -> list[Event]:
        """``lv``'s run of disagreeing captures (``lv.run_obs``) is long enough, ``obs`` (showing
        ``frames``) its last, ``what`` and ``pred`` its closest prediction's differences and
        prediction. Returns ``[timing_slip]`` when a frame or two beside ``frames`` explains
        ``obs``; else ``[desync, resync]`` when the run's captures re-sync the shadow (its
        history replaced from there), or ``[desync, blind]`` when they do not. The run ends
        either way."""
        assert lv.base is not None
        # A capture mapped to the wrong frame (latency drift, a late or repeated capture) is a
        # timing slip, not a different game: look a frame or two further either side.
        wide = range(frames.start - 2, frames.stop + 1)
        for g, near, _s, known in reversed(self.shadow.candidates(wide)):
            if g not in frames and not mismatches(near, obs, self.match, known):
                lv.mismatch_run = 0
                lv.run_obs = []
                lv.slip_run += 1
                shift = g - (frames.stop - 1) if g >= frames.stop else g - frames.start
                return [Event("timing_slip", g, {"shift_frames": shift, "run": lv.slip_run})]
        lv.slip_run = 0
        g = frames.stop - 1
        detail: dict[str, Any] = {"what": what, "seen": obs.to_json()}
        if pred is not None and "board" in what:
            detail["cells"] = board_differences(pred, obs, self.match)
        events = [Event("desync", g, detail)]
        fixed = self._resync(lv, lv.run_obs)
        lv.mismatch_run = 0
        lv.run_obs = []
        if fixed is not None:
            at, how = fixed
            events.append(Event("resync", at, {"how": how}))
        else:
            events.append(Event("blind", g, {"until": "the next spawn is seen"}))
        return events

    def _resync(
        self, lv: TrackedLevel, run: list[tuple[range, Observation]]
    ) -> tuple[int, str] | None:
        """Re-sync from the disagreeing captures: the state before the picture of the first
        one takes the observed board, pill pose and colours (and, if needed, a guess at the
        hidden pill microstate: speedCounter, held buttons, DAS counter); accepted when the
        prediction from it, with the latched masks, agrees with every capture of the run.
        Returns (frame, how) or None."""
        assert lv.base is not None
        for frames, obs in run:
            if obs.kind != ScreenKind.LEVEL:
                continue
            for g in reversed(frames):
                e = g - lv.base
                got = self.shadow.state_at(e - 1)
                if got is None:
                    continue
                before, spawns = got
                for variant in _MICROSTATE_GUESSES:
                    game = before.clone()
                    found = write_board(
                        game, obs, self.cfg.match.min_confidence, lv.viruses_missing
                    )
                    if obs.falling is not None and pill_falling(game):
                        write_pill(game, obs.falling)
                        for name, value in variant:
                            getattr(game, name)[()] = value
                    elif variant:
                        continue
                    if obs.next_colors is not None:
                        game.next_colors[:] = obs.next_colors
                    if self._explains(lv.base, e - 1, game, run):
                        if obs.next_colors is not None:
                            lv.next_by_spawn[spawns] = obs.next_colors
                        lv.viruses_missing -= found
                        self.shadow.rebase(e - 1, game, spawns)
                        guess = ", ".join(f"{n}={v}" for n, v in variant) or "none"
                        return g, f"board and pill from the capture; microstate guess: {guess}"
        return None

    def _explains(
        self, base: int, e0: int, game: engine.Game, run: list[tuple[range, Observation]]
    ) -> bool:
        """Whether ``game`` as state ``e0`` of the level that starts at frame ``base``, stepped
        with the latched masks, explains every capture of ``run``."""
        last = max(fr.stop - 1 for fr, _ in run) - base
        preds: dict[int, Observation] = {}
        g = game.clone()
        for e in range(e0, last + 1):
            if e > e0:
                g.step(self.shadow.mask_of(base + e - 1))
            preds[e] = predicted_observation(g)
        for frames, obs in run:
            cands = [f - base for f in frames if f - base > e0]
            if not cands:
                continue
            if all(mismatches(preds[e], obs, self.match) for e in cands):
                return False
        return True

    def reanchor(self, lv: TrackedLevel, frames: range, obs: Observation) -> list[Event]:
        """While blind: ``obs`` (showing ``frames``) re-anchors the shadow when it shows a
        falling pill at the spawn pose on a LEVEL screen: the state before it becomes a spawn
        state with the capture's board, pill and preview (the history replaced from there),
        and that pill is due for a decision. Returns ``[resync, spawn]``, or [] (still blind)."""
        assert lv.base is not None
        f = obs.falling
        if obs.kind != ScreenKind.LEVEL or f is None or (f.x, f.y, f.rotation) != (3, 15, 0):
            return []
        g = frames.stop - 1
        e = g - lv.base
        template = self._spawn_template(lv, e)
        if template is None:
            return []
        game, spawns = template
        lv.viruses_missing -= write_board(
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
        self.shadow.rebase(e - 1, game, spawns)
        lv.reported_spawn = max(lv.reported_spawn, spawns)
        lv.decided_spawn = lv.reported_spawn - 1
        return [
            Event("resync", g, {"how": "re-anchored at a spawn", "pill": spawns}),
            Event("spawn", g, {"pill": spawns, "colors": list(f.colors), "reanchored": True}),
        ]

    def _spawn_template(self, lv: TrackedLevel, e: int) -> tuple[engine.Game, int] | None:
        """A state with a pill just spawned whose frameCounter fits state e - 1: the shadow
        stepped without buttons from its newest state until a pill falls, then moved to e - 1's
        frame parity and counter."""
        got = self.shadow.state_at(min(e - 1, lv.confirmed))
        if got is None:
            return None
        game, spawns = got
        game = game.clone()
        for _ in range(400):
            if pill_falling(game):
                break
            was = pill_falling(game)
            game.step(0)
            spawns += int(pill_falling(game) and not was)
        if not pill_falling(game):
            return None
        assert lv.fc0 is not None
        game.frame_counter[()] = (lv.fc0 + e - 1) & 0xFF
        game.pill_x[()] = SPAWN_X
        game.pill_y[()] = SPAWN_Y
        game.pill_rotation[()] = 0
        game.speed_counter[()] = 0
        return game, spawns

    def soft_beside(self, frames: range, obs: Observation) -> bool:
        """True when a frame up to 2 before or 1 after ``frames`` differs from ``obs`` in
        board cells or the next pill only (not in nothing: that is a timing slip, see
        :meth:`diverged`). A repeated capture (the card delivers its previous picture again) or
        a late one shows the falling pill of a frame before its range; if the reader also
        misread a cell on it, the pill's difference is the mapping's and the cell's is soft
        (counted as hard, a re-sync would write the misread into the shadow)."""
        beside = [*range(frames.start - 2, frames.start), frames.stop]
        for _g, pred, _spawns, known in self.shadow.candidates(beside):
            diff = mismatches(pred, obs, self.match, known)
            if diff and set(diff) <= SOFT_MISMATCHES:
                return True
        return False
