"""Several trained placement networks as one ONNX policy (torch; training only).

    python -m policy.ensemble out/r5/policy.pt out/w48/policy.pt --out out/ens.onnx
    python -m policy.ensemble policy/models/policy_fp32.onnx --split --out out/members  # reverse

(The shipped float32 ensemble is policy/models/policy_fp32.onnx; the players load its int8
copy, policy/models/policy.onnx, made by policy.quantize.)

The members' masked logits become log-probabilities (log-softmax over the reachable
placements) and are averaged; the graph has the same inputs and output as one PlacementNet
(board float32[B, 11, 16, 8], extras float32[B, 18], mask bool[B, 512] -> logits float32[B,
512], MASKED where the mask is False), so PlacementPolicy, the runtime and policy.eval load it
unchanged. Each member's width and depth are read from its state dict. Averaging two nets that
were trained differently (docs/POLICY.md: a 32x4 net after five DAgger rounds and a 48x5 net
trained once on the whole pool) loses fewer level-20 games than either alone: their top-outs are
mostly on different seeds. The export is checked against torch (max difference printed).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from engine.placement import NUM_PLACEMENTS
from policy.features import BOARD_PLANES, COLS, EXTRAS, ROWS
from policy.model import MASKED, PlacementNet, export_onnx


class PolicyEnsemble(nn.Module):
    """The mean of the members' log-softmax over the reachable placements; same signature as
    PlacementNet. Raises ValueError for no members."""

    def __init__(self, members: Sequence[PlacementNet]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = nn.ModuleList(members)

    def forward(
        self, board: torch.Tensor, extras: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        logp = [torch.log_softmax(m(board, extras, mask), dim=1) for m in self.members]
        mean = torch.stack(logp).mean(dim=0)
        return torch.where(mask, mean, torch.full_like(mean, MASKED))


def load_member(path: str | Path) -> PlacementNet:
    """A PlacementNet from a policy.pt state dict, its channels and blocks read from the
    tensors' shapes. Raises FileNotFoundError, or ValueError for a file that is not one."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no policy checkpoint at {p}")
    state = torch.load(p, map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or "stem.weight" not in state:
        raise ValueError(f"{p} is not a PlacementNet state dict (policy.train's policy.pt)")
    channels = int(state["stem.weight"].shape[0])
    blocks = len({k.split(".")[1] for k in state if k.startswith("blocks.")})
    net = PlacementNet(channels, blocks)
    net.load_state_dict(state)
    return net.eval()


def split(onnx_path: str | Path, out_dir: str | Path) -> list[Path]:
    """The members of an ensemble ONNX file (``build``'s output, e.g. the shipped
    policy/models/policy_fp32.onnx, not its int8 copy policy.onnx) as policy.pt state dicts
    ``out_dir/member{i}.pt``, read from the graph's initializers ``members.{i}.*`` (the
    TorchScript exporter keeps the state dict's names): so a shipped ensemble can be trained
    further (policy.train --init). Raises FileNotFoundError, or ValueError for a file with no
    members."""
    import onnx
    from onnx import numpy_helper

    p = Path(onnx_path)
    if not p.is_file():
        raise FileNotFoundError(f"no ONNX file at {p}")
    from policy.quantize import is_quantized

    if is_quantized(p):
        raise ValueError(
            f"{p} is an int8 copy (policy.quantize), not the float ensemble: split "
            "policy/models/policy_fp32.onnx"
        )
    states: dict[int, dict[str, torch.Tensor]] = {}
    for init in onnx.load(str(p)).graph.initializer:
        parts = init.name.split(".", 2)
        if len(parts) == 3 and parts[0] == "members" and parts[1].isdigit():
            arr = np.array(numpy_helper.to_array(init))
            states.setdefault(int(parts[1]), {})[parts[2]] = torch.from_numpy(arr)
    if not states:
        raise ValueError(f"{p} holds no ensemble members (initializers members.N.*)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in sorted(states):
        path = out / f"member{i}.pt"
        torch.save(states[i], path)
        load_member(path)  # the state dict must be a whole PlacementNet
        paths.append(path)
    return paths


def build(paths: Sequence[str | Path], out: str | Path) -> dict[str, object]:
    """Exports the ensemble of the checkpoints ``paths`` to ``out`` and checks onnxruntime
    against torch on random inputs; returns a JSON-ready summary."""
    import onnxruntime as ort

    members = [load_member(p) for p in paths]
    model = PolicyEnsemble(members).eval()
    export_onnx(model, out)
    rng = np.random.default_rng(0)
    board = (rng.random((8, BOARD_PLANES, ROWS, COLS)) < 0.3).astype(np.float32)
    extras = rng.random((8, EXTRAS)).astype(np.float32)
    mask = rng.random((8, NUM_PLACEMENTS)) < 0.2
    mask[:, 0] = True
    with torch.no_grad():
        want = model(torch.from_numpy(board), torch.from_numpy(extras), torch.from_numpy(mask))
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"board": board, "extras": extras, "mask": mask})
    diff = float(np.abs(np.asarray(got)[mask] - want.numpy()[mask]).max())
    return {
        "out": str(out),
        "members": [
            {"path": str(p), "channels": m.channels, "blocks": m.num_blocks}
            for p, m in zip(paths, members, strict=True)
        ],
        "bytes": Path(out).stat().st_size,
        "onnx_vs_torch_max_diff": diff,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m policy.ensemble", description=__doc__)
    ap.add_argument("members", nargs="+", help="policy.pt checkpoints (policy.train --out)")
    ap.add_argument("--out", required=True, help="ONNX file to write (--split: a folder)")
    ap.add_argument(
        "--split",
        action="store_true",
        help="the reverse: write the members of the ensemble ONNX file given as OUT/member{i}.pt",
    )
    args = ap.parse_args(argv)
    try:
        if args.split:
            if len(args.members) != 1:
                raise ValueError("--split takes one ensemble ONNX file")
            paths = split(args.members[0], args.out)
            print(json.dumps({"members": [str(x) for x in paths]}, indent=2))
            return 0
        report = build(args.members, args.out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"policy.ensemble: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0 if report["onnx_vs_torch_max_diff"] < 1e-3 else 1  # type: ignore[operator]


if __name__ == "__main__":
    sys.exit(main())
