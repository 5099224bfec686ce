"""Perception of the two-player screen: each bottle read through its own crop (the one-player
crop moved so that the bottle sits where the one-player bottle does), the samples of that
screen, the menu presses and the sprite-buffer truth realcheck --versus uses."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import engine
from calibration import Geometry, Profile, forward
from engine.ram import versus_menu_press
from perception.data import TrainingSamples, VersusStream
from perception.layout import CROP_H, CROP_W, CROP_Y, VERSUS_VIEW_X, VIEW_X, KindLabel
from perception.preprocess import CropSampler
from perception.reader import BoardReader
from perception.realcheck import falling_from_oam, versus_next_from_oam


def played_round(frames: int, seed: int = 5) -> engine.Versus:
    rng = np.random.default_rng(seed)
    v = engine.Versus(6, 1, 9, 2, 0x4242, 17)
    for f in range(frames):
        m = [int(rng.choice([0, 0, 1, 2, 4, 0x80])) if f % 2 == 0 else 0 for _ in range(2)]
        v.step(m[0], m[1])
    return v


def view(picture: np.ndarray, x: int) -> np.ndarray:
    """The crop at NES x ``x``, pixels right of the picture black."""
    wide = np.zeros((240, 256 + CROP_W, 3), np.uint8)
    wide[:, :256] = picture
    return wide[CROP_Y : CROP_Y + CROP_H, x : x + CROP_W]


def test_each_players_crop_puts_its_bottle_where_the_one_player_bottle_is():
    v = played_round(400)
    picture = engine.render_versus(v)
    profile = Profile(geometry=Geometry())
    captured = forward(profile, picture)
    for x in VERSUS_VIEW_X:
        crop = CropSampler(profile, view_x=x)(captured)
        assert crop.shape == (CROP_H, CROP_W, 3)
        assert (crop == view(picture, x)).all()
    # p2's crop runs past the picture's right edge: those pixels read 0
    assert (CropSampler(profile, view_x=VERSUS_VIEW_X[1])(captured)[:, 256 - 152 :] == 0).all()
    # the bottle interior of each crop is the player's bottle: x 8-71, y 64-191 of the crop
    one = engine.render_frame(engine.Game(6, 1, 0x4242))
    p1 = view(picture, VERSUS_VIEW_X[0])[64:192, 8:72]
    assert (p1 == picture[80:208, 32:96]).all()
    assert (view(one, VIEW_X)[64:192, 8:72] == one[80:208, 96:160]).all()


def test_versus_samples_are_labelled_for_the_player_whose_crop_they_are():
    rng = np.random.default_rng(2)
    stream = VersusStream(rng, "train", engine.TileSet.clean_room(), False, emit=0.2)
    seen_views, kinds, checked = set(), set(), 0
    for shown in itertools.islice(stream, 150):
        seen_views.add(shown.view_x)
        kinds.add(shown.labels.kind)
        lab = shown.labels
        if not lab.field_visible:
            continue
        # the crop's bottle agrees with the labels cell by cell: an empty cell (not under a
        # sprite) is one flat colour, any other is drawn
        bottle = view(shown.picture, shown.view_x)[64:192, 8:72].reshape(16, 8, 8, 8, 3)
        for r, c in itertools.product(range(16), range(8)):
            if lab.sprite[r + 1, c] or (r > 0 and lab.sprite[r, c]):
                continue
            flat = bool((bottle[r, :, c] == bottle[r, 0, c, 0]).all())
            assert flat == (lab.cells[r, c] == 0), (shown.view_x, r, c)
            checked += 1
    assert seen_views == set(VERSUS_VIEW_X)
    assert KindLabel.GAMEPLAY in kinds and KindLabel.LEVEL_INTRO in kinds
    assert checked > 1000


def test_versus_share_of_training_samples():
    plain = TrainingSamples(4, streams=2)
    same = TrainingSamples(4, streams=2, versus_rate=0.0)
    for _ in range(5):  # no draw for the two-player screen when its share is 0
        a, b = next(plain), next(same)
        assert (a[0] == b[0]).all()
    mixed = TrainingSamples(4, streams=2, versus_rate=1.0, other_rate=0.0)
    for _ in range(5):
        image, labels = next(mixed)
        assert image.shape == (CROP_H, CROP_W, 3) and labels.cells.shape == (16, 8)
    with pytest.raises(ValueError, match="versus_rate"):
        TrainingSamples(4, versus_rate=1.5)


def test_read_versus_reads_each_bottle_through_its_crop():
    v = played_round(500)
    while True:  # a frame where both bottles show their fields as they are
        facts = engine.versus_screen_facts(v)
        if all(
            (np.asarray(p.field).reshape(16, 8) == p.shown.reshape(16, 8)).all()
            for p in (v.p1, v.p2)
        ):
            break
        v.step(0, 0)
    reader = BoardReader(Profile.load("ideal_720p_nearest"))
    frame = forward(reader.profile, engine.render_versus(v))
    obs = reader.read_versus(frame)
    for i in range(2):
        assert (obs[i].field == facts.players[i].bottle).all()
    with pytest.raises(ValueError, match="view_xs"):
        reader.read_views([frame], [])


def test_versus_menu_presses_go_to_two_players_and_set_each_pad():
    ram = {0x0741: 0, 0x46: 0, 0x0727: 1, 0x65: 0, 0x0316: 0, 0x0396: 0, 0x030B: 1, 0x038B: 1}
    get = ram.__getitem__
    assert versus_menu_press(get, (3, 5), (1, 2)) == (int(engine.Button.DOWN), 0)
    ram[0x0727] = 2
    assert versus_menu_press(get, (3, 5), (1, 2)) == (int(engine.Button.START), 0)
    ram[0x46] = 1  # options: both levels move with their own pads
    right = int(engine.Button.RIGHT)
    assert versus_menu_press(get, (3, 5), (1, 2)) == (right, right)
    ram[0x0316], ram[0x0396] = 3, 6
    assert versus_menu_press(get, (3, 5), (1, 2)) == (0, int(engine.Button.LEFT))
    ram[0x0396] = 5  # levels set: pad 1 moves the highlight to the speeds
    assert versus_menu_press(get, (3, 5), (1, 2)) == (int(engine.Button.DOWN), 0)
    ram[0x65] = 1
    assert versus_menu_press(get, (3, 5), (1, 2)) == (0, right)
    ram[0x038B] = 2
    assert versus_menu_press(get, (3, 5), (1, 2)) == (int(engine.Button.START), 0)


def oam(*sprites):
    buf = np.full(256, 0xF8, np.uint8)
    for k, (y, tile, x) in enumerate(sprites):
        buf[4 * k : 4 * k + 4] = (y, tile, 0, x)
    return buf


def test_two_player_truth_from_the_sprite_buffer():
    # p1 has no falling pill; p2's sits first in OAM, then both next pills at rest ($33)
    buf = oam((80, 0x60, 160 + 24), (80, 0x72, 160 + 32), (0x33, 0x61, 0x38), (0x33, 0x70, 0x40),
              (0x33, 0x62, 0xB8), (0x33, 0x71, 0xC0))  # fmt: skip
    assert falling_from_oam(buf, 32, entries=4) is None
    assert falling_from_oam(buf, 160, entries=4) == (3, 15, 0, (0, 2))
    assert versus_next_from_oam(buf, 0) == (1, 0)
    assert versus_next_from_oam(buf, 1) == (2, 1)
    assert versus_next_from_oam(oam(), 0) is None
