"""Play-time search: the teacher's exact look-ahead one pill deeper, with the network's prior.

    python -m policy.eval --policies search --levels 20 --speeds hi --episodes 200

`SearchPlayer` at a spawn state:

1. expands every reachable placement of the current pill (engine._core.expand: lock, clears,
   cascades and the next throw by the engine itself) and scores the boards (teacher.leaf_values);
2. ply 2, the visible next pill: the `beam` best children by one-ply value, plus the network's
   `prior_k` most likely placements (policy/models/policy.onnx, when a prior is given), are
   expanded again;
3. ply 3, the pill after next, which the player cannot see: for the `beam3` best first-ply
   children (by their 2-ply value) and their `width3` best grandchildren, every colour pair
   the pill can have is tried (the 9 ordered pairs of colours, generateNextPill $8E9D draws
   the two halves independently: the 6 unordered pairs weighted 1/9 and 2/9) and the best
   placement for each is averaged. A first-ply child's value is its best grandchild's value;
   the children searched to ply 3 are ranked by that, above the others.

Values are the teacher's (frames, higher is better): minus the frames spent from the root
spawn, minus the board's evaluation; a stage clear CLEAR - frames. So the search minimises
the frames to clear directly over the pills it sees.

Per decision cost (one core): 1 + beam + prior_k expansions (engine._core.expand, 0.2-0.5 ms
each) and beam3 * width3 third-ply calls (engine._core.expand_colours: the 6 colour pairs
with 2 plans, about half the cost of 6 expansions); docs/POLICY.md gives the measured p50/p99
against the pondering window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine import _core
from policy.play import COLOUR_PAIRS_ORDERED, MAX_SETTLE_FRAMES, PLAYING, STAGE_CLEAR, Move
from policy.teacher import Weights, leaf_values, packed_weights

F64 = npt.NDArray[np.float64]

# The unknown pill after next: colour pairs (unordered) and their probability (9 ordered
# pairs, equally likely).
COLOUR_PAIRS: tuple[tuple[tuple[int, int], float], ...] = (
    ((0, 0), 1 / 9),
    ((1, 1), 1 / 9),
    ((2, 2), 1 / 9),
    ((0, 1), 2 / 9),
    ((0, 2), 2 / 9),
    ((1, 2), 2 / 9),
)
_PAIRS = [pair for pair, _ in COLOUR_PAIRS]
_PROBS = [p for _, p in COLOUR_PAIRS]


@dataclass
class SearchPlayer:
    """Exact 3-ply search (depth 3; depth 2 is the teacher's search with the prior's beam).

    beam: first-ply children expanded with the next pill (by one-ply value). prior: an object
    with `logits(board, extras, mask)` (policy.onnx_policy.PlacementPolicy) whose `prior_k` top
    placements are added to that beam, or None. beam3, width3: first-ply children and, under
    each, grandchildren expanded with every colour pair of the unseen third pill (12 x 4:
    chosen on training seeds, docs/POLICY.md "Play-time search"; beam3 12 keeps every child
    that ply 2 searched, at most beam + prior_k). endgame_weights: the leaf weights used instead
    of `weights` once the viruses left are at most `endgame_viruses` (None: never).
    """

    depth: int = 3
    beam: int = 8
    beam3: int = 12
    width3: int = 4
    prior: Any = None
    prior_k: int = 3
    weights: Weights = field(default_factory=Weights)
    endgame_viruses: int = 0
    endgame_weights: Weights | None = None
    taps_only: bool = False
    name: str = "search"

    def __post_init__(self) -> None:
        if self.depth not in (2, 3):
            raise ValueError(f"depth must be 2 or 3, got {self.depth}")
        if min(self.beam, self.beam3, self.width3) < 1 or self.prior_k < 0:
            raise ValueError("beam, beam3, width3 must be >= 1 and prior_k >= 0")

    def _expand(self, game: engine.Game) -> _core.Expansion:
        return _core.expand(game, taps_only=self.taps_only, max_settle=MAX_SETTLE_FRAMES)

    def weights_for(self, game: engine.Game) -> Weights:
        """The leaf weights used at spawn state `game`: `endgame_weights` once the viruses
        left (engine.Game.virus_count) are at most `endgame_viruses`, else `weights`."""
        if self.endgame_weights is not None and int(game.virus_count) <= self.endgame_viruses:
            return self.endgame_weights
        return self.weights

    def _mobility(self, n: int, w: Weights) -> float:
        short = max(0.0, w.mobility_target - n)
        return w.mobility * short * short

    def _prior_picks(self, game: engine.Game, e: Any) -> list[int]:
        """Child positions of the prior's `prior_k` most likely placements."""
        return self._prior_picks_many([game], e)[0]

    def _prior_picks_many(self, games: Sequence[engine.Game], e: Any) -> list[list[int]]:
        """_prior_picks for several spawn states that share the expansion `e` (the same board
        and pill; the next pill's colours may differ). One network call per state, as
        search() makes it: a batch could round the logits otherwise (the CPU kernels do not
        promise the same float32 per row whatever the batch), and a near tie in the top
        `prior_k` would then change the search."""
        if self.prior is None or self.prior_k == 0:
            return [[] for _ in games]
        from policy.features import SpawnInput, encode

        mask = np.asarray(e.reachable)[None]
        pl = np.asarray(e.placements, dtype=np.int64)
        picks = []
        for g in games:
            board, extras = encode(SpawnInput.from_game(g))
            row = self.prior.logits(board, extras, mask)[0]
            picks.append([int(k) for k in np.argsort(-row[pl], kind="stable")[: self.prior_k]])
        return picks

    def _third_plies(
        self,
        games: Sequence[engine.Game],
        t0s: Sequence[float],
        w: Weights,
        memo: dict[Any, float] | None = None,
    ) -> list[float]:
        """Expected best value over the unseen third pill's colours at each spawn state
        games[i] (reached t0s[i] frames after the root), in one engine call
        (engine._core.expected_best_leaves, the interpreter lock released once: one call per
        state from the live loop's worker thread waited for the lock after each): the state
        expanded with every colour pair (expand_colours: 2 plans instead of 6), each pair's
        best leaf (teacher.leaf_values) less the mobility penalty of its child count, weighted
        by the pair's probability; the state's own leaf when some pair cannot be placed.

        memo: values already computed in this search, by (state bytes, t0) (the same
        weights): the 9 next-pill pairs a pondering searches reach the same state at the same
        t0 often (a pair and its mirror, (a, b) and (b, a), put the same halves in the same
        cells: about a third of the calls at level 20 HI), and the engine is deterministic,
        so a value found there is the value, bit for bit."""
        out = [0.0] * len(games)
        need: dict[Any, list[int]] = {}
        for i, (g, t) in enumerate(zip(games, t0s, strict=True)):
            key = (bytes(g.state_bytes()), t) if memo is not None else i
            if memo is not None and key in memo:
                out[i] = memo[key]
            else:
                need.setdefault(key, []).append(i)
        if need:
            p, d = packed_weights(w)
            first = [at[0] for at in need.values()]
            values = _core.expected_best_leaves(
                [games[i] for i in first],
                [t0s[i] for i in first],
                _PAIRS,
                _PROBS,
                p,
                d,
                taps_only=self.taps_only,
                max_settle=MAX_SETTLE_FRAMES,
            )
            for (key, at), v in zip(need.items(), values, strict=True):
                for i in at:
                    out[i] = float(v)
                if memo is not None:
                    memo[key] = float(v)
        return out

    def search(self, game: engine.Game, first: Any = None) -> tuple[Any, F64]:
        """(expansion of `game`, value per child float64[P]); the best child is the choice.
        `first`: the root's expansion when `game` is not a spawn state (a `PlayedPly` of a
        falling pill); None: engine._core.expand(game). Raises ValueError when `game` has no
        pill to plan."""
        w = self.weights_for(game)
        e = self._expand(game) if first is None else first
        if len(e) == 0:
            raise ValueError(f"no placement to choose: plan status {e.status}")
        t1, v1, order = self._first_ply(e, w)
        for k in self._prior_picks(game, e):
            if e.phases[k] == PLAYING and k not in order:
                order.append(k)
        return e, self._deeper(e, w, t1, v1, order, lambda k: self._expand(e.child(k)))

    def _first_bonus(self, e: Any) -> F64 | float:
        """Added to the first ply's values (0 here; AttackSearch's combo bonus)."""
        return 0.0

    def _path_bonus(self, e: Any, k: int, e2: Any) -> F64 | float:
        """Added to the values below child k of e (e2: that child expanded with the next pill),
        one per grandchild, at plies 2 and 3 (0 here; AttackSearch's combo bonus)."""
        return 0.0

    def _first_ply(self, e: Any, w: Weights) -> tuple[F64, F64, list[int]]:
        """(frames to each child's spawn, one-ply values, the `beam` best live children)."""
        t1 = (e.lock_frames + e.settle_frames).astype(np.float64)
        v1 = leaf_values(e.fields, e.viruses, e.phases, t1, w) + self._first_bonus(e)
        alive = np.flatnonzero(e.phases == PLAYING)
        order = [int(k) for k in alive[np.argsort(-v1[alive], kind="stable")][: self.beam]]
        return t1, v1, order

    def _deeper(
        self,
        e: Any,
        w: Weights,
        t1: F64,
        v1: F64,
        order: list[int],
        expand2: Callable[[int], _core.Expansion],
        memo: dict[Any, float] | None = None,
    ) -> F64:
        """Plies 2 and 3 below the children `order` of `e`; expand2(k): child k expanded with
        the visible next pill; memo: third-ply values shared with other calls for the same
        root (_third_plies). The value per child, as search() returns it."""
        values = v1.copy()
        searched = e.phases != PLAYING
        seconds: dict[int, tuple[_core.Expansion, F64, float, F64]] = {}
        for k in order:
            e2 = expand2(int(k))
            if len(e2) == 0:
                continue
            t2 = t1[k] + e2.lock_frames + e2.settle_frames
            bonus = np.broadcast_to(self._path_bonus(e, int(k), e2), (len(e2),))
            v2 = leaf_values(e2.fields, e2.viruses, e2.phases, t2, w) + bonus
            mob = self._mobility(len(e2), w)
            values[k] = v2.max() - mob
            searched[k] = True
            seconds[int(k)] = (e2, v2, mob, bonus)
        if (~searched).any():
            floor = values[searched].min() if searched.any() else 0.0
            values[~searched] = np.minimum(values[~searched], floor) - 1.0
        if self.depth == 2 or not seconds or (e.phases == STAGE_CLEAR).any():
            return values  # a stage clear now is the best there is
        # Ply 3 for the best first-ply children, ranked above every child not searched as deep.
        top = sorted(seconds, key=lambda k: -values[k])[: self.beam3]
        deep: dict[int, float] = {}
        jobs: list[tuple[int, int, float]] = []  # (k, grandchild j, frames to its spawn)
        for k in top:
            e2, v2, mob, bonus = seconds[k]
            t2 = t1[k] + e2.lock_frames + e2.settle_frames
            live2 = np.flatnonzero(e2.phases == PLAYING)
            done2 = np.flatnonzero(e2.phases != PLAYING)
            # a stage clear (or a top-out) on the second pill is exact
            deep[k] = float(v2[done2].max()) if done2.size else -np.inf
            for j in live2[np.argsort(-v2[live2], kind="stable")][: self.width3]:
                jobs.append((k, int(j), float(t2[j])))
        thirds = self._third_plies(
            [seconds[k][0].child(j) for k, j, _ in jobs], [t for _, _, t in jobs], w, memo
        )
        for (k, j, _), third in zip(jobs, thirds, strict=True):
            deep[k] = max(deep[k], third + float(seconds[k][3][j]))
        for k in top:
            deep[k] -= seconds[k][2]
        floor3 = min(deep.values())
        ceiling = (
            max(values[k] for k in range(len(e)) if k not in deep) if len(deep) < len(e) else 0.0
        )
        # Children not searched to ply 3 keep their order, below the deep ones.
        shift = floor3 - 1.0 - ceiling
        for k in range(len(e)):
            values[k] = deep[k] if k in deep else values[k] + min(0.0, shift)
        return values

    def search_pairs(
        self, game: engine.Game, pairs: Sequence[tuple[int, int]], first: Any = None
    ) -> tuple[Any, dict[tuple[int, int], F64]]:
        """search() once for each colour pair (codes 0-2) the next pill could have: (the root's
        expansion, {pair: value per child}), each what search() gives on a copy of `game` with
        next_colors = pair (the pondering for the 9 pairs). Shared between the pairs: the
        first ply (the board after this pill does not depend on the next one's colours; its
        children differ only in their falling pill, which expand_colours sets) and the plans
        of the second ply (one engine._core.expand_colours per child: 2 plans for all pairs);
        the prior runs once per pair, and the third ply is each pair's own but computed once
        for a state two pairs reach at the same frame (_third_plies' memo). `first` as in
        search(). Raises ValueError when `game` has no pill to plan."""
        pairs = [(int(a), int(b)) for a, b in pairs]
        w = self.weights_for(game)
        e = self._expand(game) if first is None else first
        if len(e) == 0:
            raise ValueError(f"no placement to choose: plan status {e.status}")
        t1, v1, base = self._first_ply(e, w)
        games = []
        for pair in pairs:
            h = game.clone()
            h.next_colors[:] = pair
            games.append(h)
        orders = []
        for picks in self._prior_picks_many(games, e):
            order = list(base)
            order += [k for k in picks if e.phases[k] == PLAYING and k not in order]
            orders.append(order)
        needed: dict[int, list[tuple[int, int]]] = {}
        for pair, order in zip(pairs, orders, strict=True):
            for k in order:
                needed.setdefault(k, []).append(pair)
        second: dict[tuple[int, tuple[int, int]], _core.Expansion] = {}
        for k, ps in needed.items():
            es = _core.expand_colours(
                e.child(k), ps, taps_only=self.taps_only, max_settle=MAX_SETTLE_FRAMES
            )
            for pair, e2 in zip(ps, es, strict=True):
                second[(k, pair)] = e2
        values: dict[tuple[int, int], F64] = {}
        memo: dict[Any, float] = {}
        for pair, order in zip(pairs, orders, strict=True):

            def expand2(k: int, pair: tuple[int, int] = pair) -> _core.Expansion:
                return second[(k, pair)]

            values[pair] = self._deeper(e, w, t1, v1, order, expand2, memo)
        return e, values

    def mean_over_pairs(
        self, game: engine.Game, pairs: Sequence[tuple[int, int]], first: Any = None
    ) -> tuple[Any, F64]:
        """(the root's expansion, value per child float64[P]) averaged over the next pill's
        colour `pairs`, each equally likely (the 9 ordered pairs: generateNextPill $8E9D draws
        each half alone): the decision without the next pill, as the live loop ponders it
        (PonderedSearch, hil's SearchPolicy.choose_pairs). `first` as in search(). Raises
        ValueError when `game` has no pill to plan."""
        e, by_pair = self.search_pairs(game, pairs, first)
        return e, np.mean(np.stack([by_pair[p] for p in by_pair]), axis=0)

    def act_pairs(
        self, game: engine.Game, pairs: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], Move]:
        """act() at spawn state `game` for each colour pair of the next pill: {pair: Move},
        each the Move act() makes on a copy of `game` with next_colors = pair, from one
        search_pairs(). Raises ValueError when `game` has no pill to plan."""
        e, values = self.search_pairs(game, pairs)
        plan = _core.plan(game, taps_only=self.taps_only)
        out: dict[tuple[int, int], Move] = {}
        for pair, v in values.items():
            idx = int(e.placements[int(np.argmax(v))])
            out[pair] = Move(idx, plan.masks(idx))
        return out

    def act(self, game: engine.Game) -> Move:
        e, values = self.search(game)
        idx = int(e.placements[int(np.argmax(values))])
        # expand() locks placements without stepping masks; the one played uses the planner's.
        return Move(idx, _core.plan(game, taps_only=self.taps_only).masks(idx))


def chain_lines(parent: npt.ArrayLike, fields: npt.ArrayLike, clear_rounds: npt.ArrayLike) -> F64:
    """Lines cleared by each child's lock and chain (comboCounter, the attack of the two-player
    game, docs/VERSUS.md), estimated from what an Expansion gives: `parent` the field uint8[128]
    at the spawn state expanded, `fields` [P, 128] the children's fields at their next spawn,
    `clear_rounds` [P]. Cells removed = cells before + 2 (the pill) - cells after; each line
    removes 4 or more, a cross of two lines 7. Lines = max(clear_rounds, removed // 4, and 2 when
    7 or more went). Exact but for long single lines (5+ cells in a line of 8 or more, or a
    line of 7); along greedy versus games it matched comboCounter at 813 of 814 locks."""
    before = int((np.asarray(parent) != 0xFF).sum())
    after = (np.asarray(fields) != 0xFF).reshape(len(np.asarray(clear_rounds)), -1).sum(axis=1)
    removed = before + 2 - after
    lines = np.maximum(np.asarray(clear_rounds, dtype=np.int64), removed // 4)
    lines = np.where(removed >= 7, np.maximum(lines, 2), lines)
    return lines.astype(np.float64)


def attack_halves(lines: npt.ArrayLike) -> F64:
    """Halves a chain of `lines` lines sends (checkComboCounterForAttack [$9C03]: 2+ lines;
    checkReleaseAttack [$9C1B] drops at most 4)."""
    n = np.asarray(lines, dtype=np.float64)
    return np.where(n >= 2, np.minimum(n, 4.0), 0.0)


@dataclass
class AttackSearch(SearchPlayer):
    """SearchPlayer for the two-player game: each pill whose chain clears 2+ lines (an attack:
    2-4 halves dropped on the opponent) adds `attack` frames per half sent to the value of every
    path through it, for the current pill (ply 1) and the visible next one (ply 2); the unseen
    third pill's chains get nothing. The rest is the one-player search (frames to clear).
    `python -m policy.versus --p1 search-attack`."""

    attack: float = 400.0
    name: str = "search-attack"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._root: npt.NDArray[np.uint8] | None = None
        self._bonus1: F64 = np.zeros(0)

    def search(self, game: engine.Game, first: Any = None) -> tuple[Any, F64]:
        self._root = np.asarray(game.field).copy()
        return super().search(game, first)

    def _first_bonus(self, e: Any) -> F64 | float:
        if self._root is None or len(e) == 0:
            self._bonus1 = np.zeros(len(e))
        else:
            lines = chain_lines(self._root, e.fields, e.clear_rounds)
            self._bonus1 = self.attack * attack_halves(lines)
        return self._bonus1

    def _path_bonus(self, e: Any, k: int, e2: Any) -> F64 | float:
        lines = chain_lines(np.asarray(e.fields)[k], e2.fields, e2.clear_rounds)
        b1 = float(self._bonus1[k]) if k < len(self._bonus1) else 0.0
        return b1 + self.attack * attack_halves(lines)


class PlayedPly:
    """The first ply of a pill already falling (the live loop decides from the state where its
    first new input takes effect, not from the spawn state engine._core.expand needs): every
    placement of `plan` (engine.plan of `game`) played with its own masks on a copy of `game`
    and settled to the next spawn state (engine._core.settle). Exact: the planner's inputs,
    where expand locks on the lock frame by a model (search.h lock_at). Offers what
    SearchPlayer.search reads of an engine._core.Expansion: placements int16[P], lock_frames
    and settle_frames int32[P] (frames from `game`), clear_rounds int32[P], viruses int32[P],
    phases uint8[P], fields uint8[P, 128], reachable bool[512], status and child(k) (the
    settled state)."""

    def __init__(self, game: engine.Game, plan: Any) -> None:
        self.status = int(plan.status)
        self.reachable = np.asarray(plan.reachable, dtype=bool)
        self.placements = np.asarray(plan.placements, dtype=np.int16)
        n = len(self.placements)
        self.lock_frames = np.zeros(n, np.int32)
        self.settle_frames = np.zeros(n, np.int32)
        self.clear_rounds = np.zeros(n, np.int32)  # (AttackSearch counts a chain's lines)
        self.viruses = np.zeros(n, np.int32)
        self.phases = np.zeros(n, np.uint8)
        self.fields = np.zeros((n, 128), np.uint8)
        self._children: list[engine.Game] = []
        for i, idx in enumerate(self.placements):
            masks = np.asarray(plan.masks(int(idx)), np.uint8)
            child = game.clone()
            child.run(masks)
            frames, rounds = _core.settle(child, max_frames=MAX_SETTLE_FRAMES)
            self.lock_frames[i] = len(masks)
            self.settle_frames[i] = frames
            self.clear_rounds[i] = rounds
            self.viruses[i] = int(child.virus_count)
            self.phases[i] = int(child.phase)
            self.fields[i] = np.asarray(child.field).reshape(-1)
            self._children.append(child)

    def __len__(self) -> int:
        return len(self.placements)

    def child(self, k: int) -> engine.Game:
        return self._children[k].clone()


class LateSearch:
    """The live loop's decision at a spawn it sees through the capture: `player` (a
    SearchPlayer) decides from the state `delay` frames after the spawn, played with no
    buttons, the next pill known; the Move's masks are those `delay` zeros, then the plan
    from there (engine.plan). `python -m policy.eval --policies search-late5`. Raises
    ValueError when the pill locks within the delay (it cannot at a spawn state)."""

    def __init__(self, player: SearchPlayer, delay: int = 5) -> None:
        self.player, self.delay = player, int(delay)
        self.name = f"search-late{self.delay}"

    def act(self, game: engine.Game) -> Move:
        g = game.clone()
        g.run(np.zeros(self.delay, np.uint8))
        plan = engine.plan(g)
        first = PlayedPly(g, plan)
        if len(first) == 0:
            raise ValueError(f"no placement {self.delay} frames after the spawn")
        e, values = self.player.search(g, first)
        idx = int(e.placements[int(np.argmax(values))])
        return Move(idx, np.concatenate([np.zeros(self.delay, np.uint8), plan.masks(idx)]))


class PonderedSearch:
    """The live loop's pondered decision (hil run --policy search, SearchPolicy.choose_pairs):
    at the spawn, without the next pill's colours, the placement best on average over the 9
    pairs it can have (SearchPlayer.search_pairs). `python -m policy.eval --policies
    search-ponder`."""

    name = "search-ponder"

    def __init__(self, player: SearchPlayer) -> None:
        self.player = player

    def act(self, game: engine.Game) -> Move:
        e, mean = self.player.mean_over_pairs(game, COLOUR_PAIRS_ORDERED)
        idx = int(e.placements[int(np.argmax(mean))])
        return Move(idx, _core.plan(game, taps_only=self.player.taps_only).masks(idx))


__all__ = [
    "AttackSearch",
    "COLOUR_PAIRS",
    "LateSearch",
    "PlayedPly",
    "PonderedSearch",
    "SearchPlayer",
    "attack_halves",
    "chain_lines",
]
