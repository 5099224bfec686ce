"""`hil run` starts a level with the controller, checked on the picture (issue 16).

The simulated console shows the game's title and options screens (engine.Menu, the clean-room
pictures) and answers the pad as the game does; the runtime's menu driver (hil.menus.MenuDriver)
reads each captured picture with the clean-room screen reader, sets the level and speed on the
options screen and presses Start. A level the screen does not come to show is not started: one
line, exit 2, the summary still printed."""

from __future__ import annotations

import json

import pytest

import hil.play
from hil.cli import main
from perception.screens import ScreenReading


def _events(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_levels_that_are_no_chain_are_each_started_through_the_options_screen(
    tmp_path, capsys, small_profile
):
    log = tmp_path / "run.jsonl"
    rc = main(
        ["run", "--fast", "--view", "none", "--levels", "0:1,2:2", "--reader", "oracle",
         "--log", str(log), "--profile", small_profile]
    )  # fmt: skip
    out = capsys.readouterr()
    summary = json.loads(out.out)
    assert summary["cannot_start"] is None
    # What the console began is what the run asked for, each through the options screen.
    began = [(lv["level"], lv["speed"]) for lv in summary["sim"]["levels"]]
    assert began[0] == (0, 1) and began[-1] == (2, 2)
    starts = [e for e in _events(log) if e["event"] == "start_pressed"]
    assert [(e["level"], e["speed"]) for e in starts] == [(0, 1), (2, 2)]
    for e in starts:
        assert e["menus"][-2:] == ["OPTIONS", "LEVEL"] or e["menus"][-1] == "OPTIONS"
        assert "OPTIONS" in e["menus"] and e["menu_presses"] > 0
    assert starts[0]["menus"][0] == "TITLE"  # the sim begins as powered on
    assert rc == (0 if summary["levels_cleared"] == 2 else 1)


def test_a_level_the_options_screen_cannot_show_is_refused_with_exit_2(tmp_path, capsys):
    rc = main(["run", "--fast", "--view", "none", "--level", "21", "--reader", "oracle"])
    out = capsys.readouterr()
    assert rc == 2
    line = [x for x in out.err.splitlines() if "cannot start" in x]
    assert len(line) == 1 and "level 21" in line[0]
    summary = json.loads(out.out)  # nothing lost: the summary is written
    assert summary["levels_played"] == 0 and summary["sim"]["levels"] == []


def test_a_screen_that_disagrees_with_the_pad_is_refused_with_exit_2(monkeypatch, capsys):
    """The options screen keeps showing level 5 whatever the pad does (a reader or screen at
    fault): the driver does not press Start on it."""
    real = hil.play.sim_screens

    def stuck(profile):
        read = real(profile)

        def reading(image):
            r = read(image)
            if r.kind == "OPTIONS":
                return ScreenReading("OPTIONS", 5, r.speed, distance=r.distance)
            return r

        return reading

    monkeypatch.setattr(hil.play, "sim_screens", stuck)
    rc = main(["run", "--fast", "--view", "none", "--level", "3", "--reader", "oracle"])
    out = capsys.readouterr()
    assert rc == 2
    assert "level 5" in out.err and "not starting" in out.err
    summary = json.loads(out.out)
    assert summary["cannot_start"] and summary["levels_played"] == 0
    assert summary["sim"]["levels"] == []  # no level began on the console


@pytest.mark.parametrize("screen", ["title", "options"])
def test_the_sim_console_draws_its_menus_and_answers_the_pad(screen):
    import numpy as np

    from calibration import Profile
    from hil.consoles.sim import SimConsole, SimLevel
    from perception.screens import ScreenReader, clean_room_prototypes

    console = SimConsole(
        [SimLevel(4, 2, 0x8988)], Profile.load("ideal_720p_nearest"), screen=screen, pad=lambda g: 0
    )
    try:
        reader = ScreenReader(clean_room_prototypes())
        console.run_to_frame(5)
        r = reader.read_nes(console.menu_picture(4))
        assert r.kind == screen.upper()
        if screen == "options":
            assert (r.level, r.speed) == (4, 2)  # set to the first level
        assert console.menu_picture(4).std() > 0 and not np.array_equal(
            console.menu_picture(4), np.zeros((240, 256, 3), np.uint8)
        )
    finally:
        console.close()
