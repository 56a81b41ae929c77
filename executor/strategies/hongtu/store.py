"""Where ``hongtu``'s data live on this machine: the host-side store of every layer's vertex data (shared memory)
and the byte budget of a worker's working set (the "GPU" memory, brief ../shared/papers/hongtu.md §1.11).

* :class:`HostStore`: per layer full vertex tensors in shared memory (files under ``/dev/shm`` mapped with
  ``torch.from_file(shared=True)``, one mapping per process, the files unlinked once every rank has mapped them):
  h^l for l = 0..L-1 (h^0 = the input features), the GCN checkpoints a^l for l = 0..L-1, and ∇h^l for l = 1..L.
  Each machine's host holds its own vertices' rows (the NUMA-aware placement of brief §1.2): a worker writes and
  reads only the rows of the vertices its machine owns; other rows reach it through their owner (comm.py).
* :class:`WorkingSet`: the tensors a worker holds, by name; its byte count is the sum of the distinct storages
  (views and tensors sharing memory are counted once), its peak is tracked, and holding more than the budget
  raises :class:`WorkerOutOfMemory`, as a GPU allocation would fail.

Notation as :mod:`simulator.strategies.hongtu`: h^l -> ``HostStore.h[l]``, ∇h^l -> ``HostStore.grad[l]``, the GCN
checkpoint a^l -> ``HostStore.a[l]``; the paper's GPU memory -> :class:`WorkingSet`.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm

SHM_DIR = Path("/dev/shm")
"""Linux's shared-memory file system (a temporary directory serves elsewhere)."""


class WorkerOutOfMemory(MemoryError):
    """A worker's working set exceeded its memory budget."""


class HostStore:
    """The host-side vertex data of every layer (module docstring); construction is collective.

    Args:
        num_vertices: |V|.
        widths: d_0 .. d_L.
        checkpoints: keep a^l (GCN's hybrid policy).
        owned: (k,) int64 vertices of this worker's machine.
        features: (|V|, d_0) float32 input features (only the owned rows are written).

    Shapes:
        h[l], a[l]: (|V|, d_l) for l = 0..L-1; grad[l]: (|V|, d_l) for l = 1..L (a mapping without key 0).
    """

    def __init__(self, num_vertices: int, widths: list[int], checkpoints: bool, owned: np.ndarray,
                 features: np.ndarray) -> None:
        layers = len(widths) - 1
        folder = SHM_DIR if SHM_DIR.is_dir() else Path(tempfile.gettempdir())
        tag = comm.broadcast_object(f"gnnplan-hongtu-{os.getpid()}-{uuid.uuid4().hex}")
        names = [(f"h{k}", widths[k]) for k in range(layers)] + [(f"g{k}", widths[k]) for k in range(1, layers + 1)]
        names += [(f"a{k}", widths[k]) for k in range(layers)] if checkpoints else []
        paths = {name: folder / f"{tag}-{name}" for name, _ in names}
        if comm.rank() == 0:
            for name, width in names:
                with open(paths[name], "wb") as fh:
                    fh.truncate(4 * num_vertices * width)
        comm.barrier()
        maps = {name: torch.from_file(str(paths[name]), shared=True, size=num_vertices * width,
                                      dtype=torch.float32).view(num_vertices, width) for name, width in names}
        comm.barrier()
        if comm.rank() == 0:
            for path in paths.values():
                path.unlink()
        self.h: list[torch.Tensor] = [maps[f"h{k}"] for k in range(layers)]
        self.grad: dict[int, torch.Tensor] = {k: maps[f"g{k}"] for k in range(1, layers + 1)}
        self.a: list[torch.Tensor] = [maps[f"a{k}"] for k in range(layers)] if checkpoints else []
        self.owned = torch.from_numpy(owned)
        self.h[0][self.owned] = torch.from_numpy(features[owned])
        comm.barrier()

    def zero_gradients(self) -> None:
        """Zero this machine's rows of every ∇h^l (the start of a backward pass)."""
        for g in self.grad.values():
            g.index_fill_(0, self.owned, 0.0)


def _storages(tensors: Iterable[Any]) -> dict[int, int]:
    """Distinct storages (data pointer -> bytes) of the given tensors (sparse CSR: its three parts)."""
    out: dict[int, int] = {}
    for t in tensors:
        if t is None:
            continue
        if isinstance(t, torch.Tensor) and t.layout == torch.sparse_csr:
            out.update(_storages((t.crow_indices(), t.col_indices(), t.values())))
            continue
        storage = t.untyped_storage()
        out[storage.data_ptr()] = storage.nbytes()
    return out


class WorkingSet:
    """The tensors one worker holds, by name, against a byte budget (module docstring).

    Args:
        budget_bytes: the worker's memory (the cluster's ``gpu.memory_bytes``).
    """

    def __init__(self, budget_bytes: float) -> None:
        self.budget_bytes = budget_bytes
        self.held: dict[str, dict[int, int]] = {}
        self.peak_bytes = 0
        self.peak_parts: dict[str, int] = {}

    def hold(self, name: str, *tensors: Any) -> None:
        """Hold ``tensors`` under ``name`` (replacing what that name held).

        Raises:
            WorkerOutOfMemory: the working set now exceeds the budget.
        """
        self.held[name] = _storages(tensors)
        self._check()

    def add(self, name: str, *tensors: Any) -> None:
        """Hold ``tensors`` under ``name`` too (kept with what it holds)."""
        self.held.setdefault(name, {}).update(_storages(tensors))
        self._check()

    def drop(self, *names: str) -> None:
        """Stop holding what ``names`` hold."""
        for name in names:
            self.held.pop(name, None)

    @property
    def current_bytes(self) -> int:
        """Bytes of the distinct storages held now."""
        merged: dict[int, int] = {}
        for storages in self.held.values():
            merged.update(storages)
        return sum(merged.values())

    def _check(self) -> None:
        now = self.current_bytes
        if now > self.peak_bytes:
            self.peak_bytes = now
            self.peak_parts = {k: sum(v.values()) for k, v in self.held.items()}
        if now > self.budget_bytes:
            parts = ", ".join(f"{k} {sum(v.values())}" for k, v in sorted(self.held.items()))
            raise WorkerOutOfMemory(f"out of worker memory: {now} bytes held, budget {self.budget_bytes:.0f} "
                                    f"({parts})")

    def saving(self) -> Any:
        """A context that holds every tensor autograd saves for the backward pass under ``"saved"``."""
        def pack(t: torch.Tensor) -> torch.Tensor:
            self.add("saved", t)
            return t

        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
