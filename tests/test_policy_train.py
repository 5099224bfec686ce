"""policy.train: teacher labels become soft targets over the teacher's candidates only."""

from __future__ import annotations

import numpy as np
import pytest

from policy.eval import EVAL_SEED_START
from policy.train import FIELDS, TRAIN_SEED_LIMIT, Dataset, K, training_episodes


def one_state_dataset(cand: list[int], value: list[float]) -> Dataset:
    c = np.full((1, K), -1, np.int16)
    v = np.zeros((1, K), np.float32)
    c[0, : len(cand)] = cand
    v[0, : len(value)] = value
    reachable = np.zeros(512, bool)
    reachable[cand] = True
    arrays = {
        "field": np.full((1, 128), 0xFF, np.uint8),
        "pill": np.array([[0, 1]], np.uint8),
        "next": np.array([[2, 2]], np.uint8),
        "level": np.array([20], np.uint8),
        "speed": np.array([2], np.uint8),
        "speed_ups": np.array([3], np.uint8),
        "viruses": np.array([84], np.uint8),
        "mask": np.packbits(reachable)[None],
        "cand": c,
        "value": v,
        "choice": np.array([cand[0]], np.int16),
    }
    assert set(arrays) == set(FIELDS)
    return Dataset(arrays)


def test_soft_targets_follow_teacher_values() -> None:
    d = one_state_dataset([130, 7, 300], [-1000.0, -1012.0, -1e6])
    t = d.targets(temperature=12.0)[0]
    assert t.shape == (512,) and abs(t.sum() - 1) < 1e-6
    assert np.isclose(t[130] / t[7], np.exp(1.0), rtol=1e-5)  # 12 frames apart: a factor e
    assert t[300] < 1e-30 and np.count_nonzero(t) == 2
    board, extras, mask = d.tensors()
    assert board.shape == (1, 11, 16, 8) and extras.shape == (1, 18)
    assert mask[0, [130, 7, 300]].all() and mask.sum() == 3


def test_regrets_are_frames_below_the_best_and_unlisted_placements_the_worst() -> None:
    d = one_state_dataset([130, 7, 300, 55], [-1000.0, -1012.0, -1400.0, -1e6])
    mask = np.unpackbits(d.arrays["mask"][0])
    mask[[64, 65]] = 1  # reachable, not among the labeller's candidates
    d.arrays["mask"] = np.packbits(mask)[None]
    r = d.regrets(clip=2000.0)[0]
    assert r.shape == (512,) and r.dtype == np.float32
    assert (r[130], r[7], r[300], r[55]) == (0.0, 12.0, 400.0, 2000.0)  # clipped
    assert r[64] == r[65] == 2000.0 and np.count_nonzero(r) == 5  # the rest unreachable
    assert d.regrets(clip=300.0)[0].max() == 300.0


def test_the_regret_term_moves_probability_off_the_costlier_placement() -> None:
    """train_network with `regret` > 0 puts less probability on a placement 12 frames worse
    than cross-entropy alone (whose soft target gives it 27 %), from the same start."""
    torch = pytest.importorskip("torch")
    from policy.model import PlacementNet, torch_logits
    from policy.train import train_network

    one = one_state_dataset([130, 7], [-1000.0, -1012.0])
    d = Dataset({k: np.repeat(v, 64, axis=0) for k, v in one.arrays.items()})
    probs = {}
    for weight in (0.0, 50.0):
        torch.manual_seed(0)
        net = PlacementNet(4, 1)
        stats = train_network(d, net, 3, 3e-2, 16, 12.0, 0, regret=weight, regret_clip=2000.0)
        assert ("val_regret" in stats) == (weight > 0)
        board, extras, mask = one.tensors()
        z = torch_logits(net, board, extras, mask)[0]
        probs[weight] = np.exp(z[7] - z[130])
    assert 0.2 < probs[0.0] < 0.6  # about the target's e^-1
    assert probs[50.0] < probs[0.0] / 2


def test_training_games_never_use_evaluation_seeds() -> None:
    rng = np.random.default_rng(7)
    eps = training_episodes(400, rng, [15, 20], [2])
    assert all(e.seed % 2 == 0 and 0 < e.seed < TRAIN_SEED_LIMIT for e in eps)
    assert TRAIN_SEED_LIMIT <= EVAL_SEED_START
    assert {e.level for e in eps} == {15, 20} and {e.speed for e in eps} == {2}
    assert {e.speed for e in training_episodes(60, rng, [0])} == {0, 1, 2}


def test_the_search_labels_a_game_with_its_ranked_values() -> None:
    """--labeller search: every state of a played game is labelled with the play-time search's
    best placements (values descending, the first its choice), and the game is its play."""
    from policy.play import Episode
    from policy.train import LabelJob, _label_game

    ep = Episode(1, 2, 0x6014, 4)
    d, result = _label_game(LabelJob(ep, None, True, 4, 3000, "search"))
    assert result.cleared and len(d) == result.pills > 0
    cand, value = d.arrays["cand"], d.arrays["value"]
    assert (d.arrays["choice"] == cand[:, 0]).all()
    for c, v in zip(cand, value, strict=True):
        n = int((c >= 0).sum())
        assert n >= 2 and (np.diff(v[:n]) <= 0).all()
    t, _ = _label_game(LabelJob(ep, None, True, 4, 3000, "teacher"))
    assert len(t) > 0
    with pytest.raises(ValueError, match="labeller"):
        _label_game(LabelJob(ep, None, True, 4, 3000, "oracle"))
    with pytest.raises(FileNotFoundError):  # --search-prior is the prior it loads
        _label_game(LabelJob(ep, None, True, 4, 3000, "search", "/nonexistent/prior.onnx"))


def test_a_small_training_run_end_to_end(tmp_path) -> None:
    """CI's small version of docs/POLICY.md "Reproduce": labels (here the search's), imitation,
    one DAgger round with the trained net playing, ONNX export checked against torch, then an
    ensemble of two such nets and its members split back out."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx")  # torch.onnx exports with it (the train extra)
    import json

    from policy.ensemble import build, split
    from policy.onnx_policy import PlacementPolicy
    from policy.train import main

    def run(out: str, *extra: str) -> dict:
        argv = [
            "--out", str(tmp_path / out), "--games", "2", "--levels", "0", "--speeds", "hi",
            "--epochs", "1", "--dagger-rounds", "1", "--dagger-games", "1", "--dagger-epochs", "1",
            "--channels", "4", "--blocks", "1", "--batch", "32", "--workers", "1",
            "--threads", "1", "--max-frames", "1500", *extra,
        ]  # fmt: skip
        assert main(argv) == 0
        return json.loads((tmp_path / out / "train_log.json").read_text())

    log = run("a", "--labeller", "search")
    assert (tmp_path / "a" / "search.npz").is_file() and "search" in log
    assert [r["round"] for r in log["rounds"]] == [0, 1]
    assert log["rounds"][1]["states"] > log["rounds"][0]["states"] > 0
    assert log["export_max_abs_diff"] < 1e-3
    run("b", "--seed", "1", "--regret", "1")  # the teacher labels, the regret term on
    assert (tmp_path / "b" / "teacher.npz").is_file()
    report = build(
        [tmp_path / "a" / "policy.pt", tmp_path / "b" / "policy.pt"], tmp_path / "e.onnx"
    )
    assert report["onnx_vs_torch_max_diff"] < 1e-3
    assert len(split(tmp_path / "e.onnx", tmp_path / "members")) == 2
    board, extras, mask = Dataset.load(tmp_path / "a" / "search.npz").tensors()
    logits = PlacementPolicy(tmp_path / "e.onnx").logits(board[:4], extras[:4], mask[:4])
    assert mask[np.arange(4), logits.argmax(axis=1)].all()  # a reachable placement each


def test_the_beam_labels_a_game_with_its_ranked_values() -> None:
    """--labeller beam: every state is labelled with the beam's values (BeamPlayer.search),
    its choice first; the beam plays the game it labels and clears it."""
    from policy.play import Episode
    from policy.train import LabelJob, _label_game

    ep = Episode(1, 2, 0x6014, 4)
    d, result = _label_game(LabelJob(ep, None, True, 4, 3000, "beam", None, 3, 8))
    assert result.cleared and len(d) == result.pills > 0
    cand, value = d.arrays["cand"], d.arrays["value"]
    assert (d.arrays["choice"] == cand[:, 0]).all()
    for c, v in zip(cand, value, strict=True):
        n = int((c >= 0).sum())
        assert n >= 1 and (np.diff(v[:n]) <= 0).all()
    assert (cand[:, 1] >= 0).mean() > 0.5  # most states rank more than one placement


@pytest.mark.parametrize("flag", ["--beam-depth", "--beam-width"])
def test_a_beam_size_below_one_is_refused_at_the_command_line(flag: str, tmp_path, capsys) -> None:
    from policy.train import main

    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), "--labeller", "beam", flag, "0"])
    assert e.value.code == 2
    assert "--beam-depth and --beam-width must be >= 1" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing was written
