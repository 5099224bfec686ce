"""Prepare perception for a console from the user's own ROM: ``hil prepare --rom drmario.nes``.

The shipped board model (perception/models/board.onnx) learnt the project's clean-room
drawings; a real console draws the game's own tiles, which it reads badly (docs/PERCEPTION.md,
"A model for your ROM"). This command fits the model (and the screen reader) to the ROM's graphics:

1. reads the ROM (engine.ines: its CHR, palettes, level nametable and metasprites; read at run
   time, never copied or stored);
2. fine-tunes the shipped network (perception.model.from_onnx; trained across many made-up
   tile sets, so it already reads most of a real ROM's boards) on renders drawn with the ROM's
   tiles, through random capture chains (perception.data), for ``--steps`` optimizer steps
   (2000) however long they take, the first convolution kept as the shipped model has it
   (perception.train ``--freeze-first``: the backward pass stops before the full-resolution
   layer); ``--versus-rate`` (0.4) of the samples are a bottle of the
   two-player screen (perception.data.VersusStream), so the same model reads both screens. The
   model is the same on a fast, slow or busy machine, only the time differs, shown as the
   progress bar's ETA (no time cap: a cap made a weaker model on a busy machine:
   docs/notes/2026-11-29-prepare.md);
3. validates the result end to end on held-out renders (odd seeds) with the ROM's tiles through
   every shipped profile, ``--random-chains`` random chains and the rig's own profile, and
   ``--versus-frames`` two-player pictures per shipped profile (pooled: one more goal group)
   (perception.evaluate; the profiles shared among one process per core), and prints the
   numbers against the goals;
4. runs the ROM in cynes through its title, options screen, demo, stage clear and game over
   and keeps pictures of them with the truth from RAM as the screen reader's prototypes
   (perception.screens: ``screens.npz``; skipped with a note for a file that is not the game).
   This runs beside steps 2-3 in a second process at a slightly lower priority (os.nice 3,
   ``SCREENS_NICE``): the emulator takes about 1.2 minutes of one core, and training leaves part
   of a 2-core machine idle. At nice 10 it got 7 % of a core beside two CPU-bound processes and
   the command waited 6.5 minutes for it after validating;
5. installs the model, the ROM's digit glyphs (``panel.npz``: perception.panel reads the LEVEL
   number with them) and the report in the user's data directory, keyed by the ROM's CRC-32
   (perception.store), **only when it meets every goal** (or with ``--install-anyway``); a model
   that misses a goal goes to ``candidate/`` beside it with its report, the previous model stays
   in use, and the command says which goals it missed and how to fine-tune the candidate
   further. With ``--profile rig.json`` the ROM's CRC is recorded in the profile so that
   ``hil run`` / ``hil replay`` / ``hil calibrate latency`` pick the model up.

Exit status: 0 the model met every goal and is installed; 1 it missed a goal (installed only
with ``--install-anyway``; else kept in ``candidate/``); 2 bad input (one line, nothing trained).

Training needs torch (``pip install -e .[train]``); without it the command says so in one line.
Running a prepared model needs only ONNX Runtime.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from perception.panel import PANEL_FILE, save_glyphs
from perception.store import MODEL_FILE, SHIPPED_MODEL, prepared_dir, rom_crc32

TORCH_MISSING = (
    "preparing perception trains a model and needs torch, which is not installed: "
    "pip install -e .[train]"
)


class PrepareError(ValueError):
    """Bad input to prepare (the message is one line for the user)."""


EXIT_STATUS = (
    "exit status: 0 the model met every goal and is installed; 1 it missed a goal (kept in "
    "candidate/ beside the installed one, which stays in use; installed with --install-anyway); "
    "2 bad input (nothing trained)"
)


def build_parser(prog: str = "python -m perception.prepare") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0], epilog=EXIT_STATUS)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``hil prepare`` / ``python -m perception.prepare``."""
    p.add_argument("--rom", required=True, help="your own Dr. Mario iNES file (never stored)")
    p.add_argument(
        "--profile",
        help="your rig's profile (hil calibrate --out): validated on too, and the ROM's CRC "
        "is written into it so that hil run finds the model",
    )
    p.add_argument(
        "--steps",
        type=int,
        default=2000,
        help="optimizer steps (2000), however long they take: the time depends on the machine "
        "and its load, the model does not (the progress bar shows the ETA)",
    )
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (1e-3)")
    p.add_argument("--batch", type=int, default=32, help="samples per step (32)")
    p.add_argument("--workers", type=int, default=2, help="data processes (2)")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for the training step (1). On 2 cores, beside the data processes, "
        "one thread did a step in 0.11 s quiet and 0.22 s beside two CPU-bound processes, two "
        "threads 0.15 s and 0.78 s: one leaves the other core to the data processes and the "
        "screens step, and does not wait on other work (docs/PERCEPTION.md)",
    )
    p.add_argument(
        "--eval-frames", type=int, default=300, help="held-out frames per shipped profile (300)"
    )
    p.add_argument("--random-chains", type=int, default=40, help="random capture chains (40)")
    p.add_argument(
        "--random-frames", type=int, default=60, help="held-out frames per random chain (60)"
    )
    p.add_argument("--init", type=Path, default=SHIPPED_MODEL, help="model to start from")
    p.add_argument(
        "--out",
        type=Path,
        help="folder to store the model in (default: the user data directory, by ROM CRC)",
    )
    p.add_argument(
        "--hard-cells",
        type=float,
        default=0.02,
        help="extra loss on this fraction of the hardest cells of a batch (0.02; 0: off)",
    )
    p.add_argument(
        "--hard-samples",
        type=float,
        default=0.1,
        help="extra next-pill loss on this fraction of the hardest samples of a batch "
        "(0.1; 0: off)",
    )
    p.add_argument(
        "--target-rate",
        type=float,
        default=0.0,
        help="share of the training samples captured through the shipped profiles and the "
        "rig's own (--profile), the rest through random chains (0: random only, the default; "
        "0.5 read the composite chain better and the real game a little worse: "
        "docs/PERCEPTION.md)",
    )
    p.add_argument(
        "--versus-rate",
        type=float,
        default=0.4,
        help="share of the training samples that are a bottle of the two-player screen (0.4; "
        "0: one player only)",
    )
    p.add_argument(
        "--versus-frames",
        type=int,
        default=200,
        help="held-out two-player frames per shipped profile, validated as one goal group "
        "(200; 0: none)",
    )
    p.add_argument(
        "--install-anyway",
        action="store_true",
        help="install the model even when it misses a goal (default: it goes to candidate/ "
        "and the previous model stays in use)",
    )
    p.add_argument("--seed", type=int, default=17, help="training seed (17)")
    p.add_argument("--no-crc", action="store_true", help="accept a ROM of unknown CRC")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _check(args: argparse.Namespace) -> tuple[str, Any]:
    """The ROM's CRC and the rig's profile (or None); PrepareError for bad input."""
    from calibration import Profile

    if os.path.isdir(args.rom):
        raise PrepareError(f"--rom: {args.rom} is a directory, not a ROM file")
    if not os.path.isfile(args.rom):
        raise PrepareError(f"--rom: no such file {args.rom}")
    try:
        crc = rom_crc32(args.rom, verify_crc=not args.no_crc)
    except (ValueError, OSError) as e:  # engine.RomError is a ValueError
        raise PrepareError(f"--rom: {str(e).replace('verify_crc=False', '--no-crc')}") from None
    profile = None
    if args.profile:
        try:
            profile = Profile.load(args.profile)
        except (ValueError, OSError) as e:
            raise PrepareError(f"--profile: {e}") from None
    for name, lo, hi in (
        ("lr", 1e-9, 1.0),
        ("hard_cells", 0.0, 1.0),
        ("hard_samples", 0.0, 1.0),
        ("target_rate", 0.0, 1.0),
        ("versus_rate", 0.0, 1.0),
    ):
        v = getattr(args, name)
        if not (math.isfinite(v) and lo <= v <= hi):  # NaN and infinity are refused
            raise PrepareError(f"--{name.replace('_', '-')} must be within {lo:g}..{hi:g}, got {v}")
    for name, lo in (
        ("steps", 1),
        ("batch", 1),
        ("threads", 1),
        ("workers", 0),
        ("eval_frames", 1),
        ("random_chains", 0),
        ("random_frames", 1),
        ("versus_frames", 0),
    ):
        v = getattr(args, name)
        if not lo <= v <= 10**7:
            raise PrepareError(f"--{name.replace('_', '-')} must be within {lo}..{10**7}, got {v}")
    _check_init(args.init)
    if args.out is not None:
        _check_out_dir(Path(args.out))
    return crc, profile


def _check_init(path: Path) -> None:
    """--init: an ONNX file of the board network (read before any training starts)."""
    if path.is_dir():
        raise PrepareError(f"--init: {path} is a directory, not an ONNX model")
    if not path.is_file():
        raise PrepareError(f"--init: no such file {path}")
    if importlib.util.find_spec("torch") is None:
        return  # prepare stops at TORCH_MISSING before anything else
    from perception.model import from_onnx

    try:
        from_onnx(path)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, a graph of another net
        why = f"{type(e).__name__}: {e}".splitlines()[0][:160]
        raise PrepareError(f"--init: {path} is not a board model ({why})") from None


def _check_out_dir(d: Path) -> None:
    """--out: a folder that is or can be made, and that this user can write into."""
    if d.exists() and not d.is_dir():
        raise PrepareError(f"--out: {d} is a file, not a folder")
    parent = d
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise PrepareError(f"--out: cannot write into {parent} (permission denied)")


def _exit_when_orphaned(parent: int, poll_s: float = 1.0) -> None:
    """Ends this process (status 1) once its parent ``parent`` (the pid the parent gave, so a
    parent killed while this process was still starting counts too) is gone: a watcher thread
    sees this process re-parented (os.getppid differs; checked every ``poll_s`` seconds)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


SCREENS_NICE = 3  # below the training; at 10 a loaded machine starved it (module docstring)


def _build_screens(rom: str, path: str, parent: int) -> None:
    """Step 4 in the background process: the screen prototypes of ``rom`` saved at ``path``,
    or the reason there are none in ``path + ".error"`` (engine.RomError: a file cynes cannot
    run as the game; any other error by its type and message). Ctrl-C is the parent's to
    handle (it ends this process); a parent that dies without ending it (SIGKILL) ends it
    too, within a second."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(SCREENS_NICE)
    _exit_when_orphaned(parent)
    try:
        from perception.screens_rom import rom_prototypes

        rom_prototypes(rom).save(path)
    except ValueError as e:  # engine.RomError: a file whose program is not the game's
        Path(path + ".error").write_text(str(e))
    except Exception as e:  # noqa: BLE001 - reported by the parent in one line
        Path(path + ".error").write_text(f"{type(e).__name__}: {e}")


def _screens_result(job: multiprocessing.process.BaseProcess, path: Path) -> str | None:
    """Wait for the background step 4; None when ``path`` holds the prototypes, else why not."""
    job.join()
    error = Path(str(path) + ".error")
    if error.is_file():
        return error.read_text()
    if job.exitcode != 0 or not path.is_file():
        return f"the process building them ended with status {job.exitcode}"
    return None


REPORT_FILE = "board.report.json"  # and board.report.md beside it


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Run the steps of the module docstring. Returns the report's summary and paths, and
    whether the model was installed (``installed``; else it is in ``candidate/``).

    Raises PrepareError for bad input or a missing torch (one line for the user)."""
    crc, profile = _check(args)
    if importlib.util.find_spec("torch") is None:
        raise PrepareError(TORCH_MISSING)

    out_dir = Path(args.out) if args.out else prepared_dir(crc)
    start = time.time()
    load_start = os.getloadavg()
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, file=sys.stderr))
    cores = os.cpu_count() or 1
    if args.threads > 1 and load_start[0] >= 1.0:
        say(
            f"hil prepare: load average {load_start[0]:.1f} on {cores} cores before training: "
            f"{args.threads} training threads will wait on the other work (beside two "
            "CPU-bound processes on 2 cores a step took 0.78 s with 2 threads, 0.22 s with 1)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        from perception.screens import SCREENS_FILE

        stage = Path(tmp) / "model"
        stage.mkdir()
        screens_staged = Path(tmp) / SCREENS_FILE
        job = multiprocessing.get_context("spawn").Process(
            target=_build_screens,
            args=(str(args.rom), str(screens_staged), os.getpid()),
            daemon=True,
        )
        job.start()
        say(
            "hil prepare: screen prototypes (title, options, demo, game over) from the ROM in "
            "cynes, in the background"
        )
        result: dict[str, Any] | None = None
        try:
            result = _fit(args, crc, profile, stage, start, load_start, say)
            say("hil prepare: waiting for the screen prototypes")
            problem = _screens_result(job, screens_staged)
        except KeyboardInterrupt:
            if result is not None:  # trained and validated: kept as the goals say, no screens
                _install(args, result, stage, out_dir, start, None)
            raise
        finally:
            if job.is_alive():  # training failed or was interrupted
                job.terminate()
                job.join()
        screens: str | None = str(out_dir / SCREENS_FILE)
        if problem is None:  # the ROM's screens do not depend on the model: always kept
            out_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(screens_staged, out_dir / SCREENS_FILE)
        else:
            say(f"hil prepare: no screen prototypes ({problem}); the menus must be driven by hand")
            screens = None
        # The report is written once, now that the time includes the screens step.
        return _install(args, result, stage, out_dir, start, screens)


CANDIDATE_DIR = "candidate"  # beside the installed model: a model that missed a goal


def _install(
    args: argparse.Namespace,
    result: dict[str, Any],
    stage: Path,
    out_dir: Path,
    start: float,
    screens: str | None,
) -> dict[str, Any]:
    """Moves _fit's staged model (``stage``: board.onnx, panel.npz) with its report (its meta's
    total time up to now) into ``out_dir`` when it met every goal or ``--install-anyway``
    says so, else into ``out_dir/candidate`` (the installed model, if any, stays); returns
    ``result`` with where it went, the report's paths and ``screens``."""
    from perception.evaluate import write_report

    meta, evaluation = result.pop("meta"), result.pop("evaluation")
    installed = bool(evaluation["summary"]["goals_met"] or args.install_anyway)
    dest = out_dir if installed else out_dir / CANDIDATE_DIR
    previous = out_dir / MODEL_FILE
    kept = str(previous) if not installed and previous.is_file() else None
    meta["total_s"] = result["total_s"] = time.time() - start
    meta["installed"] = installed
    dest.mkdir(parents=True, exist_ok=True)
    for name in (MODEL_FILE, PANEL_FILE):
        shutil.copyfile(stage / name, dest / name)
    if installed:  # a candidate left by an earlier run is stale now
        shutil.rmtree(out_dir / CANDIDATE_DIR, ignore_errors=True)
    result.update(
        model=str(dest / MODEL_FILE),
        installed=installed,
        kept=kept,
        screens=screens,
        report=[str(p) for p in write_report(evaluation, meta, dest / REPORT_FILE)],
    )
    if not installed:
        result["advice"] = (
            f"fine-tune the candidate further: hil prepare --rom {args.rom} --init "
            f"{dest / MODEL_FILE} --steps 3000 --lr 3e-4"
            + (f" --profile {args.profile}" if args.profile else "")
            + (" --no-crc" if args.no_crc else "")
            + f"; or use it as it is: hil run --model {dest / MODEL_FILE} (this run only), "
            "or add --install-anyway to this command (trains the same model again and installs "
            "it; docs/PERCEPTION.md)"
        )
    return result


def _fit(
    args: argparse.Namespace,
    crc: str,
    profile: Any,
    stage: Path,
    start: float,
    load_start: tuple[float, float, float],
    say: Any,
) -> dict[str, Any]:
    """Steps 2 and 3: fine-tune, export into the folder ``stage`` (board.onnx, panel.npz),
    validate; its report's facts are returned (``meta``, ``evaluation``) for _install to write
    once the screens step is done."""
    from calibration import builtin_profiles
    from engine import TileSet
    from perception import train as trainer
    from perception.evaluate import evaluate

    say(f"hil prepare: ROM CRC-32 {crc}; fine-tuning {args.init} for {args.steps} steps")
    targs = trainer.build_parser().parse_args(
        [
            "--rom",
            str(args.rom),
            "--init",
            str(args.init),
            "--steps",
            str(args.steps),
            "--lr",
            str(args.lr),
            "--batch",
            str(args.batch),
            "--workers",
            str(args.workers),
            "--threads",
            str(args.threads),
            "--seed",
            str(args.seed),
            "--hard-cells",
            str(args.hard_cells),
            "--hard-samples",
            str(args.hard_samples),
            "--keep-shapes",
            "--freeze-first",
            "--target-rate",
            str(args.target_rate),
            "--versus-rate",
            str(args.versus_rate),
            "--target-profiles",
            *builtin_profiles(),
            *([str(args.profile)] if args.profile else []),
        ]
        + (["--no-crc"] if args.no_crc else [])
        + (["--quiet"] if args.quiet else [])
    )
    result = trainer.train(targs)
    verify = not args.no_crc
    check = next(iter(trainer.SampleStream(args.seed + 1000, 8, args.rom, 1, 8, verify)))["image"]
    model_path = stage / MODEL_FILE
    diff = trainer.export_onnx(result["model"], model_path, check)
    # the ROM's digit glyphs beside the model: the reader reads the panel with them
    # (perception.panel), in validation too
    save_glyphs(TileSet.from_ines(args.rom, verify_crc=verify), stage / PANEL_FILE)
    say(
        f"hil prepare: trained {result['steps_done']} steps in "
        f"{result['train_s'] / 60:.1f} min; validating"
    )
    eval_start = time.time()
    evaluation = evaluate(
        model_path,
        frames=args.eval_frames,
        random_profiles=args.random_chains,
        rom=args.rom,
        progress=not args.quiet,
        random_frames=args.random_frames,
        extra_profiles=[profile.replace(name=f"rig:{profile.name}")] if profile else None,
        verify_crc=verify,
        versus_frames=args.versus_frames,
        workers=os.cpu_count() or 1,  # training is done: validation has every core
    )
    meta = {
        "command": "hil prepare " + " ".join(getattr(args, "argv", []) or []),
        "rom_crc32": crc,
        "init": str(args.init),
        "train_s": result["train_s"],
        "eval_s": time.time() - eval_start,
        "total_s": time.time() - start,
        "steps": args.steps,
        "steps_done": result["steps_done"],
        "threads": args.threads,
        "batch": args.batch,
        "target_rate": args.target_rate,
        "versus_rate": args.versus_rate,
        "onnx_bytes": model_path.stat().st_size,
        "onnx_vs_torch_max_diff": diff,
        "load_average_start": load_start,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "history": result["history"],
    }
    wrote_profile = None
    if profile is not None and args.profile and Path(args.profile).is_file():
        profile.replace(rom_crc32=crc).save(args.profile)
        wrote_profile = args.profile
    return {
        "rom_crc32": crc,
        "profile_updated": wrote_profile,
        "total_s": meta["total_s"],
        "meta": meta,
        "evaluation": evaluation,
        "train_s": result["train_s"],
        "eval_s": meta["eval_s"],
        "steps_done": result["steps_done"],
        "summary": evaluation["summary"],
    }


def print_result(result: dict[str, Any]) -> None:
    """The numbers against the goals as a table (rich), then where things went."""
    from rich.console import Console
    from rich.table import Table

    s = result["summary"]
    table = Table(title=f"held-out renders with ROM {result['rom_crc32']}'s tiles")
    names = ("cell_accuracy", "board_exact_strict", "falling_exact", "next_exact", "kind_accuracy")
    table.add_column("profile")
    for n in names:
        table.add_column(n.replace("_", " "), justify="right")
    for group, r in s["goal_groups"].items():
        table.add_row(group, *(f"{100 * r[n]:.3f} %" for n in names))
    console = Console(stderr=True)
    console.print(table)
    verdict = "all goals met" if s["goals_met"] else "goals NOT met: " + "; ".join(s["goal_misses"])
    if result["installed"]:
        where = f"model installed: {result['model']}"
    else:
        using = (
            result["kept"] or f"{SHIPPED_MODEL} (the shipped model: not fitted to a real console)"
        )
        where = (
            f"model NOT installed, kept as a candidate: {result['model']}\n"
            f"hil run keeps using {using}\n{result['advice']}"
        )
    console.print(
        f"{verdict}\n{where}\nreport: {result['report'][1]}\n"
        f"took {result['total_s'] / 60:.1f} min (training {result['train_s'] / 60:.1f}, "
        f"validation {result['eval_s'] / 60:.1f}; {result['steps_done']} steps)"
        + (
            f"\nprofile {result['profile_updated']} now names ROM {result['rom_crc32']}"
            if result["profile_updated"]
            else ""
        )
    )


def main(argv: list[str] | None = None, prog: str = "python -m perception.prepare") -> int:
    args = build_parser(prog).parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    try:
        result = prepare(args)
    except PrepareError as e:
        print(f"{prog.split()[-1]}: {e}", file=sys.stderr)
        return 2
    print_result(result)
    print(json.dumps({k: v for k, v in result.items() if k != "summary"}, indent=1))
    return 0 if result["summary"]["goals_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
