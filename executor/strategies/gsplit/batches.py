"""The split mini-batches of one ``gsplit`` rank: sampled once per iteration for all ranks, split by owner,
inline or ahead in sampler processes; and the rank's own feature partition with its cache.

Every rank's sampler samples the iteration's global mini-batch with DGL seeded by the batch's seeds
(:func:`gnnplan.simulator.strategies.gsplit.stats.sample_batch`), so all ranks hold the same sample without
communicating, as each machine's sampler would (here every rank is one machine), then splits it
(:func:`gnnplan.simulator.strategies.gsplit.split.layer_plan`: the same function the simulator's statistics
count with). Sampling and splitting run in the sampler: in the trainer (``num_sampler_workers`` = 0) or in k
persistent sampler processes (a PyTorch ``DataLoader``, ``prefetch_factor`` 2, one thread each), which compute
an (epoch, iteration)'s seeds from the deterministic schedule.

Notation: g -> ``world_size`` (splits), P(v) -> ``owner``, C_i -> :class:`PartitionFeatures` cache.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.executor.features import fill, from_cache
from gnnplan.executor.sampling import EpochKeys, loader_generator, share_before_fork
from gnnplan.executor.threads import apply_threads
from gnnplan.executor.trace import now
from gnnplan.simulator.strategies.gsplit.split import LayerPlan, layer_plan, partition_cache
from gnnplan.simulator.strategies.gsplit.stats import block_arrays, sample_batch

Schedule = Callable[[int], list[np.ndarray]]
"""``schedule(epoch)`` -> the epoch's global seed batches (picklable: module-level function or partial)."""


@dataclass
class SplitBatch:
    """One rank's split of one global mini-batch.

    Attributes:
        num_seeds: B, seeds of the global batch (the loss divisor).
        layers: the rank's :class:`~gnnplan.simulator.strategies.gsplit.split.LayerPlan` per layer.
        input_ids: (s_0,) int64 global ids of the rank's layer-0 vertices (rows of its input features).
        target_ids: (d_L,) int64 global ids of the rank's targets (rows of its logits).
        num_sampled_edges: edges of the whole sample; num_items: sampled vertices of all layers (split lookups).
        sample_start_s, sample_end_s, split_start_s, split_end_s: ``perf_counter()`` readings in the sampler.
    """

    num_seeds: int
    layers: list[LayerPlan]
    input_ids: np.ndarray
    target_ids: np.ndarray
    num_sampled_edges: int
    num_items: int
    sample_start_s: float
    sample_end_s: float
    split_start_s: float
    split_end_s: float


class SplitSampler:
    """Samples a global batch and splits it for one rank (module docstring).

    Args:
        graph: the DGL graph sampled from.
        fanouts: per layer, input side first.
        owner: (n,) int64 split (rank) of every vertex.
        rank, num_splits: this rank and g.
        arch: ``sage`` or ``gat``.
        seed: training seed (mixed into every batch's sampling seed).
    """

    def __init__(self, graph: Any, fanouts: list[int], owner: np.ndarray, rank: int, num_splits: int, arch: str,
                 seed: int) -> None:
        import dgl

        self.graph, self.owner, self.rank, self.num_splits = graph, owner, rank, num_splits
        self.arch, self.seed = arch, seed
        self.sampler = dgl.dataloading.NeighborSampler(list(fanouts))

    def __call__(self, seeds: np.ndarray) -> SplitBatch:
        """Sample and split the batch of ``seeds`` (all ranks pass the same seeds)."""
        t0 = now()
        blocks = sample_batch(self.graph, self.sampler, seeds, self.seed)
        t1 = now()
        arrays = [block_arrays(b) for b in blocks]
        plans = [layer_plan(self.arch, self.rank, self.owner[ids], nd, u, v, self.num_splits)
                 for ids, nd, u, v in arrays]
        last_ids, last = arrays[-1][0], plans[-1]
        batch = SplitBatch(len(seeds), plans, arrays[0][0][plans[0].own_src],
                           last_ids[last.own_src[:last.num_own_dst]], sum(len(u) for _, _, u, _ in arrays),
                           sum(len(ids) for ids, _, _, _ in arrays), t0, t1, t1, now())
        return batch


class SplitStream:
    """The split batches of every epoch, inline or from persistent sampler processes.

    Args:
        sampler: the rank's sampler.
        schedule: the global seed batches of an epoch.
        num_iterations: iterations per epoch.
        num_workers: sampler processes (0 = inline).
    """

    def __init__(self, sampler: SplitSampler, schedule: Schedule, num_iterations: int, num_workers: int) -> None:
        self.sampler, self.schedule = sampler, schedule
        self.keys = EpochKeys(num_iterations)
        self.loader: torch.utils.data.DataLoader | None = None  # type: ignore[type-arg]
        if num_workers > 0:
            share_before_fork(sampler.graph)
            context = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
            self.loader = torch.utils.data.DataLoader(
                _Batches(sampler, schedule), sampler=self.keys, batch_size=None, collate_fn=_identity,
                num_workers=num_workers, persistent_workers=True, prefetch_factor=2, worker_init_fn=_init_worker,
                multiprocessing_context=context, generator=loader_generator(0))

    def epoch(self, epoch: int) -> Iterator[SplitBatch]:
        """The split batches of ``epoch`` in iteration order."""
        if self.loader is None:
            for seeds in self.schedule(epoch):
                yield self.sampler(seeds)
            return
        self.keys.epoch = epoch
        yield from self.loader

    def close(self) -> None:
        """Stop the sampler processes."""
        self.loader = None


class _Batches(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Samples and splits the batch of an (epoch, iteration) key, caching the epoch's schedule."""

    def __init__(self, sampler: SplitSampler, schedule: Schedule) -> None:
        self.sampler, self.schedule = sampler, schedule
        self._epoch, self._batches = -1, []  # type: ignore[var-annotated]

    def __getitem__(self, key: tuple[int, int]) -> SplitBatch:
        epoch, it = key
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, self.schedule(epoch)
        return self.sampler(self._batches[it])


def _identity(item: Any) -> Any:
    return item


def _init_worker(_worker_id: int) -> None:
    """A sampler process computes on one thread (:mod:`gnnplan.executor.threads`)."""
    apply_threads(1)


class PartitionFeatures:
    """The rank's own feature rows (host memory) and its feature cache C_i on the device: the highest in-degree
    vertices of its own partition (:func:`~gnnplan.simulator.strategies.gsplit.split.partition_cache`).

    Args:
        rows: the feature rows of this split's vertices in id order (:func:`machine_split_rows`: a slice of the
            machine's shared rows, not copied).
        owner: (n,) int64 split of every vertex; in_degrees: (n,) int64.
        rank: this split; cache_fraction: c; device: where the cache lives.

    Shapes:
        rows: (n_r, d) float32, n_r = vertices of split ``rank``.
    """

    def __init__(self, rows: np.ndarray, owner: np.ndarray, in_degrees: np.ndarray, rank: int,
                 cache_fraction: float, device: torch.device) -> None:
        mine = np.flatnonzero(owner == rank)
        if len(rows) != len(mine):
            raise ValueError(f"PartitionFeatures: {len(rows)} rows for the {len(mine)} vertices of split {rank}")
        self.row_bytes = int(rows.shape[1]) * rows.dtype.itemsize
        self.slot = torch.full((len(owner),), -1, dtype=torch.int64)
        self.slot[torch.from_numpy(mine)] = torch.arange(len(mine))
        self.rows = torch.from_numpy(rows)
        cached = torch.from_numpy(partition_cache(in_degrees, owner, rank, cache_fraction))
        self.cache_slot = torch.full((len(owner),), -1, dtype=torch.int64)
        self.cache_slot[cached] = torch.arange(len(cached))
        self.cache_rows = self.rows[self.slot[cached]].to(device)
        self.device = device

    def load(self, ids: np.ndarray) -> tuple[torch.Tensor, int, int]:
        """The rows of owned vertices ``ids`` on the device: hits from the cache, misses gathered from host
        memory and copied.

        Shapes:
            ids: (k,) int64 -> (k, d) float32.

        Returns:
            (rows, number of hits, number of misses).
        """
        index = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64))
        x, miss_pos = from_cache(self.cache_rows, self.cache_slot[index])
        # index_select: a row copy per id (executor.features.RowStore.gather)
        fill(x, miss_pos, torch.index_select(self.rows, 0, self.slot[index[miss_pos]]))
        return x, len(index) - len(miss_pos), len(miss_pos)


def machine_split_rows(features: np.ndarray, owner: np.ndarray, ranks: range) -> np.ndarray:
    """The feature rows of every split a machine's ranks hold: split ``ranks[0]``'s vertices in id order, then
    ``ranks[1]``'s, ... (what the machine keeps once, :class:`~gnnplan.executor.shared.SharedObjects`; each rank
    takes its slice, :func:`split_slice`).

    Shapes:
        features: (n, d) float32; owner: (n,) int64 -> (sum of the splits' sizes, d) float32.
    """
    return np.concatenate([features[owner == r] for r in ranks])


def split_slice(owner: np.ndarray, ranks: range, rank: int) -> slice:
    """Where split ``rank``'s rows sit in :func:`machine_split_rows` of ``ranks``."""
    sizes = [int(np.count_nonzero(owner == r)) for r in ranks]
    start = sum(sizes[:ranks.index(rank)])
    return slice(start, start + sizes[ranks.index(rank)])
