"""The colour section as tables: a gamma LUT and one affine 3x4 matrix, forward and inverse.

Forward, on RGB code values: ``x -> gamma LUT -> A @ x + b`` where the affine part is
saturation (BT.601 luma weights), then gain and offset, then the limited-range squeeze
(``16 + v * 219 / 255``). The matrix's rows are permuted to emit BGR, so one ``cv2.transform``
does the colour and the channel order. The inverse undoes the affine part then the gamma.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from calibration.profile import Color

LUMA_601 = np.array([0.299, 0.587, 0.114])  # BT.601 luma weights (R, G, B)
_RGB_TO_BGR = np.array([[0, 0, 1], [0, 1, 0], [1, 0, 0]], dtype=np.float64)


@dataclass(frozen=True)
class ColorTables:
    """``lut``: uint8 [256] gamma table, or None when gamma is 1. ``rgb_to_bgr``: float32 [3, 4]
    affine (RGB in, BGR out), or None when it is only the channel swap. ``inverse_lut`` and
    ``bgr_to_rgb`` undo them (BGR in, RGB out)."""

    lut: np.ndarray | None
    rgb_to_bgr: np.ndarray | None
    inverse_lut: np.ndarray | None
    bgr_to_rgb: np.ndarray | None


def _affine(c: Color) -> tuple[np.ndarray, np.ndarray]:
    """A [3, 3], b [3] on RGB: saturation, then gain and offset, then range."""
    s = c.saturation
    sat = s * np.eye(3) + (1.0 - s) * np.outer(np.ones(3), LUMA_601)
    a = np.diag(c.gain) @ sat
    b = np.array(c.offset, dtype=np.float64)
    if c.range == "limited":
        a, b = a * (219.0 / 255.0), b * (219.0 / 255.0) + 16.0
    return a, b


@lru_cache(maxsize=64)
def color_tables(c: Color) -> ColorTables:
    """Tables for colour section ``c`` (cached per section)."""
    v = np.arange(256, dtype=np.float64) / 255.0
    lut = inv_lut = None
    if c.gamma != 1.0:
        lut = np.clip(np.rint(255.0 * v**c.gamma), 0, 255).astype(np.uint8)
        inv_lut = np.clip(np.rint(255.0 * v ** (1.0 / c.gamma)), 0, 255).astype(np.uint8)
    a, b = _affine(c)
    fwd = inv = None
    if not (np.allclose(a, np.eye(3)) and np.allclose(b, 0.0)):
        fwd = np.hstack([_RGB_TO_BGR @ a, (_RGB_TO_BGR @ b)[:, None]]).astype(np.float32)
        a_inv = np.linalg.inv(a)
        # x = A^-1 (y - b), with y arriving as BGR: columns permuted back to RGB.
        inv = np.hstack([a_inv @ _RGB_TO_BGR, (-a_inv @ b)[:, None]]).astype(np.float32)
    return ColorTables(lut=lut, rgb_to_bgr=fwd, inverse_lut=inv_lut, bgr_to_rgb=inv)


def apply_color(c: Color, rgb: np.ndarray) -> np.ndarray:
    """Forward colour: uint8 RGB [H, W, 3] -> uint8 BGR [H, W, 3] (rounded, saturated)."""
    t = color_tables(c)
    x = cv2.LUT(rgb, t.lut) if t.lut is not None else rgb
    if t.rgb_to_bgr is None:
        return cv2.cvtColor(x, cv2.COLOR_RGB2BGR)
    return cv2.transform(x, t.rgb_to_bgr)


def undo_color(c: Color, bgr: np.ndarray) -> np.ndarray:
    """Inverse colour: uint8 BGR [H, W, 3] -> uint8 RGB [H, W, 3] (approximate: rounding)."""
    t = color_tables(c)
    if t.bgr_to_rgb is None:
        x = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    else:
        x = cv2.transform(bgr, t.bgr_to_rgb)
    return cv2.LUT(x, t.inverse_lut) if t.inverse_lut is not None else x


def border_bgr(c: Color) -> tuple[float, float, float]:
    """The border (letterbox black) after the colour section, as BGR code values."""
    black = np.zeros((1, 1, 3), dtype=np.uint8)
    b, g, r = (float(v) for v in apply_color(c, black)[0, 0])
    return (b, g, r)
