"""Held-out splits of calibration: which epochs are fitted, which predicted, and when nothing can be held out."""

from __future__ import annotations

import pytest

from gnnplan.simulator.calibrate_holdout import EpochSplit, epoch_times_s, split_epochs, transient_epochs
from gnnplan.simulator.trace import Span


@pytest.mark.parametrize(("epochs", "split"), [
    ([0], EpochSplit((0,), (0,), (), "1 epoch: cannot be held out")),
    # two epochs: both measured, but the warm-up is no epoch to fit a held-out prediction on
    ([0, 1], EpochSplit((0, 1), (0, 1), (), "2 epochs: the one to fit on would be epoch 0, the warm-up; run 3 or "
                        "more for a held-out error")),
    ([0, 1, 2], EpochSplit((1, 2), (2,), (1,))),  # three or more: epoch 0 is warm-up
    (range(12), EpochSplit(tuple(range(1, 12)), (2, 4, 6, 8, 10), (1, 3, 5, 7, 9, 11))),
    ([-1, 0, 1, 2], EpochSplit((1, 2), (2,), (1,))),  # spans outside any epoch are ignored
])
def test_even_epochs_are_fitted_and_odd_ones_held_out(epochs: list[int], split: EpochSplit) -> None:
    assert split_epochs(epochs, set(epochs)) == split


def test_the_runs_measured_epochs_are_the_ones_calibration_uses() -> None:
    """A trace's ``results.measured_epochs`` (hopgnn's controller explored S in epoch 2) replace the warm-up rule."""
    assert split_epochs(range(6), set(range(6)), [1, 3, 4, 5]) == EpochSplit((1, 3, 4, 5), (4,), (1, 3, 5))
    assert split_epochs(range(4), set(range(4)), [1, 2, 3]) == split_epochs(range(4), set(range(4)))
    assert split_epochs(range(4), set(range(4)), [7]) == split_epochs(range(4), set(range(4)))  # none of its epochs


def test_an_epoch_without_its_time_cannot_be_held_out() -> None:
    assert split_epochs([0, 1, 2], {0, 2}) == EpochSplit((1, 2), (1, 2), (), "no timed epoch to hold out "
                                                                                "(no epoch spans)")


def test_an_epochs_time_is_its_slowest_rank() -> None:
    spans = [Span(0, "epoch", 0.0, 0.2, epoch=0), Span(1, "epoch", 0.0, 0.25, epoch=0),
             Span(0, "epoch", 0.3, 0.1, epoch=1), Span(0, "load", 0.0, 9.0, epoch=1)]
    assert epoch_times_s(spans) == {0: 0.25, 1: 0.1}


def test_a_transient_is_more_than_3_scaled_mads_from_the_median() -> None:
    # median 1.0, absolute deviations 0, 0, 0.1, 0.1, 2.0: MAD 0.1, scaled 0.14826, threshold 0.44478
    assert transient_epochs({1: 1.0, 2: 1.0, 3: 1.1, 4: 0.9, 5: 3.0}) == (5,)
    assert transient_epochs({1: 1.0, 2: 1.0, 3: 1.1, 4: 0.9, 5: 1.44}) == ()  # 0.44 s out: within
    assert transient_epochs({1: 1.0, 2: 1.0, 3: 1.1, 4: 3.0}) == ()  # 4 epochs: too few
    assert transient_epochs({e: 1.0 for e in range(1, 6)} | {6: 9.0}) == ()  # MAD 0: a simulated trace


def test_a_transient_is_fitted_by_no_fit_but_still_held_out() -> None:
    times = {e: 1.0 + 0.01 * (e % 3) for e in range(12)} | {4: 5.0, 5: 5.0}
    split = split_epochs(range(12), times, None, times)
    assert split == EpochSplit((1, 2, 3, 6, 7, 8, 9, 10, 11), (2, 6, 8, 10), (1, 3, 5, 7, 9, 11), None, (4, 5))
    assert split_epochs(range(12), times) == split_epochs(range(12), set(range(12)))  # no times: no transient
