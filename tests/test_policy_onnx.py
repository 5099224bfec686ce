"""policy.model / policy.onnx_policy: ONNX and torch agree, and the mask is honoured."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import engine
from engine import _core
from policy.features import SpawnInput, board_planes, extras_vector
from policy.onnx_policy import DEFAULT_MODEL, PlacementPolicy
from policy.play import Episode, play, to_spawn


@pytest.fixture(scope="module")
def torch() -> ModuleType:
    """torch and onnx are the train extra's: without them the tests that build a net skip (CI
    has them; torch.onnx exports with onnx)."""
    pytest.importorskip("onnx")
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def exported(torch: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    from policy.model import PlacementNet, export_onnx

    torch.manual_seed(0)
    model = PlacementNet(channels=16, blocks=2).eval()
    path = tmp_path_factory.mktemp("onnx") / "net.onnx"
    export_onnx(model, path)
    return model, path


def random_inputs(n: int, rng: np.random.Generator):
    codes = np.array([0xFF, 0xD0, 0xD1, 0xD2, 0x40, 0x51, 0x62, 0x70, 0x81], np.uint8)
    fields = rng.choice(codes, size=(n, 128))
    board = board_planes(fields)
    extras = extras_vector(
        rng.integers(0, 3, (n, 2)),
        rng.integers(0, 3, (n, 2)),
        rng.integers(0, 21, n),
        rng.integers(0, 3, n),
        rng.integers(0, 50, n),
        rng.integers(0, 85, n),
    )
    mask = rng.random((n, 512)) < 0.05
    mask[np.arange(n), rng.integers(0, 512, n)] = True
    return board, extras, mask


def test_onnx_and_torch_agree(exported) -> None:
    from policy.model import torch_logits

    model, path = exported
    board, extras, mask = random_inputs(64, np.random.default_rng(1))
    a = torch_logits(model, board, extras, mask)
    b = PlacementPolicy(path).logits(board, extras, mask)
    assert a.shape == b.shape == (64, 512)
    np.testing.assert_allclose(np.where(mask, a, 0), np.where(mask, b, 0), atol=1e-4, rtol=1e-4)
    assert np.array_equal(a.argmax(1), b.argmax(1))


def test_choice_is_always_reachable(exported) -> None:
    _, path = exported
    policy = PlacementPolicy(path)
    rng = np.random.default_rng(2)
    board, extras, mask = random_inputs(200, rng)
    picks = policy.logits(board, extras, mask).argmax(1)
    assert mask[np.arange(200), picks].all()
    # one reachable placement only, wherever it is
    g = engine.Game(5, 1, 0x0ACE)
    to_spawn(g)
    obs = SpawnInput.from_game(g)
    for idx in rng.integers(0, 512, 20):
        only = np.zeros(512, bool)
        only[idx] = True
        assert policy.choose(obs, only) == idx
    with pytest.raises(ValueError, match="no reachable"):
        policy.choose(obs, np.zeros(512, bool))


def test_network_games_only_play_planned_placements(exported) -> None:
    _, path = exported
    policy = PlacementPolicy(path, taps_only=True)
    seen = []

    def check(game: engine.Game, decision) -> None:
        plan = _core.plan(game, taps_only=True)
        assert plan.reachable[decision.placement]
        seen.append(decision.placement)

    play(policy, Episode(20, 2, 0x0246), max_frames=1500, on_decision=check)
    assert seen


def test_shipped_model_loads_and_masks() -> None:
    if not DEFAULT_MODEL.is_file():
        pytest.fail(f"{DEFAULT_MODEL} is missing: run python -m policy.train (docs/POLICY.md)")
    policy = PlacementPolicy()
    g = engine.Game(20, 2, 0x8000)
    to_spawn(g)
    plan = _core.plan(g, taps_only=True)
    assert plan.reachable[policy.choose(SpawnInput.from_game(g), plan.reachable)]


def two_members(torch: ModuleType, tmp_path: Path, seed: int) -> tuple[list[Any], list[Path]]:
    """Two small random PlacementNets of different shapes and their policy.pt files."""
    from policy.model import PlacementNet

    torch.manual_seed(seed)
    nets = [PlacementNet(channels=8, blocks=1), PlacementNet(channels=12, blocks=2)]
    paths = []
    for i, net in enumerate(nets):
        paths.append(tmp_path / f"m{i}.pt")
        torch.save(net.state_dict(), paths[-1])
    return nets, paths


def test_an_ensemble_averages_its_members_log_probabilities(
    torch: ModuleType, tmp_path: Path
) -> None:
    from policy.ensemble import build, load_member
    from policy.model import torch_logits

    nets, paths = two_members(torch, tmp_path, seed=3)
    assert (load_member(paths[1]).channels, load_member(paths[1]).num_blocks) == (12, 2)
    report = build(paths, tmp_path / "ens.onnx")
    assert report["onnx_vs_torch_max_diff"] < 1e-4
    board, extras, mask = random_inputs(32, np.random.default_rng(4))
    got = PlacementPolicy(tmp_path / "ens.onnx").logits(board, extras, mask)
    logp = []
    for net in nets:
        z = np.where(mask, torch_logits(net.eval(), board, extras, mask), -np.inf)
        logp.append(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
    want = np.mean(logp, axis=0)
    np.testing.assert_allclose(got[mask], want[mask], atol=1e-4)
    assert (got[~mask] <= -1e8).all()  # unreachable placements stay masked
    with pytest.raises(ValueError, match="not a PlacementNet"):
        torch.save({"x": torch.zeros(1)}, tmp_path / "bad.pt")
        load_member(tmp_path / "bad.pt")


def test_split_gives_back_an_ensembles_members(
    torch: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """policy.ensemble --split: the members of an ensemble ONNX file, tensor for tensor, which
    rebuild the same ensemble (so the shipped policy_fp32.onnx can be trained further; its int8
    copy policy.onnx is refused in one line)."""
    from policy.ensemble import build, main, split

    nets, paths = two_members(torch, tmp_path, seed=5)
    build(paths, tmp_path / "ens.onnx")
    got = split(tmp_path / "ens.onnx", tmp_path / "members")
    assert [p.name for p in got] == ["member0.pt", "member1.pt"]
    for net, path in zip(nets, got, strict=True):
        state = torch.load(path, weights_only=True)
        assert set(state) == set(net.state_dict())
        for k, v in net.state_dict().items():
            assert torch.equal(state[k], v), k
    build(got, tmp_path / "again.onnx")
    board, extras, mask = random_inputs(16, np.random.default_rng(6))
    a = PlacementPolicy(tmp_path / "ens.onnx").logits(board, extras, mask)
    b = PlacementPolicy(tmp_path / "again.onnx").logits(board, extras, mask)
    assert np.array_equal(a, b)
    # a single net's ONNX file has no members: one line, exit 2
    from policy.model import export_onnx

    export_onnx(nets[0].eval(), tmp_path / "one.onnx")
    assert main([str(tmp_path / "one.onnx"), "--split", "--out", str(tmp_path / "x")]) == 2
    assert main([str(tmp_path / "nothing.onnx"), "--split", "--out", str(tmp_path / "x")]) == 2
    # the shipped int8 copy is not the float ensemble: refused before any file is written
    capsys.readouterr()
    assert main([str(DEFAULT_MODEL), "--split", "--out", str(tmp_path / "int8")]) == 2
    err = capsys.readouterr().err.strip()
    assert "int8 copy" in err and "policy_fp32.onnx" in err and "\n" not in err
    assert not (tmp_path / "int8").exists()


def fatal_state(net: PlacementPolicy) -> engine.Game:
    """Level 20 HI, seed 0x800E (a held-out game the float32 ensemble loses on its third
    pill): the spawn state of the pill whose choice by ``net`` tops out at once."""
    states: list[engine.Game] = []
    result = play(
        net,
        Episode(20, 2, 0x800E, (0x800E >> 1) & 0xFF),
        on_decision=lambda g, m: states.append(g.clone()),
    )
    assert result.topped_out
    return states[-1]


def top_outs(game: engine.Game) -> np.ndarray:
    """The placements whose lock tops out at once, by the engine's own expansion (an oracle
    independent of first_surviving, which plays the planner's inputs)."""
    from policy.play import TOP_OUT

    e = _core.expand(game)
    return np.asarray(e.placements)[np.asarray(e.phases) == TOP_OUT]


def test_survive_picks_the_best_ranked_placement_that_does_not_top_out() -> None:
    """At every decision of the float32 ensemble's lost game 0x800E, first_surviving gives the
    first placement of the network's ranking outside the engine's top-out set; at the fatal
    pill the network's own pick tops out while most placements live, and survive=True (named
    onnx-survive) plays the game on without topping out."""
    from policy.onnx_policy import first_surviving

    fp32 = Path(DEFAULT_MODEL).with_name("policy_fp32.onnx")
    plain = PlacementPolicy(fp32)
    live = PlacementPolicy(fp32, survive=True)
    assert live.name == "onnx-survive" and plain.name == "onnx"
    seen: list[tuple[bool, int]] = []

    def check(game: engine.Game, move: Any) -> None:
        plan = _core.plan(game)
        order = plain.ranking(SpawnInput.from_game(game), plan.reachable)
        assert (
            order[0] == move.placement == plain.choose(SpawnInput.from_game(game), plan.reachable)
        )
        lose = top_outs(game)
        alive = order[~np.isin(order, lose)]
        want = alive[0] if len(alive) else order[0]
        assert first_surviving(game, plan, order) == want == live.act(game.clone()).placement
        seen.append((bool(np.isin(move.placement, lose)), len(alive)))

    result = play(plain, Episode(20, 2, 0x800E, (0x800E >> 1) & 0xFF), on_decision=check)
    assert result.topped_out and seen[-1][0] and seen[-1][1] >= 8
    assert not any(lost for lost, _ in seen[:-1])
    assert not play(live, Episode(20, 2, 0x800E, (0x800E >> 1) & 0xFF)).topped_out
    with pytest.raises(ValueError, match="no placement"):
        first_surviving(engine.Game(0, 1, 0x8988), None, [])


def test_the_live_loops_onnx_policy_survives_from_the_falling_pill() -> None:
    """hil's OnnxPolicy decides on the state where its first input takes effect, not the
    spawn: 5 frames after the fatal spawn of 0x800E its default (survive) picks a placement
    that lives, played with engine.plan's inputs and settled; survive=False keeps the
    network's pick, which tops out. choose_mean (a pondered pill) survives too."""
    from hil.loop.policies import OnnxPolicy
    from policy.play import TOP_OUT

    net = PlacementPolicy(Path(DEFAULT_MODEL).with_name("policy_fp32.onnx"))
    game = fatal_state(net)
    game.run(np.zeros(5, np.uint8))
    plan = engine.plan(game)

    def phase_after(idx: int) -> int:
        child = game.clone()
        child.run(np.asarray(plan.masks(idx), np.uint8))
        _core.settle(child, 10_000)
        return int(child.phase)

    blind = OnnxPolicy(net, survive=False).choose(game, plan.reachable)
    assert phase_after(blind) == TOP_OUT
    live = OnnxPolicy(net)
    assert phase_after(live.choose(game, plan.reachable)) != TOP_OUT
    pairs = [(0, 0), (1, 2), (2, 1)]
    assert phase_after(live.choose_mean(game, plan.reachable, pairs)) != TOP_OUT
    # a pondered pill's choices at once (one batch, survival played once a placement) are
    # choose()'s for each next pill
    from policy.play import COLOUR_PAIRS_ORDERED

    each = {}
    for pair in COLOUR_PAIRS_ORDERED:
        h = game.clone()
        h.next_colors[:] = pair
        each[pair] = live.choose(h, plan.reachable)
    assert live.choose_pairs(game, plan.reachable, COLOUR_PAIRS_ORDERED) == each
    assert all(phase_after(idx) != TOP_OUT for idx in each.values())
