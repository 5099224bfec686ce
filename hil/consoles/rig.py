"""The real rig: a console seen through a capture card, its controller port the firmware's serial
port (hil.consoles.base.Console), and the capture sources behind ``newest(timeout_s) -> Frame``.

- :class:`RigConsole`: the capture (a device, or a video file paced in real time), the serial
  port of the RP2040, ``time.monotonic_ns``; a level starts with Start on the options screen
  the user set (the game's chain after a stage clear); the console cannot be reset.
- :class:`DeviceCapture`: a capture card through OpenCV (V4L2 on Linux): MJPG requested where
  the device offers it, the buffer size set to 1, the mode actually negotiated read back and
  reported, a reader thread that keeps only the newest frame, a clear message and reconnection
  attempts with backoff when the device vanishes (unplugged).
- :class:`FileCapture`: a video file, one frame per call (lockstep) or paced at its frame rate.

Times are the runtime clock's nanoseconds (``time.monotonic_ns`` for real devices).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from hil.consoles.base import (
    CaptureError,
    CaptureSource,
    Frame,
    LevelEnd,
    NewestFrame,
    StartPresses,
    start_with_pad,
    versus_round_start,
)

Clock = Callable[[], int]  # ns


def fourcc_str(code: float | int) -> str:
    """OpenCV's CAP_PROP_FOURCC number -> its four characters ("MJPG", "YUYV")."""
    c = int(code)
    return "".join(chr((c >> (8 * i)) & 0xFF) for i in range(4)).strip("\x00") or "?"


class DeviceCapture:
    """A capture card (``/dev/video0``, or an index) through OpenCV; see the module docstring.

    width, height, fps: the mode to ask for (capture pixels, Hz); fourcc: the pixel format to
    ask for first ("MJPG"; the device may refuse and deliver another, which ``describe``
    reports). reconnect: keep trying to reopen a lost device (backoff 0.25 s doubling to 4 s).
    on_event: called with a dict for each notable event (opened, lost, reconnect attempt).
    Raises CaptureError when the device cannot be opened at all.
    """

    def __init__(
        self,
        device: str | int,
        *,
        width: int = 1280,
        height: int = 720,
        fps: float = 60.0,
        fourcc: str = "MJPG",
        reconnect: bool = True,
        clock: Clock = time.monotonic_ns,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.name = f"device {device}"
        self.device = device
        self.request: dict[str, Any] = {
            "width": width,
            "height": height,
            "fps": fps,
            "fourcc": fourcc,
        }
        self.reconnect = reconnect
        self.clock = clock
        self.on_event = on_event or (lambda _e: None)
        self.mode: dict[str, Any] = {}
        self.delivered = 0
        self.skipped = 0
        self.lost = 0
        self._cap: Any = None
        self._slot = NewestFrame()
        self._error: str | None = None
        self._stop = threading.Event()
        self._open()
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        backend = cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY
        cap = cv2.VideoCapture(self.device, backend)
        if not cap.isOpened():
            cap.release()
            raise CaptureError(f"cannot open capture device {self.device} (plugged in? busy?)")
        r = self.request
        cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter.fourcc(*str(r["fourcc"])))
        cap.set(cv2.CAP_PROP_FRAME_WIDTH, float(r["width"]))
        cap.set(cv2.CAP_PROP_FRAME_HEIGHT, float(r["height"]))
        cap.set(cv2.CAP_PROP_FPS, float(r["fps"]))
        cap.set(cv2.CAP_PROP_BUFFERSIZE, 1.0)  # the driver queues one frame: no backlog
        self.mode = {
            "width": int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            "height": int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            "fps": float(cap.get(cv2.CAP_PROP_FPS)),
            "fourcc": fourcc_str(cap.get(cv2.CAP_PROP_FOURCC)),
            "buffer_size": int(cap.get(cv2.CAP_PROP_BUFFERSIZE)),
            "backend": cap.getBackendName(),
        }
        differs = [k for k in ("width", "height", "fourcc") if self.mode[k] != r[k]]
        self._cap = cap
        self.on_event({"event": "capture_opened", "mode": self.mode, "differs_from": differs})

    def _run(self) -> None:
        backoff = 0.25
        while not self._stop.is_set():
            if self._cap is None:
                if not self.reconnect:
                    return
                self.on_event({"event": "capture_reconnect", "device": str(self.device)})
                try:
                    self._open()
                    backoff = 0.25
                except CaptureError:
                    self._stop.wait(backoff)
                    backoff = min(backoff * 2, 4.0)
                    continue
            ok, image = self._cap.read()
            now = self._timestamp(self.clock())
            if not ok or image is None:
                self.lost += 1
                msg = f"capture device {self.device} lost (unplugged?); reconnecting"
                self._error = msg
                self._slot.wake()
                self.on_event({"event": "capture_lost", "message": msg})
                self._cap.release()
                self._cap = None
                continue
            self._error = None
            self.skipped += self._slot.put(Frame(image, now, self.delivered))
            self.delivered += 1

    def _timestamp(self, now_ns: int) -> int:
        """The driver's timestamp of the buffer when it is on our clock (V4L2 stamps buffers
        with CLOCK_MONOTONIC, which OpenCV reports as CAP_PROP_POS_MSEC): it excludes the
        decode and the wait for this thread. Otherwise the time read() returned."""
        if self._cap is None or self.clock is not time.monotonic_ns:
            return now_ns
        stamp = int(float(self._cap.get(cv2.CAP_PROP_POS_MSEC)) * 1e6)
        return stamp if 0 <= now_ns - stamp < 500_000_000 else now_ns

    def newest(self, timeout_s: float) -> Frame | None:
        def failed() -> str | None:
            if self._thread.is_alive():
                return None
            return self._error or f"capture device {self.device} stopped"

        return self._slot.take(timeout_s, failed)

    @property
    def error(self) -> str | None:
        """The message of the current outage, None while frames flow."""
        return self._error

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.name,
            "requested": self.request,
            "negotiated": self.mode,
            "delivered": self.delivered,
            "skipped": self.skipped,
            "lost": self.lost,
        }

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class FileCapture:
    """A video file as a capture source (``hil run --capture FILE``, ``hil replay VIDEO``).
    ``realtime``: frames are released at the file's frame rate (newest-only, like a device);
    else each call returns the next frame (lockstep). ``fps``: the file's frame rate, else
    ``default_fps`` where the file states none; ``count``: its frames as the container states
    them (None when unknown). ``time_ns`` of frame i is ``start_ns + i / fps``. Raises
    CaptureError for a file OpenCV cannot open; ``newest`` raises it at the end of the file."""

    def __init__(
        self,
        path: str | Path,
        *,
        realtime: bool = False,
        clock: Clock = time.monotonic_ns,
        default_fps: float = 60.0,
    ) -> None:
        self.name = f"file {path}"
        self.path = Path(path)
        if not self.path.is_file():
            raise CaptureError(f"no video file at {self.path}")
        self._cap = cv2.VideoCapture(str(self.path))
        if not self._cap.isOpened():
            raise CaptureError(f"OpenCV cannot open {self.path} as a video")
        self.fps = float(self._cap.get(cv2.CAP_PROP_FPS)) or default_fps
        self.count = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT)) or None
        self.realtime = realtime
        self.clock = clock
        self.start_ns = clock()
        self.index = 0
        self.skipped = 0

    def _read(self) -> np.ndarray:
        ok, image = self._cap.read()
        if not ok or image is None:
            raise CaptureError(f"end of {self.path} after {self.index} frames")
        return image

    def newest(self, timeout_s: float) -> Frame | None:
        if self.realtime:
            due = int((self.clock() - self.start_ns) * self.fps / 1e9)
            while self.index < due:  # frames that went by while the caller was busy
                self._read()
                self.index += 1
                self.skipped += 1
            wait_ns = self.start_ns + int(self.index * 1e9 / self.fps) - self.clock()
            if wait_ns > timeout_s * 1e9:
                time.sleep(timeout_s)
                return None
            if wait_ns > 0:
                time.sleep(wait_ns / 1e9)
        image = self._read()
        frame = Frame(image, self.start_ns + int(self.index * 1e9 / self.fps), self.index)
        self.index += 1
        return frame

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.name,
            "width": int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            "height": int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            "fps": self.fps,
            "delivered": self.index,
            "skipped": self.skipped,
        }

    def close(self) -> None:
        self._cap.release()


class RigConsole:
    """The real console (hil.consoles.base.Console): ``capture`` a capture source (a device or
    a video file), ``port`` the firmware's serial port, ``latency_frames`` / ``jitter_ms`` the
    calibrated capture chain (the Profile's, or a measured latency). The console has no RESET
    the host can press: a level that is not the first nor the game's next one ends the run."""

    name = "rig"
    lockstep = False  # a console never waits

    def __init__(
        self,
        capture: CaptureSource,
        port: str,
        latency_frames: float,
        jitter_ms: float,
        *,
        versus: bool = False,
        both: bool = False,
    ) -> None:
        self.capture = capture
        self._port = port
        self.latency_frames = latency_frames
        self.jitter_ms = jitter_ms
        self.versus = versus  # the Pico on port 2, a person on port 1 (docs/VERSUS.md)
        self.both = both  # ... or the Pico on both ports (bot against bot)

    @property
    def port(self) -> str:
        return self._port

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def start(self) -> None:
        pass

    def close(self) -> None:
        self.capture.close()

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """Start on the options screen (the user set it), then the game's chain. Raises
        CannotStart for any other level. Two players (``versus``): a round after a match's
        first is begun by the person's Start on port 1, when they like: nothing is pressed,
        and the tracker is told that the Start's frame is not known (``start_unseen``); with the
        bot on both ports (``both``) it presses Start on port 1 (versus_round_start)."""
        if self.both:
            return versus_round_start(first_frame, previous)
        if self.versus:
            return StartPresses(first_frame, [0], first_frame, start_unseen=True)
        return start_with_pad(level, speed, first_frame, previous)

    def report(self) -> dict[str, Any]:
        return {}
