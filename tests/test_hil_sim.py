"""hil sim: a played game through a capture profile, recorded and read back; the contact sheet."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from calibration import Geometry, Profile, Timing, to_nes
from hil.loop.recording import Recording
from hil.sim_record import (
    RandomPlayer,
    SimSettings,
    contact_sheet,
    game_truth,
    level_frames,
    record,
    sim_console,
)


def replay_picture(settings: SimSettings, masks: list[int], console_frame: int) -> np.ndarray:
    """Console frame n's picture: render_frame of the state after n - 1 steps."""
    game = engine.Game(settings.level, settings.speed, settings.seed)
    for m in masks[: max(0, console_frame - 1)]:
        game.step(m)
    return engine.render_frame(game)


def test_random_player_places_pills_where_the_planner_said():
    settings = SimSettings(level=3, speed=2, seed=0x1234, player_seed=5)
    game = engine.Game(settings.level, settings.speed, settings.seed)
    player = RandomPlayer(np.random.default_rng(5))
    locks = []
    while len(locks) < 2 and int(game.frame) < 2000:
        game.step(player.mask(game))
        if int(game.lock_event):
            locks.append(game.field.copy())
    assert len(player.placements) >= 2 and len(locks) == 2
    for index, field in zip(player.placements, locks, strict=False):
        rotation, row, col = index // 128, (index % 128) // 8, index % 8
        assert field[row * 8 + col] != 0xFF  # the lower-left half landed on its cell
        assert rotation in (0, 1, 2, 3)


def test_sim_record_end_to_end(tmp_path):
    settings = SimSettings(level=5, speed=2, seed=0x8988, player_seed=1, taps_only=True)
    profile = Profile(name="ideal_480p", geometry=Geometry.centered(640, 480))
    count = record(settings, profile, frames=300, out=tmp_path / "rec")
    rec = Recording(tmp_path / "rec")
    assert len(rec) == count and 250 <= count <= 300
    assert rec.meta["source"]["level"] == 5 and rec.profile == profile

    # The same console played again (the simulated console is deterministic) shows the same
    # pictures; every captured frame is exactly the rendered console frame its sidecar names
    # (FFV1 is lossless, the ideal chain exact), from the whole board on (state 0 is shown in
    # console frame s0, the whole board one frame earlier).
    console, _ = sim_console(settings, profile, max_frames=400 + 3 * 300)
    shown = []
    for frame, truth in rec:
        n = truth["console_frame"]
        console.run_to_frame(n)
        s0 = console.records[0].start_frame
        assert n >= s0 - 1 and truth["odd_frame"] == n
        assert truth["state_frame"] == max(0, n - s0)
        want = console.render(console.picture_state(n))
        np.testing.assert_array_equal(to_nes(profile, frame.image), want)
        shown.append(n)
    console.close()
    assert shown == sorted(shown) and shown[0] == s0 - 1
    phases = {t["phase"] for t in rec.truth}
    assert {"INTRO", "PLAYING"} <= phases
    drawn = [t for t in rec.truth if t["screen"]["falling"] is not None]
    assert drawn and all(t["screen"]["kind"] == "LEVEL" for t in rec.truth)
    assert any(t["pill"] is not None for t in rec.truth)


def test_sim_record_plays_on_the_simulated_console_from_its_options_screen():
    """One simulated console: the player presses Start on the options screen, the level's intro
    is drawn virus by virus (``intro``), then the board; the same frames the console's capture
    delivers."""
    settings = SimSettings(level=10, speed=1, seed=0x8988, taps_only=True)
    console, _ = sim_console(settings, Profile(), max_frames=2000)
    got = [t for _, t in level_frames(console, 400, intro=True)]
    rec = console.records[0]
    assert rec.start_press == 0 and rec.spec == console.levels[0]
    bottles = [np.frombuffer(bytes.fromhex("".join(t["screen"]["bottle"])), np.uint8) for t in got]
    viruses = [int(((b & 0xF0) == 0xD0).sum()) for b in bottles]
    assert viruses[0] < 44 and 44 in viruses  # (10 + 1) * 4, drawn one a frame
    assert got[0]["console_frame"] < rec.start_frame - 1
    console.close()


def test_truth_follows_drops_repeats_and_combing(tmp_path):
    settings = SimSettings(level=0, speed=1, seed=0x8988, taps_only=True)
    profile = Profile.load("composite_480p_combing").replace(
        timing=Timing(drop_rate=0.05, repeat_rate=0.05)
    )
    console, _ = sim_console(settings, profile, capture_seed=3, max_frames=2000)
    got = [(f.index, t) for f, t in level_frames(console, 200)]
    sched = console.schedule
    assert len(got) == 200
    # The frames are the console capture's, in its order: device frames with gaps (drops),
    # console frames repeated (repeats), the odd lines one console frame older (combing).
    devs = [t["device_index"] for _, t in got]
    k0 = int(np.flatnonzero(sched.device_index == devs[0])[0])
    assert devs == sched.device_index[k0 : k0 + 200].tolist()
    assert [t["console_frame"] for _, t in got] == sched.console_frame[k0 : k0 + 200].tolist()
    assert all(t["odd_frame"] == t["console_frame"] - 1 for _, t in got)
    assert np.diff(devs).max() > 1 and np.diff([t["console_frame"] for _, t in got]).min() == 0
    assert [i for i, _ in got] == list(range(len(got)))
    console.close()


def test_game_truth_is_json_ready_ram_and_screen():
    game = engine.Game(10, 1, 0x8988)
    for _ in range(160):
        game.step(0)
    truth = game_truth(game)
    assert truth["phase"] == "PLAYING" and truth["state_frame"] == 160
    field = np.frombuffer(bytes.fromhex("".join(truth["field"])), np.uint8)
    np.testing.assert_array_equal(field, game.field)
    assert truth["pill"]["colors"] == [int(c) for c in game.pill_colors]
    assert truth["virus_left"] == game.virus_left
    facts = engine.screen_facts(game)
    bottle = np.frombuffer(bytes.fromhex("".join(truth["screen"]["bottle"])), np.uint8)
    np.testing.assert_array_equal(bottle, facts.bottle.reshape(-1))
    assert facts.falling is not None
    assert truth["screen"]["falling"]["box"] == list(facts.falling.box)
    assert truth["screen"]["next"]["throw_frame"] == facts.next.throw_frame


def test_contact_sheet_is_a_png_with_a_row_per_profile(tmp_path):
    import cv2

    frame = replay_picture(SimSettings(), [0] * 200, 200)
    profiles = [Profile.load("ideal_720p_nearest"), Profile.load("composite_480p_combing")]
    one = contact_sheet(profiles[:1], [frame, frame], tmp_path / "one.png")
    two = contact_sheet(profiles, [frame, frame], tmp_path / "two.png")
    a, b = cv2.imread(str(one)), cv2.imread(str(two))
    assert a is not None and b is not None
    assert b.shape[0] > 1.8 * a.shape[0] and b.shape[1] == a.shape[1]


def test_sim_rejects_bad_requests():
    with pytest.raises(ValueError, match="max_frames must be at least 1"):
        next(level_frames(sim_console(SimSettings(), Profile())[0], 0))
    with pytest.raises(ValueError, match="level"):
        sim_console(SimSettings(level=99), Profile())


def test_cli_sim_record_and_show(tmp_path, monkeypatch, capsys):
    from hil.cli import main

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.chdir(tmp_path)
    args = ["sim", "record", "--level", "0", "--frames", "40", "--out", "rec", "--quiet"]
    assert main([*args, "--profile", "ideal_720p_nearest", "--taps-only"]) == 0
    assert len(Recording(tmp_path / "rec")) == 40
    assert "40 captured frames (ideal_720p_nearest) written to rec" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="already holds a recording"):
        main([*args, "--taps-only"])
    with pytest.raises(SystemExit, match="no profile file 'nope'; shipped profiles: "):
        main([*args, "--profile", "nope"])
    show = ["sim", "show", "--profile", "ideal_720p_nearest", "--frame", "20"]
    assert main(show) == 0  # no display: the contact sheet
    assert (tmp_path / "capture_contact_sheet.png").stat().st_size > 10_000
    assert main([*show, "--png", "sheet.png"]) == 0 and (tmp_path / "sheet.png").exists()
    (tmp_path / "not_a_rom.nes").write_bytes(b"\0" * 64)
    with pytest.raises(SystemExit, match="hil sim: .*not_a_rom.nes"):
        main([*show, "--rom", "not_a_rom.nes"])
