"""The user's ROM in cynes, stepped one video frame at a time: the one wrapper every tool that
runs the real game uses (hil.consoles.emu, perception.screens_rom, perception.realcheck,
tools/menu_check.py, tools/level_flow_check.py).

How cynes maps onto frames (docs/EMU.md): ``cynes.NES.step(1)`` runs the CPU until the PPU
starts the next vblank (scanline 241, dot 1); the NMI raised there runs at the start of the
following step, so one step holds one NMI and the picture rendered after it. cynes takes the
pad state once per step (``NES.controller``): every controller read in that step sees the byte
set before it, so :meth:`Nes.step`'s ``mask`` is what the game reads in that video frame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload

import numpy as np
import numpy.typing as npt

from engine.ram import open_nes

U8 = npt.NDArray[np.uint8]
RAM_SIZE = 0x800  # the console's 2 KiB of work RAM ($0000-$07FF)


class Machine(Protocol):
    """The part of ``cynes.NES`` :class:`Nes` uses (tests may pass a stand-in)."""

    controller: int

    def step(self, frames: int = 1) -> U8: ...

    def __getitem__(self, address: int) -> int: ...

    def __setitem__(self, address: int, value: int) -> None: ...

    def reset(self) -> None: ...

    def save(self) -> Any: ...

    def load(self, state: Any) -> None: ...

    @property
    def has_crashed(self) -> bool: ...


@dataclass(frozen=True)
class NesState:
    """A saved machine (cynes' state array) and the frame count it was saved at."""

    frames: int
    machine: Any


class Nes:
    """A cynes machine stepped one video frame at a time, player 1's pad byte set per frame.

    ``machine``: a ``cynes.NES`` (or a stand-in with its interface, :class:`Machine`); most
    callers use :meth:`open`. ``frames`` counts the video frames stepped through :meth:`step`
    (0 at construction; :meth:`load` puts back the count a state was saved at).
    """

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.frames = 0

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Nes:
        """The ROM at ``path`` in cynes (engine.ram.open_nes). Raises engine.RomError naming
        the file when the emulator cannot load it (a missing file, a mapper cynes lacks)."""
        return cls(open_nes(path))

    @overload
    def step(self, mask: int | None = None, *, picture: Literal[True] = True) -> U8: ...

    @overload
    def step(self, mask: int | None = None, *, picture: Literal[False]) -> None: ...

    def step(self, mask: int | None = None, *, picture: bool = True) -> U8 | None:
        """One video frame (the module docstring) with ``mask`` on player 1's pad (the game's
        bit order, A $80 ... Right $01; bits 8-15: player 2's pad, cynes' controller word) for
        every controller read in it; None keeps the byte
        the previous step used (0 before the first). Returns the picture rendered after the
        frame's NMI, RGB uint8 [240, 256, 3], a copy (cynes reuses its buffer), or None when
        ``picture`` is False. Raises nothing when the CPU crashes: see :attr:`crashed`."""
        if mask is not None:
            self.machine.controller = mask
        shown = self.machine.step(1)
        self.frames += 1
        return np.array(shown, dtype=np.uint8, copy=True) if picture else None

    @property
    def crashed(self) -> bool:
        """Whether the emulated CPU has hit an invalid opcode (cynes ``has_crashed``)."""
        return bool(self.machine.has_crashed)

    def ram(self, address: int) -> int:
        """One byte of the console's 2 KiB RAM ($0000-$07FF). Raises ValueError outside it
        (reading PPU/APU registers through the emulator would change their state)."""
        if not 0 <= int(address) < RAM_SIZE:
            raise ValueError(f"RAM address must be in $0000-$07FF, got ${int(address):X}")
        return int(self.machine[int(address)])

    def ram_block(self, address: int, size: int) -> U8:
        """``size`` bytes of RAM from ``address``: uint8 [size]. Raises ValueError for a block
        outside $0000-$07FF."""
        if size < 0 or not 0 <= address <= address + size - 1 < RAM_SIZE:
            raise ValueError(f"RAM block ${address:X}+{size} is outside $0000-$07FF")
        m = self.machine
        return np.fromiter((m[a] for a in range(address, address + size)), np.uint8, size)

    def poke(self, address: int, value: int) -> None:
        """Writes one byte of RAM ($0000-$07FF; ValueError outside it or for a value outside
        0..255), as a cheat would."""
        if not 0 <= int(address) < RAM_SIZE or not 0 <= int(value) <= 0xFF:
            raise ValueError(f"cannot write {value} to ${int(address):X} (RAM $0000-$07FF)")
        self.machine[int(address)] = int(value)

    def reset(self) -> None:
        """The console's RESET button (RAM is kept, as on the console; ``frames`` goes on)."""
        self.machine.reset()

    def save(self) -> NesState:
        """The machine's state and frame count, for :meth:`load`."""
        return NesState(self.frames, self.machine.save())

    def load(self, state: NesState) -> None:
        """Puts back a state from :meth:`save` (the machine and ``frames``)."""
        self.machine.load(state.machine)
        self.frames = state.frames
