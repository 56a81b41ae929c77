"""Vertex partitioning (METIS via pymetis, or random) and DistDGL's seed split, shared by simulator and executor.

The executor partitions the graph with these functions and the graph statistics measure the same partitions,
so predicted and executed remote traffic refer to the same vertex-to-owner map.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Partitioner = Literal["metis", "random"]


def partition(src: np.ndarray, dst: np.ndarray, num_vertices: int, num_parts: int, method: Partitioner,
              seed: int = 0) -> np.ndarray:
    """Assign every vertex an owner partition.

    Args:
        src, dst: (num_edges,) int64 directed edges; the partitioner sees the symmetrised, loop-free graph.
        num_vertices: n.
        num_parts: number of partitions (= machines holding features); 1 gives all zeros.
        method: ``metis`` (pymetis k-way, minimises edge cut; Karypis and Kumar, SIAM J. Sci. Comput. 1998)
            or ``random`` (uniform hash of vertex ids, balanced).
        seed: RNG seed for ``random`` and METIS.

    Returns:
        (num_vertices,) int64 owner ids in [0, num_parts).

    Raises:
        ValueError: unknown method or num_parts < 1.
    """
    if num_parts < 1:
        raise ValueError("partition: num_parts must be >= 1")
    if num_parts == 1:
        return np.zeros(num_vertices, dtype=np.int64)
    if method == "random":
        rng = np.random.default_rng(seed)
        return rng.permutation(np.arange(num_vertices) % num_parts).astype(np.int64)
    if method != "metis":
        raise ValueError(f"partitioner: {method!r} is not one of metis, random")
    import pymetis
    import scipy.sparse as sp

    keep = src != dst
    adj = sp.coo_matrix((np.ones(int(keep.sum()), dtype=np.int8), (src[keep], dst[keep])),
                        shape=(num_vertices, num_vertices)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.int8).tocsr()
    opts = pymetis.Options(seed=seed)
    # pymetis's CSRAdjacency: its xadj/adjncy arguments are deprecated (a DeprecationWarning reached users)
    _, parts = pymetis.part_graph(num_parts, adjacency=pymetis.CSRAdjacency(adj.indptr, adj.indices), options=opts)
    return np.asarray(parts, dtype=np.int64)


def split_seeds(seeds: np.ndarray, owner: np.ndarray, num_workers: int) -> list[np.ndarray]:
    """Split seed vertices among workers, each preferring the seeds its partition owns, balanced to within one.

    This is DistDGL's ``node_split(..., force_even=True)``: worker w first keeps up to ``ceil(k / W)`` of the
    seeds owned by partition w (in the given order); the seeds left over fill the workers below their quota in
    order. Worker w owns partition w (one worker per partition).

    Args:
        seeds: (k,) int64 seed vertex ids, in the order they should be consumed.
        owner: (num_vertices,) int64 partition of every vertex.
        num_workers: W.

    Returns:
        W arrays; their sizes differ by at most one and their concatenation is a permutation of ``seeds``.
    """
    k = len(seeds)
    sizes = [k // num_workers + (1 if w < k % num_workers else 0) for w in range(num_workers)]
    seed_owner = owner[seeds] % num_workers
    kept, spill = [], []
    for w in range(num_workers):
        mine = seeds[seed_owner == w]
        kept.append(mine[: sizes[w]])
        spill.append(mine[sizes[w]:])
    rest = np.concatenate(spill) if spill else np.empty(0, dtype=np.int64)
    out, pos = [], 0
    for w in range(num_workers):
        need = sizes[w] - len(kept[w])
        out.append(np.concatenate([kept[w], rest[pos: pos + need]]).astype(np.int64))
        pos += need
    return out


def cached_vertices(in_degrees: np.ndarray, cache_fraction: float) -> np.ndarray:
    """The vertices a GPU feature cache holds: the ``floor(cache_fraction * n)`` highest in-degree vertices.

    PaGraph's static degree-based policy (Lin et al., "PaGraph", SoCC 2020, §4.2); ties go to the lower id.
    Used by both the graph statistics (hit rates) and the executor's feature cache, so they agree exactly.

    Args:
        in_degrees: (num_vertices,) int64.
        cache_fraction: in [0, 1].

    Returns:
        (k,) int64 vertex ids, hottest first.

    Raises:
        ValueError: cache_fraction outside [0, 1].
    """
    if not 0.0 <= cache_fraction <= 1.0:
        raise ValueError(f"cache_fraction must be in [0, 1], got {cache_fraction}")
    k = int(np.floor(cache_fraction * len(in_degrees) + 1e-9))
    order = np.argsort(-np.asarray(in_degrees), kind="stable")
    return order[:k].astype(np.int64)
