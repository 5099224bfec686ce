"""Measure the screen reader and the menu driver on the real game in cynes (local, not CI).

    python tools/screens_check.py --rom drmario.nes [--profiles mjpeg_720p_q70,hdmi_1080p_bilinear]
        [--starts 20] [--json out.json]

1. Prototypes from the ROM as ``hil prepare`` makes them (perception.screens_rom.rom_prototypes,
   script seed 0).
2. Reader: the same kind of script with another seed (1: other random presses, other options
   settings in another order, other games) gives held-out pictures with the truth from RAM;
   each goes through the profile's capture model (calibration.CaptureModel) and is read from
   the capture (``ScreenReader.read``). Prints the kind accuracy over all frames and over the
   settled ones (the truth the same one frame before and after: a picture drawn while the
   screen changes is half one thing), per kind, and on OPTIONS the level and speed, the
   players, the highlighted row and, on the two-player screen, player 2's level and speed.
3. Driver: ``--starts`` starts per profile from the title, the options screen (left at a random
   level, speed and row), the attract demo, a stage clear and a game over, each to a random
   level and speed, through ``hil.menus.MenuDriver`` on captured pictures; a start counts when
   the game's RAM shows the asked level and speed as it leaves the options screen.

The ROM stays outside the repository; nothing derived from it is written unless asked (--json).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from calibration import CaptureModel, Profile
from engine.ram import DrMarioRam as R
from hil.menus import MenuDriver, MenuError
from perception.screens import KINDS, OPTIONS, ScreenPrototypes, ScreenReader
from perception.screens_rom import (
    RomRun,
    menu_press,
    rom_pictures,
    rom_prototypes,
)

DOWN, START = 4, 0x10


def reader_check(reader: ScreenReader, rom: str, profile: Profile, seed: int) -> dict[str, Any]:
    model = CaptureModel(profile, seed=seed)
    frames = list(rom_pictures(rom, seed=seed, every=2, demo_every=4, combos=60, versus_combos=60))
    total = right = settled = settled_right = 0
    per_kind: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    confusion: collections.Counter[str] = collections.Counter()
    opt = opt_level = opt_speed = 0
    two: collections.Counter[str] = collections.Counter()  # the two-player reading's counts
    t_read = 0.0
    for i, (pic, kind, truth) in enumerate(frames):
        captured = model(pic)
        t0 = time.perf_counter()
        r = reader.read(captured, profile)
        t_read += time.perf_counter() - t0
        want = KINDS[kind]
        ok = r.kind == want
        total += 1
        right += ok
        stable = 0 < i < len(frames) - 1 and frames[i - 1][1] == kind == frames[i + 1][1]
        if stable:
            settled += 1
            settled_right += ok
            per_kind[want][0] += 1
            per_kind[want][1] += ok
            if not ok:
                confusion[f"{want}->{r.kind}"] += 1
        if kind == OPTIONS and stable:
            opt += 1
            opt_level += r.level == truth["level"]
            opt_speed += r.speed == truth["speed"]
            two["players"] += r.players == truth["players"]
            two["section"] += r.section == truth["section"]
            if truth["players"] == 2:
                two["frames2"] += 1
                two["level2"] += r.level2 == truth["level2"]
                two["speed2"] += r.speed2 == truth["speed2"]
    return {
        "profile": profile.name,
        "frames": total,
        "kind_accuracy_all": right / total,
        "settled_frames": settled,
        "kind_accuracy_settled": settled_right / max(settled, 1),
        "per_kind_settled": {k: {"frames": n, "accuracy": r / n} for k, (n, r) in per_kind.items()},
        "confusions": dict(confusion.most_common(8)),
        "options_frames": opt,
        "options_level_accuracy": opt_level / max(opt, 1),
        "options_speed_accuracy": opt_speed / max(opt, 1),
        "options_players_accuracy": two["players"] / max(opt, 1),
        "options_section_accuracy": two["section"] / max(opt, 1),
        "options_two_player_frames": two["frames2"],
        "options_level2_accuracy": two["level2"] / max(two["frames2"], 1),
        "options_speed2_accuracy": two["speed2"] / max(two["frames2"], 1),
        "read_ms": 1000 * t_read / max(total, 1),
    }


class CynesPort:
    """The ROM in cynes behind the driver's two callables, pictures through a profile."""

    def __init__(self, run: RomRun, model: CaptureModel, lag: int = 2, lead: int = 2) -> None:
        self.run, self.model, self.lag, self.lead = run, model, lag, lead
        self.frame = -1
        self.masks: dict[int, int] = {}
        self.shown: collections.deque[tuple[int, np.ndarray]] = collections.deque()
        self.left_options: tuple[int, int] | None = None  # RAM (level, speed) at the Start

    def send(self, masks: Sequence[int]) -> int:
        first = max(self.frame + self.lead, max(self.masks, default=-1) + 1)
        for i, m in enumerate(masks):
            self.masks[first + i] = int(m)
        return first

    def step(self) -> None:
        self.frame += 1
        mode_before = self.run.ram(R.MODE)
        pic, _, _ = self.run.step(self.masks.pop(self.frame, 0))
        mode = self.run.ram(R.MODE)
        if mode_before == 1 and mode == 2 and not self.run.ram(R.DEMO):
            self.left_options = (self.run.ram(R.LEVEL), self.run.ram(R.SPEED))
        self.shown.append((self.frame, pic))
        while len(self.shown) > self.lag + 1:
            self.shown.popleft()

    def newest(self) -> tuple[int, np.ndarray]:
        self.step()
        frame, pic = self.shown[0]
        return frame, self.model(pic)

    def idle(self, frames: int, mask: int = 0) -> None:
        for _ in range(frames):
            self.run.step(mask)
            self.frame += 1


def setup(run: RomRun, where: str, rng: np.random.Generator) -> None:
    """Bring the game to ``where`` from wherever it is, with RAM-driven presses."""

    def to_options() -> None:
        for _ in range(200):
            if run.ram(R.MODE) == 1 and not run.ram(R.DEMO):
                return
            run.step(START if run.ram(R.MODE) == 0 and not run.ram(R.DEMO) else 0)
            for _ in range(6):
                run.step(0)
        raise RuntimeError("setup: no options screen")

    for _ in range(900):  # the soft reset: checkPauseReset runs in play, not in the intro
        if run.ram(R.MODE) == 0 and not run.ram(R.DEMO):
            break
        run.step(0xF0 if run.ram(R.MODE) != 1 else 0x40)  # B on the options screen
    for _ in range(30):
        run.step(0)
    if where == "title":
        return
    if where == "demo":
        for _ in range(4000):
            if run.ram(R.DEMO) and run.ram(R.MODE) == 4:
                break
            run.step(0)
        for _ in range(int(rng.integers(0, 600))):
            run.step(0)
        return
    to_options()
    lv, sp, sec = int(rng.integers(21)), int(rng.integers(3)), int(rng.integers(3))
    for _ in range(300):
        m = menu_press(run, lv, sp, sec)
        if m == 0:
            break
        run.step(m)
        run.step(0)
    if where == "options":
        return
    run.step(START)
    for _ in range(600):
        if run.ram(R.MODE) == 4:
            break
        run.step(0)
    if where == "stage_clear":
        run.nes.poke(R.VIRUS_LEFT, 0)
        for _ in range(int(rng.integers(100, 200))):
            run.step(0)
        return
    for _ in range(30000):  # game over
        run.step(int(rng.choice([0, DOWN])))
        if run.ram(R.MODE) == 7:
            break
    for _ in range(int(rng.integers(200, 300))):
        run.step(0)


def driver_check(
    reader: ScreenReader, rom: str, profile: Profile, starts: int, seed: int
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    run = RomRun(rom)
    for _ in range(60):
        run.step(0)
    places = ("title", "options", "demo", "stage_clear", "game_over")
    results: dict[str, list[int]] = {p: [0, 0] for p in places}
    failures: list[str] = []
    frames: list[int] = []
    for k in range(starts):
        where = places[k % len(places)]
        setup(run, where, rng)
        level, speed = int(rng.integers(21)), int(rng.integers(3))
        port = CynesPort(run, CaptureModel(profile, seed=seed + k))
        driver = MenuDriver(port.newest, port.send, lambda p: reader.read(p, profile))
        results[where][0] += 1
        try:
            res = driver.start(level, speed)
        except MenuError as e:
            failures.append(f"{where} -> {level}/{speed}: {e}")
            continue
        for _ in range(4):
            port.step()
        ok = port.left_options == (level, speed) and res.level == level and res.speed == speed
        results[where][1] += ok
        frames.append(res.frames)
        if not ok:
            failures.append(f"{where} -> {level}/{speed}: game left options at {port.left_options}")
    return {
        "profile": profile.name,
        "starts": {p: {"tried": n, "ok": ok} for p, (n, ok) in results.items()},
        "ok": sum(ok for _, ok in results.values()),
        "tried": starts,
        "frames_median": float(np.median(frames)) if frames else None,
        "frames_max": max(frames) if frames else None,
        "failures": failures[:10],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/screens_check.py", description=__doc__)
    p.add_argument("--rom", required=True)
    p.add_argument("--profiles", default="mjpeg_720p_q70,hdmi_1080p_bilinear")
    p.add_argument("--starts", type=int, default=20)
    p.add_argument("--no-reader", action="store_true")
    p.add_argument("--prototypes", help="a screens.npz built before (else built from --rom)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    try:
        profiles = [Profile.load(n) for n in a.profiles.split(",")]
    except (ValueError, OSError) as e:
        print(f"--profiles: {e}", file=sys.stderr)
        return 2
    t = time.time()
    try:
        protos = (
            ScreenPrototypes.load(a.prototypes) if a.prototypes else rom_prototypes(a.rom, seed=0)
        )
    except (ValueError, OSError) as e:  # engine.RomError
        print(f"--rom: {e}", file=sys.stderr)
        return 2
    reader = ScreenReader(protos)
    out: dict[str, Any] = {"prototypes": int(len(protos.kind)), "build_s": time.time() - t}
    print(json.dumps(out), flush=True)
    out["reader"], out["driver"] = [], []
    for prof in profiles:
        if not a.no_reader:
            r = reader_check(reader, a.rom, prof, seed=1)
            print(json.dumps(r), flush=True)
            out["reader"].append(r)
        d = driver_check(reader, a.rom, prof, a.starts, seed=2)
        print(json.dumps(d), flush=True)
        out["driver"].append(d)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
