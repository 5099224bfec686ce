"""Seeded evaluation of placement policies through the engine.

    python -m policy.eval --levels 0-20 --speeds low,med,hi --episodes 20 --out out/eval

plays `episodes` games per (level, speed) for each policy (random, greedy, teacher, onnx,
onnx-survive: the network that never picks a placement topping out at once while another
lives, policy.onnx_policy.first_surviving, as hil run's onnx, and search: the play-time 3-ply
search with the network's prior, policy/search.py),
prints a table (clear rate, p10, median and p90 frames to clear, top-outs; the human record
below the levels that have one: level 20 HI, 123.57 s), and writes
eval.json and eval.png under --out. A game is fixed by (level, speed, seed, frameCounter);
seeds are even and start at --seed-start (0x8000 by default: policy.train draws its games
below 0x8000, so evaluation games are never training games). Results do not depend on
--workers: each game is played by a fresh policy object seeded from the game. Games run as
Ray tasks (policy/parallel.py: a local Ray instance with --workers CPUs, or the cluster at
--address); --workers 1 plays them in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from policy.play import DEFAULT_MAX_FRAMES, Episode, Policy, Result, episodes, play

POLICIES = (
    "random",
    "greedy",
    "teacher",
    "onnx",
    "onnx-survive",
    "search",
    "search-late5",
    "search-ponder",
    "beam",
)
DEFAULT_POLICIES = ("random", "greedy", "teacher", "onnx")
SPEEDS = {"low": 0, "med": 1, "hi": 2}
SPEED_NAMES = {v: k for k, v in SPEEDS.items()}
EVAL_SEED_START = 0x8000
NTSC_FPS = 60.0988  # NES NTSC frames per second
# The human records the table sets policies against (level, speed) -> seconds: level 20 HI in
# 123.57 s, the record issue 37 quotes (docs/POLICY.md), 7,426 frames at NTSC_FPS.
HUMAN_RECORDS_S: dict[tuple[int, int], float] = {(20, 2): 123.57}


@dataclass(frozen=True)
class Config:
    """What every worker needs to build the policies."""

    model: str | None
    taps_only: bool
    max_frames: int
    search_beam3: int | None = None  # None: SearchPlayer's default
    search_width3: int | None = None
    beam_depth: int | None = None  # None: BeamPlayer's default
    beam_width: int | None = None
    beam_scale: float | None = None


def parse_levels(text: str) -> list[int]:
    """'0-20' or '0,5,10' or '3-5,20' -> sorted levels; ValueError when out of 0..24."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"levels must look like 0-20 or 0,5,10, got {text!r}") from None
        if not (0 <= a <= b <= 24):
            raise ValueError(f"levels must be within 0..24 (low-high), got {part!r}")
        out.update(range(a, b + 1))
    if not out:
        raise ValueError("no level given")
    return sorted(out)


def parse_speeds(text: str) -> list[int]:
    """'low,med,hi' -> [0, 1, 2]; ValueError on an unknown name."""
    out = []
    for part in text.split(","):
        name = part.strip().lower()
        if name not in SPEEDS:
            raise ValueError(f"speeds must be among low, med, hi, got {part!r}")
        out.append(SPEEDS[name])
    return sorted(set(out))


def parse_policies(text: str) -> list[str]:
    out = [p.strip().lower() for p in text.split(",") if p.strip()]
    bad = [p for p in out if p not in POLICIES]
    if bad or not out:
        raise ValueError(f"policies must be among {', '.join(POLICIES)}, got {text!r}")
    return out


def add_game_set_arguments(ap: argparse.ArgumentParser, policies: str, episodes: int) -> None:
    """The arguments of a tool that plays one level's set of games with some policies
    (policy.breakdown, policy.ponder): --policies, --level, --speed, --episodes, --seed-start,
    --model; :func:`game_set_policies` checks them."""
    ap.add_argument("--policies", default=policies)
    ap.add_argument("--level", type=int, default=20)
    ap.add_argument("--speed", type=int, default=2, help="0 LOW, 1 MED, 2 HI")
    ap.add_argument("--episodes", type=int, default=episodes)
    ap.add_argument("--seed-start", type=lambda s: int(s, 0), default=0x8000)
    ap.add_argument("--model", default=None)


def game_set_policies(ap: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The policies of :func:`add_game_set_arguments`' arguments, checked: a bad name, level,
    speed or episode count ends the tool through ``ap.error`` (one line, exit code 2)."""
    try:
        policies = parse_policies(args.policies)
        if not (0 <= args.level <= 24 and 0 <= args.speed <= 2 and args.episodes >= 1):
            raise ValueError("--level 0..24, --speed 0..2, --episodes >= 1")
    except ValueError as e:
        ap.error(str(e))
    return policies


def make_policy(name: str, cfg: Config, episode: Episode) -> Policy:
    """A fresh policy for one game (the random baseline is seeded from the game)."""
    if name == "random":
        from policy.baselines import RandomPolicy

        seed = (episode.level * 3 + episode.speed) << 16 | episode.seed
        return RandomPolicy(seed=seed, taps_only=cfg.taps_only)
    if name == "greedy":
        from policy.baselines import greedy

        return greedy(taps_only=cfg.taps_only)
    if name == "teacher":
        from policy.teacher import Teacher

        return Teacher(taps_only=cfg.taps_only)
    if name == "onnx":
        return _onnx_policy(cfg)
    if name == "onnx-survive":
        return _onnx_policy(cfg, survive=True)
    if name in ("search", "search-late5", "search-ponder"):
        from policy.search import LateSearch, PonderedSearch, SearchPlayer

        player = SearchPlayer(prior=_onnx_policy(cfg), taps_only=cfg.taps_only)
        if cfg.search_beam3 is not None:
            player.beam3 = cfg.search_beam3
        if cfg.search_width3 is not None:
            player.width3 = cfg.search_width3
        if name == "search-late5":
            return LateSearch(player, 5)
        if name == "search-ponder":
            return PonderedSearch(player)
        return player
    if name == "beam":
        from policy.beam import BeamPlayer

        shipped = BeamPlayer()
        return BeamPlayer(
            depth=cfg.beam_depth or shipped.depth,
            width=cfg.beam_width or shipped.width,
            scale=cfg.beam_scale or shipped.scale,
            taps_only=cfg.taps_only,
        )
    raise ValueError(f"unknown policy {name!r}")


_ONNX: dict[tuple[str | None, bool, bool], Any] = {}


def _onnx_policy(cfg: Config, survive: bool = False) -> Policy:
    key = (cfg.model, cfg.taps_only, survive)
    if key not in _ONNX:  # one onnxruntime session per process
        from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

        _ONNX[key] = PlacementPolicy(
            cfg.model or DEFAULT_MODEL, threads=1, taps_only=cfg.taps_only, survive=survive
        )
    policy: Policy = _ONNX[key]
    return policy


def _run(job: tuple[str, Episode, Config]) -> tuple[str, Result]:
    name, episode, cfg = job
    return name, play(make_policy(name, cfg, episode), episode, max_frames=cfg.max_frames)


def run_jobs(
    jobs: Sequence[tuple[str, Episode, Config]],
    workers: int,
    progress: bool = True,
    address: str | None = None,
) -> list[tuple[str, Result]]:
    """Plays every job (Ray tasks on `workers` local CPUs when > 1, or on the Ray cluster at
    `address`; policy.parallel.ordered_list); results in job order."""
    from policy.parallel import ordered_list

    return ordered_list(_run, jobs, "games", workers, address, progress)


def summarize(results: Sequence[tuple[str, Result]]) -> list[dict[str, Any]]:
    """One row per (policy, level, speed): games, clear rate, p10/median/p90 frames to clear
    (over cleared games; None when none cleared), top-outs, time-outs, median pills."""
    groups: dict[tuple[str, int, int], list[Result]] = {}
    for name, r in results:
        groups.setdefault((name, r.level, r.speed), []).append(r)
    rows = []
    for (name, level, speed), rs in groups.items():
        frames = np.array([r.frames for r in rs if r.cleared], dtype=np.float64)
        rows.append(
            {
                "policy": name,
                "level": level,
                "speed": SPEED_NAMES[speed],
                "games": len(rs),
                "clear_rate": sum(r.cleared for r in rs) / len(rs),
                "p10_frames": float(np.percentile(frames, 10)) if frames.size else None,
                "median_frames": float(np.median(frames)) if frames.size else None,
                "p90_frames": float(np.percentile(frames, 90)) if frames.size else None,
                "top_outs": sum(r.topped_out for r in rs),
                "time_outs": sum(not r.cleared and not r.topped_out for r in rs),
                "median_pills": float(np.median([r.pills for r in rs])),
            }
        )
    return rows


def human_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The human records (HUMAN_RECORDS_S) of the (level, speed) pairs in ``rows``, one row each
    in the table's shape: policy "human record", its frames (seconds x NTSC_FPS) as the median,
    the other columns None."""
    shown = {(r["level"], SPEEDS[r["speed"]]) for r in rows}
    return [
        {
            "policy": "human record",
            "level": level,
            "speed": SPEED_NAMES[speed],
            "seconds": seconds,
            "median_frames": float(round(seconds * NTSC_FPS)),
        }
        for (level, speed), seconds in sorted(HUMAN_RECORDS_S.items())
        if (level, speed) in shown
    ]


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    """The summary rows as a table, each (level, speed)'s human record (:func:`human_rows`)
    below them."""
    from rich.console import Console
    from rich.table import Table

    def cell(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    table = Table(title="policy.eval: frames to clear (since the level state was made)")
    for col in ("policy", "level", "speed", "games", "clear %", "p10", "median", "p90", "top-outs"):
        left = col in ("policy", "speed")
        table.add_column(col, justify="left" if left else "right", no_wrap=col == "policy")
    for r in [*rows, *human_rows(rows)]:
        table.add_row(
            r["policy"],
            str(r["level"]),
            r["speed"],
            cell(r.get("games"), "d"),
            cell(None if r.get("clear_rate") is None else 100 * r["clear_rate"], ".1f"),
            cell(r.get("p10_frames"), ".0f"),
            cell(r.get("median_frames"), ".0f"),
            cell(r.get("p90_frames"), ".0f"),
            cell(r.get("top_outs"), "d"),
        )
    Console().print(table)


def plot(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Clear rate and median frames to clear against level, one line per policy and speed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = {"low": ":", "med": "--", "hi": "-"}
    keys = sorted({(r["policy"], r["speed"]) for r in rows}, key=lambda k: (k[0], SPEEDS[k[1]]))
    for policy, speed in keys:
        sel = sorted(
            (r for r in rows if r["policy"] == policy and r["speed"] == speed),
            key=lambda r: r["level"],
        )
        lv = [r["level"] for r in sel]
        label = f"{policy} {speed}"
        ax1.plot(lv, [100 * r["clear_rate"] for r in sel], styles[speed], marker="o", label=label)
        med = [np.nan if r["median_frames"] is None else r["median_frames"] for r in sel]
        ax2.plot(lv, med, styles[speed], marker="o", label=label)
    for h in human_rows(rows):
        ax2.plot([h["level"]], [h["median_frames"]], "k*", markersize=10)
        ax2.annotate(f"human record ({h['speed']})", (h["level"], h["median_frames"]), fontsize=7)
    ax1.set(xlabel="level", ylabel="clear rate (%)", ylim=(-2, 102), title="games cleared")
    ax2.set(xlabel="level", ylabel="frames", title="median frames to clear")
    ax1.grid(alpha=0.3)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def evaluate(
    policies: Sequence[str],
    levels: Sequence[int],
    speeds: Sequence[int],
    count: int,
    cfg: Config,
    seed_start: int = EVAL_SEED_START,
    workers: int = 1,
    progress: bool = True,
    address: str | None = None,
) -> tuple[list[tuple[str, Result]], list[dict[str, Any]]]:
    """(per-game results, summary rows) for `count` seeded games per (policy, level, speed)."""
    eps = list(episodes(levels, speeds, count, seed_start))
    jobs = [(name, ep, cfg) for name in policies for ep in eps]
    results = run_jobs(jobs, workers, progress, address)
    return results, summarize(results)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policy.eval", description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="0-20", help="e.g. 0-20 or 0,10,20 (default 0-20)")
    ap.add_argument("--speeds", default="low,med,hi", help="low,med,hi (default all)")
    ap.add_argument("--episodes", type=int, default=10, help="games per level and speed")
    ap.add_argument(
        "--policies",
        default=",".join(DEFAULT_POLICIES),
        help="among random,greedy,teacher,onnx,onnx-survive,search,search-late5,search-ponder,beam"
        " (default: the first four; onnx-survive: the network with hil run's survival rule;"
        " search-late5 and search-ponder: the search as the live loop decides, 5"
        " frames after the spawn or pondered without the next pill; beam: a beam search over the"
        " pills the reserve will throw, docs/POLICY.md)",
    )
    ap.add_argument("--model", default=None, help="ONNX model (default policy/models/policy.onnx)")
    ap.add_argument("--out", default="out/eval", help="folder for eval.json and eval.png")
    ap.add_argument("--seed-start", type=lambda s: int(s, 0), default=EVAL_SEED_START)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Ray CPUs")
    ap.add_argument("--address", default=None, help="a running Ray cluster (default: local)")
    ap.add_argument("--max-frames", type=int, default=DEFAULT_MAX_FRAMES)
    ap.add_argument("--taps-only", action="store_true", help="plan with taps_only (not exact)")
    ap.add_argument(
        "--search-beam3",
        type=int,
        default=None,
        help="the search's third-ply children (default policy.search.SearchPlayer's, 12)",
    )
    ap.add_argument(
        "--search-width3",
        type=int,
        default=None,
        help="the search's third-ply grandchildren per child (default SearchPlayer's, 4)",
    )
    ap.add_argument(
        "--beam-depth", type=int, default=None, help="the beam's pills (default BeamPlayer's, 16)"
    )
    ap.add_argument(
        "--beam-width",
        type=int,
        default=None,
        help="the beam's states per pill (default BeamPlayer's, 80)",
    )
    ap.add_argument(
        "--beam-scale",
        type=float,
        default=None,
        help="the board's terms against the frames in the beam's leaf values, > 0 (default"
        " BeamPlayer's, 0.5)",
    )
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        levels = parse_levels(args.levels)
        speeds = parse_speeds(args.speeds)
        policies = parse_policies(args.policies)
        if args.episodes < 1:
            raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
        if args.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        for flag in ("search_beam3", "search_width3", "beam_depth", "beam_width"):
            v = getattr(args, flag)
            if v is not None and v < 1:
                raise ValueError(f"--{flag.replace('_', '-')} must be >= 1, got {v}")
        if args.beam_scale is not None and not args.beam_scale > 0:
            raise ValueError(f"--beam-scale must be > 0, got {args.beam_scale}")
    except ValueError as e:
        ap.error(str(e))
    cfg = Config(
        model=args.model,
        taps_only=args.taps_only,
        max_frames=args.max_frames,
        search_beam3=args.search_beam3,
        search_width3=args.search_width3,
        beam_depth=args.beam_depth,
        beam_width=args.beam_width,
        beam_scale=args.beam_scale,
    )
    try:
        results, rows = evaluate(
            policies,
            levels,
            speeds,
            args.episodes,
            cfg,
            seed_start=args.seed_start,
            workers=args.workers,
            progress=not args.no_progress,
            address=args.address,
        )
    except ImportError as e:
        print(f"policy.eval: {e}", file=sys.stderr)
        return 2
    print_table(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recorded = {k: v for k, v in vars(args).items() if k != "no_progress"}
    if any(name.startswith("search") for name in policies):  # the widths the search used
        from policy.search import SearchPlayer

        shipped = SearchPlayer()
        recorded["search_beam3"] = args.search_beam3 or shipped.beam3
        recorded["search_width3"] = args.search_width3 or shipped.width3
    if "beam" in policies:  # the beam's size
        from policy.beam import BeamPlayer

        default = BeamPlayer()
        recorded["beam_depth"] = args.beam_depth or default.depth
        recorded["beam_width"] = args.beam_width or default.width
        recorded["beam_scale"] = args.beam_scale or default.scale
    doc = {
        "args": recorded,
        "summary": rows,
        "human_records": human_rows(rows),
        "games": [{"policy": name, **r.as_dict()} for name, r in results],
    }
    (out / "eval.json").write_text(json.dumps(doc, indent=1))
    plot(rows, out / "eval.png")
    print(f"wrote {out / 'eval.json'} and {out / 'eval.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
