"""perception room (see docs/ARCHITECTURE.md): captured frame + Profile -> Observation.

``BoardReader`` (ONNX Runtime, no torch) reads the field, the falling pill, the next pill and
the screen kind from captured frames; ``perception.train`` trains the shipped model
(perception/models/board.onnx), ``perception.evaluate`` measures it, ``perception.bench`` times
it. docs/PERCEPTION.md has the design and the numbers.
"""

from perception.layout import KindLabel
from perception.observation import FallingPill, NextPill, Observation
from perception.reader import DEFAULT_MODEL, BoardReader

__all__ = ["DEFAULT_MODEL", "BoardReader", "FallingPill", "KindLabel", "NextPill", "Observation"]
