"""Pondering: the next decision computed while the current pill falls.

At spawn state N the policy has chosen placement N and its masks. The engine is frame-exact,
so the state at spawn N+1 is known then, with one exception the player cannot see: the
colours of pill N+2, which the next preview shows only after the throw of pill N+1
(action_sendPill calls generateNextPill $8E9D). Every decision policy here reads them (the
teacher's second ply, the network's `extras`), so `Ponder` decides pill N+1 once for each of
the 9 ordered colour pairs pill N+2 can have; at spawn N+1 the pair on screen picks the
decision, with no work left after the spawn.

    ponder = Ponder(policy)
    ahead = ponder.ahead(game_at_spawn, decision)   # during pill N's fall
    ahead.predicted                                  # engine.Game at spawn N+1 (N+2's colours as
                                                     #   the engine has them)
    d = ahead.decision(next_colors)                  # at spawn N+1: the placement and masks
    ahead.matches(observed_game)                     # the tracker's check: same spawn state?

`python -m policy.ponder` plays seeded games this way and prints JSON: the margin in frames
between the moment the next decision is ready and the next spawn (pondering on one core of
its own: its CPU time; and its wall time on this machine), and the check that every
predicted spawn state equals the one the game reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from policy.play import (
    COLOUR_PAIRS_ORDERED,
    MAX_SETTLE_FRAMES,
    Episode,
    Move,
    Policy,
    at_spawn,
    episodes,
    to_spawn,
)

NTSC_FPS = 60.0988  # NES NTSC frame rate (frames per second)


def predict(game: engine.Game, decision: Move) -> tuple[engine.Game, int, int]:
    """(state at the next spawn, frames from `game` to the lock, frames from the lock to the
    next spawn) when `decision` is played from spawn state `game` (not changed): its masks
    stepped frame by frame, then no buttons until the next spawn state or a terminal phase
    (engine._core.settle). Raises ValueError when the masks do not lock the pill."""
    g = game.clone()
    g.run(decision.masks)
    if not int(g.lock_event):
        raise ValueError(f"placement {decision.placement} did not lock on its last mask")
    settle = to_spawn(g)
    if settle >= MAX_SETTLE_FRAMES:
        raise ValueError("the game did not reach a spawn state after the lock")
    return g, len(decision.masks), settle


@dataclass
class Ahead:
    """The decisions for pill N+1 made during pill N's fall.

    predicted: the engine state at spawn N+1 (engine.Game). fall, settle: frames from spawn N
    to the lock, and from the lock to spawn N+1. decisions: per ordered colour pair of pill
    N+2 (colour codes 0-2), the policy's Move at spawn N+1; empty when the game ends at
    this lock (stage clear or top-out). seconds: wall time spent deciding (all pairs);
    cpu_seconds: the CPU time of that work (this thread's: what one core of its own takes
    when the machine is shared)."""

    predicted: engine.Game
    fall: int
    settle: int
    decisions: dict[tuple[int, int], Move] = field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0

    @property
    def window(self) -> int:
        """Frames from spawn N to spawn N+1 (the time there is to ponder)."""
        return self.fall + self.settle

    def margin(self, decided_after: float = 0.0, wall: bool = False) -> float:
        """Frames between the moment the decisions are ready and spawn N+1, when pondering
        starts `decided_after` seconds after spawn N (the time decision N took, 0 when it was
        itself pondered), on one core of its own (CPU time; wall=True: the wall time)."""
        spent = self.seconds if wall else self.cpu_seconds
        return self.window - (decided_after + spent) * NTSC_FPS

    def decision(self, next_colors: Sequence[int] | npt.ArrayLike) -> Move:
        """The decision for the colours of pill N+2 seen at spawn N+1. KeyError when no
        decision was made (the game ended) or the colours are out of 0..2."""
        a, b = (int(c) for c in np.asarray(next_colors).reshape(2))
        return self.decisions[(a, b)]

    def matches(self, game: engine.Game) -> bool:
        """True when `game` (the real spawn N+1 state) is the predicted one, byte for byte."""
        return bytes(game.state_bytes()) == bytes(self.predicted.state_bytes())


class Ponder:
    """Computes pill N+1's decision during pill N's fall with any policy (policy.play.Policy)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def ahead(self, game: engine.Game, decision: Move) -> Ahead:
        """Predicts spawn N+1 from spawn state `game` and the chosen `decision`, and decides
        there for every colour pair of pill N+2 (with the policy's `act_pairs(game, pairs)`
        when it has one: the same decisions, work shared between the pairs; else `act` per
        pair). `game` is not changed."""
        t = time.perf_counter()
        c = time.thread_time()
        g, fall, settle = predict(game, decision)
        out = Ahead(g, fall, settle)
        if at_spawn(g):
            many = getattr(self.policy, "act_pairs", None)
            if many is not None:  # a policy that shares work between the pairs (the search)
                out.decisions = dict(many(g, COLOUR_PAIRS_ORDERED))
            else:
                for pair in COLOUR_PAIRS_ORDERED:
                    h = g.clone()
                    h.next_colors[:] = pair
                    out.decisions[pair] = self.policy.act(h)
        out.seconds = time.perf_counter() - t
        out.cpu_seconds = time.thread_time() - c
        return out


@dataclass
class PonderStats:
    """One pondered game: the margins (frames) and whether every prediction held."""

    margins: list[float] = field(default_factory=list)
    wall_margins: list[float] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    mismatches: int = 0
    cleared: bool = False
    frames: int = 0


def play_pondered(policy: Policy, episode: Episode, max_frames: int = 100_000) -> PonderStats:
    """Plays `episode` deciding every pill after the first during the previous pill's fall;
    the real game is stepped by its own masks and compared with each prediction."""
    game = episode.game()
    to_spawn(game)
    ponder = Ponder(policy)
    st = PonderStats()
    decision = policy.act(game) if at_spawn(game) else None
    while decision is not None and int(game.frame) < max_frames:
        ahead = ponder.ahead(game, decision)
        game.run(decision.masks)
        to_spawn(game)
        st.mismatches += not ahead.matches(game)
        if not at_spawn(game):
            break
        st.margins.append(ahead.margin())
        st.wall_margins.append(ahead.margin(wall=True))
        st.windows.append(ahead.window)
        st.seconds.append(ahead.seconds)
        st.cpu_seconds.append(ahead.cpu_seconds)
        decision = ahead.decision(game.next_colors)
    st.cleared = int(game.phase) == int(engine.Phase.STAGE_CLEAR)
    st.frames = int(game.frame)
    return st


def main(argv: Sequence[str] | None = None) -> int:
    from policy.eval import (
        Config,
        add_game_set_arguments,
        game_set_policies,
        make_policy,
    )

    ap = argparse.ArgumentParser(prog="python -m policy.ponder", description=__doc__.split("\n")[0])
    add_game_set_arguments(ap, "teacher", 5)
    args = ap.parse_args(argv)
    policies = game_set_policies(ap, args)
    cfg = Config(model=args.model, taps_only=False, max_frames=100_000)
    doc: dict[str, Any] = {"args": vars(args), "fps": NTSC_FPS}
    for name in policies:
        stats = [
            play_pondered(make_policy(name, cfg, ep), ep)
            for ep in episodes([args.level], [args.speed], args.episodes, args.seed_start)
        ]
        m = np.concatenate([np.asarray(s.margins) for s in stats])
        mw = np.concatenate([np.asarray(s.wall_margins) for s in stats])
        w = np.concatenate([np.asarray(s.windows) for s in stats])
        sec = np.concatenate([np.asarray(s.seconds) for s in stats]) * 1000
        cpu = np.concatenate([np.asarray(s.cpu_seconds) for s in stats]) * 1000
        doc[name] = {
            "games": len(stats),
            "cleared": sum(s.cleared for s in stats),
            "decisions": int(m.size),
            "mismatches": sum(s.mismatches for s in stats),
            "margin_frames_one_core": {
                "min": float(m.min()),
                "p1": float(np.percentile(m, 1)),
                "median": float(np.median(m)),
                "late": int((m < 0).sum()),
            },
            "margin_frames_wall": {
                "min": float(mw.min()),
                "p1": float(np.percentile(mw, 1)),
                "median": float(np.median(mw)),
                "late": int((mw < 0).sum()),
            },
            "window_frames": {"min": int(w.min()), "median": float(np.median(w))},
            "ponder_cpu_ms_all_pairs": {
                "p50": float(np.median(cpu)),
                "p99": float(np.percentile(cpu, 99)),
                "max": float(cpu.max()),
            },
            "ponder_wall_ms_all_pairs": {
                "p50": float(np.median(sec)),
                "p99": float(np.percentile(sec, 99)),
                "max": float(sec.max()),
            },
        }
        print(f"{name}: done", file=sys.stderr)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
