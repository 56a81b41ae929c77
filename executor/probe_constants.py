"""``gnnplan probe``'s measurements of the machine constants the cluster spec holds as fields:
``host.process_bytes``, ``host.row_index_s`` and ``storage.concurrency`` (simulator/hardware/spec.py).

* ``host.process_bytes``: what a training worker process holds beyond the data terms of the memory model: a small
  real run (:data:`PROBE_RUN`, :func:`executor.runner.run_plan`) measures its epochs' peak resident set (training's
  or the evaluation's, the larger; :mod:`executor.memory`), and the model's own terms for that run are subtracted
  (:func:`simulator.calibrate_memory.samples`, as ``gnnplan calibrate`` fits it from traces). It holds the Python,
  torch, DGL and gnnplan runtime with the allocator's, the thread pools' and gloo's overhead, which a fresh process
  after ``import torch, dgl`` (the probe's measure until 2026-11-28) lacks: 277 MB that way against 345 MB this way
  on the development machine, and six runs on Cora and CiteSeer implied 344-433 MB (benchmarks/bench_memory.py).
* ``host.row_index_s``: seconds per row and matrix of the per-row loader of PP-GNN's baseline (a map-style
  ``Dataset.__getitem__`` returning one row of each matrix, batched by ``default_collate`` in one thread), the
  ``t_item`` of the PP-GNN brief (§2.4); median over batches.
* ``storage.concurrency``: how many 4 KiB direct reads the device serves at once: single-thread seconds per
  page over the per-page seconds with ``threads`` threads reading distinct pages concurrently (a device with no
  internal parallelism gives 1), at least 1.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnplan.executor.probe_overheads import set_priors

PROBE_RUN = {"dataset": {"generator": "rmat", "num_vertices": 600, "edge_factor": 4, "feature_dim": 8,
                         "num_classes": 4, "train_fraction": 0.3, "seed": 0},
             "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 8},
             "training": {"mode": "mini-batch", "batch_size": 64, "fanouts": [3, 3], "num_epochs": 3}}
"""The run :func:`worker_process_bytes` measures: dp on a 600-vertex R-MAT graph (its data a few hundred kB, so
the measurement is the process's own), 2 workers, 3 epochs (the peak of epochs 1-2)."""
PROBE_WORKERS = 2
"""Worker processes of :data:`PROBE_RUN`, each one machine (a local run's shape), so one process per machine."""


def worker_process_bytes() -> float:
    """Bytes a training worker process holds beyond the memory model's data terms (module docstring).

    Raises:
        RuntimeError: the measuring run failed or measured no peak (the reason).
    """
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.api import simulate
    from gnnplan.simulator.calibrate_memory import measured_host_bytes, samples
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.plan import Plan
    from gnnplan.simulator.workload.spec import workload_from_dict

    cluster = load_cluster("local").model_copy(update={"num_machines": PROBE_WORKERS, "gpus_per_machine": 1})
    plan = Plan(strategy="dp", knobs={}, num_workers=PROBE_WORKERS, cluster=cluster,
                workload=workload_from_dict(PROBE_RUN))
    with tempfile.TemporaryDirectory(prefix="gnnplan-probe-run-") as tmp:
        try:
            res = run_plan(plan, nprocs=PROBE_WORKERS, trace_dir=tmp, progress=False)
        except Exception as exc:  # one line: the probe reports what failed
            raise RuntimeError(f"probe: the run measuring a worker's memory failed: {exc}") from exc
    found, _ = samples([("probe", plan, measured_host_bytes({"results": res}))], cluster,
                       lambda cl, p: float(simulate(cl, p.workload, p.strategy, p.knobs).peak_memory_bytes["host"]))
    if not found:
        raise RuntimeError("probe: the run measuring a worker's memory measured no peak resident set")
    return found[0].implied_bytes


class _Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Row ``i`` of each of ``matrices`` as a tuple (PP-GNN's baseline ``Dataset``)."""

    def __init__(self, matrices: list[torch.Tensor]) -> None:
        self.matrices = matrices

    def __len__(self) -> int:
        return int(self.matrices[0].shape[0])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        return tuple(m[i] for m in self.matrices)


def row_index_s(num_rows: int = 8192, feature_dim: int = 128, num_matrices: int = 3, batch_size: int = 256,
                repeats: int = 8) -> float:
    """Seconds per row and matrix of ``Dataset.__getitem__`` + ``default_collate`` (module docstring).

    Args:
        num_rows, feature_dim, num_matrices: the stored hop matrices (float32).
        batch_size: rows per batch.
        repeats: batches timed (the median is returned).
    """
    gen = torch.Generator().manual_seed(0)
    data = _Rows([torch.randn(num_rows, feature_dim, generator=gen) for _ in range(num_matrices)])
    order = torch.randperm(num_rows, generator=gen)
    times = []
    for r in range(repeats + 1):
        idx = order[(r * batch_size) % (num_rows - batch_size):][:batch_size].tolist()
        start = time.perf_counter()
        torch.utils.data.default_collate([data[i] for i in idx])
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:])) / (batch_size * num_matrices)


def storage_concurrency(folder: Path, file_bytes: int = 64 * 2**20, pages: int = 512, threads: int = 8) -> float:
    """Concurrent 4 KiB direct reads the device in ``folder`` serves (module docstring), at least 1.

    Args:
        folder: where the temporary file is written (the storage the ``ssd`` placement would use).
        file_bytes: size of the temporary file.
        pages: pages read per pass (distinct, random).
        threads: readers of the concurrent pass.
    """
    from gnnplan.executor.strategies.ppgnn.files import ALIGN, DirectReader

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=folder) as fh:
        block = np.random.default_rng(0).integers(0, 256, 2**20, dtype=np.uint8).tobytes()
        for _ in range(file_bytes // len(block)):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
        reader = DirectReader(fh.name)
        try:
            offsets = np.random.default_rng(1).choice(file_bytes // ALIGN, 2 * pages, replace=False) * ALIGN
            single = _page_reads_s(reader, offsets[:pages], 1)
            parallel = _page_reads_s(reader, offsets[pages:], threads)
        finally:
            reader.close()
    return max(1.0, single / parallel)


def _page_reads_s(reader: object, offsets: np.ndarray, threads: int) -> float:
    """Wall seconds per page when ``threads`` threads read the pages at ``offsets`` (split evenly)."""
    from gnnplan.executor.strategies.ppgnn.files import ALIGN

    def work(part: np.ndarray) -> None:
        buf = np.empty(ALIGN, np.uint8)
        for off in part:
            reader.read(int(off), memoryview(buf))  # type: ignore[attr-defined]

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, np.array_split(offsets, threads)))
    return (time.perf_counter() - start) / len(offsets)


def add_constants(data: dict[str, Any], folder: Path, quick: bool) -> dict[str, Any]:
    """Measure the three constants into a :func:`executor.probe.probe_machine` mapping, with their ``sources``;
    ``host.row_index_s`` and ``storage.concurrency`` also become priors of calibration (``priors`` block).

    Args:
        data: the probe's cluster mapping (changed in place).
        folder: where the storage test file is written (the probe's cache folder).
        quick: small sizes (for tests).

    Returns:
        ``data``.
    """
    rows = row_index_s(num_rows=2048 if quick else 8192, repeats=4 if quick else 16)
    depth = storage_concurrency(folder, file_bytes=(8 if quick else 64) * 2**20, pages=128 if quick else 512)
    data["host"]["process_bytes"] = float(f"{worker_process_bytes():.4g}")
    data["host"]["row_index_s"] = float(f"{rows:.4g}")
    data["storage"]["concurrency"] = float(f"{depth:.4g}")
    set_priors(data)  # both are priors of fitted parameters (calibration regularises toward them)
    date = datetime.date.today().isoformat()
    data.setdefault("sources", {}).update({
        "host.process_bytes": f"measured by gnnplan probe on {date}: peak resident set of a training worker (dp on "
                              "a 600-vertex graph, 2 workers) less the memory model's data terms",
        "host.row_index_s": f"measured by gnnplan probe on {date}: median seconds per row and matrix of "
                            "Dataset.__getitem__ + default_collate, one thread",
        "storage.concurrency": f"measured by gnnplan probe on {date}: seconds per 4 KiB direct read, one thread "
                               "over 8 threads"})
    return data
