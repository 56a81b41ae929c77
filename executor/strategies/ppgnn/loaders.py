"""PP-GNN data loading: where the hop matrices live (placement), how a batch is assembled (loader), and the
order rows are visited in (reshuffling).

Notation (PP-GNN brief /work/shared/papers/ppgnn.md §1.4, §1.7): ``M`` matrices loaded per row (1 for SGC,
R + 1 for SIGN), ``F`` features, ``b`` rows per batch; a *chunk* (SGD-CR, brief §1.4(d)) is a run of
``chunk_size`` rows contiguous in storage; a *run* is a maximal contiguous stretch of a batch's rows.

Placement (:class:`executor.strategies.ppgnn.files.HopSource`; brief §1.7 step 2, the CPU stand-ins of the paper's
tiers):

* ``gpu``: every matrix is one tensor on the device (on a CPU-only machine an in-process tensor); batches are
  gathered device-side and nothing crosses PCIe.
* ``host``: host tensors (pinned when CUDA is present); a batch is gathered on the host and copied into a
  device buffer (``copy_``: the host-to-device DMA on a GPU, a memory copy standing in for it on a CPU).
* ``ssd``: the ``hop_<r>.npy`` files read with ``O_DIRECT`` (:mod:`executor.strategies.ppgnn.files`: every read reaches
  the storage device; nothing is cached): under random reshuffling one read per row and matrix, under chunk
  reshuffling one read per run and matrix; the reads of a batch are issued by a thread pool
  (:data:`IO_THREADS` in flight) into the staging buffer, then copied to the device buffer.

Loaders (brief §1.4 (a)-(c)):

* ``baseline``: a per-row ``Dataset`` (each item is the row of every matrix) behind
  ``torch.utils.data.DataLoader(batch_sampler=..., num_workers=2, pin_memory=CUDA)``, then a copy to the device:
  the vanilla PP-GNN loader, one indexing operation per row and matrix. Device-resident (``gpu``) data are
  indexed in the training process (``num_workers = 0``: device tensors cannot be shared with workers).
  A worker times its batch from the first row's indexing to the end of the collate (``LoadedBatch.index_s``:
  PyTorch's batched fetch, ``Dataset.__getitems__``, then the collate function), so the trace shows the
  workers' per-row cost apart from the trainer's wait for it.
* ``fused``: one ``index_select`` per matrix per batch into a preallocated (pinned) staging buffer (from files:
  the batch's row reads, in parallel), then one copy into a preallocated device buffer. Under chunk
  reshuffling the batch consists of a few contiguous runs and each run is copied directly into its place in
  the device buffer, one transfer per run and matrix: the chunk DMA of SGD-CR, brief §1.4(d); the chunks land
  at their final offsets, so assembling the batch costs no further copy (from files: one read per run and
  matrix into its place in the staging buffer, then one copy to the device).
* ``double_buffer``: the fused loader with two buffer slots and a producer thread that loads batch i+1 while
  batch i is computed (brief §1.4(c)). A slot is reused only after the consumer asked for the batch after the
  one it holds.

A yielded :class:`LoadedBatch` (its tensors are views of a reused buffer) stays valid until the next batch is
requested. All loaders yield bit-identical tensors for the same rows (tested).

Reshuffling (:func:`epoch_order`): ``random`` = a fresh permutation of the training rows per epoch (SGD-RR);
``chunk`` = a permutation of the ``ceil(n / chunk_size)`` chunks, rows in storage order inside each (SGD-CR).
Each global batch of ``batch_size`` rows is split into W contiguous, near-equal parts, one per worker
(:func:`worker_batches`).
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gnnplan.executor.strategies.ppgnn.files import PLACEMENTS, HopSource
from gnnplan.executor.trace import now
from gnnplan.simulator.strategies.ppgnn.work import BASELINE_WORKERS, IO_THREADS

__all__ = ["BASELINE_WORKERS", "IO_THREADS", "LOADERS", "PLACEMENTS", "RESHUFFLES", "BaselineLoader",
           "DoubleBufferLoader", "FusedLoader", "HopSource", "LoadedBatch", "contiguous_runs", "epoch_order",
           "make_loader", "worker_batches"]

LOADERS = ("baseline", "fused", "double_buffer")
RESHUFFLES = ("random", "chunk")


def epoch_order(num_rows: int, reshuffle: str, chunk_size: int, seed: int, epoch: int) -> np.ndarray:
    """The order training rows are visited in one epoch (module docstring), seeded by ``(seed, epoch)``.

    Raises:
        ValueError: unknown ``reshuffle`` or ``chunk_size < 1``.
    """
    rng = np.random.default_rng((seed, epoch))
    if reshuffle == "random":
        return rng.permutation(num_rows).astype(np.int64)
    if reshuffle != "chunk" or chunk_size < 1:
        raise ValueError(f"reshuffle must be one of {', '.join(RESHUFFLES)} with chunk_size >= 1, "
                         f"got {reshuffle!r}, {chunk_size}")
    starts = rng.permutation(math.ceil(num_rows / chunk_size)).astype(np.int64) * chunk_size
    rows = (starts[:, None] + np.arange(chunk_size, dtype=np.int64)[None, :]).ravel()
    return rows[rows < num_rows]


def worker_batches(order: np.ndarray, batch_size: int, rank: int, world_size: int) -> tuple[list[np.ndarray],
                                                                                             list[int]]:
    """This worker's part of every global batch, and every global batch's size.

    Returns:
        (rows of this worker per iteration, global rows per iteration).
    """
    starts = range(0, len(order), batch_size)
    mine = [np.array_split(order[s:s + batch_size], world_size)[rank] for s in starts]
    return mine, [len(order[s:s + batch_size]) for s in starts]


def contiguous_runs(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split rows into maximal runs of consecutive ids.

    Returns:
        (first row of each run, length of each run), int64.
    """
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    firsts = np.concatenate([[0], breaks])
    lengths = np.diff(np.concatenate([firsts, [len(rows)]]))
    return rows[firsts].astype(np.int64), lengths.astype(np.int64)


@dataclass
class LoadedBatch:
    """One worker's loaded batch.

    Attributes:
        xs: M tensors (b, F) on the device, views of a reused buffer.
        rows: (b,) stored row ids.
        nbytes: bytes loaded (b M F 4).
        num_requests: indexing operations, run copies or file reads issued.
        start_s, end_s: ``perf_counter()`` readings around the load.
        index_s: ``perf_counter()`` readings around the per-row indexing in a ``baseline`` DataLoader worker
            process (CLOCK_MONOTONIC, shared by the processes of the machine); None when the load did it.
    """

    xs: list[torch.Tensor]
    rows: np.ndarray
    nbytes: int
    num_requests: int
    start_s: float
    end_s: float
    index_s: tuple[float, float] | None = None


class _RowDataset(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Per-row items: the row of every matrix (the vanilla PP-GNN dataset)."""

    def __init__(self, source: HopSource) -> None:
        self.source = source

    def __len__(self) -> int:
        return self.source.num_rows

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        src = self.source
        if src.placement == "ssd":
            out = []
            for reader, offset in zip(src.readers, src.offsets):
                row = np.empty(src.feature_dim, np.float32)
                reader.read(offset + i * src.row_bytes, memoryview(row).cast("B"))
                out.append(torch.from_numpy(row))
            return tuple(out)
        return tuple(t[i] for t in self.source.tensors)

    def __getitems__(self, rows: list[int]) -> tuple[float, list[tuple[torch.Tensor, ...]]]:
        """The items of one batch, row by row, and when their indexing began (PyTorch's batched fetch calls this
        with the batch's rows and hands the result to the collate function, :func:`_timed_collate`)."""
        start = now()
        return start, [self[i] for i in rows]


def _timed_collate(fetched: tuple[float, list[tuple[torch.Tensor, ...]]]) -> tuple[Any, torch.Tensor]:
    """``default_collate`` of a batch's items, with ``perf_counter()`` readings at the start of its indexing and
    after the collate (float64 tensor, so they cross the worker's queue with the batch)."""
    start, items = fetched
    parts = torch.utils.data.default_collate(items)
    return parts, torch.tensor([start, now()], dtype=torch.float64)


class BaselineLoader:
    """Per-row indexing through a PyTorch DataLoader (module docstring).

    Args:
        source: the matrices.
        max_rows: largest batch.
        num_workers: DataLoader worker processes (ignored for ``gpu`` placement).
    """

    def __init__(self, source: HopSource, max_rows: int, num_workers: int = BASELINE_WORKERS) -> None:
        self.source = source
        self.num_workers = 0 if source.placement == "gpu" else num_workers
        self.device_buf = torch.empty((source.num_matrices, max_rows, source.feature_dim), device=source.device)

    def batches(self, batches: Sequence[np.ndarray]) -> Iterator[LoadedBatch]:
        """Load the batches in order."""
        src = self.source
        loader = torch.utils.data.DataLoader(
            _RowDataset(src), batch_sampler=[b.tolist() for b in batches if len(b)], num_workers=self.num_workers,
            collate_fn=_timed_collate, pin_memory=torch.cuda.is_available() and src.placement != "gpu",
            multiprocessing_context="fork" if self.num_workers else None)
        it = iter(loader)
        for rows in batches:
            t0 = now()
            b, index_s = len(rows), None
            if b:
                parts, times = next(it)
                index_s = tuple(times.tolist()) if self.num_workers else None
            else:
                parts = tuple(self.device_buf[m, :0] for m in range(src.num_matrices))
            if src.placement == "gpu":
                xs = list(parts)
            else:
                for m, part in enumerate(parts):
                    self.device_buf[m, :b].copy_(part, non_blocking=True)
                xs = [self.device_buf[m, :b] for m in range(src.num_matrices)]
            _sync(src.device)
            yield LoadedBatch(xs, rows, b * src.num_matrices * src.row_bytes, b * src.num_matrices, t0, now(),
                              index_s)  # type: ignore[arg-type]

    def close(self) -> None:
        """Nothing to release (the DataLoader's workers end with each epoch)."""


class FusedLoader:
    """One index operation per matrix per batch into preallocated buffers; contiguous runs are copied or read
    directly to their place in the device buffer (module docstring).

    Args:
        source: the matrices.
        max_rows: largest batch.
        num_slots: buffer sets (2 for double buffering).
        io_threads: threads issuing file reads (``ssd``).
        runs: copy contiguous runs instead of gathering (chunk reshuffling).
    """

    def __init__(self, source: HopSource, max_rows: int, num_slots: int = 1, io_threads: int = IO_THREADS,
                 runs: bool = False) -> None:
        self.source, self.runs = source, runs
        shape = (source.num_matrices, max_rows, source.feature_dim)
        self.device_buf = [torch.empty(shape, device=source.device) for _ in range(num_slots)]
        self.staging = [torch.empty(shape, pin_memory=torch.cuda.is_available())
                        for _ in range(num_slots if source.placement != "gpu" else 0)]
        self.io_threads = io_threads
        self.pool = ThreadPoolExecutor(io_threads) if source.placement == "ssd" else None

    def load(self, rows: np.ndarray, slot: int = 0) -> LoadedBatch:
        """Load one batch into buffer slot ``slot``."""
        t0, src, b = now(), self.source, len(rows)
        dev = self.device_buf[slot]
        if self.runs:
            requests = self._copy_runs(rows, slot)
        elif src.placement == "gpu":
            idx = torch.from_numpy(rows).to(src.device)
            for m, t in enumerate(src.tensors):
                torch.index_select(t, 0, idx, out=dev[m, :b])
            requests = src.num_matrices
        else:
            stage = self.staging[slot]
            if src.placement == "host":
                idx = torch.from_numpy(rows)
                for m, t in enumerate(src.tensors):
                    torch.index_select(t, 0, idx, out=stage[m, :b])
                requests = src.num_matrices
            else:
                self._read_rows(rows, stage)
                requests = b * src.num_matrices
            dev[:, :b].copy_(stage[:, :b], non_blocking=True)
        _sync(src.device)
        return LoadedBatch([dev[m, :b] for m in range(src.num_matrices)], rows,
                           b * src.num_matrices * src.row_bytes, requests, t0, now())

    def _copy_runs(self, rows: np.ndarray, slot: int) -> int:
        src, dev = self.source, self.device_buf[slot]
        firsts, lengths = contiguous_runs(rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        if src.placement != "ssd":
            for m, t in enumerate(src.tensors):
                for first, n, off in zip(firsts.tolist(), lengths.tolist(), offsets.tolist()):
                    dev[m, off:off + n].copy_(t[first:first + n], non_blocking=True)
            return len(firsts) * src.num_matrices
        stage = self.staging[slot]
        assert self.pool is not None  # created for ssd placement
        jobs = [self.pool.submit(src.read_run, m, first, stage[m, off:off + n].numpy())
                for m in range(src.num_matrices)
                for first, n, off in zip(firsts.tolist(), lengths.tolist(), offsets.tolist())]
        for job in jobs:
            job.result()
        b = len(rows)
        dev[:, :b].copy_(stage[:, :b], non_blocking=True)
        return len(jobs)

    def _read_rows(self, rows: np.ndarray, stage: torch.Tensor) -> None:
        """Random rows from the files into the staging buffer: every matrix's rows split among the I/O threads."""
        src, b = self.source, len(rows)
        assert self.pool is not None  # created for ssd placement
        parts = np.array_split(np.arange(b), self.io_threads)
        jobs = [self.pool.submit(src.read_rows, m, rows[p], stage[m, p[0]:p[-1] + 1].numpy())
                for m in range(src.num_matrices) for p in parts if len(p)]
        for job in jobs:
            job.result()

    def batches(self, batches: Iterable[np.ndarray]) -> Iterator[LoadedBatch]:
        """Load the batches in order, one at a time."""
        for rows in batches:
            yield self.load(rows)

    def close(self) -> None:
        """Stop the I/O threads."""
        if self.pool is not None:
            self.pool.shutdown()


class DoubleBufferLoader:
    """A producer thread loads batch i+1 into the other slot of a two-slot :class:`FusedLoader` while batch i
    is computed (module docstring)."""

    def __init__(self, inner: FusedLoader) -> None:
        if len(inner.device_buf) < 2:
            raise ValueError("double buffering needs a FusedLoader with num_slots=2")
        self.inner = inner

    def batches(self, batches: Sequence[np.ndarray]) -> Iterator[LoadedBatch]:
        """Load the batches in order, one ahead of the consumer."""
        ready: queue.Queue[Any] = queue.Queue()
        free = [threading.Semaphore(1), threading.Semaphore(1)]
        stop = threading.Event()

        def produce() -> None:
            try:
                with _side_stream(self.inner.source.device):
                    for i, rows in enumerate(batches):
                        free[i % 2].acquire()
                        if stop.is_set():
                            return
                        ready.put(self.inner.load(rows, i % 2))
                ready.put(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
                ready.put(exc)


        thread = threading.Thread(target=produce, name="ppgnn-prefetch", daemon=True)
        thread.start()
        try:
            for i in range(len(batches)):
                item = ready.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                free[i % 2].release()
        finally:
            stop.set()
            for sem in free:
                sem.release()
            thread.join()

    def close(self) -> None:
        """Stop the I/O threads."""
        self.inner.close()


def make_loader(kind: str, source: HopSource, max_rows: int, reshuffle: str = "random",
                num_workers: int = BASELINE_WORKERS) -> BaselineLoader | FusedLoader | DoubleBufferLoader:
    """The loader of a knob setting.

    Args:
        kind: ``baseline``, ``fused`` or ``double_buffer``.
        source: the matrices.
        max_rows: largest batch.
        reshuffle: ``chunk`` makes the fused loaders copy contiguous runs (SGD-CR).
        num_workers: worker processes of the baseline loader.

    Raises:
        ValueError: unknown loader.
    """
    if kind == "baseline":
        return BaselineLoader(source, max_rows, num_workers)
    if kind not in LOADERS:
        raise ValueError(f"loader must be one of {', '.join(LOADERS)}, got {kind!r}")
    slots = 2 if kind == "double_buffer" else 1
    fused = FusedLoader(source, max_rows, slots, runs=reshuffle == "chunk")
    return fused if kind == "fused" else DoubleBufferLoader(fused)


def _side_stream(device: torch.device) -> Any:
    """A context running the producer's copies on their own CUDA stream (a no-op context on the CPU)."""
    if device.type == "cuda":
        return torch.cuda.stream(torch.cuda.Stream(device))
    return contextlib.nullcontext()


def _sync(device: torch.device) -> None:
    """Wait for asynchronous copies on a CUDA device (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
