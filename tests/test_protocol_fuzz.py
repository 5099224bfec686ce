"""Fuzzing both decoders with random and damaged frames (hypothesis): the host's
hil.link.protocol.Deframer and the firmware core's receiver (libnbcore via ctypes). Neither may
crash or hang, and nothing is acted on unless its CRC is valid. The oracle for "valid CRC"
is independent of both: binascii.crc_hqx over a naive COBS decode."""

import binascii
import ctypes

from hypothesis import given, settings
from hypothesis import strategies as st

from hil.link import protocol as p
from hil.link.vdevice import load_core

U32 = st.integers(0, 2**32 - 1)
U16 = st.integers(0, 2**16 - 1)
U8 = st.integers(0, 255)

MESSAGES = st.one_of(
    st.builds(p.Hello, U16),
    st.builds(p.Schedule, U32, st.binary(min_size=1, max_size=p.MAX_MASKS)),
    st.just(p.Clear()),
    st.builds(p.Config, U32, U32),
    st.builds(p.Ping, U32),
    st.builds(p.HelloAck, U16, U8, U8, U16, U16, U32, U32, U32),
    st.builds(p.Ack, U8, U8, U8, U8, U8),
    st.builds(p.Nack, U8, U8, U8),
    st.builds(
        p.Status, U32, st.integers(0, 2**64 - 1), U8, U8, U8, U8, U16, U16, U32, U32, U32, U16, U16
    ),
    st.builds(p.Pong, U32, st.integers(0, 2**64 - 1)),
)


def oracle_crc_ok(chunk: bytes) -> bool:
    """Independent check: does this delimiter-free chunk decode to a frame with a valid CRC?"""
    out, i = bytearray(), 0
    while i < len(chunk):
        code = chunk[i]
        if code == 0 or i + code > len(chunk):
            return False
        out += chunk[i + 1 : i + code]
        i += code
        if code < 0xFF and i < len(chunk):
            out.append(0)
    if not 4 <= len(out) <= p.MAX_FRAME or len(chunk) > p.MAX_WIRE - 1:
        return False
    return binascii.crc_hqx(bytes(out[:-2]), 0xFFFF) == int.from_bytes(out[-2:], "little")


@st.composite
def damaged_streams(draw):
    """Valid frames, some damaged (bit flip, truncation, byte dropped, bytes inserted),
    mixed with raw garbage."""
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["frame", "damaged", "garbage"]))
        if kind == "garbage":
            parts.append(draw(st.binary(max_size=200)))
            continue
        wire = bytearray(p.encode(draw(MESSAGES), draw(U8)))
        if kind == "damaged":
            at = draw(st.integers(0, len(wire) - 2))
            how = draw(st.sampled_from(["flip", "truncate", "drop", "insert"]))
            if how == "flip":
                wire[at] ^= 1 << draw(st.integers(0, 7))
            elif how == "truncate":
                wire = wire[: at + 1] + b"\x00"
            elif how == "drop":
                del wire[at]
            else:
                wire[at:at] = draw(st.binary(min_size=1, max_size=4))
        parts.append(bytes(wire))
    return b"".join(parts) + b"\x00"


def chunks(stream: bytes) -> list[bytes]:
    """Delimiter-terminated chunks that are not empty (empty ones are idle filler)."""
    return [c for c in stream.split(b"\x00")[:-1] if c]


@settings(deadline=2000)
@given(MESSAGES, U8)
def test_every_message_round_trips(msg, seq):
    wire = p.encode(msg, seq)
    assert wire.count(0) == 1 and wire.endswith(b"\x00")
    assert len(wire) <= p.MAX_WIRE
    assert list(p.Deframer().feed(wire)) == [(seq, msg)]


@settings(max_examples=300, deadline=2000)  # a hang fails; a slow CI machine does not
@given(damaged_streams(), st.data())
def test_host_deframer_acts_only_on_valid_crc(stream, data):
    deframer = p.Deframer()
    items = []
    pos = 0
    while pos < len(stream):  # arbitrary chunking, as USB delivers it
        n = data.draw(st.integers(1, 64))
        items += list(deframer.feed(stream[pos : pos + n]))
        pos += n
    expected = chunks(stream)
    assert len(items) == len(expected)  # one outcome per frame, in order
    for item, chunk in zip(items, expected, strict=True):
        if not oracle_crc_ok(chunk):
            assert isinstance(item, p.ProtocolError)


@settings(deadline=2000)
@given(st.binary(max_size=2000))
def test_host_deframer_survives_pure_noise(noise):
    items = list(p.Deframer().feed(noise + b"\x00"))
    for item, chunk in zip(items, chunks(noise + b"\x00"), strict=True):
        assert isinstance(item, p.ProtocolError) or oracle_crc_ok(chunk)


class Core:
    """The firmware core in-process (no pty): bytes in, bytes out."""

    lib = load_core()

    def __init__(self) -> None:
        self.mem = (ctypes.c_uint64 * ((self.lib.nb_core_size() + 7) // 8))()
        self.lib.nb_init(self.mem, None)

    def rx(self, data: bytes) -> None:
        self.lib.nb_rx(self.mem, data, len(data), 0)

    def tx(self) -> bytes:
        buf = ctypes.create_string_buffer(4096)
        n = self.lib.nb_tx(self.mem, buf, len(buf))
        return buf.raw[:n]


@settings(max_examples=300, deadline=2000)
@given(damaged_streams(), st.data())
def test_firmware_core_answers_exactly_the_valid_frames(stream, data):
    core = Core()
    core.rx(p.encode(p.Hello(), 0))
    assert isinstance(next(iter(p.Deframer().feed(core.tx())))[1], p.HelloAck)
    replies = []
    deframer = p.Deframer()
    pos = 0
    while pos < len(stream):
        n = data.draw(st.integers(1, 64))
        core.rx(stream[pos : pos + n])
        replies += list(deframer.feed(core.tx()))  # drained often: nothing is dropped
        pos += n
    assert all(not isinstance(r, p.ProtocolError) for r in replies), "core sent a bad frame"
    # Every frame with a valid CRC gets exactly one answer (ACK, NACK, PONG or HELLO_ACK);
    # every other frame gets none.
    assert len(replies) == sum(oracle_crc_ok(c) for c in chunks(stream))
