"""Game events from consecutive readings (spawn, lock, clear, the level's end) and the placement a
lock shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import ScreenKind
from engine.placement import placement_index, placement_pose
from hil.replay.common import EMPTY, U8
from hil.replay.readers import FrameFacts, pill_json
from perception.observation import (
    FallingPill,
    Observation,
)


def placement_cells(index: int) -> list[tuple[int, int]]:
    """The (row, col) cells a placement writes (docs/PLANNER.md), the top half of a vertical
    pill in row 0 included (it is drawn above the bottle)."""
    rotation, row, col = placement_pose(index)
    if rotation % 2 == 0:
        return [(row, col), (row, col + 1)]
    return [(row, col), (row - 1, col)]


def _occupied(grid: U8) -> npt.NDArray[np.bool_]:
    hi = grid & 0xF0
    return (grid != EMPTY) & (hi != 0xB0) & (hi != 0xF0)


def lock_placement(before: U8, after: U8, colors: tuple[int, int]) -> int | None:
    """The placement index of a pill of ``colors`` (1st, 2nd half) that locked between two
    field readings, from the pill-half cells that appeared (docs/PLANNER.md's table; rotations
    2 and 3 reported as 0 and 1 when both colours are equal). A vertical pill locked in row 0
    shows only its bottom half. None when the new cells are not one such pill."""
    new = np.argwhere(~_occupied(before) & _occupied(after))
    cells = {(int(r), int(c)): int(after[r, c]) for r, c in new}
    same = colors[0] == colors[1]
    for (r, c), code in cells.items():
        kind, color = code & 0xF0, code & 0x0F
        if kind == 0x60 and cells.get((r, c + 1), 0) & 0xF0 == 0x70:
            pair = (color, cells[(r, c + 1)] & 0x0F)  # (left, right)
            rotations = (0, 2)
        elif kind == 0x50 and cells.get((r - 1, c), 0) & 0xF0 == 0x40:
            pair = (color, cells[(r - 1, c)] & 0x0F)  # (bottom, top)
            rotations = (1, 3)
        elif kind == 0x50 and r == 0:
            other = colors[1] if color == colors[0] else colors[0]
            pair, rotations = (color, other), (1, 3)
        else:
            continue
        if pair == colors:
            return placement_index(rotations[0], r, c)
        if pair[::-1] == colors:
            return placement_index(rotations[0] if same else rotations[1], r, c)
        return None
    return None


@dataclass(frozen=True)
class Event:
    """A game event seen in the capture: ``kind`` spawn, lock, clear, stage_clear or top_out;
    ``index`` the captured frame it was first seen in; ``console_frame`` when known; ``data``
    (spawn: pill; lock: placement, cells; clear: cells, virus_left)."""

    kind: str
    index: int
    console_frame: int | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "event",
            "event": self.kind,
            "index": self.index,
            "console_frame": self.console_frame,
            **self.data,
        }


class EventDetector:
    """Events from consecutive readings (call :meth:`update` once per captured frame, in order).

    - spawn: a falling pill appears, or is read higher than the frame before or with other
      colours (a new pill whose gap was not captured). A reader that gives the pill as drawn
      (perception: rotation 0/1, colours in drawn order) swaps the colours when the pill turns
      to rotation 2 or 3, so colours are compared as a pair regardless of order, and the pill's
      colours in the game's order are taken from its spawn (rotation 0 draws them in order);
    - lock: the pill's halves appear in the field. The picture redraws the bottle one row per
      frame after a change, so the halves may appear a few frames after the pill's sprites went
      away (and a vertical pill's top half a frame before its bottom half): from the moment the
      pill is gone (or cells appear under it), the detector waits up to ``lock_wait`` frames for
      the new cells to form the pill (placement from them, with the spawn's colours), else
      takes the last pose read;
    - clear: more cells are clearing ($Bx) than the frame before;
    - stage_clear / top_out: the screen kind turns to it.
    """

    def __init__(self, lock_wait: int = 20) -> None:
        self.lock_wait = lock_wait
        self.prev: Observation | None = None
        self.pill: FallingPill | None = None  # the pill falling (last pose read)
        self.last: FallingPill | None = None  # the pill that locked last
        self.base: U8 | None = None  # the field while it fell (a falling pill changes nothing)
        self.colors: tuple[int, int] | None = None  # the falling pill's, game order (spawn)
        # the pill gone, its cells not yet complete: (last pose, colours, field, since)
        self.pending: tuple[FallingPill, tuple[int, int], U8, int] | None = None

    def update(self, index: int, r: Observation, facts: FrameFacts | None = None) -> list[Event]:
        """The events frame ``index`` shows: ``r`` its Observation, ``facts`` what the source
        says beyond the picture (the console frame and virus count the events carry)."""
        facts = FrameFacts() if facts is None else facts
        events: list[Event] = []
        prev = self.prev
        cf = facts.console_frame
        pill = r.falling
        ref = self.pill or self.last  # a locked pill's sprites may linger a frame
        new_pill = pill is not None and (
            ref is None or pill.y > ref.y or sorted(pill.colors) != sorted(ref.colors)
        )
        if self.pill is not None and (pill is None or new_pill or self._grew(r.field)):
            assert self.base is not None and self.colors is not None
            self.pending = (self.pill, self.colors, self.base, index)
            self.last, self.pill = self.pill, None
        if self.pending is not None:
            events += self._try_lock(index, r.field, cf, force=new_pill)
        if prev is not None:
            clearing = int(((r.field & 0xF0) == 0xB0).sum())
            was = int(((prev.field & 0xF0) == 0xB0).sum())
            if clearing > was:
                events.append(
                    Event(
                        "clear",
                        index,
                        cf,
                        {"cells": clearing - was, "virus_left": facts.virus_left},
                    )
                )
            if r.kind != prev.kind and r.kind in (ScreenKind.STAGE_CLEAR, ScreenKind.TOP_OUT):
                name = r.kind.name.lower()
                events.append(Event(name, index, cf, {"virus_left": facts.virus_left}))
        if pill is not None and (new_pill or self.pill is not None):
            if new_pill:
                events.append(Event("spawn", index, cf, {"pill": pill_json(pill)}))
                self.colors = pill.colors
            self.pill = pill
            self.base = r.field
        self.prev = r
        return events

    def _grew(self, grid: U8) -> bool:
        assert self.base is not None
        return bool((~_occupied(self.base) & _occupied(grid)).any())

    def _try_lock(self, index: int, grid: U8, cf: int | None, force: bool) -> list[Event]:
        assert self.pending is not None
        pill, colors, base, since = self.pending
        placement = lock_placement(base, grid, colors)
        if placement is None and not force and index - since < self.lock_wait:
            return []
        if placement is None:  # the cells never formed this pill: the last pose read
            rotation = pill.rotation
            if rotation < 2 and pill.colors != colors and pill.colors[::-1] == colors:
                rotation += 2  # drawn as rotation 0/1 with the halves swapped
            placement = placement_index(rotation, 15 - pill.y, pill.x)
        new = np.argwhere(~_occupied(base) & _occupied(grid))
        self.pending = None
        data = {
            "placement": placement,
            "colors": list(colors),
            "cells": [[int(a), int(b)] for a, b in new],
        }
        return [Event("lock", index, cf, data)]
