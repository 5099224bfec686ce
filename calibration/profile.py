"""calibration.Profile: one capture chain (console -> scaler -> capture card) as data.

A Profile has four sections, each a frozen dataclass read from and written to JSON
(``calibration/profiles/*.json``; the schema with units and ranges is in docs/CAPTURE.md):

- :class:`Geometry`: where the NES picture (256x240 NES pixels, minus an overscan crop) lands in
  the captured frame (capture pixels): scale in x and y (8:7 pixel aspect is
  ``scale_x = scale_y * 8 / 7``), offset, output size, interpolation.
- :class:`Color`: what the chain does to colour values (gamma, saturation, per-channel gain and
  offset, limited or full range).
- :class:`Artifacts`: what it adds (horizontal smoothing, blur, sharpening, noise, chroma
  subsampling, MJPEG, interlace combing).
- :class:`Timing`: when the host gets which console frame (rates, latency, jitter, drops).

Every value is checked on construction; a bad one raises :class:`ProfileError` (a ValueError)
naming the key, the value and the allowed range. A key left out of a JSON file takes the
ideal chain's value (the dataclass default); an unknown key is an error.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

NES_WIDTH = 256  # NES pixels per line
NES_HEIGHT = 240  # visible lines (NES pixels)
NES_FRAME_HZ = 60.0988  # NTSC console frame rate: 1789772.7 Hz CPU / 29780.5 cycles per frame
PIXEL_ASPECT_8_7 = 8.0 / 7.0  # NTSC NES pixel width / height on a 4:3 screen

INTERPOLATIONS = ("nearest", "bilinear", "area")
RANGES = ("full", "limited")
CHROMA = ("4:4:4", "4:2:2", "4:2:0")

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


PROFILE_VERSION = 1  # the "version" of a profile file; absent in files written before it


class ProfileError(ValueError):
    """A profile value is missing its type or range; the message names the key."""


# --- value checks: each returns the value converted, or raises ProfileError naming the key ---


def _number(key: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ProfileError(f"{key} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ProfileError(f"{key} = {value!r} is out of range [{lo:g}, {hi:g}]")
    return v


def _integer(key: str, value: Any, lo: int, hi: int) -> int:
    ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
    if not ok:
        raise ProfileError(f"{key} must be an integer in [{lo}, {hi}], got {value!r}")
    if not lo <= int(value) <= hi:
        raise ProfileError(f"{key} = {value!r} is out of range [{lo}, {hi}]")
    return int(value)


def _choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise ProfileError(f"{key} = {value!r} is not one of {allowed}")
    return str(value)


def _triple(key: str, value: Any, lo: float, hi: float) -> tuple[float, float, float]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ProfileError(f"{key} must be a list of 3 numbers [R, G, B], got {value!r}")
    r, g, b = (_number(f"{key}[{i}]", v, lo, hi) for i, v in enumerate(value))
    return (r, g, b)


def _boolean(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ProfileError(f"{key} must be true or false, got {value!r}")
    return value


# --- the four sections ---


@dataclass(frozen=True)
class Geometry:
    """NES pixels to capture pixels.

    The cropped NES picture (``NES_WIDTH - crop_left - crop_right`` by ``NES_HEIGHT - crop_top -
    crop_bottom`` NES pixels) is scaled by ``scale_x``, ``scale_y`` (capture pixels per NES
    pixel) and its top-left corner placed at (``offset_x``, ``offset_y``) capture pixels in an
    output frame of ``width`` x ``height`` capture pixels; the rest is border (letterbox or
    pillarbox black). Pixel (i, j) covers [j, j+1) x [i, i+1) in both spaces, so NES column c
    (of the uncropped frame) covers capture x in ``offset_x + (c - crop_left + [0, 1)) *
    scale_x``. The whole picture must lie inside the output.
    """

    width: int = 1280
    height: int = 720
    scale_x: float = 3.0 * PIXEL_ASPECT_8_7
    scale_y: float = 3.0
    offset_x: float = (1280 - NES_WIDTH * 3.0 * PIXEL_ASPECT_8_7) / 2
    offset_y: float = 0.0
    crop_top: int = 0
    crop_bottom: int = 0
    crop_left: int = 0
    crop_right: int = 0
    interpolation: str = "nearest"

    def __post_init__(self) -> None:
        s = "geometry."
        _set(self, "width", _integer(s + "width", self.width, 64, 3840))
        _set(self, "height", _integer(s + "height", self.height, 64, 2160))
        _set(self, "scale_x", _number(s + "scale_x", self.scale_x, 1.0, 16.0))
        _set(self, "scale_y", _number(s + "scale_y", self.scale_y, 1.0, 16.0))
        _set(self, "offset_x", _number(s + "offset_x", self.offset_x, 0.0, 3840.0))
        _set(self, "offset_y", _number(s + "offset_y", self.offset_y, 0.0, 2160.0))
        for side in ("top", "bottom", "left", "right"):
            name = f"crop_{side}"
            _set(self, name, _integer(s + name, getattr(self, name), 0, 64))
        interp = _choice(s + "interpolation", self.interpolation, INTERPOLATIONS)
        _set(self, "interpolation", interp)
        # The picture must fit: a chain that cuts more off is an overscan crop, said as such.
        right = self.offset_x + self.crop_width * self.scale_x
        bottom = self.offset_y + self.crop_height * self.scale_y
        tol = 1e-3  # capture pixels: rounding in hand-written files
        if right > self.width + tol:
            raise ProfileError(
                f"geometry: the picture spans x {self.offset_x:g}..{right:.4f} capture pixels "
                f"(offset_x + {self.crop_width} NES pixels * scale_x), beyond width "
                f"{self.width}; lower scale_x or offset_x, or crop more (crop_left/crop_right)"
            )
        if bottom > self.height + tol:
            raise ProfileError(
                f"geometry: the picture spans y {self.offset_y:g}..{bottom:.4f} capture pixels "
                f"(offset_y + {self.crop_height} NES pixels * scale_y), beyond height "
                f"{self.height}; lower scale_y or offset_y, or crop more (crop_top/crop_bottom)"
            )

    @property
    def crop_width(self) -> int:
        """NES pixels per line that reach the capture."""
        return NES_WIDTH - self.crop_left - self.crop_right

    @property
    def crop_height(self) -> int:
        """NES lines that reach the capture."""
        return NES_HEIGHT - self.crop_top - self.crop_bottom

    @property
    def pixel_aspect(self) -> float:
        """Displayed NES pixel width / height (8/7 for an NTSC 4:3 picture, 1.0 square)."""
        return self.scale_x / self.scale_y

    @classmethod
    def centered(
        cls,
        width: int,
        height: int,
        scale_y: float | None = None,
        pixel_aspect: float = PIXEL_ASPECT_8_7,
        crop: tuple[int, int, int, int] = (0, 0, 0, 0),
        interpolation: str = "nearest",
    ) -> Geometry:
        """The picture centred in a ``width`` x ``height`` output.

        ``scale_y`` defaults to the largest that fits (height and width); ``crop`` is (top,
        bottom, left, right) in NES pixels. Raises ProfileError when the picture cannot fit.
        """
        top, bottom, left, right = crop
        ch, cw = NES_HEIGHT - top - bottom, NES_WIDTH - left - right
        if scale_y is None:
            scale_y = min(height / ch, width / (cw * pixel_aspect))
        scale_x = scale_y * pixel_aspect
        return cls(
            width=width,
            height=height,
            scale_x=scale_x,
            scale_y=scale_y,
            offset_x=max(0.0, (width - cw * scale_x) / 2),
            offset_y=max(0.0, (height - ch * scale_y) / 2),
            crop_top=top,
            crop_bottom=bottom,
            crop_left=left,
            crop_right=right,
            interpolation=interpolation,
        )


@dataclass(frozen=True)
class Color:
    """Colour values through the chain, applied to RGB in this order (docs/CAPTURE.md):

    gamma (``v' = 255 * (v / 255) ** gamma``), saturation (mix with BT.601 luma:
    ``c' = Y + saturation * (c - Y)``), per-channel ``gain`` and ``offset`` (8-bit code values,
    [R, G, B]), then ``range``: ``"limited"`` maps 0..255 to 16..235 (limited-range video read as
    full range: the washed-out look), ``"full"`` leaves it.
    """

    range: str = "full"
    gamma: float = 1.0
    saturation: float = 1.0
    gain: tuple[float, float, float] = (1.0, 1.0, 1.0)
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        s = "color."
        _set(self, "range", _choice(s + "range", self.range, RANGES))
        _set(self, "gamma", _number(s + "gamma", self.gamma, 0.5, 2.5))
        _set(self, "saturation", _number(s + "saturation", self.saturation, 0.25, 2.0))
        _set(self, "gain", _triple(s + "gain", self.gain, 0.5, 1.5))
        _set(self, "offset", _triple(s + "offset", self.offset, -32.0, 32.0))

    @property
    def is_identity(self) -> bool:
        return self == Color()


@dataclass(frozen=True)
class Artifacts:
    """What the chain adds to the scaled picture (capture pixels, 8-bit code values).

    ``hsmooth``: horizontal Gaussian sigma (capture pixels; analog bandwidth, scaler filters).
    ``blur``: 2-D Gaussian sigma (capture pixels). ``sharpen``: unsharp-mask amount (sigma 1
    capture pixel). ``noise``: Gaussian noise sigma (code values). ``chroma``: ``"4:4:4"``,
    ``"4:2:2"`` or ``"4:2:0"`` (YCrCb chroma averaged over 2x1 or 2x2 pixels and upsampled).
    ``jpeg_quality``: MJPEG compression quality 1..100, or None for none. ``combing``: odd
    output lines show the previous console frame (a weave deinterlacer fed 240p).
    """

    hsmooth: float = 0.0
    blur: float = 0.0
    sharpen: float = 0.0
    noise: float = 0.0
    chroma: str = "4:4:4"
    jpeg_quality: int | None = None
    combing: bool = False

    def __post_init__(self) -> None:
        s = "artifacts."
        _set(self, "hsmooth", _number(s + "hsmooth", self.hsmooth, 0.0, 4.0))
        _set(self, "blur", _number(s + "blur", self.blur, 0.0, 4.0))
        _set(self, "sharpen", _number(s + "sharpen", self.sharpen, 0.0, 3.0))
        _set(self, "noise", _number(s + "noise", self.noise, 0.0, 32.0))
        _set(self, "chroma", _choice(s + "chroma", self.chroma, CHROMA))
        if self.jpeg_quality is not None:
            _set(self, "jpeg_quality", _integer(s + "jpeg_quality", self.jpeg_quality, 1, 100))
        _set(self, "combing", _boolean(s + "combing", self.combing))

    @property
    def is_identity(self) -> bool:
        return self == Artifacts()


@dataclass(frozen=True)
class Timing:
    """When the host gets which console frame (see calibration.timing.TimingModel).

    ``console_hz``: the console's frame rate (NTSC NES 60.0988). ``capture_hz``: the capture
    device's frame rate (60.000 for most HDMI cards: one console frame in ~10 s is never
    captured). ``latency_frames``: delay from the end of a console frame's output to the host
    receiving the captured frame, in console frames (may be fractional). ``jitter_ms``: sigma of
    an extra half-normal delivery delay (ms). ``drop_rate``: probability a captured frame is lost
    before the host. ``repeat_rate``: probability the device delivers its previous picture again.
    """

    console_hz: float = NES_FRAME_HZ
    capture_hz: float = 60.0
    latency_frames: float = 0.0
    jitter_ms: float = 0.0
    drop_rate: float = 0.0
    repeat_rate: float = 0.0

    def __post_init__(self) -> None:
        s = "timing."
        _set(self, "console_hz", _number(s + "console_hz", self.console_hz, 45.0, 75.0))
        _set(self, "capture_hz", _number(s + "capture_hz", self.capture_hz, 10.0, 240.0))
        _set(self, "latency_frames", _number(s + "latency_frames", self.latency_frames, 0.0, 60.0))
        _set(self, "jitter_ms", _number(s + "jitter_ms", self.jitter_ms, 0.0, 50.0))
        _set(self, "drop_rate", _number(s + "drop_rate", self.drop_rate, 0.0, 0.5))
        _set(self, "repeat_rate", _number(s + "repeat_rate", self.repeat_rate, 0.0, 0.5))


def _set(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # frozen dataclasses: normalise in __post_init__


_SECTIONS: dict[str, type] = {
    "geometry": Geometry,
    "color": Color,
    "artifacts": Artifacts,
    "timing": Timing,
}


@dataclass(frozen=True)
class Profile:
    """One capture chain: geometry, colour, artifacts and timing (docs/CAPTURE.md).

    Immutable and hashable, so per-profile work (remap maps, colour tables) is cached on it.
    ``Profile()`` is the ideal chain: 1280x720, 8:7, nearest neighbour, nothing added.
    """

    name: str = "ideal"
    description: str = ""
    geometry: Geometry = field(default_factory=Geometry)
    color: Color = field(default_factory=Color)
    artifacts: Artifacts = field(default_factory=Artifacts)
    timing: Timing = field(default_factory=Timing)
    rom_crc32: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.rom_crc32, str) or not re.fullmatch(
            r"([0-9A-F]{8})?", self.rom_crc32
        ):
            raise ProfileError(
                f"rom_crc32 must be 8 upper-case hex digits or empty, got {self.rom_crc32!r}"
            )
        if not isinstance(self.name, str) or not self.name:
            raise ProfileError(f"name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.description, str):
            raise ProfileError(f"description must be a string, got {self.description!r}")
        for key, cls in _SECTIONS.items():
            if not isinstance(getattr(self, key), cls):
                raise ProfileError(f"{key} must be a {cls.__name__}, got {getattr(self, key)!r}")

    # --- JSON ---

    @classmethod
    def from_dict(cls, data: Any, name: str | None = None) -> Profile:
        """Build and validate a profile from parsed JSON (missing keys take ideal values).

        Raises ProfileError naming the first bad key.
        """
        if not isinstance(data, dict):
            raise ProfileError(f"a profile must be a JSON object, got {type(data).__name__}")
        allowed = {"version", "name", "description", "rom_crc32", *_SECTIONS}
        _reject_unknown("", data, allowed)
        version = data.get("version", PROFILE_VERSION)  # absent: written before versions
        if type(version) is not int or version != PROFILE_VERSION:
            raise ProfileError(
                f"version must be {PROFILE_VERSION} (the profile format this tool reads), "
                f"got {version!r}"
            )
        kwargs: dict[str, Any] = {}
        for key, section in _SECTIONS.items():
            if key not in data:
                continue
            body = data[key]
            if not isinstance(body, dict):
                raise ProfileError(f"{key} must be a JSON object, got {body!r}")
            _reject_unknown(key + ".", body, {f.name for f in fields(section)})
            kwargs[key] = section(**body)
        kwargs["name"] = data.get("name", name or "profile")
        kwargs["description"] = data.get("description", "")
        kwargs["rom_crc32"] = data.get("rom_crc32", "")
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The profile as JSON-ready data (every key, lists for tuples)."""
        out = {"version": PROFILE_VERSION, **asdict(self)}
        for section in ("color",):
            for key in ("gain", "offset"):
                out[section][key] = list(out[section][key])
        return out

    def to_json(self) -> str:
        """Indented JSON with the [R, G, B] lists on one line."""
        text = json.dumps(self.to_dict(), indent=2)
        return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", _inline_list, text) + "\n"

    @classmethod
    def from_json(cls, text: str, name: str | None = None) -> Profile:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProfileError(f"not valid JSON: {e}") from None
        return cls.from_dict(data, name=name)

    @classmethod
    def load(cls, path_or_name: str | Path) -> Profile:
        """Read a profile file, or a shipped profile by name (``calibration/profiles/NAME.json``).

        Raises FileNotFoundError for a missing file (listing the shipped names) and
        ProfileError (with the file name) for a bad one.
        """
        path = Path(path_or_name)
        if not path.exists() and path.suffix == "" and path.name == str(path_or_name):
            path = PROFILES_DIR / f"{path_or_name}.json"
        if not path.exists():
            raise FileNotFoundError(
                f"no profile file {str(path_or_name)!r}; shipped profiles: "
                + ", ".join(builtin_profiles())
            )
        try:
            return cls.from_json(path.read_text(), name=path.stem)
        except ProfileError as e:
            raise ProfileError(f"{path}: {e}") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    def replace(self, **changes: Any) -> Profile:
        """A copy with whole sections or name/description replaced."""
        return replace(self, **changes)

    # --- training augmentation ---

    @classmethod
    def random(cls, rng: np.random.Generator) -> Profile:
        """A random plausible capture chain (for perception training augmentation).

        Draws output size, pixel aspect, overscan crop, scale (integer or fitted), offset,
        interpolation, colour, artifacts and timing from the ranges documented in
        docs/CAPTURE.md. Deterministic for a given generator state.
        """
        return _random_profile(rng)


def _reject_unknown(prefix: str, data: dict, allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            name = f"{prefix}{key}"
            shown = name if name.isprintable() else repr(name)  # one line, whatever the key
            raise ProfileError(f"unknown key {shown}; allowed: " + ", ".join(sorted(allowed)))


def _inline_list(m: re.Match[str]) -> str:
    return "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]"


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped in calibration/profiles/."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


OUTPUT_SIZES = ((640, 480), (720, 480), (1280, 720), (1920, 1080))


def _random_profile(rng: np.random.Generator) -> Profile:
    width, height = OUTPUT_SIZES[int(rng.integers(len(OUTPUT_SIZES)))]
    u = rng.random()
    aspect = PIXEL_ASPECT_8_7 if u < 0.5 else 1.0 if u < 0.8 else float(rng.uniform(1.0, 1.35))
    crop = tuple(int(rng.integers(1, 9)) if rng.random() < 0.35 else 0 for _ in range(4))
    top, bottom, left, right = crop
    ch, cw = NES_HEIGHT - top - bottom, NES_WIDTH - left - right
    fit = min(height / ch, width / (cw * aspect))
    if rng.random() < 0.3 and math.floor(fit) >= 1:
        scale_y = float(math.floor(fit))  # integer scalers (line doublers, RetroTINK-style)
    else:
        scale_y = fit * float(rng.uniform(0.88, 1.0))
    scale_y = max(1.0, math.floor(scale_y * 1e4) / 1e4)
    scale_x = max(1.0, math.floor(scale_y * aspect * 1e4) / 1e4)
    free_x, free_y = width - cw * scale_x, height - ch * scale_y
    offset_x = math.floor(free_x * float(rng.uniform(0.35, 0.65)) * 1e3) / 1e3
    offset_y = math.floor(free_y * float(rng.uniform(0.2, 0.8)) * 1e3) / 1e3
    geometry = Geometry(
        width=width,
        height=height,
        scale_x=scale_x,
        scale_y=scale_y,
        offset_x=max(0.0, offset_x),
        offset_y=max(0.0, offset_y),
        crop_top=top,
        crop_bottom=bottom,
        crop_left=left,
        crop_right=right,
        interpolation=INTERPOLATIONS[int(rng.integers(len(INTERPOLATIONS)))],
    )

    def r3(lo: float, hi: float) -> float:
        return round(float(rng.uniform(lo, hi)), 3)

    def maybe(p: float, lo: float, hi: float) -> float:
        return r3(lo, hi) if rng.random() < p else 0.0

    color = Color(
        range="limited" if rng.random() < 0.3 else "full",
        gamma=r3(0.85, 1.2),
        saturation=r3(0.8, 1.25),
        gain=(r3(0.9, 1.1), r3(0.9, 1.1), r3(0.9, 1.1)),
        offset=(r3(-6, 6), r3(-6, 6), r3(-6, 6)),
    )
    artifacts = Artifacts(
        hsmooth=maybe(0.5, 0.3, 1.5),
        blur=maybe(0.3, 0.3, 1.2),
        sharpen=maybe(0.3, 0.2, 1.0),
        noise=maybe(0.6, 0.5, 6.0),
        chroma=CHROMA[int(rng.integers(len(CHROMA)))],
        jpeg_quality=int(rng.integers(40, 96)) if rng.random() < 0.5 else None,
        combing=bool(rng.random() < 0.1),
    )
    timing = Timing(
        capture_hz=(60.0, 59.94, NES_FRAME_HZ)[int(rng.integers(3))],
        latency_frames=r3(1.0, 6.0),
        jitter_ms=maybe(0.7, 0.1, 3.0),
        drop_rate=maybe(0.3, 0.0, 0.01),
        repeat_rate=maybe(0.3, 0.0, 0.01),
    )
    return Profile(
        name="random",
        description="Profile.random: training augmentation",
        geometry=geometry,
        color=color,
        artifacts=artifacts,
        timing=timing,
    )
