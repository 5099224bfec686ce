"""Matches between placement policies on the real game in cynes (local check, not CI).

    python tools/versus_rom.py --rom drmario.nes --p1 onnx --p2 search-attack --level 10 \\
        --speed med --matches 40 [--first 0] [--out out/versus_rom]

``python -m policy.versus`` plays its matches in the engine; this plays them on the user's ROM,
so that a win rate is the real game's (issue 38: "the bot at full strength wins at least 95 % of
matches against the one-player policy playing without attacks", on the real game). Each match
is its own power-on: the title set to two players, then ``WAIT * i`` idle frames on the
options screen for match i (its loop steps the RNG every frame, so each match has its own
viruses and pills; the title's does not), then tools/versus_check.navigate sets each player's
level and speed with its own pad and presses Start.

In play each player decides at its spawn states on a shadow, as in ``policy.versus.play_round``:
engine.Versus loaded from RAM at each round's first frame of play (mode 4, mainLoop_level
[$9B8D]) and stepped with both bytes the game is given (pad 1 low byte, pad 2 high byte of
cynes' controller); the players' plans are fed to the game, not to the shadow. Every frame the
shadow's fields are compared with the game's ($0400, $0500); a frame that differs is counted
(``shadow_mismatch_frames``) and the shadow reloaded, so a decision is always made on the real
game's state. A round's result is the game's: the victories in RAM (read through
Versus.from_ram; a shadow that counts otherwise adds a mismatch) when the shadow reaches
ROUND_OVER or MATCH_OVER. Between rounds
player 1 presses Start, from 120 frames after a round's end, once every 64 frames (as
hil.consoles.emu_versus). A match ends at MATCH_OVER (3 victories) or when a round runs past
``--max-round-frames`` (a time-out, counted).

One process; ``--first`` numbers the matches, so two processes with their own ``--first`` and
``--out`` play two parts of one set on two cores. Prints policy.versus's table and a JSON
summary; writes matches.jsonl (a line as each match ends), versus.json (every match: its seed
and frameCounter as the game left them, its rounds) and versus.png under --out. Nothing
derived from the ROM but these results is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from versus_check import DOWN, MODE, PLAYERS, START, Console, navigate  # noqa: E402

import engine  # noqa: E402
from engine.constants import Phase  # noqa: E402
from engine.placement import at_spawn  # noqa: E402
from policy.versus import (  # noqa: E402
    PILL_PLACED,
    ROUND_END,
    Config,
    Match,
    MatchResult,
    Round,
    _release_sizes,
    make_player,
    parse_speed,
    plot,
    print_table,
    summarize,
)

WAIT = 7  # idle options-screen frames per match index: each match's own RNG and frameCounter
MODE_PLAY = 4
NEXT_ROUND = (3, 8)  # initData_level, levelIntro: the Start was taken (mode 7, a top-out's
# end screen, waits for it like mode 4 after a clear)
FIELDS = (0x0400, 0x0500)
BETWEEN_ROUNDS_MAX = 5_000  # frames from a round's end to the next one's play, at most
START_AFTER_END, START_REPEAT = 120, 64  # hil.consoles.emu_versus: when the game takes Start
IN_ROUND = (int(Phase.PLAYING), int(Phase.PAUSED), int(Phase.ROUND_LOST))


@dataclass(frozen=True)
class Job:
    rom: str
    index: int
    levels: tuple[int, int]
    speeds: tuple[int, int]
    cfg: Config


def play_rom_match(job: Job) -> tuple[MatchResult, int]:
    """One match on the real game (the module docstring): (its result, shadow mismatch
    frames). The Match named in the result has the seed and frameCounter the game's options
    screen left at its Start."""
    c = Console(job.rom)
    for k in range(2_000):  # the title: Down to 2 players, Start (on alternate frames)
        if c[MODE] == 1:
            break
        c.step(0 if k % 2 or c[MODE] else DOWN if c[PLAYERS] != 2 else START)
    for _ in range(WAIT * job.index):  # the options screen steps the RNG every frame
        c.step(0, 0)
    seed = navigate(c, job.levels, job.speeds)
    match = Match(job.levels[0], job.speeds[0], job.levels[1], job.speeds[1], seed, c[0x43])
    players = [
        make_player(job.cfg.p1, job.cfg.strength1, job.cfg, match, 0),
        make_player(job.cfg.p2, job.cfg.strength2, job.cfg, match, 1),
    ]
    rounds: list[Round] = []
    mismatches = 0
    v: engine.Versus | None = None
    r: Round | None = None
    queue: list[list[int]] = [[], []]
    start = 0  # the round's first frame of play (c.frames)
    end: int | None = None  # the last round's end (c.frames)
    begun = True  # the next round's intro began (mode 3 or 8) since the last round's end
    won0 = (0, 0)
    while True:
        m1 = m2 = 0
        if v is not None and int(v.phase) == int(Phase.PLAYING):
            assert r is not None
            for i in range(2):
                if not queue[i]:
                    g = v.player(i).game()
                    if at_spawn(g):
                        queue[i] = [int(m) for m in players[i].act(g).masks]
                        r.pills[i] += 1
            m1 = queue[0].pop(0) if queue[0] else 0
            m2 = queue[1].pop(0) if queue[1] else 0
        elif v is None and end is not None and not begun:  # (a later press would pause)
            k = c.frames - end - START_AFTER_END
            m1 = START if k >= 0 and k % START_REPEAT == 0 else 0
        c.step(m1, m2)
        if v is None:
            if end is not None and c.frames - end > BETWEEN_ROUNDS_MAX:
                rounds.append(Round(winner=0, end="time-out", frames=0))  # never began
                break
            begun = begun or c[MODE] in NEXT_ROUND
            if c[MODE] == MODE_PLAY and begun:
                v = engine.Versus.from_ram(c.ram())
                won0 = (int(v.victories[0]), int(v.victories[1]))
                r, queue, start = Round(winner=0, end="time-out", frames=0), [[], []], c.frames
            continue
        assert r is not None
        n1, n2, b1, b2 = _release_sizes(v)
        v.step(m1, m2)
        for i, (n, b) in enumerate(((n1, b1), (n2, b2))):
            r.banked[i] += b
            if n >= 2 and int(v.player(i).next_action) == PILL_PLACED:
                r.attacks[1 - i] += 1
                r.halves[1 - i] += min(n, 4)
                r.lost[1 - i] += max(0, n - 4)
        if int(v.phase) in IN_ROUND and any(
            c.read(a, 128) != bytes(v.player(i).field) for i, a in enumerate(FIELDS)
        ):
            mismatches += 1
            v = engine.Versus.from_ram(c.ram(), int(v.phase))
        r.frames = c.frames - start
        if int(v.phase) in ROUND_END:
            game = engine.Versus.from_ram(c.ram(), int(v.phase))  # the game's own count
            won1 = (int(game.victories[0]), int(game.victories[1]))
            if won1 != (int(v.victories[0]), int(v.victories[1])):
                mismatches += 1
            gained = (won1[0] - won0[0], won1[1] - won0[1])
            r.winner = 1 if gained[0] > gained[1] else 2 if gained[1] > gained[0] else 0
            if r.winner == 0:
                r.end = "draw"
            else:
                r.end = "clear" if v.player(r.winner - 1).virus_left == 0 else "top-out"
            rounds.append(r)
            if int(v.phase) == int(Phase.MATCH_OVER):
                break
            v, r, end, begun = None, None, c.frames, False
        elif r.frames > job.cfg.max_round_frames:
            rounds.append(r)
            break
    winner = int(v.who_won) if v is not None and int(v.phase) == int(Phase.MATCH_OVER) else 0
    victories = (int(v.victories[0]), int(v.victories[1])) if v is not None else (0, 0)
    names = (players[0].name, players[1].name)
    return MatchResult(names[0], names[1], match, winner, victories, rounds), mismatches


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rom", required=True, help="the game (your own dump)")
    ap.add_argument("--p1", default="onnx", help="pad 1's policy (policy.versus.POLICIES)")
    ap.add_argument("--p2", default="search-attack", help="pad 2's policy")
    ap.add_argument("--level", type=int, default=10, help="both players' level 0..20")
    ap.add_argument("--speed", default="med", help="both players' speed: low, med, hi or 0-2")
    ap.add_argument("--strength2", type=int, default=5, help="p2's strength 1..5 (5: full)")
    ap.add_argument("--matches", type=int, default=10)
    ap.add_argument("--first", type=int, default=0, help="index of the first match")
    ap.add_argument("--max-round-frames", type=int, default=40_000)
    ap.add_argument("--out", default="out/versus_rom")
    args = ap.parse_args(argv)
    try:
        speed = parse_speed(args.speed)
        if not 0 <= args.level <= 20:
            raise ValueError(f"--level is 0..20, not {args.level}")
        if not Path(args.rom).is_file():
            raise ValueError(f"--rom {args.rom}: no such file")
        engine.ram.open_nes(args.rom)
    except (ValueError, engine.RomError) as e:
        print(f"versus_rom: {e}", file=sys.stderr)
        return 2
    cfg = Config(args.p1, args.p2, strength2=args.strength2, max_round_frames=args.max_round_frames)
    jobs = [
        Job(args.rom, i, (args.level, args.level), (speed, speed), cfg)
        for i in range(args.first, args.first + args.matches)
    ]
    from rich.progress import Progress

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    done: list[tuple[MatchResult, int]] = []
    with (out / "matches.jsonl").open("w") as log, Progress() as bar:
        task = bar.add_task("matches", total=len(jobs))
        for m, n in map(play_rom_match, jobs):
            done.append((m, n))
            log.write(json.dumps({**m.as_dict(), "shadow_mismatch_frames": n}) + "\n")
            log.flush()  # a match as it ends
            bar.advance(task)
    results = [m for m, _ in done]
    s = summarize(results)
    s["shadow_mismatch_frames"] = sum(n for _, n in done)
    s["distinct_matches"] = len({(m.match.seed, m.match.frame_counter) for m in results})
    s["frames_of_play"] = sum(r.frames for m in results for r in m.rounds)
    s["wall_s"] = round(time.monotonic() - t0, 1)
    s["rom"] = Path(args.rom).name
    title = f"real game: p1 {results[0].p1} vs p2 {results[0].p2}, level {args.level} {args.speed}"
    print_table(s, title)
    (out / "versus.json").write_text(
        json.dumps({"summary": s, "matches": [m.as_dict() for m in results]}, indent=1)
    )
    plot(results, s, out / "versus.png", title)
    print(json.dumps(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
