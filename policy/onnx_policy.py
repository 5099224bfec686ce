"""onnxruntime inference of the placement network with the planner's mask (no torch here).

policy = PlacementPolicy()                       # policy/models/policy.onnx, one thread
placement = policy.choose(observation, reachable)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

import engine
from engine import _core
from engine.placement import NUM_PLACEMENTS
from policy.features import SpawnInput, encode
from policy.play import TOP_OUT, Move, to_spawn

DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "policy.onnx"


def first_surviving(
    game: engine.Game, plan: Any, order: npt.ArrayLike, alive: dict[int, bool] | None = None
) -> int:
    """The first placement of `order` (placement indices 0..511, best first, each one of
    `plan`'s: engine.plan of `game`) whose pill, played on a copy of `game` with the plan's
    own inputs (plan.masks) and settled to the next spawn (policy.play.to_spawn), does not top
    out (the next pill cannot spawn: action_sendPill, pillMoveValidation $90E3); order[0]
    when every one of them tops out. `game`: a falling pill at any frame (a spawn state, or
    the live loop's state where its first new input takes effect). Exact (the planner's
    inputs played frame by frame); no values, no deeper ply: a rule like the planner's
    reachability, not a search. Cost: one copy, the pill's frames and the settle for the
    first choice that lives (usually order[0]). `alive`: a memo {placement: lives} shared by
    calls on the same `game` and `plan` (a pondered pill's 9 choices: whether the next pill
    can spawn does not depend on its colours). Raises ValueError for an empty `order`."""
    ranked = np.asarray(order, dtype=np.int64).reshape(-1)
    if ranked.size == 0:
        raise ValueError("no placement to choose")
    memo: dict[int, bool] = {} if alive is None else alive
    for idx in (int(i) for i in ranked):
        if idx not in memo:
            child = game.clone()
            child.run(np.asarray(plan.masks(idx), dtype=np.uint8))
            to_spawn(child)
            memo[idx] = int(child.phase) != TOP_OUT
        if memo[idx]:
            return idx
    return int(ranked[0])


class PlacementPolicy:
    """The shipped placement network.

    model: path of the ONNX file. threads: onnxruntime intra-op threads (1: one core).
    taps_only: plan with engine.plan(taps_only=True) in act() (faster, may miss placements).
    survive: act() never picks a placement that tops out at once while another does not:
    the best-ranked one that lives (first_surviving; docs/POLICY.md "Survival rule"; name
    "onnx-survive").
    The shipped model is the int8 copy of the trained ensemble (policy.quantize; the float32
    ensemble is policy/models/policy_fp32.onnx). Raises FileNotFoundError when the model file
    is missing, ValueError when onnxruntime cannot load it.
    """

    name = "onnx"

    def __init__(
        self,
        model: str | Path = DEFAULT_MODEL,
        threads: int = 1,
        taps_only: bool = False,
        survive: bool = False,
    ) -> None:
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(f"policy model not found: {path} (see docs/POLICY.md)")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            self.session = ort.InferenceSession(
                str(path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's InvalidProtobuf, InvalidGraph, Fail, ...
            raise ValueError(f"{path}: not an ONNX model onnxruntime can run ({exc})") from exc
        self.taps_only = taps_only
        self.survive = survive
        if survive:
            self.name = "onnx-survive"

    def logits(
        self, board: npt.NDArray[np.float32], extras: npt.NDArray[np.float32], mask: npt.ArrayLike
    ) -> npt.NDArray[np.float32]:
        """Masked logits float32[B, 512] for board [B, 11, 16, 8], extras [B, 18], mask [B, 512]."""
        m = np.asarray(mask, dtype=bool).reshape(-1, NUM_PLACEMENTS)
        (out,) = self.session.run(
            None,
            {
                "board": np.ascontiguousarray(board, dtype=np.float32),
                "extras": np.ascontiguousarray(extras, dtype=np.float32),
                "mask": m,
            },
        )
        return np.asarray(out, dtype=np.float32)

    def ranking(
        self, observations: SpawnInput | Sequence[SpawnInput], reachable: npt.ArrayLike
    ) -> npt.NDArray[np.int64]:
        """The reachable placement indices int64[R], best first: by the network's
        log-probability over the reachable placements, averaged over `observations` when
        several are given (one batch; the ranking for a pill whose successor is not known yet,
        one observation per successor it may have). Ties keep index order.

        reachable: bool[512] (engine Plan.reachable). Raises ValueError when no placement is
        reachable, no observation is given or one is out of range.
        """
        logp, ok = self._log_probs(observations, reachable)
        mean = logp.mean(axis=0)
        return ok[np.argsort(-mean[ok], kind="stable")]

    def rankings(
        self, observations: Sequence[SpawnInput], reachable: npt.ArrayLike
    ) -> list[npt.NDArray[np.int64]]:
        """ranking() of each observation alone, in one batch (a pondered pill's 9 next
        pills). Raises ValueError as :meth:`ranking`."""
        logp, ok = self._log_probs(observations, reachable)
        return [ok[np.argsort(-row[ok], kind="stable")] for row in logp]

    def _log_probs(
        self, observations: SpawnInput | Sequence[SpawnInput], reachable: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        mask = np.asarray(reachable, dtype=bool).reshape(-1)
        if mask.shape != (NUM_PLACEMENTS,):
            raise ValueError(f"reachable must have 512 entries, got {mask.shape}")
        if not mask.any():
            raise ValueError("no reachable placement to choose from")
        obs = [observations] if isinstance(observations, SpawnInput) else list(observations)
        if not obs:
            raise ValueError("no observation to choose over")
        feats = [encode(o) for o in obs]
        board = np.concatenate([f[0] for f in feats])
        extras = np.concatenate([f[1] for f in feats])
        logits = self.logits(board, extras, np.repeat(mask[None], len(feats), 0))
        # The graph already masks; this guards against a model file that does not.
        z = np.where(mask, logits.astype(np.float64), -np.inf)
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return logp, np.flatnonzero(mask)

    def choose(self, obs: SpawnInput, reachable: npt.ArrayLike) -> int:
        """The highest-scoring reachable placement index 0..511 (ranking()[0]).

        reachable: bool[512] (engine Plan.reachable). Raises ValueError when no placement is
        reachable or the observation is out of range.
        """
        return int(self.ranking(obs, reachable)[0])

    def act(self, game: engine.Game) -> Move:
        """Plans from `game` (a spawn state) and picks the best-ranked placement (ranking();
        with survive, the best-ranked that does not top out at once: first_surviving).
        Raises ValueError when there is no pill to plan."""
        plan = _core.plan(game, taps_only=self.taps_only)
        if len(plan) == 0:
            raise ValueError(f"no placement to choose: plan status {plan.status}")
        order = self.ranking(SpawnInput.from_game(game), plan.reachable)
        idx = first_surviving(game, plan, order) if self.survive else int(order[0])
        return Move(idx, plan.masks(idx))


__all__ = ["DEFAULT_MODEL", "PlacementPolicy", "first_surviving"]
