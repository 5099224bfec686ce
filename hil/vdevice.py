"""A virtual controller: the firmware's C core behind a pseudo-terminal.

``VirtualDevice`` loads ``libnbcore`` (``firmware/core`` compiled for the host by
``firmware/host/CMakeLists.txt`` and installed into this package) with ctypes, opens a
pseudo-terminal, and runs the core on its far end in a thread, so
``hil.link.Link(vdev.port)`` talks to it with pyserial exactly as it talks to
``/dev/ttyACM0``. A simulated or emulated console drives the other side: ``latch(t_us)``
plays one console frame (Dr. Mario's two controller reads, then the end of the latch
window) and returns the button mask the console read.

Time is the simulated console's clock in microseconds; the core sees host bytes at the
latest console time, so a simulation may run faster or slower than real time. POSIX only
(``os.openpty``).
"""

from __future__ import annotations

import ctypes
import errno
import importlib.resources
import os
import select
import sys
import threading
import tty
from pathlib import Path

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
        "nb_poll": ([vp, u64, ctypes.POINTER(u32)], ctypes.c_bool),
        "nb_rx": ([vp, ctypes.c_char_p, u32, u64], None),
        "nb_tx": ([vp, ctypes.c_char_p, u32], u32),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    if lib.nb_config_size() != ctypes.sizeof(_Config):
        raise RuntimeError("libnbcore's nb_config_t differs from hil.vdevice._Config")
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
        self.pio_words: list[int] = []  # every word the firmware would put in the PIO FIFO
        self._poll(0)

        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # bytes pass unchanged: no echo, no CR/LF or XON/XOFF
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        self._stop_r, self._stop_w = os.pipe()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="vdevice-pty", daemon=True)
        self._thread.start()

    # ---- the console side ---------------------------------------------------------------

    def latch(
        self, frame_time_us: int, reads: int = 2, read_gap_us: int = DEFAULT_READ_GAP_US
    ) -> int:
        """Plays one console frame starting at ``frame_time_us`` (us): ``reads`` controller
        reads ``read_gap_us`` apart, then the end of the latch window, when the firmware
        sends that frame's STATUS and arms the next frame. Returns the mask read (A = 0x80
        ... Right = 0x01); every read of a frame gets the same byte."""
        with self._lock:
            self._poll(frame_time_us)
            masks = {self._latch(frame_time_us + i * read_gap_us) for i in range(reads)}
            window = self.window_us()
            self._poll(frame_time_us + window)
            self._flush()
        if len(masks) != 1:
            raise AssertionError(f"reads of one frame differ: {sorted(masks)}")
        return masks.pop()

    def read(self, t_us: int) -> int:
        """One controller read (a single latch) at ``t_us``, without advancing past it."""
        with self._lock:
            self._poll(t_us)
            mask = self._latch(t_us)
            self._flush()
        return mask

    def advance(self, t_us: int) -> None:
        """Moves the device clock to ``t_us`` without a latch (closes windows, watchdog)."""
        with self._lock:
            self._poll(t_us)
            self._flush()

    def window_us(self) -> int:
        """The latch grouping window now in force (us), read from the core's state."""
        return _Config.from_buffer(self._core).window_us  # cfg is nb_core_t's first member

    # ---- lifecycle ---------------------------------------------------------------------

    def unplug(self) -> None:
        """Simulates pulling the USB cable: the pty's far end goes away."""
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

    def _poll(self, t_us: int) -> None:
        self._now_us = max(self._now_us, t_us)
        word = ctypes.c_uint32()
        if self._lib.nb_poll(self._core, self._now_us, ctypes.byref(word)):
            self.pio_words.append(word.value)

    def _flush(self) -> None:
        """Moves the core's outgoing bytes into the pty as far as it accepts them; the rest
        stays in the core's TX buffer, which drops (and counts) what does not fit, as the
        firmware does when the host stops reading."""
        if self._closed:
            return
        buf = ctypes.create_string_buffer(256)
        while True:
            if not self._pending:
                n = self._lib.nb_tx(self._core, buf, len(buf))
                if not n:
                    return
                self._pending = buf.raw[:n]
            try:
                sent = os.write(self._master, self._pending)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):
                    return
                raise
            self._pending = self._pending[sent:]

    def _serve(self) -> None:
        while True:
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
