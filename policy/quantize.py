"""The int8 copy of a placement network that the network path runs (building it needs `onnx`,
the train extra; running it only onnxruntime).

    python -m policy.quantize policy/models/policy_fp32.onnx --out policy/models/policy.onnx

Static quantization by onnxruntime (``onnxruntime.quantization.quantize_static``, QDQ format,
MinMax calibration): every convolution gets int8 weights (one scale per output channel) and
uint8 inputs, whose ranges are the extremes seen on calibration states; everything else stays
float32 (the extras' biases, the log-softmax of an ensemble, the mask), and the graph keeps the
float model's inputs and output (board float32[B, 11, 16, 8], extras float32[B, 18], mask
bool[B, 512] -> logits float32[B, 512], MASKED where the mask is False), so PlacementPolicy,
the search's prior and policy.eval load it unchanged. On a 2-core AVX2-only AMD EPYC the
shipped ensemble takes 0.85 ms per decision against 1.4-1.9 ms as float32 (docs/POLICY.md
"Int8").

Calibration states: spawn states of the project's own seeded games, all below the held-out
seeds 0x8000 (``policy.bench.spawn_states`` from seed 0x4000 over levels 0, 5, 10, 15, 20 and
all speeds, and ``level20_states`` along the float model's own level-20 HI games from seed
0x7000). The result is checked on other states (seeds 0x5000 and 0x7800): how often its pick is
the float model's, and the median time of one call of each (after a warm-up); both are printed
as JSON. The file is written only once that check has loaded it. The graph keeps only the
operator-set imports its nodes use (onnxruntime's optimizer, run before quantizing, stamps nine;
onnxruntime 1.17 refuses such a file).

Refused with one line and exit 2: a missing or unreadable model, one that is already quantized
(the shipped policy.onnx: quantize policy_fp32.onnx), an --out that is the model itself or a
folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine import _core

Feed = dict[str, npt.NDArray[Any]]


def feeds(states: Sequence[engine.Game]) -> list[Feed]:
    """The network's inputs at each spawn state: board float32[1, 11, 16, 8], extras
    float32[1, 18] (policy.features.encode) and mask bool[1, 512], the planner's reachable
    placements (engine.plan)."""
    from policy.features import SpawnInput, encode

    out = []
    for g in states:
        board, extras = encode(SpawnInput.from_game(g))
        mask = np.asarray(_core.plan(g).reachable, dtype=bool).reshape(1, -1)
        out.append({"board": board, "extras": extras, "mask": mask})
    return out


def calibration_states(count: int, model: str | Path) -> list[engine.Game]:
    """`count` spawn states (half random play over levels 0, 5, 10, 15, 20 and all speeds, half
    along `model`'s level-20 HI games), training seeds only."""
    from policy.bench import level20_states, spawn_states

    half = count // 2
    return spawn_states(count - half, seed=0, first_seed=0x4000) + level20_states(
        half, seed=0, first_seed=0x7000, model=str(model)
    )


def check_states(count: int, model: str | Path) -> list[engine.Game]:
    """`count` other spawn states, for the check (seeds 0x5000 and 0x7800, below 0x8000)."""
    from policy.bench import level20_states, spawn_states

    half = count // 2
    return spawn_states(count - half, seed=1, first_seed=0x5000) + level20_states(
        half, seed=1, first_seed=0x7800, model=str(model)
    )


def is_quantized(path: str | Path) -> bool:
    """Whether the ONNX file at `path` already holds quantization nodes (QDQ or QLinear)."""
    data = Path(path).read_bytes()
    return b"DequantizeLinear" in data or b"QLinearConv" in data


def prune_opsets(path: str | Path) -> None:
    """Rewrites the ONNX file at `path` with only the operator-set imports its nodes use."""
    import onnx

    model = onnx.load(str(path))
    used = {n.domain for n in model.graph.node} | {""}
    keep = [o for o in model.opset_import if o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(keep)
    onnx.save(model, str(path))


def check_source(src: str | Path) -> None:
    """Raises FileNotFoundError when there is no file at `src`, ValueError when it is already
    quantized or onnxruntime cannot load it."""
    from policy.onnx_policy import PlacementPolicy

    if not Path(src).is_file():
        raise FileNotFoundError(f"no ONNX model at {src}")
    if is_quantized(src):
        raise ValueError(
            f"{src} is already quantized (the int8 copy): quantize the float32 ensemble, "
            "policy/models/policy_fp32.onnx"
        )
    PlacementPolicy(src)  # ValueError for a file onnxruntime cannot load


def quantize(src: str | Path, out: str | Path, calibration: Sequence[Feed]) -> None:
    """Writes the int8 (QDQ) copy of the float ONNX model `src` to `out`, its activation ranges
    from the `calibration` inputs. Raises FileNotFoundError or ValueError as check_source(src),
    ValueError for no calibration input."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    check_source(src)
    if not calibration:
        raise ValueError("quantization needs at least one calibration state")

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items: Iterator[Feed] = iter(calibration)

        def get_next(self) -> Feed | None:
            return next(self.items, None)

    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(src), str(pre))
        quantize_static(
            str(pre),
            str(out),
            Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["Conv"],
        )
    prune_opsets(out)


def compare(a: str | Path, b: str | Path, check: Sequence[Feed]) -> dict[str, Any]:
    """How often models `a` (float) and `b` (int8) pick the same placement on `check`, and each
    one's median time per call over `check` (ms, one onnxruntime thread, after 20 warm-up
    calls, each model timed in a loop of its own)."""
    from policy.onnx_policy import PlacementPolicy

    pa, pb = PlacementPolicy(a, threads=1), PlacementPolicy(b, threads=1)

    def pick(p: PlacementPolicy, f: Feed) -> int:
        logits = p.logits(f["board"], f["extras"], f["mask"])[0]
        return int(np.argmax(np.where(f["mask"][0], logits, -np.inf)))

    same = sum(pick(pa, f) == pick(pb, f) for f in check)
    ms = {}
    for key, p in (("a", pa), ("b", pb)):
        for i in range(20):
            f = check[i % len(check)]
            p.logits(f["board"], f["extras"], f["mask"])
        times = []
        for f in check:
            t = time.perf_counter()
            p.logits(f["board"], f["extras"], f["mask"])
            times.append(time.perf_counter() - t)
        ms[key] = 1e3 * float(np.median(times))
    return {
        "states": len(check),
        "same_pick": same,
        "same_pick_fraction": same / max(len(check), 1),
        "float_ms_median": ms["a"],
        "int8_ms_median": ms["b"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m policy.quantize",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("model", help="float32 ONNX placement model (policy.ensemble's output)")
    ap.add_argument("--out", required=True, help="int8 ONNX file to write")
    ap.add_argument("--states", type=int, default=400, help="calibration states (default 400)")
    ap.add_argument("--check", type=int, default=400, help="check states (default 400)")
    args = ap.parse_args(argv)
    if args.states < 1 or args.check < 1:
        ap.error("--states and --check must be >= 1")
    try:
        import onnx  # noqa: F401  (quantize_static's dependency)
    except ImportError:
        print(
            "python -m policy.quantize needs the onnx package: pip install -e '.[train]'",
            file=sys.stderr,
        )
        return 2
    model, out = Path(args.model), Path(args.out)
    try:
        check_source(model)  # at once, before minutes of calibration
        if out.is_dir():
            raise ValueError(f"--out {out} is a folder: give the file to write")
        if out.resolve() == model.resolve():
            raise ValueError(f"--out {out} is the model itself: write the int8 copy elsewhere")
    except (FileNotFoundError, ValueError) as exc:
        print(f"policy.quantize: {exc}", file=sys.stderr)
        return 2
    # onnxruntime.quantization logs through the root logger (a line per tensor it skips).
    logging.getLogger().setLevel(logging.ERROR)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        from rich.console import Console

        console = Console(stderr=True)
        with console.status("calibration states (the float model's games)"):
            calib = feeds(calibration_states(args.states, model))
        with console.status(f"quantizing over {len(calib)} states"):
            quantize(model, tmp, calib)
        with console.status("checking against the float model"):
            report = compare(model, tmp, feeds(check_states(args.check, model)))
        os.replace(tmp, out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"policy.quantize: {exc}", file=sys.stderr)
        return 2
    finally:
        tmp.unlink(missing_ok=True)
    report = {
        "model": str(args.model),
        "out": str(args.out),
        "bytes": Path(args.out).stat().st_size,
        "calibration_states": len(calib),
        **report,
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
