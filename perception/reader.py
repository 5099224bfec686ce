"""BoardReader: captured frame + Profile -> Observation, with ONNX Runtime on the CPU.

    reader = BoardReader(Profile.load("mjpeg_720p_q70"))     # the shipped model
    obs = reader.read(frame)                                  # frame: BGR uint8 [720, 1280, 3]
    obs.field, obs.confidence, obs.falling, obs.next, obs.kind
    p1, p2 = reader.read_versus(frame)                        # the two-player screen's bottles

Three steps, each its own method (opencv_zoo's pattern): :meth:`preprocess` samples the
model's crop straight from the frame (perception.preprocess: one remap with maps built once,
the profile's colour undone), :meth:`infer` runs the ONNX graph (uint8 NHWC in, probabilities
out), :meth:`postprocess` decodes them (perception.decode). No torch at run time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache, partial
from pathlib import Path

import numpy as np

from calibration import Profile
from calibration.forward import check_captured
from engine import ScreenKind
from perception.decode import decode
from perception.layout import CROP_H, CROP_W, VERSUS_VIEW_X, VIEW_X
from perception.observation import Observation
from perception.panel import PANEL_FILE, PanelReader, glyphs, load_glyphs
from perception.preprocess import CropSampler

DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "board.onnx"
OUTPUTS = ("cells", "sprite", "next", "kind")


class BoardReader:
    """Reads Observations from captured frames of one capture chain.

    profile: the chain's calibration.Profile (geometry and colour; see calibration.fit).
    model: ONNX file (default: the shipped perception/models/board.onnx). threads: ONNX Runtime
    intra-op threads (1: the reader shares the machine with capture and planning).
    Raises FileNotFoundError for a missing model file and ValueError for a file ONNX Runtime
    cannot load or a model whose input is not uint8 [n, 208, 144, 3] or whose outputs are not
    the board model's.
    """

    def __init__(
        self, profile: Profile, model: str | Path = DEFAULT_MODEL, threads: int = 1
    ) -> None:
        import onnxruntime as ort

        if not isinstance(profile, Profile):
            raise ValueError(f"profile must be a calibration.Profile, got {type(profile).__name__}")
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(
                f"no perception model at {path}; train one with `python -m perception.train`"
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own exception types
            raise ValueError(f"{path}: ONNX Runtime cannot load this model: {e}") from None
        inputs = self.session.get_inputs()
        shape = list(inputs[0].shape) if inputs else []
        if (
            len(inputs) != 1
            or inputs[0].type != "tensor(uint8)"
            or shape[1:] != [CROP_H, CROP_W, 3]
        ):
            found = [(i.name, i.type, i.shape) for i in inputs]
            raise ValueError(
                f"{path} is not a board model: its input is {found}, "
                f"expected one uint8 [n, {CROP_H}, {CROP_W}, 3]"
            )
        names = [o.name for o in self.session.get_outputs()]
        if names != list(OUTPUTS):
            raise ValueError(
                f"{path} is not a board model: outputs {names}, expected {list(OUTPUTS)}"
            )
        self.input_name = inputs[0].name
        self.profile = profile
        self.model_path = path
        self.sampler = CropSampler(profile)
        self._samplers = {VIEW_X: self.sampler}
        self.panel = panel_reader(path)

    def preprocess(self, frame: np.ndarray) -> np.ndarray:
        """Captured BGR uint8 [height, width, 3] -> the crop, RGB uint8 [208, 144, 3].

        Raises ValueError when the frame's shape or dtype is not the profile's."""
        return self.sampler(check_captured(self.profile, frame))

    def infer(self, crops: np.ndarray) -> list[np.ndarray]:
        """uint8 [n, 208, 144, 3] crops -> [cells [n, 22, 16, 8], sprite [n, 4, 17, 8],
        next [n, 7], kind [n, 6]] float32 probabilities (perception.model)."""
        return list(self.session.run(list(OUTPUTS), {self.input_name: crops}))

    def postprocess(
        self, outputs: Sequence[np.ndarray], index: int = 0, crop: np.ndarray | None = None
    ) -> Observation:
        """The Observation of frame ``index`` of a batch of model outputs; ``crop`` (that
        frame's crop, RGB uint8 [208, 144, 3]) lets the panel be read too (perception.panel:
        the LEVEL number and the next pill's flight, for the screen kind)."""
        cells, sprite, nxt, kind = outputs
        panel = None
        if self.panel is not None and crop is not None:
            panel = partial(self.panel.read, crop)  # read only where the decoder asks
        return decode(cells[index], sprite[index], nxt[index], kind[index], panel=panel)

    def read(self, frame: np.ndarray) -> Observation:
        """One captured frame (BGR uint8 [height, width, 3]) -> Observation."""
        crop = self.preprocess(frame)
        return self.postprocess(self.infer(crop[None]), 0, crop)

    def read_batch(self, frames: Sequence[np.ndarray]) -> list[Observation]:
        """Several frames of this chain in one inference call (offline replay, evaluation)."""
        if len(frames) == 0:
            return []
        crops = np.stack([self.preprocess(f) for f in frames])
        outputs = self.infer(crops)
        return [self.postprocess(outputs, i, crops[i]) for i in range(len(frames))]

    def read_versus(self, frame: np.ndarray) -> tuple[Observation, Observation]:
        """A captured frame of the two-player screen (BGR uint8 [height, width, 3]) -> the
        Observations of player 1's and player 2's bottle (perception.layout.VERSUS_VIEW_X),
        read in one inference call. Their ``kind`` is the screen's; the one-player panel
        (LEVEL box, the next pill's flight) is not read. The pause is read from player 1's
        crop for both: its PAUSE text at ($70, $77) (checkPauseReset [$979E]) is in that crop
        only, and player 2's shows a black screen, which cannot be told from other black
        screens. Raises ValueError as :meth:`preprocess`."""
        p1, p2 = self.read_views([frame, frame], list(VERSUS_VIEW_X))
        if p1.kind == ScreenKind.PAUSED:
            p2 = dataclasses.replace(p2, kind=ScreenKind.PAUSED, kind_confidence=p1.kind_confidence)
        return p1, p2

    def read_views(self, frames: Sequence[np.ndarray], view_xs: Sequence[int]) -> list[Observation]:
        """Frames read through the crop at ``view_xs`` (NES x of each crop's left edge,
        perception.layout.VIEW_X or VERSUS_VIEW_X), one inference call; the panel is read only
        for the one-player crop."""
        if len(frames) != len(view_xs):
            raise ValueError(f"{len(frames)} frames but {len(view_xs)} view_xs")
        if len(frames) == 0:
            return []
        crops = np.stack(
            [
                self.sampler_at(x)(check_captured(self.profile, f))
                for f, x in zip(frames, view_xs, strict=True)
            ]
        )
        outputs = self.infer(crops)
        return [
            self.postprocess(outputs, i, crops[i] if view_xs[i] == VIEW_X else None)
            for i in range(len(frames))
        ]

    def sampler_at(self, view_x: int) -> CropSampler:
        """The crop sampler at ``view_x`` (NES x of the crop's left edge), built once."""
        if view_x not in self._samplers:
            self._samplers[view_x] = CropSampler(self.profile, view_x=view_x)
        return self._samplers[view_x]


@cache
def _clean_room_glyphs() -> np.ndarray:
    import engine

    return glyphs(engine.TileSet.clean_room())


def panel_reader(model: Path) -> PanelReader | None:
    """The panel reader for ``model``'s graphics: the digit glyphs ``hil prepare`` wrote beside
    a prepared model (perception.panel.PANEL_FILE), the clean-room ones for the shipped model,
    else None (the panel is not read; a model trained by ``perception.train`` alone has none).
    Raises ValueError for a malformed glyph file."""
    beside = model.parent / PANEL_FILE
    if beside.exists():
        return PanelReader(load_glyphs(beside))
    if model.resolve() == DEFAULT_MODEL.resolve():
        return PanelReader(_clean_room_glyphs())
    return None
