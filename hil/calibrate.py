"""``hil calibrate``: grab a few frames from a video, a recording or a capture device, fit a
Profile (calibration.fit) and write it with a PNG of the fitted grid over a frame."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from calibration import Profile
from calibration.fit import FitError, FitResult, draw_fit, fit_profile


def grab_frames(source: str, count: int, every: int) -> list[np.ndarray]:
    """``count`` BGR frames from ``source``: a ``hil sim record`` recording directory (frames
    spread over its gameplay), a video file (spread over the file), or a capture device (an
    index such as ``0`` or a path such as ``/dev/video0``: one frame every ``every`` frames).
    Raises ValueError with what went wrong."""
    if count < 1 or every < 1:
        raise ValueError("--frames and --every must be at least 1")
    path = Path(source)
    if path.is_dir():
        from hil.loop.recording import Recording

        rec = Recording(path)
        playing = [i for i, t in enumerate(rec.truth) if t.get("phase") == "PLAYING"]
        pool = playing or list(range(len(rec)))
        want = set(np.linspace(0, len(pool) - 1, min(count, len(pool))).astype(int).tolist())
        picks = {pool[i] for i in want}
        frames = [f.image for i, (f, _) in enumerate(rec.frames()) if i in picks]
        if not frames:
            raise ValueError(f"{path}: the recording has no frames")
        return frames
    if path.is_file():
        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise ValueError(f"{path}: OpenCV cannot decode this video")
        total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        picks = set(np.linspace(0, max(total - 1, 0), count).astype(int).tolist())
        frames = []
        for i in range(max(total, 1)):
            ok, image = cap.read()
            if not ok:
                break
            if i in picks:
                frames.append(image)
        cap.release()
        if not frames:
            raise ValueError(f"{path}: no frame could be read")
        return frames
    device: Any = int(source) if source.isdigit() else source
    if not (isinstance(device, int) or source.startswith("/dev/")):
        raise ValueError(f"{source}: no such file, recording directory or capture device")
    cap = cv2.VideoCapture(device)
    if not cap.isOpened():
        raise ValueError(f"capture device {source} cannot be opened")
    frames = []
    n = 0
    while len(frames) < count and n < count * every + 600:
        ok, image = cap.read()
        if not ok:
            break
        if n % every == 0:
            frames.append(image)
        n += 1
    cap.release()
    if len(frames) < count:
        raise ValueError(f"capture device {source} gave {len(frames)} of {count} frames")
    return frames


MIN_ALIGNMENT = 0.5  # correlation of the frames' edges with the level screen (calibration.fit)
NEEDS_ROM = "a real console's picture needs --rom YOUR_ROM (its level screen to align with)"


class NeedsRom(FitError):
    """The fit needs the user's ROM (the picture is not the clean-room one)."""


def calibrate(
    source: str,
    out: str | Path,
    png: str | Path | None = None,
    count: int = 8,
    every: int = 30,
    name: str | None = None,
    base: Profile | None = None,
    rom: str | None = None,
    verify_crc: bool = True,
) -> tuple[FitResult, Path, Path]:
    """Fit a Profile from ``source`` (see :func:`grab_frames`) and write ``out`` (JSON) and
    ``png`` (default: ``out`` with .png). ``rom``: the user's Dr. Mario ROM, whose level screen
    the fit aligns with, and whose CRC-32 the profile records (``Profile.rom_crc32``: hil run
    finds the model ``hil prepare`` made for it); without it the clean-room tiles the simulator
    draws. Returns the fit and both paths. Raises ValueError (calibration.fit.FitError among
    them) on failure: :class:`NeedsRom` when, without ``rom``, the frames do not show the
    clean-room level screen (a real console's picture: the fit would be off by pixels to
    hundreds of pixels), before anything is written."""
    import engine
    from perception.store import rom_crc32

    frames = grab_frames(source, count, every)
    tiles = engine.TileSet.from_ines(rom, verify_crc=verify_crc) if rom else None
    out = Path(out)
    try:
        result = fit_profile(frames, name=name or out.stem, base=base, tiles=tiles)
    except FitError:
        raise
    except ValueError as e:  # the fitted numbers make no valid Profile (ProfileError)
        if tiles is None:
            raise NeedsRom(f"the fit found no valid picture ({e}); {NEEDS_ROM}") from None
        raise FitError(f"the fit found no valid picture: {e}") from None
    corr = float(result.details["geometry"]["alignment_correlation"])
    if tiles is None and corr < MIN_ALIGNMENT:
        raise NeedsRom(
            f"the frames do not show the clean-room level screen (alignment correlation "
            f"{corr:.2f} < {MIN_ALIGNMENT}); {NEEDS_ROM}"
        )
    if rom:
        profile = result.profile.replace(rom_crc32=rom_crc32(rom, verify_crc=verify_crc))
        result = replace(result, profile=profile)
    out.parent.mkdir(parents=True, exist_ok=True)
    result.profile.save(out)
    g = result.profile.geometry
    text = (
        f"{result.profile.name}: {g.width}x{g.height}, scale {g.scale_x:.4f} x {g.scale_y:.4f}, "
        f"offset {g.offset_x:.2f}, {g.offset_y:.2f}\n"
        f"crop t/b/l/r {g.crop_top}/{g.crop_bottom}/{g.crop_left}/{g.crop_right}, "
        f"geometry residual {result.geometry_residual_px:.3f} px, "
        f"colour residual {result.color_residual:.2f}"
    )
    png_path = Path(png) if png else out.with_suffix(".png")
    png_path.parent.mkdir(parents=True, exist_ok=True)
    # The frame with the most detail: a recording or a video may begin with black frames.
    shown = max(frames, key=lambda f: float(np.std(f)))
    if not cv2.imwrite(str(png_path), draw_fit(shown, result.profile, text)):
        raise ValueError(f"{png_path}: OpenCV could not write the PNG")
    return result, out, png_path
