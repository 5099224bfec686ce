"""``hil demo``: the attract-mode demo played by the engine, with its events printed.

Until the simulated console lands this is the command that exercises the whole engine.
"""

from __future__ import annotations

from typing import TextIO

from engine import Game, Phase


def run_demo(frames: int, out: TextIO) -> int:
    """Play `frames` frames of the demo; print each lock and virus kill; return 0."""
    if frames < 1:
        raise SystemExit("--frames must be at least 1")
    game = Game.demo()
    locks = 0
    last_virus = game.virus_left
    for _ in range(frames):
        game.step(0)
        if int(game.lock_event):
            locks += 1
        if game.virus_left != last_virus:
            print(
                f"frame {int(game.frame):5d}: viruses {last_virus} -> {game.virus_left}",
                file=out,
                flush=True,
            )
            last_virus = game.virus_left
        if Phase(int(game.phase)) != Phase.PLAYING and int(game.frame) > 200:
            break
    print(
        f"{int(game.frame)} frames, {locks} pills locked, {game.virus_left} viruses left, "
        f"score {int(game.score)}",
        file=out,
        flush=True,
    )
    return 0
