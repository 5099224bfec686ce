"""policy.quantize: the shipped network is the int8 copy of its float32 ensemble, picks as the
float model does on nearly every state, honours the mask; the command builds such a copy and
refuses bad input with one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy
from policy.quantize import check_states, compare, feeds, main

FLOAT_MODEL = DEFAULT_MODEL.with_name("policy_fp32.onnx")


def test_shipped_network_is_the_int8_copy_of_the_float_ensemble() -> None:
    """policy.onnx holds int8 convolutions (QDQ nodes) and is smaller than its float32 source;
    on 60 spawn states of training seeds it picks the float model's placement at least 90 % of
    the time (400 states: 96.75 %, docs/POLICY.md "Int8") and only reachable ones."""
    data = DEFAULT_MODEL.read_bytes()
    assert b"DequantizeLinear" in data and b"QuantizeLinear" in data
    assert b"DequantizeLinear" not in FLOAT_MODEL.read_bytes()
    assert len(data) < 0.5 * FLOAT_MODEL.stat().st_size
    check = feeds(check_states(60, FLOAT_MODEL))
    report = compare(FLOAT_MODEL, DEFAULT_MODEL, check)
    assert report["states"] == 60
    assert report["same_pick"] >= 54, report
    net = PlacementPolicy()
    for f in check[:20]:
        logits = net.logits(f["board"], f["extras"], f["mask"])[0]
        assert f["mask"][0, int(np.argmax(logits))]
        assert (logits[~f["mask"][0]] <= -1e8).all()


def test_quantize_command_writes_a_model_every_player_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A small run of the shipped model's command (CI's version of docs/POLICY.md step 10):
    the written file loads in PlacementPolicy and plays reachable placements."""
    pytest.importorskip("onnx")  # the train extra (CI installs it)
    out = tmp_path / "int8.onnx"
    assert main([str(FLOAT_MODEL), "--out", str(out), "--states", "8", "--check", "8"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["calibration_states"] == 8 and report["states"] == 8
    assert report["same_pick"] >= 6, report  # 8 of 8 on this machine
    assert report["bytes"] == out.stat().st_size
    assert b"DequantizeLinear" in out.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["int8.onnx"]  # no temporary file left
    net = PlacementPolicy(out)
    for f in feeds(check_states(6, FLOAT_MODEL)):
        mask = f["mask"][0]
        logits = net.logits(f["board"], f["extras"], f["mask"])[0]
        assert mask[int(np.argmax(logits))]


def test_shipped_network_imports_only_the_operator_sets_it_uses() -> None:
    """onnxruntime 1.17 (the oldest pyproject allows) refuses a model that imports operator
    sets it does not know; the optimizer run before quantizing stamps nine."""
    onnx = pytest.importorskip("onnx")
    model = onnx.load(str(DEFAULT_MODEL))
    used = {n.domain for n in model.graph.node} | {""}
    assert {o.domain for o in model.opset_import} <= used


def test_quantize_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    out = tmp_path / "o.onnx"
    cases = [
        ([str(tmp_path / "missing.onnx"), "--out", str(out)], "missing.onnx"),
        ([str(bad), "--out", str(out)], "bad.onnx"),
        ([str(DEFAULT_MODEL), "--out", str(out)], "already quantized"),
        ([str(FLOAT_MODEL), "--out", str(FLOAT_MODEL)], "the model itself"),
        ([str(FLOAT_MODEL), "--out", str(tmp_path)], "is a folder"),
    ]
    before = FLOAT_MODEL.read_bytes()
    for argv, words in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("policy.quantize:") and "\n" not in err and words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.onnx"]  # nothing written
    assert FLOAT_MODEL.read_bytes() == before
    with pytest.raises(ValueError, match="not an ONNX model"):
        PlacementPolicy(bad)
