"""DDP gradient buckets: which gradient bytes are all-reduced together, and when backward has produced them.

PyTorch's DistributedDataParallel groups the parameters' gradients into buckets of at most ``bucket_cap_mb``
(25 MiB by default), in the reverse order of ``model.parameters()``, i.e. roughly the order backward produces
them; as soon as every gradient of a bucket is ready, the bucket's all-reduce is launched asynchronously, while
backward goes on computing the gradients of the earlier layers. Buckets are reduced in order on one
communication stream, and the optimizer waits for all of them. So the all-reduce of bucket k overlaps the
backward of the layers before it, and only the part of the last buckets' all-reduces that outlasts backward
stays on an iteration's critical path.

Source: Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 13(12), 2020,
§3.2.3 (gradient bucketing) and §3.2.4 (overlapping computation with communication); ``bucket_cap_mb``
default 25 (torch.nn.parallel.DistributedDataParallel documentation).

Model (the simulator's): bucket sizes by bytes alone, ``ceil(G / cap)`` buckets of ``cap`` bytes, the last one
the remainder ([simplification] DDP never splits a parameter tensor, so its buckets may end a tensor early; DDP
also caps the first bucket at 1 MiB, ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``, when ``bucket_cap_mb`` is
not given, which is not modelled). Backward produces gradient bytes at a constant rate, so bucket k is ready
after the fraction ``(b_0 + ... + b_k) / G`` of the backward time ([inferred]: a dense layer's backward FLOPs
and its weight gradient both scale with its weight count).
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gnnplan.simulator.strategies.window_run import WindowRun


def ddp_buckets(gradient_bytes: float, bucket_bytes: float) -> list[float]:
    """The gradient buckets of a model, in the order backward fills them.

    Args:
        gradient_bytes: bytes of all the model's gradients (>= 0).
        bucket_bytes: the bucket cap (``training.ddp_bucket_bytes``, > 0).

    Returns:
        ``ceil(gradient_bytes / bucket_bytes)`` sizes (at least one), all ``bucket_bytes`` but the last, which
        holds the remainder; they add up to ``gradient_bytes``.

    Raises:
        ValueError: ``bucket_bytes`` <= 0 or ``gradient_bytes`` < 0.
    """
    if bucket_bytes <= 0 or gradient_bytes < 0:
        raise ValueError(f"ddp_buckets: need bucket_bytes > 0 (got {bucket_bytes}) and gradient_bytes >= 0 "
                         f"(got {gradient_bytes})")
    n = max(1, math.ceil(gradient_bytes / bucket_bytes * (1.0 - 1e-12)))
    return [bucket_bytes] * (n - 1) + [gradient_bytes - (n - 1) * bucket_bytes]


def ready_fractions(buckets: list[float]) -> list[float]:
    """The fraction of the backward pass after which each bucket is ready (module docstring): cumulative bytes
    over the total; the last is 1."""
    total = sum(buckets)
    if total <= 0:
        return [1.0] * len(buckets)
    out, done = [], 0.0
    for nbytes in buckets:
        done += nbytes
        out.append(done / total)
    out[-1] = 1.0
    return out


class BucketedBackward:
    """One worker's backward pass of iteration ``pos`` with DDP's bucketed gradient all-reduce overlapping it
    (this module): backward produces the gradient at a constant rate over its ``backward_s`` seconds of
    compute, so bucket k is ready after ``ready_fractions[k] * backward_s`` of them, wherever the backward is cut
    into segments (gsplit runs it between shuffles); its all-reduce then starts (once every worker has launched
    it) and the buckets are reduced one after the other on their own stream.

    Source: Li et al., "PyTorch Distributed", VLDB 13(12), 2020, §3.2.3-3.2.4 .

    Args:
        run: the window run (engine, hardware model, rendezvous, spans).
        rank, pos: the worker and window position.
        buckets: the bucket sizes in bytes, in the order backward fills them (at least one).
        backward_s: uncontended seconds of the whole backward pass (the sum of its segments).
    """

    def __init__(self, run: WindowRun, rank: int, pos: int, buckets: list[float], backward_s: float) -> None:
        self.run, self.rank, self.pos, self.buckets = run, rank, pos, buckets
        self.points_s = [fraction * backward_s for fraction in ready_fractions(buckets)]
        self.ready = [run.engine.event() for _ in buckets]
        self.done_s, self.launched = 0.0, 0
        self.comm = run.engine.process(run._bucket_all_reduces(rank, pos, buckets, self.ready))

    def compute(self, seconds: float) -> Generator[Any, Any, None]:
        """``seconds`` more of backward on the worker's compute, launching each bucket as soon as the backward
        computed so far has produced it. Use with ``yield from``."""
        end_s, hw = self.done_s + seconds, self.run.hw
        while self.launched < len(self.buckets) and self.points_s[self.launched] <= end_s:
            point_s = self.points_s[self.launched]
            yield from hw.compute(self.rank, point_s - self.done_s)
            self.done_s = max(self.done_s, point_s)
            self.ready[self.launched].succeed()
            self.launched += 1
        yield from hw.compute(self.rank, end_s - self.done_s)
        self.done_s = end_s

    def finish(self) -> Generator[Any, Any, None]:
        """After the last backward segment: launch the buckets not launched yet (the last one when the segments'
        sum rounds below ``backward_s``), wait for the last bucket's all-reduce and record the ``all_reduce``
        span from the end of backward to then (its ``nbytes`` the whole gradient, ``num_buckets`` its buckets).
        Use with ``yield from``."""
        for event in self.ready[self.launched:]:
            event.succeed()
        self.launched = len(self.buckets)
        t1 = self.run.engine.now
        yield self.comm
        self.run._span(self.rank, "all_reduce", t1, "network", self.pos, nbytes=sum(self.buckets),
                       num_buckets=len(self.buckets))
