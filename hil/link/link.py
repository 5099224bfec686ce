"""The host end of the controller link: a serial port speaking ``firmware/PROTOCOL.md``.

``Link`` opens the RP2040's USB CDC port (``/dev/ttyACM0``, ``COM3``) or the virtual device's
pseudo-terminal (:class:`hil.link.vdevice.VirtualDevice`) with pyserial, performs the version
handshake, schedules button masks for absolute console frames on NES controller port 1 or 2,
and collects the firmware's per-frame STATUS messages. Single-threaded: replies and statuses
are read when a request waits or when :meth:`Link.poll` is called.

Errors a user meets are plain: a corrupt or truncated frame from the device is counted in
``Link.rx_errors`` and the link resynchronises on the next delimiter; a missing device or a
port unplugged mid-session raises :class:`LinkError` naming the port.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import serial

from hil.link import protocol as p

try:  # pyserial's flush() (tcdrain) raises termios.error, not OSError, on a port gone
    import termios

    PORT_ERRORS: tuple[type[BaseException], ...] = (
        serial.SerialException,
        OSError,
        termios.error,
    )
except ImportError:  # Windows
    PORT_ERRORS = (serial.SerialException, OSError)
# ... and a read: pyserial raises TypeError from a closed fd when the USB device disappears
READ_ERRORS: tuple[type[BaseException], ...] = (*PORT_ERRORS, TypeError)

KEEPALIVE_S = 0.1  # PING when idle this long while streaming (device watchdog: 0.5 s)
# A SCHEDULE message whose first frame lies more than this past the newest STATUS frame plus the
# device's queue capacity is not sent (counted too_far): the device would refuse it anyway, and
# frame numbers far ahead are where a u32 wrap would otherwise alias old frames (PROTOCOL.md).
HORIZON_SLACK = 64  # frames: STATUS messages still in flight when the host decides
FRAME_MAX = 0xFFFFFFFF  # frame numbers are u32 on the wire and never wrap in a session


def check_port(port: str) -> None:
    """Raises LinkError, with the reason, for a controller port that cannot be a serial
    device: no such path, a directory, a regular file, or a device that is not a terminal
    (``/dev/null``: "Inappropriate ioctl for device"). pyserial URLs (``socket://...``,
    ``loop://``) and Windows ``COM`` names are left to pyserial. A port that exists but is
    busy or vanishes later is not this: the runtime retries those."""
    if os.name != "nt" and re.fullmatch(r"COM\d+", port.upper()):
        raise LinkFatal(
            f"{port} is a Windows port name; on this OS the controller is a device such as "
            "/dev/ttyACM0 (ls /dev/ttyACM*)"
        )
    if "://" in port or os.name == "nt":
        return
    if not os.path.exists(port):
        raise LinkError(f"{port}: no such device (is the controller plugged in?)")
    st = os.stat(port)
    if stat.S_ISDIR(st.st_mode):
        raise LinkError(f"{port} is a directory, not a serial device")
    if not stat.S_ISCHR(st.st_mode):
        raise LinkError(f"{port} is not a serial device (a {_file_kind(st.st_mode)})")
    try:
        fd = os.open(port, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.EBUSY, errno.EAGAIN):
            return  # in use right now: the runtime retries
        raise LinkError(f"{port}: cannot open it ({e.strerror})") from None
    try:
        if not os.isatty(fd):
            raise LinkError(
                f"{port} is not a serial device ({os.strerror(errno.ENOTTY)}: a character "
                "device that is not a terminal)"
            )
    finally:
        os.close(fd)


def _file_kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "regular file"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISBLK(mode):
        return "block device"
    return "file that is not a device"


def _err_name(code: int) -> str:
    try:
        return p.Err(code).name
    except ValueError:
        return f"error {code}"


class LinkError(RuntimeError):
    """The device is absent, unplugged, speaks another protocol version, or refused."""


class LinkFatal(LinkError):
    """A failure that retrying will not mend: the firmware speaks another protocol version, or
    the port's name cannot be a port on this OS. The runtime ends the run with it at once."""


class LinkTimeout(LinkError):
    """No reply to a request within the timeout, after the retries."""


class LinkRefused(LinkError):
    """The device answered the handshake with values no controller can have (a queue of 0
    frames, a latch window of 0 us): a fault to report, not a port to retry blindly."""


@dataclass(frozen=True)
class Anomaly:
    """Something the device sent that cannot be right, kept for the runtime to log.

    ``kind``: ``hello_ack`` (queue or window 0), ``ack_count`` (an ACK accepting more masks
    than were sent), ``status_repeat`` / ``status_backwards`` (a STATUS frame number equal to
    or before the previous one: the STATUS is dropped), ``duplicate_seq`` (a message with the
    sequence number of the one before: dropped). ``detail``: the values seen."""

    kind: str
    detail: str


@dataclass
class LinkStats:
    """What the host saw of the link (device-side counters arrive in each Status)."""

    rx_errors: int = 0  # frames from the device dropped (CRC, COBS, length)
    # Gaps in the device's 8-bit sequence numbers: a run of 256 or more losses counts
    # modulo 256 (STATUS.tx_drops is the device's exact count of what it dropped).
    lost_messages: int = 0
    retries: int = 0  # requests sent again after a timeout
    beyond_horizon: int = 0  # masks not sent: past the device's queue or the u32 frame range
    anomalies: dict[str, int] = field(default_factory=dict)  # by Anomaly.kind


class Link:
    """Talks to the controller firmware over one serial port.

    ``port`` is a device path or pyserial URL, or an already open ``serial.Serial``-like
    object. ``timeout_s`` bounds each wait for a reply; a request is sent ``1 + retries``
    times at most. Use as a context manager, or call :meth:`close`.

    ``nes_port``: the NES controller port (1 or 2) this link plays by default: what
    :meth:`schedule` and :meth:`clear` act on unless told another, and the port whose view
    every STATUS is kept in (:meth:`hil.link.protocol.Status.for_port`: its ``mask``,
    ``flags``, ``queue_depth``, ``underruns`` and ``late_schedules``), so a runtime written
    for port 1 plays port 2 unchanged. Both ports' fields stay in each STATUS (``*_p2``
    in port 1's view). ``needs``: the ports the firmware must drive (default ``(nes_port,)``;
    ``(1, 2)`` for a host that plays both, bot against bot). The handshake raises LinkFatal
    if the firmware does not drive them.
    """

    def __init__(
        self,
        port: str | serial.SerialBase,
        *,
        timeout_s: float = 0.5,
        retries: int = 2,
        handshake: bool = True,
        nes_port: int = 1,
        needs: tuple[int, ...] | None = None,
    ) -> None:
        if nes_port not in p.PORTS:
            raise ValueError(f"nes_port is a controller port, 1 or 2, not {nes_port!r}")
        self.nes_port = nes_port
        self.needs = (nes_port,) if needs is None else tuple(needs)
        if not self.needs or any(port not in p.PORTS for port in self.needs):
            raise ValueError(f"needs names controller ports 1 and 2, not {needs!r}")
        self.name = port if isinstance(port, str) else str(getattr(port, "port", port))
        self.timeout_s = timeout_s
        self.retries = retries
        self.stats = LinkStats()
        self.statuses: deque[p.Status] = deque(maxlen=4096)  # recent history, for wait_status
        self._unpolled: deque[p.Status] = deque(maxlen=1 << 16)  # not yet returned by poll()
        self.hello: p.HelloAck | None = None
        self.anomalies: deque[Anomaly] = deque(maxlen=1024)  # not yet taken by the runtime
        self.last_status_frame: int | None = None
        self._deframer = p.Deframer()
        self._seq = 0
        self._rx_seq: int | None = None
        self._replies: deque[tuple[int, p.Message]] = deque()
        self._last_tx = 0.0
        if isinstance(port, str):
            try:
                # USB CDC ignores the baud rate; 115200 keeps real UART adapters usable.
                self._ser: serial.SerialBase = serial.serial_for_url(
                    port, baudrate=115200, timeout=0, write_timeout=timeout_s
                )
            except (serial.SerialException, OSError) as exc:
                raise LinkError(f"cannot open controller port {port}: {exc}") from exc
        else:
            self._ser = port
        if handshake:
            self.handshake()

    # ---- context management ----------------------------------------------------------

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the port (never raises)."""
        try:
            self._ser.close()
        except PORT_ERRORS:
            pass

    @property
    def rx_errors(self) -> int:
        return self.stats.rx_errors

    # ---- requests ----------------------------------------------------------------------

    def handshake(self) -> p.HelloAck:
        """Sends HELLO and waits for HELLO_ACK. Raises LinkFatal on a version mismatch.

        A leading 0x00 ends whatever partial frame the device holds, and everything that
        arrived before the HELLO_ACK (old statuses, noise) is discarded."""
        self._write(p.DELIMITER)
        self._drain_input()
        ack = self._request(p.Hello(p.PROTOCOL_VERSION), p.HelloAck)
        assert isinstance(ack, p.HelloAck)
        if not ack.session_open or ack.version != p.PROTOCOL_VERSION:
            raise LinkFatal(
                f"{self.name}: firmware speaks protocol version {ack.version}, "
                f"host speaks {p.PROTOCOL_VERSION}; flash the matching firmware"
            )
        missing = [port for port in self.needs if port not in ack.ports]
        if missing:
            raise LinkFatal(
                f"{self.name}: the firmware drives controller port(s) "
                f"{', '.join(map(str, ack.ports)) or 'none'}, not port "
                f"{' and '.join(map(str, missing))} (board pins: firmware/README.md, Wiring)"
            )
        bad = [
            f"{what} {value}"
            for what, value in (("queue", ack.queue_capacity), ("window_us", ack.window_us))
            if value == 0
        ]
        if bad:
            self._anomaly("hello_ack", ", ".join(bad))
            raise LinkRefused(
                f"{self.name}: the device's HELLO_ACK reports {' and '.join(bad)}: not a usable "
                "controller (wrong firmware, or a firmware fault)"
            )
        self.statuses.clear()
        self._rx_seq = None
        self.last_status_frame = None
        self.hello = ack
        return ack

    def schedule(
        self, first_frame: int, masks: bytes | Iterable[int], *, nes_port: int | None = None
    ) -> p.Ack:
        """Schedules ``masks[i]`` (A = 0x80 ... Right = 0x01) for console frame
        ``first_frame + i`` on controller port ``nes_port`` (1 or 2; None: this link's
        :attr:`nes_port`), in SCHEDULE messages of up to 64 masks. Returns the summed
        Ack (accepted / late / too_far). A frame is late unless scheduled before the
        previous frame's latch window closes (about 11 ms ahead of its first latch)."""
        port = self._port_arg(nes_port)
        data = bytes(masks)
        total = p.Ack(acked_type=p.Schedule.TYPE)
        for off in range(0, len(data), p.MAX_MASKS):
            chunk = data[off : off + p.MAX_MASKS]
            first = first_frame + off
            if self._beyond_horizon(first, len(chunk)):
                # Refused here, never sent: the device must not see a frame number that
                # wraps or that lies past its queue (counted like the device's too_far).
                self.stats.beyond_horizon += len(chunk)
                total = p.Ack(
                    p.Schedule.TYPE,
                    total.acked_seq,
                    total.accepted,
                    total.late,
                    total.too_far + len(chunk),
                )
                continue
            ack = self._request(p.Schedule(first, chunk, port), p.Ack)
            assert isinstance(ack, p.Ack)
            if ack.accepted + ack.late + ack.too_far > len(chunk):
                self._anomaly(
                    "ack_count",
                    f"ACK of {len(chunk)} masks from frame {first}: accepted {ack.accepted}, "
                    f"late {ack.late}, too_far {ack.too_far}",
                )
                # Trust the refusals, not the excess: at most what was sent was stored.
                accepted = max(0, len(chunk) - ack.late - ack.too_far)
                ack = p.Ack(ack.acked_type, ack.acked_seq, accepted, ack.late, ack.too_far)
            total = p.Ack(
                p.Schedule.TYPE,
                ack.acked_seq,
                total.accepted + ack.accepted,
                total.late + ack.late,
                total.too_far + ack.too_far,
            )
        return total

    def _beyond_horizon(self, first: int, count: int) -> bool:
        """True for a SCHEDULE message that must not be sent: frames outside 0..FRAME_MAX
        (the u32 on the wire would wrap onto old frames), or a first frame more than the
        device's queue capacity plus HORIZON_SLACK past the newest STATUS frame."""
        if first < 0 or first + count - 1 > FRAME_MAX:
            return True
        if self.last_status_frame is None or self.hello is None:
            return False
        return first > self.last_status_frame + self.hello.queue_capacity + HORIZON_SLACK

    def clear(self, nes_port: int | None = None) -> None:
        """Ends the stream on controller port ``nes_port`` (None: this link's
        :attr:`nes_port`; ``hil.link.protocol.ALL_PORTS``, 0: every port): the device flushes
        that port's queue and serves it no buttons, without underruns."""
        port = p.ALL_PORTS if nes_port == p.ALL_PORTS else self._port_arg(nes_port)
        self._request(p.Clear(port), p.Ack)

    def _port_arg(self, nes_port: int | None) -> int:
        if nes_port is None:
            return self.nes_port
        if nes_port not in p.PORTS:
            raise ValueError(f"nes_port is a controller port, 1 or 2, not {nes_port!r}")
        return nes_port

    def configure(self, window_us: int, watchdog_ms: int) -> None:
        """Sets the latch grouping window (us) and the host watchdog (ms)."""
        self._request(p.Config(window_us, watchdog_ms), p.Ack)

    def ping(self, token: int = 0) -> p.Pong:
        """Round trip; returns the device's PONG (its clock in us)."""
        pong = self._request(p.Ping(token & 0xFFFFFFFF), p.Pong)
        assert isinstance(pong, p.Pong)
        return pong

    def info(self) -> p.InfoAck:
        """The firmware's INFO: version, board, reset reason, boot and latch counters."""
        info = self._request(p.Info(), p.InfoAck)
        assert isinstance(info, p.InfoAck)
        return info

    def keepalive(self) -> None:
        """Pings if nothing was sent for KEEPALIVE_S, so the device watchdog stays fed while
        frames already queued play out."""
        if time.monotonic() - self._last_tx >= KEEPALIVE_S:
            self.ping()

    # ---- statuses ----------------------------------------------------------------------

    def poll(self, timeout_s: float = 0.0) -> list[p.Status]:
        """Reads what the device sent within ``timeout_s``; returns every status not returned
        by an earlier call, in arrival order, including those read while a request waited for
        its reply (they are also kept in ``self.statuses``, the last 4096)."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self._read_some()
            if time.monotonic() >= deadline and not got:
                break
            if not got:
                time.sleep(0.001)
        new = list(self._unpolled)
        self._unpolled.clear()
        return new

    def wait_status(self, frame: int, timeout_s: float = 1.0) -> p.Status:
        """Waits for the STATUS of console frame ``frame``. Raises LinkTimeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            for st in reversed(self.statuses):
                if st.frame == frame:
                    return st
            if time.monotonic() >= deadline:
                raise LinkTimeout(f"{self.name}: no STATUS for frame {frame}")
            self.poll(0.002)

    # ---- internals ---------------------------------------------------------------------

    def _request(self, msg: p.Message, reply: type[p.Message]) -> p.Message:
        wire = p.encode(msg, self._seq)
        seq = self._seq
        self._seq = (self._seq + 1) & 0xFF
        for attempt in range(1 + self.retries):
            if attempt:
                self.stats.retries += 1
            self._write(wire)
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline:
                while self._replies:
                    _, r = self._replies.popleft()
                    if isinstance(r, p.Nack) and r.rejected_seq == seq:
                        raise LinkError(
                            f"{self.name}: {type(msg).__name__} refused: {_err_name(r.error)}"
                        )
                    if isinstance(r, reply) and self._answers(r, msg, seq):
                        return r
                if not self._read_some():
                    time.sleep(0.0005)
        raise LinkTimeout(f"{self.name}: no reply to {type(msg).__name__} (seq {seq})")

    @staticmethod
    def _answers(r: p.Message, msg: p.Message, seq: int) -> bool:
        if isinstance(r, p.Ack):
            return r.acked_type == msg.TYPE and r.acked_seq == seq
        if isinstance(r, p.Pong):
            assert isinstance(msg, p.Ping)
            return r.token == msg.token
        return True

    def _write(self, data: bytes) -> None:
        try:
            self._ser.write(data)
            self._ser.flush()
        except PORT_ERRORS as exc:
            raise LinkError(f"controller port {self.name} lost (unplugged?): {exc}") from exc
        self._last_tx = time.monotonic()

    def _read_some(self) -> bool:
        try:
            waiting = self._ser.in_waiting
            data = self._ser.read(waiting or 1)
        except READ_ERRORS as exc:
            # pyserial raises SerialException (sometimes TypeError from a closed fd) when
            # the USB device disappears.
            raise LinkError(f"controller port {self.name} lost (unplugged?): {exc}") from exc
        if not data:
            return False
        for item in self._deframer.feed(data):
            if isinstance(item, p.ProtocolError):
                self.stats.rx_errors += 1
                continue
            seq, msg = item
            if self._rx_seq is not None and seq == self._rx_seq:
                self._anomaly("duplicate_seq", f"{type(msg).__name__} with seq {seq} again")
                continue
            if self._rx_seq is not None and seq != (self._rx_seq + 1) & 0xFF:
                self.stats.lost_messages += (seq - self._rx_seq - 1) & 0xFF
            self._rx_seq = seq
            if isinstance(msg, p.Status):
                last = self.last_status_frame
                if last is not None and msg.frame <= last:
                    kind = "status_repeat" if msg.frame == last else "status_backwards"
                    self._anomaly(kind, f"STATUS frame {msg.frame} after frame {last}")
                    continue
                self.last_status_frame = msg.frame
                msg = msg.for_port(self.nes_port)
                self.statuses.append(msg)
                self._unpolled.append(msg)
            else:
                self._replies.append((seq, msg))
        return True

    def _anomaly(self, kind: str, detail: str) -> None:
        self.stats.anomalies[kind] = self.stats.anomalies.get(kind, 0) + 1
        self.anomalies.append(Anomaly(kind, f"{self.name}: {detail}"))

    def _drain_input(self) -> None:
        try:
            self._ser.reset_input_buffer()
        except PORT_ERRORS as exc:
            raise LinkError(f"controller port {self.name} lost (unplugged?): {exc}") from exc
        self._deframer = p.Deframer()
        self._replies.clear()
