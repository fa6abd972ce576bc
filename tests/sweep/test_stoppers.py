from __future__ import annotations

from sweep.trials.stoppers import ZeroSignalStopper, no_signal


def test_no_signal_needs_patience_consecutive_low_steps():
    assert not no_signal([0.0, 0.0], threshold=1e-3, patience=3)
    assert no_signal([0.1, 0.0, 0.0, 0.0], threshold=1e-3, patience=3)
    assert not no_signal([0.0, 0.0, 0.05, 0.0], threshold=1e-3, patience=3)


def test_stopper_tracks_each_trial_separately():
    stop = ZeroSignalStopper(threshold=1e-3, patience=2)
    assert [stop("a", {"reward/variance_per_prompt": v}) for v in (0.0, 0.2, 0.0, 0.0)] == [False, False, False, True]
    assert stop("b", {"reward/variance_per_prompt": 0.0}) is False
    assert stop("b", {"training_iteration": 1}) is False  # a result without the metric changes nothing
