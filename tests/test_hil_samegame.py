"""hil.samegame: a `hil run --emu` run's levels replayed in the engine from each level's state 0.

CI has no Dr. Mario ROM, so the emulator console's recording of state 0 is driven with an
engine.LevelFlow standing in for the game's RAM, and the tool reads a log written from engine
games; the real game's numbers are in docs/POLICY.md (measured locally)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import engine
from engine import _core
from engine.ram import DrMarioRam
from hil.consoles.emu_run import EmuRun
from hil.samegame import main
from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy
from policy.play import at_spawn, to_spawn


def test_the_emu_console_keeps_each_levels_state_0():
    flow = engine.LevelFlow(3, 1, 0x4808, frame_counter=21)
    ram = SimpleNamespace(
        ram_block=lambda address, size: flow.field.copy(),
        ram=lambda address: flow.mode if address == DrMarioRam.MODE else 0,
    )
    console = SimpleNamespace(
        flow=flow, emu=ram, _snap=None, _late_checked=False, levels=[], late_inits=0,
        ram_mismatches=0, _state0=None,
    )  # fmt: skip
    at_state0 = None
    for _ in range(400):
        EmuRun._shadow(console, 0)
        if flow.frame == flow.state0_frame:
            at_state0 = flow.game.clone()
        if console.levels:
            break
    assert at_state0 is not None and console.ram_mismatches == 0
    (seen,) = console.levels
    assert (seen["level"], seen["speed"]) == (3, 1)
    rebuilt = engine.Game.from_state_bytes(bytes.fromhex(seen["state0"]))
    assert rebuilt == at_state0 and int(rebuilt.frame) == 0  # levelIntro_delay begins


def _log(tmp_path, levels, *, late=3, realtime=False, player=None, policy="onnx"):
    """A hil run log of engine games played by ``player`` (default the network with the
    loop's survival rule; the loop's choices, its policy named ``policy``), each level ``late``
    frames longer than the engine's game, as a loop that lost frames would count."""
    net = player if player is not None else PlacementPolicy(DEFAULT_MODEL, survive=True)
    events = [{"event": "run_start", "settings": {"ponder": True}}]
    seen = []
    for level, speed, seed in levels:
        g = engine.Game(level, speed, seed, frame_counter=5)
        seen.append({"level": level, "speed": speed, "state0": g.state_bytes().hex()})
        to_spawn(g)
        pill = 0
        while at_spawn(g):
            move = net.act(g)
            pill += 1
            events.append({"event": "plan", "pill": pill, "placement": int(move.placement)})
            g.run(move.masks)
            to_spawn(g)
        events.append(
            {"event": "level_end", "level": level, "speed": speed, "result": "stage_clear",
             "frames": int(g.frame) + late}
        )  # fmt: skip
    events.append(
        {"event": "summary", "policy": policy, "emu": {"realtime": realtime, "levels_seen": seen}}
    )
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path, events


def test_samegame_replays_the_loops_placements_and_plays_the_same_games(tmp_path, capsys):
    path, events = _log(tmp_path, [(0, 2, 0x8000), (2, 1, 0x8002)])
    out = tmp_path / "same.json"
    assert main([str(path), "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == report
    ends = [e for e in events if e["event"] == "level_end"]
    assert [r["level"] for r in report["levels"]] == [0, 2]
    for rec, end in zip(report["levels"], ends, strict=True):
        assert rec["engine_frames"] == end["frames"] - 3 and rec["loop_minus_engine"] == 3
        # the network is the loop's policy here: it picks what the loop picked, so its own
        # game from state 0 is the loop's game
        assert rec["player_agrees"] == rec["pills"] - 1 and rec["player_disagrees_at"] == []
        assert rec["player"]["frames"] == rec["engine_frames"]
    assert report["player"] == "onnx-survive" and report["median_loop_frames"] is not None


def test_samegame_replays_a_beam_run_with_policy_evals_beam(tmp_path, capsys):
    from policy.beam import BeamPlayer

    path, _ = _log(tmp_path, [(1, 2, 0x8004)], player=BeamPlayer(), policy="beam")
    assert main([str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    (rec,) = report["levels"]
    assert report["player"] == "beam"  # lockstep: the beam decides the first pill too
    assert (
        rec["player_agrees"] == rec["pills"] - 1 and rec["player"]["frames"] == rec["engine_frames"]
    )


def test_samegame_replays_a_pondered_network_run_with_the_loops_own_rule(tmp_path, capsys):
    """A real-time network run ponders: where the 9 choices for the next pill press otherwise
    within the run's commit frames, the loop chose without the next pill (choose_mean). With
    the summary's ``ponder.commit_frames`` the tool's player makes that same choice (the
    loop's choose_ahead), so it agrees on every pill and plays the loop's game; the network
    at the spawn with the next pill known would not."""
    from hil.loop.policies import OnnxPolicy
    from hil.loop.ponder import choose_ahead
    from hil.samegame import PonderedNetwork

    net = PlacementPolicy(DEFAULT_MODEL, survive=True)
    pondered = PonderedNetwork(net, 9)

    class FirstQuick:  # the loop decides a level's first pill at its spawn
        asked = 0

        def act(self, g):
            self.asked += 1
            return (net if self.asked == 1 else pondered).act(g)

    path, events = _log(tmp_path, [(10, 2, 0x8000)], realtime=True, player=FirstQuick())
    events[-1]["ponder"] = {"commit_frames": 9}
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main([str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    (rec,) = report["levels"]
    assert report["player"] == "onnx-survive pondered (commit 9 frames)"
    assert rec["player_disagrees_at"] == [] and rec["player"]["frames"] == rec["engine_frames"]
    # the rule mattered: some pills were chosen without the next pill, and the network with
    # the next pill known chooses otherwise on some of them
    g = engine.Game.from_state_bytes(bytes.fromhex(events[-1]["emu"]["levels_seen"][0]["state0"]))
    to_spawn(g)
    loop = OnnxPolicy(net)
    blind = differ = 0
    for e in [e for e in events if e["event"] == "plan"][:-1]:  # each pill's next spawn
        g.run(_core.plan(g).masks(e["placement"]))
        to_spawn(g)
        if not at_spawn(g):
            break
        _, _, without_next = choose_ahead(
            g, _core.plan(g), loop.choose, loop.choose_pairs, 9, loop.choose_mean
        )
        blind += without_next
        differ += without_next and net.act(g).placement != pondered.act(g).placement
    assert blind >= 10 and differ >= 1


def test_samegame_counts_a_choice_its_player_would_not_make(tmp_path, capsys):
    path, events = _log(tmp_path, [(0, 2, 0x8000)])
    summary = events[-1]
    plans = [e for e in events if e["event"] == "plan"]
    # the loop's game: pill 1 as the network chose, pill 2 at another reachable placement
    g = engine.Game.from_state_bytes(bytes.fromhex(summary["emu"]["levels_seen"][0]["state0"]))
    to_spawn(g)
    g.run(_core.plan(g).masks(plans[0]["placement"]))
    to_spawn(g)
    other = [int(i) for i in np.flatnonzero(_core.plan(g).reachable) if i != plans[1]["placement"]]
    plans[1]["placement"] = other[0]
    end = {"event": "level_end", "level": 0, "speed": 2, "result": "unknown", "frames": None}
    kept = events[: events.index(plans[1]) + 1] + [end, summary]  # the run stopped there
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
    assert main([str(path), "--no-player"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)["levels"]
    assert rec["pills"] == 2 and rec["player_disagrees_at"] == [2] and rec["player_agrees"] == 0
    assert rec["engine_frames"] is None  # not cleared in two pills
    assert "player" not in rec and "loop_minus_engine" not in rec


def test_a_level_whose_log_misses_a_plan_is_not_rebuilt_but_still_compared(tmp_path, capsys):
    """A loop far behind can miss a spawn whose pondered plan was on the wire and played: the
    log then has no plan event for that pill. The level cannot be rebuilt (the placements
    after it would be off by one); its frames still compare with the player's."""
    path, events = _log(tmp_path, [(0, 2, 0x8000), (2, 1, 0x8002)])
    plans = [e for e in events if e["event"] == "plan"]
    assert plans[2]["pill"] == 3
    events.remove(plans[2])  # level 0's third pill: no plan logged
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main([str(path)]) == 0
    report = json.loads(capsys.readouterr().out)
    first, second = report["levels"]
    assert first["missing_plan"] == 3 and first["engine_frames"] is None
    assert first["pills"] is None and "player_agrees" not in first
    assert first["player"]["frames"] == first["loop_frames"] - 3  # the network's own game
    assert "missing_plan" not in second and second["loop_minus_engine"] == 3
    assert report["player_agrees"] == f"{second['pills'] - 1}/{second['pills'] - 1}"


@pytest.mark.parametrize(
    "fault", ["missing", "not_json", "no_summary", "no_state0", "short_state0", "unreachable"]
)
def test_samegame_bad_input_is_one_line_and_exit_2(fault, tmp_path, capsys):
    path, events = _log(tmp_path, [(0, 2, 0x8000)])
    if fault == "missing":
        path = tmp_path / "nothing.jsonl"
    elif fault == "not_json":
        path.write_text(path.read_text() + "{not json\n")
    elif fault == "no_summary":
        path.write_text("".join(json.dumps(e) + "\n" for e in events[:-1]))
    elif fault == "no_state0":
        events[-1]["emu"]["levels_seen"][0].pop("state0")
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    elif fault == "short_state0":  # another engine build's state, or a cut line
        events[-1]["emu"]["levels_seen"][0]["state0"] = "00ff"
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    else:  # a placement no pill can reach: the log is not this game's
        state0 = events[-1]["emu"]["levels_seen"][0]["state0"]
        g = engine.Game.from_state_bytes(bytes.fromhex(state0))
        to_spawn(g)
        unreachable = int(np.flatnonzero(~_core.plan(g).reachable)[0])
        next(e for e in events if e["event"] == "plan")["placement"] = unreachable
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main([str(path), "--no-player"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hil.samegame: ")
