"""The screens before play: engine.Menu (the title and options screens frame by frame, from
the disassembly), their clean-room pictures, the prototype screen reader (perception.screens)
through capture profiles, and the menu driver (hil.menus) on the simulated console's menus."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from calibration import CaptureModel, Profile
from engine.constants import Button, MenuScreen, MenuStage
from engine.menu_render import render_options, render_title
from hil.menus import MenuDriver, MenuError, SimMenuConsole
from perception.screens import (
    KINDS,
    OPTIONS,
    ScreenPrototypes,
    ScreenReader,
    clean_room_pictures,
    clean_room_prototypes,
)

R, L, U, D = int(Button.RIGHT), int(Button.LEFT), int(Button.UP), int(Button.DOWN)
START, B, SEL = int(Button.START), int(Button.B), int(Button.SELECT)


# ---- engine.Menu -----------------------------------------------------------------------------


def test_level_moves_on_a_press_and_repeats_every_7_frames_when_held():
    m = engine.Menu("options", level=0, speed=1)
    levels = []
    for _ in range(22):
        m.step(R)
        levels.append(int(m.level))
    # updateLvlCursor: the press moves at once, then horVelocity counts 2..8 -> every 7th frame
    assert levels[:16] == [1] * 7 + [2] * 7 + [3] * 2
    m.step(0)
    assert m.hor_velocity == 0
    for _ in range(200):
        m.step(R)
        m.step(0)
    assert m.level == 20  # selectableLvCap: no wraparound
    m.step(L)
    assert m.level == 19


def test_rows_speed_and_buttons_that_do_nothing():
    m = engine.Menu("options", level=5, speed=0)
    m.step(U)
    assert m.section == 0  # no wraparound at the top
    m.step(0)
    m.step(R | D)  # not exactly Down: the row stays, the level moves (any Left/Right bit)
    assert (m.section, m.level) == (0, 6)
    m.step(0)
    m.step(D)
    m.step(0)
    assert m.section == 1
    m.step(R | int(Button.A))  # updateSpeedCursor wants Right alone
    assert m.speed == 0
    m.step(0)
    for _ in range(4):
        m.step(R)
        m.step(0)
    assert m.speed == 2  # HI, no wraparound
    for _ in range(3):
        m.step(D)
        m.step(0)
    assert m.section == 2


def test_start_ends_the_menus_and_steps_the_rng():
    m = engine.Menu("options", level=3, speed=2, rng=0x1234)
    m.step(0)
    assert m.rng == engine.rng_step(0x1234)  # generateRandNum once a frame
    m.step(START)
    assert m.started and m.stage == MenuStage.START and m.mode == 2
    assert m.rng == engine.rng_step(engine.rng_step(0x1234))
    flow = engine.LevelFlow(int(m.level), int(m.speed), int(m.rng), int(m.frame_counter), START)
    assert flow.level == 3 and flow.speed == 2


def test_title_to_options_and_back():
    m = engine.Menu("title", frame_counter=10)
    m.step(D)
    assert m.players == 2
    m.step(SEL)
    assert m.players == 1  # Select toggles
    m.step(START)
    assert m.stage == MenuStage.OPTIONS_LOAD and m.mode == 1
    m.step(R)  # loading: read, but no options loop yet
    m.step(0)
    assert m.screen == MenuScreen.BLANK and m.level == 0
    m.step(R)  # the 3rd frame's buttons are the loop's first
    assert m.stage == MenuStage.OPTIONS and m.level == 1
    m.step(B)
    assert m.stage == MenuStage.TITLE_LOAD and m.mode == 0
    for _ in range(2):
        m.step(0)
    m.step(START)  # the title's first pass checks Up/Down/Select only
    assert m.stage == MenuStage.TITLE
    m.step(0)
    m.step(START)
    assert m.stage == MenuStage.OPTIONS_LOAD


def test_demo_after_8_frame_counter_wraps_and_start_leaves_it():
    m = engine.Menu("title", frame_counter=1)
    n = 0
    while m.stage != MenuStage.DEMO:
        m.step(0)
        n += 1
    assert n == 8 * 256 - 1 and m.demo
    for _ in range(200):
        m.step(0)
    m.step(START)
    assert m.stage == MenuStage.TITLE_LOAD


def test_menu_arguments_are_checked():
    with pytest.raises(ValueError):
        engine.Menu("options", level=21)
    with pytest.raises(ValueError):
        engine.Menu("credits")


# ---- pictures and the reader ------------------------------------------------------------------


@pytest.fixture(scope="module")
def reader():
    return ScreenReader(clean_room_prototypes(seed=0))


def test_clean_room_pictures_put_the_moving_parts_where_the_game_does():
    a, b = render_options(0, 0), render_options(20, 2)
    diff = np.argwhere((a != b).any(axis=2))
    # the level digits (VRAM $2157: x 184-199, y 80-87), the cursors (lvlCursor_XPos $57..$A7
    # at y $53; speedCursor_XPos $58/$A4 at y $87) and nothing else
    assert diff[:, 0].min() >= 80 and diff[:, 0].max() < 160
    assert ((a != render_options(0, 0)).sum()) == 0
    t1, t2 = render_title(1), render_title(2)
    rows = np.flatnonzero((t1 != t2).any(axis=(1, 2)))
    assert rows.min() >= 0xA7 + 1 and rows.max() <= 0xB7 + 8


def test_prototypes_round_trip(tmp_path, reader):
    path = tmp_path / "screens.npz"
    reader.p.save(path)
    again = ScreenReader.load(path)
    pic = render_options(7, 1)
    assert again.read_nes(pic) == reader.read_nes(pic)
    np.save(tmp_path / "bad.npy", np.zeros(3))
    with pytest.raises((ValueError, OSError)):
        ScreenPrototypes.load(tmp_path / "bad.npy")


@pytest.mark.parametrize("profile", ["mjpeg_720p_q70", "hdmi_1080p_bilinear"])
def test_reader_on_held_out_clean_room_pictures_through_a_profile(reader, profile):
    prof = Profile.load(profile)
    model = CaptureModel(prof, seed=3)
    total = right = opt = opt_ok = 0
    for k, (pic, kind, truth) in enumerate(clean_room_pictures(seed=7)):
        if kind != OPTIONS and k % 3:
            continue
        r = reader.read(model(pic), prof)
        total += 1
        right += r.kind == KINDS[kind]
        if kind == OPTIONS:  # every setting, one and two players (player 2's too), and the row
            opt += 1
            want = (truth["level"], truth["speed"], truth["players"], truth["section"])
            want += (truth.get("level2"), truth.get("speed2"))
            opt_ok += (r.level, r.speed, r.players, r.section, r.level2, r.speed2) == want
    assert opt == 2 * 189 and opt_ok == opt
    assert right / total >= 0.99, (right, total)


def test_reader_refuses_a_picture_of_the_wrong_shape(reader):
    with pytest.raises(ValueError):
        reader.read_nes(np.zeros((240, 256), np.uint8))


# ---- the menu driver --------------------------------------------------------------------------


def drive(console: SimMenuConsole, reader: ScreenReader, level: int, speed: int, **kw):
    d = MenuDriver(console.newest, console.send, reader.read_nes)
    return d.start(level, speed, **kw)


@pytest.mark.parametrize(
    ("screen", "level", "speed"), [("title", 13, 2), ("options", 0, 0), ("options", 20, 1)]
)
def test_driver_starts_the_asked_level_from_the_title_and_options(reader, screen, level, speed):
    c = SimMenuConsole(screen, level=7, speed=1)
    res = drive(c, reader, level, speed)
    assert c.starts == [(res.start_frame, level, speed)]
    assert (res.level, res.speed) == (level, speed)
    assert c.flow is not None and (c.flow.level, c.flow.speed) == (level, speed)


def test_driver_from_unknown_row_game_over_and_stage_clear(reader):
    c = SimMenuConsole("options", level=4, speed=0)
    for m in (D, 0, D, 0):  # the highlight left on the music row
        c.masks[c.frame + 1] = m
        c.step()
    drive(c, reader, 9, 2)
    assert c.starts[-1][1:] == (9, 2)
    # game over: idle (Down held) until its box, then the driver
    for _ in range(20_000):
        c.masks[c.frame + 1] = D if c.frame % 3 else 0
        c.step()
        if c.screen == "GAME_OVER" and c.flow is not None and c.flow.frame > 0:
            if reader.read_nes(c._shown[-1][1]).kind == "GAME_OVER":
                break
    res = drive(c, reader, 2, 1)
    assert c.starts[-1][1:] == (2, 1) and "GAME_OVER" in res.screens
    # a level in play is refused without reset_ok, left by the soft reset with it
    with pytest.raises(MenuError, match="in play"):
        drive(c, reader, 5, 0)
    res = drive(c, reader, 5, 0, reset_ok=True)
    assert c.starts[-1][1:] == (5, 0) and "TITLE" in res.screens


def _console_copy(c: SimMenuConsole) -> SimMenuConsole:
    import copy

    flow = c.flow
    c.flow = None
    out = copy.deepcopy(c)
    c.flow = flow
    out.flow = None if flow is None else flow.clone()
    return out


@pytest.fixture(scope="module")
def stage_clear_console(reader):
    """A simulated console whose level 0 MED was just cleared (the heuristic policy plays)."""
    from hil.loop.heuristic import HeuristicPolicy

    c = SimMenuConsole("options", level=0, speed=1)
    drive(c, reader, 0, 1)
    policy, queue = HeuristicPolicy(), []
    while c.flow is not None and c.flow.end_frame < 0:
        g = c.flow.game
        if (
            c.flow.stage == engine.FlowStage.PLAY
            and not queue
            and g.phase == 1
            and g.next_action == 0
        ):
            p = engine.plan(g)
            queue = [int(m) for m in p.masks(policy.choose(g, p.reachable))]
        c.masks[c.frame + 1] = queue.pop(0) if queue else 0
        c.step()
    assert c.flow is not None and c.flow.stage == engine.FlowStage.STAGE_CLEAR
    return c


@pytest.mark.parametrize("wait", [0, 80, 97, 130])
def test_driver_leaves_a_stage_clear_by_the_soft_reset_without_chaining(
    reader, stage_clear_console, wait
):
    """Whenever the driver first looks (before the box, as it is drawn, around the Start loop's
    opening 97 frames after the last virus, or later), its held A+B+Select+Start reaches the
    title before level 1's intro begins (the loop takes the Start as the chain's; checkPauseReset
    ends it 2 frames later; a 4-frame hold begun just before the loop opened let level 1's
    intro run until the driver reset it again, ~300 frames later)."""
    c = _console_copy(stage_clear_console)
    for _ in range(wait):
        c.masks[c.frame + 1] = 0
        c.step()
    chained = []
    step, starts = c.step, len(c.starts)

    def watched() -> None:
        step()
        if (
            len(c.starts) == starts
            and c.flow is not None
            and c.flow.stage == engine.FlowStage.VIRUSES
        ):
            chained.append(c.frame)  # level 1's intro: the chain went past the reset check

    c.step = watched  # type: ignore[method-assign]
    res = drive(c, reader, 8, 2)
    assert chained == [] and c.starts[-1][1:] == (8, 2)
    assert res.screens[:2] == ["STAGE_CLEAR", "TITLE"] or res.screens[:3] == [
        "LEVEL",
        "STAGE_CLEAR",
        "TITLE",
    ]


def test_driver_refuses_to_start_a_level_the_screen_does_not_show(reader):
    c = SimMenuConsole("options", level=3, speed=1)

    def dropped(masks):  # a controller the console does not hear: the screen stays on 3
        return c.frame + 2

    d = MenuDriver(c.newest, dropped, reader.read_nes)
    with pytest.raises(MenuError, match="not starting"):
        d.start(12, 1)
    assert c.starts == [] and c.menu is not None and c.menu.level == 3
    with pytest.raises(ValueError):
        d.start(21, 0)
