"""policy.selfplay: sampled games in groups, group-relative advantages, the policy gradient."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the train extra (CI installs it and reruns this file)
pytest.importorskip("onnx")  # torch.onnx exports with it

from engine import _core  # noqa: E402
from policy.model import PlacementNet, export_onnx  # noqa: E402
from policy.play import Episode, Move, play  # noqa: E402
from policy.selfplay import (  # noqa: E402
    GroupJob,
    Rollouts,
    advantages,
    game_returns,
    load_start,
    main,
    play_group,
    policy_gradient,
)

EASY = Episode(0, 0, 0x1234, 7)  # level 0 LOW: 4 viruses


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small untrained network: its checkpoint and its ONNX export."""
    torch.manual_seed(3)
    net = PlacementNet(4, 1).eval()
    folder = tmp_path_factory.mktemp("tiny")
    torch.save(net.state_dict(), folder / "policy.pt")
    export_onnx(net, folder / "policy.onnx")
    return folder


def job(tiny, rng: int, group: int = 2, max_frames: int = 2500) -> GroupJob:
    return GroupJob(EASY, str(tiny / "policy.onnx"), group, 1.0, rng, max_frames)


def result(cleared: bool, frames: int):
    from policy.play import Result

    return Result(0, 0, 2, cleared, not cleared, frames, 10, 0 if cleared else 3)


def test_returns_put_every_clear_above_every_loss_and_fast_above_slow() -> None:
    r = game_returns([result(True, 9000), result(True, 7000), result(False, 400)], 20_000)
    assert list(r) == [-9000.0, -7000.0, -20_000.0]


def test_games_cut_at_the_frame_limit_are_ranked_by_the_viruses_they_left() -> None:
    from policy.play import Result

    cut = [Result(20, 2, 2, False, False, 3000, 30, left) for left in (70, 60)]
    r = game_returns([*cut, result(False, 2500)], 20_000, 120)
    assert list(r) == [-3000.0 - 70 * 120, -3000.0 - 60 * 120, -20_000.0]


def test_advantages_compare_a_game_only_with_its_own_group() -> None:
    returns = [-7000.0, -9000.0, -20_000.0, -8000.0, -8000.0, -3000.0]
    a = advantages(returns, [0, 0, 0, 1, 1, 2])
    assert a[0] > a[1] > 0 > a[2]
    assert abs(a[:3].sum()) < 1e-9 and np.isclose(a[:3].std(), 1.0)
    assert list(a[3:]) == [0.0, 0.0, 0.0]  # all equal, and a group of one


def test_a_group_records_each_sampled_placement_and_replays_to_its_result(tiny) -> None:
    part = play_group(job(tiny, rng=5))
    assert len(part.results) == 2 and len(part) == sum(r.pills for r in part.results)
    _, _, mask, action, logp = part.tensors()
    assert (logp <= 0).all() and (logp > -20).all()
    assert mask[np.arange(len(part)), action].all()  # every choice was reachable
    # Game 1's recorded placements, played again through policy.play, end the same way.
    chosen = iter(part.arrays["action"][part.arrays["game"] == 1].tolist())

    class Replay:
        name = "replay"

        def act(self, game):
            idx = next(chosen)
            return Move(idx, _core.plan(game).masks(idx))

    again = play(Replay(), EASY, max_frames=2500)
    assert again == part.results[1]
    # The sampling is the job's: the same rng gives the same games.
    twin = play_group(job(tiny, rng=5))
    assert np.array_equal(twin.arrays["action"], part.arrays["action"])
    assert twin.results == part.results


def test_groups_are_renumbered_when_joined(tiny) -> None:
    a, b = play_group(job(tiny, rng=1)), play_group(job(tiny, rng=2))
    both = Rollouts.concat([a, b])
    assert list(both.group) == [0, 0, 1, 1] and len(both) == len(a) + len(b)
    assert set(both.arrays["game"][len(a) :]) <= {2, 3}


def test_the_update_makes_the_better_games_choices_likelier(tiny) -> None:
    part = play_group(job(tiny, rng=9, max_frames=1200))
    game = part.arrays["game"]
    adv = np.where(game == 0, 1.0, -1.0)
    model = load_start([str(tiny / "policy.pt")])
    reference = load_start([str(tiny / "policy.pt")])
    board, extras, mask, action, _ = part.tensors()

    def mean_logp(m, sel):
        with torch.no_grad():
            logp = torch.log_softmax(
                m(torch.from_numpy(board), torch.from_numpy(extras), torch.from_numpy(mask)), 1
            )
        return float(logp[np.arange(len(part)), action][torch.from_numpy(sel)].mean())

    before = mean_logp(model, game == 0) - mean_logp(model, game == 1)
    stats = policy_gradient(model, reference, part, adv, 1e-2, 0.0, 1.0, 16, seed=0)
    after = mean_logp(model, game == 0) - mean_logp(model, game == 1)
    assert stats["states"] == len(part)
    assert after > before + 0.05, (before, after)


def test_a_small_self_play_run_writes_a_loadable_ensemble(tiny, tmp_path) -> None:
    from policy.onnx_policy import PlacementPolicy

    out = tmp_path / "sp"
    rc = main(
        [
            "--init", str(tiny / "policy.pt"), "--out", str(out), "--iterations", "1",
            "--seeds", "2", "--group", "2", "--levels", "0", "--speeds", "low",
            "--max-frames", "1500", "--workers", "1", "--threads", "1",
        ]
    )  # fmt: skip
    assert rc == 0
    log = json.loads((out / "selfplay_log.json").read_text())
    (it,) = log["iterations"]
    assert it["games"] == 4 and 0 <= it["clear_rate"] <= 1
    assert log["export"]["onnx_vs_torch_max_diff"] < 1e-3
    policy = PlacementPolicy(out / "policy_fp32.onnx")
    board = np.zeros((1, 11, 16, 8), np.float32)
    extras = np.zeros((1, 18), np.float32)
    reach = np.zeros((1, 512), bool)
    reach[0, 3] = True
    assert policy.logits(board, extras, reach).argmax() == 3


@pytest.mark.parametrize(
    "args",
    [
        ["--group", "1"],
        ["--seeds", "0"],
        ["--temperature", "0"],
        ["--kl", "-1"],
        ["--levels", "30"],
        ["--frames-per-virus", "-5"],
        ["--clip", "0"],
        ["--epochs", "0"],
    ],
)
def test_bad_settings_are_refused_at_the_command_line(args, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path), *args])
    assert exc.value.code == 2
    assert "policy.selfplay" in capsys.readouterr().err


def test_a_missing_or_int8_start_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    from policy.onnx_policy import DEFAULT_MODEL

    assert main(["--init", str(tmp_path / "none.pt"), "--out", str(tmp_path)]) == 2
    assert main(["--init", str(DEFAULT_MODEL), "--out", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "no policy checkpoint" in lines[0] and "int8" in lines[1]
