"""HopGNN's naive feature-centric variant (``micrograph = false``) executed: every model tours all machines with
its subgraph; the gradient equals dp's on the same blocks, and the tour moves what the simulator prices."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hopgnn_workers import assert_same_gradients, gradients, naive_epoch

from gnnplan.executor.launch import spawn
from gnnplan.executor.strategies.hopgnn import check_knobs
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies.hopgnn import Knobs
from gnnplan.simulator.units import INDEX_BYTES
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.spec import load_workload

KEYED = {"sampler": "keyed", "partitioner": "random"}  # about half of every tour's rows on the other machines
FANOUTS = [4, 3]


@pytest.mark.parametrize("workers", [2, 3])
def test_the_naive_gradient_is_dp_s(workers: int) -> None:
    """With the keyed sampler each model's home sample is dp's worker sample; layer 1 from the toured sums equals
    DGL's layer on the block up to float summation order (sage mean, gcn weighted sum, gin sum)."""
    seeds = np.random.default_rng(workers).choice(load_dataset("cora").train_idx, 45, replace=False).tolist()
    cases = []
    for arch in ("sage", "gcn", "gin"):
        cases += [("dp", arch, KEYED, {}, seeds), ("hopgnn", arch, {**KEYED, "micrograph": False}, {}, seeds)]
    out = spawn(gradients, workers, (cases, FANOUTS))
    for i, arch in enumerate(("sage", "gcn", "gin")):
        assert_same_gradients(out[2 * i], out[2 * i + 1], f"{arch}, {workers} workers")


def test_an_epoch_tours_every_machine_carrying_what_the_simulator_counts() -> None:
    ranks = spawn(naive_epoch, 2, ("sage",))["ranks"]
    world = len(ranks)
    per_iteration: dict[int, float] = {}
    for r in ranks:
        spans = r["spans"]
        stats = r["stats"]
        assert math.isfinite(stats.loss_sum) and stats.num_iterations > 0
        assert all(s.args["remote_bytes"] == 0 for s in spans if s.phase == "load")  # nothing is fetched
        migrations = [s for s in spans if s.phase == "migrate"]
        assert len(migrations) == world * stats.num_iterations  # M migrations per iteration: round and home
        for s in migrations:
            per_iteration[s.iteration] = per_iteration.get(s.iteration, 0.0) + s.nbytes
    # each stop reads the first block's input vertices stored there once: over the tour, every input vertex once
    read: dict[int, int] = {}
    inputs: dict[int, int] = {}
    for r in ranks:
        for s in r["spans"]:
            if s.phase == "load":
                read[s.iteration] = read.get(s.iteration, 0) + s.args["num_input_vertices"]
            elif s.phase == "sample":
                inputs[s.iteration] = inputs.get(s.iteration, 0) + s.args["num_input_vertices"]
    assert read == inputs and sum(read.values()) > 0
    # every model's payload crosses M links: params, partial sums and own rows, ids and first-block edges
    params, dim = ranks[0]["num_params"], ranks[0]["dim"]
    tours: dict[int, float] = {}
    for r in ranks:
        for s in r["spans"]:
            if s.phase == "sample":
                n, e = s.args["tour_dst"], s.args["tour_edges"]
                payload = 4 * (params + 2 * n * dim) + INDEX_BYTES * (n + 3 * e + 2)
                tours[s.iteration] = tours.get(s.iteration, 0.0) + world * payload
    assert per_iteration == pytest.approx(tours, rel=0)


def test_the_simulator_carries_the_same_payload() -> None:
    """naive_work's migration bytes per worker and iteration are the executor's payload formula on the mean
    block sizes (parameters, 2 x dst_0 x D floats, dst_0 ids and 3 int64 per first-block edge, two sizes)."""
    from gnnplan.simulator.api import load_context
    from gnnplan.simulator.strategies.hopgnn.work import naive_work

    _, _, ctx = load_context("4x-a100-10gbe", load_workload("cora-sage"), "hopgnn", {"micrograph": False})
    work = naive_work(ctx, 0)
    st = ctx.sample
    n, e, dim = st.num_dst_vertices[0], st.num_edges[0], ctx.summary.feature_dim
    assert work.migration_bytes - work.gradient_bytes == pytest.approx(4 * 2 * n * dim + INDEX_BYTES * (n + 3 * e + 2))


def test_what_the_naive_executor_refuses() -> None:
    check_knobs(Knobs(micrograph=False), load_workload("cora-sage"))
    with pytest.raises(SpecError, match="knobs.num_sampler_workers: the naive variant"):
        check_knobs(Knobs(micrograph=False, num_sampler_workers=1))
    gat = load_workload("cora-sage").model_copy(update={"model": load_workload("cora-sage").model.model_copy(
        update={"arch": "gat"})})
    with pytest.raises(SpecError, match="model.arch: the naive variant"):
        check_knobs(Knobs(micrograph=False), gat)
    check_knobs(Knobs(), gat)  # micrograph training runs gat
