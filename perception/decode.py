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

import numpy as np

from perception.layout import CLASS_TO_CODE, N_COLORS, ScreenKind
from perception.observation import FallingPill, NextPill, Observation

EPS = 1e-7


LEFT = slice(1 + 3 * 2, 1 + 3 * 3)  # classes of $6x (left halves), perception.layout
RIGHT = slice(1 + 3 * 3, 1 + 3 * 4)  # classes of $7x (right halves)


def paired_rows(probs: np.ndarray) -> np.ndarray:
    """int64 [16, 8]: the most likely cell classes under the rule that a left half ($6x) has a
    right half ($7x) just right of it and the other way round.

    The picture keeps that rule: a horizontal pill's halves are in one row, which the NMI
    redraws whole (``render_fieldRow``), and a cleared half turns its partner into a single in
    the same update, so no picture shows half a horizontal pill. (Vertical pairs span two rows,
    redrawn in different frames, so the picture may show a top half without its bottom for a
    frame or more: no such rule there.) Exact per row by dynamic programming over the columns
    (log-probabilities of independent cells); where the plain argmax keeps the rule, it is the
    answer. The readings it changes are singles read as halves and back ($6x <-> $8x), whose
    drawings differ by a few corner pixels on the real game's tiles."""
    k = probs.argmax(axis=0)
    left = (k >= LEFT.start) & (k < LEFT.stop)
    right = (k >= RIGHT.start) & (k < RIGHT.stop)
    if (
        np.array_equal(left[:, :-1], right[:, 1:])
        and not left[:, -1].any()
        and not right[:, 0].any()
    ):
        return k  # the argmax keeps the rule (nearly always): no search
    logp = np.log(np.clip(probs.astype(np.float64), EPS, 1.0))
    other = logp.copy()
    other[LEFT] = -np.inf
    other[RIGHT] = -np.inf
    k_other, lp_other = other.argmax(0), other.max(0)
    k_left, lp_left = LEFT.start + logp[LEFT].argmax(0), logp[LEFT].max(0)
    k_right, lp_right = RIGHT.start + logp[RIGHT].argmax(0), logp[RIGHT].max(0)
    rows, cols = lp_other.shape
    best = np.zeros((cols + 1, rows))
    pair = np.zeros((cols + 1, rows), bool)  # the best of the first i cells ends with a pair
    for i in range(1, cols + 1):
        best[i] = best[i - 1] + lp_other[:, i - 1]
        if i >= 2:
            both = best[i - 2] + lp_left[:, i - 2] + lp_right[:, i - 1]
            pair[i] = both > best[i]
            best[i] = np.maximum(best[i], both)
    out = k_other.copy()
    for r in range(rows):
        i = cols
        while i > 0:
            if pair[i, r]:
                out[r, i - 2], out[r, i - 1] = k_left[r, i - 2], k_right[r, i - 1]
                i -= 2
            else:
                out[r, i - 1] = k_other[r, i - 1]
                i -= 1
    return out


TOP = slice(1, 4)  # classes of $4x (top halves)
BOTTOM = slice(4, 7)  # classes of $5x (bottom halves)
LONE_HALF = 0.05  # prior probability that a vertical half shows without its partner


def paired_columns(probs: np.ndarray, k: np.ndarray, lone: float = LONE_HALF) -> np.ndarray:
    """``k`` (int64 [16, 8] classes, left/right halves already paired) with the top and bottom
    halves re-read per column: a top half ($4x) above a bottom half ($5x) is a pill, a half
    without its partner costs ``lone`` (a soft rule: while rows are redrawn after a lock or a
    clear, one per NMI from the bottom up, the picture can show a half whose partner's row is
    not redrawn yet). Exact per column by dynamic programming; cells in horizontal pairs keep
    their class."""
    top = (k >= TOP.start) & (k < TOP.stop)
    bottom = (k >= BOTTOM.start) & (k < BOTTOM.stop)
    if np.array_equal(top[:-1], bottom[1:]) and not top[-1].any() and not bottom[0].any():
        return k  # every half has its partner: no penalty applies, k is the optimum
    fixed = (k >= LEFT.start) & (k < RIGHT.stop)
    logp = np.log(np.clip(probs.astype(np.float64), EPS, 1.0))
    other = logp.copy()
    other[TOP] = other[BOTTOM] = other[LEFT] = other[RIGHT] = -np.inf
    k_other, lp_other = other.argmax(0), other.max(0)
    k_top, lp_top = TOP.start + logp[TOP].argmax(0), logp[TOP].max(0)
    k_bot, lp_bot = BOTTOM.start + logp[BOTTOM].argmax(0), logp[BOTTOM].max(0)
    pen = np.log(lone)
    rows, cols = k.shape
    out = k.copy()
    for c in range(cols):
        best = np.zeros(rows + 1)
        how = np.zeros(rows + 1, np.int64)  # 0 other, 1 lone top, 2 lone bottom, 3 pair
        for i in range(1, rows + 1):
            r = i - 1
            if fixed[r, c]:
                best[i], how[i] = best[i - 1], 4
                continue
            options = [
                best[i - 1] + lp_other[r, c],
                best[i - 1] + lp_top[r, c] + pen,
                best[i - 1] + lp_bot[r, c] + pen,
            ]
            if i >= 2 and not fixed[r - 1, c]:
                options.append(best[i - 2] + lp_top[r - 1, c] + lp_bot[r, c])
            how[i] = int(np.argmax(options))
            best[i] = options[how[i]]
        i = rows
        while i > 0:
            r = i - 1
            h = how[i]
            if h == 3:
                out[r - 1, c], out[r, c] = k_top[r - 1, c], k_bot[r, c]
                i -= 2
                continue
            if h != 4:
                out[r, c] = (k_other, k_top, k_bot)[h][r, c]
            i -= 1
    return out


def decode_cells(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 [22, 16, 8] -> (uint8 [16, 8] cell codes, float32 [16, 8] their probability):
    the most likely classes with every left half beside its right half (:func:`paired_rows`)
    and top and bottom halves paired where the picture is likely to pair them
    (:func:`paired_columns`)."""
    k = paired_columns(probs, paired_rows(probs))
    conf = np.take_along_axis(probs, k[None], axis=0)[0]
    return CLASS_TO_CODE[k], conf.astype(np.float32)


def decode_falling(probs: np.ndarray) -> FallingPill | None:
    """float32 [4, 17, 8] sprite probabilities -> the most likely pill, or None."""
    p0 = np.clip(probs[0].astype(np.float64), EPS, 1.0 - EPS)
    odds = np.log1p(-p0) - np.log(p0)  # log-odds of "a half is here", per cell
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


def decode(cells: np.ndarray, sprite: np.ndarray, nxt: np.ndarray, kind: np.ndarray) -> Observation:
    """One frame's model outputs (no batch axis) -> Observation.

    A cell under a falling-pill sprite is occluded: the picture shows the sprite, and only a
    line of the nametable above it. On the lock frame the locked pill is drawn there too and
    the model often reads the cell as empty, so its confidence is scaled by the probability
    that no sprite covers it: a reader of the Observation (the tracker) skips such cells."""
    field, conf = decode_cells(cells)
    conf = conf * sprite[0, 1:, :]  # sprite rows 1..16 are field rows 0..15
    k = int(kind.argmax())
    return Observation(
        field=field,
        confidence=conf,
        falling=decode_falling(sprite),
        next=decode_next(nxt),
        kind=ScreenKind(k),
        kind_confidence=float(kind[k]),
    )
