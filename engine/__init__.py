"""NES-exact Dr. Mario engine (C++17 core, pybind11 module ``engine._core``): one player, and
two-player versus (engine.Versus, docs/VERSUS.md).

The game is reproduced from the public disassembly (Nostaljipi/dr-mario-disassembly); see
docs/ENGINE.md for what is modelled, the frame convention and the demo-trace alignment, and
docs/RENDER.md for the NES picture of a state (render_frame, TileSet, screen_facts; two players:
render_versus, versus_screen_facts).
"""

from engine._core import (
    BLOCK_KNOWN,
    FIELD_SIZE,
    STATE_BYTES,
    Batch,
    Game,
    LevelFlow,
    Menu,
    Plan,
    Versus,
    VersusPlayer,
    cutscene_before,
    generate_level,
    pill_colors,
    plan,
    rng_step,
    seeds_for_field,
)
from engine.constants import (
    Button,
    Cell,
    FlowScreen,
    FlowStage,
    MenuScreen,
    MenuStage,
    Phase,
    Speed,
)
from engine.ines import RomError
from engine.render import (
    NES_PALETTE,
    FallingPill,
    NextPill,
    PlayerFacts,
    ScreenFacts,
    ScreenKind,
    TileSet,
    VersusFacts,
    render_frame,
    render_versus,
    screen_facts,
    versus_screen_facts,
)

__all__ = [
    "BLOCK_KNOWN",
    "FIELD_SIZE",
    "NES_PALETTE",
    "STATE_BYTES",
    "Batch",
    "Button",
    "Cell",
    "FallingPill",
    "FlowScreen",
    "FlowStage",
    "Game",
    "LevelFlow",
    "Menu",
    "MenuScreen",
    "MenuStage",
    "NextPill",
    "Phase",
    "Plan",
    "PlayerFacts",
    "RomError",
    "ScreenFacts",
    "ScreenKind",
    "Speed",
    "TileSet",
    "Versus",
    "VersusFacts",
    "VersusPlayer",
    "cutscene_before",
    "generate_level",
    "seeds_for_field",
    "pill_colors",
    "plan",
    "render_frame",
    "render_versus",
    "rng_step",
    "screen_facts",
    "versus_screen_facts",
]
