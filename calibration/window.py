"""The forward model on a window of the captured frame: only the capture pixels a reader needs.

Perception training renders hundreds of thousands of captured frames but reads a small part of
each (the bottle and the next pill). ``forward_window`` produces the capture pixels in
``[x0, x1) x [y0, y1)`` exactly as ``calibration.forward`` would, for a fraction of the cost:
the scaler's taps are those of the full frame shifted by the window's origin, and the artifacts
run on the window only. Equal to ``forward(...)[y0:y1, x0:x1]`` everywhere for geometry and
colour; the filters (hsmooth, blur, sharpen, chroma upsampling) see replicated edges instead of
the neighbours outside, and JPEG blocks are the full frame's when ``x0`` and ``y0`` are
multiples of 16 (an MCU), so with artifacts the two agree except within a few pixels (filters)
or one 16-pixel block row (JPEG chroma) of the window's edges: keep a margin.
"""

from __future__ import annotations

import cv2
import numpy as np

from calibration.color import apply_color, border_bgr
from calibration.forward import NoiseSource, check_nes_frame, degrade
from calibration.geometry import axis_taps, resample
from calibration.profile import NES_HEIGHT, NES_WIDTH, Profile

MCU = 16  # JPEG 4:2:0 minimum coded unit, capture pixels


def aligned_window(
    profile: Profile, x0: float, y0: float, x1: float, y1: float
) -> tuple[int, int, int, int]:
    """The window (x0, y0, x1, y1) in capture pixels covering the given span, its origin
    rounded down to a multiple of 16 and its end up, clipped to the frame."""
    g = profile.geometry
    ax0 = max(0, int(np.floor(x0 / MCU)) * MCU)
    ay0 = max(0, int(np.floor(y0 / MCU)) * MCU)
    ax1 = min(g.width, int(np.ceil(x1 / MCU)) * MCU)
    ay1 = min(g.height, int(np.ceil(y1 / MCU)) * MCU)
    if ax1 <= ax0 or ay1 <= ay0:
        raise ValueError(
            f"window {x0:g},{y0:g}..{x1:g},{y1:g} is outside the {g.width}x{g.height} frame"
        )
    return ax0, ay0, ax1, ay1


def forward_window(
    profile: Profile,
    frame: np.ndarray,
    window: tuple[int, int, int, int],
    previous: np.ndarray | None = None,
    noise: NoiseSource | None = None,
) -> np.ndarray:
    """Captured BGR uint8 [y1 - y0, x1 - x0, 3]: capture pixels ``window`` = (x0, y0, x1, y1)
    of ``forward(profile, frame, previous, noise)``.

    ``frame``, ``previous``: NES RGB uint8 [240, 256, 3]. With combing, ``y0`` must be even
    (the odd capture lines are the previous frame's). Raises ValueError for a window outside
    the frame or an odd ``y0`` with combing, and as ``forward`` does.
    """
    g, a = profile.geometry, profile.artifacts
    x0, y0, x1, y1 = (int(v) for v in window)
    if not (0 <= x0 < x1 <= g.width and 0 <= y0 < y1 <= g.height):
        raise ValueError(f"window {window} is not inside the {g.width}x{g.height} frame")
    if a.combing and y0 % 2:
        raise ValueError(f"with combing the window must start on an even line, got y0 = {y0}")
    frame = check_nes_frame("frame", frame)
    tx = axis_taps(x1 - x0, g.crop_width, g.offset_x - x0, g.scale_x, g.interpolation)
    ty = axis_taps(y1 - y0, g.crop_height, g.offset_y - y0, g.scale_y, g.interpolation)
    border = border_bgr(profile.color)

    def rows(nes_rgb: np.ndarray) -> np.ndarray:
        bgr = apply_color(profile.color, nes_rgb)
        src = bgr[g.crop_top : NES_HEIGHT - g.crop_bottom, g.crop_left : NES_WIDTH - g.crop_right]
        src = cv2.copyMakeBorder(src, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=border)
        return resample(src, tx, axis=1)

    if a.combing:
        prev = frame if previous is None else check_nes_frame("previous", previous)
        stacked = np.concatenate([rows(frame), rows(prev)])
        out = resample(stacked, ty.with_source_offset(g.crop_height + 2), axis=0)
    else:
        out = resample(rows(frame), ty, axis=0)
    if a.is_identity:
        return out
    return degrade(a, out, noise)
