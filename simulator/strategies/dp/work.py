"""``dp``'s per-worker work in one iteration: sampled blocks, feature bytes by where they come from (cache,
local host, other machines, peer GPUs), the pull's request and count bytes, and DistDGL's remote-sampling traffic
(the package docstring gives the mechanisms and sources)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gnnplan.simulator import symmetry
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.model import FLOAT_BYTES
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.base import SMALLER_BATCH_FRACTION, SimContext, minibatch_blocks, minibatch_model_cost
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


def cache_access(ctx: SimContext, knobs: Knobs, worker: int | None = None) -> tuple[float, float, float, float]:
    """(own cache hit, local miss, remote miss, peer hit) fractions of a worker's input vertices: the mean
    worker's, or with ``worker`` that worker's own (``SampleStats.worker_access``).

    ``replicated`` (PaGraph): every GPU caches the ``cache_fraction`` hottest vertices. ``partitioned`` (Quiver):
    the machine's g GPUs cache disjoint slices of the ``g x cache_fraction`` hottest (vertex of hotness rank k on
    GPU k mod g, as the executor places them), so of the machine's hits 1/g are in the worker's own slice and
    (g - 1)/g in a peer's [inferred: a worker's inputs are independent of a vertex's rank mod g].

    Source: brief gsplit.md §2.2 and §7 (PaGraph: per-GPU caches overlap; Quiver: no overlap, a local miss that
    hits a peer's cache is a GPU-to-GPU load).
    """
    g, coverage = ctx.cluster.gpus_per_machine, cache_coverage(ctx, knobs)
    hit, local, remote = (ctx.sample.access(coverage) if worker is None
                          else ctx.sample.worker_access(worker, coverage))
    if not peer_cache(knobs, ctx.cluster):
        return hit, local, remote, 0.0
    return hit / g, local, remote, hit * (g - 1) / g


def peer_cache(knobs: Knobs, cluster: ClusterSpec) -> bool:
    """Whether a machine's GPUs cache disjoint slices and pull each other's (the executor's ``PeerCache``):
    ``cache_placement = partitioned`` on machines of several GPUs; with one GPU per machine the slice is the
    whole cache (Quiver's placement; brief gsplit.md §7)."""
    return knobs.cache_placement == "partitioned" and cluster.gpus_per_machine > 1


def cache_coverage(ctx: SimContext, knobs: Knobs) -> float:
    """The fraction of the vertices, hottest first, cached on a worker's machine: ``cache_fraction``, or with
    ``partitioned`` placement ``min(1, g x cache_fraction)`` over its g GPUs' disjoint slices (:func:`cache_access`)."""
    if knobs.cache_placement == "replicated":
        return knobs.cache_fraction
    return min(1.0, ctx.cluster.gpus_per_machine * knobs.cache_fraction)


def iteration_work(ctx: SimContext, knobs: Knobs, scale: float = 1.0) -> tuple[IterationWork, ModelCost]:
    """One worker's work in an iteration whose seeds are ``scale`` times a full batch.

    Returns:
        (the work, the model's kernels and memory sizes for this batch).
    """
    cl = ctx.cluster
    blocks = minibatch_blocks(ctx, scale)
    cost = minibatch_model_cost(ctx, blocks)
    smaller = minibatch_model_cost(ctx, minibatch_blocks(ctx, scale * SMALLER_BATCH_FRACTION))
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
        compute=StepCompute.of(cost, cl, smaller), peer_bytes=peer * n_in * row,
        peer_request_bytes=peer * n_in * INDEX_BYTES,
        remote_sampling=remote_sampling(ctx, blocks) if knobs.graph_structure == "partitioned" else ())
    return work, cost


def worker_work(ctx: SimContext, knobs: Knobs, mean: IterationWork, worker: int) -> IterationWork:
    """Worker ``worker``'s own iteration, from the mean worker's ``mean`` and the per-worker statistics
    (:class:`~simulator.workload.graphstats.SampleStats`: ``worker_ratios``, ``worker_access``, ``sent_ratio``).

    * Its input vertices and sampled edges are its ratios times the mean's; its forward and backward pass (FLOPs
      and their seconds, not the kernels' fixed costs) grow with its inputs (:meth:`StepCompute.passes_grown`).
    * Its cache hits, local and remote misses are its own shares of its inputs (:func:`cache_access` for the
      worker).
    * Its pull lasts until the rows it asks for have arrived and, since each other machine's NIC sends its rows
      besides the other workers' (max-min shared, full duplex), no earlier than the busiest of those NICs has sent
      its share for one worker: the rows pulled are ``max(own remote rows, max over the other machines m of
      sent_m / g)`` [inferred: exact with 2 machines, where the one other machine sends only this machine's rows;
      with more an upper bound, as the worker takes only its share of the busiest sender's rows]. The bytes
      counted per epoch stay the mean worker's (:func:`~gnnplan.simulator.strategies.dp.link_bytes_per_epoch`).
    """
    cl = ctx.cluster
    g, machine = cl.gpus_per_machine, worker // cl.gpus_per_machine
    inputs_ratio, edges_ratio = ctx.sample.worker_ratios(worker)
    hit, local, remote, peer = cache_access(ctx, knobs, worker)
    if cl.num_machines == 1:
        local, remote = local + remote, 0.0
    n_in = mean.num_input_vertices * inputs_ratio
    row = ctx.summary.feature_dim * FLOAT_BYTES
    coverage = cache_coverage(ctx, knobs)
    senders = [ctx.sample.sent_ratio(m, coverage) / g for m in range(cl.num_machines) if m != machine]
    pulled = max([remote * n_in, *(r * mean.num_input_vertices for r in senders)]) if remote > 0 else 0.0
    return replace(mean, num_input_vertices=n_in, num_sampled_edges=mean.num_sampled_edges * edges_ratio,
                   hit_bytes=hit * n_in * row, local_bytes=local * n_in * row, remote_bytes=pulled * row,
                   num_remote_vertices=pulled, request_bytes=pulled * INDEX_BYTES,
                   peer_bytes=peer * n_in * row, peer_request_bytes=peer * n_in * INDEX_BYTES,
                   remote_sampling=tuple(tuple(x * edges_ratio for x in layer) for layer in mean.remote_sampling),
                   compute=mean.compute.passes_grown(inputs_ratio))


def slowest_machine_works(ctx: SimContext, knobs: Knobs, full: IterationWork,
                          last: IterationWork) -> list[tuple[IterationWork, IterationWork]]:
    """Every rank's (full, last) iteration: the own work (:func:`worker_work`) of the machine whose slowest worker
    takes longest (:func:`estimate_s`), on every machine. Every worker waits for the slowest one at each collective
    (a pull's calls, the gradient all-reduce), so that machine sets the pace, and running its work everywhere
    keeps the schedule machine-symmetric (:mod:`simulator.symmetry`: one machine simulated). Simulating every
    worker's own work instead adds the waits of the other workers at each collective; on the emulated cluster's
    R-MAT workload (2 machines, 100 Mbit/s to unshaped, bench_whatif records 23 and 24 replayed, 2026-11-28) the
    representative's epochs were 0.967-1.000 times those, on Cora 1.000 (one worker there is both the busiest
    and the one pulling most). When that machine's workers differ by at most :data:`GPU_FOLD_SPREAD`, each of its
    GPUs runs its slowest worker's work, so one GPU is simulated for the machine
    (:func:`simulator.symmetry.fold_gpus`)."""
    cl = ctx.cluster
    g = cl.gpus_per_machine
    if ctx.num_workers == 1:
        return [(full, last)]
    works = [worker_work(ctx, knobs, full, w) for w in range(ctx.num_workers)]
    times = [estimate_s(ctx, knobs, w) for w in works]
    slowest = max(range(cl.num_machines), key=lambda m: (max(times[m * g:(m + 1) * g]), -m))
    spread = fluctuation(ctx)
    own = range(slowest * g, (slowest + 1) * g)
    mine = [(grown(works[w], spread), grown(worker_work(ctx, knobs, last, w), spread)) for w in own]
    if symmetry.enabled() and max(times[w] for w in own) <= (1.0 + GPU_FOLD_SPREAD) * min(times[w] for w in own):
        pace = max(range(g), key=lambda local: (times[slowest * g + local], -local))
        mine = [mine[pace]] * g
    return [mine[rank % g] for rank in range(ctx.num_workers)]


GPU_FOLD_SPREAD = 0.01
"""How much longer (relative, :func:`estimate_s`) the slowest worker of the pace-setting machine may take than its
fastest for every GPU of that machine to run the slowest one's work (:func:`slowest_machine_works`), so that one
GPU is simulated for all (:func:`simulator.symmetry.fold_gpus`; only with the fast path :func:`~simulator.symmetry
.enabled`, so ``symmetry.disabled()`` simulates every worker's own work, the reference). The collectives wait for
the slowest worker anyway; the others doing up to this much more work only adds contention on what they share
(host memory, cores, NIC). Workers' means within a machine differ by this little when they are a dataset card's
proxy statistics (ogbn-papers100M on 8 x 8 GPUs: 0.5 %, against the 1.07x per-iteration fluctuation every batch
is grown by, :func:`fluctuation`); benchmarks/bench_scale.py prints the fast path's epoch against the full
simulation's. [choice: 1 %, the size of that proxy noise]"""


def fluctuation(ctx: SimContext) -> float:
    """How much larger, per iteration, the largest batch is than the most loaded worker's mean batch:
    ``SampleStats.slowest_input_ratio`` (the per-iteration largest over the mean) over the largest
    ``worker_input_ratio`` (a worker's own mean over the mean), at least 1. Workers drawing their seeds at random
    differ from iteration to iteration even when their means agree, and each collective waits for that
    iteration's largest: on Cora, one machine x 2 workers, 32 seeds per worker, the per-iteration largest is
    1.074x the mean while the two workers' own means are 0.992x and 1.008x (graphstats, METIS, seed 0)."""
    ratios = ctx.sample.worker_input_ratio or (1.0,)
    return max(1.0, ctx.sample.slowest_input_ratio / max(ratios))


def grown(work: IterationWork, factor: float) -> IterationWork:
    """``work`` with its batch ``factor`` times larger: input vertices, sampled edges, cache / host / peer rows and
    the passes (FLOPs and their per-item seconds, :meth:`StepCompute.passes_grown`); its pull is not (it is
    already the larger of its own rows and the busiest sender's)."""
    if factor == 1.0:
        return work
    return replace(work, num_input_vertices=work.num_input_vertices * factor,
                   num_sampled_edges=work.num_sampled_edges * factor, hit_bytes=work.hit_bytes * factor,
                   local_bytes=work.local_bytes * factor, peer_bytes=work.peer_bytes * factor,
                   peer_request_bytes=work.peer_request_bytes * factor,
                   compute=work.compute.passes_grown(factor))


def estimate_s(ctx: SimContext, knobs: Knobs, work: IterationWork) -> float:
    """Uncontended seconds of one worker's iteration up to its gradient all-reduce, to rank workers only: its
    sampling (inline, else the larger of the trainer's path and its ``k`` sampler processes' share), the gathers
    (the machine's g workers sharing its memory), its pull (sharing the NIC), the host-to-device copy, forward and
    backward."""
    cl, g = ctx.cluster, ctx.cluster.gpus_per_machine
    sampling = pricing.sampling_s(cl, work.num_sampled_edges, num_calls=float(len(ctx.workload.training.fanouts)))
    trainer = (pricing.gpu_gather_s(cl, work.hit_bytes) + pricing.host_gather_s(cl, work.local_bytes, sharers=g)
               + pricing.host_to_gpu_s(cl, work.local_bytes + work.remote_bytes, sharers=g)
               + work.compute.forward_s + work.compute.backward_s)
    if work.remote_bytes > 0:
        trainer += pricing.feature_fetch_s(cl, work.remote_bytes + work.request_bytes, sharers=float(g))
    k = knobs.num_sampler_workers
    return trainer + sampling if k == 0 else max(trainer, sampling / k)
