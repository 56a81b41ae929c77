"""hopgnn at scale: with machine-symmetric statistics the representative machine (simulator.symmetry) equals the
full simulation; a dataset card's per-rank micrograph statistics are replaced by their mean (hopgnn.rank_mean),
said in the result; the merge controller simulates only the step counts its hill climb visits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gnnplan.simulator import symmetry
from gnnplan.simulator.api import load_context
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies import hopgnn
from gnnplan.simulator.strategies.hopgnn import rank_mean
from gnnplan.simulator.workload.spec import load_workload

REL = 1e-9
"""Fast path vs full simulation: the same max-min arithmetic on the same flows (observed: 0)."""


def shaped(preset: str, machines: int, gpus: int) -> ClusterSpec:
    return load_cluster(preset).model_copy(update={"num_machines": machines, "gpus_per_machine": gpus})


def represented(result: Any) -> set[int]:
    return {s.args["machines_represented"] for s in result.spans if s.phase == "epoch"}


def assert_same(fast: Any, full: Any) -> None:
    assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=REL)
    for phase, seconds in full.breakdown_s.items():
        assert fast.breakdown_s[phase] == pytest.approx(seconds, rel=REL, abs=1e-15), phase
    assert fast.bytes_per_epoch == full.bytes_per_epoch and fast.peak_memory_bytes == full.peak_memory_bytes
    key = lambda s: (s.rank, s.iteration, s.phase, s.start_s)  # noqa: E731
    a, b = sorted(fast.spans, key=key), sorted(full.spans, key=key)
    assert [(s.rank, s.phase, s.iteration, s.nbytes) for s in a] == [(s.rank, s.phase, s.iteration, s.nbytes)
                                                                      for s in b]
    assert all(x.end_s == pytest.approx(y.end_s, rel=REL, abs=1e-15) for x, y in zip(a, b))


@pytest.mark.parametrize(("preset", "machines", "gpus"), [("4x-a100-10gbe", 4, 1),
                                                          ("2x4-a100-nvlink3-200gbib", 2, 2)])
def test_representative_equals_full_on_symmetric_statistics(monkeypatch: pytest.MonkeyPatch, preset: str,
                                                            machines: int, gpus: int) -> None:
    cluster = shaped(preset, machines, gpus)
    _, kn, ctx = load_context(cluster, load_workload("cora-sage"), "hopgnn", {})
    mean = rank_mean.rank_mean_stats(hopgnn.micrograph_stats(ctx, kn))   # every worker the same: symmetric
    monkeypatch.setattr(hopgnn, "micrograph_stats", lambda ctx, knobs: mean)
    for knobs in ({"num_steps": 2}, {"pregather": False}, {"num_steps": 2, "num_sampler_workers": 2}):
        module, kn, ctx = load_context(cluster, load_workload("cora-sage"), "hopgnn", knobs)
        fast = module.simulate(ctx, kn)
        with symmetry.disabled():
            full = module.simulate(ctx, kn)
        assert represented(fast) == {machines} and represented(full) == {1}, knobs
        assert {s.rank for s in fast.spans} == set(range(machines * gpus))
        assert_same(fast, full)


def test_measured_statistics_of_a_real_graph_are_simulated_in_full() -> None:
    module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 2), load_workload("cora-sage"), "hopgnn",
                                   {"num_steps": 2})
    fast = module.simulate(ctx, kn)
    with symmetry.disabled():
        full = module.simulate(ctx, kn)
    assert represented(fast) == represented(full) == {1} and fast.epoch_time_s == full.epoch_time_s
    assert fast.estimated is None


def test_a_card_runs_the_rank_mean_on_one_machine_and_says_so() -> None:
    workload = load_workload("cora-sage").model_copy(update={"dataset": "card:cora"})
    for knobs in ({"num_steps": 2}, {}):
        module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 2), workload, "hopgnn", knobs)
        fast = module.simulate(ctx, kn)
        with symmetry.disabled():                         # the proxy's per-rank statistics, every rank
            full = module.simulate(ctx, kn)
        assert represented(fast) == {2} and represented(full) == {1}
        assert fast.estimated is not None and rank_mean.NOTE in fast.estimated["statistics"]["micrograph_stats"]
        assert full.estimated is None or rank_mean.NOTE not in str(full.estimated)
        # totals over workers are kept (bytes per link), the memory check keeps the measured peaks
        assert fast.bytes_per_epoch == pytest.approx(full.bytes_per_epoch, rel=1e-12)
        assert fast.peak_memory_bytes == full.peak_memory_bytes
        # the mean loses the slowest group's wait at each barrier: never longer, here within 5 % (observed 0.1-2 %)
        assert 0.95 * full.epoch_time_s <= fast.epoch_time_s <= full.epoch_time_s * (1 + REL)


def test_rank_mean_keeps_totals_and_equalises_workers() -> None:
    _, kn, ctx = load_context(shaped("4x-a100-10gbe", 4, 1), load_workload("cora-sage"), "hopgnn", {})
    measured = hopgnn.micrograph_stats(ctx, kn)
    mean = rank_mean.rank_mean_stats(measured)
    for name in rank_mean.STEP_FIELDS + rank_mean.WORKER_FIELDS:
        for s in range(4):
            m, a = np.asarray(getattr(measured, name)[s]), np.asarray(getattr(mean, name)[s])
            assert a.shape == m.shape and (a == a[:1]).all(), name
            np.testing.assert_allclose(a.sum(axis=0), m.sum(axis=0), rtol=1e-12)
    assert len(mean.step_src) == 4 and mean.step_src[-1] is mean.step_src[3]
    assert not (np.asarray(measured.step_seeds[3]) == np.asarray(measured.step_seeds[3])[:1]).all()  # was uneven


def test_controller_simulates_only_the_step_counts_it_visits(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = shaped("4x-a100-10gbe", 4, 1)
    module, kn, ctx = load_context(cluster, load_workload("cora-sage"), "hopgnn", {})
    every = {s: hopgnn.simulate_steps(ctx, kn, hopgnn.micrograph_stats(ctx, kn), s).epoch_time_s
             for s in range(1, 5)}
    calls: list[int] = []
    original = hopgnn.simulate_steps

    def counting(ctx: Any, knobs: Any, mg: Any, num_steps: int, *args: Any, **kwargs: Any) -> Any:
        calls.append(num_steps)
        return original(ctx, knobs, mg, num_steps, *args, **kwargs)

    monkeypatch.setattr(hopgnn, "simulate_steps", counting)
    for revert in (True, False):
        calls.clear()
        result = module.simulate(ctx, kn.model_copy(update={"merge_revert": revert}))
        chosen = hopgnn.controller_steps(every, 4, revert)
        assert result.epoch_time_s == every[chosen]
        stop = hopgnn.controller_steps(every, 4, True)        # the climb compares S - 1 with S from M down
        assert sorted(calls) == list(range(max(stop - 1, 1), 5)), (calls, every)
