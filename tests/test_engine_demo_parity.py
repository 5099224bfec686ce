"""The engine replays the NES attract-mode demo frame for frame (shared/reference trace).

Alignment (docs/ENGINE.md): Game.demo() is the state as levelIntro_delay begins, with
frameCounter odd and the demo's input table already 7 frames in; engine frame f (after f calls
of step) is trace frame f.
"""

from __future__ import annotations

import numpy as np

import engine

KEYS = ("pr", "pc", "po", "bc", "vc")


def _engine_frames(n: int, frame_counter: int = 1) -> list[dict]:
    game = engine.Game.demo(frame_counter=frame_counter)
    out = []
    for _f in range(1, n + 1):
        prev_field = game.field.copy()
        prev = (int(game.pill_y), int(game.pill_x), int(game.pill_rotation))
        prev_vl = int(game.virus_left_bcd)
        game.step(0)
        e: dict = {}
        cur = (int(game.pill_y), int(game.pill_x), int(game.pill_rotation))
        for key, a, b in zip(("pr", "pc", "po"), prev, cur, strict=True):
            if a != b:
                e[key] = b
        changed = np.flatnonzero(prev_field != game.field)
        if changed.size:
            e["bc"] = [[int(i), int(prev_field[i]), int(game.field[i])] for i in changed]
        if int(game.virus_left_bcd) != prev_vl:
            e["vc"] = prev_vl - int(game.virus_left_bcd)
        out.append(e)
    return out


def test_initial_board_is_demo_field(demo_trace):
    game = engine.Game.demo()
    assert bytes(game.field).hex() == demo_trace["initial_board"]
    assert game.virus_left == 44 and game.level == 10 and game.speed_setting == 1


def test_every_frame_matches_trace(demo_trace):
    frames = demo_trace["frames"]
    assert len(frames) == 5700
    got = _engine_frames(len(frames))
    for f, (want, have) in enumerate(zip(frames, got, strict=True), start=1):
        want_c = {k: want[k] for k in KEYS if k in want}
        if want_c != have:
            raise AssertionError(
                f"first divergence at frame {f}:\n  NES:    {want_c}\n  engine: {have}"
            )


def test_demo_ends_with_trace_virus_count(demo_trace):
    game = engine.Game.demo()
    game.run(np.zeros(5700, dtype=np.uint8))
    assert game.virus_left == 18  # README of the reference: 18 viruses left at the end
    assert game.phase == engine.Phase.PLAYING


def test_wrong_alignment_diverges(demo_trace):
    # The alignment is not arbitrary: an even frameCounter moves the fast-drop frames.
    frames = demo_trace["frames"][:400]
    got = _engine_frames(len(frames), frame_counter=2)
    want = [{k: e[k] for k in KEYS if k in e} for e in frames]
    assert want != got
