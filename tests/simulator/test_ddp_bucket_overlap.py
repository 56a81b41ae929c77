"""The network model's DDP bucket overlap: gradient buckets all-reduced while backward goes on, as the executor's
DistributedDataParallel does; in the simulator, calibration and the executor (constructed clusters, latencies 0
where a time is checked, so the expected seconds are closed forms)."""

from __future__ import annotations

from typing import Any

import pytest
from network_fixtures import cluster
from sim_fixtures import RMAT_SUMMARY

from gnnplan.simulator.api import simulate
from gnnplan.simulator.hardware import phase_rules, pricing
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.calibration_rules import all_reduce_rule
from gnnplan.simulator.strategies.ddp_buckets import BucketedBackward, ddp_buckets, ready_fractions
from gnnplan.simulator.strategies.window import IterationPlan
from gnnplan.simulator.strategies.window_run import StepCompute, WindowRun
from gnnplan.simulator.trace import Span
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload

# ------------------------------------------------------------------------------------------ DDP buckets

def test_ddp_buckets() -> None:
    assert ddp_buckets(10.0, 4.0) == [4.0, 4.0, 2.0]
    assert ddp_buckets(8.0, 4.0) == [4.0, 4.0]
    assert ddp_buckets(3.0, 25.0 * 2**20) == [3.0]
    assert ddp_buckets(0.0, 4.0) == [0.0]
    assert ready_fractions([4.0, 4.0, 2.0]) == pytest.approx([0.4, 0.8, 1.0])
    with pytest.raises(ValueError, match="bucket_bytes"):
        ddp_buckets(1.0, 0.0)


class _Steps(WindowRun):
    """Every worker runs one training step of ``work`` (no sampling, no loading), trained with DDP (as dp's and
    gsplit's executors: only then do buckets overlap backward)."""

    DDP = True

    def __init__(self, ctx: SimContext, work: StepCompute) -> None:
        super().__init__(ctx, IterationPlan(1, 1, 1.0, (0,)))
        self.work = work

    def execute(self) -> None:
        def trainer(rank: int) -> Any:
            yield from self._step(rank, 0, self.work, 0.0)
        for rank in range(self.ctx.num_workers):
            self.engine.process(trainer(rank))
        self.engine.run()


def _step_run(num_buckets: int, backward_s: float, machines: int = 2) -> _Steps:
    cl = cluster(machines=machines, network={"gpudirect_rdma": True})
    grad = 4.0e6
    wl = load_workload("rmat100k-sage")
    wl = wl.model_copy(update={"training": wl.training.model_copy(update={"ddp_bucket_bytes": grad / num_buckets})})
    work = StepCompute(forward_s=1e-3, backward_s=backward_s, optimizer_s=2e-4, forward_flops=1.0,
                       backward_flops=2.0, optimizer_flops=3.0, gradient_bytes=grad)
    run = _Steps(SimContext(cl, wl, None, RMAT_SUMMARY, 64), work)
    run.execute()
    return run


@pytest.mark.parametrize("backward_s", [4e-3, 2e-3, 1e-2])
def test_bucket_all_reduces_overlap_backward(backward_s: float) -> None:
    """4 buckets of 1 MB on 2 x 1 GPUs (each bucket's all-reduce 1 ms): bucket k is ready after (k+1)/4 of
    backward, the buckets are reduced in order, and only what outlasts backward stays on the path."""
    run = _step_run(4, backward_s)
    reduce_s = pricing.all_reduce_s(run.ctx.cluster, 1.0e6)
    assert reduce_s == pytest.approx(1e-3, rel=1e-12)
    end = 0.0
    for k in range(4):
        end = max(end, 1e-3 + backward_s * (k + 1) / 4) + reduce_s
    tail = end - (1e-3 + backward_s)
    spans = {s.phase: s for s in run.spans if s.rank == 0 and s.phase != "all_reduce_bucket"}
    assert spans["backward"].dur_s == pytest.approx(backward_s, rel=1e-12)
    assert spans["all_reduce"].dur_s == pytest.approx(tail, rel=1e-9)
    assert spans["all_reduce"].nbytes == 4.0e6
    assert run.ends[0][0] == run.ends[1][0] == pytest.approx(end + 2e-4, rel=1e-12)
    buckets = [s for s in run.spans if s.rank == 0 and s.phase == "all_reduce_bucket"]
    assert [s.nbytes for s in buckets] == [1.0e6] * 4


def test_one_bucket_or_one_worker_keeps_the_sequential_step() -> None:
    one = _step_run(1, 4e-3)
    assert one.ends[0][0] == pytest.approx(1e-3 + 4e-3 + 4e-3 + 2e-4, rel=1e-12)   # all-reduce after backward
    assert not [s for s in one.spans if s.phase == "all_reduce_bucket"]
    alone = _step_run(4, 4e-3, machines=1)
    assert alone.ends[0][0] == pytest.approx(1e-3 + 4e-3 + 2e-4, rel=1e-12)


class _Segments(WindowRun):
    """Every worker runs forward, then a backward cut into segments with a fixed gap between them (gsplit's
    backward shuffles), its DDP buckets riding on :class:`BucketedBackward`, then the optimizer."""

    DDP = True

    def __init__(self, ctx: SimContext, work: StepCompute, segments_s: list[float], gap_s: float) -> None:
        super().__init__(ctx, IterationPlan(1, 1, 1.0, (0,)))
        self.work, self.segments_s, self.gap_s = work, segments_s, gap_s

    def execute(self) -> None:
        def trainer(rank: int) -> Any:
            yield from self.hw.compute(rank, self.work.forward_s)
            buckets = self._ddp_buckets(self.work.gradient_bytes)
            assert buckets is not None
            bucketed = BucketedBackward(self, rank, 0, buckets, sum(self.segments_s))
            for k, seconds in enumerate(self.segments_s):
                yield from bucketed.compute(seconds)
                if k < len(self.segments_s) - 1:
                    yield self.engine.timeout(self.gap_s)
            yield from bucketed.finish()
            yield from self._optimizer(rank, 0, self.work, 0.0)
        for rank in range(self.ctx.num_workers):
            self.engine.process(trainer(rank))
        self.engine.run()


def test_buckets_launch_as_segmented_backward_produces_them() -> None:
    """Backward of 4 ms in segments 1 + 2 + 1 ms with 3 ms gaps between them, 4 buckets of 1 MB (1 ms each): a
    bucket is ready after a quarter of the backward compute, whatever gap lies in between."""
    cl = cluster(network={"gpudirect_rdma": True})
    work = StepCompute(forward_s=1e-3, backward_s=4e-3, optimizer_s=2e-4, forward_flops=1.0, backward_flops=2.0,
                       optimizer_flops=3.0, gradient_bytes=4.0e6)
    run = _Segments(SimContext(cl, _bucketed(1.0e6), None, RMAT_SUMMARY, 64), work, [1e-3, 2e-3, 1e-3], 3e-3)
    run.execute()
    ready = [2e-3, 3e-3 + 3e-3, 4e-3 + 3e-3, 5e-3 + 6e-3]    # compute done 1, 2, 3, 4 ms (after 0, 1, 1, 2 gaps)
    end = 0.0
    for k in range(4):
        end = max(end, ready[k]) + 1e-3
    buckets = sorted((s for s in run.spans if s.rank == 0 and s.phase == "all_reduce_bucket"), key=lambda s: s.start_s)
    assert [s.start_s for s in buckets] == pytest.approx(ready, rel=1e-12)
    tail = [s for s in run.spans if s.rank == 0 and s.phase == "all_reduce"]
    assert len(tail) == 1 and tail[0].start_s == pytest.approx(11e-3, rel=1e-12)
    assert tail[0].dur_s == pytest.approx(end - 11e-3, rel=1e-9) and tail[0].args["num_buckets"] == 4
    assert run.ends[0][0] == run.ends[1][0] == pytest.approx(end + 2e-4, rel=1e-12)


def _bucketed(bucket_bytes: float, workload: str = "rmat100k-sage") -> WorkloadSpec:
    wl = load_workload(workload)
    return wl.model_copy(update={"training": wl.training.model_copy(update={"ddp_bucket_bytes": bucket_bytes})})


def test_hopgnn_reduces_its_gradients_once_whatever_the_buckets() -> None:
    """hopgnn's executor all-reduces the gradients in one flat call after the last time step (no DDP; the brief's
    "iteration end: all-reduce"), so DDP's bucket size changes nothing in its simulation."""
    cl = cluster(machines=2)
    default = simulate(cl, "cora-sage", "hopgnn", {"num_steps": 2})
    grad = next(s.nbytes for s in default.spans if s.phase == "all_reduce")
    four = simulate(cl, _bucketed(grad / 4, "cora-sage"), "hopgnn", {"num_steps": 2})
    assert four.epoch_time_s == default.epoch_time_s and four.breakdown_s == default.breakdown_s
    assert not [s for s in four.spans if s.phase == "all_reduce_bucket"]


@pytest.mark.parametrize("strategy", ["gsplit"])
def test_bucket_overlap_in_gsplit(strategy: str) -> None:
    """2 machines x 1 GPU on cora-sage: a gradient in 4 buckets all-reduces partly under the (last) backward, so
    each iteration ends sooner with the same compute and bytes; a gradient that fits one bucket (exactly, or the
    25 MiB default) changes nothing. (gsplit's executor trains with DistributedDataParallel, as dp's.)"""
    cl = cluster(machines=2)
    default = simulate(cl, "cora-sage", strategy)
    gradient = {s.nbytes for s in default.spans if s.phase == "all_reduce"}
    assert len(gradient) == 1 and 0 < min(gradient) < 25 * 2**20
    grad = gradient.pop()
    exact = simulate(cl, _bucketed(grad, "cora-sage"), strategy)
    for key in ("epoch_time_s", "breakdown_s", "bytes_per_epoch"):
        assert exact.to_json_dict()[key] == default.to_json_dict()[key], key
    four = simulate(cl, _bucketed(grad / 4, "cora-sage"), strategy)
    assert four.epoch_time_s < default.epoch_time_s
    assert four.breakdown_s["all_reduce"] < default.breakdown_s["all_reduce"]
    assert four.bytes_per_epoch == default.bytes_per_epoch
    for phase in ("forward", "backward", "optimizer"):
        assert four.breakdown_s[phase] == pytest.approx(default.breakdown_s[phase], rel=1e-9)
    for it in {s.iteration for s in four.spans if s.phase == "all_reduce"}:
        per_bucket = [s.nbytes for s in four.spans if s.phase == "all_reduce_bucket" and s.rank == 0
                      and s.iteration == it]
        assert per_bucket == pytest.approx([grad / 4] * 4, rel=1e-12)
    assert not [s for s in default.spans if s.phase == "all_reduce_bucket"]


def test_calibration_prices_only_one_bucket_all_reduces() -> None:
    """A bucketed ``all_reduce`` span is the tail left after backward, not an all-reduce of its bytes."""
    rule = all_reduce_rule()

    def row(**args: Any) -> phase_rules.SpanRow:
        return phase_rules.SpanRow(Span(0, "all_reduce", 0.0, 1e-3, "network", 4e6, args=args), {}, {}, cluster())
    assert rule.applies(row()) and rule.applies(row(num_buckets=1)) and not rule.applies(row(num_buckets=4))


def test_the_executor_buckets_follow_the_workload() -> None:
    """Two gloo ranks: ``data_parallel`` caps DDP's buckets at the given bytes (4 x 1 KiB parameters: 4, 2 or 1
    buckets from the second iteration on; DDP reduces the first in one bucket); the hook counts every bucket and
    the gradient's bytes once; the averaged gradient is the same for every bucket size and equals the mean of the
    ranks' gradients; the dp trainer takes the cap from ``training.ddp_bucket_bytes`` and its ``all_reduce``
    span says how many buckets there were; gsplit's backward, whose shuffles run between the buckets'
    all-reduces, gives the same gradient bit for bit with 4 KiB buckets as with one bucket."""
    import numpy as np
    from ddp_bucket_workers import LAYERS, WIDTH, chain_model, rank_inputs, several

    from gnnplan.executor.comm import ring_bytes
    from gnnplan.executor.ddp import DEFAULT_BUCKET_BYTES
    from gnnplan.executor.launch import spawn

    caps = [1024.0, 2048.0, DEFAULT_BUCKET_BYTES]
    seeds = list(range(140))  # Cora's training vertices
    calls = [("bucket_runs", (caps,)), ("dp_trainer_buckets", (4096.0, seeds))]
    calls += [("gsplit_bucket_gradients", (cap, [5, 5], seeds[::4])) for cap in (4096.0, DEFAULT_BUCKET_BYTES)]
    runs, trainer, split_small, split_one = spawn(several, 2, (calls,))
    grad_bytes = LAYERS * WIDTH * WIDTH * 4
    expected = []
    for rank in range(2):  # the mean of the two ranks' gradients, without DDP
        model = chain_model()
        model(rank_inputs(rank)).square().sum().backward()
        expected.append([p.grad.numpy().astype(np.float64) for p in model.parameters()])
    mean = [(a + b) / 2 for a, b in zip(*expected)]
    for rank_runs in runs["ranks"]:
        for cap, count, run in zip(caps, (4, 2, 1), rank_runs):
            assert run["cap_bytes"] == int(cap)
            assert [it["num_buckets"] for it in run["iterations"]] == [1, count]
            for it in run["iterations"]:
                assert it["ordered"]
                assert it["nbytes"] == grad_bytes and it["sent"] == ring_bytes(grad_bytes, 2)
            for got, want, first in zip(run["grads"], mean, rank_runs[0]["grads"]):
                np.testing.assert_array_equal(got, first)                       # bucketing changes no bit
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for r in trainer["ranks"]:
        assert r["cap_bytes"] == 4096 and r["nbytes"] == [r["gradient_bytes"]] * 2
        assert r["num_buckets"][0] == 1 and r["num_buckets"][1] > 1        # whole tensors: fewer than G / cap
    for small, one in zip(split_small["ranks"], split_one["ranks"]):
        assert small["num_buckets"] == [1, 2] and one["num_buckets"] == [1, 1]
        assert small["grads"].keys() == one["grads"].keys()
        for name, grad in one["grads"].items():
            assert np.abs(grad).max() > 0
            np.testing.assert_array_equal(small["grads"][name], grad, err_msg=name)
