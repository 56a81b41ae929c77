"""``gnnplan probe``: measure this machine into a cluster file (the ``local`` preset).

The machine is modelled as in common.md: ``num_machines`` = the number of worker processes W, one "GPU" per
modelled machine with ``gpu.is_host_cpu`` = true, and each modelled machine is ONE WORKER'S SHARE of this
machine. So shared resources are split W ways: cores (``cores // W``), memory (``memory / W``), memory
bandwidth (measured on all cores, / W) and storage bandwidth (/ W). Compute throughputs are measured on the
worker's own threads (``cores // W``); the feature-gather path (``pcie``) too. ``network`` is gloo over
loopback between two spawned processes; latencies are not divided.

Measurements (:mod:`executor.probe_host` makes the compute, memory, kernel and sampling ones; medians of repeats,
:data:`~executor.probe_host.FULL` or, for tests, :data:`~executor.probe_host.QUICK` sizes):

* dense FP32 throughput: ``torch.mm`` of two n x n matrices, 2 n^3 FLOP.
* SpMM throughput: ``torch.sparse.mm`` of a random CSR matrix with a dense matrix, 2 nnz cols FLOP; and DGL's
  aggregation with edge-weighted messages (``update_all(u_mul_e, sum)``, the executor's GCN) on the same
  matrix's graph, ``gpu.weighted_sparse_flops_per_s``: on a CPU, DGL 1.1.3 runs it several times slower.
* copy bandwidth: ``Tensor.copy_`` of a large tensor, bytes read + written (the STREAM "Copy" convention,
  McCalpin, "Memory bandwidth and machine balance", IEEE TCCA Newsletter, 1995), the convention of the
  roofline kernels' ``nbytes`` in :mod:`simulator.workload.model_cost`.
* sampling: DGL ``NeighborSampler`` on one thread on an R-MAT graph (:mod:`simulator.workload.rmat`).
* per-kernel overhead: the forward of the executor's own 2-layer models (gcn, sage, gat, gin) on a mini-batch
  so small that every kernel's roofline time is negligible, divided by the number of forward kernels
  :mod:`simulator.workload.model_cost` lists for it (so the simulator's kernel count and this measurement
  agree by construction), the median over the architectures; the backward of the same passes per backward
  kernel, over that, is ``gpu.backward_overhead_ratio`` (autograd's C++ engine dispatches the gradients, the
  model's Python code the forward).
* the gathers' achieved fraction ``efficiency.gather_fraction``: the feature gather's traffic (2 bytes per
  gathered byte, read and written: :data:`simulator.hardware.formulas.GATHER_TRAFFIC`) per second over the copy
  bandwidth, both on this machine.
* feature gather, network and storage: alpha-beta fits ``time = latency_s + bytes / bandwidth_bytes_per_s``
  (Hockney, Parallel Computing 20(3), 1994) by :func:`~executor.probe_io.fit_latency_bandwidth`; the network
  ping-pong and the storage reads are in :mod:`executor.probe_io`.
* per-process memory, per-row loader cost and storage concurrency: :mod:`executor.probe_constants`.
* fixed costs (sampler hand-off per batch, per collective call, per iteration), the stragglers' ``jitter_s`` at
  collectives (measured by :mod:`executor.probe_collectives`) and the ``priors`` block that calibration regularises
  toward: :mod:`executor.probe_overheads`.

With CUDA present the machine is one machine of its GPUs instead: the host fields become the whole machine's
and the GPUs, host<->GPU copies, peer copies and all-reduce are measured by :mod:`executor.probe_devices`.
"""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from gnnplan.executor.probe_constants import add_constants
from gnnplan.executor.probe_host import (
    FULL,
    OVERHEAD_ARCHS,
    OVERHEAD_GRAPH,
    QUICK,
    MiB,
    Sizes,
    copy_bytes_per_s,
    cpu_model,
    dense_flops_per_s,
    gather_latency_bandwidth,
    host_memory_bytes,
    kernel_overheads,
    sampling_rates,
    spmm_flops_per_s,
    weighted_spmm_flops_per_s,
)
from gnnplan.executor.probe_io import network_latency_bandwidth, storage_bandwidth_latency
from gnnplan.executor.probe_overheads import add_overheads
from gnnplan.executor.probe_shares import machines_of_shares
from gnnplan.executor.threads import cpu_count as num_cores
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.formulas import GATHER_TRAFFIC, thread_share
from gnnplan.simulator.hardware.spec import cluster_from_dict
from gnnplan.simulator.io import atomic_write_text
from gnnplan.simulator.paths import cache_dir


def _sig(x: float) -> float:
    """Round to 4 significant digits (the measurements are not more precise)."""
    return float(f"{x:.4g}")


def probe_machine(num_workers: int = 2, quick: bool = False, gpus_per_machine: int = 1) -> dict[str, Any]:
    """Measure this machine into a cluster mapping named ``local`` (module docstring: what and how).

    Args:
        num_workers: worker processes the machine is modelled for (= num_machines).
        quick: small sizes and few repeats (seconds; for tests), else :data:`FULL`.
        gpus_per_machine: G > 1 models the workers as ``num_workers / G`` machines of G workers, each machine G
            workers' shares (:func:`machines_of_shares`), the layout ``gnnplan run --gpus-per-machine G`` runs.

    Returns:
        A mapping valid for :func:`simulator.hardware.spec.cluster_from_dict`, with a ``sources`` entry
        "measured by gnnplan probe on <ISO date>: <method>" for every field.

    Raises:
        SpecError: ``num_workers`` < 1.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise SpecError(f"--workers: must be a positive integer (got {num_workers!r})")
    if gpus_per_machine < 1 or num_workers % gpus_per_machine:
        raise SpecError(f"--gpus-per-machine: must be >= 1 and divide the {num_workers} workers, got "
                        f"{gpus_per_machine}")
    s, w, cores, folder = QUICK if quick else FULL, num_workers, num_cores(), cache_dir()
    if torch.cuda.is_available():  # one worker per GPU; the GPUs are measured by executor.probe_devices
        w = torch.cuda.device_count()
    threads, memory = thread_share(cores, w), host_memory_bytes()
    copy = _sig(copy_bytes_per_s(cores, s.copy_bytes, s.repeats) / w)
    gather = gather_latency_bandwidth(threads, s.gather_row_dim, s.gather_table_rows, s.gather_row_counts, s.repeats)
    # sampling before the network and storage probes: their processes' exit and the written file's writeback
    # would overlap a few milliseconds of sampler calls (sampling_rates)
    sampling, full_sampling = sampling_rates(s)
    network = network_latency_bandwidth(s.message_sizes, s.message_repeats)
    disk_bw, disk_latency, dropped = storage_bandwidth_latency(folder, s)
    per_kernel, backward_ratio = kernel_overheads(threads, 10 * s.repeats)
    data = {
        "name": "local", "num_machines": w, "gpus_per_machine": 1,
        "gpu": {"model": cpu_model(), "peak_flops_per_s": _sig(dense_flops_per_s(threads, s.matmul_dim, s.repeats)),
                "memory_bytes": _sig(memory / w), "memory_bandwidth_bytes_per_s": copy,
                "sparse_flops_per_s": _sig(spmm_flops_per_s(threads, s.spmm_rows, s.spmm_degree, s.spmm_cols,
                                                            s.repeats)),
                "weighted_sparse_flops_per_s": _sig(weighted_spmm_flops_per_s(threads, s.spmm_rows, s.spmm_degree,
                                                                              s.spmm_cols, s.repeats)),
                "is_host_cpu": True,
                "kernel_overhead_s": _sig(per_kernel), "backward_overhead_ratio": _sig(backward_ratio)},
        "host": {"num_cores": threads, "memory_bytes": _sig(memory / w), "memory_bandwidth_bytes_per_s": copy,
                 "sampling_edges_per_s_per_core": _sig(sampling),
                 "full_neighbour_sampling_ratio": _sig(full_sampling / sampling)},
        "pcie": {"bandwidth_bytes_per_s": _sig(gather[1]), "latency_s": _sig(gather[0])},
        "nvlink": None,
        "network": {"bandwidth_bytes_per_s": _sig(network[1]), "latency_s": _sig(network[0])},
        "storage": {"bandwidth_bytes_per_s": _sig(disk_bw / w), "latency_s": _sig(disk_latency), "gpudirect": False},
        "efficiency": {"gather_fraction": _sig(GATHER_TRAFFIC * gather[1] / copy)},
        "sources": _sources(s, w, cores, memory, folder, dropped),
    }
    add_overheads(data, s, threads)
    add_constants(data, folder, quick)
    if torch.cuda.is_available():
        from gnnplan.executor.probe_devices import gpu_machine

        data = gpu_machine(data, w, quick)
    elif gpus_per_machine > 1:
        data = machines_of_shares(data, gpus_per_machine)
    cluster_from_dict(data, where="probe")
    return data


def _sources(s: Sizes, w: int, cores: int, memory: float, folder: Path, dropped: bool) -> dict[str, str]:
    """The ``sources`` mapping: "measured by gnnplan probe on <date>: <method>" for every field."""
    on = f"{thread_share(cores, w)} thread(s) = {cores} cores // {w} workers"
    fit = "latency + bytes / bandwidth fitted by non-negative least squares on relative residuals"
    cache = "page cache dropped with posix_fadvise(DONTNEED)" if dropped else "page cache NOT dropped (no fadvise)"
    methods = {  # "field field ...": method
        "num_machines": f"one modelled machine per worker process ({w} workers)",
        "gpus_per_machine": "one worker per modelled machine", "gpu.model": "CPU model name (/proc/cpuinfo)",
        "gpu.peak_flops_per_s": f"median of {s.repeats} torch.mm of two {s.matmul_dim}x{s.matmul_dim} float32 "
                                f"matrices (2 n^3 FLOP) on {on}",
        "gpu.sparse_flops_per_s": f"median of {s.repeats} torch.sparse.mm of a random {s.spmm_rows}-row CSR matrix "
                                  f"({s.spmm_degree} nonzeros per row) with a {s.spmm_cols}-column float32 matrix "
                                  f"(2 nnz cols FLOP) on {on}",
        "gpu.weighted_sparse_flops_per_s": f"median of {s.repeats} DGL update_all(u_mul_e, sum) on the graph of that "
                                           f"matrix (its values the edge weights) with {s.spmm_cols}-column "
                                           f"features (2 nnz cols FLOP) on {on}",
        "gpu.memory_bytes host.memory_bytes": f"host memory {memory:.4g} B (sysconf) / {w} workers",
        "gpu.memory_bandwidth_bytes_per_s host.memory_bandwidth_bytes_per_s": (
            f"median of {s.repeats} Tensor.copy_ of a {s.copy_bytes // MiB} MiB float32 tensor on all {cores} "
            f"cores, bytes read + written (STREAM Copy), divided by {w} workers"),
        "gpu.is_host_cpu": "no accelerator: each worker computes on its share of the host cores",
        "gpu.kernel_overhead_s": (
            f"median over {', '.join(OVERHEAD_ARCHS)} of the median forward time of {10 * s.repeats} forward + "
            f"backward passes of the executor's 2-layer model (hidden {OVERHEAD_GRAPH[5]}, {OVERHEAD_GRAPH[4]} "
            f"features) on {OVERHEAD_GRAPH[3]} seeds with fanouts {list(OVERHEAD_GRAPH[2])} of a "
            f"{OVERHEAD_GRAPH[0]}-vertex R-MAT graph, divided by the forward kernels simulator.workload.model_cost "
            f"lists for it, on {on}"),
        "gpu.backward_overhead_ratio": (
            "the same passes' median backward time per backward kernel simulator.workload.model_cost lists (median "
            "over the architectures), over gpu.kernel_overhead_s"),
        "host.num_cores": on,
        "host.sampling_edges_per_s_per_core": (
            f"median over {s.sampling_batches} batches of {s.sampling_batch_size} random seeds of DGL "
            f"NeighborSampler(fanouts {list(s.sampling_fanouts)}) on one thread (executor.sampling.TimedSampler), "
            f"R-MAT graph of {s.rmat_vertices} vertices, edge factor {s.rmat_edge_factor} "
            "(simulator.workload.rmat): sampled edges / s"),
        "host.full_neighbour_sampling_ratio": (
            f"median over {s.repeats} chunks of {s.full_chunk_vertices} random destinations of DGL "
            f"NeighborSampler(fanouts [-1]) on one thread, same graph: sampled edges / s, over "
            "host.sampling_edges_per_s_per_core"),
        "pcie.bandwidth_bytes_per_s pcie.latency_s": (
            f"feature gather on a CPU: torch.index_select of k random {s.gather_row_dim}-float32 rows of a "
            f"{s.gather_table_rows}-row table into a new tensor, k = {', '.join(map(str, s.gather_row_counts))}, "
            f"median of {s.repeats} calls with fresh random rows per k, on {on}; {fit} (bytes = gathered bytes)"),
        "efficiency.gather_fraction": (
            "2 x the feature gather's rate (pcie.bandwidth_bytes_per_s: gathered bytes / s) over "
            "gpu.memory_bandwidth_bytes_per_s (bytes read + written / s): a gather reads every row and writes it "
            "into the batch (simulator.hardware.formulas.GATHER_TRAFFIC), so one at the copy rate is 1"),
        "nvlink": "none: CPU worker processes have no NVLink",
        "network.bandwidth_bytes_per_s network.latency_s": (
            f"gloo send/recv ping-pong between 2 spawned local processes over 127.0.0.1, sizes "
            f"{', '.join(map(str, s.message_sizes))} B, median of {s.message_repeats} interleaved round trips / 2 "
            f"per size; {fit}"),
        "storage.bandwidth_bytes_per_s": (
            f"median of {s.repeats} sequential passes of {s.storage_block_bytes // MiB} MiB preads over a "
            f"{s.storage_file_bytes // MiB} MiB fsync'ed temp file in {folder} ({cache}), divided by {w} workers "
            "sharing the disk"),
        "storage.latency_s": (f"median of {s.storage_small_reads} random 4 KiB preads of the same file ({cache}, "
                              "readahead off) minus 4 KiB / bandwidth"),
        "storage.gpudirect": "no GPU: reads go through host memory",
    }
    date = datetime.date.today().isoformat()
    return {k: f"measured by gnnplan probe on {date}: {v}" for ks, v in methods.items() for k in ks.split()}


def write_probe(path: str | Path, data: dict[str, Any], header: str | None = None) -> Path:
    """Validate a probe result and write it as cluster YAML atomically (nothing is written if it is invalid).

    Args:
        path: destination (parent folders are created).
        data: a :func:`probe_machine` mapping.
        header: comment lines put at the top (without ``#``); default: what the file is and where its
            methods are.

    Returns:
        The destination.

    Raises:
        SpecError: ``data`` is not a valid cluster.
    """
    cluster_from_dict(data, where="probe")
    if header is None:
        header = probe_header(data)
    lines = [part for line in header.splitlines() for part in textwrap.wrap(line, 116) or [""]]
    comment = "".join(f"# {line}\n" for line in lines)
    return atomic_write_text(path, comment + yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120))


def probe_header(data: dict[str, Any]) -> str:
    """The default header of a probed cluster file: what it is and where its methods are."""
    return (f"This machine ({data['gpu']['model']}) as {data['num_machines']} worker processes, one per modelled "
            "machine, measured by `gnnplan probe`; each number's date and method are in `sources`.")


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` writing finite floats as ``3.917e+10``: a dot and a signed exponent, which YAML 1.1
    loaders (PyYAML) read as floats (DESIGN.md, "Cluster YAML")."""


def _represent_float(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    if not np.isfinite(value):
        return dumper.represent_float(value)
    return dumper.represent_scalar("tag:yaml.org,2002:float", f"{value:.3e}")


_Dumper.add_representer(float, _represent_float)
