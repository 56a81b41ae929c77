"""hopgnn at scale: with machine-symmetric statistics the representative machine (simulator.symmetry) equals the
full simulation; a dataset card's representative machine runs, between two step barriers, the machine whose worker
is slowest there (hopgnn.rank_mean), said in the result; the merge controller simulates only the step counts its
hill climb visits."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from sim_fixtures import assert_same, represented

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
        assert_same(fast, full, REL, memory=True)


def test_measured_statistics_of_a_real_graph_are_simulated_in_full() -> None:
    module, kn, ctx = load_context(shaped("4x-a100-10gbe", 2, 2), load_workload("cora-sage"), "hopgnn",
                                   {"num_steps": 2})
    fast = module.simulate(ctx, kn)
    with symmetry.disabled():
        full = module.simulate(ctx, kn)
    assert represented(fast) == represented(full) == {1} and fast.epoch_time_s == full.epoch_time_s
    assert fast.estimated is None


def card_context(machines: int, gpus: int, knobs: dict[str, Any]) -> tuple[Any, Any, Any]:
    workload = load_workload("cora-sage").model_copy(update={"dataset": "card:cora"})
    return load_context(shaped("4x-a100-10gbe", machines, gpus), workload, "hopgnn", knobs)


def fast_and_full(module: Any, ctx: Any, kn: Any) -> tuple[Any, Any]:
    fast = module.simulate(ctx, kn)
    with symmetry.disabled():                         # the proxy's per-rank statistics, every rank
        full = module.simulate(ctx, kn)
    return fast, full


def test_a_card_runs_the_slowest_machine_on_one_machine_and_says_so() -> None:
    for knobs in ({"num_steps": 2}, {}):
        module, kn, ctx = card_context(2, 2, knobs)
        fast, full = fast_and_full(module, ctx, kn)
        assert represented(fast) == {2} and represented(full) == {1}
        assert fast.estimated is not None and rank_mean.NOTE in fast.estimated["statistics"]["micrograph_stats"]
        assert full.estimated is None or rank_mean.NOTE not in str(full.estimated)
        # bytes per link and the memory check come from every rank's measured work, as in the full simulation
        assert fast.bytes_per_epoch == pytest.approx(full.bytes_per_epoch, rel=1e-12)
        assert fast.peak_memory_bytes == full.peak_memory_bytes
        # each barrier waits for the slowest machine's worker in both: observed equal to the last bit since the pulls
        # are collective calls (0.1 % apart before; the per-rank mean: 0.1-2 % shorter)
        assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=1e-9)


def skewed(mg: Any, slow: dict[int, int], factor: float) -> Any:
    """``mg`` with, at S = 2, rank w's group at step k (sizes and input rows) times ``factor`` for every
    ``{k: w}`` of ``slow``."""
    fields = {}
    for name in rank_mean.STEP_FIELDS:
        per_s = [np.array(v, dtype=np.float64) for v in getattr(mg, name)]
        for k, w in slow.items():
            per_s[1][w, k] *= factor
        fields[name] = [v.tolist() for v in per_s]
    return replace(mg, **fields)


def test_each_barrier_waits_for_its_own_slowest_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Machine 1 is slowest at step 0, machine 2 at step 1: the representative runs machine 1's step 0 and
    machine 2's step 1 (and machine 1's pre-gather pull, after the pull's barrier; the sampling and local gather
    before it of the machine slowest there), and its epoch is the full simulation's; the per-rank mean drops both
    leads."""
    module, kn, ctx = card_context(4, 1, {"num_steps": 2, "seed_split": "random"})
    mg = skewed(hopgnn.micrograph_stats(ctx, kn), {0: 1, 1: 2}, 4.0)
    monkeypatch.setattr(hopgnn, "micrograph_stats", lambda ctx, knobs: mg)
    plan = hopgnn.iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers)
    works, lasts = hopgnn.iteration_works(ctx, kn, mg, plan, 2)
    assert rank_mean.segment_estimates(ctx, works, pregather=True, inline_sampling=True).shape == (4, 1, 2, 2)
    picks = rank_mean.slowest_machines(ctx, works, pregather=True, inline_sampling=True)
    # after the pulls: machine 1's step 0 (with the pre-gather's pull), machine 2's step 1; before step 1's pull
    # nothing runs (pre-gathered: no pull there), so the first machine is named
    assert [after for _, after in picks] == [1, 2] and picks[1][0] == 0
    first = picks[0][0]  # the slowest to sample and gather its local pre-gather rows (an unskewed field decides)
    reps = rank_mean.slowest_machine_works(ctx, mg, works, True, True, True, plan.last_fraction)
    for rep, priced in zip(reps, (works, lasts)):
        assert symmetry.machine_symmetric(rep, 4, 1)
        assert rep[0].steps == (priced[1].steps[0], priced[2].steps[1])
        assert rep[0].num_sampled_edges == priced[first].num_sampled_edges
        assert rep[0].pregather_local_rows == priced[first].pregather_local_rows
        assert rep[0].pregather_remote_rows == priced[1].pregather_remote_rows
    fast, full = fast_and_full(module, ctx, kn)
    assert represented(fast) == {4}
    assert fast.epoch_time_s == pytest.approx(full.epoch_time_s, rel=1e-4)
    monkeypatch.setattr(hopgnn, "micrograph_stats", lambda ctx, knobs: rank_mean.rank_mean_stats(mg))
    mean = module.simulate(ctx, kn)
    assert mean.epoch_time_s < 0.99 * full.epoch_time_s       # what the per-rank mean loses here


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
