"""The placement network (torch; training only) and its ONNX export.

A small fully convolutional net over the 16x8 board: the pill colours and game settings
(features.extras) enter every layer as a per-channel bias, and a 1x1 head gives 4 logits per
cell, one per rotation, which flatten to the placement index rotation*128 + row*8 + col
(docs/PLANNER.md). Unreachable placements get MASKED (the mask is an input of the graph, so
torch and onnxruntime return the same masked logits).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from engine.placement import NUM_PLACEMENTS
from policy.features import BOARD_PLANES, COLS, EXTRAS, ROWS

MASKED = -1.0e9  # logit of an unreachable placement
INPUT_NAMES = ("board", "extras", "mask")
OUTPUT_NAME = "logits"


class Block(nn.Module):
    """Residual block: two 3x3 convolutions, the extras as a bias on the first."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.film = nn.Linear(EXTRAS, channels)

    def forward(self, x: torch.Tensor, extras: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x) + self.film(extras)[:, :, None, None])
        return torch.relu(x + self.conv2(h))


def relative_planes(board: torch.Tensor, extras: torch.Tensor) -> torch.Tensor:
    """float32[B, 4, 16, 8]: 1 where a cell (virus or piece) has the colour of the current
    pill's 1st / 2nd half and of the next pill's 1st / 2nd half (features.py layout). Computed
    in the graph so that the input stays the bridge's tensors."""
    colour = board[:, 1:4] + board[:, 4:7]  # [B, 3, 16, 8] one-hot colour of occupied cells
    pills = extras[:, 0:12].reshape(-1, 4, 3)  # [B, 4, 3]
    return torch.einsum("bkc,bcyx->bkyx", pills, colour)


class PlacementNet(nn.Module):
    """board float32[B, 11, 16, 8], extras float32[B, 18], mask bool[B, 512] ->
    logits float32[B, 512] (MASKED where mask is False)."""

    def __init__(self, channels: int = 32, blocks: int = 5) -> None:
        super().__init__()
        if channels < 1 or blocks < 1:
            raise ValueError(f"channels and blocks must be >= 1, got {channels}, {blocks}")
        self.channels = channels
        self.num_blocks = blocks
        self.stem = nn.Conv2d(BOARD_PLANES + 4, channels, 3, padding=1)
        self.stem_film = nn.Linear(EXTRAS, channels)
        self.blocks = nn.ModuleList(Block(channels) for _ in range(blocks))
        self.head = nn.Conv2d(channels, 4, 1)

    def forward(
        self, board: torch.Tensor, extras: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        x = torch.cat([board, relative_planes(board, extras)], dim=1)
        x = torch.relu(self.stem(x) + self.stem_film(extras)[:, :, None, None])
        for block in self.blocks:
            x = block(x, extras)
        logits = self.head(x).reshape(x.shape[0], NUM_PLACEMENTS)
        return torch.where(mask, logits, torch.full_like(logits, MASKED))


def export_onnx(model: nn.Module, path: str | Path) -> None:
    """Writes `model` (a PlacementNet, or a module with its signature such as
    policy.ensemble.PolicyEnsemble) as ONNX (opset 17, dynamic batch) to `path`."""
    model = model.eval()
    board = torch.zeros(1, BOARD_PLANES, ROWS, COLS)
    extras = torch.zeros(1, EXTRAS)
    mask = torch.ones(1, NUM_PLACEMENTS, dtype=torch.bool)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # The TorchScript exporter: the torch.export one needs onnxscript, which the train extra
    # does not install; torch 2.13 warns that the former is legacy.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        _export(model, board, extras, mask, path)


def _export(
    model: nn.Module,
    board: torch.Tensor,
    extras: torch.Tensor,
    mask: torch.Tensor,
    path: str | Path,
) -> None:
    torch.onnx.export(
        model,
        (board, extras, mask),
        str(path),
        input_names=list(INPUT_NAMES),
        output_names=[OUTPUT_NAME],
        dynamic_axes={n: {0: "batch"} for n in (*INPUT_NAMES, OUTPUT_NAME)},
        opset_version=17,
        dynamo=False,
    )


def torch_logits(
    model: PlacementNet, board: np.ndarray, extras: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """float32[B, 512] masked logits from numpy inputs (no gradients)."""
    with torch.no_grad():
        out = model(
            torch.from_numpy(np.ascontiguousarray(board, dtype=np.float32)),
            torch.from_numpy(np.ascontiguousarray(extras, dtype=np.float32)),
            torch.from_numpy(np.ascontiguousarray(mask, dtype=bool)),
        )
    return out.numpy()
