"""Held-out accuracy of a board model, end to end: ``python -m perception.evaluate``.

Frames come from games with odd 16-bit seeds (training uses even ones), sampled uniformly
over each game (intro to clear or top-out), drawn with the clean-room tiles (or ``--rom``),
captured WHOLE by ``calibration.forward`` through profiles never trained on: the shipped ones
(calibration/profiles: MJPEG q70 720p with limited range, bilinear 1080p, 480p composite with
interlace combing, ...) and ``Profile.random`` draws from a seed stream training does not use.
Each frame goes through ``BoardReader.read_batch`` exactly as at run time.

Metrics per profile (the report prints them per profile and the worst over profiles):

- ``cell_accuracy``: cells read right / cells, over frames where the bottle is drawn. A cell
  is read right when the reading is its class or a class the picture cannot tell from it
  (``Labels.alike``, perception.data.alike_classes): under the falling pill's sprites, drawn
  one line below the grid, the lower half of a vertical pill covers its cell, and a pill half
  drawn there on the lock frame looks the same as the empty cell of the frame before.
  ``cell_accuracy_strict`` counts only the class itself, ``alike_cells`` those cells;
- ``board_exact``: GAMEPLAY frames with all 128 cells right / GAMEPLAY frames
  (``board_exact_strict`` likewise with strict cells);
- ``falling_exact``: frames whose falling pill is read exactly (place, orientation and the
  colours as drawn; "none" when none is drawn) / frames where the bottle is drawn;
- ``next_exact``: the same for the next pill (colours in the game's order, or none);
- ``kind_accuracy``: KindLabel right / all frames.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from calibration import Profile
from calibration.forward import NoiseSource
from perception.data import (  # noqa: F401 - EVAL_SEED, held_out_profiles: named here before
    EVAL_SEED,
    GameStream,
    Shown,
    VersusStream,
    capture_full,
    held_out_profiles,
)
from perception.layout import CLASS_TO_CODE, CODE_TO_CLASS, VERSUS_VIEW_X, KindLabel
from perception.observation import Observation, canonical_pill
from perception.reader import DEFAULT_MODEL, BoardReader

BATCH = 16


def _truth_falling(shown: Shown) -> tuple | None:
    sprite = shown.labels.sprite
    cells = np.argwhere(sprite > 0)
    if len(cells) == 0:
        return None
    (r0, c0), (r1, c1) = sorted(map(tuple, cells))  # top-left first
    if r0 == r1:  # horizontal: left, right
        colors = (int(sprite[r0, c0]) - 1, int(sprite[r1, c1]) - 1)
        return (int(c0), 16 - int(r0), 0, colors)
    colors = (int(sprite[r1, c1]) - 1, int(sprite[r0, c0]) - 1)  # bottom, top
    return (int(c1), 16 - int(r1), 1, colors)


def _read_falling(obs: Observation) -> tuple | None:
    f = obs.falling
    if f is None:
        return None
    return canonical_pill(f.x, f.y, f.rotation, f.colors)


def score(shown: list[Shown], observations: list[Observation]) -> dict[str, Any]:
    """Counts for a list of labelled pictures and what the reader made of them."""
    cells = cells_right = boards = boards_exact = visible = falling_ok = next_ok = kind_ok = 0
    strict_right = alike_cells = boards_strict = 0
    lock_frames = lock_ok = 0
    confusion = np.zeros((len(KindLabel), len(KindLabel)), np.int64)
    errors: list[dict[str, Any]] = []
    breakdown: dict[str, Counter[str]] = {
        k: Counter() for k in ("cells", "cell_codes", "boards", "falling", "next")
    }
    for s, obs in zip(shown, observations, strict=True):
        lab = s.labels
        kind_ok += int(obs.kind_label == lab.kind)
        confusion[lab.kind, int(obs.kind_label)] += 1
        if not lab.field_visible:
            continue
        visible += 1
        strict = obs.field == CLASS_TO_CODE[lab.cells]
        read = CODE_TO_CLASS[obs.field]
        right = strict | ((lab.alike >> read.astype(np.uint32)) & 1).astype(bool)
        cells += right.size
        cells_right += int(right.sum())
        strict_right += int(strict.sum())
        alike_cells += int((lab.alike != 0).sum())
        if lab.kind == KindLabel.GAMEPLAY:
            boards += 1
            boards_exact += int(right.all())
            boards_strict += int(strict.all())
        truth = _truth_falling(s)
        got = _read_falling(obs)
        ok = truth == got
        falling_ok += int(ok)
        want_next = None if lab.next_colors[0] < 0 else tuple(int(c) for c in lab.next_colors)
        got_next = None if obs.next is None else obs.next.colors
        next_ok += int(want_next == got_next)
        lock = False
        if truth is not None and (lab.sprite > 0).any():
            over = [(r - 1, c) for r, c in np.argwhere(lab.sprite > 0) if r >= 1]
            if any(lab.cells[r, c] != 0 for r, c in over):
                lock = True
                lock_frames += 1
                lock_ok += int(right.all() and ok)
        _break_down(breakdown, s, obs, right, strict, truth, got, want_next, got_next, lock)
        if not right.all() and len(errors) < 20:
            rr, cc = np.nonzero(~right)
            errors.append(
                {
                    "cells": [
                        f"({int(r)},{int(c)}) ${int(CLASS_TO_CODE[lab.cells[r, c]]):02X} read "
                        f"${int(obs.field[r, c]):02X}"
                        for r, c in zip(rr, cc, strict=True)
                    ]
                }
            )
    return {
        "frames": len(shown),
        "board_frames": visible,
        "gameplay_frames": boards,
        "cells": cells,
        "cell_errors": cells - cells_right,
        "cell_accuracy": cells_right / max(cells, 1),
        "board_exact": boards_exact / max(boards, 1),
        "alike_cells": alike_cells,
        "cell_accuracy_strict": strict_right / max(cells, 1),
        "board_exact_strict": boards_strict / max(boards, 1),
        "falling_exact": falling_ok / max(visible, 1),
        "next_exact": next_ok / max(visible, 1),
        "kind_accuracy": kind_ok / max(len(shown), 1),
        "lock_frames": lock_frames,
        "lock_frames_exact": lock_ok / max(lock_frames, 1),
        "kind_confusion": confusion.tolist(),
        "breakdown": {k: dict(v.most_common()) for k, v in breakdown.items()},
        "first_errors": errors,
    }


def _code_name(code: int) -> str:
    return "empty" if code == 0xFF else f"${code >> 4:X}x"


def _break_down(
    out: dict[str, Counter[str]],
    s: Shown,
    obs: Observation,
    right: np.ndarray,
    strict: np.ndarray,
    truth: tuple | None,
    got: tuple | None,
    want_next: tuple | None,
    got_next: tuple | None,
    lock: bool,
) -> None:
    """Count one frame's errors by type (the report's error breakdown).

    cells: ``alike, read as shown`` / ``alike, read as an alike class`` (cells the picture
    cannot tell from other classes, right either way), then the errors: ``under sprite`` (a
    falling-pill sprite covers the cell), ``clearing`` (clearing tiles are drawn in the
    frame), ``other``; cell_codes: the errors as "$5x>empty" (truth type > read type);
    boards: GAMEPLAY frames not exact, ``under sprite only`` or not; falling and next:
    ``missed``, ``phantom``, ``place`` / ``colors``, with ``lock`` (lock frame) or
    ``flight`` (next pill on its throw arc)."""
    lab = s.labels
    covered = lab.sprite[1:] > 0
    truth_codes = CLASS_TO_CODE[lab.cells]
    clearing = bool(((truth_codes & 0xF0) == 0xB0).any())
    out["cells"]["alike, read as shown"] += int((strict & (lab.alike != 0)).sum())
    out["cells"]["alike, read as an alike class"] += int((right & ~strict).sum())
    for r, c in zip(*np.nonzero(~right), strict=True):
        kind = "under sprite" if covered[r, c] else "clearing" if clearing else "other"
        out["cells"][kind] += 1
        pair = f"{_code_name(int(truth_codes[r, c]))}>{_code_name(int(obs.field[r, c]))}"
        out["cell_codes"][pair] += 1
    wrong = ~right
    if lab.kind == KindLabel.GAMEPLAY and wrong.any():
        only = bool(covered[wrong].all())
        out["boards"]["under sprite only" if only else "other"] += 1
    if truth != got:
        what = (
            "missed"
            if got is None
            else "phantom"
            if truth is None
            else "colors"
            if truth[:3] == got[:3]
            else "place"
        )
        out["falling"][what + (" lock" if lock else "")] += 1
    if want_next != got_next:
        what = "missed" if got_next is None else "phantom" if want_next is None else "colors"
        out["next"][what + (" flight" if lab.next_throw else " rest")] += 1


def evaluate_profile(
    reader: BoardReader,
    frames: int,
    seed: int,
    tiles: Any,
    emit: float = 0.03,
    versus: bool = False,
) -> dict[str, Any]:
    """Score ``reader`` on ``frames`` held-out pictures captured through its profile;
    ``versus``: pictures of the two-player screen (perception.data.VersusStream), each read through
    the crop of the player it is labelled for."""
    rng = np.random.default_rng([EVAL_SEED, seed])
    stream: Iterator[Shown]
    if versus:
        stream = iter(
            VersusStream(rng, "eval", tiles, randomize_tiles=False, emit=emit, hard=False)
        )
    else:
        stream = iter(
            GameStream(
                rng, "eval", tiles, randomize_tiles=False, emit=emit, hard=False, mark_alike=True
            )
        )
    noise = NoiseSource(seed)
    shown: list[Shown] = []
    observations: list[Observation] = []
    start = time.perf_counter()
    while len(shown) < frames:
        batch = [next(stream) for _ in range(min(BATCH, frames - len(shown)))]
        captured = [capture_full(reader.profile, s, noise) for s in batch]
        if versus:  # as hil run reads it: both bottles, the pause from player 1's crop
            observations += [
                reader.read_versus(c)[VERSUS_VIEW_X.index(s.view_x)]
                for c, s in zip(captured, batch, strict=True)
            ]
        else:
            observations += reader.read_batch(captured)
        shown += batch
    result = score(shown, observations)
    result["seconds"] = time.perf_counter() - start
    return result


# the goals for a model read on held-out frames (issue 17): per shipped profile, and
# pooled over the random chains (each holds too few frames for a per-chain rate)
GOALS = {
    "cell_accuracy": 0.9999,
    "board_exact_strict": 0.995,
    "falling_exact": 0.995,
    "next_exact": 0.995,
    "kind_accuracy": 0.999,
}
RATE_OF = {  # rate -> the count it is a share of
    "cell_accuracy": "cells",
    "cell_accuracy_strict": "cells",
    "board_exact": "gameplay_frames",
    "board_exact_strict": "gameplay_frames",
    "falling_exact": "board_frames",
    "next_exact": "board_frames",
    "kind_accuracy": "frames",
}


def pooled(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The rates of several profiles' results taken together (counts summed)."""
    out: dict[str, Any] = {
        k: sum(r[k] for r in results)
        for k in ("frames", "board_frames", "gameplay_frames", "cells", "cell_errors")
    }
    for rate, count in RATE_OF.items():
        right = sum(round(r[rate] * r[count]) for r in results)
        out[rate] = right / max(out[count], 1)
    return out


_TILES: dict[tuple[str | None, bool], Any] = {}  # per process: the tile set of a ROM


def _tiles(rom: str | None, verify_crc: bool) -> Any:
    import engine

    key = (rom, verify_crc)
    if key not in _TILES:
        _TILES[key] = (
            engine.TileSet.from_ines(rom, verify_crc=verify_crc)
            if rom
            else engine.TileSet.clean_room()
        )
    return _TILES[key]


def _job(
    model: str,
    profile: Profile,
    frames: int,
    seed: int,
    rom: str | None,
    verify: bool,
    versus: bool,
) -> dict[str, Any]:
    """One profile's evaluation (run in a worker process by :func:`evaluate`)."""
    tiles = _tiles(rom, verify)
    return evaluate_profile(BoardReader(profile, model), frames, seed, tiles, versus=versus)


def _indexed_job(task: tuple) -> tuple[int, dict[str, Any]]:
    """(index, :func:`_job` of the rest of ``task``): a pool's unit of work."""
    return task[0], _job(*task[1:])


def evaluate(
    model: str | Path = DEFAULT_MODEL,
    frames: int = 600,
    random_profiles: int = 3,
    rom: str | None = None,
    progress: bool = True,
    *,
    random_frames: int | None = None,
    extra_profiles: list[Profile] | None = None,
    verify_crc: bool = True,
    versus_frames: int = 0,
    workers: int = 1,
) -> dict[str, Any]:
    """Evaluate ``model`` on every held-out profile; returns per-profile results and a summary
    (the worst value of each metric over profiles, the pooled cell accuracy, and the goals:
    each shipped (and extra) profile on its own, the random chains pooled).

    ``frames`` per shipped / extra profile, ``random_frames`` (default ``frames``) per random
    chain. ``rom``: draw with this ROM's tiles (``verify_crc``: its CRC must be a known dump;
    engine.RomError, a ValueError, otherwise). ``versus_frames``: as many pictures of the
    two-player screen per shipped (and extra) profile, scored as one more goal group, the
    profiles pooled (``versus`` in the result). ``workers``: processes sharing the profiles
    (each reads with one ONNX Runtime thread); every profile's frames and reading are the same
    whatever the number, so the result is too.
    """
    _tiles(rom, verify_crc)  # a bad ROM fails here, before any process starts
    profiles = held_out_profiles(random_profiles) + list(extra_profiles or [])
    # (group, name, profile, frames, seed): the seeds are those of the profiles' places in
    # the list, as when they ran one after the other
    jobs: list[tuple[str, str, Profile, int, int]] = []
    randoms: list[str] = []
    for k, p in enumerate(profiles):
        n = frames
        if p.name.startswith("random_"):
            randoms.append(p.name)
            n = random_frames or frames
        jobs.append(("profiles", p.name, p, n, 1000 + k))
    if versus_frames:
        jobs += [
            ("versus", p.name, p, versus_frames, 2000 + k)
            for k, p in enumerate(profiles)
            if not p.name.startswith("random_")
        ]
    done = _run_jobs(jobs, str(model), rom, verify_crc, workers, progress)
    results: dict[str, Any] = {}
    versus: dict[str, Any] = {}
    for (group, name, p, _, _), r in zip(jobs, done, strict=True):
        if group == "profiles":
            r["profile"] = p.to_dict()
            results[name] = r
        else:
            versus[name] = r
    keys = ("cell_accuracy", "board_exact", "falling_exact", "next_exact", "kind_accuracy")
    summary: dict[str, Any] = {f"worst_{k}": min(r[k] for r in results.values()) for k in keys}
    summary["worst_board_exact_strict"] = min(r["board_exact_strict"] for r in results.values())
    cells = sum(r["cells"] for r in results.values())
    errors = sum(r["cell_errors"] for r in results.values())
    summary["pooled_cell_accuracy"] = 1.0 - errors / max(cells, 1)
    summary["frames"] = sum(r["frames"] for r in results.values())
    summary["tiles"] = "ROM" if rom else "clean-room"
    groups = {n: r for n, r in results.items() if n not in randoms}
    if randoms:
        groups[f"{len(randoms)} random chains (pooled)"] = pooled([results[n] for n in randoms])
    if versus:
        groups[f"two players ({len(versus)} profiles pooled)"] = pooled(list(versus.values()))
    summary["goal_groups"] = {name: {k: r[k] for k in GOALS} for name, r in groups.items()}
    misses = [
        f"{name}: {k} {100 * r[k]:.4g} % < {100 * goal:.4g} %"
        for name, r in groups.items()
        for k, goal in GOALS.items()
        if r[k] < goal
    ]
    summary["goals_met"] = not misses
    summary["goal_misses"] = misses
    out: dict[str, Any] = {"profiles": results, "summary": summary}
    if versus:
        out["versus"] = versus
    return out


def _run_jobs(
    jobs: list[tuple[str, str, Profile, int, int]],
    model: str,
    rom: str | None,
    verify: bool,
    workers: int,
    progress: bool,
) -> list[dict[str, Any]]:
    """The jobs' results in the jobs' order, over ``workers`` processes (1: in this one)."""
    from rich.progress import Progress

    with Progress(disable=not progress) as bar:
        task = bar.add_task("validating", total=len(jobs))
        if workers <= 1:
            out = []
            for group, _, p, n, seed in jobs:
                out.append(_job(model, p, n, seed, rom, verify, group == "versus"))
                bar.advance(task)
            return out
        import multiprocessing

        # the costliest first (frames times captured pixels), so no process is left with a
        # long one at the end
        order = sorted(
            range(len(jobs)),
            key=lambda i: -jobs[i][3] * jobs[i][2].geometry.width * jobs[i][2].geometry.height,
        )
        tasks = [
            (i, model, jobs[i][2], jobs[i][3], jobs[i][4], rom, verify, jobs[i][0] == "versus")
            for i in order
        ]
        results: dict[int, dict[str, Any]] = {}
        # leaving the block terminates the processes: an error or Ctrl-C stops at once
        with multiprocessing.get_context("spawn").Pool(min(workers, len(jobs))) as pool:
            for i, r in pool.imap_unordered(_indexed_job, tasks):
                results[i] = r
                bar.advance(task)
        return [results[i] for i in range(len(jobs))]


def markdown(evaluation: dict[str, Any], meta: dict[str, Any]) -> str:
    """The report as a markdown table, one row per profile."""
    lines = [
        "# Perception accuracy report",
        "",
        f"Model trained by `{meta.get('command', '?')}` in {meta.get('train_s', 0) / 60:.1f} min "
        f"({meta.get('steps_done', meta.get('steps', '?'))} steps); "
        f"ONNX {meta.get('onnx_bytes', 0) / 1e6:.2f} MB, ONNX vs torch max difference "
        f"{meta.get('onnx_vs_torch_max_diff', float('nan')):.1e}.",
        f"Held-out: games with odd seeds, {evaluation['summary']['tiles']} tiles, frames sampled "
        "uniformly, whole captured frames through BoardReader"
        + (
            f" (evaluated by `{meta['evaluation_command']}`)."
            if "evaluation_command" in meta
            else "."
        ),
        "",
        "| profile | frames | gameplay | cell accuracy | cell errors | board exact | falling exact "
        "| next exact | kind | lock frames (exact) | alike cells | strict cell accuracy "
        "| strict board exact |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in evaluation["profiles"].items():
        lines.append(
            f"| {name} | {r['frames']} | {r['gameplay_frames']} | {100 * r['cell_accuracy']:.4f} % "
            f"| {r['cell_errors']} | {100 * r['board_exact']:.2f} % "
            f"| {100 * r['falling_exact']:.2f} % | {100 * r['next_exact']:.2f} % "
            f"| {100 * r['kind_accuracy']:.2f} % "
            f"| {r['lock_frames']} ({100 * r['lock_frames_exact']:.1f} %) "
            f"| {r['alike_cells']} | {100 * r['cell_accuracy_strict']:.4f} % "
            f"| {100 * r['board_exact_strict']:.2f} % |"
        )
    s = evaluation["summary"]
    lines += [
        "",
        f"Worst over profiles: cell accuracy {100 * s['worst_cell_accuracy']:.4f} %, "
        f"board exact {100 * s['worst_board_exact']:.2f} %, "
        f"falling exact {100 * s['worst_falling_exact']:.2f} %, "
        f"next exact {100 * s['worst_next_exact']:.2f} %, "
        f"kind {100 * s['worst_kind_accuracy']:.2f} %; "
        f"pooled cell accuracy {100 * s['pooled_cell_accuracy']:.4f} % over {s['frames']} frames.",
        "",
        "A cell counts as right when read as a class the picture cannot tell from the truth "
        "(alike cells: perception.data.alike_classes); the strict columns count the truth only.",
        "",
        *_goal_lines(s),
        "## Errors by type",
        "",
        "| profile | cells | cell codes (truth>read) | boards | falling | next |",
        "|---|---|---|---|---|---|",
    ]

    def fmt(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"

    for name, r in evaluation["profiles"].items():
        b = r["breakdown"]
        lines.append(
            f"| {name} | {fmt(b['cells'])} | {fmt(b['cell_codes'])} | {fmt(b['boards'])} "
            f"| {fmt(b['falling'])} | {fmt(b['next'])} |"
        )
    lines.append("")
    return "\n".join(lines)


def _goal_lines(summary: dict[str, Any]) -> list[str]:
    groups = summary.get("goal_groups")
    if not groups:
        return []
    names = list(GOALS)
    out = [
        "## Goals",
        "",
        "cells >= 99.99 %, whole boards (strict) >= 99.5 %, falling and next pill >= 99.5 %, "
        "screen kind >= 99.9 %: each profile on its own, the random chains pooled. "
        + (
            "**All met.**"
            if summary.get("goals_met")
            else "**Not met:** " + "; ".join(summary.get("goal_misses", [])) + "."
        ),
        "",
        "| profile | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for name, r in groups.items():
        out.append(f"| {name} | " + " | ".join(f"{100 * r[k]:.4f} %" for k in names) + " |")
    out.append("")
    return out


def write_report(evaluation: dict[str, Any], meta: dict[str, Any], path: Path) -> list[Path]:
    """Write ``path`` (.json: evaluation + meta) and the markdown beside it (.md)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    json_path = path.with_suffix(".json")
    md_path = path.with_suffix(".md")
    json_path.write_text(json.dumps({"meta": meta, **evaluation}, indent=1) + "\n")
    md_path.write_text(markdown(evaluation, meta))
    return [json_path, md_path]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m perception.evaluate", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="ONNX board model")
    p.add_argument("--frames", type=int, default=600, help="frames per profile (600)")
    p.add_argument("--random-profiles", type=int, default=3, help="held-out random profiles (3)")
    p.add_argument(
        "--random-frames", type=int, help="frames per random profile (default: --frames)"
    )
    p.add_argument("--rom", help="draw the frames with this ROM's tiles")
    p.add_argument(
        "--versus-frames",
        type=int,
        default=0,
        help="two-player frames per shipped profile, one more goal group (0: none)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes sharing the profiles (default: one per core); the result is the same",
    )
    p.add_argument("--report", type=Path, help="write the report here (.json and .md)")
    p.add_argument(
        "--keep-meta",
        action="store_true",
        help="keep the training facts (command, time, steps) of the report already at --report "
        "(re-evaluating the model it describes, e.g. after a change to the decoding)",
    )
    args = p.parse_args(argv)
    meta: dict[str, Any] = {"command": "(evaluation only)"}
    if args.keep_meta:
        if args.report is None or not args.report.with_suffix(".json").is_file():
            raise SystemExit("--keep-meta needs --report naming an existing report (.json)")
        meta = json.loads(args.report.with_suffix(".json").read_text())["meta"]
    command = "python -m perception.evaluate " + " ".join(sys.argv[1:] if argv is None else argv)
    meta["evaluation_command"] = command
    evaluation = evaluate(
        args.model,
        args.frames,
        args.random_profiles,
        args.rom,
        random_frames=args.random_frames,
        versus_frames=args.versus_frames,
        workers=max(1, args.workers),
    )
    print(markdown(evaluation, meta))
    if args.report:
        write_report(evaluation, meta, args.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
