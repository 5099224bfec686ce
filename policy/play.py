"""Seeded games through the engine: one decision per spawn, the planner's masks to the lock.

The loop every policy shares (teacher, baselines, ONNX policy, data generation): from the level
start the game is stepped with no buttons to the first spawn state (engine._core.settle); at
each spawn the policy picks a reachable placement and the planner's masks for it are run to
the lock; then the engine resolves the clean-up, clears, cascades and the next throw itself
(settle again). It ends at stage clear, top-out, or a frame limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

import engine
from engine import _core, placement

STAGE_CLEAR = int(engine.Phase.STAGE_CLEAR)
TOP_OUT = int(engine.Phase.TOP_OUT)
PLAYING = int(engine.Phase.PLAYING)
SEND_PILL_FINISHED = placement.ACTION_SEND_PILL_FINISHED  # the spawn state (docs/POLICY.md)
MAX_SETTLE_FRAMES = 10_000
# The 9 ordered colour pairs (left/bottom, right/top) a next pill can have: 0 yellow, 1 red,
# 2 blue.
COLOUR_PAIRS_ORDERED = tuple((a, b) for a in range(3) for b in range(3))
DEFAULT_MAX_FRAMES = 100_000  # about 28 minutes of console time; a game past it is a time-out


@dataclass(frozen=True)
class Move:
    """A placement index (0..511) and the planner's masks uint8[lock_frame] to reach it."""

    placement: int
    masks: npt.NDArray[np.uint8]


class Policy(Protocol):
    """Anything that picks a reachable placement at a spawn state."""

    name: str

    def act(self, game: engine.Game) -> Move:
        """The decision at `game`, a spawn state. Must not change `game`."""
        ...


@dataclass(frozen=True)
class Episode:
    """Which game: level 0..24, speed 0..2, seed (16-bit RNG state; even, docs/POLICY.md) and
    the frameCounter value as levelIntro_delay starts (its parity sets the fast-drop frames)."""

    level: int
    speed: int
    seed: int
    frame_counter: int = 0

    def game(self) -> engine.Game:
        return engine.Game(self.level, self.speed, self.seed, self.frame_counter)


@dataclass(frozen=True)
class Result:
    """How one game went. frames: engine frames since the level state was made (the
    $80-frame levelIntro_delay and the first throw included) to the stage clear, the top-out,
    or the limit. pills: decisions made."""

    level: int
    speed: int
    seed: int
    cleared: bool
    topped_out: bool
    frames: int
    pills: int
    viruses_left: int

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


def at_spawn(game: engine.Game) -> bool:
    """True at a spawn state (engine.placement.at_spawn)."""
    return placement.at_spawn(game)


def to_spawn(game: engine.Game) -> int:
    """Steps `game` with no buttons to the next spawn state or a terminal phase; frames."""
    frames, _ = _core.settle(game, MAX_SETTLE_FRAMES)
    return int(frames)


def play(
    policy: Policy,
    episode: Episode,
    max_frames: int = DEFAULT_MAX_FRAMES,
    on_decision: Callable[[engine.Game, Move], None] | None = None,
) -> Result:
    """Plays one game with `policy`; `on_decision(game_at_spawn, decision)` sees each choice.

    Raises ValueError when the policy returns a placement whose masks do not lock the pill
    there (a policy bug, never a game outcome).
    """
    game = episode.game()
    to_spawn(game)
    pills = 0
    while at_spawn(game) and int(game.frame) < max_frames:
        decision = policy.act(game)
        if on_decision is not None:
            on_decision(game, decision)
        game.run(decision.masks)
        if not int(game.lock_event):
            raise ValueError(
                f"{policy.name}: placement {decision.placement} did not lock on its last mask"
            )
        pills += 1
        to_spawn(game)
    phase = int(game.phase)
    return Result(
        level=episode.level,
        speed=episode.speed,
        seed=episode.seed,
        cleared=phase == STAGE_CLEAR,
        topped_out=phase == TOP_OUT,
        frames=int(game.frame),
        pills=pills,
        viruses_left=int(game.virus_count),
    )


def episode_seeds(count: int, start: int) -> list[int]:
    """`count` distinct even 16-bit seeds from `start` (seeds 2k and 2k+1 make the same game,
    docs/LEVEL_GEN.md; 0 is the locked RNG and is skipped)."""
    if count < 0 or count > 0x7FFF:
        raise ValueError(f"count must be 0..32767, got {count}")
    out: list[int] = []
    s = start & 0xFFFE
    while len(out) < count:
        if s != 0:
            out.append(s)
        s = (s + 2) & 0xFFFF
    return out


def episodes(
    levels: Iterable[int], speeds: Iterable[int], count: int, seed_start: int
) -> Iterator[Episode]:
    """`count` episodes per (level, speed), seeds from `seed_start` (the same seeds for each
    cell), frame_counter from the seed so that both fast-drop parities occur."""
    seeds = episode_seeds(count, seed_start)
    for lv in levels:
        for sp in speeds:
            for s in seeds:
                yield Episode(int(lv), int(sp), s, (s >> 1) & 0xFF)
