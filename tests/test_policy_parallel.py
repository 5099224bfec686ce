"""policy.parallel: Ray tasks give the results of a plain loop, in item order."""

from __future__ import annotations

import pytest

from policy.eval import parse_levels
from policy.parallel import ordered_map

# The function must be importable by a Ray worker: a module-level function of an installed
# module (a test module is not one).
ITEMS = ["0-20", "5", "3-5,20", "0,24", "7-9", "1", "2-4", "10"]
EXPECTED = [parse_levels(s) for s in ITEMS]


def test_one_worker_is_a_plain_loop() -> None:
    assert list(ordered_map(parse_levels, ITEMS, workers=1)) == EXPECTED
    with pytest.raises(ValueError, match="workers"):
        list(ordered_map(parse_levels, ITEMS, workers=0))


def test_ray_results_come_back_in_item_order() -> None:
    pytest.importorskip("ray")  # the train extra; CI installs it
    assert list(ordered_map(parse_levels, ITEMS, workers=2)) == EXPECTED
