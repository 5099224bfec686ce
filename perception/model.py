"""BoardNet: a small UNet over the model's crop (perception.layout), in torch (training only).

Input: uint8 [N, 208, 144, 3] RGB, the crop as perception.preprocess builds it (NHWC; the
graph does the cast, scaling and transpose, so the runtime passes the array as is).

Encoder: three 2x2 stride-2 convolutions ("patchify" steps: every NES pixel is seen once, the
position inside a cell is kept in the channels) give one feature vector per 8x8 cell (1/8,
26 x 18); three 3x3 convolutions refine them over the bottle only (19 x 10 cells:
the field, the neck row, one cell of margin), where the exact answers are needed; a 2x2
stride-2 and a 3x3 convolution give the context at 1/16 over the whole crop (13 x 9).
Decoder: the 1/16 features upsampled to 1/8 and joined with the bottle's 1/8 features (the
UNet skip), then a 1x1 and a 3x3 convolution: per-cell features of the bottle. The work goes
where the answers are: the 3x3 convolutions at cell resolution see 190 cells, not 468.

Heads (outputs of the ONNX graph, all probabilities):

- ``cells`` float32 [N, 22, 16, 8]: softmax over the cell classes of each field cell;
- ``sprite`` float32 [N, 4, 17, 8]: softmax over the falling-pill sprite classes of each cell
  of the neck row and the field;
- ``next`` float32 [N, 7]: sigmoid of "a next pill is drawn", then softmax over the colours of
  its 1st and 2nd half (game order) - from the cell (1/8) features of the area of the throw
  arc (10 x 11 cells, reduced to 8 channels), flattened so the head knows where on the arc the
  pill is (its rotation depends on that);
- ``kind`` float32 [N, 6]: softmax over perception.layout.KindLabel, from the 1/16 features
  pooled over the whole crop (mean and max).

Training uses the logits (``forward(x, logits=True)``).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from perception.layout import (
    FIELD_COL0,
    FIELD_COLS,
    FIELD_ROW0,
    FIELD_ROWS,
    N_CELL_CLASSES,
    N_COLORS,
    N_KINDS,
    N_SPRITE_CLASSES,
    SPRITE_ROW0,
    SPRITE_ROWS,
)

# the throw arc and the next pill at rest (x 120-205, y 21-91) in 1/8 cells of the crop
NEXT_ROWS = slice(0, 10)  # y 16-95
NEXT_COLS = slice(4, 15)  # x 120-207
NEXT_CHANNELS = 8
# the bottle branch: crop cells around the neck row and the field (one cell of margin)
BOTTLE_ROWS = slice(SPRITE_ROW0 - 1, FIELD_ROW0 + FIELD_ROWS + 1)  # y 64-215: 19 rows
BOTTLE_COLS = slice(FIELD_COL0 - 1, FIELD_COL0 + FIELD_COLS + 1)  # x 88-167: 10 columns


def _conv(ci: int, co: int, k: int = 3, stride: int = 1) -> nn.Sequential:
    pad = k // 2 if stride == 1 else 0
    return nn.Sequential(
        nn.Conv2d(ci, co, k, stride=stride, padding=pad, bias=False),
        nn.BatchNorm2d(co),
        nn.ReLU(inplace=True),
    )


class BoardNet(nn.Module):
    """See the module docstring. ``width``: channels at 1/2, 1/4, 1/8, 1/16."""

    def __init__(self, width: tuple[int, int, int, int] = (16, 32, 80, 96)) -> None:
        super().__init__()
        c1, c2, c3, c4 = width
        self.width = width
        self.stem = nn.Sequential(_conv(3, c1, 2, 2), _conv(c1, c2, 2, 2), _conv(c2, c3, 2, 2))
        self.bottle = nn.Sequential(_conv(c3, c3), _conv(c3, c3), _conv(c3, c3))
        self.context = nn.Sequential(_conv(c3, c4, 2, 2), _conv(c4, c4))
        self.up = nn.Sequential(_conv(c3 + c4, c3, 1), _conv(c3, c3))
        self.cells = nn.Conv2d(c3, N_CELL_CLASSES, 1)
        self.sprite = nn.Conv2d(c3, N_SPRITE_CLASSES, 1)
        self.next_reduce = _conv(c3, NEXT_CHANNELS, 1)
        n_next = (
            NEXT_CHANNELS * (NEXT_ROWS.stop - NEXT_ROWS.start) * (NEXT_COLS.stop - NEXT_COLS.start)
        )
        self.next_head = nn.Sequential(
            nn.Linear(n_next, 64), nn.ReLU(inplace=True), nn.Linear(64, 1 + 2 * N_COLORS)
        )
        self.kind_head = nn.Sequential(
            nn.Linear(2 * c4, 64), nn.ReLU(inplace=True), nn.Linear(64, N_KINDS)
        )

    def forward(self, x: torch.Tensor, logits: bool = False) -> tuple[torch.Tensor, ...]:
        # under autocast (the training steps) straight to its dtype: every uint8 is exact in
        # bfloat16 and the scaling rounds once either way, so the values are those the
        # autocast cast of the float32 image gives, without the float32 copy (2-6 ms a step
        # of 32 on one core); the exported graph (no autocast) casts to float32
        device = x.device.type
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        x = x.permute(0, 3, 1, 2).to(dtype or torch.float32) * (1.0 / 255.0)
        a = self.stem(x)  # 1/8: [N, c3, 26, 18], one vector per cell from its 8x8 pixels
        b = self.context(a)  # 1/16: [N, c4, 13, 9]
        u = F.interpolate(b, size=a.shape[-2:], mode="nearest")[:, :, BOTTLE_ROWS, BOTTLE_COLS]
        f = self.up(torch.cat([self.bottle(a[:, :, BOTTLE_ROWS, BOTTLE_COLS]), u], dim=1))
        r0, c0 = BOTTLE_ROWS.start, BOTTLE_COLS.start
        cells = self.cells(f)[
            :,
            :,
            FIELD_ROW0 - r0 : FIELD_ROW0 - r0 + FIELD_ROWS,
            FIELD_COL0 - c0 : FIELD_COL0 - c0 + FIELD_COLS,
        ]
        sprite = self.sprite(f)[
            :,
            :,
            SPRITE_ROW0 - r0 : SPRITE_ROW0 - r0 + SPRITE_ROWS,
            FIELD_COL0 - c0 : FIELD_COL0 - c0 + FIELD_COLS,
        ]
        nxt = self.next_head(torch.flatten(self.next_reduce(a[:, :, NEXT_ROWS, NEXT_COLS]), 1))
        pooled = torch.cat([b.mean(dim=(2, 3)), b.amax(dim=(2, 3))], dim=1)
        kind = self.kind_head(pooled)
        if logits:
            return cells, sprite, nxt, kind
        first = nxt[:, 1 : 1 + N_COLORS].softmax(dim=1)
        second = nxt[:, 1 + N_COLORS :].softmax(dim=1)
        next_probs = torch.cat([nxt[:, :1].sigmoid(), first, second], dim=1)
        return cells.softmax(dim=1), sprite.softmax(dim=1), next_probs, kind.softmax(dim=1)


OUTPUT_NAMES = ("cells", "sprite", "next", "kind")


def _blocks(model: BoardNet) -> list[nn.Sequential]:
    """The (convolution, batch norm, ReLU) blocks in the order the forward pass runs them."""
    return [*model.stem, *model.context, *model.bottle, *model.up, model.next_reduce]


def _convs(model: BoardNet) -> list[tuple[nn.Conv2d, nn.BatchNorm2d]]:
    """(convolution, batch norm) pairs in the order the forward pass (and so the exported
    graph) runs them: stem, context, bottle, up, next_reduce."""
    out = []
    for seq in _blocks(model):
        conv, bn = seq[0], seq[1]
        assert isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)
        out.append((conv, bn))
    return out


def from_onnx(path: str | Path) -> BoardNet:
    """A BoardNet holding the weights of an exported board model (ONNX file from
    ``perception.train``), for fine-tuning.

    The exporter folds each batch norm into its convolution (weight scaled, a bias added); the
    folded weight goes back into the convolution and the bias into the batch norm, whose
    statistics are set to mean 0, variance 1 - eps (an identity): in eval mode the network
    computes what the ONNX graph does. Fine-tune with the batch norms in eval mode
    (:func:`freeze_batch_norm`): batch statistics would undo the folding.
    Raises ValueError when the file is not a board model of a width BoardNet can hold.
    """
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(path)).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    conv_inputs = [n.input for n in graph.node if n.op_type == "Conv"]
    # the folded convolutions (the heads keep their module names)
    folded = [
        (inits[i[1]], inits[i[2]])
        for i in conv_inputs
        if len(i) == 3 and i[1] in inits and not i[1].startswith("model.")
    ]
    heads = {k: v for k, v in inits.items() if k.startswith("model.")}
    try:
        c1 = folded[0][0].shape[0]
        c2 = folded[1][0].shape[0]
        c3 = folded[2][0].shape[0]
        c4 = folded[3][0].shape[0]
        model = BoardNet((c1, c2, c3, c4))
        pairs = _convs(model)
        if len(folded) != len(pairs):
            raise ValueError(f"{len(folded)} folded convolutions, BoardNet has {len(pairs)}")
        with torch.no_grad():
            for (conv, bn), (w, b) in zip(pairs, folded, strict=True):
                conv.weight.copy_(torch.from_numpy(w.copy()))
                _identity_batch_norm(bn, torch.from_numpy(b.copy()))
            state = model.state_dict()
            for name, value in heads.items():
                key = name[len("model.") :]
                if key not in state:
                    raise ValueError(f"unknown tensor {name}")
                if tuple(state[key].shape) != value.shape:
                    raise ValueError(
                        f"{name}: shape {value.shape}, expected {tuple(state[key].shape)}"
                    )
                state[key].copy_(torch.from_numpy(value.copy()))
    except (IndexError, KeyError, RuntimeError) as e:
        raise ValueError(f"{path}: not a board model BoardNet can hold ({e})") from None
    return model


def freeze_batch_norm(model: nn.Module) -> None:
    """Put every batch norm in eval mode (running statistics used and kept), the rest as is."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.eval()


def _identity_batch_norm(bn: nn.BatchNorm2d, shift: torch.Tensor) -> None:
    """Make ``bn`` the identity plus ``shift`` [C] in eval mode: mean 0, variance 1 - eps
    (so that the division is by exactly 1), scale 1."""
    assert bn.running_mean is not None and bn.running_var is not None
    bn.weight.fill_(1.0)
    bn.bias.copy_(shift)
    bn.running_mean.zero_()
    bn.running_var.fill_(1.0 - bn.eps)


def _conv_like(conv: nn.Conv2d, bias: bool) -> nn.Conv2d:
    """A new convolution of ``conv``'s shape, with or without a bias."""
    return nn.Conv2d(
        conv.in_channels,
        conv.out_channels,
        conv.kernel_size,  # type: ignore[arg-type]
        conv.stride,  # type: ignore[arg-type]
        conv.padding,  # type: ignore[arg-type]
        bias=bias,
    )


def fold_batch_norm(model: BoardNet) -> None:
    """For fine-tuning (batch norms frozen: :func:`freeze_batch_norm`): each (convolution,
    batch norm) pair of :func:`_convs` becomes one convolution with a bias, the batch norm an
    ``nn.Identity``; the network computes the same function. A frozen batch norm is a
    per-channel scale and shift, so the convolution's weights and the shift hold it; its
    forward and backward passes then cost nothing (a training step of 32 on one core of the
    2-core EPYC, beside the two data processes: 0.125 s with the batch norms, 0.121 s
    folded). Undone by :func:`unfold_batch_norm`, which :func:`perception.train.train` calls
    before returning the model."""
    with torch.no_grad():
        for seq in _blocks(model):
            conv, bn = seq[0], seq[1]
            assert isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)
            assert not bn.training and bn.running_var is not None and bn.running_mean is not None
            scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            fused = _conv_like(conv, bias=True)
            fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
            fused.bias.copy_(bn.bias - bn.running_mean * scale)  # type: ignore[union-attr]
            seq[0], seq[1] = fused, nn.Identity()


def freeze_first_convolution(model: BoardNet) -> None:
    """Keep the first convolution (each 2x2 pixel block's RGB to ``width[0]`` features) and,
    when folded (:func:`fold_batch_norm`), its bias as they are: no gradient is computed for
    them, so the backward pass stops before the network's costliest layer to differentiate
    (the full-resolution one). A fine-tuning step of 32 on one core, folded, beside the two
    data processes: 0.112 s against 0.123 s."""
    _blocks(model)[0][0].requires_grad_(False)


def unfold_batch_norm(model: BoardNet) -> None:
    """Undo :func:`fold_batch_norm`: each convolution with a bias becomes a convolution and
    an identity batch norm (eval mode; mean 0, variance 1 - eps, scale 1, the bias as its
    shift), the structure :func:`from_onnx` gives and the ONNX export folds again."""
    with torch.no_grad():
        for seq in _blocks(model):
            fused = seq[0]
            assert isinstance(fused, nn.Conv2d) and isinstance(seq[1], nn.Identity)
            assert fused.bias is not None
            conv = _conv_like(fused, bias=False)
            conv.weight.copy_(fused.weight)
            bn = nn.BatchNorm2d(fused.out_channels).eval()
            _identity_batch_norm(bn, fused.bias)
            seq[0], seq[1] = conv, bn
