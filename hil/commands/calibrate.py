"""``hil calibrate``: fit a capture profile from a video or device, or measure the capture
latency (``hil calibrate latency``; docs/CALIBRATION.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from hil.commands import common

if TYPE_CHECKING:
    from pathlib import Path

    from calibration import Profile


def add_parser(sub: Any) -> None:
    """The ``hil calibrate`` subcommand on ``sub`` (argparse subparsers)."""
    from hil import args as parse

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
    cal.add_argument("--model", help=common.MODEL_HELP + " (latency)")
    cal.set_defaults(func=_cmd_calibrate)


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
    profile = common.load_profile(args.profile, "hil calibrate latency")
    try:
        kind = pick_reader(args.reader, sim=sim)
        if kind == "onnx":
            common.say_model("hil calibrate latency", args.model, profile)
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


def _cmd_calibrate_fit(args: argparse.Namespace) -> int:
    """Fit a capture Profile (geometry and colour) from gameplay frames of a video or device."""
    from calibration.fit import FitError
    from hil.calibrate import calibrate

    base = common.load_profile(args.base, "hil calibrate", "--base") if args.base else None
    for opt, path in (("--out", args.out), ("--png", args.png)):
        if path is not None:  # writable before any frame is read or fitted
            common.check_out_file(path, opt, "hil calibrate")
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
