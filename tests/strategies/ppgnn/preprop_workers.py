"""Programs the sharded pre-propagation tests run on every spawned gloo rank (module-level so that spawned
workers can import them)."""

from __future__ import annotations

from typing import Any

import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology, input_features
from gnnplan.executor.strategies.ppgnn.preprop_shards import RowShard, preprocess_sharded
from gnnplan.simulator.workload.datasets import load_dataset


def sharded_preprocess(topo: Topology, emit: Any, dataset: str, hops: int, folders: dict[str, str]) -> Any:
    """Pre-propagate ``dataset`` sharded over the ranks into ``folders[op]`` for op in {undirected, directed};
    rank 0 gets every rank's halo rows per owner and the feature bytes it received per hop."""
    graph = load_dataset(dataset)
    features = input_features(graph, dataset)
    out: dict[str, Any] = {"rank": topo.rank}
    for op, folder in folders.items():
        undirected = op == "undirected"
        preprocess_sharded(graph, features, hops, folder, undirected)
        shard = RowShard(graph, undirected)
        comm.reset_counters()
        shard.propagate(torch.from_numpy(features[shard.lo:shard.hi]))
        out[op] = {"need": shard.need, "received_bytes": comm.bytes_received(), "lo": shard.lo, "hi": shard.hi}
    return {"ranks": comm.gather_object(out)}
