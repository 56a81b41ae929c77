"""Graph statistics the cost models need, measured on the actual graph and cached on disk.

Measured on the mini-batches of :mod:`.batches` (DGL's ``NeighborSampler``: sampled vertices and edges per
layer) and on :mod:`.partition` (METIS via pymetis, or random): edge cut, the share of a worker's input vertices
owned by another machine, and the feature-cache hit rate versus cache fraction when each GPU caches the highest
in-degree vertices (PaGraph's policy: Lin et al., "PaGraph", SoCC 2020, §4.2). DGL and pymetis are imported
lazily, only when measuring.

A dataset card (:mod:`.cards`) is measured on its proxy (:mod:`.proxy`; ``load_dataset`` yields the proxy
graph, and the cache folder is keyed by card and proxy): with a degree histogram in the card, per-batch sizes and
the cache / local / remote split are scaled to the card's size (:func:`~.proxy_batch.scale_sample_stats`, the per-batch
rule); without one they are taken as they are; the dataset summary is the card's published sizes.

Cache layout (:mod:`.stats_cache`) under :func:`simulator.paths.cache_dir` ``/stats/<dataset_key>/``: ``summary.json``,
``sample-<digest of all parameters>.json`` (parameters stored in the file and checked on read), beside the
cached partitions (:mod:`.owners`, shared by measurements that differ only in batch size or fanouts). Damaged
entries are measured again; every file is written atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.workload.batches import check_seed_split, sample_batches, worker_batches
from gnnplan.simulator.workload.datasets import GraphData, dataset_key, load_dataset
from gnnplan.simulator.workload.owners import check_partitioner, partition_owners
from gnnplan.simulator.workload.partition import cached_vertices
from gnnplan.simulator.workload.spec import GeneratedSpec
from gnnplan.simulator.workload.stats_cache import entry_path, read_entry, read_json, stats_dir

STATS_FORMAT = 2
"""Version of the measurement; part of every cache key, so changing how statistics are measured means bumping it."""
SAMPLE_FORMAT = 6
"""Version of :func:`sample_stats`' measurement (3: ``remote_busiest_ratio``; 4: ``slowest_input_ratio``; 5: the
per-worker and per-machine fields; 6: each worker's seeds in random order, :func:`~.batches.epoch_seeds`); part of
its cache key."""
DEFAULT_NUM_BATCHES = 32
"""Mini-batches sampled per worker by :func:`sample_stats` (more epochs' shuffles are drawn when one epoch has
fewer). Measured on the rmat100k-sage workload (4 machines, 256 seeds per worker, METIS, seeds 0-4): the
relative spread of the mean input-vertex count is 0.4% at 8 batches and 0.1% at 32, where sampling the 128
batches takes ~0.3 s; on Cora the spread across seeds (~1.4%) comes from the partition, not the batch count."""
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

    ``remote_busiest_ratio[i]`` is how much more than the average machine the busiest machine's NIC moves in one
    iteration's fetch at ``cache_fractions[i]``: per iteration, the largest over machines of the rows it
    receives (its workers' remote misses) and the rows it sends (other machines' misses it owns), over the mean
    rows received per machine, as a ratio of sums over iterations. A partition balances vertices, not the
    demand for them, so one machine's hubs can be in every batch: Cora on 2 METIS parts, 2 workers, batch 64
    at cache 0: the two machines' remote rows were 1129 and 601 kB per epoch (2026-11-23). An all-to-all
    ends when its busiest NIC is done (Thakur et al., "Optimization of Collective Communication Operations in
    MPICH", IJHPCA 19(1), 2005, §2: the time of a personalised exchange is bounded by the largest per-process
    volume). 1 on one machine; () in statistics measured before it existed (read as 1).

    ``slowest_input_ratio`` is how many more input vertices the worker with the largest batch loads than the
    average worker: per iteration, the largest over workers of the input vertices over their mean, as a ratio of
    sums over the iterations every worker has a batch in. Every worker waits for the slowest one at each
    collective (a fetch's calls, the gradient all-reduce), so an iteration lasts as long as its largest batch
    takes, not the mean one; and a partition can put the demand in one part: R-MAT, 20000 vertices, 2 METIS
    parts, 256 seeds per worker: one machine's batches had 4063 input vertices against the other's 2247
    (emulated cluster trace, 2026-11-28). 1 with one worker.

    Both ratios describe the imbalance (benchmarks/bench_proxy.py checks them on the proxies); no strategy prices
    with them since ``dp`` runs the slowest machine's own work from the fields below. Per worker and per machine,
    the systematic part of that imbalance (a partition puts the demand, and the rows it asks for, in one part;
    simulator/strategies/dp/work.py), sums over the iterations every worker has a batch in:

    * ``worker_input_ratio[w]``, ``worker_edge_ratio[w]``: worker w's input vertices and sampled edges over the
      mean worker's;
    * ``worker_hit_fraction[w][i]``, ``worker_remote_fraction[w][i]``: the shares of worker w's own input vertices
      that are cache hits and remote misses at ``cache_fractions[i]`` (the rest are local misses);
    * ``machine_sent_ratio[m][i]``: the rows machine m sends to the other machines' workers at
      ``cache_fractions[i]`` (their remote misses it owns), over the mean worker's input vertices.

    On the emulated cluster's R-MAT workload (20000 vertices, 2 METIS parts, 256 seeds per worker) the worker of
    the part holding the hubs loaded 3966 input vertices, 11% of them remote, the other 2176, 78% remote (trace of
    2026-11-28): the first has the most compute, the second the most to fetch. () in statistics that do not
    give them: every worker is the mean one.
    """

    SUMMARY_FIELDS: ClassVar[tuple[str, ...]] = ("edge_cut_fraction",)
    """Reported, not priced (the per-draw card scaling reads it before draws are pooled): a pooled card's value is
    its median over the draws (:data:`simulator.workload.proxy_pool.SUMMARY_FIELDS`)."""

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
    remote_busiest_ratio: tuple[float, ...] = ()
    slowest_input_ratio: float = 1.0
    worker_input_ratio: tuple[float, ...] = ()
    worker_edge_ratio: tuple[float, ...] = ()
    worker_hit_fraction: tuple[tuple[float, ...], ...] = ()
    worker_remote_fraction: tuple[tuple[float, ...], ...] = ()
    machine_sent_ratio: tuple[tuple[float, ...], ...] = ()

    def access(self, cache_fraction: float) -> tuple[float, float, float]:
        """(hit, local miss, remote miss) fractions of input vertices at ``cache_fraction`` (linear
        interpolation between measured grid points).

        Raises:
            ValueError: cache_fraction outside [0, 1].
        """
        hit, local, remote = (self._at(cache_fraction, values) for values in
                              (self.hit_fraction, self.local_miss_fraction, self.remote_miss_fraction))
        total = hit + local + remote
        return hit / total, local / total, remote / total

    def worker_access(self, worker: int, cache_fraction: float) -> tuple[float, float, float]:
        """(hit, local miss, remote miss) fractions of worker ``worker``'s own input vertices at
        ``cache_fraction`` (linear interpolation between grid points); the mean worker's (:meth:`access`) when
        the statistics have no per-worker fields.

        Raises:
            ValueError: cache_fraction outside [0, 1].
        """
        if not self.worker_hit_fraction:
            return self.access(cache_fraction)
        hit = self._at(cache_fraction, self.worker_hit_fraction[worker])
        remote = self._at(cache_fraction, self.worker_remote_fraction[worker])
        return hit, max(0.0, 1.0 - hit - remote), remote

    def _at(self, cache_fraction: float, values: Sequence[float]) -> float:
        """``values`` (one per point of ``cache_fractions``) at ``cache_fraction``, linearly interpolated.

        Raises:
            ValueError: cache_fraction outside [0, 1].
        """
        if not 0.0 <= cache_fraction <= 1.0:
            raise ValueError(f"cache_fraction must be in [0, 1], got {cache_fraction}")
        return float(np.interp(cache_fraction, self.cache_fractions, values))

    def worker_ratios(self, worker: int) -> tuple[float, float]:
        """Worker ``worker``'s (input vertices, sampled edges) over the mean worker's; (1, 1) without per-worker
        fields."""
        if not self.worker_input_ratio:
            return 1.0, 1.0
        return self.worker_input_ratio[worker], self.worker_edge_ratio[worker]

    def sent_ratio(self, machine: int, cache_fraction: float) -> float:
        """Rows machine ``machine`` sends per iteration over the mean worker's input vertices (class docstring;
        linear interpolation between grid points); without per-machine fields, what the mean machine receives
        (its ``gpus_per_machine`` workers' remote misses)."""
        if not self.machine_sent_ratio:
            return self.access(cache_fraction)[2] * self.gpus_per_machine
        return self._at(cache_fraction, self.machine_sent_ratio[machine])

    def busiest_ratio(self, cache_fraction: float) -> float:
        """The busiest NIC's fetch load over the average machine's at ``cache_fraction`` (class docstring;
        linear interpolation between grid points), >= 1."""
        if not self.remote_busiest_ratio:
            return 1.0
        return max(1.0, self._at(cache_fraction, self.remote_busiest_ratio))


def dataset_summary(ref: str | GeneratedSpec) -> DatasetSummary:
    """Sizes of a dataset, read from the statistics cache or measured once and cached.

    Args:
        ref: ``workload.dataset``: preset name, card, OGB-layout folder, or :class:`GeneratedSpec`.

    Returns:
        The summary (``num_edges`` counts directed edges); a card's published sizes (no graph is loaded).

    Raises:
        SpecError: the dataset cannot be resolved or loaded.
    """
    from gnnplan.simulator.workload.cards import card_name, load_card

    card = card_name(ref)
    if card is not None:  # the published sizes, exact (simulator/workload/cards.py)
        c = load_card(card)
        return DatasetSummary(c.name, c.num_vertices.value, c.loaded_edges, c.feature_dim.value, c.num_classes.value,
                              c.split.train.value, c.split.valid.value, c.split.test.value)
    path = stats_dir(ref) / "summary.json"
    data = read_json(path)
    if data is not None and data.get("format") == STATS_FORMAT:
        try:
            return DatasetSummary(**data["summary"])
        except (KeyError, TypeError):
            pass  # a damaged entry is measured again below
    g = load_dataset(ref)
    summary = DatasetSummary(g.name, g.num_vertices, g.num_edges, g.feature_dim, g.num_classes,
                             len(g.train_idx), len(g.val_idx), len(g.test_idx))
    atomic_write_json(path, {"format": STATS_FORMAT, "summary": asdict(summary)})
    return summary


def sample_stats(ref: str | GeneratedSpec, fanouts: Sequence[int], batch_size_per_worker: int, num_machines: int,
                 gpus_per_machine: int, partitioner: str, seed: int = 0,
                 num_batches: int = DEFAULT_NUM_BATCHES, seed_split: str = "owner") -> SampleStats:
    """Per-worker mini-batch statistics, read from the statistics cache or measured once and cached.

    Measurement: the graph is partitioned into ``num_machines`` parts (:func:`partition_owners`); each epoch's
    training vertices are shuffled with ``numpy.random.default_rng((seed, epoch))``, split among machines with
    :func:`~simulator.workload.partition.split_seeds` (DistDGL ``node_split``, force_even) and then evenly among
    each machine's GPUs, each worker's share in random order (:func:`~.batches.epoch_seeds`, as DistDGL's data
    loader shuffles it); each worker cuts its share into full batches of ``batch_size_per_worker`` seeds (one
    batch of all its seeds if it has fewer) and DGL's ``NeighborSampler(fanouts)`` samples them (one thread,
    ``dgl.seed(seed)``, so the result is deterministic); with ``seed_split="random"`` each epoch's shuffled
    training vertices are cut evenly among the workers instead (globally random mini-batches:
    :func:`~.batches.split_epoch_seeds`). ``num_batches`` batches per worker are measured,
    drawing further epochs when one epoch yields fewer. A warm call reads one JSON file: it neither loads the
    graph nor imports DGL or pymetis.

    Args:
        ref: ``workload.dataset``: preset name, OGB-layout folder, or :class:`GeneratedSpec`.
        fanouts: per layer, input side first; -1 takes all in-neighbours.
        batch_size_per_worker: seed vertices per worker per iteration (global batch size // workers).
        num_machines: machines; the graph is partitioned into this many parts.
        gpus_per_machine: workers per machine (worker w runs on machine w // gpus_per_machine).
        partitioner: ``metis`` or ``random``.
        seed: seeds the partition, the shuffles and the sampler.
        num_batches: batches measured per worker.
        seed_split: ``owner`` or ``random`` (:data:`~.batches.SEED_SPLITS`).

    Returns:
        The statistics; ``edge_cut_fraction`` is the share of directed edges whose endpoints have different
        owners, and ``remote_miss_fraction[0]`` (cache fraction 0) is the remote-vertex fraction.

    Raises:
        SpecError: an argument is out of range, or the dataset cannot be loaded or has no training vertices.
    """
    from gnnplan.simulator.workload.proxy_pool import pooled

    args = (tuple(fanouts), batch_size_per_worker, num_machines, gpus_per_machine, partitioner, seed, num_batches,
            seed_split)
    pool = pooled(ref, lambda r: sample_stats(r, *args), ("sample", *args))
    if pool is not None:  # a small card: the medoid of its proxy draws (simulator/workload/proxy_pool.py)
        return pool
    params = sample_params(ref, fanouts, batch_size_per_worker, num_machines, gpus_per_machine, partitioner,
                           seed, num_batches)
    if check_seed_split(seed_split) != "owner":  # owner's entries keep the key they had before it could be chosen
        params["seed_split"] = seed_split
    path = entry_path("sample", params)
    cached = _load_sample(path, params)
    if cached is not None:
        return cached
    graph = load_dataset(ref)
    if len(graph.train_idx) == 0:
        raise SpecError(f"workload.dataset: {graph.name} has no training vertices to sample mini-batches from")
    owner = partition_owners(ref, num_machines, partitioner, seed, graph=graph)
    stats = _measure(graph, owner, params)
    from gnnplan.simulator.workload.cards import card_with_histogram

    card = card_with_histogram(ref)
    if card is not None:  # a card's proxy: per-batch counts at the card's size (proxy.py)
        from gnnplan.simulator.workload.proxy_batch import scale_sample_stats

        stats = scale_sample_stats(stats, card, graph)
    atomic_write_json(path, {"params": params, "stats": asdict(stats)})
    return stats



def check_counts(**counts: int) -> None:
    """Raises SpecError (one line naming the first argument and its value) unless every count is >= 1."""
    for name, value in counts.items():
        if int(value) < 1:
            raise SpecError(f"{name}: must be >= 1, got {value}")


def sample_params(ref: str | GeneratedSpec, fanouts: Sequence[int], batch_size_per_worker: int, num_machines: int,
                  gpus_per_machine: int, partitioner: str, seed: int, num_batches: int) -> dict[str, Any]:
    """Validate the arguments of :func:`sample_stats`; returns them as the cache entry's JSON parameters
    (:mod:`.stats_cache`; hopgnn's micrographs extend the same ones).

    Raises:
        SpecError: a fanout, count or partitioner out of range (one line naming the argument).
    """
    fan = [int(f) for f in fanouts]
    if not fan or any(f == 0 or f < -1 for f in fan):
        raise SpecError(f"training.fanouts: each fanout must be a positive integer or -1, got {fan}")
    check_counts(batch_size_per_worker=batch_size_per_worker, num_machines=num_machines,
                 gpus_per_machine=gpus_per_machine, num_batches=num_batches)
    check_partitioner(partitioner)
    return {"format": SAMPLE_FORMAT, "dataset": dataset_key(ref), "fanouts": fan,
            "batch_size_per_worker": int(batch_size_per_worker), "num_machines": int(num_machines),
            "gpus_per_machine": int(gpus_per_machine), "partitioner": partitioner, "seed": int(seed),
            "num_batches": int(num_batches), "cache_grid": list(CACHE_GRID)}


def _measure(graph: GraphData, owner: np.ndarray, params: dict[str, Any]) -> SampleStats:
    """Sample the batches and average block sizes and the hit / local / remote split of input vertices."""
    gpus, grid = params["gpus_per_machine"], np.asarray(params["cache_grid"])
    batches = worker_batches(graph.train_idx, owner, params["num_machines"], gpus,
                             params["batch_size_per_worker"], params["seed"], params["num_batches"],
                             seed_split=params.get("seed_split", "owner"))
    in_degrees = graph.in_degrees()
    cached = np.zeros((len(grid), graph.num_vertices), dtype=bool)   # (grid points, vertices)
    for i, fraction in enumerate(grid):
        cached[i, cached_vertices(in_degrees, float(fraction))] = True
    sizes = np.zeros((len(params["fanouts"]), 3), dtype=np.float64)  # per layer: src, dst, edges
    counts = np.zeros((3, len(grid)), dtype=np.float64)              # hit, local, remote per grid point
    machines = params["num_machines"]
    received = np.zeros((params["num_batches"], machines, len(grid)))  # per iteration, machine, grid point
    sent = np.zeros_like(received)
    inputs_of = np.full((params["num_batches"], len(batches)), np.nan)  # input vertices per iteration, worker
    edges_of = np.zeros_like(inputs_of)                                # sampled edges per iteration, worker
    own = np.zeros((params["num_batches"], len(batches), 2, len(grid)))  # hit, remote inputs per worker
    full = max(len(b) for worker in batches for b in worker)         # seeds of a full batch
    num_full, position, last = 0, 0, -1
    for worker, block_sizes, inputs in sample_batches(graph, params["fanouts"], batches, params["seed"]):
        position = position + 1 if worker == last else 0             # the worker's iteration
        last = worker
        hit = cached[:, inputs]
        mine = owner[inputs] == worker // gpus
        remote = ~hit & ~mine
        counts += [hit.sum(1), (~hit & mine).sum(1), remote.sum(1)]
        received[position, worker // gpus] += remote.sum(1)
        inputs_of[position, worker] = len(inputs)
        edges_of[position, worker] = block_sizes[:, 2].sum()
        own[position, worker] = [hit.sum(1), remote.sum(1)]
        for i in range(len(grid)):
            sent[position, :, i] += np.bincount(owner[inputs[remote[i]]], minlength=machines)
        if block_sizes[-1, 1] == full:  # block sizes of full batches; the simulator scales a partial last one
            sizes += block_sizes
            num_full += 1
    sizes /= num_full
    access = counts / counts[:, 0].sum()
    busiest = np.maximum(received, sent).max(axis=1).sum(axis=0)    # per grid point
    mean = received.sum(axis=(0, 1)) / machines
    ratio = np.where(mean > 0, busiest / np.where(mean > 0, mean, 1.0), 1.0)
    cut = float(np.mean(owner[graph.src] != owner[graph.dst])) if graph.num_edges else 0.0
    common = ~np.isnan(inputs_of).any(axis=1)                          # iterations every worker has a batch in
    everyone = inputs_of[common]
    slowest = float(everyone.max(axis=1).sum() / everyone.mean(axis=1).sum()) if everyone.size else 1.0
    workers = _per_worker(inputs_of[common], edges_of[common], own[common], sent[common])
    return SampleStats(tuple(params["fanouts"]), params["batch_size_per_worker"], params["num_machines"], gpus,
                       params["partitioner"], tuple(sizes[:, 0].tolist()), tuple(sizes[:, 1].tolist()),
                       tuple(sizes[:, 2].tolist()), tuple(grid.tolist()), tuple(access[0].tolist()),
                       tuple(access[1].tolist()), tuple(access[2].tolist()), cut, tuple(ratio.tolist()), slowest,
                       **workers)


def _per_worker(inputs: np.ndarray, edges: np.ndarray, own: np.ndarray, sent: np.ndarray) -> dict[str, Any]:
    """The per-worker and per-machine fields of :class:`SampleStats` from the iterations every worker has a batch
    in: ``inputs`` and ``edges`` (iterations, W) input vertices and sampled edges, ``own`` (iterations, W, 2,
    grid) each worker's hit and remote inputs, ``sent`` (iterations, M, grid) rows each machine sends. Empty
    fields when there is no such iteration."""
    if not inputs.size or inputs.sum() <= 0:
        return {}
    mean_inputs = inputs.sum() / inputs.shape[1]
    mean_edges = edges.sum() / edges.shape[1]
    per_worker = own.sum(axis=0) / np.maximum(inputs.sum(axis=0), 1.0)[:, None, None]  # (W, 2, grid)
    return {"worker_input_ratio": tuple((inputs.sum(axis=0) / mean_inputs).tolist()),
            "worker_edge_ratio": tuple((edges.sum(axis=0) / mean_edges if mean_edges > 0
                                        else np.ones(edges.shape[1])).tolist()),
            "worker_hit_fraction": tuple(tuple(r) for r in per_worker[:, 0].tolist()),
            "worker_remote_fraction": tuple(tuple(r) for r in per_worker[:, 1].tolist()),
            "machine_sent_ratio": tuple(tuple(r) for r in (sent.sum(axis=0) / mean_inputs).tolist())}


def _load_sample(path: Path, params: dict[str, Any]) -> SampleStats | None:
    """The cached statistics at ``path`` if they were measured with exactly ``params``, else None."""
    data = read_entry(path, params)
    if data is None:
        return None
    try:
        fields: dict[str, Any] = {k: _tuples(v) for k, v in data.items()}
        return SampleStats(**fields)
    except (KeyError, TypeError, AttributeError):
        return None


def _tuples(value: Any) -> Any:
    """JSON lists (nested too) as tuples, as :class:`SampleStats` holds them."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
