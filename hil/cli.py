"""The ``hil`` command line: entry point of the bridge (see README.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from hil.commands import calibrate as calibrate_command
from hil.commands import common
from hil.commands import run as run_command

if TYPE_CHECKING:  # imported where used: `hil demo` and `--help` stay light
    from hil.sim_record import Renderer, SimSettings

# `hil sim show`'s default sheet: from the ideal chain to the most degraded.
SHEET_ORDER = (
    "ideal_720p_nearest",
    "square_1080p_area",
    "hdmi_1080p_bilinear",
    "mjpeg_720p_q70",
    "composite_480p_combing",
)


def _cmd_demo(args: argparse.Namespace) -> int:
    """Replay the game's attract-mode demo in the engine and print what happens."""
    from hil.demo import run_demo

    return run_demo(frames=args.frames, out=sys.stdout)


def _sim_settings(args: argparse.Namespace) -> SimSettings:
    from hil.sim_record import SimSettings

    return SimSettings(
        level=args.level,
        speed=args.speed,
        seed=args.seed,
        player_seed=args.player_seed,
        taps_only=args.taps_only,
    )


def _renderer(args: argparse.Namespace) -> Renderer | None:
    """None (clean-room tiles) or the tiles of the user's own ROM file (--rom)."""
    if not args.rom:
        return None
    import functools

    import engine

    try:
        tiles = engine.TileSet.from_ines(args.rom)
    except (OSError, ValueError) as e:
        raise SystemExit(f"hil sim: --rom {common.rom_message(e)}") from None
    return functools.partial(engine.render_frame, tiles=tiles)


def _cmd_sim_record(args: argparse.Namespace) -> int:
    """Play a simulated game through a capture profile and write a recording."""
    from hil.loop.recording import RecordingError
    from hil.sim_record import record

    profile = common.load_profile(args.profile, "hil sim record")
    try:
        count = record(
            _sim_settings(args),
            profile,
            frames=args.frames,
            out=args.out,
            codec=args.codec,
            capture_seed=args.capture_seed,
            render=_renderer(args),
            overwrite=args.overwrite,
            progress=not args.quiet,
        )
    except (RecordingError, ValueError) as e:
        raise SystemExit(f"hil sim record: {e}") from None
    print(f"{count} captured frames ({profile.name}) written to {args.out}")
    return 0


def _cmd_sim_show(args: argparse.Namespace) -> int:
    """Show the simulated capture live, or write a PNG contact sheet of several profiles."""
    from calibration import builtin_profiles
    from hil.loop.view import has_display
    from hil.sim_record import contact_sheet, play_to, show_live

    shipped = builtin_profiles()
    default = [n for n in SHEET_ORDER if n in shipped] + [
        n for n in shipped if n not in SHEET_ORDER
    ]
    profiles = [common.load_profile(n) for n in args.profile or default]
    settings = _sim_settings(args)
    render = _renderer(args)
    if args.png is None and has_display():
        show_live(settings, profiles[0], args.frames, render=render)
        return 0
    png = args.png or "capture_contact_sheet.png"
    try:
        frame, previous = play_to(settings, args.frame, render=render)
    except ValueError as e:
        raise SystemExit(f"hil sim show: {e}") from None
    title = (
        f"hil sim show: level {settings.level}, speed {settings.speed}, seed "
        f"0x{settings.seed:04X}, console frame {args.frame}, "
        + ("tiles from the user's ROM file" if args.rom else "clean-room tiles")
    )
    path = contact_sheet(profiles, [frame, previous], png, title=title)
    print(f"contact sheet of {len(profiles)} profiles written to {path}")
    return 0


# hil run's options that only one console kind takes (None: not given).


def _cmd_prepare(args: argparse.Namespace) -> int:
    """Fit perception to the user's own ROM (perception.prepare)."""
    from perception.prepare import PrepareError, prepare, print_result

    args.argv = sys.argv[2:]
    try:
        result = prepare(args)
    except PrepareError as e:
        raise SystemExit(f"hil prepare: {e}") from None
    print_result(result)
    return 0 if result["summary"]["goals_met"] else 1


def _cmd_bench(args: argparse.Namespace) -> int:
    from hil.bench import run_from_args

    return run_from_args(args)


def _cmd_replay(args: argparse.Namespace) -> int:
    """Replay a recording or video: readings, events, decisions, an annotated video."""
    from hil.replay import main_replay

    return main_replay(
        args.video,
        out=args.out,
        profile_name=args.profile,
        reader_name=args.reader,
        policy_name=args.policy,
        level=args.level,
        speed=args.speed,
        taps_only=args.taps_only,
        max_frames=args.frames,
        quiet=args.quiet,
        model=args.model,
    )


def _cmd_emu_selftest(args: argparse.Namespace) -> int:
    """Prove the emulator path with the project's test ROM; print JSON."""
    from hil.consoles.emu_commands import print_json, selftest
    from hil.testrom import RomBuildError

    try:
        report = selftest(frames=args.frames, seed=args.seed, out_dir=args.build_dir)
    except (RomBuildError, ValueError) as e:
        raise SystemExit(f"hil emu selftest: {e}") from None
    print_json(report)
    bad = report["ram_mismatches"] + report["pixel_mismatches"] + report["late_schedules"]
    return 1 if bad else 0


def _cmd_link_check(args: argparse.Namespace) -> int:
    """Check a flashed controller: version, board, reset reason, latch rate."""
    from hil.link.link import Link, LinkError
    from hil.link.vdevice import EmulatedFirmware, EmulatorError

    if args.seconds <= 0:
        print("hil link check: --seconds must be positive", file=sys.stderr)
        return 2
    emu = None
    port = args.port
    try:
        if port == "emulated":  # the committed UF2 in rp2040js, NES at Dr. Mario's timing
            emu = EmulatedFirmware()
            port = emu.port
        with Link(port) as link:
            info = link.info()
            first = link.statuses[-1] if link.statuses else None
            link.poll(args.seconds)
            sts = list(link.statuses)
    except (LinkError, EmulatorError, OSError) as e:
        print(f"hil link check: {e}", file=sys.stderr)
        return 2
    finally:
        if emu is not None:
            emu.close()
    reasons = {0: "power-on", 1: "firmware watchdog (stuck firmware)", 2: "other"}
    print(f"port: {args.port}")
    print(
        f"firmware: {info.firmware_version} (protocol {p_version()}), board: {info.board}, "
        f"controller ports: {', '.join(map(str, info.ports)) or 'none'}"
    )
    print(
        f"reset reason: {reasons.get(info.reset_reason, info.reset_reason)}, boot {info.boot_count}"
    )
    sts = [s for s in sts if first is None or s.frame > first.frame]
    if len(sts) >= 2:
        dt_us = sts[-1].first_latch_us - sts[0].first_latch_us
        frames = sts[-1].frame - sts[0].frame
        latches = sum(s.latches for s in sts[1:])
        print(
            f"latch rate: {latches * 1e6 / dt_us:.1f}/s ({frames * 1e6 / dt_us:.2f} frames/s, "
            f"{latches / frames:.2f} latches per frame); latches lost: {info.latches_lost}"
        )
    else:
        print("latch rate: no latches (console off, not wired, or not reading the pad)")
    return 0


def p_version() -> int:
    from hil.link.protocol import PROTOCOL_VERSION

    return PROTOCOL_VERSION


def _cmd_emu_start(args: argparse.Namespace) -> int:
    """Start a level of the user's Dr. Mario ROM through the menus; print JSON."""
    from pathlib import Path

    from engine.ram import MUSIC
    from hil.consoles.emu import EmuError
    from hil.consoles.emu_commands import print_json, start_game

    if Path(args.rom).is_dir():
        raise SystemExit(f"hil emu start: {args.rom} is a directory, not a ROM file")
    try:
        report = start_game(
            args.rom,
            args.level,
            args.speed,
            MUSIC[args.music] if args.music else None,
            png=args.png,
            verify_crc=not args.no_crc,
        )
    except (EmuError, ValueError) as e:  # RomError is a ValueError
        msg = str(e).replace("verify_crc=False", "--no-crc")
        raise SystemExit(f"hil emu start: {msg}") from None
    print_json(report)
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with a bad command line said in one line (exit 2), not the usage block; its
    subcommands' parsers are of this class too (argparse's default parser_class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from hil import args as parse

    parser = _Parser(
        prog="hil",
        description=(
            "Dr. Mario bridge: plays NES Dr. Mario on a real console, a simulated console, "
            "an emulator or recorded captures."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="replay the attract-mode demo in the engine")
    demo.add_argument(
        "--frames", type=parse.integer(1, 10**7), default=5700, help="frames to play (default 5700)"
    )
    demo.set_defaults(func=_cmd_demo)

    _add_sim(sub)
    run_command.add_parser(sub)

    from hil.bench import add_arguments as bench_arguments

    bench = sub.add_parser(
        "bench",
        help="runtime latencies as JSON (lockstep sim)",
        description="Play a chain of levels on the simulated console in lockstep and print the "
        "runtime's latencies (capture to observation, spawn to wire) as JSON (docs/RUN.md).",
    )
    bench_arguments(bench)
    bench.set_defaults(func=_cmd_bench)

    calibrate_command.add_parser(sub)

    _add_replay(sub)
    _add_emu(sub)
    _add_link(sub)
    return parser


def _add_sim(sub: Any) -> None:
    """`hil sim record` and `hil sim show`."""
    from hil import args as parse

    sim = sub.add_parser("sim", help="the simulated console seen through a capture profile")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    sim.set_defaults(func=lambda _args: common.print_help(sim))
    rec = sim_sub.add_parser(
        "record", help="play a game (random reachable placements) and write a recording"
    )
    common.add_game_args(rec)
    rec.add_argument(
        "--frames",
        type=parse.integer(1, 10**7),
        default=1800,
        help="captured frames at most (1800)",
    )
    rec.add_argument("--profile", default="ideal_720p_nearest", help="profile name or JSON file")
    rec.add_argument("--out", required=True, help="recording directory to write")
    rec.add_argument(
        "--codec",
        choices=["ffv1", "mpeg4", "mjpeg"],
        default="ffv1",
        help="video codec: ffv1 (lossless, default), mpeg4 or mjpeg (smaller, lossy)",
    )
    rec.add_argument(
        "--capture-seed",
        type=parse.integer(0, 2**32 - 1),
        default=0,
        help="seed of noise and timing",
    )
    rec.add_argument("--overwrite", action="store_true", help="replace a recording in --out")
    rec.add_argument("--quiet", action="store_true", help="no progress bar")
    rec.set_defaults(func=_cmd_sim_record)
    show = sim_sub.add_parser(
        "show", help="show the capture live, or write a PNG contact sheet (no display / --png)"
    )
    common.add_game_args(show)
    show.add_argument(
        "--profile", action="append", help="profile name or file (repeat; default: all shipped)"
    )
    show.add_argument("--png", help="write the contact sheet here instead of opening a window")
    show.add_argument(
        "--frame",
        type=parse.integer(0, 10**7),
        default=400,
        help="console frame of the sheet (400)",
    )
    show.add_argument(
        "--frames", type=parse.integer(1, 10**7), default=3600, help="captured frames to show live"
    )
    show.set_defaults(func=_cmd_sim_show)


def _add_replay(sub: Any) -> None:
    """`hil replay` and `hil prepare`."""
    from hil import args as parse

    rp = sub.add_parser(
        "replay",
        help="replay a recording or video: board readings, events, decisions, annotated video",
    )
    rp.add_argument("video", help="recording directory (hil sim record) or video file")
    rp.add_argument(
        "--profile",
        help="capture profile name or JSON file (default: the recording's; a plain video "
        "needs one: hil calibrate --input VIDEO --out profile.json fits it)",
    )
    rp.add_argument("--out", help="output directory (default: VIDEO_replay beside it)")
    rp.add_argument(
        "--reader",
        choices=["auto", "perception", "truth"],
        default="auto",
        help="auto/perception: perception's ONNX board reader on the pixels (compared with the "
        "truth when the recording has it); truth: the recording's ground-truth sidecar",
    )
    rp.add_argument(
        "--policy",
        choices=["auto", "onnx", "search", "heuristic", "deepest"],
        default="auto",
        help="auto/onnx: the ONNX placement policy (policy/models/policy.onnx); search, "
        "heuristic: hil run's; deepest: the deepest reachable placement (baseline)",
    )
    rp.add_argument(
        "--level", type=parse.integer(0, 24), help="level 0..24 (default: the recording's)"
    )
    rp.add_argument("--speed", type=int, choices=[0, 1, 2], help="default: the recording's")
    rp.add_argument("--taps-only", action="store_true", help="faster taps-only planning")
    rp.add_argument(
        "--frames", type=parse.integer(1, 10**8), help="replay at most this many frames"
    )
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.add_argument("--model", help=common.MODEL_HELP)

    from perception.prepare import EXIT_STATUS
    from perception.prepare import add_arguments as prepare_arguments

    prep = sub.add_parser(
        "prepare",
        help="fit perception to your own ROM's graphics (trains; needs the train extra)",
        description="Fine-tune the board model on renders drawn with your ROM's tiles, "
        "validate it on held-out renders and store it (by the ROM's CRC-32) in your data "
        "directory, where hil run / replay / calibrate find it.",
        epilog=EXIT_STATUS,
    )
    prepare_arguments(prep)
    prep.set_defaults(func=_cmd_prepare)
    rp.set_defaults(func=_cmd_replay)


def _add_emu(sub: Any) -> None:
    """`hil emu selftest` and `hil emu start`."""
    from hil import args as parse

    emu = sub.add_parser("emu", help="the emulator console (cynes): self-test, start a level")
    emu_sub = emu.add_subparsers(dest="emu_command", metavar="EMU_COMMAND")
    emu.set_defaults(func=lambda _args: common.print_help(emu))
    st = emu_sub.add_parser(
        "selftest", help="the project's test ROM proves every scheduled mask arrives (JSON)"
    )
    st.add_argument(
        "--frames", type=parse.integer(1, 10**7), default=600, help="console frames to check (600)"
    )
    st.add_argument(
        "--seed", type=parse.integer(0, 2**32 - 1), default=0, help="seed of the random masks"
    )
    st.add_argument(
        "--build-dir", help="build the test ROM from its source here first (needs cc65)"
    )
    st.set_defaults(func=_cmd_emu_selftest)
    es = emu_sub.add_parser(
        "start", help="your Dr. Mario ROM: menus to a level, engine parity of its board (JSON)"
    )
    es.add_argument("rom", help="your own Dr. Mario iNES file")
    es.add_argument(
        "--level", type=parse.integer(0, 20), default=10, help="level 0..20 (default 10)"
    )
    es.add_argument("--speed", type=int, default=1, choices=[0, 1, 2], help="0 LOW, 1 MED, 2 HI")
    es.add_argument("--music", choices=["fever", "chill", "off"], help="default: leave it")
    es.add_argument("--png", help="write the first frame of play here")
    es.add_argument("--no-crc", action="store_true", help="accept an unverified dump")
    es.set_defaults(func=_cmd_emu_start)


def _add_link(sub: Any) -> None:
    """`hil link check`."""
    from hil import args as parse

    lk = sub.add_parser("link", help="the controller (firmware): check a flashed Pico")
    lk_sub = lk.add_subparsers(dest="link_command", metavar="LINK_COMMAND")
    lk.set_defaults(func=lambda _args: common.print_help(lk))
    ck = lk_sub.add_parser(
        "check", help="print firmware version, board, reset reason and the console's latch rate"
    )
    ck.add_argument(
        "--port",
        required=True,
        help="serial port (/dev/ttyACM0, COM5), or 'emulated' for the committed UF2 in rp2040js",
    )
    ck.add_argument(
        "--seconds",
        type=parse.real(0.0, 3600.0, lo_open=True),
        default=1.0,
        help="how long to count latches (1)",
    )
    ck.set_defaults(func=_cmd_link_check)


class BadInput(SystemExit):
    """Bad input, already reported in one line on stderr: exit status 2. ``str()`` is the
    line (callers of :func:`main` can match it)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def main(argv: list[str] | None = None) -> int:
    """Runs a command. Bad input (a command's ``SystemExit("hil ...: reason")``): the one line
    on stderr, then :class:`BadInput` (exit status 2). Ctrl-C before a command has anything to
    report: one line, 130."""
    import os

    # OpenCV's and FFmpeg's own warnings ("can't open camera by index", "File ended
    # prematurely") would stand beside our one line; the user's setting wins.
    os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # AV_LOG_QUIET
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            raise BadInput(e.code) from None
        raise
    except KeyboardInterrupt:
        print(f"hil {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        import errno

        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EPIPE, errno.EIO):
            raise
        where = e.filename or "its output (stdout)"
        print(f"hil {args.command}: cannot write {where}: {e.strerror}", file=sys.stderr)
        try:  # the interpreter's last flush of stdout would fail again, with a traceback
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - open until the process ends
        except OSError:
            pass
        return 2
    except Exception as e:
        # Ctrl-C while a C extension initialises (onnxruntime) surfaces as an ImportError
        # caused by the KeyboardInterrupt: still an interruption, not a fault.
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, KeyboardInterrupt):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        print(f"hil {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
