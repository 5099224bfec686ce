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


def test_the_survival_mask_keeps_the_network_from_topping_out_at_once() -> None:
    """Level 20 HI, seed 0x800E (a held-out game the float32 ensemble loses on its third pill):
    at that state the network's own pick tops out at once while most placements do not;
    survival_mask removes exactly the placements whose child is TOP_OUT, and survive=True
    picks a placement that lives. Where no placement tops out the mask is the reachable set."""
    from policy.onnx_policy import survival_mask
    from policy.play import TOP_OUT

    fp32 = Path(DEFAULT_MODEL).with_name("policy_fp32.onnx")
    plain = PlacementPolicy(fp32)
    live = PlacementPolicy(fp32, survive=True)
    assert live.name == "onnx-survive" and plain.name == "onnx"
    seen: list[tuple[bool, bool]] = []

    def check(game: engine.Game, move: Any) -> None:
        plan = _core.plan(game)
        e = _core.expand(game)
        lose = np.asarray(e.placements)[np.asarray(e.phases) == TOP_OUT]
        mask = survival_mask(game, plan.reachable)
        reach = np.asarray(plan.reachable, bool)
        if 0 < lose.size < len(e):
            assert not mask[lose].any() and mask.sum() == reach.sum() - lose.size
        else:
            assert np.array_equal(mask, reach)
        seen.append((bool(np.isin(move.placement, lose)), bool(lose.size)))
        if seen[-1][0]:
            assert not np.isin(live.act(game.clone()).placement, lose)

    result = play(plain, Episode(20, 2, 0x800E, (0x800E >> 1) & 0xFF), on_decision=check)
    assert result.topped_out and seen[-1] == (True, True)
    assert not play(live, Episode(20, 2, 0x800E, (0x800E >> 1) & 0xFF)).topped_out
