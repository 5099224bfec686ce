"""The ``hil`` command line: entry point of the bridge (see README.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `hil demo` and `--help` stay light
    from calibration import Profile
    from hil.sim import SimSettings


def _cmd_demo(args: argparse.Namespace) -> int:
    """Replay the game's attract-mode demo in the engine and print what happens."""
    from hil.demo import run_demo

    return run_demo(frames=args.frames, out=sys.stdout)


def _sim_settings(args: argparse.Namespace) -> SimSettings:
    from hil.sim import SimSettings

    return SimSettings(
        level=args.level,
        speed=args.speed,
        seed=args.seed,
        player_seed=args.player_seed,
        taps_only=args.taps_only,
    )


def _load_profile(name: str) -> Profile:
    from calibration import Profile, ProfileError

    try:
        return Profile.load(name)
    except (FileNotFoundError, ProfileError) as e:
        raise SystemExit(f"hil sim: {e}") from None


def _cmd_sim_record(args: argparse.Namespace) -> int:
    """Play a simulated game through a capture profile and write a recording."""
    from hil.recording import RecordingError
    from hil.sim import record

    profile = _load_profile(args.profile)
    try:
        count = record(
            _sim_settings(args),
            profile,
            frames=args.frames,
            out=args.out,
            codec=args.codec,
            capture_seed=args.capture_seed,
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
    from hil.sim import contact_sheet, has_display, play_to, show_live

    names = args.profile or builtin_profiles()
    profiles = [_load_profile(n) for n in names]
    settings = _sim_settings(args)
    if args.png is None and has_display():
        show_live(settings, profiles[0], args.frames, render=None)
        return 0
    png = args.png or "capture_contact_sheet.png"
    try:
        frame, previous = play_to(settings, args.frame)
    except ValueError as e:
        raise SystemExit(f"hil sim show: {e}") from None
    title = (
        f"hil sim show: level {settings.level}, speed {settings.speed}, seed "
        f"0x{settings.seed:04X}, console frame {args.frame}, clean-room tiles"
    )
    path = contact_sheet(profiles, [frame, previous], png, title=title)
    print(f"contact sheet of {len(profiles)} profiles written to {path}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit a capture Profile (geometry and colour) from gameplay frames of a video or device."""
    from calibration.fit import FitError
    from hil.calibrate import calibrate

    base = _load_profile(args.base) if args.base else None
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
        )
    except (FitError, ValueError) as e:
        raise SystemExit(f"hil calibrate: {e}") from None
    g = result.profile.geometry
    align = result.details["geometry"]["alignment_correlation"]
    print(
        f"{out}: {g.width}x{g.height}, scale {g.scale_x:.4f} x {g.scale_y:.4f} capture px per NES "
        f"px, offset ({g.offset_x:.2f}, {g.offset_y:.2f}), crop t/b/l/r {g.crop_top}/"
        f"{g.crop_bottom}/{g.crop_left}/{g.crop_right}\n"
        f"geometry residual {result.geometry_residual_px:.3f} capture px, colour residual "
        f"{result.color_residual:.2f} code values, alignment correlation {align:.3f}\n"
        f"grid drawn over the first frame: {png}"
    )
    if align < 0.5:
        print(
            "warning: the level screen did not match the tiles well (correlation < 0.5): "
            "pass --rom with your ROM, or check the grid in the PNG"
        )
    return 0


def _print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def _add_game_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--level", type=int, default=10, help="level 0..24 (default 10)")
    p.add_argument("--speed", type=int, default=1, choices=[0, 1, 2], help="0 LOW, 1 MED, 2 HI")
    p.add_argument(
        "--seed", type=lambda s: int(s, 0), default=0x8988, help="16-bit RNG state (default 0x8988)"
    )
    p.add_argument("--player-seed", type=int, default=0, help="seed of the random placements")
    p.add_argument(
        "--taps-only", action="store_true", help="faster taps-only planning (docs/PLANNER.md)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hil",
        description=(
            "Dr. Mario bridge: plays NES Dr. Mario on a real console, a simulated console, "
            "an emulator or recorded captures."
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="replay the attract-mode demo in the engine")
    demo.add_argument("--frames", type=int, default=5700, help="frames to play (default 5700)")
    demo.set_defaults(func=_cmd_demo)

    sim = sub.add_parser("sim", help="the simulated console seen through a capture profile")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="SIM_COMMAND")
    sim.set_defaults(func=lambda _args: _print_help(sim))
    rec = sim_sub.add_parser(
        "record", help="play a game (random reachable placements) and write a recording"
    )
    _add_game_args(rec)
    rec.add_argument("--frames", type=int, default=1800, help="captured frames at most (1800)")
    rec.add_argument("--profile", default="ideal_720p_nearest", help="profile name or JSON file")
    rec.add_argument("--out", required=True, help="recording directory to write")
    rec.add_argument("--codec", choices=["ffv1", "mjpeg"], default="ffv1")
    rec.add_argument("--capture-seed", type=int, default=0, help="seed of noise and timing")
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
    show.add_argument("--frame", type=int, default=400, help="console frame of the sheet (400)")
    show.add_argument("--frames", type=int, default=3600, help="captured frames to show live")
    show.set_defaults(func=_cmd_sim_show)

    cal = sub.add_parser(
        "calibrate",
        help="fit a capture profile (geometry, colour) from gameplay frames",
        description=(
            "Fit the capture chain's geometry (NES picture and bottle grid: scale, offset, "
            "aspect, overscan crop) and colour from a few frames of a level being played; "
            "write the profile and a PNG with the fitted grid over a frame."
        ),
    )
    cal.add_argument(
        "--input",
        required=True,
        help="video file, `hil sim record` directory, or capture device (0, /dev/video0)",
    )
    cal.add_argument("--out", required=True, help="profile JSON to write")
    cal.add_argument("--png", help="grid picture to write (default: --out with .png)")
    cal.add_argument("--frames", type=int, default=8, help="frames to fit from (8)")
    cal.add_argument("--every", type=int, default=30, help="device: keep one frame in N (30)")
    cal.add_argument("--name", help="profile name (default: the --out file name)")
    cal.add_argument("--base", help="profile whose artifacts and timing to keep")
    cal.add_argument("--rom", help="your Dr. Mario ROM: align with its level screen")
    cal.set_defaults(func=_cmd_calibrate)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
