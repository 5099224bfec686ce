"""Read the real game's own pictures: ``python -m perception.realcheck --rom drmario.nes``.

A local check of a board model on frames of the real game: the user's ROM runs in cynes
(engine.nes.Nes), the options screen is driven to each level and speed from the RAM
(``engine.ram.menu_press``), a random player plays, and each picture goes through the shipped
capture profiles (calibration.forward) and the BoardReader. Nothing is written but the JSON
of the numbers (no picture, no ROM data).

The truth comes from the game's RAM, with the picture's lags (docs/RENDER.md, "What lags
what"); a frame is scored only where the RAM tells what the picture shows:

- cells: the field (``p1_field`` $0400) when it has not changed in the 17 frames before the
  picture: ``render_fieldRow`` ($8331) redraws one row per NMI, so after 16 NMIs the nametable
  holds the field (clearing cells $Bx are drawn as $Fx: the same class). Whole boards: those
  frames, all 128 cells.
- falling pill: the sprite buffer (``sprites`` $0200) as it was before the frame's NMI, which
  uploads it: its first two entries (the falling pill comes first in OAM order; the thrown
  next pill, last, also crosses the neck) when they are pill halves (tiles $40-$7F: type in the
  high nibble, colour in the low) inside the bottle (x 96-159, y 72-207; OAM Y = 80 + 8 * row,
  drawn from the line below).
- next pill: the same buffer, when the two halves are at rest (OAM (190, 69) and (198, 69));
  frames with the pill on its throw arc are not scored for it.
- screen kind: mode play ($46 = 4): LEVEL_INTRO until the first falling pill sprite of the
  level, GAMEPLAY after it (docs/PERCEPTION.md, "Screen kinds"). A level is recorded until
  the spawn area (rows 0-1, columns 3-4) fills, before the top-out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calibration import Profile, builtin_profiles
from calibration.forward import NoiseSource, forward
from perception.layout import KindLabel
from perception.observation import Observation

SETTLE = 17  # frames the field must stay unchanged for the nametable to hold it


@dataclass
class Truth:
    """What the RAM says one picture shows (None: not scored)."""

    field: np.ndarray | None  # uint8 [16, 8] cell codes
    falling: tuple | None  # (x, y, rotation 0/1, colours as drawn) or None (no pill drawn)
    next_colors: tuple[int, int] | None | str  # colours at rest, None (none drawn), "flight"
    kind: KindLabel


def falling_from_oam(oam: np.ndarray, bottle_x: int = 96, entries: int = 2) -> tuple | None:
    """The falling pill of an OAM buffer (uint8 [256]) as (x, y, rotation, colours), or None.

    ``bottle_x``: NES x of the bottle's column 0 (96; two players: 32 and 160). ``entries``:
    how many OAM entries from the first may hold it (one player: the first two; two players:
    p1's then p2's falling pill come first, mainLoop_level [$9B8D], so the first four)."""
    halves = []
    for k in range(entries):
        y, tile, _, x = (int(v) for v in oam[4 * k : 4 * k + 4])
        inside = bottle_x <= x < bottle_x + 64 and 72 <= y < 208
        if 0x40 <= tile < 0x80 and inside and (tile & 0x0F) < 3:
            halves.append(((y - 80) // 8, (x - bottle_x) // 8, tile >> 4, tile & 0x0F))
    if len(halves) != 2:
        return None
    halves.sort()
    (r0, c0, t0, k0), (r1, c1, t1, k1) = halves
    if r0 == r1:  # horizontal: left, right
        return (c0, 15 - r0, 0, (k0, k1))
    return (c1, 15 - r1, 1, (k1, k0))  # vertical: bottom (lower row), top


def next_from_oam(oam: np.ndarray) -> tuple[int, int] | None | str:
    """The next pill at rest (colours left, right), None when no next pill sprite is drawn,
    "flight" while it is on its throw arc."""
    rest: dict[int, int] = {}
    other = 0
    for k in range(2, 64):  # after the falling pill's two entries
        y, tile, _, x = (int(v) for v in oam[4 * k : 4 * k + 4])
        if not (0x40 <= tile < 0x80 and (tile & 0x0F) < 3) or y >= 0xEF:
            continue
        if y == 69 and x in (190, 198):
            rest[x] = tile & 0x0F
        else:
            other += 1
    if len(rest) == 2:
        return (rest[190], rest[198])
    return "flight" if other else None


VERSUS_BOTTLE_X = (32, 160)  # NES x of each player's bottle column 0 (fieldRow_PPUADDR_2P_*)
VERSUS_NEXT_X = (0x38, 0xB8)  # spr_nextPill_2p_p1/p2_x; y $33 (updateSprites_lvl [$87B2])
VERSUS_NEXT_Y = 0x33


def versus_next_from_oam(oam: np.ndarray, player: int) -> tuple[int, int] | None:
    """Player ``player``'s (0, 1) next pill in a two-player OAM buffer: (colours left, right)
    at rest, or None when it is not drawn (hidden once a round is lost)."""
    x0 = VERSUS_NEXT_X[player]
    rest: dict[int, int] = {}
    for k in range(64):
        y, tile, _, x = (int(v) for v in oam[4 * k : 4 * k + 4])
        if 0x40 <= tile < 0x80 and (tile & 0x0F) < 3 and y == VERSUS_NEXT_Y and x in (x0, x0 + 8):
            rest[x] = tile & 0x0F
    return (rest[x0], rest[x0 + 8]) if len(rest) == 2 else None


def play(rom: str, level: int, speed: int, frames: int, seed: int) -> Iterator[tuple]:
    """(picture RGB [240, 256, 3], previous picture, Truth) of the frames of one level."""
    from engine.nes import Nes
    from engine.ram import MODE_PLAY, menu_press
    from engine.ram import DrMarioRam as R

    nes = Nes.open(rom)
    ram = nes.ram
    wait, seen = 0, False
    while (f := nes.frames) < 6000:
        mask = menu_press(ram, level, speed, None) if f >= wait and f > 30 else 0
        if mask:
            wait = f + 3
        nes.step(mask, picture=False)
        mode, demo = ram(R.MODE), ram(R.DEMO)
        seen |= mode == 1 and not demo
        if seen and mode == MODE_PLAY:
            break
    else:
        raise RuntimeError(f"level {level} speed {speed} not reached")
    rng = np.random.default_rng([seed, level, speed])
    history: list[bytes] = []
    prev = nes.step()  # the pad byte of the last menu frame, held
    sent = False
    hold = 0
    for _ in range(frames):
        field = nes.ram_block(R.FIELD, 128).tobytes()
        oam = nes.ram_block(R.SPRITES, 256)
        history.append(field)
        if hold == 0:
            press = int(rng.choice([0, 0, 0x01, 0x02, 0x80, 0x40, 0x04, 0x04]))
            hold = int(rng.integers(1, 6))
        hold -= 1
        picture = nes.step(press)
        if ram(R.MODE) != MODE_PLAY:
            return
        falling = falling_from_oam(oam)
        sent = sent or falling is not None
        settled = len(history) > SETTLE and all(h == field for h in history[-SETTLE:])
        grid = np.frombuffer(field, np.uint8).reshape(16, 8)
        truth = Truth(
            field=grid.copy() if settled else None,
            falling=falling,
            next_colors=next_from_oam(oam),
            kind=KindLabel.GAMEPLAY if sent else KindLabel.LEVEL_INTRO,
        )
        yield picture, prev, truth
        prev = picture
        if (grid[:2, 3:5] != 0xFF).any():
            return  # the spawn area is filling: stop before the top-out


P2_FIELD, WHO_WON, WHO_FAILED = 0x0500, 0x55, 0x61  # p2_field, whoWon, whoFailed


def play_versus(
    rom: str, levels: tuple[int, int], speeds: tuple[int, int], frames: int, seed: int
) -> Iterator[tuple]:
    """(picture RGB [240, 256, 3], previous picture, (Truth of p1, Truth of p2)) of the frames
    of a two-player round (engine.ram.versus_menu_press to the options screen's Start; both
    pads random, pad 1 without Start and Select). The truth is read as for one player, from
    each player's field (``p1_field`` $0400, ``p2_field`` $0500: render_fieldRow_bothPlayers
    [$8307] redraws one row of each per NMI), its falling pill's sprites and its next pill at
    rest. The round is recorded until a player's spawn area fills or the round is decided
    (whoWon $55 / whoFailed $61)."""
    from engine.nes import Nes
    from engine.ram import MODE_PLAY, versus_menu_press
    from engine.ram import DrMarioRam as R

    nes = Nes.open(rom)
    ram = nes.ram
    seen = False
    while (f := nes.frames) < 6000:
        m1, m2 = versus_menu_press(ram, levels, speeds) if f % 2 == 0 and f > 30 else (0, 0)
        nes.step(m1 | m2 << 8, picture=False)
        mode, demo = ram(R.MODE), ram(R.DEMO)
        seen |= mode == 1 and not demo
        if seen and mode == MODE_PLAY:
            break
    else:
        raise RuntimeError(f"two-player levels {levels} speeds {speeds} not reached")
    rng = np.random.default_rng([seed, *levels, *speeds])
    history: list[list[bytes]] = [[], []]
    prev = nes.step(0)
    sent = [False, False]
    hold, press = [0, 0], [0, 0]
    for _ in range(frames):
        fields = [nes.ram_block(a, 128).tobytes() for a in (R.FIELD, P2_FIELD)]
        oam = nes.ram_block(R.SPRITES, 256)
        for i in range(2):
            history[i].append(fields[i])
            if hold[i] == 0:
                press[i] = int(rng.choice([0, 0, 0x01, 0x02, 0x80, 0x40, 0x04, 0x04]))
                hold[i] = int(rng.integers(1, 6))
            hold[i] -= 1
        picture = nes.step(press[0] | press[1] << 8)
        if ram(R.MODE) != MODE_PLAY or ram(WHO_WON) or ram(WHO_FAILED):
            return
        truths = []
        for i in range(2):
            falling = falling_from_oam(oam, VERSUS_BOTTLE_X[i], entries=4)
            sent[i] = sent[i] or falling is not None
            settled = len(history[i]) > SETTLE and all(h == fields[i] for h in history[i][-SETTLE:])
            grid = np.frombuffer(fields[i], np.uint8).reshape(16, 8)
            truths.append(
                Truth(
                    field=grid.copy() if settled else None,
                    falling=falling,
                    next_colors=versus_next_from_oam(oam, i),
                    kind=KindLabel.GAMEPLAY if sent[i] else KindLabel.LEVEL_INTRO,
                )
            )
        yield picture, prev, tuple(truths)
        prev = picture
        for i in range(2):
            if (np.frombuffer(fields[i], np.uint8).reshape(16, 8)[:2, 3:5] != 0xFF).any():
                return


def score(truths: list[Truth], obs: list[Observation]) -> dict[str, Any]:
    cells = cells_ok = boards = boards_ok = falling = falling_ok = nxt = nxt_ok = 0
    kinds_ok = 0
    for t, o in zip(truths, obs, strict=True):
        kinds_ok += int(o.kind_label == t.kind)
        read_fall = None
        if o.falling is not None:
            f = o.falling
            read_fall = (f.x, f.y, f.rotation, tuple(f.colors))
        falling += 1
        falling_ok += int(read_fall == t.falling)
        if t.next_colors != "flight":
            nxt += 1
            got = None if o.next is None else tuple(o.next.colors)
            nxt_ok += int(got == t.next_colors)
        if t.field is not None and t.kind == KindLabel.GAMEPLAY:
            shown = np.where((t.field & 0xF0) == 0xB0, (t.field & 0x0F) | 0xF0, t.field)
            read = np.where((o.field & 0xF0) == 0xB0, (o.field & 0x0F) | 0xF0, o.field)
            right = read == shown
            cells += right.size
            cells_ok += int(right.sum())
            boards += 1
            boards_ok += int(right.all())
    n = len(truths)
    return {
        "frames": n,
        "cell_accuracy": cells_ok / max(cells, 1),
        "cells": cells,
        "board_exact": boards_ok / max(boards, 1),
        "boards": boards,
        "falling_exact": falling_ok / max(falling, 1),
        "next_exact": nxt_ok / max(nxt, 1),
        "next_frames": nxt,
        "kind_accuracy": kinds_ok / max(n, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m perception.realcheck", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--rom", required=True, help="your own Dr. Mario iNES file (never stored)")
    p.add_argument("--model", help="board model (default: perception.store.choose_model)")
    p.add_argument("--levels", default="0,4,8,12,16,20", help="levels (0,4,8,12,16,20)")
    p.add_argument("--speeds", default="0,1,2", help="speeds (0,1,2)")
    p.add_argument("--frames", type=int, default=900, help="frames played per level (900)")
    p.add_argument("--every", type=int, default=2, help="score one frame in N (2)")
    p.add_argument("--profiles", default=",".join(builtin_profiles()), help="profiles")
    p.add_argument("--seed", type=int, default=3, help="player seed (3)")
    p.add_argument("--out", type=Path, help="write the JSON here too")
    p.add_argument(
        "--versus",
        action="store_true",
        help="the two-player screen: rounds at --versus-levels, each bottle read through its "
        "own crop (BoardReader.read_versus), both players' frames scored together",
    )
    p.add_argument(
        "--versus-levels",
        default="0:4,8:12,16:20,10:10",
        help='two-player levels "P1:P2,..." (0:4,8:12,16:20,10:10), each at every speed of '
        "--speeds for p1 and the next one for p2",
    )
    args = p.parse_args(argv)
    from perception.layout import VERSUS_VIEW_X
    from perception.reader import BoardReader
    from perception.store import choose_model, rom_crc32

    crc = rom_crc32(args.rom, verify_crc=False)
    frames: list[tuple] = []
    speeds = [int(v) for v in args.speeds.split(",")]
    if args.versus:
        for pair in args.versus_levels.split(","):
            l1, l2 = (int(v) for v in pair.split(":"))
            for sp in speeds:
                rounds = play_versus(args.rom, (l1, l2), (sp, (sp + 1) % 3), args.frames, args.seed)
                for k, (pic, prev, truths) in enumerate(rounds):
                    if k % args.every == 0:
                        for i in range(2):
                            frames.append((pic, prev, truths[i], VERSUS_VIEW_X[i]))
        print(f"{len(frames)} bottles of {len(frames) // 2} real frames", file=sys.stderr)
    else:
        for lv in (int(v) for v in args.levels.split(",")):
            for sp in speeds:
                for k, (pic, prev, truth) in enumerate(
                    play(args.rom, lv, sp, args.frames, args.seed)
                ):
                    if k % args.every == 0:
                        frames.append((pic, prev, truth, None))
        print(f"{len(frames)} real frames", file=sys.stderr)
    results: dict[str, Any] = {}
    for name in args.profiles.split(","):
        profile = Profile.load(name).replace(rom_crc32=crc)
        choice = choose_model(args.model, profile)
        reader = BoardReader(profile, choice.path)
        noise = NoiseSource(7)
        obs: list[Observation] = []
        for i in range(0, len(frames), 16):
            chunk = frames[i : i + 16]
            captured = [forward(profile, pic, prev, noise) for pic, prev, _, _ in chunk]
            if args.versus:
                obs += reader.read_views(captured, [x for _, _, _, x in chunk])
            else:
                obs += reader.read_batch(captured)
        results[name] = score([t for _, _, t, _ in frames], obs)
        results[name]["model"] = str(choice.path)
        print(name, json.dumps(results[name]), file=sys.stderr)
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
