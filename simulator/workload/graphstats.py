"""Graph statistics the cost models need, measured on the actual graph and cached on disk.

Measured with DGL's ``NeighborSampler`` (sampled vertices and edges per layer) and :mod:`.partition` (METIS via
pymetis, or random): edge cut, the share of a worker's input vertices owned by another machine, and the
feature-cache hit rate versus cache fraction when each GPU caches the highest in-degree vertices (PaGraph's
policy: Lin et al., "PaGraph", SoCC 2020, §4.2). DGL and pymetis are imported lazily, only when measuring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CACHE_GRID = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class DatasetSummary:
    """Sizes of a dataset (counts; ``feature_dim`` in float32 elements)."""

    name: str
    num_vertices: int
    num_edges: int
    feature_dim: int
    num_classes: int
    num_train: int
    num_val: int
    num_test: int


@dataclass(frozen=True)
class SampleStats:
    """Per-worker mini-batch statistics for one (fanouts, batch size, cluster shape, partitioner).

    All per-layer lists are indexed input side first, like DGL's block list: block l has
    ``num_src_vertices[l]`` source vertices, ``num_dst_vertices[l]`` destination vertices and ``num_edges[l]``
    sampled edges (means over the measured batches). ``num_src_vertices[0]`` is the number of input vertices
    whose features a worker loads per iteration; ``num_dst_vertices[-1]`` is the worker's seed count.

    ``hit_fraction[i]``, ``local_miss_fraction[i]`` and ``remote_miss_fraction[i]`` split the input vertices
    at ``cache_fractions[i]`` into feature-cache hits, misses owned by the worker's machine, and misses owned
    by another machine; the three add up to 1.
    """

    fanouts: tuple[int, ...]
    batch_size_per_worker: int
    num_machines: int
    gpus_per_machine: int
    partitioner: str
    num_src_vertices: tuple[float, ...]
    num_dst_vertices: tuple[float, ...]
    num_edges: tuple[float, ...]
    cache_fractions: tuple[float, ...]
    hit_fraction: tuple[float, ...]
    local_miss_fraction: tuple[float, ...]
    remote_miss_fraction: tuple[float, ...]
    edge_cut_fraction: float

    def access(self, cache_fraction: float) -> tuple[float, float, float]:
        """(hit, local miss, remote miss) fractions of input vertices at ``cache_fraction`` (linear
        interpolation between measured grid points).

        Raises:
            ValueError: cache_fraction outside [0, 1].
        """
        if not 0.0 <= cache_fraction <= 1.0:
            raise ValueError(f"cache_fraction must be in [0, 1], got {cache_fraction}")
        grid = self.cache_fractions
        hit = float(np.interp(cache_fraction, grid, self.hit_fraction))
        local = float(np.interp(cache_fraction, grid, self.local_miss_fraction))
        remote = float(np.interp(cache_fraction, grid, self.remote_miss_fraction))
        total = hit + local + remote
        return hit / total, local / total, remote / total
