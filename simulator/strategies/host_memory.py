"""The host-memory parts a machine holds for its workers, shared by the strategies' memory models: worker and
sampler processes, the graph structure (and GCN's edge weights) in the executor's formats, the machine's feature
partition and the int64 maps over all vertices. Each mirrors what the executor allocates (named per function)."""

from __future__ import annotations

import math

from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.units import FLOAT_BYTES, INDEX_BYTES
from gnnplan.simulator.workload.graphstats import DatasetSummary
from gnnplan.simulator.workload.spec import SELF_LOOP_ARCHS

SAMPLER_PROCESS_BYTES = 1.2e7
"""Private host memory of one sampler (or loader) process forked from a worker: what it holds beyond the pages it shares
with the worker copy-on-write (its batches in flight are counted apart, :data:`~.window.PREFETCH_FACTOR`). Measured with
/proc/<pid>/smaps_rollup (Private_Clean + Private_Dirty) after an epoch of dp with 2 sampler processes per worker:
10.1-10.3 MiB on Cora and CiteSeer, 13.3-13.4 MiB on rmat100k (2026-11-28, torch 2.13, DGL 1.1.3; mean 11.8 MB), rounded
to 12 MB. The executor measures it per run (:func:`executor.memory.children_private_bytes`, at the end of each phase:
persistent sampler processes; ppgnn's baseline loader processes live for one epoch and have exited by then, so its
measured peak lacks them)."""


def worker_processes_bytes(cluster: ClusterSpec, sampler_processes: int = 0) -> float:
    """One machine's worker processes: per GPU a worker (``host.process_bytes``) and its ``sampler_processes``
    forked sampler or loader processes (:data:`SAMPLER_PROCESS_BYTES` each), in bytes."""
    return cluster.gpus_per_machine * (cluster.host.process_bytes + sampler_processes * SAMPLER_PROCESS_BYTES)


VERTEX_MAPS = 4
"""int64 arrays over all vertices every mini-batch executor with layer-wise evaluation holds (dp, hopgnn, gsplit:
executor/assemble.py and executor/evaluate.py): the owner machine and the label of every vertex, and the evaluator's
rank and position of every vertex; one copy per machine, shared by its workers (executor/shared.py)."""


def structure_edges(summary: DatasetSummary, arch: str) -> float:
    """Directed edges of the graph the executor trains ``arch`` on: the dataset's, with one self-loop per vertex
    for GCN and GAT (executor/data.py ``graph_structure`` replaces existing self-loops by one per vertex; [inferred:
    counted as if the dataset had none, an upper bound by its own self-loops])."""
    return float(summary.num_edges) + (summary.num_vertices if arch in SELF_LOOP_ARCHS else 0)


def gcn_weight_bytes(arch: str, num_edges: float) -> float:
    """GCN's float32 weight of every edge (executor/data.py ``gcn_edge_weights``, one copy per machine); 0 for the
    other architectures."""
    return FLOAT_BYTES * num_edges if arch == "gcn" else 0.0


def sparse_structure_bytes(num_vertices: float, num_edges: float, formats: tuple[str, ...]) -> float:
    """Bytes of a DGL graph's int64 index arrays in sparse ``formats``: COO 2 per edge (source, destination); CSC
    and CSR ``n + 1`` offsets and 2 per edge (neighbour, edge id) (DGL 1.1.3 ``HeteroGraphIndex``; the executor
    reserves this much in /dev/shm before sharing a graph, executor/shared.py).

    Raises:
        KeyError: a format other than ``coo``, ``csc``, ``csr``.
    """
    per_format = {"coo": 2.0 * num_edges, "csc": num_vertices + 1 + 2.0 * num_edges,
                  "csr": num_vertices + 1 + 2.0 * num_edges}
    return INDEX_BYTES * sum(per_format[f] for f in formats)


STRUCTURE_FORMATS = ("coo", "csc")
"""The formats of the whole graph as the executor holds it (executor/data.py ``graph_structure``, shared by
executor/shared.py)."""


def structure_bytes(summary: DatasetSummary, arch: str) -> float:
    """Bytes of the whole graph's structure the executor holds, once per machine: its :data:`STRUCTURE_FORMATS`
    (:func:`sparse_structure_bytes`) over :func:`structure_edges`."""
    return sparse_structure_bytes(summary.num_vertices, structure_edges(summary, arch), STRUCTURE_FORMATS)


GCN_WEIGHTS = "GCN edge weights (float32)"
"""The host memory part of GCN's edge weights (:func:`gcn_weight_bytes`)."""


def whole_graph_parts(summary: DatasetSummary, arch: str) -> dict[str, float]:
    """The host parts of the whole graph a machine holds for its workers, bytes: its structure
    (:func:`structure_bytes`) and, for GCN, its float32 edge weights (:func:`gcn_weight_bytes`)."""
    weights = gcn_weight_bytes(arch, structure_edges(summary, arch))
    return {"graph structure (COO + CSC, int64)": structure_bytes(summary, arch),
            **({GCN_WEIGHTS: weights} if weights else {})}


def feature_partition_bytes(cluster: ClusterSpec, summary: DatasetSummary) -> float:
    """Bytes of one machine's feature partition: the float32 feature rows of the ``ceil(n / M)`` vertices it owns
    (executor/features.py ``machine_rows``; one copy per machine, shared by its workers)."""
    return math.ceil(summary.num_vertices / cluster.num_machines) * summary.feature_dim * FLOAT_BYTES


def vertex_maps_bytes(cluster: ClusterSpec, num_vertices: int, extra_shared_maps: int = 0,
                      per_worker_maps: int = 0) -> float:
    """Bytes of int64 maps over all ``num_vertices`` vertices in one machine's host memory: the :data:`VERTEX_MAPS`
    its workers share, the feature store's positions on several machines, ``extra_shared_maps`` more shared maps (a
    strategy's own, e.g. cache slots) and ``per_worker_maps`` maps each worker holds for itself
    (``gpus_per_machine`` copies). At ogbn-papers100M's 111 M vertices each map is 0.89 GB."""
    shared = VERTEX_MAPS + (cluster.num_machines > 1) + extra_shared_maps
    return INDEX_BYTES * float(num_vertices) * (shared + cluster.gpus_per_machine * per_worker_maps)
