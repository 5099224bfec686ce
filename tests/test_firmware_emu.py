"""The committed UF2 (firmware/dist) running in rp2040js (firmware/emu/harness.mjs): a
simulated NES reads the pad with Dr. Mario's timing (getInputs [$B7E1]: two reads per NMI)
and the host is hil.link.link over the emulated USB CDC.

Emulation settings (firmware/README.md, "Emulator"): the RP2040 CPU runs at 25 MHz of
emulated time (the firmware's own 125 MHz would only give its main loop more room), NES
frames are 3 ms apart and the latch window is 1 ms (CONFIG), so 10,000 frames take about a
minute. Needs Node.js and `npm ci` in firmware/emu (firmware/ci.sh does it).
NB_TEST_UF2=path runs the same tests on another build (e.g. one from before a fix)."""

from __future__ import annotations

import os
import random
import shutil
import time

import pytest

from hil.link import protocol as p
from hil.link.link import Link
from hil.link.vdevice import DEFAULT_UF2, HARNESS, EmulatedFirmware


@pytest.fixture
def emulator() -> None:
    """rp2040js comes from npm, not pip: a user's `pip install -e .[test]` lacks it, so these
    tests skip there; CI runs firmware/ci.sh (`npm ci`) first and fails on this skip."""
    if shutil.which("node") is None:
        pytest.skip("missing dependency: Node.js (node), for firmware/emu")
    if not (HARNESS.parent / "node_modules" / "rp2040js").is_dir():
        pytest.skip(f"missing dependency: rp2040js (npm ci in {HARNESS.parent})")


PERIOD_US = 3000
WINDOW_US = 1000
WATCHDOG_MS = 500
CPU_MHZ = 25.0


def _device(**kw: object) -> EmulatedFirmware:  # tests that call it take the emulator fixture
    """The NES stays off until _link has configured the latch window (nes_running=False)."""
    uf2 = os.environ.get("NB_TEST_UF2", str(DEFAULT_UF2))
    kw.setdefault("nes_running", False)
    return EmulatedFirmware(uf2, frame_us=PERIOD_US, cpu_mhz=CPU_MHZ, **kw)  # type: ignore[arg-type]


def _link(dev: EmulatedFirmware, *, gated: bool = False, nes_port: int = 1) -> Link:
    """Opens the link, sets the 1 ms latch window, then starts the NES: NES frame n is then
    the firmware's frame n. Frames here are 3 ms apart, inside the firmware's default 5 ms
    window, so frames played before the CONFIG landed were one frame to the firmware and its
    numbers lagged the NES's by one (a CI run read every scheduled mask a frame late).
    ``gated``: the NES stops after frame 0 until _stream lets it on (harness "gate").
    ``nes_port``: the controller port the link plays (Link's)."""
    link = Link(dev.port, timeout_s=2.0, nes_port=nes_port)
    link.configure(WINDOW_US, WATCHDOG_MS)
    if gated:
        dev.command("gate 0")
    dev.command("nes start")
    dev.wait_frame(0)
    return link


def _stream(
    dev: EmulatedFirmware, link: Link, masks: bytes, lead: int = 20, masks_p2: bytes = b""
) -> int:
    """Schedules masks from a frame ``lead`` frames ahead, keeping up to 240 frames queued;
    returns the first frame. ``masks_p2`` (as long as ``masks``, if given) go to controller
    port 2 for the same frames, ``masks`` to the link's own port. Waits until the last one
    was read. The NES may not start a frame that is not scheduled yet (harness "gate"): the
    emulator runs at its own pace, and a host slowed down by a loaded machine must not make
    frames late. The link must come
    from ``_link(dev, gated=True)``: the NES then waits at frame 0, so no frame passes
    between reading ``dev.last_frame`` and the gate."""
    first = dev.last_frame + lead
    dev.command(f"gate {first - 1}")
    sent, end = first, first + len(masks)
    while dev.last_frame < end + 1:
        if sent < end and sent - dev.last_frame < 240 - p.MAX_MASKS:
            n = min(p.MAX_MASKS, end - sent)
            ack = link.schedule(sent, masks[sent - first : sent - first + n])
            assert (ack.accepted, ack.late, ack.too_far) == (n, 0, 0)
            if masks_p2:
                chunk = masks_p2[sent - first : sent - first + n]
                ack = link.schedule(sent, chunk, nes_port=2)
                assert (ack.accepted, ack.late, ack.too_far) == (n, 0, 0)
            sent += n
            dev.command(f"gate {sent - 1 if sent < end else 1 << 40}")
        else:
            link.poll(0.002)
            link.keepalive()
    return first


def _wrong(
    dev: EmulatedFirmware, first: int, masks: bytes
) -> list[tuple[int, int, tuple[int, int]]]:
    return [
        (first + i, m, dev.reads[first + i])
        for i, m in enumerate(masks)
        if dev.reads[first + i] != (m, m)
    ]


@pytest.mark.usefixtures("emulator")
def test_10000_scheduled_frames_both_reads_exact() -> None:
    rng = random.Random(18)
    masks = bytes(rng.randrange(256) for _ in range(10_000))
    with _device() as dev, _link(dev, gated=True) as link:
        assert link.hello is not None and link.hello.window_us == 5000
        first = _stream(dev, link, masks)
        st = link.wait_status(first + len(masks) - 1, timeout_s=10)  # the stream's last frame
        link.clear()
    assert _wrong(dev, first, masks) == []
    assert st.mask == masks[-1] and st.flags & p.StatusFlags.FROM_QUEUE
    assert st.underruns == 0 and st.arm_misses == 0 and st.protocol_errors == 0
    assert st.late_schedules == 0 and st.tx_drops == 0
    assert dev.done is not None


@pytest.mark.usefixtures("emulator")
def test_both_ports_serve_their_own_schedules_in_the_same_frames() -> None:
    """Issue 38, bot against bot: one latch, two clocks (the harness reads $4016 and $4017
    in get_CTRL_inputs' interleaved order, 18 CPU cycles apart): port 2's data line presents
    port 2's schedule while port 1's presents port 1's, on both reads of every frame."""
    rng = random.Random(38)
    masks = bytes(rng.randrange(256) for _ in range(400))
    masks_p2 = bytes(rng.randrange(256) for _ in range(400))
    with _device() as dev, _link(dev, gated=True) as link:
        assert link.hello is not None and link.hello.ports == (1, 2)
        first = _stream(dev, link, masks, masks_p2=masks_p2)
        st = link.wait_status(first + len(masks) - 1, timeout_s=10)
        link.clear(p.ALL_PORTS)
        info = link.info()
    assert _wrong(dev, first, masks) == []
    wrong_p2 = [
        (first + i, m, dev.reads_p2[first + i])
        for i, m in enumerate(masks_p2)
        if dev.reads_p2[first + i] != (m, m)
    ]
    assert wrong_p2 == []
    assert (st.mask, st.mask_p2) == (masks[-1], masks_p2[-1])
    assert st.flags & st.flags_p2 & p.StatusFlags.FROM_QUEUE
    assert (st.underruns, st.underruns_p2, st.arm_misses, st.protocol_errors) == (0, 0, 0, 0)
    assert info.ports == (1, 2)


@pytest.mark.usefixtures("emulator")
def test_the_bot_as_player_2_leaves_port_1_alone() -> None:
    """Issue 38: a Link on port 2 (the person keeps port 1): port 2 plays the schedule, port
    1's data line is never pulled (no buttons), underruns count on port 2 only, and a port
    close releases port 2 within one frame."""
    with _device() as dev, _link(dev, gated=True, nes_port=2) as link:
        first = _stream(dev, link, b"\x80\x40\x01" * 4)
        st = link.wait_status(first + 14, timeout_s=10)
        start = dev.last_frame + 10
        link.schedule(start, b"\x80" * 200)
        dev.wait_frame(start + 5)
        mark = len(dev.events)
        link.close()
        _, at, _ = dev.wait_event("port_close", since=mark)
        dev.wait_frame(at + 10)
    assert [dev.reads_p2[first + i][0] for i in range(12)] == [0x80, 0x40, 0x01] * 4
    assert all(dev.reads[f] == (0, 0) for f in dev.reads)  # port 1 never pressed
    assert st.mask == 0 and st.underruns == 3 and st.flags & p.StatusFlags.UNDERRUN  # port 2
    assert st.mask_p2 == st.mask and st.queue_depth == 0
    held = [f for f in range(at + 1, at + 11) if dev.reads_p2[f] != (0, 0)]
    assert dev.reads_p2[at - 1] == (0x80, 0x80) and held in ([], [at + 1])


@pytest.mark.usefixtures("emulator")
def test_underrun_reads_no_buttons_and_is_counted() -> None:
    with _device() as dev, _link(dev, gated=True) as link:
        first = _stream(dev, link, b"\x80" * 10)
        link.wait_status(first + 15, timeout_s=10)
        sts = {s.frame: s for s in link.statuses}
    assert all(dev.reads[f] == (0x80, 0x80) for f in range(first, first + 10))
    assert all(dev.reads[f] == (0, 0) for f in range(first + 10, first + 15))
    for f in range(first + 10, first + 15):
        assert sts[f].flags & p.StatusFlags.UNDERRUN and sts[f].mask == 0
    assert sts[first + 14].underruns - sts[first + 9].underruns == 5


def _held_then(dev: EmulatedFirmware, link: Link, action: str) -> tuple[int, list[int]]:
    """Schedules A for 200 frames, waits until it plays, does ``action``; returns the NES
    frame at the action and the frames read as A after it."""
    start = dev.last_frame + 10
    link.schedule(start, b"\x80" * 200)
    dev.wait_frame(start + 5)
    mark = len(dev.events)
    if action == "close":
        link.close()
        name = "port_close"
    else:
        dev.command(f"usb {action}")
        name = {"suspend": "usb_suspend", "unmount": "usb_reset"}[action.split("-")[0]]
    _, at, _ = dev.wait_event(name, since=mark)
    dev.wait_frame(at + 10)
    held = [f for f in range(at + 1, at + 11) if dev.reads[f] != (0, 0)]
    return at, held


@pytest.mark.usefixtures("emulator")
@pytest.mark.parametrize("action", ["close", "suspend", "unmount", "unmount-after-out"])
def test_host_gone_releases_within_one_frame(action: str) -> None:
    """With "unmount-after-out" the bus reset lands right after a CDC OUT transfer completed,
    its transfer-complete event still queued: firmware 1.1.0 then panicked in TinyUSB (a new
    transfer through the endpoint entry the reset had cleared, firmware/src/usb_guard.c)
    and held A until the loop watchdog; a plain "unmount" landed there about 1 time in 20
    on a loaded machine."""
    with _device() as dev, _link(dev) as link:
        at, held = _held_then(dev, link, action)
        no_out = [e for e in dev.events if e[0] == "no_out_completion"]
    assert not no_out, "the reset did not land right after an OUT completion"
    # The frame in progress and the one already armed in the PIO may still read A.
    assert dev.reads[at - 1] == (0x80, 0x80)
    assert held in ([], [at + 1]), f"{action} at frame {at}: A still read on {held}"


@pytest.mark.usefixtures("emulator")
def test_host_silence_releases_within_the_watchdog() -> None:
    with _device() as dev, _link(dev) as link:
        start = dev.last_frame + 10
        link.schedule(start, b"\x80" * 250)  # beyond the watchdog: 500 ms = 167 frames
        silent_from = dev.last_frame  # the host says nothing from here
        dev.wait_frame(start + 250)
        link.poll(0.2)
        trips = [s for s in link.statuses if s.flags & p.StatusFlags.WATCHDOG]
    pressed = [f for f in range(start, start + 250) if dev.reads[f] == (0x80, 0x80)]
    assert pressed and pressed == list(range(start, pressed[-1] + 1))
    limit = silent_from + WATCHDOG_MS * 1000 // PERIOD_US + 2
    assert pressed[-1] <= limit and pressed[-1] >= limit - 4, (pressed[-1], limit)
    assert all(dev.reads[f] == (0, 0) for f in range(pressed[-1] + 1, start + 250))
    assert trips and trips[-1].watchdog_trips == 1


@pytest.mark.usefixtures("emulator")
def test_fuzzed_stream_never_crashes_never_acts_on_a_bad_frame_counts_every_error() -> None:
    rng = random.Random(19)
    with _device() as dev, _link(dev) as link:
        first = dev.last_frame + 30
        link.schedule(first, b"\x80" * 60)
        link.poll(0.05)
        before = link.statuses[-1].protocol_errors
        bad = 0
        for i in range(40):
            target = first + 5 + i % 40
            good = p.encode(p.Schedule(target, b"\x01" * 8), link._seq)
            kind = i % 4
            if kind == 0:  # CRC flipped
                frame = bytearray(p.cobs_decode(good[:-1]))
                frame[-1] ^= 0x5A
                wire = p.cobs_encode(bytes(frame)) + b"\0"
            elif kind == 1:  # truncated
                wire = good[: rng.randrange(2, len(good) - 2)] + b"\0"
            elif kind == 2:  # random non-zero bytes, some past the length limit
                wire = bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 200))) + b"\0"
            else:  # a replayed sequence number with other masks
                wire = p.encode(p.Schedule(target, b"\x01" * 8), (link._seq - 1) & 0xFF)
            link._ser.write(wire)
            bad += 1
            link.poll(0.002)
        link.ping()  # still alive and in session
        dev.wait_frame(first + 62)
        link.poll(0.1)
        st = link.statuses[-1]
    assert st.protocol_errors - before == bad
    assert all(dev.reads[f] == (0x80, 0x80) for f in range(first, first + 60))
    assert all(0x01 not in (r1 & 0x01, r2 & 0x01) for r1, r2 in dev.reads.values())


@pytest.mark.usefixtures("emulator")
@pytest.mark.parametrize(("boot", "reason"), [("after_uf2_copy", 0), ("after_watchdog", 1)])
def test_reset_reason_tells_a_uf2_copy_from_a_stuck_firmware(boot: str, reason: int) -> None:
    """Defect 1: the boot ROM reboots through the watchdog after a UF2 copy; only the
    firmware's own watchdog is "stuck" (reset_reason 1)."""
    with _device(boot=boot, nes_running=True) as dev, Link(dev.port, timeout_s=2.0) as link:
        assert link.hello is not None and link.hello.reset_reason == reason
        info = link.info()
    assert info.reset_reason == reason and info.board == "pico"
    assert info.firmware_version == "2.0.0" and info.latches > 0 and info.latches_lost == 0
    assert info.ports == (1, 2)


@pytest.mark.usefixtures("emulator")
def test_hil_link_check_prints_version_board_reason_and_latch_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hil.cli import main

    assert main(["link", "check", "--port", "emulated", "--seconds", "1"]) == 0
    out = capsys.readouterr().out
    assert "firmware: 2.0.0 (protocol 2), board: pico, controller ports: 1, 2" in out
    assert "reset reason: power-on, boot 1" in out
    # NTSC: 60.0988 frames/s, two latches per frame (getInputs [$B7E1] reads twice)
    assert "latch rate: 120." in out and "60.1" in out and "2.00 latches per frame" in out


def test_hil_link_check_bad_port_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from hil.cli import main

    assert main(["link", "check", "--port", "/nonexistent/tty"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hil link check:")


def _idle_clock_us(dev: EmulatedFirmware) -> int:
    """Driven mode: the firmware clock once the emulation has stopped serving the host."""
    idle = dev.clock_us()
    while (now := dev.clock_us()) != idle:
        idle = now
        time.sleep(0.2)
    return idle


@pytest.mark.usefixtures("emulator")
def test_a_planned_driven_read_is_made_at_its_time_while_the_host_is_served() -> None:
    """Driven mode (the device of `hil run --fast --firmware`): each host request runs the
    emulated clock on ~3 ms to send the reply; a read planned before is made at its own time
    inside that run (a console's latch waits for no host), one not planned when asked."""
    uf2 = os.environ.get("NB_TEST_UF2", str(DEFAULT_UF2))
    with EmulatedFirmware(uf2, driven=True) as dev, Link(dev.port, timeout_s=2.0) as link:
        t0 = _idle_clock_us(dev) + 1000  # after the run-on of opening the link
        dev.plan_reads([t0])
        link.ping()
        passed = _idle_clock_us(dev)
        assert passed > t0 + 1000
        assert dev.read(t0) == 0x00 and dev.last_read_us == t0
        dev.read(passed - 200)  # not planned, asked for after its time: made now
        assert dev.last_read_us is not None and dev.last_read_us >= passed


@pytest.mark.usefixtures("emulator")
def test_the_sim_clock_is_never_behind_the_emulated_firmware() -> None:
    """`hil run --fast --firmware`: a PONG carries the firmware clock after the emulation ran
    it on to answer; the runtime's clock (SimConsole.now_ns) is not earlier than that, or
    the frame clock's offset (the least late message) would put every frame early."""
    from calibration import Profile
    from hil.consoles.sim import DEVICE_BOOT_US, SimConsole, SimLevel

    uf2 = os.environ.get("NB_TEST_UF2", str(DEFAULT_UF2))
    dev = EmulatedFirmware(uf2, driven=True)
    console = SimConsole(
        [SimLevel(0, 2, 0x1234)], Profile.load("ideal_720p_nearest"), max_frames=600, device=dev
    )
    try:
        with Link(console.port, timeout_s=2.0) as link:
            console.run_to_frame(3)
            pong = link.ping()
            pong_ns = console.host_ns((pong.device_us - DEVICE_BOOT_US) * 1000.0)
            assert pong_ns > console.host_ns(console.latch_ns(3))  # ran on past the sim time
            assert console.now_ns() >= pong_ns
    finally:
        console.close()


@pytest.mark.usefixtures("emulator")
def test_hil_run_with_the_firmware_image_clears_a_level() -> None:
    """`hil run --fast --firmware`: the simulated console's two reads per frame are served by
    the emulated firmware's DATA line; the runtime talks to it over the emulated CDC."""
    from pathlib import Path

    from calibration import Profile
    from hil.loop.runtime import LevelPlan
    from hil.play import RunRequest, run

    uf2 = os.environ.get("NB_TEST_UF2", str(DEFAULT_UF2))
    request = RunRequest(
        "sim",
        [LevelPlan(0, 2)],
        Profile.load("ideal_720p_nearest"),
        lockstep=True,
        reader="oracle",
        policy="heuristic",
        max_frames=6000,
        firmware=Path(uf2),
    )
    summary, console = run(request, say=lambda m: None)
    assert isinstance(console.device, EmulatedFirmware)
    assert summary["levels_cleared"] == 1, summary
    for key in ("desyncs", "late_schedules", "underruns", "arm_misses", "watchdog_trips"):
        assert summary[key] == 0, (key, summary)


@pytest.mark.usefixtures("emulator")
def test_hil_run_emu_with_the_firmware_image_latches_the_start_it_scheduled(tmp_path) -> None:
    """`hil run --emu ROM --fast --firmware`: the emulated console's controller reads are the
    firmware image's own, in rp2040js: each frame that reads the pad is found first (the frame
    emulated from a saved state), its two reads are planned a frame ahead and made on the
    firmware's DATA line at their time, and the byte goes into the emulator. On the project's
    test ROM (CI has no Dr. Mario), the Start the runtime pressed latches on the frame it chose;
    every frame the ROM did not read (its NMI off) passed without a read."""
    import json

    from hil import testrom
    from hil.cli import main

    log = tmp_path / "run.jsonl"
    out = tmp_path / "summary.json"
    argv = [
        "run", "--emu", str(testrom.image()), "--emu-game", "testrom", "--fast", "--firmware",
        "--frames", "300", "--reader", "oracle", "--policy", "heuristic", "--view", "none",
        "--log", str(log),
    ]  # fmt: skip
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    out.write_text(buf.getvalue())
    summary = json.loads(buf.getvalue())
    assert rc == 1  # no level in a test ROM
    pressed = [json.loads(x) for x in log.read_text().splitlines()]
    pressed = [e["frame"] for e in pressed if e["event"] == "start_pressed"]
    assert pressed and summary["emu"]["start_latches"][:1] == pressed[:1]
    assert summary["emu"]["lag_frames"] > 0
    for key in ("late_schedules", "underruns", "arm_misses", "watchdog_trips"):
        assert summary[key] == 0, (key, summary)
