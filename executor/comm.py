"""The executor's only caller of ``torch.distributed``: process group set-up and collectives that count bytes.

Every collective counts the bytes this process sends to and receives from OTHER ranks, and which of them stay
inside its machine, in :mod:`executor.traffic` (what is counted, and the convention: there); the counters are
re-exported here.

Backend: ``nccl`` when CUDA is available, else ``gloo`` (CPU). With NCCL, tensors passed to collectives must
be on :func:`device`.

Rendezvous: rank 0 binds the store's listening socket to the address it is given (``127.0.0.1`` for local runs)
and hands it to ``TCPStore(master_listen_fd=...)``; with ``init_method="tcp://..."`` the store listens on every
interface (checked with ``ss -ltn``: ``*:PORT``). For a loopback address gloo's own sockets are put on the
loopback interface too (``GLOO_SOCKET_IFNAME``). Under torchrun's agent store (``TORCHELASTIC_USE_AGENT_STORE``)
every rank is a client of the agent's store.

Timeouts: every collective fails after :data:`COLLECTIVE_TIMEOUT_S` (or the ``timeout_s`` given to
:func:`init_process_group`) instead of waiting forever for a peer that died or hangs; gloo applies the process
group's timeout to each collective (pytorch/pytorch#40948, ProcessGroupGloo work-level timeouts). Waits while one
rank prepares data for the others (:func:`barrier` with ``timeout_s``) use their own, longer limit.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gnnplan.executor import wire
from gnnplan.executor.gloo_loop import idle_gloo_loop
from gnnplan.executor.trace import synchronize_spans_on
from gnnplan.executor.traffic import COUNTER as COUNTER
from gnnplan.executor.traffic import ByteCounter as ByteCounter
from gnnplan.executor.traffic import all_reduce_split
from gnnplan.executor.traffic import bytes_received as bytes_received
from gnnplan.executor.traffic import bytes_sent as bytes_sent
from gnnplan.executor.traffic import reset_counters as reset_counters
from gnnplan.executor.traffic import ring_bytes as ring_bytes
from gnnplan.executor.traffic import traffic_mark as traffic_mark
from gnnplan.executor.traffic import traffic_since as traffic_since

COLLECTIVE_TIMEOUT_S = 60.0
"""Default collective timeout in seconds: a peer that died or stopped responding turns into an error after this
long instead of a hang (``gnnplan run --collective-timeout``)."""

SETUP_TIMEOUT_S = 3600.0
"""How long ranks wait at a set-up barrier while one rank loads, generates or partitions the dataset (METIS on a
large graph takes minutes)."""

RENDEZVOUS_TIMEOUT_S = 600.0
"""How long a rank waits for the rendezvous store and its peers to join (the executor's former timeout)."""

_store: Any = None


_device = torch.device("cpu")
_per_machine = 1
"""Ranks per machine (``gpus_per_machine``): rank r is on machine r // _per_machine."""


def same_machine(peer: int) -> bool:
    """Whether rank ``peer`` runs on this process's machine."""
    return peer // _per_machine == rank() // _per_machine


def _machine_peers() -> int:
    """The other ranks on this process's machine."""
    me = rank()
    return sum(same_machine(j) for j in range(world_size()) if j != me)


def _count_send(nbytes: int, dst: int) -> None:
    """Count ``nbytes`` sent to rank ``dst`` (within the machine when ``dst`` is on it)."""
    COUNTER.add(nbytes, 0, nbytes if same_machine(dst) else 0)


def all_reduce_counts(nbytes: float) -> tuple[float, float]:
    """(bytes sent, of which within the machine) by this rank in an all-reduce of ``nbytes`` on this process group
    (:func:`executor.traffic.all_reduce_split`)."""
    return all_reduce_split(nbytes, world_size(), _per_machine)


def default_backend() -> str:
    """``nccl`` if CUDA is available, else ``gloo``."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def init_process_group(rank: int, world_size: int, master_addr: str, master_port: int,
                       backend: str | None = None, local_rank: int = 0,
                       timeout_s: float = COLLECTIVE_TIMEOUT_S, gpus_per_machine: int = 1) -> str:
    """Join the process group (TCP rendezvous at ``master_addr:master_port``, the store listening on
    ``master_addr`` only) and reset the byte counters. With gloo, its TCP event-loop thread is put in
    ``SCHED_IDLE`` (:func:`executor.gloo_loop.idle_gloo_loop`: it spins while a collective is in flight, and on a
    core the process cannot spare it delayed the collective's own thread by a time slice).

    Args:
        rank: this process's rank.
        world_size: number of processes.
        master_addr: address of rank 0 (an IP address or host name; the store listens on it alone).
        master_port: a free TCP port on rank 0.
        backend: ``gloo`` or ``nccl``; None picks :func:`default_backend`.
        local_rank: this process's index on its machine (selects the CUDA device with NCCL).
        timeout_s: collective timeout in seconds (module docstring).
        gpus_per_machine: ranks per machine (rank r on machine r // gpus_per_machine): which bytes stay inside a
            machine (:func:`executor.traffic.traffic_since`).

    Returns:
        The backend used.

    Raises:
        ValueError: ``timeout_s`` is not a positive finite number.
        OSError: rank 0 cannot listen on ``master_addr:master_port``.
    """
    global _device, _store, _per_machine
    if not (0 < timeout_s < float("inf")):
        raise ValueError(f"collective timeout: must be a positive number of seconds, got {timeout_s}")
    backend = backend or default_backend()
    if backend == "nccl":
        _device = torch.device("cuda", local_rank)
        torch.cuda.set_device(_device)
    else:
        _device = torch.device("cpu")
    synchronize_spans_on(_device)
    _store = _rendezvous_store(rank, world_size, master_addr, master_port)
    with _gloo_interface(master_addr if backend == "gloo" else None):
        dist.init_process_group(backend, store=_store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout_s))
    if backend == "gloo":
        idle_gloo_loop()
    _per_machine = max(1, gpus_per_machine)
    reset_counters()
    return backend


def _rendezvous_store(rank: int, world_size: int, addr: str, port: int) -> Any:
    """Rank 0's store server on a socket bound to ``addr`` alone; a client elsewhere (module docstring)."""
    wait = timedelta(seconds=RENDEZVOUS_TIMEOUT_S)
    if rank != 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return dist.TCPStore(addr, port, world_size, False, wait)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((addr, port))
        listener.listen(max(128, world_size))
    except OSError:
        listener.close()
        raise
    # the store takes the descriptor over and closes it when it is destroyed: Python must not close it too
    return dist.TCPStore(addr, port, world_size, True, wait, wait_for_workers=False,
                         master_listen_fd=listener.detach())


@contextlib.contextmanager
def _gloo_interface(addr: str | None) -> Iterator[None]:
    """While gloo creates its device: its sockets on the loopback interface when the rendezvous address is a
    loopback address (a run on one machine), unless ``GLOO_SOCKET_IFNAME`` is set already; the environment is
    restored afterwards."""
    try:
        loopback = addr is not None and ipaddress.ip_address(addr).is_loopback
    except ValueError:
        loopback = addr == "localhost"
    name = loopback_interface() if loopback and "GLOO_SOCKET_IFNAME" not in os.environ else None
    if name:
        os.environ["GLOO_SOCKET_IFNAME"] = name
    try:
        yield
    finally:
        if name:
            os.environ.pop("GLOO_SOCKET_IFNAME", None)


def loopback_interface() -> str | None:
    """The name of this machine's loopback interface (``IFF_LOOPBACK`` in ``/sys/class/net/*/flags``)."""
    iff_loopback = 0x8  # linux/if.h
    for path in sorted(Path("/sys/class/net").glob("*/flags")):
        try:
            if int(path.read_text().strip(), 16) & iff_loopback:
                return path.parent.name
        except (OSError, ValueError):
            continue
    return None


def device() -> torch.device:
    """Where tensors handed to collectives must live (CUDA with NCCL, else CPU)."""
    return _device


def is_initialized() -> bool:
    """Whether this process is in a process group."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank (0 outside a process group)."""
    return dist.get_rank() if is_initialized() else 0


def world_size() -> int:
    """Number of ranks (1 outside a process group)."""
    return dist.get_world_size() if is_initialized() else 1


def destroy() -> None:
    """Leave the process group (no-op if not in one) and drop the store (rank 0's closes its socket)."""
    global _store
    if is_initialized():
        dist.destroy_process_group()
    _store = None


def barrier(timeout_s: float | None = None) -> None:
    """Wait for every rank.

    Args:
        timeout_s: fail after this many seconds instead of the collective timeout (set-up waits, module
            docstring); with gloo through ``monitored_barrier``, whose error names the ranks that did not arrive.
    """
    if timeout_s is not None and dist.get_backend() == "gloo" and world_size() > 1:
        dist.monitored_barrier(timeout=timedelta(seconds=timeout_s))
    else:
        dist.barrier()


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def all_reduce_(t: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """Reduce ``t`` in place over all ranks.

    Args:
        t: the tensor (on :func:`device`).
        op: ``sum``, ``max`` or ``min``.

    Returns:
        ``t``.
    """
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    n, within = all_reduce_counts(_nbytes(t))
    COUNTER.add(n, n, within)
    dist.all_reduce(t, op=ops[op])
    return t


def max_over_ranks(value: float) -> float:
    """The largest ``value`` any rank passes (collective: every rank calls it), e.g. the last rank's arrival time
    on a clock the ranks share, or the slowest rank's epoch seconds. One float64 all-reduce (``max``) of a tensor
    on :func:`device` (NCCL reduces only device tensors)."""
    return float(all_reduce_(torch.tensor([value], dtype=torch.float64, device=device()), "max").item())


RECEIVE_FIRST_MIN_S = 0.0
"""Shortest per-peer transfer (seconds at the link rate, :func:`set_link_rate`) for which
:func:`all_to_all_single` posts its receives before its sends instead of calling gloo's ``alltoallv``: 0, every
exchange between machines. It was 5 ms while gloo's event-loop thread spun during collectives: each point-to-point
wait then cost a wake-up (unshaped, 128 B - 368 kB took 0.4-0.8 ms with ``alltoallv`` and 1.7-2.5 ms receive-first,
2026-11-23). With that thread in SCHED_IDLE (:mod:`executor.gloo_loop`) receive-first is at worst 1% slower, and
``alltoallv`` makes a late rank's incoming payload wait for its outgoing one (:func:`post_exchange`):
benchmarks/bench_alltoallv_turns.py (two emulated machines at 300 Mbit/s - 3 Gbit/s and unshaped, swaps after
compute, both protocols in the same run, 2026-11-28), late rank's median, ``alltoallv`` over receive-first: with
both on time 1.00-1.09x at 600 kB and 1.475 MB (0.99x for 1.475 MB at 3 Gbit/s in a re-run), 1.02-1.46x at
148 kB; with one rank 3 ms late 1.03-2.07x at 148 kB - 1.475 MB, at least 1.79x in 7 of the 9 shaped cases
(1.475 MB at 3 Gbit/s: 7.33 against 3.72 ms, one way 4.05 ms); 1.14-2.01x at 16 kB."""

_link_bytes_per_s: float | None = None


def set_link_rate(bytes_per_s: float | None) -> None:
    """The network rate (bytes/s) between this rank's machine and the others' machines, which
    :func:`all_to_all_single` picks its protocol by; None (the default) when every rank is on one machine."""
    global _link_bytes_per_s
    _link_bytes_per_s = bytes_per_s


def receive_first(chunk_bytes: float) -> bool:
    """Whether an exchange whose largest per-peer chunk is ``chunk_bytes`` posts its receives first: on gloo, across
    machines, when that chunk takes at least :data:`RECEIVE_FIRST_MIN_S` at the link rate."""
    return (_link_bytes_per_s is not None and dist.get_backend() == "gloo"
            and chunk_bytes >= RECEIVE_FIRST_MIN_S * _link_bytes_per_s)


def all_to_all_single(out: torch.Tensor, inp: torch.Tensor, out_splits: list[int],
                      in_splits: list[int]) -> torch.Tensor:
    """Personalised exchange: rank r sends ``inp``'s ``in_splits[j]`` rows (in order) to rank j and receives
    ``out_splits[j]`` rows from rank j into ``out``.

    Protocol: gloo's ``alltoallv`` posts each peer's send before its receive, and a send leaves only once the
    peer's ready-to-receive notice has arrived, which travels behind that peer's own outgoing payload
    (:func:`post_exchange`): when one side arrives late, its incoming payload waits for its outgoing one, up to one
    extra transfer. So a pair whose larger chunk takes at least :data:`RECEIVE_FIRST_MIN_S` at the link rate
    (:func:`receive_first`: with the threshold at 0, every pair of ranks on different machines; both ranks of a
    pair know both its chunks, so they agree) exchanges point to point, every receive posted before any send; the
    other pairs go through the backend's own collective. With two ranks the collective is skipped when their one
    pair went point to point; with more, every rank joins it (sizes 0 for its point-to-point pairs), because no
    rank knows the other pairs.

    Shapes:
        inp: (sum(in_splits), *row); out: (sum(out_splits), *row).

    Returns:
        ``out``.
    """
    me, p = rank(), world_size()
    row = _nbytes(inp[:1]) if inp.shape[0] else _nbytes(out[:1]) if out.shape[0] else 0
    machine = me // _per_machine
    COUNTER.add(row * (sum(in_splits) - in_splits[me]), row * (sum(out_splits) - out_splits[me]),
                row * sum(n for j, n in enumerate(in_splits) if j != me and j // _per_machine == machine))
    direct = [j != me and receive_first(row * max(in_splits[j], out_splits[j])) for j in range(p)]
    if not any(direct):
        dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
        return out
    outs, ins = torch.split(out, out_splits), torch.split(inp.contiguous(), in_splits)
    requests = [dist.irecv(outs[j], j) for j in range(p) if direct[j] and out_splits[j]]
    requests += [dist.isend(ins[j], j) for j in range(p) if direct[j] and in_splits[j]]
    if p > 2:
        kept_out = [0 if direct[j] else n for j, n in enumerate(out_splits)]
        kept_in = [0 if direct[j] else n for j, n in enumerate(in_splits)]
        got = out.new_empty((sum(kept_out), *out.shape[1:]))
        dist.all_to_all_single(got, torch.cat([ins[j] for j in range(p) if not direct[j]]),
                               output_split_sizes=kept_out, input_split_sizes=kept_in)
        for j, piece in enumerate(torch.split(got, kept_out)):
            if not direct[j]:
                outs[j].copy_(piece)
    else:
        outs[me].copy_(ins[me])
    for request in requests:
        request.wait()
    return out


def all_gather(t: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's ``t`` (same shape on all ranks), in rank order."""
    p = world_size()
    COUNTER.add((p - 1) * _nbytes(t), (p - 1) * _nbytes(t), _machine_peers() * _nbytes(t))
    out = [torch.empty_like(t) for _ in range(p)]
    dist.all_gather(out, t)
    return out


def send(t: torch.Tensor, dst: int) -> None:
    """Send ``t`` to rank ``dst`` (blocking)."""
    _count_send(_nbytes(t), dst)
    dist.send(t, dst)


def recv(t: torch.Tensor, src: int) -> torch.Tensor:
    """Receive into ``t`` from rank ``src`` (blocking); returns ``t``."""
    COUNTER.add(0, _nbytes(t))
    dist.recv(t, src)
    return t


def shift(send_t: torch.Tensor, dst: int, recv_t: torch.Tensor, src: int) -> torch.Tensor:
    """Send ``send_t`` to rank ``dst`` while receiving ``recv_t`` from rank ``src``: one step of a ring shift,
    collective (every rank calls it with its own ring neighbours); returns ``recv_t``. With ``dst == src ==``
    this rank it is a local copy (not counted). An :func:`all_to_all_single` of the flattened tensors (sizes 0 to
    every other rank): receive-first across machines, so a late rank does not hold its peer's back."""
    if dst == rank() and src == rank():
        return recv_t.copy_(send_t)
    p = world_size()
    in_splits, out_splits = [0] * p, [0] * p
    in_splits[dst], out_splits[src] = send_t.numel(), recv_t.numel()
    all_to_all_single(recv_t.view(-1), send_t.reshape(-1), out_splits, in_splits)
    return recv_t


def post_exchange(send_t: torch.Tensor | None, dst: int, recv_t: torch.Tensor | None, src: int) -> list[Any]:
    """Post the receive of ``recv_t`` from ``src``, then the send of ``send_t`` to ``dst`` (either may be None);
    returns the requests to ``.wait()``. Counts the bytes. For exchanges that are not collective calls (a ring
    step whose sizes only the pair knows).

    The order matters on gloo: a send leaves only once the peer's "ready to receive" notice has arrived, and
    that notice travels on the same TCP connection as the peer's own outgoing data (gloo
    ``transport/tcp/pair.cc``: ``Pair::handleRemotePendingRecv``, ``sendNotifyRecvReady``). A rank that posted
    its send first queues its notice behind its payload, so in a two-way exchange where it arrives late its peer's
    payload waits for its whole payload: measured on two emulated machines at 100 Mbit/s, 1.475 MB each way, the
    late rank took 242-249 ms with send first and 123 ms with receive first (one way: 121 ms; 2026-11-23).
    """
    requests = []
    if recv_t is not None:
        COUNTER.add(0, _nbytes(recv_t))
        requests.append(dist.irecv(recv_t, src))
    if send_t is not None:
        _count_send(_nbytes(send_t), dst)
        requests.append(dist.isend(send_t, dst))
    return [r for r in requests if r is not None]  # None only for a rank outside the group


def gather_object(obj: Any, dst: int = 0) -> list[Any] | None:
    """Gather an object from every rank on ``dst``, as JSON (:mod:`executor.wire`: JSON values, tensors, arrays,
    gnnplan dataclasses and pydantic models).

    Returns:
        On ``dst`` the objects in rank order, elsewhere None.

    Raises:
        TypeError: ``obj`` holds a value that cannot cross (:func:`executor.wire.encode`).
    """
    data = wire.encode(obj)
    p, me = world_size(), rank()
    sizes = [torch.zeros(1, dtype=torch.int64, device=_device) for _ in range(p)]
    dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.int64, device=_device))
    lengths = [int(t.item()) for t in sizes]
    buf = _bytes_tensor(data, max(lengths))
    if me != dst:
        _count_send(len(data), dst)
        dist.gather(buf, None, dst=dst)
        return None
    out = [torch.empty(max(lengths), dtype=torch.uint8, device=_device) for _ in range(p)]
    dist.gather(buf, out, dst=dst)
    COUNTER.add(0, sum(n for i, n in enumerate(lengths) if i != dst))
    return [wire.decode(t[:n].cpu().numpy().tobytes()) for t, n in zip(out, lengths)]


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``src``'s object on every rank, as JSON (:mod:`executor.wire`); other ranks' ``obj`` is ignored."""
    data = wire.encode(obj) if rank() == src else b""
    size = torch.tensor([len(data)], dtype=torch.int64, device=_device)
    dist.broadcast(size, src=src)
    n = int(size.item())
    buf = _bytes_tensor(data, n)
    dist.broadcast(buf, src=src)
    if rank() == src:
        COUNTER.add(n * (world_size() - 1), 0, n * _machine_peers())
    else:
        COUNTER.add(0, n)
    return wire.decode(buf.cpu().numpy().tobytes())


def _bytes_tensor(data: bytes, length: int) -> torch.Tensor:
    """``data`` in a uint8 tensor of ``length`` (zero-padded) on :func:`device`."""
    buf = torch.zeros(length, dtype=torch.uint8)
    if data:
        buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return buf.to(_device)
