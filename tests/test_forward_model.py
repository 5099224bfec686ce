"""The forward model (NES RGB -> captured BGR) and its geometric inverse (forward.to_nes)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from calibration import (
    PIXEL_ASPECT_8_7,
    Artifacts,
    CaptureModel,
    Color,
    Geometry,
    NoiseSource,
    Profile,
    forward,
    to_nes,
)
from calibration.geometry import inverse_maps

PALETTE = np.array(  # a few NES-like colours (RGB)
    [[0, 0, 0], [252, 252, 252], [248, 56, 0], [60, 188, 252], [248, 184, 0], [0, 168, 0]],
    dtype=np.uint8,
)


def noise_frame(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (240, 256, 3), dtype=np.uint8)


def tile_frame(seed: int = 0) -> np.ndarray:
    """8x8 tiles of palette colours, like a nametable picture."""
    rng = np.random.default_rng(seed)
    tiles = PALETTE[rng.integers(0, len(PALETTE), (30, 32))]
    return np.ascontiguousarray(np.repeat(np.repeat(tiles, 8, axis=0), 8, axis=1))


def visible(g: Geometry) -> np.ndarray:
    m = np.zeros((240, 256), dtype=bool)
    m[g.crop_top : 240 - g.crop_bottom, g.crop_left : 256 - g.crop_right] = True
    return m


EXACT_GEOMETRIES = [
    Geometry.centered(640, 480),
    Geometry.centered(720, 480, crop=(8, 8, 0, 0)),
    Geometry.centered(1280, 720),
    Geometry.centered(1280, 720, scale_y=2.5, pixel_aspect=1.0),
    Geometry.centered(1920, 1080, pixel_aspect=1.0, interpolation="area"),
    Geometry.centered(1920, 1080, crop=(8, 8, 4, 4), interpolation="area"),
    # Letterbox and pillarbox off centre, fractional offsets and scales.
    Geometry(
        width=1920,
        height=1080,
        scale_x=4.1733,
        scale_y=3.6021,
        offset_x=811.37,
        offset_y=97.5,
        crop_top=3,
        crop_bottom=5,
        crop_left=2,
        crop_right=7,
    ),
    Geometry(width=300, height=260, scale_x=1.0, scale_y=1.0, offset_x=10.5, offset_y=3.5),
]


@pytest.mark.parametrize("g", EXACT_GEOMETRIES, ids=lambda g: f"{g.width}x{g.height}")
def test_round_trip_without_degradation_is_exact(g):
    p = Profile(geometry=g)
    for nes in (noise_frame(1), tile_frame(2)):
        captured = forward(p, nes)
        assert captured.shape == (g.height, g.width, 3) and captured.dtype == np.uint8
        back = to_nes(p, captured)
        vis = visible(g)
        np.testing.assert_array_equal(back[vis], nes[vis])
        assert not back[~vis].any()  # cropped NES pixels come back black
    np.testing.assert_array_equal(inverse_maps(g).visible, visible(g))


def test_border_is_black_and_picture_is_where_the_geometry_says():
    g = EXACT_GEOMETRIES[6]
    captured = forward(Profile(geometry=g), np.full((240, 256, 3), 200, np.uint8))
    lit = captured.any(axis=2)
    ys, xs = np.nonzero(lit)
    # Nearest: lit capture pixels are those whose centre falls inside the picture.
    assert xs.min() == int(np.ceil(g.offset_x - 0.5))
    assert xs.max() == int(np.ceil(g.offset_x + g.crop_width * g.scale_x - 0.5)) - 1
    assert ys.min() == int(np.ceil(g.offset_y - 0.5))
    assert ys.max() == int(np.ceil(g.offset_y + g.crop_height * g.scale_y - 0.5)) - 1
    assert lit[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1].all()


def _reference_axis(n_out, n_src, offset, scale, interpolation):
    """Weights [n_out, n_src + 2] over a source bordered on both sides (float64, by definition)."""
    r = np.zeros((n_out, n_src + 2))
    for u in range(n_out):
        c = (u + 0.5 - offset) / scale
        if interpolation == "area":
            a, b = (u - offset) / scale, (u + 1 - offset) / scale
            r[u, 0] = max(0.0, min(b, 0.0) - a) + max(0.0, b - max(a, n_src))  # the border
            for j in range(n_src):
                r[u, j + 1] = max(0.0, min(b, j + 1) - max(a, j))
            r[u] /= b - a
        elif not 0 <= c < n_src:
            r[u, 0] = 1
        elif interpolation == "nearest":
            r[u, int(np.floor(c)) + 1] = 1
        else:
            pos = min(max(c - 0.5, 0.0), n_src - 1.0)
            lo = int(np.floor(pos))
            r[u, lo + 1] += 1 - (pos - lo)
            if pos > lo:
                r[u, lo + 2] += pos - lo
    return r


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear", "area"])
def test_scaling_matches_the_definition(interpolation):
    g = Geometry(
        width=400,
        height=330,
        scale_x=1.37,
        scale_y=1.29,
        offset_x=13.3,
        offset_y=7.6,
        crop_top=3,
        crop_bottom=5,
        crop_left=2,
        crop_right=7,
        interpolation=interpolation,
    )
    nes = noise_frame(3)
    got = forward(Profile(geometry=g), nes).astype(np.float64)
    src = np.zeros((g.crop_height + 2, g.crop_width + 2, 3))
    src[1:-1, 1:-1] = nes[3:235, 2:249, ::-1]  # BGR
    rx = _reference_axis(g.width, g.crop_width, g.offset_x, g.scale_x, interpolation)
    ry = _reference_axis(g.height, g.crop_height, g.offset_y, g.scale_y, interpolation)
    want = np.stack([ry @ src[..., c] @ rx.T for c in range(3)], axis=-1)
    err = np.abs(got - want)
    # Weights are quantised to 1/64 per axis (at most 2 code values each) plus rounding.
    assert err.max() <= 4.5 and err.mean() < 0.6


def test_bilinear_is_not_exact_but_close_on_tiles():
    g = Geometry.centered(1920, 1080, interpolation="bilinear")
    nes = tile_frame(4)
    back = to_nes(Profile(geometry=g), forward(Profile(geometry=g), nes))
    diff = np.abs(back.astype(int) - nes)
    assert diff.max() > 0  # tile edges blend
    interior = np.ones((240, 256), bool)
    for edge in range(0, 256, 8):
        interior[:, max(0, edge - 1) : edge + 1] = False
        interior[max(0, edge - 1) : edge + 1, :] = False
    assert not diff[interior].any()  # inside a tile bilinear sampling is exact


def _single(**artifacts) -> Profile:
    return Profile(geometry=Geometry.centered(640, 480), artifacts=Artifacts(**artifacts))


def test_colour_identity_is_exact_and_each_setting_acts_on_its_own():
    nes = tile_frame(5)
    clean = forward(Profile(geometry=Geometry.centered(640, 480)), nes).astype(int)
    inside = clean.any(axis=2)

    def run(**color) -> np.ndarray:
        p = Profile(geometry=Geometry.centered(640, 480), color=Color(**color))
        return forward(p, nes).astype(int)

    limited = run(range="limited")
    assert limited.min() == 16 and limited.max() <= 235
    assert (limited[~inside] == 16).all()  # the border is limited-range black too
    np.testing.assert_allclose(limited, 16 + clean * 219 / 255, atol=0.51)

    red_gain = run(gain=(1.2, 1.0, 1.0))  # RGB order in the profile, BGR out
    np.testing.assert_array_equal(red_gain[..., :2], clean[..., :2])
    assert (red_gain[..., 2] >= clean[..., 2]).all() and (red_gain[..., 2] > clean[..., 2]).any()

    greyish = run(saturation=0.0 + 0.25)
    grey = (clean[..., 0] == clean[..., 1]) & (clean[..., 1] == clean[..., 2])
    np.testing.assert_array_equal(greyish[grey], clean[grey])  # greys keep their value
    spread = np.ptp(clean, axis=2)[~grey].mean()
    assert np.ptp(greyish, axis=2)[~grey].mean() < 0.5 * spread

    darker = run(gamma=1.5)
    assert (darker <= clean).all() and (darker[(clean > 0) & (clean < 255)] < 200).any()
    assert (darker[clean == 255] == 255).all() and (darker[clean == 0] == 0).all()

    shifted = run(offset=(0.0, 10.0, 0.0))
    np.testing.assert_array_equal(shifted[..., 1], np.minimum(clean[..., 1] + 10, 255))


def test_colour_is_undone_by_to_nes():
    nes = tile_frame(6)
    p = Profile.load("mjpeg_720p_q70").replace(artifacts=Artifacts())
    captured = forward(p, nes)
    back = to_nes(p, captured)
    vis = visible(p.geometry)
    assert np.abs(back[vis].astype(int) - nes[vis]).max() <= 3
    raw = to_nes(p, captured, color=False)
    assert np.abs(raw[vis].astype(int) - nes[vis]).max() > 10


def stripes(horizontal: bool) -> np.ndarray:
    frame = np.zeros((240, 256, 3), np.uint8)
    if horizontal:
        frame[::2] = 255
    else:
        frame[:, ::2] = 255
    return frame


def test_horizontal_smoothing_acts_along_lines_only():
    p = _single(hsmooth=1.0)
    clean = _single()
    rows = stripes(horizontal=True)
    inner = (slice(8, 472), slice(100, 500))  # away from the pillarbox edges
    np.testing.assert_array_equal(forward(p, rows)[inner], forward(clean, rows)[inner])
    cols = stripes(horizontal=False)
    soft = forward(p, cols)
    assert not np.array_equal(soft[inner], forward(clean, cols)[inner])
    assert (soft[1:] == soft[:-1]).all()  # still constant down each column: no vertical mix


def test_blur_mixes_both_ways_and_sharpen_raises_edge_contrast():
    blur = _single(blur=1.0)
    clean = _single()
    inner = (slice(8, 472), slice(100, 500))
    for horizontal in (True, False):
        frame = stripes(horizontal)
        assert not np.array_equal(forward(blur, frame)[inner], forward(clean, frame)[inner])
    tiles = tile_frame(7)
    sharp = forward(_single(sharpen=1.0), tiles).astype(int)
    base = forward(clean, tiles).astype(int)
    assert np.abs(np.diff(sharp, axis=1)).max() >= np.abs(np.diff(base, axis=1)).max()
    assert np.abs(np.diff(sharp, axis=1)).sum() > np.abs(np.diff(base, axis=1)).sum()
    flat = np.full((240, 256, 3), 120, np.uint8)
    np.testing.assert_array_equal(  # flat areas stay flat; only edges change
        forward(_single(sharpen=1.0), flat)[inner], forward(clean, flat)[inner]
    )


def test_noise_has_its_sigma_is_seeded_and_changes_per_frame():
    flat = np.full((240, 256, 3), 128, np.uint8)
    p = _single(noise=4.0)
    m1, m2 = CaptureModel(p, seed=3), CaptureModel(p, seed=3)
    a, b = m1(flat), m2(flat)
    np.testing.assert_array_equal(a, b)
    c = m1(flat)
    assert not np.array_equal(a, c)
    picture = a[20:460, 100:500].astype(float) - 128
    assert picture.std() == pytest.approx(4.0, rel=0.05)
    assert abs(picture.mean()) < 0.1
    with pytest.raises(ValueError, match="NoiseSource"):
        forward(p, flat)
    assert isinstance(m1.noise, NoiseSource)


def test_chroma_subsampling_keeps_luma_and_blurs_colour_edges():
    nes = np.full((240, 256, 3), (100, 110, 170), np.uint8)
    nes[:, 1::2] = (170, 100, 100)  # reddish/bluish columns one NES pixel wide, in gamut
    clean = forward(_single(), nes)
    sub = forward(_single(chroma="4:2:2"), nes)
    y_clean = cv2.cvtColor(clean, cv2.COLOR_BGR2YCrCb)
    y_sub = cv2.cvtColor(sub, cv2.COLOR_BGR2YCrCb)
    assert np.abs(y_sub[..., 0].astype(int) - y_clean[..., 0]).mean() < 1.0
    assert np.abs(y_sub[..., 1:].astype(int) - y_clean[..., 1:]).mean() > 5
    # Colour changing only from line to line: 4:2:2 leaves it, 4:2:0 mixes lines.
    rows = np.zeros((240, 256, 3), np.uint8)
    rows[1::2] = (60, 188, 252)
    rows[::2] = (248, 56, 0)
    inner = (slice(8, 472), slice(100, 500))
    base = forward(_single(), rows)[inner].astype(int)
    assert np.abs(forward(_single(chroma="4:2:2"), rows)[inner] - base).max() <= 2
    assert np.abs(forward(_single(chroma="4:2:0"), rows)[inner] - base).max() > 20
    grey = np.full((240, 256, 3), 90, np.uint8)
    assert np.abs(forward(_single(chroma="4:2:0"), grey).astype(int) - 90).max() <= 90  # border
    assert np.abs(forward(_single(chroma="4:2:0"), grey)[inner].astype(int) - 90).max() <= 1


def test_mjpeg_costs_more_at_lower_quality():
    nes = tile_frame(8)
    clean = forward(_single(), nes).astype(int)
    errors = [
        np.abs(forward(_single(jpeg_quality=q), nes).astype(int) - clean).mean() for q in (95, 40)
    ]
    assert 0 < errors[0] < errors[1] < 12


def test_combing_takes_odd_lines_from_the_previous_frame():
    g = Geometry.centered(640, 480)
    combed = Profile(geometry=g, artifacts=Artifacts(combing=True))
    cur, prev = tile_frame(9), tile_frame(10)
    out = forward(combed, cur, previous=prev)
    plain = Profile(geometry=g)
    np.testing.assert_array_equal(out[0::2], forward(plain, cur)[0::2])
    np.testing.assert_array_equal(out[1::2], forward(plain, prev)[1::2])
    np.testing.assert_array_equal(forward(combed, cur), forward(plain, cur))  # no previous


def test_bad_frames_are_rejected_with_the_expected_shape():
    p = Profile.load("ideal_720p_nearest")
    with pytest.raises(ValueError, match=r"uint8 \[240, 256, 3\].*got float32"):
        forward(p, np.zeros((240, 256, 3), np.float32))
    with pytest.raises(ValueError, match=r"expects a captured frame uint8 \[720, 1280, 3\]"):
        to_nes(p, np.zeros((1080, 1920, 3), np.uint8))
    with pytest.raises(ValueError, match="previous must be uint8"):
        forward(
            Profile(artifacts=Artifacts(combing=True)),
            tile_frame(),
            previous=np.zeros((240, 255, 3), np.uint8),
        )


def test_shipped_profiles_produce_their_output_size():
    nes = tile_frame(11)
    for name in ("hdmi_1080p_bilinear", "mjpeg_720p_q70", "composite_480p_combing"):
        p = Profile.load(name)
        out = CaptureModel(p, seed=0)(nes, previous=nes)
        assert out.shape == (p.geometry.height, p.geometry.width, 3)
        back = to_nes(p, out)
        vis = visible(p.geometry)
        # Degraded chains do not round-trip exactly, but the picture is still there.
        assert np.abs(back[vis].astype(int) - nes[vis]).mean() < 25, name
    assert PIXEL_ASPECT_8_7 == pytest.approx(8 / 7)
