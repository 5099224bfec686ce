"""Compare engine.render_versus with the real game's picture in cynes (local check, not CI).

    python tools/render_versus_check.py --rom drmario.nes [--frames 20000] [--levels 4,7]
        [--speeds 1,1] [--seed 0] [--json out.json] [--diffs DIR]

The ROM is driven into a two-player match and played with both pads exactly as
tools/versus_check.py does (its navigation, pad schedule and round-end handling). At each
round's first mode-4 frame the engine is loaded from the game's RAM (Versus.from_ram), then
both are stepped with the same pad bytes. Before each step the engine's picture
``render_versus(v, TileSet.from_ines(rom))`` (the picture of the next frame, docs/RENDER.md)
is compared pixel by pixel with the picture cynes renders in that step. cynes has its own RGB
palette: each NES colour's RGB is learnt from the first picture it appears in (the majority
RGB of the pixels the engine draws in it), so a pixel counts as different when its RGB is not
that of the NES colour the engine puts there. A differing picture is also counted when it is one
where the small viruses' CHR bank changes (frameCounter + 1 a multiple of 8: docs/RENDER.md,
"Two players", what differs). The first 2 pictures after a load are skipped
(Versus.from_ram knows no sprite snapshot). The terminal picture of each round (the first
after ROUND_OVER / MATCH_OVER) is compared too. Prints a JSON summary; writes nothing derived
from the ROM unless asked (--json, --diffs: PNGs of differing frames, kept outside the repo).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import versus_check as vc  # noqa: E402

import engine  # noqa: E402

SKIP_AFTER_LOAD = 2


class Comparer:
    """Engine picture against cynes' picture, through a learnt NES colour -> RGB table."""

    def __init__(self, tiles: engine.TileSet, diffs: Path | None) -> None:
        self.tiles = tiles
        self.table: dict[int, tuple[int, int, int]] = {}
        self.diffs = diffs
        self.out: dict[str, Any] = {
            "frames_compared": 0,
            "frames_identical": 0,
            "differing_pixels": 0,
            "differing_at_virus_frame_change": 0,
            "by_phase": {},
            "first_differences": [],
        }

    def compare(self, v: engine.Versus, real: np.ndarray, tag: str) -> int:
        idx = engine.render.render_versus_indices(v, self.tiles)
        pal = engine.render.versus_palette_ram(v, self.tiles)
        lut = pal.copy()
        lut[0::4] = pal[0]  # colour 0 of every palette shows the backdrop
        nes = lut[idx & 31]
        for c in np.unique(nes):
            if int(c) not in self.table:
                px = real[nes == c].reshape(-1, 3)
                vals, counts = np.unique(px, axis=0, return_counts=True)
                r, g, b = (int(x) for x in vals[counts.argmax()])
                self.table[int(c)] = (r, g, b)
        want = np.zeros_like(real)
        for c, rgb in self.table.items():
            want[nes == c] = rgb
        bad = np.any(want != real, axis=2)
        n = int(bad.sum())
        o = self.out
        o["frames_compared"] += 1
        ph = o["by_phase"].setdefault(tag, [0, 0])
        ph[0] += 1
        if n == 0:
            o["frames_identical"] += 1
            ph[1] += 1
        else:
            o["differing_pixels"] += n
            # smallVirusLvlAnim switches CHR bank 1 in this picture's main loop
            changes = (int(v.frame_counter) + 1) % 8 == 0
            o["differing_at_virus_frame_change"] += changes
            ys, xs = np.nonzero(bad)
            if len(o["first_differences"]) < 20:
                o["first_differences"].append(
                    {
                        "frame": o["frames_compared"],
                        "phase": tag,
                        "pixels": n,
                        "virus_frame_change": changes,
                        "box": [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())],
                    }
                )
            if self.diffs is not None and len(o["first_differences"]) <= 20:
                from PIL import Image

                self.diffs.mkdir(parents=True, exist_ok=True)
                ours = engine.render_versus(v, self.tiles)
                pic = np.concatenate([ours, real, (bad[..., None] * 255).repeat(3, 2)], axis=1)
                Image.fromarray(pic.astype(np.uint8)).save(
                    self.diffs / f"diff_{o['frames_compared']:06d}.png"
                )
        return n


def run(
    rom: str,
    total: int,
    levels: tuple[int, int],
    speeds: tuple[int, int],
    seed: int,
    diffs: Path | None,
) -> dict:
    from hil.loop.heuristic import HeuristicPolicy

    vc.POLICY = HeuristicPolicy()
    rng = np.random.default_rng(seed)
    c = vc.Console(rom)
    cmp = Comparer(engine.TileSet.from_ines(rom), diffs)
    out = cmp.out
    out.update({"rom": Path(rom).name, "levels": list(levels), "speeds": list(speeds)})
    out.update({"rounds": 0, "state_mismatches": 0, "attacks": 0})
    state, round_no, since_load = "menu", 0, 0
    pads: list[vc.Pad] = []
    v: engine.Versus | None = None
    while out["frames_compared"] < total:
        if state == "menu":
            vc.navigate(c, levels, speeds)
            state = "wait"
        elif state == "wait":
            for _ in range(2000):
                c.step(0, 0)
                if c[vc.MODE] == 4:
                    break
            else:
                raise RuntimeError("the round did not start")
            v = engine.Versus.from_ram(c.ram(), vc.PLAYING)
            since_load = 0
            round_no += 1
            kinds = vc.SCHEDULE[(round_no - 1) % len(vc.SCHEDULE)]
            pads = [vc.Pad(kinds[0], rng, True), vc.Pad(kinds[1], rng, False)]
            state = "play"
        elif state == "play":
            assert v is not None
            m1 = pads[0].mask(v, v.p1)
            m2 = pads[1].mask(v, v.p2)
            before = v.clone()
            c.nes.controller = (m1 & 0xFF) | ((m2 & 0xFF) << 8)
            real = np.array(c.nes.step(1), dtype=np.uint8, copy=True)
            c.frames += 1
            if since_load >= SKIP_AFTER_LOAD:
                cmp.compare(before, real, engine.Phase(before.phase).name)
            since_load += 1
            a0 = (int(v.p1.attack_size), int(v.p2.attack_size))
            v.step(m1, m2)
            if any(a >= 2 for a in a0) and (int(v.p1.attack_size), int(v.p2.attack_size)) != a0:
                out["attacks"] += 1
            if vc.compare(c, v, check_fields=v.phase < vc.ROUND_OVER):
                out["state_mismatches"] += 1
                v = engine.Versus.from_ram(c.ram(), v.phase)
                since_load = 0
            if v.phase in (vc.ROUND_OVER, vc.MATCH_OVER):
                out["rounds"] += 1
                state = "between"
        elif state == "between":
            assert v is not None
            k = 0
            while True:
                k += 1
                c.nes.controller = vc.START if k % 64 == 1 else 0
                real = np.array(c.nes.step(1), dtype=np.uint8, copy=True)
                c.frames += 1
                if k == 1:  # the first picture after the round's end
                    cmp.compare(v, real, engine.Phase(v.phase).name)
                mode = c[vc.MODE]
                if mode in (1, 3):
                    break
            if mode == 1:
                c.step(0, 0)
                state = "menu"
            else:
                state = "wait"
            vc.log(
                f"round {round_no}: {out['frames_compared']} frames, "
                f"{out['frames_identical']} identical"
            )
    out["colour_table"] = {f"{k:02X}": list(v) for k, v in sorted(cmp.table.items())}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rom", required=True)
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--levels", default="4,7")
    ap.add_argument("--speeds", default="1,1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--diffs", type=Path, help="a directory for PNGs of differing frames")
    a = ap.parse_args(argv)
    lv = tuple(int(x) for x in a.levels.split(","))
    sp = tuple(int(x) for x in a.speeds.split(","))
    res = run(a.rom, a.frames, (lv[0], lv[1]), (sp[0], sp[1]), a.seed, a.diffs)
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text + "\n")
    return 0 if res["frames_identical"] == res["frames_compared"] else 1


if __name__ == "__main__":
    sys.exit(main())
