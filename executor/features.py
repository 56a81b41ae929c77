"""The distributed feature store: per-machine feature partitions, the device feature cache, remote fetch.

Loading the features of a mini-batch's input vertices (:meth:`FeatureStore.load`, see :mod:`executor.data`
for the layout): a cached vertex is read from the worker's device cache (hit), a vertex owned by the worker's
machine from the machine's partition in host memory (local miss), any other vertex from its owner machine
(remote miss) with :meth:`RowStore.pull`: an ``all_to_all_single`` of the number of ids asked of each rank,
then of the ids (int64), then of the rows back (DistDGL's KVStore pull, Zheng et al., IA3 2020, §3.2). When
the cluster has more than one machine every rank takes part in every pull, also with nothing to ask for, so
all ranks must call :meth:`FeatureStore.load` the same number of times. Misses are copied to the device
(host-to-device bytes = local + remote miss bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology, positions_in_owner
from gnnplan.executor.shared import SharedObjects, or_private
from gnnplan.executor.trace import now
from gnnplan.simulator.units import INDEX_BYTES


@dataclass
class PullStats:
    """One :meth:`RowStore.pull` seen from the requesting rank.

    Attributes:
        num_rows: rows requested from other ranks.
        request_bytes: bytes sent in the request phase (one int64 count per other rank plus the int64 ids).
        reply_bytes: row bytes received from other ranks.
        start_s, end_s: ``perf_counter()`` at the start and end of the exchange.
    """

    num_rows: int = 0
    request_bytes: int = 0
    reply_bytes: int = 0
    start_s: float = 0.0
    end_s: float = 0.0


class RowStore:
    """Rows of a matrix sharded over ranks, each rank holding some vertices' rows.

    Args:
        rows: this rank's rows.
        position: for every vertex, its row within the rank that holds it; None = the identity (one rank
            holds everything in id order).

    Shapes:
        rows: (k, d); position: (n,) int64.
    """

    def __init__(self, rows: torch.Tensor, position: torch.Tensor | None) -> None:
        self.rows = rows
        self.position = position

    @property
    def row_bytes(self) -> int:
        """Bytes of one row."""
        return self.rows.shape[1] * self.rows.element_size()

    def gather(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows of vertices this rank holds, by ``torch.index_select``: one row copy per id, where advanced
        indexing (``rows[index]``) computes every element's offset (slower by the ratio
        benchmarks/bench_feature_gather.py prints). Shapes: ids (k,) int64 -> (k, d)."""
        return torch.index_select(self.rows, 0, ids if self.position is None else self.position[ids])

    def pull(self, ids: torch.Tensor, dest: torch.Tensor) -> tuple[torch.Tensor, PullStats]:
        """Rows of ``ids`` from the ranks ``dest`` that hold them (collective: every rank must call it): the rows
        other ranks hold in three all-to-all calls (counts, ids, rows; timed, the stats' span), then this rank's
        own rows gathered in place, as DistDGL's ``DistTensor`` reads its local partition directly and as the
        simulator prices a load (the feature store gathers its own rows the same way).

        Shapes:
            ids, dest: (k,) int64 on the CPU -> rows (k, d) on the CPU.
        """
        world, me, dev = comm.world_size(), comm.rank(), comm.device()
        start = now()
        far = torch.nonzero(dest != me).squeeze(1)
        far_dest = dest[far]
        order = torch.argsort(far_dest, stable=True)
        send_counts = torch.bincount(far_dest, minlength=world)
        ones = [1] * world
        recv_counts = comm.all_to_all_single(torch.empty_like(send_counts, device=dev), send_counts.to(dev),
                                             ones, ones)
        sc, rc = send_counts.tolist(), recv_counts.tolist()
        asked = comm.all_to_all_single(torch.empty(sum(rc), dtype=ids.dtype, device=dev),
                                       ids[far[order]].to(dev), rc, sc)
        served = self.gather(asked.cpu()).to(dev)
        got = comm.all_to_all_single(torch.empty((sum(sc), self.rows.shape[1]), dtype=self.rows.dtype, device=dev),
                                     served, sc, rc).cpu()
        end = now()
        out = torch.empty((len(ids), self.rows.shape[1]), dtype=self.rows.dtype)
        out[far[order]] = got
        if len(far) < len(ids):
            own = torch.nonzero(dest == me).squeeze(1)
            out[own] = self.gather(ids[own])
        remote = len(far)
        return out, PullStats(remote, INDEX_BYTES * (world - 1 + remote), remote * self.row_bytes, start, end)


@dataclass
class LoadStats:
    """What one :meth:`FeatureStore.load` did.

    Attributes:
        num_input_vertices: rows asked for.
        num_hit, num_local, num_remote: cache hits, local misses, remote misses.
        row_bytes: bytes of one feature row.
        fetch: the remote pull (None on a one-machine cluster, where nothing is remote).
    """

    num_input_vertices: int
    num_hit: int
    num_local: int
    num_remote: int
    row_bytes: int
    fetch: PullStats | None

    @property
    def host_to_device_bytes(self) -> int:
        """Bytes copied to the device: local and remote misses."""
        return (self.num_local + self.num_remote) * self.row_bytes


def slots(ids: np.ndarray, num_vertices: int) -> np.ndarray:
    """Every vertex's index in ``ids`` (-1 where absent): a cache's slot map.

    Shapes:
        ids: (c,) int64 distinct -> (num_vertices,) int64.
    """
    slot = np.full(num_vertices, -1, dtype=np.int64)
    slot[ids] = np.arange(len(ids))
    return slot


def machine_rows(features: np.ndarray, owner: np.ndarray, topo: Topology) -> np.ndarray:
    """The feature rows of the vertices ``topo.machine`` owns, in id order (a copy; all of ``features``, contiguous,
    on a single machine).

    Shapes:
        features: (n, d) float32; owner: (n,) int64 -> (n_m, d) float32.
    """
    return np.ascontiguousarray(features[owner == topo.machine] if topo.num_machines > 1 else features)


class FeatureStore:
    """A worker's view of the vertex features: its machine's partition, its device cache, the other machines.

    Construction is collective when there is more than one machine (the cache is filled with a pull).

    Args:
        rows: the machine's feature partition, :func:`machine_rows` (kept as given, not copied: on a machine of
            several workers, shared memory, :mod:`executor.shared`).
        owner: owner machine of every vertex.
        topo: this worker's place.
        cache_ids: vertices whose rows the device cache holds (the same on every worker).
        shared: the machine's shared objects: the per-vertex maps (positions in the partition, cache slots) are
            the same on every worker, so a machine holds one copy (None: this worker builds its own).

    Shapes:
        rows: (n_m, d) float32, n_m = vertices of this machine; owner: (n,) int64; cache_ids: (c,) int64.
    """

    def __init__(self, rows: np.ndarray, owner: np.ndarray, topo: Topology, cache_ids: np.ndarray,
                 shared: SharedObjects | None = None) -> None:
        self.topo = topo
        self.dim = int(rows.shape[1])
        self.row_bytes = self.dim * 4
        share = or_private(shared, topo).array
        position = torch.from_numpy(share("positions", lambda: positions_in_owner(owner))) \
            if topo.num_machines > 1 else None
        self.store = RowStore(torch.from_numpy(rows), position)
        self.owner = torch.from_numpy(owner)
        self.cache_slot: torch.Tensor | None = None
        self.cache_rows = torch.empty((0, self.dim), device=topo.device)
        if len(cache_ids):
            ids = np.ascontiguousarray(cache_ids, dtype=np.int64)
            self.cache_rows = self.load(torch.from_numpy(ids))[0]
            self.cache_slot = torch.from_numpy(share("cache-slots", lambda: slots(ids, len(owner))))

    @property
    def num_cached(self) -> int:
        """Rows in the device cache."""
        return int(self.cache_rows.shape[0])

    def load(self, ids: torch.Tensor) -> tuple[torch.Tensor, LoadStats]:
        """Feature rows of ``ids`` on the device (collective on a multi-machine cluster): cache hits first
        (:func:`from_cache`), then the misses, local ones gathered from the partition and remote ones pulled, each
        written into their positions (:func:`fill`).

        Shapes:
            ids: (k,) int64 on the CPU -> (k, d) float32 on ``topo.device``.
        """
        dev, k = self.topo.device, len(ids)
        if self.cache_slot is None and self.topo.num_machines == 1:
            return self.store.gather(ids).to(dev), LoadStats(k, 0, k, 0, self.row_bytes, None)
        if self.cache_slot is None:
            x, miss_pos = torch.empty((k, self.dim), device=dev), torch.arange(k)
        else:
            x, miss_pos = from_cache(self.cache_rows, self.cache_slot[ids])
        miss_ids, num_hit = ids[miss_pos], k - len(miss_pos)
        if self.topo.num_machines == 1:
            fill(x, miss_pos, self.store.gather(miss_ids))
            return x, LoadStats(k, num_hit, k - num_hit, 0, self.row_bytes, None)
        return self._load_misses(x, miss_pos, miss_ids, num_hit)

    def _load_misses(self, x: torch.Tensor, pos: torch.Tensor, miss_ids: torch.Tensor,
                     num_hit: int) -> tuple[torch.Tensor, LoadStats]:
        """Fill the rows of misses (at positions ``pos`` of ``x``): local ones from the partition, remote ones
        pulled from their owners."""
        topo = self.topo
        own = self.owner[miss_ids]
        local = own == topo.machine
        fill(x, pos[local], self.store.gather(miss_ids[local]))
        remote = ~local
        rows, pulled = self.store.pull(miss_ids[remote], own[remote] * topo.gpus_per_machine + topo.local_rank)
        fill(x, pos[remote], rows)
        num_remote = pulled.num_rows
        return x, LoadStats(len(x), num_hit, len(miss_ids) - num_remote, num_remote, self.row_bytes, pulled)


def from_cache(cache_rows: torch.Tensor, slot: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch's input rows read from a feature cache, and the positions of the misses still to fill.

    With at least half of the rows cached, ONE ``index_select`` over every position reads them (a miss reads
    cache row 0, overwritten later by :func:`fill`): k row copies, where gathering the hits apart and writing them
    into the batch copies each hit twice (the executor's load until 2026-11-29: 2.01x slower on the main job's
    Cora batches, 1.67x on R-MAT inputs with 90% hits, benchmarks/bench_feature_gather.py). With fewer, the hits
    are gathered and copied into an empty batch (2 h row copies < h + m + m; 20% hits: 1.01x, no loss).

    Shapes:
        cache_rows: (c, d) on the cache's device; slot: (k,) int64 on the CPU, a row of ``cache_rows`` or -1
        -> ((k, d) on the cache's device, (m,) int64 positions of the misses on the CPU).
    """
    dev = cache_rows.device
    hit = slot >= 0
    miss_pos = torch.nonzero(~hit).squeeze(1)
    if len(cache_rows) and 2 * len(miss_pos) <= len(slot):
        return torch.index_select(cache_rows, 0, slot.clamp(min=0).to(dev)), miss_pos
    x = torch.empty((len(slot), cache_rows.shape[1]), dtype=cache_rows.dtype, device=dev)
    hit_pos = torch.nonzero(hit).squeeze(1)
    fill(x, hit_pos, torch.index_select(cache_rows, 0, slot[hit_pos].to(dev)))
    return x, miss_pos


def fill(x: torch.Tensor, pos: torch.Tensor, rows: torch.Tensor) -> None:
    """Write ``rows`` into rows ``pos`` of ``x`` (``index_copy_``: one row copy each, brought to ``x``'s device).

    Shapes: x (k, d); pos (m,) int64; rows (m, d)."""
    if len(pos):
        x.index_copy_(0, pos.to(x.device), rows.to(x.device))
