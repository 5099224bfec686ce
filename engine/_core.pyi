"""Type stub for the compiled engine._core (engine/src/bindings.cpp)."""

from typing import Any

import numpy as np
import numpy.typing as npt

STATE_BYTES: int
FIELD_SIZE: int

U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]

class Game:
    def __init__(self, level: int, speed: int, seed: int, frame_counter: int = 0) -> None: ...
    @staticmethod
    def demo(frame_counter: int = 1, input_lead: int = 7) -> Game: ...
    def step(self, buttons: int) -> None: ...
    def run(self, masks: U8) -> int: ...
    def clone(self) -> Game: ...
    def state_bytes(self) -> bytes: ...
    @property
    def pill_valid(self) -> bool: ...
    @property
    def virus_count(self) -> int: ...
    @property
    def virus_left(self) -> int: ...
    @property
    def is_demo(self) -> bool: ...
    field: U8
    reserve: U8
    shown: U8
    status: U8
    pill_colors: U8
    pill_x: U8
    pill_y: U8
    pill_rotation: U8
    next_colors: U8
    next_rotation: U8
    pill_placed_step: U8
    next_action: U8
    speed_ups: U8
    speed_setting: U8
    speed_counter: U8
    hor_velocity: U8
    level: U8
    virus_left_bcd: U8
    pills_counter: U8
    pills_decimal: U8
    frame_counter: U8
    btns_held: U8
    btns_pressed: U8
    pill_thrown_frame: U8
    phase: U8
    lock_event: U8
    spr_pill: U8
    spr_pill_x: U8
    spr_pill_y: U8
    spr_pill_rotation: U8
    spr_pill_colors: U8
    mario_throw_frame: U8
    level_fail: U8
    rng: U8
    score: U32
    frame: U32

class Batch:
    def __init__(
        self, levels: Any, speeds: Any, seeds: Any, frame_counters: Any | None = None
    ) -> None: ...
    def __len__(self) -> int: ...
    def step(self, buttons: U8) -> None: ...
    def run(self, buttons: U8) -> int: ...
    def get(self, index: int) -> Game: ...
    def set(self, index: int, game: Game) -> None: ...
    field: U8
    reserve: U8
    shown: U8
    pill_x: U8
    pill_y: U8
    pill_rotation: U8
    phase: U8
    frame: U32

def generate_level(level: int, seed: int) -> dict[str, Any]: ...
def rng_step(seed: int) -> int: ...
def pill_colors(pill_id: int) -> tuple[int, int]: ...

class Plan:
    placements: npt.NDArray[np.int16]
    lock_frames: npt.NDArray[np.int32]
    reachable: npt.NDArray[np.bool_]
    presses: npt.NDArray[np.int32]
    status: int
    nodes: int
    def __len__(self) -> int: ...
    def lock_frame(self, index: int) -> int: ...
    def masks(self, index: int) -> U8: ...
    def all_masks(self) -> list[U8]: ...

def plan(
    game: Game | bytes,
    prefix: U8 | None = None,
    min_press_interval: int = 0,
    taps_only: bool = False,
) -> Plan: ...

class TileData:
    def __init__(
        self,
        patterns: U8,
        palettes: U8,
        speed_colors: U8,
        nametable: U8,
        rgb: U8,
        metasprites: dict[int, U8],
    ) -> None: ...

def render_constants() -> dict[str, bytes]: ...
def render_frame(
    game: Game, tiles: TileData, out: U8 | None = None, top_score: int = 10000
) -> U8: ...
def render_indices(game: Game, tiles: TileData, top_score: int = 10000) -> U8: ...
def level_palette_ram(tiles: TileData, speed: int) -> U8: ...
def frame_layout(
    game: Game, tiles: TileData | None = None, top_score: int = 10000
) -> dict[str, Any]: ...
def screen_facts(game: Game) -> dict[str, Any]: ...
def replay_locks(
    game: Game | bytes, masks_list: list[U8]
) -> tuple[npt.NDArray[np.int32], U8, npt.NDArray[np.int32]]: ...
def exhaustive_locks(
    game: Game | bytes, alphabet: U8, max_states: int = 2000000, min_press_interval: int = 0
) -> tuple[U8, npt.NDArray[np.int32], npt.NDArray[np.int32]]: ...

# search.h / bind_search.cpp (policy teacher helpers)
class Expansion:
    status: int
    reachable: npt.NDArray[np.bool_]
    placements: npt.NDArray[np.int16]
    lock_frames: npt.NDArray[np.int32]
    settle_frames: npt.NDArray[np.int32]
    clear_rounds: npt.NDArray[np.int32]
    viruses: npt.NDArray[np.int32]
    phases: U8
    fields: U8
    def __len__(self) -> int: ...
    def child(self, k: int) -> Game: ...

def settle(game: Game, max_frames: int = 10000) -> tuple[int, int]: ...
def expand(
    game: Game, taps_only: bool = False, min_press_interval: int = 0, max_settle: int = 10000
) -> Expansion: ...
def board_terms(
    fields: U8, blocker: float, no_room: float, danger: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]: ...
