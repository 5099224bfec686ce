"""The screens before play, read from the picture: which screen, and on the options screen the
selected level and speed (issue 17: "the reader also knows the screens before play").

A prototype reader, no training: a ``ScreenReader`` holds pictures of each screen with their
truth (``ScreenPrototypes``) and reads a picture by nearest neighbour on a few features:

- the screen ``kind`` (``KINDS``: TITLE, OPTIONS, DEMO, LEVEL, STAGE_CLEAR, GAME_OVER, BLANK):
  a nearly uniform picture is BLANK (rendering off while a screen loads); otherwise the nearest
  prototype by the 16x16-block means of the whole picture (15 x 16 x 3) gives the family (title,
  options, level screen); a level screen is DEMO when its bottle's cells (x 96-159,
  y 80-207) are within ``demo_radius`` of a frame of the attract demo (its board and pills are
  fixed data, demo_field_pills; a game of the player's own never comes that close),
  STAGE_CLEAR or GAME_OVER when the bottle's rows 2-11 (y 96-175, where displayStageClear
  [$B351] and the game over write their text boxes from $0400 / $0410) are within
  ``box_radius`` of such a box (the nearest one names it), else LEVEL;
- on OPTIONS, the ``level`` from the level number (two digits at VRAM $2157, lvlNbP1_VRAMaddr:
  x 184-199, y 80-87) and the ``speed`` from the speed cursor's row (speedCursor_XPos $58, $80,
  $A4 at y $87: x 80-207, y 128-159), each the label of the nearest prototype crop;
- on TITLE, ``players`` (1 or 2) from the heart cursor (x $45, y $A7 / $B7);
- on OPTIONS, where the prototypes have them (files from before them read as before):
  ``players`` from player 2's level number (VRAM $21B7, lvlNbP2_VRAMaddr: x 184-199, y
  104-111; no number on the one-player screen), on the two-player screen ``level2`` from it
  and both speeds from the speed row with both cursors (speedCursor_YPos $87 and $96: y
  128-167, nine pairs), and the highlighted ``section`` (0 level, 1 speed, 2 music) from the
  rows' labels in colour (render_optionsOverlays [$8518] swaps their attributes).

LEVEL covers the level screen from its load to the end of play (the intro's viruses, the wait,
play); the UNet (perception.reader) reads the level screen's contents. A picture is read in NES
pixels: ``read_nes(rgb)`` for uint8 [240, 256, 3], ``read(captured, profile)`` maps a capture
through the profile's geometry and colour first (calibration.to_nes).

Prototypes come from the same graphics as the pictures read:

- ``clean_room_prototypes()``: the project's clean-room pictures (engine.menu_render, the
  engine's level screens): the simulated console and CI;
- ``perception.screens_rom.rom_prototypes(rom)``: the user's own ROM run in cynes at prepare
  time (``hil prepare``),
  its truth from the game's RAM; stored in the user's data directory beside the board model
  (``screens.npz``, keyed by the ROM's CRC; never in the repository).
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]

KINDS = ("TITLE", "OPTIONS", "DEMO", "LEVEL", "STAGE_CLEAR", "GAME_OVER", "BLANK")
TITLE, OPTIONS, DEMO, LEVEL, STAGE_CLEAR, GAME_OVER, BLANK = range(7)
LEVEL_SCREENS = (DEMO, LEVEL, STAGE_CLEAR, GAME_OVER)
SCREENS_FILE = "screens.npz"

# Crops in NES pixels (x0, y0, x1, y1), from the disassembly's positions (docs/MENUS.md).
BOTTLE = (96, 80, 160, 208)  # fieldRow_PPUADDR_1P: tile columns 12-19, rows 10-25
BOX_ROWS = (96, 96, 160, 176)  # the bottle's rows 2-11: the STAGE CLEAR / GAME OVER boxes
LEVEL_DIGITS = (182, 78, 202, 90)  # lvlNbP1_VRAMaddr $2157 (column 23, row 10), 2 digits
SPEED_ROW = (80, 128, 208, 160)  # speedCursor_XPos $58/$80/$A4 + 8, speedCursor_YPos $87
LEVEL_DIGITS2 = (182, 102, 202, 114)  # lvlNbP2_VRAMaddr $21B7 (column 23, row 13), 2 digits
SPEED_ROWS2 = (80, 128, 208, 168)  # both speed cursors: speedCursor_YPos $87 (p1), $96 (p2)
SECTION_LABELS = (24, 56, 152, 184)  # the three rows' labels (x 4-cell blocks, in colour)
NO_LEVEL2 = 21  # digit_level2 of a one-player options screen (no player-2 number)
TITLE_HEART = (64, 160, 80, 200)  # spr_cursor_heart_x $45, titleCursorYPos $A7 / $B7
BOX_CLEAR = 0.02  # a box prototype differs from every level picture by more than this
WHOLE_CELL = 16  # block size of the whole-picture feature (15 x 16 x 3 = 720 values)
BLANK_STD = 6.0  # a picture whose pixels vary less than this (0-255) is rendering off


def _blocks(
    pic: U8, box: tuple[int, int, int, int] | None = None, cell: int = 8, grey: bool = False
) -> F32:
    """Means of cell x cell blocks of the picture (or of a crop), scaled to 0..1 (``grey``: the
    mean of R, G, B too): float32 [d]."""
    if box is not None:
        x0, y0, x1, y1 = box
        pic = pic[y0:y1, x0:x1]
    h, w = pic.shape[0] // cell, pic.shape[1] // cell
    a = pic[: h * cell, : w * cell].astype(np.float32).reshape(h, cell, w, cell, 3)
    m = a.mean(axis=(1, 3, 4) if grey else (1, 3))
    return (m / 255.0).ravel()


def _crop(pic: U8, box: tuple[int, int, int, int]) -> F32:
    """A crop at full resolution, grey (the mean of R, G, B), scaled to 0..1: float32 [d]."""
    x0, y0, x1, y1 = box
    return (pic[y0:y1, x0:x1].astype(np.float32).mean(axis=2) / 255.0).ravel()


def _nearest(feats: F32, x: F32) -> tuple[int, float]:
    """Index of the nearest row of feats [n, d] to x [d] and its RMS distance."""
    d = ((feats - x[None, :]) ** 2).mean(axis=1)
    i = int(np.argmin(d))
    return i, float(np.sqrt(d[i]))


@dataclasses.dataclass(frozen=True)
class ScreenReading:
    """What a picture shows. ``kind``: one of KINDS. ``level`` (0..20) and ``speed`` (0 LOW,
    1 MED, 2 HI): on OPTIONS (player 1's), else None. ``players`` (1, 2): on TITLE the heart's
    row, on OPTIONS the screen's (None where the prototypes cannot tell). ``level2``,
    ``speed2``: player 2's on the two-player OPTIONS screen, else None. ``section``: the
    highlighted row on OPTIONS (0 level, 1 speed, 2 music; None where unknown). ``distance``:
    RMS distance (0..1) of the picture to the nearest prototype of its family (how sure)."""

    kind: str
    level: int | None = None
    speed: int | None = None
    players: int | None = None
    distance: float = 0.0
    level2: int | None = None
    speed2: int | None = None
    section: int | None = None


@dataclasses.dataclass
class ScreenPrototypes:
    """Labelled features of pictures (see the module docstring). Arrays:

    whole: float32 [n, 720] 16x16-block means of each picture; kind: int8 [n] (index in KINDS);
    demo_bottle: float32 [k, 384] the bottle's 8x8 cells of the demo's pictures;
    box: float32 [b, 1280] the bottle's rows 2-11 (grey, 2x2 means) of STAGE_CLEAR and
    GAME_OVER pictures, box_kind: int8 [b]; digits: float32 [m, 240], digit_level: int8 [m];
    speed_row: float32 [m, 4096], row_speed: int8 [m] (one-player options pictures); heart:
    float32 [t, 640], heart_players: int8 [t]; digits2: float32 [q, 240], digit_level2: int8
    [q] (player 2's level, NO_LEVEL2 on a one-player screen); speed_rows: float32 [u, 5120],
    speed_pair: int8 [u] (3 * player 1's speed + player 2's, two-player pictures); section:
    float32 [o, 3072], section_row: int8 [o] (options pictures). The last three pairs may be
    empty (files written before them);
    demo_radius, box_radius: the distances under which a level screen is the demo, a box
    (0.75 and 0.5 times the 2nd percentile of the other level screens' distances to them).
    """

    whole: F32
    kind: npt.NDArray[np.int8]
    demo_bottle: F32
    box: F32
    box_kind: npt.NDArray[np.int8]
    digits: F32
    digit_level: npt.NDArray[np.int8]
    speed_row: F32
    row_speed: npt.NDArray[np.int8]
    heart: F32
    heart_players: npt.NDArray[np.int8]
    demo_radius: float
    box_radius: float
    source: str = ""
    digits2: F32 = dataclasses.field(default_factory=lambda: _empty(240))
    digit_level2: npt.NDArray[np.int8] = dataclasses.field(default_factory=lambda: _labels())
    speed_rows: F32 = dataclasses.field(default_factory=lambda: _empty(5120))
    speed_pair: npt.NDArray[np.int8] = dataclasses.field(default_factory=lambda: _labels())
    section: F32 = dataclasses.field(default_factory=lambda: _empty(3072))
    section_row: npt.NDArray[np.int8] = dataclasses.field(default_factory=lambda: _labels())

    def save(self, path: str | Path) -> None:
        """Write an .npz file (the user's data directory for a ROM's prototypes)."""
        arrays = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        arrays["demo_radius"] = np.float32(self.demo_radius)
        arrays["box_radius"] = np.float32(self.box_radius)
        arrays["source"] = np.array(self.source)
        arrays["version"] = np.int32(SCREENS_VERSION)
        np.savez_compressed(path, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> ScreenPrototypes:
        """Read a file written by ``save``, checked against :data:`PROTOTYPE_SCHEMA` (its
        ``version`` :data:`SCREENS_VERSION`, absent in older files; each
        feature array float32 2-D of its width with finite values, each label array as long
        as its features with values in range, the radii finite and positive, at least one
        picture). Raises ValueError naming the file and the field (a truncated, foreign or
        damaged file: prepare the ROM again) or OSError (unreadable)."""
        try:
            with open(path, "rb") as fh:
                z = np.load(fh, allow_pickle=False)
                if not isinstance(z, np.lib.npyio.NpzFile):
                    raise ValueError("not an .npz archive")
                with z:
                    kw: dict[str, Any] = {
                        f.name: z[f.name]
                        for f in dataclasses.fields(cls)
                        if f.name in z.files or f.name not in OPTIONAL_FIELDS
                    }
                    version = z["version"] if "version" in z.files else np.int32(SCREENS_VERSION)
        except IsADirectoryError:
            raise ValueError(f"{path}: a directory, not a screen prototype file") from None
        except KeyError as e:
            raise ValueError(f"{path}: not a screen prototype file (no {e})") from None
        except (ValueError, EOFError, zipfile.BadZipFile, OSError) as e:
            if isinstance(e, OSError) and not isinstance(e, zipfile.BadZipFile) and e.errno:
                raise
            raise ValueError(
                f"{path}: not a screen prototype file ({type(e).__name__}: {e}); "
                "prepare the ROM again (hil prepare --rom ROM)"
            ) from None
        try:
            known = version.shape == () and int(version) == SCREENS_VERSION
        except (TypeError, ValueError):
            known = False
        if not known:
            raise ValueError(
                f"{path}: field 'version': expected {SCREENS_VERSION}, got {version!r} (a "
                "file of another version of this tool: prepare the ROM again)"
            )
        for name, (width, labels, top) in PROTOTYPE_SCHEMA.items():
            if name not in kw:  # an optional pair absent from an older file
                kw[name] = _empty(width)
                if labels is not None:
                    kw[labels] = _labels()
                continue
            a = kw[name]
            if a.dtype != np.float32 or a.ndim != 2 or a.shape[1] != width:
                raise ValueError(
                    f"{path}: field {name!r}: expected float32 [n, {width}], got "
                    f"{a.dtype} {list(a.shape)}"
                )
            if not np.isfinite(a).all():
                raise ValueError(f"{path}: field {name!r}: values that are not finite numbers")
            if labels is not None:
                lab = kw[labels]
                if lab.ndim != 1 or lab.shape[0] != a.shape[0] or lab.dtype.kind not in "iu":
                    raise ValueError(
                        f"{path}: field {labels!r}: expected {a.shape[0]} integers, got "
                        f"{lab.dtype} {list(lab.shape)}"
                    )
                if len(lab) and (int(lab.min()) < 0 or int(lab.max()) > top):
                    raise ValueError(f"{path}: field {labels!r}: values outside 0..{top}")
        if len(kw["whole"]) == 0:
            raise ValueError(f"{path}: field 'whole': no pictures")
        for name in ("demo_radius", "box_radius"):
            v = kw[name]
            if v.shape != () or not np.isfinite(v) or float(v) <= 0:
                raise ValueError(f"{path}: field {name!r}: expected a finite number > 0")
            kw[name] = float(v)
        kw["source"] = str(kw["source"])
        return cls(**kw)


SCREENS_VERSION = 1  # the "version" array of a screens.npz (absent in files written before it)
# feature field -> (width, its label field or None, the labels' highest value); the widths
# are those of the module's crops (_blocks and _crop of a 240x256 picture)
PROTOTYPE_SCHEMA: dict[str, tuple[int, str | None, int]] = {
    "whole": (720, "kind", len(KINDS) - 1),
    "demo_bottle": (384, None, 0),
    "box": (1280, "box_kind", len(KINDS) - 1),
    "digits": (240, "digit_level", 20),
    "speed_row": (4096, "row_speed", 2),
    "heart": (640, "heart_players", 2),
    "digits2": (240, "digit_level2", NO_LEVEL2),
    "speed_rows": (5120, "speed_pair", 8),
    "section": (3072, "section_row", 2),
}
# written by this version, absent in files of the one before (their screens read as before)
OPTIONAL_FIELDS = ("digits2", "digit_level2", "speed_rows", "speed_pair", "section", "section_row")


def _empty(width: int) -> F32:
    return np.zeros((0, width), np.float32)


def _labels() -> npt.NDArray[np.int8]:
    return np.zeros(0, np.int8)


class PrototypeBuilder:
    """Collects labelled pictures into ScreenPrototypes."""

    def __init__(self) -> None:
        self.whole: list[F32] = []
        self.kind: list[int] = []
        self.bottle: list[F32] = []  # level screens only
        self.bottle_kind: list[int] = []
        self.box: list[F32] = []
        self.digits: list[F32] = []
        self.digit_level: list[int] = []
        self.speed_row: list[F32] = []
        self.row_speed: list[int] = []
        self.heart: list[F32] = []
        self.heart_players: list[int] = []
        self.digits2: list[F32] = []
        self.digit_level2: list[int] = []
        self.speed_rows: list[F32] = []
        self.speed_pair: list[int] = []
        self.section: list[F32] = []
        self.section_row: list[int] = []

    def add(
        self,
        pic: U8,
        kind: int,
        *,
        level: int | None = None,
        speed: int | None = None,
        players: int | None = None,
        level2: int | None = None,
        speed2: int | None = None,
        section: int | None = None,
    ) -> None:
        """One picture uint8 [240, 256, 3] of ``kind`` (index in KINDS) with its truth (on
        OPTIONS: ``players`` 1 or 2, None where unknown; player 2's ``level2`` and ``speed2``
        on a two-player screen; the highlighted ``section``)."""
        if kind == BLANK:
            return  # read by rule, no prototypes
        self.whole.append(_blocks(pic, cell=WHOLE_CELL))
        self.kind.append(kind)
        if kind in LEVEL_SCREENS:
            self.bottle.append(_blocks(pic, BOTTLE))
            self.bottle_kind.append(kind)
            self.box.append(_blocks(pic, BOX_ROWS, cell=2, grey=True))
        if kind == OPTIONS and level is not None and speed is not None:
            self.digits.append(_crop(pic, LEVEL_DIGITS))
            self.digit_level.append(level)
            if players == 2 and level2 is not None and speed2 is not None:
                self.digits2.append(_crop(pic, LEVEL_DIGITS2))
                self.digit_level2.append(level2)
                self.speed_rows.append(_crop(pic, SPEED_ROWS2))
                self.speed_pair.append(3 * speed + speed2)
            else:
                self.speed_row.append(_crop(pic, SPEED_ROW))
                self.row_speed.append(speed)
                if players == 1:
                    self.digits2.append(_crop(pic, LEVEL_DIGITS2))
                    self.digit_level2.append(NO_LEVEL2)
            if section is not None:
                self.section.append(_blocks(pic, SECTION_LABELS, cell=4))
                self.section_row.append(section)
        if kind == TITLE and players is not None:
            self.heart.append(_crop(pic, TITLE_HEART))
            self.heart_players.append(players)

    def build(self, source: str) -> ScreenPrototypes:
        """The prototypes; ``demo_radius`` halfway between the demo's own frames and the
        nearest other level screen. Raises ValueError when a family has no pictures."""
        kind = np.array(self.kind, np.int8)
        for k in (TITLE, OPTIONS, LEVEL):
            if not (kind == k).any():
                raise ValueError(f"no {KINDS[k]} pictures to build screen prototypes from")
        if not self.digits:
            raise ValueError("no options pictures with their level and speed")
        bk = np.array(self.bottle_kind, np.int8)
        bottle, box = np.stack(self.bottle), np.stack(self.box)
        level = bk == LEVEL
        boxed = np.isin(bk, (STAGE_CLEAR, GAME_OVER))
        demo_radius = 1.5 * _radius(bottle[bk == DEMO], bottle[~(bk == DEMO)])
        # A box picture as near a level picture as this is one the NMI had not drawn yet
        # (the truth is RAM): not a box prototype.
        for i in np.flatnonzero(boxed):
            if _nearest(box[level], box[i])[1] < BOX_CLEAR:
                boxed[i] = False
        box_radius = _radius(box[boxed], box[level])
        return ScreenPrototypes(
            whole=np.stack(self.whole),
            kind=kind,
            demo_bottle=bottle[bk == DEMO],
            box=box[boxed],
            box_kind=bk[boxed],
            digits=np.stack(self.digits),
            digit_level=np.array(self.digit_level, np.int8),
            speed_row=np.stack(self.speed_row),
            row_speed=np.array(self.row_speed, np.int8),
            heart=np.stack(self.heart) if self.heart else np.zeros((0, 640), np.float32),
            heart_players=np.array(self.heart_players, np.int8),
            demo_radius=demo_radius,
            box_radius=box_radius,
            source=source,
            digits2=_stack(self.digits2, 240),
            digit_level2=np.array(self.digit_level2, np.int8),
            speed_rows=_stack(self.speed_rows, 5120),
            speed_pair=np.array(self.speed_pair, np.int8),
            section=_stack(self.section, 3072),
            section_row=np.array(self.section_row, np.int8),
        )


def _stack(rows: list[F32], width: int) -> F32:
    return np.stack(rows) if rows else _empty(width)


def _radius(members: F32, others: F32) -> float:
    """Half the 2nd percentile of the distances from ``others`` to their nearest member (0
    when there are no members: nothing is ever that close)."""
    if not len(members) or not len(others):
        return 0.0
    sub = others[:: max(1, len(others) // 400)]
    d = [_nearest(members, o)[1] for o in sub]
    return 0.5 * float(np.percentile(d, 2))


class ScreenReader:
    """Reads the screens before play (module docstring). ``prototypes``: ScreenPrototypes."""

    def __init__(self, prototypes: ScreenPrototypes) -> None:
        self.p = prototypes
        # id(prototype array) -> (the array, its rows' squared norms): the nearest row by one
        # matrix-vector product, not a [n, d] difference per read (the two-player options
        # screen compares with 46 M numbers of a ROM's prototypes: 70 ms a read, quiet)
        self._norms: dict[int, tuple[F32, npt.NDArray[np.float64]]] = {}

    def _nearest(self, feats: F32, x: F32) -> tuple[int, float]:
        """:func:`_nearest` by ``|f|^2 - 2 f.x + |x|^2`` with the rows' norms kept."""
        got = self._norms.get(id(feats))
        if got is None or got[0] is not feats:
            sq = np.einsum("ij,ij->i", feats, feats, dtype=np.float64)
            got = self._norms[id(feats)] = (feats, sq)
        x = np.asarray(x, np.float32)
        d = got[1] - 2.0 * (feats @ x).astype(np.float64) + float(np.dot(x, x))
        i = int(np.argmin(d))
        return i, float(np.sqrt(max(d[i], 0.0) / feats.shape[1]))

    @classmethod
    def load(cls, path: str | Path) -> ScreenReader:
        return cls(ScreenPrototypes.load(path))

    def read_nes(self, pic: U8) -> ScreenReading:
        """Read an NES picture: RGB uint8 [240, 256, 3]. Raises ValueError for another shape."""
        if not isinstance(pic, np.ndarray) or pic.shape != (240, 256, 3) or pic.dtype != np.uint8:
            raise ValueError("read_nes needs an NES picture: uint8 [240, 256, 3] RGB")
        if float(pic[::4, ::4].std()) < BLANK_STD:
            return ScreenReading("BLANK")
        i, dist = self._nearest(self.p.whole, _blocks(pic, cell=WHOLE_CELL))
        family = int(self.p.kind[i])
        if family == OPTIONS:
            return self._options(pic, dist)
        if family == TITLE:
            players = None
            if len(self.p.heart):
                h, _ = self._nearest(self.p.heart, _crop(pic, TITLE_HEART))
                players = int(self.p.heart_players[h])
            return ScreenReading("TITLE", players=players, distance=dist)
        if len(self.p.demo_bottle):
            _, dd = self._nearest(self.p.demo_bottle, _blocks(pic, BOTTLE))
            if dd < self.p.demo_radius:
                return ScreenReading("DEMO", distance=dd)
        if len(self.p.box):
            j, db = self._nearest(self.p.box, _blocks(pic, BOX_ROWS, cell=2, grey=True))
            if db < self.p.box_radius:
                return ScreenReading(KINDS[int(self.p.box_kind[j])], distance=db)
        return ScreenReading("LEVEL", distance=dist)

    def warm_up(self) -> None:
        """Runs every matcher once on a noise picture (the options screen's, two players'
        too, whichever family it falls in): the first two-player options read of a ROM's
        prototypes took 266 ms against 70 ms after (9,382 level prototypes: the arrays and
        the matcher's temporaries paged in), and beside two CPU-bound processes the first pass
        of the menus then passed the firmware's 500 ms watchdog. Changes no state."""
        noise = np.random.default_rng(0).integers(0, 256, (240, 256, 3), np.uint8)
        self.read_nes(noise)
        self._options(noise, 0.0)
        for f in dataclasses.fields(self.p):  # the title's heart, the demo's bottle, the boxes
            arr = getattr(self.p, f.name)
            if isinstance(arr, np.ndarray) and arr.ndim == 2 and len(arr):
                self._nearest(arr, arr[0])

    def _options(self, pic: U8, dist: float) -> ScreenReading:
        """The options screen's settings (module docstring)."""
        p = self.p
        j, _ = self._nearest(p.digits, _crop(pic, LEVEL_DIGITS))
        level = int(p.digit_level[j])
        players = level2 = speed2 = section = None
        if len(p.digits2):
            k, _ = self._nearest(p.digits2, _crop(pic, LEVEL_DIGITS2))
            players = 1 if int(p.digit_level2[k]) == NO_LEVEL2 else 2
            if players == 2:
                level2 = int(p.digit_level2[k])
        if players == 2 and len(p.speed_rows):
            k, _ = self._nearest(p.speed_rows, _crop(pic, SPEED_ROWS2))
            speed, speed2 = divmod(int(p.speed_pair[k]), 3)
        else:
            s, _ = self._nearest(p.speed_row, _crop(pic, SPEED_ROW))
            speed = int(p.row_speed[s])
        if len(p.section):
            k, _ = self._nearest(p.section, _blocks(pic, SECTION_LABELS, cell=4))
            section = int(p.section_row[k])
        return ScreenReading(
            "OPTIONS",
            level,
            speed,
            players=players,
            distance=dist,
            level2=level2,
            speed2=speed2,
            section=section,
        )

    def read(self, captured: U8, profile: Any) -> ScreenReading:
        """Read a captured BGR frame of ``profile`` (calibration.Profile): mapped to NES pixels
        by calibration.to_nes (geometry and colour), then ``read_nes``. Raises ValueError for a
        frame of the wrong size."""
        from calibration.forward import to_nes

        return self.read_nes(to_nes(profile, captured))


# ---- clean-room prototypes (simulated console, CI) -------------------------------------------


def clean_room_pictures(seed: int = 0) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """(picture, kind, truth) of the clean-room screens: the title (both cursor rows, both
    shine phases), the options screen at every level, speed and highlighted row (music
    varied), the two-player options screen at every level and speed pair of player 2, the
    two-player level screen (engine.Versus, random pads), level screens of the engine's
    LevelFlow (intro, play with random input, a
    game over), the demo (engine.Game.demo) and blank frames."""
    import engine
    from engine.menu_render import render_blank, render_options, render_title

    rng = np.random.default_rng(seed)
    for players in (1, 2):
        for fc in (0, 16):
            yield render_title(players, fc), TITLE, {"players": players}
    for level in range(21):
        for speed in range(3):
            for section in range(3):
                music = int(rng.integers(3))
                pic = render_options(level, speed, music, section)
                truth = {"level": level, "speed": speed, "players": 1, "section": section}
                yield pic, OPTIONS, truth
    for level2 in range(21):  # the two-player screen: every level and speed pair of player 2
        for pair in range(9):
            level, music, section = int(rng.integers(21)), int(rng.integers(3)), (level2 + pair) % 3
            speed, speed2 = divmod(pair, 3)
            pic = render_options(level, speed, music, section, versus=(level2, speed2))
            truth = {"level": level, "speed": speed, "players": 2, "section": section}
            yield pic, OPTIONS, {**truth, "level2": level2, "speed2": speed2}
    yield render_blank(), BLANK, {}
    grid = (0, 3, 7, 12, 20)
    for n, (lv1, lv2) in enumerate((a, b) for a in grid for b in grid):  # two-player screen
        v = engine.Versus(lv1, n % 3, lv2, n // 3 % 3, int(rng.integers(2, 0xFFFF)), 0)
        for k in range(200):  # random pads
            if k % 100 == 0:
                yield engine.render_versus(v), LEVEL, {}
            v.step(int(rng.choice([0, 0, 1, 2, 4, 0x80])), int(rng.choice([0, 0, 1, 2, 4, 0x40])))
    for level, speed, policy in ((0, 2, True), (3, 1, True), (9, 2, False), (16, 1, False)):
        flow = engine.LevelFlow(level, speed, int(rng.integers(2, 0xFFFF)), frame_counter=3)
        yield from _flow_pictures(flow, rng, policy)
    demo = engine.Game.demo()
    for k in range(1500):
        demo.step(0)
        if k % 25 == 0:
            yield engine.render_frame(demo), DEMO, {}


def _greedy_placement(game: Any) -> int:
    """A placement that plays a level to its stage clear with the engine alone (perception
    imports no policy): the children ``engine._core.expand`` resolves exactly (clears and
    cascades included) scored one ply by the engine's board counts (``engine._core.board_terms``)
    with the teacher's default weights in frames (docs/POLICY.md: 40 a virus, 39 a half still
    needed, 20 a piece, 15 a hole, 40 a buried half, 5 a row of bump, the danger near the
    spawn); a stage clear first, a top-out last. Returns the placement index."""
    import engine
    import engine._core as core

    ex = core.expand(game)
    rows = np.zeros(16)
    rows[:4] = (400.0, 140.0, 45.0, 12.0)
    danger = np.outer(rows, (0.45, 0.6, 0.85, 1.0, 1.0, 0.85, 0.6, 0.45)).reshape(-1)
    t = core.board_terms(np.ascontiguousarray(ex.fields), 1.0, 2.0, danger)
    # columns: halves, bury, piece, holes, bump, access, vsame, on_virus, hsame, danger
    value = -(
        ex.lock_frames + ex.settle_frames + 40.0 * ex.viruses + 39.0 * t[:, 0] + 40.0 * t[:, 1]
        + 20.0 * t[:, 2] + 15.0 * t[:, 3] + 5.0 * t[:, 4] + t[:, 9]
    )  # fmt: skip
    value = np.where(ex.phases == int(engine.Phase.STAGE_CLEAR), 1e9, value)
    value = np.where(ex.phases == int(engine.Phase.TOP_OUT), -1e9, value)
    return int(ex.placements[int(np.argmax(value))])


def _flow_pictures(
    flow: Any, rng: np.random.Generator, policy: bool
) -> Iterator[tuple[U8, int, dict[str, int]]]:
    """Level screens of one LevelFlow: played by the heuristic policy to its stage clear
    (``policy``) or with random input to its top-out; its box frames, then Start."""
    import engine

    queue: list[int] = []
    k = boxed = 0
    while not flow.terminal and k < 30_000 and boxed < 12:
        g = flow.game
        stage = engine.FlowStage(flow.stage)
        if policy and stage == engine.FlowStage.PLAY and not queue:
            if g.phase == engine.Phase.PLAYING and g.next_action == 3:  # the spawn state
                p = engine.plan(g)
                if p.reachable.any():
                    queue = [int(m) for m in p.masks(_greedy_placement(g))]
        if queue:
            mask = queue.pop(0)
        elif not policy:
            mask = int(rng.choice([0, 0, 0, 1, 2, 0x80, 4, 4]))
        else:
            mask = 0
        before = flow.game
        flow.step(mask)
        k += 1
        if flow.screen != engine.FlowScreen.LEVEL:
            continue
        box = _has_box(before.shown)
        if box:
            boxed += 1
        if not box and k % 41:
            continue
        kind = LEVEL
        if box:
            clear = engine.FlowStage(flow.stage) == engine.FlowStage.STAGE_CLEAR
            kind = STAGE_CLEAR if clear else GAME_OVER
        yield engine.render_frame(before), kind, {}


def _has_box(shown: npt.NDArray[np.uint8]) -> bool:
    """A text box (STAGE CLEAR, GAME OVER) in the bottle's cells: letter tiles ($0A-$23) in
    rows 1-9 (txtBox_stageClear from $0400, txtBox_gameOver from $0410)."""
    top = np.asarray(shown)[8:80]
    return bool(((top >= 0x0A) & (top <= 0x23)).sum() >= 5)


def clean_room_prototypes(seed: int = 0) -> ScreenPrototypes:
    """Prototypes of the project's clean-room screens (for the simulated console and CI)."""
    b = PrototypeBuilder()
    for pic, kind, truth in clean_room_pictures(seed):
        b.add(pic, kind, **truth)
    return b.build("clean-room")


# ---- prototypes from the user's ROM (prepare time) ----------------------------------------------


def add_all(b: PrototypeBuilder, items: Iterable[tuple[U8, int, dict[str, int]]]) -> int:
    n = 0
    for pic, kind, truth in items:
        b.add(pic, kind, **truth)
        n += 1
    return n


def prepared_screens(crc: str) -> Path | None:
    """The screen prototypes prepared for the ROM with this CRC-32, or None."""
    from perception.store import prepared_dir

    path = prepared_dir(crc) / SCREENS_FILE
    return path if path.is_file() else None
