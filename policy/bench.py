"""Policy timings as JSON: ONNX inference with masking per decision (one core), and the teacher.

    python -m policy.bench [--states 200] [--teacher-states 40] [--taps-only]
                           [--search-states 100] [--beam-states 40] [--beam-games 2]

States are spawn states of seeded games (levels 0, 5, 10, 15, 20 x LOW/MED/HI) reached by
playing random reachable placements. "onnx" times PlacementPolicy.choose (feature encoding,
onnxruntime with one intra-op thread, masking, argmax) given the planner's reachable set;
"teacher" times Teacher.search (its plans, engine play-outs and evaluation). Reported as
median, trimmed mean (10% cut each side), min, p99 and max in milliseconds, as opencv_zoo's
benchmark does; "plan" is one engine.plan per state, for scale. --search-states times the
play-time search (policy.search, with the network's prior), the teacher and the network
(each planning included: the whole decision) on level-20 HI states along the network's games.
--beam-states times policy.beam.BeamPlayer (its default size, the whole decision) on such
states (each from another game, so the player's cache of expansions, which serves the next
pill of one game, never hits). --beam-games times it as policy.eval and hil run use it: every
decision of whole level-20 HI games the beam plays itself (seeds from 0x7000), with its cache
and again on the same states with none (``reuse=False``).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import engine
from engine import _core
from policy.play import Episode, at_spawn, to_spawn


def spawn_states(count: int, seed: int = 0, first_seed: int = 0x4000) -> list[engine.Game]:
    """`count` spawn states from random play over levels 0, 5, 10, 15, 20 and all speeds; game
    n has the seed first_seed + 2n (training seeds: keep them below 0x8000)."""
    rng = np.random.default_rng(seed)
    states: list[engine.Game] = []
    cells = [(lv, sp) for lv in (0, 5, 10, 15, 20) for sp in (0, 1, 2)]
    game_no = 0
    while len(states) < count:
        lv, sp = cells[game_no % len(cells)]
        g = Episode(lv, sp, first_seed + 2 * game_no, game_no & 0xFF).game()
        game_no += 1
        to_spawn(g)
        for _ in range(int(rng.integers(0, 12))):
            if not at_spawn(g):
                break
            plan = _core.plan(g, taps_only=True)
            if len(plan) == 0:
                break
            g.run(plan.masks(int(plan.placements[int(rng.integers(len(plan)))])))
            to_spawn(g)
        if at_spawn(g):
            states.append(g)
    return states


def timing(fn: Callable[[Any], object], items: Sequence[Any], warmup: int = 5) -> dict[str, float]:
    """Median, 10%-trimmed mean, min, p99 and max of fn(item)'s wall time in milliseconds, and
    the median and p99 of its CPU time (this thread's: what one core takes when the machine is
    shared)."""
    for it in items[:warmup]:
        fn(it)
    ts = []
    cpu = []
    for it in items:
        c = time.thread_time()
        t = time.perf_counter()
        fn(it)
        ts.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.thread_time() - c) * 1e3)
    return _stats(ts, cpu)


def beam_size(beam: Any) -> str:
    """A BeamPlayer's size as the report names it: "DEPTH x WIDTH, scale SCALE"."""
    return f"{beam.depth} x {beam.width}, scale {beam.scale}"


def beam_game_timings(
    games: int, first_seed: int = 0x7000, depth: int | None = None, width: int | None = None
) -> dict[str, Any]:
    """policy.beam.BeamPlayer(depth, width)'s decisions (None: its default size) along `games`
    whole level-20 HI games it plays itself (game n: seed first_seed + 2n), timed in order
    with the player's cache of expansions (``beam_game_decision``), then on the same states
    with a player that keeps none (``beam_game_decision_no_reuse``). Also the cache's hits
    and misses."""
    from policy.beam import BeamPlayer

    shipped = BeamPlayer()
    beam = BeamPlayer(depth or shipped.depth, width or shipped.width)
    states: list[engine.Game] = []
    wall: list[float] = []
    cpu: list[float] = []
    for n in range(games):
        g = Episode(20, 2, first_seed + 2 * n, n & 0xFF).game()
        to_spawn(g)
        while at_spawn(g):
            states.append(g.clone())
            c, t = time.thread_time(), time.perf_counter()
            move = beam.act(g)
            wall.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.thread_time() - c) * 1e3)
            g.run(move.masks)
            to_spawn(g)
    return {
        "beam_games": games,
        "beam_game_size": beam_size(beam),
        "beam_game_decision": _stats(wall, cpu),
        "beam_cache_hits": beam.cache.hits,
        "beam_cache_misses": beam.cache.misses,
        "beam_game_decision_no_reuse": timing(
            BeamPlayer(beam.depth, beam.width, reuse=False).act, states, warmup=0
        ),
    }


def _stats(ts: Sequence[float], cpu: Sequence[float]) -> dict[str, float]:
    a = np.sort(np.asarray(ts))
    cut = len(a) // 10
    trimmed = a[cut : len(a) - cut] if len(a) > 2 * cut else a
    return {
        "median_ms": float(np.median(a)),
        "trimmed_mean_ms": float(trimmed.mean()),
        "min_ms": float(a[0]),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a[-1]),
        "cpu_median_ms": float(np.median(cpu)),
        "cpu_p99_ms": float(np.percentile(cpu, 99)),
        "n": len(a),
    }


def level20_states(
    count: int, seed: int = 0, first_seed: int = 0x7000, model: str | None = None
) -> list[engine.Game]:
    """`count` level-20 HI spawn states along games of the network `model` (None: the shipped
    one), 0-120 pills in: the boards the play-time search decides on. Game n has the seed
    first_seed + 2n (training seeds: keep them below 0x8000)."""
    from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

    rng = np.random.default_rng(seed)
    net = PlacementPolicy(model or DEFAULT_MODEL, threads=1)
    states: list[engine.Game] = []
    game_no = 0
    while len(states) < count:
        g = Episode(20, 2, first_seed + 2 * game_no, game_no & 0xFF).game()
        game_no += 1
        to_spawn(g)
        for _ in range(int(rng.integers(0, 120))):
            if not at_spawn(g):
                break
            g.run(net.act(g).masks)
            to_spawn(g)
        if at_spawn(g):
            states.append(g)
    return states


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policy.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--states", type=int, default=200)
    ap.add_argument("--teacher-states", type=int, default=40)
    ap.add_argument("--search-states", type=int, default=0, help="level-20 HI states for search")
    ap.add_argument("--beam-states", type=int, default=0, help="level-20 HI states for beam")
    ap.add_argument(
        "--beam-games", type=int, default=0, help="whole level-20 HI games the beam plays, timed"
    )
    ap.add_argument("--model", default=None, help="ONNX model (default policy/models/policy.onnx)")
    ap.add_argument("--taps-only", action="store_true", help="teacher plans with taps_only")
    args = ap.parse_args(argv)
    counts = (args.teacher_states, args.search_states, args.beam_states, args.beam_games)
    if args.states < 1 or min(counts) < 0:
        ap.error(
            "--states must be >= 1; --teacher-states, --search-states, --beam-states,"
            " --beam-games >= 0"
        )

    from policy.features import SpawnInput
    from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy
    from policy.teacher import Teacher

    states = spawn_states(args.states)
    plans = [_core.plan(g, taps_only=True) for g in states]
    inputs = [(SpawnInput.from_game(g), p.reachable) for g, p in zip(states, plans, strict=True)]
    policy = PlacementPolicy(args.model or DEFAULT_MODEL, threads=1)
    report: dict[str, Any] = {
        "onnx_decision": timing(lambda x: policy.choose(*x), inputs),
        "onnx_threads": 1,
    }
    if args.teacher_states:
        teacher = Teacher(taps_only=args.taps_only)
        sub = states[: args.teacher_states]
        report["teacher_decision"] = timing(teacher.search, sub, warmup=1)
        report["plan"] = timing(lambda g: _core.plan(g, taps_only=args.taps_only), sub, warmup=1)
        report["teacher_taps_only"] = args.taps_only
        report["teacher_beam"] = teacher.beam
    if args.search_states:
        from policy.search import SearchPlayer

        sub = level20_states(args.search_states, model=args.model)
        player = SearchPlayer(prior=policy)
        report["level20_states"] = len(sub)
        report["search_decision"] = timing(player.act, sub, warmup=1)
        report["teacher_decision_level20"] = timing(Teacher().act, sub, warmup=1)
        report["onnx_decision_level20"] = timing(policy.act, sub, warmup=1)
    if args.beam_states:
        from policy.beam import BeamPlayer

        beam = BeamPlayer()
        sub = level20_states(args.beam_states, seed=1, model=args.model)
        report["beam"] = beam_size(beam)
        report["beam_states"] = len(sub)
        report["beam_decision"] = timing(beam.act, sub, warmup=1)
    if args.beam_games:
        report.update(beam_game_timings(args.beam_games))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
