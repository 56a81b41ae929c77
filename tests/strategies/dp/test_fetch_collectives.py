"""dp's remote fetch as the executor's ``RowStore.pull``: three all-to-all calls, each with its fixed cost
(``network.per_all_to_all_s``, not the all-reduce's ``per_collective_s``), each waiting for the slowest rank;
calibration prices the span the same way."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, make_stats

from gnnplan.simulator import symmetry
from gnnplan.simulator.hardware.phase_rules import SpanRow
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.strategies import dp, window
from gnnplan.simulator.strategies.base import FETCH_COLLECTIVES, SimContext
from gnnplan.simulator.strategies.dp.run import DpRun
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.spec import load_workload

WORKLOAD = load_workload("rmat100k-sage")
PER_ALL_TO_ALL_S = 7.0e-4
DELAY_S = 3.0e-3


def two_machines(per_all_to_all_s: float, per_collective_s: float = 0.0) -> ClusterSpec:
    """2 machines x 1 GPU on 10 GbE, with the given fixed costs of an all-to-all and of an all-reduce call."""
    cl = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 2})
    return cl.model_copy(update={"network": cl.network.model_copy(
        update={"per_all_to_all_s": per_all_to_all_s, "per_collective_s": per_collective_s})})


def context(cluster: ClusterSpec) -> SimContext:
    batch = WORKLOAD.training.batch_size
    stats = make_stats(cluster.num_machines, cluster.gpus_per_machine, batch // cluster.num_gpus)
    return SimContext(cluster, WORKLOAD, stats, RMAT_SUMMARY, batch)


def fetch_spans(spans: list[Span]) -> dict[tuple[int, int], Span]:
    return {(s.rank, s.iteration): s for s in spans if s.phase == "fetch"}


def test_each_call_of_the_fetch_costs_per_all_to_all_s() -> None:
    knobs = dp.Knobs(cache_fraction=0.1)  # inline sampling: nothing overlaps the fetch
    without = fetch_spans(dp.simulate(context(two_machines(0.0)), knobs).spans)
    costly = dp.simulate(context(two_machines(PER_ALL_TO_ALL_S)), knobs)
    with_cost = fetch_spans(costly.spans)
    assert FETCH_COLLECTIVES == 3 and without.keys() == with_cost.keys() and len(without) >= 2 * 3
    for key, span in with_cost.items():
        assert span.dur_s - without[key].dur_s == pytest.approx(FETCH_COLLECTIVES * PER_ALL_TO_ALL_S, rel=1e-9)
        assert span.args["wait_s"] == 0.0  # equal work on every rank: nobody waits
    # the all-reduce's fixed cost is not the fetch's
    reduce_only = fetch_spans(dp.simulate(context(two_machines(0.0, per_collective_s=1e-2)), knobs).spans)
    assert all(reduce_only[key].dur_s == pytest.approx(span.dur_s, rel=1e-12) for key, span in without.items())
    # calibration prices the span as the simulator runs it (uncontended: one rank per NIC)
    rule = dp.CALIBRATION["fetch"]
    assert rule.rows == "per_call" and "network.per_all_to_all_s" in rule.params
    assert "network.per_collective_s" not in rule.params
    span = with_cost[(0, 1)]
    row = SpanRow(span, {"fetch": [span]}, knobs.model_dump(), two_machines(PER_ALL_TO_ALL_S))
    assert rule.predicted_s(row) == pytest.approx(span.dur_s, rel=1e-9)


class _LateRank(DpRun):
    """dp's window with rank 1 reaching iteration 2's fetch ``DELAY_S`` late (a slower sampler)."""

    def _sample(self, rank: int, pos: int) -> Generator[Any, Any, None]:
        yield from super()._sample(rank, pos)
        if rank == 1 and pos == 2:
            yield self.engine.timeout(DELAY_S)


def test_a_rank_that_reaches_the_fetch_early_waits_for_the_slower_one() -> None:
    ctx, knobs = context(two_machines(PER_ALL_TO_ALL_S)), dp.Knobs(cache_fraction=0.1)
    plan = window.iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers)
    full, _ = dp.iteration_work(ctx, knobs)
    last, _ = dp.iteration_work(ctx, knobs, plan.last_fraction)
    with symmetry.disabled():  # both ranks simulated
        run = _LateRank(ctx, knobs, plan, full, last)
        run.execute()
    fetch = fetch_spans(run.spans)
    early, late = fetch[(0, 2)], fetch[(1, 2)]
    assert late.start_s - early.start_s == pytest.approx(DELAY_S, rel=1e-9)
    assert late.end_s == pytest.approx(early.end_s, rel=1e-12)  # the collectives end together
    assert early.args["wait_s"] == pytest.approx(DELAY_S, rel=1e-9) and late.args["wait_s"] == 0.0
    assert early.dur_s - late.dur_s == pytest.approx(DELAY_S, rel=1e-9)
    assert late.dur_s == pytest.approx(fetch[(1, 1)].dur_s, rel=1e-9)  # the late rank's calls cost as usual


def test_calibration_times_each_collective_call_to_its_ranks_mean_end() -> None:
    """Two fetch calls per iteration on two ranks that arrive together and move the same bytes: one row per call,
    timed to the ranks' mean end (which of them ends last is noise; a late one delays its next iteration)."""
    from types import SimpleNamespace

    from gnnplan.simulator.calibrate import _collect

    durations = {(0, 0): 5e-3, (1, 0): 1e-3, (0, 1): 2e-3, (1, 1): 4e-3}  # (rank, call) -> seconds
    spans = [Span(rank, "fetch", 0.01 * call, dur, "network", nbytes=1e5, epoch=1, iteration=0)
             for (rank, call), dur in durations.items()]
    trace = SimpleNamespace(name="t", spans=spans, shape=two_machines(PER_ALL_TO_ALL_S), plugin=dp,
                            plan=SimpleNamespace(knobs={}))
    rows, _ = _collect(trace)  # type: ignore[arg-type]
    assert [r.measured_s for r in rows if r.op == "feature_fetch"] == pytest.approx([3e-3, 3e-3], rel=1e-12)


def test_a_call_row_is_the_busiest_rank_timed_from_the_last_arrival() -> None:
    """Rank 0 arrives first and mostly sends (its bytes can sit in TCP buffers when it ends); rank 1 arrives 2 ms
    later and receives 600 kB. The call's row is rank 1's span from the last arrival: 7 ms with 600 kB, not the
    fastest span (rank 0's 5 ms) with the largest bytes. A clock that ends the busiest rank before the last
    arrival falls back to the fastest span."""
    from gnnplan.simulator.calibrate_calls import call_row

    cluster = two_machines(PER_ALL_TO_ALL_S)

    def row(rank: int, start: float, dur: float, nbytes: float) -> SpanRow:
        span = Span(rank, "fetch", start, dur, "network", nbytes, 0.0, 1, 0)
        return SpanRow(span, {"fetch": [span]}, {}, cluster)

    sender, receiver = row(0, 0.0, 5e-3, 1e5), row(1, 2e-3, 7e-3, 6e5)
    picked = call_row([sender, receiver]).span
    assert (picked.rank, picked.dur_s, picked.nbytes) == (1, pytest.approx(7e-3), 6e5)
    late = row(0, 1e-2, 2e-3, 1e5)  # arrives after the busiest rank ended: clocks that do not align
    picked = call_row([late, row(1, 0.0, 5e-3, 6e5)]).span
    assert (picked.rank, picked.dur_s, picked.nbytes) == (0, pytest.approx(2e-3), 6e5)
    # equal bytes (an all-reduce): from the last arrival (2 ms) to the ranks' mean end ((5 + 9) / 2 ms)
    picked = call_row([row(0, 0.0, 5e-3, 6e5), row(1, 2e-3, 7e-3, 6e5)]).span
    assert (picked.dur_s, picked.nbytes) == (pytest.approx(5e-3, rel=1e-12), 6e5)
