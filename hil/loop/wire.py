"""The runtime's side of the controller link: STATUS messages into the frame clock and the
schedule, SCHEDULE messages out (holes filled, late ones logged), "no buttons" fed ahead, pings,
the link lost and back (a restarted firmware's frames renumbered: hil.loop.clock.Renumbering),
and the pad released at the end (docs/RUN.md, "Frame clock" and "Errors")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hil.link.controller import Controller
from hil.link.link import Link, LinkError
from hil.link.protocol import ALL_PORTS, Status
from hil.loop.clock import FrameClock, Renumbering
from hil.loop.eventlog import EventLog
from hil.loop.schedule import Schedule
from hil.loop.stats import Stats

MAX_SCHEDULE = 64  # masks one SCHEDULE carries (firmware/PROTOCOL.md)


class Wire:
    """The link as the loop uses it (see the module docstring). ``now``: the runtime's clock
    (ns). ``on_latched()``: called after each STATUS is taken (the tracker steps its shadow
    state); ``on_renumber(shift)``: a restarted firmware numbers frame g as g - shift from now
    on (the tracker's and the level flow's books; the schedule and the stats are renumbered
    here). ``margin_ms``: transport margin on a schedule's first frame. ``feed_frames``: "no
    buttons" kept this far ahead.

    Two ports (``hil run --versus --both``): ``port`` is the controller port ``schedule`` is
    for (None: the link's own, ``Link.nes_port``) and ``others`` the other ports' schedules
    (controller port -> Schedule); each STATUS gives each its own port's byte
    (``Status.for_port``), :meth:`send` and :meth:`feed` take the port, and the firmware's
    underruns are summed over the ports."""

    def __init__(
        self,
        ctl: Controller,
        clock: FrameClock,
        schedule: Schedule,
        stats: Stats,
        log: EventLog,
        now: Callable[[], int],
        *,
        on_latched: Callable[[], None],
        on_renumber: Callable[[int], None],
        margin_ms: float,
        feed_frames: int,
        port: int | None = None,
        others: Mapping[int, Schedule] | None = None,
    ) -> None:
        self.ctl = ctl
        self.clock = clock
        self.schedule = schedule
        self.port = port
        # controller port (None: the link's own) -> its schedule
        self.schedules: dict[int | None, Schedule] = {port: schedule}
        for other, sched in (others or {}).items():
            self.schedules[other] = sched
        self.stats = stats
        self.log = log
        self.now = now
        self.on_latched = on_latched
        self.on_renumber = on_renumber
        self.margin_ms = margin_ms
        self.feed_frames = feed_frames
        self.last_ping_frame = -(10**9)
        # After a reconnection, until the firmware's frames are placed on the run's numbers:
        # the placing (it holds the STATUS messages read meanwhile).
        self.renumbering: Renumbering | None = None
        # underruns, watchdog trips, arm misses of the firmware's earlier boots in this run
        self._counter_base = (0, 0, 0)

    @property
    def linked(self) -> bool:
        return self.ctl.link is not None

    def connect(self, say: Callable[[str], None]) -> None:
        """The first connection; a port that cannot be opened is retried (see reconnect)."""
        if not self.ctl.connect():
            say(
                f"cannot open the controller port {self.ctl._path()} "
                f"({self.ctl.last_error}); retrying"
            )
            self.ctl.lost_at = self.ctl.now_s()
        else:
            self.ping()

    def reconnect(self, timeout_s: float) -> bool:
        """While the link is lost: one reconnection attempt when due (a firmware that came
        back is renumbered from its next STATUS messages). False once it has stayed lost
        past ``timeout_s``."""
        if self.ctl.link is not None:
            return True
        if self.ctl.maybe_reconnect():
            self.renumbering = Renumbering(self.clock)
            if self.ctl.restarted:  # a new boot: its counters start from 0
                st = self.stats
                self._counter_base = (st.underruns, st.watchdog_trips, st.arm_misses)
            self.ping()
            return True
        lost = self.ctl.lost_at
        return lost is None or self.ctl.now_s() - lost <= timeout_s

    def poll(self) -> None:
        link = self.ctl.link
        if link is None:
            return
        try:
            link.poll()
        except LinkError as exc:
            self.lost(exc)
            return
        # Every STATUS the link has read (also those read while a request waited for its
        # reply), taken out of its bounded deque: Link.poll's return value would miss those,
        # and once the deque is full (4096) it reports nothing new.
        statuses = list(link.statuses)
        link.statuses.clear()
        self._anomalies(link)
        now = self.now()
        arrived = [(st, now) for st in statuses]
        if self.renumbering is not None:
            for st in statuses:
                self.renumbering.on_status(st, now)
            arrived = self._renumber()
        for st, at in arrived:
            self.clock.on_status(st.frame, st.first_latch_us, at)
            for port, sched in self.schedules.items():
                sched.on_latched(st.frame, st.mask if port is None else st.for_port(port).mask)
            self.on_latched()
            if self.stats.first_frame is None:
                self.stats.first_frame = st.frame
            self.stats.last_frame = st.frame
            # The firmware's counters are cumulative since its boot; a firmware that restarted
            # (replugged) counts from 0 again on top of what the run had seen.
            base = self._counter_base
            underruns = base[0] + sum(
                st.underruns if port is None else st.for_port(port).underruns
                for port in self.schedules
            )
            trips = base[1] + st.watchdog_trips
            if underruns > self.stats.underruns or trips > self.stats.watchdog_trips:
                self.log.write(
                    "underrun" if underruns > self.stats.underruns else "watchdog_trip",
                    frame=st.frame,
                    underruns=underruns,
                    watchdog_trips=trips,
                    fed_to=min(s.feed_end for s in self.schedules.values()),
                )
            if trips > self.stats.watchdog_trips:
                # The host was silent past the watchdog: the firmware flushed every port's
                # queue and serves "no buttons" until the next SCHEDULE (firmware/PROTOCOL.md,
                # "Host watchdog"). Nothing scheduled after this frame plays: the feed starts
                # again now, and the shadow no longer counts on the flushed frames (else every
                # frame up to the old feed's end could be an underrun, 129 on the real game
                # beside two CPU-bound processes, and a placement sent before the trip was
                # lost).
                for sched in self.schedules.values():
                    sched.released(st.frame)
            self.stats.underruns = max(self.stats.underruns, underruns)
            self.stats.watchdog_trips = max(self.stats.watchdog_trips, trips)
            self.stats.arm_misses = max(self.stats.arm_misses, base[2] + st.arm_misses)

    def _renumber(self) -> list[tuple[Status, int]]:
        """After a reconnection: once the firmware's new numbering is placed on the run's
        (hil.loop.clock.Renumbering), moves everything numbered by frame to it and returns
        the STATUS messages held meanwhile with their arrival times, to be taken in order; []
        until then."""
        r = self.renumbering
        assert r is not None
        shift = r.shift
        if shift is None:
            return []
        self.renumbering = None
        held = r.held
        if not self.clock.ready:
            return held
        # The firmware's clock may have begun again too: learn it afresh, from what was held
        # and the console's phase on the old grid.
        grid = r.grid_sample(shift)
        self.clock.reset()
        for device_us, host_ns in [*r.pongs, *([grid] if grid else [])]:
            self.clock.on_pong(device_us, host_ns)
        if shift:
            self.on_renumber(shift)
            for sched in self.schedules.values():
                sched.renumber(shift)
            if self.stats.first_frame is not None:
                self.stats.first_frame -= shift
        self.log.write(
            "frames_renumbered",
            shift=shift,
            estimate=round(r.estimate or 0.0, 3),
            statuses=len(r.held),
            first_new_frame=r.held[0][0].frame,
        )
        return held

    def _anomalies(self, link: Link) -> None:
        """Logs what the link found wrong in the device's replies (hil.link.Anomaly) and
        counts each kind for the summary."""
        while link.anomalies:
            a = link.anomalies.popleft()
            n = self.stats.link_anomalies
            n[a.kind] = n.get(a.kind, 0) + 1
            self.log.write("link_anomaly", kind=a.kind, detail=a.detail)

    def ping(self) -> None:
        link = self.ctl.link
        if link is None:
            return
        try:
            pong = link.ping()
        except LinkError as exc:
            self.lost(exc)
            return
        # The reply's arrival bounds the offset from above (the min filter keeps the best).
        if self.renumbering is not None:  # a firmware that may have restarted its clock
            self.renumbering.on_pong(pong.device_us, self.now())
        else:
            self.clock.on_pong(pong.device_us, self.now())

    def lost(self, exc: Exception) -> None:
        self.stats.link_losses += 1
        self.ctl.lost(exc)
        # The firmware serves the frame it had armed when the host went, then no buttons:
        # what was scheduled up to the frame armed now played (as far as the host can tell;
        # the frames after the last STATUS read are not known otherwise), nothing after it.
        now = self.now()
        armed = self.clock.first_schedulable(now) - 1 if self.clock.ready else -1
        for sched in self.schedules.values():
            sched.released(max(armed, self.clock.last_frame))

    def send(self, first: int, masks: Sequence[int], what: str, port: int | None = None) -> bool:
        """Schedules ``masks`` from console frame ``first`` on controller ``port`` (None:
        ``schedule``'s). A hole between what was scheduled before and ``first`` would be an
        underrun for each frame in it (the firmware streams from its first frame): it is
        filled with "no buttons" where it can still be reached. False when the link is gone."""
        link = self.ctl.link
        if link is None or not masks or self.renumbering is not None:
            # (After a reconnection the firmware may count frames from 0 again: nothing is
            # scheduled until its STATUS messages say how they are numbered now.)
            return False
        sched = self.schedules[port if port in self.schedules else self.port]
        hole = sched.hole(first, self.first_free()) if first > 0 else range(0)
        if hole:
            if len(hole) + len(masks) > MAX_SCHEDULE:
                if not self._send_now(hole.start, [0] * len(hole), "feed", port):
                    return False
            else:
                masks, first = [0] * len(hole) + list(masks), hole.start
        return self._send_now(first, masks, what, port)

    def _send_now(
        self, first: int, masks: Sequence[int], what: str, port: int | None = None
    ) -> bool:
        link = self.ctl.link
        if link is None or not masks:
            return False
        port = port if port in self.schedules else self.port
        sched = self.schedules[port]
        data = bytes(int(m) & 0xFF for m in masks)
        try:
            ack = link.schedule(first, data, nes_port=port)
        except LinkError as exc:
            self.lost(exc)
            return False
        self.stats.schedules += 1
        self._anomalies(link)
        sched.on_schedule(first, data)
        sched.last_tx_frame = self.clock.frame_at(self.now())
        if ack.late or ack.too_far:
            self.stats.late_schedules += int(ack.late > 0)
            self.stats.late_frames += ack.late
            self.log.write(
                "late_schedule",
                what=what,
                **({} if port is None else {"nes_port": port}),
                first_frame=first,
                count=len(data),
                late=ack.late,
                too_far=ack.too_far,
            )
        return True

    def horizon(self) -> int | None:
        """The last console frame a SCHEDULE sent now may fill: the firmware's queue past the
        newest STATUS, less a margin of 8 frames (None while the link or a status is missing)."""
        link = self.ctl.link
        if link is None or link.last_status_frame is None or link.hello is None:
            return None
        return link.last_status_frame + link.hello.queue_capacity - 8

    def first_free(self, extra_ms: float = 0.0) -> int:
        clock = self.clock
        margin = self.margin_ms + extra_ms
        if clock.samples < 60:  # the offset and period are still rough
            margin += 5.0
        return clock.first_schedulable(self.now(), margin * 1e6)

    def feed(self, ahead: int | None = None, port: int | None = None) -> None:
        """Keeps "no buttons" scheduled ``feed_frames`` ahead on controller ``port`` (None:
        every port the wire schedules); pings when quiet."""
        clock = self.clock
        if self.ctl.link is None or not clock.ready:
            return
        now_frame = clock.frame_at(self.now())
        want = now_frame + (ahead if ahead is not None else self.feed_frames)
        ports = list(self.schedules) if port is None or port not in self.schedules else [port]
        for p in ports:
            sched = self.schedules[p]
            if sched.feed_end < want - self.feed_frames // 2:  # top up in chunks
                # Not time-critical: a frame of slack so a feed is never late itself.
                first = max(sched.feed_end + 1, self.first_free(extra_ms=16.7))
                if want >= first:
                    self.send(first, [0] * (want - first + 1), "feed", p)
        last_tx = max(s.last_tx_frame for s in self.schedules.values())
        if now_frame - self.last_ping_frame >= 30 or now_frame - last_tx >= 6:
            # Keeps the watchdog fed, and each PONG refines the device-to-host clock offset.
            self.ping()
            self.last_ping_frame = now_frame
            for sched in self.schedules.values():
                sched.last_tx_frame = now_frame

    def release(self) -> None:
        link = self.ctl.link
        if link is not None:
            try:
                # the controller goes back to "no buttons" (both ports, when it plays both)
                link.clear(ALL_PORTS if len(self.schedules) > 1 else None)
            except LinkError:
                pass
            link.close()
            self.ctl.link = None
