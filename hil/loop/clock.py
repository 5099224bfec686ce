"""The frame clock: firmware frames <-> host time, one object for the whole loop.

The firmware numbers console frames by their latch groups and stamps each STATUS with its
clock (firmware/PROTOCOL.md); :class:`FrameClock` learns the mapping from those messages and
from PING round trips, and answers "which frame is it now", "which frame can a schedule sent
now still reach" and "which frames can a capture that arrived now show" (docs/RUN.md, "Frame
clock"). The runtime feeds it; the tracker, the scheduler and the level flow read it.
"""

from __future__ import annotations

import math
from collections import deque

from hil.link.protocol import Status

NES_HZ = 60.0988
# How late the clock mapping may put a latch (ns): its offset is the least delay of the last
# 512 STATUS reads, and no read is ever early. Measured with the console's ground truth
# (``clock_error_ms`` in a run's summary) on the emulator in real time on 2 cores (the STATUS
# leaves when the console process's pacing gets to it): quiet 0.37-0.41 ms at least, p50
# 0.6-0.7 ms, p99 2.7-3.6 ms; beside two CPU-bound processes p50 1.3, p99 4.9, max 6.2 ms; the
# simulated console 0.16-0.25 ms at the median. A capture sampled within that much after a
# frame boundary shows the later frame: the candidates include it. Not more: each ms widens
# every capture's candidates, and at 6 ms the level start's alignment could no longer tell
# base frames b and b + 1 apart (tests/test_tracker.py).
CLOCK_LATE_NS = 3e6
# The clock's typical late bias (ns), for a capture's single most likely frame
# (FrameClock.shown_frame): the candidates' upper end with CLOCK_LATE_NS is often a frame past
# it, and the level start's base-frame prior taken from there was a frame late.
CLOCK_POINT_NS = 5e5


class FrameClock:
    """Firmware frames <-> host time (ns), learnt from STATUS messages.

    ``on_status(frame, first_latch_us, host_ns)``: a STATUS of that frame arrived at host time
    host_ns. The device-to-host offset is the minimum over the last 512 of ``host arrival -
    (latch + window)`` (messages are only ever late), the frame period the slope of the device
    timestamps over the same span (the console's crystal, not the nominal 60.0988 Hz).
    ``on_pong(device_us, host_ns)`` adds an offset sample from a PING round trip.
    """

    def __init__(self, hz: float = NES_HZ, window_us: int = 5000) -> None:
        self.nominal_ns = 1e9 / hz
        self.window_us = window_us
        self._samples: deque[tuple[int, int]] = deque(maxlen=512)  # (frame, latch_us)
        self._offsets: deque[float] = deque(maxlen=512)
        self._offset: float | None = None
        self._period: float | None = None

    @property
    def ready(self) -> bool:
        return bool(self._samples) and bool(self._offsets)

    def reset(self) -> None:
        """Forget everything (the firmware restarted: its frames and clock begin again)."""
        self._samples.clear()
        self._offsets.clear()
        self._offset = self._period = None

    def on_status(self, frame: int, first_latch_us: int, host_ns: int) -> None:
        if self._samples and frame <= self._samples[-1][0]:
            return
        self._samples.append((frame, first_latch_us))
        self._offsets.append(host_ns - (first_latch_us + self.window_us) * 1000.0)
        self._offset = self._period = None

    def on_pong(self, device_us: int, host_ns: int) -> None:
        self._offsets.append(host_ns - device_us * 1000.0)
        self._offset = None

    @property
    def offset_ns(self) -> float:
        if self._offset is None:
            self._offset = min(self._offsets)
        return self._offset

    @property
    def period_ns(self) -> float:
        if self._period is None:
            # The slope over the newest run of samples without a gap: a frame in which the
            # console read no controller (the game kept NMI off while loading a screen, as in
            # Dr. Mario's menus) has no latch group, so its time would count as a frame period.
            f1, t1 = self._samples[-1]
            f0, t0 = f1, t1
            for f, t in reversed(self._samples):
                if f0 - f > 0 and (t0 - t) * 1000.0 > (f0 - f) * self.nominal_ns * 1.5:
                    break
                f0, t0 = f, t
            self._period = (t1 - t0) * 1000.0 / (f1 - f0) if f1 - f0 >= 30 else self.nominal_ns
        return self._period

    @property
    def samples(self) -> int:
        """STATUS messages the estimate rests on (up to 512)."""
        return len(self._samples)

    @property
    def last_frame(self) -> int:
        """The newest frame a STATUS was received for (-1 before any)."""
        return self._samples[-1][0] if self._samples else -1

    def latch_ns(self, frame: int) -> float:
        """Host time of ``frame``'s first latch. Requires ``ready``."""
        f, t_us = self._samples[-1]
        return t_us * 1000.0 + (frame - f) * self.period_ns + self.offset_ns

    def frame_at(self, host_ns: float) -> int:
        """The newest frame whose first latch is at or before ``host_ns``."""
        f, t_us = self._samples[-1]
        return f + math.floor((host_ns - t_us * 1000.0 - self.offset_ns) / self.period_ns)

    def first_schedulable(self, host_ns: float, margin_ns: float = 0.0) -> int:
        """The first frame a SCHEDULE sent at ``host_ns`` (+ margin) still reaches: frame g is
        armed (fixed) when frame g-1's latch window closes."""
        t = host_ns + margin_ns - self.window_us * 1000.0
        return self.frame_at(t) + 2

    def shown_frame(self, arrival_ns: float, latency_ns: float) -> int:
        """The most likely frame a capture that arrived at ``arrival_ns`` shows: the newest
        complete ``latency_ns`` before, at the clock's typical late bias (CLOCK_POINT_NS)."""
        return self.frame_at(arrival_ns - latency_ns - self.period_ns + CLOCK_POINT_NS)

    def shown_frames(
        self,
        arrival_ns: float,
        latency_ns: float,
        jitter_ns: float,
        slack_ns: float = CLOCK_LATE_NS,
    ) -> range:
        """Console frames a capture that arrived at ``arrival_ns`` can show: the device holds
        the newest complete picture when it samples (frame g complete at latch(g) + period),
        and delivers it ``latency_ns`` plus 0..``jitter_ns`` later. ``slack_ns`` covers the
        error of the clock mapping itself, which only ever puts latches late
        (:data:`CLOCK_LATE_NS`): a capture sampled right after a frame boundary may show the
        later frame."""
        done = arrival_ns - latency_ns - self.period_ns
        hi = self.frame_at(done + slack_ns)
        lo = self.frame_at(done - jitter_ns)
        return range(lo, hi + 1)


class Renumbering:
    """Where a reconnected firmware's frames fall on the run's frame numbers.

    A firmware that restarted (the controller unplugged and plugged back, a reboot) numbers
    its frames from 0 again, on a clock that also began again, so its numbers cannot be
    compared with the old ones; the console's latches can: both firmwares latch the same
    console's frames, whose times on the host clock lie on the grid ``old`` has learnt. The
    shift (old number - new number) is ``(latch_new(f) - latch_old(f_last)) / period + f_last -
    f``: an integer, but for the error of the new offset, which is only ever late (a message
    is read after it was sent; a STATUS read just after the reconnection waited in the port),
    and a shift one frame off puts every later input a frame off. So the shift is taken once
    STATUS messages from ``min_arrivals`` separate reads (PONGs add samples, not reads) put
    the estimate within ``early`` frames below or ``late`` frames above an integer, or after
    ``max_samples`` STATUS messages (then the integer at or below the estimate + ``early``).
    Until then nothing may be scheduled: the new numbers are not known.

    ``on_status``/``on_pong``: samples from the new firmware, in its numbering and clock.
    ``held``: the STATUS messages given to ``on_status``, with their arrival times, in order:
    the one copy of them (hil.loop.wire.Wire takes them into the clock and the schedule once
    the shift is known).
    ``shift``: None until known; 0: the frames go on (the same firmware came back).
    ``grid_sample()``: once the shift is known, (device_us, host_ns) of the newest STATUS's
    latch on the old grid, to seed the new clock's offset (a PONG-like sample): the console's
    phase did not change, and a few late samples would map captures a frame off for seconds.
    """

    def __init__(
        self,
        old: FrameClock,
        min_arrivals: int = 4,
        max_samples: int = 30,
        early: float = 0.2,
        late: float = 0.45,
    ) -> None:
        self.old = old
        self.min_arrivals = min_arrivals
        self.max_samples = max_samples
        self.early, self.late = early, late
        self.held: list[tuple[Status, int]] = []  # (STATUS, host_ns)
        self.pongs: list[tuple[int, int]] = []  # (device_us, host_ns)
        self._offsets: list[float] = []
        self._arrivals: set[int] = set()
        self.estimate: float | None = None  # the shift before rounding (frames)

    def on_status(self, status: Status, host_ns: int) -> None:
        self.held.append((status, host_ns))
        self._offsets.append(host_ns - (status.first_latch_us + self.old.window_us) * 1000.0)
        self._arrivals.add(host_ns)

    def on_pong(self, device_us: int, host_ns: int) -> None:
        self.pongs.append((device_us, host_ns))
        self._offsets.append(host_ns - device_us * 1000.0)

    @property
    def shift(self) -> int | None:
        if not self.held:
            return None
        if not self.old.ready:
            return 0  # nothing was numbered before: nothing to move
        f, t_us = self.held[-1][0].frame, self.held[-1][0].first_latch_us
        latch = t_us * 1000.0 + min(self._offsets)
        last = self.old.last_frame
        x = last + (latch - self.old.latch_ns(last)) / self.old.period_ns - f
        self.estimate = x
        k = math.floor(x + self.early)
        if len(self.held) >= self.max_samples:
            return k
        if x - k <= self.late and len(self._arrivals) >= self.min_arrivals:
            return k
        return None

    def grid_sample(self, shift: int) -> tuple[int, int] | None:
        """(device_us, host_ns): the newest STATUS's latch, new clock and old grid (see the
        class); None when nothing was numbered before. Call before the old clock is reset."""
        if not self.held or not self.old.ready:
            return None
        f, t_us = self.held[-1][0].frame, self.held[-1][0].first_latch_us
        return t_us, round(self.old.latch_ns(f + shift))
