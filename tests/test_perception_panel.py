"""perception.panel: the LEVEL number and the next pill's flight read from the model's crop,
with digit glyphs rendered from the tiles (clean-room here), through capture chains; and the
decoder's use of them for the screen kind (a later throw over a board of viruses only)."""

from __future__ import annotations

import numpy as np
import pytest

import engine
from calibration import Profile
from calibration.forward import NoiseSource, forward
from engine import Phase
from engine.constants import level_viruses
from perception.decode import decode
from perception.layout import CELL_TYPES, N_CELL_CLASSES, N_KINDS, KindLabel
from perception.panel import (
    PANEL_FILE,
    Panel,
    PanelReader,
    glyphs,
    load_glyphs,
    save_glyphs,
)
from perception.reader import DEFAULT_MODEL, BoardReader, panel_reader

TILES = engine.TileSet.clean_room()


@pytest.fixture(scope="module")
def panel() -> PanelReader:
    return PanelReader(glyphs(TILES))


def pictures_of(level: int, frames: int) -> list[tuple[np.ndarray, int]]:
    """(NES picture, the next pill's throw frame) of a level's first ``frames`` frames."""
    game = engine.Game(level, 1, 4321, 3)
    out = []
    for _ in range(frames):
        out.append((engine.render_frame(game, TILES), engine.screen_facts(game).next.throw_frame))
        game.step(0)
    return out


@pytest.mark.parametrize("name", ["mjpeg_720p_q70", "composite_480p_combing"])
def test_reads_the_level_number_and_the_flight_through_a_chain(panel, name):
    profile = Profile.load(name)
    sampler = BoardReader(profile).sampler
    noise = NoiseSource(3)
    seen = {"flight": 0, "rest": 0}
    for level in (0, 7, 13, 20, 24):
        pictures = pictures_of(level, 160)
        for k, (picture, throw) in enumerate(pictures):
            if k % 4 and not 0 < throw:
                continue
            crop = sampler(forward(profile, picture, pictures[max(k - 1, 0)][0], noise))
            got = panel.read(crop)
            assert got.level == level
            if throw >= 6:  # on the arc, away from the rest box
                assert got.in_flight is True
                seen["flight"] += 1
            elif throw == 0:
                assert got.in_flight is False
                seen["rest"] += 1
    assert seen["flight"] > 20 and seen["rest"] > 40


def test_no_level_number_where_no_digits_are(panel):
    assert panel.read(np.zeros((208, 144, 3), np.uint8)) == Panel(None, None)
    noise = np.random.default_rng(1).integers(0, 256, (208, 144, 3), dtype=np.uint8)
    assert panel.read(noise).level is None


def test_level_viruses_is_the_games_count():
    for level in (0, 3, 19, 20, 21, 24):
        assert level_viruses(level) == int(engine.Game(level, 1, 1234, 0).virus_left)


def test_glyph_files_and_which_models_have_them(tmp_path):
    path = tmp_path / PANEL_FILE
    save_glyphs(TILES, path)
    assert np.array_equal(load_glyphs(path), glyphs(TILES))
    bad = tmp_path / "bad.npz"
    np.savez(bad, digits=np.zeros((9, 8, 8)))
    with pytest.raises(ValueError, match="expected"):
        load_glyphs(bad)
    for content in (b"not a zip", b"", path.read_bytes()[:40]):  # foreign, empty, truncated
        bad.write_bytes(content)
        with pytest.raises(ValueError, match="no panel glyphs"):
            load_glyphs(bad)
    np.savez(bad, digits=np.full((10, 8, 8), np.nan))
    with pytest.raises(ValueError, match="not numbers"):
        load_glyphs(bad)
    with pytest.raises(ValueError, match="no panel glyphs"):
        load_glyphs(tmp_path)  # a directory
    assert panel_reader(DEFAULT_MODEL) is not None  # the shipped model: clean-room glyphs
    model = tmp_path / "board.onnx"
    model.write_bytes(DEFAULT_MODEL.read_bytes())
    assert panel_reader(model) is not None  # the glyph file beside it
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "board.onnx").write_bytes(DEFAULT_MODEL.read_bytes())
    assert panel_reader(alone / "board.onnx") is None  # none: the panel is not read


def intro_heads(viruses: int):
    """(cells, sprite, next, kind) heads: ``viruses`` red viruses read surely, no falling
    pill, a next pill drawn, the kind head saying LEVEL_INTRO at 0.8."""
    red = 1 + 3 * CELL_TYPES.index(0xD0) + 1
    cells = np.zeros((N_CELL_CLASSES, 16, 8), np.float32)
    cells[0] = 1.0
    for i in range(viruses):
        r, c = 15 - i // 8, i % 8
        cells[0, r, c], cells[red, r, c] = 0.0, 1.0
    sprite = np.zeros((4, 17, 8), np.float32)
    sprite[0] = 1.0
    kind = np.full(N_KINDS, 0.01, np.float32)
    kind[KindLabel.LEVEL_INTRO], kind[KindLabel.GAMEPLAY] = 0.8, 0.16
    return cells, sprite, np.array([1.0, 1, 0, 0, 0, 1, 0], np.float32), kind


@pytest.mark.parametrize(
    "viruses, panel, want",
    [
        (54, Panel(13, True), KindLabel.GAMEPLAY),  # level 13 starts with 56: a later throw
        (56, Panel(13, True), KindLabel.LEVEL_INTRO),  # the whole board: the first throw
        (54, Panel(13, False), KindLabel.LEVEL_INTRO),  # at rest: the intro draws its viruses
        (54, Panel(None, None), KindLabel.LEVEL_INTRO),  # no LEVEL number read
        (54, None, KindLabel.LEVEL_INTRO),  # the panel not read
        (3, Panel(13, True), KindLabel.LEVEL_INTRO),  # fewer than any level starts with
        (4, Panel(1, True), KindLabel.GAMEPLAY),
        (83, Panel(23, True), KindLabel.GAMEPLAY),  # levels 20-24 start with 84
    ],
)
def test_a_throw_over_fewer_viruses_than_the_level_starts_with_is_play(viruses, panel, want):
    obs = decode(*intro_heads(viruses), panel=panel)
    assert obs.kind_label == want
    if want == KindLabel.GAMEPLAY:
        assert obs.kind_confidence == pytest.approx(0.96)


@pytest.mark.parametrize(
    "viruses, panel, want",
    [
        (56, Panel(13, False), KindLabel.LEVEL_INTRO),  # the whole board: the intro
        (56, Panel(13, True), KindLabel.LEVEL_INTRO),  # ... or its first throw
        (55, Panel(13, False), KindLabel.GAMEPLAY),
        (56, Panel(None, None), KindLabel.GAMEPLAY),
        (56, None, KindLabel.GAMEPLAY),
    ],
)
def test_a_whole_board_of_viruses_and_no_falling_pill_is_the_intro(viruses, panel, want):
    cells, sprite, nxt, kind = intro_heads(viruses)
    kind[KindLabel.LEVEL_INTRO], kind[KindLabel.GAMEPLAY] = 0.15, 0.81
    obs = decode(cells, sprite, nxt, kind, panel=panel)
    assert obs.kind_label == want
    # a function reading the panel is asked only for such a board
    if panel is not None:
        asked = []
        got = decode(cells, sprite, nxt, kind, panel=lambda: asked.append(1) or panel)
        assert got.kind_label == want
        assert len(asked) == 1
        cells[0, 0, 0], cells[1 + 3 * CELL_TYPES.index(0x80), 0, 0] = 0.0, 1.0  # a single
        decode(cells, sprite, nxt, kind, panel=lambda: asked.append(1) or panel)
        assert len(asked) == 1  # a played board: not asked


def test_the_reader_reads_the_panel_only_where_the_decoder_asks(monkeypatch):
    profile = Profile.load("ideal_720p_nearest")
    reader = BoardReader(profile)
    calls = []
    read = reader.panel.read
    monkeypatch.setattr(reader.panel, "read", lambda crop: calls.append(1) or read(crop))
    noise = NoiseSource(0)
    game = engine.Game(13, 1, 4321, 3)
    while int(game.phase) == Phase.INTRO:
        game.step(0)
    for _ in range(40):  # play with a falling pill: the panel is not read
        game.step(0)
    frame = forward(profile, engine.render_frame(game, TILES), None, noise)
    assert reader.read(frame).kind_label == KindLabel.GAMEPLAY and not calls
    intro = engine.Game(13, 1, 4321, 3)
    frame = forward(profile, engine.render_frame(intro, TILES), None, noise)
    assert reader.read(frame).kind_label == KindLabel.LEVEL_INTRO and calls


def test_hil_run_refuses_a_corrupt_glyph_file_in_one_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "board.onnx").write_bytes(DEFAULT_MODEL.read_bytes())
    (tmp_path / PANEL_FILE).write_text("junk")
    run = subprocess.run(
        [sys.executable, "-m", "hil.cli", "run", "--fast", "--reader", "onnx", "--view", "none",
         "--frames", "20", "--model", str(tmp_path / "board.onnx")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 2
    last = run.stderr.strip().splitlines()[-1]
    assert "panel.npz: no panel glyphs" in last and "Traceback" not in run.stderr


def test_a_model_prepared_before_the_panel_is_named_so(tmp_path, monkeypatch):
    from perception.store import choose_model, prepared_dir

    monkeypatch.setenv("DRMARIO_BRIDGE_DATA", str(tmp_path))
    folder = prepared_dir("0BADF00D")
    folder.mkdir(parents=True)
    (folder / "board.onnx").write_bytes(DEFAULT_MODEL.read_bytes())
    rig = Profile.load("ideal_720p_nearest").replace(rom_crc32="0BADF00D")
    assert "no panel.npz beside it" in choose_model(None, rig).why
    save_glyphs(TILES, folder / PANEL_FILE)
    assert choose_model(None, rig).why.endswith("(prepared for ROM 0BADF00D)")


def test_the_check_command_counts_against_the_truth(capsys):
    from perception.panel import check, main

    out = check(TILES, chains=1, frames=40)
    assert set(out["chains"]) >= {"mjpeg_720p_q70", "random_0"}
    pooled = out["pooled"]
    assert pooled["pictures"] > 100 and pooled["level_wrong"] == 0
    assert pooled["level_right"] + pooled["level_not_read"] == pooled["pictures"]
    assert pooled["flight_read_flight"] == pooled["flight"] > 0
    assert main(["--rom", "/no/such.nes"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
