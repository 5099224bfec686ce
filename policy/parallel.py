"""Ray for the policy's many independent games (evaluation, labelling), local or on a cluster.

    for result in ordered_map(fn, items, workers=4):            # Ray on this machine, 4 CPUs
    for result in ordered_map(fn, items, address="ray://h:10001"):  # an existing Ray cluster
    for result in ordered_map(fn, items, workers=1):            # no Ray: plain loop, same code

`fn` must be a module-level function (Ray pickles it by reference) and its items and results
picklable. Results come back in item order whatever order the tasks finish in, so a run's
output does not depend on the number of workers. Ray (the `train` extra) is imported only when
it is used; a cluster's workers need this project installed (`pip install -e .[train]`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    workers: int = 1,
    address: str | None = None,
) -> Iterator[R]:
    """Yields fn(item) for every item, in item order.

    workers: CPUs of the local Ray instance started here (1 and no address: no Ray, a plain
    loop in this process). address: a running Ray cluster (`ray start --head`, or
    "ray://host:10001"); then `workers` is not used. A Ray instance started here is shut
    down at the end. Without Ray installed the items run in this process (one line on stderr
    says so). Raises ValueError when workers < 1, ImportError when `address` is given and Ray
    is not installed (pip install -e .[train]).
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1 and address is None:
        for item in items:
            yield fn(item)
        return
    if not items:
        return
    try:
        import ray
    except ImportError:
        if address is not None:
            raise ImportError(
                "a Ray cluster (--address) needs Ray: pip install -e .[train]"
            ) from None
        print(
            f"Ray is not installed (pip install -e .[train]): {len(items)} tasks in this process",
            file=sys.stderr,
        )
        for item in items:
            yield fn(item)
        return

    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address is None:
            kw["num_cpus"] = workers
        else:
            kw["address"] = address
        ray.init(**kw)
    try:
        task = ray.remote(num_cpus=1)(fn)
        refs = [task.remote(item) for item in items]
        done: dict[int, R] = {}
        position = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        nxt = 0
        while nxt < len(refs):
            ready, pending = ray.wait(pending, num_returns=1)
            for ref in ready:
                done[position[ref]] = ray.get(ref)
            while nxt in done:
                yield done.pop(nxt)
                nxt += 1
    finally:
        if started:
            ray.shutdown()


def ordered_list(
    fn: Callable[[T], R],
    items: Sequence[T],
    label: str,
    workers: int = 1,
    address: str | None = None,
    progress: bool = True,
) -> list[R]:
    """[fn(item) for item in items] through :func:`ordered_map` (same arguments and errors),
    with a rich progress bar named ``label`` while they run (none when ``progress`` is False)."""
    from rich.progress import Progress

    out: list[R] = []
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(label, total=len(items))
        for r in ordered_map(fn, items, workers=workers, address=address):
            out.append(r)
            bar.advance(task)
    return out
