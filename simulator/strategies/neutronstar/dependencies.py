"""Full-graph dependency structure: who owns which vertex, which remote in-neighbours every worker depends on,
and the L-hop closures a worker would replicate to compute its vertices locally.

Full-graph training computes layer l for every vertex from layer l-1 of its in-neighbours. Worker i owns the
vertices ``V_i`` and all their in-edges (an edge-cut by destination); its *remote in-neighbours* are the
in-neighbours of ``V_i`` owned by other workers. These sets are measured on the graph the executor trains on:
the dataset's edges, with every self-loop replaced by one per vertex for the architectures in
:data:`SELF_LOOP_ARCHS` (the executor's :func:`executor.data.build_graph` rule).

Partitioners (all workers see the same owner map; the executor calls :func:`owners` too):

* ``chunk``: contiguous vertex-id ranges chosen greedily so each range's sum of ``in_degree + alpha`` is about
  ``(|E| + alpha |V|) / m``, with ``alpha = 12 (m + 1)``. Source: NeutronStar (Wang et al., SIGMOD 2022, §5.7,
  "chunk-based" partitioning); the alpha value is the public NeutronStarLite code's (Gemini, OSDI 2016, §4.1
  uses 8 (m - 1)), as recorded in the mechanism brief ../shared/papers/neutronstar.md §1.2.
* ``metis``: :func:`simulator.workload.owners.partition_owners` (pymetis, cached, seed 0).

For a dataset card the counts are measured on its proxy and scaled to the card's size (:func:`cached_counts`,
:mod:`simulator.workload.proxy`). Per-worker counts for a dependency split (:class:`WorkerCounts`) are cached on
disk under
:func:`simulator.paths.cache_dir` ``/stats/<dataset_key>/deps-<digest>.json``, keyed by every parameter,
written atomically; a damaged entry is measured again.

Notation: ``replicated[k]`` = remote vertices whose layer-k representation ``h^(k)`` worker i computes (k >= 1)
or holds (k = 0, raw features) locally; ``communicated[l-1]`` = remote in-neighbours whose ``h^(l-1)`` it
receives from their owner at layer l (l = 1..L).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.workload.datasets import GraphData, dataset_key
from gnnplan.simulator.workload.spec import SELF_LOOP_ARCHS as SELF_LOOP_ARCHS
from gnnplan.simulator.workload.spec import GeneratedSpec
from gnnplan.simulator.workload.stats_cache import entry_path, read_entry

DEPS_FORMAT = 1
"""Version of the measurement; part of the cache key."""
PARTITIONERS = ("chunk", "metis")


@dataclass(frozen=True)
class InGraph:
    """In-neighbour CSR of the training graph.

    Shapes:
        indptr: (n + 1,) int64; the in-edges of v are positions ``indptr[v]:indptr[v+1]``.
        indices: (E,) int64 source vertex of each in-edge, grouped by destination.
        edge_dst: (E,) int64 destination of each in-edge (aligned with ``indices``).
    """

    num_vertices: int
    indptr: np.ndarray
    indices: np.ndarray
    edge_dst: np.ndarray

    @property
    def in_degrees(self) -> np.ndarray:
        """(n,) int64 in-degree of every vertex."""
        return np.diff(self.indptr)

    def expand(self, mask: np.ndarray) -> np.ndarray:
        """``mask`` plus every in-neighbour of a vertex in ``mask`` (one hop of the closure).

        Shapes:
            mask: (n,) bool -> (n,) bool.
        """
        out = mask.copy()
        out[self.indices[mask[self.edge_dst]]] = True
        return out

    def in_neighbours_of(self, vertices: np.ndarray) -> np.ndarray:
        """The in-neighbours of every vertex of ``vertices``, concatenated in their order (repeats kept).

        Shapes:
            vertices: (k,) int64 -> (sum of their in-degrees,) int64.
        """
        lo, hi = self.indptr[vertices], self.indptr[vertices + 1]
        deg = hi - lo
        starts = np.repeat(np.cumsum(deg) - deg, deg)
        return self.indices[np.repeat(lo, deg) + np.arange(int(deg.sum())) - starts]

    def in_neighbours(self, v: int) -> np.ndarray:
        """(deg,) int64 in-neighbours of one vertex."""
        return self.indices[self.indptr[v]:self.indptr[v + 1]]


def training_graph(graph: GraphData, arch: str) -> InGraph:
    """The in-neighbour CSR of the graph the executor trains ``arch`` on (self-loop rule in the module docstring)."""
    src, dst = graph.src, graph.dst
    if arch in SELF_LOOP_ARCHS:
        keep = src != dst
        loops = np.arange(graph.num_vertices, dtype=np.int64)
        src, dst = np.concatenate([src[keep], loops]), np.concatenate([dst[keep], loops])
    order = np.lexsort((src, dst))
    counts = np.bincount(dst, minlength=graph.num_vertices)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return InGraph(graph.num_vertices, indptr, src[order].astype(np.int64), dst[order].astype(np.int64))


def chunk_partition(in_degrees: np.ndarray, num_parts: int, alpha: float | None = None) -> np.ndarray:
    """Contiguous vertex-id ranges balanced on ``in_degree + alpha`` (module docstring).

    Args:
        in_degrees: (n,) int64.
        num_parts: m >= 1.
        alpha: per-vertex weight; None = ``12 (m + 1)`` (NeutronStarLite).

    Returns:
        (n,) int64 owner of every vertex, non-decreasing in the vertex id.
    """
    n = len(in_degrees)
    a = 12.0 * (num_parts + 1) if alpha is None else alpha
    cum = np.cumsum(np.asarray(in_degrees, dtype=np.float64) + a)
    total = cum[-1] if n else 0.0
    # vertex v goes to the part whose share of the total its prefix (before v) falls into
    before = cum - (np.asarray(in_degrees, dtype=np.float64) + a)
    return np.minimum((before * num_parts / max(total, 1e-300)).astype(np.int64), num_parts - 1)


def owners(ref: str | GeneratedSpec, graph: GraphData, in_graph: InGraph, num_parts: int,
           partitioner: str) -> np.ndarray:
    """The owner worker of every vertex.

    Raises:
        SpecError: unknown partitioner.
    """
    if partitioner == "chunk":
        return chunk_partition(in_graph.in_degrees, num_parts)
    if partitioner == "metis":
        from gnnplan.simulator.workload.owners import partition_owners

        return partition_owners(ref, num_parts, "metis", 0, graph=graph)
    raise SpecError(f"partitioner: {partitioner!r} is not one of {', '.join(PARTITIONERS)}")


@dataclass
class WorkerSets:
    """Vertex sets of one worker under a dependency split (sorted int64 arrays).

    Attributes:
        owned: V_i.
        remote: remote in-neighbours of V_i (the dependencies of every layer).
        replicated: per k = 0..L-1, remote vertices whose h^(k) is computed (k >= 1) or held (k = 0) locally.
        communicated: per layer l = 1..L (index l-1), remote in-neighbours whose h^(l-1) are received; sorted by
            (owner, id).
    """

    owned: np.ndarray
    remote: np.ndarray
    replicated: list[np.ndarray]
    communicated: list[np.ndarray]


def remote_in_neighbours(in_graph: InGraph, owner: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(V_i, remote in-neighbours of V_i), both sorted."""
    mine = owner == rank
    reach = in_graph.expand(mine)
    return np.flatnonzero(mine), np.flatnonzero(reach & ~mine)


def by_owner(vertices: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """``vertices`` sorted by (owner, id)."""
    return vertices[np.lexsort((vertices, owner[vertices]))]


def depcomm_sets(in_graph: InGraph, owner: np.ndarray, rank: int, num_layers: int) -> WorkerSets:
    """Nothing replicated: every remote in-neighbour is received at every layer (raw features included)."""
    owned, remote = remote_in_neighbours(in_graph, owner, rank)
    empty = np.empty(0, dtype=np.int64)
    comm = by_owner(remote, owner)
    return WorkerSets(owned, remote, [empty] * num_layers, [comm] * num_layers)


def depcache_sets(in_graph: InGraph, owner: np.ndarray, rank: int, num_layers: int) -> WorkerSets:
    """The whole L-hop in-neighbourhood replicated: ``replicated[k]`` = (L-k)-hop closure of V_i minus V_i."""
    mine = owner == rank
    owned, remote = remote_in_neighbours(in_graph, owner, rank)
    reps: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * num_layers
    closure = mine
    for k in range(num_layers - 1, -1, -1):
        closure = in_graph.expand(closure)
        reps[k] = np.flatnonzero(closure & ~mine)
    empty = np.empty(0, dtype=np.int64)
    return WorkerSets(owned, remote, reps, [empty] * num_layers)


@dataclass(frozen=True)
class WorkerCounts:
    """Sizes of one worker's sets (what the simulator prices).

    Attributes:
        num_owned, num_owned_edges: |V_i| and its in-edges.
        num_remote: remote in-neighbours of V_i.
        num_replicated: per k = 0..L-1, |replicated[k]|.
        replica_edges: per layer l = 1..L, in-edges of the vertices computed as replicas at layer l (0 at L).
        replica_src: per layer l = 1..L, distinct inputs of those replicas (themselves included).
        received: per layer l = 1..L, per owner j, rows of h^(l-1) received from j.
        num_cached: per layer l = 1..L, remote in-neighbours whose h^(l-1) is local (not received).
    """

    num_owned: int
    num_owned_edges: int
    num_remote: int
    num_replicated: tuple[int, ...]
    replica_edges: tuple[int, ...]
    replica_src: tuple[int, ...]
    received: tuple[tuple[int, ...], ...]
    num_cached: tuple[int, ...]


def worker_counts(in_graph: InGraph, owner: np.ndarray, sets: WorkerSets, num_parts: int) -> WorkerCounts:
    """Count one worker's sets (:class:`WorkerCounts`)."""
    num_layers = len(sets.communicated)
    deg = in_graph.in_degrees
    edges, srcs = [], []
    for layer in range(1, num_layers + 1):
        reps = sets.replicated[layer] if layer < num_layers else np.empty(0, dtype=np.int64)
        mask = np.zeros(in_graph.num_vertices, dtype=bool)
        mask[reps] = True
        edges.append(int(deg[reps].sum()))
        srcs.append(int(in_graph.expand(mask).sum()) if len(reps) else 0)
    received = tuple(tuple(int(c) for c in np.bincount(owner[comm], minlength=num_parts)) for comm in sets.communicated)
    cached = tuple(len(sets.remote) - len(c) for c in sets.communicated)
    return WorkerCounts(len(sets.owned), int(deg[sets.owned].sum()), len(sets.remote),
                        tuple(len(r) for r in sets.replicated), tuple(edges), tuple(srcs), received, cached)


def cached_counts(ref: str | GeneratedSpec, params: dict[str, Any],
                  build: Callable[[], Sequence[WorkerCounts]]) -> list[WorkerCounts]:
    """Every worker's counts for ``params``, read from the cache or built with ``build()`` and cached.

    Args:
        ref: the dataset (names the cache folder).
        params: JSON-able description of everything the counts depend on (stored and checked on read).
        build: measures the counts on a cache miss.
    """
    full = {"format": DEPS_FORMAT, "dataset": dataset_key(ref), **params}
    path = entry_path("deps", full)
    workers = read_entry(path, full, "workers", list)
    if workers is not None:
        try:
            return _for_card(ref, [_counts_from_json(c) for c in workers])
        except (KeyError, TypeError):
            pass  # damaged: measure below
    counts = list(build())
    atomic_write_json(path, {"params": full, "workers": [asdict(c) for c in counts]})
    return _for_card(ref, counts)


CARD_VERTEX_FIELDS = ("num_owned", "num_remote", "num_replicated", "replica_src", "received", "num_cached")
CARD_EDGE_FIELDS = ("num_owned_edges", "replica_edges")
""":class:`WorkerCounts` fields scaled from a card's proxy to the card (:func:`simulator.workload.proxy.for_card`):
vertex counts and edge counts (extensive rule)."""


def _for_card(ref: str | GeneratedSpec, counts: list[WorkerCounts]) -> list[WorkerCounts]:
    """``counts`` measured on a card's proxy, scaled to the card; unchanged for any other dataset."""
    from gnnplan.simulator.workload.proxy import for_card

    return [for_card(ref, c, CARD_VERTEX_FIELDS, CARD_EDGE_FIELDS) for c in counts]


def _counts_from_json(data: dict[str, Any]) -> WorkerCounts:
    def tup(v: Any) -> Any:
        return tuple(tup(x) for x in v) if isinstance(v, list) else v

    return WorkerCounts(**{k: tup(v) for k, v in data.items()})
