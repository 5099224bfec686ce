"""Fit a Profile's geometry and colour from a few captured gameplay frames (``hil calibrate``).

    result = fit_profile(frames)            # frames: captured BGR uint8 [H, W, 3], same size
    result.profile                          # Profile: fitted geometry and colour
    result.geometry_residual_px, result.color_residual, result.details

**Geometry**, per axis (x, then y, independently):

1. *Edges*: the absolute luma difference between neighbouring capture pixels, summed over
   the frames and lines: ``g(u)`` for the boundary at capture coordinate ``u``. NES pixel edges
   sit at ``offset + k * scale``; nearest scaling puts each on the nearest capture boundary,
   bilinear and area scaling spread it over two, symmetric about the true position.
2. *Active area*: the capture pixels where the picture is (bright in a good share of the
   lines: a Dr. Mario level has its speed-coloured background all around); letterbox and
   pillarbox bars are dark. Its length ``E`` capture pixels holds ``N - C`` NES pixels (``N``
   256 or 240, ``C`` the overscan crop of both sides together).
3. *Scale*: for every crop ``C`` in 0..64 (and ``E`` +- 1) the candidate ``scale = E / (N -
   C)`` is scored by the comb ``|sum g(u) exp(-2 pi i u / p)| / sum g(u)`` (the share of edge
   energy on a grid of period ``p``; a wrong ``C`` drifts a pixel out of phase across the
   picture) at the pixel period and at the 8- and 16-pixel tile periods (blur weakens the
   pixel period, and a harmonic of the tile period, 8/7 of a pixel say, could outscore it
   alone). The best is refined on a fine grid around it (pixel period only). The phase of
   the comb gives the grid's offset with sub-pixel precision (every edge of the picture
   votes).
4. *Which NES pixels*: the picture's first boundary is the grid line nearest the active
   area's start; the crop ``C`` is split between the two sides by the bottle: its interior
   (NES x 96-159, y 80-207, ARCHITECTURE.md) is dark backdrop with cells in it, the 8 pixels around
   it are wall, shoulder and floor. Each split is scored by the dark share inside the
   interior's edges minus outside them (over all frames), the best wins.

``geometry_residual_px``: the RMS distance (capture pixels) between the fitted grid and the
edge positions measured near each fitted NES boundary (the gradient-weighted centroid within
half a pixel of it), over both axes. Nearest scaling at a fractional scale leaves up to half a
pixel of rounding per edge (RMS about 0.3); bilinear and area scaling a few hundredths.

**Colour**: the fitted geometry samples each frame's bottle interior (NES pixels, as
``to_nes``); its dark pixels are the backdrop (NES $0F, black) and its coloured ones
the three pill colours (NES $28 yellow, $15 red, $21 blue; k-means on hue, seeded with those
hues). The colour section (gamma, saturation, gain, offset; full or limited range) is fitted to
these four colours by damped Gauss-Newton, pulled gently towards the identity (four colours
do not pin eight numbers). ``color_residual``: RMS of the fitted colours minus the measured
ones, in code values.

Limits: needs gameplay frames (the bottle with some pills or viruses); the split of the crop
between the sides relies on the bottle's walls being brighter than the backdrop; nearest
scaling at an integer scale cannot show where inside a capture pixel the NES edge lies (any
offset in that pixel gives the same frames), and the fit returns the pixel boundary.
``interpolation`` is a guess from how sharp the edges are; the reader does not use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import cv2
import numpy as np

from calibration.color import LUMA_601
from calibration.forward import to_nes
from calibration.profile import NES_HEIGHT, NES_WIDTH, Color, Geometry, Profile

MAX_CROP = 64  # NES pixels per axis, both sides together (Geometry allows 64 per side)
COMMON_CROP = 16  # NES pixels per axis: always considered, whatever the comb says
ALIGN_MARGIN = 0.03  # correlation: hypotheses this close to the best are equally plausible
BOTTLE_X = (96, 160)  # NES pixels: the bottle interior (ARCHITECTURE.md)
BOTTLE_Y = (80, 208)
NES_BLACK, NES_YELLOW, NES_RED, NES_BLUE = 0x0F, 0x28, 0x15, 0x21


class FitError(ValueError):
    """The frames do not allow a fit (the message says why)."""


@dataclass
class AxisFit:
    """One axis: ``scale`` (capture pixels per NES pixel), ``offset`` (capture coordinate of
    the first visible NES pixel's left/top edge), ``crop`` (NES pixels cut before it) and
    ``crop_after`` (cut after the last visible one)."""

    scale: float
    offset: float
    crop: int
    crop_after: int
    comb: float  # share of the edge energy on the fitted grid (0..1)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class FitResult:
    """``profile``: the fitted Profile (geometry, colour; artifacts and timing from ``base``).
    ``geometry_residual_px``, ``color_residual``: see the module docstring. ``details``: the
    numbers behind the fit (per axis: comb scores, crop split scores; colour references)."""

    profile: Profile
    geometry_residual_px: float
    color_residual: float
    details: dict[str, Any]


def _check_frames(frames: Any) -> list[np.ndarray]:
    frames = list(frames)
    if not frames:
        raise FitError("fit_profile needs at least one captured frame")
    shape = None
    for i, f in enumerate(frames):
        if not isinstance(f, np.ndarray) or f.dtype != np.uint8 or f.ndim != 3 or f.shape[2] != 3:
            raise FitError(f"frame {i} must be a BGR uint8 [height, width, 3] array")
        if shape is not None and f.shape != shape:
            raise FitError(f"frame {i} is {list(f.shape)}, frame 0 is {list(shape)}: one size only")
        shape = f.shape
        if not 64 <= f.shape[0] <= 2160 or not 64 <= f.shape[1] <= 3840:
            raise FitError(f"frame size {f.shape[1]}x{f.shape[0]} is outside 64x64..3840x2160")
    return frames


def _comb(g: np.ndarray, pos: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Complex comb sums ``sum g exp(-2 pi i pos / scale)`` for each scale (vectorised)."""
    out = np.empty(scale.size, np.complex128)
    for i in range(0, scale.size, 64):  # bounded memory
        phase = np.exp(-2j * np.pi * pos[None, :] / scale[i : i + 64, None])
        out[i : i + 64] = phase @ g
    return out


EDGE_THRESHOLD = 8.0  # luma code values: a step smaller than this is noise or ringing
EDGE_CAP = 96.0  # cap on one edge's weight, so a few high-contrast edges do not dominate
BIN = 1.0 / 8.0  # capture pixels: resolution of the edge histogram


def edge_histogram(luma: np.ndarray, axis: int) -> np.ndarray:
    """Edges along ``axis`` (1: x, 0: y) of one frame's luma (float [H, W]) as a histogram of
    sub-pixel positions: float [n / BIN], bin b at capture coordinate (b + 0.5) * BIN.

    Per line, a run of neighbouring differences of one sign is one edge (a blended edge spans
    two capture boundaries); its position is the difference-weighted centroid, which is the
    NES edge's position for symmetric scalers (area, bilinear) and the capture boundary for
    nearest scaling.
    """
    lines = luma if axis == 1 else luma.T
    d = np.diff(lines, axis=1)
    n_lines, m = d.shape
    sgn = np.where(d > EDGE_THRESHOLD, 1, np.where(d < -EDGE_THRESHOLD, -1, 0)).astype(np.int8)
    sgn = np.concatenate([sgn, np.zeros((n_lines, 1), np.int8)], axis=1).ravel()
    mag = np.concatenate([np.abs(d), np.zeros((n_lines, 1))], axis=1).ravel()
    pos = np.tile(np.arange(1, m + 2, dtype=np.float64), n_lines)
    nz = sgn != 0
    start = nz & np.concatenate([[True], sgn[1:] != sgn[:-1]])
    run = np.cumsum(start) - 1
    runs = int(start.sum())
    weight = np.bincount(run[nz], weights=mag[nz], minlength=runs)
    centre = np.bincount(run[nz], weights=(pos * mag)[nz], minlength=runs) / np.maximum(
        weight, 1e-9
    )
    bins = np.zeros(int(np.ceil((m + 2) / BIN)))
    np.add.at(bins, (centre / BIN).astype(np.int64), np.minimum(weight, EDGE_CAP))
    return bins


def _extent(activity: np.ndarray, threshold: float = 0.15) -> tuple[int, int]:
    on = np.flatnonzero(activity > threshold)
    if on.size == 0:
        raise FitError("no picture found: every line is as dark as a letterbox bar")
    return int(on[0]), int(on[-1]) + 1


def fit_axis(hist: np.ndarray, activity: np.ndarray, n_nes: int, keep: int = 8) -> list[AxisFit]:
    """Fit one axis from its edge histogram (see :func:`edge_histogram`) and the per-pixel
    activity (float [n]: share of lines where the pixel is bright): one candidate per crop,
    for the ``keep`` strongest and every crop up to COMMON_CROP, strongest first."""
    u0, u1 = _extent(activity)
    extent = u1 - u0
    pos = (np.arange(hist.size) + 0.5) * BIN
    inside = (pos > u0 - 0.5) & (pos < u1 + 0.5) & (hist > 0)
    gi, pi = hist[inside], pos[inside]
    total = float(gi.sum())
    if total <= 0:
        raise FitError("the picture has no edges to fit (a blank frame?)")
    crops = np.arange(0, MAX_CROP + 1)
    cands, labels = [], []
    for e in (extent - 1, extent, extent + 1):
        s = e / (n_nes - crops)
        ok = (s >= 1.0) & (s <= 16.0)
        cands.append(s[ok])
        labels.append(crops[ok])
    scales = np.concatenate(cands)
    crop_of = np.concatenate(labels)
    if scales.size == 0:
        raise FitError(f"a picture {extent} capture pixels long cannot hold 192..256 NES pixels")
    # the pixel period plus the tile periods (8 and 16 NES pixels: the nametable's tiles and
    # pairs of tiles): blur weakens the pixel period, and a harmonic of the tile period
    # (8 / 7 of the pixel, say) can then outscore it alone
    coarse = np.add.reduceat(gi, np.arange(0, gi.size, 4)) if gi.size > 4 else gi
    cpos = np.add.reduceat(gi * pi, np.arange(0, gi.size, 4)) / np.maximum(coarse, 1e-9)
    strength = sum(np.abs(_comb(coarse, cpos, scales * k)) for k in (1, 8, 16)) / total
    out: list[AxisFit] = []
    order = np.argsort(-strength)
    # the strongest few, and every crop of up to COMMON_CROP pixels (the usual overscan)
    picks = [i for i in order if crop_of[i] <= COMMON_CROP] + list(order[:keep])
    for best in picks:
        crop = int(crop_of[best])
        if any(f.crop == crop for f in out):
            continue
        out.append(
            _refine(gi, pi, total, float(scales[best]), crop, n_nes, (u0, u1), activity.size)
        )
        out[-1].details["strength"] = float(strength[best])
    out.sort(key=lambda f: -f.details["strength"])
    return out


def _refine(
    gi: np.ndarray,
    pi: np.ndarray,
    total: float,
    s0: float,
    crop: int,
    n_nes: int,
    span: tuple[int, int],
    n: int,
) -> AxisFit:
    """Scale and offset for one crop hypothesis: the comb's peak near ``s0`` (within a third
    of the gap to the next crop), its phase, and the grid line that centres the picture."""
    visible = n_nes - crop
    half = s0 / visible / 3.0
    fine = np.linspace(s0 - half, s0 + half, 21)
    fs = np.abs(_comb(gi, pi, fine)) / total
    k = int(fs.argmax())
    scale = float(fine[k])
    if 0 < k < fine.size - 1:  # parabola through the peak
        a, b, c = fs[k - 1], fs[k], fs[k + 1]
        den = a - 2 * b + c
        if den < 0:
            scale += float(0.5 * (a - c) / den) * float(fine[1] - fine[0])
    z = _comb(gi, pi, np.array([scale]))[0]
    phase = float(-np.angle(z) / (2 * np.pi) * scale)  # a grid line: phase + m * scale
    # least squares on the edges near the grid lines: position = phase + k * scale
    for _ in range(3):
        idx = np.rint((pi - phase) / scale)
        near = np.abs(pi - phase - idx * scale) < 0.3 * scale
        if near.sum() < 8:
            break
        w, kk, xx = gi[near], idx[near], pi[near]
        design = np.stack([np.ones_like(kk), kk], axis=1) * np.sqrt(w)[:, None]
        sol = np.linalg.lstsq(design, xx * np.sqrt(w), rcond=None)[0]
        phase, scale = float(sol[0]), float(sol[1])
    u0, u1 = span
    m = round(((u0 + u1) / 2 - visible * scale / 2 - phase) / scale)
    offset = phase + m * scale
    if offset + visible * scale > n:  # a picture that fills the frame: keep it inside
        offset = max(0.0, offset)
        scale = min(scale, (n - offset) / visible)
    return AxisFit(
        scale=scale,
        offset=float(offset),
        crop=crop,
        crop_after=0,
        comb=float(np.abs(z) / total),
        details={"extent": [u0, u1]},
    )


# NES pixel areas (y0, y1, x0, x1) that change during a level: the bottle and its neck, the
# next pill's arc and the doctor, the score digits, the big viruses' lens, the level / speed /
# virus values (VRAM addresses of render_palChange_or_bkgOverlays, docs/RENDER.md).
DYNAMIC_AREAS = (
    (72, 208, 96, 160),
    (16, 120, 112, 224),
    (56, 96, 8, 80),
    (120, 208, 8, 80),
    (152, 160, 216, 232),
    (176, 184, 208, 232),
    (200, 208, 216, 232),
)


def _gradient(luma: np.ndarray) -> np.ndarray:
    gx = np.abs(np.diff(luma, axis=1, append=luma[:, -1:]))
    gy = np.abs(np.diff(luma, axis=0, append=luma[-1:, :]))
    return gx + gy


def expected_static(tiles: Any = None) -> tuple[list[np.ndarray], np.ndarray]:
    """The level screen's static parts as the tile set draws them: (luma edge maps float
    [240, 256], one per speed setting (the background colour changes), mask bool [240, 256]
    of the static NES pixels)."""
    import engine

    tiles = tiles or engine.TileSet.clean_room()
    maps = []
    for speed in range(3):
        rgb = engine.render_frame(engine.Game(0, speed, 0), tiles).astype(np.float64)
        maps.append(_gradient(rgb @ LUMA_601))
    mask = np.ones((NES_HEIGHT, NES_WIDTH), bool)
    for y0, y1, x0, x1 in DYNAMIC_AREAS:
        mask[y0:y1, x0:x1] = False
    return maps, mask


def align(
    frames: list[np.ndarray], fx: AxisFit, fy: AxisFit, tiles: Any = None
) -> tuple[int, int, float]:
    """Split each axis's crop between its sides: (crop_left, crop_top, correlation).

    The frames are sampled on the fitted grid (visible NES pixels only) and their luma edges
    averaged; ``cv2.matchTemplate`` (normalised correlation) finds where they sit in the tile
    set's level screen (:func:`expected_static`), over the pixels that are static for every
    split."""
    vis_w, vis_h = NES_WIDTH - fx.crop, NES_HEIGHT - fy.crop
    xs = (fx.offset + (np.arange(vis_w) + 0.5) * fx.scale - 0.5).astype(np.float32)
    ys = (fy.offset + (np.arange(vis_h) + 0.5) * fy.scale - 0.5).astype(np.float32)
    map_x = np.ascontiguousarray(np.broadcast_to(xs[None, :], (vis_h, vis_w)))
    map_y = np.ascontiguousarray(np.broadcast_to(ys[:, None], (vis_h, vis_w)))
    seen = np.zeros((vis_h, vis_w))
    for f in frames:
        nes = cv2.remap(f, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        seen += _gradient(nes.astype(np.float64) @ LUMA_601[::-1])
    maps, _ = expected_static(tiles)
    mask = np.ones((vis_h, vis_w), np.float32)
    for y0, y1, x0, x1 in DYNAMIC_AREAS:  # in template coordinates, for every split
        mask[max(0, y0 - fy.crop) : y1, max(0, x0 - fx.crop) : x1] = 0
    best = (0, 0, -2.0)
    for e in maps:
        r = cv2.matchTemplate(
            e.astype(np.float32), seen.astype(np.float32), cv2.TM_CCOEFF_NORMED, mask=mask
        )
        r = np.nan_to_num(r, nan=-2.0, posinf=-2.0, neginf=-2.0)
        ct, cl = np.unravel_index(int(r.argmax()), r.shape)
        if r[ct, cl] > best[2]:
            best = (int(cl), int(ct), float(r[ct, cl]))
    return best


def fit_geometry(
    frames: list[np.ndarray], tiles: Any = None
) -> tuple[Geometry, dict[str, Any], float]:
    """(Geometry, details, geometry residual in capture pixels) from captured frames;
    ``tiles``: the engine.TileSet the console draws with (default clean-room), for the split
    of the overscan crop between the sides (:func:`align`)."""
    h, w = frames[0].shape[:2]
    gx: np.ndarray | None = None
    gy: np.ndarray | None = None
    act_x = np.zeros(w)
    act_y = np.zeros(h)
    for f in frames:
        luma = cv2.transform(f.astype(np.float32), np.array([LUMA_601[::-1]], np.float32))
        luma = luma.reshape(f.shape[:2])
        hx, hy = edge_histogram(luma, 1), edge_histogram(luma, 0)
        gx = hx if gx is None else gx + hx
        gy = hy if gy is None else gy + hy
        m = f.max(axis=2)
        bright = m > float(np.percentile(m, 2)) + 40
        act_x += bright.mean(axis=0)
        act_y += bright.mean(axis=1)
    assert gx is not None and gy is not None
    # The comb's best crop hypotheses per axis (a blurred picture at a small scale can rank a
    # tile harmonic first); the level screen's static parts rule out the wrong ones: of the
    # hypotheses that correlate about as well as the best, the one with the best sum of comb
    # strength (relative to the strongest) and correlation wins (the correlation barely sees a
    # crop off by one, the comb does, and near-ties of the comb go to the correlation).
    xs = fit_axis(gx, act_x / len(frames), NES_WIDTH)
    ys = fit_axis(gy, act_y / len(frames), NES_HEIGHT)
    tried: list[dict[str, Any]] = []

    def choose(cands: list[AxisFit], other: AxisFit, axis: str) -> tuple[AxisFit, int, int, float]:
        rows = []
        for c in cands:
            fx, fy = (c, other) if axis == "x" else (other, c)
            cl, ct, corr = align(frames, fx, fy, tiles)
            rows.append((c, cl, ct, corr))
            tried.append(
                {
                    "axis": axis,
                    "crop": c.crop,
                    "strength": c.details["strength"],
                    "correlation": corr,
                }
            )
        top = max(r[3] for r in rows)
        strongest = max(r[0].details["strength"] for r in rows)
        eligible = [r for r in rows if r[3] >= top - ALIGN_MARGIN]
        return max(eligible, key=lambda r: r[0].details["strength"] / strongest + r[3])

    fx, _, _, _ = choose(xs, ys[0], "x")
    fy, cx, cy, corr = choose(ys, fx, "y")
    sharp = _sharpness(gx + np.pad(gy, (0, max(0, gx.size - gy.size)))[: gx.size])
    g = _geometry(w, h, fx, fy, cx, cy, "nearest" if sharp > 0.9 else "bilinear")
    residual = float(
        np.sqrt(np.mean(np.concatenate([_residuals(gx, fx), _residuals(gy, fy)]) ** 2))
    )
    details = {
        "x": {**fx.details, "scale": fx.scale, "comb": fx.comb},
        "y": {**fy.details, "scale": fy.scale, "comb": fy.comb},
        "alignment_correlation": corr,
        "hypotheses": tried,
        "edge_sharpness": sharp,
    }
    return g, details, residual


def _residuals(hist: np.ndarray, fit: AxisFit) -> np.ndarray:
    """Distance from each fitted NES boundary to the centroid of the edges within half a NES
    pixel (at most one capture pixel) of it; boundaries with few edges are skipped."""
    pos = (np.arange(hist.size) + 0.5) * BIN
    n = int(round((pos[-1] - fit.offset) / fit.scale))
    bounds = fit.offset + np.arange(0, n + 1) * fit.scale
    reach = min(1.0, fit.scale / 2)
    nearest = np.rint((pos - fit.offset) / fit.scale)
    dist = pos - (fit.offset + nearest * fit.scale)
    use = (np.abs(dist) <= reach) & (hist > 0) & (nearest >= 0) & (nearest <= n)
    k = nearest[use].astype(np.int64)
    w = np.bincount(k, weights=hist[use], minlength=bounds.size)
    c = np.bincount(k, weights=(hist * dist)[use], minlength=bounds.size)
    strong = w > max(float(np.percentile(w[w > 0], 25)) if (w > 0).any() else 0.0, 1e-9)
    return c[strong] / w[strong] if strong.any() else np.zeros(1)


def _sharpness(hist: np.ndarray) -> float:
    """Share of the edge weight at whole capture-pixel positions (nearest scaling puts every
    edge there; bilinear and area scaling put blended edges in between)."""
    pos = (np.arange(hist.size) + 0.5) * BIN
    on_grid = np.abs(pos - np.rint(pos)) <= BIN
    total = float(hist.sum())
    return float(hist[on_grid].sum()) / total if total > 0 else 1.0


def _geometry(w: int, h: int, fx: AxisFit, fy: AxisFit, cx: int, cy: int, interp: str) -> Geometry:
    crop_right = fx.crop - cx
    crop_bottom = fy.crop - cy
    sx, sy = fx.scale, fy.scale
    ox, oy = fx.offset, fy.offset
    # keep the picture inside the frame (rounding of a picture that fills it exactly)
    ox = min(max(ox, 0.0), w - (NES_WIDTH - fx.crop) * sx)
    oy = min(max(oy, 0.0), h - (NES_HEIGHT - fy.crop) * sy)
    if ox < -0.5 or oy < -0.5:
        raise FitError("the fitted picture does not fit in the frame")
    return Geometry(
        width=w,
        height=h,
        scale_x=sx,
        scale_y=sy,
        offset_x=max(0.0, ox),
        offset_y=max(0.0, oy),
        crop_top=cy,
        crop_bottom=crop_bottom,
        crop_left=cx,
        crop_right=crop_right,
        interpolation=interp,
    )


# --- colour ---


def forward_color(c: Color, rgb: np.ndarray) -> np.ndarray:
    """The colour section in float: RGB code values [..., 3] -> RGB code values (unclipped)."""
    v = 255.0 * (np.clip(rgb, 0, 255) / 255.0) ** c.gamma
    s = c.saturation
    luma = v @ LUMA_601
    v = luma[..., None] + s * (v - luma[..., None])
    v = v * np.asarray(c.gain) + np.asarray(c.offset)
    if c.range == "limited":
        v = 16.0 + v * (219.0 / 255.0)
    return v


def _color_from(theta: np.ndarray, rng: str) -> Color:
    t = theta
    return Color(
        range=rng,
        gamma=float(np.clip(t[0], 0.5, 2.5)),
        saturation=float(np.clip(t[1], 0.25, 2.0)),
        gain=tuple(float(v) for v in np.clip(t[2:5], 0.5, 1.5)),  # type: ignore[arg-type]
        offset=tuple(float(v) for v in np.clip(t[5:8], -32.0, 32.0)),  # type: ignore[arg-type]
    )


def _fit_color_section(nes: np.ndarray, seen: np.ndarray, rng: str) -> tuple[Color, float]:
    """Damped Gauss-Newton on (gamma, saturation, gain[3], offset[3]) for one range."""
    theta = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    prior = theta.copy()
    reg = np.array([20.0, 20.0, 20.0, 20.0, 20.0, 0.2, 0.2, 0.2])  # code values per unit

    def resid(t: np.ndarray) -> np.ndarray:
        c = _color_from(t, rng)
        return np.concatenate([(forward_color(c, nes) - seen).ravel(), reg * (t - prior)])

    lam = 1e-2
    r = resid(theta)
    for _ in range(60):
        jac = np.empty((r.size, theta.size))
        for i in range(theta.size):
            d = np.zeros_like(theta)
            d[i] = 1e-4
            jac[:, i] = (resid(theta + d) - r) / 1e-4
        a = jac.T @ jac + lam * np.eye(theta.size)
        step = np.linalg.solve(a, -jac.T @ r)
        trial = theta + step
        rt = resid(trial)
        if rt @ rt < r @ r:
            theta, r, lam = trial, rt, lam * 0.3
        else:
            lam *= 10.0
        if np.abs(step).max() < 1e-6:
            break
    c = _color_from(theta, rng)
    err = float(np.sqrt(np.mean((forward_color(c, nes) - seen) ** 2)))
    return c, err


def color_references(frames: list[np.ndarray], g: Geometry) -> tuple[np.ndarray, np.ndarray]:
    """(NES RGB [k, 3], measured RGB [k, 3]) of the backdrop and the pill colours found in the
    bottle interior: the median of the pixels inside each area of one colour (a 3x3 erosion
    keeps the blur and ringing at tile edges out). Raises FitError when the bottle shows too
    few coloured cells."""
    import engine

    probe = Profile(geometry=g)
    crops = []
    for f in frames:
        nes = to_nes(probe, f, color=False)
        crops.append(nes[BOTTLE_Y[0] : BOTTLE_Y[1], BOTTLE_X[0] : BOTTLE_X[1]])
    stack = np.stack(crops)  # [n, 128, 64, 3] RGB
    p = stack.reshape(-1, 3).astype(np.float64)
    bright = p.max(axis=1)
    black_level = float(np.percentile(bright, 5))
    hsv = cv2.cvtColor(stack.reshape(-1, 1, 3), cv2.COLOR_RGB2HSV).reshape(-1, 3)
    colourful = (hsv[:, 1] > 90) & (bright > black_level + 60)
    if colourful.sum() < 30:
        raise FitError("the bottle shows too few coloured cells to fit colour")
    pal = engine.NES_PALETTE.astype(np.float64)
    refs = [NES_YELLOW, NES_RED, NES_BLUE]
    ref_hue = cv2.cvtColor(pal[refs].astype(np.uint8)[None], cv2.COLOR_RGB2HSV)[0][:, 0]
    centres = ref_hue.astype(np.float64)
    ch = hsv[colourful, 0].astype(np.float64)
    for _ in range(10):  # k-means on the hue circle (OpenCV hue: 0..180)
        d = np.abs(ch[:, None] - centres[None, :])
        lab = np.minimum(d, 180 - d).argmin(axis=1)
        for k in range(3):
            if (lab == k).any():
                ang = ch[lab == k] / 180.0 * 2 * np.pi
                centres[k] = np.angle(np.exp(1j * ang).mean()) / (2 * np.pi) * 180.0 % 180.0
    flat = np.full(p.shape[0], -1)
    flat[bright < black_level + 24] = 3
    flat[np.flatnonzero(colourful)] = lab
    label = flat.reshape(stack.shape[:3])
    kernel = np.ones((3, 3), np.uint8)
    nes_ref, seen = [], []
    for k, code in ((3, NES_BLACK), (0, NES_YELLOW), (1, NES_RED), (2, NES_BLUE)):
        inner = np.stack(
            [cv2.erode((lab_f == k).astype(np.uint8), kernel).astype(bool) for lab_f in label]
        )
        members = stack[inner].astype(np.float64)
        if members.shape[0] >= 10:
            nes_ref.append(pal[code])
            seen.append(np.median(members, axis=0))
        elif code == NES_BLACK:
            raise FitError("the bottle shows too little backdrop to fit colour")
    return np.asarray(nes_ref), np.asarray(seen)


def fit_color(frames: list[np.ndarray], g: Geometry) -> tuple[Color, float, dict[str, Any]]:
    """(Color, RMS residual in code values, details) for frames with geometry ``g``."""
    nes, seen = color_references(frames, g)
    fits = {rng: _fit_color_section(nes, seen, rng) for rng in ("full", "limited")}
    black = float(seen[0].mean())
    rng = "limited" if black >= 10.0 else "full"
    color, err = fits[rng]
    details = {
        "references_nes_rgb": nes.round(1).tolist(),
        "references_seen_rgb": seen.round(1).tolist(),
        "black_level": black,
        "residual_full": fits["full"][1],
        "residual_limited": fits["limited"][1],
    }
    return color, err, details


def fit_profile(
    frames: Any, name: str = "fitted", base: Profile | None = None, tiles: Any = None
) -> FitResult:
    """Fit geometry and colour from captured gameplay frames (BGR uint8 [H, W, 3], one size;
    a few frames from different moments of a level are best).

    ``base``: the artifacts and timing to keep (default: the ideal chain's). Raises FitError
    (a ValueError) when the frames do not show a Dr. Mario level the fit can measure.
    """
    frames = _check_frames(frames)
    g, gdetails, gres = fit_geometry(frames, tiles)
    color, cres, cdetails = fit_color(frames, g)
    base = base or Profile()
    profile = replace(
        base,
        name=name,
        description=(
            f"fitted by calibration.fit from {len(frames)} frames: geometry residual "
            f"{gres:.3f} capture px, colour residual {cres:.2f} code values"
        ),
        geometry=g,
        color=color,
    )
    return FitResult(profile, gres, cres, {"geometry": gdetails, "color": cdetails})


def draw_fit(frame: np.ndarray, profile: Profile, text: str = "") -> np.ndarray:
    """A copy of captured BGR ``frame`` with the fitted geometry drawn over it: the visible NES
    picture's outline (green), the bottle's 8 x 16 cell grid (yellow) and ``text``."""
    g = profile.geometry
    out = frame.copy()
    shift = 4  # cv2 drawing with 1/16-pixel coordinates

    def pt(nes_x: float, nes_y: float) -> tuple[int, int]:
        x = g.offset_x + (nes_x - g.crop_left) * g.scale_x
        y = g.offset_y + (nes_y - g.crop_top) * g.scale_y
        return int(round(x * 16)), int(round(y * 16))

    x0, x1 = g.crop_left, NES_WIDTH - g.crop_right
    y0, y1 = g.crop_top, NES_HEIGHT - g.crop_bottom
    cv2.rectangle(out, pt(x0, y0), pt(x1, y1), (0, 255, 0), 1, cv2.LINE_AA, shift)
    for c in range(9):
        x = BOTTLE_X[0] + 8 * c
        cv2.line(out, pt(x, BOTTLE_Y[0]), pt(x, BOTTLE_Y[1]), (0, 255, 255), 1, cv2.LINE_AA, shift)
    for r in range(17):
        y = BOTTLE_Y[0] + 8 * r
        cv2.line(out, pt(BOTTLE_X[0], y), pt(BOTTLE_X[1], y), (0, 255, 255), 1, cv2.LINE_AA, shift)
    size = min(0.6, max(0.3, g.width / 2000))
    for i, line in enumerate(text.splitlines()):
        org = (6, int(14 + 40 * size * i))
        cv2.putText(out, line, org, cv2.FONT_HERSHEY_SIMPLEX, size, (0, 0, 0), 3, cv2.LINE_AA)
        cv2.putText(out, line, org, cv2.FONT_HERSHEY_SIMPLEX, size, (255, 255, 255), 1, cv2.LINE_AA)
    return out


def boundary_error(fit: Geometry, true: Geometry) -> float:
    """Largest distance (capture pixels) between the fitted and true NES pixel boundaries, over
    the NES pixels the true chain shows. Nearest scaling shows a boundary only as the capture
    boundary it rounds to, so there any position within half a pixel of that one is exact."""
    worst = 0.0
    for axis in ("x", "y"):
        if axis == "x":
            n, first, last = NES_WIDTH, true.crop_left, NES_WIDTH - true.crop_right
            st, sf, ot, of, cf = (
                true.scale_x,
                fit.scale_x,
                true.offset_x,
                fit.offset_x,
                fit.crop_left,
            )
        else:
            n, first, last = NES_HEIGHT, true.crop_top, NES_HEIGHT - true.crop_bottom
            st, sf, ot, of, cf = (
                true.scale_y,
                fit.scale_y,
                true.offset_y,
                fit.offset_y,
                fit.crop_top,
            )
        k = np.arange(first, min(last, n) + 1)
        b_true = ot + (k - first) * st
        b_fit = of + (k - cf) * sf
        if true.interpolation == "nearest":
            d = np.maximum(0.0, np.abs(b_fit - np.ceil(b_true - 0.5)) - 0.5)
        else:
            d = np.abs(b_fit - b_true)
        worst = max(worst, float(d.max()))
    return worst


def _gameplay(frames: int, seed: int) -> list[np.ndarray]:
    """NES pictures of a level in play, 150 frames apart (random presses, clean-room tiles)."""
    import engine

    rng = np.random.default_rng(seed)
    g = engine.Game(10 + seed % 8, seed % 3, 0x1000 + 2 * seed)
    out: list[np.ndarray] = []
    for f in range(1, 6000):
        g.step(int(rng.choice([0, 0, 1, 2, 4, 0x80])) if f % 3 == 0 else 0)
        if f % 150 == 0:
            out.append(engine.render_frame(g))
        if len(out) == frames:
            break
    return out


def sweep(profiles: int, frames: int = 5) -> dict[str, Any]:
    """Fit ``Profile.random`` chains (seeds [555, k]) and the shipped profiles from simulated
    gameplay; the boundary error (:func:`boundary_error`) of each, and summary statistics."""
    from calibration.forward import NoiseSource, forward
    from calibration.profile import builtin_profiles

    cases = [
        (f"random_{k}", Profile.random(np.random.default_rng([555, k]))) for k in range(profiles)
    ]
    cases += [(name, Profile.load(name)) for name in builtin_profiles()]
    rows = []
    for i, (name, p) in enumerate(cases):
        noise = NoiseSource(i)
        shots = [forward(p, pic, None, noise) for pic in _gameplay(frames, i)]
        result = fit_profile(shots)
        rows.append(
            {
                "profile": name,
                "size": f"{p.geometry.width}x{p.geometry.height}",
                "interpolation": p.geometry.interpolation,
                "boundary_error_px": round(boundary_error(result.profile.geometry, p.geometry), 4),
                "geometry_residual_px": round(result.geometry_residual_px, 4),
                "color_residual": round(result.color_residual, 3),
            }
        )
    errors = np.array([r["boundary_error_px"] for r in rows])
    return {
        "fits": len(rows),
        "frames_per_fit": frames,
        "max_boundary_error_px": float(errors.max()),
        "median_boundary_error_px": float(np.median(errors)),
        "within_0.25_px": int((errors <= 0.25).sum()),
        "rows": rows,
    }


if __name__ == "__main__":
    import argparse
    import json

    parser = argparse.ArgumentParser(
        prog="python -m calibration.fit",
        description="Fit simulated captures of random and shipped profiles; print JSON errors.",
    )
    parser.add_argument("--sweep", type=int, default=40, help="random profiles (40)")
    parser.add_argument("--frames", type=int, default=5, help="frames per fit (5)")
    args = parser.parse_args()
    print(json.dumps(sweep(args.sweep, args.frames), indent=1))
