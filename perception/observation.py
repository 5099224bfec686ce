"""Observation: one captured frame read - the one type for it, made by perception's BoardReader
(and by the readers that stand in for it: ``engine.screen_facts`` of a state, a recording's
sidecar) and consumed as it is by the whole hil loop (runtime, tracker, replay, recording, view).

Coordinates follow the game: field index = row * 8 + column, row 0 at the top (RAM
$0400-$047F); a pill's ``y`` counts rows from the bottom like RAM $86 (15 = top row).

Screen kinds: ``Observation.kind`` is ``engine.ScreenKind`` (LEVEL, PAUSED, STAGE_CLEAR, TOP_OUT,
OTHER), the set ``engine.screen_facts`` gives and the tracker compares; ``Observation.intro``
adds what a picture alone can tell within LEVEL: True while the level's opening shows (the intro
wait and the first throw: no pill has fallen yet), False in play, None when the reader does not
say (``engine.screen_facts`` does not). The perception model's kind head has six classes
(:class:`perception.layout.KindLabel`: GAMEPLAY, LEVEL_INTRO, STAGE_CLEAR, GAME_OVER, PAUSED,
OTHER); :func:`kind_of_label` and :func:`label_of_kind` map between the two: GAMEPLAY and
LEVEL_INTRO are LEVEL (intro False / True), GAME_OVER is TOP_OUT, the rest keep their names.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine import ScreenKind
from perception.layout import FIELD_COLS, FIELD_ROWS, KindLabel

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
ROWS, COLS = FIELD_ROWS, FIELD_COLS

_KIND_OF_LABEL = {
    KindLabel.GAMEPLAY: (ScreenKind.LEVEL, False),
    KindLabel.LEVEL_INTRO: (ScreenKind.LEVEL, True),
    KindLabel.STAGE_CLEAR: (ScreenKind.STAGE_CLEAR, None),
    KindLabel.GAME_OVER: (ScreenKind.TOP_OUT, None),
    KindLabel.PAUSED: (ScreenKind.PAUSED, None),
    KindLabel.OTHER: (ScreenKind.OTHER, None),
}


def kind_of_label(label: int) -> tuple[ScreenKind, bool | None]:
    """The kind head's class (KindLabel) -> (Observation.kind, Observation.intro). Raises
    ValueError for a number that is no KindLabel."""
    return _KIND_OF_LABEL[KindLabel(label)]


def label_of_kind(kind: ScreenKind, intro: bool | None = False) -> KindLabel:
    """(engine.ScreenKind, intro) -> the kind head's class: LEVEL is LEVEL_INTRO when ``intro``
    is true, else GAMEPLAY; TOP_OUT is GAME_OVER."""
    kind = ScreenKind(kind)
    if kind == ScreenKind.LEVEL:
        return KindLabel.LEVEL_INTRO if intro else KindLabel.GAMEPLAY
    if kind == ScreenKind.TOP_OUT:
        return KindLabel.GAME_OVER
    return KindLabel[kind.name]


def canonical_cells(codes: npt.ArrayLike) -> U8:
    """Cell codes with a clearing cell in one spelling: the screen's tile $F0-$F2 (what
    render_fieldRow $8331 writes for a $Bx cell) becomes $B0-$B2. uint8, same shape."""
    c = np.array(codes, dtype=np.uint8, copy=True)
    shown_clear = (c >= 0xF0) & (c <= 0xF2)
    c[shown_clear] = c[shown_clear] - 0x40
    return c


def _pair_table(first: int, partner: int, half_is_first: bool, clearing: bool) -> npt.NDArray:
    """bool [256] by (type of the first cell << 4 | type of the second): the half (``first`` in
    the first cell when ``half_is_first``, else in the second) lacks ``partner`` (or, with
    ``clearing``, a clearing cell $Bx)."""
    k = np.arange(256)
    a, b = k >> 4, k & 0xF
    half, other = (a, b) if half_is_first else (b, a)
    return (half == first) & (other != partner) & ((other != 0xB) | (not clearing))


_PAIR_TABLES = {
    clearing: (  # top, bottom, left, right half without its partner
        _pair_table(0x4, 0x5, True, clearing),
        _pair_table(0x5, 0x4, False, clearing),
        _pair_table(0x6, 0x7, True, clearing),
        _pair_table(0x7, 0x6, False, clearing),
    )
    for clearing in (False, True)
}


def unpaired_halves(field: npt.ArrayLike, clearing: bool = True) -> npt.NDArray[np.bool_]:
    """Cell codes (128 cells, [16, 8] or flat, canonical: clearing as $Bx) -> bool, same shape:
    the pill halves whose partner is not beside them.

    In the game's field every half has its partner: a top half ($4x) the bottom half ($5x)
    below it, a left half ($6x) the right half ($7x) to its right. updateField ($92EB), the
    last step of every lock (pillPlaced), turns a half whose partner was cleared into a single
    ($8x) in the pass that marks the clearing cells ($Bx) just emptied ($Fx, still drawn as the
    clearing tile); until then (a few frames) a clearing cell stands in for the partner
    (``clearing`` True), and so does a half whose partner was locked above the field
    (confirmPlacement $8F62 drops that half): a bottom half in row 0 until updateField makes it
    a single, so it counts as unpaired here. ``clearing`` False takes only the other half for
    the partner (the tracker: a half beside a clearing tile is on screen for a few frames per
    clear). On the real game's RAM (levels 0-20 step 4, every speed: 3,370 fields settled for
    17 frames) no half lacked its partner; a picture shows one only while the nametable's
    redraw (one row per NMI, render_fieldRow $8331) is between the two rows."""
    shape = np.shape(field)
    t = np.asarray(field, dtype=np.uint8).reshape(ROWS, COLS) >> 4
    top, bottom, left, right = _PAIR_TABLES[bool(clearing)]
    bad = np.zeros((ROWS, COLS), dtype=bool)
    vertical = (t[:-1] << 4) | t[1:]  # (upper type, lower type) of each column neighbour pair
    bad[:-1] |= top[vertical]
    bad[1:] |= bottom[vertical]
    bad[-1] |= t[-1] == 0x4  # a top half on the floor
    bad[0] |= t[0] == 0x5  # a bottom half whose top half was above the field
    horizontal = (t[:, :-1] << 4) | t[:, 1:]
    bad[:, :-1] |= left[horizontal]
    bad[:, 1:] |= right[horizontal]
    bad[:, -1] |= t[:, -1] == 0x6
    bad[:, 0] |= t[:, 0] == 0x7
    return bad.reshape(shape)


def canonical_pill(x: int, y: int, rotation: int, colors: tuple[int, int]) -> tuple:
    """(x, y, rotation % 2, colours in drawn order) of a pill in the game's terms: what the
    picture of that pill shows (rotation 2 and 3 draw the 1st half right / on top)."""
    c0, c1 = colors
    if rotation >= 2:
        c0, c1 = c1, c0
    return (x, y, rotation % 2, (c0, c1))


@dataclass(frozen=True)
class FallingPill:
    """The falling pill as its sprites are drawn.

    x: column 0..7 of its left (horizontal) or bottom (vertical) half. y: row of that half
    counted from the bottom, 0..15 (16 would be a horizontal pill drawn in the neck above the
    field, which the game never does). rotation: 0..3 as RAM $A5 holds it; a picture cannot
    tell rotation 2 from 0 or 3 from 1 (the same two halves, swapped), so a pixel reader gives
    rotation 0 / 1 with the colours in drawn order (:meth:`drawn`), while ``engine.screen_facts``
    gives the game's rotation. colors: the game's (1st half, 2nd half), 0 yellow 1 red 2 blue
    (rotation 0 draws them left, right; 1 bottom, top). The sprites show the pill as the
    previous frame's main loop left it (fallingPill_spriteUpdate $872F runs before the pill
    moves). confidence: the probability of this reading under the model (both halves, their
    colours), 1.0 for a reader that knows; not compared by ``==``.
    """

    x: int
    y: int
    rotation: int
    colors: tuple[int, int]
    confidence: float = dc_field(default=1.0, compare=False)

    def drawn(self) -> FallingPill:
        """The pill as a picture can tell it: (x, y, rotation % 2, colours in drawn order)."""
        x, y, rotation, colors = canonical_pill(self.x, self.y, self.rotation, self.colors)
        return FallingPill(x, y, rotation, colors, self.confidence)

    @property
    def cells(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Field (row from the top, column) of the cells the sprites cover, in drawn order
        (left then right; bottom then top), the order of ``drawn().colors``; the row may be -1
        (the neck) for a vertical pill at the top."""
        row = 15 - self.y
        if self.rotation % 2 == 0:
            return (row, self.x), (row, self.x + 1)
        return (row, self.x), (row - 1, self.x)


@dataclass(frozen=True)
class NextPill:
    """The next pill, at rest beside the doctor or flying along its throw arc.

    colors: (1st half, 2nd half) in the game's order (RAM nextPill colours), 0 yellow 1 red
    2 blue; in flight the pill turns, and the model reads the order from where on the arc it is.
    confidence: the probability of this reading (drawn, and both colours), 1.0 for a reader that
    knows; not compared by ``==``. throw_frame: 0 at rest, 1.. along the throw arc, None when
    the reader does not tell (perception's model does not).
    """

    colors: tuple[int, int]
    confidence: float = dc_field(default=1.0, compare=False)
    throw_frame: int | None = None


def _ones() -> F32:
    return np.ones((ROWS, COLS), np.float32)


@dataclass(frozen=True)
class Observation:
    """One captured frame read (see the module docstring for the kinds).

    kind: engine.ScreenKind; ``field`` means something only where :attr:`board_visible`.
    field: uint8 [16, 8] cell codes as ARCHITECTURE.md defines them (high nibble $4x top, $5x
        bottom, $6x left, $7x right, $8x single, $Bx clearing - the screen draws it as tile
        $Fx, canonical here as $B0-$B2 (:func:`canonical_cells`) -, $Dx virus, $FF empty; low
        nibble the colour), the bottle as the PICTURE shows it (it lags the game state by up to
        16 frames while rows are redrawn).
    falling: the falling pill's sprites, or None when none is drawn.
    next: the next pill, or None when none is drawn.
    confidence: float32 [16, 8] the probability of each cell's code (default all 1.0: a
        reader that knows), for perception times the probability that no falling-pill sprite
        covers the cell (an occluded cell is a guess: on the lock frame the locked pill is
        drawn under the sprite).
    intro: within LEVEL, True for the level's opening (no pill has fallen yet), False in play;
        None when the reader does not say.
    kind_confidence: the probability of ``kind`` (and ``intro``), 1.0 for a reader that knows.
    virus_frame: the small viruses' animation frame 0 / 1 (a label relative to the reader,
        hil.loop.observation.VirusAnimation, for a pixel reader), None when unknown.
    source: which reader made it ("onnx", "oracle", "prediction", a replay reader's name).
    opponent_viruses: two players, the viruses the other player's bottle shows in the same
        picture (read in the same inference), None when it was not read with this one.

    Raises ValueError when ``field`` is not uint8 [16, 8] or ``confidence`` not [16, 8].
    """

    kind: ScreenKind
    field: U8
    falling: FallingPill | None = None
    next: NextPill | None = None
    confidence: F32 = dc_field(default_factory=_ones)
    intro: bool | None = None
    kind_confidence: float = 1.0
    virus_frame: int | None = None
    source: str = "unknown"
    opponent_viruses: int | None = None

    def __post_init__(self) -> None:
        f = np.asarray(self.field)
        if f.shape != (ROWS, COLS) or f.dtype != np.uint8:
            raise ValueError(f"Observation.field must be uint8 [16, 8], got {f.dtype} {f.shape}")
        c = np.asarray(self.confidence)
        if c.shape != (ROWS, COLS):
            raise ValueError(f"Observation.confidence must be [16, 8], got {c.shape}")

    @property
    def board_visible(self) -> bool:
        """True when the bottle is drawn (the field can be trusted as far as its confidence)."""
        return self.kind in (ScreenKind.LEVEL, ScreenKind.STAGE_CLEAR, ScreenKind.TOP_OUT)

    @property
    def kind_label(self) -> KindLabel:
        """The kind head's class this reading stands for (:func:`label_of_kind`)."""
        return label_of_kind(self.kind, self.intro)

    @property
    def min_confidence(self) -> float:
        """The lowest cell confidence: a cheap flag for a frame worth a second look."""
        return float(np.min(self.confidence))

    @property
    def virus_count(self) -> int:
        """Viruses in the shown bottle."""
        return int(((self.field & 0xF0) == 0xD0).sum())

    @property
    def next_colors(self) -> tuple[int, int] | None:
        """The next pill's colours, None when none is drawn."""
        return None if self.next is None else self.next.colors

    @property
    def next_throw_frame(self) -> int | None:
        """The next pill's throw frame (0 at rest), None when not drawn or not told."""
        return None if self.next is None else self.next.throw_frame

    def to_json(self) -> dict[str, Any]:
        """A compact JSON-ready summary (the event log, a recording's sidecar): kind (the
        engine.ScreenKind name), field (16 hex rows), falling ([x, y, rotation, [c0, c1]] or
        None), falling_confidence (the falling pill reading's probability, 3 significant
        digits; absent without a falling pill), next ([c0, c1] or None), min_confidence (the
        lowest cell confidence, 3 decimals)."""
        f = self.falling
        out: dict[str, Any] = {
            "kind": self.kind.name,
            "field": [bytes(row).hex() for row in np.asarray(self.field, np.uint8)],
            "falling": None if f is None else [f.x, f.y, f.rotation, list(f.colors)],
            "next": None if self.next is None else list(self.next.colors),
            "min_confidence": round(self.min_confidence, 3),
        }
        if f is not None:
            out["falling_confidence"] = float(f"{f.confidence:.3g}")
        return out


def observation_from_facts(facts: engine.ScreenFacts, source: str = "oracle") -> Observation:
    """The Observation a perfect reader makes of ``render_frame`` of a state, from
    ``engine.screen_facts`` of that state: the game's rotation, the throw frame and the virus
    animation frame known, confidence 1.0, ``intro`` None (the facts do not tell)."""
    falling = None
    if facts.falling is not None:
        f = facts.falling
        falling = FallingPill(
            int(f.x), int(f.y), int(f.rotation), (int(f.colors[0]), int(f.colors[1]))
        )
    nxt = facts.next
    return Observation(
        kind=ScreenKind(facts.kind),
        field=canonical_cells(facts.bottle),
        falling=falling,
        next=None
        if nxt is None
        else NextPill((int(nxt.colors[0]), int(nxt.colors[1])), throw_frame=int(nxt.throw_frame)),
        virus_frame=int(facts.virus_frame),
        source=source,
    )


def blank_observation(kind: ScreenKind = ScreenKind.OTHER, source: str = "oracle") -> Observation:
    """A screen that shows no level (an empty bottle, nothing drawn)."""
    return Observation(kind=kind, field=np.full((ROWS, COLS), 0xFF, np.uint8), source=source)
