"""DistributedDataParallel as the executor trains with it: buckets capped by ``training.ddp_bucket_bytes`` and a
communication hook that all-reduces each bucket like DDP's default, counting its bytes (:data:`executor.comm.COUNTER`)
and noting when buckets are launched (the executor's ``all_reduce`` spans start at the last launch).

Source: PyTorch's DistributedDataParallel (``bucket_cap_mb``, ``register_comm_hook``; Li et al., "PyTorch
Distributed: Experiences on Accelerating Data Parallel Training", VLDB 13(12), 2020, §3.2: gradient bucketing and
the overlap of each bucket's all-reduce with the rest of backward).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from gnnplan.executor.comm import COUNTER, all_reduce_counts, world_size


class GradientHook:
    """A DDP communication hook that averages gradient buckets with an all-reduce, like DDP's default
    (``torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook``), and also counts the
    bytes and buckets and notes when buckets of an iteration were launched. DDP launches a bucket as soon as
    backward has produced all its gradients, so the last bucket's launch is the end of the backward computation
    (with one bucket, the first launch too); the all-reduces of the earlier buckets overlap the rest of backward.

    Attributes:
        first_launch_s: ``time.perf_counter()`` of the first bucket launched since :meth:`reset` (None if none).
        last_launch_s: ``time.perf_counter()`` of the last bucket launched since :meth:`reset` (None if none).
        nbytes: gradient bytes all-reduced since :meth:`reset` (the buckets' buffers, summed).
        num_buckets: buckets all-reduced since :meth:`reset`.
    """

    def __init__(self) -> None:
        self.first_launch_s: float | None = None
        self.last_launch_s: float | None = None
        self.nbytes = 0
        self.num_buckets = 0

    def reset(self) -> None:
        """Start a new iteration."""
        self.first_launch_s = self.last_launch_s = None
        self.nbytes = 0
        self.num_buckets = 0

    def register(self, ddp_model: torch.nn.parallel.DistributedDataParallel) -> None:
        """Install this hook on a DDP model."""
        ddp_model.register_comm_hook(self, _gradient_hook)


DEFAULT_BUCKET_BYTES = 25.0 * 2**20
"""DDP's default bucket cap, ``bucket_cap_mb = 25`` (torch.nn.parallel.DistributedDataParallel documentation), the
default of ``training.ddp_bucket_bytes``."""


def data_parallel(model: torch.nn.Module,
                  bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> tuple[torch.nn.Module, GradientHook]:
    """The module to train with and its gradient hook: ``model`` wrapped in DistributedDataParallel with buckets
    of at most ``bucket_bytes`` (``bucket_cap_mb = bucket_bytes / 2**20``: each bucket is all-reduced as soon
    as backward has produced its gradients, while backward goes on, as
    :mod:`simulator.strategies.ddp_buckets` models it; the hook installed), or, with one rank, ``model`` itself
    and an idle hook (there is nothing to reduce, and DDP's reducer costs ~10% of a small model's iteration).

    Args:
        model: the model, already on :func:`device`'s kind of device for this rank.
        bucket_bytes: the bucket cap in bytes (the workload's ``training.ddp_bucket_bytes``, > 0). Given
            explicitly, DDP uses it for the first bucket too (its 1 MiB first bucket applies only to the default).
            DDP (torch 2.x, ``find_unused_parameters`` off) reduces the first iteration's gradients in one bucket
            and rebuilds its buckets by this cap, in the order backward produced the gradients, after it.

    Raises:
        ValueError: ``bucket_bytes`` <= 0.
    """
    if not bucket_bytes > 0:
        raise ValueError(f"training.ddp_bucket_bytes: must be a positive number of bytes, got {bucket_bytes}")
    hook = GradientHook()
    if world_size() == 1:
        return model, hook
    param = next(model.parameters(), None)
    device_ids = [param.device] if param is not None and param.device.type == "cuda" else None
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, bucket_cap_mb=bucket_bytes / 2**20)
    hook.register(net)
    return net, hook


def _gradient_hook(state, bucket):  # type: ignore[no-untyped-def]
    """DDP hook ``(GradientHook, dist.GradBucket) -> Future[Tensor]``; unannotated because DDP compares the
    annotations with the real types and this module uses postponed (string) annotations."""
    state.last_launch_s = time.perf_counter()
    if state.first_launch_s is None:
        state.first_launch_s = state.last_launch_s
    tensor = bucket.buffer()
    nbytes = tensor.numel() * tensor.element_size()
    state.nbytes += nbytes
    state.num_buckets += 1
    p = world_size()
    n, within = all_reduce_counts(nbytes)
    COUNTER.add(n, n, within)
    tensor.div_(p)
    return dist.all_reduce(tensor, async_op=True).get_future().then(lambda fut: fut.value()[0])
