"""The model's probabilities -> an Observation (numpy only; used by BoardReader and tests).

Falling pill: the sprite head gives, per cell of the neck row and the field, the probability
of "no sprite" and of a half of each colour. Every place a pill can be drawn (horizontal: two
neighbours in a row of the field; vertical: two in a column, the upper one possibly in the
neck row) is scored by the log-odds of "both cells hold a half, all others none", assuming
independent cells; the best place wins if it is more
likely than "no pill at all". This always gives a well-formed pill (two adjacent halves), so a
doubtful cell cannot produce a three-cell or one-cell pill.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from engine.constants import level_viruses
from perception.layout import CLASS_TO_CODE, CODE_TO_CLASS, EMPTY_CODE, N_COLORS, KindLabel
from perception.observation import (
    FallingPill,
    NextPill,
    Observation,
    kind_of_label,
    unpaired_halves,
)
from perception.panel import Panel

EPS = 1e-7
# the fewest viruses a level starts with (level 0). The evaluation's end-game games start
# with 1-3 (perception.data.GameStream: an intro in its truth, which the real game never
# shows); below 4 the kind head decides.
MIN_LEVEL_VIRUSES = 4
EMPTY_CLASS = int(CODE_TO_CLASS[EMPTY_CODE])
VIRUS_CLASSES = [int(CODE_TO_CLASS[0xD0 | color]) for color in range(N_COLORS)]


# A pill half and where its partner must be: (row step, column step) (perception.observation.
# unpaired_halves has the rule)
_PARTNER = {0x4: (1, 0), 0x5: (-1, 0), 0x6: (0, 1), 0x7: (0, -1)}
PAIR_MIN_CONFIDENCE = 0.97  # cells read at least this sure are kept (BoardTracker's default)
PAIR_CANDIDATES = 3  # classes tried per unsure cell: its most likely ones ...
PAIR_MIN_CANDIDATE = 0.01  # ... that the model gives at least this (mends took 0.07-0.47)
PAIR_MAX_HALVES = 8  # more unpaired halves than this: no board the model read well


def _pair_cells(
    probs: np.ndarray,
    k: np.ndarray,
    covered: np.ndarray | None = None,
    min_confidence: float = PAIR_MIN_CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray]:
    """Argmax classes int [16, 8] -> (the classes with each unpaired half mended where the
    model was unsure, float32 [16, 8] caps on the cells' confidence).

    For an unpaired half (:func:`perception.observation.unpaired_halves`) and the cell where
    its partner belongs, the cells read below ``min_confidence`` may change to one of their
    ``PAIR_CANDIDATES`` most likely classes (each of probability at least
    ``PAIR_MIN_CANDIDATE``); the most likely combination (product of the probabilities) that
    pairs the half and unpairs no other half is taken, and both cells of the pair are capped at
    that probability: a mended pair rests on an unsure cell, so a reader of confidences (the
    tracker) skips both, as it skipped the unpaired half before. A pair read sure on both sides
    stays as read (the picture shows it), and so does one with a cell under the falling pill's
    sprite (``covered``, bool [16, 8]: the picture hides a cell there, and on the lock frame
    the pill it covers is half drawn). A reading with more than ``PAIR_MAX_HALVES`` unpaired
    halves is no board the model read well (and would cost time): it stays as read."""
    cap = np.ones(k.shape, np.float32)
    field = CLASS_TO_CODE[k]
    bad = unpaired_halves(field)
    if not bad.any() or int(bad.sum()) > PAIR_MAX_HALVES:
        return k, cap
    k = k.copy()
    rows, cols = field.shape
    order = np.argsort(-probs, axis=0)[:PAIR_CANDIDATES]
    for r, c in zip(*np.nonzero(bad), strict=True):
        field = CLASS_TO_CODE[k]
        now_bad = unpaired_halves(field)
        if not now_bad[r, c]:
            continue  # mended with an earlier one
        dr, dc = _PARTNER[int(field[r, c]) >> 4]
        pr, pc = r + dr, c + dc
        if pr < 0:
            # a bottom half in row 0 whose top half was locked above the field and dropped
            # (confirmPlacement $8F62): the picture shows it alone until updateField makes it a
            # single, and the model reads which; mending it took right readings to singles
            # (3 of the 12 wrong cells of one held-out composite run)
            continue
        place = [(r, c)] + ([(pr, pc)] if 0 <= pr < rows and 0 <= pc < cols else [])
        if covered is not None and any(covered[y, x] for y, x in place):
            continue
        unsure = [(y, x) for y, x in place if probs[k[y, x], y, x] < min_confidence]
        if not unsure:
            continue
        best, best_p = None, -1.0
        for combo in np.ndindex(*([PAIR_CANDIDATES] * len(unsure))):
            trial = k.copy()
            for (y, x), i in zip(unsure, combo, strict=True):
                trial[y, x] = order[i, y, x]
            if any(probs[trial[y, x], y, x] < PAIR_MIN_CANDIDATE for y, x in unsure):
                continue
            left = unpaired_halves(CLASS_TO_CODE[trial])
            if any(left[y, x] for y, x in place) or (left & ~now_bad).any():
                continue
            p = float(np.prod([probs[trial[y, x], y, x] for y, x in unsure]))
            if p > best_p:
                best, best_p = trial, p
        if best is not None:
            k = best
            for y, x in place:
                cap[y, x] = min(cap[y, x], best_p)
    return k, cap


def decode_cells(
    probs: np.ndarray, covered: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """float32 [22, 16, 8] -> (uint8 [16, 8] cell codes, float32 [16, 8] their confidence).

    Cells by argmax (confidence: the class's probability), then pill halves without their
    partner mended where the model was unsure of them (``_pair_cells``; ``covered``, bool
    [16, 8]: cells under the falling pill's sprite, whose pairs are left as read); both cells
    of a mended pair get at most the mend's probability as their confidence."""
    k, cap = _pair_cells(probs, probs.argmax(axis=0), covered)
    conf = np.take_along_axis(probs, k[None], axis=0)[0]
    return CLASS_TO_CODE[k], np.minimum(conf, cap).astype(np.float32)


def decode_falling(probs: np.ndarray, virus: np.ndarray | None = None) -> FallingPill | None:
    """float32 [4, 17, 8] sprite probabilities -> the most likely pill, or None.

    ``virus``: float32 [16, 8], the cell head's probability of a virus in each field cell. A
    pill falls only through empty cells, and on its lock frame the cells under it show its own
    halves, never a virus: a place's odds take the probability that neither of its cells holds
    one (a place over a cell read as a virus at 0.99 loses 4.6 of log-odds)."""
    p0 = np.clip(probs[0].astype(np.float64), EPS, 1.0 - EPS)
    odds = np.log1p(-p0) - np.log(p0)  # log-odds of "a half is here", per cell
    if virus is not None:  # sprite rows 1..16 are field rows 0..15
        odds[1:] += np.log(np.clip(1.0 - virus.astype(np.float64), EPS, 1.0))
    horizontal = odds[:, :-1] + odds[:, 1:]  # [17, 7]: left half at (r, c)
    # the pill's y starts at pillStartingY ($0F, the top field row) when it spawns
    # (game_logic, the next pill's setup) and only decreases, so a horizontal pill is never in
    # the neck row; only a vertical pill's upper half is (a thrown next pill passing the neck
    # at the end of its arc was read as one)
    horizontal[0] = -np.inf
    vertical = odds[1:, :] + odds[:-1, :]  # [16, 8]: bottom half at (r + 1, c)
    h, v = float(horizontal.max()), float(vertical.max())
    best = max(h, v)
    if best <= 0.0:
        return None
    if h >= v:
        r, c = np.unravel_index(int(horizontal.argmax()), horizontal.shape)
        first, second, rotation = (r, c), (r, c + 1), 0
    else:
        r, c = np.unravel_index(int(vertical.argmax()), vertical.shape)
        first, second, rotation = (r + 1, c), (r, c), 1
    halves = probs[1 : 1 + N_COLORS]
    colors = (
        int(halves[:, first[0], first[1]].argmax()),
        int(halves[:, second[0], second[1]].argmax()),
    )
    # probability of this reading: the two cells hold these colours, the rest hold none
    p_pair = float(halves[colors[0], first[0], first[1]] * halves[colors[1], second[0], second[1]])
    rest = float(np.exp(np.log(p0).sum() - np.log(p0[first]) - np.log(p0[second])))
    return FallingPill(
        x=int(first[1]),
        y=16 - int(first[0]),
        rotation=rotation,
        colors=colors,
        confidence=p_pair * rest,
    )


def decode_next(probs: np.ndarray) -> NextPill | None:
    """float32 [7] (drawn, 1st half colours, 2nd half colours) -> NextPill or None."""
    drawn = float(probs[0])
    if drawn < 0.5:
        return None
    first = probs[1 : 1 + N_COLORS]
    second = probs[1 + N_COLORS : 1 + 2 * N_COLORS]
    colors = (int(first.argmax()), int(second.argmax()))
    return NextPill(colors=colors, confidence=drawn * float(first.max() * second.max()))


def played(field: np.ndarray) -> bool:
    """uint8 [16, 8] cell codes -> whether the board shows anything but viruses and empty cells
    (a pill half, a single or a clearing tile: something a player put there)."""
    kinds = field >> 4
    return bool(((kinds != 0xF) & (kinds != 0xD)).any())


def _drawn_under_stray_sprite(
    field: np.ndarray,
    conf: np.ndarray,
    cells: np.ndarray,
    no_sprite: np.ndarray,
    falling: FallingPill | None,
) -> tuple[np.ndarray, np.ndarray]:
    """A cell read empty where the sprite head sees a pill half that belongs to no falling pill
    (``falling``, the pill decoded, or None): the thing drawn there is a tile of the field.

    The cell head learnt that a cell under a falling pill's sprite is empty (a pill never falls
    over a filled cell), so when the sprite head takes a drawn tile for a half, the cell head
    tends to read the cell as empty with it. Through the composite chain a yellow virus was
    read as a half (0.56-0.96) and its cell as empty (0.75-0.91) on 8 of 1,500 held-out
    pictures of one game (ROM model H), all of them with the falling pill elsewhere or none.
    With no pill there, "a half is drawn" (sprite head, q) means "the cell is filled": the two
    heads, taken as independent, are weighed as in the kind rule (q (1 - P(empty)) against
    (1 - q) P(empty)), and where filled wins the cell takes its likeliest filled class. Its
    confidence stays scaled by the sprite head's "no sprite" (low): the tracker skips it.
    ``field`` uint8 [16, 8] and ``conf`` float32 [16, 8] are returned as new arrays when
    changed; ``cells`` float32 [22, 16, 8], ``no_sprite`` float32 [16, 8]."""
    stray = no_sprite < 0.5
    if falling is not None:
        for r, c in falling.cells:
            if r >= 0:
                stray[r, c] = False
    stray &= field == EMPTY_CODE
    if not stray.any():
        return field, conf
    field, conf = field.copy(), conf.copy()
    for r, c in zip(*np.nonzero(stray), strict=True):
        q = 1.0 - float(no_sprite[r, c])
        empty = float(cells[EMPTY_CLASS, r, c])
        if q * (1.0 - empty) <= (1.0 - q) * empty:
            continue
        filled = cells[:, r, c].copy()
        filled[EMPTY_CLASS] = -1.0
        j = int(filled.argmax())
        field[r, c] = CLASS_TO_CODE[j]
        conf[r, c] = float(cells[j, r, c]) * float(no_sprite[r, c])
    return field, conf


def _kind_by_count(
    k: int, k_conf: float, kind: np.ndarray, field: np.ndarray, panel: Panel
) -> tuple[int, float]:
    """LEVEL_INTRO or GAMEPLAY for a picture of viruses only and no falling pill, by the board's
    count against the level's (``panel``'s LEVEL number): the intro's board is whole, so
    a whole board is the intro (or the first throw), and fewer viruses with the next pill on
    its arc is a later throw. Returns (kind class, its confidence)."""
    if panel.level is None:
        return k, k_conf
    viruses = int(((field >> 4) == 0xD).sum())
    whole = level_viruses(panel.level)
    both = float(kind[KindLabel.GAMEPLAY] + kind[KindLabel.LEVEL_INTRO])
    if k == KindLabel.LEVEL_INTRO and panel.in_flight and MIN_LEVEL_VIRUSES <= viruses < whole:
        # MJPEG, held-out: 3 pictures of one throw over 54 viruses at level 13 (56), its first
        # pill having cleared 2, were read as the intro (ROM model H)
        return KindLabel.GAMEPLAY, both
    if k == KindLabel.GAMEPLAY and viruses == whole:
        # HDMI, held-out: a level 1 intro (8 viruses) read as play at 0.85-0.90 on 5
        # pictures, 9 intro pictures in all (ROM model J). Play shows a whole board of
        # viruses only when its pills cleared one another to the last half.
        return KindLabel.LEVEL_INTRO, both
    return k, k_conf


def decode(
    cells: np.ndarray,
    sprite: np.ndarray,
    nxt: np.ndarray,
    kind: np.ndarray,
    source: str = "onnx",
    panel: Panel | Callable[[], Panel] | None = None,
) -> Observation:
    """One frame's model outputs (no batch axis) -> Observation (``source`` names the reader).

    The kind head's class (KindLabel) becomes the Observation's kind and intro
    (perception.observation.kind_of_label): GAMEPLAY and LEVEL_INTRO are LEVEL.

    A cell under a falling-pill sprite is occluded: the picture shows the sprite, and only a
    line of the nametable above it. On the lock frame the locked pill is drawn there too and
    the model often reads the cell as empty, so its confidence is scaled by the probability
    that no sprite covers it: a reader of the Observation (the tracker) skips such cells.

    ``panel`` (perception.panel, read from the same picture, or a function that reads it,
    called only when needed; None: not read): over a board of viruses only with no falling
    pill, the LEVEL number decides between the intro and play (``_kind_by_count``): a
    LEVEL_INTRO reading with the next pill on its throw arc is play when the board holds
    fewer viruses than the level starts with (and at least ``MIN_LEVEL_VIRUSES``: a later
    pill's throw after the first pills cleared only viruses), a GAMEPLAY reading is the
    intro when the board holds them all."""
    no_sprite = sprite[0, 1:, :]  # sprite rows 1..16 are field rows 0..15
    field, conf = decode_cells(cells, no_sprite < 0.5)
    conf = conf * no_sprite
    k = int(kind.argmax())
    # A virus read under a pill's place: the sprite head took a drawn virus for a half (two
    # yellow viruses side by side through the composite chain, one of them read as a half at
    # 0.92, made a phantom pill on 2 of 1,500 held-out pictures, ROM model H)
    falling = decode_falling(sprite, cells[VIRUS_CLASSES].sum(axis=0))
    k_conf = float(kind[k])
    if k == KindLabel.LEVEL_INTRO and falling is not None and not played(field):
        # The kind head and the sprite head disagree (the intro has no falling pill): keep the
        # likelier of the two joint readings, the heads taken as independent. Through the
        # composite chain two viruses of a colour side by side read as a falling pill of
        # that colour at 0.14-0.19 over an intro the kind head gave 0.91 (8 held-out
        # pictures of one level 1 intro, ROM model H); the first pill's fall the kind head
        # reads as the intro comes with a sure pill.
        p_intro = float(kind[KindLabel.LEVEL_INTRO])
        if p_intro * (1.0 - falling.confidence) > (1.0 - p_intro) * falling.confidence:
            falling = None
    field, conf = _drawn_under_stray_sprite(field, conf, cells, no_sprite, falling)
    if k == KindLabel.LEVEL_INTRO and (falling is not None or played(field)):
        # LEVEL_INTRO lasts until the first falling pill is drawn (docs/PERCEPTION.md, "Screen
        # kinds"): a picture with one is play. The first pill falling over the intro's board
        # was read as the intro for up to 40 frames by a ROM model's kind head. The intro's
        # board holds viruses only (none of 389 held-out intro pictures showed anything else),
        # so a pill, a single or a clearing tile on the board is play too: a ROM model read
        # the throw of a later pill as the intro on 9 of 2400 random-chain pictures.
        k = KindLabel.GAMEPLAY
        k_conf = float(kind[KindLabel.GAMEPLAY] + kind[KindLabel.LEVEL_INTRO])
    if (
        k in (KindLabel.LEVEL_INTRO, KindLabel.GAMEPLAY)
        and panel is not None
        and falling is None
        and not played(field)
    ):
        k, k_conf = _kind_by_count(k, k_conf, kind, field, panel() if callable(panel) else panel)
    screen, intro = kind_of_label(k)
    return Observation(
        kind=screen,
        field=field,
        falling=falling,
        next=decode_next(nxt),
        confidence=conf,
        intro=intro,
        kind_confidence=k_conf,
        source=source,
    )
