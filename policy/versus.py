"""Two-player (versus) matches between placement policies in the engine (engine.Versus).

    python -m policy.versus --p1 onnx --p2 search-attack --level1 10 --level2 10 --speed med \\
        --matches 40 --seed-start 0x8000 --workers 2 --out out/versus

plays `matches` seeded matches (first to 3 victories; a match's rounds continue its RNG with
Versus.next_round), prints a table (matches and rounds won by each, rounds won by a clear or by
the opponent's top-out, attacks sent each way, median frames a round) and writes versus.json
(every match, every round) and versus.png under --out.

Each player decides at each of its spawn states (nextAction action_sendPillFinished): the
policy plans on that player's engine.Game copy (Versus.player(i).game(), the current field with
whatever garbage has landed) and the planner's masks for its choice are fed one per frame to
that player's pad, both pads through Versus.step in the same frame. Garbage lands only in a
player's own clean-up after a lock (action_checkAttack), so a pill's plan stays valid until its
lock; the next decision plans on the field the garbage left. A match is fixed by (levels,
speeds, seed, frame_counter): a fresh policy object per match, its random draws seeded from
the match, so results do not depend on --workers (Ray via policy/parallel.py).

Strength (--strength1/--strength2, 1..5; docs/VERSUS.md "Players"): at each pill, with the
probability STRENGTH_RANDOM[s], a uniformly random reachable placement replaces the policy's
choice. 5 is the policy itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import engine
from engine import _core
from engine.constants import Phase
from engine.placement import at_spawn
from policy.play import Move, Policy, episode_seeds

POLICIES = ("random", "greedy", "onnx", "search", "search-attack")
SPEEDS = {"low": 0, "med": 1, "hi": 2}
SPEED_NAMES = {v: k for k, v in SPEEDS.items()}
# Probability that a pill's placement is a uniformly random reachable one instead of the policy's.
STRENGTH_RANDOM = {5: 0.0, 4: 0.1, 3: 0.25, 2: 0.5, 1: 0.75}
VERSUS_SEED_START = 0x8000
DEFAULT_ROUND_FRAMES = 40_000  # a round not decided by then is a time-out and ends the match
CHECK_ATTACK, PILL_PLACED = 2, 1  # nextAction values (engine/src/game.h)
ROUND_END = (int(Phase.ROUND_OVER), int(Phase.MATCH_OVER))


@dataclass(frozen=True)
class Match:
    """Which match: each player's level 0..20 and speed 0..2, the RNG state `seed` and
    frameCounter as the first round's levelIntro_delay begins (engine.Versus)."""

    level1: int
    speed1: int
    level2: int
    speed2: int
    seed: int
    frame_counter: int = 0

    def versus(self) -> engine.Versus:
        return engine.Versus(
            self.level1, self.speed1, self.level2, self.speed2, self.seed, self.frame_counter
        )


@dataclass
class Round:
    """One round. winner 0 (none: a draw or a time-out), 1 or 2. end: 'clear' (the winner's
    bottle emptied), 'top-out' (the loser topped out), 'draw' (both topped out) or
    'time-out'. frames: Versus frames from the round's start (intro included). pills,
    attacks, halves, lost, banked: per player (p1, p2): decisions made, attacks it sent
    (releases of 2+ onto the opponent), halves they dropped, halves above 4 that were lost,
    and the lines it banked in chains of 2+ (comboCounter added to attackSize)."""

    winner: int
    end: str
    frames: int
    pills: list[int] = field(default_factory=lambda: [0, 0])
    attacks: list[int] = field(default_factory=lambda: [0, 0])
    halves: list[int] = field(default_factory=lambda: [0, 0])
    lost: list[int] = field(default_factory=lambda: [0, 0])
    banked: list[int] = field(default_factory=lambda: [0, 0])


@dataclass
class MatchResult:
    """How one match went: the players ('name' or 'name@strength'), the match, winner 0/1/2
    (0: it ended on a time-out), victories (p1, p2), its rounds."""

    p1: str
    p2: str
    match: Match
    winner: int
    victories: tuple[int, int]
    rounds: list[Round]

    def as_dict(self) -> dict[str, Any]:
        return {
            "p1": self.p1,
            "p2": self.p2,
            **asdict(self.match),
            "winner": self.winner,
            "victories": list(self.victories),
            "rounds": [asdict(r) for r in self.rounds],
        }


class Mixed:
    """`policy` at strength `strength` (STRENGTH_RANDOM): with that probability a pill gets a
    uniformly random reachable placement instead (rng: numpy Generator, seeded per match)."""

    def __init__(self, policy: Policy, strength: int, rng: np.random.Generator) -> None:
        if strength not in STRENGTH_RANDOM:
            raise ValueError(f"strength must be 1..5, got {strength}")
        self.policy, self.strength, self.rng = policy, strength, rng
        self.p_random = STRENGTH_RANDOM[strength]
        self.name = policy.name if strength == 5 else f"{policy.name}@{strength}"

    def act(self, game: engine.Game) -> Move:
        if self.p_random > 0 and self.rng.random() < self.p_random:
            plan = _core.plan(game)
            idx = int(plan.placements[int(self.rng.integers(len(plan)))])
            return Move(idx, plan.masks(idx))
        return self.policy.act(game)


def _release_sizes(v: engine.Versus) -> tuple[int, int, int, int]:
    """Before a step: (n1, n2, b1, b2). n_i: the attackSize player i receives in this frame's
    action_checkAttack if it runs one (0 otherwise); b_i: the lines player i banks there.
    checkAttack [$9BEE]: the player banks its own comboCounter (2+), then takes the
    opponent's attackSize; p1's pass runs before p2's, so p2 takes what p1 holds after its
    own banking."""
    p1, p2 = v.p1, v.p2
    a1, a2 = int(p1.attack_size), int(p2.attack_size)
    b1 = b2 = n1 = n2 = 0
    if int(p1.next_action) == CHECK_ATTACK:
        c = int(p1.combo_counter)
        b1 = c if c >= 2 else 0
        n1 = a2
        a2 = 0 if a2 >= 2 else a2
    if int(p2.next_action) == CHECK_ATTACK:
        c = int(p2.combo_counter)
        b2 = c if c >= 2 else 0
        n2 = a1 + b1
    return n1, n2, b1, b2


def play_round(
    v: engine.Versus,
    players: Sequence[Policy],
    max_frames: int = DEFAULT_ROUND_FRAMES,
    on_step: Callable[[engine.Versus, engine.Versus], None] | None = None,
) -> Round:
    """Plays `v` (a round at its start) to ROUND_OVER or MATCH_OVER, or `max_frames` frames.
    on_step(before, after): called with a copy of the state before each frame and the state
    after it (for tests). Raises ValueError when a policy's masks do not lock its pill."""
    queue: list[list[int]] = [[], []]
    chosen = [0, 0]
    r = Round(winner=0, end="time-out", frames=0)
    won0 = v.victories
    start = int(v.frame)
    while int(v.phase) not in ROUND_END and int(v.frame) - start < max_frames:
        for i in range(2):
            if not queue[i]:
                g = v.player(i).game()
                if at_spawn(g):
                    move = players[i].act(g)
                    queue[i] = [int(m) for m in move.masks]
                    chosen[i] = move.placement
                    r.pills[i] += 1
        m1 = queue[0].pop(0) if queue[0] else 0
        m2 = queue[1].pop(0) if queue[1] else 0
        before = v.clone() if on_step is not None else None
        n1, n2, b1, b2 = _release_sizes(v)
        v.step(m1, m2)
        for i, (n, b) in enumerate(((n1, b1), (n2, b2))):
            r.banked[i] += b
            if n >= 2 and int(v.player(i).next_action) == PILL_PLACED:
                sender = 1 - i
                r.attacks[sender] += 1
                r.halves[sender] += min(n, 4)
                r.lost[sender] += max(0, n - 4)
        for i in range(2):  # the last mask of a plan must lock the pill
            if r.pills[i] and not queue[i] and chosen[i] >= 0:
                if not int(v.player(i).lock_event) and int(v.phase) == int(Phase.PLAYING):
                    name = players[i].name
                    raise ValueError(f"{name}: placement {chosen[i]} did not lock on its last mask")
                chosen[i] = -1
        if on_step is not None and before is not None:
            on_step(before, v)
    r.frames = int(v.frame) - start
    won1 = v.victories
    gained = [won1[0] - won0[0], won1[1] - won0[1]]
    if int(v.phase) not in ROUND_END:
        return r
    r.winner = 1 if gained[0] > gained[1] else 2 if gained[1] > gained[0] else 0
    if r.winner == 0:
        r.end = "draw"
    elif v.player(r.winner - 1).virus_left == 0:
        r.end = "clear"
    else:
        r.end = "top-out"
    return r


def play_match(
    players: Sequence[Policy],
    match: Match,
    max_round_frames: int = DEFAULT_ROUND_FRAMES,
    on_step: Callable[[engine.Versus, engine.Versus], None] | None = None,
) -> MatchResult:
    """Plays `match` to 3 victories (or a round's time-out) with players[0] on pad 1 and
    players[1] on pad 2. Each next round starts with Versus.next_round(frameCounter now)."""
    v = match.versus()
    rounds: list[Round] = []
    while True:
        r = play_round(v, players, max_round_frames, on_step)
        rounds.append(r)
        if r.end == "time-out" or int(v.phase) == int(Phase.MATCH_OVER):
            break
        v.next_round(int(v.frame_counter))
    winner = int(v.who_won) if int(v.phase) == int(Phase.MATCH_OVER) else 0
    return MatchResult(
        p1=players[0].name,
        p2=players[1].name,
        match=match,
        winner=winner,
        victories=(int(v.victories[0]), int(v.victories[1])),
        rounds=rounds,
    )


@dataclass(frozen=True)
class Config:
    """What every worker needs to build the players."""

    p1: str
    p2: str
    strength1: int = 5
    strength2: int = 5
    model: str | None = None
    attack: float | None = None  # AttackSearch.attack (None: its default)
    max_round_frames: int = DEFAULT_ROUND_FRAMES


def make_player(name: str, strength: int, cfg: Config, match: Match, index: int) -> Policy:
    """A fresh player for one match; its random draws are seeded from the match and pad."""
    rng = np.random.default_rng(
        [
            match.seed,
            match.frame_counter,
            match.level1,
            match.level2,
            match.speed1,
            match.speed2,
            index,
        ]
    )
    policy: Policy
    if name == "random":
        from policy.baselines import RandomPolicy

        policy = RandomPolicy(seed=int(rng.integers(1 << 31)))
    elif name == "greedy":
        from policy.baselines import greedy

        policy = greedy()
    elif name == "onnx":
        policy = _onnx(cfg.model)
    elif name == "search":
        from policy.search import SearchPlayer

        policy = SearchPlayer(prior=_onnx(cfg.model))
    elif name == "search-attack":
        from policy.search import AttackSearch

        policy = AttackSearch(prior=_onnx(cfg.model))
        if cfg.attack is not None:
            policy.attack = cfg.attack
    else:
        raise ValueError(f"unknown policy {name!r}")
    return policy if strength == 5 else Mixed(policy, strength, rng)


_ONNX: dict[str | None, Any] = {}


def _onnx(model: str | None) -> Any:
    if model not in _ONNX:  # one onnxruntime session per process
        from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

        _ONNX[model] = PlacementPolicy(model or DEFAULT_MODEL, threads=1)
    return _ONNX[model]


def _run(job: tuple[Match, Config]) -> MatchResult:
    match, cfg = job
    players = [
        make_player(cfg.p1, cfg.strength1, cfg, match, 0),
        make_player(cfg.p2, cfg.strength2, cfg, match, 1),
    ]
    return play_match(players, match, cfg.max_round_frames)


def matches(
    level1: int, speed1: int, level2: int, speed2: int, count: int, seed_start: int
) -> list[Match]:
    """`count` matches on even seeds from `seed_start`, frameCounter from the seed (as
    policy.play.episodes)."""
    return [
        Match(level1, speed1, level2, speed2, s, (s >> 1) & 0xFF)
        for s in episode_seeds(count, seed_start)
    ]


def run_matches(
    ms: Sequence[Match],
    cfg: Config,
    workers: int = 1,
    address: str | None = None,
    progress: bool = True,
) -> list[MatchResult]:
    """Every match (Ray tasks on `workers` CPUs, policy.parallel.ordered_list), in order."""
    from policy.parallel import ordered_list

    jobs = [(m, cfg) for m in ms]
    return ordered_list(_run, jobs, "matches", workers, address, progress)


def summarize(results: Sequence[MatchResult]) -> dict[str, Any]:
    """Totals over the matches: per player (p1, p2) matches won, rounds won, rounds won by a
    clear / by the opponent's top-out, attacks and halves sent; draws, time-outs, rounds,
    median frames a round, halves sent per round."""
    rounds = [r for m in results for r in m.rounds]
    frames = [r.frames for r in rounds if r.end != "time-out"]
    s: dict[str, Any] = {
        "matches": len(results),
        "rounds": len(rounds),
        "draws": sum(r.end == "draw" for r in rounds),
        "time_outs": sum(r.end == "time-out" for r in rounds),
        "median_round_frames": float(np.median(frames)) if frames else None,
        "players": [],
    }
    for i in range(2):
        w = i + 1
        s["players"].append(
            {
                "name": results[0].p1 if i == 0 and results else results[0].p2 if results else "",
                "matches_won": sum(m.winner == w for m in results),
                "rounds_won": sum(r.winner == w for r in rounds),
                "won_by_clear": sum(r.winner == w and r.end == "clear" for r in rounds),
                "won_by_top_out": sum(r.winner == w and r.end == "top-out" for r in rounds),
                "attacks": sum(r.attacks[i] for r in rounds),
                "halves": sum(r.halves[i] for r in rounds),
                "halves_per_round": (sum(r.halves[i] for r in rounds) / len(rounds))
                if rounds
                else 0.0,
                "pills": sum(r.pills[i] for r in rounds),
            }
        )
    return s


def print_table(s: dict[str, Any], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    t.add_column("pad")
    t.add_column("player", no_wrap=True)
    for c in ("matches won", "rounds won", "by clear", "by top-out", "attacks", "halves", "/round"):
        t.add_column(c, justify="right")
    n = max(1, s["matches"])
    for i, p in enumerate(s["players"]):
        t.add_row(
            f"p{i + 1}",
            p["name"],
            f"{p['matches_won']} ({100 * p['matches_won'] / n:.0f}%)",
            str(p["rounds_won"]),
            str(p["won_by_clear"]),
            str(p["won_by_top_out"]),
            str(p["attacks"]),
            str(p["halves"]),
            f"{p['halves_per_round']:.1f}",
        )
    med = s["median_round_frames"]
    t.caption = (
        f"{s['matches']} matches, {s['rounds']} rounds ({s['draws']} draws, "
        f"{s['time_outs']} time-outs); median frames a round: "
        + ("-" if med is None else f"{med:.0f}")
    )
    t.caption += ". attacks: releases of 2+ halves sent to the opponent; halves: their halves."
    Console(width=max(100, Console().width)).print(t)


def plot(results: Sequence[MatchResult], s: dict[str, Any], path: Path, title: str) -> None:
    """Left: rounds won by each player, split into clears and the opponent's top-outs, with
    matches won on top. Right: halves each player sent per round (histogram)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.5))
    names = [f"p{i + 1} {p['name']}" for i, p in enumerate(s["players"])]
    clears = [p["won_by_clear"] for p in s["players"]]
    tops = [p["won_by_top_out"] for p in s["players"]]
    x = np.arange(2)
    ax1.bar(x, clears, color="tab:green", label="by clearing its bottle")
    ax1.bar(x, tops, bottom=clears, color="tab:red", label="by the opponent's top-out")
    for i, p in enumerate(s["players"]):
        ax1.text(
            i,
            clears[i] + tops[i],
            f"{p['matches_won']} of {s['matches']} matches",
            ha="center",
            va="bottom",
        )
    ax1.set_xticks(x, names)
    ax1.set(ylabel="rounds won", title="rounds won")
    ax1.set_ylim(0, 1.2 * max(1, *(c + t for c, t in zip(clears, tops, strict=True))))
    ax1.legend(fontsize=8)
    rounds = [r for m in results for r in m.rounds]
    bins = np.arange(-0.5, max([0] + [max(r.halves) for r in rounds]) + 1.5, 1)
    for i in range(2):
        ax2.hist([r.halves[i] for r in rounds], bins=bins, alpha=0.6, label=names[i])
    ax2.set(xlabel="halves sent in the round", ylabel="rounds", title="attacks per round")
    ax2.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_speed(text: str) -> int:
    t = text.strip().lower()
    if t in SPEEDS:
        return SPEEDS[t]
    if t in ("0", "1", "2"):
        return int(t)
    raise ValueError(f"speed must be low, med, hi or 0-2, got {text!r}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m policy.versus", description=(__doc__ or "").split("\n")[0]
    )
    ap.add_argument("--p1", default="onnx", help=f"pad 1's policy: {', '.join(POLICIES)}")
    ap.add_argument("--p2", default="search-attack", help="pad 2's policy (same choices)")
    ap.add_argument("--level1", type=int, default=10, help="p1's level 0..20")
    ap.add_argument("--level2", type=int, default=10, help="p2's level 0..20")
    ap.add_argument("--speed", default=None, help="both players' speed: low, med, hi or 0-2")
    ap.add_argument("--speed1", default="med", help="p1's speed (default med)")
    ap.add_argument("--speed2", default="med", help="p2's speed (default med)")
    ap.add_argument("--strength1", type=int, default=5, help="p1's strength 1..5 (5: full)")
    ap.add_argument("--strength2", type=int, default=5, help="p2's strength 1..5 (5: full)")
    ap.add_argument("--matches", type=int, default=10)
    ap.add_argument("--seed-start", type=lambda s: int(s, 0), default=VERSUS_SEED_START)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Ray CPUs")
    ap.add_argument("--address", default=None, help="a running Ray cluster (default: local)")
    ap.add_argument("--model", default=None, help="ONNX model (default policy/models/policy.onnx)")
    ap.add_argument(
        "--attack",
        type=float,
        default=None,
        help="search-attack's frames per half sent (default AttackSearch's)",
    )
    ap.add_argument("--max-round-frames", type=int, default=DEFAULT_ROUND_FRAMES)
    ap.add_argument("--out", default="out/versus", help="folder for versus.json and versus.png")
    ap.add_argument("--no-progress", action="store_true")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:  # argparse's own errors print usage and exit 2 already
        return int(e.code) if isinstance(e.code, int) else 2
    try:
        for flag in ("p1", "p2"):
            name = getattr(args, flag).strip().lower()
            if name not in POLICIES:
                raise ValueError(f"--{flag} must be one of {', '.join(POLICIES)}, got {name!r}")
            setattr(args, flag, name)
        for flag in ("level1", "level2"):
            if not 0 <= getattr(args, flag) <= 20:
                raise ValueError(f"--{flag} must be 0..20, got {getattr(args, flag)}")
        speed1 = parse_speed(args.speed if args.speed is not None else args.speed1)
        speed2 = parse_speed(args.speed if args.speed is not None else args.speed2)
        for flag in ("strength1", "strength2"):
            if getattr(args, flag) not in STRENGTH_RANDOM:
                raise ValueError(f"--{flag} must be 1..5, got {getattr(args, flag)}")
        if args.matches < 1:
            raise ValueError(f"--matches must be >= 1, got {args.matches}")
        if args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        if not 0 <= args.seed_start <= 0xFFFF:
            raise ValueError(f"--seed-start must be 0..0xFFFF, got {args.seed_start:#x}")
        if args.max_round_frames < 1:
            raise ValueError(f"--max-round-frames must be >= 1, got {args.max_round_frames}")
        if args.attack is not None and args.attack < 0:
            raise ValueError(f"--attack must be >= 0, got {args.attack}")
    except ValueError as e:
        print(f"policy.versus: {e}", file=sys.stderr)
        return 2
    cfg = Config(
        p1=args.p1,
        p2=args.p2,
        strength1=args.strength1,
        strength2=args.strength2,
        model=args.model,
        attack=args.attack,
        max_round_frames=args.max_round_frames,
    )
    ms = matches(args.level1, speed1, args.level2, speed2, args.matches, args.seed_start)
    try:
        results = run_matches(ms, cfg, args.workers, args.address, not args.no_progress)
    except (ImportError, FileNotFoundError) as e:
        print(f"policy.versus: {e}", file=sys.stderr)
        return 2
    s = summarize(results)
    title = (
        f"policy.versus: p1 level {args.level1} {SPEED_NAMES[speed1]}, "
        f"p2 level {args.level2} {SPEED_NAMES[speed2]}"
    )
    print_table(s, title)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recorded = {k: v for k, v in vars(args).items() if k != "no_progress"}
    recorded["speed1"], recorded["speed2"] = SPEED_NAMES[speed1], SPEED_NAMES[speed2]
    if "search-attack" in (args.p1, args.p2):
        from policy.search import AttackSearch

        recorded["attack"] = args.attack if args.attack is not None else AttackSearch().attack
    doc = {"args": recorded, "summary": s, "matches": [m.as_dict() for m in results]}
    (out / "versus.json").write_text(json.dumps(doc, indent=1))
    plot(results, s, out / "versus.png", title)
    print(f"wrote {out / 'versus.json'} and {out / 'versus.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
