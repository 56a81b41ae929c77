"""Data a machine's workers share: one copy per machine in shared memory, as the memory models price it.

A machine runs ``gpus_per_machine`` (g) worker processes. Each would otherwise hold its own copy of the graph
structure and of the machine's feature partition, g times what the simulator's memory models charge per machine
(``graph structure``, ``feature partition``, ``vertex maps (int64)``: once per machine). DistDGL keeps one copy
per machine: its server process loads the partition into shared memory and the trainers of the machine attach
to it (DGL, python/dgl/distributed/dist_graph.py, ``_copy_graph_to_shared_mem`` and ``_get_graph_from_shared_mem``).
Here the machine's local rank 0 builds each object and puts it in shared memory (/dev/shm), the machine's other ranks
attach to it, and once everyone has attached local rank 0 removes its name (the pages live as long as a process
maps them):

* a DGL graph, through DGL's own shared-memory graph (``DGLGraph.shared_memory``, attached with
  ``heterograph_index.create_heterograph_from_shared_memory``) in the formats the trainer samples from;
* an array (a feature partition, GCN's edge weights): a ``.npy`` file in /dev/shm, memory-mapped by every rank.

With one worker per machine nothing is shared: the object is built in the process as before. Local rank 0
reserves an object's room in /dev/shm before writing it (``posix_fallocate``), and the object is shared only if
every machine got its room; otherwise every worker builds its own copy and the local ranks 0 without room warn,
rather than a worker dying of SIGBUS when a page cannot be backed (a container's default /dev/shm is 64 MB:
``docker run --shm-size``). A graph's reservation is released just before DGL writes its arrays, so another process
filling /dev/shm in that instant can still break it. The launchers set the run's token (:data:`TOKEN_ENV`) and
remove its names when the workers have ended (:func:`remove_run_objects`); under ``torchrun`` a worker killed
between creating an object and releasing its name leaves it in /dev/shm.

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
from gnnplan.simulator.strategies.host_memory import STRUCTURE_FORMATS, sparse_structure_bytes

SHM_DIR = Path("/dev/shm")
"""Where POSIX shared memory lives on Linux (shm_overview(7)); DGL's shared-memory graphs are created there."""
PREFIX = "gnnplan-"
"""Names of this package's shared objects start with it (then a run token, the machine and the object)."""
TOKEN_ENV = "GNNPLAN_SHM_TOKEN"
"""The environment variable a launcher sets to the run's token (:func:`new_token`), so that it can remove what a
killed worker left (:func:`remove_run_objects`)."""

__all__ = ["SharedObjects", "new_token", "or_private", "remove_run_objects", "resident_shared_bytes"]


class SharedObjects:
    """This rank's door to its machine's shared objects (construction is collective unless the launcher set the
    run's token in :data:`TOKEN_ENV`: then nothing is exchanged).

    Args:
        topo: this worker's place; objects are shared by the ranks of ``topo.machine``.
        token: the run's token (None: :data:`TOKEN_ENV`, else drawn on rank 0 and broadcast); names must differ
            between concurrent runs. The variable must be set on every rank or on none (the launchers set it for
            every rank), or construction is collective on some ranks only.
        share: False builds every object in the process (not collective), as with one worker per machine.
    """

    def __init__(self, topo: Topology, token: str | None = None, share: bool = True) -> None:
        self.topo = topo
        self.shared = share and topo.gpus_per_machine > 1
        token = token or os.environ.get(TOKEN_ENV)
        if self.shared and not token:
            token = comm.broadcast_object(new_token())
        self.token = token or ""
        self.arrays: dict[str, tuple[str, tuple[int, ...]]] = {}
        """The arrays shared so far, by key: dtype name and shape (what a machine holds once)."""

    def name(self, key: str) -> str:
        """The shared-memory name of object ``key`` on this rank's machine."""
        return f"{PREFIX}{self.token}-m{self.topo.machine}-{key}"

    def graph(self, key: str, build: Callable[[], Any], formats: tuple[str, ...] = STRUCTURE_FORMATS) -> Any:
        """A DGL graph that local rank 0 builds (``build()``, not collective) and the machine's ranks share
        (collective: every rank calls it, in the same order as the other shared objects).

        Args:
            key: the object's name on the machine.
            build: makes the graph (called on local rank 0 only; on every rank when nothing is shared).
            formats: sparse formats built before sharing (the ranks attach to these; a format DGL builds later
                is the process's own).

        Returns:
            The graph (on every rank its structure is the same memory on a machine with several workers, unless
            /dev/shm lacks the room on some machine: then every rank builds its own, with a warning).
        """
        if not self.shared:
            return build()
        from dgl import heterograph_index
        from dgl.heterograph import DGLGraph

        name, own, reserved = self.name(key), None, False
        if self.topo.local_rank == 0:
            own = build()
            nbytes = sparse_structure_bytes(own.num_nodes(), own.num_edges(), formats)
            reserved = _reserve(SHM_DIR / f"{name}.reserve", nbytes)
        if not self._agree(key, reserved):
            _unlink(SHM_DIR / f"{name}.reserve")
            return own if own is not None else build()
        if own is not None:
            _unlink(SHM_DIR / f"{name}.reserve")  # the room it held, now taken by DGL's arrays
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
            lacks the room on some machine, as :meth:`graph`), else ``build()``.
        """
        if not self.shared:
            return build()
        name, values, out = self.name(key), None, None
        path = SHM_DIR / f"{name}.npy"
        if self.topo.local_rank == 0:
            values = np.ascontiguousarray(build())
            try:  # no /dev/shm, or not even room for the header: a fallback like a failed reservation
                out = np.lib.format.open_memmap(path, mode="w+", dtype=values.dtype, shape=values.shape)
                size = path.stat().st_size
            except OSError:
                out, size = None, 0
            if out is not None and not _reserve(path, size):  # the file is sparse until its pages are reserved
                del out
                out = None
            if out is None:
                _unlink(path)
        if not self._agree(key, out is not None):
            _unlink(path)
            return values if values is not None else build()
        if out is not None:
            out[...] = values
            del values
        comm.barrier()
        if self.topo.local_rank != 0:
            out = np.lib.format.open_memmap(path, mode="r+")
        self._release(name)
        self.arrays[key] = (out.dtype.name, tuple(out.shape))
        return out

    def _agree(self, key: str, room: bool) -> bool:
        """Whether object ``key`` is shared: only if every machine's local rank 0 found the room (``room``, its
        reservation in /dev/shm), so that every rank makes the same collective calls (an all-reduce of one flag,
        the minimum over the ranks; the other ranks pass True). A local rank 0 without room warns, once per
        object, that each worker of its machine keeps its own copy."""
        if self.topo.local_rank != 0:
            room = True
        elif not room:
            warnings.warn(f"shared memory: no room for {key} in {SHM_DIR} ({shm_free_bytes() / 1e6:.1f} MB free): "
                          "each worker of the machine keeps its own copy (the memory prediction counts one per "
                          "machine)", RuntimeWarning, stacklevel=3)
        flag = torch.tensor([int(room)], dtype=torch.int64, device=comm.device())
        comm.all_reduce_(flag, "min")
        return bool(flag.item())

    def _release(self, name: str) -> None:
        """After every rank of the machine has attached: local rank 0 removes the object's names (DGL makes one
        per array of a graph, ``<name>...``); the mapped pages stay until the last rank unmaps them."""
        comm.barrier()
        if self.topo.local_rank == 0:
            for path in object_paths(name):
                _unlink(path)


def object_paths(name: str) -> list[Path]:
    """The /dev/shm files of object ``name``: an array's ``.npy``, a graph's reservation, and DGL's files of a
    shared graph (``<name>`` and ``<name><name>_<type>_<format>_<array>``)."""
    return [SHM_DIR / name, SHM_DIR / f"{name}.npy", SHM_DIR / f"{name}.reserve", *SHM_DIR.glob(f"{name}{name}_*")]


def new_token() -> str:
    """A run's token: 12 random hex digits (the names of its shared objects start with ``gnnplan-<token>-``)."""
    return uuid.uuid4().hex[:12]


def remove_run_objects(token: str) -> None:
    """Remove every /dev/shm name of the run ``token`` (a launcher's clean-up after its workers ended: a worker
    killed between creating an object and releasing its name leaves it)."""
    for path in SHM_DIR.glob(f"{PREFIX}{token}-*"):
        _unlink(path)


def _reserve(path: Path, nbytes: float) -> bool:
    """Take ``nbytes`` of /dev/shm for ``path`` (``posix_fallocate``: the pages are allocated now, so a full
    tmpfs is an error here and not a SIGBUS when the object is written); False, with nothing left, when there is
    no room."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        os.posix_fallocate(fd, 0, max(1, int(nbytes)))
        return True
    except OSError:
        _unlink(path)
        return False
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


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
