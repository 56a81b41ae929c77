"""NeutronStar's hybrid dependency split (Algorithm 4) with costs taken from the cluster's hardware model.

Mechanism: Wang et al., "NeutronStar: Distributed GNN Training with Hybrid Dependency Management", SIGMOD 2022,
§3 (cost model, Eq. 1-3, Algorithm 4); brief ../shared/papers/neutronstar.md §1.5 and §2.

Notation (paper -> code): D_i^l -> ``WorkerSets.remote`` (the dependencies of every layer: remote in-neighbours
of the owned vertices V_i), R_i^l -> the dependencies cached at layer l (DepCache part: h_u^(l-1) recomputed
from a replicated subtree), C_i^l -> ``WorkerSets.communicated[l-1]`` (DepComm part: received from u's owner),
V_rep -> ``replicated`` (a set of (vertex, layer) pairs), t_r^l(u) -> :meth:`_Greedy.subtree` seconds,
t_c^l(u) -> ``SplitCosts.comm_s[l-1]``, S -> ``budget_bytes``, T_v / T_e -> ``vertex_s`` / ``edge_s``.

Costs (the "FLOP-aware" variant the brief §2 suggests, instead of the paper's probed constants): for layer k,
``vertex_s[k-1]`` and ``edge_s[k-1]`` are the marginal forward + backward seconds of one more destination vertex
and one more edge of that layer's kernels (:func:`simulator.workload.model_cost.model_cost` priced by
:func:`simulator.hardware.formulas.compute_time_s` with the cluster's efficiency fractions, measured on a block of
:data:`_PROBE_VERTICES` vertices and :data:`_PROBE_EDGES` edges so fixed costs such as reading the weights
amortise away). ``comm_s[l-1]`` is the time of moving one row of h^(l-1) forward, and its gradient back for
l >= 2, along the paths the simulator's exchange takes (:func:`comm_per_byte_s`): to a worker of another machine
a device-to-host copy (PCIe) at the sender, the network, a host-to-device copy at the receiver, or the network
alone with GPUDirect RDMA (:func:`~simulator.hardware.pricing.exchange_per_byte_s`); to a worker of the same
machine a peer copy over NVLink, else PCIe (:func:`~simulator.hardware.collectives.peer_bandwidth_bytes_per_s`);
weighted by the share of a worker's peers on each side [inferred: a dependency's owner is any other worker alike].
Until 2026-11-30 one machine's exchanges were priced host-staged, over PCIe and the network they never cross, so a
faster PCIe made the split communicate more rows over an NVLink no faster, and the epoch slower.

Subtree of a dependency u cached at layer l (brief §2, the inferred k-indexing): S^{l-1}(u) = {u} and
S^{k-1}(u) = S^k(u) + in-neighbours of S^k(u); caching u replicates h^(k) of S^k(u) for k = l-1..0, minus owned
vertices and pairs already replicated. Its redundant compute is the sum over the new pairs with k >= 1 of
``vertex_s[k-1] + in_degree * edge_s[k-1]``; raw features (k = 0) cost no compute, so layer 1 caches every
dependency's features (brief §1.5). Its size is ``4 d^(k)`` bytes per new pair plus, for k >= 1, the in-edges
(two int64 ids and a float32 weight each). Layers are processed 1..L; within a layer the dependencies are popped
cheapest first and re-measured (lazy update, Algorithm 4 line 10); once the budget would be exceeded the
current layer's remaining and every later layer's dependencies are communicated (lines 14-15). Layers 1 and 2 are
decided with array operations (:meth:`_Greedy._layer_at_once`: the same pairs and bytes as the pops, tested
against them), deeper layers pop one dependency at a time.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from gnnplan.simulator.hardware.collectives import peer_bandwidth_bytes_per_s
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import FLOAT_BYTES
from gnnplan.simulator.hardware.pricing import exchange_per_byte_s
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.neutronstar.dependencies import InGraph, WorkerSets, by_owner, remote_in_neighbours
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, Block, layer_dims, model_cost
from gnnplan.simulator.workload.spec import ModelSpec

_PROBE_VERTICES = 1.0e6
_PROBE_EDGES = 1.0e7
EDGE_BYTES = 2 * INDEX_BYTES + FLOAT_BYTES
"""Bytes kept per replicated edge: source and destination ids (int64) and a float32 weight."""


@dataclass(frozen=True)
class SplitCosts:
    """Per-layer cost rates of Algorithm 4 (seconds) and sizes (bytes); see the module docstring.

    Attributes:
        vertex_s, edge_s: per layer k = 1..L-1 (index k-1).
        comm_s: per layer l = 1..L (index l-1).
        row_bytes: per k = 0..L-1, bytes of one vertex's h^(k).
    """

    vertex_s: tuple[float, ...]
    edge_s: tuple[float, ...]
    comm_s: tuple[float, ...]
    row_bytes: tuple[float, ...]

    def rounded(self) -> list[list[float]]:
        """The rates to 6 significant digits (a cache key that ignores float noise)."""
        return [[float(f"{v:.6g}") for v in vals] for vals in (self.vertex_s, self.edge_s, self.comm_s,
                                                                 self.row_bytes)]


def layer_widths(model: ModelSpec, feature_dim: int, num_classes: int) -> list[int]:
    """Width of h^(k) for k = 0..L (input features, hidden layers with heads concatenated, classes)."""
    dims = layer_dims(model, feature_dim, num_classes)
    return [feature_dim] + [d.out_total for d in dims]


def _layer_s(cluster: ClusterSpec, model: ModelSpec, feature_dim: int, num_classes: int, layer: int,
                   block: Block) -> float:
    """Forward + backward seconds of layer index ``layer`` (0-based) on ``block``."""
    empty = Block(0.0, 0.0, 0.0)
    blocks = [block if i == layer else empty for i in range(model.num_layers)]
    cost = model_cost(model, feature_dim, num_classes, blocks)
    tag = f"{model.arch}{layer}."
    eff = cluster.efficiency
    fwd = compute_time_s([k for k in cost.forward if k.name.startswith(tag)], cluster.gpu, eff.forward_fraction)
    bwd = compute_time_s([k for k in cost.backward if k.name.startswith(tag)], cluster.gpu, eff.backward_fraction)
    return fwd + bwd


def comm_per_byte_s(cluster: ClusterSpec) -> float:
    """Marginal seconds per byte of a communicated row (module docstring): the mean over a worker's peers of the
    path to each, another machine's (:func:`~simulator.hardware.pricing.exchange_per_byte_s`) or its own machine's
    (one peer copy, :func:`~simulator.hardware.collectives.peer_bandwidth_bytes_per_s`); 0 with one worker."""
    workers, g = cluster.num_gpus, cluster.gpus_per_machine
    if workers < 2:
        return 0.0
    inside = (g - 1) / (workers - 1)
    return ((1.0 - inside) * exchange_per_byte_s(cluster) if workers > g else 0.0) + (
        inside / peer_bandwidth_bytes_per_s(cluster) if g > 1 else 0.0)


def split_costs(cluster: ClusterSpec, model: ModelSpec, feature_dim: int, num_classes: int) -> SplitCosts:
    """Algorithm 4's rates from the cluster's hardware model (module docstring)."""
    widths = layer_widths(model, feature_dim, num_classes)
    n, e = _PROBE_VERTICES, _PROBE_EDGES
    vertex, edge = [], []
    for layer in range(model.num_layers - 1):  # replicas are computed at layers 1..L-1 (index 0..L-2)
        base = _layer_s(cluster, model, feature_dim, num_classes, layer, Block(n, n, 0.0))
        more = _layer_s(cluster, model, feature_dim, num_classes, layer, Block(n, n, e))
        vertex.append(base / n)
        edge.append(max(more - base, 0.0) / e)
    per_byte = comm_per_byte_s(cluster)
    comm = [FLOAT_BYTES * widths[k] * per_byte * (1 if k == 0 else 2) for k in range(model.num_layers)]
    rows = [float(FLOAT_BYTES * widths[k]) for k in range(model.num_layers)]
    return SplitCosts(tuple(vertex), tuple(edge), tuple(comm), tuple(rows))


class _Greedy:
    """Algorithm 4 for one worker (module docstring)."""

    def __init__(self, in_graph: InGraph, owner: np.ndarray, rank: int, num_layers: int, costs: SplitCosts,
                 budget_bytes: float | None) -> None:
        self.g, self.owner, self.costs = in_graph, owner, costs
        self.local = owner == rank
        self.deg = in_graph.in_degrees
        self.rep = [np.zeros(in_graph.num_vertices, dtype=bool) for _ in range(num_layers)]
        self.budget = float("inf") if budget_bytes is None else float(budget_bytes)
        self.used = 0.0

    def subtree(self, u: int, layer: int, rows: bool = True) -> tuple[float, float, list[tuple[int, np.ndarray]]]:
        """(seconds t_r, bytes, new (k, vertices) pairs) of caching ``u`` for ``layer``, excluding V_rep. Without
        ``rows`` the raw-feature level (k = 0) is left out: t_r is the same (it prices the replicas' computation,
        k >= 1), the bytes and pairs lack the raw rows (the widest level, up to layer - 1 hops out)."""
        level = np.array([u], dtype=np.int64)
        seconds = size = 0.0
        pairs = []
        for k in range(layer - 1, -1 if rows else 0, -1):
            if k < layer - 1:
                level = np.unique(np.concatenate([level, self.g.in_neighbours_of(level)]))
            new = level[~self.local[level] & ~self.rep[k][level]]
            if len(new):
                pairs.append((k, new))
                size += len(new) * self.costs.row_bytes[k]
                if k >= 1:
                    edges = float(self.deg[new].sum())
                    seconds += len(new) * self.costs.vertex_s[k - 1] + edges * self.costs.edge_s[k - 1]
                    size += edges * EDGE_BYTES
        return seconds, size, pairs

    def run(self, deps: np.ndarray, vectorised: bool = True) -> None:
        """Decide every layer; marks the replicated pairs in ``self.rep``. Layers 1 and 2 are decided at once
        (:meth:`_layer_at_once`, the same result) unless ``vectorised`` is False; deeper layers pop one
        dependency at a time (:meth:`_layer_by_pops`)."""
        for layer in range(1, len(self.rep) + 1):
            decide = self._layer_at_once if vectorised and layer <= 2 else self._layer_by_pops
            if not decide(np.asarray(deps, dtype=np.int64), layer):
                return  # the budget ran out: this layer's rest and every later layer are communicated

    def _layer_by_pops(self, deps: np.ndarray, layer: int) -> bool:
        """Algorithm 4's lines 5-15 for one layer, one pop at a time; False when the budget ran out."""
        t_c = self.costs.comm_s[layer - 1]
        heap = [(self.subtree(int(u), layer, rows=False)[0], int(u)) for u in deps]
        heapq.heapify(heap)
        while heap:
            _, u = heapq.heappop(heap)
            if self.subtree(u, layer, rows=False)[0] >= t_c:  # t_r first: the raw rows only for a subtree cached
                continue
            _, size, pairs = self.subtree(u, layer)
            if self.used + size > self.budget:
                return False
            self.used += size
            for k, vertices in pairs:
                self.rep[k][vertices] = True
        return True

    def _layer_at_once(self, deps: np.ndarray, layer: int) -> bool:
        """:meth:`_layer_by_pops` for layer 1 or 2, vectorised with the same result (the same pairs replicated,
        the same bytes used, bit for bit). At these layers a dependency's subtree has one vertex above the raw
        features (u itself at k = l-1 = 1, none at l = 1), which no other dependency's subtree contains, so its
        seconds t_r do not change while the layer is decided: the pops come in the order of the initial heap
        ((t_r, u) ascending), those with t_r < t_c are cached in that order until the budget would be exceeded,
        and only their sizes interact, through raw-feature rows (k = 0) two subtrees share, which count for the
        first cached subtree that reaches them. False when the budget ran out."""
        g, c, local = self.g, self.costs, self.local
        deps = deps[~local[deps]]
        zero = np.zeros(len(deps))
        if layer == 2:
            new_top = ~self.rep[1][deps]
            edges = self.deg[deps].astype(np.float64)
            seconds = 0.0 + np.where(new_top, 1 * c.vertex_s[0] + edges * c.edge_s[0], zero)
            top_size = np.where(new_top, (0.0 + 1 * c.row_bytes[1]) + edges * EDGE_BYTES, zero)
        else:
            seconds, top_size = zero, zero
        order = np.lexsort((deps, seconds))
        take = order[seconds[order] < c.comm_s[layer - 1]]
        cand = deps[take]
        # raw-feature rows of each candidate's subtree, listed in pop order: u, then (layer 2) its in-neighbours
        pos, rows = np.arange(len(cand)), cand
        if layer == 2:
            lo, deg = g.indptr[cand], self.deg[cand]
            starts = np.repeat(np.cumsum(deg) - deg, deg)
            nbrs = g.indices[np.repeat(lo, deg) + np.arange(int(deg.sum())) - starts]
            pos = np.concatenate([pos, np.repeat(pos, deg)])
            rows = np.concatenate([cand, nbrs])
            by_pos = np.argsort(pos, kind="stable")
            pos, rows = pos[by_pos], rows[by_pos]
        fresh = ~local[rows] & ~self.rep[0][rows]
        pos, rows = pos[fresh], rows[fresh]
        _, first = np.unique(rows, return_index=True)
        new_rows = np.bincount(pos[first], minlength=len(cand))
        sizes = np.where(new_top[take], top_size[take], 0.0) if layer == 2 else np.zeros(len(cand))
        sizes = np.where(new_rows > 0, sizes + new_rows * c.row_bytes[0], sizes)
        used = np.cumsum(np.concatenate([[self.used], sizes]))  # sequential sums, as used += size
        over = np.flatnonzero(used[1:] > self.budget)
        stop = int(over[0]) if len(over) else len(cand)
        self.used = float(used[stop])
        if layer == 2:
            self.rep[1][cand[:stop][new_top[take][:stop]]] = True
        self.rep[0][rows[pos < stop]] = True
        return stop == len(cand)


def hybrid_sets(in_graph: InGraph, owner: np.ndarray, rank: int, num_layers: int, costs: SplitCosts,
                budget_bytes: float | None) -> WorkerSets:
    """Algorithm 4's split for worker ``rank`` (module docstring).

    A dependency u counts as cached at layer l when h_u^(l-1) ends up replicated, also when a later layer's
    subtree replicated it after layer l had decided to communicate it (it is then available locally).

    Returns:
        The worker's sets; ``communicated[l-1]`` = remote in-neighbours minus ``replicated[l-1]``.
    """
    owned, remote = remote_in_neighbours(in_graph, owner, rank)
    greedy = _Greedy(in_graph, owner, rank, num_layers, costs, budget_bytes)
    greedy.run(remote)
    reps = [np.flatnonzero(mask) for mask in greedy.rep]
    comm = [by_owner(remote[~greedy.rep[layer - 1][remote]], owner) for layer in range(1, num_layers + 1)]
    return WorkerSets(owned, remote, reps, comm)


def cache_bytes(in_graph: InGraph, sets: WorkerSets, costs: SplitCosts) -> float:
    """Bytes of one worker's cached dependencies: replicated rows plus the in-edges of replicas (k >= 1)."""
    deg = in_graph.in_degrees
    total = 0.0
    for k, reps in enumerate(sets.replicated):
        total += len(reps) * costs.row_bytes[k]
        if k >= 1:
            total += float(deg[reps].sum()) * EDGE_BYTES
    return total
