"""hil prepare on a synthetic iNES ROM with made-up tiles: it fine-tunes the shipped network,
validates, stores the model by the ROM's CRC-32 in the data directory, records the ROM in the
rig's profile; hil run then reads with that model. Also: the refusals (no torch, a bad ROM),
the model choice, and hil calibrate's --rom / latency write-back."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the train extra; CI installs it
pytest.importorskip("onnx")  # the train extra too: torch.onnx exports with it

import engine  # noqa: E402
from calibration import Profile  # noqa: E402
from calibration.forward import NoiseSource, forward  # noqa: E402
from perception import prepare as prep  # noqa: E402
from perception.appearance import randomize  # noqa: E402
from perception.store import SHIPPED_MODEL, choose_model, prepared_model  # noqa: E402


@pytest.fixture(scope="module")
def made_up_rom(tmp_path_factory):
    """A Dr. Mario-shaped iNES file whose tiles are made up (randomised drawings, background
    and glass tiles): its CRC is no known dump."""
    from test_ines import build_rom

    # seed 18: a new drawing family, background and glass tiles and palettes all changed
    tiles = randomize(engine.TileSet.clean_room(), np.random.default_rng(18))
    assert "new drawings" in tiles.name
    data = build_rom(tiles)
    path = tmp_path_factory.mktemp("rom") / "madeup.nes"
    path.write_bytes(data)
    return path, f"{zlib.crc32(data[16:]):08X}"


def hil(*argv, env=None):
    return subprocess.run(
        [sys.executable, "-m", "hil.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
    )


def test_from_onnx_holds_the_shipped_network():
    import onnxruntime as ort

    from perception.model import from_onnx

    model = from_onnx(SHIPPED_MODEL).eval()
    x = torch.randint(0, 256, (2, 208, 144, 3), dtype=torch.uint8)
    got = ort.InferenceSession(str(SHIPPED_MODEL)).run(None, {"image": x.numpy()})
    with torch.no_grad():
        want = model(x)
    for g, w in zip(got, want, strict=True):
        assert np.abs(g - w.numpy()).max() < 1e-4


def test_prepare_builds_validates_stores_and_hil_run_uses_it(
    made_up_rom, tmp_path, monkeypatch, capsys
):
    rom, crc = made_up_rom
    data = tmp_path / "data"
    monkeypatch.setenv("DRMARIO_BRIDGE_DATA", str(data))
    rig = tmp_path / "rig.json"
    rig.write_text(Profile.load("ideal_720p_nearest").replace(name="rig").to_json())
    argv = [
        "--rom", rom, "--no-crc", "--profile", rig, "--steps", "6",
        "--batch", "4", "--workers", "0", "--eval-frames", "6", "--random-chains", "2",
        "--random-frames", "4", "--versus-frames", "4", "--quiet",
    ]  # fmt: skip
    code = prep.main([str(a) for a in [*argv, "--install-anyway"]])
    assert code in (0, 1)  # 1: a 6-step model misses the goals, and says so
    # the screen prototypes ran beside the training; this ROM's program is no game (its PRG is
    # made up), so there are none, and the time includes that background step
    result = json.loads(capsys.readouterr().out)
    assert result["screens"] is None and not (data / "models" / crc / "screens.npz").exists()
    assert result["total_s"] >= result["train_s"] + result["eval_s"]
    model = data / "models" / crc / "board.onnx"
    assert prepared_model(crc) == model and model.is_file()
    # the ROM's digit glyphs beside it: the reader reads the panel's LEVEL number with them
    from perception.panel import PANEL_FILE, glyphs, load_glyphs
    from perception.reader import panel_reader

    rom_tiles = engine.TileSet.from_ines(rom, verify_crc=False)
    assert np.array_equal(load_glyphs(model.parent / PANEL_FILE), glyphs(rom_tiles))
    assert panel_reader(model) is not None
    report = json.loads((data / "models" / crc / "board.report.json").read_text())
    assert report["meta"]["rom_crc32"] == crc and report["meta"]["steps_done"] == 6
    assert report["meta"]["total_s"] == result["total_s"]  # written once, screens included
    assert report["meta"]["installed"] and report["meta"]["threads"] == 1
    groups = report["summary"]["goal_groups"]
    assert "hdmi_1080p_bilinear" in groups and "rig:rig" in groups
    assert "2 random chains (pooled)" in groups
    assert "two players (6 profiles pooled)" in groups  # the shipped ones and the rig's
    assert report["meta"]["versus_rate"] == 0.4
    assert report["summary"]["goals_met"] == (code == 0)
    assert "## Goals" in (data / "models" / crc / "board.report.md").read_text()
    assert Profile.load(rig).rom_crc32 == crc  # hil run finds the model from the profile
    choice = choose_model(None, Profile.load(rig))
    assert choice.path == model and crc in choice.why
    run = hil(
        "run", "--fast", "--profile", rig, "--reader", "onnx", "--policy", "heuristic",
        "--view", "none", "--frames", "400",
        env={**__import__("os").environ, "DRMARIO_BRIDGE_DATA": str(data)},
    )  # fmt: skip
    assert f"perception model {model} (prepared for ROM {crc})" in run.stderr, run.stderr[-2000:]
    assert run.returncode in (0, 1), run.stderr[-2000:]
    assert json.loads(run.stdout)["console_frames"] > 0
    # --model wins over the profile's ROM; a missing one is one line, exit 2
    other = hil(
        "run", "--fast", "--profile", rig, "--reader", "onnx", "--view", "none",
        "--frames", "50", "--model", SHIPPED_MODEL,
    )  # fmt: skip
    assert f"perception model {SHIPPED_MODEL} (--model)" in other.stderr
    bad = hil("run", "--fast", "--profile", rig, "--reader", "onnx", "--model", tmp_path / "x")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert "--model: " in bad.stderr and "x: no such file" in bad.stderr


def _goals(monkeypatch, met):
    """Validation as it is, its verdict replaced by ``met`` (a 6-step model's verdict is
    whatever 6 steps give)."""
    import perception.evaluate as ev

    real = ev.evaluate

    def evaluate(*a, **k):
        out = real(*a, **k)
        out["summary"].update(goals_met=met, goal_misses=[] if met else ["MJPEG: boards 98 %"])
        return out

    monkeypatch.setattr(ev, "evaluate", evaluate)


def test_a_model_that_misses_a_goal_is_not_installed(made_up_rom, tmp_path, monkeypatch, capsys):
    rom, crc = made_up_rom
    monkeypatch.setenv("DRMARIO_BRIDGE_DATA", str(tmp_path))
    argv = [
        "--rom", rom, "--no-crc", "--steps", "2", "--batch", "2", "--workers", "0",
        "--eval-frames", "2", "--random-chains", "0", "--quiet",
    ]  # fmt: skip
    argv = [str(a) for a in argv]
    folder = tmp_path / "models" / crc
    _goals(monkeypatch, met=False)
    assert prep.main(argv) == 1  # nothing installed before: none now, the candidate aside
    out = json.loads(capsys.readouterr().out)
    assert not out["installed"] and out["kept"] is None and prepared_model(crc) is None
    assert out["model"] == str(folder / "candidate" / "board.onnx")
    assert "--init " + out["model"] in out["advice"] and "--install-anyway" in out["advice"]
    assert "hil run --model " + out["model"] in out["advice"]
    assert (folder / "candidate" / "panel.npz").is_file()
    assert not json.loads((folder / "candidate" / "board.report.json").read_text())["meta"][
        "installed"
    ]
    _goals(monkeypatch, met=True)
    assert prep.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["installed"]
    good = (folder / "board.onnx").read_bytes()
    assert not (folder / "candidate").exists()  # the stale candidate is gone
    _goals(monkeypatch, met=False)
    assert prep.main([*argv, "--seed", "3"]) == 1  # the good model stays in use
    out = json.loads(capsys.readouterr().out)
    installed = folder / "board.onnx"
    assert out["kept"] == str(installed) and prepared_model(crc) == installed
    assert (folder / "board.onnx").read_bytes() == good
    assert (folder / "candidate" / "board.onnx").read_bytes() != good
    assert prep.main([*argv, "--seed", "3", "--install-anyway"]) == 1  # installed, still 1
    assert json.loads(capsys.readouterr().out)["installed"]
    assert (folder / "board.onnx").read_bytes() != good


def test_prepare_refuses_in_one_line(made_up_rom, tmp_path, monkeypatch, capsys):
    rom, _ = made_up_rom
    monkeypatch.setenv("DRMARIO_BRIDGE_DATA", str(tmp_path))
    assert prep.main(["--rom", str(rom)]) == 2  # an unknown dump without --no-crc
    err = capsys.readouterr().err
    assert "CRC-32" in err and "pass --no-crc" in err and "verify_crc" not in err
    assert prep.main(["--rom", str(tmp_path / "none.nes")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert prep.main(["--rom", str(tmp_path)]) == 2
    assert "is a directory, not a ROM file" in capsys.readouterr().err
    assert prep.main(["--rom", str(rom), "--no-crc", "--versus-rate", "1.5"]) == 2
    assert "--versus-rate must be within 0..1" in capsys.readouterr().err
    real = prep.importlib.util.find_spec
    monkeypatch.setattr(
        prep.importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    assert prep.main(["--rom", str(rom), "--no-crc"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("pip install -e .[train]") and "\n" not in err
    assert not (tmp_path / "models").exists()


def _video(path, tiles, profile):
    from perception.data import Player

    g = engine.Game(8, 1, 0x5A5A)
    player = Player(np.random.default_rng(1), greedy=0.0, pause_rate=0.0)
    writer = cv2.VideoWriter(
        str(path),
        cv2.VideoWriter_fourcc(*"MJPG"),
        30,
        (profile.geometry.width, profile.geometry.height),
    )
    noise = NoiseSource(0)
    for k in range(420):
        g.step(player.mask(g))
        if k >= 180 and k % 60 == 0:
            writer.write(forward(profile, engine.render_frame(g, tiles), None, noise))
    writer.release()


def test_calibrate_needs_rom_for_a_picture_that_is_not_clean_room(made_up_rom, tmp_path):
    rom, crc = made_up_rom
    tiles = engine.TileSet.from_ines(rom, verify_crc=False)
    profile = Profile.load("hdmi_1080p_bilinear")
    video = tmp_path / "capture.avi"
    _video(video, tiles, profile)
    out = tmp_path / "rig.json"
    bad = hil("calibrate", "--input", video, "--out", out, "--frames", "4")
    assert bad.returncode == 2, bad.stderr
    assert "needs --rom" in bad.stderr and bad.stderr.strip().count("\n") == 0
    assert not out.exists()
    good = hil(
        "calibrate", "--input", video, "--out", out, "--frames", "4", "--rom", rom, "--no-crc"
    )
    assert good.returncode == 0, good.stderr
    assert Profile.load(out).rom_crc32 == crc


def test_calibrate_latency_writes_the_profile(tmp_path):
    rig = tmp_path / "rig.json"
    base = Profile.load("ideal_720p_nearest")
    rig.write_text(base.to_json())
    cal = hil(
        "calibrate", "latency", "--fast", "--presses", "4", "--profile", rig, "--reader", "oracle"
    )
    assert cal.returncode == 0, cal.stderr[-2000:]
    result = json.loads(cal.stdout)
    written = Profile.load(rig)
    assert result["profile_written"] == str(rig)
    assert written.timing.latency_frames == pytest.approx(result["latency_frames"])
    assert written.timing.jitter_ms == pytest.approx(result["jitter_ms"])
    assert written.geometry == base.geometry


def test_the_background_step_ends_when_its_parent_is_killed(tmp_path):
    """A parent killed with SIGKILL (no chance to end its children) leaves no screens process
    behind: the child sees itself re-parented and exits."""
    import signal
    import time

    child = (
        "import sys, time; from perception.prepare import _exit_when_orphaned; "
        "_exit_when_orphaned(int(sys.argv[1]), 0.05); time.sleep(60)"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time; "
            f"p = subprocess.Popen([sys.executable, '-c', {child!r}, str(os.getpid())]); "
            "print(p.pid, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(parent.stdout.readline())
    time.sleep(1.0)  # the child is up and watching
    assert _alive(pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stdout.close()
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the orphaned child kept running"
    # a parent already gone before the child watched (the pid it was given is not its parent)
    other = subprocess.run([sys.executable, "-c", child, "1"], timeout=30)
    assert other.returncode == 1


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in state
