"""The work and memory of one ``ppgnn`` configuration: per-batch loading, compute, link bytes, memory, placement.

Notation as in :mod:`simulator.strategies.ppgnn`: ``M`` matrices per row, ``s = 4 F`` bytes per row and
matrix, ``b`` rows of one worker's batch, ``B_b = b M s``, ``n_r`` runs (maximal contiguous stretches of
stored rows) per batch: ``b`` under random reshuffling, ``1 + (b - 1) / chunk_size`` expected under chunk
reshuffling (a chunk boundary falls between two consecutive positions with probability 1 / chunk_size).

Per-batch loading work (brief §2.4; the executor's loaders, :mod:`executor.strategies.ppgnn.loaders`):

* ``gpu`` placement: a gather of ``B_b`` in device memory (``gather_time`` at GPU memory bandwidth) on the
  compute stream; the ``baseline`` loader first indexes every row in the training process
  (``b M`` x ``host.row_index_s`` on one host core).
* ``host``: ``baseline``: DataLoader worker processes (:data:`BASELINE_WORKERS`, each ``PREFETCH_FACTOR``
  batches ahead, as dp's samplers) index every row and collate (one core each), then the trainer copies
  ``B_b`` over PCIe. ``fused`` random: a host gather of ``B_b`` (each byte read and written at host memory
  bandwidth x gather_fraction, :func:`simulator.hardware.pricing.host_gather_s`; a flow on the machine's host
  memory shared by its GPUs) and the PCIe copy. Chunk reshuffling: no host gather;
  ``n_r M`` DMA transfers of the runs (``n_r M`` PCIe latencies + ``B_b`` / PCIe bandwidth).
* ``ssd`` (direct reads, no page cache: the executor's ``O_DIRECT`` reads, GDS's cuFile reads): random
  reshuffling reads every row and matrix with its own page-aligned request, ``PAGE_BYTES + s`` bytes expected
  (the enclosing aligned range of an unaligned row), :data:`IO_THREADS` requests in flight for the fused
  loaders and one per DataLoader worker for the baseline, the device serving at most
  ``storage.concurrency`` of them at once (request latency / effective depth); chunk reshuffling reads
  every run and matrix with one request, ``B_b + n_r M PAGE_BYTES`` bytes, :data:`IO_THREADS` in flight.
  The data land in device memory directly with GPUDirect Storage (``storage.gpudirect``), else they cross
  PCIe afterwards.
* ``double_buffer``: a producer loads batch i + 1 while batch i computes (step ~ max(load, compute)); the slot
  of batch i is reused for batch i + 2 once the trainer has asked for batch i + 1.
* On a CPU-only worker (``gpu.is_host_cpu``) the gather and the "PCIe" copy are torch operations on the
  worker's intra-op threads: they run as compute does (a flow of ``seconds x cores`` core-seconds capped at the
  worker's cores), so a double buffer's producer and the model share the cores.

Memory (``memory_model``): per GPU the framework reserve, model state, activations, the device buffer slots
and, for ``gpu`` placement, the whole stored input (every GPU holds a replica; the paper can also shard it
over GPUs, §1.4(f)); per machine host memory: worker processes, (pinned) staging buffers, the baseline's
prefetched batches and, for ``host`` placement, one copy of the input. The paper's placement rule
(§1.5): GPU if the input fits, else host memory, else SSD; ``placement=None`` applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.collectives import all_reduce_link_bytes
from gnnplan.simulator.hardware.model import CUDA_CONTEXT_BYTES
from gnnplan.simulator.hardware.pricing import row_indexing_s, storage_reads_s
from gnnplan.simulator.result import LINKS
from gnnplan.simulator.strategies.base import MemoryEstimate, SimContext, memory_estimate
from gnnplan.simulator.strategies.host_memory import worker_processes_bytes
from gnnplan.simulator.strategies.ppgnn import cost as ppgnn_cost
from gnnplan.simulator.strategies.ppgnn.knobs import Knobs
from gnnplan.simulator.strategies.window import PREFETCH_FACTOR
from gnnplan.simulator.strategies.window_run import StepCompute
from gnnplan.simulator.workload.model_cost import FLOAT_BYTES, model_state_bytes

PLACEMENT_ORDER = ("gpu", "host", "ssd")

BASELINE_WORKERS = 2
"""DataLoader worker processes of the baseline loader (brief §1.4(a): ``num_workers=2``)."""
PAGE_BYTES = 4096
"""Alignment of a direct read: the x86-64 base page (Intel SDM Vol. 3A §4.3), executor.strategies.ppgnn.files.ALIGN."""
IO_THREADS = 4
"""Storage requests the fused loaders keep in flight: the executor's I/O threads (executor.strategies.ppgnn.loaders),
which take this value (brief §1.7 step 2)."""


@dataclass(frozen=True)
class LoadWork:
    """One worker's loading of one batch (module docstring)."""

    rows: float
    nbytes: float
    num_requests: float
    row_index_core_s: float
    storage_bytes: float
    storage_latency_s: float
    storage_direct: bool
    host_gather_bytes: float
    pcie_bytes: float
    pcie_latency_s: float
    gpu_gather_bytes: float
    num_matrices: float = 1.0


def resolved_placement(ctx: SimContext, knobs: Knobs) -> str:
    """The knob's placement, or the paper's rule (§1.5) when it is None: the first of gpu, host, ssd whose
    memory model fits."""
    if knobs.placement is not None:
        return knobs.placement
    for placement in PLACEMENT_ORDER[:-1]:
        if memory_model(ctx, knobs, placement).feasible:
            return placement
    return PLACEMENT_ORDER[-1]


def batch_rows(ctx: SimContext, knobs: Knobs) -> tuple[float, float, int]:
    """(rows of one worker in a full iteration, in the last iteration, iterations per epoch)."""
    b, n = ctx.batch_size, ctx.summary.num_train
    if n < 1:
        raise SpecError("workload.dataset: no training vertices")
    num = math.ceil(n / b)
    return b / ctx.num_workers, (n - (num - 1) * b) / ctx.num_workers, num


def load_work(ctx: SimContext, knobs: Knobs, placement: str, rows: float) -> LoadWork:
    """The loading work of a batch of ``rows`` rows on one worker (module docstring)."""
    cl = ctx.cluster
    m = ppgnn_cost.num_matrices(ctx.workload.model.arch, knobs.hops)
    s = ctx.summary.feature_dim * FLOAT_BYTES
    nbytes = rows * m * s
    per_row, chunked = knobs.loader == "baseline", knobs.reshuffle == "chunk"
    runs = 1.0 + max(0.0, rows - 1.0) / (knobs.chunk_size or ctx.batch_size) if chunked else rows
    # index operations (baseline: one per row and matrix), reads (ssd: one per row and matrix, or per run and
    # matrix under chunk reshuffling) or transfers (host chunks), as the executor's loaders count them
    requests = rows * m if per_row or (placement == "ssd" and not chunked) else runs * m if chunked else float(m)
    index_s = row_indexing_s(cl, rows * m) if per_row else 0.0
    if placement == "gpu":
        return LoadWork(rows, nbytes, requests, index_s, 0.0, 0.0, False, 0.0, 0.0, 0.0, nbytes, m)
    storage, storage_latency, direct, gather = 0.0, 0.0, False, 0.0
    if placement == "ssd" and chunked and not per_row:  # one request per run and matrix
        storage, storage_latency = nbytes + runs * m * PAGE_BYTES, storage_reads_s(cl, 0.0, runs * m, IO_THREADS)
        direct = cl.storage.gpudirect
    elif placement == "ssd":  # one aligned request per row and matrix
        # fused: IO_THREADS in flight; baseline: one per DataLoader worker, the workers sharing the device
        in_flight, sharers = (1.0, BASELINE_WORKERS) if per_row else (IO_THREADS, 1.0)
        storage = rows * m * (PAGE_BYTES + s)
        storage_latency = storage_reads_s(cl, 0.0, rows * m, in_flight, sharers)
    elif not per_row and not chunked:
        gather = nbytes
    transfers = runs * m if placement == "host" and chunked and not per_row else float(m)
    pcie, pcie_latency = (0.0, 0.0) if direct else (nbytes, transfers * cl.pcie.latency_s)
    return LoadWork(rows, nbytes, requests, index_s, storage, storage_latency, direct, gather, pcie, pcie_latency, 0.0,
                    m)


def memory_model(ctx: SimContext, knobs: Knobs, placement: str) -> MemoryEstimate:
    """Peak bytes per GPU and per machine's host memory, by part (module docstring), and whether they fit."""
    cl, sm, wl = ctx.cluster, ctx.summary, ctx.workload
    rows, _, _ = batch_rows(ctx, knobs)
    m = ppgnn_cost.num_matrices(wl.model.arch, knobs.hops)
    batch = rows * m * sm.feature_dim * FLOAT_BYTES
    cost = ppgnn_cost.model_cost(wl.model, sm.feature_dim, sm.num_classes, knobs.hops, rows)
    slots = 2 if knobs.loader == "double_buffer" else 1
    stored = ppgnn_cost.input_bytes(sm.num_train + sm.num_val + sm.num_test, sm.feature_dim, wl.model.arch,
                                    knobs.hops)
    gpu = {"framework reserve": 0.0 if cl.gpu.is_host_cpu else CUDA_CONTEXT_BYTES,
           "parameters, gradients and Adam state": model_state_bytes(cost.num_params),
           "activations": cost.activation_bytes, "batch buffers": slots * batch,
           "stored hop matrices": stored if placement == "gpu" else 0.0}
    in_flight = BASELINE_WORKERS * PREFETCH_FACTOR if knobs.loader == "baseline" else slots
    loaders = BASELINE_WORKERS if knobs.loader == "baseline" and placement != "gpu" else 0  # as the executor
    host = {"worker processes": worker_processes_bytes(cl, loaders),
            "staging buffers": cl.gpus_per_machine * (0.0 if placement == "gpu" else in_flight * batch),
            "stored hop matrices": stored if placement == "host" else 0.0}
    return memory_estimate(cl, gpu, host, context=f"{placement} placement: ")


# ---------------------------------------------------------------------------------------------- simulation

@dataclass(frozen=True)
class StepWork:
    """One worker's iteration: loading, and compute seconds / FLOPs of the dense model."""

    load: LoadWork
    compute: StepCompute


def step_work(ctx: SimContext, knobs: Knobs, placement: str, rows: float) -> StepWork:
    """Loading and compute of one worker's batch of ``rows`` rows."""
    cl, sm, wl = ctx.cluster, ctx.summary, ctx.workload
    cost = ppgnn_cost.model_cost(wl.model, sm.feature_dim, sm.num_classes, knobs.hops, rows)
    return StepWork(load_work(ctx, knobs, placement, rows), StepCompute.of(cost, cl))


def link_bytes_per_epoch(ctx: SimContext, num_iterations: int, full: StepWork, last: StepWork) -> dict[str, float]:
    """Bytes all workers move over each link kind in one epoch (rows to the device, storage reads, all-reduce)."""
    out = {k: 0.0 for k in LINKS}
    collective = all_reduce_link_bytes(full.compute.gradient_bytes, ctx.cluster)
    for work, count in ((full, num_iterations - 1), (last, 1)):
        out["pcie"] += count * (work.load.pcie_bytes + (work.load.nbytes if work.load.storage_direct else 0))
        out["storage"] += count * work.load.storage_bytes
        for kind, nbytes in collective.items():
            out[kind] += count * nbytes
    return {k: v * ctx.num_workers for k, v in out.items()}


