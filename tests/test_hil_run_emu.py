"""`hil run --emu`: the emulator console behind the same Runtime, tracker and firmware core.

CI has no Dr. Mario ROM (none may enter the repository), so the path is run on the project's
own test ROM (hil.testrom, ``--emu-game testrom``): the menus are skipped (it has none), the
Runtime presses Start through the link and the virtual device, and the ROM latches it; there
is no game to play, so the run ends on its frame budget with 0 of 1 levels. Bad ROMs give one
line and exit code 2. The real game's numbers are in docs/EMU.md (measured locally)."""

from __future__ import annotations

import json

import pytest

from hil import testrom
from hil.cli import main


@pytest.fixture(scope="module")
def rom():
    return testrom.image()


def test_run_emu_drives_the_test_rom_through_the_runtime(rom, capsys, tmp_path):
    log = tmp_path / "run.jsonl"
    rc = main(
        ["run", "--emu", str(rom), "--emu-game", "testrom", "--fast", "--view", "none",
         "--frames", "400", "--reader", "oracle", "--policy", "heuristic", "--log", str(log)]
    )  # fmt: skip
    out = capsys.readouterr()
    assert rc == 1  # no level in a test ROM: 0 of 1 cleared
    summary = json.loads(out.out)
    assert summary["emu"]["game"] == "testrom"
    # The level the Start began is still "in play" when the frame budget ends the run: played,
    # not cleared, and said so.
    assert summary["levels_asked"] == summary["levels_played"] == 1
    assert summary["levels_cleared"] == 0
    assert summary["levels"][0]["result"] == "frame_budget"
    # The Runtime's Start press went link -> firmware core -> latch, on the frame it chose.
    events = [json.loads(line) for line in log.read_text().splitlines()]
    pressed = [e["frame"] for e in events if e["event"] == "start_pressed"]
    assert pressed and summary["emu"]["start_latches"][0] == pressed[0]
    assert summary["late_schedules"] == 0 and summary["underruns"] == 0
    assert summary["watchdog_trips"] == 0
    assert summary["emu"]["lag_frames"] > 0  # the ROM's NMI-off frames passed as no latch


def test_run_emu_records_the_capture_with_the_emulators_truth(rom, capsys, tmp_path):
    rec = tmp_path / "rec"
    rc = main(
        ["run", "--emu", str(rom), "--emu-game", "testrom", "--fast", "--view", "none",
         "--frames", "120", "--reader", "oracle", "--policy", "heuristic",
         "--record", str(rec), "--record-codec", "mjpeg"]
    )  # fmt: skip
    capsys.readouterr()
    assert rc == 1
    from hil.loop.recording import Recording

    recording = Recording(rec)
    lines = list(recording.truth)
    assert len(lines) == len(recording) > 0
    truth = [line["truth"] for line in lines]
    # Each frame's console frame and video frame from the emulator (the test ROM's screens
    # are none the engine draws: no facts).
    frames = [t["video_frame"] for t in truth]
    assert frames == sorted(frames) and len(set(frames)) > len(frames) // 2
    assert all("console_frame" in t and t["ram_mismatches"] == 0 for t in truth)
    source = recording.meta["source"]
    assert source["console"] == "emu" and source["seeds"] is None


def test_an_emu_recording_names_its_rom_so_replay_reads_it_with_the_prepared_model(
    tmp_path, monkeypatch
):
    """hil replay chooses its model by the recording's profile (perception.store.choose_model):
    an --emu recording's profile names the ROM's CRC, so the model hil prepare made for that
    ROM reads it (the shipped clean-room one read such a recording at 0.14 % whole boards).
    CI has no Dr. Mario ROM: the CRC is stood in for."""
    import perception.store as store
    from calibration import Profile
    from hil.play import naming_rom

    monkeypatch.setenv("DRMARIO_BRIDGE_DATA", str(tmp_path / "data"))
    model = store.prepared_dir("0BADF00D") / store.MODEL_FILE
    model.parent.mkdir(parents=True)
    model.write_bytes(b"onnx")
    monkeypatch.setattr(store, "rom_crc32", lambda path, verify_crc=True: "0BADF00D")
    plain = Profile.load("mjpeg_720p_q70")
    assert store.choose_model(None, plain).path != model
    named = naming_rom(plain, "game.nes")
    assert named.rom_crc32 == "0BADF00D" and store.choose_model(None, named).path == model
    # A profile that names a ROM keeps it; a ROM that cannot be read raises (hil run --emu
    # then leaves the profile as it is and refuses the ROM in one line: the bad-ROM test below
    # goes through that path).
    rig = plain.replace(rom_crc32="12345678")
    assert naming_rom(rig, "game.nes").rom_crc32 == "12345678"

    def unreadable(path, verify_crc=True):
        raise OSError("no such file")

    monkeypatch.setattr(store, "rom_crc32", unreadable)
    with pytest.raises(OSError):
        naming_rom(plain, "game.nes")


@pytest.mark.parametrize(
    "kind", ["missing", "not_ines", "truncated", "not_drmario", "unknown_dump", "directory"]
)
def test_run_emu_refuses_a_bad_rom_with_one_line_and_exit_2(kind, rom, tmp_path, capsys):
    path = tmp_path / "game.nes"
    if kind == "not_ines":
        path.write_bytes(b"hello" * 100)
    elif kind == "truncated":
        path.write_bytes(b"NES\x1a" + bytes(3000))
    elif kind == "not_drmario":
        path = rom  # a valid iNES file, but not the game
    elif kind == "unknown_dump":  # the game's size and header, not a known-good dump's CRC
        path.write_bytes(b"NES\x1a\x02\x04\x10" + bytes(9) + b"!DR.MARIO!" + bytes(65526))
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["run", "--emu", str(path), "--fast", "--view", "none"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and err[0].startswith("hil run: ")
    assert "Traceback" not in err[0] and "verify_crc" not in err[0]  # no Python keyword
    if kind == "missing":
        assert err[0] == f"hil run: --emu {path}: no such file"
    if kind == "directory":
        assert err[0] == f"hil run: --emu {path} is a directory, not a ROM file"
    if kind == "unknown_dump":  # the flag that accepts it, in the command's words
        assert "--no-crc" in err[0]


def test_run_emu_takes_missing_screens_from_the_rom_once_and_stores_them(tmp_path, monkeypatch):
    """Without screens prepared for the ROM, --emu takes them from the ROM itself (as hil
    prepare does) and stores them by its CRC, so the levels start from the picture; a file
    whose title never reaches the options screen leaves the RAM menus. The ROM run is
    stood in for by the clean-room prototypes (CI has no Dr. Mario ROM)."""
    import dataclasses

    import perception.screens as screens
    import perception.screens_rom as screens_rom
    from calibration import Profile
    from engine import RomError
    from hil.play import _screens_from_rom

    monkeypatch.setenv("DRMARIO_BRIDGE_DATA", str(tmp_path / "data"))
    prof = dataclasses.replace(Profile.load("mjpeg_720p_q70"), rom_crc32="0BADF00D")
    said: list[str] = []
    calls: list[str] = []

    def fake(rom, progress=None, seed=0):
        calls.append(str(rom))
        return screens.clean_room_prototypes()

    monkeypatch.setattr(screens_rom, "rom_prototypes", fake)
    read = _screens_from_rom("game.nes", prof, said.append)
    stored = tmp_path / "data" / "models" / "0BADF00D" / screens.SCREENS_FILE
    assert calls == ["game.nes"] and stored.is_file() and read is not None
    assert screens.prepared_screens("0BADF00D") == stored
    assert any("taking the title" in s for s in said)

    def refuses(rom, progress=None, seed=0):
        raise RomError("game.nes: Start on its title does not reach the options screen")

    monkeypatch.setattr(screens_rom, "rom_prototypes", refuses)
    other = dataclasses.replace(prof, rom_crc32="0DDBA110")
    assert _screens_from_rom("game.nes", other, said.append) is None
    assert "options screen" in said[-1]


def test_run_emu_in_real_time_runs_the_console_in_its_own_process(rom, capsys, tmp_path):
    """Without --fast the emulator runs in real time, in a process of its own with the
    firmware core and the capture card (hil.consoles.process): paced to 60.0988 Hz on the wall
    clock, never waiting for the host. A loaded CI machine may run it late: the pacing is
    measured and reported, not asserted."""
    log = tmp_path / "run.jsonl"
    rc = main(
        ["run", "--emu", str(rom), "--emu-game", "testrom", "--view", "none",
         "--frames", "300", "--reader", "oracle", "--policy", "heuristic", "--log", str(log)]
    )  # fmt: skip
    out = capsys.readouterr()
    assert rc == 1, out.err  # the test ROM has no level to clear
    summary = json.loads(out.out)
    emu, capture = summary["emu"], summary["capture"]
    assert emu["realtime"] is True and capture["process"] is True and capture["realtime"]
    pacing = emu["pacing"]
    # every video frame began (and every latch window closed) on the pacing thread
    assert pacing["events"] >= emu["video_frames"] - 1
    assert set(pacing) == {
        "events", "late_ms_p50", "late_ms_p99", "late_ms_max", "events_a_frame_late"
    }  # fmt: skip
    # how many captures a busy host takes is measured, not asserted (84 of 300 frames on a
    # loaded CI machine); each one it took is counted once
    assert capture["taken"] > 0 and summary["captured_frames"] == capture["taken"]
    assert capture["taken"] + capture["passed_over"] <= capture["delivered"]
    events = [json.loads(line) for line in log.read_text().splitlines()]
    pressed = [e["frame"] for e in events if e["event"] == "start_pressed"]
    late = [e for e in events if e["event"] == "late_schedule"]
    # The Start went link -> firmware core -> latch on the frame the runtime chose, unless the
    # loaded machine sent it late (then the firmware said so and the summary counts it).
    assert pressed and (emu["start_latches"][:1] == pressed[:1] or late)
    assert summary["late_schedules"] == len([e for e in late if e["late"]])
