"""onnxruntime inference of the placement network with the planner's mask (no torch here).

policy = PlacementPolicy()                       # policy/models/policy.onnx, one thread
placement = policy.choose(observation, reachable)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort

import engine
from engine import _core
from engine.placement import NUM_PLACEMENTS
from policy.features import SpawnInput, encode
from policy.play import TOP_OUT, Move

DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "policy.onnx"


def survival_mask(
    game: engine.Game, reachable: npt.ArrayLike, taps_only: bool = False
) -> npt.NDArray[np.bool_]:
    """bool[512]: `reachable` less the placements whose lock tops out at once (the next pill
    cannot spawn: action_sendPill, pillMoveValidation $90E3), found by one engine expansion
    (engine._core.expand: each placement locked, cleared and settled to the next spawn or the
    end). When every reachable placement tops out, `reachable` is returned unchanged. No
    values, no deeper ply: a rule like the planner's reachability, not a search."""
    mask = np.asarray(reachable, dtype=bool).reshape(-1).copy()
    e = _core.expand(game, taps_only=taps_only)
    phases = np.asarray(e.phases)
    lose = phases == TOP_OUT
    if lose.any() and not lose.all():
        mask[np.asarray(e.placements)[lose]] = False
    return mask


class PlacementPolicy:
    """The shipped placement network.

    model: path of the ONNX file. threads: onnxruntime intra-op threads (1: one core).
    taps_only: plan with engine.plan(taps_only=True) in act() (faster, may miss placements).
    survive: act() never picks a placement that tops out at once while another does not
    (survival_mask; one engine expansion a decision, ~0.3 ms of one core at the median, 1.5 ms
    at p99, docs/POLICY.md "Survival mask"; name "onnx-survive").
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

    def choose(self, obs: SpawnInput, reachable: npt.ArrayLike) -> int:
        """The highest-scoring reachable placement index 0..511.

        reachable: bool[512] (engine Plan.reachable). Raises ValueError when no placement is
        reachable or the observation is out of range.
        """
        mask = np.asarray(reachable, dtype=bool).reshape(-1)
        if mask.shape != (NUM_PLACEMENTS,):
            raise ValueError(f"reachable must have 512 entries, got {mask.shape}")
        if not mask.any():
            raise ValueError("no reachable placement to choose from")
        board, extras = encode(obs)
        logits = self.logits(board, extras, mask[None])[0]
        # The graph already masked; this guards against a model file that does not.
        return int(np.argmax(np.where(mask, logits, -np.inf)))

    def choose_mean(self, observations: Sequence[SpawnInput], reachable: npt.ArrayLike) -> int:
        """The reachable placement best on average over ``observations`` (the mean of the
        network's log-probabilities over the reachable placements; one batch): the choice
        for a pill whose successor is not known yet, one observation per successor it may
        have. Raises ValueError as :meth:`choose`."""
        mask = np.asarray(reachable, dtype=bool).reshape(-1)
        if mask.shape != (NUM_PLACEMENTS,):
            raise ValueError(f"reachable must have 512 entries, got {mask.shape}")
        if not mask.any():
            raise ValueError("no reachable placement to choose from")
        if not observations:
            raise ValueError("no observation to choose over")
        feats = [encode(o) for o in observations]
        board = np.concatenate([f[0] for f in feats])
        extras = np.concatenate([f[1] for f in feats])
        logits = self.logits(board, extras, np.repeat(mask[None], len(feats), 0))
        z = np.where(mask, logits.astype(np.float64), -np.inf)
        z -= z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        return int(np.argmax(np.where(mask, logp.mean(axis=0), -np.inf)))

    def act(self, game: engine.Game) -> Move:
        """Plans from `game` (a spawn state) and picks with choose(). Raises ValueError when
        there is no pill to plan."""
        plan = _core.plan(game, taps_only=self.taps_only)
        if len(plan) == 0:
            raise ValueError(f"no placement to choose: plan status {plan.status}")
        reachable = plan.reachable
        if self.survive:
            reachable = survival_mask(game, reachable, self.taps_only)
        idx = self.choose(SpawnInput.from_game(game), reachable)
        return Move(idx, plan.masks(idx))


__all__ = ["DEFAULT_MODEL", "PlacementPolicy", "survival_mask"]
