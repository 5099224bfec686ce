"""Where the frames of a game go: pills used, and per pill the fall and the settle.

    python -m policy.breakdown --policies teacher,onnx --episodes 20 [--seed-start 0x8000]

plays seeded level-20 HI games (by default; --level/--speed) with each policy, the same games
as policy.eval, and splits each cleared game's frames (engine frames since the level state was
made, as policy.eval counts them) into:

- intro: from the level state to the first spawn state (levelIntro_delay $80 frames, the first
  throw);
- fall: per pill, from its spawn state to its lock (the planner's lock frame: the fewest
  frames any inputs take to lock there, docs/PLANNER.md);
- settle: per pill, from the lock to the next spawn state (the lock clean-up, the clear and
  cascade rounds, the next throw: toPillPlacedStep $8C83, action_sendPill), split into the
  settle of a pill that clears nothing (`settle_base`, the median over such pills) and what the
  clears add on top (`settle_clear_extra`).

Prints JSON (per policy: medians over the cleared games, and per-pill medians) to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine import _core
from policy.play import (
    MAX_SETTLE_FRAMES,
    STAGE_CLEAR,
    TOP_OUT,
    Episode,
    Policy,
    at_spawn,
    episodes,
)


@dataclass
class Trace:
    """One game, pill by pill. fall[k]: frames from spawn k to its lock; settle[k]: frames from
    that lock to the next spawn state (or the terminal phase); rounds[k]: match rounds in that
    settle (0: nothing cleared); intro: frames to the first spawn; frames: the game's total."""

    intro: int = 0
    fall: list[int] = field(default_factory=list)
    settle: list[int] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)
    cleared: bool = False
    topped_out: bool = False
    frames: int = 0

    @property
    def pills(self) -> int:
        return len(self.fall)


def trace(policy: Policy, episode: Episode, max_frames: int = 100_000) -> Trace:
    """Plays `episode` as policy.play.play does and records every pill's fall and settle.
    The parts add up: intro + sum(fall) + sum(settle) == frames."""
    game = episode.game()
    t = Trace()
    t.intro = int(_core.settle(game, MAX_SETTLE_FRAMES)[0])
    while at_spawn(game) and int(game.frame) < max_frames:
        d = policy.act(game)
        game.run(d.masks)
        if not int(game.lock_event):
            raise ValueError(f"{policy.name}: placement {d.placement} did not lock")
        t.fall.append(len(d.masks))
        frames, rounds = _core.settle(game, MAX_SETTLE_FRAMES)
        t.settle.append(int(frames))
        t.rounds.append(int(rounds))
    t.frames = int(game.frame)
    t.cleared = int(game.phase) == STAGE_CLEAR
    t.topped_out = int(game.phase) == TOP_OUT
    return t


def summarize(traces: Sequence[Trace]) -> dict[str, Any]:
    """Medians over the cleared games (frames, pills, intro/fall/settle totals, settle split
    into the no-clear base and the clears' extra) and per-pill medians over all their pills."""
    done = [t for t in traces if t.cleared]
    out: dict[str, Any] = {
        "games": len(traces),
        "cleared": len(done),
        "top_outs": sum(t.topped_out for t in traces),
    }
    if not done:
        return out
    fall = np.concatenate([np.asarray(t.fall) for t in done])
    settle = np.concatenate([np.asarray(t.settle) for t in done])
    rounds = np.concatenate([np.asarray(t.rounds) for t in done])
    base = float(np.median(settle[rounds == 0])) if (rounds == 0).any() else 0.0

    def med(f: Any) -> float:
        return float(np.median([f(t) for t in done]))

    out.update(
        {
            "median_frames": med(lambda t: t.frames),
            "median_pills": med(lambda t: t.pills),
            "median_intro": med(lambda t: t.intro),
            "median_fall_total": med(lambda t: sum(t.fall)),
            "median_settle_total": med(lambda t: sum(t.settle)),
            "median_settle_base_total": med(lambda t: base * t.pills),
            "median_settle_clear_extra": med(lambda t: sum(t.settle) - base * t.pills),
            "median_clearing_pills": med(lambda t: sum(r > 0 for r in t.rounds)),
            "median_chain_pills": med(lambda t: sum(r > 1 for r in t.rounds)),
            "per_pill": {
                "fall_median": float(np.median(fall)),
                "fall_mean": float(fall.mean()),
                "settle_base": base,
                "settle_mean": float(settle.mean()),
                "settle_clear_mean": float(settle[rounds > 0].mean()) if (rounds > 0).any() else 0,
                "extra_per_round": float(
                    np.sum(settle[rounds > 0] - base) / max(1, int(rounds.sum()))
                ),
            },
        }
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from policy.eval import (
        Config,
        add_game_set_arguments,
        game_set_policies,
        make_policy,
    )

    ap = argparse.ArgumentParser(
        prog="python -m policy.breakdown", description=__doc__.split("\n")[0]
    )
    add_game_set_arguments(ap, "teacher,onnx", 20)
    args = ap.parse_args(argv)
    policies = game_set_policies(ap, args)
    cfg = Config(model=args.model, taps_only=False, max_frames=100_000)
    eps = list(episodes([args.level], [args.speed], args.episodes, args.seed_start))
    doc: dict[str, Any] = {"args": vars(args)}
    for name in policies:
        traces = [trace(make_policy(name, cfg, ep), ep) for ep in eps]
        doc[name] = summarize(traces)
        print(f"{name}: done", file=sys.stderr)
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
