"""Training data of one rank: the graph, the seed schedule, and the distributed feature store with its cache.

DistDGL-style layout (Zheng et al., "DistDGL", IA3 2020, §3): every rank holds the whole graph structure (for
sampling); vertex features are partitioned per MACHINE (METIS or random, :mod:`simulator.workload.partition`,
the same owner map the simulator's graph statistics measure) and each machine keeps only its partition's rows.
Every worker also holds a feature cache on its device with the rows of the ``cache_fraction`` highest
in-degree vertices (:func:`~simulator.workload.partition.cached_vertices`; PaGraph, SoCC 2020, §4.2).

Loading features (:mod:`executor.features`): cache hits, local misses from the machine's partition, remote
misses pulled from their owner machine.

Notation: ``M`` machines, ``g`` workers per machine, ``W = M g`` ranks; rank ``r`` runs on machine ``r // g``
with local rank ``r % g``. A remote request for machine ``m`` goes to rank ``m g + local_rank`` (the peer with
the same local rank), so the requests of a machine's workers spread over the owner's workers.

Features of the Planetoid citation graphs (``cora``, ``citeseer``: binary bag-of-words) are row-normalised
to sum 1, as Kipf and Welling did (github.com/tkipf/gcn, utils.py ``preprocess_features``); other datasets
are used as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.simulator.workload.batches import split_epoch_seeds
from gnnplan.simulator.workload.datasets import GraphData

ROW_NORMALISED_DATASETS = ("cora", "citeseer")
"""Dataset presets whose features are row-normalised (Kipf and Welling, ICLR 2017, github.com/tkipf/gcn)."""
SELF_LOOP_ARCHS = ("gcn", "gat")
"""Models trained on the graph with a self-loop on every vertex: GCN's renormalised A + I (Kipf and Welling,
ICLR 2017, eq. 2) and GAT, whose attention includes the vertex itself (Velickovic et al., ICLR 2018, §2.1)."""
PARTITION_SEED = 0
"""Seed of the partitioner: the simulator's graph statistics partition with seed 0 (``stats_seed``), so both
see the same owner map."""


@dataclass(frozen=True)
class Topology:
    """Where this process sits in the cluster (common.md, "Cluster shape").

    Attributes:
        rank: this worker.
        world_size: W.
        gpus_per_machine: g (workers per machine).
        device: where the model and the feature cache live.
    """

    rank: int
    world_size: int
    gpus_per_machine: int
    device: torch.device

    @property
    def num_machines(self) -> int:
        """M = W / g."""
        return self.world_size // self.gpus_per_machine

    @property
    def machine(self) -> int:
        """This worker's machine."""
        return self.rank // self.gpus_per_machine

    @property
    def local_rank(self) -> int:
        """This worker's index on its machine."""
        return self.rank % self.gpus_per_machine


def row_normalised(features: np.ndarray) -> np.ndarray:
    """Rows divided by their sums (rows summing to 0 stay 0).

    Shapes:
        features: (n, d) float32 -> (n, d) float32.
    """
    sums = features.sum(axis=1, keepdims=True, dtype=np.float64)
    inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=sums != 0)
    return (features * inv).astype(np.float32)


def input_features(graph: GraphData, dataset: Any) -> np.ndarray:
    """The feature matrix the models read (row-normalised for :data:`ROW_NORMALISED_DATASETS`)."""
    if isinstance(dataset, str) and dataset in ROW_NORMALISED_DATASETS:
        return row_normalised(graph.features)
    return graph.features


def build_graph(graph: GraphData, arch: str) -> tuple[Any, torch.Tensor | None]:
    """The DGL graph sampled from, and GCN's edge weights: :func:`graph_structure` and, for ``gcn``,
    :func:`gcn_edge_weights` on it.

    Returns:
        (graph, edge weights indexed by edge id or None).
    """
    g = graph_structure(graph, arch)
    return g, gcn_edge_weights(g) if arch == "gcn" else None


def graph_structure(graph: GraphData, arch: str) -> Any:
    """The DGL graph sampled from: ``graph``'s edges; for :data:`SELF_LOOP_ARCHS` existing self-loops are replaced
    by one per vertex."""
    import dgl

    g = dgl.graph((torch.from_numpy(graph.src), torch.from_numpy(graph.dst)), num_nodes=graph.num_vertices)
    return dgl.add_self_loop(dgl.remove_self_loop(g)) if arch in SELF_LOOP_ARCHS else g


def gcn_edge_weights(g: Any) -> torch.Tensor:
    """GCN's weight of every edge u -> v of ``g`` (with its self-loops), by edge id: ``1 / sqrt(d_out(u) d_in(v))``,
    Kipf and Welling's symmetric normalisation ``D^-1/2 (A + I) D^-1/2`` (ICLR 2017, eq. 2) computed with GLOBAL
    degrees, so a block with every neighbour reproduces full-graph GCN exactly.

    Shapes:
        -> (num_edges,) float32.
    """
    src, dst = g.edges()  # degrees counted on the COO, so no CSR is built (g may be shared by the machine)
    n = g.num_nodes()
    d_out = torch.bincount(src, minlength=n).double().clamp(min=1)
    d_in = torch.bincount(dst, minlength=n).double().clamp(min=1)
    return (d_out[src] * d_in[dst]).rsqrt().float()


def iteration_batches(seeds: list[np.ndarray], per_iteration: int) -> tuple[list[list[np.ndarray]], list[int]]:
    """Cut every worker's seeds into iterations of ``per_iteration`` seeds; all workers get the same number of
    iterations, ``ceil(max_w |seeds_w| / per_iteration)``, padded with empty batches.

    Returns:
        (batches[w][i], global batch size of iteration i).
    """
    n = max(1, math.ceil(max(len(s) for s in seeds) / per_iteration))
    batches = [[s[i * per_iteration:(i + 1) * per_iteration] for i in range(n)] for s in seeds]
    sizes = [sum(len(b[i]) for b in batches) for i in range(n)]
    return batches, sizes


def rank_batches(train_idx: np.ndarray, owner: np.ndarray, num_machines: int, gpus_per_machine: int, seed: int,
                 per_iteration: int, rank: int, epoch: int, seed_split: str = "owner") -> list[np.ndarray]:
    """One worker's seed batches of an epoch (:func:`simulator.workload.batches.split_epoch_seeds`, the statistics'
    own split, then :func:`iteration_batches`)."""
    seeds = split_epoch_seeds(train_idx, owner, num_machines, gpus_per_machine, seed, epoch, seed_split)
    return iteration_batches(seeds, per_iteration)[0][rank]


def positions_in_owner(owner: np.ndarray) -> np.ndarray:
    """For every vertex, its row within its owner's partition (owners keep their vertices in id order).

    Shapes:
        owner: (n,) int64 -> (n,) int64.
    """
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner)
    starts = np.cumsum(counts) - counts
    pos = np.empty(len(owner), dtype=np.int64)
    pos[order] = np.arange(len(owner), dtype=np.int64) - starts[owner[order]]
    return pos
