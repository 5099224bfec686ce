"""The PIO program firmware/src/nes4021.pio, assembled at test time (adafruit-circuitpython-
pioasm) and run in rp2040-pio-emulator, read by a simulated NES at real timings.

The RP2040's CPU side is the firmware core itself (``hil.link.vdevice.VirtualDevice``: the C core
behind a pty, fed by ``hil.link.Link``): it is told of each latch the program reports in its
RX FIFO and puts each frame's word into the TX FIFO when the latch window closes, as
firmware/src/main.c does. So these tests run host schedule -> core -> PIO -> console reads.

Console timing (NTSC 2A03, 1.789773 MHz, 558.7 ns a cycle), from Dr. Mario's
get_CTRL_inputs (disassembly, getInputs [$B7E1]): ``stx $4016`` (1), ``dex``, ``stx $4016``
(0): LATCH high 6 cycles; ``ldx #8``, then a 41-cycle loop whose ``lda $4016`` read cycle
pulls CLOCK low for one cycle; the second read's latch follows ~99 cycles after the last
clock; frames are 29780.5 cycles (16.639 ms) apart. The CPU latches D0 at the end of the
read cycle, just before CLOCK rises; the console inverts the line (low = 1 = pressed) and
assembles bits with ``lsr a / rol``, first bit into bit 7 (A = $80).

The emulator counts state-machine cycles (8 ns at 125 MHz) and has no clock divider; its
``wait pin``/``in pins`` use absolute GPIO numbers, so CLOCK is GPIO 0 (= IN base) here.
Stretches where every input is steady and the program sits in a polling loop are skipped
by advancing the cycle counter (the loop's state repeats exactly); everything within 64
cycles of an input edge is emulated instruction by instruction.
"""

import bisect
import re
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from adafruit_pioasm import Program
from pioemu import State, emulate

from hil.link.link import Link
from hil.link.vdevice import VirtualDevice

PIO_PATH = Path(__file__).resolve().parents[1] / "firmware" / "src" / "nes4021.pio"
CLOCK, LATCH, DATA = 0, 1, 2  # GPIO numbers in the emulator (CLOCK must be IN base = 0)
CPU_NS = 1e9 / 1_789_773  # NTSC 2A03 cycle, ns
FRAME_CPU = 29780.5  # CPU cycles per NTSC frame (16.639 ms)
GUARD = 64  # SM cycles emulated in full before any input edge


def load_program() -> tuple[Program, int]:
    """Assembles the pioasm part of the .pio file (the ``% c-sdk`` block is C for the SDK's
    pioasm) and reads the state machine clock the program's delays assume."""
    text = PIO_PATH.read_text()
    sdk = re.search(r"^% c-sdk \{$(.*?)^%\}$", text, re.S | re.M)
    assert sdk, "nes4021.pio has no c-sdk block"
    hz = re.search(r"#define NES4021_SM_HZ (\d+)u", sdk.group(1))
    assert hz, "NES4021_SM_HZ not defined in the c-sdk block"
    return Program(text[: sdk.start()]), int(hz.group(1))


PROGRAM, SM_HZ = load_program()
SM_NS = 1e9 / SM_HZ


def cyc(ns: float) -> int:
    return round(ns / SM_NS)


@dataclass(frozen=True)
class ReadTiming:
    """One controller read, in CPU cycles (see the module docstring)."""

    latch: float = 6  # LATCH high
    first_clock: float = 5  # LATCH fall to the start of the first $4016 read cycle
    period: float = 41  # read cycle to read cycle
    low: float = 1  # CLOCK low (the read cycle)
    gap: float = 99  # last read cycle to the next read's latch
    bits: int = 8


DR_MARIO = ReadTiming()
TIGHT = ReadTiming(period=16, gap=40)  # lda $4016 / lsr a / rol zp / dex / bne: ~9 us
UNROLLED = ReadTiming(period=4, gap=20)  # back-to-back lda $4016: 2.2 us, the fastest


class Intervals:
    """Sorted, disjoint [start, end) intervals in SM cycles: where a line is 'active'."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self.starts, start)
        assert (i == 0 or self.ends[i - 1] <= start) and (
            i == len(self.starts) or end <= self.starts[i]
        ), "overlapping pulses"
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def active(self, t: int) -> bool:
        i = bisect.bisect_right(self.starts, t) - 1
        return i >= 0 and t < self.ends[i]

    def next_edge(self, t: int) -> int:
        """First start or end strictly after t (a large number if none)."""
        i = bisect.bisect_right(self.starts, t)
        nxt = self.starts[i] if i < len(self.starts) else 1 << 62
        j = bisect.bisect_right(self.ends, t)
        return min(nxt, self.ends[j] if j < len(self.ends) else 1 << 62)


@dataclass
class Read:
    """What the console did on one read and what it saw: D0 per clock (1 = wire low)."""

    latch_at: int
    samples: list[int]
    bits: list[int] = field(default_factory=list)

    @property
    def byte(self) -> int:
        """The first eight bits assembled as Dr. Mario does (first bit -> $80)."""
        value = 0
        for b in self.bits[:8]:
            value = (value << 1) | b
        return value


class Console:
    """LATCH and CLOCK waveforms of a simulated NES, and what it samples on DATA."""

    def __init__(self) -> None:
        self.latch = Intervals()
        self.clock_low = Intervals()
        self.reads: list[Read] = []

    def read(
        self,
        t_ns: float,
        timing: ReadTiming = DR_MARIO,
        clocks: int | None = None,
        clock_in_latch: bool = False,
    ) -> float:
        """Adds one read (latch, then ``clocks`` clock pulses, default timing.bits) starting
        at t_ns; returns the time the next read may start. ``clock_in_latch`` adds a clock
        pulse while LATCH is high (a $4016 read during the latch)."""
        latch_end = t_ns + timing.latch * CPU_NS
        self.latch.add(cyc(t_ns), cyc(latch_end))
        if clock_in_latch:
            self.clock_low.add(cyc(t_ns + 2 * CPU_NS), cyc(t_ns + 3 * CPU_NS))
        samples = []
        t = latch_end + timing.first_clock * CPU_NS
        n = timing.bits if clocks is None else clocks
        for _ in range(n):
            rise = t + timing.low * CPU_NS
            self.clock_low.add(cyc(t), cyc(rise))
            samples.append(cyc(rise - 10))  # D0 latched at the end of the read cycle
            t += timing.period * CPU_NS
        self.reads.append(Read(cyc(t_ns), samples))
        return t - timing.period * CPU_NS + timing.gap * CPU_NS

    def frame(self, t_ns: float, timing: ReadTiming = DR_MARIO, reads: int = 2) -> float:
        """Dr. Mario's NMI: two reads back to back. Returns the end of the last read."""
        for _ in range(reads):
            t_ns = self.read(t_ns, timing)
        return t_ns

    def inputs(self, t: int) -> int:
        level = 1 << DATA  # the console's pull-up (seen only while DATA is released)
        if not self.clock_low.active(t):
            level |= 1 << CLOCK
        if self.latch.active(t):
            level |= 1 << LATCH
        return level

    def next_edge(self, t: int) -> int:
        return min(self.latch.next_edge(t), self.clock_low.next_edge(t))


class Rp2040:
    """One state machine running nes4021 with the firmware core as its CPU."""

    def __init__(self, console: Console, dev: VirtualDevice) -> None:
        self.console = console
        self.dev = dev
        self.opcodes = list(PROGRAM.assembled)
        labels = PROGRAM.public_labels
        self.poll_pcs = {labels["idle"], labels["idle"] + 1}
        self.poll_pcs |= set(range(labels["clk_poll"], labels["clk_poll"] + 5))
        self.poll_pcs.add(labels["clk_poll"] - 1)  # latch_high: "jmp pin latch_high"
        self.state = State(program_counter=labels["idle"])
        self.core_masks: list[int] = []  # what the core says each latch was served
        self._words_seen = 0
        self._pending_samples: deque[tuple[Read, int]] = deque()
        self.feed_words()

    def feed_words(self) -> None:
        """Moves words the core handed out (nb_poll) into the TX FIFO."""
        fresh = self.dev.pio_words_total - self._words_seen
        new = list(self.dev.pio_words)[len(self.dev.pio_words) - fresh :] if fresh else []
        self._words_seen += len(new)
        if new:
            fifo = deque(self.state.transmit_fifo)
            fifo.extend(new)
            assert len(fifo) <= 4, "TX FIFO overflow"
            self.state = replace(self.state, transmit_fifo=fifo)

    def wire_low(self, state: State) -> bool:
        return bool(state.pin_directions >> DATA & 1)

    def run_until(self, t_end: int) -> None:
        """Runs the state machine to cycle t_end, sampling DATA where the console does."""
        self._pending_samples = deque(
            sorted(
                ((r, s) for r in self.console.reads for s in r.samples[len(r.bits) :]),
                key=lambda rs: rs[1],
            )
        )
        self._pending_samples = deque(
            (r, s) for r, s in self._pending_samples if s >= self.state.clock
        )
        kw = dict(
            jmp_pin=LATCH,
            out_base=DATA,
            out_count=1,
            set_base=DATA,
            set_count=1,
            shift_osr_right=False,
            shift_isr_right=False,
        )
        while self.state.clock < t_end:
            gen = emulate(
                self.opcodes,
                stop_when=lambda _op, s: s.clock >= t_end,
                initial_state=self.state,
                input_source=self._inputs,
                **kw,
            )
            interrupted = False
            for _prev, cur in gen:
                self._sample(cur, cur.clock)
                self.state = cur
                if cur.receive_fifo:
                    # The latch interrupt: the CPU timestamps it and runs nb_latch.
                    self.core_masks.append(self.dev.read(round(cur.clock * SM_NS / 1000)))
                    self.state = replace(cur, receive_fifo=deque())
                    interrupted = True
                    break
                if cur.program_counter in self.poll_pcs:
                    # Skip only once the loop has run GUARD cycles on the current inputs.
                    edge = self.console.next_edge(cur.clock - GUARD)
                    target = min(edge, t_end) - GUARD
                    if edge > cur.clock and target - cur.clock > GUARD:
                        self._sample(cur, target)
                        self.state = replace(cur, clock=target)
                        interrupted = True
                        break
            if not interrupted:
                break

    def _inputs(self, state: State) -> int:
        return self.console.inputs(state.clock)

    def _sample(self, state: State, upto: int) -> None:
        while self._pending_samples and self._pending_samples[0][1] <= upto:
            read, _ = self._pending_samples.popleft()
            read.bits.append(1 if self.wire_low(state) else 0)


@pytest.fixture
def rig():
    """A virtual device with a host link in session, and a fresh console + state machine.
    The link waits up to 2 s a reply (as the emulated firmware's tests): with the default 0.5
    s the handshake timed out once beside another test suite on 2 cores, the device's thread
    starved; these tests check the state machine, not the link's timing."""
    with VirtualDevice() as dev, Link(dev.port, timeout_s=2.0) as link:
        console = Console()
        yield link, dev, console, Rp2040(console, dev)


def frame_ns(k: int) -> float:
    return 1_000_000 + k * FRAME_CPU * CPU_NS  # frame 0 at 1 ms


def close_window(dev: VirtualDevice, k: int) -> None:
    """The firmware main loop's pass after frame k's latch window ended (100 us late)."""
    dev.advance(round(frame_ns(k) / 1000) + dev.window_us() + 100)


def play_frames(dev, console, sm, n, timing=DR_MARIO, first=0) -> list[list[Read]]:
    """Plays frames first..first+n-1 (two reads each); after each, the CPU closes the latch
    window (5 ms after the first latch) and queues the next frame's word."""
    out = []
    for k in range(first, first + n):
        start = len(console.reads)
        end = console.frame(frame_ns(k), timing)
        sm.run_until(cyc(end) + 2000)
        close_window(dev, k)
        sm.feed_words()
        out.append(console.reads[start:])
    return out


def test_program_assembles_within_limits():
    assert 0 < len(PROGRAM.assembled) <= 32  # one PIO block's instruction memory
    assert {"idle", "clk_poll"} <= set(PROGRAM.public_labels)
    assert SM_HZ == 125_000_000


@pytest.mark.parametrize(
    "timing", [DR_MARIO, TIGHT, UNROLLED], ids=["drmario", "tight", "unrolled"]
)
def test_console_reads_the_scheduled_byte_on_both_reads(rig, timing):
    link, dev, console, sm = rig
    # One button per frame shows order and polarity; then combinations.
    masks = [0x80, 0x40, 0x20, 0x10, 0x08, 0x04, 0x02, 0x01, 0xA5, 0x00, 0xFF]
    ack = link.schedule(1, masks)
    assert ack.accepted == len(masks)
    frames = play_frames(dev, console, sm, len(masks) + 1, timing)
    assert [r.byte for r in frames[0]] == [0, 0], "frame 0 was never scheduled"
    for k, mask in enumerate(masks, start=1):
        reads = frames[k]
        assert [r.byte for r in reads] == [mask, mask], f"frame {k}: want {mask:#04x}"
        assert all(len(r.bits) == 8 for r in reads)
    # The core's mirror of the PIO agrees with what the console read, latch by latch.
    assert sm.core_masks == [r.byte for f in frames for r in f]
    # Status per frame: both latches counted, frame numbers in order, 16.639 ms apart.
    statuses = [link.wait_status(k) for k in range(len(masks) + 1)]
    assert [s.latches for s in statuses] == [2] * len(statuses)
    assert [s.mask for s in statuses] == [0, *masks]
    starts = [s.first_latch_us for s in statuses]
    gaps = {b - a for a, b in zip(starts[:-1], starts[1:], strict=True)}
    assert gaps <= {16639, 16640}


def test_underrun_reads_no_buttons_and_is_counted(rig):
    link, dev, console, sm = rig
    link.schedule(1, [0x81, 0x18])
    frames = play_frames(dev, console, sm, 5)
    assert [[r.byte for r in f] for f in frames] == [[0, 0], [0x81] * 2, [0x18] * 2, [0, 0], [0, 0]]
    st = link.wait_status(4)
    assert st.underruns == 2 and st.flags & 0x04  # frames 3 and 4, UNDERRUN flag


def test_after_eight_bits_reads_like_an_official_pad(rig):
    link, dev, console, sm = rig
    link.schedule(1, [0x5A])
    play_frames(dev, console, sm, 1)
    # Frame 1 read with 40 clocks: the 8 button bits, then ones (the 4021's grounded
    # serial input), also past the 32 bits of the FIFO word.
    console.read(frame_ns(1), TIGHT, clocks=40)
    sm.run_until(cyc(frame_ns(1)) + cyc(40 * 16 * CPU_NS) + 5000)
    bits = console.reads[-1].bits
    assert console.reads[-1].byte == 0x5A
    assert bits[8:] == [1] * 32


def test_clock_glitches_are_ignored(rig):
    link, dev, console, sm = rig
    link.schedule(1, [0xC3, 0x3C])  # any extra shift would change these bytes
    console.latch.add(cyc(500_000), cyc(500_200))  # LATCH spike before the console runs
    play_frames(dev, console, sm, 1)
    assert link.wait_status(0).latches == 2, "the spike was taken for a latch"
    t = frame_ns(1)
    end = console.frame(t)
    first_rise = t + (6 + 5 + 1) * CPU_NS
    for k, width in enumerate([40, 80, 110]):  # spikes under the 120 ns filter, mid-bit
        rise = first_rise + k * 41 * CPU_NS
        console.clock_low.add(cyc(rise + 10_000), cyc(rise + 10_000 + width))
        # Ringing 300 ns after a real rising edge, 200 ns long: passes the width filter,
        # so only the ~1 us dead time keeps it out.
        console.clock_low.add(cyc(rise + 300), cyc(rise + 500))
    # A 150 ns LATCH spike between two clocks of the second read.
    t2 = console.reads[-1].latch_at * SM_NS + (11 + 3.5 * 41) * CPU_NS
    console.latch.add(cyc(t2), cyc(t2 + 150))
    sm.run_until(cyc(end) + 2000)
    close_window(dev, 1)
    sm.feed_words()
    assert [r.byte for r in console.reads[-2:]] == [0xC3, 0xC3]
    # A LATCH spike between frames must not take frame 2's word.
    t_idle = frame_ns(1) + 8_000_000
    console.latch.add(cyc(t_idle), cyc(t_idle + 200))
    reads = play_frames(dev, console, sm, 1, first=2)
    assert [r.byte for r in reads[0]] == [0x3C, 0x3C]
    assert link.wait_status(2).latches == 2


def test_a_longer_clock_pulse_inside_a_bit_does_shift(rig):
    """The filter's other side: a 250 ns low pulse 3 us after a shift is a clock (the 4021
    would shift on it too), so the console reads every later bit one place early. Shows
    that the glitch test above can fail."""
    link, dev, console, sm = rig
    link.schedule(1, [0x55])
    play_frames(dev, console, sm, 1)
    t = frame_ns(1)
    end = console.read(t)
    rise = t + (6 + 5 + 1) * CPU_NS
    console.clock_low.add(cyc(rise + 3000), cyc(rise + 3250))
    sm.run_until(cyc(end) + 2000)
    # A (0) read, B skipped, C..Right read, then the 9th bit (1).
    assert console.reads[-1].byte == (0x55 & 0x80) | (0x55 << 1 & 0x7F) | 1 == 0x2B


def test_missing_clocks_then_a_new_latch_restarts_the_read(rig):
    link, dev, console, sm = rig
    link.schedule(1, [0x96])
    play_frames(dev, console, sm, 1)
    t = console.read(frame_ns(1), DR_MARIO, clocks=5)  # read cut short: 3 clocks missing
    t = console.read(t, DR_MARIO, clocks=0)  # a latch and no clock at all
    end = console.read(t)  # a full read
    sm.run_until(cyc(end) + 2000)
    first, empty, full = console.reads[-3:]
    assert first.bits == [1, 0, 0, 1, 0] and not empty.bits
    assert full.byte == 0x96
    close_window(dev, 1)
    assert link.wait_status(1).latches == 3


def test_clocks_while_latch_is_high_do_not_shift(rig):
    link, dev, console, sm = rig
    link.schedule(1, [0x40])
    play_frames(dev, console, sm, 1)
    end = console.read(frame_ns(1), ReadTiming(latch=8), clock_in_latch=True)
    sm.run_until(cyc(end) + 2000)
    assert console.reads[-1].byte == 0x40
