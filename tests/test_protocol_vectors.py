"""hil.link.protocol against firmware/protocol_vectors.json, the byte-level vectors of
firmware/PROTOCOL.md (the firmware's C core is checked against the same file by
firmware/tests/test_core.c, run by firmware/ci.sh)."""

import binascii
import dataclasses
import json
from pathlib import Path

import pytest

from hil.link import protocol as p

VECTORS = json.loads(
    (Path(__file__).resolve().parents[1] / "firmware" / "protocol_vectors.json").read_text()
)
BY_NAME = {cls.__name__.upper(): cls for cls in p.MESSAGE_TYPES.values()}
BY_NAME["HELLO_ACK"] = p.HelloAck
BY_NAME["INFO_ACK"] = p.InfoAck


def test_vectors_are_for_this_protocol_version():
    assert VECTORS["protocol_version"] == p.PROTOCOL_VERSION
    assert VECTORS["crc16_name"] == "CRC-16/IBM-3740"


@pytest.mark.parametrize("vec", VECTORS["crc16"], ids=lambda v: v["data"][:12] or "empty")
def test_crc16(vec):
    data = bytes.fromhex(vec["data"])
    assert p.crc16(data) == vec["crc"]
    # binascii.crc_hqx is the same polynomial with the initial value given: a second opinion.
    assert binascii.crc_hqx(data, 0xFFFF) == vec["crc"]


@pytest.mark.parametrize("vec", VECTORS["cobs"], ids=lambda v: v["decoded"][:12] or "empty")
def test_cobs(vec):
    decoded, encoded = bytes.fromhex(vec["decoded"]), bytes.fromhex(vec["encoded"])
    assert p.cobs_encode(decoded) == encoded
    assert p.cobs_decode(encoded) == decoded


def _fields(vec: dict, cls: type[p.Message]) -> dict:
    out = {}
    for name in (f.name for f in dataclasses.fields(cls)):
        value = vec[name]
        out[name] = bytes.fromhex(value) if name in ("masks", "board_raw") else value
    return out


@pytest.mark.parametrize("vec", VECTORS["messages"], ids=lambda v: v["name"])
def test_message_encode_and_decode(vec):
    cls = BY_NAME[vec["type"]]
    msg = cls(**_fields(vec, cls))
    wire = bytes.fromhex(vec["wire"])
    assert p.encode(msg, vec["seq"]) == wire
    assert p.cobs_encode(bytes.fromhex(vec["decoded"])) + b"\x00" == wire
    assert list(p.Deframer().feed(wire)) == [(vec["seq"], msg)]


@pytest.mark.parametrize("vec", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_frames_are_dropped_with_their_error(vec):
    deframer = p.Deframer()
    out = list(deframer.feed(bytes.fromhex(vec["wire"])))
    assert len(out) == 1 and isinstance(out[0], p.ProtocolError)
    assert out[0].code == p.Err[vec["error"].removeprefix("ERR_")]
    # The receiver is back in step: the next valid frame decodes.
    ping = p.Ping(7)
    assert list(deframer.feed(p.encode(ping, 3))) == [(3, ping)]


@pytest.mark.parametrize("vec", VECTORS["nack"], ids=lambda v: v["name"])
def test_nack_cases_pass_the_crc(vec):
    """These frames are valid on the wire; the device refuses them (checked against the
    core in tests/test_link_vdevice.py). The host codec must not mistake them for noise."""
    wire = bytes.fromhex(vec["wire"])
    decoded = p.cobs_decode(wire[:-1])
    assert p.crc16(decoded[:-2]) == int.from_bytes(decoded[-2:], "little")
    assert decoded[0] == vec["rejected_type"] and decoded[1] == vec["rejected_seq"]


def test_limits_match_the_spec():
    largest = max(
        (v for v in VECTORS["messages"] if v["type"] == "SCHEDULE"), key=lambda v: len(v["wire"])
    )
    assert len(bytes.fromhex(largest["masks"])) == p.MAX_MASKS
    assert len(bytes.fromhex(largest["decoded"])) <= p.MAX_FRAME
    with pytest.raises(ValueError):
        p.encode(p.Schedule(0, bytes(p.MAX_MASKS + 1)), 0)
    with pytest.raises(ValueError):
        p.encode(p.Schedule(0, b""), 0)


def test_status_for_port_gives_that_ports_fields_under_the_port_1_names():
    vec = next(v for v in VECTORS["messages"] if v["type"] == "STATUS")
    st = p.Status(**_fields(vec, p.Status))
    assert st.for_port(1) is st
    p2 = st.for_port(2)
    assert (p2.mask, p2.flags, p2.queue_depth, p2.underruns, p2.late_schedules) == (
        st.mask_p2,
        st.flags_p2,
        st.queue_depth_p2,
        st.underruns_p2,
        st.late_schedules_p2,
    )
    assert (p2.frame, p2.first_latch_us, p2.protocol_errors) == (
        st.frame,
        st.first_latch_us,
        st.protocol_errors,
    )
    with pytest.raises(ValueError, match="1 or 2"):
        st.for_port(3)


def test_ports_from_hello_ack_and_info_ack_bits():
    assert p.HelloAck(flags=0x0D).ports == (1, 2)
    assert p.HelloAck(flags=0x05).ports == (1,)
    assert p.HelloAck(flags=0x09).ports == (2,)
    assert p.InfoAck(port_bits=0).ports == ()  # a firmware before protocol 2 reports none
    assert p.Schedule.from_body(p.Schedule(7, b"\x80", port=2).body()) == p.Schedule(7, b"\x80", 2)
