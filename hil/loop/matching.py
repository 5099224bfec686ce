"""Comparing the tracker's predictions with what the reader saw, and writing what it saw into a
predicted state (the re-sync): which cells count (confidence, sprites over tiles, readings no
game can show, halves without their partner), what differs, and the falling pill's rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine import ScreenKind
from engine.placement import ACTION_SEND_PILL_FINISHED
from perception.observation import (
    COLS,
    ROWS,
    FallingPill,
    Observation,
    canonical_cells,
    observation_from_facts,
    unpaired_halves,
)


@dataclass(frozen=True)
class MatchConfig:
    """How strictly a prediction must agree with an observation.

    min_confidence: cells read with less are not compared, nor written into the shadow state
    on a re-sync (the prediction is exact; an unsure reading is perception's doubt, e.g. a
    virus colour misread on one animation frame); the same threshold holds for the next
    pill's reading and for the cells under a predicted falling pill that the reader did not
    see. cell_tolerance: confident cells allowed to differ (perception noise). compare_next /
    compare_throw / compare_virus_frame: use those facts when both sides know them."""

    min_confidence: float = 0.97
    cell_tolerance: int = 0
    compare_next: bool = True
    compare_throw: bool = True
    compare_virus_frame: bool = True


def _pill_hidden(pill: FallingPill, field: npt.NDArray[np.uint8]) -> bool:
    """True when the bottle already shows ``pill`` in the cells its sprites cover: the lock
    frame, whose picture has the locked pill's tiles under the last sprite (the sprite one
    line lower, fallingPill_spriteUpdate $872F), which a pixel reader cannot reliably tell
    from the tiles alone. Pill halves only ($4x-$8x), in the sprite's colours."""
    p = pill.drawn()
    for (r, c), color in zip(p.cells, p.colors, strict=True):
        if not (0 <= r < ROWS and 0 <= c < COLS):
            return False
        code = int(field[r, c])
        if not (0x40 <= code < 0x90) or (code & 0x0F) != color:
            return False
    return True


# What a reader's misread makes differ for a frame or two, and no input depends on: a run of
# captures that differ in these only needs TrackerConfig.soft_mismatch_frames to diverge.
SOFT_MISMATCHES = frozenset({"board", "next"})


def _unsure_under(pill: FallingPill, obs: Observation, cfg: MatchConfig) -> bool:
    """True when ``obs`` read one of the bottle cells that ``pill``'s sprites cover with less
    than ``cfg.min_confidence``: a picture whose reader found no falling pill there is then no
    evidence that none is drawn. On the real game's frames the ROM-fitted reader missed a falling
    pill resting on viruses for up to 7 frames in a row, each time with those cells at 0.2-0.5
    (docs/RUN.md, "Tracking")."""
    conf = np.asarray(obs.confidence)
    for r, c in pill.drawn().cells:
        if 0 <= r < ROWS and 0 <= c < COLS and conf[r, c] < cfg.min_confidence:
            return True
    return False


def _unsure_colours(pred: FallingPill | None, seen: FallingPill | None, cfg: MatchConfig) -> bool:
    """True when the reader saw the falling pill at the predicted pose (x, y and rotation as
    drawn) in other colours, with less than ``cfg.min_confidence``: no evidence of another pill
    (a pill's colours cannot change while it falls; they were read on the preview before its
    spawn). On the real game's frames the ROM-fitted reader read a yellow half as blue for one or
    two frames before the lock, at 0.55-0.83, over a bottle full of viruses (docs/RUN.md,
    "Tracking"); counted as a mismatch, each misread became a false divergence and a re-sync
    that wrote the wrong colour into the shadow."""
    if pred is None or seen is None or seen.confidence >= cfg.min_confidence:
        return False
    a, b = pred.drawn(), seen.drawn()
    return (a.x, a.y, a.rotation) == (b.x, b.y, b.rotation)


def _same_picture(pred: ScreenKind, seen: ScreenKind) -> bool:
    """A predicted stage clear or top-out seen as a LEVEL picture: the console draws the bottle
    as in play for the first frames of those phases (the STAGE CLEAR / GAME OVER boxes come
    later, docs/RENDER.md "Terminal phases"), so a pixel reader cannot tell them yet."""
    return seen == ScreenKind.LEVEL and pred in (ScreenKind.STAGE_CLEAR, ScreenKind.TOP_OUT)


def _compared_differences(pred: Observation, obs: Observation, cfg: MatchConfig) -> Any:
    """bool [16, 8]: the cells the board comparison counts as different: read with
    ``cfg.min_confidence``, not under either falling pill's sprites, not a reading the game
    cannot show (_impossible_reads) or a half without its partner (unpaired_halves)."""
    sure = np.asarray(obs.confidence) >= cfg.min_confidence  # a new array
    for pill in (pred.falling, obs.falling):
        if pill is not None:  # the tiles under a falling pill's sprites are hidden
            for r, c in pill.cells:
                if 0 <= r < ROWS and 0 <= c < COLS:
                    sure[r, c] = False
    # Readings the game cannot show are not compared (a misread held confidently for many
    # frames would otherwise be written into the shadow by a re-sync).
    sure &= ~_impossible_reads(pred.field, obs.field) & ~unpaired_halves(obs.field, clearing=False)
    return (np.asarray(pred.field) != np.asarray(obs.field)) & sure


def board_differences(pred: Observation, obs: Observation, cfg: MatchConfig) -> list[list[Any]]:
    """The compared cells that differ, for the event log: [row, col, predicted, seen,
    confidence] each (cell codes as hex strings, confidence rounded), at most 8."""
    out: list[list[Any]] = []
    conf = np.asarray(obs.confidence)
    for r, c in np.argwhere(_compared_differences(pred, obs, cfg))[:8]:
        r, c = int(r), int(c)
        p, o = int(pred.field[r][c]), int(obs.field[r][c])
        out.append([r, c, f"{p:02x}", f"{o:02x}", round(float(conf[r, c]), 3)])
    return out


def mismatches(
    pred: Observation, obs: Observation, cfg: MatchConfig, next_known: bool = True
) -> list[str]:
    """What differs between a predicted and an observed screen: a subset of "kind", "board",
    "pill", "next", "throw", "virus_frame" (empty: they agree)."""
    out = []
    if pred.kind != obs.kind and not _same_picture(pred.kind, obs.kind):
        out.append("kind")
    if pred.kind == ScreenKind.PAUSED or obs.kind == ScreenKind.PAUSED:
        return out
    diff = int(_compared_differences(pred, obs, cfg).sum())
    if diff > cfg.cell_tolerance:
        out.append("board")
    if pred.falling is not None and obs.falling is None and _pill_hidden(pred.falling, obs.field):
        pass  # the lock frame: the sprite over the same pill drawn in the bottle
    elif pred.falling is not None and obs.falling is None and _unsure_under(pred.falling, obs, cfg):
        pass  # no pill read where the reader was unsure of the cells the predicted one covers
    elif _unsure_colours(pred.falling, obs.falling, cfg):
        pass  # the predicted pose, another colour read with less than min_confidence
    elif (pred.falling is None) != (obs.falling is None) or (
        pred.falling is not None
        and obs.falling is not None
        and pred.falling.drawn() != obs.falling.drawn()
    ):
        out.append("pill")
    if (
        cfg.compare_next
        and next_known
        and pred.next_colors is not None
        and obs.next is not None
        and obs.next.confidence >= cfg.min_confidence
        and pred.next_colors != obs.next_colors
    ):
        out.append("next")
    if (
        cfg.compare_throw
        and pred.next_throw_frame is not None
        and obs.next_throw_frame is not None
        and pred.next_throw_frame != obs.next_throw_frame
    ):
        out.append("throw")
    if (
        cfg.compare_virus_frame
        and pred.virus_frame is not None
        and obs.virus_frame is not None
        and pred.virus_frame != obs.virus_frame
    ):
        out.append("virus_frame")
    return out


def predicted_observation(game: engine.Game) -> Observation:
    """What a perfect reader would read off render_frame(game)."""
    return observation_from_facts(engine.screen_facts(game), source="prediction")


SEND_PILL_FINISHED = ACTION_SEND_PILL_FINISHED  # the spawn state (engine.placement)


def pill_cells(cells: npt.NDArray[np.uint8]) -> bool:
    """Whether ``cells`` (uint8 [16, 8] codes) hold a pill half or a single ($4x-$8x)."""
    kinds = np.asarray(cells) >> 4
    return bool(((kinds >= 0x4) & (kinds <= 0x8)).any())


def as_virus(cells: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """A level's starting board holds viruses only: a clearing code ($Bc) read there is the
    reader's take on a virus of colour c (see mismatches)."""
    cells = np.asarray(cells)
    return np.where((cells & 0xF0) == 0xB0, (cells & 0x0F) | 0xD0, cells).astype(np.uint8)


def same_board(obs: Observation, board: npt.NDArray[np.uint8]) -> bool:
    return bool(np.array_equal(as_virus(obs.field), board))


def _impossible_reads(
    expected: npt.NDArray[np.uint8], seen: npt.NDArray[np.uint8]
) -> npt.NDArray[np.bool_]:
    """Cells (same shape as the inputs, bool) whose reading no game in play can show, whatever
    happened since the shadow's state ``expected``: a virus ($Dc) seen where the shadow has no
    virus of colour c (viruses are placed only before play, by levelIntro [$9CAB]; in play a
    cell loses its virus and never gains one or changes its colour), and a virus seen as its
    colour's clearing tile ($Bc: no clear is made of viruses alone, a match needs a pill
    half). A reading there is the reader's error, not the shadow's."""
    expected, seen = np.asarray(expected), np.asarray(seen)
    virus_seen = (seen & 0xF0) == 0xD0
    return (virus_seen & (seen != expected)) | (
        ((expected & 0xF0) == 0xD0) & (seen == ((expected & 0x0F) | 0xB0))
    )


def write_board(
    game: engine.Game, obs: Observation, min_confidence: float, viruses_missing: int = 0
) -> int:
    """Confident observed cells into the field and the shown nametable (canonical $Bx is shown
    as tile $Fx); readings no game can show (_impossible_reads: a virus where the shadow has
    none, a virus seen as its clearing tile) and pill halves read without their partner
    (perception.observation.unpaired_halves) keep the shadow's cell.

    ``viruses_missing``: viruses the shadow's level board lacks (it was voted from pictures
    that missed them): up to that many viruses read where the shadow has an empty cell are
    written in (the most confident first) and counted in virus_left_bcd (else every re-sync
    would keep them out). Returns how many."""
    conf = np.asarray(obs.confidence).reshape(-1)
    sure = conf >= min_confidence
    seen = canonical_cells(obs.field).reshape(-1)
    field = np.asarray(game.field)
    found = 0
    if viruses_missing > 0:
        new = sure & ((seen & 0xF0) == 0xD0) & (field.reshape(-1) == 0xFF)
        idx = np.flatnonzero(new)
        idx = idx[np.argsort(-conf[idx], kind="stable")][:viruses_missing]
        found = len(idx)
        if found:
            field[idx] = seen[idx]
            np.asarray(game.shown)[idx] = seen[idx]
            b = int(game.virus_left_bcd)
            n = (b >> 4) * 10 + (b & 0x0F) + found
            game.virus_left_bcd[()] = (n // 10) * 16 + n % 10
    sure &= ~_impossible_reads(field.reshape(-1), seen) & ~unpaired_halves(seen, clearing=False)
    shown = np.asarray(game.shown)
    field[sure] = seen[sure]
    tiles = seen.copy()
    clearing = (tiles & 0xF0) == 0xB0
    tiles[clearing] = tiles[clearing] + 0x40
    shown[sure] = tiles[sure]
    return found


def write_pill(game: engine.Game, pill: FallingPill) -> None:
    game.pill_x[()] = pill.x
    game.pill_y[()] = pill.y
    game.pill_rotation[()] = pill.rotation
    game.pill_colors[:] = pill.colors
