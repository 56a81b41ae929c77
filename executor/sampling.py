"""Mini-batch sampling with DGL's ``NeighborSampler``: inline, or ahead of the trainer in sampler processes.

With ``num_sampler_workers = 0`` every batch is sampled in the trainer when it is needed. With k > 0, k
persistent sampler processes (a PyTorch ``DataLoader`` over DGL sampling, as DGL's own ``DataLoader`` is)
sample ahead of the trainer, ``prefetch_factor`` = 2 batches each (PyTorch's default, the simulator's
``PREFETCH_FACTOR``). They live for the whole run: each is told an (epoch, iteration) and computes that
iteration's seeds itself from the deterministic schedule, so no process is started per epoch. Either way a
batch carries the ``perf_counter()`` readings taken around its sampling (in the sampler process when there is
one; CLOCK_MONOTONIC is shared by the processes of one machine), so the trace shows when sampling really ran.

Sampling runs on one thread (DGL's OpenMP pool is set to 1 around each call and restored): DGL's
multi-threaded sampling is not reproducible even with ``dgl.seed`` (the order of sampled edges, and with it
float summation order, changes from run to run), DGL's DataLoader workers sample on one thread too
(``WorkerInitWrapper``), and the simulator models a sampler as one core (:mod:`simulator.strategies.dp`).
DGL's RNG is re-seeded at the start of every epoch with :func:`epoch_seed` ``(seed, epoch, stream)``, stream 0
for the trainer's inline sampling and j + 1 for sampler process j (which samples iterations j, j + k, ... of
every epoch: the DataLoader deals an epoch's keys round-robin from worker 0), so an epoch's samples do not
depend on the epochs before it and a run resumed from a checkpoint samples what the uninterrupted run did
(:mod:`executor.checkpoint`; DGL 1.1 cannot save its RNG state).
A sampler process sizes all its thread pools to 1 (:func:`executor.threads.apply_threads`) when it starts: it
is one of the processes the worker's share of the cores was divided by (:mod:`executor.threads`).

The graph's CSC (in-edge) format, which neighbour sampling reads, is built in the trainer before the sampler
processes are forked (:func:`share_before_fork`), so they share it copy-on-write; built after, each process would
build its own copy on its first batch (DGL builds a sparse format lazily, in the process that first needs it; DGL's
``DataLoader`` calls ``create_formats_()`` before forking for this reason). rmat100k dp, 2 sampler processes per
trainer, one epoch: each sampler process held 57.8 MB private (dirty) memory before, 13.4 MB after (smaps_rollup,
2026-11-28).
"""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dgl
import numpy as np
import torch

from gnnplan.executor.threads import apply_threads
from gnnplan.executor.trace import now
from gnnplan.simulator.workload.dgl_seed import seed_dgl

Schedule = Callable[[int], list[np.ndarray]]
"""``schedule(epoch)`` -> this worker's seed batches of that epoch (module-level or a partial: picklable)."""


@dataclass
class Batch:
    """One sampled mini-batch of one worker.

    Attributes:
        seeds: (b,) int64 output vertices (may be empty).
        input_nodes: (k,) int64 input vertices (``blocks[0].srcdata[dgl.NID]``).
        blocks: one DGL block per layer, input side first.
        start_s, end_s: ``perf_counter()`` around the sampling.
    """

    seeds: torch.Tensor
    input_nodes: torch.Tensor
    blocks: list[Any]
    start_s: float
    end_s: float

    @property
    def num_sampled_edges(self) -> int:
        """Edges over all blocks."""
        return sum(int(b.num_edges()) for b in self.blocks)


class TimedSampler(dgl.dataloading.Sampler):  # type: ignore[misc]
    """DGL's ``NeighborSampler`` on one thread, whose output also carries when its sampling ran.

    Args:
        fanouts: per layer, input side first; -1 = all in-neighbours.
    """

    def __init__(self, fanouts: list[int]) -> None:
        super().__init__()
        self.inner = dgl.dataloading.NeighborSampler(list(fanouts))

    def sample(self, g: Any, seeds: torch.Tensor,
               key: tuple[int, int] | None = None) -> tuple[torch.Tensor, torch.Tensor, list[Any], torch.Tensor]:
        """Sample blocks for ``seeds``; returns (input nodes, seeds, blocks, [start_s, end_s] float64). ``key`` =
        (epoch, iteration) is unused here (DGL draws from its RNG stream); keyed samplers
        (:mod:`executor.sampling_keyed`) choose by it."""
        start = now()
        threads = dgl.utils.get_num_threads()
        dgl.utils.set_num_threads(1)
        try:
            input_nodes, output_nodes, blocks = self.inner.sample_blocks(g, seeds)
        finally:
            dgl.utils.set_num_threads(threads)
        return input_nodes, output_nodes, blocks, torch.tensor([start, now()], dtype=torch.float64)


def epoch_seed(seed: int, epoch: int, stream: int = 0) -> int:
    """DGL's RNG seed for ``epoch`` of sampling stream ``stream`` (module docstring): the first 32-bit word numpy's
    ``SeedSequence`` draws from ``(seed, epoch, stream)`` (O'Neill's seed hashing: nearby tuples give unrelated
    streams), shifted to 31 bits (``dgl.seed`` rejects values above a signed 32-bit integer)."""
    return int(np.random.SeedSequence([abs(seed), epoch, stream]).generate_state(1)[0]) >> 1


def sample_inline(g: Any, sampler: TimedSampler, seeds: np.ndarray, key: tuple[int, int] | None = None) -> Batch:
    """Sample one batch in this process (``key`` = (epoch, iteration), see :meth:`TimedSampler.sample`)."""
    return _batch(sampler.sample(g, torch.from_numpy(np.ascontiguousarray(seeds, dtype=np.int64)), key))


class BatchStream:
    """The sampled batches of every epoch, inline or from persistent sampler processes.

    Args:
        g: the graph.
        sampler: the sampler.
        schedule: this worker's seed batches per epoch (every epoch has ``num_iterations`` of them).
        num_iterations: iterations per epoch.
        num_workers: sampler processes (0 = inline).
        seed: RNG seed of the sampler processes (module docstring).
    """

    def __init__(self, g: Any, sampler: TimedSampler, schedule: Schedule, num_iterations: int, num_workers: int,
                 seed: int = 0) -> None:
        self.g, self.sampler, self.schedule, self.seed = g, sampler, schedule, seed
        self.keys = EpochKeys(num_iterations)
        self.loader = None
        if num_workers > 0:
            share_before_fork(g)
            self.loader = torch.utils.data.DataLoader(
                _ScheduledBatches(g, sampler, schedule, seed), sampler=self.keys, batch_size=None, collate_fn=_identity,
                num_workers=num_workers, persistent_workers=True, prefetch_factor=2,
                worker_init_fn=functools.partial(_init_worker, seed), multiprocessing_context=_worker_context(),
                generator=loader_generator(seed))

    def epoch(self, epoch: int) -> Iterator[Batch]:
        """The batches of ``epoch`` in iteration order."""
        if self.loader is None:
            seed_dgl(epoch_seed(self.seed, epoch))
            for it, seeds in enumerate(self.schedule(epoch)):
                yield sample_inline(self.g, self.sampler, seeds, (epoch, it))
            return
        self.keys.epoch = epoch
        for item in self.loader:
            yield _batch(item)

    def close(self) -> None:
        """Stop the sampler processes."""
        self.loader = None


def share_before_fork(g: Any) -> None:
    """Build ``g``'s in-edge (CSC) format, which neighbour sampling reads, in this process, before it forks sampler
    processes: they then share it copy-on-write instead of each building its own copy (module docstring). Every
    stream that forks sampler processes calls it (:class:`BatchStream`, hopgnn's ``GroupStream``, gsplit's
    ``SplitStream``)."""
    g.adj_tensors("csc")


class EpochKeys(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Yields (epoch, iteration) keys of the current epoch (set by the trainer before iterating)."""

    def __init__(self, num_iterations: int) -> None:
        self.epoch, self.num_iterations = 0, num_iterations

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter([(self.epoch, i) for i in range(self.num_iterations)])

    def __len__(self) -> int:
        return self.num_iterations


class _ScheduledBatches(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Samples the batch of an (epoch, iteration) key, computing (and caching) the epoch's schedule."""

    def __init__(self, g: Any, sampler: TimedSampler, schedule: Schedule, seed: int = 0) -> None:
        self.g, self.sampler, self.schedule, self.seed = g, sampler, schedule, seed
        self._epoch, self._batches = -1, []  # type: ignore[var-annotated]

    def __getitem__(self, key: tuple[int, int]) -> tuple[Any, ...]:
        epoch, it = key
        if epoch != self._epoch:
            self._epoch, self._batches = epoch, self.schedule(epoch)
            reseed_sampler_process(self.seed, epoch)
        seeds = np.ascontiguousarray(self._batches[it], dtype=np.int64)
        return self.sampler.sample(self.g, torch.from_numpy(seeds), key)


def loader_generator(seed: int) -> torch.Generator:
    """The RNG a persistent ``DataLoader`` draws its worker processes' base seed from when its iterator is
    created: its own, not the trainer's global torch RNG (dropout masks), which a run resumed from a checkpoint
    must continue exactly as the uninterrupted run did (that run created the iterator in its first epoch)."""
    return torch.Generator().manual_seed(seed)


def reseed_sampler_process(seed: int, epoch: int) -> None:
    """In sampler process j (a DataLoader worker): seed DGL for ``epoch`` (module docstring)."""
    info = torch.utils.data.get_worker_info()
    seed_dgl(epoch_seed(seed, epoch, 1 + (info.id if info is not None else 0)))


def _identity(item: Any) -> Any:
    return item


def _init_worker(seed: int, worker_id: int) -> None:
    """Start-up of sampler process ``worker_id``: one thread per pool, then its seed (module docstring)."""
    apply_threads(1)
    seed_dgl(seed + worker_id + 1)


def _worker_context() -> str | None:
    """``fork`` where available: a trainer started by ``spawn`` would otherwise start its sampler processes
    with ``spawn`` too (multiprocessing passes the start method on), re-importing torch and DGL."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else None


def _batch(item: tuple[Any, ...]) -> Batch:
    input_nodes, seeds, blocks, times = item
    start, end = times.tolist()
    return Batch(seeds, input_nodes, blocks, start, end)
