"""engine.nes.Nes, the one cynes wrapper: the pad byte of a step is what that frame's NMI reads,
pictures are copies, frames are counted, states come back, RAM reads stay inside RAM. Run on
the project's own test ROM (hil.testrom: it shows and stores the byte each NMI read)."""

from __future__ import annotations

import numpy as np
import pytest

from engine import RomError
from engine.nes import Nes
from engine.ram import POWER_ON_BYTE
from hil import testrom


@pytest.fixture
def nes() -> Nes:
    return Nes.open(testrom.image())


def nmi_count(nes: Nes) -> int:
    return nes.ram(testrom.NMI_COUNT) | nes.ram(testrom.NMI_COUNT + 1) << 8


def test_the_mask_of_a_step_is_what_its_nmi_reads_and_draws(nes):
    rng = np.random.default_rng(3)
    for _ in range(10):  # power-on: the ROM turns NMI on
        nes.step(0, picture=False)
    checked = 0
    for m in rng.integers(1, 256, 150):
        before = nmi_count(nes)
        pic = nes.step(int(m))
        assert pic.dtype == np.uint8 and pic.shape == (240, 256, 3)
        if nmi_count(nes) == before:
            continue  # a frame with NMI off (testrom.LAG_EVERY): no read
        assert nes.ram(testrom.PAD) == int(m) == testrom.decode_boxes(pic)
        checked += 1
    assert checked > 140 and nes.frames == 160


def test_no_mask_keeps_the_previous_byte_and_pictures_are_copies(nes):
    for _ in range(10):
        nes.step(0, picture=False)
    first = nes.step(0x81)
    second = nes.step()
    assert nes.ram(testrom.PAD) == 0x81 == testrom.decode_boxes(second)
    assert not np.shares_memory(first, second)
    first[:] = 0
    assert testrom.decode_boxes(second) == 0x81
    assert nes.step(0x42, picture=False) is None and nes.ram(testrom.PAD) == 0x42


def test_a_saved_state_brings_back_the_machine_and_the_frame_count(nes):
    for _ in range(20):
        nes.step(0x10, picture=False)
    state, count = nes.save(), nmi_count(nes)
    for _ in range(5):
        nes.step(0x01, picture=False)
    assert nes.frames == 25 and nmi_count(nes) > count
    nes.load(state)
    assert nes.frames == 20 and nmi_count(nes) == count and nes.ram(testrom.PAD) == 0x10


def test_ram_reads_and_writes_stay_inside_ram(nes):
    nes.poke(0x0300, 0xA5)
    assert nes.ram(0x0300) == 0xA5 and nes.ram_block(0x02FF, 3)[1] == 0xA5
    assert nes.ram_block(0x0300, 2).dtype == np.uint8
    with pytest.raises(ValueError, match=r"\$0000-\$07FF"):
        nes.ram(0x2002)  # a PPU register: reading it would change it
    with pytest.raises(ValueError, match="outside"):
        nes.ram_block(0x07FF, 2)
    with pytest.raises(ValueError, match="cannot write"):
        nes.poke(0x0800, 1)
    assert not nes.crashed


def test_a_file_cynes_cannot_load_is_a_rom_error(tmp_path):
    with pytest.raises(RomError, match="missing.nes: the emulator cannot load it"):
        Nes.open(tmp_path / "missing.nes")


def test_an_uninitialised_power_on_byte_does_not_move_the_first_nmi(monkeypatch):
    """cynes leaves one byte of its power-on state uninitialised (engine.ram.POWER_ON_BYTE): a
    machine built on a heap that held other data may start with it set, and then its first NMI
    comes a frame late. open_nes clears it: such a machine counts the NMIs of a clean one."""
    import cynes

    from engine import ram

    path = str(testrom.image())

    def count(machine) -> int:
        for _ in range(30):
            machine.step(1)
        return machine[testrom.NMI_COUNT] | machine[testrom.NMI_COUNT + 1] << 8

    def machine(byte: int):
        m = cynes.NES(path)
        state = m.save()
        state[POWER_ON_BYTE] = byte  # 0: a fresh heap's; 0xAB: what a reused heap held
        m.load(state)
        return m

    clean = count(machine(0))
    assert count(machine(0xAB)) == clean - 1  # the byte moves the first NMI

    monkeypatch.setattr(cynes, "NES", lambda p, real=cynes.NES: _dirty(real(p)))
    assert count(ram.open_nes(path)) == clean


def _dirty(m):
    state = m.save()
    state[POWER_ON_BYTE] = 0xAB
    m.load(state)
    return m
