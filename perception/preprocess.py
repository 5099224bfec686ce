"""Captured frame -> the model's input: the NES crop (perception.layout) as RGB uint8.

Only the crop is sampled, straight from the captured frame with one ``cv2.remap``: each NES
pixel of the crop takes one bilinear sample at its centre, mapped to capture pixels with the
Profile's geometry (fixed-point maps built once per profile). The colour section of the
Profile is then undone (calibration.color.undo_color: BGR in, RGB out).

Why one sample at the centre: averaging 2 x 2 sub-pixel samples (tried) costs 4x the remap
and reads closer to the NES pixel's edges, where bilinear and area scalers blend in the
neighbour: on the shipped profiles it was further from the NES picture, not closer. The
model sees the neighbourhood anyway and averages noise itself.

Interlace combing: the odd capture lines show the previous console frame, so with
``artifacts.combing`` every NES line is read from the even capture line nearest its centre
(no vertical mixing), which shows the current frame.

NES pixels cut by the overscan crop read 0 (black).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from calibration import Color, Geometry, Profile
from calibration.color import undo_color
from perception.layout import CROP_H, CROP_W, CROP_X, CROP_Y

OUTSIDE = -16.0  # a map value far outside any frame: the remap's constant border (0)


@dataclass(frozen=True)
class Placement:
    """The geometry numbers the sampling needs (capture pixels; see calibration.Geometry).

    Separate from Geometry so training can jitter them without Geometry's validation.
    """

    scale_x: float
    scale_y: float
    offset_x: float
    offset_y: float
    crop_left: int = 0
    crop_top: int = 0
    crop_right: int = 0
    crop_bottom: int = 0

    @classmethod
    def of(cls, g: Geometry) -> Placement:
        return cls(
            g.scale_x,
            g.scale_y,
            g.offset_x,
            g.offset_y,
            g.crop_left,
            g.crop_top,
            g.crop_right,
            g.crop_bottom,
        )

    def capture_x(self, nes_x: np.ndarray) -> np.ndarray:
        """Continuous capture x of continuous NES x (uncropped NES coordinates)."""
        return self.offset_x + (nes_x - self.crop_left) * self.scale_x

    def capture_y(self, nes_y: np.ndarray) -> np.ndarray:
        return self.offset_y + (nes_y - self.crop_top) * self.scale_y

    def crop_bounds(
        self, margin: float = 0.0, view_x: int = CROP_X
    ) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) capture pixels spanned by the model's crop, widened by ``margin``;
        ``view_x``: the crop's left edge in NES pixels (perception.layout.VIEW_X)."""
        x0, x1 = self.capture_x(np.array([view_x, view_x + CROP_W], np.float64))
        y0, y1 = self.capture_y(np.array([CROP_Y, CROP_Y + CROP_H], np.float64))
        return float(x0) - margin, float(y0) - margin, float(x1) + margin, float(y1) + margin


def sample_maps(
    place: Placement,
    combing: bool = False,
    origin: tuple[int, int] = (0, 0),
    view_x: int = CROP_X,
) -> tuple[np.ndarray, np.ndarray]:
    """float32 remap maps [208, 144]: the capture x and y of each crop pixel's centre.

    ``origin``: capture pixel (x, y) of the array the maps will read (a window of the frame);
    it must be even in y when ``combing`` (ValueError otherwise). ``view_x``: the crop's left
    edge in NES pixels (perception.layout.VIEW_X: 88 for one player, 24 / 152 for the two
    players' bottles); NES pixels right of 256 read 0 like the overscan's.
    """
    nes_x = view_x + np.arange(CROP_W) + 0.5
    nes_y = CROP_Y + np.arange(CROP_H) + 0.5
    # remap coordinates: capture pixel u has its centre at continuous u + 0.5
    mx = place.capture_x(nes_x) - 0.5 - origin[0]
    if combing:
        if origin[1] % 2:
            raise ValueError(f"origin y must be even with combing, got {origin[1]}")
        centre = place.capture_y(nes_y) - 0.5
        my = 2.0 * np.rint(centre / 2.0)  # the even line nearest the centre
        # below 2 capture lines per NES line two NES lines can share an even line, and the
        # NES line between them would be lost: it is read from the odd line nearest its
        # centre (the console frame before, the same picture unless something moved)
        shared = np.zeros(my.size, bool)
        shared[1:] |= my[1:] == my[:-1]
        shared[:-1] |= my[:-1] == my[1:]
        far = shared & (np.abs(centre - my) > 0.5)
        my = np.where(far, my + np.sign(centre - my), my) - origin[1]
    else:
        my = place.capture_y(nes_y) - 0.5 - origin[1]
    visible_x = (nes_x >= place.crop_left) & (nes_x < 256 - place.crop_right)
    visible_y = (nes_y >= place.crop_top) & (nes_y < 240 - place.crop_bottom)
    mx = np.where(visible_x, mx, OUTSIDE).astype(np.float32)
    my = np.where(visible_y, my, OUTSIDE).astype(np.float32)
    map_x = np.ascontiguousarray(np.broadcast_to(mx[None, :], (my.size, mx.size)))
    map_y = np.ascontiguousarray(np.broadcast_to(my[:, None], (my.size, mx.size)))
    return map_x, map_y


class CropSampler:
    """Samples the model's crop from captured frames of one Profile (maps built once).

    ``sampler(frame) -> uint8 RGB [208, 144, 3]`` for a captured BGR uint8 frame of the
    profile's size (or a window of it whose top-left capture pixel is ``origin``).
    ``color``: the colour section to undo (default the profile's; None keeps the captured
    colours, only swapping BGR to RGB). ``view_x``: the crop's left edge, NES pixels
    (perception.layout.VIEW_X; default the one-player crop).
    """

    def __init__(
        self,
        profile: Profile,
        place: Placement | None = None,
        color: Color | None | str = "profile",
        origin: tuple[int, int] = (0, 0),
        view_x: int = CROP_X,
    ) -> None:
        self.profile = profile
        self.place = place or Placement.of(profile.geometry)
        if isinstance(color, str):
            if color != "profile":
                raise ValueError(f"color must be a Color, None or 'profile', got {color!r}")
            color = profile.color
        self.color = color
        self.view_x = view_x
        mx, my = sample_maps(self.place, profile.artifacts.combing, origin, view_x)
        self.map1, self.map2 = cv2.convertMaps(mx, my, cv2.CV_16SC2)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        bgr = cv2.remap(
            frame, self.map1, self.map2, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        )
        if self.color is None or self.color.is_identity:
            return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        return undo_color(self.color, bgr)
