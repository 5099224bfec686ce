"""The command line's parsers (hil.args): each takes what a user typed and returns a value in its
range or raises argparse.ArgumentTypeError with what was expected, never another exception;
through `hil run` a bad value is one line and exit code 2 before any work starts."""

from __future__ import annotations

import argparse
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hil import args as parse

ANY_TEXT = st.text(max_size=40) | st.from_regex(r"-?[0-9x:,.eE+-]{0,12}(nan|inf)?", fullmatch=True)


def _call(fn, text):
    try:
        return fn(text)
    except argparse.ArgumentTypeError as e:
        assert str(e) and "\n" not in str(e)
        return None


@settings(deadline=200, max_examples=300)
@given(ANY_TEXT)
def test_levels_parse_or_say_why(text):
    got = _call(parse.levels, text)
    if got is not None:
        assert got and all(0 <= i.level <= 24 for i in got)
        assert all(i.speed in (None, 0, 1, 2) for i in got)


@settings(deadline=200, max_examples=300)
@given(ANY_TEXT)
def test_seeds_parse_or_say_why(text):
    got = _call(parse.seeds, text)
    if got is not None:
        assert got and all(0 <= s <= 0xFFFF for s in got)


@settings(deadline=200, max_examples=300)
@given(ANY_TEXT)
def test_faults_parse_or_say_why(text):
    got = _call(parse.fault, text)
    if got is not None:
        unit, _default, lo, hi, _what = parse.FAULTS[got.kind]
        assert got.frame >= 0 and math.isfinite(got.amount)
        assert not unit or lo <= got.amount <= hi


@settings(deadline=200, max_examples=300)
@given(ANY_TEXT, st.integers(-5, 5), st.integers(-5, 5))
def test_numbers_are_in_their_range_and_finite(text, a, b):
    lo, hi = min(a, b), max(a, b)
    n = _call(parse.integer(lo, hi), text)
    assert n is None or lo <= n <= hi
    x = _call(parse.real(float(lo), float(hi)), text)
    assert x is None or (math.isfinite(x) and lo <= x <= hi)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0:0,10:1,20", [(0, 0), (10, 1), (20, None)]),
        (" 5 : 2 ", [(5, 2)]),  # spaces around the numbers are allowed
    ],
)
def test_levels_items(text, expected):
    got = _call(parse.levels, text)
    assert (None if got is None else [(i.level, i.speed) for i in got]) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is not a list"),
        ("0:", "item '0:'"),
        ("0,,1", "is not a list"),
        ("25", "level must be 0..24"),
        ("3:3", "speed 0..2"),
    ],
)
def test_bad_levels_say_why(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        parse.levels(text)


@pytest.mark.parametrize(
    ("text", "kind", "amount"),
    [("100", "drop_input", 0), ("100:burst", "burst", 200), ("5:unplug:250", "unplug", 250)],
)
def test_faults(text, kind, amount):
    f = parse.fault(text)
    assert (f.kind, f.amount) == (kind, amount)


@pytest.mark.parametrize(
    "text", ["10:", "-1:drop", "x:drop", "10:melt", "10:garbage:3", "10:burst:nan", "10:burst:1e9"]
)
def test_bad_faults_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse.fault(text)


def test_real_refuses_nan_and_infinity():
    for text in ("nan", "inf", "-inf", "NaN"):
        with pytest.raises(argparse.ArgumentTypeError, match="finite"):
            parse.real(0, 10)(text)


def test_paths(tmp_path):
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert parse.in_file(str(f)) == f
    with pytest.raises(argparse.ArgumentTypeError, match="no such file"):
        parse.in_file(str(tmp_path / "missing"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory"):
        parse.in_file(str(tmp_path))
    assert parse.out_file(str(tmp_path / "new" / "log.jsonl")).name == "log.jsonl"
    with pytest.raises(argparse.ArgumentTypeError, match="is a directory"):
        parse.out_file(str(tmp_path))
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a directory"):
        parse.out_file(str(f / "x.jsonl"))
    fifo = tmp_path / "fifo"
    import os

    os.mkfifo(fifo)
    with pytest.raises(argparse.ArgumentTypeError, match="not a regular file"):
        parse.out_file(str(fifo))
    with pytest.raises(argparse.ArgumentTypeError, match="is a file"):
        parse.out_dir(str(f))
    with pytest.raises(argparse.ArgumentTypeError):
        parse.port("")
