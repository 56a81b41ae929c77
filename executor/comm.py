"""The executor's only caller of ``torch.distributed``: process group set-up and collectives that count bytes.

Every collective adds the bytes this process sends to and receives from OTHER ranks to a per-process
:class:`ByteCounter` (a rank's chunk to itself is a local copy and is not counted). What is counted:

* ``all_to_all_single``: the rows sent to / received from the other ranks, exactly.
* ``all_reduce_`` and the DDP gradient hook: ``2 (p-1)/p * nbytes`` each way, the traffic of a ring
  all-reduce (Patarasuk and Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 69(2), 2009; the same
  formula as :func:`simulator.hardware.collectives.ring_all_reduce_bytes`). The backend may pick another
  algorithm; the count is the ring's, so measured and predicted link bytes use one convention.
* ``all_gather``: ``(p-1) * nbytes`` each way; ``send``/``recv``/``shift``/``isend``/``irecv``: the tensors' bytes.
* object collectives (``gather_object``, ``broadcast_object``): the pickled size, sent once per receiver.

Backend: ``nccl`` when CUDA is available, else ``gloo`` (CPU). With NCCL, tensors passed to collectives must
be on :func:`device`.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from gnnplan.executor.trace import synchronize_spans_on

TIMEOUT = timedelta(minutes=10)
"""Collective timeout: a crashed peer turns into an error instead of a hang."""


@dataclass
class ByteCounter:
    """Bytes this process exchanged with other ranks since the last :func:`reset_counters`."""

    sent: int = 0
    received: int = 0

    def add(self, sent: float, received: float) -> None:
        """Count one exchange."""
        self.sent += int(sent)
        self.received += int(received)


COUNTER = ByteCounter()
_device = torch.device("cpu")


def default_backend() -> str:
    """``nccl`` if CUDA is available, else ``gloo``."""
    return "nccl" if torch.cuda.is_available() else "gloo"


def init_process_group(rank: int, world_size: int, master_addr: str, master_port: int,
                       backend: str | None = None, local_rank: int = 0) -> str:
    """Join the process group (TCP rendezvous at ``master_addr:master_port``) and reset the byte counters.

    Args:
        rank: this process's rank.
        world_size: number of processes.
        master_addr: address of rank 0.
        master_port: a free TCP port on rank 0.
        backend: ``gloo`` or ``nccl``; None picks :func:`default_backend`.
        local_rank: this process's index on its machine (selects the CUDA device with NCCL).

    Returns:
        The backend used.
    """
    global _device
    backend = backend or default_backend()
    if backend == "nccl":
        _device = torch.device("cuda", local_rank)
        torch.cuda.set_device(_device)
    else:
        _device = torch.device("cpu")
    synchronize_spans_on(_device)
    dist.init_process_group(backend, init_method=f"tcp://{master_addr}:{master_port}", rank=rank,
                            world_size=world_size, timeout=TIMEOUT)
    reset_counters()
    return backend


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
    """Leave the process group (no-op if not in one)."""
    if is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    """Wait for every rank."""
    dist.barrier()


def bytes_sent() -> int:
    """Bytes sent to other ranks since the last reset."""
    return COUNTER.sent


def bytes_received() -> int:
    """Bytes received from other ranks since the last reset."""
    return COUNTER.received


def reset_counters() -> None:
    """Zero the byte counters."""
    COUNTER.sent = COUNTER.received = 0


def ring_bytes(nbytes: float, num_ranks: int) -> float:
    """Bytes each rank sends (and receives) in a ring all-reduce of ``nbytes``: ``2 (p-1)/p * nbytes``.

    Source: Patarasuk and Yuan, JPDC 69(2), 2009, §3 (bandwidth-optimal ring all-reduce).
    """
    return 0.0 if num_ranks <= 1 else 2.0 * (num_ranks - 1) / num_ranks * nbytes


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
    n = ring_bytes(_nbytes(t), world_size())
    COUNTER.add(n, n)
    dist.all_reduce(t, op=ops[op])
    return t


def all_to_all_single(out: torch.Tensor, inp: torch.Tensor, out_splits: list[int],
                      in_splits: list[int]) -> torch.Tensor:
    """Personalised exchange: rank r sends ``inp``'s ``in_splits[j]`` rows (in order) to rank j and receives
    ``out_splits[j]`` rows from rank j into ``out``.

    Shapes:
        inp: (sum(in_splits), *row); out: (sum(out_splits), *row).

    Returns:
        ``out``.
    """
    me = rank()
    row = _nbytes(inp[:1]) if inp.shape[0] else _nbytes(out[:1]) if out.shape[0] else 0
    COUNTER.add(row * (sum(in_splits) - in_splits[me]), row * (sum(out_splits) - out_splits[me]))
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    return out


def all_gather(t: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's ``t`` (same shape on all ranks), in rank order."""
    p = world_size()
    COUNTER.add((p - 1) * _nbytes(t), (p - 1) * _nbytes(t))
    out = [torch.empty_like(t) for _ in range(p)]
    dist.all_gather(out, t)
    return out


def send(t: torch.Tensor, dst: int) -> None:
    """Send ``t`` to rank ``dst`` (blocking)."""
    COUNTER.add(_nbytes(t), 0)
    dist.send(t, dst)


def recv(t: torch.Tensor, src: int) -> torch.Tensor:
    """Receive into ``t`` from rank ``src`` (blocking); returns ``t``."""
    COUNTER.add(0, _nbytes(t))
    dist.recv(t, src)
    return t


def shift(send_t: torch.Tensor, dst: int, recv_t: torch.Tensor, src: int) -> torch.Tensor:
    """Send ``send_t`` to rank ``dst`` while receiving ``recv_t`` from rank ``src`` (one step of a ring shift:
    both transfers are posted before either is waited on, so a ring of these cannot deadlock); returns
    ``recv_t``. With ``dst == src ==`` this rank it is a local copy (not counted)."""
    if dst == rank() and src == rank():
        return recv_t.copy_(send_t)
    COUNTER.add(_nbytes(send_t), _nbytes(recv_t))
    requests = [dist.isend(send_t, dst), dist.irecv(recv_t, src)]
    for request in requests:
        if request is not None:  # None only for a rank outside the group
            request.wait()
    return recv_t


def isend(t: torch.Tensor, dst: int) -> Any:
    """Start sending ``t`` to rank ``dst``; returns the request (``.wait()`` it). Counts ``t``'s bytes as sent."""
    COUNTER.add(_nbytes(t), 0)
    return dist.isend(t, dst)


def irecv(t: torch.Tensor, src: int) -> Any:
    """Start receiving into ``t`` from rank ``src``; returns the request (``.wait()`` it). Counts ``t``'s bytes as
    received."""
    COUNTER.add(0, _nbytes(t))
    return dist.irecv(t, src)


def gather_object(obj: Any, dst: int = 0) -> list[Any] | None:
    """Gather a picklable object from every rank on ``dst``.

    Returns:
        On ``dst`` the objects in rank order, elsewhere None.
    """
    n = len(pickle.dumps(obj))
    me = rank()
    out: list[Any] | None = [None] * world_size() if me == dst else None
    if me != dst:
        COUNTER.add(n, 0)
    dist.gather_object(obj, out, dst=dst)
    if out is not None:
        COUNTER.add(0, sum(len(pickle.dumps(o)) for i, o in enumerate(out) if i != dst))
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``src``'s object on every rank."""
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    n = len(pickle.dumps(box[0]))
    COUNTER.add(n * (world_size() - 1) if rank() == src else 0, 0 if rank() == src else n)
    return box[0]


class GradientHook:
    """A DDP communication hook that averages gradient buckets with an all-reduce, like DDP's default
    (``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook``), and also counts the
    bytes and notes when the first bucket of an iteration was launched (the end of the backward computation
    when the model fits one bucket).

    Attributes:
        first_launch_s: ``time.perf_counter()`` of the first bucket launched since :meth:`reset` (None if none).
        nbytes: gradient bytes all-reduced since :meth:`reset`.
    """

    def __init__(self) -> None:
        self.first_launch_s: float | None = None
        self.nbytes = 0

    def reset(self) -> None:
        """Start a new iteration."""
        self.first_launch_s = None
        self.nbytes = 0

    def register(self, ddp_model: torch.nn.parallel.DistributedDataParallel) -> None:
        """Install this hook on a DDP model."""
        ddp_model.register_comm_hook(self, _gradient_hook)


BUCKET_CAP_MB = 4096
"""DDP bucket size limit in MiB: large enough that the gradients of the models here form one bucket, so the
all-reduce starts when backward ends (the order the simulator models)."""


def data_parallel(model: torch.nn.Module) -> tuple[torch.nn.Module, GradientHook]:
    """The module to train with and its gradient hook: ``model`` wrapped in DistributedDataParallel (one bucket
    of :data:`BUCKET_CAP_MB`, the hook installed), or, with one rank, ``model`` itself and an idle hook (there
    is nothing to reduce, and DDP's reducer costs ~10% of a small model's iteration).

    Args:
        model: the model, already on :func:`device`'s kind of device for this rank.
    """
    hook = GradientHook()
    if world_size() == 1:
        return model, hook
    param = next(model.parameters(), None)
    device_ids = [param.device] if param is not None and param.device.type == "cuda" else None
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=BUCKET_CAP_MB)
    hook.register(net)
    return net, hook


def _gradient_hook(state, bucket):  # type: ignore[no-untyped-def]
    """DDP hook ``(GradientHook, dist.GradBucket) -> Future[Tensor]``; unannotated because DDP compares the
    annotations with the real types and this module uses postponed (string) annotations."""
    if state.first_launch_s is None:
        state.first_launch_s = time.perf_counter()
    tensor = bucket.buffer()
    state.nbytes += _nbytes(tensor)
    p = world_size()
    n = ring_bytes(_nbytes(tensor), p)
    COUNTER.add(n, n)
    tensor.div_(p)
    return dist.all_reduce(tensor, async_op=True).get_future().then(lambda fut: fut.value()[0])
