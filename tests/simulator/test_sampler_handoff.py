"""The sampler hand-off is part of every mini-batch strategy's simulation with sampler processes, priced once."""

from __future__ import annotations

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import with_params
from gnnplan.simulator.hardware.spec import load_cluster


@pytest.mark.parametrize("strategy", ["dp", "hopgnn", "gsplit"])
def test_each_batch_from_a_sampler_process_costs_the_handoff(strategy: str) -> None:
    plain = load_cluster("4x-a100-10gbe")
    costly = with_params(plain, {"host.sampler_handoff_s": 2e-3})
    prefetched = {"num_sampler_workers": 2}
    before, after = (api.simulate(cl, "cora-sage", strategy, prefetched) for cl in (plain, costly))
    n = before.num_iterations
    # the trainers take a batch per iteration on the critical path (the samplers stay ahead of them)
    assert after.epoch_time_s - before.epoch_time_s == pytest.approx(n * 2e-3, rel=1e-6)
    assert after.breakdown_s["overhead"] - before.breakdown_s["overhead"] == pytest.approx(n * 2e-3, rel=1e-9)
    # inline sampling hands nothing over
    inline = [api.simulate(cl, "cora-sage", strategy, {"num_sampler_workers": 0}) for cl in (plain, costly)]
    assert inline[0].epoch_time_s == inline[1].epoch_time_s
    assert inline[1].breakdown_s["overhead"] == 0.0
