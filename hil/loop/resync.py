"""The tracker's re-sync: a capture that no prediction explains is a timing slip when a frame
or two beside explains it, else a desync; the state before it then takes the board and pill
read off the captures (with guesses at the pill's hidden microstate) when the prediction from
there explains every capture of the run, else the tracker goes blind until the next spawn
re-anchors it (docs/RUN.md, "The tracker"). A mixin of hil.loop.tracker.Tracker."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import engine
from engine import ScreenKind
from hil.loop.matching import (
    SOFT_MISMATCHES,
    MatchConfig,
    board_differences,
    falling,
    mismatches,
    predicted_observation,
    write_board,
    write_pill,
)
from hil.loop.tracked import Event, LevelState, TrackedLevel, TrackerConfig
from perception.observation import (
    Observation,
)

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


class Resync:
    """The re-sync's half of the Tracker (see the module docstring)."""

    lv: TrackedLevel | None
    cfg: TrackerConfig
    state: LevelState
    desyncs: int
    resyncs: int
    timing_slips: int
    replan: bool
    _track_match: MatchConfig

    if TYPE_CHECKING:

        def advance(self) -> None: ...

        def mask_of(self, frame: int) -> int: ...

        def state_at(self, e: int) -> tuple[engine.Game, int] | None: ...

        def _spawn_template(self, e: int) -> tuple[engine.Game, int] | None: ...

        def _candidates(
            self, frames: Iterable[int]
        ) -> list[tuple[int, Observation, int, bool]]: ...

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
                    found = write_board(
                        game, obs, self.cfg.match.min_confidence, lv.viruses_missing
                    )
                    if obs.falling is not None and falling(game):
                        write_pill(game, obs.falling)
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
        self._rebase(e - 1, game, spawns)
        self.state = LevelState.TRACKING
        lv.reported_spawn = max(lv.reported_spawn, spawns)
        lv.decided_spawn = lv.reported_spawn - 1
        self.resyncs += 1
        return [
            Event("resync", g, {"how": "re-anchored at a spawn", "pill": spawns}),
            Event("spawn", g, {"pill": spawns, "colors": list(f.colors), "reanchored": True}),
        ]

    def _soft_beside(self, frames: range, obs: Observation) -> bool:
        """True when a frame up to 2 before or 1 after ``frames`` differs from ``obs`` in
        board cells or the next pill only (not in nothing: that is a timing slip, see
        _diverged). A repeated capture (the card delivers its previous picture again) or a late
        one shows the falling pill of a frame before its range; if the reader also misread a
        cell on it, the pill's difference is the mapping's and the cell's is soft (counted as
        hard, a re-sync would write the misread into the shadow)."""
        beside = [*range(frames.start - 2, frames.start), frames.stop]
        for _g, pred, _spawns, known in self._candidates(beside):
            diff = mismatches(pred, obs, self._track_match, known)
            if diff and set(diff) <= SOFT_MISMATCHES:
                return True
        return False
