"""Teacher labels, imitation training, DAgger with the engine, ONNX export.

    python -m policy.train --out out/train    # labels, imitation, 2 DAgger rounds
                                              # (the shipped model: docs/POLICY.md "Reproduce")

1. label: the teacher (policy.teacher) plays seeded games (levels 0-20, all speeds, even seeds
   below 0x8000: evaluation uses 0x8000 and up) and every spawn state is recorded with the
   teacher's values of its searched placements;
2. imitation: the network learns the teacher's softmax over those values (temperature in
   frames), cross-entropy on masked logits;
3. DAgger: the network plays (its own choices, exported to ONNX and run with onnxruntime),
   the teacher labels the states it visits, the data are pooled and the network trained again;
4. export: policy.onnx, checked against torch on the training states.

`--labeller search` labels with the play-time search (policy.search, the network as its prior:
~20 ms a state against the teacher's ~3 ms) instead of the teacher, `--labeller beam` with the
beam over the level's pills (policy.beam, which reads the pill reserve the network never sees);
`--player ONNX` has a fixed policy play the DAgger games (e.g. the shipped ensemble) instead of
the network being trained;
`python -m policy.ensemble policy_fp32.onnx --split --out DIR` gives an ensemble's members back as
policy.pt files for --init (docs/POLICY.md "Distilling the search").

Labelling runs as Ray tasks (--workers local CPUs, or --address of a Ray cluster) with a
progress bar; training uses torch on the CPU. Datasets are .npz files under --out (see Dataset).
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
from policy.play import Episode, Result, play

TRAIN_SEED_LIMIT = 0x8000  # training games use even seeds below this; policy.eval starts here
K = 16  # teacher candidates kept per state

FIELDS = (
    "field",
    "pill",
    "next",
    "level",
    "speed",
    "speed_ups",
    "viruses",
    "mask",
    "cand",
    "value",
    "choice",
)


def append_state(rows: dict[str, list[Any]], obs: Any, reachable: npt.ArrayLike) -> None:
    """Appends a spawn state's fields (field, pill, next, level, speed, speed_ups, viruses, mask:
    the packed reachable bool[512]) to ``rows``; obs: a policy.features.SpawnInput."""
    rows["field"].append(np.asarray(obs.field).reshape(-1))
    rows["pill"].append(obs.pill_colors)
    rows["next"].append(obs.next_colors)
    rows["level"].append(obs.level)
    rows["speed"].append(obs.speed)
    rows["speed_ups"].append(obs.speed_ups)
    rows["viruses"].append(obs.virus_count)
    rows["mask"].append(np.packbits(np.asarray(reachable, dtype=bool)))


def state_tensors(arrays: dict[str, npt.NDArray[Any]]) -> tuple[npt.NDArray[Any], ...]:
    """(board float32[N,11,16,8], extras float32[N,18], mask bool[N,512]) of stored spawn
    states (the fields append_state writes, stacked)."""
    a = arrays
    board = board_planes(a["field"])
    extras = extras_vector(
        a["pill"], a["next"], a["level"], a["speed"], a["speed_ups"], a["viruses"]
    )
    mask = np.unpackbits(a["mask"], axis=1)[:, :NUM_PLACEMENTS].astype(bool)
    return board, extras, mask


@dataclass
class Dataset:
    """Labelled spawn states (N of them).

    field uint8[N, 128]; pill, next uint8[N, 2]; level, speed, speed_ups, viruses uint8[N];
    mask uint8[N, 64] (np.packbits of the reachable bool[512]); cand int16[N, 16] (teacher's
    searched placements, best first, -1 padding); value float32[N, 16] (their values in
    frames); choice int16[N] (the teacher's pick).
    """

    arrays: dict[str, npt.NDArray[Any]]

    def __len__(self) -> int:
        return int(self.arrays["field"].shape[0])

    @staticmethod
    def concat(parts: Sequence[Dataset]) -> Dataset:
        return Dataset({k: np.concatenate([p.arrays[k] for p in parts]) for k in FIELDS})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save: Any = np.savez_compressed  # numpy's stub types **kwds as bool
        save(path, **self.arrays)

    @staticmethod
    def load(path: Path) -> Dataset:
        with np.load(path) as z:
            return Dataset({k: z[k] for k in FIELDS})

    def tensors(self) -> tuple[npt.NDArray[np.float32], ...]:
        """(board [N,11,16,8], extras [N,18], mask bool[N,512]) for the network."""
        return state_tensors(self.arrays)

    def targets(self, temperature: float) -> npt.NDArray[np.float32]:
        """Soft targets float32[N, 512]: softmax(value / temperature) over the candidates."""
        cand = self.arrays["cand"].astype(np.int64)
        val = self.arrays["value"].astype(np.float64)
        ok = cand >= 0
        v = np.where(ok, val, -np.inf)
        v = v - v.max(axis=1, keepdims=True)
        p = np.where(ok, np.exp(v / temperature), 0.0)
        p /= p.sum(axis=1, keepdims=True)
        out = np.zeros((len(self), NUM_PLACEMENTS), dtype=np.float32)
        rows = np.repeat(np.arange(len(self)), cand.shape[1])
        sel = ok.reshape(-1)
        out[rows[sel], cand.reshape(-1)[sel]] = p.reshape(-1)[sel]
        return out

    def regrets(self, clip: float) -> npt.NDArray[np.float32]:
        """Regret float32[N, 512] in frames, in [0, clip]: the labeller's best value less each
        placement's. A reachable placement that is not among the stored candidates gets the
        worst stored candidate's regret (a lower bound: the labeller ranked it below them);
        an unreachable one 0 (the network's mask gives it no probability)."""
        cand = self.arrays["cand"].astype(np.int64)
        val = self.arrays["value"].astype(np.float64)
        ok = cand >= 0
        best = np.where(ok, val, -np.inf).max(axis=1, keepdims=True)
        reg = np.clip(np.where(ok, best - val, 0.0), 0.0, clip)
        worst = reg.max(axis=1)
        reach = np.unpackbits(self.arrays["mask"], axis=1)[:, :NUM_PLACEMENTS].astype(bool)
        out = np.where(reach, worst[:, None], 0.0).astype(np.float32)
        rows = np.repeat(np.arange(len(self)), cand.shape[1])
        sel = ok.reshape(-1)
        out[rows[sel], cand.reshape(-1)[sel]] = reg.reshape(-1)[sel]
        return out


# ---------------------------------------------------------------------------- labelling


@dataclass(frozen=True)
class LabelJob:
    episode: Episode
    model: str | None  # ONNX model that plays (DAgger), or None: the teacher plays
    taps_only: bool
    beam: int
    max_frames: int
    labeller: str = "teacher"  # "teacher" (policy.teacher), "search" or "beam" (policy.beam)
    prior: str | None = None  # the search's prior ONNX (None: the shipped policy.onnx)
    beam_depth: int = 16  # the beam labeller's pills and lines (policy.beam.BeamPlayer)
    beam_width: int = 80


def _label_game(job: LabelJob) -> tuple[Dataset, Result]:
    import engine
    from engine import _core
    from policy.features import SpawnInput
    from policy.play import Move
    from policy.teacher import Teacher

    net = None
    if job.model is not None:
        from policy.onnx_policy import PlacementPolicy

        net = PlacementPolicy(job.model, threads=1, taps_only=job.taps_only)
    if job.labeller == "teacher":
        teacher = Teacher(beam=job.beam, taps_only=job.taps_only)

        def values_of(game: engine.Game) -> tuple[Any, Any, Any]:
            return teacher.search(game)

    elif job.labeller == "search":
        # the play-time search (policy.eval's "search") with the network `prior` as its prior
        from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy
        from policy.search import SearchPlayer

        prior = PlacementPolicy(job.prior or DEFAULT_MODEL, threads=1)
        searcher = SearchPlayer(beam=job.beam, prior=prior, taps_only=job.taps_only)

        def values_of(game: engine.Game) -> tuple[Any, Any, Any]:
            # Every child is ranked: search() keeps the children it did not search as deep
            # in their order, shifted below the deep ones, so the top K are the deep ones
            # first (3-ply values) and then the best of the rest, whose gap to the deep ones
            # is the shift, not a frame count (their soft targets are small).
            e, values = searcher.search(game)
            return e, values, np.ones(len(values), bool)

    elif job.labeller == "beam":
        # the beam over the level's pills (policy.beam): it reads the reserve, the network
        # does not; its values are the best line's where the beam ends (BeamPlayer.search)
        from policy.beam import BeamPlayer

        beam = BeamPlayer(depth=job.beam_depth, width=job.beam_width, taps_only=job.taps_only)

        def values_of(game: engine.Game) -> tuple[Any, Any, Any]:
            e, _, values = beam.search(game)
            return e, values, np.ones(len(values), bool)

    else:
        raise ValueError(f"unknown labeller {job.labeller!r}: teacher, search or beam")
    rows: dict[str, list[Any]] = {k: [] for k in FIELDS}

    class Labeller:
        name = "label"

        def act(self, game: engine.Game) -> Move:
            e, values, searched = values_of(game)
            order = np.flatnonzero(searched)
            order = order[np.argsort(-values[order], kind="stable")][:K]
            cand = np.full(K, -1, np.int16)
            val = np.zeros(K, np.float32)
            cand[: order.size] = e.placements[order]
            val[: order.size] = np.maximum(values[order], -1.0e6)
            obs = SpawnInput.from_game(game)
            append_state(rows, obs, e.reachable)
            rows["cand"].append(cand)
            rows["value"].append(val)
            best = int(cand[0])
            rows["choice"].append(best)
            idx = best
            if net is not None:
                idx = net.choose(obs, e.reachable)
            return Move(idx, _core.plan(game, taps_only=job.taps_only).masks(idx))

    result = play(Labeller(), job.episode, max_frames=job.max_frames)
    dtypes = {"cand": np.int16, "choice": np.int16, "value": np.float32}
    arrays = {
        k: np.asarray(v, dtype=dtypes.get(k, np.uint8)).reshape(len(v), -1)
        if k in ("field", "pill", "next", "mask", "cand", "value")
        else np.asarray(v, dtype=dtypes.get(k, np.uint8))
        for k, v in rows.items()
    }
    if not rows["field"]:
        arrays = {k: np.zeros((0,) + _SHAPES[k], dtype=dtypes.get(k, np.uint8)) for k in FIELDS}
    return Dataset(arrays), result


_SHAPES: dict[str, tuple[int, ...]] = {
    "field": (128,),
    "pill": (2,),
    "next": (2,),
    "level": (),
    "speed": (),
    "speed_ups": (),
    "viruses": (),
    "mask": (64,),
    "cand": (K,),
    "value": (K,),
    "choice": (),
}


def training_episodes(
    count: int,
    rng: np.random.Generator,
    levels: Sequence[int],
    speeds: Sequence[int] | None = None,
) -> list[Episode]:
    """`count` random games: level from `levels`, speed from `speeds` (None: any of LOW, MED,
    HI), even seed in [2, 0x8000), frameCounter in [0, 256). With speeds None the draws are
    those of the earlier recipe (one rng.integers(3) per game), so old datasets reproduce."""
    out = []
    for _ in range(count):
        seed = int(rng.integers(1, TRAIN_SEED_LIMIT // 2)) * 2
        level = int(rng.choice(levels))
        speed = int(rng.integers(3)) if speeds is None else int(rng.choice(speeds))
        out.append(Episode(level, speed, seed, int(rng.integers(256))))
    return out


class Bar:
    """A rich progress bar on a terminal; one log line per 5% on stderr otherwise (nohup runs)."""

    def __init__(self, desc: str, total: int) -> None:
        from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

        self.desc, self.total, self.done, self.t0 = desc, max(total, 1), 0, time.time()
        self.tty = sys.stderr.isatty()
        columns = (*Progress.get_default_columns()[:2], MofNCompleteColumn(), TimeElapsedColumn())
        self.progress = Progress(*columns, disable=not self.tty)
        self.task = self.progress.add_task(desc, total=total)

    def __enter__(self) -> Bar:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def advance(self, n: int = 1, note: str = "") -> None:
        self.progress.advance(self.task, n)
        before, self.done = self.done, self.done + n
        if not self.tty and (before * 20 // self.total != self.done * 20 // self.total):
            dt = time.time() - self.t0
            print(
                f"{self.desc}: {self.done}/{self.total} {dt:.0f} s {note}",
                file=sys.stderr,
                flush=True,
            )


def label(
    jobs: Sequence[LabelJob], workers: int, desc: str, address: str | None = None
) -> tuple[Dataset, list[Result]]:
    """Runs the labelling jobs (Ray tasks on `workers` local CPUs when > 1, or on the Ray
    cluster at `address`: policy.parallel.ordered_map; results in job order) with a progress
    bar."""
    from policy.parallel import ordered_map

    parts: list[Dataset] = []
    results: list[Result] = []
    with Bar(desc, len(jobs)) as bar:
        for d, r in ordered_map(_label_game, jobs, workers=workers, address=address):
            parts.append(d)
            results.append(r)
            bar.advance()
    return Dataset.concat(parts), results


# ---------------------------------------------------------------------------- training


def train_network(
    data: Dataset,
    model: Any,
    epochs: int,
    lr: float,
    batch: int,
    temperature: float,
    seed: int,
    desc: str = "train",
    val_frac: float = 0.05,
    regret: float = 0.0,
    regret_clip: float = 2000.0,
) -> dict[str, float]:
    """Cross-entropy of the masked logits against the teacher's soft targets (AdamW, cosine
    learning rate), plus `regret` x the network's expected regret in hundreds of frames
    (sum over placements of its probability x the labeller's regret, Dataset.regrets clipped
    at `regret_clip` frames; 0: cross-entropy alone). The last `val_frac` of the states is
    held out. Returns the final epoch's loss and top-1 agreement with the teacher's pick (and
    val_loss / val_agree; val_regret, the expected regret in frames, when `regret` > 0)."""
    import torch

    torch.manual_seed(seed)
    board, extras, mask = data.tensors()
    target = data.targets(temperature)
    treg = torch.from_numpy(data.regrets(regret_clip)) if regret > 0 else None
    choice = data.arrays["choice"].astype(np.int64)
    n_all = len(data)
    n_val = int(n_all * val_frac)
    n = n_all - n_val  # the last states (whole games, labelled last) are held out
    tb, te, tm = torch.from_numpy(board), torch.from_numpy(extras), torch.from_numpy(mask)
    tt, tc = torch.from_numpy(target), torch.from_numpy(choice)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * ((n + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1))
    gen = torch.Generator().manual_seed(seed)
    stats = {"loss": float("nan"), "agree": float("nan")}
    with Bar(desc, steps) as bar:
        for epoch in range(epochs):
            model.train()
            perm = torch.randperm(n, generator=gen)
            tot_loss, tot_agree = 0.0, 0
            for i in range(0, n, batch):
                idx = perm[i : i + batch]
                logits = model(tb[idx], te[idx], tm[idx])
                logp = torch.log_softmax(logits, dim=1)
                loss = -(tt[idx] * logp).sum(dim=1).mean()
                if treg is not None:
                    loss = loss + regret * (logp.exp() * treg[idx]).sum(dim=1).mean() / 100.0
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                tot_loss += float(loss.detach()) * len(idx)
                tot_agree += int((logits.argmax(dim=1) == tc[idx]).sum())
                bar.advance(1, f"epoch {epoch} loss {tot_loss / max(i + len(idx), 1):.3f}")
            stats = {"loss": tot_loss / n, "agree": tot_agree / n}
            model.eval()
            if n_val:
                with torch.no_grad():
                    v_loss, v_agree, v_reg = 0.0, 0, 0.0
                    for i in range(n, n_all, 1024):
                        sl = slice(i, min(i + 1024, n_all))
                        logits = model(tb[sl], te[sl], tm[sl])
                        logp = torch.log_softmax(logits, dim=1)
                        v_loss += float(-(tt[sl] * logp).sum())
                        v_agree += int((logits.argmax(dim=1) == tc[sl]).sum())
                        if treg is not None:
                            v_reg += float((logp.exp() * treg[sl]).sum())
                stats.update(val_loss=v_loss / n_val, val_agree=v_agree / n_val)
                if treg is not None:
                    stats["val_regret"] = v_reg / n_val
            print(f"{desc} epoch {epoch}: {json.dumps(stats)}", file=sys.stderr, flush=True)
    model.eval()
    return stats


def check_export(model: Any, path: Path, data: Dataset, rows: int = 512) -> float:
    """Max |torch - onnxruntime| over the reachable logits of `rows` states (raises
    ValueError above 1e-3)."""
    from policy.model import torch_logits
    from policy.onnx_policy import PlacementPolicy

    sub = Dataset({k: v[:rows] for k, v in data.arrays.items()})
    board, extras, mask = sub.tensors()
    a = torch_logits(model, board, extras, mask)
    b = PlacementPolicy(path).logits(board, extras, mask)
    err = float(np.abs(np.where(mask, a - b, 0.0)).max()) if len(sub) else 0.0
    if err > 1e-3 or not np.array_equal(a.argmax(1), b.argmax(1)):
        raise ValueError(f"ONNX export disagrees with torch: max |diff| {err}")
    return err


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policy.train", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out/train", help="datasets, checkpoints and logs")
    ap.add_argument("--model-out", default=None, help="ONNX path (default OUT/policy.onnx)")
    ap.add_argument("--games", type=int, default=600, help="labeller games for imitation")
    ap.add_argument("--dagger-rounds", type=int, default=2)
    ap.add_argument("--dagger-games", type=int, default=300, help="network games per round")
    ap.add_argument("--levels", default="0-20", help="levels of the teacher games")
    ap.add_argument("--speeds", default="low,med,hi", help="speeds of the teacher games")
    ap.add_argument("--dagger-levels", default=None, help="levels of DAgger games (--levels)")
    ap.add_argument("--dagger-speeds", default=None, help="speeds of DAgger games (--speeds)")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--dagger-epochs", type=int, default=6)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--temperature", type=float, default=12.0, help="soft-target frames")
    ap.add_argument(
        "--regret",
        type=float,
        default=0.0,
        help="weight of the expected regret (hundreds of frames) added to the cross-entropy",
    )
    ap.add_argument(
        "--regret-clip", type=float, default=2000.0, help="regret cap per placement, frames"
    )
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--beam", type=int, default=8)
    ap.add_argument("--taps-only", action="store_true", help="plan with taps_only (not exact)")
    ap.add_argument("--max-frames", type=int, default=40_000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Ray CPUs")
    ap.add_argument("--address", default=None, help="a running Ray cluster (default: local)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    ap.add_argument("--data", nargs="*", default=[], help="extra .npz datasets to pool")
    ap.add_argument("--label-only", action="store_true", help="stop after the teacher games")
    ap.add_argument("--init", default=None, help="start from this policy.pt")
    ap.add_argument("--first-round", type=int, default=1, help="number of the first DAgger round")
    ap.add_argument(
        "--labeller",
        choices=("teacher", "search", "beam"),
        default="teacher",
        help="who labels the states: the 2-ply teacher, the play-time search (slower, stronger)"
        " or the beam over the level's pills (--beam-depth x --beam-width; it reads the reserve)",
    )
    ap.add_argument("--beam-depth", type=int, default=16, help="pills of --labeller beam")
    ap.add_argument("--beam-width", type=int, default=80, help="lines of --labeller beam")
    ap.add_argument(
        "--search-prior",
        default=None,
        help="ONNX prior of --labeller search (default: the shipped policy/models/policy.onnx)",
    )
    ap.add_argument(
        "--player",
        default=None,
        help="ONNX policy that plays the DAgger games (default: the network being trained)",
    )
    args = ap.parse_args(argv)
    if args.regret < 0 or args.regret_clip <= 0:
        ap.error(
            f"--regret must be >= 0 and --regret-clip > 0, got {args.regret}, {args.regret_clip}"
        )
    if args.beam_depth < 1 or args.beam_width < 1:
        ap.error(
            f"--beam-depth and --beam-width must be >= 1, got {args.beam_depth}, {args.beam_width}"
        )

    import torch

    from policy.eval import parse_levels, parse_speeds
    from policy.model import PlacementNet, export_onnx

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model_out = Path(args.model_out) if args.model_out else out / "policy.onnx"
    try:
        levels = parse_levels(args.levels)
        dagger_levels = parse_levels(args.dagger_levels or args.levels)
        speeds = parse_speeds(args.speeds)
        dagger_speeds = parse_speeds(args.dagger_speeds or args.speeds)
    except ValueError as e:
        ap.error(str(e))
    log: dict[str, Any] = {"args": vars(args), "rounds": []}

    def jobs(count: int, model: str | None, stage: int) -> list[LabelJob]:
        # teacher games draw from default_rng(seed), DAgger round r from default_rng([seed, r])
        rng = np.random.default_rng(args.seed if stage == 0 else [args.seed, stage])
        lv, sp = (levels, speeds) if stage == 0 else (dagger_levels, dagger_speeds)
        eps = training_episodes(count, rng, lv, None if sp == [0, 1, 2] else sp)
        return [
            LabelJob(
                ep,
                model,
                args.taps_only,
                args.beam,
                args.max_frames,
                args.labeller,
                args.search_prior,
                args.beam_depth,
                args.beam_width,
            )  # fmt: skip
            for ep in eps
        ]

    def summary(results: Sequence[Result]) -> dict[str, float]:
        return {
            "games": len(results),
            "clear_rate": float(np.mean([r.cleared for r in results])) if results else 0.0,
            "median_pills": float(np.median([r.pills for r in results])) if results else 0.0,
        }

    parts = [Dataset.load(Path(p)) for p in args.data]
    t0 = time.time()
    if args.games > 0:
        who = args.labeller  # "teacher" (the default) or "search": the games' player
        d, res = label(jobs(args.games, None, 0), args.workers, f"{who} games", args.address)
        d.save(out / f"{who}.npz")
        parts.append(d)
        log[who] = summary(res)
        (out / f"{who}_games.json").write_text(json.dumps([r.as_dict() for r in res]))
        if args.label_only:
            (out / "train_log.json").write_text(json.dumps(log, indent=1, default=str))
            print(json.dumps(log[who]))
            return 0
    data = Dataset.concat(parts)
    if len(data) == 0:
        raise SystemExit("no training data: give --games > 0 or --data")
    model = PlacementNet(args.channels, args.blocks)
    if args.init:
        model.load_state_dict(torch.load(args.init))
    if args.epochs > 0:
        stats = train_network(
            data,
            model,
            args.epochs,
            args.lr,
            args.batch,
            args.temperature,
            args.seed,
            "imitation",
            regret=args.regret,
            regret_clip=args.regret_clip,
        )
        log["rounds"].append({"round": 0, "states": len(data), **stats, "s": time.time() - t0})
        torch.save(model.state_dict(), out / "policy.pt")
    export_onnx(model, model_out)
    for r in range(args.first_round, args.first_round + args.dagger_rounds):
        player = args.player or str(model_out)
        d, res = label(
            jobs(args.dagger_games, player, r), args.workers, f"DAgger {r}", args.address
        )
        (out / f"dagger{r}_games.json").write_text(json.dumps([x.as_dict() for x in res]))
        d.save(out / f"dagger{r}.npz")
        data = Dataset.concat([data, d])
        stats = train_network(
            data,
            model,
            args.dagger_epochs,
            args.lr / 2,
            args.batch,
            args.temperature,
            args.seed + r,
            f"train {r}",
            regret=args.regret,
            regret_clip=args.regret_clip,
        )
        log["rounds"].append(
            {
                "round": r,
                "states": len(data),
                "network_games": summary(res),
                **stats,
                "s": time.time() - t0,
            }
        )
        export_onnx(model, model_out)
        torch.save(model.state_dict(), out / "policy.pt")
    torch.save(model.state_dict(), out / "policy.pt")
    log["export_max_abs_diff"] = check_export(model, model_out, data)
    (out / "train_log.json").write_text(json.dumps(log, indent=1, default=str))
    print(json.dumps(log["rounds"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
