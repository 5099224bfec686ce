"""perception.train on a tiny budget: it trains, exports an ONNX graph that matches torch, and
the reader runs it (the shipped model is checked in test_perception_reader.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the train extra; CI installs it

from calibration import CaptureModel, Profile  # noqa: E402
from perception.reader import BoardReader  # noqa: E402
from perception.train import SampleStream, build_parser, export_onnx, train  # noqa: E402


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


def test_train_rejects_bad_arguments():
    from perception.train import main

    with pytest.raises(SystemExit, match="at least 1"):
        main(["--steps", "0"])
    with pytest.raises(SystemExit, match="no such file"):
        main(["--rom", "/nonexistent/drmario.nes"])
