"""The controller link kept up: reconnection with backoff, and a firmware that restarted told
apart (docs/RUN.md, "Errors")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from hil.link.link import Link, LinkError, LinkFatal, LinkRefused


class EventSink(Protocol):
    """Where the controller's events go (hil.loop.eventlog.EventLog)."""

    def write(self, name: str, **data: Any) -> None: ...


class Controller:
    """The link to the firmware, kept up: on a LinkError the port is closed, a clear message
    logged, and reopened with backoff (0.25 s doubling to 4 s). ``port`` is a path or a
    callable returning the current path (the simulated console's pty changes on replug).
    ``now_ns``: the clock the backoff and the give-up time are measured on, the runtime's
    (the console's sim time in lockstep, so a reconnection lands on the same console frame on
    any host, however busy). ``nes_port``: the NES controller port (1 or 2) the link plays,
    ``needs`` the ports the firmware must drive (:class:`hil.link.link.Link`)."""

    def __init__(
        self,
        port: str | Callable[[], str],
        log: EventSink,
        say: Callable[[str], None],
        timeout_s: float = 0.5,
        now_ns: Callable[[], int] = time.monotonic_ns,
        nes_port: int = 1,
        needs: tuple[int, ...] | None = None,
    ):
        self.port = port
        self.nes_port = nes_port
        self.needs = needs
        self.now_ns = now_ns
        self.timeout_s = timeout_s
        self.log = log
        self.say = say
        self.link: Link | None = None
        self.lost_at: float | None = None
        self.next_try = 0.0
        self.backoff = 0.25
        self.boot_count: int | None = None
        self.restarted = False
        self.anomalies: dict[str, int] = {}  # handshakes refused (the Link never existed)
        self.last_error = ""  # why the last connection attempt failed

    def _path(self) -> str:
        return self.port() if callable(self.port) else self.port

    def now_s(self) -> float:
        """The backoff clock (s)."""
        return self.now_ns() / 1e9

    def connect(self) -> bool:
        path = self._path()
        try:
            self.link = Link(
                path, timeout_s=self.timeout_s, nes_port=self.nes_port, needs=self.needs
            )
        except LinkError as exc:
            self.link = None
            self.last_error = str(exc)
            if isinstance(exc, LinkFatal):  # retrying will not mend it: the run ends with it
                self.log.write("link_fatal", port=path, error=str(exc))
                raise
            if isinstance(exc, LinkRefused):  # a device that answers with impossible values
                self.anomalies["hello_ack"] = self.anomalies.get("hello_ack", 0) + 1
                self.log.write("link_anomaly", kind="hello_ack", detail=str(exc))
                self.say(str(exc))
            self.log.write("link_connect_failed", port=path, error=str(exc))
            return False
        ack = self.link.hello
        assert ack is not None
        self.restarted = self.boot_count is not None and (
            ack.boot_count != self.boot_count or self.lost_at is not None
        )
        self.boot_count = ack.boot_count
        self.log.write(
            "link_up",
            port=path,
            version=ack.version,
            nes_port=self.nes_port,
            boot_count=ack.boot_count,
            window_us=ack.window_us,
            watchdog_ms=ack.watchdog_ms,
            queue=ack.queue_capacity,
        )
        self.lost_at = None
        self.backoff = 0.25
        return True

    def lost(self, exc: Exception) -> None:
        msg = (
            f"controller link lost: {exc}. The controller reads no buttons (firmware watchdog); "
            "reconnecting..."
        )
        self.say(msg)
        self.log.write("link_lost", error=str(exc), message=msg)
        if self.link is not None:
            self.link.close()
        self.link = None
        self.lost_at = self.now_s()
        self.next_try = self.lost_at + self.backoff

    def maybe_reconnect(self) -> bool:
        """One reconnection attempt when due; True when the link is back."""
        now = self.now_s()
        if self.link is not None or now < self.next_try:
            return False
        self.log.write("link_reconnect_attempt", port=self._path(), backoff_s=self.backoff)
        if self.connect():
            self.say("controller link back")
            return True
        self.backoff = min(self.backoff * 2, 4.0)
        self.next_try = now + self.backoff
        return False
