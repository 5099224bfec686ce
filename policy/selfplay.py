"""Self-play fine-tuning: the network plays, and learns from which of its own games went best.

    python -m policy.selfplay --out out/sp                  # from the shipped float32 ensemble
    python -m policy.selfplay --init out/r5/policy.pt --levels 18-20 --speeds hi --iterations 4

Each iteration:

1. the current network is exported to ONNX (OUT/iter{i}.onnx) and plays ``--seeds`` training
   games (even seeds below 0x8000, as policy.train; policy.eval's held-out seeds start at
   0x8000), each seed ``--group`` times, sampling every placement from the softmax of its
   masked logits over ``--temperature``. One Ray task plays one seed's group (the group's games
   step together and the network sees them as one batch): ``--workers`` local CPUs or a Ray
   cluster at ``--address`` (policy.parallel);
2. every game gets a return: minus its frames to the stage clear; ``-(--top-out-frames)`` for a
   top-out, so that any clear beats any loss and a faster clear a slower one; a game cut at
   ``--max-frames`` minus its frames and ``--frames-per-virus`` for each virus left (short games
   train the early game, where the network's top-outs are). A game's advantage is its return
   less its group's mean, over the group's standard deviation (the group is the same level, seed
   and frameCounter: the baseline needs no learned value); a group whose games all scored the
   same teaches nothing;
3. ``--epochs`` passes of clipped policy gradient (PPO's surrogate, ratio clip ``--clip``) over
   the visited spawn states, plus ``--kl`` times the KL divergence from the starting network (it
   keeps the fine-tuned network near what was trained by imitation), Adam at ``--lr``.

The starting network (``--init``) is the float32 ensemble policy/models/policy_fp32.onnx by
default (its members are trained together through the ensemble's mean log-probability), or
policy.pt checkpoints (policy.train). Written under OUT: member{i}.pt, policy_fp32.onnx (the
ensemble, checked against torch), selfplay_log.json (per iteration: the sampled games' clear
rate and frames p10/p50/p90, the loss, the KL, the clipped fraction). The players load an int8
copy: policy.quantize. docs/POLICY.md "Self-play fine-tuning".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.placement import NUM_PLACEMENTS
from policy.features import board_planes, extras_vector
from policy.play import Episode, Result
from policy.train import append_state, state_tensors

DEFAULT_INIT = Path(__file__).resolve().parent / "models" / "policy_fp32.onnx"
TOP_OUT_FRAMES = 20_000  # the return of a game that topped out is minus this
# frames a virus left at the frame limit is charged: the shipped network's level-20 HI games take a
# median of ~10,100 frames for 84 viruses (docs/POLICY.md "Numbers")
FRAMES_PER_VIRUS = 120
STATE_FIELDS = ("field", "pill", "next", "level", "speed", "speed_ups", "viruses", "mask")


@dataclass(frozen=True)
class GroupJob:
    """One seed's group of sampled games. model: the ONNX policy that samples; group: games;
    temperature: of the softmax over the masked logits (> 0); rng: the sampling seed."""

    episode: Episode
    model: str
    group: int
    temperature: float
    rng: int
    max_frames: int
    taps_only: bool = False


@dataclass
class Rollouts:
    """The spawn states of sampled games (N of them) and the games (G).

    arrays: field uint8[N, 128]; pill, next uint8[N, 2]; level, speed, speed_ups, viruses
    uint8[N]; mask uint8[N, 64] (np.packbits of the reachable bool[512]); action int16[N] (the
    sampled placement); logp float32[N] (its log-probability under the sampling policy); game
    int32[N] (index into results). results: one Result per game.
    group int32[G]: the group (seed) each game belongs to.
    """

    arrays: dict[str, npt.NDArray[Any]]
    results: list[Result]
    group: npt.NDArray[np.int32]

    def __len__(self) -> int:
        return int(self.arrays["action"].shape[0])

    @staticmethod
    def concat(parts: Sequence[Rollouts]) -> Rollouts:
        """The parts as one set: game indices and group numbers renumbered in order."""
        arrays: dict[str, list[Any]] = {k: [] for k in (*STATE_FIELDS, "action", "logp", "game")}
        results: list[Result] = []
        groups: list[npt.NDArray[np.int32]] = []
        next_group = 0
        for part in parts:
            for k in STATE_FIELDS + ("action", "logp"):
                arrays[k].append(part.arrays[k])
            arrays["game"].append(part.arrays["game"] + len(results))
            results.extend(part.results)
            groups.append(part.group + next_group)
            next_group += int(part.group.max()) + 1 if part.group.size else 0
        return Rollouts(
            {k: np.concatenate(v) for k, v in arrays.items()},
            results,
            np.concatenate(groups).astype(np.int32),
        )

    def tensors(self) -> tuple[npt.NDArray[Any], ...]:
        """(board float32[N,11,16,8], extras float32[N,18], mask bool[N,512], action int64[N],
        logp float32[N])."""
        board, extras, mask = state_tensors(self.arrays)
        return board, extras, mask, self.arrays["action"].astype(np.int64), self.arrays["logp"]


def sample(
    logits: npt.NDArray[np.float32], temperature: float, rng: np.random.Generator
) -> tuple[int, float]:
    """A placement index drawn from softmax(logits / temperature) over the logits above the
    graph's MASKED value (policy.model.MASKED = -1e9), and its log-probability. logits:
    float32[512]. Raises ValueError when no placement is reachable."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    ok = logits > -1.0e8
    if not ok.any():
        raise ValueError("no reachable placement to sample")
    z = np.where(ok, z, -np.inf)
    z -= z.max()
    logp = z - np.log(np.exp(z).sum())
    idx = int(rng.choice(logp.size, p=np.exp(logp)))
    return idx, float(logp[idx])


def play_group(job: GroupJob) -> Rollouts:
    """Plays ``job.group`` games of ``job.episode``, each placement sampled (policy.play's loop:
    settle to the spawn, the planner's masks to the lock), the games batched through the
    network at every step. Raises ValueError when a sampled placement does not lock (a planner
    bug)."""
    from engine import _core
    from policy.features import SpawnInput
    from policy.onnx_policy import PlacementPolicy
    from policy.play import STAGE_CLEAR, TOP_OUT, at_spawn, to_spawn

    net = PlacementPolicy(job.model, threads=1, taps_only=job.taps_only)
    rng = np.random.default_rng(job.rng)
    games = [job.episode.game() for _ in range(job.group)]
    for g in games:
        to_spawn(g)
    pills = [0] * job.group
    rows: dict[str, list[Any]] = {k: [] for k in (*STATE_FIELDS, "action", "logp", "game")}

    def live(i: int) -> bool:
        return at_spawn(games[i]) and int(games[i].frame) < job.max_frames

    playing = [i for i in range(job.group) if live(i)]
    while playing:
        obs = [SpawnInput.from_game(games[i]) for i in playing]
        plans = [_core.plan(games[i], taps_only=job.taps_only) for i in playing]
        masks = np.stack([np.asarray(p.reachable, dtype=bool) for p in plans])
        board = board_planes(np.stack([o.field for o in obs]))
        extras = extras_vector(
            [o.pill_colors for o in obs],
            [o.next_colors for o in obs],
            [o.level for o in obs],
            [o.speed for o in obs],
            [o.speed_ups for o in obs],
            [o.virus_count for o in obs],
        )
        logits = net.logits(board, extras, masks)
        for row, i in enumerate(playing):
            o, plan = obs[row], plans[row]
            idx, logp = sample(np.where(masks[row], logits[row], -1.0e9), job.temperature, rng)
            append_state(rows, o, masks[row])
            rows["action"].append(idx)
            rows["logp"].append(logp)
            rows["game"].append(i)
            games[i].run(plan.masks(idx))
            if not int(games[i].lock_event):
                raise ValueError(f"sampled placement {idx} did not lock on its last mask")
            pills[i] += 1
            to_spawn(games[i])
        playing = [i for i in playing if live(i)]
    results = [
        Result(
            level=job.episode.level,
            speed=job.episode.speed,
            seed=job.episode.seed,
            cleared=int(g.phase) == STAGE_CLEAR,
            topped_out=int(g.phase) == TOP_OUT,
            frames=int(g.frame),
            pills=pills[i],
            viruses_left=int(g.virus_count),
        )
        for i, g in enumerate(games)
    ]
    dtypes = {"action": np.int16, "logp": np.float32, "game": np.int32}
    arrays = {
        k: np.asarray(v, dtype=dtypes.get(k, np.uint8)) for k, v in rows.items()
    }  # fmt: skip
    shapes = {"field": 128, "pill": 2, "next": 2, "mask": NUM_PLACEMENTS // 8}
    for k, width in shapes.items():
        arrays[k] = arrays[k].reshape(-1, width)
    return Rollouts(arrays, results, np.zeros(job.group, np.int32))


def game_returns(
    results: Sequence[Result],
    top_out_frames: float = TOP_OUT_FRAMES,
    frames_per_virus: float = FRAMES_PER_VIRUS,
) -> Any:
    """float64[G]: minus ``top_out_frames`` for a game that topped out; for every other, minus
    its frames and ``frames_per_virus`` for each virus left (a cleared game: minus its frames to
    the stage clear; a game cut at the frame limit: the viruses it has still to clear, at a
    typical rate, so that games cut early are ranked by what they cleared)."""
    return np.array(
        [
            -float(top_out_frames)
            if r.topped_out
            else -float(r.frames) - frames_per_virus * r.viruses_left
            for r in results
        ]
    )


def advantages(returns: npt.ArrayLike, group: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """float64[G]: each game's return less its group's mean, over the group's standard
    deviation (0 for a group whose returns are all equal, or of one game)."""
    r = np.asarray(returns, dtype=np.float64)
    g = np.asarray(group)
    out = np.zeros_like(r)
    for k in np.unique(g):
        sel = g == k
        std = r[sel].std()
        if sel.sum() > 1 and std > 0:
            out[sel] = (r[sel] - r[sel].mean()) / std
    return out


def policy_gradient(
    model: Any,
    reference: Any,
    data: Rollouts,
    state_advantage: npt.NDArray[np.float64],
    lr: float,
    kl: float,
    temperature: float,
    batch: int,
    seed: int,
    clip: float = 0.2,
    epochs: int = 1,
    desc: str = "update",
) -> dict[str, float]:
    """``epochs`` passes over ``data`` in random batches of the clipped policy gradient (PPO's
    surrogate: the ratio r = pi(action) / pi_sampling(action), the loss -min(r A, clip(r, 1 -
    clip, 1 + clip) A)) plus ``kl`` times KL(reference || model), both policies the softmax of
    the masked logits over ``temperature``; Adam at ``lr``, gradient norm clipped at 1. The clip
    bounds how far one iteration moves each choice (plain -A log pi is unbounded below: a
    negative advantage drives its logit to minus infinity). state_advantage: float64[N].
    Returns the mean loss, the mean KL, the fraction of clipped ratios and the states used
    (those with a non-zero advantage)."""
    import torch

    from policy.train import Bar

    keep = np.flatnonzero(state_advantage != 0)
    stats = {"loss": 0.0, "kl": 0.0, "clipped": 0.0, "states": float(keep.size)}
    if keep.size == 0:
        return stats
    board, extras, mask, action, old = data.tensors()
    tb, te = torch.from_numpy(board[keep]), torch.from_numpy(extras[keep])
    tm, ta = torch.from_numpy(mask[keep]), torch.from_numpy(action[keep])
    told = torch.from_numpy(old[keep].astype(np.float32))
    tadv = torch.from_numpy(state_advantage[keep].astype(np.float32))
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    steps = epochs * ((keep.size + batch - 1) // batch)
    model.train()
    tot_loss, tot_kl, tot_clip, seen = 0.0, 0.0, 0, 0
    with Bar(desc, steps) as bar:
        for _ in range(epochs):
            perm = torch.randperm(keep.size, generator=gen)
            for i in range(0, keep.size, batch):
                idx = perm[i : i + batch]
                logits = model(tb[idx], te[idx], tm[idx]) / temperature
                logp = torch.log_softmax(logits, dim=1)
                with torch.no_grad():
                    ref = torch.log_softmax(
                        reference(tb[idx], te[idx], tm[idx]) / temperature, dim=1
                    )
                ratio = torch.exp(logp.gather(1, ta[idx, None])[:, 0] - told[idx])
                a = tadv[idx]
                surrogate = torch.minimum(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a)
                div = torch.where(tm[idx], ref.exp() * (ref - logp), 0.0).sum(1).mean()
                loss = -surrogate.mean() + kl * div
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                tot_loss += float(loss.detach()) * len(idx)
                tot_kl += float(div.detach()) * len(idx)
                tot_clip += int(((ratio - 1).abs() > clip).sum())
                seen += len(idx)
                bar.advance(1, f"loss {tot_loss / seen:.4f} kl {tot_kl / seen:.4f}")
    model.eval()
    stats.update(loss=tot_loss / seen, kl=tot_kl / seen, clipped=tot_clip / seen)
    return stats


def load_start(paths: Sequence[str]) -> Any:
    """The starting network as a policy.ensemble.PolicyEnsemble: one float32 ensemble ONNX file
    (split into its members) or policy.pt checkpoints. Raises FileNotFoundError or ValueError
    (not an ensemble or a checkpoint; an int8 copy)."""
    import tempfile

    from policy.ensemble import PolicyEnsemble, load_member, split

    if len(paths) == 1 and str(paths[0]).endswith(".onnx"):
        with tempfile.TemporaryDirectory() as tmp:
            members = [load_member(p) for p in split(paths[0], tmp)]
    else:
        for p in paths:
            if str(p).endswith(".onnx"):
                raise ValueError(f"{p}: give one ensemble ONNX file or policy.pt checkpoints")
        members = [load_member(p) for p in paths]
    return PolicyEnsemble(members).eval()


def summary(results: Sequence[Result]) -> dict[str, float]:
    """Clear and top-out rates, mean viruses left and the cleared games' frames (p10, median,
    p90) of sampled games."""
    frames = [r.frames for r in results if r.cleared]
    out = {
        "games": float(len(results)),
        "clear_rate": float(np.mean([r.cleared for r in results])),
        "top_out_rate": float(np.mean([r.topped_out for r in results])),
        "viruses_left": float(np.mean([r.viruses_left for r in results])),
    }
    if frames:
        p10, p50, p90 = np.percentile(frames, [10, 50, 90])
        out.update(frames_p10=float(p10), frames_p50=float(p50), frames_p90=float(p90))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m policy.selfplay", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", default="out/selfplay", help="checkpoints, ONNX files and the log")
    ap.add_argument(
        "--init",
        nargs="+",
        default=[str(DEFAULT_INIT)],
        help="the starting network: a float32 ensemble .onnx or policy.pt checkpoints",
    )
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=64, help="seeds (groups) per iteration")
    ap.add_argument("--group", type=int, default=8, help="sampled games per seed (>= 2)")
    ap.add_argument("--levels", default="18-20")
    ap.add_argument("--speeds", default="hi")
    ap.add_argument("--temperature", type=float, default=0.5, help="of the sampling softmax")
    ap.add_argument("--top-out-frames", type=float, default=TOP_OUT_FRAMES)
    ap.add_argument(
        "--frames-per-virus",
        type=float,
        default=FRAMES_PER_VIRUS,
        help="what a virus left at --max-frames costs",
    )
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--kl", type=float, default=0.1, help="weight of KL(start || network)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--clip", type=float, default=0.2, help="PPO's ratio clip")
    ap.add_argument("--epochs", type=int, default=1, help="passes over each iteration's states")
    ap.add_argument("--max-frames", type=int, default=40_000)
    ap.add_argument("--taps-only", action="store_true", help="plan with taps_only (not exact)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Ray CPUs")
    ap.add_argument("--address", default=None, help="a running Ray cluster (default: local)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    for name, low in (
        ("iterations", 0),
        ("seeds", 1),
        ("group", 2),
        ("batch", 1),
        ("workers", 1),
        ("epochs", 1),
    ):
        if getattr(args, name) < low:
            ap.error(f"--{name} must be >= {low}, got {getattr(args, name)}")
    for name in ("temperature", "lr", "top_out_frames", "clip"):
        if not getattr(args, name) > 0:
            ap.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    if args.kl < 0 or args.frames_per_virus < 0:
        ap.error(
            f"--kl and --frames-per-virus must be >= 0, got {args.kl}, {args.frames_per_virus}"
        )

    from policy.eval import parse_levels, parse_speeds

    try:
        levels = parse_levels(args.levels)
        speeds = parse_speeds(args.speeds)
    except ValueError as exc:
        ap.error(str(exc))
    import copy

    import torch

    from policy.ensemble import build
    from policy.model import export_onnx
    from policy.parallel import ordered_map
    from policy.train import Bar, training_episodes

    try:
        model = load_start(args.init)
    except (FileNotFoundError, ValueError) as exc:
        print(f"policy.selfplay: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    reference = copy.deepcopy(model).eval()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log: dict[str, Any] = {"args": vars(args), "iterations": []}
    t0 = time.time()
    for it in range(args.iterations):
        onnx_path = out / f"iter{it}.onnx"
        export_onnx(model, onnx_path)
        rng = np.random.default_rng([args.seed, it])
        eps = training_episodes(args.seeds, rng, levels, None if speeds == [0, 1, 2] else speeds)
        jobs = [
            GroupJob(ep, str(onnx_path), args.group, args.temperature, int(rng.integers(2**63)),
                     args.max_frames, args.taps_only)
            for ep in eps
        ]  # fmt: skip
        parts = []
        with Bar(f"self-play {it}", len(jobs)) as bar:
            for part in ordered_map(play_group, jobs, workers=args.workers, address=args.address):
                parts.append(part)
                bar.advance()
        data = Rollouts.concat(parts)
        returns = game_returns(data.results, args.top_out_frames, args.frames_per_virus)
        adv = advantages(returns, data.group)
        stats = policy_gradient(
            model,
            reference,
            data,
            adv[data.arrays["game"]],
            args.lr,
            args.kl,
            args.temperature,
            args.batch,
            args.seed + it,
            args.clip,
            args.epochs,
            f"update {it}",
        )
        row = {"iteration": it, **summary(data.results), **stats, "s": time.time() - t0}
        log["iterations"].append(row)
        print(f"self-play {it}: {json.dumps(row)}", file=sys.stderr, flush=True)
        (out / "selfplay_log.json").write_text(json.dumps(log, indent=1, default=str))
    paths = []
    for i, member in enumerate(model.members):
        path = out / f"member{i}.pt"
        torch.save(member.state_dict(), path)
        paths.append(path)
    log["export"] = build(paths, out / "policy_fp32.onnx")
    (out / "selfplay_log.json").write_text(json.dumps(log, indent=1, default=str))
    print(json.dumps(log["iterations"], indent=1))
    return 0 if log["export"]["onnx_vs_torch_max_diff"] < 1e-3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
