"""policy.breakdown: a traced game is the played game, and its parts add up to its frames."""

from __future__ import annotations

from policy.breakdown import summarize, trace
from policy.play import Episode, play
from policy.teacher import Teacher


def test_trace_parts_add_up_to_the_played_game() -> None:
    ep = Episode(4, 2, 0x8004, 2)
    t = trace(Teacher(taps_only=True), ep)
    r = play(Teacher(taps_only=True), ep)
    assert t.cleared and r.cleared
    assert t.frames == r.frames and t.pills == r.pills
    assert t.intro + sum(t.fall) + sum(t.settle) == t.frames
    assert any(k > 0 for k in t.rounds)  # viruses were cleared by some pills
    s = summarize([t])
    assert s["cleared"] == 1 and s["median_frames"] == t.frames
    # a pill that clears settles longer than the median pill that clears nothing
    base = s["per_pill"]["settle_base"]
    assert 16 <= base <= 60
    assert all(st > base for st, k in zip(t.settle, t.rounds, strict=True) if k > 0)
