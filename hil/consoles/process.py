"""A real-time console in a process of its own, as a console and a capture card are hardware of
their own beside the host (docs/RUN.md, "Consoles").

:class:`ConsoleProcess` runs a paced console (hil.consoles.sim.SimConsole, hil.consoles.emu
.EmuRun) in real time in a child process: the game, the firmware core behind its
pseudo-terminal (the host opens it as it opens /dev/ttyACM0) and the capture card. In one
process the three shared the host's interpreter lock with the loop: the emulator's frames ran
59 ms late at the median and the reader took 8.7 ms instead of 1.2 (real game, level 5 MED).

The card hands each frame over as a UVC card does: an MJPEG profile's frame as its JPEG bytes,
any other as BGR pixels, into one slot of a ring of shared memory (:data:`SLOTS` slots), and a
message on a pipe (slot, sequence number, index, arrival time, truth). The host side
(:class:`ProcessCapture`) takes the newest message, copies its slot (a sequence number before
and after the copy tells a slot the card overwrote meanwhile) and decodes the JPEG, as
hil.consoles.rig.DeviceCapture decodes an MJPEG card's frames with OpenCV.

Time is ``time.monotonic_ns`` in both processes (one clock on one machine). The child asks for a
higher scheduling priority (``nice`` -10; root only): the console and the card are not slowed
by what else runs on the host, as hardware is not; whether it got it is in the report
(``console_priority``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from calibration.forward import decode
from hil.consoles.base import CaptureError, Frame, LevelEnd, StartPresses

SLOTS = 8  # frames in the ring (133 ms at 60 Hz): the host copies a slot out at once
HEAD_BYTES = 16  # per slot: sequence number, payload bytes (uint64 each), then the payload
START_TIMEOUT_S = 120.0  # building the console (loading the ROM, the first screens)
PRIORITY = -10  # nice value the console process asks for
SWITCH_INTERVAL_S = 0.0005  # the console process's interpreter switch interval


class ConsoleProcessError(RuntimeError):
    """The console process died or did not answer."""


class _Sink:
    """The card's side of the ring (in the console process): ChainCapture.start_delivery's
    sink."""

    def __init__(self, conn: Connection, ring: np.ndarray) -> None:
        self.conn = conn
        self.ring = ring
        self.seq = 0

    def frame(self, frame: Frame) -> None:
        payload = np.ascontiguousarray(frame.image).reshape(-1).view(np.uint8)
        n = payload.size
        if n + HEAD_BYTES > self.ring.shape[1]:
            self.end(f"a captured frame of {n} bytes does not fit the ring's slots")
            return
        self.seq += 1
        slot = self.seq % SLOTS
        head = self.ring[slot, :HEAD_BYTES].view(np.uint64)
        head[0] = 0  # being written
        self.ring[slot, HEAD_BYTES : HEAD_BYTES + n] = payload
        head[1] = n
        head[0] = self.seq
        shape = np.shape(frame.image)
        meta = (slot, self.seq, frame.index, frame.time_ns, shape, frame.truth)
        self.conn.send(("frame", meta))

    def end(self, message: str) -> None:
        self.conn.send(("end", message))

    def starve(self, seconds: float) -> None:
        self.conn.send(("starve", seconds))


def _serve(
    build: Callable[[], Any],
    ctrl: Connection,
    frames: Connection,
    shm_name: str,
    slot_bytes: int,
) -> None:
    """The console process: builds the console, serves the host's requests until "close"."""
    # Ctrl-C and a closed terminal reach the whole process group: the host handles them and
    # closes this process itself (after asking for its report).
    for sig in (signal.SIGINT, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            signal.signal(sig, signal.SIG_IGN)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)
        priority = PRIORITY
    except OSError:
        priority = os.getpriority(os.PRIO_PROCESS, 0)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:
        # One core for the console and its card (they need ~70 % of one): the host keeps
        # the others, as it would beside a real console. Without this the console's threads
        # took both cores at once now and then and the host's loop waited.
        os.sched_setaffinity(0, {cpus[-1]})
    # The pacing thread must run within a fraction of a frame of its due time; the capture
    # thread's Python holds the interpreter lock for up to the switch interval (5 ms by
    # default) before it hands it over.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    shm = shared_memory.SharedMemory(name=shm_name)  # the host owns (and unlinks) the ring
    try:
        console = build()
    except BaseException as exc:  # noqa: BLE001 - handed to the host, which raises it
        ctrl.send(("error", exc))
        shm.close()
        return
    sink = _Sink(frames, np.ndarray((SLOTS, slot_bytes), np.uint8, buffer=shm.buf))
    ctrl.send(("ready", {"port": console.port, "priority": priority}))
    try:
        while True:
            try:
                cmd, args = ctrl.recv()
            except (EOFError, OSError):  # the host is gone
                break
            try:
                if cmd == "close":
                    break
                if cmd == "start":
                    console.start()
                    console.capture.start_delivery(sink)
                    reply: Any = console._started_ns
                elif cmd == "port":
                    reply = console.port
                elif cmd == "start_level":
                    reply = console.start_level(*args)
                elif cmd == "report":
                    reply = console.report()
                    reply.setdefault(console.name, {})["console_priority"] = priority
                elif cmd == "describe":
                    reply = console.capture.describe()
                else:
                    raise ValueError(f"unknown request {cmd!r}")
                ctrl.send(("ok", reply))
            except Exception as exc:  # noqa: BLE001 - the host raises it
                ctrl.send(("error", exc))
    finally:
        console.close()
        sink.ring = None  # type: ignore[assignment]
        shm.close()
        try:
            ctrl.send(("ok", None))
        except (OSError, ValueError):
            pass


class ConsoleProcess:
    """A Console (hil.consoles.base) whose game, controller and capture card run in real time
    in a child process (module docstring). ``build``: a picklable callable that makes the
    paced console in the child (realtime=True). ``name``, ``latency_frames``, ``jitter_ms``:
    as the console's. ``frame_bytes``: the largest frame the card sends (BGR bytes of the
    profile's size). Raises what ``build`` raised in the child (RomError, EmuError,
    ValueError), ConsoleProcessError when the child dies or does not start."""

    lockstep = False  # a console in a process of its own runs in real time

    def __init__(
        self,
        build: Callable[[], Any],
        *,
        name: str,
        latency_frames: float,
        jitter_ms: float,
        frame_bytes: int,
        capture_name: str,
    ) -> None:
        self.name = name
        self.latency_frames = latency_frames
        self.jitter_ms = jitter_ms
        self._report: dict[str, Any] | None = None
        self._slot_bytes = frame_bytes + HEAD_BYTES
        self._shm = shared_memory.SharedMemory(create=True, size=self._slot_bytes * SLOTS)
        ctx = mp.get_context("spawn")
        self._ctrl, child_ctrl = ctx.Pipe()
        frames_in, frames_out = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(
            target=_serve,
            args=(build, child_ctrl, frames_out, self._shm.name, self._slot_bytes),
            name=f"{name}-console",
            daemon=True,
        )
        self._proc.start()
        child_ctrl.close()
        frames_out.close()
        try:
            info = self._reply(START_TIMEOUT_S)
        except BaseException:
            self._shutdown()
            raise
        self.priority = info["priority"]
        ring = np.ndarray((SLOTS, self._slot_bytes), np.uint8, buffer=self._shm.buf)
        self.capture = ProcessCapture(frames_in, ring, capture_name, self)

    # ---- requests to the child ----------------------------------------------------------------

    def _reply(self, timeout_s: float) -> Any:
        if not self._ctrl.poll(timeout_s):
            raise ConsoleProcessError(f"the {self.name} console did not answer in {timeout_s} s")
        try:
            kind, value = self._ctrl.recv()
        except (EOFError, OSError):
            raise ConsoleProcessError(f"the {self.name} console process died") from None
        if kind == "error":
            raise value
        return value

    def _ask(self, cmd: str, *args: Any, timeout_s: float = 30.0) -> Any:
        if not self._proc.is_alive():
            raise ConsoleProcessError(f"the {self.name} console process died")
        self._ctrl.send((cmd, args))
        return self._reply(timeout_s)

    # ---- the Console interface ----------------------------------------------------------------

    @property
    def port(self) -> str:
        """The controller's pseudo-terminal (a new one after a replug)."""
        return str(self._ask("port"))

    def now_ns(self) -> int:
        return time.monotonic_ns()

    def start(self) -> None:
        """The console runs from now (the emulator's menus, if it drives them, first)."""
        self._ask("start", timeout_s=START_TIMEOUT_S)

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        presses: StartPresses = self._ask("start_level", level, speed, first_frame, previous)
        return presses

    def report(self) -> dict[str, Any]:
        """The console's own report (kept from before :meth:`close`); a console process that
        died says so instead."""
        if self._report is None:
            try:
                self._report = self._ask("report")
            except (ConsoleProcessError, OSError, EOFError) as e:
                return {self.name: {"error": str(e)}}
        return self._report

    def describe_capture(self) -> dict[str, Any]:
        described: dict[str, Any] = self._ask("describe")
        return described

    def close(self) -> None:
        """Stops the console process (its report is kept for :meth:`report`)."""
        if self._proc.is_alive():
            try:
                if self._report is None:
                    self._report = self._ask("report")
                self._ctrl.send(("close", ()))
                self._ctrl.poll(10)
            except (ConsoleProcessError, OSError, EOFError):
                pass
        self._shutdown()

    def _shutdown(self) -> None:
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._ctrl.close()
        capture = getattr(self, "capture", None)
        if capture is not None:
            capture.ring = None  # the ring's view must go before the memory can be closed
        try:
            self._shm.close()
        except BufferError:
            pass
        try:
            self._shm.unlink()
        except FileNotFoundError:
            pass


class ProcessCapture:
    """The host's side of the card in a console process (CaptureSource): ``newest`` takes the
    newest frame announced, copies its slot and decodes it (module docstring)."""

    def __init__(self, conn: Connection, ring: np.ndarray, name: str, console: ConsoleProcess):
        self.conn = conn
        self.ring: np.ndarray | None = ring
        self.name = name
        self.console = console
        self.taken = 0
        self.passed = 0  # announced, never taken: a newer one was there when the host came
        self.overwritten = 0  # announced, but the card had reused the slot before the copy
        self.decode_ms = 0.0
        self._ended: str | None = None
        self._starve_s = 0.0
        self._describe: dict[str, Any] | None = None

    def newest(self, timeout_s: float) -> Frame | None:
        if self._starve_s > 0:  # a starved host: its loop gets no CPU meanwhile
            time.sleep(self._starve_s)
            self._starve_s = 0.0
        deadline = time.monotonic() + timeout_s
        while True:
            if self._ended is not None:
                raise CaptureError(self._ended)
            left = deadline - time.monotonic()
            try:
                if not self.conn.poll(max(0.0, left)):
                    return None
                meta = None
                while self.conn.poll(0):
                    kind, value = self.conn.recv()
                    if kind == "frame":
                        self.passed += meta is not None
                        meta = value
                    elif kind == "starve":
                        self._starve_s = float(value)
                    else:
                        self._ended = str(value)
            except (EOFError, OSError):
                raise CaptureError(f"the {self.name} console process died") from None
            if meta is not None:
                frame = self._copy(*meta)
                if frame is not None:
                    return frame
            elif self._ended is None and left <= 0:
                return None

    def _copy(
        self, slot: int, seq: int, index: int, time_ns: int, shape: tuple[int, ...], truth: Any
    ) -> Frame | None:
        ring = self.ring
        if ring is None:
            raise CaptureError(f"the {self.name} capture is closed")
        head = ring[slot, :HEAD_BYTES].view(np.uint64)
        got, n = int(head[0]), int(head[1])
        data = ring[slot, HEAD_BYTES : HEAD_BYTES + n].copy()
        if got != seq or int(head[0]) != seq:
            self.overwritten += 1
            return None
        t0 = time.perf_counter()
        image = decode(data.reshape(shape))
        self.decode_ms += (time.perf_counter() - t0) * 1e3
        self.taken += 1
        return Frame(image, time_ns, index, truth)

    def missed(self) -> int:
        """Captured frames that never reached the host's loop: dropped by a card that could
        not keep up, passed over for a newer one, overwritten before the host copied them."""
        card = self.describe().get("skipped", 0)
        return int(card) + self.passed + self.overwritten

    def describe(self) -> dict[str, Any]:
        """The card's mode and counters (from the console process while it runs) and the
        host's: frames taken, passed over for a newer one, overwritten before the copy."""
        if self._describe is None or self.console._proc.is_alive():
            try:
                self._describe = self.console.describe_capture()
            except (ConsoleProcessError, OSError, EOFError):
                self._describe = self._describe or {"source": self.name}
        return {
            **self._describe,
            "process": True,
            "taken": self.taken,
            "passed_over": self.passed,
            "overwritten": self.overwritten,
            "decode_ms_mean": round(self.decode_ms / max(self.taken, 1), 3),
        }

    def close(self) -> None:
        self.conn.close()
