"""The network model: GPUDirect RDMA, NICs per machine, NVSwitch vs pairwise NVLink, DDP bucket overlap and
DistDGL's remote sampling on a partitioned structure. Each mechanism changes what it should, exactly, and nothing
else (constructed clusters, latencies 0 where a time is checked, so the expected seconds are closed forms)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sim_fixtures import RMAT_SUMMARY, make_stats

from gnnplan.simulator.api import simulate
from gnnplan.simulator.engine import Engine
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.collectives import (
    all_reduce_link_bytes,
    hierarchical_all_reduce_time_s,
    nic_index,
    peer_bandwidth_bytes_per_s,
)
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.hardware.spec import ClusterSpec, cluster_from_dict, load_cluster
from gnnplan.simulator.strategies import dp
from gnnplan.simulator.strategies.base import IterationPlan, SimContext
from gnnplan.simulator.strategies.calibration_rules import all_reduce_rule
from gnnplan.simulator.strategies.ddp_buckets import BucketedBackward, ddp_buckets, ready_fractions
from gnnplan.simulator.strategies.window_run import StepCompute, WindowRun
from gnnplan.simulator.trace import Span
from gnnplan.simulator.units import INDEX_BYTES
from gnnplan.simulator.workload.model_cost import Block
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload

B = 1.0e9
N = 6.0e6


def cluster(machines: int = 2, gpus: int = 1, **updates: dict[str, Any]) -> ClusterSpec:
    """A validated cluster of ``machines`` x ``gpus`` on 4x-a100-10gbe's parts: PCIe, NIC and NVLink at ``B``,
    all latencies and fixed costs 0; ``updates`` merge into its sections (``network={...}``)."""
    data = load_cluster("4x-a100-10gbe").model_dump()
    data.update(num_machines=machines, gpus_per_machine=gpus, sources={})
    data["pcie"].update(bandwidth_bytes_per_s=B, latency_s=0.0)
    data["network"].update(bandwidth_bytes_per_s=B, latency_s=0.0, per_collective_s=0.0)
    data["nvlink"] = {"bandwidth_bytes_per_s": B, "latency_s": 0.0}
    for section, fields in updates.items():
        data[section] = {**(data[section] or {}), **fields}
    return cluster_from_dict(data)


def finish_times(cl: ClusterSpec, *ops: Callable[[HardwareModel], Any]) -> list[float]:
    """Start every operation at time 0 on one hardware model; the time each one ends."""
    engine = Engine(0)
    hw = HardwareModel(cl, engine)
    ends = [0.0] * len(ops)

    def run(i: int, op: Callable[[HardwareModel], Any]) -> Any:
        event = op(hw)
        if hasattr(event, "send"):  # a generator (all_reduce): run it inline
            yield from event
        else:
            yield event
        ends[i] = engine.now

    for i, op in enumerate(ops):
        engine.process(run(i, op))
    engine.run()
    return ends


# ------------------------------------------------------------------------------------------ GPUDirect RDMA

@pytest.mark.parametrize("gdr", [False, True])
def test_gpudirect_rdma_skips_the_host_staging_copy(gdr: bool) -> None:
    """A GPU-to-remote-GPU transfer next to a host-to-GPU copy into the receiving GPU: staged, the two share that
    GPU's PCIe link (each at B/2); with GPUDirect RDMA the transfer only crosses the NICs."""
    cl = cluster(network={"gpudirect_rdma": gdr})
    net, copy = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N), lambda hw: hw.host_to_gpu(1, N))
    assert net == pytest.approx(N / B if gdr else 2 * N / B, rel=1e-12)
    assert copy == pytest.approx(N / B if gdr else 2 * N / B, rel=1e-12)
    out, = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N))
    assert out == pytest.approx(N / B, rel=1e-12)                         # alone: NIC-bound either way


def test_gpudirect_rdma_changes_nothing_else() -> None:
    staged, direct = cluster(), cluster(network={"gpudirect_rdma": True})
    for cl in (staged, direct):                                            # host-to-host and PCIe copies
        assert finish_times(cl, lambda hw: hw.network(0, 1, N), lambda hw: hw.host_to_gpu(1, N)) == \
            pytest.approx([N / B, N / B], rel=1e-12)
    assert hierarchical_all_reduce_time_s(N, staged) == hierarchical_all_reduce_time_s(N, direct)
    # the bytes the program moves; the library's staging is timed (above), not counted
    assert all_reduce_link_bytes(N, direct) == all_reduce_link_bytes(N, staged) == {"nvlink": 0.0, "network": N}


@pytest.mark.parametrize("gdr", [False, True])
def test_staged_all_reduce_is_bound_by_a_slower_pcie(gdr: bool) -> None:
    """PCIe at B/4 under a NIC at B: staged, each ring step runs at the PCIe rate; the closed form agrees with
    the simulated flows."""
    cl = cluster(machines=4, pcie={"bandwidth_bytes_per_s": B / 4}, network={"gpudirect_rdma": gdr})
    shard = 2 * 3 / 4 * N
    expected = shard / (B if gdr else B / 4)
    assert hierarchical_all_reduce_time_s(N, cl) == pytest.approx(expected, rel=1e-12)
    ends = finish_times(cl, *[lambda hw, r=r: hw.all_reduce(r, N) for r in range(4)])
    assert ends == pytest.approx([expected] * 4, rel=1e-12)


@pytest.mark.parametrize("gdr", [False, True])
def test_a_staged_exchange_is_three_copies_and_prices_as_exchange_s(gdr: bool) -> None:
    """A program's own staged message (store and forward: copy out, send, copy in) takes pricing.exchange_s alone,
    latencies included; with GPUDirect RDMA both are the NICs alone. Next to a host-to-GPU copy into the receiving
    GPU, the staged message's last leg shares that GPU's PCIe link; the direct one shares nothing."""
    cl = cluster(pcie={"latency_s": 1e-5}, network={"gpudirect_rdma": gdr, "latency_s": 3e-5})
    expected = 3e-5 + N / B + (0.0 if gdr else 2 * (1e-5 + N / B))
    assert pricing.exchange_s(cl, N) == pytest.approx(expected, rel=1e-12)
    assert pricing.exchange_per_byte_s(cl) == pytest.approx((1 if gdr else 3) / B, rel=1e-12)
    alone, = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N, store_and_forward=True))
    assert alone == pytest.approx(expected, rel=1e-12)
    msg, copy = finish_times(cl, lambda hw: hw.gpu_network(0, 1, N, store_and_forward=True),
                             lambda hw: hw.host_to_gpu(1, 4 * N))
    if gdr:
        assert (msg, copy) == pytest.approx((expected, 1e-5 + 4 * N / B), rel=1e-12)
    else:  # the copy runs alone until the message's last leg starts, then both get B/2 until the message ends
        start = 1e-5 + N / B + 3e-5 + N / B + 1e-5
        left = 4 * N - (start - 1e-5) * B
        assert msg == pytest.approx(start + 2 * N / B, rel=1e-12)
        assert copy == pytest.approx(start + 2 * N / B + (left - N) / B, rel=1e-12)


def test_gpudirect_rdma_is_irrelevant_without_gpus() -> None:
    """A CPU-only worker's rows already are in host memory: its exchange is the network alone either way."""
    local = load_cluster("local")
    assert local.gpu.is_host_cpu and not local.network.gpudirect_rdma
    direct = local.model_copy(update={"network": local.network.model_copy(update={"gpudirect_rdma": True})})
    assert pricing.exchange_s(local, N, steps=3) == pricing.exchange_s(direct, N, steps=3) == pytest.approx(
        3 * local.network.latency_s + N / local.network.bandwidth_bytes_per_s, rel=1e-12)
    assert pricing.shuffle_s(local, network_bytes=N) == pricing.shuffle_s(direct, network_bytes=N)


def _gdr(cl: ClusterSpec, on: bool) -> ClusterSpec:
    return cl.model_copy(update={"network": cl.network.model_copy(update={"gpudirect_rdma": on})})


_FULL_GRAPH = {"neutronstar": ("cora-gcn-full", {"mode": "depcomm"}), "hongtu": ("cora-gcn-full", {}),
               "gsplit": ("cora-sage", {})}


@pytest.mark.parametrize("strategy", sorted(_FULL_GRAPH))
def test_gpudirect_rdma_removes_the_staging_of_exchanges(strategy: str) -> None:
    """2 machines x 2 GPUs, PCIe at a quarter of the NIC: staged, every cross-machine message of neutronstar /
    hongtu / gsplit also crosses both GPUs' PCIe links (and shares them with loads); with GPUDirect RDMA the
    NICs alone, so exchanges get faster and their PCIe bytes vanish; the network bytes and the compute stay."""
    workload, knobs = _FULL_GRAPH[strategy]
    shape = cluster(machines=2, gpus=2, pcie={"bandwidth_bytes_per_s": B / 4})
    staged, direct = (simulate(_gdr(shape, on), workload, strategy, knobs) for on in (False, True))
    comm = "shuffle" if strategy == "gsplit" else "exchange"
    assert direct.breakdown_s[comm] < 0.8 * staged.breakdown_s[comm]
    assert direct.epoch_time_s < staged.epoch_time_s
    assert direct.bytes_per_epoch["network"] == staged.bytes_per_epoch["network"]
    for phase in ("forward", "backward", "optimizer"):
        assert direct.breakdown_s[phase] == pytest.approx(staged.breakdown_s[phase], rel=1e-9)
    if strategy == "gsplit":  # gsplit counts its loads on PCIe, not the shuffles' staging
        assert direct.bytes_per_epoch["pcie"] == staged.bytes_per_epoch["pcie"]
        return
    gradient = {s.nbytes for s in staged.spans if s.phase == "all_reduce"}
    assert len(gradient) == 1
    reduced = 4 * all_reduce_link_bytes(gradient.pop(), shape)["network"]
    exchanged = staged.bytes_per_epoch["network"] - reduced                   # rows and gradients across machines
    assert exchanged > 0
    assert staged.bytes_per_epoch["pcie"] - direct.bytes_per_epoch["pcie"] == pytest.approx(2 * exchanged, rel=1e-12)
    if strategy == "neutronstar":                                             # it has no other PCIe traffic
        assert direct.bytes_per_epoch["pcie"] == 0


@pytest.mark.parametrize("strategy", sorted(_FULL_GRAPH))
def test_gpudirect_rdma_changes_nothing_on_one_machine(strategy: str) -> None:
    workload, knobs = _FULL_GRAPH[strategy]
    shape = cluster(machines=1, gpus=4, pcie={"bandwidth_bytes_per_s": B / 4})
    staged, direct = (simulate(_gdr(shape, on), workload, strategy, knobs).to_json_dict() for on in (False, True))
    for key in ("epoch_time_s", "breakdown_s", "bytes_per_epoch", "peak_memory_bytes"):
        assert direct[key] == staged[key], key


# ------------------------------------------------------------------------------------------ NICs per machine

def test_each_gpu_uses_its_affine_nic() -> None:
    assert [nic_index(local, 8, 8) for local in range(8)] == list(range(8))
    assert [nic_index(local, 8, 4) for local in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [nic_index(local, 4, 8) for local in range(4)] == [0, 2, 4, 6]
    assert [nic_index(local, 4, 1) for local in range(4)] == [0, 0, 0, 0]
    hw = HardwareModel(cluster(gpus=4, network={"nics_per_machine": 2}), Engine(0))
    assert [hw.nic_of(r) for r in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert len(hw.nic_tx) == len(hw.nic_rx) == 4


@pytest.mark.parametrize("nics", [1, 2, 4, 8])
def test_more_nics_multiply_a_machines_bandwidth(nics: int) -> None:
    """2 machines x 4 GPUs, GPUDirect RDMA: across machines each GPU's shard shares its NIC with the GPUs affine
    to it, so the all-reduce's network term divides by min(nics, 4); simulated = closed form."""
    cl = cluster(gpus=4, nvlink={"bandwidth_bytes_per_s": 1e15},
                 network={"nics_per_machine": nics, "gpudirect_rdma": True})
    across = 2 * 1 / 2 * N / 4 * (4 / min(nics, 4)) / B
    inside = 2 * 3 / 4 * N / 1e15
    assert hierarchical_all_reduce_time_s(N, cl) == pytest.approx(inside + across, rel=1e-12)
    ends = finish_times(cl, *[lambda hw, r=r: hw.all_reduce(r, N) for r in range(8)])
    assert ends == pytest.approx([inside + across] * 8, rel=1e-12)


def test_rails_and_striping() -> None:
    cl = cluster(network={"nics_per_machine": 4})
    assert finish_times(cl, lambda hw: hw.network(0, 1, N)) == pytest.approx([N / (4 * B)], rel=1e-12)  # striped
    assert finish_times(cl, lambda hw: hw.network(0, 1, N, rail=2)) == pytest.approx([N / B], rel=1e-12)
    two_rails = finish_times(cl, lambda hw: hw.network(0, 1, N, rail=0), lambda hw: hw.network(0, 1, N, rail=1))
    one_rail = finish_times(cl, lambda hw: hw.network(0, 1, N, rail=3), lambda hw: hw.network(0, 1, N, rail=3))
    assert two_rails == pytest.approx([N / B] * 2, rel=1e-12)
    assert one_rail == pytest.approx([2 * N / B] * 2, rel=1e-12)


def test_nics_change_nothing_inside_a_machine() -> None:
    one, eight = (cluster(machines=1, gpus=8, network={"nics_per_machine": n}) for n in (1, 8))
    assert hierarchical_all_reduce_time_s(N, one) == hierarchical_all_reduce_time_s(N, eight)
    for cl in (one, eight):
        assert finish_times(cl, lambda hw: hw.gpu_to_gpu(0, 1, N), lambda hw: hw.host_to_gpu(2, N)) == \
            pytest.approx([N / B, N / B], rel=1e-12)
    # a fetch by all 8 workers of a machine: 8 pullers on one NIC, or one each on 8
    assert pricing.feature_fetch_s(one, N, sharers=8) == pytest.approx(8 * N / B, rel=1e-12)
    assert pricing.feature_fetch_s(eight, N, sharers=8) == pytest.approx(N / B, rel=1e-12)


# ------------------------------------------------------------------------------------ NVSwitch vs pairwise

@pytest.mark.parametrize("topology", ["nvswitch", "pairwise"])
def test_peer_copies_follow_the_nvlink_topology(topology: str) -> None:
    """4 GPUs: one pair's copy gets the GPU's full NVLink through NVSwitch, one of 3 direct links pairwise; a copy
    to all 3 peers at once and the collectives use every link either way."""
    cl = cluster(machines=1, gpus=4, nvlink={"topology": topology})
    pair = N / B if topology == "nvswitch" else 3 * N / B
    assert finish_times(cl, lambda hw: hw.gpu_to_gpu(0, 1, N)) == pytest.approx([pair], rel=1e-12)
    assert pricing.gpu_to_gpu_s(cl, N) == pytest.approx(pair, rel=1e-12)
    fan_out = finish_times(cl, *[lambda hw, p=p: hw.gpu_to_gpu(0, p, N / 3) for p in (1, 2, 3)])
    assert fan_out == pytest.approx([N / B] * 3, rel=1e-12)
    assert pricing.gpu_to_gpu_s(cl, N, num_peers=3) == pytest.approx(N / B, rel=1e-12)
    ring = 2 * 3 / 4 * N / B
    assert hierarchical_all_reduce_time_s(N, cl) == pytest.approx(ring, rel=1e-12)
    assert finish_times(cl, *[lambda hw, r=r: hw.all_reduce(r, N) for r in range(4)]) == \
        pytest.approx([ring] * 4, rel=1e-12)
    assert pricing.shuffle_s(cl, intra_bytes=N) == pytest.approx(N / B, rel=1e-12)


def test_without_nvlink_peer_copies_go_peer_to_peer_over_pcie() -> None:
    cl = cluster(machines=1, gpus=4, pcie={"bandwidth_bytes_per_s": B / 2})
    cl = cl.model_copy(update={"nvlink": None})
    assert peer_bandwidth_bytes_per_s(cl, num_peers=3) == B / 2
    assert finish_times(cl, lambda hw: hw.gpu_to_gpu(0, 1, N)) == pytest.approx([2 * N / B], rel=1e-12)
    assert pricing.gpu_to_gpu_s(cl, N) == pytest.approx(2 * N / B, rel=1e-12)


def test_catalogue_presets_carry_the_network_fields() -> None:
    dgx = load_cluster("dgx-a100")
    assert dgx.network.nics_per_machine == 8 and dgx.network.gpudirect_rdma
    assert dgx.nvlink is not None and dgx.nvlink.topology == "nvswitch"
    built = load_cluster("8x-a100-nvswitch")
    assert built.network.nics_per_machine == 8 and built.network.gpudirect_rdma
    assert "network.nics_per_machine" in built.sources and "network.gpudirect_rdma" in built.sources
    hgx4 = load_cluster("4x-a100-80gb-nvlink3")
    assert hgx4.nvlink is not None and hgx4.nvlink.topology == "pairwise" and "nvlink.topology" in hgx4.sources
    ethernet = load_cluster("4x-a100-10gbe")
    assert ethernet.network.nics_per_machine == 1 and not ethernet.network.gpudirect_rdma


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
    """Every worker runs one training step of ``work`` (no sampling, no loading)."""

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


@pytest.mark.parametrize("strategy", ["hopgnn", "gsplit"])
def test_bucket_overlap_in_hopgnn_and_gsplit(strategy: str) -> None:
    """2 machines x 1 GPU on cora-sage: a gradient in 4 buckets all-reduces partly under the (last) backward, so
    each iteration ends sooner with the same compute and bytes; a gradient that fits one bucket (exactly, or the
    25 MiB default) changes nothing."""
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

    def row(**args: Any) -> pricing.SpanRow:
        return pricing.SpanRow(Span(0, "all_reduce", 0.0, 1e-3, "network", 4e6, args=args), {}, {}, cluster())
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


# ------------------------------------------------------------------------ partitioned-structure sampling

def _dp_ctx(machines: int, network_bytes_per_s: float = 1.25e9) -> SimContext:
    cl = load_cluster("4x-a100-10gbe")
    cl = cl.model_copy(update={"num_machines": machines, "network": cl.network.model_copy(
        update={"bandwidth_bytes_per_s": network_bytes_per_s})})
    wl = load_workload("rmat100k-sage")
    batch = wl.training.batch_size
    return SimContext(cl, wl, make_stats(machines, 1, batch // machines), RMAT_SUMMARY, batch)


def test_remote_sampling_from_partition_statistics() -> None:
    ctx = _dp_ctx(4)
    blocks = [Block(600.0, 90.0, 800.0), Block(90.0, 10.0, 95.0)]
    r = ctx.sample.access(0.0)[2]
    inner = r * 600.0 / (600.0 - 10.0)
    assert dp.remote_sampling(ctx, blocks) == pytest.approx(
        [(95.0, 0.0, 0.0), (800.0 - 800.0 * inner * 80.0 / 90.0, 800.0 * inner * 80.0 / 90.0, inner * 80.0)])
    assert dp.remote_sampling(_dp_ctx(1), blocks) == ()


def test_partitioned_structure_adds_sampling_traffic_and_nothing_else() -> None:
    ctx = _dp_ctx(4)
    replicated = dp.simulate(ctx, dp.Knobs())
    partitioned = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned"))
    plan_iters = replicated.num_iterations
    full, _ = dp.iteration_work(ctx, dp.Knobs(graph_structure="partitioned"))
    last, _ = dp.iteration_work(ctx, dp.Knobs(graph_structure="partitioned"), 
                                dp.iteration_plan(RMAT_SUMMARY.num_train, ctx.batch_size, 4).last_fraction)
    extra = sum(count * (w.sample_request_bytes + w.sample_reply_bytes) for w, count in
                ((full, plan_iters - 1), (last, 1))) * 4
    assert extra > 0 and full.sample_reply_bytes == pytest.approx(
        3 * INDEX_BYTES * sum(e for _, e, _ in full.remote_sampling))
    assert partitioned.bytes_per_epoch["network"] == pytest.approx(replicated.bytes_per_epoch["network"] + extra,
                                                                   rel=1e-12)
    for link in ("pcie", "nvlink", "storage"):
        assert partitioned.bytes_per_epoch[link] == replicated.bytes_per_epoch[link]
    per_iteration = [s.nbytes for s in partitioned.spans if s.phase == "sample" and s.rank == 0 and s.iteration == 0]
    assert per_iteration == pytest.approx([full.sample_request_bytes + full.sample_reply_bytes], rel=1e-12)
    for phase in ("forward", "backward", "optimizer"):
        assert partitioned.breakdown_s[phase] == pytest.approx(replicated.breakdown_s[phase], rel=1e-12)
    assert partitioned.peak_memory_bytes["gpu"] == replicated.peak_memory_bytes["gpu"]
    structure = (4.0 * RMAT_SUMMARY.num_edges + RMAT_SUMMARY.num_vertices) * INDEX_BYTES
    assert replicated.peak_memory_bytes["host"] - partitioned.peak_memory_bytes["host"] == pytest.approx(
        structure * 3 / 4, rel=1e-9)


def test_remote_sampling_waits_for_a_slow_network() -> None:
    """Owners sample the remote vertices on their own cores (faster than one core when the network is quick);
    over a 1 MB/s network the requests and replies make sampling slower than sampling everything at home."""
    fast, slow = _dp_ctx(4), _dp_ctx(4, 1.0e6)
    for ctx, slower in ((fast, False), (slow, True)):
        replicated = dp.simulate(ctx, dp.Knobs()).breakdown_s["sample"]
        partitioned = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned")).breakdown_s["sample"]
        assert (partitioned > replicated) == slower


def test_partitioned_structure_on_one_machine_is_replicated() -> None:
    ctx = _dp_ctx(1)
    a = dp.simulate(ctx, dp.Knobs()).to_json_dict()
    b = dp.simulate(ctx, dp.Knobs(graph_structure="partitioned")).to_json_dict()
    for key in ("epoch_time_s", "breakdown_s", "bytes_per_epoch"):
        assert a[key] == b[key]


def test_the_executor_rejects_a_partitioned_structure() -> None:
    from gnnplan.executor.strategies.dp import check_knobs

    check_knobs(dp.Knobs())
    with pytest.raises(SpecError, match="graph_structure"):
        check_knobs(dp.Knobs(graph_structure="partitioned"))
