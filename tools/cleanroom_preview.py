"""Pictures of the clean-room tile set: a rendered level frame and the tile sheets.

Run: python tools/cleanroom_preview.py [--out docs/render_cleanroom.png] [--sheet FILE]
     [--scale 2] [--level 10] [--speed 1] [--seed 0x8988] [--frames 420]
     [--versus docs/render_versus_cleanroom.png]

The frame is engine.render_frame of a game played with a fixed input pattern for --frames
frames. --versus also writes engine.render_versus of a two-player match (levels 4 and 7, MED
and HI) in its second round, player 1 with one crown, both pads pressing fixed patterns. Only
the project's own drawings are used (never a ROM's CHR), so the pictures may be committed.
--sheet also writes the three pattern tables (background frame 0, frame 1, sprites) as a
3 x 16 x 16 grid of tiles in greys.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2
import numpy as np

import engine

ROOT = Path(__file__).resolve().parents[1]


def frame(level: int, speed: int, seed: int, frames: int) -> np.ndarray:
    g = engine.Game(level, speed, seed)
    pattern = [0, 0, engine.Button.LEFT, 0, 0, 0, engine.Button.A, 0]
    for i in range(frames):
        g.step(int(pattern[i % len(pattern)]) if i > 300 else 0)
    return engine.render_frame(g)


def versus_frame(seed: int) -> np.ndarray:
    v = engine.Versus(4, 1, 7, 2, seed)
    down, left, a = int(engine.Button.DOWN), int(engine.Button.LEFT), int(engine.Button.A)
    for i in range(20000):  # round 1: player 2 drops every pill in the middle and tops out
        if v.phase == engine.Phase.ROUND_OVER:
            break
        v.step(left if i % 24 == 0 else 0, down)
    v.next_round(0)
    for i in range(420):
        v.step([0, left, 0, a][i % 4] if i > 200 else 0, [0, 0, a, 0, 0, 0][i % 6])
    return engine.render_versus(v)


def sheet(tiles: engine.TileSet) -> np.ndarray:
    grey = np.array([0, 90, 170, 255], np.uint8)
    banks = []
    for bank in range(3):
        p = tiles.patterns[bank].reshape(16, 16, 8, 8).transpose(0, 2, 1, 3).reshape(128, 128)
        banks.append(np.pad(grey[p], ((0, 0), (0, 8)), constant_values=40))
    return np.concatenate(banks, axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "render_cleanroom.png")
    parser.add_argument("--sheet", type=Path, default=None)
    parser.add_argument("--scale", type=int, default=2)
    parser.add_argument("--level", type=int, default=10)
    parser.add_argument("--speed", type=int, default=1)
    parser.add_argument("--seed", type=lambda s: int(s, 0), default=0x8988)
    parser.add_argument("--frames", type=int, default=420)
    parser.add_argument("--versus", type=Path, default=None)
    args = parser.parse_args(argv)
    img = frame(args.level, args.speed, args.seed, args.frames)
    big = cv2.resize(img, None, fx=args.scale, fy=args.scale, interpolation=cv2.INTER_NEAREST)
    cv2.imwrite(str(args.out), cv2.cvtColor(big, cv2.COLOR_RGB2BGR))
    print(f"wrote {args.out}")
    if args.versus is not None:
        img = versus_frame(args.seed)
        big = cv2.resize(img, None, fx=args.scale, fy=args.scale, interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(str(args.versus), cv2.cvtColor(big, cv2.COLOR_RGB2BGR))
        print(f"wrote {args.versus}")
    if args.sheet is not None:
        s = sheet(engine.TileSet.clean_room())
        s = cv2.resize(s, None, fx=args.scale, fy=args.scale, interpolation=cv2.INTER_NEAREST)
        cv2.imwrite(str(args.sheet), s)
        print(f"wrote {args.sheet}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
