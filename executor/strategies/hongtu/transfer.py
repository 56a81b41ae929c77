"""Data movement of one ``hongtu`` worker, counted per path and traced: host -> worker loads (``h2d``), worker <->
worker messages through :mod:`executor.comm` (``exchange``), in-place reuse, worker -> host writes (``d2h``) and
the host's gradient accumulation (``host_accumulate``).

On this machine the "GPU" of brief ../shared/papers/hongtu.md §1.11 is the worker process: a load gathers the
host store's rows (``index_select`` of shared memory) into the worker's buffer; a peer message gathers the rows
to send, moves them with ``isend``/``irecv`` and scatters them on arrival; a write copies rows into the host
store. Peer stages run in m - 1 slots: in slot s a worker receives from (i+s+1) mod m and sends to (i-s-1) mod m
when pulling (Algorithm 2's interleaved order), the other way round when pushing (Algorithm 3), one span per
slot; empty messages are skipped (both sides know every size). Every byte counted is a row of float32 moved.

Notation as :mod:`simulator.strategies.hongtu`: the paper's H2D / D2D / D2H -> ``h2d`` / ``exchange`` (a slot with
a worker of another machine; its args ``network_bytes`` and ``network_received_bytes`` are the bytes that cross the
machine's NIC) or ``d2d`` (a slot whose two peers share this worker's machine) / ``d2h``,
T^gpu rows reused in place -> ``reuse``, the CPU's ∇h^l accumulation -> ``host_accumulate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch

from gnnplan.executor import comm
from gnnplan.executor.features import fill
from gnnplan.executor.strategies.hongtu.store import WorkingSet
from gnnplan.executor.trace import Recorder, now


@dataclass
class PathBytes:
    """Bytes one worker moved, by path (module docstring).

    Attributes:
        host_to_gpu: rows loaded from a host (a remote one at dedup ``none`` included); gpu_to_host: rows
            written to a host (likewise).
        peer: rows sent to other workers' buffers (GPU-GPU).
        reuse: rows used again in place; accumulated: gradient bytes its host's CPU added.
    """

    host_to_gpu: float = 0.0
    gpu_to_host: float = 0.0
    peer: float = 0.0
    reuse: float = 0.0
    accumulated: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """The counters by name."""
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Mover:
    """Moves one worker's rows, counts them and records the spans (module docstring).

    Args:
        recorder: receives the spans; ws: the worker's working set (staging copies are held in it).
    """

    def __init__(self, recorder: Recorder, ws: WorkingSet) -> None:
        self.rec, self.ws = recorder, ws
        self.bytes = PathBytes()
        self.epoch = -1
        self.traced = True

    def _span(self, phase: str, t0: float, stream: str, nbytes: float, **args: object) -> None:
        if self.traced:
            self.rec.add(phase, t0, now(), stream, self.epoch, 0, nbytes=nbytes, **args)

    def _count(self, path: str, nbytes: float) -> None:
        if self.traced:
            setattr(self.bytes, path, getattr(self.bytes, path) + nbytes)

    def h2d(self, where: dict[str, object], into: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                 torch.Tensor]],
            gather: Sequence[tuple[torch.Tensor, torch.Tensor]] = (), reused_bytes: float = 0.0) -> list[torch.Tensor]:
        """Load host rows: ``buffer[slots] = host[rows]`` for each (host, rows, buffer, slots) of ``into``, and
        ``host[rows]`` as new tensors for each (host, rows) of ``gather`` (returned); by ``index_select`` and
        :func:`~gnnplan.executor.features.fill` (indexed assignment took twice as long for a chunk of Cora here:
        1354 rows of 1433 floats, 3.6 ms against 1.8 ms, 2026-11-29; benchmarks/bench_feature_gather.py).

        Shapes:
            host: (|V|, d); rows, slots: (k,) int64; buffer: (capacity, d).
        """
        t0, moved = now(), 0
        for host, rows, buffer, slots in into:
            staged = torch.index_select(host, 0, rows)
            self.ws.hold("transfer staging", staged)
            fill(buffer, slots, staged)
            moved += _nbytes(staged)
        out = [torch.index_select(host, 0, rows) for host, rows in gather]
        moved += sum(_nbytes(t) for t in out)
        self.ws.drop("transfer staging")
        self._count("host_to_gpu", moved)
        self._count("reuse", reused_bytes)
        self._span("h2d", t0, "pcie", moved, reused_bytes=reused_bytes, **where)
        return out

    def d2h(self, where: dict[str, object], writes: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> None:
        """Write rows to the host: ``host[rows] = values`` for each (host, rows, values)."""
        t0, moved = now(), 0
        for host, rows, values in writes:
            fill(host, rows, values)
            moved += _nbytes(values)
        if moved:
            self._count("gpu_to_host", moved)
            self._span("d2h", t0, "pcie", moved, **where)

    def flush(self, where: dict[str, object], grad: torch.Tensor, slots: torch.Tensor, host: torch.Tensor,
              rows: torch.Tensor, received: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Write the gradient rows ``grad[slots]`` to the host (``d2h``), then let the host's CPU add them, and the
        rows peers ``received`` for this host, into ``host`` (``host_accumulate``)."""
        t0 = now()
        staged = grad[slots]
        self.ws.hold("transfer staging", staged)
        if len(rows):
            self._count("gpu_to_host", _nbytes(staged))
            self._span("d2h", t0, "pcie", _nbytes(staged), **where)
        t1, added = now(), 0
        for r, values in ((rows, staged), *received):
            host.index_add_(0, r, values)
            added += _nbytes(values)
        self.ws.drop("transfer staging", "received gradients")
        if added:
            self._count("accumulated", added)
            self._span("host_accumulate", t1, "host", added, **where)

    def peers(self, where: dict[str, object], send: Sequence[torch.Tensor], source: torch.Tensor,
              recv_rows: Sequence[int], land: Callable[[int, torch.Tensor], None], push: bool,
              path: str = "peer") -> None:
        """One peer stage (module docstring; collective: call it when some worker moves rows in the stage): a
        barrier (Algorithms 2 and 3 synchronise before it), then send ``source[send[k]]`` to every worker k,
        receive ``recv_rows[k]`` rows from it and hand them to ``land(k, rows)``; the bytes sent count on
        ``path`` (``peer``; a remote host's rows at dedup ``none``: ``host_to_gpu`` when read, ``gpu_to_host``
        when written). The stage's first span starts at the barrier and carries the time spent waiting there as
        ``wait_s`` (a span of no bytes when this worker moves nothing), so waiting for a slower worker is told
        apart from moving rows.

        Shapes:
            source: (*, d); send[k]: (rows to k,) int64.
        """
        me, world, width = comm.rank(), comm.world_size(), source.shape[1]
        t0 = now()
        if world > 1:
            comm.barrier()
        waited, spans = now() - t0, 0
        for s in range(world - 1):
            ahead, behind = (me + s + 1) % world, (me - s - 1) % world
            dst, src = (ahead, behind) if push else (behind, ahead)
            if not len(send[dst]) and not recv_rows[src]:
                continue
            t0, incoming = t0 if not spans else now(), None
            outgoing = torch.index_select(source, 0, send[dst])
            if recv_rows[src]:
                incoming = torch.empty(recv_rows[src], width)
            requests = comm.post_exchange(outgoing if len(outgoing) else None, dst, incoming, src)
            self.ws.hold("exchange staging", outgoing, incoming)
            for request in requests:
                request.wait()
            if incoming is not None:
                land(src, incoming)
            self.ws.drop("exchange staging")
            self._count(path, _nbytes(outgoing))
            sent, received = _nbytes(outgoing), 0 if incoming is None else _nbytes(incoming)
            out, into = not comm.same_machine(dst), not comm.same_machine(src)
            self._span("exchange" if out or into else "d2d", t0, "network" if out or into else "nvlink", sent,
                       received_bytes=received, num_messages=1, wait_s=0.0 if spans else waited,
                       network_bytes=sent if out else 0, network_received_bytes=received if into else 0, **where)
            spans += 1
        if not spans:  # as the simulator: a machine's only workers wait in a d2d span, else in an exchange span
            local = all(comm.same_machine(k) for k in range(world))
            self._span("d2d" if local else "exchange", t0, "nvlink" if local else "network", 0, received_bytes=0,
                       num_messages=0, wait_s=waited, **where)
