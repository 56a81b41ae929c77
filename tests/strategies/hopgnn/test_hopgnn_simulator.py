"""The ``hopgnn`` simulator plug-in: registration, knobs, measured micrograph statistics, predicted work."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gnnplan.autotune.study import eligible_strategies
from gnnplan.executor.strategies import get_executor
from gnnplan.simulator.api import load_context, parse_knobs, simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies import STRATEGIES, hopgnn
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.hopgnn.micrographs import micrograph_stats
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict


def cluster(num_machines: int):  # type: ignore[no-untyped-def]
    return load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": num_machines})


def test_registered_and_offered_for_mini_batch_workloads() -> None:
    assert STRATEGIES["hopgnn"] is hopgnn and hopgnn.EXECUTOR == "gnnplan.executor.strategies.hopgnn"
    assert get_executor("hopgnn").__name__ == hopgnn.EXECUTOR
    offered = eligible_strategies(load_workload("cora-sage"), None)
    assert {"dp", "hopgnn"} <= set(offered)
    data = load_workload("cora-sage").model_dump(mode="json")
    data["training"]["mode"] = "full-graph"
    assert "hopgnn" not in eligible_strategies(workload_from_dict(data), None)


def test_knobs_validate() -> None:
    assert parse_knobs("hopgnn", ["num_steps=2", "pregather=false", "partitioner=random"]) == \
        {"num_steps": 2, "pregather": False, "partitioner": "random"}
    assert parse_knobs("hopgnn", ["num_steps=none"]) == {"num_steps": None}
    with pytest.raises(SpecError, match="num_steps"):
        parse_knobs("hopgnn", ["num_steps=0"])
    with pytest.raises(SpecError, match="cache_fraction"):
        parse_knobs("hopgnn", ["cache_fraction=0.1"])
    data = load_workload("cora-sage").model_dump(mode="json")
    data["model"]["arch"] = "sgc"
    with pytest.raises(SpecError, match="model.arch: strategy hopgnn"):
        check_workload(hopgnn, workload_from_dict(data))


def test_controller_follows_the_hill_climb() -> None:
    assert hopgnn.controller_steps({1: 3.0, 2: 2.0, 3: 2.5, 4: 4.0}, 4, revert=True) == 2
    assert hopgnn.controller_steps({1: 3.0, 2: 2.0, 3: 2.5, 4: 4.0}, 4, revert=False) == 1
    # a hill climb stops at the first unprofitable merge, even if a smaller S would be faster
    assert hopgnn.controller_steps({1: 1.0, 2: 3.0, 3: 2.5, 4: 4.0}, 4, revert=True) == 3
    assert hopgnn.controller_steps({1: 1.0, 2: 2.0, 3: 2.5, 4: 4.0}, 4, revert=True) == 1
    assert hopgnn.controller_steps({1: 6.0, 2: 5.0}, 2, revert=True) == 2


@pytest.fixture(scope="module")
def stats():  # type: ignore[no-untyped-def]
    return {p: micrograph_stats("cora", [10, 10], 32, 4, 1, p) for p in ("metis", "random")}


def test_statistics_conserve_seeds_and_measure_locality(stats) -> None:  # type: ignore[no-untyped-def]
    for st in stats.values():
        totals = [sum(sum(row) for row in st.step_seeds[s]) for s in range(4)]
        assert np.allclose(totals, totals[0]) and totals[0] > 0
        for s in range(4):
            seeds = np.asarray(st.step_seeds[s])
            assert seeds.shape == (4, s + 1)
            inputs = np.asarray(st.step_local_inputs[s]) + np.asarray(st.step_remote_inputs[s])
            assert np.allclose(inputs, np.asarray(st.step_src[s])[:, :, 0])
            # the pre-gather deduplicates: never more rows than the steps' remote reads
            assert (np.asarray(st.pregather_remote[s]) <= np.asarray(st.step_remote_inputs[s]).sum(1) + 1e-9).all()
            # home sampling: a worker samples exactly the groups it hosts
            assert np.allclose(np.asarray(st.step_dst[s])[:, :, -1], seeds)
    metis, rand = stats["metis"], stats["random"]
    assert metis.group_local_fraction > 0.75 > rand.group_local_fraction
    assert metis.micrograph_local_fraction > rand.micrograph_local_fraction
    assert 1 - rand.group_local_fraction > 0.6   # ~ (M-1)/M of a random partition's reads are remote
    assert metis.group_local_fraction > 1 - metis.dp_remote_fraction


def spans_per_iteration(result, phase: str) -> Counter:  # type: ignore[no-untyped-def]
    return Counter((s.rank, s.iteration) for s in result.spans if s.phase == phase)


def test_steps_migrations_and_bytes() -> None:
    cl = cluster(4)
    res = {s: simulate(cl, "cora-sage", "hopgnn", {"num_steps": s}) for s in (1, 2, 4)}
    _, _, ctx = load_context(cl, "cora-sage", "hopgnn")
    params = hopgnn.model_costs(ctx).num_params
    for s, r in res.items():
        assert r.feasible and r.epoch_time_s > 0
        migrations = spans_per_iteration(r, "migrate")
        assert set(migrations.values()) == ({s - 1} if s > 1 else set())
        assert all(x.nbytes == 8 * params for x in r.spans if x.phase == "migrate")
        # every step loads (an idle slot too: the executor's collective), and computes where a group is hosted
        assert set(spans_per_iteration(r, "load").values()) == {s}
        hosted = Counter((x.rank, x.iteration) for x in r.spans if x.phase == "load" and x.args["num_seeds"] > 0)
        assert spans_per_iteration(r, "forward") == spans_per_iteration(r, "backward") == hosted
    # seeds split by owner on Cora: some steps host no group on some workers and compute nothing there
    assert sum(spans_per_iteration(res[4], "forward").values()) < 4 * len(spans_per_iteration(res[4], "load"))
    # home sampling: the sampler's edges are the hosted groups' edges; only rows, models and gradients travel
    _, _, ctx4 = load_context(cl, "cora-sage", "hopgnn", {"num_steps": 4})
    mg = hopgnn.micrograph_stats(ctx4, hopgnn.Knobs(num_steps=4))
    for x in res[4].spans:
        if x.phase == "sample" and x.iteration < res[4].num_iterations - 1:
            assert np.isclose(x.args["num_sampled_edges"], np.sum(mg.step_edges[3][x.rank]))
    assert "redistribute" not in res[4].breakdown_s
    net = sum(x.nbytes for x in res[4].spans if x.phase in ("pregather", "migrate", "all_reduce"))
    assert net > 0 and not any(x.nbytes for x in res[4].spans if x.phase == "sample")
    # merging moves seeds away from home: fewer steps read more remote rows, S = M the fewest
    assert res[4].breakdown_s["pregather"] < res[1].breakdown_s["pregather"]
    no_pg = simulate(cl, "cora-sage", "hopgnn", {"num_steps": 4, "pregather": False})
    assert no_pg.bytes_per_epoch["network"] >= res[4].bytes_per_epoch["network"]
    assert no_pg.breakdown_s["fetch"] > 0 and no_pg.breakdown_s["pregather"] == 0
    rand = simulate(cl, "cora-sage", "hopgnn", {"num_steps": 4, "partitioner": "random"})
    assert rand.bytes_per_epoch["network"] > res[4].bytes_per_epoch["network"]
    auto = simulate(cl, "cora-sage", "hopgnn", {})
    chosen = hopgnn.controller_steps({s: simulate(cl, "cora-sage", "hopgnn", {"num_steps": s}).epoch_time_s
                                      for s in (1, 2, 3, 4)}, 4, True)
    assert auto.epoch_time_s == simulate(cl, "cora-sage", "hopgnn", {"num_steps": chosen}).epoch_time_s
    # and it says what it chose (the knobs it was given leave num_steps unset)
    assert auto.knobs["num_steps"] is None and res[4].notes == []
    assert [n for n in auto.notes if n.startswith(f"the merge controller settled on num_steps={chosen} of 4 (")]


def test_naive_variant_tours_every_machine() -> None:
    r = simulate(cluster(4), "cora-sage", "hopgnn", {"micrograph": False})
    assert r.feasible
    assert set(spans_per_iteration(r, "migrate").values()) == {4}
    assert r.breakdown_s["pregather"] == 0 and "redistribute" not in r.breakdown_s


def test_one_machine_has_nothing_to_move() -> None:
    r = simulate(load_cluster("dgx-a100"), "cora-sage", "hopgnn", {})
    assert r.feasible and r.bytes_per_epoch["network"] == 0
    assert not any(s.phase == "migrate" for s in r.spans)


def test_pulls_are_the_executors_three_collective_calls() -> None:
    """A pull (the pre-gather's, or each step's without pre-gathering) is the executor's ``RowStore.pull``: three
    all-to-all calls, each paying ``network.per_all_to_all_s`` on every worker, so raising that cost by d adds
    3 d per pull to the phase (every worker here has rows to pull and every call waits for the same workers)."""
    base = cluster(4)
    d = 1e-3
    slow = base.model_copy(update={"network": base.network.model_copy(
        update={"per_all_to_all_s": base.network.per_all_to_all_s + d})})
    for knobs, phase, pulls_per_iteration in (({"num_steps": 2}, "pregather", 1),
                                              ({"num_steps": 2, "pregather": False}, "fetch", 2)):
        a, b = (simulate(c, "cora-sage", "hopgnn", knobs) for c in (base, slow))
        assert b.breakdown_s[phase] - a.breakdown_s[phase] == pytest.approx(3 * d * pulls_per_iteration
                                                                            * a.num_iterations, rel=1e-6)
        assert b.bytes_per_epoch == a.bytes_per_epoch


@pytest.mark.parametrize("machines", [1, 2])
def test_pregather_writes_the_pulled_buffer_once_more(monkeypatch: pytest.MonkeyPatch, machines: int) -> None:
    """With a pull the executor gathers the local rows and then writes them, and the pulled rows after the pull,
    into one buffer (``rows[local] = ...``, ``rows[~local] = pulled``): the span is a gather of twice the local
    rows' bytes, the pull, and a gather of the remote rows' bytes. On one machine the gathered rows are the
    buffer. With the pull taking no time, each worker's pre-gather is exactly those gathers (one GPU per machine
    and inline sampling: nothing else uses the host memory meanwhile)."""
    from gnnplan.simulator.hardware import pricing
    from gnnplan.simulator.strategies.hopgnn import run

    def no_pull(self, rank, key, rows, row_bytes):  # type: ignore[no-untyped-def]
        return 0.0
        yield

    monkeypatch.setattr(run.HopRun, "_pull", no_pull)
    cl, knobs = cluster(machines), {"num_steps": machines}  # one step per machine at most
    module, kn, ctx = load_context(cl, "cora-sage", "hopgnn", knobs)
    mg = hopgnn.micrograph_stats(ctx, kn)
    plan = hopgnn.iteration_plan(ctx.summary.num_train, ctx.batch_size, ctx.num_workers)
    works, _ = hopgnn.iteration_works(ctx, kn, mg, plan, machines)
    result = simulate(cl, "cora-sage", "hopgnn", knobs)
    spans = {s.rank: s for s in result.spans if s.phase == "pregather" and s.iteration == 0}
    assert sorted(spans) == list(range(machines))
    for rank, span in spans.items():
        local, remote = (works[rank].pregather_local_rows * works[rank].row_bytes,
                         works[rank].pregather_remote_rows * works[rank].row_bytes)
        want = (pricing.host_gather_s(cl, 2 * local) + pricing.host_gather_s(cl, remote) if machines > 1
                else pricing.host_gather_s(cl, local))
        assert local > 0 and (remote > 0) == (machines > 1)
        assert span.dur_s == pytest.approx(want, rel=1e-9)
