"""The annotated video: each frame with the board read, the falling pill and the chosen placement
marked, and a side panel."""

from __future__ import annotations

import textwrap

import cv2
import numpy as np

import engine
from calibration import Profile
from engine.placement import placement_index
from hil.replay.common import EMPTY, U8
from hil.replay.events import placement_cells
from hil.replay.sources import to_capture
from perception.observation import (
    Observation,
)

# annotated video: MPEG-4 part 2 through FFmpeg (~13 KB a 720p frame), else MJPEG (always built)
VIDEO_CODECS = [
    ("annotated.mp4", "mp4v", cv2.CAP_FFMPEG),
    ("annotated.avi", "MJPG", cv2.CAP_OPENCV_MJPEG),
]


BOTTLE_X, BOTTLE_Y, CELL = 96, 80, 8  # NES pixels of field cell (0, 0); ARCHITECTURE.md


# BGR of the pill/virus colours 0 yellow, 1 red, 2 blue (NES $28, $15, $21 as engine draws them)
COLOR_BGR = [tuple(int(v) for v in engine.NES_PALETTE[i][::-1]) for i in (0x28, 0x15, 0x21)]


CHOICE_BGR = (0, 255, 0)  # the policy's placement


PILL_BGR = (255, 255, 255)  # the falling pill read


def _cell_box(profile: Profile, row: int, col: int) -> tuple[tuple[int, int], tuple[int, int]]:
    x, y = BOTTLE_X + col * CELL, BOTTLE_Y + row * CELL
    return to_capture(profile, x, y), to_capture(profile, x + CELL, y + CELL)


def annotate(
    image: U8,
    profile: Profile,
    reading: Observation,
    choice: int | None,
    lines: list[str],
) -> U8:
    """The annotated frame: captured BGR ``image`` [H, W, 3] with a side panel, uint8
    [H, W + panel_width(H), 3].

    On the capture: a marker in the corner of every occupied cell read (in the colour read; a
    disc for a virus, a square for a pill half, a cross for a clearing cell), the falling pill
    read outlined in white, the policy's placement in green. In the panel: the board read drawn
    as a grid with the same pill and placement, then ``lines`` of text.
    """
    h, w = image.shape[:2]
    cap = image.copy()
    t = max(1, round(profile.geometry.scale_y / 2))
    for (r, c), code in np.ndenumerate(reading.field):
        (x0, y0), (x1, y1) = _cell_box(profile, r, c)
        m = max(3, (x1 - x0) // 3)
        _mark(cap, int(code), (x0 + 1, y0 + 1, x0 + 1 + m, y0 + 1 + m), border=True)
    pill = reading.falling
    pill_index = placement_index(pill.rotation % 2, 15 - pill.y, pill.x) if pill else None
    if pill_index is not None:
        (x0, y0), (x1, y1) = _placement_box(profile, pill_index)
        cv2.rectangle(cap, (x0, y0), (x1 - 1, y1 - 1), PILL_BGR, t)
    if choice is not None:
        (x0, y0), (x1, y1) = _placement_box(profile, choice)
        cv2.rectangle(cap, (x0, y0), (x1 - 1, y1 - 1), CHOICE_BGR, t + 1)
    pw = panel_width(h)
    panel = np.full((h, pw, 3), 24, np.uint8)
    cell = max(4, (h // 2) // 16)
    ox, oy = max(4, (pw - 8 * cell) // 2), max(4, h // 40)
    cv2.rectangle(panel, (ox - 1, oy - 1), (ox + 8 * cell, oy + 16 * cell), (90, 90, 90), 1)
    for (r, c), code in np.ndenumerate(reading.field):
        x, y = ox + c * cell, oy + r * cell
        _mark(panel, int(code), (x + 1, y + 1, x + cell - 1, y + cell - 1), border=False)
    for index, color, thick in ((pill_index, PILL_BGR, 1), (choice, CHOICE_BGR, 2)):
        if index is None:
            continue
        cells = placement_cells(index)
        r0, r1 = min(r for r, _ in cells), max(r for r, _ in cells)
        c0, c1 = min(c for _, c in cells), max(c for _, c in cells)
        top = oy + r0 * cell
        cv2.rectangle(
            panel,
            (ox + c0 * cell, top),
            (ox + (c1 + 1) * cell - 1, oy + (r1 + 1) * cell - 1),
            color,
            thick,
        )
    scale = max(0.3, h / 1600)
    step = max(10, round(28 * scale))
    y = oy + 16 * cell + step + 4
    chars = max(16, int(pw / (19 * scale)))
    for text in lines:
        for part in textwrap.wrap(text, chars) or [""]:
            cv2.putText(
                panel,
                part,
                (6, y),
                cv2.FONT_HERSHEY_SIMPLEX,
                scale,
                (235, 235, 235),
                1,
                cv2.LINE_AA,
            )
            y += step
    return np.concatenate([cap, panel], axis=1)


def panel_width(height: int) -> int:
    """Width of the annotated video's side panel for captures ``height`` pixels high."""
    return max(200, round(height * 0.6))


def _mark(img: U8, code: int, box: tuple[int, int, int, int], border: bool) -> None:
    if code == EMPTY or code & 0xF0 == 0xF0:
        return
    x0, y0, x1, y1 = box
    color = COLOR_BGR[(code & 0x0F) % 3]
    kind = code & 0xF0
    if border:
        cv2.rectangle(img, (x0 - 1, y0 - 1), (x1 + 1, y1 + 1), (0, 0, 0), -1)
    if kind == 0xD0:
        cv2.circle(img, ((x0 + x1) // 2, (y0 + y1) // 2), max(1, (x1 - x0) // 2), color, -1)
    elif kind == 0xB0:
        cv2.line(img, (x0, y0), (x1, y1), color, 1)
        cv2.line(img, (x0, y1), (x1, y0), color, 1)
    else:
        cv2.rectangle(img, (x0, y0), (x1, y1), color, -1)


def _placement_box(profile: Profile, index: int) -> tuple[tuple[int, int], tuple[int, int]]:
    cells = placement_cells(index)
    (x0, y0), _ = _cell_box(profile, min(r for r, _ in cells), min(c for _, c in cells))
    _, (x1, y1) = _cell_box(profile, max(r for r, _ in cells), max(c for _, c in cells))
    return (x0, y0), (x1, y1)
