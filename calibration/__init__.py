"""calibration room (see docs/ARCHITECTURE.md): the capture chain as data and as a model.

``Profile`` (geometry, colour, artifacts, timing; JSON files in calibration/profiles/),
``CaptureModel`` / ``forward`` (NES RGB frames -> captured BGR frames with the chain's
artifacts), ``Profile.to_nes`` (captured BGR -> NES RGB), ``TimingModel`` (which console frame
each captured frame shows, and when it arrives). docs/CAPTURE.md has the schema and the model.
"""

from calibration.forward import CaptureModel, NoiseSource, forward, to_nes
from calibration.profile import (
    NES_FRAME_HZ,
    NES_HEIGHT,
    NES_WIDTH,
    PIXEL_ASPECT_8_7,
    Artifacts,
    Color,
    Geometry,
    Profile,
    ProfileError,
    Timing,
    builtin_profiles,
)
from calibration.timing import CaptureSchedule, TimingModel

__all__ = [
    "NES_FRAME_HZ",
    "NES_HEIGHT",
    "NES_WIDTH",
    "PIXEL_ASPECT_8_7",
    "Artifacts",
    "CaptureModel",
    "CaptureSchedule",
    "Color",
    "Geometry",
    "NoiseSource",
    "Profile",
    "ProfileError",
    "Timing",
    "TimingModel",
    "builtin_profiles",
    "forward",
    "to_nes",
]
