"""The readers the runtime uses (the live loop's and ``hil replay``'s alike: :func:`make_reader`):
each turns one captured frame into perception's Observation (``perception.observation``: the one
type for a frame read, consumed as it is by the tracker, the recording, the view and the replay;
its kinds are engine.ScreenKind, see its module docstring).

``OnnxReader`` is perception's BoardReader (ONNX) on the pixels, plus the virus animation label
(:class:`VirusAnimation`). ``OracleReader`` is the ground-truth stand-in for the simulated
console only (``--reader oracle``): it returns ``engine.screen_facts`` of the console state the
sim rendered, carried along the capture path as the Frame's ``truth``. It reads no pixels, so it
can never stand for perception on a real capture.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from engine import ScreenKind
from perception.observation import (
    COLS,
    ROWS,
    Observation,
    blank_observation,
    observation_from_facts,
)

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]


class VirusAnimation:
    """The small viruses' animation frame read from pixels, as a label relative to this reader.

    The picture alternates between two virus tile sets every 8 frames (smallVirusLvlAnim, a CHR
    bank switch; docs/RUN.md "The virus animation label"). Which set is "frame 0" depends on the
    tiles (the clean-room set, a user's ROM), so a pixel reader cannot name it; it can tell the
    two looks apart. The first look seen is label 0, the first one that differs from it by more
    than ``threshold`` (mean absolute difference over the virus cells, 0..255 units) label 1,
    and each later look takes the label of the nearer of the two (running means, so MJPEG noise
    and a combed frame do not pull a reference away). A label is consistent within a level, so
    the tracker's alignment finds the frameCounter phase mod 16 up to a shift of 8, which keeps
    its parity (the only frameCounter bit gameplay reads: fast drop $8A0A and the LOW throw).
    Viruses only ever disappear during a level: a board with at least two viruses that the
    references do not hold, by cell and colour, and those more than half of its viruses, is a
    new level and starts afresh (every level has at least 4); a misread cell does not, even
    with one virus left (a restart there would flip every later label).

    ``looks``: float32 [16, 8, D] per-cell pixels; ``field``: uint8 [16, 8] the cell codes read
    (viruses are $Dx). Returns 0, 1, or None when no virus is readable. Raises ValueError for
    other shapes.
    """

    def __init__(self, threshold: float = 10.0) -> None:
        self.threshold = float(threshold)
        self.codes: U8 | None = None  # the virus codes the references were made on
        self.refs: list[tuple[F32, F32]] = []  # (sum of looks, count) per cell

    def reset(self) -> None:
        self.codes = None
        self.refs = []

    def __call__(self, looks: npt.ArrayLike, field: npt.ArrayLike) -> int | None:
        x = np.asarray(looks, dtype=np.float32)
        f = np.asarray(field, dtype=np.uint8)
        if x.ndim != 3 or x.shape[:2] != (ROWS, COLS) or f.shape != (ROWS, COLS):
            raise ValueError(
                f"looks must be [16, 8, D] and field [16, 8], got {x.shape}, {f.shape}"
            )
        v = (f & 0xF0) == 0xD0
        n = int(v.sum())
        if n == 0:
            return None
        if self.codes is not None:
            new = int((v & (f != self.codes)).sum())
            if new >= 2 and 2 * new > n:
                self.reset()
        if self.codes is None:
            self.codes = np.where(v, f, 0xFF).astype(np.uint8)
            self.refs = [(x * v[..., None], v.astype(np.float32))]
            return 0
        known = v & (f == self.codes)
        dists = []
        for total, count in self.refs:
            m = known & (count > 0)
            if not m.any():
                dists.append(np.inf)
                continue
            dists.append(float(np.abs(x[m] - total[m] / count[m][:, None]).mean()))
        if not np.isfinite(min(dists)):
            return None  # no virus read as the references hold it (misread colours, say)
        label = int(np.argmin(dists))
        if len(self.refs) == 1 and dists[0] > self.threshold:
            self.refs.append((x * known[..., None], known.astype(np.float32)))
            return 1
        if dists[label] <= self.threshold:
            total, count = self.refs[label]
            total += x * known[..., None]
            count += known
        return label


class Reader(Protocol):
    """Perception as the runtime uses it: ``reader(frame) -> Observation``. ``name`` is logged.
    A reader made for both players (``make_reader(..., both=True)``: bot against bot) also has
    ``pair(frame) -> (player 1's Observation, player 2's)``, each with the screen's kind
    (:func:`versus_kind`)."""

    name: str

    def __call__(self, frame: Any) -> Observation: ...


P1_EVERY = 2  # two players: frames per reading of player 1's bottle (OnnxReader._versus)


class OracleReader:
    """Ground truth for the simulated console only (see the module docstring). The Frame's
    ``truth["facts"]`` must hold the engine.ScreenFacts of the rendered state (hil.consoles.sim
    puts it there), or None for a screen without a level. Raises ValueError for a frame that
    carries no truth (a real capture)."""

    name = "oracle"

    def __call__(self, frame: Any) -> Observation:
        truth = self._truth(frame)
        facts = truth["facts"]
        if facts is None:
            return blank_observation(source=self.name)
        obs = observation_from_facts(facts, source=self.name)
        versus = truth.get("versus")
        if versus is not None:  # player 2's bottle; player 1's is in the same picture
            other = observation_from_facts(versus.player(0), source=self.name)
            obs = replace(obs, opponent_viruses=other.virus_count)
        return obs

    def pair(self, frame: Any) -> tuple[Observation, Observation]:
        """Both bottles of a two-player screen (the truth's ``versus``: engine.VersusFacts),
        player 1's and player 2's; blank observations on other screens."""
        facts = self._truth(frame).get("versus")
        if facts is None:
            blank = blank_observation(source=self.name)
            return blank, blank
        p1, p2 = (observation_from_facts(facts.player(i), source=self.name) for i in (0, 1))
        return (
            replace(p1, opponent_viruses=p2.virus_count),
            replace(p2, opponent_viruses=p1.virus_count),
        )

    def _truth(self, frame: Any) -> dict[str, Any]:
        truth = getattr(frame, "truth", None)
        if not isinstance(truth, dict) or "facts" not in truth:
            raise ValueError(
                "the oracle reader needs a simulated frame carrying its ground truth; "
                "real captures need the perception reader (--reader onnx)"
            )
        return truth


class OnnxReader:
    """perception's BoardReader (ONNX) on the captured pixels, its Observation as it is (source
    "onnx"), plus the virus animation label (VirusAnimation, ``virus_frame``) from
    the bottle's pixels in the model's crop (2x2-pixel means of each cell) while
    ``virus_label`` is set. ``profile``: the capture chain's calibration.Profile; ``model``:
    its ONNX file, default ``perception.store.choose_model``: the model ``hil prepare`` made for
    the profile's ROM, else the shipped one (``model_line`` says which, ``path`` is it). Raises
    ValueError for a missing or bad model, ImportError where perception is not installed.
    ``player`` 2: player 2's bottle of the two-player screen; ``both``: :meth:`pair` reads
    both bottles in every frame (bot against bot)."""

    name = "onnx"

    def __init__(
        self, profile: Any, model: Any = None, player: int = 1, both: bool = False
    ) -> None:
        from perception.layout import VERSUS_VIEW_X
        from perception.reader import BoardReader
        from perception.store import choose_model

        try:
            choice = choose_model(model, profile)
        except FileNotFoundError as e:
            raise ValueError(str(e)) from None
        self.model_line = choice.why
        self.path = choice.path
        self.net = BoardReader(profile, choice.path)
        # player 2 of the two-player screen: both bottles' crops (perception.layout) in one
        # inference a frame, player 2's Observation with the screen's kind (_versus)
        self.versus = player == 2 or both
        self.views = [self.net.sampler_at(x) for x in VERSUS_VIEW_X] if self.versus else []
        self._p1: Observation | None = None  # player 1's bottle as last read
        self._reads = 0
        self.virus_anim = VirusAnimation()
        self.virus_anim_p1 = VirusAnimation()  # player 1's bottle (both)
        # The runtime clears this while the tracker has no use for the label (it is compared
        # while aligning a level): ~0.3 ms less per frame in play.
        self.virus_label = True

    def _versus(self, image: Any) -> tuple[Observation, Any]:
        """A two-player screen: player 2's Observation with the screen's kind
        (:func:`versus_kind`), and player 2's crop. Player 1's bottle tells only the screen's
        kind (its stage clear, top-out, pause), so it is read in every P1_EVERY-th frame, in
        the same inference as player 2's; the others take its last reading (half the
        inference: on a busy 2-core machine a frame's reading took 12.6 ms at the median with
        both bottles every frame)."""
        from calibration.forward import check_captured

        net = self.net
        image = check_captured(net.profile, image)
        both = self._p1 is None or self._reads % P1_EVERY == 0
        self._reads += 1
        views = self.views if both else self.views[1:]
        crops = np.stack([view(image) for view in views])
        out = net.infer(crops)
        p2 = net.postprocess(out, len(views) - 1, None)
        if both:
            self._p1 = net.postprocess(out, 0, None)
        assert self._p1 is not None
        own = versus_kind(self._p1, p2)
        if both:  # player 1's bottle read in this very picture
            own = replace(own, opponent_viruses=self._p1.virus_count)
        return own, crops[-1]

    def warm_up(self) -> None:
        """One inference on a black frame: onnxruntime's first run of a session takes far
        longer than the others (~100-400 ms), so a real-time run makes it before the console
        starts. Changes no state of the reader."""
        g = self.net.profile.geometry
        self.net.infer(self.net.preprocess(np.zeros((g.height, g.width, 3), np.uint8))[None])

    def pair(self, frame: Any) -> tuple[Observation, Observation]:
        """Both bottles of a two-player screen in one inference, every frame: player 1's and
        player 2's Observation, each with the screen's kind (:func:`versus_kind`) and its own
        virus animation label. Raises ValueError (perception.reader) for a picture of another
        size than the profile's."""
        from calibration.forward import check_captured

        net = self.net
        image = check_captured(net.profile, frame.image)
        crops = np.stack([view(image) for view in self.views])
        out = net.infer(crops)
        p1, p2 = net.postprocess(out, 0, None), net.postprocess(out, 1, None)
        self._p1 = p1
        one = replace(versus_kind(p1, p2, 1), opponent_viruses=p2.virus_count)
        two = replace(versus_kind(p1, p2, 2), opponent_viruses=p1.virus_count)
        return (
            self._label(one, crops[0], self.virus_anim_p1),
            self._label(two, crops[1], self.virus_anim),
        )

    def __call__(self, frame: Any) -> Observation:
        net = self.net
        if self.versus:
            obs, crop = self._versus(frame.image)
        else:
            crop = net.preprocess(frame.image)
            obs = net.postprocess(net.infer(crop[None]), 0, crop)
        return self._label(obs, crop, self.virus_anim)

    def _label(self, obs: Observation, crop: Any, anim: VirusAnimation) -> Observation:
        """``obs`` with its virus animation label (``anim`` on the bottle's pixels of the
        model's ``crop``) while the runtime asks for it on a level."""
        from perception.layout import BOTTLE_X, BOTTLE_Y, CELL, CROP_X, CROP_Y

        if obs.kind != ScreenKind.LEVEL or not self.virus_label:
            return obs
        y0, x0 = BOTTLE_Y - CROP_Y, BOTTLE_X - CROP_X
        bottle = crop[y0 : y0 + 16 * CELL, x0 : x0 + 8 * CELL].astype(np.float32)
        looks = bottle.reshape(16, CELL // 2, 2, 8, CELL // 2, 2, 3).mean(axis=(2, 5))
        looks = looks.transpose(0, 2, 1, 3, 4).reshape(16, 8, -1)
        sure = np.where(obs.confidence >= 0.9, obs.field, 0xFF).astype(np.uint8)
        label = anim(looks, sure)
        return replace(obs, virus_frame=label)


def versus_kind(p1: Observation, p2: Observation, player: int = 2) -> Observation:
    """Player ``player``'s (1 or 2) Observation of a two-player screen with the screen's kind,
    from both bottles: the pause from player 1's crop (its PAUSE text is there); a top-out when
    either crop reads one (the loser's sign is drawn at its own bottle,
    updateSprites_2p_endGame [$887C]); a stage clear when either bottle, in play, holds no
    virus (checkVirusLeft [$B269] ends the round for both: the winner's bottle is the only sign
    of it in the other player's crop)."""
    own = p2 if player == 2 else p1
    if p1.kind == ScreenKind.PAUSED:
        return replace(own, kind=ScreenKind.PAUSED, kind_confidence=p1.kind_confidence)
    if ScreenKind.TOP_OUT in (p1.kind, p2.kind):
        return replace(own, kind=ScreenKind.TOP_OUT)
    playing = [o for o in (p1, p2) if o.kind in (ScreenKind.LEVEL, ScreenKind.STAGE_CLEAR)]
    if len(playing) == 2 and not (p1.intro or p2.intro):
        if p1.virus_count == 0 or p2.virus_count == 0:
            return replace(own, kind=ScreenKind.STAGE_CLEAR, intro=False)
        if own.kind == ScreenKind.STAGE_CLEAR:
            return replace(own, kind=ScreenKind.LEVEL)
    return own


def make_reader(
    name: str, profile: Any = None, model: Any = None, player: int = 1, both: bool = False
) -> Reader:
    """``oracle`` (the simulated console's ground truth; sim only) or ``onnx``
    (:class:`OnnxReader`, once perception is installed). ``player``: 1 the one-player screen,
    2 player 2's bottle of the two-player screen (the oracle's truth is the bottle the console
    plays); ``both``: the reader's ``pair`` reads both bottles (bot against bot). Raises
    ValueError otherwise, or for a missing or bad model."""
    if name == "oracle":
        return OracleReader()
    if name == "onnx":
        try:
            import perception.reader  # noqa: F401
        except ImportError as exc:
            raise ValueError(
                f"the ONNX board reader is not installed in this checkout ({exc}); "
                "the simulated console can use --reader oracle"
            ) from None
        return OnnxReader(profile, model, player=player, both=both)
    raise ValueError(f"unknown reader {name!r}; choose oracle (sim only) or onnx")
