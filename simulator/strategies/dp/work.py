"""``dp``'s per-worker work in one iteration: sampled blocks, feature bytes by where they come from (cache,
local host, other machines, peer GPUs), the pull's request and count bytes, and DistDGL's remote-sampling traffic
(the package docstring gives the mechanisms and sources)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gnnplan.simulator.hardware.model import FLOAT_BYTES
from gnnplan.simulator.strategies.base import SimContext, minibatch_blocks, minibatch_model_cost
from gnnplan.simulator.strategies.window_run import StepCompute
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, Block, ModelCost

if TYPE_CHECKING:
    from gnnplan.simulator.strategies.dp import Knobs


@dataclass(frozen=True)
class IterationWork:
    """What one worker does in one iteration: counts, bytes, FLOPs and uncontended compute seconds."""

    num_input_vertices: float
    num_sampled_edges: float
    hit_bytes: float
    local_bytes: float
    remote_bytes: float
    num_remote_vertices: float
    request_bytes: float
    compute: StepCompute
    peer_bytes: float = 0.0
    """Feature rows hit in a peer GPU's cache slice, served over NVLink (``cache_placement = partitioned``)."""
    peer_request_bytes: float = 0.0
    """The int64 ids of those rows, sent to the peers first."""
    count_bytes: float = 0.0
    """The row counts a pull sends first over the network: one int64 to every rank of the other machines."""
    busiest_ratio: float = 1.0
    """The busiest NIC's share of a fetch over the average machine's
    (:meth:`~simulator.workload.graphstats.SampleStats.busiest_ratio`): every worker's fetch lasts until that
    NIC is done."""
    remote_sampling: tuple[tuple[float, float, float], ...] = ()
    """Per sampled layer, seeds outward (``graph_structure = partitioned``): (sampled edges of local vertices,
    sampled edges of remote vertices, vertices sent to their owners); empty when the structure is
    replicated or on one machine."""

    @property
    def sample_request_bytes(self) -> float:
        """The int64 ids of the remotely owned vertices sent to their owners in one iteration."""
        return sum(v for _, _, v in self.remote_sampling) * INDEX_BYTES

    @property
    def sample_reply_bytes(self) -> float:
        """The sampled edges sent back: source, destination and edge id, int64 each (DGL's SubgraphResponse)."""
        return sum(e for _, e, _ in self.remote_sampling) * SAMPLED_EDGE_BYTES


SAMPLED_EDGE_BYTES = 3 * INDEX_BYTES
"""Bytes of one sampled edge in a DistDGL sampling response: global source, destination and edge id, int64 each
(``SubgraphResponse(global_src, global_dst, global_eids)``, dgl/distributed/graph_services.py, DGL 1.1.3)."""


def remote_sampling(ctx: SimContext, blocks: list[Block]) -> tuple[tuple[float, float, float], ...]:
    """Per layer, seeds outward, what sampling a partitioned structure does at home and remotely:
    (local sampled edges, remote sampled edges, remote vertices).

    A block's destination vertices owned by another machine are sampled there. The seeds are the worker's own
    (DistDGL ``node_split``). For the inner layers the fraction owned elsewhere comes from the partition
    statistics: the input vertices' remote fraction ``r`` (``SampleStats.access(0)``, no cache) counts the seeds
    as local, so a non-seed vertex is remote with ``r' = r n_in / (n_in - seeds)``
    ([inferred]: inner layers are treated like the input layer; being closer to the seeds, they are slightly
    more local, so this errs toward more traffic). Sampled edges of a remote vertex: the block's mean per
    destination vertex.
    """
    if ctx.cluster.num_machines == 1:
        return ()  # one machine holds the whole structure: nothing is remote
    seeds, n_in = blocks[-1].num_dst, blocks[0].num_src
    remote = ctx.sample.access(0.0)[2]
    inner = min(1.0, remote * n_in / (n_in - seeds)) if n_in > seeds else 0.0
    out = []
    for layer, b in reversed(list(enumerate(blocks))):
        vertices = 0.0 if layer == len(blocks) - 1 else inner * max(0.0, b.num_dst - seeds)
        edges = b.num_edges * vertices / b.num_dst if b.num_dst > 0 else 0.0
        out.append((b.num_edges - edges, edges, vertices))
    return tuple(out)


def cache_access(ctx: SimContext, knobs: Knobs) -> tuple[float, float, float, float]:
    """(own cache hit, local miss, remote miss, peer hit) fractions of a worker's input vertices.

    ``replicated`` (PaGraph): every GPU caches the ``cache_fraction`` hottest vertices. ``partitioned`` (Quiver):
    the machine's g GPUs cache disjoint slices of the ``g x cache_fraction`` hottest (vertex of hotness rank k on
    GPU k mod g, as the executor places them), so of the machine's hits 1/g are in the worker's own slice and
    (g - 1)/g in a peer's [inferred: a worker's inputs are independent of a vertex's rank mod g].

    Source: brief gsplit.md §2.2 and §7 (PaGraph: per-GPU caches overlap; Quiver: no overlap, a local miss that
    hits a peer's cache is a GPU-to-GPU load).
    """
    g = ctx.cluster.gpus_per_machine
    if knobs.cache_placement == "replicated" or g == 1:
        hit, local, remote = ctx.sample.access(knobs.cache_fraction)
        return hit, local, remote, 0.0
    hit, local, remote = ctx.sample.access(min(1.0, g * knobs.cache_fraction))
    return hit / g, local, remote, hit * (g - 1) / g


def iteration_work(ctx: SimContext, knobs: Knobs, scale: float = 1.0) -> tuple[IterationWork, ModelCost]:
    """One worker's work in an iteration whose seeds are ``scale`` times a full batch.

    Returns:
        (the work, the model's kernels and memory sizes for this batch).
    """
    cl = ctx.cluster
    blocks = minibatch_blocks(ctx, scale)
    cost = minibatch_model_cost(ctx, blocks)
    hit, local, remote, peer = cache_access(ctx, knobs)
    if cl.num_machines == 1:
        local, remote = local + remote, 0.0
    n_in = blocks[0].num_src
    row = ctx.summary.feature_dim * FLOAT_BYTES
    work = IterationWork(
        num_input_vertices=n_in, num_sampled_edges=sum(b.num_edges for b in blocks),
        hit_bytes=hit * n_in * row, local_bytes=local * n_in * row, remote_bytes=remote * n_in * row,
        num_remote_vertices=remote * n_in, request_bytes=remote * n_in * INDEX_BYTES,
        count_bytes=INDEX_BYTES * cl.gpus_per_machine * (cl.num_machines - 1) if remote > 0 else 0.0,
        busiest_ratio=ctx.sample.busiest_ratio(knobs.cache_fraction) if remote > 0 else 1.0,
        compute=StepCompute.of(cost, cl), peer_bytes=peer * n_in * row, peer_request_bytes=peer * n_in * INDEX_BYTES,
        remote_sampling=remote_sampling(ctx, blocks) if knobs.graph_structure == "partitioned" else ())
    return work, cost


def slowest_worker(work: IterationWork, ratio: float) -> IterationWork:
    """The iteration ``work`` of the worker with the largest batch, ``ratio`` times the average worker's input
    vertices (:attr:`~simulator.workload.graphstats.SampleStats.slowest_input_ratio`): its sampled edges, the rows
    it gathers from its cache, its host and its peers, and its forward and backward pass (seconds and FLOPs) grow
    with its inputs [inferred: in proportion; the first layer's gather and dense product, the bulk of a sampled
    batch's work, are linear in the input vertices]. Its remote rows do not: the fetch already lasts until the
    busiest NIC is done (``busiest_ratio``). Every worker waits for this one at each collective, so the symmetric
    schedule runs it on every worker."""
    if ratio == 1.0:
        return work
    c = work.compute
    return replace(work, num_input_vertices=work.num_input_vertices * ratio,
                   num_sampled_edges=work.num_sampled_edges * ratio, hit_bytes=work.hit_bytes * ratio,
                   local_bytes=work.local_bytes * ratio, peer_bytes=work.peer_bytes * ratio,
                   peer_request_bytes=work.peer_request_bytes * ratio,
                   compute=replace(c, forward_s=c.forward_s * ratio, backward_s=c.backward_s * ratio,
                                   forward_flops=c.forward_flops * ratio, backward_flops=c.backward_flops * ratio))
