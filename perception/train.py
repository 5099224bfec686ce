"""Train the shipped board model: ``python -m perception.train``.

Renders frames from engine games, degrades them through random capture chains, randomises the
tiles' appearance (perception.data), trains BoardNet (perception.model) with a rich progress
bar, exports ONNX (checked against the torch outputs), then evaluates the ONNX model end to end
(BoardReader on whole captured frames) on a held-out set and writes the accuracy report
(perception.evaluate).

    python -m perception.train --rom drmario.nes    # your own ROM's tiles (never stored)
    python -m perception.train --device cuda --workers 14 --batch 256 --reuse 6 \
        --buffer 1024 --lr 4e-3 --steps 9000        # the shipped model's base, on a GPU
    python -m perception.train --help

Data generation runs in ``--workers`` processes (torch DataLoader); each sample is used
``--reuse`` times from a shuffled buffer, so the costly capture simulation is shared by a few
gradient steps. ``--device cuda`` runs the steps on a GPU (bfloat16 autocast); the samples are
made on the CPU either way, so the workers bound the rate (docs/PERCEPTION.md, "Reproduce the
shipped models").
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from calibration import Profile
from perception.data import Labels, TrainingSamples
from perception.layout import N_COLORS
from perception.model import (
    OUTPUT_NAMES,
    BoardNet,
    fold_batch_norm,
    freeze_batch_norm,
    freeze_first_convolution,
    from_onnx,
    unfold_batch_norm,
)

HERE = Path(__file__).resolve().parent
DEFAULT_MODEL = HERE / "models" / "board.onnx"


def _tiles(rom: str | None, verify_crc: bool = True) -> Any:
    import engine

    if rom:
        return engine.TileSet.from_ines(rom, verify_crc=verify_crc)
    return engine.TileSet.clean_room()


class SampleStream(IterableDataset):
    """Endless batches of training samples; each DataLoader worker has its own seed."""

    def __init__(
        self,
        seed: int,
        batch: int,
        rom: str | None,
        reuse: int,
        buffer: int,
        verify_crc: bool = True,
        shapes: bool = True,
        targets: Sequence[Profile] = (),
        target_rate: float = 0.0,
        versus_rate: float = 0.0,
    ) -> None:
        self.verify_crc = verify_crc
        self.versus_rate = versus_rate
        self.shapes = shapes
        self.targets = list(targets)
        self.target_rate = target_rate
        self.seed = seed
        self.batch = batch
        self.rom = rom
        self.reuse = reuse
        self.buffer = buffer

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = get_worker_info()
        wid = 0 if info is None else info.id
        torch.set_num_threads(1)
        import cv2

        cv2.setNumThreads(1)
        rng = np.random.default_rng([self.seed, wid, 7])
        samples = TrainingSamples(
            [self.seed, wid],
            tiles=_tiles(self.rom, self.verify_crc),
            shapes=self.shapes,
            targets=self.targets,
            target_rate=self.target_rate,
            versus_rate=self.versus_rate,
        )
        pool: list[tuple[np.ndarray, Labels]] = []
        uses: list[int] = []
        while True:
            while len(pool) < self.buffer:
                pool.append(next(samples))
                uses.append(0)
            picks = rng.choice(len(pool), size=self.batch, replace=False)
            batch = [pool[i] for i in picks]
            for i in picks:
                uses[i] += 1
            keep = [i for i in range(len(pool)) if uses[i] < self.reuse]
            pool = [pool[i] for i in keep]
            uses = [uses[i] for i in keep]
            yield collate(batch)


def collate(batch: list[tuple[np.ndarray, Labels]]) -> dict[str, torch.Tensor]:
    """Stack samples: image uint8 [B, 208, 144, 3] and the label arrays."""
    return {
        "image": torch.from_numpy(np.stack([b[0] for b in batch])),
        "cells": torch.from_numpy(np.stack([b[1].cells for b in batch])),
        "sprite": torch.from_numpy(np.stack([b[1].sprite for b in batch])),
        "next": torch.from_numpy(np.stack([b[1].next_colors for b in batch])),
        "kind": torch.tensor([b[1].kind for b in batch]),
        "visible": torch.tensor([b[1].field_visible for b in batch], dtype=torch.bool),
    }


def _hardest(per: torch.Tensor, fraction: float) -> torch.Tensor:
    """Mean of the largest ``fraction`` of the losses ``per`` (any shape; at least one)."""
    flat = per.flatten()
    k = max(1, int(math.ceil(fraction * flat.numel())))
    return flat.topk(min(k, flat.numel())).values.mean()


def losses(
    outputs: tuple[torch.Tensor, ...],
    b: dict[str, torch.Tensor],
    hard_cells: float = 0.0,
    hard_samples: float = 0.0,
) -> dict[str, torch.Tensor]:
    """Per-head losses (cross-entropy; the cell loss only where the bottle is drawn).

    Online hard example mining: ``hard_cells`` > 0 adds, for the field cells and the
    falling-pill cells, the mean loss of that fraction of the batch's cells with the largest
    loss; ``hard_samples`` > 0 does the same over the samples for the next pill. Nearly every
    cell is an easy empty one; what is left to learn once the network knows the layout is a few
    pixels of the pieces (a single against a top half: three corner pixels of CHR tiles $80 and
    $40). The screen kind is not mined: some of its labels cannot be told from one picture (the
    play before the first pill against the intro), and mining it made the kind worse on the
    random chains (26 misses in 2400 pictures against 11; docs/PERCEPTION.md)."""
    cells, sprite, nxt, kind = outputs
    visible = b["visible"]
    per_cell = F.cross_entropy(cells, b["cells"], reduction="none")  # [B, 16, 8]
    cell_ce = per_cell.mean(dim=(1, 2))
    cell_loss = (cell_ce * visible).sum() / visible.sum().clamp(min=1)
    per_sprite = F.cross_entropy(sprite, b["sprite"], reduction="none")  # [B, 17, 8]
    sprite_loss = per_sprite.mean()
    if hard_cells > 0:
        if bool(visible.any()):
            cell_loss = cell_loss + _hardest(per_cell[visible], hard_cells)
        sprite_loss = sprite_loss + _hardest(per_sprite, hard_cells)
    present = b["next"][:, 0] >= 0
    per_next = F.binary_cross_entropy_with_logits(
        nxt[:, 0], present.float(), reduction="none"
    )  # [B]
    if present.any():
        first = F.cross_entropy(
            nxt[present, 1 : 1 + N_COLORS], b["next"][present, 0], reduction="none"
        )
        second = F.cross_entropy(
            nxt[present, 1 + N_COLORS :], b["next"][present, 1], reduction="none"
        )
        colour = torch.zeros_like(per_next)
        colour[present] = (first + second) / 2
        next_loss = per_next.mean() + colour[present].mean()
        per_next = per_next + colour
    else:
        next_loss = per_next.mean()
    kind_loss = F.cross_entropy(kind, b["kind"])
    if hard_samples > 0:
        next_loss = next_loss + _hardest(per_next, hard_samples)
    return {
        "cells": cell_loss,
        "sprite": sprite_loss,
        "next": next_loss,
        "kind": 0.5 * kind_loss,
    }


def batch_errors(outputs: tuple[torch.Tensor, ...], b: dict[str, torch.Tensor]) -> dict[str, float]:
    """Training-batch error rates (cells, boards, sprite cells) for the progress line."""
    cells, sprite, _, _ = outputs
    visible = b["visible"]
    wrong = (cells.argmax(1) != b["cells"])[visible]
    return {
        "cell_err": float(wrong.float().mean()) if wrong.numel() else 0.0,
        "board_err": float(wrong.flatten(1).any(1).float().mean()) if wrong.numel() else 0.0,
        "sprite_err": float((sprite.argmax(1) != b["sprite"]).float().mean()),
    }


def _plain(model: BoardNet, folded: bool) -> BoardNet:
    """``model`` with its batch norms as from_onnx and BoardNet have them (a copy when
    ``folded``: fine-tuning trains them folded into the convolutions)."""
    if not folded:
        return model
    plain = copy.deepcopy(model)
    unfold_batch_norm(plain)
    return plain


class _Probabilities(torch.nn.Module):
    """The exported graph: image in, the four probability outputs out."""

    def __init__(self, model: BoardNet) -> None:
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.model(image, logits=False)


def set_memory_format(model: torch.nn.Module, fmt: torch.memory_format) -> None:
    """Lay out ``model``'s 4-D weights in ``fmt`` in place (the Parameter objects stay, so an
    optimizer built on them keeps working); what ``Module.to(memory_format=)`` does."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 4:
                p.data = p.data.contiguous(memory_format=fmt)


def export_onnx(model: BoardNet, path: Path, check: torch.Tensor) -> float:
    """Write the ONNX graph (probabilities) and return the largest difference between the
    ONNX Runtime and torch outputs on ``check`` (uint8 images); raise RuntimeError above 1e-4."""
    import onnxruntime as ort

    model.eval()
    set_memory_format(model, torch.contiguous_format)  # training made it NHWC
    path.parent.mkdir(parents=True, exist_ok=True)
    example = check[:1]
    graph = _Probabilities(model).eval()
    # The TorchScript exporter: the torch.export-based one needs onnxscript, which is not a
    # dependency of this project; torch warns that the old one is deprecated.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            graph,
            (example,),
            str(path),
            input_names=["image"],
            output_names=list(OUTPUT_NAMES),
            dynamic_axes={"image": {0: "n"}, **{k: {0: "n"} for k in OUTPUT_NAMES}},
            opset_version=17,
            dynamo=False,
        )
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model.eval()
    with torch.no_grad():
        want = model(check)
    got = session.run(list(OUTPUT_NAMES), {"image": check.numpy()})
    diff = max(float(np.abs(g - w.numpy()).max()) for g, w in zip(got, want, strict=True))
    if diff > 1e-4:
        raise RuntimeError(f"ONNX export differs from torch by {diff:g} (limit 1e-4)")
    return diff


def resolve_precision(precision: str, device: str = "cpu") -> str:
    """``auto`` -> ``bf16`` on a CUDA device or where the CPU computes bfloat16 natively
    (AVX-512 BF16 or AMX, as torch.cpu reports), else ``fp32``; ``bf16`` and ``fp32`` are
    returned as given. On a CPU without either (this project's 2-core AMD EPYC, AVX2 only),
    autocast's bfloat16 ran a step of 32 samples in ~4 s instead of fp32's ~0.3 s: 251 steps
    in 16 minutes."""
    if precision != "auto":
        return precision
    if device.startswith("cuda"):
        return "bf16"
    cpu = getattr(torch, "cpu", None)
    native = False
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        fn = getattr(cpu, probe, None)
        if fn is not None:
            try:
                native = native or bool(fn())
            except RuntimeError:
                pass
    return "bf16" if native else "fp32"


def train(args: argparse.Namespace) -> dict[str, Any]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = torch.device(getattr(args, "device", "cpu"))
    args.precision = resolve_precision(args.precision, device.type)
    init = getattr(args, "init", None)
    model = from_onnx(init) if init else BoardNet(tuple(args.width))
    verify = not getattr(args, "no_crc", False)
    shapes = not getattr(args, "keep_shapes", False)
    targets = [Profile.load(t) for t in getattr(args, "target_profiles", None) or []]
    stream = SampleStream(
        args.seed,
        args.batch,
        args.rom,
        args.reuse,
        args.buffer,
        verify,
        shapes,
        targets,
        getattr(args, "target_rate", 0.0),
        getattr(args, "versus_rate", 0.0),
    )
    loader = DataLoader(
        stream,
        batch_size=None,
        num_workers=args.workers,
        persistent_workers=args.workers > 0,
        prefetch_factor=4 if args.workers > 0 else None,
        pin_memory=device.type == "cuda",
    )
    model.train()
    if init:  # fine-tuning: the batch norms keep their (identity) statistics, so they fold away
        freeze_batch_norm(model)
        fold_batch_norm(model)
        if getattr(args, "freeze_first", False):
            freeze_first_convolution(model)
    # NHWC weights: the input arrives NHWC (the graph's permute keeps that layout); on 2 cores
    # a step of 32 took 0.20 s with one thread instead of 0.37 s in the default layout
    set_memory_format(model, torch.channels_last)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    warm = max(1, args.steps // 20)
    start = time.time()

    def lr_at(step: int) -> float:
        """Linear warm-up over the first 5 % of the steps, then a cosine to 2 % of ``--lr``."""
        if step < warm:
            return args.lr * (step + 1) / warm
        t = min(1.0, (step - warm) / max(1, args.steps - warm))
        return args.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * t)))

    history: list[dict[str, float]] = []
    running: dict[str, float] = {}
    step = 0
    columns = (
        TextColumn("[bold]training"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}"),
    )
    # on stderr: stdout is for results (python -m perception.prepare prints its JSON there)
    with Progress(*columns, disable=args.quiet, console=Console(stderr=True)) as progress:
        task = progress.add_task("train", total=args.steps, status="")
        for b in loader:
            if step >= args.steps:
                break
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            b = {k: v.to(device, non_blocking=True) for k, v in b.items()}
            with torch.autocast(
                device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16"
            ):
                out = model(b["image"], logits=True)
            out = tuple(o.float() for o in out)
            parts = losses(out, b, args.hard_cells, args.hard_samples)
            loss = torch.stack(list(parts.values())).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                errs = batch_errors(out, b)
            now = {
                "loss": float(loss.detach()),
                **{k: float(v.detach()) for k, v in parts.items()},
                **errs,
            }
            for k, v in now.items():
                running[k] = v if k not in running else 0.98 * running[k] + 0.02 * v
            if step % 50 == 0 or step == args.steps - 1:
                history.append({"step": step, "time_s": time.time() - start, **running})
                status = (
                    f"loss {running['loss']:.4f} cell err {running['cell_err']:.2e} "
                    f"board err {running['board_err']:.3f}"
                )
                progress.update(task, status=status)
                if step % 500 == 0 and not args.quiet:  # a line that survives in a log file
                    spent = time.time() - start
                    eta = spent / max(step, 1) * (args.steps - step) / 60
                    left = f", about {eta:.1f} min left" if step else ""
                    progress.console.print(f"step {step} ({spent:.0f} s{left}): {status}")
            progress.update(task, advance=1)
            step += 1
            checkpoint = getattr(args, "checkpoint", None)
            if checkpoint and step % 1000 == 0 and step < args.steps:  # a long run's last state
                torch.save(_plain(model, bool(init)).state_dict(), checkpoint)
    model.to("cpu")
    if init:
        unfold_batch_norm(model)
    if running and history[-1]["step"] != step - 1:
        history.append({"step": step - 1, "time_s": time.time() - start, **running})
    return {
        "model": model,
        "history": history,
        "train_s": time.time() - start,
        "steps_done": step,
    }


def _device(text: str) -> str:
    """--device: a torch device this machine has (one line and exit 2 for any other)."""
    try:
        device = torch.device(text)
    except RuntimeError as e:
        raise argparse.ArgumentTypeError(f"no such torch device {text!r}") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError(f"{text}: torch sees no CUDA GPU on this machine")
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"{text}: only cpu and cuda are supported")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m perception.train", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--steps",
        type=int,
        default=5000,
        help="optimizer steps (5000), however long they take (no time cap: the model must not "
        "depend on the machine's load; the progress bar shows the ETA)",
    )
    p.add_argument(
        "--precision",
        choices=("auto", "bf16", "fp32"),
        default="auto",
        help="bf16: convolutions and linear layers in bfloat16 (torch.autocast; weights stay "
        "float32), 1.75x faster on a CPU with AMX / AVX-512 BF16 and ~15x slower on one "
        "without (emulated); auto (the default): bf16 where the CPU has it, else fp32",
    )
    p.add_argument("--batch", type=int, default=32, help="samples per step (32)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (3e-3)")
    p.add_argument(
        "--width",
        type=int,
        nargs=4,
        default=[16, 32, 80, 96],
        help="channels at 1/2, 1/4, 1/8, 1/16 (16 32 80 96)",
    )
    p.add_argument("--workers", type=int, default=2, help="data processes (2)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for training (1)")
    p.add_argument(
        "--device",
        type=_device,
        default="cpu",
        help="torch device to train on (cpu; cuda: a GPU, bfloat16 with --precision auto); "
        "the data is made on the CPU by --workers processes either way",
    )
    p.add_argument(
        "--hard-cells",
        type=float,
        default=0.0,
        help="add the loss of this fraction of the hardest field and falling-pill cells of a "
        "batch (0: off)",
    )
    p.add_argument(
        "--hard-samples",
        type=float,
        default=0.0,
        help="add the next-pill loss of this fraction of the hardest samples of a batch (0: off)",
    )
    p.add_argument(
        "--freeze-first",
        action="store_true",
        help="with --init: keep the first convolution (each 2x2 pixel block's RGB to 16 "
        "features) as --init has it; the backward pass then stops before it",
    )
    p.add_argument("--reuse", type=int, default=4, help="steps each sample is used in (4)")
    p.add_argument("--buffer", type=int, default=256, help="shuffle buffer per worker (256)")
    p.add_argument("--seed", type=int, default=0, help="training seed (0)")
    p.add_argument("--rom", help="train on the tiles of this Dr. Mario iNES ROM (not stored)")
    p.add_argument("--no-crc", action="store_true", help="accept a ROM whose CRC is no known dump")
    p.add_argument(
        "--keep-shapes",
        action="store_true",
        help="keep the tiles' drawings (vary only the RGB palette): a model for one ROM",
    )
    p.add_argument(
        "--target-profiles",
        nargs="*",
        metavar="PROFILE",
        help="capture chains (shipped names or profile files) the model is fitted for: "
        "--target-rate of the samples go through one of them, the rest random chains",
    )
    p.add_argument(
        "--target-rate",
        type=float,
        default=0.0,
        help="share of the samples through --target-profiles (0: random chains only)",
    )
    p.add_argument(
        "--versus-rate",
        type=float,
        default=0.0,
        help="share of the samples that are a bottle of the two-player screen (0; "
        "perception.data.VersusStream)",
    )
    p.add_argument(
        "--versus-frames",
        type=int,
        default=0,
        help="held-out two-player frames per shipped profile, one more goal group (0: none)",
    )
    p.add_argument(
        "--init",
        type=Path,
        help="fine-tune this exported board model (ONNX) instead of starting from scratch "
        "(--width is taken from it)",
    )
    p.add_argument("--out", type=Path, default=DEFAULT_MODEL, help="ONNX file to write")
    p.add_argument("--report", type=Path, help="accuracy report (.json and .md beside it)")
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="also save the torch state dict here (at the end, and every 1000 steps before)",
    )
    p.add_argument("--eval-frames", type=int, default=600, help="held-out frames per profile")
    p.add_argument("--eval-random", type=int, default=3, help="held-out random profiles (3)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1")
    if not 0.0 <= args.versus_rate <= 1.0 or args.versus_frames < 0:
        parser.error("--versus-rate must be within 0..1 and --versus-frames at least 0")
    if args.rom and not os.path.exists(args.rom):
        parser.error(f"--rom: no such file {args.rom}")
    if args.freeze_first and args.init is None:
        parser.error("--freeze-first keeps the first convolution of --init: give --init MODEL")
    result = train(args)
    model = result["model"]
    if args.checkpoint:
        torch.save(model.state_dict(), args.checkpoint)
    check = next(iter(SampleStream(args.seed + 1000, 8, args.rom, 1, 8, not args.no_crc)))["image"]
    diff = export_onnx(model, args.out, check)
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size / 1e6:.2f} MB), ONNX vs torch max difference {diff:.2e}")
    if args.report is None:
        args.report = args.out.with_suffix(".report.json")
    from perception.evaluate import evaluate, write_report

    start = time.time()
    evaluation = evaluate(
        args.out,
        frames=args.eval_frames,
        random_profiles=args.eval_random,
        rom=args.rom,
        verify_crc=not args.no_crc,
        versus_frames=args.versus_frames,
        workers=os.cpu_count() or 1,
    )
    meta = {
        "command": "python -m perception.train " + " ".join(sys.argv[1:] if argv is None else argv),
        "train_s": result["train_s"],
        "eval_s": time.time() - start,
        "steps": args.steps,
        "steps_done": result["steps_done"],
        "threads": args.threads,
        "device": args.device,
        "workers": args.workers,
        "precision": args.precision,
        "batch": args.batch,
        "onnx_bytes": size,
        "onnx_vs_torch_max_diff": diff,
        "history": result["history"],
    }
    paths = write_report(evaluation, meta, args.report)
    print(json.dumps(evaluation["summary"], indent=1))
    print("report:", ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
