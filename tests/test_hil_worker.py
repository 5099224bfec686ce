"""The loop's worker (hil.loop.worker): in real time a thread, in lockstep the call itself."""

from __future__ import annotations

import threading

import pytest

from hil.loop.worker import Background, Inline, make_worker


def test_inline_runs_the_job_before_submit_returns():
    seen: list[str] = []
    f = Inline().submit(lambda: seen.append(threading.current_thread().name) or 7)
    assert f.done() and f.result() == 7 and seen == [threading.current_thread().name]
    bad = Inline().submit(lambda: 1 / 0)
    assert bad.done()
    with pytest.raises(ZeroDivisionError):
        bad.result()


def test_background_runs_jobs_in_order_on_another_thread():
    w = make_worker(lockstep=False)
    assert isinstance(w, Background)
    gate = threading.Event()
    order: list[int] = []
    first = w.submit(lambda: (gate.wait(5), order.append(1), threading.current_thread().name))
    second = w.submit(order.append, 2)
    assert not first.done()  # the caller is not held up by the job
    gate.set()
    assert first.result(5)[2] != threading.current_thread().name
    second.result(5)
    assert order == [1, 2]
    w.close()
    assert isinstance(make_worker(lockstep=True), Inline)
