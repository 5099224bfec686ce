"""perception.train on a tiny budget: it trains, exports an ONNX graph that matches torch, and
the reader runs it (the shipped model is checked in test_perception_reader.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the train extra; CI installs it
pytest.importorskip("onnx")  # the train extra too: torch.onnx exports with it

from calibration import CaptureModel, Profile  # noqa: E402
from perception.reader import BoardReader  # noqa: E402
from perception.train import (  # noqa: E402
    SampleStream,
    build_parser,
    export_onnx,
    losses,
    resolve_precision,
    train,
)


def test_tiny_training_exports_an_onnx_model_the_reader_runs(tmp_path):
    args = build_parser().parse_args(
        [
            "--steps",
            "3",
            "--batch",
            "4",
            "--workers",
            "0",
            "--buffer",
            "8",
            "--quiet",
            "--width",
            "8",
            "8",
            "16",
            "16",
        ]
    )
    result = train(args)
    assert len(result["history"]) >= 1
    assert all(math.isfinite(h["loss"]) for h in result["history"])
    check = next(iter(SampleStream(5, 4, None, 1, 4)))["image"]
    path = tmp_path / "tiny.onnx"
    diff = export_onnx(result["model"], path, check)
    assert diff <= 1e-4
    profile = Profile.load("ideal_720p_nearest")
    frame = CaptureModel(profile)(np.zeros((240, 256, 3), np.uint8))
    obs = BoardReader(profile, path).read(frame)
    assert obs.field.shape == (16, 8) and obs.confidence.dtype == np.float32


def test_train_rejects_bad_arguments(capsys):
    from perception.train import main

    cases = [
        (["--steps", "0"], "at least 1"),
        (["--rom", "/nonexistent/drmario.nes"], "no such file"),
        (["--freeze-first"], "give --init"),  # without --init it would keep nothing
    ]
    for argv, says in cases:  # one line from argparse, exit 2, nothing trained
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert says in capsys.readouterr().err
    for bad in ("gpu0", "meta"):  # one line from argparse, exit 2
        with pytest.raises(SystemExit) as exit_:
            build_parser().parse_args(["--device", bad])
        assert exit_.value.code == 2


def test_rom_option_trains_on_the_roms_tiles(tmp_path, monkeypatch):
    import zlib

    from test_ines import build_rom  # the synthetic iNES image of tests/test_ines.py

    import engine
    from engine import ines
    from perception.train import _tiles

    clean = engine.TileSet.clean_room()
    patterns = clean.patterns.copy()
    patterns[:, 0x40:0x43] = 3 - patterns[:, 0x40:0x43]  # a ROM that draws pill tops its way
    data = build_rom(clean.replace(patterns=patterns))
    path = tmp_path / "drmario.nes"
    path.write_bytes(data)
    monkeypatch.setitem(ines.KNOWN_GOOD_CRC32, zlib.crc32(data[16:]), "Dr. Mario (test)")
    tiles = _tiles(str(path))
    assert (tiles.patterns[:, 0x40] == patterns[:, 0x40]).all()
    batch = next(iter(SampleStream(3, 4, str(path), 1, 4)))
    assert batch["image"].shape == (4, 208, 144, 3)


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "want"),
    [(False, False, "fp32"), (True, False, "bf16"), (False, True, "bf16")],
)
def test_auto_precision_is_bf16_only_where_the_cpu_has_it(monkeypatch, avx512_bf16, amx, want):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert build_parser().parse_args([]).precision == "auto"
    assert resolve_precision("auto") == want
    assert resolve_precision("fp32") == "fp32" and resolve_precision("bf16") == "bf16"
    assert resolve_precision("auto", "cuda") == "bf16"  # a GPU computes bfloat16 natively
    assert resolve_precision("fp32", "cuda") == "fp32"
    assert build_parser().parse_args([]).device == "cpu"


def _batch(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = (
        torch.randn(n, 22, 16, 8, generator=g, requires_grad=True),
        torch.randn(n, 4, 17, 8, generator=g, requires_grad=True),
        torch.randn(n, 7, generator=g, requires_grad=True),
        torch.randn(n, 6, generator=g, requires_grad=True),
    )
    b = {
        "cells": torch.randint(0, 22, (n, 16, 8), generator=g),
        "sprite": torch.randint(0, 4, (n, 17, 8), generator=g),
        "next": torch.tensor([[0, 1], [-1, -1], [2, 2], [1, 0]])[:n],
        "kind": torch.randint(0, 6, (n,), generator=g),
        "visible": torch.tensor([True, False, True, True])[:n],
    }
    return out, b


def test_hard_example_mining_adds_the_hardest_losses_only():
    out, b = _batch()
    plain = losses(out, b)
    hard = losses(out, b, hard_cells=0.02, hard_samples=0.25)
    per_cell = torch.nn.functional.cross_entropy(out[0], b["cells"], reduction="none")
    vis = per_cell[b["visible"]].flatten()
    k = math.ceil(0.02 * vis.numel())  # 0.02 of 384 visible cells: 8
    want = plain["cells"] + vis.sort(descending=True).values[:k].mean()
    assert torch.allclose(hard["cells"], want)
    present = b["next"][:, 0] >= 0
    per_next = torch.nn.functional.binary_cross_entropy_with_logits(
        out[2][:, 0], present.float(), reduction="none"
    )
    first = torch.nn.functional.cross_entropy(
        out[2][present, 1:4], b["next"][present, 0], reduction="none"
    )
    second = torch.nn.functional.cross_entropy(
        out[2][present, 4:], b["next"][present, 1], reduction="none"
    )
    per_next[present] += (first + second) / 2
    assert torch.allclose(hard["next"], plain["next"] + per_next.max())  # 1 of 4 samples
    assert hard["sprite"] > plain["sprite"]
    assert torch.equal(hard["kind"], plain["kind"])  # the kind is never mined
    # the extra term's gradient reaches the hardest cells only: an invisible board gets none
    out[0].grad = None
    (hard["cells"] - plain["cells"]).backward()
    grad = out[0].grad.abs().sum(dim=1)  # [4, 16, 8]
    assert grad[1].sum() == 0
    assert int((grad > 0).sum()) == k
    assert torch.equal(losses(out, b, 0.0, 0.0)["cells"], plain["cells"])


def test_batch_norms_fold_into_the_convolutions_and_back_computing_the_same():
    from perception.model import fold_batch_norm, freeze_batch_norm, from_onnx, unfold_batch_norm
    from perception.store import SHIPPED_MODEL

    model = from_onnx(SHIPPED_MODEL).eval()
    x = torch.randint(0, 256, (2, 208, 144, 3), dtype=torch.uint8)
    with torch.no_grad():
        want = model(x)
        freeze_batch_norm(model)
        fold_batch_norm(model)
        assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
        folded = model(x)
        unfold_batch_norm(model)
        assert isinstance(model.stem[0][1], torch.nn.BatchNorm2d)
        back = model.eval()(x)
    for w, f, b in zip(want, folded, back, strict=True):
        assert torch.allclose(w, f, atol=1e-5) and torch.allclose(w, b, atol=1e-5)


def test_fine_tuning_with_the_first_convolution_frozen_keeps_it_and_trains_the_rest(tmp_path):
    from perception.model import from_onnx
    from perception.store import SHIPPED_MODEL

    argv = ["--init", str(SHIPPED_MODEL), "--steps", "3", "--batch", "4", "--workers", "0"]
    argv += ["--buffer", "8", "--quiet", "--lr", "1e-2", "--freeze-first"]
    result = train(build_parser().parse_args(argv))
    start, model = from_onnx(SHIPPED_MODEL), result["model"]
    # the structure from_onnx gives, so the export folds the batch norms again
    assert isinstance(model.stem[0][1], torch.nn.BatchNorm2d)
    assert torch.equal(model.stem[0][0].weight, start.stem[0][0].weight)
    assert torch.equal(model.stem[0][1].bias, start.stem[0][1].bias)  # the frozen conv's bias
    assert not torch.equal(model.stem[1][0].weight, start.stem[1][0].weight)
    assert not torch.equal(model.stem[1][1].bias, start.stem[1][1].bias)
    path = tmp_path / "tuned.onnx"
    check = next(iter(SampleStream(5, 4, None, 1, 4)))["image"]
    assert export_onnx(model, path, check) <= 1e-4
    assert torch.allclose(from_onnx(path).stem[0][0].weight, start.stem[0][0].weight, atol=1e-6)


def test_the_training_cast_of_the_image_is_the_autocast_of_the_float_image():
    # BoardNet.forward under autocast casts the uint8 image straight to bfloat16: for every
    # byte the same value as the float32 image that autocast would cast
    v = torch.arange(256, dtype=torch.uint8)
    assert torch.equal(
        (v.float() * (1.0 / 255.0)).to(torch.bfloat16), v.to(torch.bfloat16) * (1.0 / 255.0)
    )
    from perception.model import BoardNet

    model = BoardNet((8, 8, 16, 16)).train()
    x = torch.randint(0, 256, (2, 208, 144, 3), dtype=torch.uint8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = model(x, logits=True)
        want = model.stem[0][0](x.permute(0, 3, 1, 2).float() * (1.0 / 255.0))
        first = model.stem[0][0](x.permute(0, 3, 1, 2).to(torch.bfloat16) * (1.0 / 255.0))
    assert got[0].dtype == torch.bfloat16 and torch.equal(first, want)
