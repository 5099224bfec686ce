"""perception.decode: model probabilities -> Observation (pill placement, cell codes, next)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import ScreenKind
from perception.decode import (
    PAIR_MAX_HALVES,
    decode,
    decode_cells,
    decode_falling,
    decode_next,
)
from perception.layout import (
    CELL_TYPES,
    CLASS_TO_CODE,
    N_CELL_CLASSES,
    N_KINDS,
    KindLabel,
    cell_classes,
)
from perception.observation import FallingPill, canonical_pill, unpaired_halves


def sprite_probs(halves: dict[tuple[int, int], int], p: float = 0.97) -> np.ndarray:
    """[4, 17, 8] probabilities: ``halves`` {(sprite row, col): colour} with probability p."""
    probs = np.zeros((4, 17, 8), np.float32)
    probs[0] = 0.9999
    probs[1:] = 0.0001 / 3
    for (r, c), color in halves.items():
        probs[:, r, c] = (1 - p) / 3
        probs[1 + color, r, c] = p
    return probs


def test_cell_codes_round_trip_and_clearing_tiles():
    codes = CLASS_TO_CODE
    assert (CLASS_TO_CODE[cell_classes(codes)] == codes).all()
    # the screen draws a clearing cell ($Bx in RAM) as tile $Fx: both read as clearing
    assert (
        cell_classes(np.array([0xF0, 0xF1, 0xF2])) == cell_classes(np.array([0xB0, 0xB1, 0xB2]))
    ).all()
    with pytest.raises(ValueError, match=r"\$D3"):
        cell_classes(np.array([0xD3]))


def test_decode_cells_gives_codes_and_their_probability():
    probs = np.full((N_CELL_CLASSES, 16, 8), 0.01, np.float32)
    probs[0] = 0.79
    probs[0, 3, 4] = 0.01
    k = int(cell_classes(np.array([0xD2]))[0])
    probs[k, 3, 4] = 0.79
    field, conf = decode_cells(probs)
    assert field[3, 4] == 0xD2 and field[0, 0] == 0xFF
    assert conf.dtype == np.float32 and conf[3, 4] == pytest.approx(0.79)


def test_unpaired_halves_finds_halves_without_partner():
    field = np.full((16, 8), 0xFF, np.uint8)
    field[5, 2], field[5, 3] = 0x60, 0x72  # a horizontal pill
    field[8, 0], field[9, 0] = 0x41, 0x51  # a vertical pill
    field[12, 4], field[12, 5] = 0x60, 0xB1  # a left half beside a clearing cell
    field[14, 6] = 0xD0
    assert not unpaired_halves(field).any()
    # the tracker's rule: only the other half is a partner
    assert sorted(map(tuple, np.argwhere(unpaired_halves(field, clearing=False)))) == [(12, 4)]
    field[9, 0] = 0x81  # the bottom half read as a single
    field[5, 3] = 0xD2  # the right half read as a virus
    field[15, 1] = 0x40  # a top half on the floor
    field[0, 7] = 0x52  # a bottom half in row 0: updateField makes it a single
    want = [(0, 7), (5, 2), (8, 0), (15, 1)]
    assert sorted(map(tuple, np.argwhere(unpaired_halves(field)))) == want


def test_unpaired_halves_is_the_rule_cell_by_cell():
    """The table lookup against the rule read cell by cell, on random boards of every type."""

    def rule(f, clearing):
        t = f >> 4
        out = np.zeros(f.shape, bool)
        near = {0x4: (1, 0, 0x5), 0x5: (-1, 0, 0x4), 0x6: (0, 1, 0x7), 0x7: (0, -1, 0x6)}
        for r in range(16):
            for c in range(8):
                if t[r, c] in near:
                    dr, dc, partner = near[t[r, c]]
                    y, x = r + dr, c + dc
                    inside = 0 <= y < 16 and 0 <= x < 8
                    ok = inside and (t[y, x] == partner or (clearing and t[y, x] == 0xB))
                    out[r, c] = not ok
        return out

    rng = np.random.default_rng(0)
    codes = np.array([0xFF, 0x40, 0x51, 0x62, 0x70, 0x81, 0xB2, 0xD0], np.uint8)
    for k in range(100):
        f = rng.choice(codes, (16, 8))
        want = rule(f, clearing=k % 2 == 0)
        assert want.any() and not want.all()
        assert (unpaired_halves(f, clearing=k % 2 == 0) == want).all()
        assert (unpaired_halves(f.reshape(-1), clearing=k % 2 == 0) == want.reshape(-1)).all()


def probs_of(cells: dict[tuple[int, int], dict[int, float]]) -> np.ndarray:
    """[22, 16, 8] probabilities: empty everywhere (0.999) except ``cells`` {(row, col): {code:
    probability}} (the rest of such a cell spread evenly over the other classes)."""
    probs = np.full((N_CELL_CLASSES, 16, 8), 0.001 / (N_CELL_CLASSES - 1), np.float32)
    probs[0] = 0.999
    for (r, c), read in cells.items():
        rest = (1.0 - sum(read.values())) / (N_CELL_CLASSES - len(read))
        probs[:, r, c] = rest
        for code, p in read.items():
            probs[int(cell_classes(np.array([code]))[0]), r, c] = p
    return probs


def test_decode_cells_mends_an_unsure_half_that_breaks_a_pair():
    # a single read as a top half at 0.6 (a single at 0.39), nothing below it
    field, conf = decode_cells(probs_of({(10, 3): {0x41: 0.6, 0x81: 0.39}}))
    assert field[10, 3] == 0x81 and conf[10, 3] == pytest.approx(0.39)
    # a right half read as a virus at 0.9 beside a sure left half: both cells are capped at the
    # mend's probability, so the tracker skips the pair as it skipped the unpaired half
    field, conf = decode_cells(probs_of({(4, 4): {0x60: 0.999}, (4, 5): {0xD0: 0.9, 0x70: 0.09}}))
    assert field[4, 4] == 0x60 and field[4, 5] == 0x70
    assert conf[4, 4] == pytest.approx(0.09) and conf[4, 5] == pytest.approx(0.09)
    # the same read sure: the picture shows it (a pair torn while the rows are redrawn)
    field, _ = decode_cells(probs_of({(4, 4): {0x60: 0.999}, (4, 5): {0xD0: 0.98, 0x70: 0.01}}))
    assert field[4, 5] == 0xD0


@pytest.mark.parametrize(("p_empty", "mended"), [(0.02, True), (0.005, False)])
def test_decode_cells_tries_classes_of_at_least_one_percent(p_empty, mended):
    # a top half at 0.6 over a sure empty cell; a bottom half (0.39 - p_empty) has no top half
    # above it either: only "empty" pairs nothing, and it is tried when it has 1 % or more
    probs = probs_of({(7, 1): {0x41: 0.6, 0x50: 0.39 - p_empty, 0xFF: p_empty}})
    field, _ = decode_cells(probs)
    assert field[7, 1] == (0xFF if mended else 0x41)


def test_decode_cells_leaves_a_bottom_half_in_row_0_as_read():
    # its top half was locked above the field and dropped (confirmPlacement $8F62): the picture
    # shows the bottom half alone until updateField makes it a single, so a bottom half read
    # unsure there is not made a single; a bottom half elsewhere with nothing above it is
    field, conf = decode_cells(probs_of({(0, 3): {0x50: 0.9, 0x80: 0.09}}))
    assert field[0, 3] == 0x50 and conf[0, 3] == pytest.approx(0.9)
    field, _ = decode_cells(probs_of({(1, 3): {0x50: 0.9, 0x80: 0.09}}))
    assert field[1, 3] == 0x80


def test_decode_cells_never_unpairs_another_half():
    # a top half read sure over a left half read unsure whose right half is read sure: a bottom
    # half there pairs the top half but unpairs the right half, so the reading stays
    probs = probs_of({(5, 2): {0x40: 0.99}, (6, 2): {0x60: 0.6, 0x50: 0.395}, (6, 3): {0x71: 0.99}})
    field, _ = decode_cells(probs)
    assert field[5, 2] == 0x40 and field[6, 2] == 0x60 and field[6, 3] == 0x71


def test_decode_cells_leaves_covered_and_garbage_readings():
    # a pair under the falling pill's sprite is left as read (the lock frame draws it)
    probs = probs_of({(10, 3): {0x41: 0.6, 0x81: 0.39}})
    covered = np.zeros((16, 8), bool)
    covered[10:12, 3] = True
    assert decode_cells(probs, covered)[0][10, 3] == 0x41
    # more than PAIR_MAX_HALVES unpaired halves: no board the model read well, left as read
    many = {(r, c): {0x41: 0.6, 0x81: 0.39} for r in (2, 6, 10) for c in (0, 3, 6)}
    assert len(many) > PAIR_MAX_HALVES
    field, _ = decode_cells(probs_of(many))
    assert all(field[r, c] == 0x41 for r, c in many)
    del many[(10, 6)]
    field, _ = decode_cells(probs_of(many))
    assert all(field[r, c] == 0x81 for r, c in many)


@pytest.mark.parametrize(
    ("halves", "want"),
    [
        # horizontal at field row 15 (sprite row 16): y = 0, left yellow, right blue
        ({(16, 2): 0, (16, 3): 2}, (2, 0, 0, (0, 2))),
        # vertical: bottom half at field row 0 (sprite row 1), top half in the neck row
        ({(1, 5): 1, (0, 5): 2}, (5, 15, 1, (1, 2))),
        # vertical in the middle: bottom red at field row 9, top yellow at row 8
        ({(10, 7): 1, (9, 7): 0}, (7, 6, 1, (1, 0))),
    ],
)
def test_decode_falling_reads_place_orientation_and_colours(halves, want):
    pill = decode_falling(sprite_probs(halves))
    assert pill is not None
    assert (pill.x, pill.y, pill.rotation, pill.colors) == want
    assert 0.5 < pill.confidence <= 1.0


def test_decode_falling_none_and_always_two_adjacent_halves():
    assert decode_falling(sprite_probs({})) is None
    # three doubtful cells: the decoder still returns one two-cell pill, the likeliest pair
    probs = sprite_probs({(5, 1): 0, (5, 2): 1, (5, 4): 2})
    probs[:, 5, 4] = [0.4, 0.0, 0.0, 0.6]  # weaker than the pair
    pill = decode_falling(probs)
    assert pill is not None and pill.cells == ((4, 1), (4, 2))  # sprite row 5 = field row 4
    assert (pill.rotation, pill.colors) == (0, (0, 1))


def test_decode_falling_never_puts_a_horizontal_pill_in_the_neck_row():
    # the thrown next pill crosses the neck at the end of its arc; a falling pill's y is at
    # most pillStartingY ($0F), so two halves side by side there are no falling pill
    assert decode_falling(sprite_probs({(0, 3): 1, (0, 4): 0}, p=0.8)) is None
    # with a half below one of them, the likeliest pill is the vertical one
    pill = decode_falling(sprite_probs({(0, 3): 1, (0, 4): 0, (1, 3): 2}, p=0.8))
    assert pill is not None and (pill.x, pill.y, pill.rotation, pill.colors) == (3, 15, 1, (2, 1))


def test_canonical_pill_matches_what_rotation_2_and_3_draw():
    # rotation 2 draws the 1st half on the right: the picture equals rotation 0 swapped
    assert canonical_pill(3, 7, 2, (0, 1)) == canonical_pill(3, 7, 0, (1, 0))
    assert canonical_pill(3, 7, 3, (2, 1)) == (3, 7, 1, (1, 2))
    assert FallingPill(3, 7, 1, (1, 2), 1.0).cells == ((8, 3), (7, 3))
    assert FallingPill(3, 7, 3, (2, 1)).drawn() == FallingPill(3, 7, 1, (1, 2))
    assert FallingPill(3, 7, 2, (0, 1)).cells == ((8, 3), (8, 4))


def test_decode_next_and_kind():
    nxt = np.array([0.9, 0.1, 0.8, 0.1, 0.05, 0.05, 0.9], np.float32)
    pill = decode_next(nxt)
    assert pill is not None and pill.colors == (1, 2)
    assert decode_next(np.array([0.2, 1, 0, 0, 1, 0, 0], np.float32)) is None
    kind = np.zeros(N_KINDS, np.float32)
    kind[KindLabel.PAUSED] = 1.0
    obs = decode(
        np.full((N_CELL_CLASSES, 16, 8), 1 / N_CELL_CLASSES, np.float32),
        sprite_probs({}),
        nxt,
        kind,
    )
    assert obs.kind == ScreenKind.PAUSED and not obs.board_visible and obs.falling is None
    assert obs.intro is None and obs.kind_label == KindLabel.PAUSED and obs.source == "onnx"


def test_cells_under_the_falling_pill_sprite_are_not_trusted():
    cells = np.full((N_CELL_CLASSES, 16, 8), 0.001, np.float32)
    cells[0] = 0.979
    obs = decode(
        cells, sprite_probs({(9, 3): 1, (9, 4): 2}), np.zeros(7, np.float32), np.eye(N_KINDS)[0]
    )
    assert obs.falling is not None and obs.falling.cells == ((8, 3), (8, 4))
    assert obs.confidence[8, 3] < 0.1 and obs.confidence[8, 4] < 0.1
    assert obs.confidence[7, 3] > 0.9 and obs.confidence[9, 3] > 0.9


def empty_board_heads(p_intro: float, p_play: float, rest: float):
    """(cells, kind, next) head outputs: an empty board read surely, the kind head giving
    LEVEL_INTRO ``p_intro``, GAMEPLAY ``p_play`` and every other kind ``rest``, no next pill."""
    cells = np.zeros((N_CELL_CLASSES, 16, 8), np.float32)
    cells[0] = 1.0
    kind = np.full(N_KINDS, rest, np.float32)
    kind[KindLabel.LEVEL_INTRO] = p_intro
    kind[KindLabel.GAMEPLAY] = p_play
    return cells, kind, np.array([0.0, 1, 0, 0, 1, 0, 0], np.float32)


def test_a_picture_with_a_falling_pill_is_never_the_intro():
    cells, kind, nxt = empty_board_heads(0.7, 0.2, 0.02)
    obs = decode(cells, sprite_probs({(3, 3): 0, (3, 4): 1}), nxt, kind)
    assert obs.falling is not None and obs.kind_label == KindLabel.GAMEPLAY
    assert obs.kind == ScreenKind.LEVEL and obs.intro is False
    assert obs.kind_confidence == pytest.approx(0.9)
    still = decode(cells, sprite_probs({}), nxt, kind)
    assert still.falling is None and (still.kind, still.intro) == (ScreenKind.LEVEL, True)


def test_an_unsure_falling_pill_over_a_sure_intro_is_dropped():
    """The kind head (intro) and the sprite head (a falling pill) disagree: the likelier joint
    reading wins. Composite chain, level 1 intro: two yellow viruses side by side read as a
    yellow pill at 0.14-0.19 while the kind head said intro at 0.91."""
    cells, kind, nxt = empty_board_heads(0.91, 0.05, 0.01)
    weak = sprite_probs({(9, 1): 0, (9, 2): 0}, p=0.4)  # log-odds sum > 0: a pill, unsure
    assert decode_falling(weak) is not None and decode_falling(weak).confidence < 0.2
    obs = decode(cells, weak, nxt, kind)
    assert obs.falling is None and obs.kind_label == KindLabel.LEVEL_INTRO
    sure = decode(cells, sprite_probs({(9, 1): 0, (9, 2): 0}, p=0.995), nxt, kind)
    assert sure.falling is not None and sure.kind_label == KindLabel.GAMEPLAY
    # In play (the kind head says so) the same unsure pill stays: nothing disagrees.
    play = kind.copy()
    play[KindLabel.LEVEL_INTRO], play[KindLabel.GAMEPLAY] = 0.05, 0.91
    assert decode(cells, weak, nxt, play).falling is not None


def test_a_board_with_anything_but_viruses_is_never_the_intro():
    # the intro's board holds viruses only: a pill half, a single or a clearing tile on it
    # (with no falling pill, e.g. a later pill on its throw arc) is play
    kind = np.full(N_KINDS, 0.02, np.float32)
    kind[KindLabel.LEVEL_INTRO] = 0.7
    kind[KindLabel.GAMEPLAY] = 0.2
    nxt = np.array([1.0, 1, 0, 0, 1, 0, 0], np.float32)
    virus = 1 + 3 * CELL_TYPES.index(0xD0) + 1  # a red virus
    for shown, want in ((virus, KindLabel.LEVEL_INTRO), (1 + 3 * CELL_TYPES.index(0x80), None)):
        cells = np.zeros((N_CELL_CLASSES, 16, 8), np.float32)
        cells[0] = 1.0
        cells[0, 12, 2], cells[shown, 12, 2] = 0.0, 1.0
        obs = decode(cells, sprite_probs({}), nxt, kind)
        assert obs.falling is None
        assert obs.kind_label == (want or KindLabel.GAMEPLAY)


def yellow_virus_read_as_a_half(p_empty: float, p_half: float):
    """(cells, sprite) heads over a board with yellow viruses at field (8, 1) and (8, 2): the
    sprite head takes the one at (8, 2) for a yellow half at ``p_half`` and the cell head reads
    that cell empty at ``p_empty`` (the composite chain, held-out, ROM model H)."""
    yellow = 1 + 3 * CELL_TYPES.index(0xD0)
    cells = np.zeros((N_CELL_CLASSES, 16, 8), np.float32)
    cells[0] = 1.0
    cells[0, 8, 1], cells[yellow, 8, 1] = 0.0, 1.0
    cells[0, 8, 2], cells[yellow, 8, 2] = p_empty, 1.0 - p_empty
    sprite = sprite_probs({})
    sprite[:, 9, 2] = (1.0 - p_half, p_half, 0.0, 0.0)  # "no sprite", a yellow half
    sprite[0, 9, 1] = 0.85  # the other virus, a little like a half too
    sprite[1:, 9, 1] = 0.05
    return cells, sprite


@pytest.mark.parametrize(
    "p_empty, p_half, want",
    [(0.80, 0.92, 0xD0), (0.75, 0.56, 0xFF), (0.91, 0.96, 0xD0), (0.30, 0.6, 0xD0)],
)
def test_a_cell_under_a_half_of_no_falling_pill_is_filled(p_empty, p_half, want):
    """A half the sprite head sees where no pill is decoded is a drawn tile: the cell is
    filled when q (1 - P(empty)) > (1 - q) P(empty), q the half's probability. (0.75, 0.56):
    0.14 against 0.33, the cell head's empty stands."""
    cells, sprite = yellow_virus_read_as_a_half(p_empty, p_half)
    _, kind, nxt = empty_board_heads(0.05, 0.9, 0.01)
    obs = decode(cells, sprite, nxt, kind)
    assert obs.falling is None
    assert obs.field[8, 2] == want and obs.field[8, 1] == 0xD0
    assert obs.confidence[8, 2] < 0.5  # unsure either way: a tracker skips it


def test_a_falling_pill_never_covers_a_virus():
    """The same two viruses: with the virus at (8, 1) read surely, the pill (8, 1)-(8, 2) the
    sprite head alone makes (log-odds 2.4 - 1.7 > 0) is no pill; a real pill beside is kept."""
    cells, sprite = yellow_virus_read_as_a_half(0.80, 0.92)
    assert decode_falling(sprite) is not None  # the sprite head alone: a phantom pill
    _, kind, nxt = empty_board_heads(0.05, 0.9, 0.01)
    assert decode(cells, sprite, nxt, kind).falling is None
    sprite[:, 3] = sprite_probs({(3, 5): 2, (3, 6): 1})[:, 3]
    obs = decode(cells, sprite, nxt, kind)
    assert obs.falling is not None and obs.falling.cells == ((2, 5), (2, 6))
    assert obs.field[8, 2] == 0xD0
