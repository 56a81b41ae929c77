"""``network.ddp_per_bucket_s``: the fixed cost DDP's reducer adds per gradient bucket is paid by ``dp`` and
``gsplit`` (their executors train with DistributedDataParallel: executor.ddp.data_parallel) and by no strategy that
all-reduces a flat gradient (hopgnn); calibration prices their all-reduce rows with it, as the simulator does."""

from __future__ import annotations

from typing import Any

import pytest

from gnnplan.simulator import api
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies import dp, gsplit, hopgnn

COST_S = 1e-3


def _cluster(cost_s: float) -> ClusterSpec:
    cl = load_cluster("local").model_copy(update={"num_machines": 2, "gpus_per_machine": 1})
    return cl.model_copy(update={"network": cl.network.model_copy(update={"ddp_per_bucket_s": cost_s})})


def _all_reduce_s(strategy: str, cost_s: float, fake_graphstats: Any) -> tuple[float, int]:
    result = api.simulate(_cluster(cost_s), "rmat100k-sage", strategy, {})
    return result.breakdown_s["all_reduce"], result.num_iterations


@pytest.mark.parametrize("strategy", ["dp", "gsplit"])
def test_ddp_strategies_pay_it_once_per_bucket(strategy: str, fake_graphstats: list[dict[str, Any]]) -> None:
    base, iterations = _all_reduce_s(strategy, 0.0, fake_graphstats)
    with_cost, _ = _all_reduce_s(strategy, COST_S, fake_graphstats)
    assert with_cost - base == pytest.approx(iterations * COST_S, rel=1e-9)  # one bucket per iteration
    assert {"dp": dp, "gsplit": gsplit}[strategy].CALIBRATION["all_reduce"].op == "ddp_all_reduce"


def test_a_flat_all_reduce_does_not_pay_it(fake_graphstats: list[dict[str, Any]]) -> None:
    base, _ = _all_reduce_s("hopgnn", 0.0, fake_graphstats)
    assert _all_reduce_s("hopgnn", COST_S, fake_graphstats)[0] == base
    assert hopgnn.CALIBRATION["all_reduce"].op == "all_reduce"


def test_the_price_is_the_plain_all_reduce_plus_the_cost() -> None:
    cl = _cluster(COST_S)
    assert pricing.ddp_all_reduce_s(cl, 1e6) == pytest.approx(pricing.all_reduce_s(cl, 1e6) + COST_S, rel=1e-12)
    one = cl.model_copy(update={"num_machines": 1})
    assert pricing.ddp_bucket_s(one, 1e6) == 0.0  # one worker: DDP reduces nothing
