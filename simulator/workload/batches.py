"""Mini-batches as the executor and the statistics draw them: each epoch's shuffled training vertices split among
workers as DistDGL's ``node_split(force_even=True)`` does, each worker's share in random order as DistDGL's
shuffling data loader takes it (:func:`epoch_seeds`, :func:`worker_batches`), then sampled with DGL's
``NeighborSampler`` on one seeded thread (:func:`seeded_sampler`, :func:`sample_batches`), so every measurement
built on them (:mod:`.graphstats`, hopgnn's micrographs) is deterministic. DGL is imported only when sampling."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload.datasets import GraphData
from gnnplan.simulator.workload.dgl_seed import seed_dgl
from gnnplan.simulator.workload.partition import split_seeds


def worker_batches(train_idx: np.ndarray, owner: np.ndarray, num_machines: int, gpus_per_machine: int,
                   batch_size: int, seed: int, num_batches: int, partial: bool = True,
                   seed_split: str = "owner") -> list[list[np.ndarray]]:
    """Seed batches of every worker: ``num_batches`` each, from as many epochs' shuffles as needed, in epoch order.

    Each epoch's seeds are :func:`split_epoch_seeds` by ``seed_split``: :func:`epoch_seeds` (DistDGL's split, each
    worker's share in random order), or ``random``, the epoch's shuffled training vertices cut evenly. With
    ``partial`` each epoch's partial last batch is included (a worker whose share is smaller than a batch always
    gets its whole share as one batch);
    :func:`~.graphstats.sample_stats` counts inputs over every batch but averages block sizes over full ones only.

    Returns:
        One list per worker (rank order) of (batch,) int64 seed arrays; empty for a worker without seeds.
    """
    out: list[list[np.ndarray]] = [[] for _ in range(num_machines * gpus_per_machine)]
    for epoch in range(num_batches):  # every worker with seeds gets at least one batch per epoch
        parts = split_epoch_seeds(train_idx, owner, num_machines, gpus_per_machine, seed, epoch, seed_split)
        for have, seeds in zip(out, parts, strict=True):
            last = len(seeds) if partial else max(len(seeds) - batch_size, 0) + 1
            starts = list(range(0, last, batch_size)) if len(seeds) else []
            have.extend(seeds[i: i + batch_size] for i in starts[: num_batches - len(have)])
        if all(len(b) >= num_batches or not b for b in out):
            break
    return out


def epoch_seeds(train_idx: np.ndarray, owner: np.ndarray, num_machines: int, gpus_per_machine: int, seed: int,
                epoch: int) -> list[np.ndarray]:
    """Every worker's seeds of one epoch, in the order its mini-batches take them; the executor's and the
    statistics' batches both come from here.

    The training vertices are shuffled with ``numpy.random.default_rng((seed, epoch))`` and split by
    :func:`owner_split` (DistDGL's ``node_split(force_even=True)``, then evenly among each machine's GPUs); each
    worker's share is then put in random order with ``default_rng((seed, epoch, 1))``, as DistDGL's
    ``DistNodeDataLoader(..., shuffle=True)`` does with a trainer's share every epoch. The split leaves the
    seeds a machine takes over from another machine's partition at the end of its share; the shuffle spreads
    them over the epoch's batches, so every batch (and the first few that the statistics sample) draws them in
    proportion.

    Returns:
        ``num_machines * gpus_per_machine`` int64 arrays, rank order.
    """
    shuffled = np.random.default_rng((seed, epoch)).permutation(train_idx)
    rng = np.random.default_rng((seed, epoch, 1))
    return [rng.permutation(part) for part in owner_split(shuffled, owner, num_machines, gpus_per_machine)]


SEED_SPLITS = ("owner", "random")
"""How an iteration's global mini-batch is split among the workers (hopgnn's models): ``owner`` = DistDGL's
``node_split`` (:func:`epoch_seeds`: a worker prefers seeds its machine owns); ``random`` = globally random
mini-batches, an even cut of the shuffled seeds (:func:`random_split`): the DGL baseline as the HopGNN paper
describes it (§2, Fig 3: "each model gets a disjoint random mini-batch", so ~(M - 1) / M of a worker's reads are
remote; brief hopgnn.md §1.1) and HopGNN's own models (§5.1)."""


def random_split(seeds: np.ndarray, num_workers: int) -> list[np.ndarray]:
    """The ``random`` seed split: ``seeds`` (already shuffled) cut into ``num_workers`` even, consecutive parts."""
    return [np.asarray(p, dtype=np.int64) for p in np.array_split(np.asarray(seeds, dtype=np.int64), num_workers)]


def split_epoch_seeds(train_idx: np.ndarray, owner: np.ndarray, num_machines: int, gpus_per_machine: int, seed: int,
                      epoch: int, seed_split: str = "owner") -> list[np.ndarray]:
    """Every worker's seeds of one epoch by ``seed_split`` (:data:`SEED_SPLITS`): :func:`epoch_seeds`, or the
    training vertices shuffled with ``numpy.random.default_rng((seed, epoch))`` and cut evenly
    (:func:`random_split`). The executors' and the statistics' batches both come from here.

    Returns:
        ``num_machines * gpus_per_machine`` int64 arrays, rank order.

    Raises:
        SpecError: ``seed_split`` is not one of :data:`SEED_SPLITS`.
    """
    if check_seed_split(seed_split) == "random":
        shuffled = np.random.default_rng((seed, epoch)).permutation(train_idx)
        return random_split(shuffled, num_machines * gpus_per_machine)
    return epoch_seeds(train_idx, owner, num_machines, gpus_per_machine, seed, epoch)


def check_seed_split(seed_split: str) -> str:
    """``seed_split`` itself when it is one of :data:`SEED_SPLITS`.

    Raises:
        SpecError: otherwise (one line naming it and the allowed ones).
    """
    if seed_split not in SEED_SPLITS:
        raise SpecError(f"seed_split: {seed_split!r} is not one of {', '.join(SEED_SPLITS)}")
    return seed_split


def owner_split(seeds: np.ndarray, owner: np.ndarray, num_machines: int, gpus_per_machine: int) -> list[np.ndarray]:
    """``seeds`` split among machines as DistDGL's ``node_split(force_even=True)`` does
    (:func:`simulator.workload.partition.split_seeds`), then evenly among each machine's GPUs (consecutive parts).

    Returns:
        ``num_machines * gpus_per_machine`` int64 arrays, rank order (worker w on machine w // gpus_per_machine).
    """
    return [np.asarray(part, dtype=np.int64) for machine_seeds in split_seeds(seeds, owner, num_machines)
            for part in np.array_split(machine_seeds, gpus_per_machine)]


def sample_batches(graph: GraphData, fanouts: list[int], batches: list[list[np.ndarray]],
                   seed: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Sample every batch with DGL's ``NeighborSampler`` on one thread (DGL's multi-threaded sampling is not
    reproducible), with DGL and torch seeded; the caller's torch RNG state is restored afterwards.

    Yields:
        (worker, block sizes, input vertices): block sizes (num_layers, 3) = (num_src, num_dst, num_edges) per
        block, input side first; input vertices (k,) int64 = ``blocks[0].srcdata[dgl.NID]``.
    """
    with seeded_sampler(graph, fanouts, seed) as sample:
        for worker, seeds_list in enumerate(batches):
            for seeds in seeds_list:
                blocks = sample(seeds)
                sizes = np.array([(b.num_src_nodes(), b.num_dst_nodes(), b.num_edges()) for b in blocks])
                yield worker, sizes, blocks[0].srcdata["_ID"].numpy()  # "_ID" = dgl.NID


@contextlib.contextmanager
def seeded_sampler(graph: GraphData, fanouts: Sequence[int], seed: int) -> Iterator[Callable[[np.ndarray], Any]]:
    """DGL's ``NeighborSampler(fanouts)`` on ``graph``, on one thread with DGL and torch seeded (DGL's
    multi-threaded sampling is not reproducible); the caller's torch RNG state and DGL's thread count are
    restored on exit.

    Yields:
        ``sample(seeds) -> blocks``: seeds (k,) int64 -> DGL's block list, input side first.
    """
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import torch
    from dgl.utils import get_num_threads, set_num_threads

    g = dgl.graph((torch.from_numpy(graph.src), torch.from_numpy(graph.dst)), num_nodes=graph.num_vertices)
    sampler = dgl.dataloading.NeighborSampler(list(fanouts))
    threads = get_num_threads()
    set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            seed_dgl(seed)
            yield lambda seeds: sampler.sample_blocks(g, torch.from_numpy(np.ascontiguousarray(seeds)))[2]
    finally:
        set_num_threads(threads)
