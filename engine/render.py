"""The NES picture of a one-player level: ``render_frame(game) -> uint8 [240, 256, 3]``.

``render_frame`` draws what the console shows after its next NMI (if ``game`` is the state
after ``step`` of frame F, the picture of frame F+1; docs/RENDER.md): the level's background
nametable with the bottle as the PPU holds it (``Game.shown`` plus the row the NMI redraws), the
HUD digits, the falling pill's sprites as the previous frame's main loop placed them, the next
pill at rest or along its throw arc, the doctor and the big viruses, the small viruses'
animation frame (a CHR bank switch every 8 frames), the bottle colour of the speed setting.

Tiles come from a ``TileSet``: ``TileSet.clean_room()`` (the project's own drawings, the
default) or ``TileSet.from_ines(path)`` (the CHR of the user's own Dr. Mario ROM file, read at
run time; see engine/ines.py). A TileSet is plain NumPy data (patterns, palettes, nametable,
metasprites, RGB palette) that ``TileSet.replace`` can perturb, e.g. to randomise appearance.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engine import _core

U8 = npt.NDArray[np.uint8]

SCREEN_HEIGHT = 240  # NES pixels
SCREEN_WIDTH = 256  # NES pixels
BOTTLE_LEFT, BOTTLE_TOP = 96, 80  # NES pixels of field cell (row 0, column 0)
CELL = 8  # NES pixels per field cell


def _ntsc_palette() -> U8:
    """The 2C02's 64 colours as RGB, computed from the PPU's composite signal.

    Source: NESdev wiki, "NTSC video": the measured output levels of the 2C02 (relative to
    sync: $xD rows 0.350, 0.518, 0.962, 1.550 V; $x0 rows 1.090, 1.500, 1.960, 1.960 V;
    black 0.518 V, white 1.960 V), colours $x1-$xC a square wave between the $xD and $x0 levels
    of their row at 12 phases 30 degrees apart, the colour burst at the phase of $x8, $xE/$xF
    black. Decoding is the standard NTSC one: luma = the wave's mean, chroma = its fundamental
    (amplitude x 4/pi) at hue (Y - 8) * 30 degrees from the burst's -U axis, YUV -> RGB with the
    BT.601 matrix, no gamma change, clipped to 0..255. A monitor or capture card shows a
    somewhat different palette; calibration/ measures the real one.
    """
    lo = [0.350, 0.518, 0.962, 1.550]
    hi = [1.090, 1.500, 1.960, 1.960]
    black, white = 0.518, 1.960
    out = np.zeros((64, 3), np.uint8)
    for n in range(64):
        row, hue = n >> 4, n & 0x0F
        if hue >= 0x0E:
            low = high = black
        elif hue == 0x00:
            low = high = hi[row]
        elif hue == 0x0D:
            low = high = lo[row]
        else:
            low, high = lo[row], hi[row]
        luma = ((low + high) / 2 - black) / (white - black)
        amp = (high - low) / 2 / (white - black) * 4 / math.pi
        angle = math.radians(180 - (8 - hue) * 30)  # burst (hue 8) decodes as -U
        u, v = amp * math.cos(angle), amp * math.sin(angle)
        rgb = (luma + 1.13983 * v, luma - 0.39465 * u - 0.58060 * v, luma + 2.03211 * u)
        out[n] = [round(min(max(c, 0.0), 1.0) * 255) for c in rgb]
    return out


NES_PALETTE: U8 = _ntsc_palette()
NES_PALETTE.flags.writeable = False


class ScreenKind(IntEnum):
    """What a picture shows (engine/src/render.h ScreenKind)."""

    LEVEL = 0  # the level: intro wait or play
    PAUSED = 1  # background off, PAUSE in sprites
    STAGE_CLEAR = 2  # the first picture after the last virus was cleared
    TOP_OUT = 3  # the first picture after a thrown pill could not be placed
    OTHER = 4  # demo ended or soft reset: the console leaves the level


@dataclasses.dataclass(frozen=True, eq=False)
class TileSet:
    """Everything a picture is drawn from besides the game state.

    patterns: uint8 [3, 256, 8, 8] colour indices 0..3: background tiles with the small
        viruses' frame 0 (CHR_levelTiles_frame0), with frame 1 (CHR_levelTiles_frame1), sprite
        tiles (CHR_levelSprites).
    palettes: uint8 [32] NES colour numbers 0..63, PPU palette RAM $3F00-$3F1F as the level
        writes it (palLevel_1P); colour 3 of background palettes 0, 1, 3 is replaced by
        speed_colors[speed] (setBkgColor_basedOnSpeed).
    speed_colors: uint8 [3] NES colours for LOW, MED, HI (bkgColor_basedOnSpeed).
    nametable: uint8 [1024] VRAM $2000-$23FF: 960 tile numbers and the 64-byte attribute table
        of the level screen; the bottle and the HUD digits are drawn over it per frame.
    metasprites: slot (jumpTable_sprites order: 0 PAUSE, $0A-$0C throw frames, $32 top-out,
        $23-$2B big virus dance) -> uint8 [k, 4] sprites (dy, tile, attribute, dx).
    rgb: uint8 [64, 3] the RGB of each NES colour (default NES_PALETTE).
    name: where the tiles come from.
    nametable_2p: uint8 [1024] the two-player level screen (bkgLevel_2P), like nametable; the
        bottles, speed texts and crowns are drawn over it (render_versus). None: a blank
        screen (tile $FF, palette 0).

    Raises ValueError (TypeError for a wrong dtype) when an array has the wrong shape or values.
    """

    patterns: U8
    palettes: U8
    speed_colors: U8
    nametable: U8
    metasprites: dict[int, U8]
    rgb: U8 = dataclasses.field(default_factory=lambda: NES_PALETTE.copy())
    name: str = "custom"
    nametable_2p: U8 | None = None
    _data: Any = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.nametable_2p is None:
            blank = np.zeros(1024, np.uint8)
            blank[:960] = 0xFF
            object.__setattr__(self, "nametable_2p", blank)
        arrays = {}
        for field in ("patterns", "palettes", "speed_colors", "nametable", "rgb", "nametable_2p"):
            value = getattr(self, field)
            if not isinstance(value, np.ndarray):
                raise TypeError(f"TileSet.{field} must be a numpy.ndarray of dtype uint8")
            arr = np.ascontiguousarray(value)
            arr.flags.writeable = False
            object.__setattr__(self, field, arr)
            arrays[field] = arr
        metas = {}
        for slot, parts in dict(self.metasprites).items():
            if not isinstance(parts, np.ndarray):
                raise TypeError(f"TileSet.metasprites[{slot}] must be a numpy.ndarray uint8")
            arr = np.ascontiguousarray(parts)
            arr.flags.writeable = False
            metas[int(slot)] = arr
        object.__setattr__(self, "metasprites", metas)
        data = _core.TileData(
            arrays["patterns"],
            arrays["palettes"],
            arrays["speed_colors"],
            arrays["nametable"],
            arrays["rgb"],
            metas,
            arrays["nametable_2p"],
        )
        object.__setattr__(self, "_data", data)

    @classmethod
    def clean_room(cls) -> TileSet:
        """The project's own drawings (engine/tiles/cleanroom.txt, font.txt) with the game's
        palettes: safe to ship and to commit pictures of."""
        return _clean_room()

    @classmethod
    def from_ines(cls, path: str | Path, verify_crc: bool = True) -> TileSet:
        """The tiles of the user's own Dr. Mario ROM (iNES file), read at run time and never
        stored: CHR banks 0/1 (background, two virus frames) and 2 (sprites), the one- and
        two-player level nametables and the metasprites from its PRG. Raises engine.RomError
        (a ValueError) when the file is not an iNES image of this game (engine/ines.py)."""
        from engine.ines import tileset_arrays

        arrays = tileset_arrays(path, verify_crc=verify_crc)
        return cls(**arrays, palettes=_game_palettes(), speed_colors=_speed_colors())

    def replace(self, **changes: Any) -> TileSet:
        """A copy with some arrays replaced (validated like the constructor)."""
        return dataclasses.replace(self, **changes)


@functools.cache
def _clean_room() -> TileSet:
    from engine.tiles import load_cleanroom

    art = load_cleanroom()
    return TileSet(
        patterns=art.patterns,
        palettes=_game_palettes(),
        speed_colors=_speed_colors(),
        nametable=art.nametable,
        nametable_2p=art.nametable_2p,
        metasprites=art.metasprites,
        name="clean-room",
    )


def _game_palettes() -> U8:
    return np.frombuffer(_core.render_constants()["palettes"], np.uint8).copy()


def _speed_colors() -> U8:
    return np.frombuffer(_core.render_constants()["speed_colors"], np.uint8).copy()


def _game(game: _core.Game) -> _core.Game:
    if not isinstance(game, _core.Game):
        raise TypeError(f"game must be an engine.Game, got {type(game).__name__}")
    return game


def _tiles(tiles: TileSet | None) -> TileSet:
    if tiles is None:
        return _clean_room()
    if not isinstance(tiles, TileSet):
        raise TypeError(f"tiles must be an engine.TileSet or None, got {type(tiles).__name__}")
    return tiles


def render_frame(
    game: _core.Game,
    tiles: TileSet | None = None,
    out: U8 | None = None,
    *,
    top_score: int = 10000,
) -> U8:
    """The RGB picture the console shows after its next NMI: uint8 [240, 256, 3].

    game: an engine.Game (any state; the picture is a pure function of it). tiles: None for the
    clean-room tiles. out: optional C-contiguous uint8 [240, 256, 3] to draw into (returned).
    top_score: points shown as TOP (not part of the engine state; 10000 after power-on).
    Raises TypeError for a wrong argument type, ValueError for a wrong out shape or top_score.
    """
    return _core.render_frame(_game(game), _tiles(tiles)._data, out, top_score)


def render_indices(game: _core.Game, tiles: TileSet | None = None, *, top_score: int = 10000) -> U8:
    """The same picture as palette RAM indices: uint8 [240, 256], 0 = backdrop, 1-15
    background palettes (4 * palette + colour), 17-31 sprite palettes."""
    return _core.render_indices(_game(game), _tiles(tiles)._data, top_score)


def palette_ram(speed: int, tiles: TileSet | None = None) -> U8:
    """PPU palette RAM during a level at this speed (mirrors and speed colour applied): uint8
    [32] NES colour numbers. Raises ValueError for a speed outside 0..2."""
    return _core.level_palette_ram(_tiles(tiles)._data, speed)


def frame_layout(
    game: _core.Game, tiles: TileSet | None = None, *, top_score: int = 10000
) -> dict[str, Any]:
    """The picture before rasterising: vram uint8 [1024] ($2000-$23FF after the NMI), oam
    uint8 [n, 4] (Y, tile, attribute, X in OAM order; a sprite's first line is Y + 1),
    bg_bank (0/1), bg_visible, kind (ScreenKind)."""
    d = _core.frame_layout(_game(game), _tiles(tiles)._data, top_score)
    d["kind"] = ScreenKind(d["kind"])
    return d


@dataclasses.dataclass(frozen=True)
class PillOnScreen:
    """A pill drawn with sprites. box = (left, top, width, height) in NES pixels of its 16x8
    (horizontal) or 8x16 (vertical) box; colors = (1st half, 2nd half), 0 yellow 1 red 2 blue;
    rotation 0..3 as the game counts it (1st half: 0 left, 1 bottom, 2 right, 3 top)."""

    colors: tuple[int, int]
    rotation: int
    box: tuple[int, int, int, int]


@dataclasses.dataclass(frozen=True)
class FallingPill(PillOnScreen):
    """The falling pill as drawn: x column 0..7, y row counted from the bottom (15 = top), as
    of the frame before the state (fallingPill_spriteUpdate runs before the pill moves)."""

    x: int
    y: int


@dataclasses.dataclass(frozen=True)
class NextPill(PillOnScreen):
    """The next pill: throw_frame 0 at rest beside the doctor, else the index into
    pillThrownAnim_XPos/YPos of its flight."""

    throw_frame: int


@dataclasses.dataclass(frozen=True)
class ScreenFacts:
    """What render_frame(game) shows, for perception labels and the tracker.

    kind: ScreenKind. bottle: uint8 [16, 8] the nametable tiles in the bottle (row 0 at the top;
    cell codes, a cleared cell shown as $F0-$F2): lags the field by up to 16 frames while rows
    are redrawn. falling: the falling pill's sprites or None (none drawn). next: the next pill
    or None. virus_frame: 0/1, the small viruses' animation frame.
    """

    kind: ScreenKind
    bottle: U8
    falling: FallingPill | None
    next: NextPill | None
    virus_frame: int


def screen_facts(game: _core.Game) -> ScreenFacts:
    """Ground truth of render_frame(game) (independent of the tile set)."""
    d = _core.screen_facts(_game(game))
    falling, nxt = _pill_facts(d)
    return ScreenFacts(
        kind=ScreenKind(d["kind"]),
        bottle=d["bottle"],
        falling=falling,
        next=nxt,
        virus_frame=d["bg_bank"],
    )


# --- Two players (docs/RENDER.md "Two players") ---


def _versus(v: _core.Versus) -> _core.Versus:
    if not isinstance(v, _core.Versus):
        raise TypeError(f"v must be an engine.Versus, got {type(v).__name__}")
    return v


def render_versus(v: _core.Versus, tiles: TileSet | None = None, out: U8 | None = None) -> U8:
    """The RGB picture of a two-player round after the console's next NMI: uint8 [240, 256, 3].

    v: an engine.Versus (any state; if it is the state after ``step`` of frame F, the picture
    of frame F+1, as for render_frame). tiles: None for the clean-room tiles. out: optional
    C-contiguous uint8 [240, 256, 3] to draw into (returned). Drawn from: ``tiles.nametable_2p``
    (bkgLevel_2P, copied by toLevel [$817E]); each bottle as ``shown`` plus the row the NMI
    redraws (render_fieldRow_bothPlayers [$8307]: one row of each player per NMI, at
    fieldRow_PPUADDR_2P_P1 columns 4-11 / _P2 columns 20-27, rows 10-25); the speed texts
    (speedText_P1/P2_VRAMaddr $20EC / $20F1); the crowns (``Versus.crowns``, @renderVictories
    of render_palChange_or_bkgOverlays [$83A3]); the falling pills' sprites as the previous
    main loop placed them (fallingPill_spriteUpdate [$872F], X = $20 / $A0 + 8 x column); the
    next pills at ($38, $33) / ($B8, $33), the level and virus digits as sprites and the
    loser's sign (updateSprites_lvl [$87B2], updateSprites_2p_endGame [$887C]); palLevel_2P
    with player 2's speed colour. Raises TypeError for a wrong argument type, ValueError for a
    wrong out shape.
    """
    return _core.render_versus(_versus(v), _tiles(tiles)._data, out)


def render_versus_indices(v: _core.Versus, tiles: TileSet | None = None) -> U8:
    """render_versus as palette RAM indices: uint8 [240, 256] (0 = backdrop)."""
    return _core.render_versus_indices(_versus(v), _tiles(tiles)._data)


def versus_palette_ram(v: _core.Versus, tiles: TileSet | None = None) -> U8:
    """PPU palette RAM during a two-player round: uint8 [32] NES colour numbers (palLevel_2P,
    colour 3 of background palettes 0, 1, 3 = player 2's speed colour)."""
    return _core.versus_palette_ram(_versus(v), _tiles(tiles)._data)


def versus_frame_layout(v: _core.Versus, tiles: TileSet | None = None) -> dict[str, Any]:
    """The two-player picture before rasterising: vram uint8 [1024], oam uint8 [n, 4] (Y,
    tile, attribute, X in OAM order), bg_bank, bg_visible, kind (ScreenKind)."""
    d = _core.versus_frame_layout(_versus(v), _tiles(tiles)._data)
    d["kind"] = ScreenKind(d["kind"])
    return d


@dataclasses.dataclass(frozen=True)
class PlayerFacts:
    """One player's part of a two-player picture. bottle: uint8 [16, 8] nametable tiles shown
    (row 0 at the top; lags the field while rows are redrawn). falling: the falling pill's
    sprites (box in NES pixels; x column 0..7, y row from the bottom as drawn) or None. next:
    the next pill at rest (throw_frame 0: 2P has no throw) or None once a round is lost."""

    bottle: U8
    falling: FallingPill | None
    next: NextPill | None


@dataclasses.dataclass(frozen=True)
class VersusFacts:
    """What render_versus(v) shows: kind (ScreenKind: LEVEL, PAUSED, STAGE_CLEAR for a round
    won by a clear, TOP_OUT from the frame a player topped out), players (p1, p2)
    PlayerFacts, crowns (p1, p2) drawn, virus_frame 0/1 (the small viruses' animation)."""

    kind: ScreenKind
    players: tuple[PlayerFacts, PlayerFacts]
    crowns: tuple[int, int]
    virus_frame: int

    def player(self, index: int) -> ScreenFacts:
        """Player ``index``'s (0, 1) bottle as one-player facts: the screen's kind, its bottle,
        falling and next pill, the virus frame. During play they equal ``screen_facts`` of
        ``Versus.player(index).game()`` (its nbPlayers-2 Game; a test checks it)."""
        p = self.players[index]
        return ScreenFacts(self.kind, p.bottle, p.falling, p.next, self.virus_frame)


def _pill_facts(d: dict[str, Any]) -> tuple[FallingPill | None, NextPill | None]:
    falling, nxt = d["falling"], d["next"]
    f = (
        None
        if falling is None
        else FallingPill(
            colors=falling["colors"],
            rotation=falling["rotation"],
            box=falling["box"],
            x=falling["x"],
            y=falling["y"],
        )
    )
    n = (
        None
        if nxt is None
        else NextPill(
            colors=nxt["colors"],
            rotation=nxt["rotation"],
            box=nxt["box"],
            throw_frame=nxt["throw_frame"],
        )
    )
    return f, n


def versus_screen_facts(v: _core.Versus) -> VersusFacts:
    """Ground truth of render_versus(v) (independent of the tile set)."""
    d = _core.versus_screen_facts(_versus(v))
    players = []
    for p in d["players"]:
        falling, nxt = _pill_facts(p)
        players.append(PlayerFacts(bottle=p["bottle"], falling=falling, next=nxt))
    return VersusFacts(
        kind=ScreenKind(d["kind"]),
        players=(players[0], players[1]),
        crowns=d["crowns"],
        virus_frame=d["bg_bank"],
    )
