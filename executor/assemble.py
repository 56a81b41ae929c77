"""Assemble what one rank holds for training: graph structure, labels, splits, owners and the feature store.

The graph structure, GCN's edge weights, the owner map, the labels, the machine's feature partition and the per-vertex
maps derived from them (the feature store's, the evaluator's) are built once per machine and shared by its workers
(:mod:`executor.shared`), as the memory models charge them.

Rank 0 loads (and on a cold cache parses, generates or partitions) first while the others wait at a barrier,
then the others read the cached dataset and partition, so a cold start does not run METIS once per process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import PARTITION_SEED, Topology, gcn_edge_weights, graph_structure, input_features
from gnnplan.executor.features import FeatureStore, machine_rows
from gnnplan.executor.shared import SharedObjects
from gnnplan.simulator.workload.datasets import GraphData, load_dataset
from gnnplan.simulator.workload.owners import partition_owners
from gnnplan.simulator.workload.partition import cached_vertices
from gnnplan.simulator.workload.spec import WorkloadSpec

T = TypeVar("T")


@dataclass
class TrainingData:
    """A rank's data.

    Attributes:
        name: dataset name.
        graph: the DGL graph sampled from (with self-loops for gcn/gat).
        edge_weight: GCN's per-edge weights (None for other models).
        labels: (n,) int64 on the CPU.
        train_idx, val_idx, test_idx: vertex ids.
        owner: (n,) int64 owner machine of every vertex.
        store: this worker's feature store (partition, cache, remote fetch).
        feature_dim, num_classes: model widths.
        shared: the machine's shared objects (:mod:`executor.shared`; private ones where nothing can be shared).
    """

    name: str
    graph: Any
    edge_weight: torch.Tensor | None
    labels: torch.Tensor
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    owner: np.ndarray
    store: FeatureStore
    feature_dim: int
    num_classes: int
    shared: SharedObjects


def rank0_first(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0, then (after a barrier) on the other ranks; the barrier waits up to
    :data:`executor.comm.SETUP_TIMEOUT_S` (a cold METIS partitioning outlasts the collective timeout)."""
    if comm.rank() == 0:
        out = fn()
        comm.barrier(comm.SETUP_TIMEOUT_S)
        return out
    comm.barrier(comm.SETUP_TIMEOUT_S)
    return fn()


def load_training_data(workload: WorkloadSpec, partitioner: str, cache_fraction: float,
                       topo: Topology) -> TrainingData:
    """Load the dataset, partition it over the machines, and build this worker's feature store (collective).

    Args:
        workload: dataset and model (the model decides self-loops and edge weights).
        partitioner: ``metis`` or ``random``.
        cache_fraction: fraction of vertices in the device feature cache.
        topo: this worker's place.

    Returns:
        The rank's :class:`TrainingData`.
    """

    def load() -> tuple[GraphData, np.ndarray]:
        graph = load_dataset(workload.dataset)
        owner = partition_owners(workload.dataset, topo.num_machines, partitioner, PARTITION_SEED, graph=graph)
        return graph, owner

    graph, owners = rank0_first(load)
    arch, shared = workload.model.arch, SharedObjects(topo)
    g = shared.graph("graph", lambda: graph_structure(graph, arch))
    weights = None if arch != "gcn" else torch.from_numpy(shared.array("gcn-weights",
                                                                       lambda: gcn_edge_weights(g).numpy()))
    owner = shared.array("owner", lambda: owners)
    # a read-only label array (a mapped file) is copied: torch warns on stderr for one, before any error line
    labels = torch.from_numpy(np.require(shared.array("labels", lambda: graph.labels), requirements="W"))
    rows = shared.array("features", lambda: machine_rows(input_features(graph, workload.dataset), owner, topo))
    store = FeatureStore(rows, owner, topo, cached_vertices(graph.in_degrees(), cache_fraction), shared)
    return TrainingData(graph.name, g, weights, labels, graph.train_idx, graph.val_idx, graph.test_idx, owner, store,
                        graph.feature_dim, graph.num_classes, shared)
