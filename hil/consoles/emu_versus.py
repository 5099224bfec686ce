"""``hil run --versus --emu ROM``: the user's Dr. Mario in cynes playing two-player matches, the
bot on controller port 2 (the firmware core's port 2, protocol 2), player 1 a script on port 1
(docs/VERSUS.md, "hil run --versus"), or the bot on both ports (``opponent`` None: bot against
bot, player 1's byte in play the firmware core's port 1).

It is EmuRun's console (hil.consoles.emu_run: the clock, real time or lockstep, the capture
chain) with the two-player game. :meth:`EmuVersusRun.prepare` drives the title and the options
screen to a two-player match, each player's level and speed set with its own pad (player 2's
presses through the link, hil.consoles.emu_menus.navigate_menus ``versus``); then every round
is started by player 1's Start, which the script presses when the runtime asks
(:meth:`EmuVersusRun.start_level`; on a console the person presses it):

- in the options screen (a match's first round: the game goes back there after a match,
  playerLoses_endScreen [$959A]) Start on every other frame;
- in the end screens' wait for Start (checkVirusLeft [$B269] after a clear,
  playerLoses_endScreen after a top-out) one press every ``START_REPEAT`` frames, so that a
  press is never held into the next round's first frames (checkPauseReset [$979E] would pause
  it);
- never while a round is in play.

In play player 1's pad is ``opponent(shadow)`` (hil.consoles.sim_versus.Opponent: a placement
policy planning at its spawns, or nothing). The shadow is engine.Versus loaded from the game's
RAM at the round's first frame of play (mode 4, mainLoop_level [$9B8D]; ``Versus.from_ram``)
and stepped with both bytes the game read, as tools/versus_check.py checks it: every frame its
fields are compared with RAM ($0400, $0500); a frame that differs is counted
(``shadow_mismatch_frames``) and the shadow reloaded from RAM.

The frame's truth (``Frame.truth``) is the two-player screen as the engine shows it: in the
intro (mode 8) ``Versus.from_ram`` of the RAM the picture shows (the previous frame's: the NMI
draws what the last frame's main loop added), in play the shadow's state before the frame's
step, after a round's end that end with both bottles redrawn from their fields
(hil.consoles.sim_versus); None on other screens. So ``--reader oracle`` reads the game's state;
the real end screens' STAGE CLEAR, DRAW and GAME OVER boxes (displayStageClear [$B351],
renderDraw [$96A1], renderGameOver [$96E4]) are in the pictures only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

import engine
from calibration import Profile
from engine.constants import Button, Phase
from engine.ram import MODE_INIT_LEVEL, MODE_OPTIONS, MODE_PLAY, P2_LEVEL, P2_SPEED, DrMarioRam
from hil.consoles.base import CannotStart, LevelEnd, StartPresses, versus_round_start
from hil.consoles.emu import EmuError, Emulator
from hil.consoles.emu_menus import MenuResult, navigate_menus
from hil.consoles.emu_run import EmuRun
from hil.consoles.sim_versus import (
    PLAYING,
    RoundRecord,
    VersusSetup,
    _redrawn,
    matches_won,
    record_round_end,
)
from hil.link.link import Link

MODE_INTRO = 8  # levelIntro [$9CAB]: one virus a frame for each bottle that needs one
# Player 1's Start after a round's end, in frames from its end: the game takes it from 114
# frames after a clear (checkVirusLeft [$B269]: noVirusLeft_delay $40, the STAGE CLEAR box,
# two statusUpdate_delay $10), from 98 after a top-out (playerLoses_endScreen [$959A]:
# endScreen_delay $40, fullStatusUpdate) and from 194 after a match's last round
# (endLevel_delay $80 more, then the options screen, which takes Start 4 frames later); measured
# on the real game (original release). A press not taken is repeated every START_REPEAT frames.
START_AFTER_END = 120
START_AFTER_MATCH = 200
START_REPEAT = 64
PERSON_REACTION = 15  # frames a person takes to see player 2's setting and move on
FIELDS = (0x0400, 0x0500)  # p1_field, p2_field


class EmuVersusRun(EmuRun):
    """The module docstring. ``setup``: the match options (its ``seeds`` are not used: the
    game's own RNG runs on); ``opponent``: player 1's pad in play (``mask = opponent(versus)``
    each frame), None: the firmware's port 1 on every frame (the bot plays both ports; the
    script's Starts are added to it). The rest as EmuRun's (its level and speed are player
    2's). Raises RomError, EmuError, ValueError."""

    def __init__(
        self,
        rom: str | Path,
        setup: VersusSetup,
        profile: Profile,
        *,
        opponent: Callable[[engine.Versus], int] | None,
        capture_seed: int = 0,
        max_frames: int = 200_000,
        verify_crc: bool = True,
        emulator: Callable[[str], Emulator] | None = None,
        realtime: bool = False,
        link_faults: Sequence[Any] = (),
        device: Any = None,
        p1_wait: int = 0,
        person: bool = False,
        bot_menus: bool = False,
    ) -> None:
        super().__init__(
            rom,
            setup.level2,
            setup.speed2,
            profile,
            capture_seed=capture_seed,
            max_frames=max_frames,
            verify_crc=verify_crc,
            emulator=emulator,
            ram_menus=not (person or bot_menus),
            realtime=realtime,
            link_faults=link_faults,
            device=device,
        )
        self.setup = setup
        self.opponent = opponent
        self.p1_wait = p1_wait  # player 1's Start this many frames late, the loop not told when
        # Player 1 as a person on the rig (the menus from the title, every Start unannounced):
        self.person = person
        # ... or no player 1 at all: the bot on both ports sets the options screen off the
        # picture and presses every Start on port 1 (bot against bot on the rig)
        self.bot_menus = bot_menus
        if bot_menus and opponent is not None:
            raise ValueError("bot_menus: the bot plays port 1 (opponent None)")
        self._seen = 0  # frames the options screen has shown player 2's setting of the row
        self.emu.pad1 = self._pad1
        self._menu_p1: dict[int, int] = {}  # console frame -> player 1's menu press
        self._start_at: int | None = None  # console frame from which player 1 presses Start
        self.v: engine.Versus | None = None  # the round in play (the shadow)
        self._in_round = False  # between a round's intro and its end
        self._end: engine.Versus | None = None  # the last round's end, as shown
        self.rounds: list[RoundRecord] = []
        self.matches = 0
        self.shadow_mismatches = 0
        self._play_latch = False  # the round's first frame of play is the next step's

    # ---- player 1 -------------------------------------------------------------------------

    def _pad1(self, latch: int) -> int:
        """Player 1's byte for the next frame (the module docstring): the menus' press for the
        firmware's console frame ``latch``, else by the frame's number from :meth:`start` (the
        runtime's: video frames, the lag frames too)."""
        if latch in self._menu_p1:
            return self._menu_p1.pop(latch)
        press = 0 if self.bot_menus else self._script(self.emu.video_frame - self.base_video)
        if self.opponent is None:  # the bot on port 1: the byte its firmware port armed
            words = self.emu.device.pio_words
            press |= (words[-1] >> 24) & 0xFF if words else 0
        return press

    def _script(self, frame: int) -> int:
        """Player 1's script for video frame ``frame`` from :meth:`start`: its Starts, its
        person at the menus, its opponent in play."""
        v = self.v
        in_play = v is not None and Phase(int(v.phase)) in PLAYING
        if self.person and not in_play and self._start_at is None:
            return self._person(frame)
        if self._start_at is not None and frame >= self._start_at and not in_play:
            if self.emu.ram(DrMarioRam.MODE) == MODE_OPTIONS:
                return int(Button.START) if frame % 2 == 0 else 0
            return int(Button.START) if (frame - self._start_at) % START_REPEAT == 0 else 0
        if v is not None and int(v.phase) == int(Phase.PLAYING) and self.opponent is not None:
            return int(self.opponent(v)) & 0xFF
        return 0

    def _person(self, frame: int) -> int:
        """Player 1 as a person at the menus (``person``): on the title Down to 2 players and
        Start; on the options screen its own level and speed, the highlight left on each row
        until player 2's setting has shown for PERSON_REACTION frames (the bot sets it on port
        2), then Down, then Start; after a match's last round Start from START_AFTER_MATCH +
        ``p1_wait`` frames after its end (the options screen). A press every other frame."""
        r, s = self.emu.ram, self.setup
        mode = r(DrMarioRam.MODE)
        if r(DrMarioRam.DEMO):
            return int(Button.START) if frame % 2 == 0 else 0
        if mode == 0:  # the title
            if frame % 2:
                return 0
            return int(Button.DOWN if r(DrMarioRam.PLAYERS) != 2 else Button.START)
        if mode == MODE_OPTIONS:
            section = r(DrMarioRam.OPTION_SECTION)
            own = (r(DrMarioRam.LEVEL), r(DrMarioRam.SPEED))
            bot = (r(P2_LEVEL), r(P2_SPEED))
            row = min(section, 1)
            self._seen = self._seen + 1 if bot[row] == (s.level2, s.speed2)[row] else 0
            if frame % 2:
                return 0
            if section == 2:
                return int(Button.UP)
            want = (s.level1, s.speed1)[row]
            if own[row] != want:
                return int(Button.RIGHT if own[row] < want else Button.LEFT)
            if self._seen < PERSON_REACTION:
                return 0
            self._seen = 0
            return int(Button.DOWN if section == 0 else Button.START)
        last = self.rounds[-1] if self.rounds else None
        if last is not None and last.end_frame is not None and 3 in last.victories:
            k = frame - last.end_frame - START_AFTER_MATCH - self.p1_wait
            return int(Button.START) if k >= 0 and k % START_REPEAT == 0 else 0
        return 0

    # ---- the Console interface -------------------------------------------------------------

    def prepare(self) -> MenuResult | None:
        """Title and options screen to the match's levels and speeds (no Start): player 2's
        presses through the link on port 2, player 1's on port 1; checked back from RAM."""
        s = self.setup
        with Link(self.emu.device.port, nes_port=2) as link:
            res = navigate_menus(
                self.emu,
                link,
                s.level2,
                s.speed2,
                press_start=False,
                versus=(s.level1, s.speed1),
                pad1=self._menu_p1,
            )
        self._menu_p1.clear()
        r = DrMarioRam
        got = (
            self.emu.ram(r.LEVEL),
            self.emu.ram(r.SPEED),
            self.emu.ram(P2_LEVEL),
            self.emu.ram(P2_SPEED),
        )
        want = (s.level1, s.speed1, s.level2, s.speed2)
        if got != want or self.emu.ram(r.PLAYERS) != 2:
            raise EmuError(
                f"the options screen shows levels/speeds {got} (players "
                f"{self.emu.ram(r.PLAYERS)}), not the match's {want}; not playing it"
            )
        self.base_video = self.emu.video_frame
        return res

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """The next round: player 1 presses Start from ``first_frame``, and no earlier than
        ``START_AFTER_END`` frames after the last round's end (``START_AFTER_MATCH`` after a
        match's last), until the game takes it (the
        module docstring), ``p1_wait`` frames later (a person's pace: the loop is then not told
        when, ``start_unseen``, as on the rig). The bot presses nothing. Raises CannotStart
        when (level, speed) is not player 2's."""
        s = self.setup
        if (level, speed) != (s.level2, s.speed2):
            raise CannotStart(
                f"player 2 plays level {s.level2} speed {s.speed2} in this match, "
                f"not level {level} speed {speed}"
            )
        if self.bot_menus:  # the bot presses player 1's Start, as on the rig
            return versus_round_start(first_frame, previous)
        with self._lock:
            start = first_frame
            last = self.rounds[-1] if self.rounds else None
            if last is not None and last.end_frame is not None and not self._in_round:
                wait = START_AFTER_MATCH if 3 in last.victories else START_AFTER_END
                start = max(start, last.end_frame + wait)
            self._start_at = start + self.p1_wait
        if self.p1_wait or self.person:
            return StartPresses(first_frame, [0], first_frame, start_unseen=True)
        return StartPresses(first_frame, [0], start)

    @property
    def finished(self) -> bool:
        return False

    # ---- stepping ----------------------------------------------------------------------------

    def _step(self) -> None:
        # the RAM the intro's picture shows (the frame before's), kept only in the intro
        intro = self.emu.ram(DrMarioRam.MODE) == MODE_INTRO
        before = self.emu.ram_block(0, 0x800).tobytes() if intro else None
        ev = self.emu.step(close_window=False)
        mode = self.emu.ram(DrMarioRam.MODE)
        g = ev.video_frame - self.base_video
        facts = None
        if mode in (MODE_INIT_LEVEL, MODE_INTRO) and not self._in_round:
            self._begin_round(g)
        if before is not None:
            facts = engine.versus_screen_facts(engine.Versus.from_ram(before, int(Phase.INTRO)))
        if self._in_round and self.v is None and mode == MODE_PLAY:
            self.v = engine.Versus.from_ram(self.emu.ram_block(0, 0x800).tobytes())
            self.rounds[-1].start_frame = g + 1
            self._play_latch = True  # (recorded at the next frame's step, below)
        elif self.v is not None and self._in_round:
            if self._play_latch and ev.console_frame is not None:
                self.rounds[-1].play_latch = ev.console_frame
                self._play_latch = False
            facts = engine.versus_screen_facts(self.v)
            self._step_shadow(int(ev.pad1 or 0), int(ev.mask or 0), g)
        elif self._end is not None and mode not in (MODE_OPTIONS, MODE_INIT_LEVEL, MODE_INTRO):
            facts = engine.versus_screen_facts(self._end)
        self._keep(ev, facts)

    def _begin_round(self, g: int) -> None:
        """The game took player 1's Start: a round's intro begins (a new match when the last
        one ended or none was played)."""
        self._start_at = None
        self._in_round, self._end = True, None
        last = self.v
        new_match = last is None or int(last.phase) == int(Phase.MATCH_OVER)
        if new_match:
            self.matches += 1
        number = 1 if new_match else self.rounds[-1].round + 1
        self.v = None
        self.rounds.append(RoundRecord(self.matches, number, g, g))

    def _step_shadow(self, m1: int, m2: int, g: int) -> None:
        """Steps the shadow with both bytes, checks its fields against RAM; at the round's
        end, records it."""
        v = self.v
        assert v is not None
        v.step(m1, m2)
        # A draw (both topped out): renderDraw [$96A1] writes its box into both fields.
        draw = int(v.phase) >= int(Phase.ROUND_OVER) and not v.who_won and not v.who_failed
        for i, address in enumerate(() if draw else FIELDS):
            if not np.array_equal(self.emu.ram_block(address, 128), np.asarray(v.player(i).field)):
                self.shadow_mismatches += 1
                v = self.v = engine.Versus.from_ram(
                    self.emu.ram_block(0, 0x800).tobytes(), int(v.phase)
                )
                break
        if Phase(int(v.phase)) not in PLAYING:
            self._round_ended(v, g + 1)

    def _round_ended(self, v: engine.Versus, g: int) -> None:
        record_round_end(self.rounds, v, g)
        self._in_round = False
        self._end = _redrawn(v)

    # ---- what the capture card sees ----------------------------------------------------------

    def shown(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        """Frame g's picture (RGB uint8 [240, 256, 3]) and truth: EmuRun's, with ``facts``
        player 2's bottle as one-player facts (the oracle reader's) and ``versus`` the
        two-player facts (None on screens the engine does not draw). Raises KeyError."""
        ev, facts = self.picture(g)
        return ev.picture, {
            "console_frame": ev.console_frame,
            "video_frame": ev.video_frame,
            "facts": None if facts is None else facts.player(1),
            "versus": facts,
            "round": len(self.rounds),
            "ram_mismatches": self.shadow_mismatches,
        }

    def report(self) -> dict[str, Any]:
        """``{"emu": ...}``: EmuRun's, with the match options, every round as the game played
        it (hil.consoles.sim_versus.RoundRecord, console frames from :meth:`start`), the
        matches (begun, won by each) and the shadow's frames that differed from RAM."""
        out = super().report()
        emu = out["emu"]
        for key in ("levels_seen", "late_init_levels", "shadow_ram_mismatch_frames"):
            emu.pop(key, None)
        emu["setup"] = {k: v for k, v in asdict(self.setup).items() if k != "seeds"}
        emu["rounds"] = [asdict(r) for r in self.rounds]
        emu["matches"] = matches_won(self.rounds, self.matches)
        emu["shadow_mismatch_frames"] = self.shadow_mismatches
        return out
