"""The CPU probe's measurements of one worker's share of this machine (:mod:`executor.probe` assembles them
into the ``local`` cluster with their sources): dense and sparse compute, copy and gather bandwidth, the fixed cost
per modelled kernel, DGL's sampling rates (a batch's and the evaluation's full neighbourhoods), host memory and the
CPU's name; and the probe's problem sizes (:data:`FULL`, :data:`QUICK`). Methods and sources: :mod:`executor.probe`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from gnnplan.executor.probe_io import fit_latency_bandwidth
from gnnplan.simulator.workload.dgl_seed import seed_dgl
from gnnplan.simulator.workload.inference import CHUNK_VERTICES

MiB = 2 ** 20


@dataclass(frozen=True)
class Sizes:
    """Problem sizes and repeats of one probe."""

    repeats: int
    matmul_dim: int
    spmm_rows: int
    spmm_degree: int
    spmm_cols: int
    copy_bytes: int
    gather_row_dim: int
    gather_table_rows: int
    gather_row_counts: tuple[int, ...]
    rmat_vertices: int
    rmat_edge_factor: int
    sampling_fanouts: tuple[int, ...]
    sampling_batch_size: int
    sampling_batches: int
    full_chunk_vertices: int
    message_sizes: tuple[int, ...]
    message_repeats: int
    storage_file_bytes: int
    storage_block_bytes: int
    storage_small_reads: int


FULL = Sizes(repeats=7, matmul_dim=2048, spmm_rows=100_000, spmm_degree=16, spmm_cols=128, copy_bytes=256 * MiB,
             gather_row_dim=128, gather_table_rows=500_000, gather_row_counts=(16, 64, 256, 1024, 4096, 16384, 32768),
             rmat_vertices=100_000, rmat_edge_factor=16, sampling_fanouts=(10, 10), sampling_batch_size=512,
             sampling_batches=30, full_chunk_vertices=CHUNK_VERTICES,
             message_sizes=(8, 64, 512, 4096, 32768, 262144, 2 * MiB, 16 * MiB, 64 * MiB),
             message_repeats=21, storage_file_bytes=256 * MiB, storage_block_bytes=4 * MiB, storage_small_reads=64)
"""The sizes of ``gnnplan probe`` (under a minute on 2 cores). The R-MAT graph, fanouts and batch size are those
of the ``rmat100k-sage`` workload (512 = its 1024 global seeds over 2 workers); full-neighbour sampling takes the
evaluation's chunks (:data:`simulator.workload.inference.CHUNK_VERTICES` destinations). The largest gather
(16 MiB) stays below glibc's largest dynamic mmap threshold (32 MiB, mallopt(3) M_MMAP_THRESHOLD), above which
every new tensor is a fresh mmap paying page faults; the gather table (256 MB) and copy tensor exceed the CPU
caches."""

QUICK = Sizes(repeats=3, matmul_dim=384, spmm_rows=20_000, spmm_degree=8, spmm_cols=64, copy_bytes=16 * MiB,
              gather_row_dim=128, gather_table_rows=20_000, gather_row_counts=(16, 64, 256, 1024, 4096),
              rmat_vertices=5_000, rmat_edge_factor=8, sampling_fanouts=(5, 5), sampling_batch_size=64,
              sampling_batches=5, full_chunk_vertices=1024, message_sizes=(8, 512, 32768, MiB, 8 * MiB),
              message_repeats=5,
              storage_file_bytes=8 * MiB, storage_block_bytes=MiB, storage_small_reads=8)
"""Small sizes for tests and ``gnnplan probe --quick`` (seconds, less accurate)."""


def median_time_s(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median wall time (``time.perf_counter``) of ``repeats`` calls of ``fn`` after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


@contextlib.contextmanager
def torch_threads(num_threads: int) -> Iterator[None]:
    """Run the body with ``torch.set_num_threads(num_threads)``, restoring the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def host_memory_bytes() -> float:
    """Physical memory of this machine (``sysconf``: pages x page size)."""
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else ``platform.processor()`` or the architecture."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def dense_flops_per_s(threads: int, n: int, repeats: int) -> float:
    """FP32 ``torch.mm`` throughput of two n x n matrices (2 n^3 FLOP) on ``threads`` threads."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(n, n, generator=gen), torch.rand(n, n, generator=gen)
    with torch_threads(threads):
        return 2.0 * n ** 3 / median_time_s(lambda: torch.mm(a, b), repeats)


def spmm_flops_per_s(threads: int, rows: int, degree: int, cols: int, repeats: int) -> float:
    """``torch.sparse.mm`` throughput of a random rows x rows CSR matrix (``degree`` uniformly random nonzeros
    per row) times a dense rows x cols matrix: 2 nnz cols FLOP (one multiply-add per nonzero and column)."""
    rng = np.random.default_rng(0)
    col = np.sort(rng.integers(0, rows, size=(rows, degree)), axis=1).reshape(-1)
    crow = torch.arange(0, rows * degree + 1, degree, dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        a = torch.sparse_csr_tensor(crow, torch.from_numpy(col), torch.rand(rows * degree), (rows, rows))
        x = torch.rand(rows, cols)
        with torch_threads(threads):
            return 2.0 * rows * degree * cols / median_time_s(lambda: torch.sparse.mm(a, x), repeats)


def weighted_spmm_flops_per_s(threads: int, rows: int, degree: int, cols: int, repeats: int) -> float:
    """Throughput of DGL's aggregation with edge-weighted messages, as the executor's GCN runs it (``GraphConv``
    with ``edge_weight``: ``update_all(u_mul_e, sum)``), on the graph of :func:`spmm_flops_per_s`'s matrix (each
    nonzero an edge, its value the weight) with ``cols`` columns: 2 nnz cols FLOP (a multiply and an add per
    edge and column), over the median of ``repeats`` calls."""
    import dgl
    import dgl.function as fn

    rng = np.random.default_rng(0)
    col = np.sort(rng.integers(0, rows, size=(rows, degree)), axis=1).reshape(-1)
    graph = dgl.graph((torch.from_numpy(col), torch.arange(rows).repeat_interleave(degree)), num_nodes=rows)
    graph.create_formats_()
    weight, x = torch.rand(rows * degree), torch.rand(rows, cols)

    def aggregate() -> None:
        with graph.local_scope():
            graph.srcdata["h"], graph.edata["w"] = x, weight
            graph.update_all(fn.u_mul_e("h", "w", "m"), fn.sum("m", "o"))

    with torch_threads(threads):
        return 2.0 * rows * degree * cols / median_time_s(aggregate, repeats)


def copy_bytes_per_s(threads: int, nbytes: int, repeats: int) -> float:
    """``Tensor.copy_`` bandwidth of an ``nbytes`` float32 tensor, counting bytes read + written (STREAM Copy)."""
    src = torch.rand(nbytes // 4)
    dst = torch.empty_like(src)
    with torch_threads(threads):
        return 2.0 * src.numel() * 4 / median_time_s(lambda: dst.copy_(src), repeats)


def gather_latency_bandwidth(threads: int, row_dim: int, table_rows: int, row_counts: Sequence[int],
                             repeats: int) -> tuple[float, float]:
    """The feature-gather path of a CPU worker: ``torch.index_select`` of k random float32 rows of width
    ``row_dim`` from a ``table_rows``-row table into a new tensor, for each k in ``row_counts``.

    Every call gathers a fresh random index set (repeating one would time rows left in the CPU caches by the
    previous call), so with a table larger than the caches this is the DRAM gather the executor does.

    Returns:
        (latency_s, bandwidth_bytes_per_s) fitted over the gathered (output) bytes.
    """
    gen = torch.Generator().manual_seed(0)
    table = torch.rand(table_rows, row_dim, generator=gen)
    times = []
    with torch_threads(threads):
        for k in row_counts:
            batches = [torch.randint(0, table_rows, (k,), generator=gen) for _ in range(repeats + 1)]
            times.append(_index_select_time_s(table, batches, repeats))
    return fit_latency_bandwidth([k * row_dim * 4 for k in row_counts], times)


def _index_select_time_s(table: torch.Tensor, batches: list[torch.Tensor], repeats: int) -> float:
    """Median time of ``index_select`` of ``batches[1:]`` after a warm-up with ``batches[0]``."""
    it = iter(batches)
    return median_time_s(lambda: torch.index_select(table, 0, next(it)), repeats)


OVERHEAD_ARCHS = ("gcn", "sage", "gat", "gin")
OVERHEAD_GRAPH = (64, 4, (2, 2), 4, 8, 4)
"""Tiny batch of the kernel-overhead measurement: (R-MAT vertices, edge factor, fanouts, seeds, feature width,
hidden width); its kernels' roofline times are nanoseconds on any machine."""


def kernel_overheads(threads: int, repeats: int) -> tuple[float, float]:
    """Fixed seconds per modelled forward kernel of the executor's models, and a backward kernel's over it
    (module docstring; cluster fields ``gpu.kernel_overhead_s`` and ``gpu.backward_overhead_ratio``).

    Args:
        threads: torch threads of one worker.
        repeats: timed forward + backward passes per architecture.

    Returns:
        (median over :data:`OVERHEAD_ARCHS` of the median forward time over the forward kernels listed by
        :func:`simulator.workload.model_cost.model_cost` for the pass's blocks, the same median of the backward's
        time per backward kernel over it). Before 2026-11-30 one cost for both: the whole pass over all its
        kernels.
    """
    from types import SimpleNamespace

    from gnnplan.executor.data import build_graph
    from gnnplan.executor.models import GNN, attach_edge_weights
    from gnnplan.executor.sampling import TimedSampler, sample_inline
    from gnnplan.simulator.workload.model_cost import Block, model_cost
    from gnnplan.simulator.workload.rmat import rmat_edges
    from gnnplan.simulator.workload.spec import ModelSpec

    n, factor, fanouts, seeds, width, hidden = OVERHEAD_GRAPH
    src, dst = rmat_edges(n, factor * n, seed=0)
    forward, backward = [], []
    with torch_threads(threads):
        for arch in OVERHEAD_ARCHS:
            g, weight = build_graph(cast(Any, SimpleNamespace(src=src, dst=dst, num_vertices=n)), arch)
            seed_dgl(0)
            batch = sample_inline(g, TimedSampler(list(fanouts)), np.arange(seeds))
            attach_edge_weights(batch.blocks, weight)
            spec = ModelSpec.model_validate({"arch": arch, "num_layers": len(fanouts), "hidden_dim": hidden})
            torch.manual_seed(0)
            model, x = GNN(spec, width, 2), torch.randn(len(batch.input_nodes), width)
            seconds = _pass_times(model, batch.blocks, x, repeats)
            blocks = [Block(b.num_src_nodes(), b.num_dst_nodes(), b.num_edges()) for b in batch.blocks]
            cost = model_cost(spec, width, 2, blocks)
            forward.append(seconds[0] / len(cost.forward))
            backward.append(seconds[1] / len(cost.backward))
    per_forward = float(np.median(forward))
    return per_forward, float(np.median(backward)) / per_forward


def _pass_times(model: torch.nn.Module, blocks: list[Any], x: torch.Tensor, repeats: int) -> tuple[float, float]:
    """Median seconds of the forward (with the loss) and of the backward of ``repeats`` passes, after three
    warm-up passes (the unit :func:`kernel_overheads` times)."""
    times = []
    for i in range(repeats + 3):
        start = time.perf_counter()
        loss = model(blocks, x).sum()
        middle = time.perf_counter()
        loss.backward()
        if i >= 3:
            times.append((middle - start, time.perf_counter() - middle))
    return float(np.median([t[0] for t in times])), float(np.median([t[1] for t in times]))


def sampling_rates(sizes: Sizes) -> tuple[float, float]:
    """Sampled edges per second of DGL's ``NeighborSampler`` on one thread, as the executor samples
    (:class:`executor.sampling.TimedSampler`), on an R-MAT graph: the median over batches of random seeds at the
    workload's fanouts (training), and the median over chunks of ``full_chunk_vertices`` random destinations with
    every in-edge (fanout -1: the evaluation's blocks, executor/evaluate.py), each call's edges over its time (its
    fixed cost, ``host.sampler_call_s``, is ~3% of a 16384-vertex chunk's: not taken out).

    The two kinds of call alternate (after one warm-up call of each: the first builds the CSC format), so a slow
    phase of the machine, another process's burst, slows both alike and their ratio
    (``host.full_neighbour_sampling_ratio``) holds: measured one kind after the other, the quick probe's ratio was
    28.8 and 29.3 in two full test sessions on this 2-core machine, against 6.7-10.4 alone (2026-12-01)."""
    import dgl

    from gnnplan.executor.sampling import TimedSampler
    from gnnplan.simulator.workload.rmat import rmat_edges

    n = sizes.rmat_vertices
    src, dst = rmat_edges(n, sizes.rmat_edge_factor * n, seed=0)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=n)
    rng = np.random.default_rng(0)
    kinds = ((TimedSampler(list(sizes.sampling_fanouts)), sizes.sampling_batch_size, sizes.sampling_batches),
             (TimedSampler([-1]), min(sizes.full_chunk_vertices, n), sizes.repeats))
    rates: tuple[list[float], list[float]] = ([], [])
    with torch_threads(1):
        seed_dgl(0)
        for i in range(max(calls for _, _, calls in kinds) + 1):  # call 0 of each kind: warm-up
            for (sampler, batch, calls), kind_rates in zip(kinds, rates):
                if i > calls:
                    continue
                seeds = torch.from_numpy(rng.choice(n, batch, replace=False))
                start = time.perf_counter()
                _, _, blocks, _ = sampler.sample(g, seeds)
                elapsed = time.perf_counter() - start
                if i:
                    kind_rates.append(sum(int(b.num_edges()) for b in blocks) / elapsed)
    return float(np.median(rates[0])), float(np.median(rates[1]))
