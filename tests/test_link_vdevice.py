"""hil.link.Link against the virtual device (the firmware core behind a pty, opened with
pyserial like /dev/ttyACM0), and against scripted ports for what the core never sends."""

import json
import time
from pathlib import Path

import pytest
import serial

from hil.link import protocol as p
from hil.link.link import Link, LinkError, LinkFatal, check_port
from hil.link.vdevice import VirtualDevice

FRAME_US = 16639
VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "firmware" / "protocol_vectors.json").read_text()
)


@pytest.fixture
def dev():
    with VirtualDevice() as d:
        yield d


@pytest.fixture
def link(dev):
    with Link(dev.port) as lk:
        yield lk


def play(dev, first, n, keepalive=None, t0=1000):
    """Console frames first..first+n-1 at NTSC spacing; returns the masks read. With a
    Link as ``keepalive``, pings every 10 frames as a live host does (watchdog 500 ms)."""
    got = []
    for k in range(first, first + n):
        if keepalive is not None and k % 10 == 0:
            keepalive.ping(k)
        got.append(dev.latch(t0 + k * FRAME_US))
    return got


def test_handshake_reports_the_device(link):
    ack = link.hello
    assert ack.session_open and ack.version == p.PROTOCOL_VERSION
    assert (ack.window_us, ack.watchdog_ms, ack.queue_capacity) == (5000, 500, 256)
    assert ack.max_frame == p.MAX_FRAME and ack.boot_count == 1


def test_scheduled_masks_reach_the_console_with_a_status_per_frame(dev, link):
    masks = bytes(range(1, 101))  # 100 frames: two SCHEDULE messages
    ack = link.schedule(2, masks)
    assert (ack.accepted, ack.late, ack.too_far) == (100, 0, 0)
    got = play(dev, 0, 103, keepalive=link)
    assert got == [0, 0, *masks, 0]
    last = link.wait_status(102)
    statuses = {s.frame: s for s in link.statuses}
    assert sorted(statuses) == list(range(103))
    assert all(statuses[f].latches == 2 for f in statuses)
    assert [statuses[f].first_latch_us for f in (0, 1, 2)] == [1000, 1000 + FRAME_US, 34278]
    assert statuses[50].mask == masks[48] and statuses[50].flags & p.StatusFlags.FROM_QUEUE
    assert statuses[50].queue_depth == 100 - 49
    assert last.underruns == 1 and last.flags & p.StatusFlags.UNDERRUN  # frame 102
    assert link.stats.lost_messages == 0 and link.rx_errors == 0


def test_poll_returns_each_status_once_even_those_read_during_a_request(dev, link):
    play(dev, 0, 5)
    link.ping(1)  # its reply wait reads the statuses of frames 0..4 first
    play(dev, 5, 3)
    got = []
    for _ in range(20):
        got += link.poll(0.05)
        if got and got[-1].frame == 7:
            break
    assert [s.frame for s in got] == list(range(8))
    assert link.poll(0.05) == []


def test_late_and_far_schedules_are_reported(dev, link):
    play(dev, 0, 10)  # frame 9 played: 10 is armed
    ack = link.schedule(8, [1, 2, 3, 4])  # 8, 9 played, 10 armed: only 11 is in time
    assert (ack.accepted, ack.late) == (1, 3)
    ack = link.schedule(10 + 256, [5, 6])  # the queue reaches 256 frames past the armed one
    assert (ack.accepted, ack.too_far) == (1, 1)
    play(dev, 10, 2)
    assert link.wait_status(10).last_error == p.Err.RANGE
    st = link.wait_status(11)
    assert st.mask == 4 and st.late_schedules == 3 and st.last_error == p.Err.OK


def test_clear_ends_the_stream_without_underruns(dev, link):
    link.schedule(1, [0x10] * 5)
    assert play(dev, 0, 3) == [0, 0x10, 0x10]
    link.clear()  # frame 3 is already armed: the clear applies from frame 4
    assert play(dev, 3, 3) == [0x10, 0, 0]
    st = link.wait_status(5)
    assert st.underruns == 0 and st.queue_depth == 0
    assert not st.flags & p.StatusFlags.STREAMING


def test_host_silence_trips_the_watchdog(dev, link):
    link.schedule(1, [0x08] * 64)
    got = play(dev, 0, 40)  # 40 frames = 666 ms of console time, the host silent
    assert got[1:31] == [0x08] * 30  # until 500 ms (frame 30's byte was already armed)
    assert got[31:] == [0] * 9
    st = link.wait_status(39)
    assert st.watchdog_trips == 1 and st.flags & p.StatusFlags.WATCHDOG
    assert st.underruns == 0 and st.queue_depth == 0


def test_configure_changes_the_latch_window(dev, link):
    link.configure(8000, 1000)
    dev.read(1000)
    dev.read(1000 + 6000)  # within 8 ms: the same frame
    dev.advance(1000 + 8000)
    assert link.wait_status(0).latches == 2
    with pytest.raises(LinkError, match="RANGE"):
        link.configure(20_000, 1000)


def test_garbage_from_the_host_is_dropped_and_the_link_recovers(dev, link):
    link._ser.write(b"\x13\x37\xff\x00\x05\x01\x02\x00" + bytes(range(1, 200)) + b"\x00")
    assert link.ping(99).token == 99  # resynchronised on the delimiters
    play(dev, 0, 1)
    st = link.wait_status(0)
    assert st.protocol_errors == 3  # COBS, COBS, TOO_LONG
    assert st.last_error == p.Err.TOO_LONG


@pytest.mark.parametrize("vec", VECTORS["nack"], ids=lambda v: v["name"])
def test_device_refuses_the_nack_vectors(dev, vec):
    with serial.Serial(dev.port, timeout=1) as port:
        if vec["session"]:
            port.write(p.encode(p.Hello(), 0))
        port.write(bytes.fromhex(vec["wire"]))
        deframer, replies = p.Deframer(), []
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not any(isinstance(m, p.Nack) for _, m in replies):
            replies += [r for r in deframer.feed(port.read(port.in_waiting or 1)) if r]
    nack = [m for _, m in replies if isinstance(m, p.Nack)]
    assert nack == [p.Nack(vec["rejected_type"], vec["rejected_seq"], p.Err[vec["error"][4:]])]


def test_full_tx_buffer_drops_whole_messages_and_counts_them(dev, link):
    # 2000 statuses = 84 KB while the host reads nothing: far more than the pty (18 KB
    # on Linux 6) and the core's 1 KB TX buffer hold.
    n = 2000
    play(dev, 0, n)
    while link.poll(0.2):  # read until the port stays quiet (a loaded host reads slowly)
        pass
    seen = sorted(s.frame for s in link.statuses)
    dropped = n - len(seen)
    assert dropped > 0 and seen[0] == 0  # the oldest were kept, the newest dropped
    play(dev, n, 1)
    last = link.wait_status(n)
    assert last.tx_drops == dropped
    # The host sees the same losses as gaps in the 8-bit sequence numbers (modulo 256).
    assert link.stats.lost_messages == dropped % 256


def test_unplugged_port_raises_a_clear_error(dev, link):
    dev.unplug()
    with pytest.raises(LinkError, match="lost"):
        link.schedule(5, [1])


def test_a_port_gone_during_a_write_flush_is_a_link_error():
    """pyserial's flush (tcdrain) on a port whose device went away raises termios.error, which
    is no OSError: it is the same LinkError as a failed write (seen with the controller unplugged
    beside two CPU-bound processes, where the write still went through)."""
    termios = pytest.importorskip("termios")

    class GoneOnFlush(serial.SerialBase):
        def open(self) -> None:
            self.is_open = True

        def write(self, data: bytes) -> int:
            return len(data)

        def flush(self) -> None:
            raise termios.error(5, "Input/output error")

    port = GoneOnFlush()
    port.open()
    link = Link(port, handshake=False)
    with pytest.raises(LinkError, match="lost"):
        link.ping()


def test_missing_port_raises_a_clear_error(tmp_path):
    with pytest.raises(LinkError, match="cannot open controller port"):
        Link(str(tmp_path / "ttyACM9"))


class ScriptedPort:
    """A serial-port stand-in that answers HELLO with a fixed byte script."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.rx = b""
        self.port = "scripted"

    def write(self, data: bytes) -> int:
        if p.encode(p.Hello(), 0) in data:
            self.rx += self.reply
        return len(data)

    def flush(self) -> None:
        pass

    @property
    def in_waiting(self) -> int:
        return len(self.rx)

    def read(self, n: int) -> bytes:
        data, self.rx = self.rx[:n], self.rx[n:]
        return data

    def reset_input_buffer(self) -> None:
        self.rx = b""

    def close(self) -> None:
        pass


def test_version_mismatch_is_refused():
    """A firmware before 2.0.0 (protocol 1, port 1 only) answers a version-2 HELLO with its
    own version and the session closed."""
    port = ScriptedPort(p.encode(p.HelloAck(version=1, flags=0), 0))
    with pytest.raises(LinkFatal, match="protocol version 1, host speaks 2"):
        Link(port, timeout_s=0.2)


# ---- controller ports (issue 38: the bot as player 2, bot against bot) ----------------------


def test_handshake_and_info_report_both_ports(link):
    assert link.hello.ports == (1, 2) and link.nes_port == 1
    assert link.info().ports == (1, 2)


def test_a_link_on_port_2_plays_port_2_and_sees_its_status(dev):
    with Link(dev.port, nes_port=2) as lk:
        ack = lk.schedule(2, [0x80, 0x40, 0x01])
        assert (ack.accepted, ack.late, ack.too_far) == (3, 0, 0)
        got = [dev.latch_ports(1000 + k * FRAME_US) for k in range(7)]
        st3, st6 = lk.wait_status(3), lk.wait_status(6)
    assert got == [(0, 0), (0, 0), (0, 0x80), (0, 0x40), (0, 0x01), (0, 0), (0, 0)]
    # Port 2's view: its mask, flags, queue and underruns under the port-1 names.
    assert st3.mask == 0x40 and st3.flags & p.StatusFlags.FROM_QUEUE and st3.queue_depth == 1
    assert st6.underruns == 2 and st6.flags & p.StatusFlags.UNDERRUN and st6.mask_p2 == 0
    assert list(dev.pio_words_p2)[3] == 0x40FFFFFF and set(dev.pio_words) == {0x00FFFFFF}


def test_one_link_drives_both_ports(dev, link):
    """Bot against bot: one host, one firmware session, a schedule for each port; CLEAR of
    one port leaves the other's stream."""
    link.schedule(1, [0x08] * 6)
    link.schedule(1, [0x04] * 3, nes_port=2)
    got = [dev.latch_ports(1000 + k * FRAME_US) for k in range(4)]
    assert got == [(0, 0), (0x08, 0x04), (0x08, 0x04), (0x08, 0x04)]
    link.schedule(5, [0x02] * 3, nes_port=2)
    link.clear(nes_port=1)  # frame 4 is armed: port 1 plays it, then stops
    got = [dev.latch_ports(1000 + k * FRAME_US) for k in range(4, 8)]
    assert got == [(0x08, 0), (0, 0x02), (0, 0x02), (0, 0x02)]
    st = link.wait_status(7)
    assert (st.mask, st.mask_p2) == (0, 0x02)
    assert (st.underruns, st.underruns_p2) == (0, 1)  # port 2 had nothing for frame 4
    link.clear(p.ALL_PORTS)  # frame 8 is armed (port 2: an underrun); from 9 on, idle
    assert [dev.latch_ports(1000 + k * FRAME_US) for k in (8, 9)] == [(0, 0), (0, 0)]
    st = link.wait_status(9)
    assert st.queue_depth == st.queue_depth_p2 == 0
    assert not (st.flags | st.flags_p2) & p.StatusFlags.STREAMING


def test_a_port_the_firmware_does_not_drive_is_fatal():
    one_port = p.HelloAck(flags=0x01 | 0x01 << 2, queue_capacity=256, window_us=5000)
    with pytest.raises(LinkFatal, match="drives controller port\\(s\\) 1, not port 2"):
        Link(ScriptedPort(p.encode(one_port, 0)), timeout_s=0.2, nes_port=2)
    lk = Link(ScriptedPort(p.encode(one_port, 0)), timeout_s=0.2)
    assert lk.hello is not None and lk.hello.ports == (1,)
    with pytest.raises(ValueError, match="1 or 2"):
        Link(ScriptedPort(b""), nes_port=3, handshake=False)
    with pytest.raises(ValueError, match="1 or 2"):
        lk.schedule(10, [1], nes_port=0)


def test_the_device_refuses_a_port_it_does_not_drive(dev, link):
    with pytest.raises(LinkError, match="Schedule refused: RANGE"):
        link._request(p.Schedule(10, b"\x01", port=3), p.Ack)
    with pytest.raises(LinkError, match="Clear refused: RANGE"):
        link._request(p.Clear(port=3), p.Ack)


def test_a_failure_retrying_cannot_mend_ends_the_run_at_once(tmp_path):
    """Another protocol version is not retried for 30 s: the controller raises LinkFatal (logged
    as link_fatal), and hil run's end says it in one line with exit status 2."""
    from hil.commands.run import _print_summary
    from hil.link.controller import Controller
    from hil.loop.eventlog import EventLog

    said = []
    log = EventLog(tmp_path / "events.jsonl")
    ctl = Controller(
        lambda: ScriptedPort(p.encode(p.HelloAck(version=1, flags=0), 0)),
        log,
        said.append,
        timeout_s=0.2,
    )
    with pytest.raises(LinkFatal, match="flash the matching firmware"):
        ctl.connect()
    log.close()
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["link_fatal"]
    summary = {
        "levels_asked": 1,
        "levels_played": 1,
        "levels_cleared": 0,
        "console_frames": 0,
        "desyncs": 0,
        "late_schedules": 0,
        "underruns": 0,
        "watchdog_trips": 0,
        "timing_slips": 0,
        "missed_decisions": 0,
        "peak_rss_mb": 1.0,
        "link_fatal": "x: firmware speaks protocol version 1",
    }
    assert _print_summary(summary) == 2


def test_a_windows_port_name_on_this_os_is_fatal():
    with pytest.raises(LinkFatal, match="COM5 is a Windows port name"):
        check_port("COM5")


def test_corrupt_frames_from_the_device_are_counted_not_fatal():
    good = [p.encode(p.Status(frame=f), f + 1) for f in range(3)]
    corrupt = bytearray(good[1])
    corrupt[5] ^= 0x40
    port = ScriptedPort(p.encode(p.HelloAck(flags=0x0D, queue_capacity=256, window_us=5000), 0))
    lk = Link(port, timeout_s=0.2)
    port.rx = b"\x55\x66\x00" + good[0] + bytes(corrupt) + good[2]
    lk.poll(0.01)
    assert [s.frame for s in lk.statuses] == [0, 2]
    assert lk.rx_errors == 2  # the noise, then the corrupted frame
    assert lk.stats.lost_messages == 1  # seq 2 never arrived intact
