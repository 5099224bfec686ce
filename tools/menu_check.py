"""Compare engine.Menu with the real game in cynes, frame by frame (local check, not CI).

    python tools/menu_check.py --rom drmario.nes [--episodes 40] [--frames 600] [--seed 0]
        [--demo] [--json out.json]

Each episode starts from a snapshot of the game on its options screen or its title (reached
from power-on by pressing Start), builds ``engine.Menu`` from the game's RAM there, then feeds
both the same random controller masks (single presses, holds of Left/Right for the level's
auto-repeat, B back to the title, Start on the title, rarely Start on the options screen) and
compares every NMI frame: mode $46, p1_level $0316, p1_speedSetting $030B, musicType $0731,
optionSectionHighlight $65, nbPlayers $0727, p1_horVelocity $0313 on the options screen, the
RNG $17/$18 on the options screen, and on which frames the title and options loops run. An
episode ends at Start on the options screen (the model must end there too, with the same RNG).
``--demo``: also waits on the title for the attract demo and presses Start in it. Frames whose
NMI did not run (a lag frame: frameCounter $43 unchanged) are not stepped. Prints one JSON line
per episode and a summary; exit 1 on any mismatch. The ROM stays outside the repository.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

import engine
from engine.nes import Nes, NesState
from engine.ram import DrMarioRam

R = DrMarioRam

B = engine.Button


class Game:
    """The ROM in cynes (engine.nes.Nes), stepped one video frame at a time."""

    def __init__(self, rom: str) -> None:
        self.nes = Nes.open(rom)
        self.fc = self.nes.ram(R.FRAME_COUNTER)

    def step(self, mask: int) -> bool:
        """One video frame with ``mask`` on the pad; True if its NMI ran (frameCounter moved)."""
        self.nes.step(mask, picture=False)
        fc = self.nes.ram(R.FRAME_COUNTER)
        ran = fc != self.fc
        self.fc = fc
        return ran

    def load(self, state: NesState) -> None:
        """Back to a state saved with ``self.nes.save()``."""
        self.nes.load(state)
        self.fc = self.nes.ram(R.FRAME_COUNTER)

    def ram(self, a: int) -> int:
        return self.nes.ram(a)

    def menu(self, screen: str) -> engine.Menu:
        r = self.ram
        return engine.Menu(
            screen,
            level=r(R.LEVEL),
            speed=r(R.SPEED),
            music=r(R.MUSIC),
            rng=r(R.RNG) << 8 | r(R.RNG + 1),
            frame_counter=r(R.FRAME_COUNTER),
            held=r(R.HELD),
        )


def compare(game: Game, m: engine.Menu) -> list[str]:
    r = game.ram
    bad = []
    fields = [("mode", R.MODE, m.mode), ("level", R.LEVEL, m.level), ("speed", R.SPEED, m.speed)]
    fields += [("players", R.PLAYERS, m.players), ("fc", R.FRAME_COUNTER, m.frame_counter)]
    if m.stage in (engine.MenuStage.OPTIONS, engine.MenuStage.START):
        fields += [("section", R.OPTION_SECTION, m.section), ("music", R.MUSIC, m.music)]
        fields += [("hor_velocity", R.HOR_VELOCITY, m.hor_velocity)]
        fields += [("rng", -1, m.rng)]
    for name, addr, want in fields:
        got = r(R.RNG) << 8 | r(R.RNG + 1) if addr < 0 else r(addr)
        if got != want:
            bad.append(f"{name}: game {got} engine {want}")
    return bad


def random_masks(rng: np.random.Generator, n: int) -> list[int]:
    """Random controller input: idle gaps, taps, holds (Left/Right for the auto-repeat)."""
    out: list[int] = []
    choices = [B.LEFT, B.RIGHT, B.UP, B.DOWN, B.SELECT, B.A, B.LEFT | B.RIGHT, B.RIGHT | B.A]
    while len(out) < n:
        u = rng.random()
        if u < 0.3:
            out += [0] * int(rng.integers(1, 12))
        elif u < 0.75:
            out += [int(choices[rng.integers(len(choices))])] * int(rng.integers(1, 4))
        elif u < 0.9:
            out += [int(rng.choice([B.LEFT, B.RIGHT]))] * int(rng.integers(5, 40))
        elif u < 0.96:
            out += [int(B.B)] + [0] * int(rng.integers(0, 8))
        elif u < 0.99:
            out += [int(B.START)] + [0] * int(rng.integers(0, 8))  # title -> options
        else:
            out += [int(B.START)]
    return out[:n]


def power_on_to(game: Game, where: str) -> None:
    for _ in range(60):
        game.step(0)
    if where == "options":
        game.step(int(B.START))
        for _ in range(8):
            game.step(0)


def episode(
    game: Game, start: NesState, where: str, masks: list[int], rng: np.random.Generator
) -> dict[str, Any]:
    game.load(start)
    m = game.menu(where)
    frames = mismatches = 0
    first: list[str] = []
    for i, mask in enumerate(masks):
        if mask & B.START and m.stage == engine.MenuStage.OPTIONS and rng.random() > 0.1:
            mask = 0  # Start on the options screen ends the episode: keep most episodes long
        ran = game.step(mask)
        if not ran:
            continue
        m.step(mask)
        frames += 1
        bad = compare(game, m)
        if bad:
            mismatches += 1
            if not first:
                first = [f"frame {i}: " + "; ".join(bad)]
        if game.ram(R.MODE) >= 2 and not game.ram(R.DEMO):
            if not m.started:
                mismatches += 1
                first = first or [f"frame {i}: the game left the options screen, engine did not"]
            break
        if m.started:
            mismatches += 1
            first = first or [f"frame {i}: engine started, the game did not"]
            break
    return {
        "where": where,
        "frames": frames,
        "mismatch_frames": mismatches,
        "first": first,
        "started": bool(m.started),
        "level": int(m.level),
        "speed": int(m.speed),
    }


def demo_check(game: Game, start: NesState, press_at: int) -> dict[str, Any]:
    """Idle on the title until the demo starts, Start in its frame ``press_at`` (counted from
    the frame that began it), compare until back on the title (or 400 frames on)."""
    game.load(start)
    m = game.menu("title")
    mismatches = 0
    first: list[str] = []
    i = 0
    after = -1
    seen_demo = False
    while i < 9000:
        mask = 0
        if m.stage == engine.MenuStage.DEMO and m.stage_frame + 1 == press_at and after < 0:
            mask = int(B.START)
            after = 0
        ran = game.step(mask)
        i += 1
        if not ran:
            continue
        m.step(mask)
        seen_demo |= bool(m.demo)
        got_demo, got_mode = bool(game.ram(R.DEMO)), game.ram(R.MODE)
        in_title = m.stage in (engine.MenuStage.TITLE, engine.MenuStage.TITLE_LOAD)
        if got_demo != m.demo or (in_title and got_mode != 0) or (got_demo and not m.demo):
            mismatches += 1
            first = first or [f"frame {i}: game mode {got_mode} demo {got_demo}, engine {m.stage}"]
        if after >= 0:
            after += 1
        if after > 400 or (seen_demo and m.stage == engine.MenuStage.TITLE and m.stage_frame > 10):
            break
    return {
        "where": f"demo, Start in its frame {press_at}",
        "frames": i,
        "mismatch_frames": mismatches,
        "first": first,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/menu_check.py", description=__doc__)
    p.add_argument("--rom", required=True)
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--frames", type=int, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--demo", action="store_true")
    p.add_argument(
        "--demo-press",
        type=lambda t: [int(x) for x in t.split(",")],
        default=[2, 3, 4, 5, 6, 7, 60, 134, 135, 300, 99999],
        help="demo frames to press Start in (with --demo; past its end: none)",
    )
    p.add_argument("--json")
    a = p.parse_args(argv)
    try:
        game = Game(a.rom)
    except Exception as e:  # cynes raises RuntimeError/OSError for a file it cannot load
        print(f"--rom: cannot load {a.rom}: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(a.seed)
    snaps = {}
    power_on_to(game, "title")
    snaps["title"] = game.nes.save()
    game.load(snaps["title"])
    power_on_to(game, "options")
    snaps["options"] = game.nes.save()
    results = []
    for k in range(a.episodes):
        where = "options" if k % 2 == 0 else "title"
        res = episode(game, snaps[where], where, random_masks(rng, a.frames), rng)
        res["episode"] = k
        print(json.dumps(res))
        results.append(res)
    if a.demo:
        for press_at in a.demo_press:
            res = demo_check(game, snaps["title"], press_at)
            print(json.dumps(res))
            results.append(res)
    total = sum(r["frames"] for r in results)
    bad = sum(r["mismatch_frames"] for r in results)
    summary = {
        "episodes": len(results),
        "frames": total,
        "mismatch_frames": bad,
        "starts": sum(1 for r in results if r.get("started")),
    }
    print(json.dumps(summary))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "episodes": results}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
