"""What a policy would have chosen at each spawn of a replay: the game rebuilt from a reading, the
ONNX policy, the deepest-placement baseline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import engine
from engine.constants import Phase
from hil.loop.replay.common import U8, ReplayError, short_path
from perception.observation import (
    Observation,
)


class Decider(Protocol):
    """A placement policy for a spawn state: :class:`OnnxPlacementPolicy` or
    :class:`DeepestPolicy`. ``act`` raises ValueError when there is nothing to choose."""

    name: str

    def act(self, game: engine.Game) -> PolicyDecision: ...


@dataclass(frozen=True)
class PolicyDecision:
    """``placement`` index (docs/PLANNER.md), ``masks`` uint8 [frames] (the planner's inputs to
    lock it there, one per frame), ``reachable`` placements it was chosen among."""

    placement: int
    masks: U8
    reachable: int


def _plan(game: engine.Game, taps_only: bool) -> engine.Plan:
    plan = engine.plan(game, taps_only=taps_only)
    if len(plan) == 0:
        raise ValueError(f"no placement to choose: plan status {plan.status}")
    return plan


class OnnxPlacementPolicy:
    """The policy room's network (policy.onnx_policy.PlacementPolicy, ONNX Runtime, one
    thread) choosing among the placements ``engine.plan`` finds reachable (``taps_only`` for
    the faster search), on ``policy.features.SpawnInput.from_game`` of the rebuilt game, as
    ``hil run`` asks it (hil/loop/runtime.py, make_policy("onnx")). ``model``: the ONNX file
    (default policy/models/policy.onnx). Raises FileNotFoundError for a missing model."""

    def __init__(self, model: str | Path | None = None, taps_only: bool = False) -> None:
        from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

        path = Path(model) if model is not None else DEFAULT_MODEL
        self.net = PlacementPolicy(path)
        self.taps_only = taps_only
        self.name = f"onnx placement policy ({short_path(path)})"

    def act(self, game: engine.Game) -> PolicyDecision:
        from policy.features import SpawnInput

        plan = _plan(game, self.taps_only)
        best = int(self.net.choose(SpawnInput.from_game(game), plan.reachable))
        return PolicyDecision(best, plan.masks(best), len(plan))

    def act_without_next(self, game: engine.Game) -> int:
        """The placement ``hil run`` commits to for a pill pondered before its successor's
        colours are shown (hil.loop.ponder, ``choose_mean``): best on average over them."""
        from hil.loop.runtime import next_pill_observations
        from policy.play import COLOUR_PAIRS_ORDERED as PAIRS

        plan = _plan(game, self.taps_only)
        return self.net.choose_mean(next_pill_observations(game, PAIRS), plan.reachable)


class DeepestPolicy:
    """A baseline: all reachable placements from ``engine.plan`` (``taps_only`` for the faster
    search), the deepest one taken (largest row, then the column nearest the middle, then the
    smallest index)."""

    name = "deepest reachable placement (baseline)"

    def __init__(self, taps_only: bool = False) -> None:
        self.taps_only = taps_only

    def act(self, game: engine.Game) -> PolicyDecision:
        plan = _plan(game, self.taps_only)
        placements = [int(p) for p in plan.placements]
        best = max(placements, key=lambda i: ((i % 128) // 8, -abs(i % 8 - 3.5), -i))
        return PolicyDecision(best, plan.masks(best), len(placements))


def speed_ups_at_spawn(pills: int) -> int:
    """Speed-ups in effect at the ``pills``-th spawn of a level (1 = its first pill).

    initData_level leaves the BCD pill counter at 1; every pill sent adds one
    (generateNextPill $8E9D) and each time its low digit wraps to 0 a speed-up is added, at
    most 49 (kSpeedUpsMax $31); engine/src/game.cpp finish_init and generate_next_pill. So the
    n-th pill falls with (n + 1) // 10 speed-ups. Raises ValueError for a negative count.
    """
    if pills < 0:
        raise ValueError(f"pills must be >= 0, got {pills}")
    return min(49, (pills + 1) // 10)


def game_from_reading(
    r: Observation,
    level: int,
    speed: int,
    speed_ups: int = 0,
    pill_state_frame: int | None = None,
) -> engine.Game:
    """An engine game in the state an Observation shows at a spawn: the field, the falling pill
    and the next pill, ``speed_ups`` (counted from the spawns seen, :func:`speed_ups_at_spawn`);
    gravity counter, DAS and held buttons are unknown from a picture and start at 0 (as they
    are at a spawn); frameCounter (its parity times the fast drop) is ``pill_state_frame``
    (FrameFacts) when the source knows it (a simulated game starts at 0), else 0. Raises
    ValueError without a falling pill or with speed_ups outside 0..49."""
    pill = r.falling
    if pill is None:
        raise ValueError("a decision needs a falling pill in the reading")
    if not 0 <= speed_ups <= 49:
        raise ValueError(f"speed_ups must be 0..49, got {speed_ups}")
    g = engine.Game(level, speed, 0x8988)
    g.field[:] = r.field.reshape(-1)
    g.pill_x[...] = pill.x
    g.pill_y[...] = pill.y
    g.pill_rotation[...] = pill.rotation
    g.pill_colors[:] = pill.colors
    if r.next_colors is not None:
        g.next_colors[:] = r.next_colors
    g.phase[...] = int(Phase.PLAYING)
    g.next_action[...] = 0  # action_pillFalling
    for name in ("speed_counter", "hor_velocity", "btns_held", "btns_pressed"):
        getattr(g, name)[...] = 0
    g.speed_ups[...] = speed_ups
    g.frame_counter[...] = (pill_state_frame or 0) & 0xFF
    g.status[...] = 0xFF  # no row redraw pending
    return g


POLICIES = ("auto", "onnx", "deepest")


def choose_policy(name: str, taps_only: bool = False, model: str | Path | None = None) -> Decider:
    """``auto`` or ``onnx``: :class:`OnnxPlacementPolicy` (``model``: another policy ONNX
    file); ``deepest``: :class:`DeepestPolicy`. ``taps_only``: the planner's faster search.
    Raises ReplayError for an unknown name or a missing or bad model."""
    if name not in POLICIES:
        raise ReplayError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}")
    if name == "deepest":
        return DeepestPolicy(taps_only=taps_only)
    try:
        return OnnxPlacementPolicy(model, taps_only=taps_only)
    except (FileNotFoundError, ValueError) as e:
        raise ReplayError(f"the ONNX placement policy: {e}") from None
