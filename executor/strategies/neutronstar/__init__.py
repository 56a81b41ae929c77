"""Full-graph training with hybrid dependency management (``neutronstar``) for real, on N gloo workers.

The same strategy as :mod:`simulator.strategies.neutronstar` (same ``NAME`` and ``Knobs``; the dependency split
is computed by the simulator's own :func:`~simulator.strategies.neutronstar.worker_sets` with the plan's cluster,
so Hybrid follows the split the cost model chose). Every rank loads the graph, computes every worker's split
(deterministic) and builds its blocks (:mod:`executor.strategies.neutronstar.blocks`); that preprocessing is not part
of an
epoch. One epoch = one full-graph step:

1. forward, l = 1..L: the owners gather the rows of h^(l-1) their dependants communicate (raw features at l = 1
   when they are not cached) into one send buffer — span ``pack`` (``nbytes`` = its bytes) — and send them — span
   ``exchange`` (``nbytes`` = bytes this rank sent); each message is a slice of the send buffer and lands in a
   slice of one receive buffer, which at l = 1 is the tail of the layer's table ``T_1`` (built once), and at
   l >= 2 is copied with ``X_l`` into ``T_l`` — span ``unpack``; the replica block runs meanwhile when ``overlap``
   is on (the exchange runs in a thread), then the master block — spans ``forward`` (``layer``, ``part``), each
   after its source rows are gathered from the table (span ``gather``);
2. loss = sum of the cross-entropy of the owned training vertices / |all training vertices|;
3. backward, l = L..1, layer by layer: autograd through the master block stops at the received rows (leaves);
   their gradients go back to the owners (l >= 2, span ``exchange``), who add them to the gradients of their
   own rows of h^(l-1) (span ``unpack``; master-mirror, Wang et al., SIGMOD 2022, §1.4 / §4.2) before continuing
   with layer l-1;
   the replica block's backward overlaps with that exchange when ``overlap`` is on — spans ``backward``;
4. ``all_reduce`` (sum) of the flattened weight gradients, then Adam — ``optimizer``.

After the all-reduce every rank holds exactly the single-process full-graph gradient (up to float summation
order): replicas back-propagate their own consumers' share, communicated rows return theirs to the owner.
FLOPs on compute spans come from :func:`simulator.strategies.neutronstar.work.worker_work` on this rank's sets.
Evaluation runs the same forward without gradients (dropout off) and counts the owned vertices' predictions.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm
from gnnplan.executor.assemble import rank0_first
from gnnplan.executor.data import Topology, build_graph, input_features
from gnnplan.executor.evaluate import Accuracy
from gnnplan.executor.models import GNN
from gnnplan.executor.strategies.base import EpochStats, traffic_fields
from gnnplan.executor.strategies.neutronstar.blocks import ExchangeTiming, LayerPlan, exchange, launch, layer_plans
from gnnplan.executor.trace import Recorder, now
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies import neutronstar as plugin
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.neutronstar import NAME, Knobs, load_structure, worker_sets
from gnnplan.simulator.strategies.neutronstar.dependencies import worker_counts
from gnnplan.simulator.strategies.neutronstar.work import worker_work
from gnnplan.simulator.units import FLOAT_BYTES

__all__ = ["NAME", "Knobs", "Trainer"]


class Trainer:
    """One rank of a ``neutronstar`` run (construction is collective).

    Args:
        topo: this worker's place (one worker per modelled machine).
        plan: strategy ``neutronstar``, its knobs, the cluster (for Hybrid's cost model) and the workload.
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        self.topo, self.rec, self.workload = topo, recorder, plan.workload
        wl, self.knobs = plan.workload, Knobs.model_validate(plan.knobs)
        check_workload(plugin, wl)
        world = topo.world_size
        graph, in_graph, owner = rank0_first(lambda: load_structure(wl, world, self.knobs.partitioner))
        g, weight = build_graph(graph, wl.model.arch)
        self.all_sets = [worker_sets(plan.cluster, wl, self.knobs, in_graph, owner, r, graph.feature_dim,
                                     graph.num_classes) for r in range(world)]
        mine = self.all_sets[topo.rank]
        self.layers: list[LayerPlan] = [lp.to(topo.device) for lp in layer_plans(g, weight, self.all_sets, owner,
                                                                                  topo.rank)]
        self.active = [any(len(s.communicated[i]) for s in self.all_sets) for i in range(len(self.layers))]
        features, dev = torch.from_numpy(input_features(graph, wl.dataset)), topo.device
        self.num_owned = len(mine.owned)
        first = self.layers[0]
        self.table0 = torch.empty((first.num_x_rows + sum(first.recv_counts), graph.feature_dim), device=dev)
        """``T_1`` (blocks module docstring): ``X_1`` once, and every epoch the received feature rows written into
        its tail by the exchange itself, so layer 1 builds no table."""
        self.table0[: self.num_owned] = features[torch.from_numpy(mine.owned)].to(dev)
        self.table0[self.num_owned: first.num_x_rows] = features[torch.from_numpy(mine.replicated[0])].to(dev)
        self.x0 = self.table0[: first.num_x_rows]
        self.owned_features = self.table0[: self.num_owned]
        self.input_buffers: dict[tuple[int, str], torch.Tensor] = {}
        """(layer index, block) -> the buffer its source rows are gathered into when no gradient flows back
        (:meth:`_gather`)."""
        self.labels = torch.from_numpy(graph.labels[mine.owned]).to(dev)
        self.split = {name: torch.from_numpy(np.flatnonzero(np.isin(mine.owned, idx))).to(dev)
                      for name, idx in (("train", graph.train_idx), ("val", graph.val_idx), ("test", graph.test_idx))}
        self.num_train = max(len(graph.train_idx), 1)
        counts = worker_counts(in_graph, owner, mine, world)
        self.work = worker_work(plan.cluster, wl.model, graph.feature_dim, graph.num_classes, counts)
        torch.manual_seed(wl.training.seed)
        self.model = GNN(wl.model, graph.feature_dim, graph.num_classes).to(topo.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.gradient_bytes = FLOAT_BYTES * sum(p.numel() for p in self.params)
        self.optimizer = torch.optim.Adam(self.params, lr=wl.training.lr, weight_decay=wl.training.weight_decay)
        self.optimizer_flops = self.work.optimizer_flops
        torch.manual_seed(wl.training.seed * 7919 + topo.rank)  # dropout masks differ between ranks

    # ------------------------------------------------------------------------------------------ one step

    def _exchange(self, index: int, send: torch.Tensor, send_counts: list[int], recv: torch.Tensor,
                  recv_counts: list[int], backward: bool, epoch: int) -> torch.Tensor:
        """Exchange for layer ``index + 1`` (:func:`~.blocks.exchange`): forward sends the packed rows and receives
        the communicated rows into ``recv``; backward sends their gradients back and receives those of the rows
        it sent. Returns ``recv``."""
        timing: ExchangeTiming = exchange(send, send_counts, recv, recv_counts, self.knobs.ring) \
            if self.active[index] else ExchangeTiming(now(), now(), 0, 0)
        self.rec.add("exchange", timing.start_s, timing.end_s, "network", epoch, 0, nbytes=timing.sent_bytes,
                     layer=index + 1, direction="backward" if backward else "forward",
                     received_bytes=timing.received_bytes, network_bytes=self._network_bytes(send, send_counts, index),
                     network_received_bytes=self._network_bytes(recv, recv_counts, index))
        return recv

    def _network_bytes(self, buffer: torch.Tensor, counts: list[int], index: int) -> int:
        """Bytes of ``buffer`` (``counts`` rows per rank) to or from ranks of other machines in layer ``index + 1``'s
        exchange (0 when it does not run): what crosses this machine's NICs, which the simulator prices apart from
        the bytes between the machine's own GPUs."""
        if not self.active[index]:
            return 0
        row = buffer[0].numel() * buffer.element_size() if len(buffer) else 0
        return sum(n * row for p, n in enumerate(counts) if p != self.topo.rank and not comm.same_machine(p))

    def _copy(self, phase: str, index: int, fn, nbytes: int, epoch: int):  # type: ignore[no-untyped-def]
        """Run a row copy and record it: ``pack`` (the rows to send gathered into one buffer), ``unpack`` (received
        rows put in place: layer l >= 2's table ``T_l``, or the returned gradients added to the rows sent) or
        ``gather`` (a block's source rows); ``nbytes`` = the rows' bytes."""
        return self._timed(phase, index, fn, epoch, nbytes=nbytes)

    def _timed(self, phase: str, index: int, fn, epoch: int, **args):  # type: ignore[no-untyped-def]
        """``fn()``, recorded as a ``compute`` span of ``phase`` in layer ``index + 1`` with the span's ``args``
        (``flops`` and ``part`` of a block's kernels, ``nbytes`` of a row copy); returns what ``fn`` returns."""
        t0 = now()
        out = fn()
        self.rec.add(phase, t0, now(), "compute", epoch, 0, layer=index + 1, **args)
        return out

    def _pack(self, index: int, source: torch.Tensor, epoch: int) -> torch.Tensor:
        """The rows of ``source`` this rank sends in layer ``index + 1``'s exchange, gathered into one send buffer
        (span ``pack``); an empty buffer when it sends none.

        Shapes:
            source: (owned rows, width) -> (sum(send_counts), width).
        """
        lp = self.layers[index]
        if not (self.active[index] and len(lp.send_index)):
            return source.new_empty((0, source.shape[1]))
        return self._copy("pack", index, lambda: torch.index_select(source, 0, lp.send_index),
                          len(lp.send_index) * source.shape[1] * source.element_size(), epoch)

    def _table(self, index: int, x: torch.Tensor, recv: torch.Tensor, epoch: int) -> torch.Tensor:
        """``T_l`` (blocks module docstring): at l = 1 the table the exchange received into; at l >= 2 ``X_l`` and
        the received rows copied into one (span ``unpack``, differentiable), or ``X_l`` itself when none came.

        Shapes:
            x: (rows of X_l, width); recv: (received rows, width) -> (rows of T_l, width).
        """
        if index == 0:
            return self.table0
        if not len(recv):
            return x
        return self._copy("unpack", index, lambda: torch.cat([x, recv]),
                          (len(x) + len(recv)) * x.shape[1] * x.element_size(), epoch)

    def _gather(self, index: int, part: str, table: torch.Tensor, rows: torch.Tensor, epoch: int) -> torch.Tensor:
        """A block's source rows gathered from ``table`` by ``index_select``, recorded as span ``gather``: into a
        new tensor when the gradient flows back into the table (layers l >= 2 in training: backward scatters it),
        else into the block's buffer kept from the last epoch. A fresh tensor of 32 MiB or more is a fresh mapping
        on the CPU (glibc's largest mmap threshold), whose pages fault in as the gather first writes them: on this
        machine R-MAT 10000's layer-1 master gather (2048 floats a row) took 36 ms that way against 14 ms
        predicted (2026-11-29); a GPU's caching allocator reuses its blocks, as the buffer does."""
        nbytes = len(rows) * table.shape[1] * table.element_size()
        if table.requires_grad and torch.is_grad_enabled():
            return self._copy("gather", index, lambda: torch.index_select(table, 0, rows), nbytes, epoch)
        buffer = self.input_buffers.get((index, part))
        if buffer is None or buffer.shape != (len(rows), table.shape[1]):
            buffer = self.input_buffers[(index, part)] = table.new_empty((len(rows), table.shape[1]))
        return self._copy("gather", index, lambda: torch.index_select(table, 0, rows, out=buffer), nbytes, epoch)

    def _compute(self, phase: str, part: str, index: int, fn, epoch: int):  # type: ignore[no-untyped-def]
        """A block's kernels (``part``: master or replica) of ``phase`` in layer ``index + 1``, recorded with their
        FLOPs as the simulator counts them (:func:`simulator.strategies.neutronstar.work.worker_work`)."""
        slot = (0 if part == "master" else 2) + (0 if phase == "forward" else 1)
        return self._timed(phase, index, fn, epoch, flops=self.work.layers[index].flops[slot], part=part)

    def forward(self, epoch: int = -1) -> tuple[torch.Tensor, list[tuple]]:
        """The owned vertices' logits, and per layer (X, received rows, master output, replica output).

        Shapes:
            logits: (|V_i|, num_classes).
        """
        state: list[tuple] = []
        grad = torch.is_grad_enabled()
        x = self.x0
        for index, lp in enumerate(self.layers):
            source = self.owned_features if index == 0 else x[: self.num_owned].detach()
            packed = self._pack(index, source, epoch)
            into = self.table0[lp.num_x_rows:] if index == 0 else \
                source.new_empty((sum(lp.recv_counts), source.shape[1]))
            wait = launch(lambda i=index, o=packed, n=lp.send_counts, r=into, m=lp.recv_counts:
                          self._exchange(i, o, n, r, m, False, epoch), self.knobs.overlap and self.active[index])
            replica = None
            if lp.replica is not None:
                inputs = self._gather(index, "replica", x, lp.replica_rows, epoch)
                replica = self._compute("forward", "replica", index,
                                        lambda h=inputs: self.model.apply_layer(index, lp.replica, h), epoch)
            recv = wait()
            if index > 0 and grad:
                recv.requires_grad_()
            table = self._table(index, x, recv, epoch)
            inputs = self._gather(index, "master", table, lp.master_rows, epoch)
            master = self._compute("forward", "master", index,
                                   lambda h=inputs: self.model.apply_layer(index, lp.master, h), epoch)
            state.append((x, recv, master, replica))
            if index + 1 < len(self.layers):
                x = torch.cat([master, replica]) if replica is not None else master
                x = x.detach().requires_grad_(grad)
        return state[-1][2], state

    def backward(self, loss: torch.Tensor, state: list[tuple], epoch: int = -1) -> None:
        """Layer-by-layer backward with the gradient return of received rows (module docstring, step 3)."""
        grad_out = None
        for index in range(len(self.layers) - 1, -1, -1):
            lp, (x, recv, master, replica) = self.layers[index], state[index]
            if grad_out is None:
                self._compute("backward", "master", index, lambda: loss.backward(), epoch)
            else:
                self._compute("backward", "master", index,
                              lambda: master.backward(grad_out[: self.num_owned]), epoch)
            wait = None
            if index > 0:
                grads = recv.grad if recv.grad is not None else torch.zeros_like(recv)
                back = grads.new_empty((len(lp.send_index), grads.shape[1]))
                wait = launch(lambda i=index, g=grads.contiguous(), b=back, n=lp.recv_counts, m=lp.send_counts:
                              self._exchange(i, g, n, b, m, True, epoch), self.knobs.overlap and self.active[index])
            if replica is not None:
                self._compute("backward", "replica", index,
                              lambda: replica.backward(grad_out[self.num_owned:]), epoch)
            if wait is not None:
                grad_x = x.grad if x.grad is not None else torch.zeros_like(x)
                back = wait()
                if len(back):
                    self._copy("unpack", index, lambda g=grad_x, b=back: g.index_add_(0, lp.send_index, b),
                               back.numel() * back.element_size(), epoch)
                grad_out = grad_x

    def step(self, epoch: int = -1) -> tuple[float, float]:
        """Forward, backward and gradient all-reduce (collective); no optimizer step.

        Returns:
            (sum of the owned training vertices' cross-entropy, this rank's loss contribution).
        """
        logits, state = self.forward(epoch)
        train = self.split["train"]
        ce = F.cross_entropy(logits[train], self.labels[train], reduction="sum")
        loss = ce / self.num_train
        self.backward(loss, state, epoch)
        t0 = now()
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])
        if self.topo.world_size > 1:
            comm.all_reduce_(flat)
        offset = 0
        for p in self.params:
            p.grad = flat[offset: offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self.rec.add("all_reduce", t0, now(), "network", epoch, 0, nbytes=self.gradient_bytes)
        return float(ce.detach()), float(loss.detach())

    # --------------------------------------------------------------------------------------- the protocol

    def train_epoch(self, epoch: int) -> EpochStats:
        """One full-graph step, traced (collective)."""
        sent, start = comm.traffic_mark(), now()
        self.optimizer.zero_grad()
        ce, _ = self.step(epoch)
        t1 = now()
        self.optimizer.step()
        end = now()
        self.rec.add("optimizer", t1, end, "compute", epoch, 0, flops=self.optimizer_flops)
        self.rec.add("iteration", start, end, "host", epoch, 0)
        self.rec.add("epoch", start, end, "host", epoch)
        return EpochStats(epoch_s=end - start, loss_sum=ce, num_seeds=len(self.split["train"]), num_iterations=1,
                          **traffic_fields(comm.traffic_since(sent)))

    def gradient(self) -> tuple[float, dict[str, torch.Tensor]]:
        """(this rank's loss contribution, the all-reduced full-graph gradient by parameter name) (collective)."""
        self.optimizer.zero_grad()
        _, loss = self.step()
        grads = {n: p.grad.detach().clone() for n, p in self.model.named_parameters() if p.grad is not None}
        self.optimizer.zero_grad()
        return loss, grads

    def evaluate(self, epoch: int = -1) -> Accuracy:
        """Validation / test accuracy counts of the owned vertices (collective: the forward exchanges rows); not
        traced (``epoch`` unused): the forward's spans go to a recorder that is dropped (before 2026-12-01 they
        reached the trace as training phases at epoch -1)."""
        self.model.eval()
        traced, self.rec = self.rec, Recorder(self.rec.rank, self.rec.origin_s)
        try:
            with torch.no_grad():
                logits, _ = self.forward()
        finally:
            self.model.train()
            self.rec = traced
        pred = logits.argmax(1)
        counts = [int((pred[idx] == self.labels[idx]).sum()) for idx in (self.split["val"], self.split["test"])]
        return Accuracy(counts[0], len(self.split["val"]), counts[1], len(self.split["test"]))

    def close(self) -> None:
        """Nothing to release."""
