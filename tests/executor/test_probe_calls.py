"""``gnnplan probe``'s per-call fixed costs (executor/probe_calls.py): the DGL message-passing call's overhead is
the median paired difference between DGL's layer and its dense control."""

from __future__ import annotations

import itertools
import time

import pytest

from gnnplan.executor import probe_calls


def _scripted_clock(durations: list[float]) -> object:
    """A ``perf_counter`` whose consecutive (start, end) readings are ``durations`` apart, 1 s between pairs of
    readings."""
    readings = list(itertools.accumulate(x for d in durations for x in (1.0, d)))
    return iter(readings).__next__


def test_graph_op_overhead_is_the_median_paired_difference_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pair times DGL's layer, then its control; the three warm-up pairs are left out, and the median of the
    paired differences (not the difference of medians) over the two message-passing calls is returned: layer
    times 9, 9, 9 (warm-up) then 4, 6, 5, 7, 100 ms against controls 1, 1, 1 then 1, 2, 1, 6, 1 ms give
    differences 3, 4, 4, 1, 99 -> median 4 -> 2 ms per call (the medians' difference would be 2.5)."""
    layer = [9e-3] * 3 + [4e-3, 6e-3, 5e-3, 7e-3, 100e-3]
    control = [1e-3] * 3 + [1e-3, 2e-3, 1e-3, 6e-3, 1e-3]
    monkeypatch.setattr(time, "perf_counter", _scripted_clock([x for pair in zip(layer, control) for x in pair]))
    assert probe_calls.graph_op_overhead_s(5) == pytest.approx(2e-3, rel=1e-9)


def test_graph_op_overhead_has_a_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """A control slower than DGL's layer (a fast path, or noise) gives :data:`probe_calls.MIN_FIXED_S`, not a
    negative cost."""
    monkeypatch.setattr(time, "perf_counter", _scripted_clock([1e-3, 2e-3] * 5))
    assert probe_calls.graph_op_overhead_s(2) == probe_calls.MIN_FIXED_S


def test_a_dgl_call_costs_more_than_its_dense_control() -> None:
    """On this machine's real DGL (1.1.3, CPU) the layer's message-passing calls cost far more than the one dense
    kernel that replaces them in the control (0.18-0.23 ms per call here, 2026-12-02): the measurement is well
    above its floor."""
    assert probe_calls.graph_op_overhead_s(20) > 10 * probe_calls.MIN_FIXED_S
