"""Pondering in the live loop (issue 20): pill N+1 decided while pill N falls, its masks put on
the wire before its spawn is seen.

The tracker's shadow state is frame-exact, so right after decision N is scheduled the state at
spawn N+1 follows from it: decision N's masks, then no buttons until the next pill can be
moved (engine.Game, as policy/ponder.py ``predict``). One thing is not known then: the colours
of pill N+2, which the preview shows only from action_sendPillFinished on, about when pill N+1
spawns, and which the policy reads. So :func:`ponder` plans once from the predicted spawn
(the reachable placements do not depend on them) and lets the policy choose for each of the 9
ordered colour pairs of pill N+2. The frames from the spawn on on which all 9 choices press
the same buttons (``common``; the whole plan when they agree, which they mostly do) are
scheduled before the spawn; when the tracker reports spawn N+1 with N+2's colours read, the
choice for those colours is taken (:meth:`Ahead.take`) if the tracker's state at the spawn is
the predicted one, byte for byte, and the frames already played agree with it; its remaining
masks are scheduled from the first free frame. Otherwise (a desync, a re-sync, colours not
read, a frame that played otherwise) the runtime decides at the spawn as without pondering.

Margin (the summary's ``ponder.margin_frames``): for each pill, the spawn frame minus the
console frame on which the first of its masks went on the wire; positive: before the spawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

import engine
from engine.placement import pill_falling
from policy.play import COLOUR_PAIRS_ORDERED

U8 = npt.NDArray[np.uint8]
MAX_SETTLE_FRAMES = 400  # lock -> next spawn: clears, gravity and the throw take far fewer


@dataclass
class Ahead:
    """Pill ``pill`` decided during the previous pill's fall.

    spawn: console frame of its spawn (the first frame it can be moved). predicted: the
    engine.Game before that frame (its next colours as the shadow had them). choices: per
    ordered colour pair (0 yellow, 1 red, 2 blue) of the pill after it, (placement index,
    masks uint8[n] from ``spawn`` to the lock). common: uint8[L], the masks all choices share
    from ``spawn`` on. sent_frame: the console frame ``common`` was scheduled in (None: not
    sent). ms: wall time of the pondering (milliseconds); cpu_ms: its thread's CPU time
    (time.thread_time: what it took of one core; ms - cpu_ms is time spent waiting for a core
    or for the interpreter lock)."""

    pill: int
    spawn: int
    predicted: engine.Game
    choices: dict[tuple[int, int], tuple[int, U8]]
    common: U8
    ms: float = 0.0
    cpu_ms: float = 0.0
    sent_frame: int | None = None
    late: bool = False  # the spawn came within reach of the first free frame before sending
    reason: str = ""  # why take() gave None
    # The choice was made without the successor's colours (``choose_mean``): the 9 choices
    # pressed otherwise within commit_frames of the spawn.
    without_next: bool = False

    @property
    def agreed(self) -> bool:
        """All 9 choices are the same placement with the same masks."""
        idx, masks = next(iter(self.choices.values()))
        same = all(p == idx and len(m) == len(masks) for p, m in self.choices.values())
        return same and len(self.common) == len(masks)

    def take(
        self,
        state: engine.Game,
        spawns: int,
        pair: tuple[int, int] | None,
        played: Callable[[int], int],
        first_free: int,
    ) -> tuple[int, U8, int] | None:
        """The choice for the pill after, if the tracker's ``state`` before frame ``spawn``
        (``spawns`` pills spawned by then) is the predicted one byte for byte but for the next
        colours, ``pair`` is those colours as read (None: not read), and every frame from the
        spawn to ``first_free`` - 1 played (``played(frame)``: its mask as scheduled or latched)
        what the choice presses. Returns (placement, masks from spawn to the lock, the index
        of the first mask still to send: ``len(masks)`` when all have played), or None (then
        decide at the spawn; ``reason`` says why)."""
        if pair is None:
            self.reason = "the next colours were not read"
            return None
        if spawns != self.pill or not pill_falling(state):
            self.reason = "no spawn at the predicted frame"
            return None
        expect = self.predicted.clone()
        expect.next_colors[:] = pair
        if bytes(expect.state_bytes()) != bytes(state.state_bytes()):
            self.reason = "the spawn state is not the predicted one"
            return None
        placement, masks = self.choices[pair]
        # Frames before the first free one have played; all of them when the whole plan was
        # sent before the spawn and the pill has locked since (nothing left to send).
        start = min(max(0, first_free - self.spawn), len(masks))
        for k in range(start):
            if int(played(self.spawn + k)) != int(masks[k]):
                self.reason = "a frame already played pressed otherwise"
                return None
        return placement, masks, start


def next_spawn(game: engine.Game, masks: Sequence[int] | U8) -> tuple[engine.Game, int] | None:
    """The state before the first frame the next pill can be moved in, after ``masks`` (uint8,
    one a frame from ``game``) lock ``game``'s falling pill, then no buttons; and the frames
    from ``game`` to it. None when the pill does not lock on the last mask or no pill can move
    within MAX_SETTLE_FRAMES after (stage clear, top-out). ``game`` is not changed."""
    pred = game.clone()
    pred.run(np.asarray(masks, np.uint8))
    if not int(pred.lock_event):
        return None
    frames = len(masks)
    for _ in range(MAX_SETTLE_FRAMES):
        if pill_falling(pred):
            return pred, frames
        pred.step(0)
        frames += 1
    return None


def choose_ahead(
    pred: engine.Game,
    plan: Any,
    choose: Callable[[engine.Game, Any], int],
    choose_pairs: Callable[[engine.Game, Any, Sequence[tuple[int, int]]], dict] | None = None,
    commit_frames: int = 0,
    choose_mean: Callable[[engine.Game, Any, Sequence[tuple[int, int]]], int] | None = None,
) -> tuple[dict[tuple[int, int], tuple[int, U8]], int, bool]:
    """The pondered choices at a spawn state ``pred`` (``plan``: engine.plan of it), as
    :func:`ponder` makes them: (per ordered next pill colour pair: (placement, masks uint8[n]
    from the spawn to the lock), the frames from the spawn on that every choice presses
    alike, whether the choice was made without the next pill: ``choose_mean``'s for every
    pair, when the 9 choices differ within ``commit_frames`` of the spawn). ``pred`` is not
    changed. hil.samegame replays a network run's choices with it."""
    choices: dict[tuple[int, int], tuple[int, U8]] = {}
    by_placement: dict[int, U8] = {}
    picked = (
        dict(choose_pairs(pred, plan.reachable, COLOUR_PAIRS_ORDERED))
        if choose_pairs is not None
        else {}
    )
    for pair in COLOUR_PAIRS_ORDERED:
        if pair in picked:
            idx = int(picked[pair])
        else:
            h = pred.clone()
            h.next_colors[:] = pair
            idx = int(choose(h, plan.reachable))
        if idx not in by_placement:
            by_placement[idx] = np.asarray(plan.masks(idx), np.uint8)
        choices[pair] = (idx, by_placement[idx])
    common = _common(choices)
    without_next = False
    if choose_mean is not None and common < min(commit_frames, _shortest(choices)):
        without_next = True
        idx = int(choose_mean(pred, plan.reachable, COLOUR_PAIRS_ORDERED))
        one = (idx, by_placement.get(idx, np.asarray(plan.masks(idx), np.uint8)))
        choices = dict.fromkeys(COLOUR_PAIRS_ORDERED, one)
        common = len(one[1])
    return choices, common, without_next


def ponder(
    pill: int,
    g0: int,
    game: engine.Game,
    full: Sequence[int] | U8,
    planner: Callable[[engine.Game, U8], Any],
    choose: Callable[[engine.Game, Any], int],
    choose_pairs: Callable[[engine.Game, Any, Sequence[tuple[int, int]]], dict] | None = None,
    commit_frames: int = 0,
    choose_mean: Callable[[engine.Game, Any, Sequence[tuple[int, int]]], int] | None = None,
) -> Ahead | None:
    """Pill ``pill + 1`` decided from the state ``game`` before console frame ``g0`` and the
    masks ``full`` (uint8, one per frame from ``g0``) that lock pill ``pill``: ``planner(state,
    prefix)`` as the runtime's (engine.plan), ``choose(state, reachable)`` the policy's;
    ``choose_pairs(state, reachable, pairs)`` -> {pair: placement}, when the policy has it,
    makes choose()'s choice for every next pill at once (the search shares its work).

    ``commit_frames``: the frames from a spawn until a choice taken when the spawn is seen
    can still act (the capture's latency and the loop's reaction). When the 9 choices press
    the same buttons for fewer frames than that, the one made from the spawn's colours alone
    would come too late: ``choose_mean(state, reachable, pairs)`` (the policy's choice over
    every next pill, e.g. its mean) is then taken for every pair, so the whole plan goes on
    the wire before the spawn.

    ``game`` is not changed. None when the pill does not lock on the last mask, the game ends
    before another pill can move (stage clear, top-out), or nothing is reachable."""
    import time

    t0 = time.perf_counter()
    c0 = time.thread_time()
    got = next_spawn(game, full)
    if got is None:
        return None
    pred, frames = got
    frame = g0 + frames
    plan = planner(pred, np.zeros(0, np.uint8))
    if int(plan.status) != 0 or len(plan) == 0:
        return None
    choices, common, without_next = choose_ahead(
        pred, plan, choose, choose_pairs, commit_frames, choose_mean
    )
    masks = [m for _, m in choices.values()]
    return Ahead(
        pill=pill + 1,
        spawn=frame,
        predicted=pred,
        choices=choices,
        common=masks[0][:common].copy(),
        ms=(time.perf_counter() - t0) * 1e3,
        cpu_ms=(time.thread_time() - c0) * 1e3,
        without_next=without_next,
    )


def _shortest(choices: dict[tuple[int, int], tuple[int, U8]]) -> int:
    return min(len(m) for _, m in choices.values())


def _common(choices: dict[tuple[int, int], tuple[int, U8]]) -> int:
    """Frames from the spawn on on which every choice presses the same buttons."""
    masks = [m for _, m in choices.values()]
    n = _shortest(choices)
    common = 0
    while common < n and all(m[common] == masks[0][common] for m in masks):
        common += 1
    return common


@dataclass
class PonderStats:
    """Counts for the summary: pills pondered (decisions ready before their spawn), sent early
    (their common masks on the wire before the spawn; ``whole``: the whole plan), taken (the
    pondered choice played), replanned (decided at the spawn instead), and the margin per
    pill decided (frames; positive: the first mask went out before the spawn): ``margins`` of
    the pills whose pondered plan went out, ``at_spawn_margins`` of those decided when their
    spawn was seen (a level's first pill, the pill after a desync, a re-sync or a
    reconnection, a pondered choice replanned)."""

    pondered: int = 0
    sent_early: int = 0
    whole: int = 0
    taken: int = 0
    replanned: int = 0
    late: int = 0
    unfinished: int = 0  # the spawn came before the worker had pondered the pill
    refined: int = 0  # the full policy's choice replaced the quick one's before the spawn
    refined_late: int = 0  # ... came too late to replace it (the quick one played)
    margins: list[int] = field(default_factory=list)
    at_spawn_margins: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    # (wall ms, CPU ms) of every pondering that finished, per policy: "quick" (the prior's
    # choice, in real time) and "full" (the policy's own), whether its result was used or not.
    work: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    # the frames from a spawn within which the 9 choices must press alike, else the choice is
    # made without the next pill (ponder's commit_frames; None until a pill is pondered)
    commit_frames: int | None = None

    def add_work(self, kind: str, a: Ahead) -> None:
        self.work.setdefault(kind, []).append((a.ms, a.cpu_ms))

    def summary(self) -> dict[str, Any]:
        def pct(values: Sequence[float], q: float) -> float:
            return float(np.percentile(np.asarray(values, float), q)) if values else float("nan")

        def margin(m: Sequence[int]) -> dict[str, Any] | None:
            if not m:
                return None
            return {
                "n": len(m),
                "min": int(min(m)),
                "p1": round(pct(m, 1), 1),
                "p50": round(pct(m, 50), 1),
                "max": int(max(m)),
            }

        return {
            "pondered": self.pondered,
            "sent_before_spawn": self.sent_early,
            "whole_plan_before_spawn": self.whole,
            "taken": self.taken,
            "decided_at_spawn_instead": self.replanned,
            "too_late_to_send": self.late,
            "unfinished_at_spawn": self.unfinished,
            "refined": self.refined,
            "refined_too_late": self.refined_late,
            "commit_frames": self.commit_frames,
            "margin_frames": margin(self.margins),
            "margin_at_spawn_frames": margin(self.at_spawn_margins),
            "ponder_ms": None
            if not self.ms
            else {"p50": round(pct(self.ms, 50), 2), "p99": round(pct(self.ms, 99), 2)},
            "work_ms": {
                kind: {
                    "n": len(w),
                    "wall_p50": round(pct([x for x, _ in w], 50), 2),
                    "wall_p99": round(pct([x for x, _ in w], 99), 2),
                    "cpu_p50": round(pct([c for _, c in w], 50), 2),
                    "cpu_p99": round(pct([c for _, c in w], 99), 2),
                }
                for kind, w in sorted(self.work.items())
            },
        }
