"""The forward model: NES frames (RGB) through a Profile to captured frames (BGR), and back.

Order of operations (docs/CAPTURE.md), each skipped when its setting is the ideal one:

1. colour (calibration.color) on the NES picture, which also turns RGB into BGR; the border
   gets the colour of black through the same section;
2. overscan crop and scaling (calibration.geometry) into the output frame; with ``combing`` the
   even output lines come from the current console frame and the odd lines from the previous;
3. horizontal smoothing (Gaussian along x), 4. blur (2-D Gaussian), 5. sharpening (unsharp
   mask, sigma 1 capture pixel), 6. noise (Gaussian, seeded: NoiseSource), 7. chroma
   subsampling (YCrCb, chroma averaged over 2x1 or 2x2 and upsampled bilinearly), 8. MJPEG
   (JPEG encode and decode at ``jpeg_quality``).

Colour goes first because it is pointwise: its affine part commutes with the interpolation (up
to rounding) and working at 256x240 instead of the output size saves most of its cost.
"""

from __future__ import annotations

import cv2
import numpy as np

from calibration.color import apply_color, border_bgr, undo_color
from calibration.geometry import forward_taps, inverse_maps, scale_frame
from calibration.profile import NES_HEIGHT, NES_WIDTH, Artifacts, Profile

NES_SHAPE = (NES_HEIGHT, NES_WIDTH, 3)


def check_nes_frame(name: str, frame: np.ndarray) -> np.ndarray:
    """Raise ValueError unless ``frame`` is uint8 [240, 256, 3]; return it contiguous."""
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"{name} must be a numpy array uint8 [240, 256, 3], got {type(frame)}")
    if frame.dtype != np.uint8 or frame.shape != NES_SHAPE:
        raise ValueError(
            f"{name} must be uint8 [240, 256, 3] (an NES frame, RGB), "
            f"got {frame.dtype} {list(frame.shape)}"
        )
    return np.ascontiguousarray(frame)


class NoiseSource:
    """Seeded Gaussian noise for the forward model, fast enough for 1080p at 60 Hz.

    Drawing 6 million normals per 1080p frame costs ~50 ms, so a bank of unit normals (frame
    size + 2**20, float32, drawn once from numpy PCG64 with ``seed``) is kept and each frame
    takes a window at a random offset: within a frame the noise is i.i.d. N(0, 1); frames get
    shifted windows of one sequence. Deterministic for a given seed and call sequence.
    """

    SLACK = 1 << 20

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.bank = np.empty(0, dtype=np.float32)

    def sample(self, shape: tuple[int, ...]) -> np.ndarray:
        """float32 array of ``shape``, unit normal (a read-only view into the bank)."""
        size = int(np.prod(shape))
        if self.bank.size < size + self.SLACK:
            self.bank = self.rng.standard_normal(size + self.SLACK, dtype=np.float32)
            self.bank.flags.writeable = False
        start = int(self.rng.integers(0, self.SLACK))
        return self.bank[start : start + size].reshape(shape)


def degrade(
    a: Artifacts, img: np.ndarray, noise: NoiseSource | None, encoded: bool = False
) -> np.ndarray:
    """Steps 3-8 on a captured BGR uint8 [H, W, 3] frame (returns a new array or ``img``).

    ``noise`` is needed when ``a.noise > 0`` (ValueError otherwise). ``encoded``: with
    ``jpeg_quality`` set, return the JPEG bytes (uint8 [n]) as the card sends them, not the
    decoded picture (the host decodes them: :func:`decode`).
    """
    if a.hsmooth > 0:
        ksize = (2 * max(1, int(np.ceil(3.0 * a.hsmooth))) + 1, 1)  # along x only
        img = cv2.GaussianBlur(img, ksize, a.hsmooth, borderType=cv2.BORDER_REPLICATE)
    if a.blur > 0:
        img = cv2.GaussianBlur(img, (0, 0), a.blur, borderType=cv2.BORDER_REPLICATE)
    if a.sharpen > 0:
        soft = cv2.GaussianBlur(img, (0, 0), 1.0, borderType=cv2.BORDER_REPLICATE)
        img = cv2.addWeighted(img, 1.0 + a.sharpen, soft, -a.sharpen, 0.0)
    if a.noise > 0:
        if noise is None:
            raise ValueError("artifacts.noise > 0 needs a NoiseSource (noise=...)")
        img = cv2.addWeighted(img, 1.0, noise.sample(img.shape), a.noise, 0.0, dtype=cv2.CV_8U)
    if a.chroma != "4:4:4":
        img = _subsample_chroma(img, vertical=a.chroma == "4:2:0")
    if a.jpeg_quality is not None:
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, a.jpeg_quality])
        if not ok:
            raise RuntimeError("OpenCV could not JPEG-encode the frame")
        if encoded:
            return np.asarray(buf, np.uint8).reshape(-1)
        img = decode(buf)
    return img


def decode(payload: np.ndarray) -> np.ndarray:
    """A captured frame as the card sent it (:func:`degrade` with ``encoded``): JPEG bytes
    (uint8 [n]) decoded to BGR uint8 [H, W, 3], or that array itself. Raises RuntimeError for
    bytes OpenCV cannot decode."""
    if payload.ndim == 3:
        return payload
    decoded = cv2.imdecode(payload, cv2.IMREAD_COLOR)
    if decoded is None:
        raise RuntimeError("OpenCV could not decode the captured JPEG")
    return decoded


def _subsample_chroma(img: np.ndarray, vertical: bool) -> np.ndarray:
    """YCrCb chroma averaged over 2x1 (or 2x2) pixels, upsampled bilinearly; luma kept.

    A bilinear downscale by exactly 2 samples between two pixels: their average (a box filter).
    """
    h, w = img.shape[:2]
    ycc = cv2.cvtColor(img, cv2.COLOR_BGR2YCrCb)
    small = cv2.resize(ycc, ((w + 1) // 2, (h + 1) // 2 if vertical else h))
    up = cv2.resize(small, (w, h))
    cv2.mixChannels([ycc], [up], [0, 0])  # the full-resolution luma back into channel 0
    return cv2.cvtColor(up, cv2.COLOR_YCrCb2BGR)


class CaptureModel:
    """Applies one Profile to NES frames: ``model(frame, previous=None) -> captured BGR``.

    ``seed`` seeds the noise (NoiseSource); the same seed and frames give the same output.
    """

    def __init__(self, profile: Profile, seed: int = 0) -> None:
        if not isinstance(profile, Profile):
            raise ValueError(f"profile must be a calibration.Profile, got {type(profile)}")
        self.profile = profile
        self.noise = NoiseSource(seed)
        forward_taps(profile.geometry)  # build the taps now, not on the first frame
        # Steps 1-2 of the last frame (a console shows the same picture on most frames: 84 %
        # of them in play at level 5 MED); the noise and the JPEG are made anew every frame.
        self._last: tuple[np.ndarray, np.ndarray | None, np.ndarray] | None = None

    def __call__(
        self, frame: np.ndarray, previous: np.ndarray | None = None, encoded: bool = False
    ) -> np.ndarray:
        """One captured frame: uint8 BGR [height, width, 3] from NES RGB uint8 [240, 256, 3].

        ``previous``: the console frame before ``frame`` (RGB [240, 256, 3]); with
        ``artifacts.combing`` it fills the odd output lines (``frame`` itself when None).
        ``encoded``: an MJPEG profile's frame as the JPEG bytes the card sends (uint8 [n];
        :func:`decode` makes the picture). Raises ValueError for frames of another shape or
        dtype.
        """
        p = self.profile
        frame = check_nes_frame("frame", frame)
        if previous is not None:
            previous = check_nes_frame("previous", previous)
        last = self._last
        if last is not None and np.array_equal(last[0], frame) and _same(last[1], previous):
            out = last[2]
        else:
            out = _color_and_scale(p, frame, previous)
            self._last = (frame.copy(), None if previous is None else previous.copy(), out)
        if p.artifacts.is_identity:
            return out.copy()
        return degrade(p.artifacts, out, self.noise, encoded=encoded)

    def to_nes(self, captured: np.ndarray, color: bool = True) -> np.ndarray:
        return to_nes(self.profile, captured, color=color)


def forward(
    profile: Profile,
    frame: np.ndarray,
    previous: np.ndarray | None = None,
    noise: NoiseSource | None = None,
    encoded: bool = False,
) -> np.ndarray:
    """Captured BGR uint8 [height, width, 3] for NES RGB uint8 [240, 256, 3] ``frame``.

    See the module docstring for the order of operations. ``noise`` is needed only when
    ``artifacts.noise > 0`` (ValueError otherwise). ``previous`` and ``encoded`` as in
    CaptureModel.
    """
    frame = check_nes_frame("frame", frame)
    if previous is not None:
        previous = check_nes_frame("previous", previous)
    out = _color_and_scale(profile, frame, previous)
    if profile.artifacts.is_identity:
        return out
    return degrade(profile.artifacts, out, noise, encoded=encoded)


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is None if b is None else a is not None and np.array_equal(a, b)


def _color_and_scale(
    profile: Profile, frame: np.ndarray, previous: np.ndarray | None
) -> np.ndarray:
    """Steps 1-2 (colour, crop and scale) of checked NES frames."""
    bgr = apply_color(profile.color, frame)
    prev_bgr = None
    if profile.artifacts.combing:
        prev_bgr = bgr if previous is None else apply_color(profile.color, previous)
    return scale_frame(profile.geometry, bgr, border_bgr(profile.color), previous=prev_bgr)


def check_captured(profile: Profile, frame: np.ndarray) -> np.ndarray:
    """Raise ValueError unless ``frame`` is uint8 [height, width, 3] for this profile."""
    g = profile.geometry
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"captured frame must be a numpy array, got {type(frame)}")
    if frame.dtype != np.uint8 or frame.shape != (g.height, g.width, 3):
        raise ValueError(
            f"profile {profile.name!r} expects a captured frame uint8 [{g.height}, {g.width}, 3] "
            f"(BGR), got {frame.dtype} {list(frame.shape)}"
        )
    return frame


def to_nes(profile: Profile, captured: np.ndarray, color: bool = True) -> np.ndarray:
    """NES RGB uint8 [240, 256, 3] from captured BGR uint8 [height, width, 3].

    Samples the capture pixel at each NES pixel centre (calibration.geometry.inverse_maps);
    cropped NES pixels are 0. ``color`` undoes the colour section (approximately). Raises
    ValueError for a frame that does not match the profile's output size.
    """
    captured = check_captured(profile, captured)
    m = inverse_maps(profile.geometry)
    nes_bgr = cv2.remap(
        captured, m.map_x, m.map_y, cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT
    )
    if color and not profile.color.is_identity:
        rgb = undo_color(profile.color, nes_bgr)
        rgb[~m.visible] = 0
        return rgb
    return cv2.cvtColor(nes_bgr, cv2.COLOR_BGR2RGB)
