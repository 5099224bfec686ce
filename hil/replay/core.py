"""`hil replay`: the replay loop (source -> reader -> events -> decisions -> JSONL and annotated
video) and its command."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import cv2

from calibration import Profile
from engine import ScreenKind
from engine.placement import placement_pose
from hil.loop.recording import Frame
from hil.replay.annotate import VIDEO_CODECS, annotate, panel_width
from hil.replay.common import JSONL_FILE, ReplayError
from hil.replay.events import Event, EventDetector
from hil.replay.policies import (
    Decider,
    choose_policy,
    game_from_reading,
    speed_ups_at_spawn,
)
from hil.replay.readers import (
    Agreement,
    FrameFacts,
    PerceptionReader,
    Reader,
    RunReader,
    TruthReader,
    choose_reader,
    compare_readings,
    reading_json,
)
from hil.replay.sources import Source, open_source
from perception.observation import (
    Observation,
)


@dataclass
class ReplaySummary:
    """What a replay did: ``frames`` read, ``events`` by kind, ``decisions`` made, of them
    ``compared`` with the placement then played and ``agreed``; ``agreement``: the reader
    against the recording's truth (:class:`Agreement` as a dict) or None when not compared."""

    frames: int = 0
    events: dict[str, int] = field(default_factory=dict)
    decisions: int = 0
    agreed: int = 0  # decisions equal to the placement the player then locked
    compared: int = 0
    reader: str = ""
    policy: str = ""
    out_dir: str = ""
    video: str | None = None  # the annotated video's path
    agreement: dict[str, int] | None = None
    compared_with: str | None = None  # whose readings ``agreement`` counts against
    # hil run recordings: the placements the run sent, and how many the replay chose alike
    live_decisions: int = 0
    live_compared: int = 0
    live_agreed: int = 0
    warnings: list[str] = field(default_factory=list)


def _check_replay_args(
    source: Source, level: int | None, speed: int | None, max_frames: int | None
) -> tuple[bool, int | None, int | None]:
    """(a run's recording, level, speed) after the checks of :func:`replay`."""
    run = source.meta.get("producer") == "hil run"  # the level in play is in each line
    level = level if level is not None else source.meta.get("level")
    speed = speed if speed is not None else source.meta.get("speed")
    if not run and (level is None or speed is None):
        raise ReplayError("the policy needs the level and speed: pass --level and --speed")
    if (
        level is not None
        and speed is not None
        and (not 0 <= int(level) <= 24 or int(speed) not in (0, 1, 2))
    ):
        raise ReplayError(f"level must be 0..24 and speed 0..2, got {level} and {speed}")
    if max_frames is not None and max_frames < 1:
        raise ReplayError(f"frames must be at least 1, got {max_frames}")
    return run, level, speed


def _video_writer(source: Source, out: Path) -> tuple[cv2.VideoWriter, Path]:
    """The annotated video's writer in ``out`` (MPEG-4, else MJPEG). Raises ReplayError."""
    g = source.profile.geometry
    size = (g.width + panel_width(g.height), g.height)
    for name, fourcc, api in VIDEO_CODECS:
        writer = cv2.VideoWriter(
            str(out / name), api, cv2.VideoWriter.fourcc(*fourcc), source.fps, size
        )
        if writer.isOpened():
            return writer, out / name
    raise ReplayError(f"OpenCV cannot write a video into {out} (MPEG-4 or MJPEG)")


def replay(
    source: Source,
    out_dir: str | Path,
    *,
    reader: Reader | None = None,
    policy: Decider | None = None,
    level: int | None = None,
    speed: int | None = None,
    max_frames: int | None = None,
    video: bool = True,  # write the annotated video
    compare_truth: bool = True,
    log: TextIO | None = None,
    progress: bool = False,
) -> ReplaySummary:
    """Replay ``source`` into ``out_dir`` (created): replay.jsonl and the annotated video (module
    docstring). ``reader`` defaults to :class:`PerceptionReader` for the source's profile,
    ``policy`` to the live loop's ONNX policy (``choose_policy("auto")``). ``level`` and
    ``speed`` (the policy needs them) default to the recording's. With ``compare_truth``, a
    source with a sidecar read by another reader than the truth is compared with it frame by
    frame (``truth_agree`` in each reading line, :class:`Agreement` counts in the summary).
    Events and decisions are printed to ``log`` as they happen.

    Raises ReplayError, before anything is written, for an unknown level/speed or a bad
    ``max_frames``; and when the source fails part way (a video shorter than its sidecar, a
    frame the reader refuses): then replay.jsonl ends with an ``error`` line saying so, the
    annotated video holds the frames before it, and the message names both.
    """
    run, level, speed = _check_replay_args(source, level, speed, max_frames)
    reader = reader or PerceptionReader(source.profile)
    policy = policy or choose_policy("auto")
    comparator: Reader | None = None
    if compare_truth and source.has_truth:
        comparator = RunReader() if run else TruthReader()
        if reader.name == comparator.name:
            comparator = None
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReplayError(f"--out {out} is a file, not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ReplayError(f"--out {out}: cannot create it ({e.strerror or e})") from None
    writer, video_path = _video_writer(source, out) if video else (None, None)
    r = _Replay(source, reader, policy, comparator, run, level, speed, writer, log)
    r.summary.out_dir = str(out)
    r.summary.video = str(video_path) if video_path else None
    frames = source.frames
    if progress:
        from rich.progress import track

        frames = iter(track(frames, total=source.count, description="replay"))
    try:
        with (out / JSONL_FILE).open("w") as jl:
            r.jl = jl
            r.start()
            try:
                for frame, truth in frames:
                    if max_frames is not None and r.summary.frames >= max_frames:
                        break
                    r.frame(frame, truth)
            except (ValueError, OSError) as e:  # ReplayError, RecordingError, a refused frame
                r.emit({"type": "error", "index": r.summary.frames, "message": str(e)})
                raise ReplayError(
                    f"{e} (after {r.summary.frames} frames replayed: {out / JSONL_FILE} ends "
                    "with this error"
                    + (f", {video_path} holds the frames before it)" if video_path else ")")
                ) from None
            r.finish()
    finally:
        if writer is not None:
            writer.release()
    return r.summary


class _Replay:
    """One replay's state between frames (see :func:`replay`): the level in play, the events,
    the decision awaiting the player's lock, the lines written."""

    def __init__(
        self,
        source: Source,
        reader: Reader,
        policy: Decider,
        comparator: Reader | None,
        run: bool,
        level: int | None,
        speed: int | None,
        writer: cv2.VideoWriter | None,
        log: TextIO | None,
    ) -> None:
        self.source, self.reader, self.policy = source, reader, policy
        self.truth_reader = comparator
        self.agreement = Agreement() if comparator is not None else None
        self.run, self.level, self.speed = run, level, speed
        self.writer, self.log = writer, log
        self.summary = ReplaySummary(
            reader=reader.name,
            policy=policy.name,
            out_dir="",
            video=None,
            compared_with=comparator.name if comparator else None,
        )
        self.played: tuple[int, int] | None = None  # hil run: the level in play, from the sidecar
        self.detector = EventDetector()
        self.choice: int | None = None
        self.pending: dict[str, Any] | None = None  # the decision awaiting the player's lock
        self.pills = 0  # spawns seen in this level (speed-ups)
        self.recent: list[str] = []
        self.jl: TextIO | None = None

    def emit(self, obj: dict[str, Any]) -> None:
        assert self.jl is not None
        self.jl.write(json.dumps(obj, separators=(",", ":")) + "\n")
        self.jl.flush()

    def say(self, text: str) -> None:
        self.recent.append(text)
        del self.recent[:-3]
        if self.log is not None:
            print(text, file=self.log, flush=True)

    def start(self) -> None:
        level, speed = self.level, self.speed
        self.emit(
            {
                "type": "start",
                "source": self.source.name,
                "profile": self.source.profile.name,
                "reader": self.reader.name,
                "policy": self.policy.name,
                "compared_with": self.truth_reader.name if self.truth_reader else None,
                "level": None if level is None else int(level),
                "speed": None if speed is None else int(speed),
                "warnings": list(self.source.warnings),
            }
        )

    def frame(self, frame: Frame, truth: dict[str, Any] | None) -> None:
        """One frame: its reading (and the truth's agreement), its events and decisions, the
        run's own decision where the recording has it, the annotated picture."""
        reading, facts = self.reader(frame, truth)
        line = {"type": "reading", "index": frame.index, "time_ns": frame.time_ns}
        line |= reading_json(reading, facts)
        agree: dict[str, Any] | None = None
        if self.truth_reader is not None and self.agreement is not None:
            agree = compare_readings(reading, self.truth_reader(frame, truth)[0])
            self.agreement.add(agree)
            line["truth_agree"] = agree
        self.emit(line)
        if reading.kind == ScreenKind.OTHER:
            self.pills = 0
        if self.run and truth is not None:
            lv = truth.get("level")
            now = None if lv is None else (int(lv[0]), int(lv[1]))
            if now != self.played:
                self.played, self.pills = now, 0
            self.level, self.speed = (None, None) if now is None else now
        for ev in self.detector.update(frame.index, reading, facts):
            self._event(ev, frame, reading, facts)
        live = truth.get("decision") if self.run and truth is not None else None
        if live is not None:
            self._live(live, frame)
        if self.writer is not None:
            self._annotate(frame, reading, facts, agree)
        self.summary.frames += 1

    def _event(self, ev: Event, frame: Frame, reading: Observation, facts: FrameFacts) -> None:
        summary = self.summary
        summary.events[ev.kind] = summary.events.get(ev.kind, 0) + 1
        self.emit(ev.to_json())
        self.say(_describe_event(ev))
        if ev.kind in ("stage_clear", "top_out"):
            self.pills = 0
        if ev.kind == "lock" and self.pending is not None:
            pending = self.pending
            pending["played"] = ev.data["placement"]
            pending["agree"] = pending["placement"] == ev.data["placement"]
            summary.compared += 1
            summary.agreed += int(pending["agree"])
            self.emit({"type": "decision_outcome", **pending})
            self.pending = None
            self.choice = None
        if ev.kind == "spawn":
            self.pills += 1
            level, speed = self.level, self.speed
            if level is None or speed is None:
                decision: dict[str, Any] = {"policy": self.policy.name, "error": "no level in play"}
            else:
                decision = _decide(
                    self.policy,
                    reading,
                    facts,
                    int(level),
                    int(speed),
                    speed_ups_at_spawn(self.pills),
                )
            decision.update(index=frame.index, console_frame=ev.console_frame)
            self.emit({"type": "decision", **decision})
            summary.decisions += "placement" in decision
            self.choice = decision.get("placement")
            self.pending = decision if self.choice is not None else None
            self.say(_describe_decision(decision))

    def _live(self, live: dict[str, Any], frame: Frame) -> None:
        """The run's own decision (a run's recording): compared with the replay's."""
        self.summary.live_decisions += 1
        # A pill the run committed before its successor's colours were on screen is compared
        # with the same kind of choice.
        key = "placement_without_next" if live.get("without_next") else "placement"
        mine = None if self.pending is None else self.pending.get(key)
        same = mine is not None and mine == live.get("placement")
        out_line = {
            "type": "live_decision",
            "index": frame.index,
            "pill": live.get("pill"),
            "live": live.get("placement"),
            "replay": mine,
            "agree": same,
        }
        if mine is not None:
            self.summary.live_compared += 1
            self.summary.live_agreed += int(same)
        self.emit(out_line)
        self.say(
            f"  the run sent placement {live.get('placement')}: "
            + ("same" if same else f"replay chose {mine}")
        )

    def _annotate(
        self, frame: Frame, reading: Observation, facts: FrameFacts, agree: dict[str, Any] | None
    ) -> None:
        assert self.writer is not None
        profile = self.source.profile
        head = [
            f"{profile.name}  frame {frame.index}"
            + (f"  console frame {facts.console_frame}" if facts.console_frame is not None else ""),
            f"reader: {self.reader.name}",
            f"policy: {self.policy.name}",
        ]
        if agree is not None:
            head.append(_describe_agree(agree, "run" if self.run else "truth"))
        self.writer.write(annotate(frame.image, profile, reading, self.choice, head + self.recent))

    def finish(self) -> None:
        if self.agreement is not None:
            self.summary.agreement = asdict(self.agreement)
        self.summary.warnings = list(self.source.warnings)
        self.emit({"type": "summary", **asdict(self.summary)})


def _decide(
    policy: Decider,
    reading: Observation,
    facts: FrameFacts,
    level: int,
    speed: int,
    speed_ups: int,
) -> dict[str, Any]:
    try:
        game = game_from_reading(reading, level, speed, speed_ups, facts.pill_state_frame)
        d = policy.act(game)
    except ValueError as e:
        return {"policy": policy.name, "error": str(e), "speed_ups": speed_ups}
    placement = int(d.placement)
    without_next = getattr(policy, "act_without_next", None)
    mean = None if without_next is None else without_next(game)
    extra = {} if mean is None else {"placement_without_next": mean}
    return {
        **extra,
        "policy": policy.name,
        "placement": placement,
        "rotation": placement_pose(placement)[0],
        "row": placement_pose(placement)[1],
        "col": placement_pose(placement)[2],
        "frames_to_lock": int(len(d.masks)),
        "reachable": int(d.reachable),
        "speed_ups": speed_ups,
    }


def _describe_event(ev: Event) -> str:
    at = f"frame {ev.index}" + (
        f" (console {ev.console_frame})" if ev.console_frame is not None else ""
    )
    d = ev.data
    if ev.kind == "spawn":
        p = d["pill"]
        return f"{at}: spawn, colours {tuple(p['colors'])}"
    if ev.kind == "lock":
        i = d["placement"]
        rot, row, col = placement_pose(i)
        return f"{at}: lock at placement {i} (rot {rot}, row {row}, col {col})"
    if ev.kind == "clear":
        return f"{at}: clear, {d['cells']} cells, viruses left {d['virus_left']}"
    return f"{at}: {ev.kind.replace('_', ' ')}"


def _describe_decision(d: dict[str, Any]) -> str:
    if "placement" not in d:
        return f"  decision ({d['policy']}): none ({d.get('error')})"
    return (
        f"  decision ({d['policy']}): placement {d['placement']} (rot {d['rotation']}, "
        f"row {d['row']}, col {d['col']}) of {d['reachable']} reachable, lock in "
        f"{d['frames_to_lock']} frames"
    )


def _describe_agree(a: dict[str, Any], against: str = "truth") -> str:
    def ok(v: bool) -> str:
        return "ok" if v else "DIFFERS"

    cells = "-" if a["cells"] is None else f"{a['cells']}/128"
    return (
        f"vs {against}: cells {cells}, pill {ok(a['pill'])}, next {ok(a['next'])}, "
        f"kind {ok(a['kind'])}"
    )


def main_replay(
    path: str,
    out: str | None,
    profile_name: str | None,
    reader_name: str,
    policy_name: str,
    level: int | None,
    speed: int | None,
    taps_only: bool,
    max_frames: int | None,
    quiet: bool,
    model: str | None = None,
) -> int:
    """The ``hil replay`` command (hil/cli.py). Raises SystemExit with a message on errors.
    ``model``: the board model (``--model``; default perception.store.choose_model)."""
    try:
        profile = Profile.load(profile_name) if profile_name else None
        source = open_source(path, profile)
        reader = choose_reader(reader_name, source, model)
        if isinstance(reader, PerceptionReader):
            print(f"hil replay: {reader.model_line}", file=sys.stderr)
        decider = choose_policy(policy_name, taps_only=taps_only)
        src = Path(source.name)
        out_dir = Path(out) if out else src.with_name(src.stem + "_replay")
        summary = replay(
            source,
            out_dir,
            reader=reader,
            policy=decider,
            level=level,
            speed=speed,
            max_frames=max_frames,
            log=sys.stdout,
            progress=not quiet,
        )
    except (ReplayError, ValueError, OSError) as e:
        raise SystemExit(f"hil replay: {e}") from None
    for w in summary.warnings:
        print(f"hil replay: warning: {w}", file=sys.stderr)
    ev = ", ".join(f"{k} {v}" for k, v in sorted(summary.events.items())) or "none"
    print(
        f"{summary.frames} frames replayed; events: {ev}; {summary.decisions} decisions "
        f"by {summary.policy} ({summary.agreed} of {summary.compared} equal to the placement "
        f"then seen to lock); "
        f"written to {Path(summary.out_dir) / JSONL_FILE}"
        + (f" and {summary.video}" if summary.video else "")
    )
    if summary.agreement is not None:
        against = "truth"
        if summary.compared_with == RunReader.name:
            oracle = source.meta.get("reader") == "oracle"
            against = "the truth (the run's oracle readings)" if oracle else "the run's readings"
        print(f"{summary.reader} {Agreement(**summary.agreement).describe(against)}")
    if summary.live_decisions:
        print(
            f"decisions the run sent: {summary.live_decisions}; the replay chose the same "
            f"placement as the run sent for {summary.live_agreed} of the {summary.live_compared} "
            f"it decided (a reading that differs from the run's can change a decision)"
        )
    return 0
