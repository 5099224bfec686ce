"""Compare engine.Versus with the real game in cynes, frame by frame (local check, not CI).

    python tools/versus_check.py --rom drmario.nes [--frames 50000] [--levels 4,7]
        [--speeds 1,1] [--seed 0] [--json out.json]

The ROM is driven to a two-player match (title: Down for 2 players, Start; options: each
player's level and speed with its own pad, section and Start on pad 1; toDemo_orOptions
[$9961]). At each round's first frame in mode 4 (mainLoop_level [$9B8D]) the board the engine
predicts for that round (Versus(...) from the RNG the options screen left, or next_round from
the last round's end) is compared with the game's: both fields, the reserve, the virus counters
and the RNG. The engine is then loaded from the game's RAM (Versus.from_ram) and both run on the
same pad bytes (pad 1 low byte, pad 2 high byte of cynes' controller), comparing every frame
both players' $30-byte blocks (the offsets in engine.BLOCK_KNOWN), both fields, frameCounter and
the RNG. A mismatch is reported with its first frame and byte; the engine is then reloaded from
the game so that the count is of mismatching frames, not of one divergence carried on.
Inputs per round come from a schedule of pad policies (the heuristic placement planner, random
presses, Down-heavy presses, idle) so that rounds are won both ways and attacks go both ways.
Round ends (stage clear, top-out, match over) are passed with Start on pad 1. Prints a JSON
summary. Nothing derived from the ROM is written unless asked with --json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import engine  # noqa: E402
from engine.ram import open_nes  # noqa: E402

MODE, RNG0, RNG1, FRAME_COUNTER = 0x46, 0x17, 0x18, 0x43
PLAYERS, DEMO, SECTION = 0x0727, 0x0741, 0x65
BLOCK = (0x0300, 0x0380)  # p1 / p2 $30-byte blocks
FIELD = (0x0400, 0x0500)
LEVEL, SPEED = 0x16, 0x0B  # offsets in a block
RESERVE = 0x0780
PLAYING = int(engine.Phase.PLAYING)
ROUND_LOST, ROUND_OVER, MATCH_OVER = 7, 8, 9
START, DOWN, UP, LEFT, RIGHT = 0x10, 0x04, 0x08, 0x02, 0x01
KNOWN = list(engine._core.BLOCK_KNOWN)


class Console:
    """The real game in cynes, pads as bytes."""

    def __init__(self, rom: str) -> None:
        self.nes = open_nes(rom)
        st = self.nes.save()
        st[24] = 0  # cynes leaves this byte uninitialised: the first NMI could come a frame late
        self.nes.load(st)
        self.frames = 0

    def step(self, m1: int, m2: int = 0) -> None:
        self.nes.controller = (m1 & 0xFF) | ((m2 & 0xFF) << 8)
        self.nes.step(1)
        self.frames += 1

    def __getitem__(self, a: int) -> int:
        return int(self.nes[a])

    def read(self, a: int, n: int) -> bytes:
        return bytes(int(self.nes[a + i]) for i in range(n))

    def ram(self) -> bytes:
        return self.read(0, 0x800)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def navigate(c: Console, levels: tuple[int, int], speeds: tuple[int, int]) -> int:
    """Title to the options screen's Start for a 2-player match; returns after the frame that
    took Start, with the RNG state the options screen left."""
    for k in range(20_000):
        if k % 2:  # a release frame between presses: the game acts on press edges
            c.step(0, 0)
            continue
        if c[DEMO]:
            c.step(START)
            continue
        mode = c[MODE]
        if mode == 0:
            c.step(DOWN if c[PLAYERS] != 2 else START)
            continue
        if mode != 1:
            c.step(0)
            continue
        sec = c[SECTION]
        lv = [c[BLOCK[i] + LEVEL] for i in range(2)]
        sp = [c[BLOCK[i] + SPEED] for i in range(2)]
        if lv != list(levels):
            if sec != 0:
                c.step(UP)
                continue
            m = [0, 0]
            for i in range(2):
                if lv[i] != levels[i]:
                    m[i] = RIGHT if lv[i] < levels[i] else LEFT
            c.step(m[0], m[1])
            continue
        if sp != list(speeds):
            if sec != 1:
                c.step(DOWN if sec < 1 else UP)
                continue
            m = [0, 0]
            for i in range(2):
                if sp[i] != speeds[i]:
                    m[i] = RIGHT if sp[i] < speeds[i] else LEFT
            c.step(m[0], m[1])
            continue
        c.step(START)
        if c[MODE] != 1:  # Start taken (the options loop steps the RNG no more)
            return (c[RNG0] << 8) | c[RNG1]
    raise RuntimeError("could not reach the options screen's Start")


class Pad:
    """One player's input policy: plan (heuristic planner), random, drop (Down-heavy), idle."""

    def __init__(self, kind: str, rng: np.random.Generator, pad1: bool) -> None:
        self.kind, self.rng, self.hold, self.left = kind, rng, 0, 0
        self.queue: list[int] = []
        self.allowed = 0xCF if pad1 else 0xFF  # pad 1: no Start/Select (pause, reset)

    def mask(self, v: engine.Versus, player: engine.VersusPlayer) -> int:
        if self.kind == "idle":
            return 0
        if self.kind == "plan":
            if not self.queue and v.phase == PLAYING and int(player.next_action) == 0:
                g = player.game()
                p = engine.plan(g)
                if p.reachable.any() and POLICY is not None:
                    self.queue = [int(m) for m in p.masks(POLICY.choose(g, p.reachable))]
            return self.queue.pop(0) if self.queue else 0
        if self.left <= 0:
            self.left = int(self.rng.integers(1, 9))
            if self.kind == "drop" and self.rng.random() < 0.7:
                self.hold = DOWN
            else:
                self.hold = int(self.rng.integers(0, 256)) & self.allowed
        self.left -= 1
        return self.hold


POLICY: Any = None  # the HeuristicPolicy, made in run()
SCHEDULE = [
    ("plan", "plan"),
    ("plan", "idle"),
    ("idle", "plan"),
    ("plan", "random"),
    ("random", "plan"),
    ("plan", "drop"),
    ("drop", "plan"),
    ("random", "drop"),
]


def compare(c: Console, v: engine.Versus, check_fields: bool = True) -> list[str]:
    bad: list[str] = []
    for i in range(2):
        game_block = c.read(BLOCK[i], 0x30)
        eng_block = v.block(i)
        for k in KNOWN:
            if game_block[k] != eng_block[k]:
                bad.append(
                    f"p{i + 1} block ${BLOCK[i] + k:04X}: game {game_block[k]:#04x} "
                    f"engine {eng_block[k]:#04x}"
                )
        if check_fields:
            gf = np.frombuffer(c.read(FIELD[i], 128), np.uint8)
            ef = np.asarray(v.player(i).field)
            for pos in np.flatnonzero(gf != ef)[:4]:
                bad.append(
                    f"p{i + 1} field ${FIELD[i] + pos:04X}: game {gf[pos]:#04x} "
                    f"engine {ef[pos]:#04x}"
                )
    if c[FRAME_COUNTER] != v.frame_counter:
        bad.append(f"frameCounter: game {c[FRAME_COUNTER]} engine {v.frame_counter}")
    rng = (c[RNG0] << 8) | c[RNG1]
    if rng != v.rng:
        bad.append(f"rng: game {rng:#06x} engine {v.rng:#06x}")
    return bad


def compare_round_start(c: Console, pred: engine.Versus) -> list[str]:
    """The predicted round (boards, reserve, counters, RNG) against the game's first mode-4
    frame. The predicted state is still in levelIntro_delay; nothing it does there changes
    these bytes."""
    bad: list[str] = []
    for i in range(2):
        pl = pred.player(i)
        if c.read(FIELD[i], 128) != bytes(np.asarray(pl.field)):
            bad.append(f"p{i + 1} board differs")
        if c[BLOCK[i] + 0x24] != int(pl.virus_left_bcd):
            bad.append(f"p{i + 1} virusLeft {c[BLOCK[i] + 0x24]:#x} vs {int(pl.virus_left_bcd):#x}")
        for off, name in ((0x27, "pills_counter"), (0x1A, "next_colors")):
            want = int(pl.pills_counter) if off == 0x27 else int(pl.next_colors[0])
            if c[BLOCK[i] + off] != want:
                bad.append(f"p{i + 1} {name}")
    if c.read(RESERVE, 128) != pred.reserve:
        bad.append("reserve differs")
    rng = (c[RNG0] << 8) | c[RNG1]
    if rng != pred.rng:
        bad.append(f"rng {rng:#06x} vs predicted {pred.rng:#06x}")
    return bad


def run(rom: str, total: int, levels: tuple[int, int], speeds: tuple[int, int], seed: int) -> dict:
    global POLICY
    from hil.loop.heuristic import HeuristicPolicy

    POLICY = HeuristicPolicy()
    rng = np.random.default_rng(seed)
    c = Console(rom)
    out: dict[str, Any] = {
        "rom": Path(rom).name,
        "levels": list(levels),
        "speeds": list(speeds),
        "frames_compared": 0,
        "mismatching_frames": 0,
        "first_mismatches": [],
        "attacks_p1_to_p2": 0,
        "attacks_p2_to_p1": 0,
        "halves_sent": [0, 0],
        "rounds": 0,
        "round_wins": {"p1": 0, "p2": 0, "draw": 0},
        "round_ends": {"clear": 0, "top_out": 0},
        "clear_wins": {"p1": 0, "p2": 0, "draw": 0},
        "matches": 0,
        "match_wins": {"p1": 0, "p2": 0},
        "round_start_checks": 0,
        "round_start_mismatches": [],
        "stale_image_mismatches": [],
    }
    pred: engine.Versus | None = None
    prev: engine.Versus | None = None
    state = "menu"
    round_no = 0
    pads: list[Pad] = []
    while out["frames_compared"] < total:
        if state == "menu":
            seed_rng = navigate(c, levels, speeds)
            pred = engine.Versus(levels[0], speeds[0], levels[1], speeds[1], seed_rng)
            out["matches"] += 1
            state = "wait"
        elif state == "wait":  # to the round's first frame in mode 4
            for _ in range(2000):
                c.step(0, 0)
                if c[MODE] == 4:
                    break
            else:
                raise RuntimeError(f"the round did not start (mode {c[MODE]}, round {round_no})")
            out["round_start_checks"] += 1
            bad = compare_round_start(c, pred) if pred is not None else ["no prediction"]
            if bad:
                out["round_start_mismatches"].append({"round": round_no + 1, "diff": bad[:6]})
            v = engine.Versus.from_ram(c.ram(), PLAYING)
            if pred is not None:
                stale = [0x13, 0x29, 0x2A, 0x2B, 0x2C]
                pb = pred.block(0)
                diff = [f"${k:02X}" for k in stale if c[BLOCK[0] + k] != pb[k]]
                if diff:
                    out["stale_image_mismatches"].append({"round": round_no + 1, "bytes": diff})
            round_no += 1
            kinds = SCHEDULE[(round_no - 1) % len(SCHEDULE)]
            pads = [Pad(kinds[0], rng, True), Pad(kinds[1], rng, False)]
            state = "play"
        elif state == "play":
            m1 = pads[0].mask(v, v.p1)
            m2 = pads[1].mask(v, v.p2)
            before = (int(v.p1.attack_size), int(v.p2.attack_size))
            c.step(m1, m2)
            v.step(m1, m2)
            # An attack is released when the sender's attackSize goes back to 0.
            after = (int(v.p1.attack_size), int(v.p2.attack_size))
            if before[0] >= 2 and after[0] == 0:
                out["attacks_p1_to_p2"] += 1
                out["halves_sent"][0] += min(before[0], 4)
            if before[1] >= 2 and after[1] == 0:
                out["attacks_p2_to_p1"] += 1
                out["halves_sent"][1] += min(before[1], 4)
            out["frames_compared"] += 1
            both_failed = v.phase >= ROUND_OVER and v.who_failed == 0 and v.who_won == 0
            bad = compare(c, v, check_fields=not both_failed)
            if bad:
                out["mismatching_frames"] += 1
                if len(out["first_mismatches"]) < 10:
                    out["first_mismatches"].append(
                        {"frame": out["frames_compared"], "round": round_no, "diff": bad[:6]}
                    )
                log(f"  mismatch at frame {out['frames_compared']} (phase {v.phase}): {bad[:4]}")
                v = engine.Versus.from_ram(c.ram(), v.phase)
            if v.phase in (ROUND_OVER, MATCH_OVER):
                out["rounds"] += 1
                w = v.who_won
                if v.who_failed or any(int(v.player(i).level_fail) for i in range(2)):
                    out["round_ends"]["top_out"] += 1
                    f = v.who_failed
                    w = 2 if f == 1 else 1 if f == 2 else 0
                else:
                    out["round_ends"]["clear"] += 1
                    out["clear_wins"][{0: "draw", 1: "p1", 2: "p2"}[w]] += 1
                out["round_wins"][{0: "draw", 1: "p1", 2: "p2"}[w]] += 1
                if v.phase == MATCH_OVER:
                    out["match_wins"]["p1" if v.victories[0] == 3 else "p2"] += 1
                prev = v.clone()
                state = "between"
                log(
                    f"round {round_no} ({kinds[0]} vs {kinds[1]}): phase {v.phase} won "
                    f"{v.who_won} failed {v.who_failed} victories {v.victories}; "
                    f"{out['frames_compared']} frames, {out['mismatching_frames']} mismatching"
                )
        elif state == "between":  # Start on pad 1 until the next round or the options screen
            k = 0
            while True:
                k += 1
                # One press every 64 frames: a press in the frame that sets mode 3 would be
                # seen by checkPauseReset right after and pause the next round.
                c.step(START if k % 64 == 1 else 0, 0)
                mode = c[MODE]
                if mode in (1, 3):
                    break
                if k > 5000:
                    raise RuntimeError("stuck after a round end")
            log(f"  passed the round end in {k} frames, mode {mode}")
            if mode == 1:
                pred = None
                c.step(0, 0)
                state = "menu"
            else:
                pred = prev.clone() if prev is not None else None
                if pred is not None and pred.phase == ROUND_OVER:
                    pred.next_round(0)
                else:
                    pred = None
                state = "wait"
    out["mismatches"] = out["mismatching_frames"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rom", required=True)
    ap.add_argument("--frames", type=int, default=50_000)
    ap.add_argument("--levels", default="4,7")
    ap.add_argument("--speeds", default="1,1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    lv = tuple(int(x) for x in a.levels.split(","))
    sp = tuple(int(x) for x in a.speeds.split(","))
    res = run(a.rom, a.frames, (lv[0], lv[1]), (sp[0], sp[1]), a.seed)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0 if res["mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
