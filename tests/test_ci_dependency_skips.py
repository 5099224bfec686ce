"""A test that skips for a missing optional dependency passes the README's plain run, and fails
when DRMARIO_NO_DEPENDENCY_SKIPS=1 (what CI sets once every extra is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

CASES = """
import pytest

def test_needs_a_missing_module():
    pytest.importorskip("no_such_module_drmario")

def test_needs_a_missing_tool():
    pytest.skip("missing dependency: cc65 (apt-get install cc65)")

def test_skips_for_another_reason():
    pytest.skip("not on this platform")
"""


def run(tmp_path: Path, strict: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "DRMARIO_NO_DEPENDENCY_SKIPS"}
    if strict:
        env["DRMARIO_NO_DEPENDENCY_SKIPS"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("strict", [False, True])
def test_dependency_skips_fail_only_when_ci_asks(tmp_path: Path, strict: bool) -> None:
    done = run(tmp_path, strict)
    last = done.stdout.strip().splitlines()[-1]
    if strict:
        assert done.returncode == 1, done.stdout
        assert "2 failed, 1 skipped" in last
        assert "skipped for a missing dependency" in done.stdout
    else:
        assert done.returncode == 0, done.stdout
        assert "3 skipped" in last
