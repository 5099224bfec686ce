"""The committed test ROM image is what its source builds (hil/testrom: testrom.s, nrom.cfg)."""

from __future__ import annotations

import shutil

import pytest

from hil import testrom


def test_committed_image_is_the_build_of_its_source(tmp_path):
    if shutil.which("ca65") is None or shutil.which("ld65") is None:
        # cc65 is a Debian package, not a pip one: a user's venv may lack it; CI installs it
        # and fails on this skip (conftest: missing-dependency skips are errors under CI).
        pytest.skip("missing dependency: cc65 (apt-get install cc65)")
    built = testrom.build(tmp_path).read_bytes()
    assert len(built) == testrom.ROM_SIZE
    assert built == testrom.image().read_bytes(), (
        "hil/testrom/testrom.nes is not the build of testrom.s: run python -m hil.testrom --update"
    )


def test_image_header_is_nrom():
    data = testrom.image().read_bytes()
    assert data[:4] == b"NES\x1a"
    assert (data[4], data[5]) == (1, 1)  # 16 KiB PRG, 8 KiB CHR
    assert data[6] >> 4 == 0 and data[7] >> 4 == 0  # mapper 0
