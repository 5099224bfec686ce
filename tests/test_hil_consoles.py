"""The console interface's level start (hil.consoles.base) and the loop's schedule
(hil.loop.schedule): what every console kind shares, without a console running."""

from __future__ import annotations

import pytest

import engine
from engine.constants import Button
from hil.consoles.base import (
    STAGE_CLEAR_START_FRAMES,
    CannotStart,
    LevelEnd,
    start_with_pad,
)
from hil.consoles.rig import RigConsole
from hil.loop.schedule import Schedule

START = int(Button.START)


def test_the_first_level_is_one_start_press_on_the_options_screen():
    p = start_with_pad(10, 2, 500, None)
    assert (p.first_frame, p.masks, p.start_frame, p.reset) == (500, [START, 0], 500, False)
    assert p.last_start == 500


def test_a_cleared_level_chains_by_holding_start_over_the_stage_clear_loop():
    prev = LevelEnd(4, 1, "stage_clear", end_frame=1000)
    p = start_with_pad(5, 1, 1030, prev)
    accept = 1000 + STAGE_CLEAR_START_FRAMES  # the loop's first read of the pad
    assert p.start_frame == 1030 and not p.reset
    held = p.masks[: accept + 8 - 1030 + 1]
    assert held == [START] * len(held) and p.masks[len(held)] == 0
    # the Start latches by the end of the hold at the latest (the tracker's intro bound)
    assert p.last_start == accept + 8
    # before a cutscene (engine.cutscene_before) a fresh press follows for its own loop
    q = start_with_pad(6, 1, 1030, LevelEnd(5, 1, "stage_clear", 1000))
    assert (
        engine.cutscene_before(6, 1) and q.masks[-2:] == [START, 0] and len(q.masks) > len(p.masks)
    )
    assert q.last_start == q.first_frame + len(q.masks) - 2  # the cutscene loop's press


def test_a_new_game_needs_the_consoles_reset():
    after_top_out = LevelEnd(5, 1, "top_out", end_frame=800)
    with pytest.raises(CannotStart, match="not the game's next level and this console cannot"):
        start_with_pad(6, 1, 900, after_top_out)
    with pytest.raises(CannotStart):  # cleared, but not level + 1 at the same speed
        start_with_pad(7, 1, 900, LevelEnd(5, 1, "stage_clear", 800))
    resets = []
    p = start_with_pad(6, 1, 900, after_top_out, reset=lambda: resets.append(1))
    assert resets == [1] and p.reset and p.masks == [START, 0] and p.start_frame == 900


class _Capture:
    name = "none"
    closed = False

    def newest(self, timeout_s: float):
        return None

    def describe(self):
        return {}

    def close(self) -> None:
        self.closed = True


def test_the_rig_has_no_reset_and_closes_its_capture():
    cap = _Capture()
    rig = RigConsole(cap, "/dev/ttyACM0", latency_frames=2.5, jitter_ms=1.0)
    assert rig.port == "/dev/ttyACM0" and rig.report() == {}
    assert rig.start_level(0, 1, 40, None).masks == [START, 0]
    with pytest.raises(CannotStart):
        rig.start_level(3, 1, 40, LevelEnd(0, 1, "top_out", 30))
    rig.close()
    assert cap.closed


def test_the_schedule_knows_each_frames_byte():
    s = Schedule()
    s.on_schedule(10, [1, 2, 3])
    assert [s.mask_of(f) for f in (9, 10, 11, 12, 13)] == [0, 1, 2, 3, 0] and s.feed_end == 12
    s.on_latched(10, 0x80)  # the console read something else: what it read wins
    assert s.mask_of(10) == 0x80 and 10 not in s.planned
    s.released(11)  # the link was lost with frame 11 armed: it plays, nothing after it
    assert s.mask_of(11) == 2 and s.mask_of(12) == 0 and s.feed_end == -1
    s.renumber(5)
    assert s.mask_of(5) == 0x80 and s.latched == {5: 0x80}
    for f in range(100, 4200):
        s.on_latched(f, 1)
    assert min(s.latched) == 4199 - 4000  # a minute of play kept, the oldest dropped


def test_a_hole_in_the_stream_is_the_frames_a_schedule_can_still_fill():
    """Each frame between what was scheduled and a new schedule's first frame would be an
    underrun (the firmware streams from its first frame): the runtime fills the part it can
    still reach with "no buttons"."""
    s = Schedule()
    assert not s.hole(50, 10)  # nothing scheduled yet: no stream, no hole
    s.on_schedule(10, [0] * 20)  # frames 10..29
    assert not s.hole(30, 12)  # it follows on
    assert s.hole(40, 12) == range(30, 40)
    assert s.hole(40, 35) == range(35, 40)  # frames 30..34 are already armed: too late
    assert not s.hole(20, 12)  # inside what is scheduled
