"""The emulator path: the project's test ROM (built here with ca65/ld65) in cynes, its pad fed by
the firmware core through Link -> VirtualDevice -> EmulatedNes; the ROM checks; Dr. Mario's menu
navigation against a Python model of the menus (the game's ROM is never used in tests)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

import engine
from calibration import Profile, to_nes
from engine import Button, RomError
from engine.ram import DrMarioRam
from hil import testrom
from hil.cli import main
from hil.consoles.emu import EmuCapture, EmuError, EmulatedNes, MaskFeeder
from hil.consoles.emu_commands import start_game
from hil.consoles.emu_menus import navigate_menus
from hil.link import protocol as p
from hil.link.link import Link
from hil.link.vdevice import VirtualDevice


@pytest.fixture(scope="module")
def rom() -> Path:
    return testrom.image()


@pytest.fixture
def rig(rom):
    with VirtualDevice() as dev, Link(dev.port) as link:
        yield EmulatedNes(rom, dev, game="testrom"), link


def test_every_scheduled_mask_is_read_on_its_frame(rig):
    console, link = rig
    rng = np.random.default_rng(8)
    first, count, tail = 10, 600, 12
    gap = range(300, 305)  # unscheduled frames inside the stream
    expected: dict[int, int | None] = {f: None for f in range(first + count + tail)}
    for i, m in enumerate(rng.integers(0, 256, count)):
        if first + i not in gap:
            expected[first + i] = int(m)
    feed = MaskFeeder(link, {f: expected[f] for f in range(first, first + count)})
    seen = {}
    lag_video_frames = []
    while console.console_frame < first + count + tail - 1:
        feed(console)
        ev = console.step()
        if ev.console_frame is None:
            lag_video_frames.append(ev.video_frame)
            continue
        t = console.truth()
        seen[ev.console_frame] = (ev.mask, t, testrom.decode_boxes(ev.picture))
    assert sorted(seen) == list(range(first + count + tail))
    for frame, (mask, t, shown) in seen.items():
        want = expected[frame] or 0  # unscheduled frames read no buttons
        assert (mask, t["pad"], t["reads"], shown) == (want, want, [want, want], want), frame
        assert t["nmi_count"] == frame + 1  # one NMI per console frame: none missed or extra
    # The ROM's lag frames (NMI off for 2 vblanks every 64 NMIs) are no console frames, and the
    # masks around them arrive unshifted (checked above).
    assert len(lag_video_frames) >= 2 * (count // testrom.LAG_EVERY)
    assert console.lag_frames == len(lag_video_frames)
    link.wait_status(first + count + tail - 1)
    statuses = {s.frame: s for s in link.statuses}
    assert all(statuses[f].mask == (expected[f] or 0) for f in seen)
    assert all(statuses[f].latches == 2 for f in seen)
    assert all((a.late, a.too_far) == (0, 0) for a in feed.acks)
    assert sum(a.accepted for a in feed.acks) == count - len(gap)
    end = statuses[first + count - 1]
    assert end.underruns == len(gap) and end.late_schedules == 0 and end.watchdog_trips == 0
    assert not statuses[first - 1].flags & p.StatusFlags.STREAMING


def test_a_two_player_console_takes_port_1_from_its_script_and_port_2_from_the_firmware(rom):
    """hil run --versus --emu: player 1's byte comes from the console's script
    (EmulatedNes.pad1, asked with the console frame its latch will be), the firmware core
    serves port 2 (a Link on nes_port 2); both bytes are in the frame the game reads them."""
    rng = np.random.default_rng(5)
    p1 = [int(m) for m in rng.integers(0, 256, 400)]
    p2 = [int(m) for m in rng.integers(0, 256, 400)]
    with VirtualDevice() as dev, Link(dev.port, nes_port=2) as link:
        console = EmulatedNes(rom, dev, game="testrom")
        console.pad1 = lambda frame: p1[frame]
        feed = MaskFeeder(link, {f: p2[f] for f in range(2, 300)})
        seen = {}
        while console.console_frame < 299:
            feed(console)
            ev = console.step()
            if ev.console_frame is not None:
                seen[ev.console_frame] = (ev.pad1, ev.mask, console.truth()["pad"])
    assert console.lag_frames > 0  # a lag frame asks again for the same console frame
    for f in range(2, 300):
        # the test ROM reads port 1: the script's byte; port 2 the firmware's schedule
        assert seen[f] == (p1[f], p2[f], p1[f]), f


def test_captured_frames_show_the_mask_of_their_console_frame(rig):
    console, link = rig
    profile = Profile.load("mjpeg_720p_q70")  # overscan crop, limited range, noise, JPEG
    rng = np.random.default_rng(3)
    last = 200
    expected: dict[int, int | None] = {f: int(m) for f, m in enumerate(rng.integers(0, 256, 201))}
    expected[0] = None  # frame 0 is armed before the host speaks
    feed = MaskFeeder(link, {f: expected[f] for f in range(1, last + 1)})
    capture = EmuCapture(console, profile, capture_seed=4, on_frame=lambda _ev: feed(console))
    checked = 0
    for frame, truth in capture.frames(150):
        if truth["console_frame"] < 1:
            continue
        nes = to_nes(profile, frame.image)
        assert testrom.decode_boxes(nes) == expected[truth["console_frame"]] == truth["mask"]
        checked += 1
    assert checked > 120 and console.lag_frames > 0


def test_rom_checks_give_clear_errors(rom, tmp_path):
    with pytest.raises(RomError, match="16 KiB PRG and 8 KiB CHR; Dr. Mario has 32 KiB"):
        EmulatedNes(rom)  # game="drmario" checks the file with engine's iNES reader
    with pytest.raises(RomError, match="no such ROM file"):
        EmulatedNes(tmp_path / "missing.nes", game="testrom")
    junk = tmp_path / "junk.nes"
    junk.write_bytes(b"\x00" * 4096)
    with pytest.raises(RomError, match="not an iNES file"):
        EmulatedNes(junk, game="testrom")
    mapper5 = tmp_path / "mmc5.nes"
    data = bytearray(rom.read_bytes())
    data[6] = 0x50  # mapper 5, which cynes does not emulate
    mapper5.write_bytes(bytes(data))
    with pytest.raises(RomError, match="emulator cannot load it"):
        EmulatedNes(mapper5, game="testrom")
    with pytest.raises(ValueError, match="game must be one of"):
        EmulatedNes(rom, game="zelda")


# ---- Dr. Mario's menus, against a model ---------------------------------------------------


class FakeDrMario:
    """A stand-in for cynes.NES that models Dr. Mario's menus from the disassembly, frame by
    frame: init with NMI off; toTitle [$982A] (NMI off while loading, Up/Down/Select change
    nbPlayers, Start -> options); toDemo_orOptions [$9961] (NMI off while loading, one frame
    with NMI but no options loop, then per frame: RNG step, B/Start, level cursor with its
    horVelocity repeat [$9ADF], speed [$9B37] and music one step per press, Up/Down move the
    highlight); toLevel (NMI off); initData_level stepping the RNG 128 times (the reserve);
    then the intro and play. Inputs as getInputs [$B7E1]: pressed = read & ~held."""

    def __init__(self, _path: str) -> None:
        self.ram = bytearray(0x800)
        self.controller = 0
        self.has_crashed = False
        self.nmi_on = False
        self.rng = 0
        self.seed_at_init_data = -1
        self.picture = np.zeros((240, 256, 3), np.uint8)
        self._logic = self._main()

    def __getitem__(self, address: int) -> int:
        return self.ram[address]

    def step(self, frames: int = 1) -> np.ndarray:
        for _ in range(frames):
            if self.nmi_on:
                self.ram[0x43] = (self.ram[0x43] + 1) & 0xFF  # frameCounter
                held = self.ram[0xF7]
                self.ram[0xF5] = self.controller & ~held & 0xFF
                self.ram[0xF7] = self.controller
            next(self._logic)
        return self.picture

    def _set_rng(self, state: int) -> None:
        self.rng = state
        self.ram[DrMarioRam.RNG], self.ram[DrMarioRam.RNG + 1] = state >> 8, state & 0xFF

    def _load(self, frames: int):
        """NMI off for `frames` frames (no pad reads), then on from the next frame."""
        self.nmi_on = False
        for _ in range(frames):
            yield
        self.nmi_on = True
        yield

    def _main(self):
        r = self.ram
        yield from self._load(4)  # init: nametables cleared with NMI off
        r[DrMarioRam.PLAYERS], r[DrMarioRam.SPEED] = 1, 1
        self._set_rng(0x8988)
        while True:
            r[DrMarioRam.MODE] = 0
            yield from self._load(3)
            yield  # finishVblank_NMI_on: an NMI, but the title loop does not run yet
            while r[DrMarioRam.MODE] == 0:
                pressed = r[0xF5]
                if pressed == Button.UP:
                    r[DrMarioRam.PLAYERS] = 1
                if pressed == Button.DOWN:
                    r[DrMarioRam.PLAYERS] = 2
                if pressed == Button.SELECT:
                    r[DrMarioRam.PLAYERS] ^= 3
                if pressed == Button.START:
                    r[DrMarioRam.MODE] = 1
                yield
            r[DrMarioRam.OPTION_SECTION] = 0
            yield from self._load(3)
            yield
            velocity = 0
            while r[DrMarioRam.MODE] == 1:
                self._set_rng(engine.rng_step(self.rng))
                pressed, held = r[0xF5], r[0xF7]
                section = r[DrMarioRam.OPTION_SECTION]
                if pressed == Button.B:
                    r[DrMarioRam.MODE] = 0
                    break
                if pressed == Button.START:
                    r[DrMarioRam.MODE] = 2
                    yield
                    break
                if section == 0:
                    if velocity == 0 and pressed & (Button.LEFT | Button.RIGHT):
                        velocity = 7
                    if velocity:
                        if not held & (Button.LEFT | Button.RIGHT):
                            velocity = 0
                        else:
                            velocity += 1
                            if velocity >= 8:
                                velocity = 1
                                if held & Button.RIGHT and r[DrMarioRam.LEVEL] < 20:
                                    r[DrMarioRam.LEVEL] += 1
                                if held & Button.LEFT and r[DrMarioRam.LEVEL] > 0:
                                    r[DrMarioRam.LEVEL] -= 1
                if section == 1:
                    if pressed == Button.RIGHT and r[DrMarioRam.SPEED] < 2:
                        r[DrMarioRam.SPEED] += 1
                    if pressed == Button.LEFT and r[DrMarioRam.SPEED] > 0:
                        r[DrMarioRam.SPEED] -= 1
                if section == 2:
                    if pressed & Button.RIGHT and r[DrMarioRam.MUSIC] < 2:
                        r[DrMarioRam.MUSIC] += 1
                    if pressed & Button.LEFT and r[DrMarioRam.MUSIC] > 0:
                        r[DrMarioRam.MUSIC] -= 1
                if pressed == Button.UP and section > 0:
                    r[DrMarioRam.OPTION_SECTION] -= 1
                if pressed == Button.DOWN and section < 2:
                    r[DrMarioRam.OPTION_SECTION] += 1
                yield
            if r[DrMarioRam.MODE] != 2:
                continue
            yield from self._load(3)  # toLevel
            r[DrMarioRam.MODE] = 3
            self.seed_at_init_data = self.rng
            for _ in range(128):  # generatePillsReserve
                self._set_rng(engine.rng_step(self.rng))
            yield
            r[DrMarioRam.MODE] = 8
            level = engine.generate_level(r[DrMarioRam.LEVEL], self.seed_at_init_data)
            r[DrMarioRam.FIELD : DrMarioRam.FIELD + 128] = level["field"].tobytes()
            for _ in range(20):  # viruses, then levelIntro_delay (shortened)
                yield
            r[DrMarioRam.MODE] = 4
            while True:
                yield


def drmario_shaped_rom(path: Path) -> Path:
    """An iNES file engine's reader accepts with verify_crc=False: mapper 1, 32 KiB PRG holding
    the game's name string, 32 KiB CHR. Nothing of the game's code or data."""
    header = b"NES\x1a" + bytes([2, 4, 0x10, 0x00]) + bytes(8)
    prg = bytearray(32768)
    prg[0x2008 : 0x2008 + 10] = b"!DR.MARIO!"
    path.write_bytes(header + bytes(prg) + bytes(32768))
    return path


def test_menu_navigation_reaches_the_chosen_level_through_the_schedule(tmp_path):
    rom = drmario_shaped_rom(tmp_path / "drmario_shaped.nes")
    fakes: list[FakeDrMario] = []

    def emulator(path: str) -> FakeDrMario:
        fakes.append(FakeDrMario(path))
        return fakes[-1]

    with VirtualDevice() as dev, Link(dev.port) as link:
        console = EmulatedNes(rom, dev, verify_crc=False, emulator=emulator)
        fake = fakes[0]
        fake.ram[DrMarioRam.LEVEL] = 9  # a level left over from an earlier game
        result = navigate_menus(console, link, level=7, speed=2, music=2, wait_for_play=True)
        assert (result.level, result.speed, result.music) == (7, 2, 2)
        assert result.seed == fake.seed_at_init_data  # the RNG as initData_level starts
        assert fake.ram[DrMarioRam.MODE] == 4 and result.play_frame == console.console_frame
        # Start (title), Left x2, Down, Right (speed), Down, Right x2 (music), Start (options),
        # and one more Left: the first Left is read in the frame the options screen is still
        # starting (an NMI, but no options loop yet), has no effect, and is pressed again.
        assert result.presses == 10
        last = link.wait_status(console.console_frame)
        assert last.underruns == 0 and last.late_schedules == 0 and last.watchdog_trips == 0
        pressed = [s.mask for s in link.statuses if s.mask]
        assert pressed == [
            Button.START,
            Button.LEFT,
            Button.LEFT,
            Button.LEFT,
            Button.DOWN,
            Button.RIGHT,
            Button.DOWN,
            Button.RIGHT,
            Button.RIGHT,
            Button.START,
        ]
        with pytest.raises(ValueError, match="level must be 0..20"):
            navigate_menus(console, link, level=21, speed=0)


def test_menu_navigation_gives_up_with_a_clear_error(tmp_path):
    rom = drmario_shaped_rom(tmp_path / "drmario_shaped.nes")

    class Stuck(FakeDrMario):
        def _main(self):  # NMI never comes on: the game never reads the pad
            while True:
                yield

    with VirtualDevice() as dev, Link(dev.port) as link:
        console = EmulatedNes(rom, dev, verify_crc=False, emulator=Stuck)
        with pytest.raises(EmuError, match="did not reach level 5 within 50 video frames"):
            navigate_menus(console, link, level=5, speed=1, max_frames=50)


def test_start_game_reports_the_seed_that_reproduces_the_board(tmp_path):
    """start_game (hil emu start) reads the seed as initData_level starts: the model writes the
    engine's board for the seed it had then, and the check must find it equal."""
    rom = drmario_shaped_rom(tmp_path / "drmario_shaped.nes")
    png = tmp_path / "start.png"
    report = start_game(rom, 12, 0, 1, png=png, verify_crc=False, emulator=FakeDrMario)
    assert (report["level"], report["speed"], report["music"]) == (12, 0, 1)
    assert report["engine_field_matches"] and report["field_differences"] == []
    assert report["play_frame"] > report["start_frame"] > 0
    assert cv2.imread(str(png)).shape == (240, 256, 3)


@pytest.mark.parametrize("build", [False, True])
def test_selftest_command_prints_a_clean_report(tmp_path, capsys, build):
    """On the committed image, and on the ROM built from its source (--build-dir: cc65, a
    Debian package a user's venv may lack; CI installs it and fails on this skip)."""
    args = ["emu", "selftest", "--frames", "150"]
    if build:
        if shutil.which("ca65") is None or shutil.which("ld65") is None:
            pytest.skip("missing dependency: cc65 (apt-get install cc65)")
        args += ["--build-dir", str(tmp_path)]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["console_frames_checked"] == 150 and report["unscheduled_frames"] == 3
    assert report["ram_mismatches"] == report["pixel_mismatches"] == 0
    assert report["underruns"] == 3 and report["late_schedules"] == 0
    # 152 console frames (2 before the masks start) and the frames without a pad read: the
    # boot's, and two after every 64th NMI.
    assert report["video_frames"] == 152 + report["lag_frames"]
    assert report["lag_frames"] >= 2 * (152 // 64)
