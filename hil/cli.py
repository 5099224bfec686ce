"""The ``hil`` command line: entry point of the bridge (see README.md)."""

from __future__ import annotations

import argparse
import sys


def _cmd_demo(args: argparse.Namespace) -> int:
    """Replay the game's attract-mode demo in the engine and print what happens."""
    from hil.demo import run_demo

    return run_demo(frames=args.frames, out=sys.stdout)


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
