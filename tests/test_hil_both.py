"""``hil run --versus --both``: the bot on both controller ports, bot against bot. Player 1's
bottle has its own tracker, schedule and decision (hil.loop.runtime.Seat) on port 1, the
frame clock, the link and the reader are shared; the options screen on the rig is set on both
ports (hil.menus.BothMenuDriver)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from engine.constants import Button
from hil.consoles.base import LevelEnd, versus_round_start
from hil.loop.report import mirrored
from hil.menus import BothMenuDriver
from perception.screens import ScreenReader, clean_room_prototypes
from tests.test_versus_menus import TwoPlayerOptions


def hil(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hil.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_bot_against_bot_plays_a_match_with_each_player_on_its_own_port():
    """Player 1 (4 viruses) against player 2 (28): player 1's bottle is played through port 1
    by the loop (an idle player 1 never clears, so its clears are the bot's), every round is
    read the same by both trackers, and neither desyncs."""
    run = hil(
        "run", "--versus", "--both", "--fast", "--reader", "oracle",
        "--profile", "ideal_720p_nearest", "--level", "6", "--speed", "1",
        "--p1-level", "0", "--frames", "20000", "--view", "none",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    s = json.loads(run.stdout)
    vs, truth = s["versus"], s["sim"]["rounds"]
    assert vs["matches"] == 1 and vs["rounds"] == len(truth) >= 3
    assert s["desyncs"] == 0 and vs["p1"]["desyncs"] == 0 and s["missed_decisions"] == 0
    # player 1 won by clearing its bottle: its pills came from the loop on port 1
    p1_clears = [r for r in truth if r["winner"] == 1 and r["end"] == "clear"]
    assert p1_clears, truth
    for rec, real in zip(s["levels"], truth, strict=True):
        mine, theirs = rec["round"]["result"], rec["p1"]["result"]
        assert mine.startswith("won") == (real["winner"] == 2), (mine, real)
        assert theirs.startswith("won") == (real["winner"] == 1), (theirs, real)
        assert rec["p1"]["pills"] > 0 and rec["p1"]["base_frame"] == real["start_frame"]
    assert vs["p1"]["rounds_agreed"] == len(truth)
    # both players' decisions are the run's
    assert s["decisions"] >= sum(r["pills"] + r["p1"]["pills"] for r in s["levels"])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--both"], "--both is for --versus"),
        (["--versus", "--both", "--p1", "greedy"], "with --both the bot plays player 1"),
        (["--versus", "--both", "--p1-wait", "5"], "with --both the bot plays player 1"),
        (["--versus", "--both", "--port2-only"], "not allowed with argument"),
    ],
)
def test_bad_both_options_are_one_line_and_exit_2(argv, says):
    run = hil("run", "--view", "none", *argv, timeout=60)
    assert run.returncode == 2, run.stderr
    assert says in run.stderr and run.stderr.strip().count("\n") == 0, run.stderr


def test_on_the_rig_both_takes_player_1_s_level_and_speed():
    """--p1-level and --p1-speed are the bot's own settings with --both (not a simulated
    player's): the run gets past them to the next check (the capture)."""
    run = hil("run", "--versus", "--both", "--port", "/dev/ttyACM9", "--capture", "0",
              "--p1-level", "3", "--p1-speed", "2", "--view", "none", timeout=60)  # fmt: skip
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0, run.stderr
    assert "player 1 is the person" not in run.stderr


class BothPorts(TwoPlayerOptions):
    """TwoPlayerOptions with pad 1 from the driver's port-1 schedule (no person)."""

    def __init__(self, *, title: bool) -> None:
        self.masks1: dict[int, int] = {}
        super().__init__(lambda c: c.masks1.pop(c.frame, 0), title=title)

    def send1(self, masks: Sequence[int]) -> int:
        first = max(self.frame + self.lead, max(self.masks1, default=-1) + 1)
        for i, m in enumerate(masks):
            self.masks1[first + i] = int(m)
        return first


@pytest.mark.parametrize(("title", "p1", "p2"), [(True, (3, 0), (12, 2)), (False, (20, 2), (0, 0))])
def test_the_bot_sets_both_players_and_starts_the_match_on_port_1(title, p1, p2):
    c = BothPorts(title=title)
    reader = ScreenReader(clean_room_prototypes())
    driver = BothMenuDriver(c.newest, c.send, c.send1, reader.read_nes)
    res = driver.start_match(*p1, *p2)
    assert c.screen == "level" and c.started_at is not None
    assert (c.levels[0], c.speeds[0], c.levels[1], c.speeds[1]) == (*p1, *p2)
    assert res.start_frame == c.started_at  # its own Start: the frame is known
    assert (res.level1, res.speed1, res.level, res.speed) == (*p1, *p2)


def test_a_later_round_s_start_is_one_press_on_port_1_after_the_end_screen_opens():
    p = versus_round_start(1000, LevelEnd(4, 1, "stage_clear", 990))
    assert p.port == 1 and p.start_frame == 1110
    assert [i for i, m in enumerate(p.masks) if m] == [110] and p.masks[110] == int(Button.START)
    assert versus_round_start(1000, None).start_frame == 1000


def test_two_players_results_mirror_each_other():
    assert mirrored("won_clear", "lost_clear") and mirrored("lost_top_out", "won_top_out")
    assert not mirrored("won_clear", "lost_top_out") and not mirrored("won_clear", "won_clear")
    assert not mirrored("unknown", "unknown") and not mirrored(None, "won_clear")


def test_the_bot_s_own_starts_are_timed_off_the_round_s_end_as_the_loop_saw_it():
    """The rig's rounds with the bot on both ports: every Start is one press on port 1 timed
    from the last round's end as the loop knows it, and the console takes it only once the end
    screens open (114 frames after a clear, 98 after a top-out), as the real game does. A round
    player 1 cleared leaves player 2's shadow short of the end: timed off it alone, the Start
    came too early and was lost (the real game in real time, round 3 never began)."""
    # player 1 (4 viruses) clears first, every round
    s = _sim_match((0, 1), (6, 1), 20_000, both=True, bot_starts=True)
    truth = s["sim"]["rounds"]
    assert s["versus"]["matches"] == 1 and len(truth) >= 3, truth
    assert any(r["winner"] == 1 and r["end"] == "clear" for r in truth), truth
    for prev, nxt in zip(truth, truth[1:], strict=False):
        assert nxt["start_press"] - prev["end_frame"] <= 200, (prev, nxt)  # one press, taken
    assert s["desyncs"] == 0


def _sim_match(
    p1: tuple[int, int], p2: tuple[int, int], frames: int, *, both: bool, **console: Any
) -> dict[str, Any]:
    """One match on the simulated two-player console, lockstep, the oracle reader, the
    heuristic on the bot's port(s) (player 1 idle unless ``both``); ``console``: more
    SimVersusConsole options. Returns the run's summary."""
    from calibration import Profile
    from hil.consoles.sim_versus import Opponent, SimVersusConsole, VersusSetup
    from hil.loop.levels import LevelPlan
    from hil.loop.observation import make_reader
    from hil.loop.policies import make_policy
    from hil.loop.runtime import EnginePlanner, RunSettings, play

    sim = SimVersusConsole(
        VersusSetup(*p1, *p2),
        Profile.load("ideal_720p_nearest"),
        opponent=None if both else Opponent(None),
        **console,
    )
    settings = RunSettings(levels=[LevelPlan(*p2)] * 5, max_frames=frames, opponent=p1, both=both)
    try:
        return play(
            settings,
            sim,
            make_reader("oracle", both=both),
            make_policy("heuristic"),
            EnginePlanner(),
            p1_policy=make_policy("heuristic") if both else None,
        )
    finally:
        sim.close()


class _FakeLink:
    """What hil.loop.wire.Wire uses of a Link: STATUS messages to take, SCHEDULEs recorded."""

    def __init__(self) -> None:
        from collections import deque

        self.statuses: deque = deque()
        self.anomalies: deque = deque()
        self.sent: list[tuple[int, bytes, int | None]] = []
        self.last_status_frame = None
        self.hello = None

    def poll(self) -> list:
        return []

    def schedule(self, first: int, data: bytes, nes_port: int | None = None):
        from hil.link.protocol import Ack

        self.sent.append((first, bytes(data), nes_port))
        return Ack(accepted=len(data))


def _wire(both: bool):
    from types import SimpleNamespace

    from hil.loop.clock import FrameClock
    from hil.loop.eventlog import EventLog
    from hil.loop.schedule import Schedule
    from hil.loop.stats import Stats
    from hil.loop.wire import Wire

    link = _FakeLink()
    ctl = SimpleNamespace(link=link)
    scheds = {2: Schedule(), 1: Schedule()} if both else {None: Schedule()}
    primary = next(iter(scheds))
    wire = Wire(
        ctl,  # type: ignore[arg-type]
        FrameClock(),
        scheds[primary],
        Stats(),
        EventLog(None),
        lambda: 0,
        on_latched=lambda: None,
        on_renumber=lambda shift: None,
        margin_ms=3.0,
        feed_frames=30,
        port=primary,
        others={1: scheds[1]} if both else None,
    )
    return wire, link, scheds


def test_the_wire_gives_each_port_its_own_byte_and_schedules_each_on_its_own_port():
    from hil.link.protocol import Status

    wire, link, scheds = _wire(both=True)
    link.statuses.append(Status(frame=39, first_latch_us=0))
    wire.poll()
    assert wire._send_now(40, [8, 8], "plan", 1) and wire._send_now(40, [4], "plan")
    assert link.sent == [(40, bytes([8, 8]), 1), (40, bytes([4]), 2)]
    assert scheds[1].planned == {40: 8, 41: 8} and scheds[2].planned == {40: 4}
    link.statuses.append(
        Status(frame=40, first_latch_us=16639, mask=8, mask_p2=4, underruns=1, underruns_p2=2)
    )
    wire.poll()
    assert scheds[1].latched[40] == 8 and scheds[2].latched[40] == 4
    assert wire.stats.underruns == 3  # both ports'


@pytest.mark.parametrize("both", [False, True])
def test_a_watchdog_trip_releases_what_was_scheduled_and_the_feed_starts_again(both):
    """The firmware flushes its queues when the host is silent past the watchdog (PROTOCOL.md,
    "Host watchdog"): the host must not count on the frames it had scheduled (a placement
    there never plays) nor wait for its old feed's end to send more."""
    from hil.link.protocol import Status

    wire, link, scheds = _wire(both)
    for sched in scheds.values():
        sched.on_schedule(10, [0] * 40 + [1, 1])  # fed to frame 51, a placement at 50-51
    link.statuses.append(Status(frame=20, first_latch_us=1000, watchdog_trips=1))
    wire.poll()
    assert wire.stats.watchdog_trips == 1
    for sched in scheds.values():
        assert sched.feed_end == -1 and max(sched.planned) <= 20
        assert sched.mask_of(50) == 0


@pytest.mark.parametrize("both", [True, False])
def test_a_round_s_base_is_the_game_s_when_a_bottle_s_intro_takes_an_extra_frame(both):
    """addVirus [$9D19] may place no virus in a frame, so the bottle with fewer viruses is not
    whole exactly their difference before the intro ends (the real game: 9 frames for 28
    against 20 viruses, not 8). With the other bottle read in the same picture the alignment
    takes the frame both are whole, which is exact: every base is the console's, for each
    player (before, player 2's base came out one frame off)."""
    # 28 against 20 viruses; player 1's intro a frame longer
    s = _sim_match((6, 1), (4, 1), 6_000, both=both, intro_retries=(1, 0))
    truth = s["sim"]["rounds"]
    ended = [r for r in s["levels"] if "base_frame" in r]
    assert ended, s["levels"]
    for rec, real in zip(ended, truth, strict=False):
        assert rec["base_frame"] == real["start_frame"], (rec, real)
        if both:
            assert rec["p1"]["base_frame"] == real["start_frame"], (rec, real)
