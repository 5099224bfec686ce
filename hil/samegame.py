"""The same games in the engine: a ``hil run --emu`` run's levels replayed from the game itself.

    python -m hil.samegame RUN.jsonl [--out samegame.json] [--no-player]

``hil run --emu ROM --log RUN.jsonl`` keeps each level's state 0 (the console's LevelFlow
shadow, which matched the game's RAM on every frame: ``emu.levels_seen[].state0`` in the
summary). For each level this tool

1. rebuilds that state (``engine.Game.from_state_bytes``) and plays the loop's own placements
   (the log's ``plan`` events) with the planner's fastest inputs from each spawn: the frames
   the engine takes for the loop's game, against the frames the loop counted (``level_end``);
   what the loop lost to being late, if anything. A level whose log misses a pill's plan (a
   loop far behind, under load, can miss a spawn whose pondered plan was already on the wire
   and played) cannot be rebuilt: its record says which pill (``missing_plan``), and steps 2
   and 3 still compare its frames with the player's;
2. asks the player policy.eval runs for the loop's policy (``--policy search`` in real time
   with pondering: the first pill the prior network's quick choice, every other pill
   ``policy.eval --policies search-ponder``'s choice without the next pill; lockstep: the
   search at the spawn for the first; ``onnx``: the network with the loop's survival rule,
   ``onnx-survive``, and with pondering each pill after the first as the loop ponders it,
   without the next pill where the loop's 9 choices differ within the run's
   ``ponder.commit_frames``: PonderedNetwork; the prior's quick choices are onnx-survive's)
   what it picks in each of the loop's spawn states: how many of the loop's choices it makes;
3. plays that player from state 0 (unless ``--no-player``): policy.eval's frames for the same
   game. One different choice makes another game, so these compare as sets, not level by level.

Prints one JSON object (and writes it to ``--out``): per level and the medians. Bad input (no
such file, a log without the emu levels' states, a placement the state cannot reach) is one
line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine
from engine import _core
from policy.play import STAGE_CLEAR, Episode, at_spawn, play, to_spawn


class SameGameError(ValueError):
    """The log cannot be replayed (one line for the user)."""


def read_log(path: Path) -> dict[str, Any]:
    """The parts of a ``hil run --log`` file this tool needs: ``summary`` (the run's summary
    event), ``settings`` (the run_start event's), ``plans`` (each level's placements in pill
    order: list[list[int]]), ``missing`` (per level the first pill with no plan event, None
    when there is none) and ``ends`` (the ``level_end`` events). Raises SameGameError (no
    file, not JSON lines, no summary)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise SameGameError(f"{path}: {e.strerror or e}") from e
    plans: list[list[int]] = [[]]
    missing: list[int | None] = [None]
    ends: list[dict[str, Any]] = []
    summary = None
    settings: dict[str, Any] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError as e:
            raise SameGameError(f"{path}:{n}: not a JSON line ({e.msg})") from e
        kind = ev.get("event")
        if kind == "plan":
            plans[-1].append(int(ev["placement"]))
            if int(ev.get("pill", len(plans[-1]))) != len(plans[-1]) and missing[-1] is None:
                missing[-1] = len(plans[-1])  # this pill's spawn passed unseen: no plan logged
        elif kind == "level_end":
            ends.append(ev)
            plans.append([])
            missing.append(None)
        elif kind == "summary":
            summary = ev
        elif kind == "run_start":
            settings = ev.get("settings") or {}
    if summary is None:
        raise SameGameError(f"{path}: no summary event (the run did not end, or not a hil log)")
    n = len(ends)
    return {
        "summary": summary,
        "settings": settings,
        "plans": plans[:n],
        "missing": missing[:n],
        "ends": ends,
    }


class Players:
    """policy.eval's players for the loop's policy: ``first`` decides a level's first pill,
    ``rest`` every other (both ``act(game) -> Move`` at a spawn state)."""

    def __init__(
        self, policy: str, realtime: bool, ponder: bool, commit_frames: int | None = None
    ) -> None:
        from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy

        # the loop's network never picks a placement that tops out at once while another
        # lives (hil.loop.policies.OnnxPolicy): policy.eval's onnx-survive
        quick = PlacementPolicy(DEFAULT_MODEL, threads=1, survive=True)
        self.first: Any
        self.rest: Any
        if policy == "onnx":
            self.first = self.rest = quick
            self.name = "onnx-survive"
            if ponder and commit_frames is not None:
                self.rest = PonderedNetwork(quick, commit_frames)
                self.name = self.rest.name
        elif policy == "search":
            from policy.search import PonderedSearch, SearchPlayer

            search = SearchPlayer(prior=PlacementPolicy(DEFAULT_MODEL, threads=1))
            # real time: a pill decided at its spawn takes the prior's quick choice
            self.first = quick if realtime else search
            self.rest = PonderedSearch(search) if ponder else search
            self.name = ("onnx-survive then " if realtime else "search then ") + (
                "search-ponder" if ponder else "search"
            )
        elif policy == "beam":
            from policy.beam import BeamPlayer

            beam = BeamPlayer()  # a pondered pill's choice is the one at its spawn: no guess
            self.first = quick if realtime else beam
            self.rest = beam
            self.name = ("onnx-survive then " if realtime else "") + "beam"
        else:
            raise SameGameError(f"policy {policy!r}: only onnx, search and beam runs are replayed")


class PonderedNetwork:
    """The loop's network on a pondered pill (hil.loop.ponder.choose_ahead, the code the loop
    runs): at the spawn state, its choice for each of the 9 next pills; where those press
    alike for the first ``commit_frames`` frames (or all their frames), the one for the real
    next pill, else the choice over all 9 made without it (choose_mean). ``net``: a
    PlacementPolicy, wrapped as the loop's OnnxPolicy (the survival rule)."""

    def __init__(self, net: Any, commit_frames: int) -> None:
        from hil.loop.policies import OnnxPolicy

        self.policy = OnnxPolicy(net)
        self.commit_frames = int(commit_frames)
        self.name = f"onnx-survive pondered (commit {self.commit_frames} frames)"

    def act(self, game: engine.Game) -> Any:
        from hil.loop.ponder import choose_ahead
        from policy.play import Move

        plan = _core.plan(game)
        p = self.policy
        choices, _, _ = choose_ahead(
            game, plan, p.choose, p.choose_pairs, self.commit_frames, p.choose_mean
        )
        idx, masks = choices[(int(game.next_colors[0]), int(game.next_colors[1]))]
        return Move(int(idx), masks)


def _frames(game: engine.Game) -> int | None:
    return int(game.frame) if int(game.phase) == STAGE_CLEAR else None


def replay_level(state0: engine.Game, placements: list[int], players: Players | None) -> dict:
    """The loop's placements from ``state0`` (planner's fastest inputs at each spawn) and, with
    ``players``, how many of them its ``rest`` player picks too (pills 2 on). Raises
    SameGameError when a placement is not reachable or does not lock."""
    g = state0.clone()
    to_spawn(g)
    agree, disagree_at = 0, []
    for k, idx in enumerate(placements, 1):
        if not at_spawn(g):
            raise SameGameError(f"pill {k}: the game has ended before the loop's last placement")
        plan = _core.plan(g)
        if not plan.reachable[idx]:
            raise SameGameError(f"pill {k}: placement {idx} is not reachable in the engine")
        if players is not None and k > 1:
            if int(players.rest.act(g).placement) == idx:
                agree += 1
            else:
                disagree_at.append(k)
        g.run(plan.masks(idx))
        if not int(g.lock_event):
            raise SameGameError(f"pill {k}: placement {idx} did not lock")
        to_spawn(g)
    out: dict[str, Any] = {"engine_frames": _frames(g), "pills": len(placements)}
    if players is not None:
        out["player_agrees"] = agree
        out["player_disagrees_at"] = disagree_at
    return out


@dataclass(frozen=True)
class _FromState(Episode):
    """policy.play's Episode for a level the loop played: its game is a copy of state 0."""

    state0: engine.Game | None = None

    def game(self) -> engine.Game:
        assert self.state0 is not None
        return self.state0.clone()


class _FirstThenRest:
    """policy.play's Policy for one level: ``players.first`` decides the first pill it is
    asked for, ``players.rest`` every other."""

    def __init__(self, players: Players) -> None:
        self.players, self.name, self.asked = players, players.name, 0

    def act(self, game: engine.Game) -> Any:
        p = self.players.first if self.asked == 0 else self.players.rest
        self.asked += 1
        return p.act(game)


def play_level(state0: engine.Game, players: Players) -> dict[str, Any]:
    """``players`` from ``state0`` to the stage clear, a top-out or policy.play's time-out
    (policy.play.play: ValueError when a move does not lock)."""
    r = play(_FirstThenRest(players), _FromState(0, 0, 0, state0=state0))
    return {
        "frames": r.frames if r.cleared else None,
        "pills": r.pills,
        "topped_out": not r.cleared,
    }


def _median(xs: list[int | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def samegame(path: Path, play: bool = True) -> dict[str, Any]:
    """The report described in the module docstring. Raises SameGameError."""
    log = read_log(path)
    summary = log["summary"]
    emu = summary.get("emu") or {}
    seen = emu.get("levels_seen") or []
    if not seen or any(not s.get("state0") for s in seen):
        raise SameGameError(
            f"{path}: the summary has no levels' state 0 (hil run --emu on this version keeps "
            "them; a --sim or rig run has none)"
        )
    ends = log["ends"]
    seen = seen[: len(ends)]  # (a level begun as the run stopped has no end)
    if len(seen) < len(ends) or any(
        (s["level"], s["speed"]) != (e["level"], e["speed"])
        for s, e in zip(seen, ends, strict=True)
    ):
        raise SameGameError(f"{path}: the levels begun and the levels ended do not line up")
    players = Players(
        str(summary.get("policy")),
        bool(emu.get("realtime")),
        bool(log["settings"].get("ponder", True)),
        (summary.get("ponder") or {}).get("commit_frames"),
    )
    levels = []
    for s, e, placements, missing in zip(seen, ends, log["plans"], log["missing"], strict=True):
        try:
            state0 = engine.Game.from_state_bytes(bytes.fromhex(s["state0"]))
        except ValueError as err:  # not hex, or another engine build's state
            raise SameGameError(f"{path}: level {s['level']}'s state 0: {err}") from err
        rec: dict[str, Any] = {
            "level": s["level"],
            "speed": s["speed"],
            "result": e.get("result"),
            "loop_frames": e.get("frames"),
        }
        if missing is None:
            rec.update(replay_level(state0, placements, players))
        else:  # the loop's game cannot be rebuilt; its frames and the player's still compare
            rec.update(engine_frames=None, pills=None, missing_plan=missing)
        if rec["loop_frames"] is not None and rec["engine_frames"] is not None:
            rec["loop_minus_engine"] = rec["loop_frames"] - rec["engine_frames"]
        if play:
            rec["player"] = play_level(state0, players)
        levels.append(rec)
        print(json.dumps(rec), file=sys.stderr, flush=True)
    out: dict[str, Any] = {
        "log": str(path),
        "policy": summary.get("policy"),
        "player": players.name,
        "levels": levels,
        "median_loop_frames": _median([r["loop_frames"] for r in levels]),
        "median_engine_frames": _median([r["engine_frames"] for r in levels]),
        "player_agrees": f"{sum(r.get('player_agrees', 0) for r in levels)}/"
        f"{sum(max(0, (r['pills'] or 0) - 1) for r in levels)}",
    }
    if play:
        out["median_player_frames"] = _median([r["player"]["frames"] for r in levels])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hil.samegame", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("log", type=Path, help="the JSONL log of a hil run --emu run (--log)")
    ap.add_argument("--out", type=Path, help="also write the JSON report here")
    ap.add_argument(
        "--no-player", action="store_true", help="skip step 3 (policy.eval's player's games)"
    )
    args = ap.parse_args(argv)
    try:
        out = samegame(args.log, play=not args.no_player)
    except SameGameError as e:
        print(f"hil.samegame: {e}", file=sys.stderr)
        return 2
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
