"""The two-player options screen read off the picture (perception.screens) and player 2's part
of it on the rig (hil.menus.VersusMenuDriver): the person on port 1 chooses 2 players, moves the
highlight and presses Start; the bot sets its own level and speed on port 2."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import engine
from engine.constants import Button
from engine.menu_render import render_options, render_title
from hil.menus import MenuError, VersusMenuDriver
from perception.screens import ScreenPrototypes, ScreenReader, clean_room_prototypes

UP, DOWN, LEFT, RIGHT = int(Button.UP), int(Button.DOWN), int(Button.LEFT), int(Button.RIGHT)
START = int(Button.START)


@pytest.fixture(scope="module")
def reader() -> ScreenReader:
    return ScreenReader(clean_room_prototypes())


def test_the_two_player_options_screen_is_read_whole(reader):
    rng = np.random.default_rng(3)
    for _ in range(60):
        lv, sp, lv2, sp2, sec, music = (int(rng.integers(n)) for n in (21, 3, 21, 3, 3, 3))
        r = reader.read_nes(render_options(lv, sp, music, sec, versus=(lv2, sp2)))
        got = (r.kind, r.players, r.level, r.speed, r.level2, r.speed2, r.section)
        assert got == ("OPTIONS", 2, lv, sp, lv2, sp2, sec)
        one = reader.read_nes(render_options(lv, sp, music, sec))
        assert (one.players, one.level, one.speed, one.level2, one.section) == (
            1, lv, sp, None, sec
        )  # fmt: skip


def test_prototypes_of_an_older_file_still_read_one_player(tmp_path, reader):
    """A screens.npz written before the two-player fields loads; its options screen reads as
    before, players and the highlight unknown."""
    p = reader.p
    path = tmp_path / "screens.npz"
    np.savez(
        path,
        **{k: getattr(p, k) for k in ("whole", "kind", "demo_bottle", "box", "box_kind")},
        **{k: getattr(p, k) for k in ("digits", "digit_level", "speed_row", "row_speed")},
        heart=p.heart,
        heart_players=p.heart_players,
        demo_radius=np.float32(p.demo_radius),
        box_radius=np.float32(p.box_radius),
        source=np.array("old"),
        version=np.int32(1),
    )
    old = ScreenReader(ScreenPrototypes.load(path))
    r = old.read_nes(render_options(7, 2, 1, 1))
    assert (r.kind, r.level, r.speed, r.players, r.section) == ("OPTIONS", 7, 2, None, None)


class TwoPlayerOptions:
    """The two-player options screen as toDemo_orOptions [$9961] runs it, lockstep, for the
    driver's two callables: pad 1 (``person``, called each frame with the state) moves the
    highlight (Up/Down, no wraparound) and presses Start; each pad's Left/Right moves its own
    level (0..20) on row 0 and speed (0..2) on row 1, on a press's first frame. Pictures are the
    clean-room screens, shown ``lag`` frames late; masks sent start ``lead`` frames ahead."""

    def __init__(self, person: Callable[[TwoPlayerOptions], int], *, title: bool = False) -> None:
        self.person = person
        self.screen = "title" if title else "options"
        self.players = 1 if title else 2
        self.section, self.levels, self.speeds = 0, [0, 0], [1, 1]
        self.frame = -1
        self.masks: dict[int, int] = {}
        self.prev = [0, 0]
        self.started_at: int | None = None
        self.shown: deque[tuple[int, np.ndarray]] = deque()
        self.lag, self.lead = 2, 2

    def send(self, masks: Sequence[int]) -> int:
        first = max(self.frame + self.lead, max(self.masks, default=-1) + 1)
        for i, m in enumerate(masks):
            self.masks[first + i] = int(m)
        return first

    def _picture(self) -> np.ndarray:
        if self.screen == "title":
            return render_title(self.players)
        if self.screen == "level":
            return engine.render_versus(engine.Versus(self.levels[0], 1, self.levels[1], 1, 7, 0))
        versus = (self.levels[1], self.speeds[1]) if self.players == 2 else None
        return render_options(self.levels[0], self.speeds[0], 0, self.section, versus=versus)

    def _step(self) -> None:
        self.frame += 1
        pads = [self.person(self), self.masks.pop(self.frame, 0)]
        edges = [pads[i] & ~self.prev[i] for i in range(2)]
        self.prev = pads
        if self.screen == "title":
            if edges[0] & DOWN:
                self.players = 2
            if edges[0] & START:
                self.screen = "options"
        elif self.screen == "options":
            if edges[0] & START:
                self.screen, self.started_at = "level", self.frame
            if edges[0] & DOWN:
                self.section = min(2, self.section + 1)
            if edges[0] & UP:
                self.section = max(0, self.section - 1)
            for i in range(self.players):
                step = (1 if edges[i] & RIGHT else 0) - (1 if edges[i] & LEFT else 0)
                if self.section == 0:
                    self.levels[i] = min(20, max(0, self.levels[i] + step))
                elif self.section == 1:
                    self.speeds[i] = min(2, max(0, self.speeds[i] + step))
        self.shown.append((self.frame, self._picture()))

    def newest(self) -> tuple[int, np.ndarray] | None:
        self._step()
        while len(self.shown) > self.lag + 1:
            self.shown.popleft()
        return self.shown[0]


def person(target: tuple[int, int], bot: tuple[int, int], *, impatient: bool = False):
    """Player 1 as a person plays the options screen: 2 players on the title, its own level and
    speed, the highlight left on each row until the bot's setting has shown for 15 frames (a
    person's reaction; or not at all, ``impatient``), then Start. A press is held 2 frames, then
    released 6."""
    state = {"wait": 30, "seen": 0}

    def pad(c: TwoPlayerOptions) -> int:
        f = c.frame
        shown = (c.levels[1], c.speeds[1])[min(c.section, 1)] == bot[min(c.section, 1)]
        state["seen"] = state["seen"] + 1 if shown else 0
        if state["wait"] > 0 or f % 8 >= 2:
            state["wait"] -= 1
            return 0
        if c.screen == "title":
            return DOWN if c.players != 2 else START
        if c.screen != "options":
            return 0
        lv, sp = c.levels, c.speeds
        if c.section == 0 and lv[0] != target[0]:
            return RIGHT if lv[0] < target[0] else LEFT
        if c.section == 0 and (state["seen"] >= 15 or impatient):
            return DOWN
        if c.section == 1 and sp[0] != target[1]:
            return RIGHT if sp[0] < target[1] else LEFT
        if c.section == 1 and (state["seen"] >= 15 or impatient):
            return START
        return 0

    return pad


def drive(console: TwoPlayerOptions, reader: ScreenReader, level: int, speed: int, said: list):
    driver = VersusMenuDriver(console.newest, console.send, reader.read_nes, say=said.append)
    return driver.start_match(level, speed)


@pytest.mark.parametrize(
    ("title", "bot", "mine"), [(False, (9, 2), (4, 0)), (True, (0, 0), (20, 2))]
)
def test_the_bot_sets_its_level_and_speed_on_port_2_and_the_person_starts(reader, title, bot, mine):
    said: list[str] = []
    c = TwoPlayerOptions(person(mine, bot), title=title)
    res = drive(c, reader, *bot, said)
    assert c.screen == "level" and c.started_at is not None
    assert (c.levels[1], c.speeds[1]) == bot and (c.levels[0], c.speeds[0]) == mine
    assert (res.level, res.speed, res.level1, res.speed1) == (*bot, *mine)
    assert res.start_frame <= c.started_at  # a picture of the options screen before the Start
    assert any("press Start" in m for m in said)
    if title:
        assert any("choose 2 PLAYER GAME" in m for m in said)


def test_a_start_before_the_bot_is_set_is_one_clear_error(reader):
    c = TwoPlayerOptions(person((3, 1), (15, 2), impatient=True))
    with pytest.raises(MenuError, match="Start came before the bot had set its level"):
        drive(c, reader, 15, 2, [])


def test_the_two_player_level_screen_reads_as_a_level_screen(reader):
    """The driver takes a level screen after the two-player options screen as the match begun;
    the one-player prototypes alone read it as the title or the options screen."""
    rng = np.random.default_rng(11)
    for _ in range(12):
        v = engine.Versus(int(rng.integers(21)), 1, int(rng.integers(21)), 1, 0x1234, 0)
        for _ in range(int(rng.integers(0, 300))):
            v.step(int(rng.choice([0, 1, 2, 4])), int(rng.choice([0, 1, 2, 4])))
        assert reader.read_nes(engine.render_versus(v)).kind == "LEVEL"


def test_warming_the_reader_up_changes_no_reading():
    """ScreenReader.warm_up runs every matcher once (the two-player options screen's first
    read was 266 ms on the real game's prototypes, 70 after); the readings stay the same."""
    pics = [render_options(7, 2, 0, 1, versus=(12, 0)), render_options(3, 0, 1, 0), render_title(2)]
    cold = ScreenReader(clean_room_prototypes())
    warm = ScreenReader(clean_room_prototypes())
    warm.warm_up()
    assert [warm.read_nes(p) for p in pics] == [cold.read_nes(p) for p in pics]
