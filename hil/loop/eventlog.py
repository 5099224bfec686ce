"""The run's event log: JSONL, one object per line, flushed as it goes (docs/RUN.md, "Event log
and summary")."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any

from hil.loop.recording import jsonable


class EventLog:
    """JSONL, one object per line, flushed per line (a crash keeps every line before it).
    ``path`` None: nothing written. Each line gets ``t_ms`` (wall ms since the run began). A
    write that fails (a full disk) ends the log with one line on stderr, not the run
    (``error`` says why; the summary's ``log_error``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._f: IO[str] | None = None
        self.t0 = time.perf_counter_ns()
        self.counts: dict[str, int] = {}
        self.error: str | None = None  # why the log stopped early (a full disk), if it did
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._f = self.path.open("w", encoding="utf-8")

    def write(self, name: str, **data: Any) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1
        if self._f is None:
            return
        rec = {"t_ms": round((time.perf_counter_ns() - self.t0) / 1e6, 3), "event": name, **data}
        try:
            self._f.write(json.dumps(rec, default=_json_default) + "\n")
            self._f.flush()
        except OSError as e:  # a full disk: the log stops, the run (a console never waits) not
            self.error = f"{self.path}: {e.strerror or e}"
            print(
                f"hil: the event log stops here ({self.error}); the run goes on",
                file=sys.stderr,
                flush=True,
            )
            self.close()

    def close(self) -> None:
        if self._f is not None:
            try:
                self._f.close()
            except OSError:
                pass  # the lines that could be written are there
            self._f = None


def _json_default(o: Any) -> Any:
    """The event log's ``json.dumps`` default: NumPy values as the recording's sidecar writes
    them (hil.loop.recording.jsonable), anything else as its str (a log line is never lost)."""
    try:
        return jsonable(o)
    except TypeError:
        return str(o)
