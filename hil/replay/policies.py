"""What a policy would have chosen at each spawn of a replay: the game rebuilt from a reading, and
the live loop's policies and planner asked about it (plus a deepest-placement baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

import engine
from engine.constants import Phase
from hil.loop.decision import Policy
from hil.loop.policies import OnnxPolicy, make_policy
from hil.replay.common import U8, ReplayError, short_path
from perception.observation import (
    Observation,
)
from policy.play import COLOUR_PAIRS_ORDERED


class Decider(Protocol):
    """A placement policy for a spawn state (:class:`LivePolicy` or :class:`DeepestPolicy`).
    ``act`` raises ValueError when there is nothing to choose."""

    name: str

    def act(self, game: engine.Game) -> PolicyDecision: ...


@dataclass(frozen=True)
class PolicyDecision:
    """``placement`` index (docs/PLANNER.md), ``masks`` uint8 [frames] (the planner's inputs to
    lock it there, one per frame), ``reachable`` placements it was chosen among."""

    placement: int
    masks: U8
    reachable: int


class LivePolicy:
    """A policy of ``hil run`` asked as the live loop asks it (hil.loop.decision): the loop's
    planner (hil.loop.runtime.EnginePlanner, ``taps_only`` for the faster search) plans every
    reachable placement of the rebuilt spawn state, and the policy (hil.loop.policies: onnx,
    search or heuristic) chooses among them with ``choose(game, reachable)``."""

    def __init__(self, policy: Policy, name: str, taps_only: bool = False) -> None:
        from hil.loop.runtime import EnginePlanner

        self.policy = policy
        self.planner = EnginePlanner(taps_only)
        self.name = name

    def _plan(self, game: engine.Game) -> engine.Plan:
        plan = self.planner(game, np.zeros(0, np.uint8))
        if len(plan) == 0:
            raise ValueError(f"no placement to choose: plan status {plan.status}")
        return plan

    def act(self, game: engine.Game) -> PolicyDecision:
        plan = self._plan(game)
        best = int(self.policy.choose(game, plan.reachable))
        return PolicyDecision(best, plan.masks(best), len(plan))

    def act_without_next(self, game: engine.Game) -> int | None:
        """The placement ``hil run`` commits to for a pill pondered before its successor's
        colours are shown (hil.loop.ponder): the policy's ``choose_mean`` over them; None for
        a policy without one."""
        choose_mean = getattr(self.policy, "choose_mean", None)
        if choose_mean is None:
            return None
        plan = self._plan(game)
        return int(choose_mean(game, plan.reachable, COLOUR_PAIRS_ORDERED))


class DeepestPolicy:
    """A baseline in the live loop's policy shape (hil.loop.decision.Policy): of the reachable
    placements, the deepest (largest row, then the column nearest the middle, then the smallest
    index)."""

    name = "deepest"

    def choose(self, game: engine.Game, reachable: npt.ArrayLike) -> int:
        ok = np.asarray(reachable, bool)
        placements = [int(i) for i in np.flatnonzero(ok)]
        if not placements:
            raise ValueError("no placement to choose")
        return max(placements, key=lambda i: ((i % 128) // 8, -abs(i % 8 - 3.5), -i))


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


POLICIES = ("auto", "onnx", "search", "heuristic", "deepest")


def choose_policy(name: str, taps_only: bool = False, model: str | Path | None = None) -> Decider:
    """``auto`` or ``onnx``: the live loop's ONNX policy (hil.loop.policies.OnnxPolicy;
    ``model``: another policy ONNX file, default policy/models/policy.onnx); ``search`` and
    ``heuristic``: the live loop's (hil.loop.policies.make_policy); ``deepest``: the
    :class:`DeepestPolicy` baseline. Each is asked through :class:`LivePolicy` with the live
    loop's planner (``taps_only``: its faster search). Raises ReplayError for an unknown name
    or a missing or bad model."""
    if name not in POLICIES:
        raise ReplayError(f"policy must be one of {', '.join(POLICIES)}, got {name!r}")
    if name == "deepest":
        return LivePolicy(DeepestPolicy(), "deepest reachable placement (baseline)", taps_only)
    try:
        if name in ("auto", "onnx"):
            from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

            path = Path(model) if model is not None else DEFAULT_MODEL
            live: Policy = OnnxPolicy(PlacementPolicy(path))
            label = f"onnx placement policy ({short_path(path)})"
        else:
            live, label = make_policy(name), f"{name} policy"
    except (FileNotFoundError, ValueError) as e:
        raise ReplayError(f"the {name} policy: {e}") from None
    return LivePolicy(live, label, taps_only)
