"""Host side of the controller link codec: COBS framing, CRC-16, message encode/decode.

Pure Python, no I/O. The specification is ``firmware/PROTOCOL.md``; the byte-level
vectors in ``firmware/protocol_vectors.json`` are checked against this module by
``tests/test_protocol_vectors.py`` and against the firmware's C core by
``firmware/tests/test_core.c``.

A decoded frame is ``type (u8) | seq (u8) | body | CRC-16 (u16, little-endian)``; on the
wire it is COBS-encoded and followed by one ``0x00`` delimiter. Every integer is
little-endian. Times are microseconds (us) on the firmware's clock; frames are console
frames counted by the firmware from 0. Controller ports are numbered 1 and 2, as on the
console; a SCHEDULE and a CLEAR name theirs, a STATUS carries both.
"""

from __future__ import annotations

import binascii
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from enum import IntEnum
from typing import ClassVar

PROTOCOL_VERSION = 2
MAX_FRAME = 128  # bytes, decoded: type, seq, body, CRC
FRAME_OVERHEAD = 4
MAX_BODY = MAX_FRAME - FRAME_OVERHEAD
MAX_WIRE = MAX_FRAME + (MAX_FRAME + 253) // 254 + 1  # COBS overhead + delimiter
MAX_MASKS = 64  # masks in one SCHEDULE
PORTS = (1, 2)  # NES controller ports: $4016 reads port 1, $4017 port 2
ALL_PORTS = 0  # CLEAR's port for every port
DELIMITER = b"\x00"


class Err(IntEnum):
    """Error codes, as carried by NACK and STATUS.last_error (PROTOCOL.md "Errors")."""

    OK = 0
    CRC = 1
    COBS = 2
    TOO_LONG = 3
    TOO_SHORT = 4
    UNKNOWN_TYPE = 5
    LENGTH = 6
    VERSION = 7
    NO_SESSION = 8
    RANGE = 9
    REPLAY = 10
    TAKEN_OVER = 11


class ProtocolError(ValueError):
    """A frame that must be dropped; ``code`` says why (an :class:`Err`)."""

    def __init__(self, code: Err, detail: str = "") -> None:
        super().__init__(f"{code.name}{': ' + detail if detail else ''}")
        self.code = code


def crc16(data: bytes) -> int:
    """CRC-16/IBM-3740 (alias CRC-16/CCITT-FALSE): poly 0x1021, init 0xFFFF, no reflection,
    xorout 0. ``crc16(b"123456789") == 0x29B1`` (the catalogue's check value)."""
    return binascii.crc_hqx(data, 0xFFFF)  # the same polynomial, computed in C


def cobs_encode(data: bytes) -> bytes:
    """Consistent Overhead Byte Stuffing (Cheshire & Baker 1999), canonical form, without the
    trailing delimiter. The result holds no 0x00 and is ``len(data) // 254 + 1`` bytes longer
    at most."""
    out = bytearray()
    block = bytearray()
    for i, byte in enumerate(data):
        if byte:
            block.append(byte)
            if len(block) < 254:
                continue
            out.append(0xFF)
            out += block
            block.clear()
            if i == len(data) - 1:
                return bytes(out)  # a full final block has no implied zero
        else:
            out.append(len(block) + 1)
            out += block
            block.clear()
    out.append(len(block) + 1)
    out += block
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    """Inverse of :func:`cobs_encode`. Raises ProtocolError(Err.COBS) on a zero byte or a code
    byte that runs past the end."""
    out = bytearray()
    i = 0
    while i < len(data):
        code = data[i]
        i += 1
        if code == 0 or i + code - 1 > len(data):
            raise ProtocolError(Err.COBS, f"code byte {code} at {i - 1}")
        chunk = data[i : i + code - 1]
        if 0 in chunk:
            raise ProtocolError(Err.COBS, "zero byte inside a block")
        out += chunk
        i += code - 1
        if code != 0xFF and i < len(data):
            out.append(0)
    return bytes(out)


# ---- messages ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    """Base of all messages. ``TYPE`` is the type byte, ``FORMAT`` the body's struct format
    (little-endian) with one item per dataclass field, in field order."""

    TYPE: ClassVar[int] = 0
    FORMAT: ClassVar[str] = "<"

    def body(self) -> bytes:
        return struct.pack(self.FORMAT, *(getattr(self, f.name) for f in fields(self)))

    @classmethod
    def from_body(cls, body: bytes) -> Message:
        if len(body) != struct.calcsize(cls.FORMAT):
            raise ProtocolError(Err.LENGTH, f"{cls.__name__} body is {len(body)} bytes")
        return cls(*struct.unpack(cls.FORMAT, body))


@dataclass(frozen=True)
class Hello(Message):
    """Host -> device: open a session speaking ``version``; flushes the device's queue."""

    TYPE: ClassVar[int] = 0x01
    FORMAT: ClassVar[str] = "<H"
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True)
class Schedule(Message):
    """Host -> device: ``masks[i]`` (button mask, A = 0x80 ... Right = 0x01) is the byte
    controller ``port`` (1 or 2) reads on console frame ``first_frame + i``. 1..64 masks.
    Body: ``port u8, first_frame u32, count u8, mask u8 x count``."""

    TYPE: ClassVar[int] = 0x02
    first_frame: int = 0
    masks: bytes = b""
    port: int = 1

    def body(self) -> bytes:
        if not 1 <= len(self.masks) <= MAX_MASKS:
            raise ValueError(f"a SCHEDULE carries 1..{MAX_MASKS} masks, not {len(self.masks)}")
        return struct.pack("<BIB", self.port, self.first_frame, len(self.masks)) + bytes(self.masks)

    @classmethod
    def from_body(cls, body: bytes) -> Schedule:
        if len(body) < 6 or not 1 <= body[5] <= MAX_MASKS or len(body) != 6 + body[5]:
            raise ProtocolError(Err.LENGTH, "SCHEDULE count disagrees with its length")
        port, first = struct.unpack_from("<BI", body)
        return cls(first, bytes(body[6:]), port)


@dataclass(frozen=True)
class Clear(Message):
    """Host -> device: end controller ``port``'s stream (0: every port's) and flush its queue;
    it reads no buttons without underruns."""

    TYPE: ClassVar[int] = 0x03
    FORMAT: ClassVar[str] = "<B"
    port: int = ALL_PORTS


@dataclass(frozen=True)
class Config(Message):
    """Host -> device: latch grouping window (us, 100..15000) and host watchdog (ms,
    20..60000)."""

    TYPE: ClassVar[int] = 0x04
    FORMAT: ClassVar[str] = "<II"
    window_us: int = 5000
    watchdog_ms: int = 500


@dataclass(frozen=True)
class Ping(Message):
    """Host -> device: echoed as PONG with the device's clock; keeps the watchdog fed."""

    TYPE: ClassVar[int] = 0x05
    FORMAT: ClassVar[str] = "<I"
    token: int = 0


@dataclass(frozen=True)
class Info(Message):
    """Host -> device: asks for INFO_ACK (firmware version, board, counters); no session
    needed."""

    TYPE: ClassVar[int] = 0x06


@dataclass(frozen=True)
class HelloAck(Message):
    """Device -> host, answers HELLO. ``flags`` bit 0: session open (versions match); bit 1:
    took over another session; bits 2..3: the controller ports the firmware drives."""

    TYPE: ClassVar[int] = 0x81
    FORMAT: ClassVar[str] = "<HBBHHIII"
    version: int = PROTOCOL_VERSION
    flags: int = 0
    reset_reason: int = 0
    queue_capacity: int = 0
    max_frame: int = MAX_FRAME
    window_us: int = 0
    watchdog_ms: int = 0
    boot_count: int = 0

    @property
    def session_open(self) -> bool:
        return bool(self.flags & 1)

    @property
    def took_over(self) -> bool:
        """This HELLO ended another host's open session (PROTOCOL.md)."""
        return bool(self.flags & 2)

    @property
    def ports(self) -> tuple[int, ...]:
        """The controller ports the firmware drives, e.g. ``(1, 2)``."""
        return ports_of(self.flags >> 2)


@dataclass(frozen=True)
class Ack(Message):
    """Device -> host: request ``acked_type``/``acked_seq`` done; for SCHEDULE, how many frames
    were accepted, late (already armed) and too far ahead (past the queue's horizon)."""

    TYPE: ClassVar[int] = 0x82
    FORMAT: ClassVar[str] = "<BBBBB"
    acked_type: int = 0
    acked_seq: int = 0
    accepted: int = 0
    late: int = 0
    too_far: int = 0


@dataclass(frozen=True)
class Nack(Message):
    """Device -> host: request refused with ``error`` (an :class:`Err`)."""

    TYPE: ClassVar[int] = 0x83
    FORMAT: ClassVar[str] = "<BBB"
    rejected_type: int = 0
    rejected_seq: int = 0
    error: int = 0


class StatusFlags(IntEnum):
    """STATUS.flags bits."""

    FROM_QUEUE = 0x01
    STREAMING = 0x02
    UNDERRUN = 0x04
    WATCHDOG = 0x08
    ARM_MISS = 0x10
    LATCH_LOST = 0x20
    HOST_LOST = 0x40


def ports_of(bits: int) -> tuple[int, ...]:
    """Port numbers from a port bit mask (bit 0 port 1, bit 1 port 2)."""
    return tuple(port for port in PORTS if bits >> (port - 1) & 1)


# STATUS fields that belong to one controller port: port 1's under these names, port 2's
# with the suffix _p2.
PORT_FIELDS = ("mask", "flags", "queue_depth", "underruns", "late_schedules")


@dataclass(frozen=True)
class Status(Message):
    """Device -> host, once per console frame when its latch window closes.

    ``frame``: console frame number; ``first_latch_us``: firmware time of its first latch;
    ``latches``: latches grouped into it (both ports share the latch line); ``mask``: the
    byte the console read on port 1, ``flags``/``queue_depth``/``underruns``/
    ``late_schedules`` port 1's; the same fields with ``_p2`` are port 2's. Counters are
    cumulative since the firmware's reset. :meth:`for_port` gives one port's view."""

    TYPE: ClassVar[int] = 0x84
    FORMAT: ClassVar[str] = "<IQBBBBHHIIIHHBBHII"
    frame: int = 0
    first_latch_us: int = 0
    latches: int = 0
    mask: int = 0
    flags: int = 0
    last_error: int = 0
    queue_depth: int = 0
    watchdog_trips: int = 0
    underruns: int = 0
    late_schedules: int = 0
    protocol_errors: int = 0
    arm_misses: int = 0
    tx_drops: int = 0
    mask_p2: int = 0
    flags_p2: int = 0
    queue_depth_p2: int = 0
    underruns_p2: int = 0
    late_schedules_p2: int = 0

    def for_port(self, port: int) -> Status:
        """This STATUS as controller ``port`` (1 or 2) sees it: that port's mask, flags,
        queue depth, underruns and late schedules under the port-1 names (``mask``, ...),
        the shared fields as they are. Port 1 returns ``self``."""
        if port == 1:
            return self
        if port != 2:
            raise ValueError(f"controller port is 1 or 2, not {port}")
        return replace(self, **{name: getattr(self, name + "_p2") for name in PORT_FIELDS})


@dataclass(frozen=True)
class Pong(Message):
    """Device -> host, answers PING: the token and the device clock (us)."""

    TYPE: ClassVar[int] = 0x85
    FORMAT: ClassVar[str] = "<IQ"
    token: int = 0
    device_us: int = 0


@dataclass(frozen=True)
class InfoAck(Message):
    """Device -> host, answers INFO: firmware version, reset cause (0 power-on, 1 hardware
    watchdog, 2 other), boots since power-on, device clock (us), latch events seen and
    lost, host losses (port close, USB unmount/suspend), replayed host messages, session
    takeovers, the controller ports it drives (bit 0 port 1, bit 1 port 2), board name."""

    TYPE: ClassVar[int] = 0x86
    FORMAT: ClassVar[str] = "<BBBBIQIIHHHBB16s"
    version_major: int = 0
    version_minor: int = 0
    version_patch: int = 0
    reset_reason: int = 0
    boot_count: int = 0
    device_us: int = 0
    latches: int = 0
    latches_lost: int = 0
    host_losses: int = 0
    replays: int = 0
    takeovers: int = 0
    port_bits: int = 0
    reserved: int = 0
    board_raw: bytes = b""

    @property
    def ports(self) -> tuple[int, ...]:
        """The controller ports the firmware drives, e.g. ``(1, 2)``."""
        return ports_of(self.port_bits)

    @property
    def firmware_version(self) -> str:
        return f"{self.version_major}.{self.version_minor}.{self.version_patch}"

    @property
    def board(self) -> str:
        return self.board_raw.split(b"\0", 1)[0].decode("ascii", "replace")


MESSAGE_TYPES: dict[int, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        Hello,
        Schedule,
        Clear,
        Config,
        Ping,
        Info,
        HelloAck,
        Ack,
        Nack,
        Status,
        Pong,
        InfoAck,
    )
}


def encode(msg: Message, seq: int) -> bytes:
    """Wire bytes for ``msg`` with sequence number ``seq`` (0..255): COBS frame + 0x00."""
    body = msg.body()
    if len(body) > MAX_BODY:
        raise ValueError(f"body of {len(body)} bytes exceeds {MAX_BODY}")
    frame = bytes([msg.TYPE, seq & 0xFF]) + body
    frame += struct.pack("<H", crc16(frame))
    return cobs_encode(frame) + DELIMITER


def decode_frame(decoded: bytes) -> tuple[int, Message]:
    """Parses one COBS-decoded frame into ``(seq, message)``. Raises ProtocolError."""
    if len(decoded) < FRAME_OVERHEAD:
        raise ProtocolError(Err.TOO_SHORT)
    if crc16(decoded[:-2]) != struct.unpack_from("<H", decoded, len(decoded) - 2)[0]:
        raise ProtocolError(Err.CRC)
    cls = MESSAGE_TYPES.get(decoded[0])
    if cls is None:
        raise ProtocolError(Err.UNKNOWN_TYPE, f"type 0x{decoded[0]:02x}")
    return decoded[1], cls.from_body(decoded[2:-2])


def decode_wire(chunk: bytes) -> tuple[int, Message]:
    """Parses the bytes of one wire frame without its delimiter. Raises ProtocolError."""
    if len(chunk) > MAX_WIRE - 1:
        raise ProtocolError(Err.TOO_LONG)
    decoded = cobs_decode(chunk)
    if len(decoded) > MAX_FRAME:
        raise ProtocolError(Err.TOO_LONG)
    return decode_frame(decoded)


@dataclass
class Deframer:
    """Streaming receiver: feed any chunks of bytes, get messages and errors in order.

    Bytes past MAX_WIRE before a delimiter are discarded up to the next 0x00 (one TOO_LONG
    error); every error resynchronises on the next delimiter. Back-to-back delimiters are
    idle filler, not errors."""

    _buf: bytearray = field(default_factory=bytearray)
    _overflow: bool = False

    def feed(self, data: bytes) -> Iterator[tuple[int, Message] | ProtocolError]:
        """Yields ``(seq, message)`` for each valid frame and a ProtocolError for each
        dropped one, in stream order."""
        for byte in data:
            if byte:
                if len(self._buf) < MAX_WIRE - 1:
                    self._buf.append(byte)
                else:
                    self._overflow = True
                continue
            chunk, overflow = bytes(self._buf), self._overflow
            self._buf.clear()
            self._overflow = False
            if overflow:
                yield ProtocolError(Err.TOO_LONG)
            elif chunk:
                try:
                    yield decode_wire(chunk)
                except ProtocolError as err:
                    yield err
