"""HopGNN's home-machine sampling in the executor: every worker samples the micrograph groups it trains.

Paper §5.1 steps 1-2 (brief ../shared/papers/hopgnn.md §1.4): the roots of every model's mini-batch are grouped by
home machine and each home machine samples its groups, "a single set mg_d^i of micrographs for each vertex
group" (one sampler call per group). Every rank derives every model's mini-batch from the shared seed schedule
(brief §1.9 step 4: "Redistribute (local computation, thanks to the shared seed)"), so a worker knows the groups it
hosts without any message: no root id, edge id or block crosses the network before the pre-gather. Because the
groups are known ahead, sampler processes can sample them ahead of the trainer, exactly like ``dp``'s batches
(:class:`GroupStream`; same prefetch depth and process seeding as :class:`~executor.sampling.BatchStream`).

Notation: M -> ``num_machines``, g -> ``gpus_per_machine``, mg_d^s -> a hosted group (:class:`Hosted`),
m (merges) -> ``merges``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dgl
import numpy as np
import torch

from gnnplan.executor.data import iteration_batches
from gnnplan.executor.sampling import (
    TimedSampler,
    _identity,
    _init_worker,
    _worker_context,
    epoch_seed,
    loader_generator,
    reseed_sampler_process,
    share_before_fork,
)
from gnnplan.executor.trace import now
from gnnplan.simulator.strategies.hopgnn.micrographs import home_groups, merge_groups
from gnnplan.simulator.workload.batches import split_epoch_seeds
from gnnplan.simulator.workload.dgl_seed import seed_dgl


@dataclass
class Hosted:
    """A micrograph group this worker trains at one step: model ``model``'s seeds and the blocks sampled for them
    here (input side first)."""

    model: int
    seeds: np.ndarray
    blocks: list[Any]

    @property
    def input_nodes(self) -> torch.Tensor:
        """(v,) int64 input vertices of the group."""
        return self.blocks[0].srcdata[dgl.NID]


@dataclass
class HostedBatch:
    """What one worker trains in one iteration: the remaining original step indices and, per step position k,
    the group it hosts there (absent = idle slot), with when their sampling ran (``perf_counter()``)."""

    steps: list[int]
    groups: dict[int, Hosted]
    start_s: float
    end_s: float

    @property
    def num_sampled_edges(self) -> int:
        """Edges over all groups' blocks."""
        return sum(int(b.num_edges()) for h in self.groups.values() for b in h.blocks)

    @property
    def num_input_vertices(self) -> int:
        """Input vertices summed over the groups (a vertex in two groups counts twice)."""
        return sum(len(h.input_nodes) for h in self.groups.values())


def hosted_model(rank: int, step: int, num_machines: int, gpus_per_machine: int) -> int:
    """The model worker ``rank`` hosts at original step ``step``: the same lane on machine ``(m - step) mod M``."""
    machine = (rank // gpus_per_machine - step) % num_machines
    return machine * gpus_per_machine + rank % gpus_per_machine


def hosted_groups(batches: list[np.ndarray], owner: np.ndarray, num_machines: int, gpus_per_machine: int,
                  merges: int, rank: int) -> tuple[list[int], dict[int, tuple[int, np.ndarray]]]:
    """Group every model's seeds by home machine, merge ``merges`` steps, and keep the groups ``rank`` hosts.

    Args:
        batches: per model (worker) d, its seeds B_d of the iteration (every rank passes the same).
        owner: (n,) owner machine of every vertex.
        num_machines, gpus_per_machine: M, g.
        merges: steps removed (paper §5.3).
        rank: this worker.

    Returns:
        (remaining original step indices; step position k -> (model, seeds) for the non-empty groups ``rank``
        hosts).
    """
    steps, merged = merge_groups(home_groups(batches, owner, num_machines, gpus_per_machine), merges)
    out = {}
    for k, t in enumerate(steps):
        d = hosted_model(rank, t, num_machines, gpus_per_machine)
        if len(merged[d][k]):
            out[k] = (d, merged[d][k])
    return steps, out


def sample_hosted(g: Any, sampler: TimedSampler, steps: list[int], groups: dict[int, tuple[int, np.ndarray]],
                  key: tuple[int, int] | None) -> HostedBatch:
    """Sample every hosted group with one sampler call each (``key`` = (epoch, iteration) for keyed samplers)."""
    start = now()
    hosted = {}
    for k, (model, seeds) in groups.items():
        blocks = sampler.sample(g, torch.from_numpy(np.ascontiguousarray(seeds, dtype=np.int64)), key)[2]
        hosted[k] = Hosted(model, seeds, blocks)
    return HostedBatch(steps, hosted, start, now())


class HomeSchedule:
    """Every model's seed batches per epoch (the shared seed schedule of ``dp``, or the paper's random split), and
    the groups one rank hosts per (epoch, iteration, merges). Picklable (sampler processes call it).

    Args:
        train_idx, owner: training vertices and vertex owners.
        num_machines, gpus_per_machine: M, g.
        seed: ``training.seed``.
        per_iteration: seeds per worker and iteration.
        rank: the worker whose hosted groups :meth:`hosted` returns.
        seed_split: ``owner`` (dp's split) or ``random``.
    """

    def __init__(self, train_idx: np.ndarray, owner: np.ndarray, num_machines: int, gpus_per_machine: int,
                 seed: int, per_iteration: int, rank: int, seed_split: str) -> None:
        self.train_idx, self.owner, self.m, self.g = train_idx, owner, num_machines, gpus_per_machine
        self.seed, self.per_iteration, self.rank, self.seed_split = seed, per_iteration, rank, seed_split
        self._epoch, self._batches = -1, ([], [])  # type: ignore[var-annotated]

    def batches(self, epoch: int) -> tuple[list[list[np.ndarray]], list[int]]:
        """``([worker][iteration] seeds, global seeds per iteration)`` of ``epoch`` (cached for the last epoch)."""
        if epoch != self._epoch:
            seeds = split_epoch_seeds(self.train_idx, self.owner, self.m, self.g, self.seed, epoch, self.seed_split)
            self._epoch, self._batches = epoch, iteration_batches(seeds, self.per_iteration)
        return self._batches

    def hosted(self, epoch: int, it: int, merges: int) -> tuple[list[int], dict[int, tuple[int, np.ndarray]]]:
        """The groups this rank hosts in iteration ``it`` of ``epoch`` with ``merges`` merges."""
        return hosted_groups([b[it] for b in self.batches(epoch)[0]], self.owner, self.m, self.g, merges, self.rank)


class GroupStream:
    """Every iteration's hosted groups, sampled inline or ahead in persistent sampler processes.

    Args:
        g: the graph.
        sampler: the sampler (DGL's or keyed).
        schedule: this rank's :class:`HomeSchedule`.
        num_iterations: iterations per epoch.
        num_workers: sampler processes (0 = inline).
        seed: RNG seed of the sampler processes (as :class:`~executor.sampling.BatchStream`).
    """

    def __init__(self, g: Any, sampler: TimedSampler, schedule: HomeSchedule, num_iterations: int, num_workers: int,
                 seed: int = 0) -> None:
        self.g, self.sampler, self.schedule, self.seed = g, sampler, schedule, seed
        self.keys = _GroupKeys(num_iterations)
        self.loader = None
        if num_workers > 0:
            share_before_fork(g)
            self.loader = torch.utils.data.DataLoader(
                _SampledGroups(g, sampler, schedule, seed), sampler=self.keys, batch_size=None, collate_fn=_identity,
                num_workers=num_workers, persistent_workers=True, prefetch_factor=2,
                worker_init_fn=functools.partial(_init_worker, seed), multiprocessing_context=_worker_context(),
                generator=loader_generator(seed))

    def epoch(self, epoch: int, merges: int) -> Iterator[HostedBatch]:
        """The hosted batches of ``epoch`` (with ``merges`` merges) in iteration order."""
        if self.loader is None:
            seed_dgl(epoch_seed(self.seed, epoch))  # per epoch, as BatchStream (executor.sampling)
            for it in range(self.keys.num_iterations):
                yield sample_hosted(self.g, self.sampler, *self.schedule.hosted(epoch, it, merges), (epoch, it))
            return
        self.keys.epoch, self.keys.merges = epoch, merges
        yield from self.loader

    def close(self) -> None:
        """Stop the sampler processes."""
        self.loader = None


class _GroupKeys(torch.utils.data.Sampler):  # type: ignore[type-arg]
    """Yields (epoch, iteration, merges) keys of the current epoch (set by the trainer before iterating)."""

    def __init__(self, num_iterations: int) -> None:
        self.epoch, self.merges, self.num_iterations = 0, 0, num_iterations

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return iter([(self.epoch, i, self.merges) for i in range(self.num_iterations)])

    def __len__(self) -> int:
        return self.num_iterations


class _SampledGroups(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Samples the hosted groups of an (epoch, iteration, merges) key."""

    def __init__(self, g: Any, sampler: TimedSampler, schedule: HomeSchedule, seed: int = 0) -> None:
        self.g, self.sampler, self.schedule, self.seed, self._epoch = g, sampler, schedule, seed, -1

    def __getitem__(self, key: tuple[int, int, int]) -> HostedBatch:
        epoch, it, merges = key
        if epoch != self._epoch:
            self._epoch = epoch
            reseed_sampler_process(self.seed, epoch)
        return sample_hosted(self.g, self.sampler, *self.schedule.hosted(epoch, it, merges), (epoch, it))


__all__ = ["GroupStream", "HomeSchedule", "Hosted", "HostedBatch", "hosted_groups", "hosted_model", "sample_hosted"]
