"""Pre-propagation sharded over the ranks: each rank propagates its row shard of the hop matrices (collective).

The 1D row-wise distributed SpMM (Tripathy, Yelick and Buluç, "Reducing Communication in Graph Neural Network
Training", SC 2020, §IV-A, with the sparsity-aware exchange of only the rows a shard reads), as simulated by
:mod:`simulator.strategies.ppgnn.preprop`. Notation as :mod:`executor.strategies.ppgnn.preprop`: ``B = D~^-1/2
(A + I) D~^-1/2``, ``X_r = B X_{r-1}``. Rank p of W owns the vertex-id range ``[lo, hi)``
(:func:`simulator.strategies.ppgnn.shards.shard_bounds`):

1. its row block ``B[lo:hi, :]``: the in-edges of its rows (and their reverses with ``undirected``), duplicates
   and self-loops dropped, one self-loop per row added; ``D~`` of its rows is the block's row lengths; the
   other rows' are summed in with one ``all_reduce`` of an (n,) vector (each rank fills its own rows);
2. its *halo*: the columns of its block outside ``[lo, hi)``, grouped by owner; the ids go to their owners
   with one ``all_to_all_single`` (after one of the counts); the block's columns are renumbered to
   ``[own rows | halo rows]``;
3. per hop r: the owners send the requested rows of ``X_{r-1}`` (one ``all_to_all_single``), the rank
   multiplies its block by ``[own rows of X_{r-1} ; received rows]`` (``torch.sparse.mm``) and writes its
   labelled rows of ``X_r`` into the shared hop file.

Files (same layout as :func:`executor.strategies.ppgnn.preprop.preprocess`): rank 0 creates every hop's file
under a temporary name with its ``.npy`` header (``numpy.lib.format.open_memmap``), each rank writes its
labelled rows into it, and after a barrier rank 0 flushes and renames them, then writes ``labels.npy`` and
``meta.json`` last (complete-or-absent, DESIGN.md "Errors and data safety"). The folder must be on a file system
every rank sees (the runs of this executor: one machine, or emulated machines on one machine).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.simulator.strategies.ppgnn.shards import shard_bounds
from gnnplan.simulator.workload.datasets import GraphData


def block_structure(src: np.ndarray, dst: np.ndarray, num_vertices: int, lo: int, hi: int,
                    undirected: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Rows (global ids in ``[lo, hi)``) and columns of the off-diagonal non-zeros of ``A``'s row block, sorted by
    row then column, duplicates and self-loops dropped (``A[v, u] = 1`` for an edge ``u -> v``)."""
    rows, cols = np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64)
    if undirected:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    keep = (rows >= lo) & (rows < hi) & (rows != cols)
    span = np.int64(num_vertices)
    keys = np.unique((rows[keep] - lo) * span + cols[keep])
    return keys // span + lo, keys % span


class RowShard:
    """This rank's block of ``B`` with columns renumbered to ``[own rows | halo rows]`` (module docstring).

    Args:
        graph: the whole graph (every rank reads the edge list; only its block is kept).
        undirected: symmetrise the adjacency first.

    Attributes:
        lo, hi: its rows; bounds: every rank's boundaries; halo: (h,) global ids of the halo rows;
        need: rows it receives from each rank; serve: (s,) its own rows (local ids) others requested, grouped by
        requester; serve_counts: how many each requester gets; block: (hi - lo, hi - lo + h) CSR.
    """

    def __init__(self, graph: GraphData, undirected: bool = True) -> None:
        w, me, n = comm.world_size(), comm.rank(), graph.num_vertices
        self.bounds = shard_bounds(n, w)
        self.lo, self.hi = lo, hi = self.bounds[me], self.bounds[me + 1]
        rows, cols = block_structure(graph.src, graph.dst, n, lo, hi, undirected)
        rows = np.concatenate([rows, np.arange(lo, hi, dtype=np.int64)])  # A + I
        cols = np.concatenate([cols, np.arange(lo, hi, dtype=np.int64)])
        degree = torch.zeros(n, dtype=torch.float64)
        degree[lo:hi] = torch.from_numpy(np.bincount(rows - lo, minlength=hi - lo).astype(np.float64))
        comm.all_reduce_(degree)
        inv_sqrt = 1.0 / np.sqrt(degree.numpy())
        values = (inv_sqrt[rows] * inv_sqrt[cols]).astype(np.float32)
        remote = (cols < lo) | (cols >= hi)
        self.halo = np.unique(cols[remote])
        owners = np.searchsorted(np.asarray(self.bounds), self.halo, side="right") - 1
        self.need = np.bincount(owners, minlength=w).astype(np.int64).tolist()
        local = np.where(remote, (hi - lo) + np.searchsorted(self.halo, cols), cols - lo)
        self.block = _csr(rows - lo, local, values, (hi - lo, hi - lo + len(self.halo)))
        self.serve_counts, self.serve = self._requests()

    def _requests(self) -> tuple[list[int], np.ndarray]:
        """Send every owner the ids this rank needs from it; returns what each rank needs from this one."""
        w = comm.world_size()
        counts = torch.zeros(w, dtype=torch.int64)
        comm.all_to_all_single(counts, torch.tensor(self.need, dtype=torch.int64), [1] * w, [1] * w)
        serve_counts = counts.tolist()
        ids = torch.zeros(sum(serve_counts), dtype=torch.int64)
        comm.all_to_all_single(ids, torch.from_numpy(self.halo), serve_counts, self.need)
        return serve_counts, ids.numpy() - self.lo

    def propagate(self, own: torch.Tensor) -> torch.Tensor:
        """This rank's rows of ``B X`` from its rows of ``X`` (one halo exchange).

        Shapes:
            own: (hi - lo, F) float32 -> (hi - lo, F) float32.
        """
        halo = torch.zeros((len(self.halo), own.shape[1]), dtype=own.dtype)
        outgoing = own.index_select(0, torch.from_numpy(self.serve))
        comm.all_to_all_single(halo, outgoing, self.need, self.serve_counts)
        return torch.sparse.mm(self.block, torch.cat([own, halo]))


def _csr(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> torch.Tensor:
    """A float32 ``torch.sparse_csr`` tensor from coordinates (columns sorted within each row)."""
    import scipy.sparse as sp

    m = sp.csr_matrix((values, (rows, cols)), shape=shape)
    m.sort_indices()
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int64)),
                                       torch.from_numpy(m.indices.astype(np.int64)),
                                       torch.from_numpy(m.data.astype(np.float32)), size=shape,
                                       check_invariants=False)


def preprocess_sharded(graph: GraphData, features: np.ndarray, hops: int, folder: str | Path,
                       undirected: bool = True) -> Path:
    """Collective: every rank propagates its row shard ``hops`` times and writes its labelled rows of every hop
    into ``folder`` (module docstring); rank 0 completes the folder (renames, ``labels.npy``, ``meta.json``).

    Args:
        graph: the graph, on every rank.
        features: (n, F) float32 input features (only this rank's rows are read).
        hops: R >= 0.
        folder: output folder, shared by the ranks.
        undirected: symmetrise the adjacency first.

    Returns:
        The folder (complete on every rank when this returns).

    Raises:
        ValueError: ``hops < 0`` or a feature matrix with the wrong number of rows.
    """
    from gnnplan.executor.strategies.ppgnn.preprop import check_inputs, hop_file, labelled_rows, write_meta

    check_inputs(graph, features, hops)
    out = Path(folder)
    labelled = labelled_rows(graph)
    shape = (len(labelled), int(features.shape[1]))
    tmp = [out / f".{hop_file(r)}.sharded" for r in range(hops + 1)]
    if comm.rank() == 0:
        out.mkdir(parents=True, exist_ok=True)
        for path in tmp:
            np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape).flush()
    comm.barrier()
    shard = RowShard(graph, undirected)
    mine = np.flatnonzero((labelled >= shard.lo) & (labelled < shard.hi))  # positions in the stored order
    local_ids = torch.from_numpy(labelled[mine] - shard.lo)
    x = torch.from_numpy(np.ascontiguousarray(features[shard.lo:shard.hi], dtype=np.float32))
    for r in range(hops + 1):
        if r:
            x = shard.propagate(x)
        stored = np.lib.format.open_memmap(tmp[r], mode="r+")
        stored[mine] = x.index_select(0, local_ids).numpy()
        stored.flush()
        del stored
    comm.barrier()
    if comm.rank() == 0:
        for r, path in enumerate(tmp):
            with open(path, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(path, out / hop_file(r))
        write_meta(graph, out, hops, int(features.shape[1]), undirected)
    comm.barrier()
    return out
