"""engine.LevelFlow: the frames around play, against facts of the disassembly.

Authority: Nostaljipi/dr-mario-disassembly. The main loop (init @mainLoop, prg/
drmario_prg_game_init.asm: mode routine, checkPauseReset [$979E], one NMI wait), toLevel [$817E]
and initData_level [$8216] (prg/drmario_prg_level_init.asm), levelIntro [$9CAB], addVirus [$9D19],
waitFor_A_frames [$9711], anyPlayerLoses [$9542], playerLoses_endScreen [$959A], toNextLevel
[$9E66] (prg/drmario_prg_game_logic.asm), checkVirusLeft [$B269] (prg/drmario_prg_level_end.asm).
docs/LEVEL_FLOW.md derives each frame count used here.
"""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import FlowScreen, FlowStage
from hil.loop.heuristic import HeuristicPolicy

START = int(engine.Button.START)
LEVEL_INTRO_DELAY = 0x80  # levelIntro_delay
NO_VIRUS_LEFT_DELAY, STATUS_UPDATE_DELAY = 0x40, 0x10  # noVirusLeft_delay, statusUpdate_delay
END_SCREEN_DELAY, END_LEVEL_DELAY = 0x40, 0x80  # endScreen_delay, endLevel_delay


def run_to(flow: engine.LevelFlow, until, buttons: int = 0, limit: int = 20_000) -> None:
    for _ in range(limit):
        if until(flow):
            return
        flow.step(buttons)
    raise AssertionError("condition not reached")


def viruses(cells: np.ndarray) -> int:
    return int(((cells & 0xF0) == 0xD0).sum())


@pytest.mark.parametrize(
    ("level", "speed", "seed", "fc"), [(0, 1, 0x8988, 11), (20, 2, 0x1234, 200)]
)
def test_intro_one_virus_a_frame_then_state_0_is_the_engines(level, speed, seed, fc):
    """toLevel holds modes 2 (frames 1-2) and 3 (frame 3); initData_level makes the reserve in
    frame 4 (mode 8); levelIntro calls addVirus once a frame from frame 6; the NMI draws each
    virus's row one frame later; the frame after the last call is the engine's State 0."""
    flow = engine.LevelFlow(level, speed, seed, frame_counter=fc)
    modes, counts, shown_counts, screens = [], [], [], []
    while flow.state0_frame < 0:
        flow.step(0)
        modes.append(flow.mode)
        counts.append(viruses(flow.field))
        shown_counts.append(viruses(flow.shown))
        screens.append(FlowScreen(flow.screen))
    gen = engine.generate_level(level, seed)
    calls = gen["add_virus_calls"]
    assert modes[:4] == [2, 2, 3, 8] and set(modes[4:]) == {8}
    assert screens[:4] == [
        FlowScreen.OPTIONS,
        FlowScreen.BLANK,
        FlowScreen.LOADING,
        FlowScreen.LEVEL,
    ]
    assert counts[4] == 0 and counts[5] == 1  # first virus on frame 6
    assert flow.state0_frame == 6 + calls == len(counts)
    assert flow.add_virus_calls == calls
    steps = np.diff(counts[4:-1])  # one entry per addVirus call (frames 6 .. 5 + calls)
    assert set(steps.tolist()) <= {0, 1} and int((steps == 0).sum()) == calls - gen["virus_count"]
    assert shown_counts[1:] == counts[:-1]  # the picture lags RAM by one NMI
    assert np.array_equal(flow.field, gen["field"])
    # State 0 is exactly the engine's level start: Game(level, speed, seed, frameCounter).
    game = engine.Game(level, speed, seed, frame_counter=(fc + flow.state0_frame) & 0xFF)
    assert flow.game.state_bytes() == game.state_bytes()


@pytest.mark.parametrize("speed", [0, 1, 2])
def test_play_starts_128_frames_after_state_0_and_the_pill_after_the_throw(speed):
    """waitFor_A_frames(levelIntro_delay) then mode 4; action_sendPill's throw takes 22 frames on
    MED/HI (every other frame on LOW), then sendPillFinished: the pill moves on the next frame."""
    flow = engine.LevelFlow(3, speed, 0x4808, frame_counter=21)
    run_to(flow, lambda f: f.pill_frame >= 0)
    assert flow.play_frame == flow.state0_frame + LEVEL_INTRO_DELAY
    delay = flow.pill_frame - flow.play_frame
    assert delay == 24 if speed else delay in (45, 46)
    g = flow.game
    assert g.next_action == 0 and g.pill_y == 15 and g.pill_x == 3


def test_late_init_delays_the_whole_level_by_one_frame():
    a = engine.LevelFlow(13, 1, 0x3420, frame_counter=37)
    b = engine.LevelFlow(13, 1, 0x3420, frame_counter=37, late_init=True)
    run_to(a, lambda f: f.pill_frame >= 0)
    run_to(b, lambda f: f.pill_frame >= 0)
    assert b.state0_frame == a.state0_frame + 1 and b.pill_frame == a.pill_frame + 1
    assert np.array_equal(a.field, b.field)


def play_to_end(flow: engine.LevelFlow, limit: int = 40_000) -> None:
    """Plays the current level with the planner and the heuristic policy until it ends."""
    policy = HeuristicPolicy()
    queue: list[int] = []
    for _ in range(limit):
        if flow.end_frame >= 0:
            return
        g = flow.game
        if flow.stage == FlowStage.PLAY and not queue and g.phase == 1 and g.next_action == 0:
            p = engine.plan(g)
            queue = [int(m) for m in p.masks(policy.choose(g, p.reachable))]
        flow.step(queue.pop(0) if queue else 0)
    raise AssertionError("the level did not end")


def test_stage_clear_chains_to_the_next_level_with_the_score():
    """checkVirusLeft: $40 + $10 + $10 frames, the STAGE CLEAR box, level + 1; Start (pressed or
    held) from the 97th frame; toNextLevel; mode 3 two frames later; the next level is made from
    the RNG where the last one left it, at the same speed, with the score carried."""
    flow = engine.LevelFlow(0, 1, 0x8988, frame_counter=11)
    play_to_end(flow)
    assert flow.stage == FlowStage.STAGE_CLEAR
    end, score, rng = flow.end_frame, flow.score, flow.rng
    assert score > 0
    run_to(flow, lambda f: f.frame == end + NO_VIRUS_LEFT_DELAY)
    assert viruses(flow.field) == 0 and flow.field[8] == 0x8B  # txtBox_stageClear's corner
    run_to(flow, lambda f: f.frame == end + NO_VIRUS_LEFT_DELAY + 2 * STATUS_UPDATE_DELAY)
    assert flow.level == 1 and flow.stage == FlowStage.STAGE_CLEAR
    flow.step(START)  # Start held from the first frame it is looked at
    x = flow.frame
    assert x == end + 97 and flow.stage == FlowStage.LOAD and flow.start_frame == x
    flow.step(START)
    assert flow.screen == FlowScreen.BLANK and flow.mode == 4
    flow.step(0)
    assert flow.mode == 3 and flow.levels_started == 2
    run_to(flow, lambda f: f.state0_frame >= 0)
    gen = engine.generate_level(1, rng)
    assert flow.state0_frame == x + 5 + gen["add_virus_calls"]
    assert np.array_equal(flow.field, gen["field"])
    assert (flow.level, flow.speed, flow.score, flow.game.score) == (1, 1, score, score)


@pytest.mark.parametrize(("hold", "resets"), [(2, False), (3, True), (48, True)])
def test_the_soft_reset_on_a_stage_clear_needs_the_buttons_held_2_frames_past_its_start(
    hold, resets
):
    """The stage clear's Start loop takes A+B+Select+Start as its Start (the chain), and only the
    main loop's checkPauseReset [$979E], 2 frames later, sees the four still held and goes to the
    title. The real game (cynes, level 3 MED): held 2 frames from the loop's first frame it
    chains to the next level, 3 or more it resets; 4 frames begun 2 frames before the loop
    opens chain too (hil.menus holds them 48 frames)."""
    reset = int(engine.Button.A | engine.Button.B | engine.Button.SELECT) | START
    flow = engine.LevelFlow(0, 1, 0x8988, frame_counter=11)
    play_to_end(flow)
    end = flow.end_frame
    run_to(flow, lambda f: f.frame == end + 96)  # the loop reads the pad from frame end + 97
    for _ in range(hold):
        if flow.stage == FlowStage.SOFT_RESET:
            break
        flow.step(reset)
    for _ in range(6):
        if flow.stage == FlowStage.SOFT_RESET:
            break
        flow.step(0)
    if resets:
        assert flow.stage == FlowStage.SOFT_RESET and flow.mode == 0
        assert flow.frame == end + 99  # the loop's first frame + 2
    else:
        assert flow.stage in (FlowStage.LOAD, FlowStage.VIRUSES) and flow.levels_started == 2


def test_cutscene_before_levels_6_11_16_at_med_hi_and_the_ending_before_21():
    """cutscene_objectFlying_basedOnSpeedAndLvl [$A012] and toNextLevel's level-21 branch."""
    got = {(lv, sp) for lv in range(25) for sp in range(3) if engine.cutscene_before(lv, sp)}
    assert got == {(6, 1), (11, 1), (16, 1), (6, 2), (11, 2), (16, 2), (21, 0), (21, 1), (21, 2)}


def test_top_out_goes_to_game_over_then_start_to_the_options():
    flow = engine.LevelFlow(10, 2, 0xD081, frame_counter=35)
    run_to(flow, lambda f: f.end_frame >= 0, buttons=0)  # nobody plays: the pills stack up
    t = flow.end_frame
    assert flow.stage == FlowStage.GAME_OVER and flow.mode == 5
    flow.step(0)
    assert flow.mode == 7
    box = t + 2 + END_SCREEN_DELAY + END_LEVEL_DELAY
    run_to(flow, lambda f: f.frame == box)
    assert flow.field[0x10] == 0x8B and viruses(flow.field) == 0  # txtBox_gameOver at $10
    flow.step(START)
    assert flow.stage == FlowStage.OPTIONS and flow.mode == 1 and flow.terminal


def test_start_in_the_frame_initdata_returns_pauses_the_intro():
    """initData_level sets enablePause; checkPauseReset runs when it returns (frame 5)."""
    plain = engine.LevelFlow(0, 1, 0x8988)
    paused = engine.LevelFlow(0, 1, 0x8988)
    run_to(plain, lambda f: f.state0_frame >= 0)
    for _ in range(4):
        paused.step(0)
    paused.step(START)
    assert paused.stage == FlowStage.PAUSED
    for b in (0, 0, 0, START):  # the pause loop: Start alone resumes
        paused.step(b)
    assert paused.stage == FlowStage.VIRUSES
    run_to(paused, lambda f: f.state0_frame >= 0)
    assert paused.state0_frame == plain.state0_frame + 4


def test_soft_reset_where_checkpausereset_runs():
    flow = engine.LevelFlow(0, 1, 0x8988)
    flow.step(0)
    flow.step(0)
    flow.step(0xF0)  # frame 3: toLevel returns into the main loop
    assert flow.stage == FlowStage.SOFT_RESET and flow.terminal and flow.mode == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((21, 0, 0x8988), {}, ValueError),
        ((0, 3, 0x8988), {}, ValueError),
        ((0, 0, 0x10000), {}, ValueError),
        ((5, 0, 0), {}, ValueError),  # a locked RNG cannot place level 5's viruses
        ((0, 0, 0x8988), {"held": 0}, ValueError),  # the flow starts on a Start frame
        ((0, 0, 0x8988), {"frame_counter": 256}, ValueError),
        ((0.5, 0, 0x8988), {}, TypeError),
    ],
)
def test_bad_arguments(args, kwargs, error):
    with pytest.raises(error):
        engine.LevelFlow(*args, **kwargs)
