"""The placement policies the loop can play with, as the loop asks them (hil.loop.decision
.Policy): ``choose(game, reachable) -> placement`` on the predicted state where the first new
input takes effect, and, where a policy has them, ``choose_mean`` (one placement for every
colour pair of the next pill: a pill pondered before the preview shows its successor),
``choose_pairs`` (the 9 choices of a pondered pill at once), ``choose_now`` (a choice cheap
enough for a pill decided at its spawn in real time) and ``quick`` (a policy pondered first in
real time, whose plan the full one replaces when it comes in time).

- ``heuristic``: hil's stand-in (hil.loop.heuristic), one-ply greedy, no model;
- ``onnx``: the policy room's network (policy.onnx_policy.PlacementPolicy), ~2 ms a choice,
  never a placement that tops out at once while another lives (OnnxPolicy);
- ``search``: policy.search's 3-ply search with the network as prior (docs/POLICY.md
  "Play-time search"): stronger, ~100 ms of one core a choice, 250-1000 ms for a pondered pill;
- ``search-attack`` (two players): the search with a bonus for each half a pill's chain sends
  (policy.search.AttackSearch, docs/VERSUS.md "Players");
- ``beam`` (one player): policy.beam's search over the pills the level's reserve will throw,
  which the tracker's states hold once the board names the level's seed (docs/RUN.md "The
  level's pills"); ~100 ms of one core a choice, one search for a pondered pill, pondered
  first in real time with a beam of QUICK_BEAM (~20 ms); in real time it also starts the next
  pill's choice as soon as it has made one (BeamPolicy.start_prefetch).
"""

from __future__ import annotations

import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from hil.loop.decision import Policy
from hil.loop.ponder import next_spawn


class OnnxPolicy:
    """The policy room's network on ``policy.features.SpawnInput.from_game`` of the state.
    ``net``: a policy.onnx_policy.PlacementPolicy (default: the shipped model). ``survive``
    (default): the best-ranked placement whose lock does not top out at once while another's
    does not (policy.onnx_policy.first_surviving, played from the loop's state with
    engine.plan's inputs), the rule of ``policy.eval --policies onnx-survive``; False: the
    network's top choice alone, as ``onnx``."""

    name = "onnx"

    def __init__(self, net: Any = None, survive: bool = True) -> None:
        from policy.onnx_policy import PlacementPolicy

        self.net = net if net is not None else PlacementPolicy()
        self.survive = survive

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        from policy.features import SpawnInput

        return self._pick(game, reachable, self.net.ranking(SpawnInput.from_game(game), reachable))

    def choose_mean(self, game: engine.Game, reachable: npt.ArrayLike, pairs: Any) -> int:
        """The placement best on average over the next pill's colours ``pairs``
        (PlacementPolicy.ranking over them): for a pill pondered before the preview shows its
        successor."""
        order = self.net.ranking(next_pill_observations(game, pairs), reachable)
        return self._pick(game, reachable, order)

    def choose_pairs(
        self, game: engine.Game, reachable: npt.ArrayLike, pairs: Any
    ) -> dict[tuple[int, int], int]:
        """choose() for each next pill colour pair of ``pairs`` at once (a pondered pill): one
        network batch, one engine.plan, and each placement's survival played once for all."""
        orders = self.net.rankings(next_pill_observations(game, pairs), reachable)
        keys = [(int(a), int(b)) for a, b in pairs]
        if not self.survive:
            return {k: int(o[0]) for k, o in zip(keys, orders, strict=True)}
        plan = engine.plan(game)
        alive: dict[int, bool] = {}
        return {
            k: self._pick(game, reachable, o, plan, alive)
            for k, o in zip(keys, orders, strict=True)
        }

    def _pick(
        self,
        game: engine.Game,
        reachable: npt.ArrayLike,
        order: Any,
        plan: Any = None,
        alive: dict[int, bool] | None = None,
    ) -> int:
        if not self.survive:
            return int(order[0])
        from policy.onnx_policy import first_surviving

        plan = engine.plan(game) if plan is None else plan
        # the loop's planner and this one see the same pill; keep only what both reach
        both = order[np.asarray(plan.reachable, dtype=bool)[order]]
        return first_surviving(game, plan, both, alive) if len(both) else int(order[0])


class SearchPolicy:
    """policy.search's 3-ply search with the ONNX network as prior (docs/POLICY.md "Play-time
    search"), from the falling pill: its first ply is played with the planner's own masks
    (PlayedPly). ``quick`` is its prior network as an OnnxPolicy: a pill decided at its spawn
    takes its choice (``choose_now``), and in real time a pondered pill is planned with it
    first (hil.loop.decision)."""

    name = "search"

    def __init__(self, attack: bool = False) -> None:
        from policy.onnx_policy import PlacementPolicy
        from policy.search import AttackSearch, SearchPlayer

        self.prior = PlacementPolicy()
        # two players: policy.search.AttackSearch, the search with a bonus for each half a
        # pill's chain sends (docs/VERSUS.md "Players")
        self.player = (AttackSearch if attack else SearchPlayer)(prior=self.prior)
        self.name = self.player.name if attack else "search"
        self.quick = OnnxPolicy(self.prior)

    def choose_now(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        """The prior network's choice (~2 ms): for a pill decided at its spawn in real time,
        which cannot wait the search's ~100 ms."""
        return self.quick.choose(game, reachable)

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        from policy.search import PlayedPly

        first = PlayedPly(game, engine.plan(game))
        if len(first) == 0:
            raise ValueError("no placement to choose")
        e, values = self.player.search(game, first)
        return self._best(e, values, reachable)

    def choose_pairs(
        self, game: engine.Game, reachable: npt.ArrayLike, pairs: Any
    ) -> dict[tuple[int, int], int]:
        """The pondered pill's placement, the same for every next pill of ``pairs``: the best
        on average over them (SearchPlayer.mean_over_pairs, one search per pair sharing the
        first ply), so the whole plan goes on the wire before the spawn (docs/POLICY.md "The
        search's pondering" measures what that costs against deciding at the spawn)."""
        from policy.search import PlayedPly

        first = PlayedPly(game, engine.plan(game))
        if len(first) == 0:
            raise ValueError("no placement to choose")
        e, mean = self.player.mean_over_pairs(game, pairs, first)
        idx = self._best(e, mean, reachable)
        return {(int(a), int(b)): idx for a, b in pairs}

    @staticmethod
    def _best(e: Any, values: Any, reachable: npt.ArrayLike) -> int:
        ok = np.asarray(reachable, dtype=bool)
        for k in np.argsort(-values, kind="stable"):
            idx = int(e.placements[int(k)])
            if ok[idx]:
                return idx
        raise ValueError("the search found no placement the runtime's planner reaches")


# The beam pondered first in real time (``BeamPolicy.quick``): depth x width. About 20 ms of one
# core at level 20 HI against the full 16 x 80 beam's 51 ms (median; p99 213 ms, policy.bench),
# so its plan is on the wire when a busy machine leaves the full one too late; a search over the
# level's known pills, where the network it replaces played blind (a loaded run topped out at
# level 23 HI: a board full to row 3, 19 % of the pills the network's).
QUICK_BEAM = (6, 16)


class BeamPolicy:
    """policy.beam.BeamPlayer from the falling pill (its first ply played with the planner's
    own masks, policy.search.PlayedPly), on the pills of the state's reserve: the level's own
    when the tracker found its seed (docs/RUN.md "The level's pills"), else some seed's,
    which it plays as well as it can. ``depth`` x ``width``: the beam's (None: policy.beam's
    defaults). ``quick`` (real time): the same beam at :data:`QUICK_BEAM`, pondered first so
    its plan is on the wire when the full beam comes too late (hil.loop.decision); None for
    the quick one itself. A pill decided at its spawn in real time takes the ONNX network's
    choice (``choose_now``, ~2 ms), as does a placement the runtime's planner cannot reach."""

    name = "beam"

    def __init__(
        self,
        depth: int | None = None,
        width: int | None = None,
        *,
        net: OnnxPolicy | None = None,
        with_quick: bool = True,
    ) -> None:
        from policy.beam import BeamPlayer

        self.player = BeamPlayer() if depth is None or width is None else BeamPlayer(depth, width)
        self.net = net if net is not None else OnnxPolicy()
        self.quick = BeamPolicy(*QUICK_BEAM, net=self.net, with_quick=False) if with_quick else None
        # The next pill's choice worked out ahead (start_prefetch): the state it is for
        # (state_bytes) and its Future.
        self._planner: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._next: tuple[bytes, Future[int]] | None = None
        self.prefetch = PrefetchStats()

    def start_prefetch(self, planner: Any) -> None:
        """In real time: after each choice, work out the next pill's on a thread of its own.

        The level's pills are known (the reserve) and the engine is frame-exact, so the state
        at the next spawn follows from the placement chosen: its masks (``planner(game,
        prefix)``, the runtime's planner) played and settled (hil.loop.ponder.next_spawn, as
        the pondering does). Its choice then starts about a pill earlier than the loop asks
        for it (the loop ponders pill N + 1 from spawn N on, so the full beam had one pill's
        fall; on a loaded machine it came too late for 12-19 % of the pills). A choice asked
        for a state equal byte for byte to the one worked out takes that result (waiting for
        it when still running); it is the same as computing it then (the beam is
        deterministic), only earlier. ``planner``: hil.loop.decision.Planner."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="beam-ahead")
        self._planner = planner

    def stop_prefetch(self) -> None:
        """Stops the prefetch thread (a running search finishes; none waits for it)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def choose_now(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        """The network's choice (~2 ms): for a pill decided at its spawn in real time, which
        cannot wait the beam's ~100 ms."""
        return self.net.choose(game, reachable)

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        ok = np.asarray(reachable, dtype=bool)
        if not ok.any():
            raise ValueError("no placement to choose")
        idx = -1
        ahead, self._next = self._next, None
        if ahead is not None:
            if ahead[0] == bytes(game.state_bytes()):
                self.prefetch.hits += 1
                t0 = time.perf_counter()
                idx = ahead[1].result()  # (raises what the search raised)
                self.prefetch.waited_ms.append((time.perf_counter() - t0) * 1e3)
            else:
                ahead[1].cancel()
                self.prefetch.misses += 1
        if idx < 0:
            idx = self._beam(game)
        # (the runtime's planner may reach less than engine.plan: then the network chooses)
        if not ok[idx]:
            idx = self.net.choose(game, reachable)
        if self._pool is not None:
            self._ahead(game, idx)
        return idx

    def _beam(self, game: engine.Game) -> int:
        """The beam's placement from spawn state ``game`` (ValueError: nothing to place)."""
        from policy.search import PlayedPly

        first = PlayedPly(game, engine.plan(game))
        if len(first) == 0:
            raise ValueError("no placement to choose")
        e, k = self.player.choose(game, first)
        return int(e.placements[k])

    def _ahead(self, game: engine.Game, idx: int) -> None:
        """Starts the choice for the spawn after placement ``idx`` from ``game`` (none when
        the planner does not reach it, the pill does not lock, or the level ends first)."""
        plan = self._planner(game, np.zeros(0, np.uint8))
        if int(plan.status) != 0 or not np.asarray(plan.reachable, bool)[idx]:
            return
        got = next_spawn(game, plan.masks(idx))
        if got is None:
            return
        nxt = got[0]
        assert self._pool is not None
        self.prefetch.started += 1
        self._next = (bytes(nxt.state_bytes()), self._pool.submit(self._timed_beam, nxt))

    def _timed_beam(self, game: engine.Game) -> int:
        """_beam on the prefetch thread, its wall and CPU time (ms) kept for the summary."""
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return self._beam(game)
        finally:
            self.prefetch.work.append(
                ((time.perf_counter() - t0) * 1e3, (time.thread_time() - c0) * 1e3)
            )

    def choose_pairs(
        self, game: engine.Game, reachable: npt.ArrayLike, pairs: Any
    ) -> dict[tuple[int, int], int]:
        """The pondered pill's placement for every next pill of ``pairs``: the one chosen with
        the next pill of the state's reserve (the level's pills are known, not guessed), so
        the whole plan goes on the wire before the spawn."""
        idx = self.choose(game, reachable)
        return {(int(a), int(b)): idx for a, b in pairs}


@dataclass
class PrefetchStats:
    """BeamPolicy.start_prefetch's counts for the summary (``ponder.prefetch``): choices
    started ahead, asked for (``hits``: the state was the one worked out) or not (``misses``:
    another state was asked, after a quick choice played, a desync or a level's end), the
    wall time a hit still waited for its search (ms), and each search's wall and CPU time (ms;
    ``work_ms``: the pondering's ``work_ms.full`` of a hit is only the wait)."""

    started: int = 0
    hits: int = 0
    misses: int = 0
    waited_ms: list[float] = field(default_factory=list)
    work: list[tuple[float, float]] = field(default_factory=list)  # (wall ms, CPU ms)

    def summary(self) -> dict[str, Any]:
        w = np.asarray(self.waited_ms, float)
        work = np.asarray(self.work, float).reshape(-1, 2)

        def pct(a: Any, q: float) -> float:
            return round(float(np.percentile(a, q)), 2)

        return {
            "started": self.started,
            "hits": self.hits,
            "misses": self.misses,
            "work_ms": None
            if not len(work)
            else {
                "n": len(work),
                "wall_p50": pct(work[:, 0], 50),
                "wall_p99": pct(work[:, 0], 99),
                "cpu_p50": pct(work[:, 1], 50),
                "cpu_p99": pct(work[:, 1], 99),
            },
            "waited_ms": None
            if not len(w)
            else {
                "p50": pct(w, 50),
                "p99": pct(w, 99),
                "waited": int((w > 1.0).sum()),
            },
        }


class Handicapped:
    """``policy`` at a strength a person chooses (``hil run --versus --strength``, 1..5;
    policy.versus.STRENGTH_RANDOM, the same table as its matches): with that probability a
    pill's placement is a uniformly random reachable one instead. The draw is made from the
    pill's state (field, pill and next pill, frameCounter) and ``seed``, so a pill asked
    again (pondered, then re-planned, or the quick choice and the full one) gets the same
    answer. Strength 5 is the policy itself. Raises ValueError for a strength outside 1..5."""

    def __init__(self, policy: Policy, strength: int, seed: int = 0) -> None:
        from policy.versus import STRENGTH_RANDOM

        if strength not in STRENGTH_RANDOM:
            raise ValueError(f"strength must be 1..5, got {strength}")
        self.policy, self.strength, self.seed = policy, strength, seed
        self.p_random = STRENGTH_RANDOM[strength]
        self.name = policy.name if strength == 5 else f"{policy.name}@{strength}"
        self.choose_now = self._wrap(getattr(policy, "choose_now", policy.choose))
        mean = getattr(policy, "choose_mean", None)
        self.choose_mean = None if mean is None else self._wrap(mean)
        self.choose_pairs = None if getattr(policy, "choose_pairs", None) is None else self._pairs
        quick = getattr(policy, "quick", None)
        self.quick = None if quick is None else Handicapped(quick, strength, seed)

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        pick = self._random(game, reachable)
        return self.policy.choose(game, reachable) if pick is None else pick

    def _wrap(self, choose: Any) -> Any:
        def chosen(game: engine.Game, reachable: npt.ArrayLike, *more: Any) -> int:
            pick = self._random(game, reachable)
            return int(choose(game, reachable, *more)) if pick is None else pick

        return chosen

    def _pairs(
        self, game: engine.Game, reachable: npt.ArrayLike, pairs: Any
    ) -> dict[tuple[int, int], int]:
        choices: dict[tuple[int, int], int] = self.policy.choose_pairs(  # type: ignore[attr-defined]
            game, reachable, pairs
        )
        for a, b in pairs:
            seen = game.clone()
            seen.next_colors[:] = (a, b)
            pick = self._random(seen, reachable)
            if pick is not None:
                choices[(int(a), int(b))] = pick
        return choices

    def _random(self, game: engine.Game, reachable: npt.ArrayLike) -> int | None:
        """A random reachable placement with probability p_random, else None (see the class
        docstring)."""
        if self.p_random == 0:
            return None
        key = b"".join(
            np.asarray(a, np.uint8).tobytes()
            for a in (game.field, game.pill_colors, game.next_colors, game.frame_counter)
        )
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, zlib.crc32(key)])
        if rng.random() >= self.p_random:
            return None
        ok = np.flatnonzero(np.asarray(reachable, bool))
        if len(ok) == 0:
            raise ValueError("no placement to choose")
        return int(ok[int(rng.integers(len(ok)))])


def make_policy(name: str) -> Policy:
    """``heuristic``, ``onnx``, ``search``, ``search-attack`` or ``beam`` (the module
    docstring; search-attack for two players, beam for one). Raises ValueError for an unknown
    policy or one whose room is not installed."""
    if name == "heuristic":
        from hil.loop.heuristic import HeuristicPolicy

        return HeuristicPolicy()
    if name not in ("onnx", "search", "search-attack", "beam"):
        raise ValueError(
            f"unknown policy {name!r}; choose heuristic, onnx, search, search-attack or beam"
        )
    try:
        if name == "beam":
            return BeamPolicy()
        return OnnxPolicy() if name == "onnx" else SearchPolicy(attack=name == "search-attack")
    except ImportError as exc:
        raise ValueError(
            f"the {name} policy is not installed in this checkout ({exc}); use --policy heuristic"
        ) from None


def next_pill_observations(game: engine.Game, pairs: Any) -> list[Any]:
    """The policy's input (policy.features.SpawnInput) of ``game`` with each next pill
    colour pair of ``pairs`` ((0 yellow, 1 red, 2 blue) x 2)."""
    from policy.features import SpawnInput

    out = []
    for a, b in pairs:
        h = game.clone()
        h.next_colors[:] = (int(a), int(b))
        out.append(SpawnInput.from_game(h))
    return out


def onnx_reader_available() -> bool:
    """True when perception's ONNX BoardReader is installed."""
    import importlib.util

    try:
        return importlib.util.find_spec("perception.reader") is not None
    except (ImportError, ValueError):
        return False


def onnx_policy_available() -> bool:
    """True when the policy room's ONNX placement policy is installed."""
    import importlib.util

    try:
        return importlib.util.find_spec("policy.onnx_policy") is not None
    except (ImportError, ValueError):
        return False


def pick_reader(name: str, sim: bool) -> str:
    """``auto``: perception's ONNX reader whenever it is installed, in the simulator too (the
    same pixels-to-state path as on a rig); the oracle (ground truth) only in the simulator
    without it. Raises ValueError for a real capture without the ONNX reader or the oracle on a
    rig."""
    if name == "auto":
        if onnx_reader_available():
            return "onnx"
        if sim:
            return "oracle"
        raise ValueError("a real capture needs the ONNX board reader (perception), not installed")
    if name == "oracle" and not sim:
        raise ValueError("--reader oracle reads the simulated console's ground truth: sim only")
    return name


def pick_policy(name: str) -> str:
    """``auto``: the ONNX policy when installed, else hil's heuristic stand-in."""
    if name == "auto":
        return "onnx" if onnx_policy_available() else "heuristic"
    return name
