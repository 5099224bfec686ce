"""`hil run --emu`: the user's ROM in cynes as the Console the runtime plays (real time by
default, lockstep with --fast), seen through a capture Profile (docs/EMU.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import engine
from calibration import Profile
from engine.ram import (
    MAX_MENU_LEVEL,
    MODE_OPTIONS,
    MODE_TO_LEVEL,
    DrMarioRam,
)
from hil.consoles.base import LevelEnd, StartPresses, start_with_pad
from hil.consoles.emu import (
    FIRMWARE_START_US,
    FRAMES_KEPT,
    EmuError,
    EmuFrame,
    EmulatedNes,
    Emulator,
)
from hil.consoles.emu_menus import MenuResult, navigate_menus
from hil.consoles.paced import CaptureFault, ChainCapture, PacedConsole
from hil.link.link import Link
from hil.link.vdevice import VirtualDevice


class EmuRun(PacedConsole):
    """``hil run --emu ROM``: the user's Dr. Mario in cynes as a console the Runtime plays
    (hil.consoles.base.Console, like hil.consoles.sim.SimConsole: a capture source on the
    console's frame clock, the controller port, and how a level is started). Video frame ``v``
    (counted from :meth:`start`) is emulated at console time ``v * T`` (T = 1e9 / 60.0988 ns)
    with the byte the firmware core armed for it; its latch window closes ``window_us`` later,
    when the core sends the frame's STATUS and arms the next one. ``realtime``: a thread paces
    that on the wall clock and never waits for the host (hil.consoles.paced); else lockstep:
    the emulator runs up to each captured frame's arrival time. Each picture goes through the
    Profile's timing and forward model (hil.consoles.paced.ChainCapture).

    :meth:`start` drives the menus through the firmware core (:meth:`prepare`: navigate_menus,
    without Start) to ``level`` and ``speed`` on the options screen when ``ram_menus``, and
    reads them back from the game's RAM; :meth:`start_level` then presses Start, and after each
    stage clear holds Start as the game asks, so the game chains level after level. Without
    ``ram_menus`` the game runs from power-on and the runtime's menu driver starts each level
    from the pictures.

    Ground truth for ``--reader oracle``: an engine.LevelFlow shadow of the game, begun at the
    frame the options screen took Start (RNG and frameCounter read from RAM) and fed the same
    masks; each frame its field and mode are checked against RAM (``ram_mismatches``), and
    the one bit it cannot derive (initData_level overrunning its frame) is read off RAM by
    replaying the flow. ``truth["facts"]`` is screen_facts of the shadow's shown state (None on
    screens the engine does not draw). ``capture_faults``: hil.consoles.paced.CaptureFault
    (real time). Raises RomError, EmuError, ValueError.
    """

    def __init__(
        self,
        rom: str | Path,
        level: int,
        speed: int,
        profile: Profile,
        *,
        capture_seed: int = 0,
        max_frames: int = 200_000,
        verify_crc: bool = True,
        emulator: Callable[[str], Emulator] | None = None,
        game: str = "drmario",
        ram_menus: bool = True,
        realtime: bool = False,
        capture_faults: Sequence[CaptureFault] = (),
        link_faults: Sequence[Any] = (),
        device: Any = None,
    ) -> None:
        if not 0 <= level <= MAX_MENU_LEVEL:
            raise ValueError(
                f"level must be 0..{MAX_MENU_LEVEL} on the options screen, got {level}"
            )
        if speed not in (0, 1, 2):
            raise ValueError(f"speed must be 0 (LOW), 1 (MED) or 2 (HI), got {speed}")
        # The firmware image's clock has run since its boot (about a second to enumerate):
        # frames begin at 1 s on it, as on the simulated console.
        start_us = 0 if device is None else FIRMWARE_START_US
        self.emu = EmulatedNes(
            rom, device, verify_crc=verify_crc, emulator=emulator, game=game, start_us=start_us
        )
        self.emu._own_device = True  # the run closes whatever controller it was given
        if isinstance(self.emu.device, VirtualDevice):
            self.emu.device.lockstep = not realtime
        self.game = game
        self.level, self.speed = level, speed
        self.start_latches: list[int] = []  # console frames that latched Start
        self.profile = profile
        self.period_ns = 1e9 / profile.timing.console_hz
        self.base_video = 0  # video frame that is the capture schedule's frame 0
        self._frames: dict[int, tuple[EmuFrame, Any]] = {}  # video frame -> (frame, facts)
        self._pending_close: int | None = None  # video frame whose latch window is open
        self._shift_ns = 0.0  # frames run this much later than frame 0's phase (RESETs)
        self._origin_us = 0  # the firmware's clock at console time 0 (start)
        self.flow: engine.LevelFlow | None = None
        self._snap: tuple[engine.LevelFlow, list[int]] | None = None
        self._late_checked = False
        self.ram_mismatches = 0
        self.levels: list[dict[str, Any]] = []
        self._state0: str | None = None  # the shadow's state 0 of the level being begun (hex)
        self.late_inits = 0  # levels whose initData_level overran its frame (read off RAM)
        self._init_pacing(realtime)
        self._init_faults(link_faults)
        self.capture = ChainCapture(
            self,
            profile,
            name="emu",
            max_frames=max_frames,
            capture_seed=capture_seed,
            faults=capture_faults,
        )
        self.latency_frames = profile.timing.latency_frames
        self.jitter_ms = profile.timing.jitter_ms
        self.menu: MenuResult | None = None
        # True: :meth:`start` sets the options screen by RAM (navigate_menus, a known RNG
        # seed: tools and tests); False: the game runs from power-on and the runtime's menu
        # driver starts each level from the pictures (hil run --emu).
        self.ram_menus = ram_menus

    # ---- the Console interface -------------------------------------------------------------

    name = "emu"

    @property
    def port(self) -> str:
        return self.emu.device.port

    @property
    def device(self) -> Any:
        """The controller the game reads (the firmware core on a pty)."""
        return self.emu.device

    def now_ns(self) -> int:
        """The runtime's clock (PacedConsole.now_ns); in lockstep with the firmware image in
        rp2040js, its clock where that is later: serving the host's bytes runs it on, and a
        reply stamped with an earlier time would look early (as on the simulated console)."""
        now = super().now_ns()
        clock = getattr(self.emu.device, "clock_us", None)
        if clock is None or self.realtime:
            return now
        with self._lock:
            dev = self.host_ns((clock() - self._origin_us) * 1000.0)
        return max(now, dev)

    def unplug(self) -> None:
        """Pulls the controller's USB cable: the pty goes away; the game reads no buttons once
        the firmware has noticed (nb_host_lost)."""
        self.emu.device.unplug()

    def replug(self) -> str:
        """Plugs a freshly booted controller in (its frames count from 0 again); returns the
        new port path."""
        with self._lock:
            self.emu.device.close()
            self.emu.device = VirtualDevice()
            self.emu.device.lockstep = not self.realtime
            self.emu._own_device = True
            self.emu.console_frame = -1
            return self.emu.device.port

    def console_reset(self, t_ns: float, shift_ns: float) -> None:
        """The console's RESET (an injected fault): the game restarts at its title, and its
        video timing at another phase, ``shift_ns`` later (a real console's PPU restarts its
        frame; the capture card, on its own clock, samples the frames at the new phase)."""
        self.emu.reset()
        self.flow, self._snap = None, None
        self._shift_ns += shift_ns
        self.emu.start_us += round(shift_ns / 1000)
        self.capture.shift_phase(t_ns, self._shift_ns)

    def prepare(self) -> MenuResult | None:
        """Menus to ``level``/``speed`` on the options screen (no Start); checks them back.
        The test ROM has no menus (None)."""
        if self.game != "drmario":
            self.base_video = self.emu.video_frame
            return None
        with Link(self.emu.device.port) as link:
            res = navigate_menus(self.emu, link, self.level, self.speed, press_start=False)
        if (res.level, res.speed) != (self.level, self.speed):
            raise EmuError(
                f"the options screen shows level {res.level} speed {res.speed}, not the "
                f"level {self.level} speed {self.speed} asked for; not playing it"
            )
        self.base_video = self.emu.video_frame
        return res

    def start(self) -> None:
        """Drives the menus to the first level (:meth:`prepare`) when ``ram_menus``, else
        leaves the game at power-on for the runtime's menu driver; the clock's 0 is then (in
        real time the console runs from here)."""
        if self.ram_menus:
            self.menu = self.prepare()
        else:
            self.base_video = self.emu.video_frame
        # The firmware's clock at console time 0: it runs on through a RESET, whose frames
        # come at another phase (console_reset moves the frames' times, not the clock).
        self._origin_us = self.emu.frame_time_us(self.base_video)
        self._start_pacing()

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """Start on the options screen :meth:`prepare` set, then the game's chain (no RESET:
        a game is a chain of levels). Raises CannotStart for any other level."""
        return start_with_pad(level, speed, first_frame, previous)

    def report(self) -> dict[str, Any]:
        """``{"emu": ...}``: the ROM, the menus, the levels the game began, the LevelFlow
        shadow's RAM check, lag frames, and in real time how late the console ran its frames
        (``pacing``). ``menu_presses``: the presses of the RAM-driven menus (``ram_menus``),
        None when the runtime's picture-driven menus started the levels (their presses and
        frames are in the log's ``start_pressed`` events); ``start_latches``: the console
        frames that latched Start, kept for the test ROM (no game) only; ``levels_seen``: each
        level whose play began, with ``state0``, the shadow's state as levelIntro_delay began
        (engine.Game.state_bytes() in hex; engine.Game.from_state_bytes rebuilds it, and
        ``python -m hil.samegame`` replays the run's levels from it)."""
        return {
            "emu": {
                "rom": self.emu.rom_name,
                "profile": self.profile.name,
                "game": self.game,
                "realtime": self.realtime,
                "menu_presses": None if self.menu is None else self.menu.presses,
                "start_latches": self.start_latches[:16],
                "levels_seen": self.levels,
                "shadow_ram_mismatch_frames": self.ram_mismatches,
                "late_init_levels": self.late_inits,
                "video_frames": self.emu.video_frame,
                "lag_frames": self.emu.lag_frames,
                "pacing": self.pacing.report(),
                "faults": self.fault_counts | self.capture.fault_counts,
            }
        }

    def close(self) -> None:
        self._stop_pacing()
        self.capture.close()
        self.emu.close()

    # ---- stepping ----------------------------------------------------------------------------

    def _window_ns(self) -> float:
        return self.emu.device.window_us() * 1000.0

    def _frame_ns(self, v: int) -> float:
        """Console time at which video frame ``v`` begins (its NMI and controller reads)."""
        return (v - self.base_video) * self.period_ns + self._shift_ns

    def _next_event_ns(self) -> float:
        due = self._frame_ns(self.emu.video_frame)
        if self._pending_close is not None:
            due = min(due, self._frame_ns(self._pending_close) + self._window_ns())
        return due

    def _advance_to(self, t_ns: float) -> None:
        """Runs every event up to console time ``t_ns``: video frame v is emulated at v * T
        (its controller reads, on the byte the core armed), its latch window closes
        ``window_us`` later (VirtualDevice.advance: the STATUS goes out, the next frame is
        armed)."""
        with self._lock:
            window = self._window_ns()
            while True:
                due = self._frame_ns(self.emu.video_frame)
                if self._pending_close is not None:
                    close = self._frame_ns(self._pending_close) + window
                    if close <= due and close <= t_ns:
                        self._close(self._pending_close)
                        continue
                if due > t_ns:
                    break
                if self._pending_close is not None:
                    self._close(self._pending_close)
                if self._fault_tick(self.emu.video_frame - self.base_video, due):
                    continue  # reset: the frame begins later, on the new phase
                self._step()
            self._now_ns = int(t_ns)
            # The device's clock runs with the console's: messages the host sent are taken,
            # and STATUS/PONG stamped, at the time the host sees now.
            self.emu.device.advance(self._origin_us + int(t_ns / 1000))

    def _close(self, v: int) -> None:
        self.emu.device.advance(self.emu.frame_time_us(v) + self.emu.device.window_us())
        self._pending_close = None

    def _step(self) -> None:
        if self.game != "drmario":  # the test ROM: the console and its pad, no game
            ev = self.emu.step(close_window=False)
            if ev.mask is not None and ev.mask & engine.Button.START:
                self.start_latches.append(int(ev.console_frame or 0))
            self._keep(ev, None)
            return
        r = DrMarioRam
        mode_before = self.emu.ram(r.MODE)
        before = self.flow.game if self.flow is not None and not self.flow.terminal else None
        ev = self.emu.step(close_window=False)
        mask = int(ev.mask or 0)
        mode = self.emu.ram(r.MODE)
        facts = None
        if mode_before == MODE_OPTIONS and mode == MODE_TO_LEVEL and not self.emu.ram(r.DEMO):
            seed = self.emu.ram(r.RNG) << 8 | self.emu.ram(r.RNG + 1)
            self.flow = engine.LevelFlow(
                self.emu.ram(r.LEVEL),
                self.emu.ram(r.SPEED),
                seed,
                frame_counter=self.emu.ram(0x43),
                held=mask | int(engine.Button.START),
            )
            self._snap, self._late_checked = None, False
        elif self.flow is not None and not self.flow.terminal:
            self._shadow(mask)
            if self.flow.screen == engine.FlowScreen.LEVEL and before is not None:
                facts = engine.screen_facts(before)
        self._keep(ev, facts)

    def _keep(self, ev: EmuFrame, facts: Any) -> None:
        self._frames[ev.video_frame] = (ev, facts)
        self._frames.pop(ev.video_frame - FRAMES_KEPT, None)
        if ev.console_frame is not None:
            self._pending_close = ev.video_frame

    def _shadow(self, mask: int) -> None:
        """Steps the LevelFlow shadow one frame and checks it against RAM."""
        flow = self.flow
        assert flow is not None
        levels = flow.levels_started
        flow.step(mask)
        if self._snap is not None:
            self._snap[1].append(mask)
        if flow.levels_started != levels:
            self._late_checked = False
        if flow.stage == engine.FlowStage.LOAD and flow.mode == 3:
            self._snap = (flow.clone(), [])
        field = self.emu.ram_block(DrMarioRam.FIELD, 128)
        game_virus = bool(((field & 0xF0) == 0xD0).any())
        flow_virus = bool(((flow.field & 0xF0) == 0xD0).any())
        if not self._late_checked and flow_virus:
            self._late_checked = True
            if not game_virus and self._snap is not None:  # initData_level overran its frame
                snap, masks = self._snap
                flow = snap.clone()
                flow.late_init = True
                for m in masks:
                    flow.step(m)
                self.flow = flow
                self.late_inits += 1
        if flow.frame == flow.state0_frame:  # the level's state 0 (levelIntro_delay begins)
            self._state0 = flow.game.state_bytes().hex()
        if flow.play_frame == flow.frame:
            self.levels.append(
                {"level": int(flow.level), "speed": int(flow.speed), "state0": self._state0}
            )
        if self.emu.ram(DrMarioRam.MODE) != flow.mode or not np.array_equal(field, flow.field):
            self.ram_mismatches += 1

    # ---- what the capture card sees (hil.consoles.paced.Shown) ---------------------------------

    def picture(self, console_index: int) -> tuple[EmuFrame, Any]:
        """(EmuFrame, facts) of video frame ``base_video + console_index``. Raises KeyError."""
        return self._frames[self.base_video + console_index]

    def picture_status(self, g: int) -> int:
        """0: video frame g + 1 (from :meth:`start`) is not emulated yet, so frame g's picture
        is not whole; 1: whole and kept; -1: gone (the last FRAMES_KEPT are kept)."""
        if self.emu.video_frame - self.base_video <= g + 1:
            return 0
        return 1 if self.base_video + g in self._frames else -1

    def shown(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        """Frame g's picture (RGB uint8 [240, 256, 3]) and truth: ``console_frame`` (the
        firmware's latch group, None on a lag frame), ``video_frame``, ``facts``,
        ``ram_mismatches`` (so far), ``latch_host_ns`` (the host clock's time of the frame's
        controller reads: what the runtime's clock mapping estimates). Raises KeyError."""
        ev, facts = self.picture(g)
        return ev.picture, {
            "console_frame": ev.console_frame,
            "video_frame": ev.video_frame,
            "latch_host_ns": self.host_ns(self._frame_ns(ev.video_frame)),
            "facts": facts,
            "ram_mismatches": self.ram_mismatches,
        }
