"""The simulated console playing two-player matches (``hil run --versus``): engine.Versus at
60.0988 Hz, player 2's pad the firmware's port 2 (the bot: hil.link.vdevice.VirtualDevice
latches both ports at once), player 1's a scripted opponent (a placement policy, or nothing)
or, bot against bot (``opponent`` None), the firmware's port 1,
the picture engine.render_versus through the capture chain (docs/VERSUS.md, "hil run --versus").

It is SimConsole's clock, controller port and capture card (hil.consoles.sim) with the
two-player game instead of the one-player level flow. Every console frame ``g``:

- the console latches both ports (the two reads of the frame must agree, as in SimConsole);
- the picture shown during ``[g, g+1) * T`` is ``render_versus`` of the state before this
  frame's step, then the round steps once with (opponent's mask, port 2's mask).

A round starts when the runtime asks for it (:meth:`SimVersusConsole.start_level`, player 1's
Start: on a console the person presses it); no earlier than ``ROUND_END_WAIT`` frames after the
last round ended, the console's stand-in for the end screens the engine does not model. From
the Start frame ``s`` the screen is black for ``LOAD_FRAMES`` frames (``NEXT_ROUND_LOAD_FRAMES``
in a match's later rounds), then each bottle's viruses appear one a frame (levelIntro [$9CAB]
adds one to each bottle that still needs one) until the fuller bottle is whole in the frame
before the round's state 0 (engine.Versus at levelIntro_delay), as the one-player intro ends
(docs/LEVEL_FLOW.md), all as the real game does (original release in cynes); the game's
frameCounter runs with the console, ``(g + fc_phase) & 0xFF`` after frame g's NMI, as in
SimConsole. The viruses are revealed in field order, not the game's placement order (the
tracker reads only the count). A match's first round is
``Versus(level1, speed1, level2, speed2, seed)`` with the match's seed; later rounds
``next_round``; after a match is won the next Start begins a new match with the next seed.

A round's end is held until the next Start, the bottles redrawn from their fields (the
loser's emptied lower half shows; the end screens' STAGE CLEAR and DRAW boxes are not drawn).

The frame's truth (``Frame.truth``): ``facts`` player 2's bottle as one-player facts
(engine.VersusFacts.player; the oracle reader's), ``versus`` the two-player facts, ``round``.
:meth:`report` gives every round's ground truth (winner, how it ended, frames) and the matches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import engine
from calibration import Profile
from engine.constants import Button, Phase, level_viruses
from engine.placement import at_spawn
from hil.consoles.base import (
    VERSUS_START_AFTER_MATCH,
    CannotStart,
    LevelEnd,
    StartPresses,
    versus_round_start,
)
from hil.consoles.sim import MASKS_KEPT, PICTURES_KEPT, READ_GAP_US, SimConsole, SimLevel

# Frames between the frame that takes Start and the first virus drawn: s + 7 from the options
# screen, as in one player; s + 20 in a match's later rounds, whose Start (in the end screens)
# clears both fields and waits for fullStatusUpdate [$96FD] first. Measured on the real game.
LOAD_FRAMES = 6
NEXT_ROUND_LOAD_FRAMES = 19
ROUND_END_WAIT = 120  # frames from a round's end before the next Start is taken
# ... as the real game takes a Start pressed on port 1 (``bot_starts``): from 114 frames after
# a clear (checkVirusLeft [$B269]), 98 after a top-out or a draw (playerLoses_endScreen
# [$959A]) and 194 after a match's last round (the options screen); measured on the real game.
START_TAKEN_AFTER = {"clear": 114, "top-out": 98, "draw": 98}
START_TAKEN_AFTER_MATCH = 194
START = int(Button.START)
PLAYING = (Phase.INTRO, Phase.PLAYING, Phase.PAUSED, Phase.ROUND_LOST)


@dataclass(frozen=True)
class VersusSetup:
    """The options screen of a two-player match: each player's level 0..20 and speed 0..2;
    ``seeds``: the RNG state (16 bits) each match starts from (cycled). Raises ValueError."""

    level1: int
    speed1: int
    level2: int
    speed2: int
    seeds: tuple[int, ...] = (0x8988,)

    def __post_init__(self) -> None:
        for name in ("level1", "level2"):
            if not 0 <= getattr(self, name) <= 20:
                raise ValueError(
                    f"{name} must be 0..20 (the options screen), got {getattr(self, name)}"
                )
        for name in ("speed1", "speed2"):
            if getattr(self, name) not in (0, 1, 2):
                raise ValueError(f"{name} must be 0, 1 or 2, got {getattr(self, name)}")
        if not self.seeds or any(not 2 <= s <= 0xFFFF for s in self.seeds):
            raise ValueError(f"seeds must be 16-bit RNG states of 2 or more, got {self.seeds}")


@dataclass
class RoundRecord:
    """One round as the console played it (ground truth): ``winner`` 1, 2 or 0 (a draw, or
    not over), ``end`` "clear", "top-out", "draw" or None, console frames of its Start, of
    its state 0's picture and of the first picture after its end, the victories after it.
    ``play_latch`` (the emulator's): the firmware's number of the latch group read in the
    round's first frame of play, the loop's numbering of console frames (the others count
    video frames, lag frames too), or None."""

    match: int
    round: int
    start_press: int
    start_frame: int
    end_frame: int | None = None
    winner: int = 0
    end: str | None = None
    victories: tuple[int, int] = (0, 0)
    play_latch: int | None = None


class Opponent:
    """Player 1 played by a placement policy (``act(game) -> Move``, policy.versus's
    players): at each spawn of player 1's pill it plans on ``Versus.player(0).game()`` and
    plays the masks, nothing otherwise. ``None`` policy: player 1 never presses. ``make``
    (instead of ``policy``): a picklable callable that builds the policy at its first use, in
    the console's own process in real time (an ONNX session cannot be sent there)."""

    def __init__(self, policy: Any | None, make: Callable[[], Any] | None = None) -> None:
        self.policy = policy
        self.make = make
        self.queue: list[int] = []

    def __call__(self, v: engine.Versus) -> int:
        if self.policy is None and self.make is not None:
            self.policy, self.make = self.make(), None
        if self.policy is None or int(v.phase) != int(Phase.PLAYING):
            self.queue = []
            return 0
        if not self.queue:
            g = v.player(0).game()
            if at_spawn(g):
                self.queue = [int(m) for m in self.policy.act(g).masks]
        return self.queue.pop(0) if self.queue else 0


class SimVersusConsole(SimConsole):
    """The module docstring. ``setup``: the match options; ``opponent``: player 1's pad
    (``mask = opponent(versus)`` each frame of play), None: the firmware's port 1 (the bot
    plays both ports; the Starts are still the console's, as player 1's script presses them).
    The rest as SimConsole's (its ``levels`` is the bot's level). Raises ValueError for bad
    arguments."""

    name = "sim"

    def __init__(
        self,
        setup: VersusSetup,
        profile: Profile,
        *,
        opponent: Callable[[engine.Versus], int] | None,
        realtime: bool = False,
        capture_seed: int = 0,
        console_seed: int = 0,
        max_frames: int = 200_000,
        device: Any = None,
        link_faults: Sequence[Any] = (),
        p1_wait: int = 0,
        bot_starts: bool = False,
        intro_retries: tuple[int, int] = (0, 0),
    ) -> None:
        if bot_starts and opponent is not None:
            raise ValueError("bot_starts: the bot plays port 1 (opponent None)")
        super().__init__(
            [SimLevel(setup.level2, setup.speed2, setup.seeds[0])],
            profile,
            realtime=realtime,
            capture_seed=capture_seed,
            console_seed=console_seed,
            max_frames=max_frames,
            device=device,
            link_faults=link_faults,
        )
        self.setup = setup
        self.opponent = opponent
        self.p1_wait = p1_wait  # player 1's Start this many frames late, the loop not told when
        # Every Start is port 1's, the bot's, taken when the real game would take it (a Start
        # pressed too early is lost, as on a console): bot against bot with no script
        self.bot_starts = bot_starts
        # Frames each bottle's intro loses to addVirus [$9D19] placing no virus ("start again
        # next frame"), at its start: player 1's, player 2's (the real game's vary by round)
        self.intro_retries = intro_retries
        self._held1 = 0  # port 1's byte last frame (a press is a new bit)
        self.menu = None  # no menus: black until the first round
        self.v: engine.Versus | None = None
        self.rounds: list[RoundRecord] = []
        self.matches = 0  # matches begun
        self._start_at: int | None = None  # the frame player 1's Start is taken in
        self._state0_frame = 0  # the frame whose picture is the round's state 0
        self._intro: engine.Versus | None = None  # state 0, shown partly until then
        self._ended_at: int | None = None  # first frame after the last round's end
        self._end_state: engine.Versus | None = None  # the last round's end, as shown
        self._most = 0  # the intro's frames: the slower bottle's viruses and retries
        self._shown: dict[int, tuple[str, Any]] = {}  # frame -> ("black"|"intro"|"play", ...)

    # ---- the game --------------------------------------------------------------------------

    def _latch(self, g: int) -> None:
        t = self.latch_ns(g)
        self._fault_tick(g, t)
        us = self.device_us(t)
        reads = getattr(self.device, "read_ports", None)
        if reads is None:
            raise ValueError("the two-player console needs a controller with both ports")
        mask1, mask2 = reads(us)
        if tuple(reads(us + READ_GAP_US)) != (mask1, mask2):
            raise AssertionError("the two reads of one frame differ")
        if self.bot_starts:
            if mask1 & START and not self._held1 & START and self._takes_start(g):
                self._begin_round(g)
            self._held1 = mask1
        elif self._start_at is not None and g >= self._start_at:
            self._begin_round(g)
        v = self.v
        shown: tuple[str, Any] = ("black", None)
        if v is not None and self._intro is not None and g < self._state0_frame:
            k = g - (self._state0_frame - 1 - self._most)  # intro frames so far
            if k > 0:
                shown = (
                    "intro",
                    (self._intro, (k - self.intro_retries[0], k - self.intro_retries[1])),
                )
        elif v is not None:
            self._intro = None
            if Phase(int(v.phase)) in PLAYING:
                shown = ("play", v.clone())
                v.step(mask1 if self.opponent is None else self.opponent(v), mask2)
                self.masks[g] = mask2
                if Phase(int(v.phase)) not in PLAYING:
                    self._round_ended(g + 1)
            else:
                shown = ("play", self._end_state)
        self._shown[g] = shown
        self._shown.pop(g - PICTURES_KEPT, None)
        self.masks.pop(g - MASKS_KEPT, None)
        self.frame = g + 1
        self._pending_close = g

    def _takes_start(self, g: int) -> bool:
        """``bot_starts``: whether the game takes a Start pressed in frame g: before the first
        round (the options screen), or after a round's end screens open (START_TAKEN_AFTER)."""
        if self.v is None:
            return True
        if Phase(int(self.v.phase)) in PLAYING or self._ended_at is None or not self.rounds:
            return False
        last = self.rounds[-1]
        if int(self.v.phase) == int(Phase.MATCH_OVER):
            return g >= self._ended_at + START_TAKEN_AFTER_MATCH
        return g >= self._ended_at + START_TAKEN_AFTER.get(last.end or "clear", 114)

    def _begin_round(self, g: int) -> None:
        """Player 1's Start latched in frame g: the next round, or a new match."""
        self._start_at = None
        s = self.setup
        r1, r2 = self.intro_retries
        self._most = max(level_viruses(s.level1) + r1, level_viruses(s.level2) + r2)
        first = self.v is None or int(self.v.phase) == int(Phase.MATCH_OVER)
        load = LOAD_FRAMES if first else NEXT_ROUND_LOAD_FRAMES
        self._state0_frame = g + 1 + load + self._most
        # state 0's frameCounter: the console's after the NMI of the frame before its picture
        fc = (self._state0_frame - 1 + self.fc_phase) & 0xFF
        if self.v is None or int(self.v.phase) == int(Phase.MATCH_OVER):
            seed = s.seeds[self.matches % len(s.seeds)]
            self.v = engine.Versus(s.level1, s.speed1, s.level2, s.speed2, seed, fc)
            self.matches += 1
            number = 1
        else:
            self.v.next_round(fc)
            number = self.rounds[-1].round + 1
        self._intro = self.v.clone()
        self.rounds.append(RoundRecord(self.matches, number, g, self._state0_frame))

    def _round_ended(self, g: int) -> None:
        assert self.v is not None
        record_round_end(self.rounds, self.v, g)
        self._ended_at = g
        self._end_state = _redrawn(self.v)

    def start_level(
        self, level: int, speed: int, first_frame: int, previous: LevelEnd | None
    ) -> StartPresses:
        """The next round: player 1 presses Start in ``first_frame``, or when the end screens
        take it (``ROUND_END_WAIT`` frames after the last round's end), ``p1_wait`` frames later
        (a person's pace: the loop is then not told when, ``start_unseen``, as on the rig).
        The bot presses nothing. Raises CannotStart when (level, speed) is not player 2's."""
        s = self.setup
        if (level, speed) != (s.level2, s.speed2):
            raise CannotStart(
                f"player 2 plays level {s.level2} speed {s.speed2} in this match, "
                f"not level {level} speed {speed}"
            )
        if self.bot_starts:  # the bot presses Start on port 1, timed off the loop's round end
            over = self.v is not None and int(self.v.phase) == int(Phase.MATCH_OVER)
            if over:
                return versus_round_start(first_frame, previous, VERSUS_START_AFTER_MATCH)
            return versus_round_start(first_frame, previous)
        with self._lock:
            start = first_frame
            if self._ended_at is not None:
                start = max(start, self._ended_at + ROUND_END_WAIT)
            self._start_at = start + self.p1_wait
        if self.p1_wait:
            return StartPresses(first_frame, [0], first_frame, start_unseen=True)
        return StartPresses(first_frame, [0], start)

    @property
    def finished(self) -> bool:
        return False

    # ---- pictures ------------------------------------------------------------------------------

    def picture_state(self, g: int) -> engine.Game | None:
        """Player 2's bottle in console frame g as a one-player state is not kept (KeyError)."""
        raise KeyError(g)

    def holds_picture(self, g: int) -> bool:
        with self._lock:
            return g in self._shown

    def picture_status(self, g: int) -> int:
        if self.frame <= g + 1:
            return 0
        return 1 if g in self._shown else -1

    def shown(self, g: int) -> tuple[np.ndarray, dict[str, Any]]:
        """The picture of console frame g (RGB uint8 [240, 256, 3]) and its truth (the module
        docstring). Raises KeyError when frame g is not latched yet or long gone."""
        what, data = self._shown[g]
        truth: dict[str, Any] = {
            "console_frame": g - self.device_base_frame,
            "sim_frame": g,
            "facts": None,
            "versus": None,
            "round": len(self.rounds),
        }
        if what == "black":
            return np.zeros((240, 256, 3), np.uint8), truth
        if what == "intro":
            state, k = data
            data = _partial_intro(state, k)
        facts = engine.versus_screen_facts(data)
        truth["facts"] = facts.player(1)
        truth["versus"] = facts
        return engine.render_versus(data), truth

    def report(self) -> dict[str, Any]:
        """``{"sim": ...}``: SimConsole's, with every round (RoundRecord) and the matches
        (begun, and won by each player)."""
        out = super().report()
        sim = out["sim"]
        sim.pop("levels", None)
        sim["setup"] = asdict(self.setup)
        sim["rounds"] = [asdict(r) for r in self.rounds]
        sim["matches"] = matches_won(self.rounds, self.matches)
        return out


def record_round_end(rounds: list[RoundRecord], v: engine.Versus, g: int) -> None:
    """Fills the last of ``rounds`` as the round ``v`` (just ended, its first frame after the
    end ``g``) ended: the victories, the winner (who gained one; 0 a draw) and how."""
    rec = rounds[-1]
    before = rounds[-2].victories if len(rounds) > 1 and rec.round > 1 else (0, 0)
    now = (int(v.victories[0]), int(v.victories[1]))
    rec.victories = now
    rec.end_frame = g
    gained = (now[0] - before[0], now[1] - before[1])
    rec.winner = 1 if gained[0] > gained[1] else 2 if gained[1] > gained[0] else 0
    if rec.winner == 0:
        rec.end = "draw"
    else:
        rec.end = "clear" if v.player(rec.winner - 1).virus_left == 0 else "top-out"


def matches_won(rounds: list[RoundRecord], begun: int) -> dict[str, int]:
    """The report's matches: begun, and won by each player (a round that reached 3)."""
    won = [0, 0]
    for r in rounds:
        if 3 in r.victories:
            won[r.victories.index(3)] += 1
    return {"begun": begun, "won_by_p1": won[0], "won_by_p2": won[1]}


def _redrawn(v: engine.Versus) -> engine.Versus:
    """A round's end as the console shows it while its end screens wait: each bottle redrawn
    from its field (the NMI keeps redrawing a row a frame; a cleared cell $Bx is drawn as $Fx),
    so the loser's emptied lower half (emptyLowerFieldOnLose_2P [$96D0]) and a cleared
    bottle's last virus show. The end screens' text boxes (STAGE CLEAR, DRAW) are not drawn."""
    out = v.clone()
    for i in range(2):
        p = out.player(i)
        field = np.asarray(p.field)
        p.shown[:] = np.where((field & 0xF0) == 0xB0, (field & 0x0F) | 0xF0, field)
    return out


def _partial_intro(state: engine.Versus, ks: tuple[int, int]) -> engine.Versus:
    """Round state 0 with only the first ``ks[i]`` viruses of player i's bottle drawn (field
    order)."""
    out = state.clone()
    for i, k in enumerate(ks):
        k = max(0, k)
        p = out.player(i)
        viruses = np.flatnonzero((np.asarray(p.field) & 0xF0) == 0xD0)
        for pos in viruses[k:]:
            p.field[pos] = p.shown[pos] = 0xFF
    return out
