"""The placement index and the falling pill, one definition for the planner, the policy, the
tracker and the logs (docs/ARCHITECTURE.md, "Shared conventions"; docs/PLANNER.md).

A placement is where a pill locks: ``index = rotation * 128 + row * 8 + col`` (0..511), with
``rotation`` 0..3 (the game's fallingPillRotation $A5), ``row`` 0..15 from the top of the
bottle and ``col`` 0..7 the pill's left (horizontal) or bottom (vertical) half. The pill is in
play while the game is playing and nextAction is action_pillFalling (0); nextAction
action_sendPillFinished (3) is the spawn state, where a decision is made (docs/POLICY.md).
"""

from __future__ import annotations

from typing import Any

from engine.constants import Phase

NUM_PLACEMENTS = 512
ACTION_PILL_FALLING = 0  # nextAction: the pill falls and takes input
ACTION_SEND_PILL_FINISHED = 3  # nextAction: the next pill has been sent (the spawn state)


def placement_index(rotation: int, row: int, col: int) -> int:
    """(rotation 0..3, row 0..15, col 0..7) -> 0..511. Raises ValueError out of range."""
    if not (0 <= rotation < 4 and 0 <= row < 16 and 0 <= col < 8):
        raise ValueError(f"no placement has rotation {rotation}, row {row}, col {col}")
    return rotation * 128 + row * 8 + col


def placement_pose(index: int) -> tuple[int, int, int]:
    """0..511 -> (rotation, row, col). Raises ValueError out of range."""
    if not 0 <= index < NUM_PLACEMENTS:
        raise ValueError(f"placement index must be in 0..511, got {index}")
    rotation, rest = divmod(int(index), 128)
    row, col = divmod(rest, 8)
    return rotation, row, col


def pill_falling(game: Any) -> bool:
    """A pill is falling in ``game`` (an engine.Game): playing, nextAction
    action_pillFalling; the frame after this state can move it."""
    return int(game.next_action) == ACTION_PILL_FALLING and int(game.phase) == Phase.PLAYING


def at_spawn(game: Any) -> bool:
    """``game`` (an engine.Game) is a spawn state: playing, nextAction
    action_sendPillFinished."""
    return int(game.phase) == Phase.PLAYING and int(game.next_action) == ACTION_SEND_PILL_FINISHED
