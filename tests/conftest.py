"""Shared fixtures: the reference data in ../shared/reference (read-only, beside the repo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference"


@pytest.fixture(scope="session")
def demo_trace() -> dict:
    path = REFERENCE / "nes_demo_trace.json"
    if not path.exists():
        pytest.fail(f"reference data missing: {path} (shared/ must sit beside the repo)")
    return json.loads(path.read_text())
