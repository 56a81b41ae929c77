"""Sizes of one block of layer-wise inference (evaluation), measured on the graph the executor evaluates, and
cached with the other graph statistics (:func:`inference_stats`).

The mini-batch strategies' executors evaluate as DGL's and DistDGL's GraphSAGE examples do (``SAGE.inference``,
examples/pytorch/graphsage; executor/evaluate.py): layer by layer over every vertex, each rank computing its
vertices' rows (its machine's vertices in id order, split evenly among the machine's workers:
:func:`inference_owners`) in chunks of :data:`CHUNK_VERTICES` destination vertices, each chunk a block of all
their in-neighbours. A chunk's block decides the evaluation's memory (its input rows, its structure), so the
statistics are those of the rank whose vertices have the most in-edges (a vertex-balanced partition can put most
of the edges in one part: rmat100k on 2 METIS parts, 2.75 of its 2.86 M edges end in part 0, 2026-11-28), as
means over its chunks (the last one, partial, only when it is the rank's only chunk). With them, the busiest
machine's share of the in-edges: what a machine keeps of a partitioned structure (dp's ``graph_structure``).

A dataset card's statistics are measured on its proxy (:mod:`.proxy`) with chunks holding the same fraction of
the vertices as at the card's size, and multiplied by the card's vertices over the proxy's [inferred scale rule:
for destination set S of a fraction p of the vertices, ``|S ∪ in-neighbours(S)| / N = p + (1 - p) E[1 - (1 -
p)^d_out]`` for random S (configuration model), a function of p and the degree distribution only, which the
proxy matches; the edges of S are p times the edges]. Checked on rmat100k (random chunks of 16384: 54.1 k by the
formula against 54.0 k measured, mean of 3, 2026-11-28), and by benchmarks/bench_proxy.py on R-MAT 2M from its
10^5-vertex proxy: sources and edges per chunk within 6% (the edge share is a fraction, kept as measured).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.workload import graphstats, owners
from gnnplan.simulator.workload.cards import card_name, load_card
from gnnplan.simulator.workload.datasets import dataset_key, load_dataset
from gnnplan.simulator.workload.proxy_pool import pooled
from gnnplan.simulator.workload.spec import GeneratedSpec
from gnnplan.simulator.workload.stats_cache import entry_path, read_entry

__all__ = ["CHUNK_VERTICES", "INFERENCE_FORMAT", "InferenceStats", "inference_at_size", "inference_owners",
           "inference_stats", "measure_inference", "proxy_chunk_vertices", "pulled_fraction"]

CHUNK_VERTICES = 16384
"""Destination vertices per inference block (executor/evaluate.py; bounds the memory of one block's input rows)."""


@dataclass(frozen=True)
class InferenceStats:
    """One inference block of the rank whose vertices have the most in-edges (module docstring).

    Attributes:
        rank_vertices: the vertices that rank computes (rows it holds per layer).
        dst_vertices: destination vertices of its mean chunk.
        src_vertices: source vertices of its mean chunk (the destinations and all their in-neighbours).
        edges: in-edges of its mean chunk.
        machine_edge_fraction: the largest share of the graph's edges whose destinations one machine owns: the
            part of the structure that machine keeps when it keeps only its vertices' in-edges (a partitioned
            structure, DistDGL; rmat100k on 2 METIS parts: 0.96, 2026-11-28).
        remote_fraction: of its chunks' sources, the share another machine owns (pulled over the network: layer
            0's features, and later layers' rows).
        other_rank_fraction: of its chunks' sources, the share another rank computes (pulled from it in layers
            after the first).
    """

    rank_vertices: float
    dst_vertices: float
    src_vertices: float
    edges: float
    machine_edge_fraction: float
    remote_fraction: float = 0.0
    other_rank_fraction: float = 0.0

    def scaled(self, factor: float) -> InferenceStats:
        """Every count multiplied by ``factor`` (a proxy's statistics at its card's size; the fractions kept)."""
        return InferenceStats(self.rank_vertices * factor, self.dst_vertices * factor, self.src_vertices * factor,
                              self.edges * factor, self.machine_edge_fraction, self.remote_fraction,
                              self.other_rank_fraction)


def inference_owners(owner: np.ndarray, num_machines: int, gpus_per_machine: int) -> np.ndarray:
    """The rank computing each vertex: machine m's vertices (in id order) split evenly among its workers
    (``numpy.array_split``: the first ranks get one more when it does not divide).

    Shapes:
        owner: (n,) int64 machines -> (n,) int64 ranks.
    """
    g = gpus_per_machine
    out = owner * g
    if g > 1:
        for machine in range(num_machines):
            for local, part in enumerate(np.array_split(np.flatnonzero(owner == machine), g)):
                out[part] = machine * g + local
    return out


def measure_inference(src: np.ndarray, dst: np.ndarray, owner: np.ndarray, num_machines: int,
                      gpus_per_machine: int, chunk_vertices: int = CHUNK_VERTICES) -> InferenceStats:
    """The inference block statistics of a graph partitioned by ``owner`` (module docstring).

    Args:
        src, dst: (E,) int64 directed edges src -> dst.
        owner: (n,) int64 owner machine of every vertex.
        num_machines, gpus_per_machine: the cluster shape.
        chunk_vertices: destination vertices per chunk (>= 1).

    Raises:
        ValueError: chunk_vertices < 1 or an empty graph.
    """
    if chunk_vertices < 1:
        raise ValueError(f"chunk_vertices must be >= 1, got {chunk_vertices}")
    n = len(owner)
    if n == 0:
        raise ValueError("measure_inference: the graph has no vertices")
    rank_of = inference_owners(np.asarray(owner, dtype=np.int64), num_machines, gpus_per_machine)
    world = num_machines * gpus_per_machine
    in_edges = np.bincount(rank_of[dst], minlength=world)
    sizes = np.bincount(rank_of, minlength=world)
    rank = int(np.lexsort((sizes, in_edges))[-1])           # most in-edges, then most vertices
    mine = np.flatnonzero(rank_of == rank)
    chunk_of = np.full(n, -1, dtype=np.int64)
    chunk_of[mine] = np.arange(len(mine)) // chunk_vertices
    full = max(1, len(mine) // chunk_vertices)              # chunks averaged over (the only one when partial)
    into = chunk_of[dst]
    keep = (into >= 0) & (into < full)
    averaged = mine[:full * chunk_vertices]
    pairs = np.concatenate([into[keep] * n + src[keep], np.arange(len(averaged)) // chunk_vertices * n + averaged])
    distinct = np.unique(pairs)
    src_per_chunk = np.bincount(distinct // n, minlength=full)
    dst_vertices = min(len(mine), chunk_vertices)
    per_machine = np.bincount(owner[dst], minlength=num_machines)
    share = float(per_machine.max() / len(dst)) if len(dst) else 0.0
    sources = distinct % n
    remote = float(np.mean(owner[sources] != rank // gpus_per_machine))
    other = float(np.mean(rank_of[sources] != rank))
    return InferenceStats(float(len(mine)), float(dst_vertices), float(src_per_chunk.mean()),
                          float(keep.sum() / full), share, remote, other)


def pulled_fraction(stats: InferenceStats, layer: int, num_machines: int, num_workers: int) -> float | None:
    """Of layer ``layer``'s block inputs, the share pulled over the network (executor/evaluate.py): layer 0's
    feature rows of the sources other machines own, when there are several machines; a later layer's rows of the
    sources other ranks computed, when there are several ranks. None when the layer pulls nothing (its calls are
    not made)."""
    if layer == 0:
        return stats.remote_fraction if num_machines > 1 else None
    return stats.other_rank_fraction if num_workers > 1 else None


def inference_at_size(src: np.ndarray, dst: np.ndarray, owner: np.ndarray, num_machines: int,
                      gpus_per_machine: int, card_vertices: int | None = None) -> InferenceStats:
    """:func:`measure_inference` of a graph; with ``card_vertices`` the graph is a card's proxy and the result is
    at the card's size: measured with chunks of the card's chunk fraction (:func:`proxy_chunk_vertices`) and
    scaled by the card's vertices over the proxy's (module docstring).

    Shapes:
        src, dst: (E,) int64 edges src -> dst; owner: (n,) int64 owner machine of every vertex.

    Raises:
        ValueError: an empty graph (:func:`measure_inference`).
    """
    if card_vertices is None:
        return measure_inference(src, dst, owner, num_machines, gpus_per_machine)
    n = len(owner)
    chunk = proxy_chunk_vertices(card_vertices, n)
    return measure_inference(src, dst, owner, num_machines, gpus_per_machine, chunk).scaled(card_vertices / n)


def proxy_chunk_vertices(card_vertices: int, proxy_vertices: int, chunk_vertices: int = CHUNK_VERTICES) -> int:
    """The chunk (destination vertices) that holds on the proxy the fraction of the vertices a chunk holds at the
    card's size, at least 1: the module docstring's fixed-chunk-fraction rule. A rank then splits into as many
    chunks on the proxy as at the card's size, one where its share is smaller than a chunk. (Until 2026-11-29 the
    chunk was at most a rank's mean share, ``ceil(card_vertices / ranks)``, scaled: the busiest rank, which
    :func:`measure_inference` measures and a METIS partition makes larger than the mean, then took two chunks on
    the proxy where it takes one at the card's size, and the evaluation was priced about twice: card:cora on 16
    machines 3.03 ms against 1.40 ms from the real graph, benchmarks/bench_card_epoch.py.)

    Args:
        card_vertices, proxy_vertices: the card's and its proxy's vertex counts (>= 1).
        chunk_vertices: the executor's chunk at the card's size.
    """
    return max(1, round(chunk_vertices * proxy_vertices / card_vertices))


INFERENCE_FORMAT = 3
"""Version of :func:`inference_stats`' measurement (2: ``machine_edge_fraction``; 3: ``remote_fraction``,
``other_rank_fraction``); part of its cache key."""


def inference_stats(ref: str | GeneratedSpec, num_machines: int, gpus_per_machine: int, partitioner: str,
                    seed: int = 0) -> InferenceStats:
    """One block of the evaluation's layer-wise inference on the rank with the most in-edges
    (module docstring), read from the statistics cache (:mod:`.stats_cache`) or measured once and cached.

    A dataset card's is measured on its proxy at the card's chunk fraction and scaled to the card's size (the
    module's extensive rule at a fixed chunk fraction). A warm call reads one JSON file.

    Args:
        ref: ``workload.dataset``.
        num_machines, gpus_per_machine: the cluster shape (the graph is partitioned over the machines).
        partitioner: ``metis`` or ``random`` (:func:`.owners.partition_owners`).
        seed: partitioner seed.

    Raises:
        SpecError: a count or partitioner out of range, or the dataset cannot be loaded.
        ValueError: the graph has no vertices (:func:`measure_inference`).
    """
    owners.check_partitioner(partitioner)
    graphstats.check_counts(num_machines=num_machines, gpus_per_machine=gpus_per_machine)
    args = (num_machines, gpus_per_machine, partitioner, seed)
    pool = pooled(ref, lambda r: inference_stats(r, *args), ("inference", *args))
    if pool is not None:  # a small card: the medoid of its proxy draws (simulator/workload/proxy_pool.py)
        return pool
    params = {"format": INFERENCE_FORMAT, "dataset": dataset_key(ref), "num_machines": int(num_machines),
              "gpus_per_machine": int(gpus_per_machine), "partitioner": partitioner, "seed": int(seed),
              "chunk_vertices": CHUNK_VERTICES}
    card = card_name(ref)
    if card is not None:  # the chunk the proxy is measured with (its rule changed on 2026-11-29)
        from gnnplan.simulator.workload.proxy import proxy_scale

        params["proxy_chunk_vertices"] = proxy_chunk_vertices(load_card(card).num_vertices.value,
                                                              proxy_scale(card).proxy_vertices)
    path = entry_path("inference", params)
    data = read_entry(path, params)
    if data is not None:
        try:
            return InferenceStats(**data)
        except TypeError:
            pass  # a damaged entry is measured again below
    graph = load_dataset(ref)
    owner = owners.partition_owners(ref, num_machines, partitioner, seed, graph=graph)
    found = inference_at_size(graph.src, graph.dst, owner, num_machines, gpus_per_machine,
                              None if card is None else load_card(card).num_vertices.value)
    atomic_write_json(path, {"params": params, "stats": asdict(found)})
    return found
