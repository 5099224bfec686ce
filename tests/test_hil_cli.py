"""The hil command line exists from the start: --help and the demo command."""

from __future__ import annotations

import subprocess
import sys


def test_help_lists_commands():
    out = subprocess.run(
        [sys.executable, "-m", "hil.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "demo" in out and "usage: hil" in out


def test_demo_command_plays_the_demo():
    out = subprocess.run(
        [sys.executable, "-m", "hil.cli", "demo"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1].startswith("5700 frames")
    assert "18 viruses left" in out


def test_a_bad_command_line_is_one_line_and_exit_2():
    for args in (["run", "--speed", "3"], ["bogus"], ["run", "--levels"]):
        r = subprocess.run([sys.executable, "-m", "hil.cli", *args], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("hil"), r.stderr
        assert "--help" in lines[0] and "usage" not in r.stderr
