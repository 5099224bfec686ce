"""``hil sim record`` and ``hil sim show``: a level of the simulated console, seen through a
capture profile, recorded with its ground truth, shown live, or as a PNG contact sheet.

There is one simulated console and one simulated capture (hil.consoles.sim: SimConsole and its
SimCapture, on the console's clock, the game's level flow); here its pad is played by
:class:`RandomPlayer` (Start on the options screen, then random reachable placements from
``engine.plan``) instead of the firmware. :func:`level_frames` yields what the capture card
delivers during the level, from its intro to its end, with the ground truth of each frame
(:func:`game_truth`); ``record`` writes that to a recording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import engine
from calibration import CaptureModel, Profile, to_nes
from engine.constants import TERMINAL_PHASES, Phase
from hil.consoles.base import CaptureError, Frame
from hil.consoles.sim import SimConsole, SimLevel
from hil.loop.recording import RecordingWriter

Renderer = Callable[[engine.Game], np.ndarray]  # game -> uint8 RGB [240, 256, 3]
DETAIL_X = (96, 160)  # NES pixels shown in the contact sheet's detail panel
DETAIL_Y = (144, 208)


def default_renderer() -> Renderer:
    """The engine's NES renderer with the clean-room tiles (engine.render_frame)."""
    return engine.render_frame


class RandomPlayer:
    """Chooses a random reachable placement for each pill and plays its button masks.

    ``taps_only`` uses the planner's faster taps-only search (docs/PLANNER.md). Call
    :meth:`mask` once per console frame, before ``game.step``; it plans when the previous plan
    has been played out and a pill is (or is about to be) in play.
    """

    def __init__(self, rng: np.random.Generator, taps_only: bool = False) -> None:
        self.rng = rng
        self.taps_only = taps_only
        self.queue: list[int] = []
        self.retry_frame = -1
        self.placements: list[int] = []  # chosen placement indices, in order

    def pad(self, game: engine.Game | None) -> int:
        """The byte the pad gives in a console frame whose state before it is ``game`` (None:
        the options screen, where it presses Start); nothing once the level has ended."""
        if game is None:
            return int(engine.Button.START)
        if Phase(int(game.phase)) in TERMINAL_PHASES:
            return 0
        return self.mask(game)

    def mask(self, game: engine.Game) -> int:
        if not self.queue and Phase(int(game.phase)) == Phase.PLAYING:
            if int(game.frame) >= self.retry_frame:
                self._plan(game)
        return self.queue.pop(0) if self.queue else 0

    def _plan(self, game: engine.Game) -> None:
        plan = engine.plan(game, taps_only=self.taps_only)
        if plan.status != 0 or len(plan) == 0:
            self.retry_frame = int(game.frame) + 8  # nothing to plan yet: look again soon
            return
        choice = int(plan.placements[int(self.rng.integers(len(plan)))])
        self.placements.append(choice)
        self.queue = [int(m) for m in plan.masks(choice)]


def _hex_rows(field: np.ndarray) -> list[str]:
    return [bytes(row).hex() for row in np.asarray(field, dtype=np.uint8).reshape(16, 8)]


def _pill_on_screen(p: engine.render.PillOnScreen | None) -> dict[str, Any] | None:
    if p is None:
        return None
    out: dict[str, Any] = {
        "colors": [int(c) for c in p.colors],
        "rotation": int(p.rotation),
        "box": [int(v) for v in p.box],
    }
    for key in ("x", "y", "throw_frame"):
        if hasattr(p, key):
            out[key] = int(getattr(p, key))
    return out


def game_truth(game: engine.Game) -> dict[str, Any]:
    """JSON-ready ground truth of a game state and of its picture (``render_frame(game)``).

    The state (RAM): ``state_frame`` (engine ``frame``), ``phase``, ``field`` (16 rows of 16 hex
    digits, RAM $0400-$047F, row 0 at the top, ARCHITECTURE.md cell codes), ``pill`` (the falling
    pill: RAM $85 x, $86 y counted from the bottom, $A5 rotation, colours; None between pills),
    ``next`` (colours, rotation), ``virus_left``, ``score``, ``buttons`` (RAM btns_held $F7: the
    mask latched by the step that made the state). The picture
    (``engine.screen_facts``): ``screen.kind``, ``screen.bottle`` (the bottle as the nametable
    shows it, hex rows; lags ``field`` by up to 16 frames), ``screen.falling`` and
    ``screen.next`` (pills as drawn: colours, rotation, box (left, top, width, height) in NES
    pixels; x, y or throw_frame), ``screen.virus_frame``.
    """
    phase = Phase(int(game.phase))
    falling = phase in (Phase.PLAYING, Phase.PAUSED) and int(game.next_action) == 0
    pill = None
    if falling:
        pill = {
            "x": int(game.pill_x),
            "y": int(game.pill_y),
            "rotation": int(game.pill_rotation),
            "colors": [int(c) for c in game.pill_colors],
        }
    facts = engine.screen_facts(game)
    return {
        "state_frame": int(game.frame),
        "phase": phase.name,
        "field": _hex_rows(game.field),
        "pill": pill,
        "next": {
            "colors": [int(c) for c in game.next_colors],
            "rotation": int(game.next_rotation),
        },
        "virus_left": int(game.virus_left),
        "score": int(game.score),
        "buttons": int(game.btns_held),
        "screen": {
            "kind": facts.kind.name,
            "bottle": _hex_rows(facts.bottle),
            "falling": _pill_on_screen(facts.falling),
            "next": _pill_on_screen(facts.next),
            "virus_frame": int(facts.virus_frame),
        },
    }


@dataclass
class SimSettings:
    """What ``hil sim`` plays: the game (level 0..24, speed 0..2, 16-bit seed) and the player."""

    level: int = 10
    speed: int = 1
    seed: int = 0x8988
    player_seed: int = 0
    taps_only: bool = False


def sim_console(
    settings: SimSettings,
    profile: Profile,
    *,
    capture_seed: int = 0,
    render: Renderer | None = None,
    max_frames: int = 200_000,
) -> tuple[SimConsole, RandomPlayer]:
    """The simulated console (hil.consoles.sim.SimConsole, lockstep) set to ``settings``' level,
    its pad played by a :class:`RandomPlayer`: Start on the options screen, then random
    reachable placements. ``max_frames``: console frames its capture covers. Raises ValueError
    for a bad level, speed or seed."""
    player = RandomPlayer(np.random.default_rng(settings.player_seed), settings.taps_only)
    console = SimConsole(
        [SimLevel(settings.level, settings.speed, settings.seed)],
        profile,
        capture_seed=capture_seed,
        max_frames=max_frames,
        render=render or default_renderer(),
        pad=player.pad,
    )
    return console, player


def level_frames(
    console: SimConsole, max_frames: int, intro: bool = False
) -> Iterator[tuple[Frame, dict[str, Any]]]:
    """Up to ``max_frames`` captured frames of the console's level (BGR, the profile's size) and
    their ground truth: from the first picture of the whole board (the frame before state 0's;
    ``intro``: from the first picture of the intro, drawn virus by virus) to the first that
    shows the level's end (stage clear or top-out). ``index`` counts these frames from 0,
    ``time_ns`` is the console's time (ns since its frame 0). Truth: ``device_index`` (the capture
    device's frame), ``console_frame`` (the frame shown, counted from the Start press's),
    ``odd_frame`` (the frame combing shows on the odd lines) and :func:`game_truth` of the state
    shown (console frame ``s0 + k`` shows state ``k``, s0 the level's LevelRecord.start_frame).
    Raises ValueError for ``max_frames`` < 1."""
    if max_frames < 1:
        raise ValueError(f"max_frames must be at least 1, got {max_frames}")
    n = 0
    t0 = console.host_ns(0)
    while n < max_frames:
        try:
            frame = console.capture.newest(0.0)
        except CaptureError:
            return
        assert frame is not None and frame.truth is not None
        g = int(frame.truth["sim_frame"])
        state = console.picture_state(g)
        if state is None:
            if n:
                return  # the level's screen is gone
            continue
        s0 = console.records[-1].start_frame
        if not n and not intro and (s0 < 0 or g < s0 - 1):
            continue
        truth = {
            "device_index": frame.truth["device_index"],
            "console_frame": g,
            "odd_frame": frame.truth["odd_frame"],
            **game_truth(state),
        }
        yield Frame(frame.image, frame.time_ns - t0, n), truth
        n += 1
        if Phase(int(state.phase)) in TERMINAL_PHASES:
            return


def record(
    settings: SimSettings,
    profile: Profile,
    frames: int,
    out: str | Path,
    codec: str = "ffv1",
    capture_seed: int = 0,
    render: Renderer | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> int:
    """Play and write a recording of up to ``frames`` captured frames of the level to ``out``
    (:func:`level_frames`); return the count."""
    console, _ = sim_console(
        settings, profile, capture_seed=capture_seed, render=render, max_frames=400 + 3 * frames
    )
    meta = {
        "producer": "hil sim record",
        "level": settings.level,
        "speed": settings.speed,
        "seed": settings.seed,
        "player": "random reachable placements",
        "player_seed": settings.player_seed,
        "taps_only": settings.taps_only,
        "capture_seed": capture_seed,
        "console_hz": profile.timing.console_hz,
    }
    with RecordingWriter(out, profile, codec=codec, meta=meta, overwrite=overwrite) as writer:
        it = level_frames(console, frames)
        if progress:
            from rich.progress import track

            it = iter(track(it, total=frames, description=f"recording {profile.name}"))
        for frame, truth in it:
            writer.write(frame.image, frame.time_ns, truth)
        count = writer.count
    console.close()
    return count


def play_to(
    settings: SimSettings, frame: int, render: Renderer | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Pictures (RGB [240, 256, 3]) of frames ``frame`` and ``frame - 1`` of a RandomPlayer
    game, counted from the level's state 0 (frame 1 shows it, frame 0 the whole board a frame
    earlier) on the simulated console (both the last picture if the level ended first). Raises
    ValueError for ``frame`` < 2."""
    if frame < 2:
        raise ValueError(f"frame must be at least 2, got {frame}")
    console, _ = sim_console(settings, Profile(), render=render, max_frames=1)
    try:
        g = 0
        while not console.records or console.records[0].start_frame < 0:
            console.run_to_frame(g)
            g += 1
        rec = console.records[0]
        pictures = []
        for k in (frame, frame - 1):
            want = rec.start_frame + k - 1  # console frame s0 + k - 1 shows state k - 1
            while console.frame <= want and rec.end_frame is None:
                console.run_to_frame(console.frame)
            if rec.end_frame is not None:
                want = min(want, rec.end_frame)
                console.run_to_frame(want)
            state = console.picture_state(want)
            assert state is not None
            pictures.append(console.render(state))
    finally:
        console.close()
    return pictures[0], pictures[1]


def _describe(p: Profile) -> str:
    g, c, a, t = p.geometry, p.color, p.artifacts, p.timing
    parts = [
        f"{g.width}x{g.height}",
        "8:7 px"
        if abs(g.pixel_aspect - 8 / 7) < 1e-3
        else "1:1 px"
        if abs(g.pixel_aspect - 1) < 1e-3
        else f"{g.pixel_aspect:.3f}:1 px",
        g.interpolation,
    ]
    if any((g.crop_top, g.crop_bottom, g.crop_left, g.crop_right)):
        parts.append(f"crop {g.crop_top}/{g.crop_bottom}/{g.crop_left}/{g.crop_right}")
    if not c.is_identity:
        parts.append(f"{c.range} range, gamma {c.gamma:g}")
    extras = [
        f"hsmooth {a.hsmooth:g}" if a.hsmooth else "",
        f"blur {a.blur:g}" if a.blur else "",
        f"sharpen {a.sharpen:g}" if a.sharpen else "",
        f"noise {a.noise:g}" if a.noise else "",
        a.chroma if a.chroma != "4:4:4" else "",
        f"MJPEG q{a.jpeg_quality}" if a.jpeg_quality is not None else "",
        "combing" if a.combing else "",
    ]
    parts += [e for e in extras if e]
    parts.append(f"{t.capture_hz:g} Hz, latency {t.latency_frames:g} fr")
    return ", ".join(parts)


def contact_sheet(
    profiles: Sequence[Profile],
    nes_frames: Sequence[np.ndarray],
    out: str | Path,
    title: str = "",
) -> Path:
    """Write a PNG: one row per profile: the captured frame, the lower half of the bottle in
    capture pixels (nearest-neighbour display) and ``to_nes`` of the capture (NES pixels).
    ``nes_frames``: the console frame and the one before it (RGB [240, 256, 3]; the second
    feeds interlace combing). Profiles must show that part of the bottle (not cropped)."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    frame, previous = nes_frames[0], nes_frames[-1]
    rows = len(profiles)
    # Wide enough that the NES-pixel and detail panels are drawn at 1:1 or larger.
    fig = Figure(figsize=(16, 3.55 * rows))
    axes = fig.subplots(rows, 3, gridspec_kw={"width_ratios": [1.6, 1.0, 1.0]})
    axes = np.atleast_2d(axes)
    for r, p in enumerate(profiles):
        captured = CaptureModel(p, seed=r)(frame, previous=previous)
        rgb = captured[..., ::-1]
        g = p.geometry
        # The lower half of the bottle interior (NES x 96-159, y 144-207; ARCHITECTURE.md), in
        # capture pixels, drawn pixel for pixel: what the chain does to tile edges.
        x0, x1 = (int(g.offset_x + (x - g.crop_left) * g.scale_x) for x in DETAIL_X)
        y0, y1 = (int(g.offset_y + (y - g.crop_top) * g.scale_y) for y in DETAIL_Y)
        crop = rgb[y0:y1, x0:x1]
        back = to_nes(p, captured)
        panels = [
            (rgb, f"{p.name}: captured ({g.width}x{g.height})"),
            (crop, f"bottle detail, {x1 - x0}x{y1 - y0} capture pixels"),
            (back, "to_nes: back to NES pixels"),
        ]
        for c, (img, label) in enumerate(panels):
            ax = axes[r, c]
            ax.imshow(img, interpolation="antialiased", interpolation_stage="rgba")
            ax.set_title(label, fontsize=9, loc="left")
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_xlabel(_describe(p), fontsize=8, loc="left")
    if title:
        fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.985 if title else 1))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    return path


def show_live(settings: SimSettings, profile: Profile, frames: int, render: Renderer | None) -> int:
    """Play and display captured frames in a matplotlib window (needs a display)."""
    import matplotlib.pyplot as plt

    console, _ = sim_console(settings, profile, render=render, max_frames=400 + 3 * frames)
    plt.ion()
    fig, ax = plt.subplots(figsize=(profile.geometry.width / 100, profile.geometry.height / 100))
    ax.set_axis_off()
    image = None
    shown = 0
    for frame, truth in level_frames(console, frames):
        rgb = frame.image[..., ::-1]
        if image is None:
            image = ax.imshow(rgb)
        else:
            image.set_data(rgb)
        ax.set_title(
            f"{profile.name}: console frame {truth['console_frame']}, {truth['phase']}, "
            f"viruses {truth['virus_left']}",
            fontsize=9,
        )
        plt.pause(1.0 / profile.timing.capture_hz)
        shown += 1
        if not plt.fignum_exists(fig.number):
            break
    plt.ioff()
    console.close()
    return shown
