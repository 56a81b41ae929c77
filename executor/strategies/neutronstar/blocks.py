"""``neutronstar`` executor internals: per-layer DGL blocks of one worker, and the row exchange.

Notation as :mod:`simulator.strategies.neutronstar`. For worker i and layer l (1..L) the rows are laid out as

* ``X_l`` = [h^(l-1) of the owned vertices V_i (id order); h^(l-1) of the replicated ``replicated[l-1]``];
  for l >= 2 it is the previous layer's output ``Y_{l-1}`` = [master block output; replica block output];
* ``T_l`` = [``X_l``; received rows ``communicated[l-1]`` (by owner, then id)];
* the *master* block: destinations V_i, sources [V_i; remote in-neighbours] gathered from ``T_l``;
* the *replica* block (l < L): destinations ``replicated[l]``, sources [themselves; their other in-neighbours]
  gathered from ``X_l`` only (so it can run while the exchange is in flight).

Destinations come first among a block's sources, DGL's block convention (GIN and GAT read ``feat[:num_dst]``);
every destination has all its in-edges, so each block reproduces full-graph layer l exactly on its rows.
A mirror (received row) is sent once per (vertex, worker) pair, and its gradient comes back once (master-mirror,
Wang et al., SIGMOD 2022, §4.2).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.models import EDGE_WEIGHT
from gnnplan.simulator.strategies.neutronstar.dependencies import WorkerSets


@dataclass
class LayerPlan:
    """One worker's layer l (module docstring).

    Attributes:
        master: DGL block of the owned vertices; ``master_rows`` its source rows in ``T_l``.
        replica: DGL block of the replicas computed at layer l (None if none); ``replica_rows`` in ``X_l``.
        recv_counts: rows received from each rank (0 for itself), in rank order.
        send_counts: rows sent to each rank (0 for itself), in rank order.
        send_index: positions among the owned vertices of the rows sent, rank after rank (``send_counts`` each):
            the send buffer is ``index_select(h, 0, send_index)``, and the gradients that come back for it are
            added to those rows.
        num_x_rows: rows of ``X_l``.

    Shapes:
        send_index: (sum(send_counts),) int64.
    """

    master: Any
    master_rows: torch.Tensor
    replica: Any | None
    replica_rows: torch.Tensor
    recv_counts: list[int]
    send_counts: list[int]
    send_index: torch.Tensor
    num_x_rows: int

    def to(self, device: torch.device) -> LayerPlan:
        """The plan with its blocks and index tensors on ``device`` (a no-op on the CPU)."""
        if device.type == "cpu":
            return self
        move = lambda t: t.to(device)  # noqa: E731
        return LayerPlan(self.master.to(device), move(self.master_rows),
                         None if self.replica is None else self.replica.to(device), move(self.replica_rows),
                         self.recv_counts, self.send_counts, move(self.send_index), self.num_x_rows)


def _block(graph: Any, edge_weight: torch.Tensor | None, dst: np.ndarray, num_vertices: int) -> tuple[Any, np.ndarray]:
    """A DGL block with destinations ``dst`` and all their in-edges; returns (block, source vertex ids)."""
    import dgl

    src, dst_ids, eids = graph.in_edges(torch.from_numpy(dst), form="all")
    src_np = src.numpy()
    others = np.setdiff1d(src_np, dst)
    srcs = np.concatenate([dst, others])
    local = np.full(num_vertices, -1, dtype=np.int64)
    local[srcs] = np.arange(len(srcs))
    block = dgl.create_block((torch.from_numpy(local[src_np]), torch.from_numpy(np.searchsorted(dst, dst_ids.numpy()))),
                             num_src_nodes=len(srcs), num_dst_nodes=len(dst))
    if edge_weight is not None:
        block.edata[EDGE_WEIGHT] = edge_weight[eids]
    return block, srcs


def _rows(position: np.ndarray, vertices: np.ndarray, what: str) -> torch.Tensor:
    rows = position[vertices]
    if (rows < 0).any():
        raise RuntimeError(f"neutronstar: {what} needs a vertex that is neither owned, replicated nor received")
    return torch.from_numpy(rows)


def layer_plans(graph: Any, edge_weight: torch.Tensor | None, all_sets: list[WorkerSets], owner: np.ndarray,
                rank: int) -> list[LayerPlan]:
    """Worker ``rank``'s blocks, gather indices and exchange lists of every layer (module docstring).

    Args:
        graph: the DGL training graph (:func:`executor.data.build_graph`).
        edge_weight: GCN's per-edge weights by edge id, or None.
        all_sets: every worker's dependency split (rank order).
        owner: (n,) owner rank of every vertex.
        rank: this worker.
    """
    n, mine = graph.num_nodes(), all_sets[rank]
    num_layers, owned = len(mine.communicated), mine.owned
    plans = []
    for layer in range(1, num_layers + 1):
        reps, comm_ids = mine.replicated[layer - 1], mine.communicated[layer - 1]
        position = np.full(n, -1, dtype=np.int64)
        position[np.concatenate([owned, reps, comm_ids])] = np.arange(len(owned) + len(reps) + len(comm_ids))
        master, master_src = _block(graph, edge_weight, owned, n)
        replica, replica_rows = None, torch.empty(0, dtype=torch.int64)
        if layer < num_layers and len(mine.replicated[layer]):
            replica, replica_src = _block(graph, edge_weight, mine.replicated[layer], n)
            x_position = position.copy()
            x_position[comm_ids] = -1
            replica_rows = _rows(x_position, replica_src, "a replica")
        recv = np.bincount(owner[comm_ids], minlength=len(all_sets)).tolist()
        send = []
        for peer, theirs in enumerate(all_sets):
            wanted = theirs.communicated[layer - 1] if peer != rank else np.empty(0, dtype=np.int64)
            wanted = wanted[owner[wanted] == rank]
            send.append(np.searchsorted(owned, wanted))
        plans.append(LayerPlan(master, _rows(position, master_src, "an owned vertex"), replica, replica_rows,
                               recv, [len(a) for a in send], torch.from_numpy(np.concatenate(send)),
                               len(owned) + len(reps)))
    return plans


@dataclass
class ExchangeTiming:
    """Start and end (``perf_counter``) of one exchange and the bytes this rank sent and received."""

    start_s: float
    end_s: float
    sent_bytes: int
    received_bytes: int


def exchange(send: torch.Tensor, send_counts: list[int], recv: torch.Tensor, recv_counts: list[int],
             ring: bool) -> ExchangeTiming:
    """Send ``send_counts[p]`` rows of ``send`` (rank after rank) to every rank p and receive ``recv_counts[p]``
    rows from it into ``recv`` (preallocated, rank after rank; this rank's own counts are 0), without copying
    either buffer: each message is a slice of it. Empty messages are skipped (both sides know the sizes). With
    ``ring``, slot s = 0..W-2 pairs a send to (r+s+1) mod W with a receive from (r-s-1) mod W (Wang et al.,
    SIGMOD 2022, §4.3); otherwise one ``all_to_all_single``.

    Shapes:
        send: (sum(send_counts), width); recv: (sum(recv_counts), width), contiguous.
    """
    start, sent0, recv0 = time.perf_counter(), comm.bytes_sent(), comm.bytes_received()
    me, world = comm.rank(), comm.world_size()
    if ring:
        out_at, in_at = np.cumsum([0, *send_counts]), np.cumsum([0, *recv_counts])
        for s in range(world - 1):
            dst, src = (me + s + 1) % world, (me - s - 1) % world
            requests = comm.post_exchange(send[out_at[dst]: out_at[dst + 1]] if send_counts[dst] else None, dst,
                                          recv[in_at[src]: in_at[src + 1]] if recv_counts[src] else None, src)
            for request in requests:
                request.wait()
    elif world > 1:
        comm.all_to_all_single(recv, send, recv_counts, send_counts)
    return ExchangeTiming(start, time.perf_counter(), comm.bytes_sent() - sent0, comm.bytes_received() - recv0)


def launch(fn: Callable[[], Any], background: bool) -> Callable[[], Any]:
    """Run ``fn`` now (``background=False``) or in a thread; returns a function that waits and gives its result.

    Torch kernels release the GIL, so a thread doing the exchange overlaps with computation in the caller.
    """
    if not background:
        result = fn()
        return lambda: result
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # re-raised in the waiting thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait() -> Any:
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    return wait
