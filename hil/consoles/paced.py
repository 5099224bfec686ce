"""What the simulated console and the emulator share: a console that runs on its own frame clock,
and the capture card that watches it (docs/RUN.md, "Consoles").

- :class:`PacedConsole`: the console's events (frame g's controller reads at ``g * T``, its latch
  window's close ``window_us`` later) run in time order up to a console time by ``_advance_to``.
  In **lockstep** (``hil run --fast``) only the capture moves it: nothing happens while the
  runtime works, so runs are deterministic. In **real time** (the default) a thread paces it to
  ``time.monotonic_ns`` and never waits for the host, as a console does; how late each event
  ran (the thread's wake-up and the emulation) is measured (:class:`Pacing`).
- :class:`ChainCapture`: the capture card. calibration's TimingModel says which console frame
  each captured frame shows and when the host receives it (latency, jitter, rate conversion,
  drops, repeats); CaptureModel degrades the picture. In real time a thread makes each captured
  frame once the console has shown it and releases it at its arrival time; the host gets the
  newest (a frame it did not read in time is gone, as with a device). Injected faults
  (:class:`CaptureFault`) drop, repeat or hold back frames.

Times: console time is ns since the console's frame 0 began (``T`` = 1e9 / 60.0988); the
runtime's clock (``now_ns``) is ``time.monotonic_ns`` in real time and the console time plus a
constant in lockstep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from calibration import CaptureModel, Profile, TimingModel
from hil.consoles.base import CaptureError, Frame, NewestFrame

# Pacing lateness is kept in 0.1 ms bins up to this many ms (the last bin holds the rest).
PACING_BINS_MS = 200.0
# A burst's frames reach the host this far apart (s): USB delivers a held frame in well under 1 ms.
BURST_GAP_S = 0.0005


class Pacing:
    """How late a real-time console ran its events: each event's start minus its due time on
    ``time.monotonic_ns`` (ms), in 0.1 ms bins; ``report()`` gives n, p50, p99, max and how
    many events ran a whole frame (16.6 ms) late or more. Empty in lockstep."""

    def __init__(self) -> None:
        self.bins = np.zeros(int(PACING_BINS_MS * 10) + 1, np.int64)
        self.n = 0
        self.max_ms = 0.0
        self.over_frame = 0

    def add(self, late_ms: float) -> None:
        late_ms = max(0.0, late_ms)
        self.n += 1
        self.max_ms = max(self.max_ms, late_ms)
        self.over_frame += late_ms >= 1e3 / 60.0988
        self.bins[min(int(late_ms * 10), len(self.bins) - 1)] += 1

    def report(self) -> dict[str, Any]:
        if not self.n:
            return {"events": 0}
        cum = np.cumsum(self.bins)

        def pct(q: float) -> float:
            return round(float(np.searchsorted(cum, q * self.n)) / 10, 1)

        return {
            "events": self.n,
            "late_ms_p50": pct(0.5),
            "late_ms_p99": pct(0.99),
            "late_ms_max": round(self.max_ms, 1),
            "events_a_frame_late": int(self.over_frame),
        }


class PacedConsole:
    """Base of the consoles that run on their own frame clock (the module docstring).

    A subclass implements :meth:`_next_event_ns` (the console time of its next event) and
    :meth:`_advance_to` (runs every event up to a console time, under ``self._lock``), and
    calls :meth:`_init_pacing` in its constructor. ``lockstep``: the console waits for the
    host (``hil run --fast``); False: it runs in real time from :meth:`start`."""

    realtime: bool

    def _init_pacing(self, realtime: bool) -> None:
        self.realtime = bool(realtime)
        self._lock = threading.RLock()
        self._now_ns = 0  # console time reached (lockstep)
        self._started_ns = time.monotonic_ns()
        self._stop = threading.Event()
        self.pacing = Pacing()
        self._pacer: threading.Thread | None = None
        if self.realtime:
            self._pacer = threading.Thread(target=self._pace, name="console", daemon=True)

    @property
    def lockstep(self) -> bool:
        """True: the console waits for the host (its time moves only when the capture is
        read); False: it runs in real time."""
        return not self.realtime

    def _init_faults(self, faults: Sequence[Any]) -> None:
        """The controller-link and host faults to inject (hil.args.FaultSpec: ``usb_stall``,
        ``unplug``, ``starve``), each from its console frame on (:meth:`_fault_tick`)."""
        self._faults = sorted(faults, key=lambda f: f.frame)
        self._replug_at: float | None = None  # console time (ns) to plug the controller back
        self.fault_counts: dict[str, int] = {}

    def _fault_tick(self, g: int, t_ns: float) -> bool:
        """Injects the faults due at console frame ``g`` (console time ``t_ns``); called by
        the subclass as each frame begins, under its lock. True when the console was reset
        (its frames then run at another phase: the caller re-reads their times)."""
        was_reset = False
        while self._faults and self._faults[0].frame <= g:
            f = self._faults.pop(0)
            self.fault_counts[f.kind] = self.fault_counts.get(f.kind, 0) + 1
            if f.kind == "reset":
                self.console_reset(t_ns, f.amount * 1e6)
                was_reset = True
            elif f.kind == "usb_stall":
                self.device.stall(f.amount / 1e3)
            elif f.kind == "unplug":
                self.unplug()
                self._replug_at = t_ns + f.amount * 1e6
            elif f.kind == "starve":
                self.capture.starve(f.amount / 1e3)
        if self._replug_at is not None and t_ns >= self._replug_at:
            self._replug_at = None
            self.replug()
        return was_reset

    def console_reset(self, t_ns: float, shift_ns: float) -> None:
        """The console's RESET at console time ``t_ns``; its frames restart ``shift_ns`` later
        than the old phase would have them."""
        raise NotImplementedError

    device: Any
    capture: Any

    def unplug(self) -> None:
        raise NotImplementedError

    def replug(self) -> str:
        raise NotImplementedError

    def _next_event_ns(self) -> float:
        raise NotImplementedError

    def _advance_to(self, t_ns: float) -> None:
        raise NotImplementedError

    def _start_pacing(self) -> None:
        """The console clock's 0 is now; in real time the pacing thread starts."""
        self._started_ns = time.monotonic_ns()
        if self._pacer is not None and not self._pacer.is_alive():
            self._pacer.start()

    def host_ns(self, console_ns: float) -> int:
        """Console time (ns since frame 0 began) -> the runtime's clock (ns)."""
        return self._started_ns + int(round(console_ns))

    def console_ns(self) -> float:
        """The console time now: the wall clock's in real time, the time reached in lockstep."""
        if self.realtime:
            return float(time.monotonic_ns() - self._started_ns)
        return float(self._now_ns)

    def now_ns(self) -> int:
        """The runtime's clock: ``time.monotonic_ns`` in real time, the console's own time in
        lockstep (the runtime's work then takes no console time)."""
        if self.realtime:
            return time.monotonic_ns()
        return self._started_ns + self._now_ns

    def _pace(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                due = self._next_event_ns()
            wait = (self._started_ns + due - time.monotonic_ns()) / 1e9
            if wait > 0:
                self._stop.wait(wait)
                continue
            self.pacing.add(-wait * 1e3)
            try:
                self._advance_to(due)
            except Exception as exc:  # noqa: BLE001 - the console died: the capture says so
                self.failure = exc
                self._stop.set()
                return

    failure: BaseException | None = None

    def _stop_pacing(self) -> None:
        self._stop.set()
        if self._pacer is not None and self._pacer.is_alive():
            self._pacer.join(timeout=2)


class Shown(Protocol):
    """What a paced console shows its capture card."""

    realtime: bool
    failure: BaseException | None
    _lock: threading.RLock

    def _advance_to(self, t_ns: float) -> None: ...

    def host_ns(self, console_ns: float) -> int: ...

    def console_ns(self) -> float: ...

    def shown(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        """The picture scanned out in display frame ``g`` (RGB uint8 [240, 256, 3]) and its
        ground truth (JSON-ready but for ``facts``). Raises KeyError when frame g is not
        complete yet or no longer kept."""
        ...

    def picture_status(self, g: int) -> int:
        """0: frame g's picture is not whole yet (frame g + 1 has not begun); 1: it is whole
        and kept; -1: it is gone (the console keeps only its last few hundred frames)."""
        ...


@dataclass(frozen=True)
class CaptureFault:
    """A capture-card fault injected in real time (``hil run --fault``), from console time
    ``at_frame`` (display frames): ``drop`` (``frames`` captured frames never reach the host),
    ``repeat`` (each of the next ``frames`` deliveries repeats the picture before it, as a card
    whose clock beats the console's), ``burst`` (the card holds every frame for ``ms``
    milliseconds, then delivers them at once, as UVC does after a stall: each held frame is
    stamped with its late arrival)."""

    at_frame: int
    kind: str
    frames: int = 1
    ms: float = 0.0

    KINDS = ("drop", "repeat", "burst")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"capture fault must be one of {', '.join(self.KINDS)}")


class ChainCapture:
    """A paced console seen through a capture Profile (the CaptureSource interface of
    hil.consoles.base): see the module docstring. ``console``: the paced console.
    ``max_frames``: console frames the capture schedule covers (the capture ends after them:
    CaptureError). ``capture_seed``: seeds the timing model and the noise. ``faults``:
    CaptureFaults (real time only).

    Each Frame's ``truth``: the console's (``shown``) plus ``arrival_ns`` (the timing model's
    host time), ``device_index``, ``odd_frame`` (the console frame on the odd lines) and
    ``card_repeat`` (the card sent its previous picture again: CaptureSchedule.repeat)."""

    def __init__(
        self,
        console: Shown,
        profile: Profile,
        *,
        name: str,
        max_frames: int,
        capture_seed: int = 0,
        faults: Sequence[CaptureFault] = (),
    ) -> None:
        self.console = console
        self.profile = profile
        self.name = name
        self.model = CaptureModel(profile, seed=capture_seed)
        timing = TimingModel(profile.timing, seed=capture_seed, combing=profile.artifacts.combing)
        self.timing = timing
        self.schedule = timing.for_console_frames(max_frames)
        self.next = 0
        self.skipped = 0
        self.delivered = 0
        self.faults = sorted(faults, key=lambda f: f.at_frame)
        self.fault_counts: dict[str, int] = {}
        self._cache: tuple[int, np.ndarray, dict[str, Any]] | None = None  # the last picture
        self._slot = NewestFrame()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._ended: str | None = None
        self._starve_s = 0.0  # the next newest() call blocks its caller this long
        self._sink: Any = None  # where frames go in a console process (start_delivery)

    # ---- making a captured frame ----------------------------------------------------------

    def _picture(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        if self._cache is None or self._cache[0] != g:
            self._cache = (g, *self.console.shown(g))
        return self._cache[1], self._cache[2]

    def _take(self, k: int) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
        """The console's picture(s) and truth for captured frame ``k`` (the console's lock
        held by the caller: only for this, not for the degradation, which takes longer than
        a frame on a slow machine)."""
        sched = self.schedule
        g = int(sched.console_frame[k])
        picture, truth = self._picture(g)
        previous = None
        if self.profile.artifacts.combing:
            odd = int(sched.odd_frame[k])
            previous = picture if odd == g else self.console.shown(odd)[0]
        return picture, previous, truth

    def _make(
        self,
        k: int,
        taken: tuple[np.ndarray, np.ndarray | None, dict[str, Any]],
        encoded: bool = False,
    ) -> Frame:
        """Captured frame ``k`` of the schedule from what :meth:`_take` took. ``encoded``: its
        image as the card sends it (an MJPEG profile's JPEG bytes, calibration.forward.decode
        makes the picture)."""
        sched = self.schedule
        picture, previous, truth = taken
        image = self.model(picture, previous=previous, encoded=encoded)
        t = self.console.host_ns(float(sched.time_ns[k]))
        truth = dict(truth)
        truth.update(
            arrival_ns=t,
            device_index=int(sched.device_index[k]),
            odd_frame=int(sched.odd_frame[k]),
            card_repeat=bool(sched.repeat[k]),
        )
        return Frame(image, t, k, truth)

    # ---- the CaptureSource interface --------------------------------------------------------

    def newest(self, timeout_s: float) -> Frame | None:
        """Lockstep: the next captured frame, the console run to its arrival time first. Real
        time: the newest frame released and not yet returned (None after ``timeout_s``).
        Raises CaptureError once the schedule is used up or the console has failed."""
        c = self.console
        if self._starve_s > 0:  # a starved host: its loop gets no CPU meanwhile
            time.sleep(self._starve_s)
            self._starve_s = 0.0
        if not c.realtime:
            if self.next >= len(self.schedule):
                raise CaptureError(f"the {self.name} capture reached its last frame (--frames)")
            k = self.next
            c._advance_to(float(self.schedule.time_ns[k]))
            with c._lock:
                taken = self._take(k)
            frame = self._make(k, taken)
            self.next += 1
            self.delivered += 1
            return frame
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="capture", daemon=True)
            self._thread.start()
        return self._slot.take(timeout_s, lambda: self._ended)

    def shift_phase(self, at_ns: float, shift_ns: float) -> None:
        """The console's frames run ``shift_ns`` later from console time ``at_ns`` on (a
        RESET restarts its video timing): the frames the card samples from then on show the
        frame whose output is complete at the sampling instant on the new phase."""
        t = self.timing
        sched = self.schedule
        tc = 1.0 / t.timing.console_hz
        sample_s = tc + t.phase_s + sched.device_index / t.timing.capture_hz
        later = sample_s * 1e9 >= at_ns
        shown = np.floor((sample_s - shift_ns / 1e9) / tc).astype(np.int64) - 1
        sched.console_frame[later] = shown[later]
        sched.odd_frame[later] = (np.maximum(shown - 1, 0) if t.combing else shown)[later]

    def starve(self, seconds: float) -> None:
        """A host starved of CPU: the runtime's next call of :meth:`newest` blocks for
        ``seconds`` (the console and the capture run on meanwhile)."""
        if self._sink is not None:
            self._sink.starve(float(seconds))
        else:
            self._starve_s = float(seconds)

    def start_delivery(self, sink: Any) -> None:
        """Real time, in a console process (hil.consoles.process): every frame goes to
        ``sink.frame(frame)`` as the card sends it (``image`` an MJPEG profile's JPEG bytes),
        the end of the capture to ``sink.end(message)``, a starved host to
        ``sink.starve(seconds)``; :meth:`newest` is not used. Starts the delivery now."""
        self._sink = sink
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)
        self._thread.start()

    def _end(self, message: str) -> None:
        if self._sink is not None:
            self._sink.end(message)
        self._ended = message
        self._slot.wake()

    def _run(self) -> None:
        try:
            self._deliver()
        except Exception as exc:  # noqa: BLE001 - said to the runtime as the capture's end
            self._end(f"the {self.name} capture failed: {exc}")

    def _deliver(self) -> None:
        c = self.console
        sched = self.schedule
        held: list[Frame] = []  # a burst fault's frames, released together
        burst_until = -1.0  # console time (ns) the card holds frames until
        repeat_left = drop_left = 0
        faults = list(self.faults)
        previous: Frame | None = None
        k = -1
        while k + 1 < len(sched):
            k += 1
            if self._stop.is_set():
                return
            # Behind (making a frame costs more than a frame on this host): frames whose
            # successor has already arrived would only be replaced unread.
            now = time.monotonic_ns()
            while k + 1 < len(sched) and c.host_ns(float(sched.time_ns[k + 1])) <= now:
                k += 1
                self.skipped += 1
            g = int(sched.console_frame[k])
            while faults and faults[0].at_frame <= g:
                f = faults.pop(0)
                self.fault_counts[f.kind] = self.fault_counts.get(f.kind, 0) + 1
                if f.kind == "drop":
                    drop_left = f.frames
                elif f.kind == "repeat":
                    repeat_left = f.frames
                else:
                    burst_until = c.console_ns() + f.ms * 1e6
            while not self._stop.is_set() and c.picture_status(g) == 0:
                if c.failure is not None:
                    self._end(f"the console stopped: {c.failure}")
                    return
                self._stop.wait(0.001)
            with c._lock:
                if c.picture_status(g) != 1:
                    # Starved for longer than the console keeps pictures (a loaded host): the
                    # frame is lost, as a capture card drops the frames nobody read in time.
                    self.skipped += 1
                    continue
                taken = self._take(k)
            frame = self._make(k, taken, encoded=self._sink is not None)
            if drop_left > 0:
                drop_left -= 1
                continue
            if repeat_left > 0 and previous is not None:
                repeat_left -= 1
                frame = Frame(previous.image, frame.time_ns, k, previous.truth)
            previous = frame
            wait = (frame.time_ns - time.monotonic_ns()) / 1e9
            if wait > 0 and self._stop.wait(wait):
                return
            if c.console_ns() < burst_until:
                held.append(frame)
                continue
            for h in held:  # the stall is over: the held frames arrive at once, oldest first
                self._release(Frame(h.image, time.monotonic_ns(), h.index, h.truth))
                self._stop.wait(BURST_GAP_S)
            held = []
            self._release(frame)
        self._end(f"the {self.name} capture reached its last frame (--frames)")

    def _release(self, frame: Frame) -> None:
        if self._sink is not None:
            self.delivered += 1
            self._sink.frame(frame)
            return
        self.skipped += self._slot.put(frame)
        self.delivered += 1

    def missed(self) -> int:
        """Captured frames that never reached the host's loop (dropped behind a newer one)."""
        return self.skipped

    def describe(self) -> dict[str, Any]:
        """The mode and counters, JSON-ready."""
        p = self.profile
        return {
            "source": self.name,
            "profile": p.name,
            "width": p.geometry.width,
            "height": p.geometry.height,
            "capture_hz": p.timing.capture_hz,
            "latency_frames": p.timing.latency_frames,
            "jitter_ms": p.timing.jitter_ms,
            "delivered": self.delivered,
            "skipped": self.skipped,
            "realtime": self.console.realtime,
            "faults": dict(self.fault_counts),
        }

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=2)
