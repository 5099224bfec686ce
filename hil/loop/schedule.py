"""The schedule: the controller byte of every console frame as the host knows it.

One object owns it: ``latched`` (the byte each frame read, from the firmware's STATUS messages),
``planned`` (bytes sent in SCHEDULE messages for frames not latched yet) and how far ahead
"no buttons" is kept (``feed_end``). The runtime writes it (what it sends, what the firmware
reports); the tracker reads it (``mask_of``: the shadow state steps and predicts with it); the
decision reads the committed prefix from it.
"""

from __future__ import annotations

from collections.abc import Iterable

KEPT_FRAMES = 4000  # latched frames kept behind the newest (a minute of play)


class Schedule:
    """See the module docstring. Frames are console frames (the firmware's latch groups)."""

    def __init__(self) -> None:
        self.latched: dict[int, int] = {}  # frame -> mask the console read (STATUS)
        self.planned: dict[int, int] = {}  # frame -> mask scheduled, not yet latched
        self.feed_end = -1  # the last frame something is scheduled for (-1: none)
        self.last_tx_frame = -(10**9)  # the frame the host last sent a message in

    def on_latched(self, frame: int, mask: int) -> None:
        """A STATUS: ``frame`` latched ``mask`` (frames older than KEPT_FRAMES are dropped)."""
        self.latched[frame] = mask
        self.planned.pop(frame, None)
        # Frames are reported in order, so the oldest entries come first (a scan of all ~4000
        # each status cost ~0.05 ms).
        while self.latched:
            oldest = next(iter(self.latched))
            if oldest >= frame - KEPT_FRAMES:
                break
            del self.latched[oldest]
        if len(self.latched) > 2 * KEPT_FRAMES:  # out of order (a renumbering): rarely
            for old in [f for f in self.latched if f < frame - KEPT_FRAMES]:
                del self.latched[old]

    def on_schedule(self, first_frame: int, masks: Iterable[int]) -> None:
        """Masks sent for frames ``first_frame`` on (they replace what was scheduled)."""
        last = first_frame - 1
        for i, m in enumerate(masks):
            self.planned[first_frame + i] = int(m)
            last = first_frame + i
        self.feed_end = max(self.feed_end, last)

    def hole(self, first_frame: int, reachable: int) -> range:
        """The frames between what was scheduled and ``first_frame`` that a schedule sent now
        can still fill (from ``reachable`` on): the firmware streams from its first scheduled
        frame, and each frame of a hole in the stream is an underrun. Empty when nothing was
        scheduled yet or there is no hole."""
        if self.feed_end < 0:
            return range(0)
        return range(max(self.feed_end + 1, reachable), first_frame)

    def mask_of(self, frame: int) -> int:
        """The byte frame ``frame`` latched, or will latch as far as the host knows."""
        if frame in self.latched:
            return self.latched[frame]
        return self.planned.get(frame, 0)

    def released(self, through: int) -> None:
        """The controller was released after frame ``through`` (the link was lost: the
        firmware still serves the frame it had armed, then "no buttons"; nb_host_lost, and
        its watchdog when the host went silent): what was scheduled up to ``through`` played,
        nothing later does."""
        self.planned = {f: m for f, m in self.planned.items() if f <= through}
        self.feed_end = -1

    def renumber(self, shift: int) -> None:
        """The firmware restarted and numbers console frame g as g - shift from now on."""
        self.latched = {f - shift: m for f, m in self.latched.items()}
        self.planned = {f - shift: m for f, m in self.planned.items()}
        self.feed_end -= shift
        self.last_tx_frame -= shift
