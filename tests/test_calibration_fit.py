"""calibration.fit: geometry and colour of a capture chain from a few gameplay frames, and the
`hil calibrate` command."""

from __future__ import annotations

import json
import subprocess
import sys

import cv2
import numpy as np
import pytest

import engine
from calibration import Color, Geometry, NoiseSource, Profile, forward
from calibration.fit import FitError, boundary_error, fit_profile, forward_color


def gameplay(frames: int, seed: int = 1) -> list[np.ndarray]:
    """NES pictures of a level in play, some seconds apart (random presses)."""
    rng = np.random.default_rng(seed)
    g = engine.Game(10 + seed % 8, seed % 3, 0x1000 + 2 * seed)
    out = []
    for f in range(1, 6000):
        g.step(int(rng.choice([0, 0, 1, 2, 4, 0x80])) if f % 3 == 0 else 0)
        if f % 150 == 0:
            out.append(engine.render_frame(g))
        if len(out) == frames:
            break
    return out


RANDOM_SEEDS = [7, 13, 19]  # 640x480 bilinear, 720x480 nearest with crop, 640x480 area


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_fit_recovers_random_geometry_within_a_quarter_pixel(seed):
    profile = Profile.random(np.random.default_rng([555, seed]))
    noise = NoiseSource(seed)
    frames = [forward(profile, p, None, noise) for p in gameplay(4, seed)]
    result = fit_profile(frames)
    assert boundary_error(result.profile.geometry, profile.geometry) <= 0.25
    assert result.geometry_residual_px < 0.5
    assert result.profile.geometry.width == profile.geometry.width


def test_fit_recovers_the_shipped_composite_chain():
    profile = Profile.load("composite_480p_combing")
    frames = [forward(profile, p, None, NoiseSource(2)) for p in gameplay(4, 3)]
    fitted = fit_profile(frames, name="composite").profile
    assert boundary_error(fitted.geometry, profile.geometry) <= 0.25
    g = fitted.geometry
    assert (g.crop_top, g.crop_bottom, g.crop_left, g.crop_right) == (8, 8, 4, 4)
    assert fitted.color.range == "limited"


def test_fit_recovers_a_colour_section():
    true = Color(
        range="limited", gamma=1.1, saturation=0.85, gain=(1.04, 1.0, 0.95), offset=(3, 0, -2)
    )
    profile = Profile(geometry=Geometry.centered(1280, 720), color=true)
    result = fit_profile([forward(profile, p) for p in gameplay(3, 4)])
    nes = engine.NES_PALETTE[[0x0F, 0x28, 0x15, 0x21, 0x30, 0x0A]].astype(float)
    err = np.abs(forward_color(result.profile.color, nes) - forward_color(true, nes))
    assert result.profile.color.range == "limited"
    assert err[:4].max() < 3.0  # the fitted colours (backdrop, yellow, red, blue)
    assert err.max() < 12.0  # white and green, not fitted, land near too
    assert result.color_residual < 1.5


def test_fit_rejects_frames_it_cannot_use():
    with pytest.raises(FitError, match="at least one"):
        fit_profile([])
    with pytest.raises(FitError, match="one size"):
        fit_profile([np.zeros((480, 640, 3), np.uint8), np.zeros((720, 1280, 3), np.uint8)])
    with pytest.raises(FitError, match="no picture"):
        fit_profile([np.zeros((480, 640, 3), np.uint8)])
    with pytest.raises(FitError, match="BGR uint8"):
        fit_profile([np.zeros((480, 640), np.uint8)])


def test_hil_calibrate_writes_profile_and_grid_png(tmp_path):
    profile = Profile.load("mjpeg_720p_q70")
    video = tmp_path / "capture.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 30, (1280, 720))
    noise = NoiseSource(0)
    writer.write(np.zeros((720, 1280, 3), np.uint8))  # a video may begin black
    for p in gameplay(3, 9):
        writer.write(forward(profile, p, None, noise))
    writer.release()
    out = tmp_path / "rig.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "hil.cli",
            "calibrate",
            "--input",
            str(video),
            "--out",
            str(out),
            "--frames",
            "3",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    fitted = Profile.load(out)
    assert boundary_error(fitted.geometry, profile.geometry) <= 0.25
    png = cv2.imread(str(tmp_path / "rig.png"))
    assert png is not None and png.shape == (720, 1280, 3)
    assert float(png.mean()) > 20  # the grid is drawn over a picture of the game, not black
    assert json.loads(out.read_text())["name"] == "rig"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "hil.cli",
            "calibrate",
            "--input",
            str(tmp_path / "nope.avi"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "no such file" in bad.stderr
    # A missing ROM and a malformed --base profile: one line each, naming what is wrong.
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    for extra, says in (
        (["--rom", str(tmp_path / "nope.nes")], "nope.nes: no such file"),
        (["--base", str(broken)], "--base "),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "hil.cli", "calibrate", "--input", str(video), "--out",
             str(tmp_path / "other.json"), "--frames", "3", *extra],
            capture_output=True, text=True,
        )  # fmt: skip
        assert run.returncode == 2 and says in run.stderr, run.stderr
        assert run.stderr.strip().count("\n") == 0
