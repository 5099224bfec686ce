"""calibration.Profile: JSON files, validation with clear errors, random profiles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration import (
    PIXEL_ASPECT_8_7,
    Color,
    Geometry,
    Profile,
    ProfileError,
    Timing,
    builtin_profiles,
)


def test_shipped_profiles_load_and_round_trip_through_json(tmp_path):
    names = builtin_profiles()
    assert {
        "ideal_720p_nearest",
        "hdmi_1080p_bilinear",
        "mjpeg_720p_q70",
        "composite_480p_combing",
    } <= set(names)
    for name in names:
        p = Profile.load(name)
        assert p.name == name
        p.save(tmp_path / f"{name}.json")
        assert Profile.load(tmp_path / f"{name}.json") == p
        assert Profile.from_json(p.to_json()) == p


def test_shipped_profiles_say_what_their_names_say():
    mjpeg = Profile.load("mjpeg_720p_q70")
    assert (mjpeg.geometry.width, mjpeg.geometry.height) == (1280, 720)
    assert mjpeg.color.range == "limited" and mjpeg.artifacts.jpeg_quality == 70
    assert mjpeg.timing.latency_frames == 3.0 and mjpeg.timing.jitter_ms > 0
    assert Profile.load("composite_480p_combing").artifacts.combing
    hdmi = Profile.load("hdmi_1080p_bilinear").geometry
    assert hdmi.interpolation == "bilinear" and hdmi.pixel_aspect == pytest.approx(8 / 7, 1e-5)


def test_empty_object_is_the_ideal_chain():
    p = Profile.from_dict({}, name="x")
    assert p.geometry == Geometry() and p.color.is_identity and p.artifacts.is_identity
    assert p.name == "x"
    g = p.geometry
    assert g.pixel_aspect == pytest.approx(PIXEL_ASPECT_8_7)
    # Centred: equal pillarbox on both sides.
    assert g.offset_x == pytest.approx(g.width - g.offset_x - 256 * g.scale_x)


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"geometry": {"scale_x": 0.5}}, "geometry.scale_x = 0.5 is out of range [1, 16]"),
        ({"geometry": {"width": 1280.5}}, "geometry.width must be an integer in [64, 3840]"),
        ({"geometry": {"height": "720"}}, "geometry.height must be an integer"),
        ({"geometry": {"crop_top": 65}}, "geometry.crop_top = 65 is out of range [0, 64]"),
        ({"geometry": {"interpolation": "cubic"}}, "'nearest', 'bilinear', 'area'"),
        ({"geometry": {"scale_y": 4.0}}, "beyond height 720"),
        ({"geometry": {"offset_x": 500.0}}, "beyond width 1280"),
        ({"geometry": {"fps": 60}}, "unknown key geometry.fps"),
        ({"colour": {}}, "unknown key colour"),
        ({"color": {"range": "tv"}}, "color.range = 'tv' is not one of 'full', 'limited'"),
        ({"color": {"gain": [1, 1]}}, "color.gain must be a list of 3 numbers"),
        ({"color": {"offset": [0, 40, 0]}}, "color.offset[1] = 40 is out of range [-32, 32]"),
        ({"color": {"gamma": float("nan")}}, "color.gamma = nan is out of range"),
        ({"artifacts": {"jpeg_quality": 0}}, "artifacts.jpeg_quality = 0 is out of range [1, 100]"),
        ({"artifacts": {"combing": 1}}, "artifacts.combing must be true or false"),
        ({"artifacts": {"chroma": "4:1:1"}}, "artifacts.chroma = '4:1:1' is not one of"),
        ({"timing": {"capture_hz": 0}}, "timing.capture_hz = 0 is out of range [10, 240]"),
        ({"timing": {"drop_rate": True}}, "timing.drop_rate must be a number"),
        ({"geometry": []}, "geometry must be a JSON object"),
        ({"name": ""}, "name must be a non-empty string"),
    ],
)
def test_validation_errors_name_the_key_and_the_range(data, needle):
    with pytest.raises(ProfileError) as err:
        Profile.from_dict(data)
    assert needle in str(err.value)
    assert isinstance(err.value, ValueError)


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="ideal_720p_nearest"):
        Profile.load("no_such_profile")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        Profile.load(bad)
    bad.write_text(json.dumps({"timing": {"latency_frames": -1}}))
    with pytest.raises(ProfileError, match=r"bad.json: timing.latency_frames = -1"):
        Profile.load(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ProfileError, match="must be a JSON object, got list"):
        Profile.load(bad)


def test_profiles_are_hashable_values():
    a = Profile.load("mjpeg_720p_q70")
    b = Profile.from_json(a.to_json())
    assert a == b and hash(a) == hash(b)
    c = a.replace(color=Color())
    assert c != a and c.color.is_identity
    assert len({a, b, c}) == 2


def test_geometry_centered_fits_the_output():
    for width, height in ((640, 480), (720, 480), (1280, 720), (1920, 1080)):
        for aspect in (PIXEL_ASPECT_8_7, 1.0):
            g = Geometry.centered(width, height, pixel_aspect=aspect, crop=(8, 8, 0, 0))
            assert g.scale_x / g.scale_y == pytest.approx(aspect)
            right = g.offset_x + g.crop_width * g.scale_x
            bottom = g.offset_y + g.crop_height * g.scale_y
            assert right <= width + 1e-6 and bottom <= height + 1e-6
            assert width - right == pytest.approx(g.offset_x)  # centred
            assert height - bottom == pytest.approx(g.offset_y)
            assert min(width - right, height - bottom) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ProfileError, match="beyond height"):
        Geometry.centered(1280, 720, scale_y=4.0)


def test_random_profiles_are_valid_varied_and_seeded():
    rng = np.random.default_rng(7)
    profiles = [Profile.random(rng) for _ in range(300)]
    again = [Profile.random(np.random.default_rng(7)) for _ in range(1)]
    assert again[0] == profiles[0]
    for p in profiles:
        assert Profile.from_json(p.to_json()) == p  # valid and serialisable
    seen = {
        "interp": {p.geometry.interpolation for p in profiles},
        "size": {(p.geometry.width, p.geometry.height) for p in profiles},
        "range": {p.color.range for p in profiles},
        "chroma": {p.artifacts.chroma for p in profiles},
        "jpeg": {p.artifacts.jpeg_quality is None for p in profiles},
        "combing": {p.artifacts.combing for p in profiles},
        "crop": {p.geometry.crop_top > 0 for p in profiles},
        "square": {abs(p.geometry.pixel_aspect - 1.0) < 1e-3 for p in profiles},
    }
    assert seen["interp"] == {"nearest", "bilinear", "area"}
    assert len(seen["size"]) == 4
    for key in ("range", "jpeg", "combing", "crop", "square"):
        assert len(seen[key]) == 2, key
    assert len(seen["chroma"]) == 3


def test_timing_defaults_are_ntsc_console_and_60hz_capture():
    t = Timing()
    assert t.console_hz == pytest.approx(60.0988) and t.capture_hz == 60.0
