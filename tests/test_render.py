"""The NES picture of a state: where tiles and sprites land (ARCHITECTURE.md's screen facts), what
lags the game (the row-by-row redraw, the falling pill's sprites), the speed colour, the HUD,
the small viruses' animation and the PPU's sprite rules."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import NES_TABLES

import engine
from engine import Button, Phase, ScreenKind
from engine.render import frame_layout, palette_ram, render_indices

SOLID = {c: np.full((8, 8), c, np.uint8) for c in range(4)}
BG_PAL2 = 2 * 4  # palette RAM index base of background palette 2 (the pill colours)
SPR_PAL2 = 16 + 2 * 4


@pytest.fixture(scope="module")
def tables() -> dict:
    return json.loads(NES_TABLES.read_text())["data/drmario_data_game.asm"]


def probe(bg: dict | None = None, spr: dict | None = None, metasprites: dict | None = None):
    """The clean-room layout with blank patterns except the given tiles (number -> 8x8)."""
    pats = np.zeros((3, 256, 8, 8), np.uint8)
    for tile, pattern in (bg or {}).items():
        pats[0, tile] = pats[1, tile] = pattern
    for tile, pattern in (spr or {}).items():
        pats[2, tile] = pattern
    return engine.TileSet.clean_room().replace(patterns=pats, metasprites=metasprites or {})


def to_falling(g: engine.Game) -> engine.Game:
    for _ in range(400):
        if int(g.phase) == Phase.PLAYING and int(g.next_action) == 0 and int(g.spr_pill):
            return g
        g.step(0)
    raise AssertionError("no falling pill")


def box_of(mask: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def test_every_bottle_cell_is_drawn_at_its_tile():
    # ARCHITECTURE.md: the bottle interior is tile columns 12-19, rows 10-25 (x 96-159, y 80-207).
    tiles = probe(bg={0x41: SOLID[3]})
    g = engine.Game(0, 0, 0x8988)  # intro: no falling pill
    g.status[...] = 0xFF
    for cell in range(128):
        g.shown[:] = 0xFF
        g.field[:] = 0xFF
        g.shown[cell] = 0x41
        idx = render_indices(g, tiles)
        r, c = divmod(cell, 8)
        mask = idx == BG_PAL2 + 3
        assert mask.sum() == 64
        assert box_of(mask) == (96 + 8 * c, 80 + 8 * r, 104 + 8 * c, 88 + 8 * r)


def test_field_rows_are_redrawn_bottom_to_top_one_per_frame():
    g = engine.Game(0, 0, 0x8988)
    g.shown[:] = 0xFF
    g.field[:] = 0x80  # yellow singles everywhere, not yet on screen
    g.status[...] = 15
    tiles = probe(bg={0x80: SOLID[1]})
    rows = np.arange(16)[:, None]
    for k in range(18):
        # The picture after the next NMI: rows 15 .. 15-k redrawn.
        drawn = rows >= 15 - k
        bottle = engine.screen_facts(g).bottle
        assert (bottle == np.where(drawn, 0x80, 0xFF)).all(), k
        idx = render_indices(g, tiles)[80:208, 96:160].reshape(16, 8, 8, 8)
        assert ((idx == BG_PAL2 + 1).all(axis=(1, 2, 3)) == drawn[:, 0]).all(), k
        g.step(0)
    assert int(g.status) == 0xFF


def test_cleared_cells_show_as_just_emptied_tiles():
    g = engine.Game(0, 0, 0x8988)
    g.field[5 * 8 + 2] = 0xB1  # cleared, red
    g.field[5 * 8 + 3] = 0xD2  # a blue virus
    g.status[...] = 5
    bottle = engine.screen_facts(g).bottle
    assert bottle[5, 2] == 0xF1 and bottle[5, 3] == 0xD2


def test_a_lock_shows_up_row_by_row():
    g = to_falling(engine.Game(0, 1, 0x8988))
    g.step(Button.A)  # rotation 3: vertical, 1st half on top
    assert int(g.pill_rotation) & 1
    frames = 0
    while not int(g.lock_event):
        g.step(Button.DOWN)
        frames += 1
        assert frames < 60
    x, y = int(g.pill_x), int(g.pill_y)
    low, high = 15 - y, 14 - y  # rows (from the top) of the lower and upper half
    assert g.field[low * 8 + x] != 0xFF and g.field[high * 8 + x] != 0xFF
    # Lock frame: the NMI after it redraws the lower half's row; the sprite still shows.
    facts = engine.screen_facts(g)
    assert facts.falling is not None
    assert facts.bottle[low, x] == g.field[low * 8 + x]
    assert facts.bottle[high, x] == 0xFF
    g.step(0)
    facts = engine.screen_facts(g)
    assert facts.falling is None
    assert facts.bottle[high, x] == g.field[high * 8 + x]


def test_falling_pill_sprites_are_one_line_below_the_grid():
    tiles = probe(spr={t + c: SOLID[1] for t in (0x40, 0x50, 0x60, 0x70) for c in range(3)})
    g = to_falling(engine.Game(0, 1, 0x8988))
    for _ in range(40):
        facts = engine.screen_facts(g)
        assert facts.falling is not None
        row, col = 15 - facts.falling.y, facts.falling.x
        left, top = 96 + 8 * col, 80 + 8 * row + 1  # one line lower than the grid
        assert facts.falling.box == (left, top, 16, 8)
        mask = render_indices(g, tiles) == SPR_PAL2 + 1
        mask[:80] = mask[:, 160:] = False  # the next pill (same tiles) flies above / rests right
        assert box_of(mask) == (left, top, left + 16, top + 8)
        g.step(Button.DOWN if _ % 3 else 0)
        if int(g.next_action) != 0:
            break


def test_falling_pill_sprites_show_the_previous_frame():
    g = to_falling(engine.Game(0, 1, 0x8988))
    x0 = int(g.pill_x)
    g.step(Button.RIGHT)
    assert int(g.pill_x) == x0 + 1
    assert engine.screen_facts(g).falling.x == x0  # drawn before the move
    g.step(0)
    assert engine.screen_facts(g).falling.x == x0 + 1


def test_vertical_pill_box():
    g = to_falling(engine.Game(0, 1, 0x8988))
    g.step(Button.A)
    g.step(0)
    f = engine.screen_facts(g).falling
    assert f.rotation == 3
    assert f.box == (96 + 8 * f.x, 80 + 8 * (15 - f.y) - 8 + 1, 8, 16)


def test_next_pill_at_rest_and_along_the_throw(tables):
    xs, ys = tables["pillThrownAnim_XPos"]["bytes"], tables["pillThrownAnim_YPos"]["bytes"]
    g = engine.Game(0, 1, 0x8988)
    nxt = engine.screen_facts(g).next
    assert nxt.throw_frame == 0 and nxt.box == (xs[0], ys[0] + 1, 16, 8)
    assert nxt.colors == tuple(int(c) for c in g.next_colors)
    seen = set()
    for _ in range(200):
        g.step(0)
        nxt = engine.screen_facts(g).next
        f, off = nxt.throw_frame, 4 * (nxt.rotation & 1)
        vertical = nxt.rotation & 1
        assert nxt.box[:2] == (xs[f] + off, ys[f] + off + 1 - 8 * vertical)
        seen.add(f)
    assert len(seen) > 15  # the pill flew along the arc


def test_bottle_colour_follows_the_speed(tables):
    colors = tables["bkgColor_basedOnSpeed"]["bytes"]
    for speed in range(3):
        g = engine.Game(3, speed, 0x8988)
        img = engine.render_frame(g)
        # Pixel (0, 0) is colour 3 of our background pattern; the bottle inside is black.
        assert tuple(img[0, 0]) == tuple(engine.NES_PALETTE[colors[speed]])
        assert tuple(img[100, 100]) == tuple(engine.NES_PALETTE[0x0F])
        pal = palette_ram(speed)
        assert pal[3] == pal[7] == pal[15] == colors[speed]


def test_hud_digits_at_the_games_vram_addresses():
    g = engine.Game(10, 1, 0x8988)
    g.score[...] = 1234560
    vram = frame_layout(g, top_score=98760)["vram"]
    assert list(vram[0x162:0x168]) == [1, 2, 3, 4, 5, 6]  # score_VRAMaddr $2162
    assert list(vram[0x102:0x108]) == [0, 0, 9, 8, 7, 6]  # TOP 98760 at $2102
    assert list(vram[0x27B:0x27D]) == [1, 0]  # level 10 at $227B
    assert list(vram[0x2DA:0x2DD]) == [0x16, 0x0E, 0x0D]  # "MED" at $22DA
    bcd = int(g.virus_left_bcd)
    assert list(vram[0x33B:0x33D]) == [bcd >> 4, bcd & 15]  # virusLeft_VRAMaddr $233B
    # The digit tiles are drawn where the nametable says: score row 11, columns 2-7.
    tiles = engine.TileSet.clean_room()
    idx = render_indices(g, tiles)
    for i, digit in enumerate([1, 2, 3, 4, 5, 6]):
        block = idx[88:96, 16 + 8 * i : 24 + 8 * i]
        assert (block == np.where(tiles.patterns[0, digit] > 0, 1, 0)).all()


def test_small_viruses_animate_every_8_frames():
    g = engine.Game(5, 1, 0x8988)
    cell = int(np.flatnonzero((g.field & 0xF0) == 0xD0)[0])
    r, c = divmod(cell, 8)
    blocks, frames = [], []
    for _ in range(40):
        img = engine.render_frame(g)
        blocks.append(img[80 + 8 * r : 88 + 8 * r, 96 + 8 * c : 104 + 8 * c].copy())
        frames.append(engine.screen_facts(g).virus_frame)
        assert frames[-1] == ((int(g.frame_counter) + 1) >> 3) & 1
        g.step(0)
    changes = [i for i in range(1, 40) if not np.array_equal(blocks[i], blocks[i - 1])]
    assert changes == [i for i in range(1, 40) if frames[i] != frames[i - 1]]
    assert np.diff(changes).tolist() == [8] * (len(changes) - 1) and len(changes) >= 4


def test_eight_sprites_per_line_in_oam_order():
    # Ten 8x8 sprites side by side on one line (as the doctor's metasprite): the PPU draws the
    # first eight in OAM order only.
    parts = np.array([(100, 0xA0, 0, (8 * i - 0xC0) & 0xFF) for i in range(10)], np.uint8)
    tiles = probe(spr={0xA0: SOLID[1]}, metasprites={0x0A: parts})
    g = engine.Game(0, 1, 0x8988)
    assert int(g.mario_throw_frame) == 0
    idx = render_indices(g, tiles)
    line = idx[0x4B + 100 + 1]  # Mario's OAM Y $4B + dy, drawn one line lower
    assert (line[:64] == 17).all() and (line[64:80] != 17).all()


def test_sprite_priority_and_background_priority():
    # Two overlapping sprites: the first in OAM order wins. A sprite behind the background
    # (attribute $20) shows only where the background is transparent.
    checker = (np.indices((8, 8)).sum(axis=0) % 2).astype(np.uint8)
    parts = np.array(
        [(100, 0xA0, 0x00, 0x40), (100, 0xA1, 0x01, 0x40), (40, 0xA1, 0x20, 0x40)], np.uint8
    )
    tiles = probe(
        bg={0xFC: checker, 0xFD: checker},
        spr={0xA0: SOLID[1], 0xA1: SOLID[2]},
        metasprites={0x0A: parts},
    )
    g = engine.Game(0, 1, 0x8988)
    idx = render_indices(g, tiles)
    x = (0xC0 + 0x40) & 0xFF  # column 0: our background pattern
    assert (idx[0x4B + 101 : 0x4B + 109, x : x + 8] == 16 + 1).all()
    block = idx[0x4B + 41 : 0x4B + 49, x : x + 8]
    assert (block == np.where(checker > 0, 1, 16 + 2)).all()  # palette 0, colour 2


def test_pause_hides_the_background():
    g = to_falling(engine.Game(0, 1, 0x8988))
    g.step(Button.START)
    assert int(g.phase) == Phase.PAUSED
    g.step(0)
    facts = engine.screen_facts(g)
    assert facts.kind == ScreenKind.PAUSED and facts.falling is None and facts.next is None
    layout = frame_layout(g)
    assert not layout["bg_visible"]
    assert [tuple(p) for p in layout["oam"][:, [0, 3]]] == [(0x77, 0x70 + 8 * i) for i in range(5)]
    img = engine.render_frame(g)
    black = np.all(img == engine.NES_PALETTE[0x0F], axis=2)
    assert black[:0x78].all() and black[0x80:].all()  # only the PAUSE line is drawn


def test_render_is_a_pure_function_of_the_state():
    g = to_falling(engine.Game(7, 2, 0x1234))
    before = g.state_bytes()
    a = engine.render_frame(g)
    out = np.zeros((240, 256, 3), np.uint8)
    b = engine.render_frame(g.clone(), out=out)
    assert b is out and np.array_equal(a, b) and g.state_bytes() == before
    h = g.clone()
    h.step(Button.LEFT)  # the picture after it still shows the pill before the move
    h.step(0)
    assert not np.array_equal(engine.render_frame(h), a)


def test_demo_bottle_starts_empty_and_fills_in_16_frames():
    g = engine.Game.demo()
    assert (g.shown == 0xFF).all()
    for _ in range(16):
        g.step(0)
    assert np.array_equal(g.shown, g.field)


def test_bad_arguments_raise_clear_errors():
    g = engine.Game(0, 1, 0x8988)
    tiles = engine.TileSet.clean_room()
    with pytest.raises(ValueError, match="out must have shape"):
        engine.render_frame(g, out=np.zeros((240, 256), np.uint8))
    with pytest.raises(TypeError, match="dtype uint8"):
        engine.render_frame(g, out=np.zeros((240, 256, 3), np.float32))
    with pytest.raises(TypeError, match="game must be an engine.Game"):
        engine.render_frame(g.state_bytes())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="engine.TileSet"):
        engine.render_frame(g, tiles="clean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_score"):
        engine.render_frame(g, top_score=-1)
    with pytest.raises(ValueError, match="patterns must have shape"):
        tiles.replace(patterns=np.zeros((2, 256, 8, 8), np.uint8))
    with pytest.raises(ValueError, match="colour indices 0..3"):
        tiles.replace(patterns=np.full((3, 256, 8, 8), 4, np.uint8))
    with pytest.raises(ValueError, match="NES colours 0..63"):
        tiles.replace(palettes=np.full(32, 64, np.uint8))
    with pytest.raises(TypeError, match="dtype uint8"):
        tiles.replace(nametable=np.zeros(1024, np.int64))
    with pytest.raises(ValueError, match="metasprite index"):
        tiles.replace(metasprites={200: np.zeros((1, 4), np.uint8)})
    with pytest.raises(ValueError, match="speed"):
        palette_ram(3)


def test_nes_palette_is_the_2c02s_64_colours():
    p = engine.NES_PALETTE
    assert p.shape == (64, 3) and p.dtype == np.uint8 and not p.flags.writeable
    assert tuple(p[0x0F]) == (0, 0, 0) and tuple(p[0x30]) == (255, 255, 255)
    assert (p[[0x0D, 0x0E, 0x1E, 0x2E, 0x3E, 0x1F]] == 0).all()
    grey = p[[0x00, 0x10, 0x20]]
    assert (grey[:, 0] == grey[:, 1]).all() and (np.diff(grey[:, 0].astype(int)) > 0).all()
    assert np.argmax(p[0x16]) == 0 and np.argmax(p[0x1A]) == 1 and np.argmax(p[0x12]) == 2
    # The pill colours: yellow $28 (red and green high), red $15, blue $21.
    assert p[0x28][2] < min(p[0x28][:2]) and np.argmax(p[0x15]) == 0 and np.argmax(p[0x21]) == 2


def test_top_out_shows_the_doctors_top_out_pose():
    g = engine.Game(0, 1, 0x8988)
    g.field[3] = g.field[4] = 0xD1  # the spawn cells: the first throw cannot be placed
    for _ in range(300):
        if int(g.phase) == Phase.TOP_OUT:
            break
        g.step(0)
    facts = engine.screen_facts(g)
    assert facts.kind == ScreenKind.TOP_OUT and facts.next is None and facts.falling is None
    oam = frame_layout(g)["oam"]
    pose = engine.TileSet.clean_room().metasprites[0x32]  # spr_mario_fail
    want = [((dy + 0x4B) & 0xFF, tile, attr, (dx + 0xC0) & 0xFF) for dy, tile, attr, dx in pose]
    assert [tuple(p) for p in oam[-len(want) :]] == want


def test_the_frame_start_pauses_keeps_the_background():
    g = to_falling(engine.Game(0, 1, 0x8988))
    g.step(Button.START)  # the main loop drew the pill, then paused: no level sprites
    facts = engine.screen_facts(g)
    assert facts.kind == ScreenKind.LEVEL and facts.falling is not None and facts.next is None
    layout = frame_layout(g)
    assert layout["bg_visible"] and len(layout["oam"]) == 2


def test_malformed_art_is_a_clear_error(tmp_path, monkeypatch):
    import engine.tiles as tiles_module

    art = tmp_path / "art.txt"
    art.write_text("tile bg 40 broken\n" + "........\n" * 7 + ".......\n")
    monkeypatch.setattr(tiles_module, "ART", art)
    with pytest.raises(tiles_module.ArtError, match=r"art.txt:1: rows must all have one length"):
        tiles_module.load_cleanroom()
    art.write_text("tile bg 40 broken\n" + "....x...\n" * 8)
    with pytest.raises(tiles_module.ArtError, match="art.txt:2: neither a drawing row"):
        tiles_module.load_cleanroom()


def test_game_palettes_come_from_the_disassembly(tables):
    pal = tables["palLevel_1P"]["bytes"]  # copyBkgOrPalToPPU data: count 32, colours, $FF
    tiles = engine.TileSet.clean_room()
    assert tiles.palettes.tolist() == pal[1:33]
    assert tiles.speed_colors.tolist() == tables["bkgColor_basedOnSpeed"]["bytes"]
    for speed in range(3):
        ram = palette_ram(speed)
        # ARCHITECTURE.md: the pill and virus colours are $28 yellow, $15 red, $21 blue, for the
        # bottle's tiles (background palette 2) and the pill sprites (sprite palette 2).
        assert ram[9:12].tolist() == ram[25:28].tolist() == [0x28, 0x15, 0x21]
        assert ram[0] == pal[1 + 16]  # the backdrop: $3F10's write lands on $3F00
