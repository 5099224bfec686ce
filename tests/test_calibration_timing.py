"""calibration.TimingModel: rate conversion, latency, jitter, drops, repeats, combing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibration import NES_FRAME_HZ, Profile, ProfileError, Timing, TimingModel


def skipped_and_repeated(console_frame: np.ndarray) -> tuple[int, int]:
    step = np.diff(console_frame)
    assert step.min() >= 0  # the picture never goes back in time
    return int((step - 1).clip(min=0).sum()), int((step == 0).sum())


@pytest.mark.parametrize("seconds", [10, 100])
def test_60hz_capture_misses_one_console_frame_every_ten_seconds(seconds):
    expected = seconds * (NES_FRAME_HZ - 60.0)  # 0.988 per 10 s
    for seed in range(5):
        s = TimingModel(Timing(capture_hz=60.0), seed=seed).schedule(seconds * 60)
        skipped, repeated = skipped_and_repeated(s.console_frame)
        assert math.floor(expected) <= skipped <= math.ceil(expected)
        assert repeated == 0 and len(s) == seconds * 60


def test_faster_capture_repeats_and_genlocked_capture_shows_every_frame_once():
    s = TimingModel(Timing(capture_hz=61.0), seed=1).schedule(6100)
    skipped, repeated = skipped_and_repeated(s.console_frame)
    expected = 100 * (61.0 - NES_FRAME_HZ)
    assert skipped == 0 and math.floor(expected) <= repeated <= math.ceil(expected)
    s = TimingModel(Timing(capture_hz=NES_FRAME_HZ), seed=1).schedule(6000)
    np.testing.assert_array_equal(s.console_frame, np.arange(6000))


def test_first_frame_shows_console_frame_zero_and_phase_is_seeded():
    a = TimingModel(Timing(), seed=4)
    b = TimingModel(Timing(), seed=4)
    c = TimingModel(Timing(), seed=5)
    assert a.phase_s == b.phase_s != c.phase_s
    sa = a.schedule(600)
    assert sa.console_frame[0] == 0
    np.testing.assert_array_equal(sa.time_ns, b.schedule(600).time_ns)
    assert 0 <= a.phase_s < 1 / 60
    with pytest.raises(ProfileError, match="phase_s"):
        TimingModel(Timing(), phase_s=0.5)


def test_latency_moves_arrival_by_whole_console_frames_not_the_picture():
    base = TimingModel(Timing(jitter_ms=1.0), seed=2).schedule(1200)
    late = TimingModel(Timing(jitter_ms=1.0, latency_frames=3.0), seed=2).schedule(1200)
    np.testing.assert_array_equal(late.console_frame, base.console_frame)
    shift_ns = 3.0 / NES_FRAME_HZ * 1e9
    np.testing.assert_allclose(late.time_ns - base.time_ns, shift_ns, atol=1.0)
    # At any host time, a 3-frame latency shows the console frame 3 frames older.
    t = late.time_ns[600]
    older = base.console_frame[np.searchsorted(base.time_ns, t, side="right") - 1]
    assert older - late.console_frame[600] in (3, 4)


def test_arrival_time_without_jitter_is_sampling_plus_latency():
    m = TimingModel(Timing(latency_frames=2.0), seed=0, phase_s=0.004)
    s = m.schedule(3)
    tc = 1 / NES_FRAME_HZ
    expected = [(tc + 0.004 + k / 60.0 + 2 * tc) * 1e9 for k in range(3)]
    np.testing.assert_allclose(s.time_ns, expected, atol=1.0)
    # Sampled 0.004 s into console frame 1's output: frame 0 is the newest complete one.
    assert s.console_frame.tolist() == [0, 1, 2]


def test_jitter_delays_but_keeps_arrival_order():
    base = TimingModel(Timing(), seed=3).schedule(5000)
    jit = TimingModel(Timing(jitter_ms=2.0), seed=3).schedule(5000)
    extra_ms = (jit.time_ns - base.time_ns) / 1e6
    assert extra_ms.min() >= 0
    assert extra_ms.mean() == pytest.approx(2.0 * math.sqrt(2 / math.pi), rel=0.1)
    assert np.diff(jit.time_ns).min() >= 0


def test_drops_leave_gaps_and_repeats_hold_the_picture():
    n = 20000
    s = TimingModel(Timing(drop_rate=0.05), seed=6).schedule(n)
    dropped = n - len(s)
    assert dropped == pytest.approx(0.05 * n, abs=4 * math.sqrt(n * 0.05))
    gaps = int((np.diff(s.device_index) - 1).sum())
    assert int(s.device_index[0]) + gaps + (n - 1 - int(s.device_index[-1])) == dropped
    np.testing.assert_array_equal(s.index, np.arange(len(s)))
    r = TimingModel(Timing(repeat_rate=0.05, capture_hz=NES_FRAME_HZ), seed=6).schedule(n)
    _, repeated = skipped_and_repeated(r.console_frame)
    assert repeated == pytest.approx(0.05 * n, abs=4 * math.sqrt(n * 0.05))
    assert len(r) == n
    # ``repeat`` flags exactly the deliveries that hold the picture before (at the console's
    # rate every sample shows a new frame otherwise).
    held = np.concatenate([[False], r.console_frame[1:] == r.console_frame[:-1]])
    np.testing.assert_array_equal(r.repeat, held)
    assert not s.repeat.any()


def test_combing_pairs_each_picture_with_the_frame_before():
    p = Profile.load("composite_480p_combing")
    s = TimingModel(p.timing, seed=0, combing=p.artifacts.combing).schedule(600)
    np.testing.assert_array_equal(s.odd_frame, np.maximum(s.console_frame - 1, 0))
    plain = TimingModel(p.timing, seed=0).schedule(600)
    np.testing.assert_array_equal(plain.odd_frame, plain.console_frame)


def test_capture_covering_a_number_of_console_frames():
    m = TimingModel(Timing(), seed=9)
    s = m.for_console_frames(300)
    assert s.console_frame.max() == 299
    assert m.schedule(len(s) + 1).console_frame[-1] == 300
    with pytest.raises(ValueError, match="device_frames must be >= 0"):
        m.schedule(-1)
