"""Split statistics of ``gsplit``, measured on the real graph and cached on disk like
:mod:`gnnplan.simulator.workload.graphstats` (DGL and pymetis are imported only when measuring).

For the mini-batches of epoch 0 that the simulator's window simulates (every iteration when an epoch has at most
:data:`~gnnplan.simulator.strategies.window.MAX_WINDOW_ITERATIONS`, else the first ones and the last), one batch
of B seeds is sampled for all GPUs (:func:`sample_batch`, the executor's sampler) and split by the owner map
(:func:`.split.layer_counts`): per layer and split the owned vertices and edges and the rows of every GPU pair's
shuffle; per split the feature-cache hits of its layer-0 vertices at every cache fraction of
:data:`~gnnplan.simulator.workload.graphstats.CACHE_GRID`. For the redundancy of data parallelism (brief §2.2)
the same B seeds are also split among the g GPUs as ``dp`` splits them (DistDGL node_split by owner) and each
micro-batch is sampled on its own: the input vertices and edges those g micro-batches load and compute.

Notation: g -> ``num_splits``, L -> layers, B -> ``batch_size``, mu_i -> micro-batch i, C_i ->
:func:`.split.partition_cache`. Cache layout: ``<cache_dir>/stats/<dataset_key>/gsplit-<digest>.json``
(parameters stored in the file and checked on read; damaged entries are measured again; atomic writes).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.strategies.gsplit.split import batch_seed, global_batches, layer_counts, partition_cache
from gnnplan.simulator.strategies.window import iteration_plan
from gnnplan.simulator.workload.cards import card_with_histogram
from gnnplan.simulator.workload.datasets import GraphData, dataset_key, load_dataset
from gnnplan.simulator.workload.dgl_seed import seed_dgl
from gnnplan.simulator.workload.graphstats import CACHE_GRID
from gnnplan.simulator.workload.owners import partition_owners
from gnnplan.simulator.workload.partition import split_seeds
from gnnplan.simulator.workload.proxy import for_card
from gnnplan.simulator.workload.proxy_batch import batch_reach_scale, scale_layers
from gnnplan.simulator.workload.proxy_pool import pooled
from gnnplan.simulator.workload.spec import GeneratedSpec
from gnnplan.simulator.workload.stats_cache import entry_path, read_entry

STATS_FORMAT = 3
"""Version of the measurement, part of the cache key (3: a card's split inputs scaled by the per-batch rule)."""


@dataclass(frozen=True)
class SplitStats:
    """Measured split statistics (module docstring); arrays indexed [batch, layer, split, split].

    Attributes:
        iterations: (n_b,) epoch-0 iteration of each measured batch.
        num_iterations: iterations per epoch, ceil(num_train / B).
        num_seeds, num_input_vertices, num_items: (n_b,) targets, layer-0 vertices, and the sampled vertices of
            all layers (the online split looks up each one's owner and cache slot, paper §5.3).
        num_src, num_dst, num_edges: (n_b, L) block sizes of the one mini-batch.
        split_src, split_dst, edges_by_src, edges_by_dst, local_edges: (n_b, L, g).
        sage_rows, gat_rows: (n_b, L, g, g) forward-shuffle rows from split i to split j.
        cache_fractions: (G,) grid; input_hits: (n_b, g, G) layer-0 vertices of split i in its cache C_i.
        partition_sizes: (g,) vertices each split owns.
        dp_input_vertices: (n_b,) sum over the g micro-batches of their input vertices.
        dp_edges: (n_b, L) sum over the g micro-batches of their sampled edges.
    """

    iterations: np.ndarray
    num_iterations: int
    num_seeds: np.ndarray
    num_input_vertices: np.ndarray
    num_items: np.ndarray
    num_src: np.ndarray
    num_dst: np.ndarray
    num_edges: np.ndarray
    split_src: np.ndarray
    split_dst: np.ndarray
    edges_by_src: np.ndarray
    edges_by_dst: np.ndarray
    local_edges: np.ndarray
    sage_rows: np.ndarray
    gat_rows: np.ndarray
    cache_fractions: np.ndarray
    input_hits: np.ndarray
    partition_sizes: np.ndarray
    dp_input_vertices: np.ndarray
    dp_edges: np.ndarray

    @property
    def num_splits(self) -> int:
        """g."""
        return int(self.partition_sizes.shape[0])

    def hits(self, cache_fraction: float, batch: int | None = None) -> np.ndarray:
        """(n_b, g) cache hits of every split's layer-0 vertices at ``cache_fraction`` (linear interpolation
        between grid points); (g,) those of measured batch ``batch`` alone when given."""
        grid = self.cache_fractions
        table = self.input_hits if batch is None else self.input_hits[batch][None]
        out = np.array([[np.interp(cache_fraction, grid, row) for row in splits] for splits in table])
        return out.reshape(table.shape[:2]) if batch is None else out.reshape(table.shape[1])

    def edges(self, arch: str) -> np.ndarray:
        """(n_b, L, g) edges each split computes: at the source's owner for GraphSAGE (pre-aggregation), at the
        destination's owner for GAT (brief §2.3, "Compute")."""
        return self.edges_by_src if arch == "sage" else self.edges_by_dst

    def rows(self, arch: str) -> np.ndarray:
        """(n_b, L, g, g) forward-shuffle rows of ``arch`` (``sage_rows`` or ``gat_rows``)."""
        return self.sage_rows if arch == "sage" else self.gat_rows

    def edge_skew(self, arch: str) -> np.ndarray:
        """(n_b,) edge skew of each batch: (max_i |E_i| - min_i |E_i|) / mean_i |E_i| over all layers.

        Source: brief §2.1 (paper §5.3).
        """
        e = self.edges(arch).sum(axis=1).astype(np.float64)
        return (e.max(axis=1) - e.min(axis=1)) / np.maximum(e.mean(axis=1), 1e-12)

    def local_edge_fraction(self) -> np.ndarray:
        """(n_b,) local-edge fraction: edges with both ends in one split over all edges. Source: brief §2.1."""
        return self.local_edges.sum(axis=(1, 2)) / np.maximum(self.num_edges.sum(axis=1), 1)


def split_stats(ref: str | GeneratedSpec, fanouts: Sequence[int], batch_size: int, num_splits: int, split: str,
                self_loops: bool, seed: int = 0, partition_seed: int = 0,
                num_train: int | None = None) -> SplitStats:
    """The split statistics of a configuration, read from the cache or measured once and cached.

    Args:
        ref: ``workload.dataset``.
        fanouts: per layer, input side first (-1 = all in-neighbours).
        batch_size: B, seeds per iteration (all GPUs together).
        num_splits: g (GPUs of the cluster).
        split: ``metis`` or ``random`` offline partition into g parts.
        self_loops: sample from the graph with one self-loop per vertex (GAT, as the executor trains it).
        seed: ``training.seed`` (batch order and sampling, as the executor).
        partition_seed: seed of the partitioner (the executor's ``PARTITION_SEED``).
        num_train: training vertices of the epoch whose window is measured (the simulation's
            ``DatasetSummary.num_train``); None: the loaded graph's. For a dataset card they are the card's, many
            more than its proxy's: the window's batches are then drawn from the proxy (:func:`window_batches`).

    Returns:
        The statistics.

    Raises:
        SpecError: bad arguments, a dataset that cannot be loaded or without training vertices.
    """
    fan = [int(f) for f in fanouts]
    if not fan or any(f == 0 or f < -1 for f in fan) or batch_size < 1 or num_splits < 1:
        raise SpecError(f"gsplit statistics: fanouts {fan}, batch_size {batch_size} and {num_splits} splits "
                        "must be positive (fanout -1 = all neighbours)")
    args = (tuple(fan), batch_size, num_splits, split, self_loops, seed, partition_seed, num_train)
    pool = pooled(ref, lambda r: split_stats(r, *args), ("gsplit", *args))
    if pool is not None:  # a small card: the medoid of its proxy draws (simulator/workload/proxy_pool.py)
        return pool
    params = {"format": STATS_FORMAT, "dataset": dataset_key(ref), "fanouts": fan, "batch_size": int(batch_size),
              "num_splits": int(num_splits), "split": split, "self_loops": bool(self_loops), "seed": int(seed),
              "partition_seed": int(partition_seed), "cache_grid": list(CACHE_GRID)}
    if num_train is not None:
        params["num_train"] = int(num_train)
    path = entry_path("gsplit", params)
    cached = _read(path, params)
    if cached is not None:
        return for_card(ref, cached, CARD_VERTEX_FIELDS)
    graph = load_dataset(ref)
    if len(graph.train_idx) == 0:
        raise SpecError(f"workload.dataset: {graph.name} has no training vertices to sample mini-batches from")
    owner = partition_owners(ref, num_splits, split, partition_seed, graph=graph)
    stats = _measure(graph, owner, params)
    card = card_with_histogram(ref)
    if card is not None:
        # one batch of B seeds over all GPUs, a uniform sample of the training vertices: its per-layer input
        # vertices at the card's size (the per-batch rule, simulator.workload.proxy_batch.batch_reach_scale)
        reach = batch_reach_scale(card, graph, fan, batch_size)
        stats = replace(stats, split_src=scale_layers(stats.split_src, reach.src_ratio, axis=1))
    atomic_write_json(path, {"params": params, "stats": {f.name: _jsonable(getattr(stats, f.name))
                                                         for f in fields(stats)}})
    return for_card(ref, stats, CARD_VERTEX_FIELDS)


CARD_VERTEX_FIELDS = ("partition_sizes",)
""":class:`SplitStats` fields scaled from a card's proxy to the card (:func:`simulator.workload.proxy.for_card`):
the vertices each split owns; every per-batch field is kept (size-invariant rule)."""


def dgl_graph(graph: GraphData, self_loops: bool) -> Any:
    """The DGL graph sampled from: ``graph``'s edges, with existing self-loops replaced by one per vertex when
    ``self_loops`` (as :func:`gnnplan.executor.data.build_graph` builds it for GAT, so edge ids agree)."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl
    import torch

    g = dgl.graph((torch.from_numpy(graph.src), torch.from_numpy(graph.dst)), num_nodes=graph.num_vertices)
    return dgl.add_self_loop(dgl.remove_self_loop(g)) if self_loops else g


def sample_batch(g: Any, sampler: Any, seeds: np.ndarray, seed: int) -> list[Any]:
    """Sample one batch's blocks on one thread with DGL seeded by :func:`.split.batch_seed` (through
    :func:`simulator.workload.dgl_seed.seed_dgl`), so every process sampling this batch gets the same blocks (DGL's
    multi-threaded sampling is not reproducible, nor is a thread's engine without ``seed_dgl``).

    Args:
        g: the DGL graph; sampler: a ``dgl.dataloading.NeighborSampler``; seeds: (b,) int64; seed: training seed.

    Returns:
        DGL's block list, input side first.
    """
    import torch
    from dgl.utils import get_num_threads, set_num_threads

    threads = get_num_threads()
    set_num_threads(1)
    try:
        seed_dgl(batch_seed(seed, seeds))
        return list(sampler.sample_blocks(g, torch.from_numpy(np.ascontiguousarray(seeds, dtype=np.int64)))[2])
    finally:
        set_num_threads(threads)


def block_arrays(block: Any) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """(source vertex ids, number of destinations, edge source positions, edge destination positions)."""
    u, v = block.edges()
    return block.srcdata["_ID"].numpy(), int(block.num_dst_nodes()), u.numpy(), v.numpy()  # "_ID" = dgl.NID


def _measure(graph: GraphData, owner: np.ndarray, params: dict[str, Any]) -> SplitStats:
    """Sample and split the window's batches of epoch 0 (module docstring)."""
    import dgl

    g_split, seed, grid = params["num_splits"], params["seed"], np.asarray(params["cache_grid"])
    num_train = params.get("num_train", len(graph.train_idx))
    plan = iteration_plan(num_train, params["batch_size"], 1)
    batches = window_batches(graph.train_idx, num_train, params["batch_size"], seed)
    g = dgl_graph(graph, params["self_loops"])
    sampler = dgl.dataloading.NeighborSampler(params["fanouts"])
    cache_rank = _cache_rank(graph.in_degrees(), owner, g_split)
    rows: dict[str, list[Any]] = {f.name: [] for f in fields(SplitStats)}
    for it in plan.window:
        blocks = sample_batch(g, sampler, batches[it], seed)
        counts = [layer_counts(owner[ids], nd, u, v, g_split) for ids, nd, u, v in map(block_arrays, blocks)]
        inputs = blocks[0].srcdata["_ID"].numpy()
        micro = [sample_batch(g, sampler, s, seed) for s in split_seeds(batches[it], owner, g_split) if len(s)]
        for name, value in (
                ("iterations", it), ("num_seeds", len(batches[it])), ("num_input_vertices", len(inputs)),
                ("num_items", sum(b.num_src_nodes() for b in blocks)),
                ("num_src", [b.num_src_nodes() for b in blocks]), ("num_dst", [b.num_dst_nodes() for b in blocks]),
                ("num_edges", [b.num_edges() for b in blocks]),
                ("input_hits", _hits(cache_rank[inputs], owner[inputs], grid, graph.num_vertices, g_split)),
                ("dp_input_vertices", sum(m[0].num_src_nodes() for m in micro)),
                ("dp_edges", [sum(m[layer].num_edges() for m in micro) for layer in range(len(blocks))])):
            rows[name].append(value)
        for name in ("split_src", "split_dst", "edges_by_src", "edges_by_dst", "local_edges", "sage_rows",
                     "gat_rows"):
            rows[name].append([getattr(c, name.removeprefix("split_")) for c in counts])
    out = {k: np.asarray(v) for k, v in rows.items() if v}
    return SplitStats(num_iterations=plan.num_iterations, cache_fractions=grid,
                      partition_sizes=np.bincount(owner, minlength=g_split), **out)


def window_batches(train_idx: np.ndarray, num_train: int, batch_size: int, seed: int) -> dict[int, np.ndarray]:
    """The seeds of every batch of epoch 0 that the simulator's window simulates (``iteration_plan(num_train,
    batch_size, 1).window``), by iteration.

    When the epoch is the graph's (``num_train == len(train_idx)``), the executor's batches
    (:func:`.split.global_batches`). Otherwise the epoch is a dataset card's and the graph its proxy, which has
    fewer training vertices than the card (``simulator.workload.proxy.PROXY_MIN_TRAIN_FRACTION``): window
    iteration ``it`` then takes as many seeds as the card's epoch gives it (B; the last iteration
    ``num_train - (n - 1) B``), drawn without replacement from the proxy's training vertices with
    ``numpy.random.default_rng((seed, 0, it))``. A batch of an epoch's random permutation is a uniform random
    subset of its size, so the drawn batch has the same law; per-batch statistics are kept from proxy to card
    (:mod:`simulator.workload.proxy`, size-invariant rule), or scaled by the per-batch rule when the card has a
    degree histogram (:func:`split_stats`).

    Shapes:
        train_idx: (n_train,) int64 -> {iteration: (b,) int64 seeds} for every iteration of the window.

    Raises:
        SpecError: a batch needs more seeds than the graph has training vertices.
    """
    train_idx = np.asarray(train_idx, dtype=np.int64)
    plan = iteration_plan(num_train, batch_size, 1)
    if num_train == len(train_idx):
        epoch = global_batches(train_idx, batch_size, seed, 0)
        return {it: epoch[it] for it in plan.window}
    last = plan.num_iterations - 1
    sizes = {it: num_train - last * batch_size if it == last else batch_size for it in plan.window}
    if max(sizes.values()) > len(train_idx):
        raise SpecError(f"training.batch_size: {batch_size} seeds per gsplit batch, but the dataset card's proxy "
                        f"has {len(train_idx)} training vertices to draw them from; use at most {len(train_idx)}")
    return {it: np.random.default_rng((seed, 0, it)).choice(train_idx, size=b, replace=False)
            for it, b in sizes.items()}


def _cache_rank(in_degrees: np.ndarray, owner: np.ndarray, num_splits: int) -> np.ndarray:
    """(n,) every vertex's position in its partition's cache order (0 = hottest): v is in C_i at fraction c iff
    its rank < floor(c n) (:func:`.split.partition_cache` with c = 1)."""
    rank = np.empty(len(owner), dtype=np.int64)
    for part in range(num_splits):
        ids = partition_cache(in_degrees, owner, part, 1.0)
        rank[ids] = np.arange(len(ids))
    return rank


def _hits(rank: np.ndarray, owner: np.ndarray, grid: np.ndarray, num_vertices: int, num_splits: int) -> np.ndarray:
    """(g, G) layer-0 vertices of each split within its cache at every grid fraction."""
    sizes = np.floor(grid * num_vertices + 1e-9).astype(np.int64)
    inside = rank[:, None] < sizes[None, :]                        # (inputs, G)
    return np.stack([inside[owner == part].sum(axis=0) for part in range(num_splits)])


def _jsonable(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


_LOADED: dict[str, tuple[tuple[int, int], dict[str, Any], SplitStats]] = {}
"""Statistics read from the disk cache in this process, by file, with the file's (mtime_ns, size) when read and
its parameters."""
LOADED_ENTRIES = 16
"""Files :data:`_LOADED` keeps (a study's trials read the same few files again and again)."""


def _read(path: Any, params: dict[str, Any]) -> SplitStats | None:
    """The cached statistics at ``path`` if measured with exactly ``params``, else None. A file read before in
    this process and unchanged since (same modification time and size) is not parsed again: its arrays are
    returned read-only."""
    try:
        stat = os.stat(path)
        version = (stat.st_mtime_ns, stat.st_size)
        seen = _LOADED.get(str(path))
        if seen is not None and seen[0] == version and seen[1] == params:
            return seen[2]
        raw = read_entry(path, params)
        if raw is None:
            return None
        arrays = {f.name: np.asarray(raw[f.name]) for f in fields(SplitStats) if f.name != "num_iterations"}
        for a in arrays.values():
            a.flags.writeable = False
        stats = SplitStats(num_iterations=int(raw["num_iterations"]), **arrays)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    _LOADED[str(path)] = (version, params, stats)
    while len(_LOADED) > LOADED_ENTRIES:
        _LOADED.pop(next(iter(_LOADED)))
    return stats
