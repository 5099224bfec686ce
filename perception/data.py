"""Training and evaluation samples: engine games rendered, degraded through capture chains,
read back into the model's crop, and labelled with what the picture shows. The two-player
screen's samples (:class:`VersusStream`) are at the end.

A sample is ``(image, labels)``: ``image`` uint8 RGB [208, 144, 3], the crop exactly as the
reader builds it (perception.preprocess), ``labels`` a :class:`Labels` from
``engine.screen_facts`` (the bottle as shown, lagging the game; the falling pill's sprites as
drawn; the next pill; the screen kind), never from the game RAM.

Games (:class:`GameStream`): a random level 0..24, speed, 16-bit seed and ``frame_counter``;
even seeds for training, odd seeds for evaluation, so no held-out board is ever trained on.
The player (:class:`Player`) moves and turns each pill at random, or greedily (the most viruses
killed among a few tries), drops it, sometimes pauses, and some games start with all but 1-3
viruses removed so that stage clears happen. Some pills also move on their way down, and in
training some are tucked (:func:`tuck`) beside or under the bottle's cells. Frames are sampled
from the whole game (intro, throws, clears, cascades, late boards, the top-out or clear), more
often where the picture is hard: the falling pill's sprite over a drawn pill (the lock frame;
not so much more that the model expects a drawn pill under every sprite), clearing tiles,
frames where the falling pill moved.

Capture (:func:`training_profile`): ``calibration.Profile.random`` with, for a third of the
samples, heavier artifacts; only the window of the capture the crop needs is produced
(calibration.window). The reader's sampling is jittered by up to 0.3 capture pixels and its
colour undo is done with a slightly wrong colour section (a fitted profile is not exact), or
not at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

import engine
from calibration import Artifacts, Color, Profile, builtin_profiles
from calibration.forward import NoiseSource, forward
from calibration.profile import CHROMA
from calibration.window import aligned_window, forward_window
from engine.constants import TERMINAL_PHASES, Button, Phase
from engine.placement import ACTION_PILL_FALLING
from engine.render import render_indices
from perception.appearance import randomize
from perception.layout import (
    BOTTLE_X,
    BOTTLE_Y,
    CROP_H,
    CROP_W,
    CROP_X,
    CROP_Y,
    FIELD_COLS,
    FIELD_ROWS,
    SPRITE_ROWS,
    VERSUS_VIEW_X,
    VIEW_X,
    KindLabel,
    cell_classes,
)
from perception.observation import label_of_kind
from perception.preprocess import CropSampler, Placement

MAX_GAME_FRAMES = 8000
TERMINAL_COPIES = 6
THROW_RATE = 0.12  # share of the next pill's throw frames sampled (training)
MOVE_RATE = 0.2  # share of frames sampled where the falling pill moved or turned (training)
WINDOW_MARGIN = 20.0  # capture pixels around the crop: filter support and JPEG block rows


@dataclass
class Labels:
    """What one picture shows, as class indices (perception.layout).

    cells: int64 [16, 8] cell classes (bottle as shown). sprite: int64 [17, 8] falling-pill
    sprite classes (neck row, then the 16 field rows). next_colors: int64 [2] the next pill's
    colours in the game's order (1st half, 2nd half), -1 when none is drawn. kind: KindLabel.
    field_visible: False when the bottle is not drawn (pause, other screens): no cell loss.
    next_throw: the next pill's throw frame (``pillThrownFrame``; 0 at rest beside the doctor),
    for the evaluation's error breakdown. alike: uint32 [16, 8] bit masks of the cell classes
    the picture cannot tell from the label (:func:`alike_classes`; filled for evaluation).
    level: the game's level (``GameStream``; -1 for pictures of no level), for checking the
    panel reader (perception.panel).
    """

    cells: np.ndarray
    sprite: np.ndarray
    next_colors: np.ndarray
    kind: int
    field_visible: bool = True
    next_throw: int = 0
    alike: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros((FIELD_ROWS, FIELD_COLS), np.uint32)
    )
    level: int = -1


def falling_cells(pill: engine.FallingPill) -> list[tuple[int, int, int]]:
    """(sprite row, column, colour) of the two halves of a drawn falling pill.

    ``pill.y`` counts rows from the bottom (15 = top); the 1st half is left, bottom, right, top
    for rotation 0, 1, 2, 3 (fallingPill sprite data), the pill's (x, y) is its bottom-left
    half. Sprite row = field row + 1 (row 0 is the neck above the field)."""
    row = FIELD_ROWS - 1 - pill.y + 1
    c0, c1 = pill.colors
    if pill.rotation % 2 == 0:  # horizontal: (left, right)
        left, right = (c0, c1) if pill.rotation == 0 else (c1, c0)
        return [(row, pill.x, left), (row, pill.x + 1, right)]
    bottom, top = (c0, c1) if pill.rotation == 1 else (c1, c0)
    return [(row, pill.x, bottom), (row - 1, pill.x, top)]


def labels_from_facts(facts: engine.ScreenFacts, phase: int, pill_sent: bool = True) -> Labels:
    """Labels of ``render_frame(game)`` from ``engine.screen_facts(game)`` and ``game.phase``.

    ``pill_sent``: whether a falling pill has been drawn in the bottle since the level began.
    Until then the picture is LEVEL_INTRO, also in the 23-45 frames of play (phase PLAYING)
    while the first pill is thrown: those pictures show the intro's board with the next pill
    on its arc and no falling pill, which a single frame cannot tell from the intro's wait
    (docs/PERCEPTION.md, "Screen kinds")."""
    return player_labels(
        facts.kind, facts.bottle, facts.falling, facts.next, phase == Phase.INTRO or not pill_sent
    )


def player_labels(
    kind: engine.ScreenKind,
    bottle: np.ndarray,
    falling: engine.FallingPill | None,
    nxt: engine.NextPill | None,
    intro: bool,
) -> Labels:
    """Labels of one bottle's picture: the screen's ``kind``, the ``bottle`` tiles shown (uint8
    [16, 8]), its falling pill's sprites and its next pill as the facts give them (one player:
    engine.screen_facts; a player of two: engine.versus_screen_facts), ``intro``: the level's
    opening (no falling pill drawn yet)."""
    label = label_of_kind(kind, intro=intro)
    sprite = np.zeros((SPRITE_ROWS, FIELD_COLS), np.int64)
    if falling is not None:
        for r, c, color in falling_cells(falling):
            sprite[r, c] = 1 + color
    next_colors = np.full(2, -1, np.int64)
    throw = 0
    if nxt is not None:
        next_colors[:] = nxt.colors
        throw = int(nxt.throw_frame)
    visible = kind != engine.ScreenKind.PAUSED
    return Labels(cell_classes(bottle), sprite, next_colors, int(label), visible, throw)


# every code a field cell can show, in class order (clearing cells as the tile $Fx that
# render_fieldRow draws)
SHOWN_CODES = np.array(
    [0xFF] + [t | c for t in (0x40, 0x50, 0x60, 0x70, 0x80, 0xF0, 0xD0) for c in range(3)],
    np.uint8,
)


def alike_classes(game: engine.Game, tiles: engine.TileSet) -> np.ndarray:
    """uint32 [16, 8]: per field cell, a bit mask of the cell classes (perception.layout) the
    picture of ``game`` cannot tell from the class the cell shows; 0 where every class would
    be drawn differently.

    The picture of a cell is rendered (``engine.render.render_indices``) with each of the 22
    codes written to the cell (field and nametable, as the NMI may redraw the row from the
    field); a class is alike when its picture is the same as the shown one. Only cells mostly
    covered by sprite pixels are tried. This happens under the falling pill: its sprites are
    drawn one line below the grid (OAM Y + 1), so the lower half of a vertical pill covers its
    cell, the upper half that cell's top line; with the clean-room drawings a lower pill half
    drawn there looks like an empty cell. On the lock frame and while the rows are redrawn such
    a cell may already show the locked pill or not, and the picture is the same."""
    base = render_indices(game, tiles)
    shown = cell_classes(engine.screen_facts(game).bottle)  # after the NMI's row redraw
    out = np.zeros((FIELD_ROWS, FIELD_COLS), np.uint32)
    px = base[BOTTLE_Y : BOTTLE_Y + 8 * FIELD_ROWS, BOTTLE_X : BOTTLE_X + 8 * FIELD_COLS]
    covered = (px.reshape(FIELD_ROWS, 8, FIELD_COLS, 8) >= 17).sum(axis=(1, 3))
    for r, c in zip(*np.nonzero(covered >= 40), strict=True):
        y, x = BOTTLE_Y + 8 * int(r), BOTTLE_X + 8 * int(c)
        cell = base[y : y + 8, x : x + 8]
        trial = game.clone()
        mask = 0
        for k, code in enumerate(SHOWN_CODES):
            if k == shown[r, c]:
                continue
            # the field and the nametable: the NMI may redraw this row from the field
            clearing = code >> 4 == 0xF and code != 0xFF
            trial.field[8 * r + c] = 0xB0 | (code & 0x0F) if clearing else code
            trial.shown[8 * r + c] = code
            if np.array_equal(render_indices(trial, tiles)[y : y + 8, x : x + 8], cell):
                mask |= 1 << k
        out[r, c] = mask
    return out


def random_board(rng: np.random.Generator, top: int) -> np.ndarray:
    """A random field (uint8 [128] RAM codes) filled from row ``top`` down: viruses, whole
    pills (top/bottom or left/right pairs), singles and clearing cells ($Bx) of random colours.
    Random play rarely clears, so singles and clearing cells are rare in played games; boards
    like these put every cell code in front of the model often. The pill's way down from the
    spawn (columns 3-4 of rows 0-3) is left empty, so boards can reach the top rows without
    ending the game at once."""
    field = np.full((16, 8), 0xFF, np.uint8)
    free = np.zeros((16, 8), bool)
    free[:4, 3:5] = True
    fill = rng.uniform(0.25, 0.9)
    kinds = ("virus", "horizontal", "vertical", "single", "clearing")
    weights = np.array([0.25, 0.2, 0.2, 0.2, 0.15])
    for r in range(top, 16):
        for c in range(8):
            if field[r, c] != 0xFF or free[r, c] or rng.random() > fill:
                continue
            kind = kinds[int(rng.choice(len(kinds), p=weights))]
            a, b = (int(v) for v in rng.integers(0, 3, size=2))
            if kind == "horizontal" and c < 7 and field[r, c + 1] == 0xFF and not free[r, c + 1]:
                field[r, c], field[r, c + 1] = 0x60 | a, 0x70 | b
            elif kind == "vertical" and r == 0:
                # a bottom half alone in row 0: its top half was locked above the field and
                # dropped (confirmPlacement $8F62). Played games show it 11 times less often
                # than a single there, and the composite chain's blur leaves only the top
                # corners to tell the two apart (docs/PERCEPTION.md, "Row 0")
                field[r, c] = 0x50 | b
            elif kind == "vertical" and r < 15 and not free[r + 1, c]:
                field[r, c], field[r + 1, c] = 0x40 | a, 0x50 | b
            elif kind == "clearing":
                field[r, c] = 0xB0 | a
            elif kind == "virus":
                field[r, c] = 0xD0 | a
            else:
                field[r, c] = 0x80 | a
    return field.ravel()


def inject_board(game: engine.Game | engine.VersusPlayer, field: np.ndarray) -> None:
    """Write ``field`` into the game's (or a two-player round's player's) field and into the
    nametable it shows (clearing cells are drawn as $Fx, as render_fieldRow writes them)."""
    game.field[:] = field
    shown = np.where((field & 0xF0) == 0xB0, (field & 0x0F) | 0xF0, field)
    game.shown[:] = shown.astype(np.uint8)


LATE_RATE = 0.5  # share of pills that also move on the way down (Player)
TUCK_RATE = 0.15  # share of pills moved to a place beside or under the bottle's cells (tuck)


def tuck(target: engine.Game | engine.VersusPlayer, rng: np.random.Generator) -> bool:
    """Move the falling pill (as it is turned) to a random empty place in rows 4-15 with a
    filled cell above it (under an overhang) half of the time, beside it 30 %, anywhere
    else 20 %, by writing ``pill_x`` / ``pill_y``; the game then goes on from there (the pill
    falls and locks as the engine plays it). Returns whether it moved the pill.

    A person's tuck slides a pill under an overhang or into a gap beside a virus; a random
    player rarely gets a pill there (the real game's frames of ``perception.realcheck``'s
    random player had a pill under an overhang on 1.7 % of the falling frames, training's
    player, moving pills only at the top, on none), and the cells above and beside such a pill
    were the ROM models' last errors on the real game's two-player frames: a virus right above
    the falling pill read as empty, sure. The place may be one no inputs reach (a closed hole):
    the picture is still one the game draws, the pill over cells the nametable holds."""
    field = np.asarray(target.field).reshape(16, 8)
    filled = field != 0xFF
    vertical = int(target.pill_rotation) & 1
    groups: list[list[tuple[int, int]]] = [[], [], []]  # under, beside, else: (x, y)
    for row in range(4, 16):
        for x in range(8 - (0 if vertical else 1)):
            cells = [(row, x), (row - 1, x)] if vertical else [(row, x), (row, x + 1)]
            if any(filled[r, c] for r, c in cells):
                continue
            top = min(r for r, _ in cells)
            under = any(filled[:top, c].any() for _, c in cells)
            beside = any(
                0 <= c + d < 8 and (r, c + d) not in cells and filled[r, c + d]
                for r, c in cells
                for d in (-1, 1)
            )
            groups[0 if under else 1 if beside else 2].append((x, 15 - row))
    weights = np.array([0.5, 0.3, 0.2]) * [len(g) > 0 for g in groups]
    if weights.sum() == 0.0:
        return False
    group = groups[int(rng.choice(3, p=weights / weights.sum()))]
    x, y = group[int(rng.integers(len(group)))]
    target.pill_x[...] = x
    target.pill_y[...] = y
    return True


class Player:
    """Plays a game with scripted inputs: for each pill a random target (rotations, columns to
    move) played as button presses on alternate frames, then the pill is dropped (Down held, or
    left to fall some of the time). Greedy play tries several scripts on clones and keeps one
    that kills the most viruses. Now and then it pauses. Call :meth:`mask` once per frame
    before ``game.step``. (The exact planner, ``engine.plan``, costs 20-70 ms per pill: too slow
    for data generation, and any reachable placement does here.)

    A share ``late`` of the pills (default :data:`LATE_RATE`) also gets 1-6 taps (Left, Right,
    a fifth of them A) as it passes random rows below the top three (pill y 0-12): the pill
    slides and turns beside and under what lies in the bottle on its way down, as a person's
    tucks do. (A player that moved only at the top never moved a pill beside a cell below row
    4; most of the ROM models' last errors on the real game's frames were cells beside or
    under a falling pill: docs/PERCEPTION.md.) A share ``tuck_rate`` (default :data:`TUCK_RATE`;
    the streams give the held-out games none) is moved by :meth:`tuck`."""

    def __init__(
        self,
        rng: np.random.Generator,
        greedy: float,
        pause_rate: float,
        late: float = LATE_RATE,
        tuck_rate: float = TUCK_RATE,
    ) -> None:
        self.rng = rng
        self.greedy = greedy
        self.pause_rate = pause_rate
        self.late = late
        self.tuck_rate = tuck_rate
        self.queue: list[int] = []
        self.falling = False
        self.fresh = False
        self.drop = 1.0
        self.taps: dict[int, int] = {}  # late taps: the pill's y (game_logic: 15 top) -> buttons
        self.tuck_in = -1  # frames until this pill is tucked (:func:`tuck`); -1: never

    def _late_taps(self) -> dict[int, int]:
        rng = self.rng
        if rng.random() >= self.late:
            return {}
        taps = {}
        for y in rng.integers(0, 13, size=int(rng.integers(1, 7))):
            r = rng.random()
            taps[int(y)] = int(Button.A if r < 0.2 else Button.LEFT if r < 0.6 else Button.RIGHT)
        return taps

    def _script(self) -> list[int]:
        rng = self.rng
        turns = int(rng.integers(0, 4))
        move = int(rng.integers(-4, 5))
        side = Button.LEFT if move < 0 else Button.RIGHT
        out = [0] * int(rng.integers(0, 4))
        for k in range(max(turns, abs(move))):
            press = (Button.A if k < turns else 0) | (side if k < abs(move) else 0)
            out += [int(press), 0]
        return out

    def _pick(self, game: engine.Game) -> list[int]:
        if self.rng.random() >= self.greedy:
            return self._script()
        best: list[int] = []
        best_kills = -1
        tail = np.concatenate([np.full(40, Button.DOWN, np.uint8), np.zeros(60, np.uint8)])
        for _ in range(12):
            script = self._script()
            trial = game.clone()
            trial.run(np.concatenate([np.array(script, np.uint8), tail]))
            kills = int(game.virus_left) - int(trial.virus_left)
            if kills > best_kills:
                best, best_kills = script, kills
        return best

    def tuck(self, target: engine.Game | engine.VersusPlayer, game: engine.Game) -> bool:
        """Call once per frame after :meth:`mask` (``game``: the state ``mask`` saw;
        ``target``: what to write to, the game or a two-player round's player): a share
        ``tuck_rate`` of the pills is moved by :func:`tuck` 2-11 frames after its spawn,
        once. Returns whether it moved the pill this frame (its picture shows the pill jump,
        and through combing in two places: do not sample this frame or the next)."""
        if self.tuck_in < 0 or not self.falling:
            return False
        self.tuck_in -= 1
        if self.tuck_in > 0 or int(game.next_action) != ACTION_PILL_FALLING:
            return False
        self.tuck_in = -1
        return tuck(target, self.rng)

    def mask(self, game: engine.Game) -> int:
        playing = int(game.phase) == Phase.PLAYING
        falling = playing and int(game.next_action) == ACTION_PILL_FALLING
        self.fresh = falling and not self.falling
        if self.fresh:  # a new pill is in play
            self.queue = self._pick(game)
            self.drop = float(self.rng.choice([1.0, 0.7, 0.3]))
            self.taps = self._late_taps()
            tucked = self.rng.random() < self.tuck_rate
            self.tuck_in = int(self.rng.integers(2, 12)) if tucked else -1
        self.falling = falling
        if self.queue:
            return self.queue.pop(0)
        if falling and int(game.pill_y) in self.taps:
            # a tap on the way down, released the next frame (Down held resumes after it)
            self.queue = [0]
            return self.taps.pop(int(game.pill_y))
        if playing and self.rng.random() < self.pause_rate:
            self.queue = [0] * int(self.rng.integers(2, 40)) + [Button.START, 0]
            return int(Button.START)
        if falling and self.rng.random() < self.drop:
            return int(Button.DOWN)
        return 0


@dataclass
class Shown:
    """One sampled console picture: the NES frame, the frame before it (for combing), the
    labels of the crop at ``view_x`` (one player's bottle of a two-player picture)."""

    picture: np.ndarray
    previous: np.ndarray
    labels: Labels
    view_x: int = VIEW_X  # the crop's left edge, NES pixels (perception.layout)


class GameStream:
    """One game at a time, endlessly: yields sampled pictures (:class:`Shown`).

    ``split``: "train" (even 16-bit seeds) or "eval" (odd). ``tiles``: the tile set; with
    ``randomize_tiles`` each game gets a randomised copy (perception.appearance).
    ``emit``: probability that a frame is sampled. ``hard``: sample hard frames more (lock
    frames, clearing tiles, pauses) and yield a stage clear / top-out picture several times
    (training); without, frames are sampled uniformly (evaluation: the natural mix).
    ``board_rate``: share of games whose pills now and then (35 % of the new pills) get a
    random board (:func:`random_board`) below them (training: every cell code, often).
    ``mark_alike``: fill ``Labels.alike`` (:func:`alike_classes`; evaluation).
    ``shapes``: randomising varies the drawings too (False: only the RGB palette; one ROM).
    """

    def __init__(
        self,
        rng: np.random.Generator,
        split: str,
        tiles: engine.TileSet,
        randomize_tiles: bool,
        emit: float = 0.08,
        hard: bool = True,
        board_rate: float = 0.0,
        mark_alike: bool = False,
        shapes: bool = True,
    ) -> None:
        if split not in ("train", "eval"):
            raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
        self.rng = rng
        self.split = split
        self.base_tiles = tiles
        self.randomize_tiles = randomize_tiles
        self.emit = emit
        self.hard = hard
        self.board_rate = board_rate
        self.mark_alike = mark_alike
        self.shapes = shapes
        self._games: Iterator[Shown] | None = None

    def _new_game(self) -> Iterator[Shown]:
        rng = self.rng
        level = int(rng.integers(0, 25))
        speed = int(rng.integers(0, 3))
        seed = 0
        while seed < 2:  # RNG state 0 places at most 8 viruses (engine.Game refuses more)
            seed = int(rng.integers(0, 1 << 15)) * 2 + (0 if self.split == "train" else 1)
        game = engine.Game(level, speed, seed, int(rng.integers(0, 256)))
        endgame = rng.random() < 0.15
        if endgame:  # leave 1-3 viruses so the game can reach a stage clear
            keep_few_viruses(game, rng)
        # a third of the games keep the tile set as it is (the shipped look), the rest vary it
        vary = self.randomize_tiles and rng.random() < 0.65
        tiles = randomize(self.base_tiles, rng, self.shapes) if vary else self.base_tiles
        greedy = 0.9 if endgame else float(rng.choice([0.0, 0.3, 0.8]))
        # tucks are training's alone: the held-out games are play as inputs make it
        tucks = TUCK_RATE if self.split == "train" else 0.0
        player = Player(rng, greedy=greedy, pause_rate=1 / 1500, tuck_rate=tucks)
        boards = not endgame and rng.random() < self.board_rate
        prev = game.clone()
        sent = False  # a falling pill has been drawn (the level's intro is over)
        facts: engine.ScreenFacts | None = None
        quiet = 0  # frames not to sample (a tucked pill's jump)
        for _ in range(MAX_GAME_FRAMES):
            mask = player.mask(game)
            if boards and player.fresh and rng.random() < 0.35:
                # a new pill is in play (top rows free): give it a random board below, from
                # row 0 down at most (boards from row 1 left row 0 to play, where most of a
                # ROM model's remaining board errors were: docs/PERCEPTION.md, run 8)
                top = 0 if rng.random() < 0.2 else int(rng.integers(1, 14))
                inject_board(game, random_board(rng, top))
            if player.tuck(game, game):
                quiet = 2  # the pill jumped: the next picture and its combing show it twice
            before = prev
            prev = game.clone()
            game.step(mask)
            quiet -= 1
            was = facts.falling if facts is not None else None
            facts = engine.screen_facts(game)
            sent_before, sent = sent, sent or facts.falling is not None
            ended = Phase(int(game.phase)) in TERMINAL_PHASES
            if ended and facts.kind == engine.ScreenKind.OTHER:
                return  # demo end / soft reset: not a picture we can label
            p = self.emit
            lock = False
            if not self.hard:
                pass
            elif facts.kind == engine.ScreenKind.LEVEL and int(game.phase) == Phase.INTRO:
                p = self.emit  # as often as in play: the intro looks like play
            elif facts.kind == engine.ScreenKind.LEVEL and not sent:
                p = 0.3  # the first pill's throw: the intro's end, where the kinds meet
            elif facts.kind == engine.ScreenKind.PAUSED:
                p = 0.2
            elif facts.falling is not None and _sprite_over_pill(facts):
                p, lock = 0.3, True
            elif facts.next is not None and facts.next.throw_frame:
                p = max(p, THROW_RATE)
            elif _moved(was, facts.falling):
                p = max(p, MOVE_RATE)
            elif ((facts.bottle >= 0xF0) & (facts.bottle < 0xFF)).any():
                p = max(p, 0.3)
            if quiet > 0 and not ended:
                p = 0.0
            if (ended and self.hard) or rng.random() < p:
                labels = labels_from_facts(facts, int(game.phase), sent)
                labels.level = level
                if self.mark_alike and facts.falling is not None:
                    labels.alike = alike_classes(game, tiles)
                shown = Shown(
                    engine.render_frame(game, tiles), engine.render_frame(prev, tiles), labels
                )
                # the one picture of a stage clear / top-out: seen through several chains
                for _ in range(TERMINAL_COPIES if ended and self.hard else 1):
                    yield shown
                before_facts = engine.screen_facts(prev)
                if lock and before_facts.falling is not None:
                    # and the frame before the lock: the same sprite over the cells not yet
                    # drawn; only the nametable line above the sprite tells the two apart.
                    # (When the lock frame shows only the lower half of a vertical pill, the
                    # pictures are the same: no pair; see alike_classes.)
                    picture = engine.render_frame(prev, tiles)
                    if (picture != shown.picture).any():
                        yield Shown(
                            picture,
                            engine.render_frame(before, tiles),
                            labels_from_facts(before_facts, int(prev.phase), sent_before),
                        )
            if ended:
                return

    def __iter__(self) -> Iterator[Shown]:
        while True:
            yield from self._new_game()


def keep_few_viruses(game: engine.Game | engine.VersusPlayer, rng: np.random.Generator) -> None:
    """Removes all but 1-3 of the viruses from the field, the nametable and the counter, so
    that the game (or a two-player round's player) can reach a stage clear."""
    viruses = np.flatnonzero((game.field & 0xF0) == 0xD0)
    keep = rng.choice(viruses, size=min(len(viruses), int(rng.integers(1, 4))), replace=False)
    for i in viruses:
        if i not in keep:
            game.field[i] = game.shown[i] = 0xFF
    game.virus_left_bcd[...] = len(keep)


def _moved(was: engine.FallingPill | None, now: engine.FallingPill | None) -> bool:
    """The falling pill moved sideways or turned since the frame before, below the bottle's
    top three rows (pill y <= 12, where the field has cells beside it): the frame's sprites
    beside and over cells they were not over a frame ago (through interlace combing, the
    capture's odd lines still show the old place)."""
    return (
        was is not None
        and now is not None
        and now.y <= 12
        and (was.x, was.rotation) != (now.x, now.rotation)
    )


def _sprite_over_pill(facts: engine.ScreenFacts | engine.PlayerFacts) -> bool:
    assert facts.falling is not None
    for r, c, _ in falling_cells(facts.falling):
        if 1 <= r <= FIELD_ROWS and facts.bottle[r - 1, c] != 0xFF:
            return True
    return False


def other_picture(rng: np.random.Generator, tiles: engine.TileSet) -> np.ndarray:
    """A picture that is no level: one colour, or a mosaic of random tiles and colours."""
    rgb = tiles.rgb
    if rng.random() < 0.3:
        return np.broadcast_to(rgb[int(rng.integers(0, 64))], (240, 256, 3)).copy()
    idx = rng.integers(0, 256, size=(30, 32))
    bank = tiles.patterns[int(rng.integers(0, 3))]
    pix = bank[idx].transpose(0, 2, 1, 3).reshape(240, 256)
    colors = rgb[rng.integers(0, 64, size=4)]
    return colors[pix]


def other_labels() -> Labels:
    return Labels(
        cells=np.zeros((FIELD_ROWS, FIELD_COLS), np.int64),
        sprite=np.zeros((SPRITE_ROWS, FIELD_COLS), np.int64),
        next_colors=np.full(2, -1, np.int64),
        kind=int(KindLabel.OTHER),
        field_visible=False,
    )


def training_profile(rng: np.random.Generator) -> Profile:
    """``Profile.random`` (docs/CAPTURE.md), a third of the time with heavier artifacts."""
    p = Profile.random(rng)
    if rng.random() < 1.0 / 3.0:

        def maybe(prob: float, lo: float, hi: float) -> float:
            return round(float(rng.uniform(lo, hi)), 3) if rng.random() < prob else 0.0

        a = Artifacts(
            hsmooth=maybe(0.8, 0.5, 1.6),
            blur=maybe(0.4, 0.3, 1.0),
            sharpen=maybe(0.4, 0.2, 1.0),
            noise=maybe(0.8, 1.0, 7.0),
            chroma=CHROMA[int(rng.integers(len(CHROMA)))],
            jpeg_quality=int(rng.integers(35, 91)) if rng.random() < 0.6 else None,
            combing=bool(rng.random() < 0.4),
        )
        p = p.replace(artifacts=a)
    return p


def fitted_color(c: Color, rng: np.random.Generator) -> Color | None:
    """The colour section a fit might report for true section ``c`` (or None: not undone)."""
    if rng.random() < 0.15:
        return None

    def near(v: float, sigma: float, lo: float, hi: float) -> float:
        return float(np.clip(v + rng.normal(0.0, sigma), lo, hi))

    return Color(
        range=c.range,
        gamma=near(c.gamma, 0.03, 0.5, 2.5),
        saturation=near(c.saturation, 0.03, 0.25, 2.0),
        gain=tuple(near(g, 0.015, 0.5, 1.5) for g in c.gain),  # type: ignore[arg-type]
        offset=tuple(near(o, 1.5, -32.0, 32.0) for o in c.offset),  # type: ignore[arg-type]
    )


def jittered(
    place: Placement, rng: np.random.Generator, pixels: float = 0.3, view_x: int = VIEW_X
) -> Placement:
    """``place`` with its offset moved up to ``pixels`` capture pixels and its scale by up to
    ``pixels`` over the crop's width (what a 0.25-pixel calibration fit may be off by);
    ``view_x``: the crop's left edge (NES pixels), whose centre the scale is about."""
    sx = 1.0 + rng.uniform(-1, 1) * pixels / (CROP_W * place.scale_x)
    sy = 1.0 + rng.uniform(-1, 1) * pixels / (CROP_H * place.scale_y)
    # scale about the crop's centre, then shift
    cx = float(place.capture_x(np.array([view_x + CROP_W / 2]))[0])
    cy = float(place.capture_y(np.array([CROP_Y + CROP_H / 2]))[0])
    return dataclasses.replace(
        place,
        scale_x=place.scale_x * sx,
        scale_y=place.scale_y * sy,
        offset_x=cx + (place.offset_x - cx) * sx + rng.uniform(-pixels, pixels),
        offset_y=cy + (place.offset_y - cy) * sy + rng.uniform(-pixels, pixels),
    )


def capture_crop(
    profile: Profile,
    shown: Shown,
    noise: NoiseSource,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """The model's crop (uint8 RGB [208, 144, 3]) of ``shown`` (at its ``view_x``) captured
    through ``profile``.

    With ``rng`` (training) the sampling is jittered and the colour undo perturbed
    (:func:`jittered`, :func:`fitted_color`); without, it is what the reader does.
    """
    place = Placement.of(profile.geometry)
    window = aligned_window(profile, *place.crop_bounds(WINDOW_MARGIN, shown.view_x))
    captured = forward_window(profile, shown.picture, window, shown.previous, noise)
    color: Color | None | str = "profile"
    if rng is not None:
        place = jittered(place, rng, view_x=shown.view_x)
        color = fitted_color(profile.color, rng)
    sampler = CropSampler(profile, place=place, color=color, origin=window[:2], view_x=shown.view_x)
    return sampler(captured)


def capture_full(profile: Profile, shown: Shown, noise: NoiseSource) -> np.ndarray:
    """The whole captured frame (BGR uint8 [height, width, 3]), as a capture card delivers."""
    return forward(profile, shown.picture, shown.previous, noise)


class TrainingSamples:
    """Endless training samples ``(image uint8 [208, 144, 3], Labels)`` for one seed.

    Interleaves ``streams`` games (so consecutive samples come from different games, tile sets
    and levels), draws a capture profile per sample, and mixes in ``other_rate`` pictures that
    are no level at all. ``tiles``: clean-room (default) or a ROM's TileSet. ``shapes``:
    randomised appearance changes the drawings too (False: only the palette; one ROM's model).
    ``targets``: capture chains a model is being fitted for (the shipped profiles, a rig's
    own); a share ``target_rate`` of the samples goes through one of them (still with the
    jitter and colour error of a calibration), the rest through random chains.
    ``versus_rate``: the share of samples that are one player's crop of a two-player picture
    (:class:`VersusStream`; 0: none, and no draw for it).
    """

    def __init__(
        self,
        seed: int | list[int],
        tiles: engine.TileSet | None = None,
        randomize_tiles: bool = True,
        streams: int = 6,
        other_rate: float = 0.03,
        shapes: bool = True,
        targets: Sequence[Profile] = (),
        target_rate: float = 0.0,
        versus_rate: float = 0.0,
    ) -> None:
        if targets and not 0.0 <= target_rate <= 1.0:
            raise ValueError(f"target_rate must be within 0..1, got {target_rate}")
        if not 0.0 <= versus_rate <= 1.0:
            raise ValueError(f"versus_rate must be within 0..1, got {versus_rate}")
        self.targets = list(targets)
        self.target_rate = target_rate if targets else 0.0
        self.rng = np.random.default_rng(seed)
        self.tiles = tiles or engine.TileSet.clean_room()
        self.noise = NoiseSource(int(self.rng.integers(1 << 31)))
        self.noise.sample((3 << 20,))  # the bank, sized once for any window (1080p crops)
        self.other_rate = other_rate
        self.streams = [
            iter(
                GameStream(
                    self.rng, "train", self.tiles, randomize_tiles, board_rate=0.5, shapes=shapes
                )
            )
            for _ in range(streams)
        ]
        self.versus_rate = versus_rate
        self.versus: list[Iterator[Shown]] = []
        if versus_rate > 0.0:
            self.versus = [
                iter(
                    VersusStream(
                        self.rng,
                        "train",
                        self.tiles,
                        randomize_tiles,
                        board_rate=0.5,
                        shapes=shapes,
                    )
                )
                for _ in range(max(1, streams // 2))
            ]

    def __iter__(self) -> Iterator[tuple[np.ndarray, Labels]]:
        return self

    def __next__(self) -> tuple[np.ndarray, Labels]:
        rng = self.rng
        # (no draw without targets: the shipped model's samples stay what they were)
        if self.target_rate > 0.0 and rng.random() < self.target_rate:
            profile = self.targets[int(rng.integers(len(self.targets)))]
        else:
            profile = training_profile(rng)
        if rng.random() < self.other_rate:
            pic = other_picture(rng, randomize(self.tiles, rng))
            shown = Shown(pic, pic, other_labels())
        elif self.versus and rng.random() < self.versus_rate:
            shown = next(self.versus[int(rng.integers(len(self.versus)))])
        else:
            shown = next(self.streams[int(rng.integers(len(self.streams)))])
        return capture_crop(profile, shown, self.noise, rng), shown.labels


def crop_of(picture: np.ndarray) -> np.ndarray:
    """The model's crop of an NES picture (uint8 [240, 256, 3] -> [208, 144, 3])."""
    return picture[CROP_Y : CROP_Y + CROP_H, CROP_X : CROP_X + CROP_W]


EVAL_SEED = 20_000_000  # seeds of the held-out games and random profiles (training: 0..)


def held_out_profiles(random_profiles: int) -> list[Profile]:
    """The shipped profiles and ``random_profiles`` random ones from the held-out seed."""
    out = [Profile.load(name) for name in builtin_profiles()]
    for k in range(random_profiles):
        p = Profile.random(np.random.default_rng([EVAL_SEED, k]))
        out.append(p.replace(name=f"random_{k}"))
    return out


# ---- the two-player screen ---------------------------------------------------------------------

ROUND_ENDS = (Phase.ROUND_OVER, Phase.MATCH_OVER)


def shown_versus_kind(v: engine.Versus, facts: engine.VersusFacts) -> engine.ScreenKind:
    """The screen kind a two-player picture shows, for its label: ``facts.kind``, except in the
    frame a fail flag was seen (``Phase.ROUND_LOST``, mode_anyPlayerLoses), whose facts say
    TOP_OUT while its picture is one of play: the loser's sign and the hidden next pills come
    with anyPlayerLoses [$9542] and updateSprites_2p_endGame [$887C] the frame after. Real
    game (original release in cynes, level 20 HI, player 2 topped out): the picture cynes
    gives in the step that sets the fail flag is the one before it pixel for pixel; the next
    one (what the renderer draws for ROUND_LOST: docs/RENDER.md, "Checked against the real
    game") differs from it only at player 2's next pill and neck (x 184-198, y 52-86), as at
    any new pill; the sign appears in the one after. A one-player top-out shows in its first
    picture (the doctor's fail pose); two players have no doctor."""
    if int(v.phase) == Phase.ROUND_LOST:
        return engine.ScreenKind.LEVEL
    return facts.kind


class VersusStream(GameStream):
    """Two-player rounds, endlessly: yields sampled pictures (:class:`Shown` with the player's
    ``view_x``). Arguments as :class:`GameStream`'s (``mark_alike`` unused).

    The samples: engine.Versus rounds rendered (engine.render_versus) and labelled from
    engine.versus_screen_facts, one player's crop at a time (perception.layout.VERSUS_VIEW_X:
    each bottle where the one-player crop has its bottle).

    A round: random levels 0..20 and speeds for both players (equal levels, the same board, in
    30 %), a 16-bit seed (even for training, odd for evaluation, as GameStream) and
    ``frame_counter``; both pads played by :class:`Player` (random or greedy scripts; pad 1
    pauses now and then: only pad 1's Start pauses, checkPauseReset [$979E]). Some rounds keep
    only 1-3 viruses of each bottle so that rounds end by a clear; a decided round goes on to
    the match's next round half of the time, so the crowns of 0-2 victories are drawn. Frames
    are sampled as in GameStream (the lock frame, clearing tiles and pauses more often when
    ``hard``), and each sampled picture is labelled for one player drawn at random: that
    player's bottle as shown, its falling pill's sprites, its next pill at rest, and the
    screen's kind (LEVEL_INTRO until that player's first falling pill is drawn).
    """

    def _new_match(self) -> engine.Versus:
        rng = self.rng
        seed = 0
        while seed < 2:
            seed = int(rng.integers(0, 1 << 15)) * 2 + (0 if self.split == "train" else 1)
        levels = rng.integers(0, 21, size=2)
        if rng.random() < 0.3:  # equal levels: the same board in both bottles
            levels[1] = levels[0]
        speeds = rng.integers(0, 3, size=2)
        return engine.Versus(
            int(levels[0]),
            int(speeds[0]),
            int(levels[1]),
            int(speeds[1]),
            seed,
            int(rng.integers(0, 256)),
        )

    def _round(self, v: engine.Versus, tiles: engine.TileSet) -> Iterator[Shown]:
        rng = self.rng
        if rng.random() < 0.15:  # leave 1-3 viruses so that the round can end by a clear
            keep_few_viruses(v.p1, rng)
            keep_few_viruses(v.p2, rng)
        greedy = float(rng.choice([0.0, 0.3, 0.8]))
        tucks = TUCK_RATE if self.split == "train" else 0.0  # as GameStream
        players = [
            Player(rng, greedy=greedy, pause_rate=1 / 1500, tuck_rate=tucks),
            Player(rng, greedy=float(rng.choice([0.0, 0.3, 0.8])), pause_rate=0.0, tuck_rate=tucks),
        ]
        boards = rng.random() < self.board_rate
        prev = v.clone()
        sent = [False, False]
        facts: engine.VersusFacts | None = None
        quiet = [0, 0]
        for _ in range(MAX_GAME_FRAMES):
            masks = []
            for i, player in enumerate(players):
                p = v.player(i)
                g = p.game()
                masks.append(player.mask(g))
                if boards and player.fresh and rng.random() < 0.35:
                    top = 0 if rng.random() < 0.2 else int(rng.integers(1, 14))
                    inject_board(p, random_board(rng, top))
                if player.tuck(p, g):
                    quiet[i] = 2  # as GameStream: the jump's picture is not sampled
            before = prev
            prev = v.clone()
            v.step(masks[0], masks[1])
            quiet = [q - 1 for q in quiet]
            was = facts.players if facts is not None else None
            facts = engine.versus_screen_facts(v)
            for i in range(2):
                sent[i] = sent[i] or facts.players[i].falling is not None
            ended = Phase(int(v.phase)) in ROUND_ENDS
            if ended and facts.kind == engine.ScreenKind.OTHER:
                return
            who = int(rng.integers(0, 2))
            mine = facts.players[who]
            p_emit = self.emit
            lock = False
            if not self.hard:
                pass
            elif facts.kind == engine.ScreenKind.PAUSED:
                p_emit = 0.2
            elif mine.falling is not None and _sprite_over_pill(mine):
                p_emit, lock = 0.3, True
            elif ((mine.bottle >= 0xF0) & (mine.bottle < 0xFF)).any():
                p_emit = 0.3
            elif was is not None and _moved(was[who].falling, mine.falling):
                p_emit = MOVE_RATE
            if quiet[who] > 0 and not ended:
                p_emit = 0.0
            if (ended and self.hard) or rng.random() < p_emit:
                intro = int(v.phase) == Phase.INTRO or not sent[who]
                kind = shown_versus_kind(v, facts)
                labels = player_labels(kind, mine.bottle, mine.falling, mine.next, intro)
                labels.level = int(v.player(who).level)
                picture = engine.render_versus(v, tiles)
                shown = Shown(
                    picture, engine.render_versus(prev, tiles), labels, VERSUS_VIEW_X[who]
                )
                for _ in range(TERMINAL_COPIES if ended and self.hard else 1):
                    yield shown
                if lock:
                    # the frame before the lock: the same sprite over cells not drawn yet
                    old = engine.versus_screen_facts(prev).players[who]
                    earlier = engine.render_versus(prev, tiles)
                    if old.falling is not None and (earlier != picture).any():
                        intro_old = int(prev.phase) == Phase.INTRO
                        yield Shown(
                            earlier,
                            engine.render_versus(before, tiles),
                            player_labels(
                                shown_versus_kind(prev, engine.versus_screen_facts(prev)),
                                old.bottle,
                                old.falling,
                                old.next,
                                intro_old,
                            ),
                            VERSUS_VIEW_X[who],
                        )
            if ended:
                return

    def __iter__(self) -> Iterator[Shown]:
        rng = self.rng
        while True:
            v = self._new_match()
            vary = self.randomize_tiles and rng.random() < 0.65
            tiles = randomize(self.base_tiles, rng, self.shapes) if vary else self.base_tiles
            while True:
                yield from self._round(v, tiles)
                if Phase(int(v.phase)) != Phase.ROUND_OVER or rng.random() < 0.5:
                    break
                v.next_round(int(v.frame_counter))
