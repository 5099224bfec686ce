"""The simulated console: the engine at 60.0988 Hz, its controller port the firmware's C core on
a pseudo-terminal, its picture through a capture Profile.

``SimConsole`` is what ``hil run --sim`` plays against. Every console frame ``g`` (numbered like
the firmware's latch groups, from 0):

1. at ``g * T_c`` the console latches the controller twice (Dr. Mario's double read) through
   ``VirtualDevice.read`` and, ``window_us`` later, closes the latch window
   (``VirtualDevice.advance``: the core sends frame g's STATUS and arms frame g+1), so the
   firmware's queue, underrun, late and watchdog logic is the real one;
2. the picture shown during ``[g, g+1) * T_c`` is ``render_frame`` of the state before this
   frame's step (render_frame draws what the console shows after its next NMI), then the game
   steps once with the byte the console read.

The game's menus are the engine's (engine.Menu, docs/MENUS.md): the console begins on the
options screen set to the first level (``screen="options"``) or on the title (``"title"``), drawn
with the clean-room pictures (engine.menu_render) and answering the pad as the game does (the
level and speed rows, the title's Start, B back to the title, the attract demo). Start on the
options screen (engine.Menu's START) begins the level and speed the options screen is set to
(engine.LevelFlow, docs/LEVEL_FLOW.md); its RNG seed is the next of ``levels``' seeds (the sim's
stand-in for the RNG state the menus leave, so that ``--seed`` picks the boards), as the game
does: toLevel and initData_level, the intro drawing one virus a frame from frame
``s + 7``, the engine's State 0 shown in frame ``s + 1 + state0_frame``, the first pill after the
real delay. A stage clear waits for Start (pressed or held, from 97 frames after the last virus)
and chains to level + 1 at the same speed with the score carried; a top-out goes to the game over
screen, whose Start returns to the options screen (engine.Menu again); the soft reset
(A+B+Select+Start) goes to the title. :meth:`SimConsole.reset` stands in for RESET and the
menus for callers without a screen reader (back to the options screen set to the next level).
The screens the engine does not draw (a screen loading in a level's flow, cutscenes) are black;
the game screens are ``render_frame`` of the flow's state. The game's frameCounter runs with
the console: it is ``(g + fc_phase) & 0xFF`` after frame g's NMI, ``fc_phase`` a hidden
per-console constant drawn from the seed (the tracker must find it). ``late_init`` (per
console, from the seed: about 1 start in 10, as measured on the real game) makes
initData_level overrun its frame.

The capture chain is calibration's: ``TimingModel`` says which console frame each captured
frame shows and when the host receives it (latency, jitter, rate conversion, drops, repeats),
``CaptureModel`` degrades the rendered picture (scaling, colour, noise, MJPEG, ...). Frames carry
their ground truth (``truth["facts"]``: engine.ScreenFacts of the shown state) for the oracle
reader.

Two clocks (docs/RUN.md): ``realtime=True`` runs the console and the capture in threads against
``time.monotonic_ns``; ``realtime=False`` (``--fast``) is lockstep: nothing moves until the
runtime asks for the next captured frame, then the console runs up to that frame's arrival time
(deterministic; the runtime's work takes no console time).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import engine
from calibration import Profile
from engine.constants import FlowScreen, FlowStage, MenuScreen, MenuStage
from hil.consoles.base import LevelEnd, StartPresses, start_with_pad
from hil.consoles.paced import CaptureFault, ChainCapture, PacedConsole
from hil.link.vdevice import VirtualDevice

NES_HZ = 60.0988
# Share of level starts on which initData_level overruns its frame (docs/LEVEL_FLOW.md: 6 of 63
# menu starts and 7 of 60 consecutive start frames measured on the real game).
LATE_INIT_RATE = 0.1
DEVICE_BOOT_US = 1_000_000  # the firmware clock reads this when console frame 0 latches
READ_GAP_US = 120  # between Dr. Mario's two controller reads
PLANNED_FRAMES = 3  # frames whose reads the emulated firmware knows ahead (plan_reads)
MASKS_KEPT = 3_600  # console frames of masks a SimConsole keeps (a minute of play)
PICTURES_KEPT = 600  # console frames of shown states (pictures) a SimConsole keeps (10 s)


@dataclass(frozen=True)
class SimLevel:
    """One level the simulated console plays: level 0..24, speed 0 LOW / 1 MED / 2 HI, seed the
    16-bit RNG state the board and pill reserve are generated from (generate_level)."""

    level: int
    speed: int
    seed: int

    def __post_init__(self) -> None:
        if not 0 <= self.level <= 24:
            raise ValueError(f"level must be 0..24, got {self.level}")
        if self.speed not in (0, 1, 2):
            raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {self.speed}")
        if not 0 <= self.seed <= 0xFFFF:
            raise ValueError(f"seed must be a 16-bit RNG state, got {self.seed}")
        engine.generate_level(self.level, self.seed)  # raises ValueError for an unusable seed


@dataclass
class LevelRecord:
    """What the console did with one level (ground truth, for tests and the summary)."""

    spec: SimLevel
    start_frame: int  # console frame whose picture is state 0 (-1 until the intro is drawn)
    start_press: int = -1  # console frame that latched the Start which began the level
    end_frame: int | None = None  # console frame whose picture first shows the end
    result: str | None = None  # "STAGE_CLEAR" or "TOP_OUT"
    frames: int = 0  # engine frames stepped until the end


@dataclass(frozen=True)
class Fault:
    """A disturbance the sim injects to exercise the tracker's re-sync (tests, ``--fault``).

    kind "drop_input": in console frame ``frame`` the game steps with no buttons whatever the
    controller read (a missed latch). kind "garbage": in that frame a cell appears on the board
    (row, col, code), as if the board were not what the tracker thinks."""

    frame: int
    kind: str = "drop_input"
    row: int = 15
    col: int = 0
    code: int = 0x81

    def __post_init__(self) -> None:
        if self.kind not in ("drop_input", "garbage"):
            raise ValueError(f"fault kind must be drop_input or garbage, got {self.kind!r}")
        if self.frame < 0 or not (0 <= self.row < 16 and 0 <= self.col < 8):
            raise ValueError(f"fault frame must be >= 0 and the cell inside the bottle: {self}")


class SimConsole(PacedConsole):
    """The simulated console (hil.consoles.base.Console): see the module docstring.
    ``levels``: played in order: each begins a game from the options screen, except where the
    game's own chain (a stage clear's Start) reaches it. ``profile``: the capture chain.
    ``capture_seed``: seeds the timing model and the noise. ``console_seed``: seeds the hidden
    frameCounter phase. ``max_frames``: console frames the capture schedule covers (the run
    ends when it is used up). ``render``: state -> RGB picture (engine.render_frame with the
    clean-room tiles by default). Raises ValueError for bad arguments."""

    def __init__(
        self,
        levels: Sequence[SimLevel],
        profile: Profile,
        *,
        realtime: bool = False,
        capture_seed: int = 0,
        console_seed: int = 0,
        max_frames: int = 200_000,
        faults: Sequence[Fault] = (),
        render: Callable[[engine.Game], np.ndarray] | None = None,
        device: Any = None,
        pad: Callable[[engine.Game | None], int] | None = None,
        screen: str = "options",
        capture_faults: Sequence[CaptureFault] = (),
        link_faults: Sequence[Any] = (),
    ) -> None:
        if not levels:
            raise ValueError("the simulated console needs at least one level")
        if max_frames < 1:
            raise ValueError(f"max_frames must be at least 1, got {max_frames}")
        if screen not in ("options", "title"):
            raise ValueError(f"screen must be options or title, got {screen!r}")
        self.levels = list(levels)
        self.profile = profile
        self._init_pacing(realtime)
        self._init_faults(link_faults)
        self.hz = profile.timing.console_hz
        self.period_ns = 1e9 / self.hz
        self.fc_phase = int(np.random.default_rng([console_seed, 7]).integers(256))
        self.faults = {f.frame: f for f in faults}
        self.render = render or engine.render_frame
        self.max_frames = max_frames

        self._init_controller(device, pad, realtime)
        self.frame = 0  # next console frame to latch
        self.flow: engine.LevelFlow | None = None  # the game in progress (None: the menus)
        first = self.levels[0]
        # The title as powered on (the game's own level and speed defaults), or the options
        # screen set to the first level (what a caller without a screen reader needs).
        self.menu: engine.Menu | None = (
            engine.Menu("title", rng=first.seed, frame_counter=self.fc_phase)
            if screen == "title"
            else engine.Menu(
                "options",
                level=min(first.level, 20),
                speed=first.speed,
                rng=first.seed,
                frame_counter=self.fc_phase,
            )
        )
        self._menu_shown: dict[int, tuple[int, ...]] = {}  # console frame -> menu picture key
        self.late_rng = np.random.default_rng([console_seed, 11])
        self.level_index = -1  # index into records of the current (or last) game
        self.records: list[LevelRecord] = []
        # How many of `levels` have begun: a Start on the options screen takes the next one
        # (its seed); a stage clear's chain takes it only when it is that level and speed (the
        # seed is then the game's). A chained level the loop only plays out to get back to the
        # options screen (a game over) takes none, so the next level still gets its own seed.
        self.levels_begun = 0
        # console frame -> byte the game used there, for the last MASKS_KEPT frames (a long
        # run's memory stays flat)
        self.masks: dict[int, int] = {}
        self._prev_mask = 0
        self._pictures: dict[int, engine.Game | None] = {}  # console frame -> shown state
        self._pending_close: int | None = None  # frame whose latch window is still open
        self.capture = ChainCapture(
            self,
            profile,
            name="sim",
            max_frames=max_frames,
            capture_seed=capture_seed,
            faults=capture_faults,
        )
        self.latency_frames = profile.timing.latency_frames
        self.jitter_ms = profile.timing.jitter_ms

    def _init_controller(
        self, device: Any, pad: Callable[[engine.Game | None], int] | None, realtime: bool
    ) -> None:
        """device: the controller (VirtualDevice's console-side interface); default the C core
        on a pty; hil.link.vdevice.EmulatedFirmware(driven=True) is the firmware image itself.
        pad: a controller the host plays itself instead (hil sim record's RandomPlayer): no
        controller port then."""
        self.pad = pad
        if device is None:
            device = _NoController() if pad is not None else VirtualDevice()
            device.lockstep = not realtime
        self.device = device
        self.device_base_frame = 0  # console frame that is the current device's frame 0
        self.device_base_ns = 0  # sim time of that frame's latch
        if pad is None and hasattr(device, "plan_reads"):
            # frame 0's reads, each next frame's in _latch: made at their time even while the
            # emulated firmware serves the host (EmulatedFirmware.plan_reads)
            lead = [self.device_us(self.latch_ns(k)) for k in range(PLANNED_FRAMES)]
            device.plan_reads([t + d for t in lead for d in (0, READ_GAP_US)])
        self.window_us = self.device.window_us()

    name = "sim"

    # ---- clocks ----------------------------------------------------------------------------

    @property
    def port(self) -> str:
        """The pseudo-terminal the runtime opens as the controller port."""
        return self.device.port

    def start(self) -> None:
        """The sim clock's 0 is now; in real time the console runs from here."""
        self._start_pacing()

    def now_ns(self) -> int:
        """The runtime's clock: monotonic ns in real time; the sim time in lockstep, or the
        emulated firmware's clock where that is later. The emulation runs the firmware clock on
        while it serves the host's bytes (hil.link.vdevice.EmulatedFirmware), so a PONG or a
        STATUS can carry a time the sim clock has not reached; stamped with the sim time, it
        would look early, and FrameClock's offset (the least late message) would put every
        frame a few ms off."""
        if self.realtime:
            return time.monotonic_ns()
        now = self._started_ns + self._now_ns
        clock = getattr(self.device, "clock_us", None)
        if clock is not None and self.pad is None:
            with self._lock:
                dev = self.host_ns((clock() - DEVICE_BOOT_US) * 1000.0 + self.device_base_ns)
            now = max(now, dev)
        return now

    def latch_ns(self, g: int) -> float:
        """Sim time of console frame g's first latch (ns)."""
        return g * self.period_ns

    def device_us(self, sim_ns: float) -> int:
        """The firmware clock (us) at a sim time."""
        return DEVICE_BOOT_US + int(round((sim_ns - self.device_base_ns) / 1000.0))

    # ---- the console ----------------------------------------------------------------------

    @property
    def game(self) -> engine.Game | None:
        """A copy of the game state now (None on the options screen)."""
        return None if self.flow is None else self.flow.game

    def _latch(self, g: int) -> None:
        """Console frame g: the two reads, the game's frame, the picture after its NMI."""
        t = self.latch_ns(g)
        self._fault_tick(g, t)
        dev = self.device
        us = self.device_us(t)
        if self.pad is not None:
            mask = int(self.pad(self.game))
        else:
            plan = getattr(dev, "plan_reads", None)  # the emulated firmware (vdevice)
            if plan is not None:  # a few frames ahead: serving the host may run the clock on
                nxt = [self.device_us(self.latch_ns(g + k)) for k in range(1, PLANNED_FRAMES + 1)]
                plan([t + d for t in nxt for d in (0, READ_GAP_US)])
            mask = dev.read(us)
            if dev.read(us + READ_GAP_US) != mask:
                raise AssertionError("the two reads of one frame differ")
        fault = self.faults.get(g)
        used = 0 if fault is not None and fault.kind == "drop_input" else mask
        flow = self.flow
        shown: engine.Game | None = None
        if flow is not None and not flow.terminal:
            if fault is not None and fault.kind == "garbage" and flow.stage == FlowStage.PLAY:
                self._garbage(fault)
            before = flow.game  # render_frame draws what the console shows after its next NMI
            levels = flow.levels_started
            flow.step(used)
            if flow.screen == FlowScreen.LEVEL:
                shown = before
            self._follow(flow, g, levels)
        else:
            self._menu_step(g, used)
        if self.flow is None and self.menu is not None:
            self._menu_shown[g] = _menu_key(self.menu)
        self._menu_shown.pop(g - PICTURES_KEPT, None)
        self._pictures[g] = shown
        self._pictures.pop(g - PICTURES_KEPT, None)
        self._prev_mask = used
        self.masks[g] = used
        self.masks.pop(g - MASKS_KEPT, None)
        self.frame = g + 1
        self._pending_close = g

    def _garbage(self, fault: Fault) -> None:
        """A cell appears in RAM and on screen (the flow's state is rebuilt around it)."""
        assert self.flow is not None
        self.flow.poke_cell(fault.row * 8 + fault.col, fault.code)

    def _follow(self, flow: engine.LevelFlow, g: int, levels_before: int) -> None:
        """Keeps the level records in step with the flow after frame g."""
        if flow.levels_started != levels_before:  # a stage clear's Start chained a level
            spec = SimLevel(int(flow.level), int(flow.speed), int(flow.rng))
            if self.levels_begun < len(self.levels):
                want = self.levels[self.levels_begun]
                if (want.level, want.speed) == (spec.level, spec.speed):
                    self.levels_begun += 1
            self.records.append(LevelRecord(spec, -1, start_press=g))
            self.level_index = len(self.records) - 1
            flow.late_init = bool(self.late_rng.random() < LATE_INIT_RATE)
        rec = self.records[-1]
        if flow.state0_frame >= 0 and rec.start_frame < 0:
            rec.start_frame = rec.start_press + 1 + (flow.state0_frame - flow.start_frame)
        if flow.stage == FlowStage.PLAY and rec.start_frame >= 0:
            rec.frames = int(flow.game.frame)
        if flow.end_frame >= 0 and rec.result is None:
            rec.end_frame = g + 1
            rec.result = "STAGE_CLEAR" if flow.stage == FlowStage.STAGE_CLEAR else "TOP_OUT"
        if flow.stage in (FlowStage.SOFT_RESET, FlowStage.OPTIONS):
            # The soft reset loads the title; a game over's Start the options screen.
            self.menu = engine.Menu(
                "title" if flow.stage == FlowStage.SOFT_RESET else "options",
                level=min(int(flow.level), 20),
                speed=int(flow.speed),
                rng=int(flow.rng),
                frame_counter=(g + 1 + self.fc_phase) & 0xFF,
            )
            self.flow = None

    def _menu_step(self, g: int, mask: int) -> None:
        """Console frame g on the menus (engine.Menu); its Start on the options screen begins
        a level (:meth:`_new_game`)."""
        if self.menu is None:  # an old flow that ended without a screen (not expected)
            self.menu = engine.Menu("options", frame_counter=(g + self.fc_phase) & 0xFF)
        m = self.menu
        m.step(int(mask))
        if m.stage == MenuStage.START:
            self._new_game(g, mask, int(m.level), int(m.speed), int(m.rng))

    def _close_window(self, g: int) -> None:
        self.device.advance(self.device_us(self.latch_ns(g)) + self.window_us)
        self._pending_close = None

    def _new_game(self, g: int, mask: int, level: int, speed: int, rng: int) -> None:
        """Start latched in frame g on the options screen set to ``level`` and ``speed``: that
        level begins, with the next of ``levels``' seeds (else ``rng``, the menus' RNG)."""
        seed = rng
        if self.levels_begun < len(self.levels):
            seed = self.levels[self.levels_begun].seed
            self.levels_begun += 1
        try:
            spec = SimLevel(level, speed, seed)
        except ValueError:
            spec = SimLevel(level, speed, self.levels[0].seed)
        self.menu = None
        late = bool(self.late_rng.random() < LATE_INIT_RATE)
        self.flow = engine.LevelFlow(
            spec.level,
            spec.speed,
            spec.seed,
            frame_counter=(g + self.fc_phase) & 0xFF,
            held=int(mask),
            late_init=late,
        )
        self.records.append(LevelRecord(spec, -1, start_press=g))
        self.level_index = len(self.records) - 1

    def reset(self) -> None:
        """RESET and the menus in one, for callers without a screen reader: the game in
        progress is dropped and the options screen comes back set to the next of ``levels``
        (a run with a screen reader sets it with the pad, hil.menus.MenuDriver)."""
        with self._lock:
            nxt = self.levels[min(self.levels_begun, len(self.levels) - 1)]
            self.flow = None
            self.menu = engine.Menu(
                "options",
                level=min(nxt.level, 20),
                speed=nxt.speed,
                rng=nxt.seed,
                frame_counter=(self.frame + self.fc_phase) & 0xFF,
            )

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """Start on the options screen begins the next of ``levels`` (the console's menus are
        not modelled: it shows the options screen set to it); after a stage clear the game's
        chain; a new game after one was played: RESET first (:meth:`reset`)."""
        return start_with_pad(level, speed, first_frame, previous, reset=self.reset)

    @property
    def finished(self) -> bool:
        """True once the last level has ended (stage clear or top-out)."""
        return self.levels_begun >= len(self.levels) and self.records[-1].result is not None

    def _advance_to(self, sim_ns: float) -> None:
        """Runs every console event (latch, window close) up to sim time ``sim_ns``."""
        with self._lock:
            while True:
                next_latch = self.latch_ns(self.frame)
                if self._pending_close is not None:
                    close = self.latch_ns(self._pending_close) + self.window_us * 1000
                    if close <= next_latch and close <= sim_ns:
                        self._close_window(self._pending_close)
                        continue
                if next_latch > sim_ns:
                    break
                if self._pending_close is not None:
                    self._close_window(self._pending_close)
                self._latch(self.frame)
            self._now_ns = int(sim_ns)
            self.device.advance(self.device_us(sim_ns))

    def _next_event_ns(self) -> float:
        due = self.latch_ns(self.frame)
        if self._pending_close is not None:
            due = min(due, self.latch_ns(self._pending_close) + self.window_us * 1000)
        return due

    def run_to_frame(self, g: int) -> None:
        """Lockstep: runs the console until console frame ``g`` has latched (its picture is
        then :meth:`picture_state`)."""
        self._advance_to(self.latch_ns(g))

    # ---- the controller port ---------------------------------------------------------------

    def unplug(self) -> None:
        """Pulls the controller's USB cable: the pty goes away; the console keeps running and
        reads no buttons (the firmware's watchdog ends the stream)."""
        self.device.unplug()

    def replug(self) -> str:
        """Plugs a freshly booted controller in (frame count and clock restart at 0); returns
        the new port path."""
        with self._lock:
            self.device.close()
            self.device = VirtualDevice(boot_count=1)
            self.device.lockstep = not self.realtime
            self.device_base_frame = self.frame
            self.device_base_ns = int(self.latch_ns(self.frame))
            return self.device.port

    # ---- pictures ------------------------------------------------------------------------------

    def menu_picture(self, g: int) -> np.ndarray | None:
        """The clean-room picture of the menu screen shown in console frame g (RGB uint8
        [240, 256, 3]); None when frame g showed no menu."""
        key = self._menu_shown.get(g)
        return None if key is None else _render_menu_key(key)

    def picture_state(self, g: int) -> engine.Game | None:
        """The state shown in console frame g (None: a screen without a level). Raises
        KeyError when frame g is not latched yet or long gone (the console keeps the last
        PICTURES_KEPT frames)."""
        return self._pictures[g]

    def holds_picture(self, g: int) -> bool:
        """Whether console frame g has latched and is still kept (see picture_state)."""
        with self._lock:
            return g in self._pictures

    @property
    def schedule(self) -> Any:
        """The capture's schedule (calibration.timing.CaptureSchedule)."""
        return self.capture.schedule

    def picture_status(self, g: int) -> int:
        """0: frame g + 1 has not latched (frame g's picture is not whole); 1: whole and kept;
        -1: gone (the console keeps the last PICTURES_KEPT frames)."""
        if self.frame <= g + 1:
            return 0
        return 1 if g in self._pictures else -1

    def shown(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        """The picture of console frame g (RGB uint8 [240, 256, 3]: the state rendered, the
        menu's clean-room picture, or black) and its truth: ``console_frame`` (the device's
        numbering), ``sim_frame`` (g), ``latch_host_ns`` (the host clock's time of its first
        latch: what the runtime's clock mapping estimates), ``facts`` (engine.ScreenFacts or
        None), ``level`` (index into the records, -1 on a screen without a level). Raises
        KeyError when frame g is not latched yet or long gone."""
        state = self.picture_state(g)
        if state is not None:
            picture = self.render(state)
        else:
            menu = self.menu_picture(g)
            picture = np.zeros((240, 256, 3), np.uint8) if menu is None else menu
        truth = {
            "console_frame": g - self.device_base_frame,
            "sim_frame": g,
            "latch_host_ns": self.host_ns(self.latch_ns(g)),
            "facts": None if state is None else engine.screen_facts(state),
            "level": len(self.records) - 1 if state is not None else -1,
        }
        return picture, truth

    def report(self) -> dict[str, Any]:
        """``{"sim": ...}``: the profile, and per level its spec, result, state 0's frame and
        frameCounter mod 16 there (ground truth), the hidden frameCounter phase, and in real
        time how late the console ran its frames (``pacing``, hil.consoles.paced.Pacing)."""
        return {
            "sim": {
                "profile": self.profile.name,
                "levels": [
                    asdict(r.spec)
                    | {
                        "result": r.result,
                        "start_frame": r.start_frame,
                        "frame_counter_mod16": (r.start_frame - 1 + self.fc_phase) & 15,
                    }
                    for r in self.records
                ],
                "fc_phase": self.fc_phase,
                "pacing": self.pacing.report(),
                "faults": self.fault_counts | self.capture.fault_counts,
            }
        }

    def close(self) -> None:
        self._stop_pacing()
        self.capture.close()
        self.device.close()


class _NoController:
    """The port of a SimConsole whose pad the host plays itself (SimConsole's ``pad``): no
    firmware, no pseudo-terminal."""

    port = ""

    def window_us(self) -> int:
        return 0

    def read(self, _us: int) -> int:
        return 0

    def advance(self, _us: int) -> None:
        pass

    def unplug(self) -> None:
        pass

    def close(self) -> None:
        pass


def _menu_key(m: engine.Menu) -> tuple[int, ...]:
    """What a menu frame's picture depends on (engine.menu_render.render_menu_state)."""
    screen = int(m.screen)
    if screen == int(MenuScreen.TITLE):
        return (screen, int(m.players), int(m.frame_counter))
    if screen == int(MenuScreen.OPTIONS):
        return (screen, int(m.level), int(m.speed), int(m.music), int(m.section))
    return (screen,)


@functools.lru_cache(maxsize=64)
def _render_menu_key(key: tuple[int, ...]) -> np.ndarray:
    from engine.menu_render import render_blank, render_options, render_title

    screen = key[0]
    if screen == int(MenuScreen.TITLE):
        return render_title(key[1], key[2])
    if screen == int(MenuScreen.OPTIONS):
        return render_options(key[1], key[2], key[3], key[4])
    if screen == int(MenuScreen.DEMO):
        return engine.render_frame(engine.Game.demo())
    return render_blank()


def frames_for_seconds(seconds: float, hz: float = NES_HZ) -> int:
    """Console frames in ``seconds`` of play."""
    return int(math.ceil(seconds * hz))
