"""What a run reports: the summary at its end, the per-level costs of real time (taken by
hil.loop.levels.Levels), the live view's snapshot of a frame (docs/RUN.md, "Event log and
summary")."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hil.consoles.base import Frame
from hil.loop.levels import peak_rss_mb
from hil.loop.stats import margin_summary, percentiles
from hil.loop.tracker import Event

if TYPE_CHECKING:
    from hil.loop.runtime import Runtime


def costs(rt: Runtime) -> dict[str, Any]:
    """What real time has cost so far, as counters a level's record takes the growth of
    (hil.loop.levels.Levels): late schedules and frames, underruns, watchdog trips,
    missed decisions, timing slips, stalls of the loop, captures the loop missed (passed
    over for a newer one or dropped by a card that could not keep up), repeated captures;
    and, computed per level, its pills' margins (frames from the first input on the wire
    to the spawn: ``margin`` of the pondered pills, ``margin_at_spawn`` of those decided at
    their spawn) and its longest stall."""
    st = rt.stats
    cap = getattr(rt.source, "missed", None)  # captures the loop never read
    margins = rt.decision.ponder_stats.margins
    at_spawn = rt.decision.ponder_stats.at_spawn_margins
    stalls = rt.stall_log
    return {
        "late_schedules": st.late_schedules,
        "late_frames": st.late_frames,
        "underruns": st.underruns,
        "watchdog_trips": st.watchdog_trips,
        "missed_decisions": st.missed_decisions,
        "timing_slips": sum(t.timing_slips for t in rt.trackers),
        "stalls": st.stalls,
        "repeated_frames": st.repeated_frames,
        "missed_frames": cap() if callable(cap) else 0,
        "_margins": len(margins),
        "margin": lambda b: margin_summary(margins[b.get("_margins", 0) :]),
        "_at_spawn": len(at_spawn),
        "margin_at_spawn": lambda b: margin_summary(at_spawn[b.get("_at_spawn", 0) :]),
        "_stalls": len(stalls),
        "longest_stall": lambda b: max(
            stalls[b.get("_stalls", 0) :], key=lambda x: x["ms"], default=None
        ),
    }


def snapshot(rt: Runtime, frame: Frame, events: list[Event]) -> dict[str, Any]:
    """What the live view shows: the board read, the tracker, the placement, latencies."""
    tr = rt.tracker
    st = rt.stats
    return {
        "image": frame.image,
        "frame_index": frame.index,
        "console_frame": tr.last_matched,
        "observation": rt.last_obs,
        "state": tr.state.value,
        "level": None if tr.lv is None else tr.lv.level,
        "placement": rt.last_placement,
        "events": [e.name for e in events],
        "desyncs": tr.desyncs,
        "late": st.late_schedules,
        "read_ms": st.read_ms.last,
        "handle_p99_ms": percentiles(list(st.handle_ms.recent)),
        "spawn_to_wire_ms": st.spawn_to_wire_ms.last,
        "capture_latency_frames": st.capture_latency_frames.last,
    }


def mirrored(p2: str | None, p1: str | None) -> bool:
    """Whether two players' round results (hil.loop.levels.round_result) tell the same end:
    one won what the other lost, the same way ("won_clear" against "lost_clear")."""
    if not p1 or not p2 or "unknown" in (p1, p2):
        return False
    flip = {"won": "lost", "lost": "won"}
    side, _, how = p2.partition("_")
    return p1 == f"{flip.get(side, side)}_{how}"


def summary(rt: Runtime) -> dict[str, Any]:
    """The run's summary (docs/RUN.md, "Event log and summary"), also logged."""
    st = rt.stats
    tr = rt.tracker
    cleared = sum(r["result"] == "stage_clear" for r in rt.results)
    out = {
        "levels": rt.results,
        "levels_asked": len(rt.s.levels),
        "levels_played": len(rt.results),
        "levels_cleared": cleared,
        "levels_failed": len(rt.results) - cleared,
        "levels_retried": rt.levels.retries,
        "console_frames": 0
        if st.first_frame is None or st.last_frame is None
        else st.last_frame - st.first_frame + 1,
        "captured_frames": st.frames,
        "repeated_frames": st.repeated_frames,
        "shown_frames_checked": st.shown_checked,
        "shown_frames_outside": st.shown_outside,
        "clock_error_ms": _signed(st.clock_error_ms),
        "menu_frames": st.menu_frames,
        "decisions": st.decisions,
        "missed_decisions": st.missed_decisions,
        # (bot against bot: both trackers'; the versus section has player 1's own)
        "desyncs": sum(t.desyncs for t in rt.trackers),
        "resyncs": sum(t.resyncs for t in rt.trackers),
        "timing_slips": sum(t.timing_slips for t in rt.trackers),
        "late_schedules": st.late_schedules,
        "late_frames": st.late_frames,
        "schedules": st.schedules,
        "underruns": st.underruns,
        "watchdog_trips": st.watchdog_trips,
        "arm_misses": st.arm_misses,
        "status_gaps": tr.status_gaps,
        "link_losses": st.link_losses,
        "link_anomalies": {
            k: st.link_anomalies.get(k, 0) + rt.ctl.anomalies.get(k, 0)
            for k in sorted({*st.link_anomalies, *rt.ctl.anomalies})
        },
        "interrupted": rt.interrupted,
        "cannot_start": rt.cannot_start,
        "link_fatal": rt.link_fatal,
        "log_error": rt.log.error,
        "capture_timeouts": st.capture_losses,
        "stalls": st.stalls,
        "longest_stall": st.longest_stall or None,
        "latency_ms": {
            "capture_to_observation": percentiles(st.read_ms),
            "frame_handling": percentiles(st.handle_ms),
            "spawn_to_wire": percentiles(st.spawn_to_wire_ms),
            "planner": percentiles(st.plan_ms),
            "policy": percentiles(st.policy_ms),
            "spawn_to_wire_without_planner_and_policy": percentiles(st.overhead_ms),
        },
        "capture_latency_frames": percentiles(st.capture_latency_frames),
        "ponder": rt.decision.ponder_summary(),
        "peak_rss_mb": peak_rss_mb(),
        "wall_s": round(time.perf_counter() - rt.t_start, 3),
        "reader": getattr(rt.reader, "name", "?"),
        "policy": getattr(rt.decision.policy, "name", "?"),
        "planner": getattr(rt.decision.planner, "name", "?"),
        "capture": rt.source.describe(),
    }
    if rt.s.opponent is not None:
        out["versus"] = rt.levels.versus.summary() | {
            "matches_asked": rt.s.matches,
            "attacks_seen": tr.attacks,
        }
        if rt.p1 is not None:
            t1 = rt.p1.tracker
            out["versus"]["p1"] = {
                "policy": getattr(rt.p1.decision.policy, "name", "?"),
                "desyncs": t1.desyncs,
                "resyncs": t1.resyncs,
                "timing_slips": t1.timing_slips,
                "attacks_seen": t1.attacks,
                "ponder": rt.p1.decision.ponder_summary(),
                # rounds whose end player 1's tracker read as the mirror of player 2's
                "rounds_agreed": sum(
                    mirrored(r.get("round", {}).get("result"), r.get("p1", {}).get("result"))
                    for r in rt.results
                ),
            }
    out.update(rt.console.report())  # the console's own section: "sim", "emu", "rig"
    rt.log.write("summary", **out)
    return out


def _signed(series: Any) -> dict[str, float] | None:
    """percentiles of a signed Series, with its min."""
    out = percentiles(series)
    if out is not None:
        out["min"] = round(series.min, 3)
    return out
