"""Row shards of PP-GNN's pre-propagation: which rows each worker propagates and which rows it must receive.

Pre-propagation computes ``X_r = B X_{r-1}`` for r = 1..R (:mod:`simulator.strategies.ppgnn`). Sharded over W
workers, worker p owns the contiguous vertex-id range ``[lo_p, hi_p)`` (:func:`shard_bounds`, the split of
``numpy.array_split``), holds its row block ``B[lo_p:hi_p, :]`` and its rows of every ``X_r``, and per hop
receives from each owner q the rows of ``X_{r-1}`` its block reads outside its range (its *halo*): the 1D
row-wise distributed SpMM. Source: Tripathy, Yelick and Buluç, "Reducing Communication in Graph Neural Network
Training", SC 2020, §IV-A (1D algorithm; here with the sparsity-aware exchange of only the needed rows,
their §IV-A "sparsity-aware" variant); the executor does exactly this
(:func:`executor.strategies.ppgnn.preprop.preprocess_sharded`).

Notation: ``W`` workers; ``n`` vertices; ``B = D~^-1/2 (A + I) D~^-1/2`` with ``A`` symmetrised
(``undirected``), duplicate edges and self-loops of the input dropped, one self-loop per vertex added
(executor.strategies.ppgnn.preprop.normalized_adjacency); ``nnz_p`` non-zeros of worker p's block;
``halo[p][q]`` rows p receives from q per hop.

:func:`shard_stats` measures these on the workload's graph (as fractions of ``n`` / of the non-zeros, so they
apply to a dataset summary of another size) and caches them under :func:`simulator.paths.cache_dir`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import numpy as np

from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.datasets import dataset_key, load_dataset
from gnnplan.simulator.workload.proxy_pool import pooled
from gnnplan.simulator.workload.spec import GeneratedSpec

FORMAT = 1
"""Version of the cached statistics."""


def shard_bounds(num_vertices: int, num_parts: int) -> list[int]:
    """The W + 1 boundaries of the contiguous row shards: part p is ``[bounds[p], bounds[p + 1])``, the first
    ``n mod W`` parts one row longer (``numpy.array_split``).

    Raises:
        ValueError: ``num_parts`` < 1 or ``num_vertices`` < 0.
    """
    if num_parts < 1 or num_vertices < 0:
        raise ValueError(f"num_parts must be >= 1 and num_vertices >= 0, got {num_parts} and {num_vertices}")
    base, extra = divmod(num_vertices, num_parts)
    sizes = [base + (1 if p < extra else 0) for p in range(num_parts)]
    return [0] + np.cumsum(sizes).tolist()


@dataclass(frozen=True)
class ShardStats:
    """Sizes of W row shards of ``B`` (module docstring), as fractions.

    Attributes:
        num_parts: W.
        rows_fraction: rows of shard p / n.
        nnz_fraction: non-zeros of shard p's block (self-loops included) / all non-zeros of ``B``.
        halo_fraction: ``halo_fraction[p][q]``: rows p receives from q per hop / n (0 on the diagonal).
        labelled_fraction: labelled rows (train, val, test) in shard p / all labelled rows.
    """

    num_parts: int
    rows_fraction: tuple[float, ...]
    nnz_fraction: tuple[float, ...]
    halo_fraction: tuple[tuple[float, ...], ...]
    labelled_fraction: tuple[float, ...]

    @classmethod
    def single(cls) -> ShardStats:
        """One shard holding everything (no exchange)."""
        return cls(1, (1.0,), (1.0,), ((0.0,),), (1.0,))


def symmetric_structure(src: np.ndarray, dst: np.ndarray, num_vertices: int,
                        undirected: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the off-diagonal non-zeros of ``A`` (``A[v, u] = 1`` for an edge ``u -> v``), sorted
    by row then column, duplicates and self-loops dropped (the diagonal ``I`` is implicit).

    Shapes:
        src, dst: (m,) int -> two (nnz_offdiag,) int64 arrays.
    """
    rows, cols = np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64)
    if undirected:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    keep = rows != cols
    keys = np.unique(rows[keep] * np.int64(num_vertices) + cols[keep])
    return keys // num_vertices, keys % num_vertices


def measure_shards(src: np.ndarray, dst: np.ndarray, num_vertices: int, labelled: np.ndarray, num_parts: int,
                   undirected: bool = True) -> ShardStats:
    """Measure :class:`ShardStats` of a graph split into ``num_parts`` contiguous row shards.

    Args:
        src, dst: (m,) directed edges ``src -> dst``.
        num_vertices: n >= 1.
        labelled: vertex ids of the stored (labelled) rows.
        num_parts: W >= 1.
        undirected: symmetrise the adjacency first (as the executor's default).

    Raises:
        ValueError: ``num_vertices`` < 1 or ``num_parts`` < 1.
    """
    if num_vertices < 1:
        raise ValueError(f"num_vertices must be >= 1, got {num_vertices}")
    bounds = np.asarray(shard_bounds(num_vertices, num_parts), dtype=np.int64)
    rows, cols = symmetric_structure(src, dst, num_vertices, undirected)
    total_nnz = float(len(rows) + num_vertices)
    starts = np.searchsorted(rows, bounds)
    halo = np.zeros((num_parts, num_parts))
    nnz = np.zeros(num_parts)
    for p in range(num_parts):
        lo, hi = int(bounds[p]), int(bounds[p + 1])
        block = cols[starts[p]:starts[p + 1]]
        nnz[p] = len(block) + (hi - lo)
        remote = np.unique(block[(block < lo) | (block >= hi)])
        owners = np.searchsorted(bounds, remote, side="right") - 1
        halo[p] = np.bincount(owners, minlength=num_parts) / num_vertices
    label_owner = np.searchsorted(bounds, np.asarray(labelled, dtype=np.int64), side="right") - 1
    labelled_counts = np.bincount(label_owner, minlength=num_parts).astype(float)
    return ShardStats(num_parts, tuple(float(x) for x in np.diff(bounds) / num_vertices),
                      tuple(float(x) for x in nnz / total_nnz), tuple(tuple(float(x) for x in r) for r in halo),
                      tuple(float(x) for x in labelled_counts / max(1.0, labelled_counts.sum())))


def shard_stats(dataset: str | GeneratedSpec, num_parts: int, undirected: bool = True) -> ShardStats:
    """:class:`ShardStats` of the dataset's graph, read from the cache or measured once (loads the graph).

    Raises:
        SpecError: the dataset cannot be loaded.
        ValueError: ``num_parts`` < 1.
    """
    if num_parts == 1:
        return ShardStats.single()
    pool = pooled(dataset, lambda r: shard_stats(r, num_parts, undirected), ("shards", num_parts, undirected))
    if pool is not None:  # a small card: the medoid of its proxy draws (simulator/workload/proxy_pool.py)
        return pool
    op = "undirected" if undirected else "directed"
    path = cache_dir() / "ppgnn" / f"{dataset_key(dataset)}-shards-w{num_parts}-{op}-v{FORMAT}.json"
    try:
        data = json.loads(path.read_text())
        stats = ShardStats(int(data["num_parts"]), tuple(data["rows_fraction"]), tuple(data["nnz_fraction"]),
                           tuple(tuple(r) for r in data["halo_fraction"]), tuple(data["labelled_fraction"]))
        if stats.num_parts == num_parts:
            return stats
    except (OSError, ValueError, KeyError, TypeError):
        pass  # missing or damaged: measured below
    g = load_dataset(dataset)
    labelled = np.concatenate([g.train_idx, g.val_idx, g.test_idx])
    stats = measure_shards(g.src, g.dst, g.num_vertices, labelled, num_parts, undirected)
    atomic_write_json(path, asdict(stats))
    return stats
