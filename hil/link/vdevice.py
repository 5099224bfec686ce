"""A virtual controller: the firmware's C core behind a pseudo-terminal.

``VirtualDevice`` loads ``libnbcore`` (``firmware/core`` compiled for the host by
``firmware/host/CMakeLists.txt`` and installed into this package) with ctypes, opens a
pseudo-terminal, and runs the core on its far end in a thread, so
``hil.link.Link(vdev.port)`` talks to it with pyserial exactly as it talks to
``/dev/ttyACM0``. A simulated or emulated console drives the other side: ``latch(t_us)``
plays one console frame (Dr. Mario's two controller reads, then the end of the latch
window) and returns the button mask the console read on port 1; ``latch_ports`` returns
both ports' (the console latches both at once and reads each on its own line).

Time is the simulated console's clock in microseconds; the core sees host bytes at the
latest console time, so a simulation may run faster or slower than real time. POSIX only
(``os.openpty``).
"""

from __future__ import annotations

import array
import ctypes
import errno
import fcntl
import importlib.resources
import os
import select
import sys
import termios
import threading
import time
import tty
from collections import deque
from collections.abc import Sequence
from pathlib import Path

PIO_WORDS_KEPT = 1024  # newest PIO words a VirtualDevice keeps (consumers read the last few)
DEFAULT_READ_GAP_US = 120  # from one read's latch to the next (Dr. Mario reads twice per NMI)

_LIB_NAMES = {"linux": "libnbcore.so", "darwin": "libnbcore.dylib", "win32": "nbcore.dll"}


class _Config(ctypes.Structure):
    """Mirror of nb_config_t (firmware/core/nb_core.h); size checked against the library."""

    _fields_ = [
        ("window_us", ctypes.c_uint32),
        ("watchdog_ms", ctypes.c_uint32),
        ("boot_count", ctypes.c_uint32),
        ("reset_reason", ctypes.c_uint32),
    ]


def library_path() -> Path:
    """Where ``libnbcore`` is: ``$NB_CORE_LIB`` if set, else inside the installed ``hil``
    package (``pip install -e . --no-build-isolation`` builds and installs it there)."""
    env = os.environ.get("NB_CORE_LIB")
    if env:
        return Path(env)
    name = _LIB_NAMES.get(sys.platform, "libnbcore.so")
    res = importlib.resources.files("hil") / name
    if not res.is_file():
        raise FileNotFoundError(
            f"{name} is not built; run `pip install -e . --no-build-isolation` "
            "(firmware/host/CMakeLists.txt) or set NB_CORE_LIB"
        )
    return Path(str(res))


def load_core(path: Path | None = None) -> ctypes.CDLL:
    """Loads the core library and declares its C signatures (firmware/core/nb_core.h)."""
    lib = ctypes.CDLL(str(path or library_path()))
    vp, u8, u32, u64 = ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64
    sigs = {
        "nb_core_size": ([], u32),
        "nb_config_size": ([], u32),
        "nb_config_default": ([ctypes.POINTER(_Config)], None),
        "nb_init": ([vp, ctypes.POINTER(_Config)], None),
        "nb_latch": ([vp, u64], u8),
        "nb_port_read": ([vp, u8], u8),
        "nb_poll": ([vp, u64, ctypes.POINTER(u32)], ctypes.c_bool),
        "nb_port_word": ([vp, u8], u32),
        "nb_rx": ([vp, ctypes.c_char_p, u32, u64], None),
        "nb_tx": ([vp, ctypes.c_char_p, u32], u32),
        "nb_host_lost": ([vp], None),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    if lib.nb_config_size() != ctypes.sizeof(_Config):
        raise RuntimeError("libnbcore's nb_config_t differs from hil.link.vdevice._Config")
    return lib


class VirtualDevice:
    """The firmware core on a pseudo-terminal; see the module docstring.

    ``window_us`` and ``watchdog_ms`` are the core's start-up settings (the host may
    change them with CONFIG). ``port`` is the path to open with pyserial. Thread-safe:
    the pty thread and the console's calls share one lock around the core.
    """

    def __init__(
        self, *, window_us: int = 5000, watchdog_ms: int = 500, boot_count: int = 1
    ) -> None:
        self._lib = load_core()
        words = (self._lib.nb_core_size() + 7) // 8
        self._core = (ctypes.c_uint64 * words)()  # 8-byte aligned, zeroed
        cfg = _Config()
        self._lib.nb_config_default(ctypes.byref(cfg))
        cfg.window_us, cfg.watchdog_ms, cfg.boot_count = window_us, watchdog_ms, boot_count
        self._lib.nb_init(self._core, ctypes.byref(cfg))
        self._lock = threading.Lock()
        self._now_us = 0
        self._pending = b""  # taken from the core, not yet accepted by the pty
        # The newest words the firmware would put in the PIO FIFO (a long run keeps only the
        # last PIO_WORDS_KEPT: memory stays flat), and how many there were in all.
        self.pio_words: deque[int] = deque(maxlen=PIO_WORDS_KEPT)
        self.pio_words_p2: deque[int] = deque(maxlen=PIO_WORDS_KEPT)  # port 2's, same times
        self.pio_words_total = 0
        self._poll(0)

        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # bytes pass unchanged: no echo, no CR/LF or XON/XOFF
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        self._stop_r, self._stop_w = os.pipe()
        self._closed = False
        self._stall_until = 0.0  # time.monotonic() until which USB passes nothing (a stall)
        # A console in lockstep sets this: its bytes (STATUS) are readable on the host's side
        # before its call returns. The kernel moves bytes written to a pty master to the slave
        # asynchronously (tty_flip_buffer_push), so a host that read right after could miss a
        # STATUS now and then and stamp it a frame later: the frame clock, and the whole run,
        # then differed from one process to the next.
        self.lockstep = False
        self._thread = threading.Thread(target=self._serve, name="vdevice-pty", daemon=True)
        self._thread.start()

    # ---- the console side ---------------------------------------------------------------

    def latch(
        self, frame_time_us: int, reads: int = 2, read_gap_us: int = DEFAULT_READ_GAP_US
    ) -> int:
        """Plays one console frame starting at ``frame_time_us`` (us): ``reads`` controller
        reads ``read_gap_us`` apart, then the end of the latch window, when the firmware
        sends that frame's STATUS and arms the next frame. Returns the mask read on port 1
        (A = 0x80 ... Right = 0x01); every read of a frame gets the same byte."""
        return self.latch_ports(frame_time_us, reads, read_gap_us)[0]

    def latch_ports(
        self, frame_time_us: int, reads: int = 2, read_gap_us: int = DEFAULT_READ_GAP_US
    ) -> tuple[int, int]:
        """:meth:`latch` for both controller ports: returns ``(port 1 mask, port 2 mask)``.
        Raises AssertionError if a port's reads of the frame differ."""
        with self._lock:
            self._poll(frame_time_us)
            masks = [self._latch_ports(frame_time_us + i * read_gap_us) for i in range(reads)]
            window = self.window_us()
            self._poll(frame_time_us + window)
            self._flush(console=True)
        if len(set(masks)) != 1:
            raise AssertionError(f"reads of one frame differ: {masks}")
        return masks[0]

    def read(self, t_us: int) -> int:
        """One controller read (a single latch) at ``t_us``, without advancing past it."""
        with self._lock:
            self._poll(t_us)
            mask = self._latch(t_us)
            self._flush(console=True)
        return mask

    def read_ports(self, t_us: int) -> tuple[int, int]:
        """:meth:`read` for both controller ports: ``(port 1 mask, port 2 mask)`` of one
        latch at ``t_us`` (the console latches both at once)."""
        with self._lock:
            self._poll(t_us)
            masks = self._latch_ports(t_us)
            self._flush(console=True)
        return masks

    def advance(self, t_us: int) -> None:
        """Moves the device clock to ``t_us`` without a latch (closes windows, watchdog)."""
        with self._lock:
            self._poll(t_us)
            self._flush(console=True)

    def window_us(self) -> int:
        """The latch grouping window now in force (us), read from the core's state."""
        return _Config.from_buffer(self._core).window_us  # cfg is nb_core_t's first member

    # ---- lifecycle ---------------------------------------------------------------------

    def stall(self, seconds: float) -> None:
        """A USB stall (an OS or hub hiccup): for ``seconds`` of wall time no byte passes
        either way; the firmware keeps playing its queue, and what the host sent meanwhile
        arrives afterwards, what the firmware sent is kept in its TX buffer (or dropped and
        counted when that is full, as on the RP2040)."""
        self._stall_until = time.monotonic() + float(seconds)

    def _stalled(self) -> float:
        """Seconds of a USB stall still to run (0: none)."""
        return max(0.0, self._stall_until - time.monotonic())

    def unplug(self) -> None:
        """Simulates pulling the USB cable: the pty's far end goes away, and the core does
        what the firmware does when USB goes (nb_host_lost: released from the next frame)."""
        with self._lock:
            self._lib.nb_host_lost(self._core)
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        os.write(self._stop_w, b"x")
        self._thread.join(timeout=2)
        for fd in (self._master, self._slave, self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> VirtualDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals (callers hold self._lock) ----------------------------------------------

    def _latch(self, t_us: int) -> int:
        self._now_us = max(self._now_us, t_us)
        return int(self._lib.nb_latch(self._core, t_us))

    def _latch_ports(self, t_us: int) -> tuple[int, int]:
        first = self._latch(t_us)
        return first, int(self._lib.nb_port_read(self._core, 2))

    def _poll(self, t_us: int) -> None:
        self._now_us = max(self._now_us, t_us)
        word = ctypes.c_uint32()
        if self._lib.nb_poll(self._core, self._now_us, ctypes.byref(word)):
            self.pio_words.append(word.value)
            self.pio_words_p2.append(int(self._lib.nb_port_word(self._core, 2)))
            self.pio_words_total += 1

    def _flush(self, console: bool = False) -> None:
        """Moves the core's outgoing bytes into the pty as far as it accepts them; the rest
        stays in the core's TX buffer, which drops (and counts) what does not fit, as the
        firmware does when the host stops reading. ``console``: called by the console's side;
        with :attr:`lockstep`, it returns once the bytes can be read on the host's side."""
        if self._closed or self._stalled():
            return
        buf = ctypes.create_string_buffer(256)
        while True:
            if not self._pending:
                n = self._lib.nb_tx(self._core, buf, len(buf))
                if not n:
                    return
                self._pending = buf.raw[:n]
            sync = console and self.lockstep
            before = _readable(self._slave) if sync else 0
            try:
                sent = os.write(self._master, self._pending)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):
                    return
                raise
            self._pending = self._pending[sent:]
            if sync:
                _settle(self._slave, before + sent)

    def _serve(self) -> None:
        while True:
            stalled = self._stalled()
            if stalled:  # USB passes nothing: the host's bytes wait in the pty
                try:
                    ready, _, _ = select.select([self._stop_r], [], [], min(stalled, 0.005))
                except (OSError, ValueError):
                    return
                if ready:
                    return
                continue
            try:
                ready, _, _ = select.select([self._master, self._stop_r], [], [], 0.005)
            except (OSError, ValueError):
                return
            if self._stop_r in ready:
                return
            data = b""
            if self._master in ready:
                try:
                    data = os.read(self._master, 4096)
                except BlockingIOError:
                    pass
                except OSError:
                    return
            with self._lock:
                if data:
                    self._lib.nb_rx(self._core, data, len(data), self._now_us)
                self._flush()


def _readable(fd: int) -> int:
    """Bytes waiting to be read on terminal ``fd`` (FIONREAD)."""
    n = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, n)
    except OSError:
        return 0
    return int(n[0])


def _settle(fd: int, want: int, timeout_s: float = 0.05) -> None:
    """Waits (at most ``timeout_s``) until ``want`` bytes can be read on ``fd``."""
    deadline = time.monotonic() + timeout_s
    while _readable(fd) < want and time.monotonic() < deadline:
        time.sleep(0)


# ---- the firmware image itself, emulated ---------------------------------------------------

FIRMWARE_DIR = Path(__file__).resolve().parents[2] / "firmware"
DEFAULT_UF2 = FIRMWARE_DIR / "dist" / "nes_bridge_pico.uf2"
HARNESS = FIRMWARE_DIR / "emu" / "harness.mjs"


class EmulatorError(RuntimeError):
    """The rp2040js harness could not start or stopped unexpectedly."""


class EmulatedFirmware:
    """The committed UF2 running in rp2040js (``firmware/emu/harness.mjs``, Node.js) with a
    simulated NES reading the pad with Dr. Mario's timing; the host side is a TCP bridge to
    the emulated USB CDC, so ``hil.link.Link(dev.port)`` talks to the real firmware image.

    ``cpu_mhz``: the emulated CPU clock (the firmware assumes 125 MHz; lower runs faster
    and leaves the firmware fewer instructions per microsecond). ``frame_us``: NES frame
    spacing (emulated us). ``frames``: stop the NES after this many (None: never).
    ``driven``: no NES of its own; the caller drives the firmware clock and the reads with
    :meth:`read`, :meth:`advance` and :meth:`latch`, VirtualDevice's console-side interface
    (``hil.consoles.sim.SimConsole`` takes it as its ``device``).
    ``boot``: "power_on", "after_uf2_copy" (boot ROM rebooted through the watchdog) or
    "after_watchdog" (the firmware's own watchdog fired).
    ``nes_running``: False keeps the NES off (no latch) until ``command("nes start")``, so
    a host can CONFIG the latch window before the first frame: frames closer together than
    the window (the default 5 ms) are one frame to the firmware.

    ``reads[f]`` is ``(read1, read2)`` of NES frame f on port 1 (1 = pressed, A = 0x80),
    ``reads_p2[f]`` the same frame's on port 2 (the harness reads both ports with Dr.
    Mario's interleaved $4016/$4017 timing); ``events`` lists ``(name, nes_frame, t_us)``.
    Raises EmulatorError if Node.js or the harness's ``npm ci`` is missing, or the firmware
    does not enumerate.
    """

    def __init__(
        self,
        uf2: Path | str = DEFAULT_UF2,
        *,
        cpu_mhz: float = 25.0,
        frame_us: int = 16639,
        frames: int | None = None,
        driven: bool = False,
        boot: str = "power_on",
        nes_running: bool = True,
        start_timeout_s: float = 60.0,
    ) -> None:
        import shutil
        import subprocess

        node = shutil.which("node")
        if node is None:
            raise EmulatorError("Node.js (node) is not installed; firmware/README.md 'Emulator'")
        if not (HARNESS.parent / "node_modules" / "rp2040js").is_dir():
            raise EmulatorError(f"rp2040js is not installed: run `npm ci` in {HARNESS.parent}")
        if not Path(uf2).is_file():
            raise EmulatorError(f"no such UF2: {uf2}")
        cmd = [node, str(HARNESS), "--uf2", str(uf2), "--cpu-mhz", str(cpu_mhz)]
        cmd += ["--frame-us", str(frame_us)] + os.environ.get("NB_EMU_ARGS", "").split()
        if frames is not None:
            cmd += ["--frames", str(frames)]
        if driven:
            cmd.append("--driven")
        if not nes_running:
            cmd.append("--nes-stopped")
        if boot != "power_on":
            cmd.append(
                {
                    "after_uf2_copy": "--boot-after-uf2-copy",
                    "after_watchdog": "--boot-after-watchdog",
                }[boot]
            )
        self.port: str = ""  # pyserial URL of the TCP bridge, set once USB is enumerated
        self.reads: dict[int, tuple[int, int]] = {}
        self.reads_p2: dict[int, tuple[int, int]] = {}
        self._last_frame = -1
        self.events: list[tuple[str, int, int]] = []
        self.done: dict[str, object] | None = None
        self._cv = threading.Condition()
        self._answers: list[list[str]] = []  # "R"/"A" replies of the driven mode
        self.last_read_us: int | None = None  # firmware time the last driven read began
        self.last_read_p2: int | None = None  # port 2's byte on the last driven read
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self._port: int | None = None
        self._reader = threading.Thread(target=self._read_stdout, name="fw-emu", daemon=True)
        self._reader.start()
        with self._cv:
            if not self._cv.wait_for(
                lambda: self._port is not None or self.done is not None, start_timeout_s
            ):
                self.close()
                raise EmulatorError("the emulated firmware did not enumerate on USB")
        if self._port is None:
            raise EmulatorError(f"the harness stopped: {self.events[-3:]}")
        self.port = f"socket://127.0.0.1:{self._port}"

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            w = line.split()
            with self._cv:
                if not w:
                    continue
                if w[0] == "F":
                    f = int(w[1])
                    self.reads[f] = (int(w[2], 16), int(w[3], 16))
                    if len(w) >= 6:
                        self.reads_p2[f] = (int(w[4], 16), int(w[5], 16))
                    self._last_frame = max(self._last_frame, f)
                elif w[0] == "E":
                    self.events.append((w[1], int(w[2]), int(w[3])))
                elif w[0] in ("R", "A"):
                    self._answers.append(w)
                elif w[0] == "READY":
                    self._port = int(w[1])
                elif w[0] == "DONE":
                    import json

                    self.done = json.loads(line[5:])
                self._cv.notify_all()
        with self._cv:
            if self.done is None:
                self.done = {}
            self._cv.notify_all()

    def command(self, line: str) -> None:
        """Sends a harness command: "usb unmount", "usb suspend", "usb resume", "nes stop",
        "nes start", "frame N" (lockstep)."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def wait_frame(self, frame: int, timeout_s: float = 60.0) -> None:
        """Waits until NES frame ``frame`` was read. Raises EmulatorError on timeout."""
        with self._cv:
            if not self._cv.wait_for(
                lambda: frame in self.reads or self.done is not None, timeout_s
            ):
                raise EmulatorError(f"NES frame {frame} not read within {timeout_s} s")
            if frame not in self.reads:
                raise EmulatorError(f"the harness stopped before frame {frame}: {self.done}")

    def wait_event(
        self, name: str, since: int = 0, timeout_s: float = 60.0
    ) -> tuple[str, int, int]:
        """Waits for the first event called ``name`` at or after ``events[since]``."""
        with self._cv:
            seen = since
            start = [e for e in self.events if e[0] == name]
            if not self._cv.wait_for(
                lambda: any(e[0] == name for e in self.events[seen:]) or self.done is not None,
                timeout_s,
            ):
                raise EmulatorError(f"no {name} event within {timeout_s} s")
            new = [e for e in self.events[seen:] if e[0] == name]
            if not new:
                raise EmulatorError(f"the harness stopped before {name}: {start}")
            return new[0]

    @property
    def last_frame(self) -> int:
        """The last NES frame read (-1 before the first)."""
        return self._last_frame

    def _ask(self, line: str, timeout_s: float = 60.0) -> list[str]:
        with self._cv:
            self._answers.clear()
        self.command(line)
        with self._cv:
            if not self._cv.wait_for(
                lambda: bool(self._answers) or self.done is not None, timeout_s
            ):
                raise EmulatorError(f"no answer to {line!r} within {timeout_s} s")
            if not self._answers:
                raise EmulatorError(f"the harness stopped: {self.done}")
            return self._answers.pop(0)

    def read(self, t_us: int) -> int:
        """Driven mode: one controller read (latch, 8 clocks with Dr. Mario's timing) at
        firmware time ``t_us`` (us; at once if the firmware clock is already past it,
        because serving USB ran it on, unless it was planned: :meth:`plan_reads`). Returns
        the byte read (1 = pressed, A = 0x80); ``last_read_us`` is when the read began."""
        answer = self._ask(f"read {int(t_us)}")
        self.last_read_us = int(answer[2])
        self.last_read_p2 = int(answer[3], 16) if len(answer) > 3 else None
        return int(answer[1], 16)

    def advance(self, t_us: int) -> None:
        """Driven mode: runs the firmware up to time ``t_us`` (us) without a latch."""
        self._ask(f"adv {int(t_us)}")

    def clock_us(self) -> int:
        """Driven mode: the firmware clock now (us); serving the host's bytes may have run it
        past the last time the caller drove it to."""
        return int(self._ask("adv 0")[1])

    def plan_reads(self, times_us: Sequence[int]) -> None:
        """Driven mode: the reads :meth:`read` will ask for at these firmware times (us). The
        emulation that serves the host's bytes between two commands runs the firmware clock
        on; a planned read is made at its time even then, as a console's latch waits for no
        host (asked for after its time had passed, a read was made late: up to 9 ms, and
        `hil run --fast --firmware` lost its frame clock on a loaded machine). Each planned
        time must then be read once with exactly that value. Returns once the harness has
        them (host bytes sent after that cannot pass them)."""
        self._ask("plan " + " ".join(str(int(t)) for t in times_us))

    def window_us(self) -> int:
        """The firmware's default latch window (us); a host's CONFIG may change it."""
        return 5000

    def latch(
        self, frame_time_us: int, reads: int = 2, read_gap_us: int = DEFAULT_READ_GAP_US
    ) -> int:
        """Driven mode, VirtualDevice's interface: ``reads`` reads from ``frame_time_us``,
        then the end of the latch window. Raises AssertionError if the reads differ."""
        masks = {self.read(frame_time_us + i * read_gap_us) for i in range(reads)}
        self.advance(frame_time_us + self.window_us())
        if len(masks) != 1:
            raise AssertionError(f"reads of one frame differ: {sorted(masks)}")
        return masks.pop()

    def unplug(self) -> None:
        """Pulls the USB cable: the host's port closes and the firmware sees a bus reset."""
        self.command("usb unplug")

    def close(self) -> None:
        """Stops the harness (never raises)."""
        try:
            self.command("quit")
        except (OSError, ValueError):
            pass
        try:
            self._proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - a stuck child is killed
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=10)
        for f in (self._proc.stdin, self._proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def __enter__(self) -> EmulatedFirmware:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
