"""A beam search over the pills to come, read from the game's pill reserve.

On the console the whole pill sequence of a level is fixed before its first throw:
``generatePillsReserve`` [$82B0] fills 128 pills from the RNG at ``initData_level`` [$8216],
and every spawn takes the next one (``generateNextPill`` [$8E9D]); nothing else steps the RNG
during play (docs/LEVEL_GEN.md). The engine holds that reserve in each state, so an exact
expansion of a state (``engine._core.expand``) throws the real next pills. :class:`BeamPlayer`
uses that: it plays ``depth`` pills ahead with the pills the game will throw, not an
expectation over the unseen ones (policy.search's third ply). A player that sees only the
preview cannot do this; docs/POLICY.md "Beam search over the level's pills" says what that
changes in the comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import engine
from engine import _core
from policy.play import MAX_SETTLE_FRAMES, PLAYING, STAGE_CLEAR, Move
from policy.teacher import Weights, leaf_values, packed_weights


@dataclass
class BeamPlayer:
    """Beam search over the next ``depth`` pills of the reserve (frames to clear).

    At a spawn state every reachable placement of the falling pill is expanded by the engine
    (planned exactly, locked and settled to the next spawn, whose pill is the reserve's). The
    ``width`` best live states with distinct boards by the teacher's leaf
    value (``-(frames since the root) - evaluation(board)``, policy.teacher.leaf_values;
    weights ``weights.scaled(scale)``: the board's terms at ``scale`` of the teacher's against
    the frames) are expanded again,
    and so on for ``depth`` pills; the choice is the first placement of the best state at the
    last depth. A stage clear ends the search at the depth it is first reached: the fastest
    clear found there (value ``1e7 - frames``) is played towards. When every line tops out
    at some depth, the best line of the depth before it is played (at the root: the best
    placement by its own leaf value).

    depth: pills searched (the falling one included), >= 1; width: states kept per depth,
    >= 1; scale > 0. depth 16 x width 80 and scale 0.5 (the defaults) were chosen on training
    seeds (docs/POLICY.md "Beam search over the level's pills").
    taps_only: plan every pill with engine.plan's taps_only search; ahead_taps_only (the
    default): only the pills after the first (the look-ahead; the placement played is always
    planned as ``taps_only`` says). taps_only plans find the full search's placements on
    nearly every state (docs/PLANNER.md) in about half the time: the default beam made the
    same choices as one that plans every pill in full on 40 level-20 HI training games
    (docs/POLICY.md "Beam search over the level's pills").
    Cost: up to ``1 + (depth - 1) * width`` engine expansions per decision. The pills after
    the first are searched in C++ with the interpreter lock released (engine._core.beam,
    search.h beam_search, which also says what two lines with one board may differ in).
    reuse (the default): the searches of one player share an engine._core.ExpansionCache, so
    an expansion the search before made (about half of them, on level-20 HI games) is not
    made again; the choices are the same either way (docs/POLICY.md "Beam search over the
    level's pills"). The cache is the player's own (not copied or pickled with it).
    """

    depth: int = 16
    width: int = 80
    weights: Weights = field(default_factory=Weights)
    scale: float = 0.5
    taps_only: bool = False
    ahead_taps_only: bool = True
    reuse: bool = True
    name: str = "beam"
    _cache: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.depth < 1 or self.width < 1:
            raise ValueError(f"depth and width must be >= 1, got {self.depth}, {self.width}")
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": None}

    @property
    def cache(self) -> Any:
        """The engine._core.ExpansionCache of this player's searches (None without reuse)."""
        if self.reuse and self._cache is None:
            self._cache = _core.ExpansionCache()
        return self._cache if self.reuse else None

    def _expand(self, game: engine.Game) -> Any:
        return _core.expand(game, taps_only=self.taps_only, max_settle=MAX_SETTLE_FRAMES)

    def search(self, game: engine.Game, margin: float = 24.0) -> tuple[Any, int, np.ndarray]:
        """(the root's expansion, the chosen child's position, values float64[n]: one per
        child, in frames, higher is better) at spawn state ``game``; the choice is
        :meth:`choose`'s.

        A live child's value is the best leaf value its lines reach where the beam ends
        (engine._core.beam_values: the last depth, or the depth of the first stage clear).
        At level 20 HI that is one or two children a state (the lines converge), so a live
        child with no line there is ranked below the chosen one by ``margin`` frames plus the
        gap between its own leaf value and the best child's: ``value[k] - margin - (max(leaf)
        - leaf)``. A child that clears or tops out on the first pill, or every child when the
        search stops at the root, has its own leaf value. The chosen child's value is the
        highest (ties go to it). These are the labels of ``policy.train --labeller beam``.
        Raises ValueError as :meth:`choose`.
        """
        return self._search(game, None, margin)

    def _search(self, game: engine.Game, first: Any, margin: float | None) -> tuple[Any, int, Any]:
        root = self._expand(game) if first is None else first
        if len(root) == 0:
            raise ValueError(f"no placement to choose: plan status {root.status}")
        w = self.weights.scaled(self.scale)  # (equal Weights share their packed arrays)
        t = (root.lock_frames + root.settle_frames).astype(np.float64)
        v = leaf_values(root.fields, root.viruses, root.phases, t, w)
        phases = np.asarray(root.phases)
        if (phases == STAGE_CLEAR).any() or not (phases == PLAYING).any() or self.depth == 1:
            return root, int(np.argmax(v)), v
        # The beam from the root's live children, best first (engine._core.beam).
        live = np.flatnonzero(phases == PLAYING)
        order = live[np.argsort(-v[live], kind="stable")]
        p, d = packed_weights(w)
        args = (
            [root.child(int(k)) for k in order], v[order], t[order], self.depth - 1,
            self.width, p, d,
        )  # fmt: skip
        opts = {
            "taps_only": self.taps_only or self.ahead_taps_only,
            "max_settle": MAX_SETTLE_FRAMES,
            "cache": self.cache,
        }
        if margin is None:
            return root, int(order[_core.beam(*args, **opts)]), None
        pos, deep = _core.beam_values(*args, **opts)
        k = int(order[pos])
        values = v.copy()
        below = deep[pos] - margin - (v[order[0]] - v[order])
        values[order] = np.where(np.isfinite(deep), deep, below)
        if int(np.argmax(values)) != k:  # a tie with a child before it
            values[k] = float(values.max()) + 1.0e-6
        return root, k, values

    def choose(self, game: engine.Game, first: Any = None) -> tuple[Any, int]:
        """(the root's expansion, the chosen child's position in it) at spawn state ``game``.
        ``first``: the root's expansion when ``game`` is not a spawn state (a
        policy.search.PlayedPly of a falling pill, as the live loop decides); None:
        engine._core.expand(game). Raises ValueError when ``game`` is not at a spawn state
        (engine._core.expand) or has no pill to plan."""
        root, k, _ = self._search(game, first, None)
        return root, k

    def act(self, game: engine.Game) -> Move:
        """The placement and its masks from spawn state ``game`` (policy.play's Policy)."""
        e, k = self.choose(game)
        idx = int(e.placements[k])
        # expand() locks placements without stepping masks; the one played uses the planner's.
        return Move(idx, _core.plan(game, taps_only=self.taps_only).masks(idx))
