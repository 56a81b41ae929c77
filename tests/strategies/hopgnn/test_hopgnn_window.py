"""HopGNN's short window: when the workers run in lockstep the first iterations and the last one predict the epoch
of the full window (up to rounding); otherwise the full window is simulated."""

from __future__ import annotations

import math

import pytest

from gnnplan.simulator.api import load_context
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies import hopgnn
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict


def test_in_lockstep_needs_every_rank_at_every_multiple_of_the_period() -> None:
    assert hopgnn.in_lockstep([[1.0, 2.0, 3.0, 9.0], [1.0, 2.0, 3.0, 8.0]], 3)
    assert not hopgnn.in_lockstep([[1.0, 2.0, 3.0], [0.5, 2.0, 3.0]], 3)  # rank 1 ends iteration 0 early
    assert not hopgnn.in_lockstep([[1.0, 2.0, 3.0 + 1e-6]], 3)
    assert hopgnn.in_lockstep([[1.0, 2.0, 3.0 + 1e-10]], 3)


def _simulate(knobs: dict, full: bool, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    data = load_workload("cora-sage").model_dump(mode="json")
    data["training"]["batch_size"] = 16  # 9 iterations of 4 seeds per worker
    cluster = load_cluster("4x-a100-10gbe")
    module, kn, ctx = load_context(cluster, workload_from_dict(data), "hopgnn", knobs)
    with monkeypatch.context() as m:
        if full:
            m.setattr(hopgnn, "LOCKSTEP_ITERATIONS", 10 ** 9)
        result = module.simulate(ctx, kn)
    simulated = {s.args["simulated_iterations"] for s in result.spans if s.phase == "epoch"}
    return result, simulated


@pytest.mark.parametrize("knobs", [{"num_steps": 2}, {"num_steps": 4, "pregather": False}, {"micrograph": False}])
def test_short_window_predicts_the_full_window(knobs: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    short, short_window = _simulate(knobs, False, monkeypatch)
    full, full_window = _simulate(knobs, True, monkeypatch)
    assert short.num_iterations == 9 and short_window == {hopgnn.LOCKSTEP_ITERATIONS + 1} and full_window == {9}
    assert math.isclose(short.epoch_time_s, full.epoch_time_s, rel_tol=1e-9)
    assert short.breakdown_s.keys() == full.breakdown_s.keys()
    for phase, seconds in full.breakdown_s.items():
        assert math.isclose(short.breakdown_s[phase], seconds, rel_tol=1e-9, abs_tol=1e-15), phase


def test_sampler_processes_get_the_full_window(monkeypatch: pytest.MonkeyPatch) -> None:
    result, window = _simulate({"num_steps": 2, "num_sampler_workers": 1}, False, monkeypatch)
    assert window == {9}
