"""Game.run and Batch.run say how many of the frames they stepped were frames of play, so
throughput figures (engine.bench) count no frames of games already over."""

from __future__ import annotations

import numpy as np

import engine

TERMINAL = int(engine.Phase.STAGE_CLEAR)


def frames_until_over(level: int, speed: int, seed: int, masks: np.ndarray) -> int:
    g = engine.Game(level, speed, seed)
    for n, m in enumerate(masks.tolist()):
        if g.phase >= TERMINAL:
            return n
        g.step(m)
    return len(masks)


def test_game_run_counts_the_frames_before_the_game_ends():
    masks = (np.random.default_rng(5).integers(0, 256, 6000) & 0xCF).astype(np.uint8)
    for seed in (0x0102, 0x8988, 0xBEEF):
        want = frames_until_over(10, 1, seed, masks)
        assert want < len(masks)  # random input tops out well within 6,000 frames
        g = engine.Game(10, 1, seed)
        assert g.run(masks) == want
        assert g.phase >= TERMINAL
        assert g.run(masks[:50]) == 0  # an ended game plays no more frames


def test_batch_run_counts_game_frames_in_play():
    rng = np.random.default_rng(6)
    seeds = [0x0102, 0x8988, 0xBEEF, 0x1234]
    masks = (rng.integers(0, 256, (5000, len(seeds))) & 0xCF).astype(np.uint8)
    b = engine.Batch([10] * 4, [1, 2, 0, 1], seeds)
    want = sum(
        frames_until_over(10, s, seed, masks[:, i])
        for i, (s, seed) in enumerate(zip([1, 2, 0, 1], seeds, strict=True))
    )
    assert b.run(masks) == want
    assert b.run(masks[:10]) == sum(10 for p in b.phase.tolist() if p < TERMINAL)
