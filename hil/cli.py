"""The ``hil`` command line: entry point of the bridge (see README.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:  # imported where used: `hil demo` and `--help` stay light
    from pathlib import Path

    from calibration import Profile
    from hil.loop.levels import LevelPlan
    from hil.play import RunRequest
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
        raise SystemExit(f"hil sim: --rom {_rom_message(e)}") from None
    return functools.partial(engine.render_frame, tiles=tiles)


def _rom_message(e: Exception, no_crc: bool = False) -> str:
    """A ROM reader's message in the command line's words: the ``--no-crc`` flag where the
    command has one (``no_crc``), else no hint."""
    if no_crc:
        return str(e).replace("verify_crc=False", "--no-crc")
    return str(e).replace("; pass verify_crc=False to use it anyway", "")


def _load_profile(name: str, cmd: str = "hil sim", option: str = "--profile") -> Profile:
    from calibration import Profile, ProfileError

    try:
        return Profile.load(name)
    except (OSError, ProfileError, ValueError) as e:  # ValueError: UnicodeDecodeError too
        raise SystemExit(f"{cmd}: {option} {name}: {e}") from None


def _cmd_sim_record(args: argparse.Namespace) -> int:
    """Play a simulated game through a capture profile and write a recording."""
    from hil.loop.recording import RecordingError
    from hil.sim_record import record

    profile = _load_profile(args.profile, "hil sim record")
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
    profiles = [_load_profile(n) for n in args.profile or default]
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


def _levels(args: argparse.Namespace) -> list[LevelPlan]:
    """--levels (hil.args.levels; an item without a speed takes --speed) or --level chained
    --max-levels times (the game's chain: level + 1 up to 24 at the same speed)."""
    from hil.loop.levels import LevelPlan

    if args.levels:
        if args.max_levels is not None:
            raise SystemExit("hil run: --levels and --max-levels: give one of them")
        return [LevelPlan(i.level, args.speed if i.speed is None else i.speed) for i in args.levels]
    return [LevelPlan(min(args.level + i, 24), args.speed) for i in range(args.max_levels or 1)]


# hil run's options that only one console kind takes (None: not given).
_ONLY_FOR = {
    "seed": ("sim", "--seed"),
    "console_seed": ("sim", "--console-seed"),
    "no_crc": ("emu", "--no-crc"),
    "emu_game": ("emu", "--emu-game"),
    "latency_frames": ("rig", "--latency-frames"),
}


def _run_request(args: argparse.Namespace) -> RunRequest:
    """hil run's command line as a checked hil.play.RunRequest: anything wrong is one line and
    exit 2 (SystemExit) before any work starts (docs/RUN.md, "Bad input")."""
    from pathlib import Path

    from hil.loop.runtime import pick_policy, pick_reader
    from hil.play import RunError, RunRequest, naming_rom

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
    levels = _levels(args)
    if args.log:
        _check_out_file(args.log, "--log")
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
    rom = None
    if args.emu is not None:
        rom = Path(args.emu)
        if rom.is_dir():
            raise SystemExit(f"hil run: --emu {rom} is a directory, not a ROM file")
        if not rom.is_file():
            raise SystemExit(f"hil run: --emu {rom}: no such file")
    profile = _load_profile(args.profile, "hil run")
    game = args.emu_game or "drmario"
    if rom is not None and game == "drmario":
        from engine import RomError

        # Named once, for the run and its recording: hil replay then reads an --emu recording
        # with the model prepared for the ROM, as the run did.
        try:
            profile = naming_rom(profile, rom, verify_crc=not args.no_crc)
        except RomError as e:
            raise SystemExit(f"hil run: {_rom_message(e, no_crc=True)}") from None
        except OSError as e:
            raise SystemExit(f"hil run: --emu {rom}: {e.strerror or e}") from None
    try:
        reader = pick_reader(args.reader, sim=console != "rig")
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
    )
    try:
        request.check()
    except RunError as e:
        raise SystemExit(f"hil run: {e}") from None
    return request


def _check_out_file(path: str, opt: str, command: str = "hil run") -> None:
    """A file to write (hil.args.out_file); SystemExit naming ``opt`` otherwise."""
    from hil.args import Bad, out_file

    try:
        out_file(path)
    except Bad as e:
        raise SystemExit(f"{command}: {opt} {e}") from None


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
        raise SystemExit(f"hil run: {_rom_message(e, no_crc=True)}") from None
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
    cleared, 1 otherwise, 2 a level that could not start or a controller that cannot work
    (``link_fatal``: another protocol version)."""
    import json

    asked = summary.get("levels_asked", summary["levels_played"])
    unplayed = max(0, asked - summary["levels_played"])
    print(
        f"hil run: {stopped}{summary['levels_cleared']}/{asked} levels cleared"
        + (f" ({unplayed} not played)" if unplayed else "")
        + f", {summary['console_frames']} frames, {summary['desyncs']} desyncs, "
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

    return 0 if summary["levels_cleared"] == asked > 0 else 1


def _model_line(command: str, model: str | None, profile: Profile) -> str:
    """The line that says which board model reads the captures (perception.store.choose_model);
    exit 2 with one line for a --model that is no file."""
    from perception.store import choose_model

    try:
        choice = choose_model(model, profile)
    except FileNotFoundError as e:
        raise SystemExit(f"{command}: {e}") from None
    return f"{command}: {choice.why}"


def _say_model(command: str, model: str | None, profile: Profile) -> None:
    """Print :func:`_model_line` on stderr."""
    print(_model_line(command, model, profile), file=sys.stderr)


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


def _cmd_calibrate(args: argparse.Namespace) -> int:
    """`hil calibrate latency`: press, watch the pill move, report the capture latency (and
    write it into a --profile file)."""
    import json
    from pathlib import Path

    if args.what != "latency":
        if args.input is None or args.out is None:
            raise SystemExit(
                "hil calibrate: say what to calibrate: `hil calibrate --input VIDEO_OR_DEVICE "
                "--out profile.json` fits a capture profile; `hil calibrate latency` measures "
                "the capture chain's latency"
            )
        return _cmd_calibrate_fit(args)
    from hil.latency import calibrate_latency
    from hil.loop.observation import make_reader
    from hil.loop.runtime import pick_reader

    sim = args.port is None
    profile = _load_profile(args.profile, "hil calibrate latency")
    try:
        kind = pick_reader(args.reader, sim=sim)
        if kind == "onnx":
            _say_model("hil calibrate latency", args.model, profile)
        reader = make_reader(kind, profile, args.model)
    except ValueError as e:
        raise SystemExit(f"hil calibrate latency: {e}") from None
    if sim:
        from hil.consoles.sim import SimConsole, SimLevel

        console = SimConsole(
            [SimLevel(args.level, args.speed, 0x8988)],
            profile,
            realtime=not args.fast,
            capture_seed=args.capture_seed,
            max_frames=60_000,
        )
        console.start()
        try:
            result = calibrate_latency(
                console,
                reader,
                presses=args.presses,
                capture_hz=profile.timing.capture_hz,
                say=lambda m: print(m, file=sys.stderr),
            )
        finally:
            console.close()
        result["profile_latency_frames"] = profile.timing.latency_frames
    else:
        from hil.consoles.rig import DeviceCapture, RigConsole

        if args.capture is None:
            raise SystemExit("hil calibrate latency: the real rig needs --capture and --port")
        dev: str | int = int(args.capture) if args.capture.isdigit() else args.capture
        source = DeviceCapture(dev, width=profile.geometry.width, height=profile.geometry.height)
        rig = RigConsole(source, args.port, 0.0, profile.timing.jitter_ms)
        try:
            result = calibrate_latency(rig, reader, presses=args.presses, say=print)
        finally:
            rig.close()
    if not args.no_write and Path(args.profile).is_file():
        result["profile_written"] = _write_latency(Path(args.profile), profile, result, sim)
    print(json.dumps(result, indent=1))
    return 0


def _write_latency(path: Path, profile: Profile, result: dict, sim: bool = False) -> str:
    """Write the measured latency and jitter into the profile file's timing section (``sim``:
    measured on the simulated console, which the line says: it is the profile's own model of
    the chain, not a rig's)."""
    from dataclasses import replace

    timing = replace(
        profile.timing,
        latency_frames=float(result["latency_frames"]),
        jitter_ms=float(result["jitter_ms"]),
    )
    profile.replace(timing=timing).save(path)
    print(
        f"hil calibrate latency: wrote timing.latency_frames {timing.latency_frames:g} and "
        f"timing.jitter_ms {timing.jitter_ms:g} into {path}"
        + (" (measured on the simulated console: --port measures the rig)" if sim else ""),
        file=sys.stderr,
    )
    return str(path)


def _cmd_replay(args: argparse.Namespace) -> int:
    """Replay a recording or video: readings, events, decisions, an annotated video."""
    from hil.loop.replay import main_replay

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
    print(f"firmware: {info.firmware_version} (protocol {p_version()}), board: {info.board}")
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


def _cmd_calibrate_fit(args: argparse.Namespace) -> int:
    """Fit a capture Profile (geometry and colour) from gameplay frames of a video or device."""
    from calibration.fit import FitError
    from hil.calibrate import calibrate

    base = _load_profile(args.base, "hil calibrate", "--base") if args.base else None
    for opt, path in (("--out", args.out), ("--png", args.png)):
        if path is not None:  # writable before any frame is read or fitted
            _check_out_file(path, opt, "hil calibrate")
    try:
        result, out, png = calibrate(
            args.input,
            args.out,
            png=args.png,
            count=args.frames,
            every=args.every,
            name=args.name,
            base=base,
            rom=args.rom,
            verify_crc=not args.no_crc,
        )
    except FileNotFoundError as e:
        raise SystemExit(f"hil calibrate: {e.filename or e}: no such file") from None
    except (FitError, ValueError, OSError) as e:
        raise SystemExit(f"hil calibrate: {e}") from None
    g = result.profile.geometry
    align = result.details["geometry"]["alignment_correlation"]
    print(
        f"{out}: {g.width}x{g.height}, scale {g.scale_x:.4f} x {g.scale_y:.4f} capture px per NES "
        f"px, offset ({g.offset_x:.2f}, {g.offset_y:.2f}), crop t/b/l/r {g.crop_top}/"
        f"{g.crop_bottom}/{g.crop_left}/{g.crop_right}\n"
        f"geometry residual {result.geometry_residual_px:.3f} capture px, colour residual "
        f"{result.color_residual:.2f} code values, alignment correlation {align:.3f}\n"
        f"grid drawn over the frame with the most detail: {png}"
        + (
            f"\nthe profile names ROM {result.profile.rom_crc32}: `hil prepare --rom "
            f"{args.rom} --profile {out}` fits perception to it"
            if result.profile.rom_crc32
            else ""
        )
    )
    if align < 0.5:
        print(
            "warning: the level screen did not match your ROM's tiles well (correlation < 0.5): "
            "check the grid in the PNG"
        )
    return 0


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def _add_game_args(p: argparse.ArgumentParser) -> None:
    from hil import args as parse

    p.add_argument(
        "--level", type=parse.integer(0, 24), default=10, help="level 0..24 (default 10)"
    )
    p.add_argument("--speed", type=int, default=1, choices=[0, 1, 2], help="0 LOW, 1 MED, 2 HI")
    p.add_argument(
        "--seed",
        type=parse.integer(0, parse.MAX_SEED),
        default=0x8988,
        help="16-bit RNG state (default 0x8988)",
    )
    p.add_argument(
        "--player-seed",
        type=parse.integer(0, 2**32 - 1),
        default=0,
        help="seed of the random placements",
    )
    p.add_argument(
        "--taps-only", action="store_true", help="faster taps-only planning (docs/PLANNER.md)"
    )
    p.add_argument(
        "--rom",
        help="draw with the tiles of your own Dr. Mario ROM (iNES) instead of the clean-room "
        "tiles; never commit or share such pictures",
    )


MODEL_HELP = (
    "board model (ONNX) to read captures with (default: the one hil prepare made for the "
    "profile's ROM, else the shipped clean-room model)"
)


class _Parser(argparse.ArgumentParser):
    """argparse with a bad command line said in one line (exit 2), not the usage block; its
    subcommands' parsers are of this class too (argparse's default parser_class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    from hil import args as parse
    from hil.link.vdevice import DEFAULT_UF2

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

    sim = sub.add_parser("sim", help="the simulated console seen through a capture profile")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    sim.set_defaults(func=lambda _args: _print_help(sim))
    rec = sim_sub.add_parser(
        "record", help="play a game (random reachable placements) and write a recording"
    )
    _add_game_args(rec)
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
    _add_game_args(show)
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
    run.add_argument(
        "--reader",
        choices=["auto", "onnx", "oracle"],
        default="auto",
        help="auto, onnx, or oracle (the simulated console's or --emu's ground truth)",
    )
    run.add_argument(
        "--policy",
        choices=["auto", "onnx", "search", "heuristic"],
        default="auto",
        help="auto, onnx, search (policy.search with the network as prior: slower, stronger; "
        "docs/RUN.md) or heuristic",
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
    run.add_argument("--model", type=parse.in_file, help=MODEL_HELP)
    run.set_defaults(func=_cmd_run)

    from hil.bench import add_arguments as bench_arguments

    bench = sub.add_parser(
        "bench",
        help="runtime latencies as JSON (lockstep sim)",
        description="Play a chain of levels on the simulated console in lockstep and print the "
        "runtime's latencies (capture to observation, spawn to wire) as JSON (docs/RUN.md).",
    )
    bench_arguments(bench)
    bench.set_defaults(func=_cmd_bench)

    cal = sub.add_parser(
        "calibrate",
        help="fit a capture profile (--input, --out) or measure latency (`calibrate latency`)",
        description=(
            "`hil calibrate --input VIDEO_OR_DEVICE --out profile.json`: fit the capture chain's "
            "geometry (NES picture and bottle grid: scale, offset, aspect, overscan crop) and "
            "colour from a few frames of a level being played; write the profile and a PNG with "
            "the fitted grid over a frame. `hil calibrate latency`: press a button, see the pill "
            "move, report the capture latency in frames."
        ),
    )
    cal.add_argument("what", nargs="?", choices=["latency"], help="latency: measure the latency")
    cal.add_argument("--port", help="controller port (the rig; without it: the simulated console)")
    cal.add_argument("--capture", help="capture device (the rig)")
    cal.add_argument("--profile", default="mjpeg_720p_q70", help="capture profile")
    cal.add_argument(
        "--presses", type=parse.integer(1, 1000), default=20, help="button presses to time (20)"
    )
    cal.add_argument(
        "--no-write",
        action="store_true",
        help="latency: only print; by default a --profile FILE gets the measured latency",
    )
    cal.add_argument(
        "--level", type=parse.integer(0, 24), default=0, help="latency: the level played (0)"
    )
    cal.add_argument(
        "--speed", type=int, default=0, choices=[0, 1, 2], help="latency: 0 LOW, 1 MED, 2 HI (0)"
    )
    cal.add_argument(
        "--reader", default="auto", help="latency: auto, oracle (sim only) or onnx (perception)"
    )
    cal.add_argument("--fast", action="store_true", help="sim: lockstep")
    cal.add_argument(
        "--capture-seed",
        type=parse.integer(0, 2**32 - 1),
        default=0,
        help="latency, sim: capture noise and timing seed",
    )
    cal.add_argument(
        "--input",
        help="video file, `hil sim record` directory, or capture device (0, /dev/video0)",
    )
    cal.add_argument("--out", help="profile JSON to write")
    cal.add_argument("--png", help="grid picture to write (default: --out with .png)")
    cal.add_argument(
        "--frames", type=parse.integer(1, 10_000), default=8, help="frames to fit from (8)"
    )
    cal.add_argument(
        "--every",
        type=parse.integer(1, 10_000),
        default=30,
        help="device: keep one frame in N (30)",
    )
    cal.add_argument("--name", help="profile name (default: the --out file name)")
    cal.add_argument("--base", help="profile whose artifacts and timing to keep")
    cal.add_argument("--rom", help="your Dr. Mario ROM: align with its level screen")
    cal.add_argument("--no-crc", action="store_true", help="accept a ROM of unknown CRC")
    cal.add_argument("--model", help=MODEL_HELP + " (latency)")
    cal.set_defaults(func=_cmd_calibrate)

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
        choices=["auto", "onnx", "deepest"],
        default="auto",
        help="auto/onnx: the ONNX placement policy (policy/models/policy.onnx); deepest: the "
        "deepest reachable placement (baseline)",
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
    rp.add_argument("--model", help=MODEL_HELP)

    from perception.prepare import add_arguments as prepare_arguments

    prep = sub.add_parser(
        "prepare",
        help="fit perception to your own ROM's graphics (trains; needs the train extra)",
        description="Fine-tune the board model on renders drawn with your ROM's tiles, "
        "validate it on held-out renders and store it (by the ROM's CRC-32) in your data "
        "directory, where hil run / replay / calibrate find it.",
    )
    prepare_arguments(prep)
    prep.set_defaults(func=_cmd_prepare)
    rp.set_defaults(func=_cmd_replay)

    emu = sub.add_parser("emu", help="the emulator console (cynes): self-test, start a level")
    emu_sub = emu.add_subparsers(dest="emu_command", metavar="EMU_COMMAND")
    emu.set_defaults(func=lambda _args: _print_help(emu))
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

    lk = sub.add_parser("link", help="the controller (firmware): check a flashed Pico")
    lk_sub = lk.add_subparsers(dest="link_command", metavar="LINK_COMMAND")
    lk.set_defaults(func=lambda _args: _print_help(lk))
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
    return parser


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
