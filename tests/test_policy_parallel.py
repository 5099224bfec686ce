"""policy.parallel: Ray tasks give the results of a plain loop, in item order."""

from __future__ import annotations

import pytest

from policy.parallel import ordered_map


def square_after(x: int) -> int:
    import time

    time.sleep(0.02 * (5 - x))  # later items finish first
    return x * x


def test_ray_results_come_back_in_item_order() -> None:
    items = list(range(5))
    assert list(ordered_map(square_after, items, workers=1)) == [0, 1, 4, 9, 16]
    assert list(ordered_map(square_after, items, workers=2)) == [0, 1, 4, 9, 16]
    with pytest.raises(ValueError, match="workers"):
        list(ordered_map(square_after, items, workers=0))
