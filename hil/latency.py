"""``hil calibrate latency``: measure the capture chain's latency by pressing a button and
seeing the pill move.

Procedure (the real rig and the simulated console run the same code): press Start to begin a
level, wait until a falling pill is seen, then repeatedly schedule a one-frame Left or Right
press for a console frame ``g_p`` (the firmware's STATUS confirms the frame latched it). The
game moves the pill in that frame's step; the picture of console frame ``g_p + 2`` is the first
to show it (the sprites show the previous main loop's pose; docs/RUN.md, "Frame clock"). The
first captured frame whose observation shows the pill in its new column arrived at host time
``A``; one sample is ``(A - completion of frame g_p + 2) / frame period`` where a frame's
picture is complete when the next frame latches. A sample is the chain latency plus the
device's sampling delay (0..1 capture period) plus jitter, so the smallest sample estimates the
latency and the spread the jitter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine.constants import Button
from hil.consoles.base import CaptureError, Console
from hil.link.link import Link, LinkError
from hil.loop.clock import FrameClock
from hil.loop.observation import Reader


def calibrate_latency(
    console: Console,
    reader: Reader,
    *,
    presses: int = 20,
    max_captures: int = 20_000,
    capture_hz: float = 60.0,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Runs the procedure of the module docstring on ``console`` (its capture, controller port
    and clock; hil.consoles.base.Console, started by the caller); returns JSON-ready results
    (samples in console frames, ``latency_frames`` = the smallest, ``jitter_ms``, counts). Raises
    LinkError / CaptureError when the link or the capture fails, ValueError for presses < 1."""
    if presses < 1:
        raise ValueError(f"presses must be at least 1, got {presses}")
    source, port, clock = console.capture, console.port, console.now_ns
    fc = FrameClock()
    samples: list[float] = []
    latched: dict[int, int] = {}
    pending: tuple[int, int, int, int] | None = None  # press frame, mask, new x, capture index
    feed_end = -1
    started = False
    cooldown_until = 0
    handled = 0
    discarded = 0
    with Link(port) as link:
        pong = link.ping()
        fc.on_pong(pong.device_us, clock())
        while len(samples) < presses and handled < max_captures:
            try:
                frame = source.newest(2.0)
            except CaptureError:
                break
            if frame is None:
                continue
            handled += 1
            obs = reader(frame)
            if handled % 10 == 0:  # each PONG refines the device-to-host clock offset
                t0 = clock()
                pong = link.ping()
                fc.on_pong(pong.device_us, (t0 + clock()) // 2)
            now = clock()
            feed_end = _intake_and_feed(link, fc, latched, feed_end, now)
            if not fc.ready:
                continue
            if not started and handled > 10:  # Start: the level's play begins
                feed_end = max(feed_end, _press(link, fc, now, int(Button.START)))
                started = True
                continue
            pill = obs.falling
            if pending is not None:
                g_p, mask, new_x, k0 = pending
                if pill is not None and pill.x == new_x:
                    if latched.get(g_p) == mask:
                        done = fc.latch_ns(g_p + 2) + fc.period_ns
                        samples.append((frame.time_ns - done) / fc.period_ns)
                    else:
                        discarded += 1
                    pending = None
                    cooldown_until = handled + 8
                elif pill is None or handled - k0 > 90:
                    discarded += 1  # locked or lost before the move was seen
                    pending = None
                continue
            if pill is None or pill.y < 5 or handled < cooldown_until:
                continue
            mask = int(Button.LEFT) if pill.x >= 3 else int(Button.RIGHT)
            new_x = pill.x - 1 if mask == Button.LEFT else pill.x + 1
            g_p = fc.first_schedulable(now, 2e6)
            ack = link.schedule(g_p, bytes([mask, 0]))
            if ack.late:
                discarded += 1
                continue
            pending = (g_p, mask, new_x, handled)
            if len(samples) % 5 == 0:
                say(f"latency: {len(samples)}/{presses} presses measured")
        _clear(link)
    return _latency_result(samples, discarded, capture_hz)


def _press(link: Link, fc: FrameClock, now: int, mask: int) -> int:
    """``mask`` for one frame from the first frame a schedule sent now reaches (a 2 ms
    margin), then no buttons; returns the last frame scheduled."""
    first = fc.first_schedulable(now, 2e6)
    link.schedule(first, bytes([mask, 0]))
    return first + 1


def _clear(link: Link) -> None:
    """The controller back to no buttons, if the link still works."""
    try:
        link.clear()
    except LinkError:
        pass


def _intake_and_feed(
    link: Link, fc: FrameClock, latched: dict[int, int], feed_end: int, now: int
) -> int:
    """The STATUS messages read into ``fc`` and ``latched``; "no buttons" kept 6-12 frames
    ahead. Returns the last frame fed."""
    link.poll()
    for st in list(link.statuses):  # also those read while a request waited
        fc.on_status(st.frame, st.first_latch_us, now)
        latched[st.frame] = st.mask
    link.statuses.clear()
    if not fc.ready:
        return feed_end
    now_frame = fc.frame_at(now)
    if feed_end < now_frame + 6:  # "no buttons" kept scheduled ahead
        first = max(feed_end + 1, fc.first_schedulable(now, 2e6))
        if now_frame + 12 >= first:
            link.schedule(first, bytes(now_frame + 12 - first + 1))
            feed_end = now_frame + 12
    return feed_end


def _latency_result(samples: list[float], discarded: int, capture_hz: float) -> dict[str, Any]:
    """The JSON-ready result of :func:`calibrate_latency`. Raises ValueError for no sample."""
    if not samples:
        raise ValueError(
            "no press was seen move the pill: is a level being played and the capture live?"
        )
    a = np.asarray(samples)
    lat = float(a.min())
    sampling = 1e3 / capture_hz
    jitter = max(0.0, float(a.max() - lat) * 1e3 / 60.0988 - sampling)
    return {
        "samples_frames": [round(float(x), 3) for x in samples],
        "presses": len(samples),
        "discarded": discarded,
        "latency_frames": round(lat, 3),
        "median_frames": round(float(np.median(a)), 3),
        "max_frames": round(float(a.max()), 3),
        "jitter_ms": round(jitter, 3),
        "note": "samples = latency + sampling delay (0..1 capture period) + jitter; "
        "latency_frames is the smallest sample: put it in the profile's timing.latency_frames",
    }
