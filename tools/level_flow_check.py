"""Compare engine.LevelFlow with the real game in cynes, frame by frame (local check, not CI).

    python tools/level_flow_check.py --rom drmario.nes [--levels 0-20] [--speeds 0,1,2]
        [--json out.json] [--md table.md]
    python tools/level_flow_check.py --rom drmario.nes --chain 0:1:3   # 3 levels chained
    python tools/level_flow_check.py --rom drmario.nes --topout 10:2   # top-out, game over

For each level and speed: the menus are driven to the options screen's Start (hil.consoles.emu
navigate_menus), then the game runs with no buttons until a few frames after the first
controllable pill. Every frame compares the game's mode byte ($46), p1_field ($0400), the virus
counter ($0324) and the bottle's cells read from the picture (the tile at the nametable position
of each cell, fieldRow_PPUADDR_1P: an empty cell is backdrop-black, a virus has the colour of its
low nibble) with the engine's model; and the frames of the first virus, of mode 4 and of the first
controllable pill (the first frame after $97 = 0 in mode 4). Prints JSON lines and, with --md, a
Markdown table of the measured frame counts. ``--chain LEVEL:SPEED:N`` plays N levels chained
by Start on the stage clear, with inputs planned on the engine, comparing mode and field on
every frame (stage clear, its box, the next level's load and intro). The user's ROM stays outside
the repository; nothing derived from it is written unless asked with --json/--md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import engine
from engine.ram import DrMarioRam
from hil.consoles.emu import EmulatedNes
from hil.consoles.emu_menus import navigate_menus
from hil.link.link import Link

NEXT_ACTION = 0x97  # currentP_nextAction (the zero-page copy of p1's, equal after the frame)
BOTTLE_X, BOTTLE_Y = 12 * 8, 10 * 8  # fieldRow_PPUADDR_1P row 0: VRAM $214C -> tile (12, 10)


def picture_cells(picture: np.ndarray) -> np.ndarray:
    """The bottle's 16x8 cells from an RGB picture: -1 empty (all dark), else 0 yellow, 1 red,
    2 blue by the brightest pixels' hue."""
    out = np.full(128, -1, np.int16)
    for r in range(16):
        for c in range(8):
            tile = picture[
                BOTTLE_Y + 8 * r : BOTTLE_Y + 8 * r + 8, BOTTLE_X + 8 * c : BOTTLE_X + 8 * c + 8
            ]
            px = tile.reshape(-1, 3).astype(int)
            lit = px[px.sum(1) > 120]
            if len(lit) < 4:
                continue
            rr, gg, bb = lit.mean(0)
            if bb > rr and bb > gg:
                out[r * 8 + c] = 2
            elif gg > 0.6 * rr:
                out[r * 8 + c] = 0
            else:
                out[r * 8 + c] = 1
    return out


def model_cells(shown: np.ndarray) -> np.ndarray:
    out = np.full(128, -1, np.int16)
    v = (shown & 0xF0) == 0xD0
    out[v] = shown[v] & 0x0F
    return out


def record(console: EmulatedNes, link: Link, extra: int) -> list[dict]:
    """The game's frames after the Start frame, with no buttons, until ``extra`` frames after
    the first controllable pill."""
    frames: list[dict] = []
    prev_na, prev_mode = console.ram(NEXT_ACTION), console.ram(DrMarioRam.MODE)
    pill = -1
    for k in range(1, 400):
        if k % 10 == 0:
            link.ping(console.video_frame)
        ev = console.step()
        if pill < 0 and prev_mode == 4 and prev_na == 0:
            pill = k
        mode = console.ram(DrMarioRam.MODE)
        frames.append(
            {
                "k": k,
                "lag": ev.console_frame is None,
                "mask": int(ev.mask or 0),
                "mode": mode,
                "field": console.ram_block(DrMarioRam.FIELD, 128),
                "virus_left": console.ram(DrMarioRam.VIRUS_LEFT),
                "picture": ev.picture,
                "pill": pill == k,
            }
        )
        prev_na, prev_mode = console.ram(NEXT_ACTION), mode
        if pill >= 0 and k >= pill + extra:
            break
    return frames


def compare(frames: list[dict], flow: engine.LevelFlow) -> list[str]:
    """Steps ``flow`` along the recorded frames; the differences, one line each."""
    bad: list[str] = []
    for fr in frames:
        k = fr["k"]
        if fr["lag"]:
            bad.append(f"frame {k}: lag frame (no NMI)")
            continue
        flow.step(fr["mask"])
        if fr["mode"] != flow.mode:
            bad.append(f"frame {k}: mode {fr['mode']} vs engine {flow.mode}")
        if not np.array_equal(fr["field"], flow.field):
            diff = np.flatnonzero(fr["field"] != flow.field)[:8].tolist()
            bad.append(f"frame {k}: field differs at {diff}")
        vl = fr["virus_left"]
        if (vl >> 4) * 10 + (vl & 15) != flow.virus_left:
            bad.append(f"frame {k}: virus_left {vl:#x} vs engine {flow.virus_left}")
        if flow.screen == engine.FlowScreen.BLANK and np.ptp(fr["picture"]) != 0:
            bad.append(f"frame {k}: the picture is not blank")
        # The bottle before the first pill (later, the falling pill's sprite covers cells).
        if flow.screen == engine.FlowScreen.LEVEL and flow.play_frame < 0:
            pc, mc = picture_cells(fr["picture"]), model_cells(flow.shown)
            if not np.array_equal(pc, mc):
                bad.append(
                    f"frame {k}: bottle picture differs at {np.flatnonzero(pc != mc)[:8].tolist()}"
                )
    return bad


def measure(rom: str, level: int, speed: int, extra: int = 4) -> dict:
    console = EmulatedNes(rom)
    with console, Link(console.device.port) as link:
        res = navigate_menus(console, link, level, speed)
        fc = console.ram(0x43)
        frames = record(console, link, extra)
    virus = [fr["k"] for fr in frames if ((fr["field"] & 0xF0) == 0xD0).any()]
    first_virus = virus[0] if virus else -1
    play = next((fr["k"] for fr in frames if fr["mode"] == 4), -1)
    pill = next((fr["k"] for fr in frames if fr["pill"]), -1)
    # The one input the engine cannot derive: did initData_level overrun its frame?
    late = first_virus == engine_first_virus() + 1
    flow = engine.LevelFlow(level, speed, res.seed, frame_counter=fc, held=0x10, late_init=late)
    bad = compare(frames, flow)
    return {
        "level": level,
        "speed": speed,
        "seed": f"0x{res.seed:04X}",
        "frame_counter": fc,
        "late_init": late,
        "game": {"first_virus": first_virus, "play": play, "pill": pill},
        "engine": {
            "first_virus": flow.state0_frame - flow.add_virus_calls,
            "state0": flow.state0_frame,
            "add_virus_calls": flow.add_virus_calls,
            "play": flow.play_frame,
            "pill": flow.pill_frame,
        },
        "mismatches": len(bad),
        "first_mismatches": bad[:5],
    }


def engine_first_virus() -> int:
    """The first virus's frame after Start when initData_level does not overrun."""
    flow = engine.LevelFlow(0, 1, 0x8988)
    while flow.add_virus_calls == 0:
        flow.step(0)
    return flow.frame


def chain(rom: str, level: int, speed: int, levels: int) -> dict:
    """Plays ``levels`` levels from ``level`` on the real game with inputs planned on the engine
    (the heuristic placement policy; the engine is exact in play, so the same masks clear the
    real level), Start pressed from each stage clear, and compares every frame (mode, field)
    as ``measure`` does. The initData_level overrun bit of each level is read off the game (the
    first virus a frame late) and given to the flow by replaying it from before initData."""
    from hil.loop.heuristic import HeuristicPolicy

    policy = HeuristicPolicy()
    console = EmulatedNes(rom)
    rows: list[dict] = []
    with console:
        res = navigate_menus(console, Link(console.device.port), level, speed)
        fc = console.ram(0x43)
        flow = engine.LevelFlow(level, speed, res.seed, frame_counter=fc, held=0x10)
        queue: list[int] = []
        bad: list[str] = []
        snap: engine.LevelFlow | None = None  # the flow before initData_level
        since_snap: list[int] = []
        k = mode3 = 0
        late = False
        while flow.levels_started <= levels and k < 100_000:
            k += 1
            g = flow.game
            stage = engine.FlowStage(flow.stage)
            if stage == engine.FlowStage.PLAY and not queue and g.phase == 1 and g.next_action == 0:
                p = engine.plan(g)
                queue = [int(m) for m in p.masks(policy.choose(g, p.reachable))]
            if stage in (engine.FlowStage.STAGE_CLEAR, engine.FlowStage.CUTSCENE):
                mask = 0x10 if (k // 2) % 2 else 0  # Start, pressed every other pair of frames
            else:
                mask = queue.pop(0) if queue else 0
            # The pad byte straight into the emulator: this check needs no firmware timing.
            console.nes.step(mask, picture=False)
            field = console.ram_block(DrMarioRam.FIELD, 128)
            mode = console.ram(DrMarioRam.MODE)
            flow.step(mask)
            if snap is not None:
                since_snap.append(mask)
            if flow.stage == engine.FlowStage.LOAD and flow.mode == 3:
                snap, since_snap, mode3, late = flow.clone(), [], k, False
            game_virus = bool(((field & 0xF0) == 0xD0).any())
            flow_virus = bool(((flow.field & 0xF0) == 0xD0).any())
            if snap is not None and flow_virus and not game_virus and mode == 8 and not late:
                flow = snap.clone()  # initData_level overran its frame on the game: replay
                flow.late_init = True
                for m in since_snap:
                    flow.step(m)
                late = True
            if mode != flow.mode:
                bad.append(f"frame {k}: mode {mode} vs engine {flow.mode}")
            if not np.array_equal(field, flow.field):
                diff = np.flatnonzero(field != flow.field)[:8].tolist()
                bad.append(f"frame {k}: field differs at {diff}")
            if flow.play_frame == k:
                rows.append(
                    {
                        "level": int(flow.level),
                        "start": flow.start_frame,
                        "mode3": mode3,
                        "first_virus": flow.state0_frame - flow.add_virus_calls,
                        "play": k,
                        "pill": -1,
                        "late_init": late,
                    }
                )
                snap = None
            if flow.pill_frame == k and rows:
                rows[-1]["pill"] = k
    return {"levels": rows, "frames": k, "mismatches": len(bad), "first_mismatches": bad[:8]}


def topout(rom: str, level: int, speed: int) -> dict:
    """Nobody plays: the pills stack up to the top-out, the game over screen follows, Start is
    pressed every 4th frame there until the options screen; mode and field compared on every
    frame (the GAME OVER box, the field filled with $FE at the end)."""
    console = EmulatedNes(rom)
    bad: list[str] = []
    with console:
        res = navigate_menus(console, Link(console.device.port), level, speed)
        flow = engine.LevelFlow(level, speed, res.seed, frame_counter=console.ram(0x43), held=0x10)
        snap: engine.LevelFlow | None = None
        since: list[int] = []
        late = False
        k = 0
        while not flow.terminal and k < 30_000:
            k += 1
            mask = 0x10 if flow.stage == engine.FlowStage.GAME_OVER and k % 4 == 0 else 0
            console.nes.step(mask, picture=False)  # no firmware timing needed
            flow.step(mask)
            if snap is not None:
                since.append(mask)
            if flow.stage == engine.FlowStage.LOAD and flow.mode == 3:
                snap, since = flow.clone(), []
            field = console.ram_block(DrMarioRam.FIELD, 128)
            mode = console.ram(DrMarioRam.MODE)
            game_virus = bool(((field & 0xF0) == 0xD0).any())
            if snap is not None and not late and mode == 8 and not game_virus:
                if ((flow.field & 0xF0) == 0xD0).any():  # initData_level overran: replay
                    flow = snap.clone()
                    flow.late_init = True
                    for m in since:
                        flow.step(m)
                    late = True
            if mode != flow.mode or not np.array_equal(field, flow.field):
                bad.append(f"frame {k}: mode {mode} vs {flow.mode}, stage {flow.stage}")
    return {
        "frames": k,
        "top_out_frame": flow.end_frame,
        "options": bool(flow.terminal and console.ram(DrMarioRam.MODE) == 1),
        "late_init": late,
        "mismatches": len(bad),
        "first_mismatches": bad[:5],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rom", required=True)
    ap.add_argument("--levels", default="0-20")
    ap.add_argument("--speeds", default="0,1,2")
    ap.add_argument("--json")
    ap.add_argument("--md")
    ap.add_argument("--chain", help="LEVEL:SPEED:N play N levels chained from LEVEL at SPEED")
    ap.add_argument("--topout", help="LEVEL:SPEED nobody plays: top-out, game over, options")
    a = ap.parse_args(argv)
    if not Path(a.rom).is_file():
        print(f"error: {a.rom}: no such ROM file", file=sys.stderr)
        return 2
    if a.topout:
        lv, sp = (int(x) for x in a.topout.split(":"))
        r = topout(a.rom, lv, sp)
        print(json.dumps(r))
        return 0 if r["mismatches"] == 0 and r["options"] else 1
    if a.chain:
        lv, sp, n = (int(x) for x in a.chain.split(":"))
        r = chain(a.rom, lv, sp, n)
        print(json.dumps(r))
        return 0 if r["mismatches"] == 0 else 1
    lo, _, hi = a.levels.partition("-")
    levels = range(int(lo), int(hi or lo) + 1)
    speeds = [int(s) for s in a.speeds.split(",")]
    rows = []
    for lv in levels:
        for sp in speeds:
            r = measure(a.rom, lv, sp)
            rows.append(r)
            print(json.dumps(r), flush=True)
    ok = all(
        r["mismatches"] == 0
        and r["game"]["play"] == r["engine"]["play"]
        and r["game"]["pill"] == r["engine"]["pill"]
        for r in rows
    )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    if a.md:
        lines = [
            "| level | speed | first virus | mode 4 (game / engine) "
            "| first pill (game / engine) | frame mismatches |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            g, e = r["game"], r["engine"]
            speed = "LOW MED HI".split()[r["speed"]]
            lines.append(
                f"| {r['level']} | {speed} | {g['first_virus']} | {g['play']} / {e['play']} "
                f"| {g['pill']} / {e['pill']} | {r['mismatches']} |"
            )
        Path(a.md).write_text("\n".join(lines) + "\n")
    print(json.dumps({"all_equal": ok, "cases": len(rows)}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
