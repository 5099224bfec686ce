"""Geometry: NES pixels to capture pixels and back, as per-axis taps computed once per Geometry.

Coordinates: pixel (i, j) covers [j, j+1) x [i, i+1) in both NES and capture pixels. Capture x
maps to the cropped NES picture's x as ``(x - offset_x) / scale_x`` (likewise y).

Forward (NES -> capture). The scaling is separable, and with a scale of at least 1 every
interpolation reads at most two source pixels per axis, ``i0`` and ``i1``, mixed with weight
``w`` on ``i1``:

- nearest: the NES pixel under the capture pixel's centre (``w = 0``: exact copies);
- bilinear: linear between the two NES pixel centres around the capture pixel's centre (clamped
  at the picture's edges, which are not blended with the border);
- area: the NES pixels the capture pixel overlaps, weighted by the overlap; at the picture's
  edges the overlap with the border counts.

Capture pixels whose centre (nearest, bilinear) or whole area (area) lies outside the picture are
border. Weights are quantised to 1/64, as a fixed-point scaler does; the rows (or columns) that
share a weight are mixed with one ``cv2.addWeighted``, the rest are copies, so a 1080p frame costs
two gathers and a few dozen small blends.

Inverse (capture -> NES). Each NES pixel takes the capture pixel nearest its centre or, when
that one mixes in a neighbour and one beside it does not, the pure one beside it. So nearest
(scale >= 1) and area (scale >= 2) round-trip exactly; bilinear does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from calibration.profile import NES_HEIGHT, NES_WIDTH, Geometry

WEIGHT_STEPS = 64  # weights are multiples of 1/64


@dataclass(frozen=True)
class AxisTaps:
    """Two-tap sampling along one axis into a source bordered by one pixel on each side.

    ``i0``, ``i1``: intp [n_out], indices into the bordered source (0 and n_src + 1 are the
    border). ``q``: int [n_out], weight of ``i1`` in 1/64. ``groups``: (q, output indices) for
    every q > 0 that occurs.
    """

    i0: np.ndarray
    i1: np.ndarray
    q: np.ndarray
    groups: tuple[tuple[int, np.ndarray], ...]

    def with_source_offset(self, odd_offset: int) -> AxisTaps:
        """Taps whose odd outputs read a second source stacked ``odd_offset`` rows later."""
        shift = np.zeros_like(self.i0)
        shift[1::2] = odd_offset
        return _make_taps(self.i0 + shift, self.i1 + shift, self.q)


def _make_taps(i0: np.ndarray, i1: np.ndarray, q: np.ndarray) -> AxisTaps:
    groups = tuple((int(v), np.flatnonzero(q == v)) for v in np.unique(q) if v > 0)
    return AxisTaps(i0=i0, i1=i1, q=q, groups=groups)


def axis_taps(n_out: int, n_src: int, offset: float, scale: float, interpolation: str) -> AxisTaps:
    """Taps for ``n_out`` capture pixels over ``n_src`` NES pixels (see the module docstring)."""
    u = np.arange(n_out, dtype=np.float64)
    centre = (u + 0.5 - offset) / scale  # continuous NES coordinate of the pixel centre
    if interpolation == "nearest":
        inside = (centre >= 0.0) & (centre < n_src)
        lo = np.floor(centre)
        w = np.zeros(n_out)
    elif interpolation == "bilinear":
        inside = (centre >= 0.0) & (centre < n_src)
        pos = np.clip(centre - 0.5, 0.0, n_src - 1.0)
        lo = np.floor(pos)
        w = pos - lo
    elif interpolation == "area":
        a = (u - offset) / scale
        b = (u + 1.0 - offset) / scale
        inside = (b > 0.0) & (a < n_src)
        lo = np.floor(a)
        w = np.clip(b - (lo + 1.0), 0.0, None) / (b - a)
    else:
        raise ValueError(f"interpolation must be nearest, bilinear or area, got {interpolation!r}")
    q = np.rint(w * WEIGHT_STEPS).astype(np.int64)
    i0 = lo.astype(np.int64) + 1  # +1: index 0 of the bordered source is the border
    i0 = np.where(q == WEIGHT_STEPS, i0 + 1, i0)
    q = np.where(q == WEIGHT_STEPS, 0, q)
    i0 = np.clip(np.where(inside, i0, 0), 0, n_src + 1)
    i1 = np.clip(i0 + 1, 0, n_src + 1)
    q = np.where(inside, q, 0)
    return _make_taps(i0.astype(np.intp), i1.astype(np.intp), q)


def resample(src: np.ndarray, taps: AxisTaps, axis: int) -> np.ndarray:
    """Apply ``taps`` along ``axis`` (0 rows, 1 columns) of uint8 ``src`` [..., 3]."""
    out = np.take(src, taps.i0, axis=axis)
    for q, idx in taps.groups:
        a = np.take(src, taps.i0[idx], axis=axis)
        b = np.take(src, taps.i1[idx], axis=axis)
        mixed = cv2.addWeighted(a, 1.0 - q / WEIGHT_STEPS, b, q / WEIGHT_STEPS, 0.0)
        if axis == 0:
            out[idx] = mixed
        else:
            out[:, idx] = mixed
    return out


@dataclass(frozen=True)
class ForwardTaps:
    """Per-axis taps of a geometry; ``y_combed`` reads odd lines from a second stacked frame."""

    x: AxisTaps
    y: AxisTaps
    y_combed: AxisTaps


@lru_cache(maxsize=32)
def forward_taps(g: Geometry) -> ForwardTaps:
    """The forward sampling for geometry ``g`` (cached per geometry)."""
    x = axis_taps(g.width, g.crop_width, g.offset_x, g.scale_x, g.interpolation)
    y = axis_taps(g.height, g.crop_height, g.offset_y, g.scale_y, g.interpolation)
    return ForwardTaps(x=x, y=y, y_combed=y.with_source_offset(g.crop_height + 2))


def scale_frame(
    g: Geometry,
    bgr: np.ndarray,
    border: tuple[float, float, float],
    previous: np.ndarray | None = None,
) -> np.ndarray:
    """Crop and scale uint8 [240, 256, 3] ``bgr`` into uint8 [height, width, 3].

    ``border``: the border colour (BGR). ``previous``: when given, the odd output lines come from
    it (interlace combing).
    """
    t = forward_taps(g)

    def rows(frame: np.ndarray) -> np.ndarray:
        src = frame[g.crop_top : NES_HEIGHT - g.crop_bottom, g.crop_left : NES_WIDTH - g.crop_right]
        src = cv2.copyMakeBorder(src, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=border)
        return resample(src, t.x, axis=1)  # [crop_height + 2, width, 3]

    if previous is None:
        return resample(rows(bgr), t.y, axis=0)
    return resample(np.concatenate([rows(bgr), rows(previous)]), t.y_combed, axis=0)


@dataclass(frozen=True)
class InverseMaps:
    """Capture pixel (row, column) sampled for each NES pixel; -1 where the crop removed it."""

    rows: np.ndarray  # int64 [240]
    cols: np.ndarray  # int64 [256]
    map_x: np.ndarray  # float32 [240, 256] for cv2.remap (INTER_NEAREST)
    map_y: np.ndarray  # float32 [240, 256]

    @property
    def visible(self) -> np.ndarray:
        """bool [240, 256]: NES pixels that reach the capture (not cropped)."""
        return (self.rows[:, None] >= 0) & (self.cols[None, :] >= 0)


def _pick(n_src: int, n_out: int, offset: float, scale: float, t: AxisTaps) -> np.ndarray:
    j = np.arange(n_src)
    near = np.clip(np.floor(offset + (j + 0.5) * scale).astype(np.int64), 0, n_out - 1)

    def pure(u: np.ndarray) -> np.ndarray:
        return (t.q[u] == 0) & (t.i0[u] == j + 1)

    best = near
    for step in (-1, 1):
        cand = np.clip(near + step, 0, n_out - 1)
        best = np.where(~pure(best) & pure(cand), cand, best)
    return best


@lru_cache(maxsize=32)
def inverse_maps(g: Geometry) -> InverseMaps:
    """Which capture pixel each NES pixel centre lands on, for geometry ``g`` (cached)."""
    t = forward_taps(g)
    cols = np.full(NES_WIDTH, -1, dtype=np.int64)
    rows = np.full(NES_HEIGHT, -1, dtype=np.int64)
    cols[g.crop_left : NES_WIDTH - g.crop_right] = _pick(
        g.crop_width, g.width, g.offset_x, g.scale_x, t.x
    )
    rows[g.crop_top : NES_HEIGHT - g.crop_bottom] = _pick(
        g.crop_height, g.height, g.offset_y, g.scale_y, t.y
    )
    # A cropped pixel reads far outside the frame: the remap's constant border (0).
    map_x = np.where(cols >= 0, cols, -16).astype(np.float32)
    map_y = np.where(rows >= 0, rows, -16).astype(np.float32)
    return InverseMaps(
        rows=rows,
        cols=cols,
        map_x=np.ascontiguousarray(np.broadcast_to(map_x[None, :], (NES_HEIGHT, NES_WIDTH))),
        map_y=np.ascontiguousarray(np.broadcast_to(map_y[:, None], (NES_HEIGHT, NES_WIDTH))),
    )
