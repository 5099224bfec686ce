"""Training data for perception: labels from the engine's screen facts, the crop sampling the
reader shares with training, the windowed capture, tile randomisation, seeded samples."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import engine
from calibration import Artifacts, Geometry, Profile, forward
from calibration.window import aligned_window, forward_window
from perception.appearance import randomize
from perception.data import (
    GameStream,
    Player,
    TrainingSamples,
    alike_classes,
    crop_of,
    falling_cells,
    inject_board,
    labels_from_facts,
    random_board,
    shown_versus_kind,
    tuck,
)
from perception.layout import BOTTLE_X, BOTTLE_Y, CROP_H, CROP_W, KindLabel, cell_classes
from perception.preprocess import CropSampler, Placement


def played_game(frames: int, seed: int = 3) -> list[engine.Game]:
    """States of a game played with random presses (clones, one per frame)."""
    rng = np.random.default_rng(seed)
    g = engine.Game(9, 2, 0x2468)
    out = []
    for f in range(frames):
        g.step(int(rng.choice([0, 0, 1, 2, 4, 0x80, 0x40])) if f % 2 == 0 else 0)
        out.append(g.clone())
    return out


def test_sprite_labels_sit_where_the_pill_sprites_are_drawn():
    seen = set()
    for g in played_game(1500):
        facts = engine.screen_facts(g)
        if facts.falling is None:
            continue
        left, top, w, h = facts.falling.box
        seen.add(facts.falling.rotation)
        for r, c, _ in falling_cells(facts.falling):
            # sprite row r = field row r - 1; the sprite is one line below the grid
            x, y = BOTTLE_X + 8 * c, BOTTLE_Y + 8 * (r - 1) + 1
            assert left <= x < left + w and top <= y < top + h
        labels = labels_from_facts(facts, int(g.phase))
        assert (labels.sprite > 0).sum() == 2
        assert sorted(labels.sprite[labels.sprite > 0] - 1) == sorted(facts.falling.colors)
    assert seen == {0, 1, 2, 3}  # every rotation was checked


def test_alike_classes_are_the_classes_the_picture_cannot_tell_apart():
    clean = engine.TileSet.clean_room()
    patterns = clean.patterns.copy()
    for tile in (0x40, 0x50, 0x60, 0x70):  # the pill sprites drawn as full 8 x 8 blocks
        patterns[2, tile : tile + 3] = 3
    opaque = dataclasses.replace(clean, patterns=patterns)
    everything = (1 << 22) - 1
    bottom = sum(1 << k for k in cell_classes(np.array([0x50, 0x51, 0x52])))
    virus = sum(1 << k for k in cell_classes(np.array([0xD0, 0xD1, 0xD2])))
    seen = set()
    for g in played_game(1500):
        pill = engine.screen_facts(g).falling
        if pill is None or pill.y > 14:
            continue
        lower = (15 - pill.y, pill.x)
        shown = int(cell_classes(engine.screen_facts(g).bottle)[lower])
        alike = alike_classes(g, opaque)
        if pill.rotation % 2:  # every pixel of the lower half's cell is a sprite pixel
            assert alike[lower] == everything & ~(1 << shown)
            clean_alike = int(alike_classes(g, clean)[lower])
            if shown == 0:  # clean-room: a lower half drawn there looks like the empty cell
                assert clean_alike & bottom == bottom and not clean_alike & virus
        # the cells away from the pill are drawn as they are
        far = np.ones((16, 8), bool)
        far[max(0, lower[0] - 1) : lower[0] + 1, pill.x : pill.x + 2] = False
        assert (alike[far] == 0).all()
        seen.add(pill.rotation % 2)
    assert seen == {0, 1}


def test_training_games_pair_each_sampled_lock_frame_with_the_frame_before():
    rng = np.random.default_rng(11)
    stream = iter(GameStream(rng, "train", engine.TileSet.clean_room(), False, emit=0.0))
    pairs = 0
    previous = next(stream)
    for _ in range(60):
        shown = next(stream)
        a, b = previous.labels, shown.labels
        under = [(r - 1, c) for r, c in np.argwhere(a.sprite > 0) if r >= 1]
        lock = any(a.cells[r, c] != 0 for r, c in under)
        if lock and (b.sprite == a.sprite).all():  # a lock frame, then the frame before
            assert all(b.cells[r, c] == 0 for r, c in under)
            assert (shown.picture != previous.picture).any()
            pairs += 1
        previous = shown
    assert pairs >= 2


def test_labels_kinds_intro_pause():
    g = engine.Game(5, 0, 0x1234)
    g.step(0)
    assert labels_from_facts(engine.screen_facts(g), int(g.phase)).kind == KindLabel.LEVEL_INTRO
    while int(g.phase) != engine.Phase.PLAYING:
        g.step(0)
    for _ in range(40):
        g.step(0)
    g.step(engine.Button.START)
    g.step(0)
    g.step(0)
    labels = labels_from_facts(engine.screen_facts(g), int(g.phase))
    assert labels.kind == KindLabel.PAUSED and not labels.field_visible


def test_a_two_player_top_out_is_labelled_when_its_picture_shows_it():
    # player 2 drops every pill at once until a pill cannot enter: the frame the fail flag is
    # seen (ROUND_LOST) draws play (labelled so), the next one the sign (TOP_OUT)
    v = engine.Versus(20, 2, 20, 2, 0x8988)
    for _ in range(20000):
        if v.phase == engine.Phase.ROUND_LOST:
            break
        v.step(0, engine.Button.DOWN)
    assert v.phase == engine.Phase.ROUND_LOST
    facts = engine.versus_screen_facts(v)
    assert facts.kind == engine.ScreenKind.TOP_OUT  # the engine's fact: a fail flag is set
    assert shown_versus_kind(v, facts) == engine.ScreenKind.LEVEL
    v.step(0, 0)  # anyPlayerLoses: the sign, the next pills hidden
    assert v.phase in (engine.Phase.ROUND_OVER, engine.Phase.MATCH_OVER) and v.who_failed == 2
    facts = engine.versus_screen_facts(v)
    assert shown_versus_kind(v, facts) == engine.ScreenKind.TOP_OUT
    assert all(p.next is None for p in facts.players)


def test_crop_sampler_reads_the_nes_crop_exactly_through_an_ideal_chain():
    picture = engine.render_frame(played_game(300)[-1])
    for g in (Geometry(), Geometry.centered(1920, 1080, pixel_aspect=1.0, interpolation="area")):
        profile = Profile(geometry=g)
        crop = CropSampler(profile)(forward(profile, picture))
        assert crop.shape == (CROP_H, CROP_W, 3)
        assert (crop == crop_of(picture)).all()


def test_crop_sampler_takes_the_current_frame_from_combed_captures():
    pictures = [engine.render_frame(s) for s in played_game(400)[200:]]
    k = next(
        i
        for i in range(1, len(pictures))
        if (crop_of(pictures[i - 1]) != crop_of(pictures[i])).any()
    )
    previous, picture = pictures[k - 1], pictures[k]
    profile = Profile(
        geometry=Geometry.centered(720, 480, crop=(8, 8, 4, 4)),
        artifacts=Artifacts(combing=True),
    )
    captured = forward(profile, picture, previous=previous)
    assert (CropSampler(profile)(captured) == crop_of(picture)).all()


@pytest.mark.parametrize("name", ["mjpeg_720p_q70", "composite_480p_combing"])
def test_forward_window_equals_the_full_frame_away_from_its_edges(name):
    states = played_game(200)
    previous, picture = (engine.render_frame(s) for s in states[-2:])
    profile = Profile.load(name)
    profile = profile.replace(artifacts=dataclasses.replace(profile.artifacts, noise=0.0))
    window = aligned_window(profile, *Placement.of(profile.geometry).crop_bounds(20.0))
    x0, y0, x1, y1 = window
    assert x0 % 16 == 0 and y0 % 16 == 0
    full = forward(profile, picture, previous)[y0:y1, x0:x1]
    part = forward_window(profile, picture, window, previous)
    assert part.shape == full.shape
    assert (part[16:-16, 16:-16] == full[16:-16, 16:-16]).all()
    with pytest.raises(ValueError, match="window"):
        forward_window(profile, picture, (0, 0, profile.geometry.width + 16, 32))


def test_randomized_tiles_keep_what_the_game_fixes():
    base = engine.TileSet.clean_room()
    a = randomize(base, np.random.default_rng(5))
    b = randomize(base, np.random.default_rng(5))
    assert (a.patterns == b.patterns).all() and (a.rgb == b.rgb).all()  # seeded
    assert (a.patterns != base.patterns).any() or (a.rgb != base.rgb).any()
    assert (a.palettes[8:12] == base.palettes[8:12]).all()  # the field's palette
    for seed in range(40):
        t = randomize(base, np.random.default_rng(seed))
        drawn = {}
        for tile in (0x40, 0x50, 0x60, 0x70, 0x80, 0xD0, 0xF0):
            masks = [t.patterns[0, tile + k] != 0 for k in range(3)]
            if tile != 0xD0:  # one shape, three colours (a virus may have one per colour)
                assert (masks[0] == masks[1]).all() and (masks[1] == masks[2]).all()
            for k in range(3):  # drawn mostly in the colour's own palette entry
                values, counts = np.unique(t.patterns[0, tile + k], return_counts=True)
                assert values[values > 0][np.argmax(counts[values > 0])] == k + 1
            drawn[tile] = t.patterns[0, tile].tobytes()
        assert len(set(drawn.values())) == 7, seed  # each cell type keeps its own drawing


def test_new_drawing_families_vary_what_real_roms_vary():
    """The original release draws its pills 7 x 7 in the cell's corner with a shine in another
    colour's palette entry, and its three viruses differently: the families must cover that."""
    base = engine.TileSet.clean_room()
    sets = [randomize(base, np.random.default_rng(s)) for s in range(60)]
    new = [t for t in sets if "new drawings" in t.name]
    assert 15 <= len(new) <= 40
    per_colour_virus = sum(
        (t.patterns[0, 0xD0] != 0).tolist() != (t.patterns[0, 0xD1] != 0).tolist() for t in new
    )
    shine = sum(len(set(np.unique(t.patterns[0, 0x40])) - {0}) > 1 for t in new)
    gap = sum(
        not (t.patterns[0, 0x40, 7] != 0).any() for t in new
    )  # a top half short of its partner
    assert per_colour_virus >= 3 and shine >= 3 and gap >= 3


def test_training_samples_are_seeded_and_labelled():
    a, b = TrainingSamples(11, streams=2), TrainingSamples(11, streams=2)
    for _ in range(3):
        (ia, la), (ib, lb) = next(a), next(b)
        assert ia.shape == (CROP_H, CROP_W, 3) and ia.dtype == np.uint8
        assert (ia == ib).all() and (la.cells == lb.cells).all() and la.kind == lb.kind
        assert la.cells.shape == (16, 8) and la.sprite.shape == (17, 8)


def test_training_samples_go_through_the_target_chains_at_their_rate(monkeypatch):
    """hil prepare fits a model for the shipped chains and the rig's own: that share of the
    samples is captured through one of them, the rest through random chains."""
    import perception.data as data

    used: list[str] = []
    real = data.capture_crop

    def spy(profile, shown, noise, rng=None):
        used.append(profile.name)
        return real(profile, shown, noise, rng)

    monkeypatch.setattr(data, "capture_crop", spy)
    targets = [Profile.load("composite_480p_combing"), Profile.load("mjpeg_720p_q70")]
    names = {t.name for t in targets}
    samples = TrainingSamples(5, streams=2, targets=targets, target_rate=0.5)
    for _ in range(40):
        next(samples)
    hits = sum(n in names for n in used)
    assert 8 <= hits <= 32 and {n for n in used if n in names} == names
    used.clear()
    for _ in range(10):
        next(TrainingSamples(6, streams=2, targets=targets, target_rate=1.0))
    assert set(used) <= names and len(used) == 10
    used.clear()
    plain = TrainingSamples(7, streams=2)
    for _ in range(10):
        next(plain)
    assert not set(used) & names
    with pytest.raises(ValueError, match="target_rate"):
        TrainingSamples(8, targets=targets, target_rate=1.5)


def test_eval_games_use_odd_seeds_and_no_tile_changes():
    rng = np.random.default_rng(0)
    stream = GameStream(rng, "eval", engine.TileSet.clean_room(), randomize_tiles=False)
    shown = next(iter(stream))
    assert shown.picture.shape == (240, 256, 3)
    with pytest.raises(ValueError, match="split"):
        GameStream(rng, "test", engine.TileSet.clean_room(), False)


def test_intro_lasts_until_the_first_falling_pill_is_drawn():
    # The first pill's throw is play in RAM, but its pictures are the intro's board with the
    # pill on its arc: LEVEL_INTRO until a falling pill's sprites are drawn (docs/PERCEPTION.md).
    g = engine.Game(3, 1, 0x2222)
    while int(g.phase) != engine.Phase.PLAYING:
        g.step(0)
    facts = engine.screen_facts(g)
    assert facts.falling is None
    assert labels_from_facts(facts, int(g.phase), pill_sent=False).kind == KindLabel.LEVEL_INTRO
    assert labels_from_facts(facts, int(g.phase), pill_sent=True).kind == KindLabel.GAMEPLAY
    stream = GameStream(np.random.default_rng(4), "eval", engine.TileSet.clean_room(),
                        randomize_tiles=False, emit=1.0, hard=False)  # fmt: skip
    kinds, falling = [], []
    for shown in itertools.islice(iter(stream), 400):
        kinds.append(shown.labels.kind)
        falling.append(bool((shown.labels.sprite > 0).any()))
    first = falling.index(True)
    assert first > 100  # the intro wait and the throw
    assert all(k == KindLabel.LEVEL_INTRO for k in kinds[:first])
    assert kinds[first] == KindLabel.GAMEPLAY


def test_crop_sampler_reads_every_nes_line_of_combed_captures_below_two_lines_per_line():
    # 1.9 capture lines per NES line: two NES lines share the even capture line nearest their
    # centres, and the one between would be lost; it is read from an odd line (the frame
    # before, here the same picture), so a nearest-scaled capture gives the NES crop exactly
    picture = engine.render_frame(played_game(300)[-1])
    for scale in (1.9033, 1.822):
        g = Geometry(
            width=720,
            height=480,
            scale_x=2.0,
            scale_y=scale,
            offset_x=100.0,
            offset_y=27.09,
            crop_top=6,
            interpolation="nearest",
        )
        profile = Profile(geometry=g, artifacts=Artifacts(combing=True))
        captured = forward(profile, picture, previous=picture)
        assert (CropSampler(profile)(captured) == crop_of(picture)).all()


def _moves_low(late: float) -> int:
    """Frames where the falling pill moved sideways or turned below its top three rows
    (pill y <= 12), over three games of the data player."""
    moves = 0
    for seed in range(3):
        g = engine.Game(8, 1, 0x2468 + 2 * seed)
        player = Player(np.random.default_rng(seed), greedy=0.0, pause_rate=0.0, late=late)
        last = None
        for _ in range(3000):
            g.step(player.mask(g))
            if int(g.phase) != engine.Phase.PLAYING:
                continue
            now = (int(g.pill_x), int(g.pill_rotation), int(g.pills_counter))
            if last is not None and now != last and now[2] == last[2] and int(g.pill_y) <= 12:
                moves += 1
            last = now
    return moves


def test_data_player_moves_some_pills_on_their_way_down():
    assert _moves_low(0.0) == 0
    assert _moves_low(1.0) >= 10


def test_tuck_puts_the_falling_pill_in_empty_cells_often_under_an_overhang():
    rng = np.random.default_rng(3)
    under = tucked = 0
    for k in range(60):
        g = engine.Game(10, 1, 0x1234 + 2 * k)
        while int(g.next_action) != 0 or int(g.phase) != engine.Phase.PLAYING:
            g.step(0)
        inject_board(g, random_board(rng, 4))
        if not tuck(g, rng):  # a board with no two empty cells side by side below row 3
            continue
        tucked += 1
        field = g.field.reshape(16, 8)
        row, x = 15 - int(g.pill_y), int(g.pill_x)
        cells = [(row, x), (row - 1, x)] if int(g.pill_rotation) & 1 else [(row, x), (row, x + 1)]
        assert row >= 4 and all(field[r, c] == 0xFF for r, c in cells)
        under += any((field[: min(r for r, _ in cells), c] != 0xFF).any() for _, c in cells)
        g.step(0)  # the engine plays on from there: the pill is drawn where it was put
        falling = engine.screen_facts(g).falling
        assert falling is not None and (falling.x, falling.y) == (x, 15 - row)
    assert tucked >= 45
    assert under >= 0.3 * tucked  # half of the tucks and more: random boards have many holes
