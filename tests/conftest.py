"""Shared fixtures: the reference data in tests/data and engine/data (sources in their READMEs)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"
NES_TABLES = ROOT / "engine" / "data" / "nes_tables.json"


@pytest.fixture(scope="session")
def demo_trace() -> dict:
    path = TEST_DATA / "nes_demo_trace.json"
    if not path.exists():
        pytest.fail(f"reference data missing: {path} (tests/data/README.md)")
    return json.loads(path.read_text())


# A test that needs an optional dependency (the train extra's torch or onnx, Debian's cc65) skips
# without it, so the README's plain `pip install -e .[test] && pytest` passes. CI installs every
# extra and sets DRMARIO_NO_DEPENDENCY_SKIPS=1: there such a skip is a failure, never silent.
STRICT_DEPENDENCIES = os.environ.get("DRMARIO_NO_DEPENDENCY_SKIPS") == "1"
DEPENDENCY_SKIPS = ("could not import", "missing dependency:")


def _dependency_skip(report: pytest.CollectReport | pytest.TestReport) -> str | None:
    if not (STRICT_DEPENDENCIES and report.skipped and isinstance(report.longrepr, tuple)):
        return None
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    return reason if reason.startswith(DEPENDENCY_SKIPS) else None


def _fail(report: pytest.CollectReport | pytest.TestReport, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"skipped for a missing dependency, which CI must install: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if (reason := _dependency_skip(report)) is not None:
        _fail(report, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if (reason := _dependency_skip(report)) is not None:
        _fail(report, reason)


# A small capture (320x240, MJPEG, 3 frames of latency) for `hil run` tests that are about the
# loop, not the picture: the shipped 720p profiles cost most of such a run's time.
SMALL_PROFILE = {
    "name": "small_mjpeg_test",
    "geometry": {"width": 320, "height": 240, "scale_x": 1.25, "scale_y": 1.0, "offset_x": 0.0},
    "color": {"range": "limited", "gamma": 1.05},
    "artifacts": {"noise": 1.5, "jpeg_quality": 70},
    "timing": {
        "capture_hz": 60.0,
        "latency_frames": 3.0,
        "jitter_ms": 2.0,
        "drop_rate": 0.002,
        "repeat_rate": 0.002,
    },
}


@pytest.fixture(scope="session")
def small_profile(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Path of SMALL_PROFILE written as a profile JSON."""
    path = tmp_path_factory.mktemp("profile") / "small_mjpeg_test.json"
    path.write_text(json.dumps(SMALL_PROFILE))
    return str(path)
