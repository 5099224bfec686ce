"""The timing model: which console frame each captured frame shows, and when the host gets it.

Time 0 is the start of console frame 0's output; console frame n is output during
``[n, n + 1) * T_c`` with ``T_c = 1 / console_hz``. The capture device samples at
``t_k = T_c + phase + k / capture_hz`` (``phase`` uniform in one capture period, from the
seed) and holds the newest console frame whose output is complete:

    console_frame[k] = floor(t_k / T_c) - 1

so with ``capture_hz`` below ``console_hz`` a console frame is now and then never captured (60.000
Hz against 60.0988 Hz: one in ~10.1 s), and above it one is captured twice. Then, seeded:

- repeat: with probability ``repeat_rate`` the device delivers its previous picture again;
- drop: with probability ``drop_rate`` a captured frame never reaches the host (``index`` counts
  delivered frames, ``device_index`` the device's frames, so a drop is a gap in it);
- combing: the odd lines show the console frame before (``odd_frame = console_frame - 1``);
- host time: ``time_ns = t_k + latency_frames * T_c + |N(0, jitter_ms)|``, made non-decreasing
  (a late frame delays the ones queued behind it).

Latency and jitter move the host's timestamps, never the picture: the picture is decided at the
device's sampling instant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.profile import ProfileError, Timing


@dataclass(frozen=True)
class CaptureSchedule:
    """What the host receives, one entry per delivered captured frame (all int64 [K]).

    ``index``: 0..K-1. ``device_index``: the capture device's frame number (gaps = drops).
    ``time_ns``: host receive time since console frame 0 began. ``console_frame``: the console
    frame (engine ``frame`` count) in the picture, its even lines when combed. ``odd_frame``: the
    console frame on the odd lines (equal to ``console_frame`` unless combing). ``repeat``
    (bool [K]): the device delivered its previous picture again (``repeat_rate``), so the frame
    shown is older than the sampling instant says.
    """

    index: np.ndarray
    device_index: np.ndarray
    time_ns: np.ndarray
    console_frame: np.ndarray
    odd_frame: np.ndarray
    repeat: np.ndarray

    def __len__(self) -> int:
        return int(self.index.size)


class TimingModel:
    """Seeded capture timing for one Timing section (see the module docstring).

    ``combing``: odd lines show the previous console frame (Profile.artifacts.combing).
    ``phase_s``: the sampling phase in [0, 1 / capture_hz) seconds, drawn from the seed when None.
    """

    def __init__(
        self, timing: Timing, seed: int = 0, combing: bool = False, phase_s: float | None = None
    ) -> None:
        if not isinstance(timing, Timing):
            raise ValueError(f"timing must be a calibration.Timing, got {type(timing)}")
        self.timing = timing
        self.combing = bool(combing)
        self.seed = int(seed)
        period = 1.0 / timing.capture_hz
        rng = np.random.default_rng(self.seed)
        if phase_s is None:
            phase_s = float(rng.uniform(0.0, period))
        if not 0.0 <= phase_s < period:
            raise ProfileError(f"phase_s = {phase_s!r} must be in [0, {period:g}) seconds")
        self.phase_s = phase_s

    @property
    def console_period_s(self) -> float:
        return 1.0 / self.timing.console_hz

    def device_frames_for(self, console_frames: int) -> int:
        """How many device frames are sampled while ``console_frames`` console frames finish."""
        t = self.timing
        span = console_frames / t.console_hz - self.phase_s
        return max(0, int(np.ceil(span * t.capture_hz)))

    def schedule(self, device_frames: int) -> CaptureSchedule:
        """The first ``device_frames`` device frames (fewer entries after drops).

        Raises ValueError for a negative count.
        """
        if device_frames < 0:
            raise ValueError(f"device_frames must be >= 0, got {device_frames}")
        t = self.timing
        rng = np.random.default_rng([self.seed, 1])  # independent of the phase draw
        k = np.arange(device_frames, dtype=np.int64)
        tc = self.console_period_s
        # Exact in float64 for hours of frames; floor() of the ratio is the frame index.
        sample_s = tc + self.phase_s + k / t.capture_hz
        shown = np.floor(sample_s / tc).astype(np.int64) - 1
        repeat = rng.random(device_frames) < t.repeat_rate
        drop = rng.random(device_frames) < t.drop_rate
        jitter_s = np.abs(rng.standard_normal(device_frames)) * (t.jitter_ms * 1e-3)
        for i in np.flatnonzero(repeat):
            if i > 0:
                shown[i] = shown[i - 1]  # chains through consecutive repeats (ascending order)
        odd = np.maximum(shown - 1, 0) if self.combing else shown.copy()
        host_s = sample_s + t.latency_frames * tc + jitter_s
        time_ns = np.maximum.accumulate(np.rint(host_s * 1e9).astype(np.int64))
        keep = ~drop
        return CaptureSchedule(
            index=np.arange(int(keep.sum()), dtype=np.int64),
            device_index=k[keep],
            time_ns=time_ns[keep],
            console_frame=shown[keep],
            odd_frame=odd[keep],
            repeat=(repeat & (k > 0))[keep],
        )

    def for_console_frames(self, console_frames: int) -> CaptureSchedule:
        """The captured frames sampled while console frames 0..``console_frames``-1 play."""
        return self.schedule(self.device_frames_for(console_frames))
