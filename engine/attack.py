"""One player of a two-player round tracked alone: its engine.Game plus the attacks it receives.

``engine.Versus(...).player(i).game()`` is a Game with ``nbPlayers`` = 2: it sends its pills
with no throw (``action_sendPill`` [$9FA1]), scores nothing and stops at ``action_checkAttack``
[$9BEE] as the player does. Stepped alone with that player's pad it stays equal to the player
in ``engine.Versus`` frame for frame (field, pill, ``nextAction``, counters; tests check it over
whole rounds) until the round ends, with one exception: the attack the opponent releases on
it. Alone, its ``action_checkAttack`` has no opponent and goes on to the next pill; in the
match, ``checkReleaseAttack`` [$9C1B] may put the opponent's stored halves into its top row
first. :func:`receive_attack` makes that difference after the step, so a tracker that sees (or
supposes) an attack can keep the player's exact state without the opponent's.

What an attack of ``size`` halves does (``checkReleaseAttack`` [$9C1B]; sizes above 4 send 4):
singles (``$80 | colour``) at field positions ``c, c+4`` (2), ``c, c+2, c+4`` (3) or ``c, c+2,
c+4, c+6`` (4) of row 0, ``c = frameCounter & 3`` for 2 and 3 and ``& 1`` for 4 (frameCounter
$43 of the frame whose main loop releases it), overwriting what is there; then
``nextAction = pillPlaced``, so the halves fall through ``checkDrop``. The colours are the
opponent's ``attackColors`` ($0329-$032C / $03A9-$03AC): the colour of each of its combo's
lines, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ACTION_PILL_PLACED = 1  # nextAction action_pillPlaced
ACTION_CHECK_ATTACK = 2  # nextAction action_checkAttack [$9BEE]
ACTION_INC_NEXT_ACTION = 5  # where a lone player's action_checkAttack goes
SINGLE = 0x80  # a single half's cell code ($8x)


def attack_cells(size: int, frame_counter: int) -> list[int]:
    """Field positions (row 0, columns 0..7) an attack of ``size`` halves (2..4; more is 4)
    lands on when released in a frame with ``frameCounter`` = ``frame_counter``. Raises
    ValueError for a size below 2 (no attack)."""
    if size < 2:
        raise ValueError(f"an attack has 2 or more halves, got {size}")
    if size == 2:
        return [frame_counter & 3, (frame_counter & 3) + 4]
    if size == 3:
        return [(frame_counter & 3) + k for k in (0, 2, 4)]
    return [(frame_counter & 1) + k for k in (0, 2, 4, 6)]


def released_attack(before_action: int, game: Any) -> bool:
    """Whether the step that took a lone player's Game from nextAction ``before_action`` to
    ``game`` ran ``action_checkAttack`` (the one step where :func:`receive_attack` applies)."""
    return before_action == ACTION_CHECK_ATTACK and int(game.next_action) == ACTION_INC_NEXT_ACTION


def receive_attack(game: Any, size: int, colors: Sequence[int]) -> None:
    """Apply an attack of ``size`` halves (2..4) of ``colors`` (one colour 0..2 per half,
    in attackColors order) to ``game`` (an engine.Game with nbPlayers 2) right after the step
    in which it ran ``action_checkAttack`` (:func:`released_attack`): the halves in row 0 and
    nextAction ``pillPlaced``, as the player in the match has them after that frame. Raises
    ValueError when the game is not right after that step or for bad sizes or colours."""
    if int(game.next_action) != ACTION_INC_NEXT_ACTION:
        raise ValueError(
            "receive_attack applies right after the step that ran action_checkAttack "
            f"(nextAction {ACTION_INC_NEXT_ACTION}), not at nextAction {int(game.next_action)}"
        )
    cells = attack_cells(size, int(game.frame_counter))
    if len(colors) < len(cells) or any(not 0 <= int(c) <= 2 for c in colors[: len(cells)]):
        raise ValueError(f"{len(cells)} colours 0..2 needed, got {list(colors)}")
    for pos, color in zip(cells, colors, strict=False):
        game.field[pos] = SINGLE | int(color)
    game.next_action[...] = ACTION_PILL_PLACED
