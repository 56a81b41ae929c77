"""The event engine's fluid sharing: max-min fair rates, exact completion times."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from gnnplan.simulator.engine import Engine, FluidResource
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import load_cluster


def _finish_times(engine: Engine, starts: list[tuple[float, Any]]) -> list[float]:
    done = [0.0] * len(starts)

    def proc(i: int, at: float, make: Any) -> Generator[Any, Any, None]:
        yield engine.timeout(at)
        yield make()
        done[i] = engine.now

    for i, (at, make) in enumerate(starts):
        engine.process(proc(i, at, make))
    engine.run()
    return done


def test_one_flow_alone_takes_amount_over_capacity() -> None:
    e = Engine()
    link = FluidResource("l", 1e9)
    assert _finish_times(e, [(0.0, lambda: e.fluid.start([link], 2e9))]) == [pytest.approx(2.0, rel=1e-12)]


def test_two_concurrent_transfers_each_take_twice_as_long() -> None:
    e = Engine()
    link = FluidResource("l", 1e9)
    times = _finish_times(e, [(0.0, lambda: e.fluid.start([link], 1e9)), (0.0, lambda: e.fluid.start([link], 1e9))])
    assert times == [pytest.approx(2.0, rel=1e-12)] * 2


def test_late_flow_shares_only_while_both_are_active() -> None:
    # A: 2e9 bytes from t=0; B: 0.5e9 bytes from t=1. A alone until 1 (1e9 left), both at 0.5e9/s until B ends
    # at t=2, then A alone: 0.5e9 left -> ends at 2.5.
    e = Engine()
    link = FluidResource("l", 1e9)
    times = _finish_times(e, [(0.0, lambda: e.fluid.start([link], 2e9)), (1.0, lambda: e.fluid.start([link], 5e8))])
    assert times == [pytest.approx(2.5, rel=1e-12), pytest.approx(2.0, rel=1e-12)]


def test_max_min_fairness_across_links_and_caps() -> None:
    # Flows 1 and 2 share link a (cap 1); flow 2 also crosses link b (cap 0.4), flow 3 uses b only.
    # Max-min: flow 2 and 3 get 0.2 each on b, flow 1 gets the 0.8 left on a.
    e = Engine()
    a, b = FluidResource("a", 1.0), FluidResource("b", 0.4)
    times = _finish_times(e, [(0.0, lambda: e.fluid.start([a], 0.8)), (0.0, lambda: e.fluid.start([a, b], 0.2)),
                              (0.0, lambda: e.fluid.start([b], 0.2))])
    assert times == [pytest.approx(1.0, rel=1e-12)] * 3
    e2 = Engine()
    cores = FluidResource("cores", 4.0)   # one capped flow (1 core) next to an uncapped one: 1 + 3 cores
    times = _finish_times(e2, [(0.0, lambda: e2.fluid.start([cores], 1.0, cap=1.0)),
                               (0.0, lambda: e2.fluid.start([cores], 3.0))])
    assert times == [pytest.approx(1.0, rel=1e-12)] * 2


def test_hardware_transfer_adds_latency_and_shares_the_nic() -> None:
    cl = load_cluster("4x-a100-10gbe")
    e = Engine()
    hw = HardwareModel(cl, e)
    n = cl.network.bandwidth_bytes_per_s * 0.1
    times = _finish_times(e, [(0.0, lambda: hw.network(0, 1, n)), (0.0, lambda: hw.network(2, 1, n))])
    # both replies enter machine 1's receive side: each gets half of it
    assert times == [pytest.approx(cl.network.latency_s + 0.2, rel=1e-12)] * 2


def test_host_cpu_compute_competes_with_sampling_for_cores() -> None:
    cl = load_cluster("4x-a100-10gbe")
    cpu = cl.model_copy(update={"gpu": cl.gpu.model_copy(update={"is_host_cpu": True}),
                                "host": cl.host.model_copy(update={"num_cores": 1})})
    e = Engine()
    hw = HardwareModel(cpu, e)
    done = []

    def compute() -> Generator[Any, Any, None]:
        yield from hw.compute(0, 1.0)
        done.append(("compute", e.now))

    def sample() -> Generator[Any, Any, None]:
        yield hw.host_work(0, 1.0)
        done.append(("sample", e.now))

    e.process(compute())
    e.process(sample())
    e.run()
    assert dict(done) == {"compute": pytest.approx(2.0), "sample": pytest.approx(2.0)}
