"""Work the loop hands off so that no frame waits for it (docs/RUN.md, "Real time").

In real time a console never waits: the loop's thread must take every captured frame within a
frame (16.6 ms), yet some of its work takes longer: pondering the next pill (9 choices of the
policy, 10 ms with the network, 250 ms with the search), the tracker's tables of a level's
intro (16 frameCounter phases x 260 frames, 160 ms). :func:`make_worker` gives the loop a
``submit(fn, *args) -> Future``: in real time one background thread
(``concurrent.futures.ThreadPoolExecutor``; the engine's planner and search and onnxruntime
release the interpreter lock while they work), in lockstep the call itself, done before
``submit`` returns, so a lockstep run stays the same game on any machine.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol


class Worker(Protocol):
    """``submit(fn, *args)`` -> a Future of ``fn(*args)``; ``close()`` waits for none."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]: ...

    def close(self) -> None: ...


class Inline:
    """Lockstep: the job runs inside ``submit``; its Future is done when ``submit`` returns
    (an exception it raised is in the Future, as a thread's would be)."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        f: Future[Any] = Future()
        try:
            f.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - handed over as the thread's would be
            f.set_exception(exc)
        return f

    def close(self) -> None:
        pass


class Background:
    """Real time: one thread runs the jobs in order (the runtime has two: one for the
    alignment and the pondering, one for a policy's full pondering after its quick choice).
    At a lower priority than the loop's (nice + 5) it got too little of a machine busy with
    other work: a level's alignment, due before its first pill locks, took 7.6 s and the pill
    fell unsteered; the loop's stalls on a quiet machine were no fewer."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loop-worker")

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self.pool.submit(fn, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def make_worker(lockstep: bool) -> Worker:
    """:class:`Inline` in lockstep, :class:`Background` in real time."""
    return Inline() if lockstep else Background()
