"""What the ``hil`` commands share: the ROM and profile loaders, output-file checks, the model
line, the game options of ``hil sim``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from calibration import Profile


def rom_message(e: Exception, no_crc: bool = False) -> str:
    """A ROM reader's message in the command line's words: the ``--no-crc`` flag where the
    command has one (``no_crc``), else no hint."""
    if no_crc:
        return str(e).replace("verify_crc=False", "--no-crc")
    return str(e).replace("; pass verify_crc=False to use it anyway", "")


def load_profile(name: str, cmd: str = "hil sim", option: str = "--profile") -> Profile:
    from calibration import Profile, ProfileError

    try:
        return Profile.load(name)
    except (OSError, ProfileError, ValueError) as e:  # ValueError: UnicodeDecodeError too
        raise SystemExit(f"{cmd}: {option} {name}: {e}") from None


def check_out_file(path: str, opt: str, command: str = "hil run") -> None:
    """A file to write (hil.args.out_file); SystemExit naming ``opt`` otherwise."""
    from hil.args import Bad, out_file

    try:
        out_file(path)
    except Bad as e:
        raise SystemExit(f"{command}: {opt} {e}") from None


def model_line(command: str, model: str | None, profile: Profile) -> str:
    """The line that says which board model reads the captures (perception.store.choose_model);
    exit 2 with one line for a --model that is no file."""
    from perception.store import choose_model

    try:
        choice = choose_model(model, profile)
    except FileNotFoundError as e:
        raise SystemExit(f"{command}: {e}") from None
    return f"{command}: {choice.why}"


def say_model(command: str, model: str | None, profile: Profile) -> None:
    """Print :func:`model_line` on stderr."""
    print(model_line(command, model, profile), file=sys.stderr)


def print_help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def add_game_args(p: argparse.ArgumentParser) -> None:
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
