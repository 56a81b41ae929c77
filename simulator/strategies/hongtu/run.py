"""One simulated HongTu epoch on the hardware model: a process per GPU, the batches in lock-step.

Notation as :mod:`simulator.strategies.hongtu`. Algorithm 1 (brief §1.5) per GPU i, with the stages of a batch
run one after another (no overlap of communication and computation is described):

* forward, l = 0..L-1, batch j = 0..n-1: ``h2d`` (the host rows the dedup level loads, PCIe), the peer fetch
  (Algorithm 2 step 2: a barrier, then slots s = 0..m-2 in which GPU i receives from GPU (i+s+1) mod m and sends
  to (i-s-1) mod m, the interleaved order of the paper; ``d2d`` within a machine over NVLink or PCIe,
  ``exchange`` across machines: PCIe out, network, PCIe in; the network alone with GPUDirect RDMA), ``forward``
  compute, ``d2h`` of h^{l+1}_{V_ij} (∇h^L at the last layer) and, for GCN, the checkpoint a^l_{V_ij};
* backward, l = L-1..0, batch j: ``h2d`` of ∇h^{l+1}_{V_ij} (+ a^l_{V_ij} for GCN; GAT reloads its neighbours
  through the forward's dedup path), ``backward`` compute; for l >= 1 the push of partial gradients (Algorithm 3
  step 1: a barrier, then slots sending to (i+s+1) mod m), ``d2h`` of the gradient rows flushed to the host and
  ``host_accumulate`` (the CPU adds them; at dedup ``none`` also the rows peers pushed to this machine's host);
  a peer stage's first span starts at its barrier and carries the time waited there as ``wait_s`` (a span of no
  bytes when the GPU moves nothing in the stage), as the executor records it; the barrier releases at the last
  arrival plus its own fixed cost (:func:`~simulator.hardware.pricing.barrier_s`; not priced before 2026-11-29);
* the gradient ``all_reduce`` (hierarchical ring), ``optimizer`` (Adam), ``iteration_overhead_s``.

Every duration comes from a :class:`~simulator.hardware.model.HardwareModel` event or a priced operation
(:mod:`simulator.hardware.pricing`); concurrent transfers share links max-min fairly.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any

from gnnplan.simulator import symmetry
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.model import FLOAT_BYTES
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.strategies.full_graph_run import FullGraphRun
from gnnplan.simulator.strategies.hongtu.dedup import BatchCounts
from gnnplan.simulator.strategies.hongtu.work import ChunkWork
from gnnplan.simulator.trace import Span

SCATTER_ADD_TOUCHES = 3.0
"""Bytes of memory traffic per byte of gradient rows the CPU accumulates: it reads the incoming row, reads and
writes the accumulated one. Source: brief §1.11 (CPU accumulation = ``∇h^l.index_add_(0, T_ij^cpu, rows)``),
priced as memory-bound host traffic of ``SCATTER_ADD_TOUCHES * nbytes`` bytes
(:func:`simulator.hardware.pricing.host_memory_traffic_s`; Williams, Waterman and Patterson, "Roofline", CACM
52(4), 2009), the simulator's and calibration's price alike (``hongtu.CALIBRATION``)."""


class EpochRun(FullGraphRun):
    """One simulated epoch (module docstring).

    Args:
        cluster: the hardware.
        arch: ``gcn`` (hybrid) or ``gat`` (pure recomputation).
        level: the dedup level (``none``: pushed gradients land in the receiver's host).
        counts: ``counts[i][j]`` of the dedup level.
        works: ``works[i][j][l]``, every chunk's compute.
        widths: d_0 .. d_L.
        optimizer: (seconds, FLOPs) of Adam; gradient_bytes: bytes all-reduced.
        seed: engine seed.
    """

    def __init__(self, cluster: ClusterSpec, arch: str, level: str, counts: list[list[BatchCounts]],
                 works: list[list[list[ChunkWork]]], widths: Sequence[int], optimizer: tuple[float, float],
                 gradient_bytes: float, seed: int = 0) -> None:
        self.cluster, self.arch, self.level, self.counts = cluster, arch, level, counts
        self.works, self.widths = works, widths
        self.optimizer, self.gradient_bytes = optimizer, gradient_bytes
        g = cluster.gpus_per_machine

        def same(a: Any, b: Any, shift: int) -> bool:  # counts name peers: compare after the shift
            return a[1] == b[1] and all(
                x == replace(y, pull_rows=symmetry.shift_peers(y.pull_rows, shift * g),
                             push_rows=symmetry.shift_peers(y.push_rows, shift * g)) for x, y in zip(a[0], b[0]))

        # one representative machine when every GPU's batches and chunks are its image's (simulator.symmetry)
        super().__init__(cluster, len(counts), seed, rank_works=list(zip(counts, works)), same=same)
        self.num_batches = len(counts[0])
        m = self.num_workers  # (stage, batch) -> whether any GPU moves rows in that peer stage
        self.active = {(stage, j): any(self._rows(a, b, j, stage) for a in range(m) for b in range(m) if a != b)
                       for stage in ("forward", "backward") for j in range(self.num_batches)}

    def _worker(self, rank: int) -> Generator[Any, Any, None]:
        layers = len(self.widths) - 1
        for layer in range(layers):
            for j in range(self.num_batches):
                yield from self._forward(rank, layer, j)
        for layer in range(layers - 1, -1, -1):
            for j in range(self.num_batches):
                yield from self._backward(rank, layer, j)
        t0, straggled = self.engine.now, self.rendezvous.straggled_s(rank)
        if self.num_workers > 1:
            yield self.rendezvous.wait("all_reduce", rank)
            yield from self.hw.all_reduce(rank, self.gradient_bytes)
        self._span(rank, "all_reduce", t0, "network", nbytes=self.gradient_bytes if self.num_workers > 1 else 0.0,
                   **self.rendezvous.straggler_args(rank, straggled))
        t0 = self.engine.now
        yield from self.hw.compute(rank, self.optimizer[0])
        self._span(rank, "optimizer", t0, "compute", flops=self.optimizer[1])
        yield self.engine.timeout(pricing.iteration_overhead_s(self.cluster))
        self._span(rank, "iteration", 0.0, "host")
        self.spans.append(Span(rank, "epoch", 0.0, self.engine.now, "host", epoch=0))
        self.ends[rank] = self.engine.now

    def _row_bytes(self, layer: int) -> float:
        return float(FLOAT_BYTES * self.widths[layer])

    def _output_bytes(self, layer: int, num_dst: int) -> float:
        """h^{l+1} (or ∇h^L) rows of V_ij, plus GCN's checkpoint a^l (brief §1.9)."""
        width = self.widths[layer + 1] + (self.widths[layer] if self.arch == "gcn" else 0)
        return float(FLOAT_BYTES * width * num_dst)

    def _forward(self, rank: int, layer: int, j: int) -> Generator[Any, Any, None]:
        c, row = self.counts[rank][j], self._row_bytes(layer)
        yield from self._h2d(rank, layer, j, "forward", c.load_rows * row, c.reused_rows * row)
        yield from self._peers(rank, layer, j, "forward")
        work, t0 = self.works[rank][j][layer], self.engine.now
        yield from self.hw.compute(rank, work.seconds[0])
        self._span(rank, "forward", t0, "compute", flops=work.flops[0], layer=layer, batch=j)
        yield from self._d2h(rank, layer, j, "forward", self._output_bytes(layer, c.num_dst))

    def _backward(self, rank: int, layer: int, j: int) -> Generator[Any, Any, None]:
        c, row = self.counts[rank][j], self._row_bytes(layer)
        inputs = self._output_bytes(layer, c.num_dst)
        refetch = self.arch == "gat"
        yield from self._h2d(rank, layer, j, "backward", inputs + refetch * c.load_rows * row,
                             refetch * c.reused_rows * row)
        if refetch:
            yield from self._peers(rank, layer, j, "refetch")
        work, t0 = self.works[rank][j][layer], self.engine.now
        yield from self.hw.compute(rank, work.seconds[1])
        self._span(rank, "backward", t0, "compute", flops=work.flops[1], layer=layer, batch=j)
        if layer == 0:
            return
        yield from self._peers(rank, layer, j, "backward")
        yield from self._d2h(rank, layer, j, "backward", c.flush_rows * row)
        received = sum(self.counts[k][j].push_rows[rank] for k in range(self.num_workers)) \
            if self.level == "none" else 0
        nbytes = (c.flush_rows + received) * row
        if nbytes > 0:
            t0 = self.engine.now
            core_s = pricing.host_memory_traffic_s(self.cluster, SCATTER_ADD_TOUCHES * nbytes)
            yield self.hw.host_work(self.hw.machine_of(rank), core_s)
            self._span(rank, "host_accumulate", t0, "host", nbytes=nbytes, layer=layer, batch=j,
                       direction="backward")

    def _h2d(self, rank: int, layer: int, j: int, direction: str, nbytes: float,
             reused_bytes: float) -> Generator[Any, Any, None]:
        t0 = self.engine.now
        yield self.hw.host_to_gpu(rank, nbytes)
        self._span(rank, "h2d", t0, "pcie", nbytes=nbytes, layer=layer, batch=j, direction=direction,
                   reused_bytes=reused_bytes)

    def _d2h(self, rank: int, layer: int, j: int, direction: str, nbytes: float) -> Generator[Any, Any, None]:
        if nbytes <= 0:
            return
        t0 = self.engine.now
        yield self.hw.gpu_to_host(rank, nbytes)
        self._span(rank, "d2h", t0, "pcie", nbytes=nbytes, layer=layer, batch=j, direction=direction)

    def _rows(self, src: int, dst: int, j: int, stage: str) -> int:
        """Rows worker ``src`` sends to ``dst`` in batch j: what dst pulls from it, or what src pushes to dst."""
        if stage == "backward":
            return self.counts[src][j].push_rows[dst]
        return self.counts[dst][j].pull_rows[src]

    def _peers(self, rank: int, layer: int, j: int, stage: str) -> Generator[Any, Any, None]:
        """A peer stage (``forward``/``refetch`` pulls, ``backward`` pushes): barrier, then m-1 slots."""
        m, key = self.num_workers, (stage, layer, j)
        if not self.active[("backward" if stage == "backward" else "forward", j)]:
            return
        t0, spans, push = self.engine.now, 0, stage == "backward"
        yield self.rendezvous.wait(key, rank)
        yield self.engine.timeout(pricing.barrier_s(self.cluster))
        waited = self.engine.now - t0
        for s in range(m - 1):
            ahead, behind = (rank + s + 1) % m, (rank - s - 1) % m
            dst, src = (ahead, behind) if push else (behind, ahead)
            sent, received = self._rows(rank, dst, j, stage), self._rows(src, rank, j, stage)
            if not sent and not received:
                continue
            row, t0 = self._row_bytes(layer), t0 if not spans else self.engine.now
            waits = [self.engine.process(self._message(key, rank, dst, sent * row))]
            if received:
                waits.append(self._arrival(key, src, rank))
            yield self.engine.all_of(waits)
            me = self.hw.machine_of(rank)
            out, into = self.hw.machine_of(dst) != me, self.hw.machine_of(src) != me
            self._span(rank, "exchange" if out or into else "d2d", t0, "network" if out or into else "nvlink",
                       nbytes=sent * row, layer=layer, batch=j, direction=stage, received_bytes=received * row,
                       num_messages=1, wait_s=0.0 if spans else waited, network_bytes=sent * row if out else 0.0,
                       network_received_bytes=received * row if into else 0.0)
            spans += 1
        if not spans:
            local = self.cluster.num_machines == 1
            self._span(rank, "d2d" if local else "exchange", t0, "nvlink" if local else "network", layer=layer,
                       batch=j, direction=stage, received_bytes=0.0, num_messages=0, wait_s=waited)

