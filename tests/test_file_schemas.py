"""The files the project reads, each against its schema (issue 39): a recording's recording.json
and sidecar, a capture profile, a prepared model's screens.npz and panel.npz. Whatever a file
holds, reading it gives the value or one ValueError line naming the file and the field, never
another exception and never a hang (Hypothesis, each example under a deadline). Paths inside a
recording stay inside it, and a folder holding any recording file is never written over
without --overwrite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calibration import Geometry, Profile, ProfileError
from hil.loop.recording import (
    META_FILE,
    TRUTH_FILE,
    Recording,
    RecordingError,
    RecordingWriter,
    check_target,
)
from perception.panel import load_glyphs
from perception.screens import PROTOTYPE_SCHEMA, ScreenPrototypes

PROFILE = Profile(name="small", geometry=Geometry.centered(320, 256, interpolation="area"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = (
    "version",
    "format",
    "video",
    "truth",
    "width",
    "height",
    "fps",
    "profile",
    "closed",
    "frames",
    "source",
)


def _one_line(e: Exception) -> str:
    msg = str(e)
    assert msg and "\n" not in msg and "Traceback" not in msg
    return msg


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rec") / "rec"
    with RecordingWriter(d, PROFILE, meta={"reader": "onnx", "level": 3}) as w:
        for i in range(3):
            w.write(np.zeros((256, 320, 3), np.uint8), time_ns=1000 * i, truth={"pill": None})
    return d


def _with_header(src: Path, dst: Path, header: object) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    (dst / META_FILE).write_text(json.dumps(header))
    return dst


@settings(
    max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(FIELDS), value=JSON)
def test_any_header_field_opens_or_names_the_field(recording, tmp_path, field, value):
    header = json.loads((recording / META_FILE).read_text())
    header[field] = value
    d = _with_header(recording, tmp_path / "r", header)
    try:
        rec = Recording(d)
    except RecordingError as e:
        msg = _one_line(e)
        assert str(d / META_FILE) in msg or str(d) in msg
    else:  # what opened is what the schema allows
        assert 1 <= rec.meta.get("version", 1) <= 2
        assert rec.video_path.parent == d and rec.size == (320, 256)


@settings(
    max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(header=JSON)
def test_any_header_opens_or_says_why(recording, tmp_path, header):
    d = _with_header(recording, tmp_path / "r", header)
    with pytest.raises(RecordingError) as e:
        Recording(d)
    _one_line(e.value)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("version", 9, "field 'version': expected an integer 1..2, got 9"),
        ("video", "/etc/passwd", "field 'video': expected one of capture.mkv, capture.avi"),
        ("truth", "../../etc/passwd", "field 'truth': expected 'frames.jsonl'"),
        ("width", 1e9, "field 'width': expected an integer 1..8192"),
        ("source", {"reader": "psychic"}, "field 'source.reader': expected one of auto, onnx"),
        ("source", {"level": 99}, "field 'source.level': expected an integer 0..24"),
    ],
)
def test_header_values_no_recording_can_mean_are_refused(
    recording, tmp_path, field, value, expected
):
    header = json.loads((recording / META_FILE).read_text())
    header[field] = value
    d = _with_header(recording, tmp_path / "r", header)
    with pytest.raises(RecordingError, match=expected.replace(".", r"\.")):
        Recording(d)


def test_files_of_a_recording_resolve_inside_it(recording, tmp_path):
    d = _with_header(recording, tmp_path / "r", json.loads((recording / META_FILE).read_text()))
    outside = tmp_path / "secret.jsonl"
    outside.write_text('{"index": 0, "time_ns": 0}\n')
    (d / TRUTH_FILE).unlink()
    (d / TRUTH_FILE).symlink_to(outside)
    with pytest.raises(RecordingError, match="points outside the recording"):
        Recording(d)


@settings(
    max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    line=st.binary(max_size=60)
    | st.text(max_size=60).map(str.encode)
    | st.integers(1, 200_000).map(lambda n: b"[" * n)
)
def test_any_sidecar_line_is_read_or_named(recording, tmp_path, line):
    d = _with_header(recording, tmp_path / "r", json.loads((recording / META_FILE).read_text()))
    lines = (d / TRUTH_FILE).read_bytes().splitlines(keepends=True)
    lines[1] = line.replace(b"\n", b" ") + b"\n"
    (d / TRUTH_FILE).write_bytes(b"".join(lines))
    try:
        rec = Recording(d)
    except RecordingError as e:
        assert f"{TRUTH_FILE}:2" in _one_line(e)
    else:
        assert len(rec) == 3 and rec.truth[1]["index"] == 1


@pytest.mark.parametrize("name", ["capture.mkv", "frames.jsonl", "capture.avi", "recording.json"])
def test_a_folder_with_any_recording_file_is_a_recording(tmp_path, name):
    d = tmp_path / "rec"
    d.mkdir()
    (d / name).write_bytes(b"earlier work")
    with pytest.raises(RecordingError, match=f"already holds a recording \\({name};"):
        check_target(d, overwrite=False)
    with pytest.raises(RecordingError, match="already holds a recording"):
        RecordingWriter(d, PROFILE)
    assert (d / name).read_bytes() == b"earlier work"  # nothing was deleted
    check_target(d, overwrite=True)


@settings(max_examples=200, deadline=2000)
@given(
    key=st.sampled_from(
        ["version", "geometry", "timing", "color", "artifacts", "name", "rom_crc32", "nope"]
    ),
    value=JSON,
)
def test_any_profile_value_loads_or_names_the_key(key, value):
    data = PROFILE.to_dict()
    if isinstance(value, dict) and isinstance(data.get(key), dict):
        data[key] = {**data[key], **value}
    else:
        data[key] = value
    try:
        Profile.from_dict(data)
    except ProfileError as e:
        _one_line(e)


@settings(max_examples=100, deadline=2000)
@given(text=st.text(max_size=80) | st.integers(1, 100_000).map(lambda n: "{" * n))
def test_any_profile_text_loads_or_says_why(text):
    try:
        Profile.from_json(text)
    except ProfileError as e:
        _one_line(e)


def _prototypes() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray] = {}
    for name, (width, labels, top) in PROTOTYPE_SCHEMA.items():
        arrays[name] = rng.random((3, width), np.float32)
        if labels:
            arrays[labels] = rng.integers(0, top + 1, 3).astype(np.int8)
    arrays.update(demo_radius=np.float32(0.3), box_radius=np.float32(0.2), source=np.array("t"))
    return arrays


def test_prepared_screens_round_trip(tmp_path):
    np.savez_compressed(tmp_path / "s.npz", **_prototypes())
    p = ScreenPrototypes.load(tmp_path / "s.npz")
    assert p.whole.shape == (3, 720) and p.demo_radius == pytest.approx(0.3)


@settings(
    max_examples=60, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    field=st.sampled_from([*_prototypes()]),
    value=st.sampled_from([np.nan, np.inf, -1.0, 0.0, 99.0])
    | st.integers(0, 5).map(lambda n: np.zeros((n, 7), np.float32))
    | st.integers(0, 5).map(lambda n: np.full(n, 100, np.int16)),
)
def test_damaged_prepared_screens_are_named(tmp_path, field, value):
    arrays = _prototypes()
    a = arrays[field]
    if np.isscalar(value) and a.dtype == np.float32 and a.ndim == 2:
        a = a.copy()
        a[0, 0] = value
        value = a
    arrays[field] = np.asarray(value)
    path = tmp_path / "s.npz"
    np.savez_compressed(path, **arrays)
    try:
        p = ScreenPrototypes.load(path)
    except ValueError as e:
        assert str(path) in _one_line(e)
    else:
        assert all(np.isfinite(getattr(p, n)).all() for n in PROTOTYPE_SCHEMA)


@settings(
    max_examples=100, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=300))
def test_any_bytes_as_prepared_files_are_named(tmp_path, data):
    path = tmp_path / "f.npz"
    path.write_bytes(data)
    for load in (ScreenPrototypes.load, load_glyphs):
        with pytest.raises(ValueError) as e:
            load(path)
        assert str(path) in _one_line(e.value)


def test_a_truncated_prepared_screens_file_is_named(tmp_path):
    np.savez_compressed(tmp_path / "s.npz", **_prototypes())
    data = (tmp_path / "s.npz").read_bytes()
    (tmp_path / "s.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a screen prototype file"):
        ScreenPrototypes.load(tmp_path / "s.npz")


@settings(
    max_examples=30, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=200) | st.sampled_from([b"", b"\x08\x07", b"ir_version: 7"]))
def test_any_bytes_as_a_board_model_are_named(tmp_path, data):
    from perception.reader import BoardReader

    path = tmp_path / "board.onnx"
    path.write_bytes(data)
    with pytest.raises(ValueError) as e:
        BoardReader(PROFILE, model=path)
    assert str(path) in str(e.value).splitlines()[0]


def test_files_of_another_version_are_refused(tmp_path):
    data = PROFILE.to_dict()
    assert data["version"] == 1 and Profile.from_dict(data) == PROFILE
    with pytest.raises(ProfileError, match="version must be 1 .*, got 2"):
        Profile.from_dict({**data, "version": 2})
    del data["version"]  # written before profiles had one
    assert Profile.from_dict(data) == PROFILE
    arrays = _prototypes()
    np.savez_compressed(tmp_path / "s.npz", **arrays)  # no version: an older file
    ScreenPrototypes.load(tmp_path / "s.npz").save(tmp_path / "again.npz")
    assert int(np.load(tmp_path / "again.npz")["version"]) == 1
    np.savez_compressed(tmp_path / "s.npz", **arrays, version=np.int32(2))
    with pytest.raises(ValueError, match="field 'version': expected 1"):
        ScreenPrototypes.load(tmp_path / "s.npz")


def test_a_full_disk_ends_the_event_log_not_the_run(capsys):
    """/dev/full takes the open and refuses every write (ENOSPC), as a full disk does."""
    from hil.loop.eventlog import EventLog

    log = EventLog("/dev/full")
    for i in range(3):
        log.write("frame", i=i)  # the first fails; none raises
    log.close()
    assert log.error == "/dev/full: No space left on device"
    assert capsys.readouterr().err.count("the event log stops here") == 1


def test_panel_glyphs_of_another_version_are_refused(tmp_path):
    digits = np.random.default_rng(0).random((10, 8, 8), np.float32)
    np.savez_compressed(tmp_path / "old.npz", digits=digits)  # before versions: read as 1
    assert load_glyphs(tmp_path / "old.npz").shape == (10, 8, 8)
    np.savez_compressed(tmp_path / "new.npz", digits=digits, version=np.int32(2))
    with pytest.raises(ValueError, match="field 'version': expected 1, got 2"):
        load_glyphs(tmp_path / "new.npz")
