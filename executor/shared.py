"""Data a machine's workers share: one copy per machine in shared memory, as the memory models price it.

A machine runs ``gpus_per_machine`` (g) worker processes. Each would otherwise hold its own copy of the graph
structure and of the machine's feature partition, g times what the simulator's memory models charge per machine
(``graph structure``, ``feature partition and labels``: once per machine). DistDGL keeps one copy per machine: its
server process loads the partition into shared memory and the trainers of the machine attach to it (DGL,
python/dgl/distributed/dist_graph.py, ``_copy_graph_to_shared_mem`` and ``_get_graph_from_shared_mem``). Here the
machine's local rank 0 builds each object and puts it in shared memory (/dev/shm), the machine's other ranks
attach to it, and once everyone has attached local rank 0 removes its name, so nothing is left in /dev/shm when a
worker dies (the pages live as long as a process maps them):

* a DGL graph, through DGL's own shared-memory graph (``DGLGraph.shared_memory``, attached with
  ``heterograph_index.create_heterograph_from_shared_memory``) in the formats the trainer samples from;
* an array (a feature partition, GCN's edge weights): a ``.npy`` file in /dev/shm, memory-mapped by every rank.

With one worker per machine nothing is shared: the object is built in the process as before. Where /dev/shm lacks
the room for an object (a container's default /dev/shm is 64 MB: ``docker run --shm-size``), every worker builds its
own copy and local rank 0 warns, rather than failing when a page cannot be backed (SIGBUS).

Measuring (:mod:`executor.memory`): every rank's resident set counts the shared pages it touched, so a machine's
sum over ranks would count them up to g times. The creator wrote every page, so its resident set holds all of
them; the machine's other ranks leave out what they map (:func:`resident_shared_bytes`), so the machine's host
peak counts each shared object once, where the kernel charges it (the first toucher's memory cgroup).
"""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology

SHM_DIR = Path("/dev/shm")
"""Where POSIX shared memory lives on Linux (shm_overview(7)); DGL's shared-memory graphs are created there."""
PREFIX = "gnnplan-"
"""Names of this package's shared objects start with it (then a run token, the machine and the object)."""

__all__ = ["SharedObjects", "or_private", "resident_shared_bytes"]


class SharedObjects:
    """This rank's door to its machine's shared objects (construction is collective: rank 0 draws a run token).

    Args:
        topo: this worker's place; objects are shared by the ranks of ``topo.machine``.
        token: the run's token (None: drawn on rank 0 and broadcast); names must differ between concurrent runs.
        share: False builds every object in the process (not collective), as with one worker per machine.
    """

    def __init__(self, topo: Topology, token: str | None = None, share: bool = True) -> None:
        self.topo = topo
        self.shared = share and topo.gpus_per_machine > 1
        if self.shared and token is None:
            token = comm.broadcast_object(uuid.uuid4().hex[:12])
        self.token = token or ""
        self.arrays: dict[str, tuple[str, tuple[int, ...]]] = {}
        """The arrays shared so far, by key: dtype name and shape (what a machine holds once)."""

    def name(self, key: str) -> str:
        """The shared-memory name of object ``key`` on this rank's machine."""
        return f"{PREFIX}{self.token}-m{self.topo.machine}-{key}"

    def graph(self, key: str, build: Callable[[], Any], formats: tuple[str, ...] = ("coo", "csc")) -> Any:
        """A DGL graph that local rank 0 builds (``build()``, not collective) and the machine's ranks share
        (collective: every rank calls it, in the same order as the other shared objects).

        Args:
            key: the object's name on the machine.
            build: makes the graph (called on local rank 0 only; on every rank when nothing is shared).
            formats: sparse formats built before sharing (the ranks attach to these; a format DGL builds later
                is the process's own).

        Returns:
            The graph (on every rank its structure is the same memory on a machine with several workers, unless
            /dev/shm lacks the room: then every rank builds its own, with a warning).
        """
        if not self.shared:
            return build()
        from dgl import heterograph_index
        from dgl.heterograph import DGLGraph

        name, own = self.name(key), None
        if self.topo.local_rank == 0:
            own = build()
            nbytes = graph_bytes(own.num_nodes(), own.num_edges(), formats)
        if not self._agree(key, nbytes if own is not None else 0.0):
            return own if own is not None else build()
        if own is not None:
            out = own.shared_memory(name, formats=formats)
            del own
        comm.barrier()
        if self.topo.local_rank != 0:
            index, ntypes, etypes = heterograph_index.create_heterograph_from_shared_memory(name)
            if index is None:
                raise RuntimeError(f"shared memory: graph {name!r} not found in {SHM_DIR}")
            out = DGLGraph(index, ntypes, etypes)
        self._release(name)
        return out

    def array(self, key: str, build: Callable[[], np.ndarray]) -> np.ndarray:
        """An array that local rank 0 builds (``build()``, not collective) and the machine's ranks map read-write
        (collective, as :meth:`graph`); nobody writes to it after it is built.

        Returns:
            The array: a ``numpy.memmap`` of the shared file on a machine with several workers (unless /dev/shm
            lacks the room, as :meth:`graph`), else ``build()``.
        """
        if not self.shared:
            return build()
        name, path, values = self.name(key), SHM_DIR / f"{self.name(key)}.npy", None
        if self.topo.local_rank == 0:
            values = np.ascontiguousarray(build())
        if not self._agree(key, float(values.nbytes) if values is not None else 0.0):
            return values if values is not None else build()
        if values is not None:
            out = np.lib.format.open_memmap(path, mode="w+", dtype=values.dtype, shape=values.shape)
            out[...] = values
            del values
        comm.barrier()
        if self.topo.local_rank != 0:
            out = np.lib.format.open_memmap(path, mode="r+")
        self._release(name)
        self.arrays[key] = (out.dtype.name, tuple(out.shape))
        return out

    def _agree(self, key: str, nbytes: float) -> bool:
        """Whether the machine shares object ``key``: its local rank 0 says so when ``nbytes`` fit in the free
        room of /dev/shm (:func:`shm_free_bytes`), and every rank learns it (collective: an all-reduce of one flag
        per machine). Otherwise local rank 0 warns once that each worker keeps its own copy."""
        flags = torch.zeros(self.topo.num_machines, dtype=torch.int64)
        if self.topo.local_rank == 0:
            free = shm_free_bytes()
            if nbytes <= free:
                flags[self.topo.machine] = 1
            else:
                warnings.warn(f"shared memory: {key} needs {nbytes / 1e6:.1f} MB, {SHM_DIR} has {free / 1e6:.1f} MB "
                              "free: each worker of the machine keeps its own copy (the memory prediction counts one "
                              "per machine)", RuntimeWarning, stacklevel=3)
        comm.all_reduce_(flags)
        return bool(flags[self.topo.machine])

    def _release(self, name: str) -> None:
        """After every rank of the machine has attached: local rank 0 removes the object's names (DGL makes one
        per array of a graph, ``<name>...``); the mapped pages stay until the last rank unmaps them."""
        comm.barrier()
        if self.topo.local_rank == 0:
            for path in SHM_DIR.glob(f"{name}*"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)


def graph_bytes(num_vertices: int, num_edges: int, formats: tuple[str, ...]) -> float:
    """Bytes of a DGL graph's int64 arrays in ``formats``: COO 2 per edge, CSC and CSR n + 1 offsets and 2 per edge
    (neighbours and edge ids)."""
    per_format = {"coo": 2.0 * num_edges, "csc": num_vertices + 1 + 2.0 * num_edges,
                  "csr": num_vertices + 1 + 2.0 * num_edges}
    return 8.0 * sum(per_format[f] for f in formats)


def shm_free_bytes() -> float:
    """Free bytes in /dev/shm (``statvfs``: available blocks x fragment size), 0 where it does not exist."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return 0.0
    return float(st.f_bavail * st.f_frsize)


def or_private(shared: SharedObjects | None, topo: Topology) -> SharedObjects:
    """``shared``, or where it is None objects this worker builds for itself (not collective)."""
    return shared if shared is not None else SharedObjects(topo, share=False)


def resident_shared_bytes(smaps: Path = Path("/proc/self/smaps")) -> int:
    """Bytes of this package's shared objects resident in this process's address space: the ``Rss`` of every
    mapping of a /dev/shm file named :data:`PREFIX`... (proc(5), /proc/pid/smaps); 0 where smaps is unreadable."""
    total, counting = 0, False
    try:
        with open(smaps) as lines:
            for line in lines:
                head = line.split(maxsplit=1)[0] if line.strip() else ""
                if "-" in head and not head.endswith(":"):  # a mapping's first line: address range, ..., path
                    counting = f"{SHM_DIR}/{PREFIX}" in line
                elif counting and head == "Rss:":
                    total += int(line.split()[1]) * 1024
    except OSError:
        return 0
    return total
