"""The simulated console and capture: ``hil sim record`` and ``hil sim show``.

:class:`RandomPlayer` plays random reachable placements (``engine.plan``) until the placement
policy exists. :class:`SimCapture` steps a game with it, renders the console frames the capture
samples (the NES renderer), passes them through a Profile's forward model and timing model, and
yields what a capture card would deliver (:class:`hil.recording.Frame`) with the ground truth of
each captured frame. ``record`` writes that to a recording; ``show`` displays it live or writes a
PNG contact sheet of several profiles.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import engine
from calibration import CaptureModel, Profile, TimingModel, to_nes
from engine.constants import TERMINAL_PHASES, Phase
from hil.recording import Frame, RecordingWriter

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


class SimCapture:
    """A simulated console seen through a capture chain: yields (Frame, truth) per captured frame.

    The game is stepped one console frame at a time with :class:`RandomPlayer`'s masks; the
    timing model (``profile.timing``, seeded by ``capture_seed``) says which console frame each
    captured frame shows; that frame is rendered (``render``, default engine.render_frame with
    the clean-room tiles) and put through the forward model (``profile``). Stops after
    ``max_frames`` captured frames or when the game reaches stage clear or top-out (the last
    captured frame shows that state).

    Frame convention (docs/CAPTURE.md): console frame n is the frame period that begins with
    NMI n (the n-th controller latch, the engine's n-th ``step``); the picture scanned out in
    it is ``render_frame`` of the state after n - 1 steps (the renderer draws what the console
    shows after the state's next NMI). Console frame 0 shows the initial state.
    """

    def __init__(
        self,
        settings: SimSettings,
        profile: Profile,
        capture_seed: int = 0,
        render: Renderer | None = None,
    ) -> None:
        self.settings = settings
        self.profile = profile
        self.game = engine.Game(settings.level, settings.speed, settings.seed)
        self.player = RandomPlayer(np.random.default_rng(settings.player_seed), settings.taps_only)
        self.render = render or default_renderer()
        self.model = CaptureModel(profile, seed=capture_seed)
        self.timing = TimingModel(
            profile.timing, seed=capture_seed, combing=profile.artifacts.combing
        )
        self.masks: list[int] = []  # masks[n - 1]: the mask latched in console frame n
        self._prev_picture: np.ndarray | None = None

    def ended(self) -> bool:
        """The game reached stage clear or top-out (the engine steps no further)."""
        return Phase(int(self.game.phase)) in TERMINAL_PHASES

    def _step_to(self, state_frame: int, keep_previous: bool = False) -> bool:
        """Step until ``game.frame == state_frame``; False if the game ended before.

        ``keep_previous``: keep the picture of the state one frame before (for combing).
        """
        while int(self.game.frame) < state_frame and not self.ended():
            if keep_previous and int(self.game.frame) == state_frame - 1:
                self._prev_picture = self.render(self.game)
            mask = self.player.mask(self.game)
            self.game.step(mask)
            self.masks.append(mask)
        return int(self.game.frame) >= state_frame

    def picture(self, console_frame: int, keep_previous: bool = False) -> np.ndarray | None:
        """RGB [240, 256, 3] of ``console_frame`` (the state after ``console_frame - 1`` steps),
        stepping the game forward to it; None if the game ended before."""
        if not self._step_to(max(0, console_frame - 1), keep_previous):
            return None
        return self.render(self.game)

    def frames(self, max_frames: int) -> Iterator[tuple[Frame, dict[str, Any]]]:
        """Up to ``max_frames`` captured frames (BGR, profile's size) and their ground truth."""
        if max_frames < 1:
            raise ValueError(f"max_frames must be at least 1, got {max_frames}")
        combing = self.profile.artifacts.combing
        sched = self.timing.schedule(max_frames)
        picture: np.ndarray | None = None
        shown = -1
        for i in range(len(sched)):
            want = int(sched.console_frame[i])
            if want != shown:
                self._prev_picture = None  # set by _step_to when combing needs it
                picture = self.picture(want, keep_previous=combing and want >= 2)
                if picture is None:  # the game ended before this frame
                    return
                shown = want
            assert picture is not None
            image = self.model(picture, previous=self._prev_picture)
            truth = {
                "device_index": int(sched.device_index[i]),
                "console_frame": shown,
                "odd_frame": int(sched.odd_frame[i]),
                **game_truth(self.game),
            }
            yield Frame(image=image, time_ns=int(sched.time_ns[i]), index=i), truth
            if self.ended():
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
    """Play and write a recording of up to ``frames`` captured frames to ``out``; return count."""
    sim = SimCapture(settings, profile, capture_seed=capture_seed, render=render)
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
        it = sim.frames(frames)
        if progress:
            from rich.progress import track

            it = iter(track(it, total=frames, description=f"recording {profile.name}"))
        for frame, truth in it:
            writer.write(frame.image, frame.time_ns, truth)
        count = writer.count
    return count


def has_display() -> bool:
    """True when a GUI window can be opened (a display, and an interactive matplotlib backend)."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return False
    try:
        import matplotlib

        return str(matplotlib.get_backend()).lower() not in ("agg", "pdf", "svg", "ps", "cairo")
    except ImportError:
        return False


def play_to(
    settings: SimSettings, frame: int, render: Renderer | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Pictures (RGB [240, 256, 3]) of console frames ``frame`` and ``frame - 1`` of a
    RandomPlayer game (both the last picture if the game ended first)."""
    if frame < 2:
        raise ValueError(f"frame must be at least 2, got {frame}")
    sim = SimCapture(settings, Profile(), render=render)
    previous = sim.picture(frame - 1)
    current = sim.picture(frame)
    last = sim.render(sim.game)
    return (
        current if current is not None else last,
        previous if previous is not None else last,
    )


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

    sim = SimCapture(settings, profile, render=render)
    plt.ion()
    fig, ax = plt.subplots(figsize=(profile.geometry.width / 100, profile.geometry.height / 100))
    ax.set_axis_off()
    image = None
    shown = 0
    for frame, truth in sim.frames(frames):
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
    return shown
