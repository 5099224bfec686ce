"""``hil run``: its options, the request built from them (checked at the edge: one line, exit 2),
the signals that end a run with its summary, and the summary's headline (docs/RUN.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hil.commands import common

if TYPE_CHECKING:
    from hil.loop.levels import LevelPlan
    from hil.play import RunRequest, VersusRequest


def add_parser(sub: Any) -> None:
    """The ``hil run`` subcommand on ``sub`` (argparse subparsers)."""
    from hil import args as parse
    from hil.link.vdevice import DEFAULT_UF2

    run = sub.add_parser(
        "run",
        help="play: the closed loop (the simulated console unless --emu or --port is given)",
        description=(
            "Play Dr. Mario: capture -> perception -> tracker -> policy -> planner -> "
            "controller, on the simulated console (default), your ROM in the emulator (--emu) "
            "or the real rig (--port, --capture). The console runs in real time and never "
            "waits; --fast: lockstep (sim and --emu). docs/RUN.md explains everything."
        ),
    )
    run.add_argument(
        "--port", type=parse.port, help="controller serial port (/dev/ttyACM0): the rig"
    )
    run.add_argument("--capture", help="capture device (/dev/video0, 0) or video file (rig)")
    run.add_argument("--sim", action="store_true", help="the simulated console (default)")
    run.add_argument(
        "--emu", metavar="ROM", help="your Dr. Mario ROM in the emulator (cynes), in real time"
    )
    run.add_argument(
        "--no-crc", action="store_true", help="--emu: accept a dump of unknown CRC (as prepare)"
    )
    run.add_argument(
        "--emu-game",
        choices=["drmario", "testrom"],
        help="--emu's game: drmario (default), or testrom (the project's test ROM: the path, "
        "no game; CI)",
    )
    run.add_argument(
        "--fast",
        action="store_true",
        help="lockstep: the console waits for the host (sim and --emu; as fast as possible)",
    )
    run.add_argument(
        "--firmware",
        nargs="?",
        const=str(DEFAULT_UF2),
        metavar="UF2",
        help="with --fast (sim, --emu): the controller is this firmware image (default the "
        "committed one) running in rp2040js, not the C core (firmware/README.md 'Emulator')",
    )
    run.add_argument(
        "--level",
        type=parse.integer(0, parse.MAX_LEVEL),
        default=0,
        help="first level 0..24 (default 0); 0..20 where the options screen starts it",
    )
    run.add_argument("--speed", type=int, default=1, choices=[0, 1, 2], help="0 LOW, 1 MED, 2 HI")
    run.add_argument(
        "--levels", type=parse.levels, help='levels to play, "L[:S],...", e.g. "0:0,10:1,20:2"'
    )
    run.add_argument(
        "--max-levels",
        type=parse.integer(1, 1000),
        help="levels of the game's chain from --level (1; 1..1000)",
    )
    run.add_argument("--profile", default="mjpeg_720p_q70", help="capture profile (name/file)")
    run.add_argument(
        "--seed", type=parse.seeds, help="sim: level RNG seeds, comma separated (0x8988)"
    )
    run.add_argument(
        "--capture-seed",
        type=parse.integer(0, 2**32 - 1),
        help="sim, --emu: the capture's noise and timing (0)",
    )
    run.add_argument(
        "--console-seed", type=parse.integer(0, 2**32 - 1), help="sim: frameCounter phase (0)"
    )
    run.add_argument(
        "--frames",
        type=parse.integer(1, 100_000_000),
        default=200_000,
        help="console frames at most (200000)",
    )
    _add_output_args(run)
    _add_play_args(run)


def _add_output_args(run: argparse.ArgumentParser) -> None:
    run.add_argument("--log", help="JSONL event log to write")
    run.add_argument("--record", help="directory to record the capture and the run's readings into")
    run.add_argument(
        "--record-codec",
        choices=["mpeg4", "mjpeg", "ffv1"],
        default="mpeg4",
        help="mpeg4 (~26 KB a 720p frame, default), mjpeg (~95 KB) or ffv1 (lossless, ~530 KB)",
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace a recording already in --record"
    )
    run.add_argument(
        "--view",
        choices=["auto", "window", "terminal", "none"],
        default="auto",
        help="live view (auto: window, or terminal without a display; none with --fast)",
    )


def _add_play_args(run: argparse.ArgumentParser) -> None:
    from hil import args as parse

    run.add_argument(
        "--reader",
        choices=["auto", "onnx", "oracle"],
        default="auto",
        help="auto, onnx, or oracle (the simulated console's or --emu's ground truth)",
    )
    run.add_argument(
        "--policy",
        choices=["auto", "onnx", "search", "heuristic", "search-attack", "beam"],
        default="auto",
        help="auto, onnx (the network, never a placement that tops out at once while another "
        "lives: docs/POLICY.md 'Survival rule'), search (policy.search with the network as "
        "prior: slower, stronger; docs/RUN.md), heuristic, beam (policy.beam over the level's "
        "pills, known from its board; one player), or with --versus search-attack (the search "
        "aiming for attacks; docs/VERSUS.md)",
    )
    run.add_argument(
        "--planner",
        choices=["taps", "exact"],
        default="exact",
        help="exact: engine.plan, every reachable placement (default); taps: taps_only",
    )
    run.add_argument(
        "--no-ponder",
        action="store_true",
        help="decide each pill at its spawn, not during the previous pill's fall (docs/RUN.md "
        "'Pondering')",
    )
    run.add_argument(
        "--fault",
        type=parse.fault,
        action="append",
        default=[],
        metavar="FRAME:KIND[:AMOUNT]",
        help="inject a fault at console FRAME (repeat): "
        + "; ".join(
            f"{k}{f' [{unit}, {d:g}]' if unit else ''}: {what}"
            for k, (unit, d, _lo, _hi, what) in parse.FAULTS.items()
        )
        + " (docs/RUN.md 'Faults')",
    )
    run.add_argument(
        "--latency-frames",
        type=parse.real(0.0, 60.0),
        help="rig: capture latency in console frames (calibrated; default the profile's)",
    )
    run.add_argument("--model", type=parse.in_file, help=common.MODEL_HELP)
    _add_versus_args(run)
    run.set_defaults(func=_cmd_run)


def _add_versus_args(run: argparse.ArgumentParser) -> None:
    from hil import args as parse
    from hil.play import VERSUS_OPPONENTS

    run.add_argument(
        "--versus",
        action="store_true",
        help="two players: the bot is player 2 (controller port 2) at --level/--speed; "
        "on the simulated console and --emu ROM player 1 is a script (--p1), on the rig the "
        "person on port 1 (docs/VERSUS.md)",
    )
    side = run.add_mutually_exclusive_group()
    side.add_argument(
        "--port2-only",
        action="store_true",
        help="--versus: the bot plays port 2 only, player 1 is the script or the person (the "
        "default)",
    )
    side.add_argument(
        "--both",
        action="store_true",
        help="--versus: the bot plays both ports, bot against bot: player 1 on port 1 at "
        "--p1-level/--p1-speed with the same --policy at full strength",
    )
    run.add_argument(
        "--p1",
        choices=list(VERSUS_OPPONENTS),
        help="--versus on the simulated console or --emu: player 1, a script on port 1 (greedy)",
    )
    run.add_argument(
        "--p1-level",
        type=parse.integer(0, 20),
        help="--versus: player 1's level 0..20 (default --level)",
    )
    run.add_argument(
        "--p1-speed", type=int, choices=[0, 1, 2], help="--versus: player 1's speed (--speed)"
    )
    run.add_argument(
        "--strength",
        type=parse.integer(1, 5),
        help="--versus: the bot's strength 1..5 (5, the full player): at 4, 3, 2, 1 a pill "
        "is placed at random with probability 0.1, 0.25, 0.5, 0.75 (docs/VERSUS.md)",
    )
    run.add_argument(
        "--matches",
        type=parse.integer(1, 1000),
        default=1,
        help="--versus: matches to play, first to 3 rounds won (1)",
    )
    run.add_argument(
        "--p1-wait",
        type=parse.integer(0, 100_000),
        help="--versus on the simulated console or --emu: player 1 presses each Start this many "
        "frames after the game would take it, and the loop is not told when (a person's pace, "
        "as on the rig; default 0: at once, and the loop knows)",
    )


def _levels(args: argparse.Namespace) -> list[LevelPlan]:
    """--levels (hil.args.levels; an item without a speed takes --speed) or --level chained
    --max-levels times (the game's chain: level + 1 up to 24 at the same speed)."""
    from hil.loop.levels import LevelPlan

    if args.levels:
        if args.max_levels is not None:
            raise SystemExit("hil run: --levels and --max-levels: give one of them")
        return [LevelPlan(i.level, args.speed if i.speed is None else i.speed) for i in args.levels]
    return [LevelPlan(min(args.level + i, 24), args.speed) for i in range(args.max_levels or 1)]


_ONLY_FOR = {
    "seed": ("sim", "--seed"),
    "console_seed": ("sim", "--console-seed"),
    "no_crc": ("emu", "--no-crc"),
    "emu_game": ("emu", "--emu-game"),
    "latency_frames": ("rig", "--latency-frames"),
}


def _console_kind(args: argparse.Namespace) -> str:
    """ "sim", "emu" or "rig" from the options; SystemExit when they name two consoles or an
    option of another console."""
    if args.emu is not None and (args.port or args.capture or args.sim):
        raise SystemExit("hil run: --emu is its own console; leave out --sim, --port, --capture")
    if args.sim and (args.port or args.capture):
        raise SystemExit("hil run: --sim is its own console; leave out --port and --capture")
    if args.capture and not args.port:
        raise SystemExit("hil run: --capture is the real rig's: add --port (the controller)")
    console = "emu" if args.emu is not None else "rig" if args.port else "sim"
    for opt, (kind, flag) in _ONLY_FOR.items():
        given = getattr(args, opt)
        if given not in (None, False) and kind != console:
            raise SystemExit(f"hil run: {flag} is for the {kind} console, not the {console}")
    if args.capture_seed is not None and console == "rig":
        raise SystemExit("hil run: --capture-seed is for the simulated capture (sim, --emu)")
    return console


def _versus(
    args: argparse.Namespace, levels: list[LevelPlan], console: str
) -> VersusRequest | None:
    """--versus and its options (SystemExit: one line, for one given without it, or for a
    simulated player 1's option on the rig)."""
    from hil.play import VersusRequest

    given = [
        f
        for f, v in (("--p1-level", args.p1_level), ("--p1-speed", args.p1_speed))
        if v is not None
    ]
    if args.matches != 1:
        given.append("--matches")
    if args.strength is not None:
        given.append("--strength")
    if args.p1_wait is not None:
        given.append("--p1-wait")
    if args.p1 is not None:
        given.append("--p1")
    if args.both:
        given.append("--both")
    if args.port2_only:
        given.append("--port2-only")
    if not args.versus:
        if args.policy == "search-attack":
            given.append("--policy search-attack")
        if given:
            raise SystemExit(f"hil run: {given[0]} is for --versus")
        return None
    if args.policy == "beam":
        raise SystemExit("hil run: --policy beam is for one player (a match's pills are shared)")
    if args.levels or args.max_levels is not None:
        raise SystemExit("hil run: --versus plays one level: give --level and --speed")
    if args.both and (args.p1 is not None or args.p1_wait is not None):
        raise SystemExit(
            f"hil run: {'--p1' if args.p1 is not None else '--p1-wait'} is the scripted player "
            "1's; with --both the bot plays player 1"
        )
    if console == "rig":
        ours = ["--matches", "--strength", "--both", "--port2-only"]
        if args.both:
            ours += ["--p1-level", "--p1-speed"]
        scripted = [f for f in given if f not in ours]
        if scripted:
            raise SystemExit(
                f"hil run: {scripted[0]} is the simulated player 1's; on the rig player 1 is "
                "the person on port 1 (its level and speed are read off the options screen)"
            )
    lp = levels[0]
    return VersusRequest(
        level1=lp.level if args.p1_level is None else args.p1_level,
        speed1=lp.speed if args.p1_speed is None else args.p1_speed,
        p1=args.p1 or "greedy",
        matches=args.matches,
        strength=5 if args.strength is None else args.strength,
        p1_wait=args.p1_wait or 0,
        both=args.both,
    )


def _check_outputs_and_port(args: argparse.Namespace) -> None:
    """--log and --record writable, --port a serial device; SystemExit (one line) if not."""
    if args.log:
        common.check_out_file(args.log, "--log")
    if args.record:
        from hil.loop.recording import RecordingError, check_target

        try:
            check_target(args.record, args.overwrite)
        except RecordingError as e:
            raise SystemExit(f"hil run: --record {e}") from None
    if args.port:
        from hil.link.link import LinkError, check_port

        try:
            check_port(args.port)
        except LinkError as e:
            raise SystemExit(f"hil run: --port {e}") from None


def _run_request(args: argparse.Namespace) -> RunRequest:
    """hil run's command line as a checked hil.play.RunRequest: anything wrong is one line and
    exit 2 (SystemExit) before any work starts (docs/RUN.md, "Bad input")."""
    from pathlib import Path

    from hil.loop.runtime import pick_policy, pick_reader
    from hil.play import RunError, RunRequest, naming_rom

    console = _console_kind(args)
    levels = _levels(args)
    versus = _versus(args, levels, console)
    if versus is not None:
        levels = levels[:1] * (5 * args.matches)  # each round is a level: at most 5 a match
    _check_outputs_and_port(args)
    rom = None
    if args.emu is not None:
        rom = Path(args.emu)
        if rom.is_dir():
            raise SystemExit(f"hil run: --emu {rom} is a directory, not a ROM file")
        if not rom.is_file():
            raise SystemExit(f"hil run: --emu {rom}: no such file")
    profile = common.load_profile(args.profile, "hil run")
    game = args.emu_game or "drmario"
    if rom is not None and game == "drmario":
        from engine import RomError

        # Named once, for the run and its recording: hil replay then reads an --emu recording
        # with the model prepared for the ROM, as the run did.
        try:
            profile = naming_rom(profile, rom, verify_crc=not args.no_crc)
        except RomError as e:
            raise SystemExit(f"hil run: {common.rom_message(e, no_crc=True)}") from None
        except OSError as e:
            raise SystemExit(f"hil run: --emu {rom}: {e.strerror or e}") from None
    try:
        reader = pick_reader(args.reader, sim=console != "rig")
        if versus is not None and console == "sim" and args.reader == "auto" and args.model is None:
            reader = "auto"  # hil.play.run: the console's truth (no shipped 2P model yet)
        policy = pick_policy(args.policy)
    except ValueError as e:
        raise SystemExit(f"hil run: {e}") from None
    request = RunRequest(
        console,
        levels,
        profile,
        lockstep=bool(args.fast),
        reader=reader,
        policy=policy,
        taps_only=args.planner == "taps",
        ponder=not args.no_ponder,
        max_frames=args.frames,
        model=args.model,
        faults=list(args.fault),
        capture_seed=args.capture_seed or 0,
        firmware=Path(args.firmware) if args.firmware else None,
        seeds=args.seed or [0x8988],
        console_seed=args.console_seed or 0,
        rom=rom,
        game=game,
        verify_crc=not args.no_crc,
        port=args.port,
        capture=args.capture,
        latency_frames=args.latency_frames,
        versus=versus,
    )
    try:
        request.check()
    except RunError as e:
        raise SystemExit(f"hil run: {e}") from None
    return request


def _recorder(args: argparse.Namespace, req: RunRequest):
    """``--record DIR``: a hil.loop.recording.RunRecorder (opens its files on the first frame)."""
    if not args.record:
        return None
    from hil.loop.recording import RecordingError, RunRecorder

    sim = req.console == "sim"
    meta = {
        "producer": "hil run",
        "console": {"sim": "simulated"}.get(req.console, req.console),
        "reader": req.reader,
        "policy": req.policy,
        "planner": args.planner,
        "levels": [[lp.level, lp.speed] for lp in req.levels],
        "seeds": req.seeds if sim else None,
        "capture_seed": req.capture_seed if req.console != "rig" else None,
        "console_seed": req.console_seed if sim else None,
        "fast": req.lockstep,
        "profile_name": req.profile.name,
        # the board model the run was told to read with (None: the choice by the profile's
        # ROM); hil replay reads with the same file
        "model": str(req.model.resolve()) if req.model is not None else None,
    }
    try:
        return RunRecorder(args.record, req.profile, args.record_codec, meta, args.overwrite)
    except RecordingError as e:
        raise SystemExit(f"hil run: --record {e}") from None


class _Signals:
    """SIGTERM and SIGHUP end ``hil run`` as Ctrl-C does (KeyboardInterrupt: the runtime
    stops, sends CLEAR, prints its summary; the recording is closed). A signal that arrives
    while a frame is being recorded waits for the frame; a second signal is not raised again
    (the shutdown finishes). ``signum`` is the first signal, None if none came."""

    def __init__(self) -> None:
        import signal

        self.signum: int | None = None
        self.busy = lambda: False
        self._old = {}
        for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None:
                self._old[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: object) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        if self.busy():
            return  # raised by check() once the frame is written
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raises the KeyboardInterrupt a signal deferred while a frame was written."""
        if self.signum is not None and not getattr(self, "_raised", False):
            self._raised = True
            raise KeyboardInterrupt

    def restore(self) -> None:
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)


def _cmd_run(args: argparse.Namespace) -> int:
    """Play: the closed loop against the simulated console (default), the emulator (--emu) or
    the real rig (--port): one path for all (hil.play.run)."""
    from engine import RomError
    from hil.consoles.emu import EmuError
    from hil.loop.view import make_view
    from hil.play import RunError, run

    req = _run_request(args)
    recorder = _recorder(args, req)
    signals = _Signals()
    hook = None
    if recorder is not None:
        signals.busy = lambda: recorder.busy

        def hook(rt, frame):
            recorder(rt, frame)
            signals.check()

    view_kind = args.view
    if view_kind == "auto":
        view_kind = "none" if req.lockstep else "window"
    view, close_view = make_view(view_kind)
    try:
        summary, _ = run(req, log_path=args.log, view=view, on_frame=hook)
    except FileNotFoundError as e:
        raise SystemExit(
            f"hil run: {e.filename}: no such file" if e.filename else f"hil run: {e}"
        ) from None
    except (RunError, RomError, EmuError, ValueError) as e:
        raise SystemExit(f"hil run: {common.rom_message(e, no_crc=True)}") from None
    except OSError as e:
        raise SystemExit(f"hil run: {e.strerror or e}") from None
    finally:
        close_view()
        if recorder is not None:
            recorder.close()
        signals.restore()
    stopped = ""
    if signals.signum is not None:
        import signal

        stopped = f"stopped by {signal.Signals(signals.signum).name}; "
    recording = f"; recording in {args.record}" if recorder is not None and recorder.writer else ""
    code = _print_summary(summary, stopped, recording)
    return 128 + signals.signum if signals.signum is not None else code


def _print_summary(summary: dict, stopped: str = "", tail: str = "") -> int:
    """hil run's end: the headline on stderr (every fault the summary counts), the summary (as
    logged) as JSON on stdout; the exit status: 0 every level asked for was played and
    cleared (``--versus``: every match asked for was played to its end, won or lost), 1
    otherwise, 2 a level that could not start or a controller that cannot work
    (``link_fatal``: another protocol version)."""
    import json

    if "versus" in summary:
        vs = summary["versus"]
        head = (
            f"{vs['matches']}/{vs['matches_asked']} matches played ({vs['matches_won']} won), "
            f"rounds {vs['rounds_won']}-{vs['rounds_lost']} of {vs['rounds']}, "
            f"{vs['attacks_seen']} attacks received"
        )
        done = vs["matches"] >= vs["matches_asked"]
    else:
        asked = summary.get("levels_asked", summary["levels_played"])
        unplayed = max(0, asked - summary["levels_played"])
        head = f"{summary['levels_cleared']}/{asked} levels cleared" + (
            f" ({unplayed} not played)" if unplayed else ""
        )
        done = summary["levels_cleared"] == asked > 0
    print(
        f"hil run: {stopped}{head}, {summary['console_frames']} frames, "
        f"{summary['desyncs']} desyncs, "
        f"{summary['late_schedules']} late schedules, {summary['underruns']} underruns, "
        f"{summary['watchdog_trips']} watchdog trips, {summary['timing_slips']} timing slips, "
        f"{summary['missed_decisions']} missed decisions, peak RSS {summary['peak_rss_mb']} MB"
        + tail,
        file=sys.stderr,
    )
    print(json.dumps(summary, indent=1))
    if summary.get("cannot_start"):
        return 2  # the level asked for could not be started (said in one line)
    if summary.get("link_fatal"):
        print(f"hil run: {summary['link_fatal']}", file=sys.stderr)
        return 2  # the controller cannot work (another protocol version): retrying won't mend
    return 0 if done else 1
