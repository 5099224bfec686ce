"""The live view of ``hil run``: the board as read, the chosen placement, the latency figures.

``make_view("window" | "terminal" | "none")``: a matplotlib window (the captured frame with the
read board and figures beside it) when a display is available, else a terminal panel drawn
with rich (``window`` without a display falls back to the terminal). Views are called once per
handled frame with ``Runtime.snapshot``'s dict and redraw at most ``hz`` times per second, so
they cost the loop little.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from perception.observation import Observation

View = Callable[[dict[str, Any]], None]
_COLORS = ("yellow", "red", "blue")
_KIND_CHAR = {0x40: "^", 0x50: "v", 0x60: "<", 0x70: ">", 0x80: "o", 0xB0: "*", 0xD0: "X"}


def board_lines(obs: Observation | None) -> list[list[tuple[str, str]]]:
    """The bottle as rows of (character, colour name) cells; the falling pill drawn over it."""
    rows = [[(".", "grey50") for _ in range(8)] for _ in range(16)]
    if obs is None:
        return rows
    f = np.asarray(obs.field)
    for r in range(16):
        for c in range(8):
            v = int(f[r, c])
            if v == 0xFF:
                continue
            ch = _KIND_CHAR.get(v & 0xF0, "?")
            color = _COLORS[v & 0x0F] if (v & 0x0F) < 3 else "white"
            rows[r][c] = (ch, color)
    p = obs.falling
    if p is not None:
        drawn = p.drawn()
        for (r, c), k in zip(drawn.cells, drawn.colors, strict=True):
            if 0 <= r < 16 and 0 <= c < 8:
                rows[r][c] = ("@", _COLORS[k])
    return rows


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}{unit}"
    return f"{v}{unit}"


def status_lines(snap: dict[str, Any]) -> list[str]:
    """The figures beside the board, one per line."""
    obs = snap.get("observation")
    p = snap.get("placement")
    h = snap.get("handle_p99_ms") or {}
    return [
        f"level {_fmt(snap.get('level'))}   tracker {snap.get('state')}",
        f"capture #{snap.get('frame_index')}  console frame {_fmt(snap.get('console_frame'))}",
        f"next pill {None if obs is None else obs.next_colors}",
        "placement "
        + (
            "-"
            if not p
            else f"#{p['placement']} (rot {p['rotation']}, row {p['row']}, col {p['col']}) "
            f"pill {p['pill']}, locks in frame {p['lock_frame']}"
        ),
        f"read {_fmt(snap.get('read_ms'), ' ms')}   frame p99 {_fmt(h.get('p99'), ' ms')}",
        f"spawn -> wire {_fmt(snap.get('spawn_to_wire_ms'), ' ms')}",
        f"capture latency {_fmt(snap.get('capture_latency_frames'), ' frames')}",
        f"desyncs {snap.get('desyncs')}   late schedules {snap.get('late')}",
    ]


class TerminalView:
    """A rich Live panel (stderr), redrawn at most ``hz`` times a second."""

    def __init__(self, hz: float = 8.0) -> None:
        from rich.console import Console
        from rich.live import Live

        self.period = 1.0 / hz
        self.next = 0.0
        self.console = Console(file=sys.stderr)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def __call__(self, snap: dict[str, Any]) -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + self.period
        from rich.table import Table
        from rich.text import Text

        board = Text()
        for row in board_lines(snap.get("observation")):
            for ch, color in row:
                board.append(ch + " ", style=color)
            board.append("\n")
        table = Table.grid(padding=(0, 3))
        table.add_row(board, Text("\n".join(status_lines(snap))))
        self.live.update(table, refresh=True)

    def close(self) -> None:
        self.live.stop()


class WindowView:
    """A matplotlib window: the captured frame, and the figures as text (needs a display)."""

    def __init__(self, hz: float = 10.0) -> None:
        import matplotlib.pyplot as plt

        self.plt = plt
        self.period = 1.0 / hz
        self.next = 0.0
        plt.ion()
        self.fig, (self.ax_img, self.ax_txt) = plt.subplots(
            1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [2.2, 1]}
        )
        self.ax_img.set_axis_off()
        self.ax_txt.set_axis_off()
        self.image: Any = None
        self.text = self.ax_txt.text(0, 1, "", va="top", family="monospace", fontsize=9)

    def __call__(self, snap: dict[str, Any]) -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + self.period
        img = snap.get("image")
        if img is not None:
            rgb = img[..., ::-1]
            if self.image is None:
                self.image = self.ax_img.imshow(rgb)
            else:
                self.image.set_data(rgb)
        board = "\n".join(
            " ".join(ch for ch, _ in row) for row in board_lines(snap.get("observation"))
        )
        self.text.set_text(board + "\n\n" + "\n".join(status_lines(snap)))
        self.plt.pause(0.001)

    def close(self) -> None:
        self.plt.close(self.fig)


def has_display() -> bool:
    """True when a GUI window can be opened (a display, and an interactive matplotlib backend)."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    try:
        import matplotlib

        return str(matplotlib.get_backend()).lower() not in ("agg", "pdf", "svg", "ps", "cairo")
    except ImportError:
        return False


def make_view(kind: str) -> tuple[View | None, Callable[[], None]]:
    """(view, close) for ``window``, ``terminal`` or ``none``. ``window`` without a display
    falls back to the terminal. Raises ValueError for another kind."""
    if kind == "none":
        return None, lambda: None
    if kind == "window" and has_display():
        w = WindowView()
        return w, w.close
    if kind in ("window", "terminal"):
        t = TerminalView()
        return t, t.close
    raise ValueError(f"unknown view {kind!r}; choose window, terminal or none")
