"""NES-exact one-player Dr. Mario engine (C++17 core, pybind11 module ``engine._core``).

The game is reproduced from the public disassembly (Nostaljipi/dr-mario-disassembly); see
docs/ENGINE.md for what is modelled, the frame convention and the demo-trace alignment.
"""

from engine._core import (
    FIELD_SIZE,
    STATE_BYTES,
    Batch,
    Game,
    Plan,
    generate_level,
    pill_colors,
    plan,
    rng_step,
)
from engine.constants import Button, Cell, Phase, Speed

__all__ = [
    "FIELD_SIZE",
    "STATE_BYTES",
    "Batch",
    "Button",
    "Cell",
    "Game",
    "Phase",
    "Plan",
    "Speed",
    "generate_level",
    "pill_colors",
    "plan",
    "rng_step",
]
