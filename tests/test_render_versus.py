"""The two-player picture (engine.render_versus, docs/RENDER.md "Two players") with the
clean-room tiles: where each player's bottle, pills, digits and crowns are drawn, the redraw
lag, and the screen facts."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import Button, Phase, ScreenKind
from engine.render import render_versus_indices, versus_frame_layout, versus_palette_ram

BLOCK = (0x0300, 0x0380)
FIELD = (0x0400, 0x0500)
BOTTLE_LEFT = (32, 160)  # NES pixels: fieldRow_PPUADDR_2P_P1 column 4, _P2 column 20
BOTTLE_TOP = 80  # row 10
NEXT_XY = ((0x38, 0x33), (0xB8, 0x33))  # spr_nextPill_2p_p1/p2_x/y
LEVEL_Y, LEVEL_X = 0x2B, (0x6D, 0x84)  # spr_lvlNb_2p_*
VIRUS_Y, VIRUS_X = 0xBF, (0x6E, 0x83)  # spr_virusLeft_2p_*


def idle_ram(virus_left: tuple[int, int] = (0x16, 0x09)) -> bytearray:
    """Both players idle (nextAction doNothing), nothing to redraw, empty fields, levels 3 / 12,
    speeds LOW / HI."""
    ram = bytearray(0x800)
    ram[0x0400:0x0600] = b"\xff" * 0x200
    for i in range(2):
        b = BLOCK[i]
        ram[b + 0x00] = 0xFF  # status
        ram[b + 0x17] = 4  # nextAction doNothing
        ram[b + 0x24] = virus_left[i]
        ram[b + 0x16] = (3, 12)[i]  # level
        ram[b + 0x0B] = (0, 2)[i]  # speed
        ram[b + 0x1A], ram[b + 0x1B] = (1, 2)[i], (0, 1)[i]  # next pill colours
    ram[0x17], ram[0x18] = 0x89, 0x88
    ram[0x54] = 0xFF
    return ram


def versus_from(ram: bytearray, phase: Phase = Phase.PLAYING) -> engine.Versus:
    return engine.Versus.from_ram(bytes(ram), phase)


def playing(seed: int = 0x8988, frames: int = 200) -> engine.Versus:
    v = engine.Versus(4, 1, 7, 2, seed)
    while v.phase == Phase.INTRO:
        v.step(0, 0)
    for i in range(frames):
        v.step(Button.LEFT if i % 9 == 0 else 0, Button.RIGHT if i % 7 == 0 else 0)
    return v


def test_bottles_are_drawn_at_the_2p_rows_and_columns():
    ram = idle_ram()
    where = [(0, 0), (15, 7), (7, 3), (12, 5)]
    codes = ([0xD0, 0xD1, 0x62, 0x82], [0xD2, 0xD0, 0x60, 0x81])
    cells = [[(r, c, codes[i][k]) for k, (r, c) in enumerate(where)] for i in range(2)]
    for i in range(2):
        for r, c, code in cells[i]:
            ram[FIELD[i] + r * 8 + c] = code
    v = versus_from(ram)
    vram = versus_frame_layout(v)["vram"][:960].reshape(30, 32)
    for i, left in enumerate((4, 20)):
        assert np.array_equal(vram[10:26, left : left + 8].ravel(), np.asarray(v.player(i).shown))
        for r, c, code in cells[i]:
            assert vram[10 + r, left + c] == code
    idx = render_versus_indices(v)
    for i in range(2):
        for r, c, _ in cells[i]:
            y, x = BOTTLE_TOP + 8 * r, BOTTLE_LEFT[i] + 8 * c
            block = idx[y : y + 8, x : x + 8]
            assert ((block == 0) | (block // 4 == 2)).all()  # background palette 2
            assert block.any()


def test_one_row_of_each_player_is_redrawn_per_nmi():
    ram = idle_ram()
    ram[BLOCK[0] + 0x00] = 15  # status: p1 redraws from the bottom
    ram[BLOCK[1] + 0x00] = 15
    v = versus_from(ram)
    for i in range(2):
        v.player(i).field[15 * 8 + 2] = 0xD2
        v.player(i).field[14 * 8 + 2] = 0xD1
    f = engine.versus_screen_facts(v)
    for i in range(2):  # the next NMI copies row 15 only
        assert f.players[i].bottle[15, 2] == 0xD2 and f.players[i].bottle[14, 2] == 0xFF
    v.step(0, 0)
    f = engine.versus_screen_facts(v)
    for i in range(2):
        assert f.players[i].bottle[14, 2] == 0xD1
        assert np.array_equal(f.players[i].bottle[15], np.asarray(v.player(i).shown)[120:])


def test_falling_pills_are_drawn_from_their_start_x():
    v = playing()
    layout = versus_frame_layout(v)
    facts = engine.versus_screen_facts(v)
    oam = layout["oam"]
    k = 0
    for i in range(2):
        p = facts.players[i].falling
        if p is None:
            continue
        assert p.box[0] == BOTTLE_LEFT[i] + 8 * p.x  # fallingPill_startXPos $20 / $A0
        y0 = (0xC8, 0xC0, 0xB8, 0xB0, 0xA8, 0xA0, 0x98, 0x90)[p.y] if p.y < 8 else None
        if y0 is not None:
            assert oam[k][0] == y0
        assert oam[k][3] == p.box[0]
        k += 2
    assert k > 0


def test_next_pills_digits_and_their_oam():
    ram = idle_ram()
    v = versus_from(ram)
    facts = engine.versus_screen_facts(v)
    oam = versus_frame_layout(v)["oam"]
    assert facts.kind == ScreenKind.LEVEL
    for i in range(2):
        n = facts.players[i].next
        assert n is not None and n.throw_frame == 0
        x, y = NEXT_XY[i]
        assert n.box == (x, y + 1, 16, 8)
        assert n.colors == ((1, 2)[i], (0, 1)[i])
        assert list(oam[2 * i]) == [y, 0x60 + n.colors[0], 2, x]
        assert list(oam[2 * i + 1]) == [y, 0x70 + n.colors[1], 2, x + 8]
    digits = [tuple(o) for o in oam[4:12]]
    want = [
        (LEVEL_Y, 0, 1, LEVEL_X[0]),
        (LEVEL_Y, 3, 1, LEVEL_X[0] + 8),
        (LEVEL_Y, 1, 1, LEVEL_X[1]),
        (LEVEL_Y, 2, 1, LEVEL_X[1] + 8),
        (VIRUS_Y, 1, 1, VIRUS_X[0]),
        (VIRUS_Y, 6, 1, VIRUS_X[0] + 8),
        (VIRUS_Y, 0, 1, VIRUS_X[1]),
        (VIRUS_Y, 9, 1, VIRUS_X[1] + 8),
    ]
    assert digits == want
    assert len(oam) == 12


def test_speed_texts_and_bottle_colour():
    v = versus_from(idle_ram())
    vram = versus_frame_layout(v)["vram"]
    low, hi = [0x15, 0x18, 0x20], [0xFE, 0x11, 0x12]  # textLevelSpeed
    assert list(vram[0xEC:0xEF]) == low and list(vram[0xF1:0xF4]) == hi
    pal = versus_palette_ram(v)
    tiles = engine.TileSet.clean_room()
    assert pal[3] == pal[7] == pal[15] == tiles.speed_colors[2]  # player 2's speed: HI


@pytest.mark.parametrize("victories", [(0, 0), (1, 0), (2, 1), (0, 2)])
def test_crowns_at_their_vram_addresses(victories):
    ram = idle_ram()
    ram[BLOCK[0] + 0x1E], ram[BLOCK[1] + 0x1E] = victories
    v = versus_from(ram)
    assert v.crowns == victories
    assert engine.versus_screen_facts(v).crowns == victories
    vram = versus_frame_layout(v)["vram"]
    bare = versus_frame_layout(versus_from(idle_ram()))["vram"]
    addrs = ((0x220E, 0x21CE, 0x218E), (0x2210, 0x21D0, 0x2190))  # crownsP1/P2_PPUADDR
    changed = set(np.flatnonzero(vram != bare))
    want = set()
    for i in range(2):
        for k in range(victories[i]):
            a = addrs[i][k] - 0x2000
            assert list(vram[[a, a + 1, a + 32, a + 33]]) == [0x5C, 0x5D, 0x6C, 0x6D]
            want |= {a, a + 1, a + 32, a + 33}
    assert changed == want


def test_a_top_out_hides_the_next_pills_and_shows_the_losers_sign():
    ram = idle_ram()
    ram[BLOCK[1] + 0x09] = 1  # p2's levelFailFlag
    v = versus_from(ram, Phase.ROUND_LOST)
    assert engine.versus_screen_facts(v).kind == ScreenKind.TOP_OUT
    v.step(0, 0)  # anyPlayerLoses: p1 +1, whoFailed 2
    assert v.phase == Phase.ROUND_OVER and v.who_failed == 2
    facts = engine.versus_screen_facts(v)
    assert facts.kind == ScreenKind.TOP_OUT
    assert all(p.next is None for p in facts.players)
    assert facts.crowns == (0, 0)  # the end screen draws the new crown after its waits
    tiles = engine.TileSet.clean_room()
    oam = versus_frame_layout(v, tiles)["oam"]
    assert len(oam) == 8 + len(tiles.metasprites[7]) + len(tiles.metasprites[6])
    sign = tiles.metasprites[7]
    first = oam[8 : 8 + len(sign)]
    assert np.array_equal(first[:, 3], (sign[:, 3] + 0xB4) & 0xFF)  # redLoseVirus_XPos[2]
    assert np.array_equal(first[:, 0], (sign[:, 0] + 0xB7) & 0xFF)


def test_pause_shows_only_the_pause_sprites():
    v = playing(frames=30)
    v.step(Button.START, 0)
    v.step(0, 0)
    assert v.phase == Phase.PAUSED
    layout = versus_frame_layout(v, engine.TileSet.clean_room())
    assert layout["kind"] == ScreenKind.PAUSED and not layout["bg_visible"]
    assert len(layout["oam"]) == len(engine.TileSet.clean_room().metasprites[0])
    facts = engine.versus_screen_facts(v)
    assert all(p.falling is None and p.next is None for p in facts.players)


def test_render_is_a_pure_function_and_fills_out():
    v = playing()
    a = engine.render_versus(v)
    w = v.clone()
    out = np.zeros((240, 256, 3), np.uint8)
    assert engine.render_versus(w, out=out) is out
    assert np.array_equal(a, out)
    assert a.shape == (240, 256, 3) and a.dtype == np.uint8


def test_facts_follow_the_state_over_play():
    v = engine.Versus(6, 1, 6, 1, 0x1234)
    for frame in range(900):
        f = engine.versus_screen_facts(v)
        layout = versus_frame_layout(v)
        vram = layout["vram"][:960].reshape(30, 32)
        for i, left in enumerate((4, 20)):
            assert np.array_equal(f.players[i].bottle, vram[10:26, left : left + 8])
            p = f.players[i].falling
            assert (p is not None) == bool(v.player(i).game().spr_pill)
        v.step(Button.DOWN if frame % 3 else 0, Button.A if frame % 11 == 0 else Button.DOWN)
        if v.phase >= Phase.ROUND_OVER:
            break


def test_wrong_arguments():
    with pytest.raises(TypeError, match="engine.Versus"):
        engine.render_versus(engine.Game(1, 1, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        engine.render_versus(playing(frames=1), out=np.zeros((240, 256), np.uint8))


def test_custom_tileset_without_a_2p_background_draws_a_blank_screen():
    clean = engine.TileSet.clean_room()
    tiles = engine.TileSet(
        patterns=clean.patterns,
        palettes=clean.palettes,
        speed_colors=clean.speed_colors,
        nametable=clean.nametable,
        metasprites=clean.metasprites,
    )
    vram = versus_frame_layout(versus_from(idle_ram()), tiles)["vram"]
    assert (vram[:0x40] == 0xFF).all() and (vram[960:] == 0).all()
