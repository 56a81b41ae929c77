"""PP-GNN's one-off pre-propagation, sharded over the workers and simulated on the hardware model.

Each of the W workers owns a contiguous row shard (:mod:`simulator.strategies.ppgnn.shards`) and computes its
rows of ``X_r = B X_{r-1}``, r = 1..R, the 1D row-wise distributed SpMM (Tripathy, Yelick and Buluç, SC 2020,
§IV-A), as the executor does (:func:`executor.strategies.ppgnn.preprop.preprocess_sharded`). Per worker p:

1. on a GPU (when every shard's block, its input rows with halo and its output rows fit in GPU memory; else
   in host memory, memory-bound as the unsharded rule, PP-GNN brief §1.1 App. G: "on a single GPU, except ...
   on the CPU only"): copy its block of ``B`` and its rows of ``X`` host-to-device;
2. per hop, after all workers have finished the previous one (the exchange is one all_to_all): receive its
   halo rows of ``X_{r-1}`` from every owner q (``halo[p][q] * 4 F`` bytes; GPUs of one machine
   :meth:`~simulator.hardware.model.HardwareModel.gpu_to_gpu`, of different machines device-to-host, network,
   host-to-device; in host memory a gather of the rows and, across machines, the network);
3. its SpMM: ``2 nnz_p F`` FLOPs and the block's structure + ``4 F (nnz_p + rows_p)`` bytes (as
   :func:`simulator.strategies.ppgnn.cost.preprocess_kernels`), on its GPU's compute at the roofline, or as a
   gather of those bytes from its machine's host memory (shared with the machine's other shards);
4. on a GPU, copy its labelled rows of ``X_r`` device-to-host (they are written to the hop files).

Every copy and gather goes through :class:`~simulator.hardware.model.HardwareModel`, so the machine's GPUs share
its PCIe uplinks and host memory. With one worker this is the unsharded pre-propagation plus its copies.

**The exchange at scale.** Up to :data:`PAIRWISE_MAX_WORKERS` workers every message of step 2 (q to p) is its own
copy, network transfer and copy, as NCCL's and gloo's all_to_all send one message per pair of ranks. That is
``W (W - 1)`` messages of three flows per hop, and every flow's end refills the rates of all flows sharing a link
with it, so the simulation grows faster than ``W^2``: 7 s at 8 x 8 GPUs on ogbn-papers100M's card, 93 s at 16 x 8,
1,612 s at 32 x 8 (2026-12-02, beside other work). Beyond that many workers the messages between two machines a -> b
travel as one (:meth:`_PreprocessRun._machine_pair`): each GPU of a copies (or gathers) what it sends to b,
then the machine's NICs send the sum, then each GPU of b copies in what it receives from a; the messages inside
a machine stay one per GPU pair. Every link moves the same bytes; what changes is that a machine pair's bytes
leave and land together, not message by message, so its three stages no longer overlap as messages of different
sizes let them: the exchange comes out longer. Against every pair's own message on the same shards (2026-12-02):

* ogbn-papers100M's card, SGC, 2 hops, 2x4-a100-nvlink3-200gbib's machines: +0.3% at 2 x 2 GPUs, +0.8% at 4 x 4,
  +1.0% at 2 x 8, +1.5% at 8 x 4, +3.5% at 8 x 8, +3.9% at 16 x 8 and +5.4% at 32 x 8 (2.643 s for 2.509 s;
  simulated in 1.3-2 s and 11 s, message by message in 93 s and 1,612 s);
* ogbn-papers100M's sizes on Cora's measured shards and on uneven synthetic ones (tests/strategies/ppgnn,
  ``_halo``), 2 x 2 to 4 x 4 GPUs: +0.8% to +2.8% on 10 GbE, where the network sets the time, and +1.2% to +16% on
  200 Gb InfiniBand, where the PCIe copies take as long as the network.

Only the one-off pre-propagation's time moves (``breakdown_s["preprocess"]``, not part of an epoch): the epoch
and everything a study compares do not depend on it. The message model is itself on the slow side: each
message's three stages run one after another, where NCCL pipelines a message in chunks, and the machine-pair
messages sent in 2 or 4 pipelined chunks came 3.5-5.6% and 7.2-9.1% below it at 8 x 8 and 16 x 8. With one GPU
per machine the two are the same messages.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from gnnplan.simulator.engine import Engine, Rendezvous
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import HardwareModel
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.ppgnn.shards import ShardStats, shard_stats
from gnnplan.simulator.workload.model_cost import FLOAT_BYTES, INDEX_BYTES, Kernel


@dataclass(frozen=True)
class ShardWork:
    """One worker's share of pre-propagation (module docstring).

    Attributes:
        rows: rows it owns; nnz: non-zeros of its block; labelled_rows: stored rows among them.
        structure_bytes: its CSR block (values, column ids, row pointers).
        receive_bytes: bytes per hop it receives from each worker (0 from itself).
        kernel: one hop's SpMM.
        memory_bytes: its block, its input rows with halo and its output rows.
    """

    rows: float
    nnz: float
    labelled_rows: float
    structure_bytes: float
    receive_bytes: tuple[float, ...]
    kernel: Kernel
    memory_bytes: float


@dataclass(frozen=True)
class PreprocessResult:
    """The simulated pre-propagation: ``seconds`` end to end, where it ran, and the bytes every hop's exchange
    moves in all (``exchange_bytes_per_hop``)."""

    seconds: float
    on_gpu: bool
    exchange_bytes_per_hop: float
    shards: tuple[ShardWork, ...]
    by_machine_pair: bool = False
    """The exchange between machines simulated one message per ordered machine pair (module docstring)."""


def shard_work(ctx: SimContext, stats: ShardStats) -> tuple[ShardWork, ...]:
    """Every worker's :class:`ShardWork` on the summary's sizes, from the measured shard fractions."""
    sm = ctx.summary
    n, row = float(sm.num_vertices), FLOAT_BYTES * sm.feature_dim
    total_nnz = float(sm.num_edges + sm.num_vertices)
    num_labelled = float(sm.num_train + sm.num_val + sm.num_test)
    out = []
    for p in range(stats.num_parts):
        rows, nnz = stats.rows_fraction[p] * n, stats.nnz_fraction[p] * total_nnz
        structure = (FLOAT_BYTES + INDEX_BYTES) * nnz + INDEX_BYTES * (rows + 1)
        receive = tuple(f * n * row for f in stats.halo_fraction[p])
        kernel = Kernel("preprop.spmm", 2.0 * nnz * sm.feature_dim, structure + row * (nnz + rows), sparse=True,
                        out_elems=rows * sm.feature_dim)
        memory = structure + row * (2.0 * rows) + sum(receive)
        out.append(ShardWork(rows, nnz, stats.labelled_fraction[p] * num_labelled, structure, receive, kernel,
                             memory))
    return tuple(out)


def simulate_preprocess(ctx: SimContext, hops: int, stats: ShardStats | None = None) -> PreprocessResult:
    """Simulate pre-propagation of ``hops`` hops sharded over the context's workers (module docstring).

    The result is kept for the process, keyed by everything it depends on: the cluster, the dataset summary, the
    engine's seed, ``hops`` and the shards' statistics (not the other knobs: a study's ppgnn trials that differ in
    placement, loader, reshuffling or batch size share one pre-propagation). Up to :data:`PAIRWISE_MAX_WORKERS`
    workers every message of a hop's all_to_all is its own flow, so the simulation grows with the square of the
    workers or faster (7.5-8.5 s at 8 x 8 GPUs on ogbn-papers100M's card: benchmarks/bench_ppgnn_preprocess.py, five
    configurations at 8 x 8 in 42.6 s, 8.1 s with the result kept, 2026-12-01); beyond, one message per machine
    pair (module docstring).

    Args:
        ctx: the simulation's inputs (cluster, workload, dataset summary).
        hops: R >= 0.
        stats: the shards' measured fractions (default: :func:`~simulator.strategies.ppgnn.shards.shard_stats`
            of the workload's dataset for the context's worker count).

    Raises:
        SpecError: the dataset cannot be loaded to measure its shards.
    """
    workers = ctx.num_workers
    stats = stats if stats is not None else shard_stats(ctx.workload.dataset, workers)
    key = (ctx.cluster.model_dump_json(), ctx.summary, ctx.seed, hops, stats)
    kept = _KEPT.get(key)
    if kept is not None:
        return kept
    shards = shard_work(ctx, stats)
    on_gpu = all(s.memory_bytes <= ctx.cluster.gpu.memory_bytes for s in shards)
    run = _PreprocessRun(ctx, shards, hops, on_gpu)
    run.engine.run()
    exchange = sum(sum(s.receive_bytes) for s in shards)
    result = PreprocessResult(run.engine.now, on_gpu, exchange, shards, run.by_machine_pair)
    if len(_KEPT) >= KEPT_RESULTS:
        _KEPT.clear()
    _KEPT[key] = result
    return result


KEPT_RESULTS = 16
"""Pre-propagations :func:`simulate_preprocess` keeps per process (all are dropped when it is full)."""
_KEPT: dict[tuple[Any, ...], PreprocessResult] = {}


PAIRWISE_MAX_WORKERS = 64
"""Most workers whose pre-propagation exchange is simulated message by message, one per pair of workers; beyond,
one message per ordered pair of machines (module docstring, "The exchange at scale")."""
MACHINE_PAIR_NOTE = ("pre-propagation (one-off, not in the epoch): its exchange simulated one message per machine "
                     f"pair, as beyond {PAIRWISE_MAX_WORKERS} workers message by message takes minutes to hours to "
                     "simulate; against message by message, +0.3% to +5.4% on ogbn-papers100M's card at 4 to 256 GPUs "
                     "and up to +16% where PCIe copies take as long as the network "
                     "(simulator/strategies/ppgnn/preprop.py)")
"""The note of a ppgnn result whose pre-propagation exchange went by machine pairs (module docstring)."""


class _PreprocessRun:
    """The workers' processes on one engine (module docstring); ``by_machine_pair``: the exchange between machines
    as one message per ordered pair of machines (default: beyond :data:`PAIRWISE_MAX_WORKERS` workers)."""

    def __init__(self, ctx: SimContext, shards: tuple[ShardWork, ...], hops: int, on_gpu: bool,
                 by_machine_pair: bool | None = None) -> None:
        self.ctx, self.shards, self.hops, self.on_gpu = ctx, shards, hops, on_gpu
        self.by_machine_pair = len(shards) > PAIRWISE_MAX_WORKERS if by_machine_pair is None else by_machine_pair
        self.engine = Engine(ctx.seed)
        self.hw = HardwareModel(ctx.cluster, self.engine)
        self.rendezvous = Rendezvous(self.engine, len(shards), ctx.cluster.jitter_s)
        self.messages: dict[tuple[int, int, int], Any] = {}  # (hop, src worker, dst worker) -> its event
        self.pair_messages: dict[tuple[int, int, int], Any] = {}  # (hop, src machine, dst machine) -> its event
        for p in range(len(shards)):
            self.engine.process(self._worker(p))

    def _worker(self, p: int) -> Generator[Any, Any, None]:
        hw, shard, cl = self.hw, self.shards[p], self.ctx.cluster
        row = FLOAT_BYTES * self.ctx.summary.feature_dim
        if self.on_gpu:
            yield hw.host_to_gpu(p, shard.structure_bytes + row * shard.rows)
        for r in range(1, self.hops + 1):
            yield self.rendezvous.wait(("preprop", r), p)
            yield self.engine.all_of(self._exchange(r, p))
            if self.on_gpu:
                yield from hw.compute(p, compute_time_s([shard.kernel], cl.gpu, 1.0))
                yield hw.gpu_to_host(p, row * shard.labelled_rows)
            else:
                yield hw.host_gather(shard.kernel.nbytes, p)

    def _exchange(self, hop: int, p: int) -> list[Any]:
        """The events of everything worker ``p`` sends and receives in hop ``hop``: every peer's message, or with
        :attr:`by_machine_pair` its own machine's peers' and its machine's pair messages with every other machine."""
        if not self.by_machine_pair:
            peers = [q for q in range(len(self.shards)) if q != p]
            return [self._message(hop, q, p) for q in peers] + [self._message(hop, p, q) for q in peers]
        g = self.ctx.cluster.gpus_per_machine
        me, machines = p // g, len(self.shards) // g
        local = [q for q in range(me * g, me * g + g) if q != p]
        others = [m for m in range(machines) if m != me]
        return ([self._message(hop, q, p) for q in local] + [self._message(hop, p, q) for q in local]
                + [self._machine_pair(hop, a, me) for a in others] + [self._machine_pair(hop, me, b) for b in others])

    def _machine_pair(self, hop: int, a: int, b: int) -> Any:
        """The event of machine ``a``'s halo rows for machine ``b``'s workers in hop ``hop`` as one message
        (module docstring): each GPU of ``a`` copies device-to-host (in host memory: gathers) what it sends to ``b``,
        the NICs send the sum, and each GPU of ``b`` copies in what it receives; the first worker that needs it
        starts it."""
        key = (hop, a, b)
        if key not in self.pair_messages:
            g = self.ctx.cluster.gpus_per_machine
            src, dst = range(a * g, a * g + g), range(b * g, b * g + g)
            sent = [sum(self.shards[r].receive_bytes[q] for r in dst) for q in src]
            received = [sum(self.shards[r].receive_bytes[q] for q in src) for r in dst]
            self.pair_messages[key] = self.engine.process(self._send_between_machines(a, b, src, sent, dst, received))
        return self.pair_messages[key]

    def _send_between_machines(self, a: int, b: int, src: Sequence[int], sent: list[float], dst: Sequence[int],
                               received: list[float]) -> Generator[Any, Any, None]:
        """Workers ``src`` of machine ``a`` send ``sent[i]`` bytes in all to workers ``dst`` of machine ``b``, who
        receive ``received[j]``: every sender's device-to-host copy (in host memory: gather), then the NICs' one
        transfer of the sum, then every receiver's host-to-device copy (module docstring: one message per worker
        pair is this with one sender and one receiver)."""
        hw, total = self.hw, sum(sent)
        if total <= 0:
            return
        copy_out = hw.gpu_to_host if self.on_gpu else (lambda q, nbytes: hw.host_gather(nbytes, q))
        yield self.engine.all_of([copy_out(q, n) for q, n in zip(src, sent) if n > 0])
        yield hw.network(a, b, total)
        if self.on_gpu:
            yield self.engine.all_of([hw.host_to_gpu(r, n) for r, n in zip(dst, received) if n > 0])

    def _message(self, hop: int, src: int, dst: int) -> Any:
        """The event of ``src``'s halo rows for ``dst`` in hop ``hop``; the first worker that needs it starts it."""
        key = (hop, src, dst)
        if key not in self.messages:
            self.messages[key] = self.engine.process(self._send(src, dst, self.shards[dst].receive_bytes[src]))
        return self.messages[key]

    def _send(self, src: int, dst: int, nbytes: float) -> Generator[Any, Any, None]:
        hw = self.hw
        if nbytes <= 0:
            return
        a, b = hw.machine_of(src), hw.machine_of(dst)
        if a != b:
            yield from self._send_between_machines(a, b, (src,), [nbytes], (dst,), [nbytes])
        elif self.on_gpu:
            yield hw.gpu_to_gpu(src, dst, nbytes)
        else:
            yield hw.host_gather(nbytes, src)
