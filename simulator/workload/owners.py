"""The owner partition of a dataset's vertices (which machine or part holds each vertex), computed once by
:func:`~simulator.workload.partition.partition` (METIS via pymetis, or random) and cached on disk.

Cache layout (:mod:`.stats_cache`): ``<cache_dir>/stats/<dataset_key>/owner-<partitioner>-p<parts>-seed<seed>.npy``,
written atomically; a damaged or mismatched file is partitioned again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_save_npy
from gnnplan.simulator.workload.datasets import GraphData, load_dataset
from gnnplan.simulator.workload.partition import partition
from gnnplan.simulator.workload.spec import GeneratedSpec
from gnnplan.simulator.workload.stats_cache import stats_dir

PARTITIONERS = ("metis", "random")
"""Partitioners of :func:`partition_owners`."""


def check_partitioner(partitioner: str) -> None:
    """Raises SpecError (one line naming ``partitioner`` and the allowed ones) unless it is in :data:`PARTITIONERS`."""
    if partitioner not in PARTITIONERS:
        raise SpecError(f"partitioner: {partitioner!r} is not one of {', '.join(PARTITIONERS)}")


def partition_owners(ref: str | GeneratedSpec, num_parts: int, partitioner: str, seed: int = 0,
                     graph: GraphData | None = None) -> np.ndarray:
    """The owner partition of every vertex (:func:`~simulator.workload.partition.partition`), cached as ``.npy``.

    METIS on a large graph takes seconds to minutes; caching it lets measurements that differ only in batch
    size or fanouts share one partition.

    Args:
        ref: ``workload.dataset``.
        num_parts: partitions (machines).
        partitioner: ``metis`` or ``random``.
        seed: partitioner seed.
        graph: the loaded dataset, if the caller has it (else it is loaded on a cache miss).

    Returns:
        (num_vertices,) int64 owners in [0, num_parts).

    Raises:
        SpecError: unknown partitioner, num_parts < 1, or the dataset cannot be loaded.
    """
    check_partitioner(partitioner)
    if num_parts < 1:
        raise SpecError(f"num_machines: must be >= 1, got {num_parts}")
    path = stats_dir(ref) / f"owner-{partitioner}-p{num_parts}-seed{seed}.npy"
    owner = _load_owner(path, num_parts, None if graph is None else graph.num_vertices)
    if owner is not None:
        return owner
    g = graph if graph is not None else load_dataset(ref)
    owner = partition(g.src, g.dst, g.num_vertices, num_parts, partitioner, seed)  # type: ignore[arg-type]
    if num_parts > 1:
        atomic_save_npy(path, owner)
    return owner


def _load_owner(path: Path, num_parts: int, num_vertices: int | None) -> np.ndarray | None:
    """The cached partition at ``path`` when it is readable, (n,) int64 with every owner in [0, num_parts) and, if
    ``num_vertices`` is given, n of them; else None (partitioned again)."""
    try:
        owner = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    ok = (owner.ndim == 1 and owner.dtype == np.int64 and (num_vertices is None or len(owner) == num_vertices)
          and (len(owner) == 0 or (owner.min() >= 0 and owner.max() < num_parts)))
    return owner if ok else None
