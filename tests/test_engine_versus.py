"""Two-player (versus) rules from the disassembly, on hand-made states (docs/VERSUS.md)."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import Phase

BLOCK = (0x0300, 0x0380)
FIELD = (0x0400, 0x0500)
STATUS, NEXT_ACTION, PILL_STEP, COMBO = 0x00, 0x17, 0x07, 0x0F
ATTACK_SIZE, ATTACK_COLORS, VICTORIES, VIRUS_LEFT = 0x18, 0x29, 0x1E, 0x24
FAIL = 0x09
DO_NOTHING, CHECK_ATTACK, PILL_PLACED, SEND_PILL = 4, 2, 1, 6


def make_ram(frame_counter: int = 0) -> bytearray:
    """Both players idle (nextAction doNothing), nothing to redraw, 16 viruses left, empty
    fields except one virus each at the bottom left."""
    ram = bytearray(0x800)
    ram[0x0400:0x0600] = b"\xff" * 0x200
    for i in range(2):
        b = BLOCK[i]
        ram[b + STATUS] = 0xFF
        ram[b + NEXT_ACTION] = DO_NOTHING
        ram[b + VIRUS_LEFT] = 0x16
        ram[b + 0x05], ram[b + 0x06] = 3, 15
        ram[FIELD[i] + 15 * 8 + 7] = 0xD2
    ram[0x43] = frame_counter
    ram[0x17], ram[0x18] = 0x89, 0x88  # the power-on RNG state
    ram[0x54] = 0xFF
    return ram


def attack_columns(size: int, frame_counter: int) -> list[int]:
    """checkReleaseAttack [$9C1B]: the top-row columns, from frameCounter after the NMI."""
    if size == 2:
        c = frame_counter & 3
        return [c, c + 4]
    if size == 3:
        c = frame_counter & 3
        return [c, c + 2, c + 4]
    c = frame_counter & 1
    return [c, c + 2, c + 4, c + 6]


@pytest.mark.parametrize("size", [2, 3, 4, 5, 7])
@pytest.mark.parametrize("fc", [0, 1, 2, 3, 6])
@pytest.mark.parametrize("receiver", [0, 1])
def test_attack_lands_in_the_top_row_at_the_frame_counter_columns(size, fc, receiver):
    ram = make_ram(frame_counter=(fc - 1) & 0xFF)  # the NMI increments it first
    sender = 1 - receiver
    ram[BLOCK[sender] + ATTACK_SIZE] = size
    ram[BLOCK[sender] + ATTACK_COLORS : BLOCK[sender] + ATTACK_COLORS + 4] = bytes([2, 0, 1, 2])
    ram[BLOCK[receiver] + NEXT_ACTION] = CHECK_ATTACK
    ram[FIELD[receiver] + 1] = 0x61  # a left half in the top row: overwritten if hit
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    got = np.asarray(v.player(receiver).field)
    cols = attack_columns(size, fc)
    for k, col in enumerate(cols):
        assert got[col] == 0x80 | [2, 0, 1, 2][k]
    for col in set(range(8)) - set(cols):
        assert got[col] == (0x61 if col == 1 else 0xFF)
    assert int(v.player(sender).attack_size) == 0  # sizes above 4 send 4; the rest is lost
    assert int(v.player(receiver).next_action) == PILL_PLACED
    assert int(v.player(receiver).pill_placed_step) == 0


def test_no_attack_below_two_and_combo_banking():
    ram = make_ram()
    ram[BLOCK[0] + NEXT_ACTION] = CHECK_ATTACK
    ram[BLOCK[0] + COMBO] = 3  # three lines from one pill: banked as attackSize 3
    ram[BLOCK[1] + ATTACK_SIZE] = 1  # below attackSize_min: nothing received
    ram[BLOCK[1] + NEXT_ACTION] = CHECK_ATTACK
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    # p1 banked 3 and received nothing; p2 ran after p1 in the same frame and received it.
    assert int(v.p1.combo_counter) == 0
    assert int(v.p1.next_action) == 5  # incNextAction
    assert int(v.p1.attack_size) == 0  # released onto p2 in the same frame
    assert int(v.p2.next_action) == PILL_PLACED
    assert (np.asarray(v.p2.field)[:8] != 0xFF).sum() == 3


def test_combo_of_one_is_not_an_attack():
    ram = make_ram()
    ram[BLOCK[1] + NEXT_ACTION] = CHECK_ATTACK
    ram[BLOCK[1] + COMBO] = 1
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    assert int(v.p2.attack_size) == 0 and int(v.p2.combo_counter) == 0


def test_update_attack_color_records_each_line_colour():
    # A vertical line of four (red virus + 3 red singles) in p1's column 0: checkVerMatch.
    ram = make_ram()
    f = FIELD[0]
    ram[f + 15 * 8 + 7] = 0xFF
    for r in (12, 13, 14):
        ram[f + r * 8] = 0x81
    ram[f + 15 * 8] = 0xD1
    ram[BLOCK[0] + VIRUS_LEFT] = 0x02
    ram[BLOCK[0] + NEXT_ACTION] = PILL_PLACED
    ram[BLOCK[0] + PILL_STEP] = 6  # checkVerMatch
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    assert int(v.p1.combo_counter) == 1 and list(v.p1.attack_colors)[0] == 1
    assert v.p1.virus_left == 1


def _clear_last_virus(ram: bytearray, i: int) -> None:
    f = FIELD[i]
    ram[f + 15 * 8 + 7] = 0xFF
    for r in (12, 13, 14):
        ram[f + r * 8] = 0x80
    ram[f + 15 * 8] = 0xD0
    ram[BLOCK[i] + VIRUS_LEFT] = 0x01
    ram[BLOCK[i] + NEXT_ACTION] = PILL_PLACED
    ram[BLOCK[i] + PILL_STEP] = 6


@pytest.mark.parametrize("winner", [0, 1])
def test_round_won_by_clearing_the_bottle(winner):
    ram = make_ram()
    _clear_last_virus(ram, winner)
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    assert v.phase == Phase.ROUND_OVER
    assert v.who_won == winner + 1
    assert v.victories == ((1, 0) if winner == 0 else (0, 1))
    assert int(v.p1.status) == int(v.p2.status) == 0x0F  # checkVirusLeft sets both
    nxt = v.clone()
    nxt.next_round(5)
    assert nxt.phase == Phase.INTRO and nxt.victories == v.victories and nxt.rounds == 2


def test_both_clear_in_one_frame_is_a_draw_with_a_point_each():
    ram = make_ram()
    _clear_last_virus(ram, 0)
    _clear_last_virus(ram, 1)
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    assert v.phase == Phase.ROUND_OVER and v.who_won == 0 and v.victories == (1, 1)


def test_third_victory_of_p1_skips_p2s_pass():
    ram = make_ram()
    _clear_last_virus(ram, 0)
    _clear_last_virus(ram, 1)
    ram[BLOCK[0] + VICTORIES] = 2
    ram[BLOCK[1] + VICTORIES] = 2
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    assert v.phase == Phase.MATCH_OVER and v.who_won == 1
    assert v.victories == (3, 2)  # p2's pass did not run
    assert v.p2.virus_left == 1


@pytest.mark.parametrize("loser", [0, 1])
def test_top_out_gives_the_other_player_the_round(loser):
    ram = make_ram()
    ram[BLOCK[loser] + NEXT_ACTION] = SEND_PILL
    ram[FIELD[loser] + 3] = 0x82  # the spawn cell (row 0, column 3) is taken
    ram[FIELD[loser] + 12 * 8] = 0xD1  # a virus in the lower half, emptied on the loss
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    assert v.phase == Phase.ROUND_LOST and int(v.player(loser).level_fail) == 1
    assert int(v.p1.next_action) == DO_NOTHING and int(v.p2.next_action) == DO_NOTHING
    v.step(0, 0)  # anyPlayerLoses [$9542]
    assert v.phase == Phase.ROUND_OVER
    assert v.who_failed == loser + 1
    assert v.victories == ((0, 1) if loser == 0 else (1, 0))
    assert (np.asarray(v.player(loser).field)[64:] == 0xFF).all()
    assert np.asarray(v.player(1 - loser).field)[127] == 0xD2


def test_both_top_out_is_a_draw_with_no_point():
    ram = make_ram()
    for i in range(2):
        ram[BLOCK[i] + NEXT_ACTION] = SEND_PILL
        ram[FIELD[i] + 4] = 0x80
    v = engine.Versus.from_ram(bytes(ram), Phase.PLAYING)
    v.step(0, 0)
    v.step(0, 0)
    assert v.phase == Phase.ROUND_OVER and v.who_failed == 0 and v.victories == (0, 0)


def test_shared_reserve_separate_counters():
    v = engine.Versus(3, 1, 3, 1, 0x1234)
    assert np.array_equal(v.p1.field, v.p2.field)  # equal levels: identical boards
    assert int(v.p1.pills_counter) == int(v.p2.pills_counter) == 2
    reserve = v.reserve
    n = 0
    while int(v.p1.pills_counter) < 8 and n < 5000:
        v.step(engine.Button.DOWN, 0)  # p1 drops fast, p2 idles
        n += 1
    assert int(v.p1.pills_counter) > int(v.p2.pills_counter)
    for pl in (v.p1, v.p2):
        left, right = engine.pill_colors(reserve[int(pl.pills_counter) - 1])
        assert list(pl.next_colors) == [left, right]


def test_different_levels_interleave_the_viruses():
    v = engine.Versus(2, 0, 9, 2, 0x8988)
    assert v.p1.virus_count == 12 and v.p2.virus_count == 40
    assert v.p1.virus_left == 12 and v.p2.virus_left == 40
    # Player 1 alone would have drawn its viruses from an uninterrupted RNG stream.
    assert not np.array_equal(v.p1.field, np.asarray(engine.generate_level(2, 0x8988)["field"]))
    assert v.intro_frames >= 40


def test_two_player_pill_is_thrown_without_the_animation():
    v = engine.Versus(0, 1, 0, 1, 0x8988)
    n = 0
    while not (v.phase == Phase.PLAYING and int(v.p1.next_action) == 0):
        v.step(0, 0)
        n += 1
    assert n == 128 + 1 + 1  # levelIntro_delay, sendPill, sendPillFinished


def test_clone_is_independent():
    v = engine.Versus(5, 1, 5, 1, 0x4321)
    w = v.clone()
    for _ in range(300):
        v.step(engine.Button.DOWN, engine.Button.LEFT)
    assert w.frame == 0 and v.frame == 300
    assert not np.array_equal(v.p1.field, w.p1.field) or v.p1.pills_counter != w.p1.pills_counter
    x = w.clone()
    for _ in range(300):
        w.step(engine.Button.DOWN, engine.Button.LEFT)
    assert w.state_bytes() == v.state_bytes() and x.frame == 0


def test_one_player_game_has_no_attack_and_scores():
    g = engine.Game(0, 1, 0x8988)
    assert engine.STATE_BYTES % 4 == 0
    for _ in range(3000):
        g.step(engine.Button.DOWN)
    assert int(g.phase) in (Phase.TOP_OUT, Phase.STAGE_CLEAR, Phase.PLAYING)
