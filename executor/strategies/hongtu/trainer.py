"""One rank of a ``hongtu`` run: the per-epoch flow of Algorithm 1 (brief ../shared/papers/hongtu.md §1.5) on this
machine, one chunk at a time within the worker's memory budget.

Notation as :mod:`simulator.strategies.hongtu`. Preprocessing (once, not part of an epoch): the simulator
plug-in's two-level partition, reorganisation and transition sets (:func:`simulator.strategies.hongtu.slots`),
this worker's batch plans
(:mod:`.plan`), the host store (:mod:`.store`). Per epoch:

1. forward, l = 0..L-1, batch j: load the rows the buffer lacks (``h2d``), pull the peers' rows (``exchange``),
   compute without autograd (``forward``), write h^{l+1}_{V_ij} (the last layer: the loss gradient ∇h^L) and
   GCN's checkpoint a^l_{V_ij} to the host (``d2h``);
2. backward, l = L-1..0, batch j: load ∇h^{l+1}_{V_ij} and a^l_{V_ij} (GCN) or the neighbours again through the
   dedup path (GAT), recompute with autograd and back-propagate (``backward``; the weight gradients accumulate),
   and for l >= 1 push the partial gradients to their owners (``exchange``), write the flushed rows to the host
   (``d2h``), where they are added (``host_accumulate``);
3. ``all_reduce`` (sum) of the flattened weight gradients, then Adam (``optimizer``).

Loss = sum of the training vertices' cross-entropy / |training vertices|, so after the all-reduce every rank
holds the single-process full-graph gradient (up to float summation order). The working set (model state,
buffers allocated once, staging copies, the chunk's tensors and structure, and what autograd saves) is held in a
:class:`~.store.WorkingSet` bounded by the cluster's ``gpu.memory_bytes``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.assemble import rank0_first
from gnnplan.executor.data import Topology, build_graph, input_features
from gnnplan.executor.evaluate import Accuracy
from gnnplan.executor.features import fill
from gnnplan.executor.models import GNN
from gnnplan.executor.strategies.base import EpochStats, traffic_fields
from gnnplan.executor.strategies.hongtu import layers as ops
from gnnplan.executor.strategies.hongtu.plan import BatchPlan, batch_plans
from gnnplan.executor.strategies.hongtu.store import HostStore, WorkingSet
from gnnplan.executor.strategies.hongtu.transfer import Mover
from gnnplan.executor.trace import Recorder, now
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies import hongtu as sim
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.strategies.hongtu import dedup
from gnnplan.simulator.strategies.hongtu.work import chunk_work, layer_widths, optimizer_kernels
from gnnplan.simulator.workload.datasets import load_dataset

T = TypeVar("T")


class Trainer:
    """One rank of a ``hongtu`` run (construction is collective; module docstring).

    Args:
        topo: this worker's place (one worker per modelled machine).
        plan: strategy ``hongtu``, its knobs, the cluster (its ``gpu.memory_bytes`` is the budget) and the workload.
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        wl, self.knobs, self.rec = plan.workload, sim.Knobs.model_validate(plan.knobs), recorder
        check_workload(sim, wl)
        self.arch, self.rank, self.world, self.seed = wl.model.arch, topo.rank, topo.world_size, wl.training.seed
        graph = rank0_first(lambda: load_dataset(wl.dataset))
        too_many = sim.chunks_problem(graph.num_vertices, self.world, self.knobs.num_chunks)
        if too_many:
            raise SpecError(f"knobs: {too_many}")
        lay, placed = rank0_first(lambda: sim.slots(wl, self.knobs, self.world))
        _, transition = dedup.transition_sets(placed, lay.owner)
        g, weight = build_graph(graph, self.arch)
        splits = {name: np.isin(np.arange(graph.num_vertices), idx)
                  for name, idx in (("train", graph.train_idx), ("val", graph.val_idx), ("test", graph.test_idx))}
        self.plans, self.capacity = batch_plans(self.arch, self.knobs.dedup, self.rank, placed, transition,
                                                lay.owner, g, weight, graph.labels, splits)
        self.widths = layer_widths(wl.model, graph.feature_dim, graph.num_classes)
        owned = np.flatnonzero(lay.owner == self.rank)
        self.store = HostStore(graph.num_vertices, self.widths, self.arch == "gcn", owned,
                               input_features(graph, wl.dataset))
        self.num_train, self.dropout = len(graph.train_idx), wl.model.dropout
        self.my_train = int(splits["train"][owned].sum())
        counts = dedup.batch_counts(placed, lay.owner, self.knobs.dedup, 1)[self.rank]
        self.flops = [[chunk_work(plan.cluster, wl.model, self.widths, graph.feature_dim, graph.num_classes, layer,
                                  c).flops for layer in range(wl.model.num_layers)] for c in counts]
        torch.manual_seed(wl.training.seed)
        self.model = GNN(wl.model, graph.feature_dim, graph.num_classes)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.Adam(self.params, lr=wl.training.lr, weight_decay=wl.training.weight_decay)
        self.gradient_bytes = 4 * sum(p.numel() for p in self.params)
        self.optimizer_flops = sum(k.flops for k in optimizer_kernels(wl.model, graph.feature_dim, graph.num_classes))
        self.ws = WorkingSet(plan.cluster.gpu.memory_bytes)
        self.mover = Mover(recorder, self.ws)
        self._hold_model()
        # the merged transition/neighbour buffer and its gradients, allocated once for the widest layer (brief
        # §1.2, §1.7); a layer pass uses the leading capacity x d_l elements as a (capacity, d_l) matrix
        self.values = torch.empty(self.capacity * max(self.widths[:-1]))
        self.grads = torch.zeros(self.capacity * max(self.widths[1:-1], default=0))
        self.ws.hold("vertex buffer", self.values)
        self.ws.hold("gradient buffer", self.grads)

    # ------------------------------------------------------------------------------------------- helpers

    def _rows(self, flat: torch.Tensor, layer: int) -> torch.Tensor:
        """Layer ``layer``'s (capacity, d_l) view of a persistent buffer.

        Shapes:
            flat: (capacity x max width,) -> (capacity, d_l).
        """
        width = self.widths[layer]
        return flat[: self.capacity * width].view(self.capacity, width)

    def _hold_model(self) -> None:
        states = [t for s in self.optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        self.ws.hold("model state", *self.params, *(p.grad for p in self.params), *states)

    def _mask(self, layer: int, plan: BatchPlan, epoch: int, training: bool) -> torch.Tensor | None:
        if not training or layer == len(self.widths) - 2:
            return None
        shape = (len(plan.dst), self.widths[layer + 1])
        return ops.dropout_mask(self.dropout, shape, (self.seed, epoch + 1, layer, plan.chunk))

    def _hold_structure(self, plan: BatchPlan) -> None:
        self.ws.hold("chunk index structure", plan.matrix, plan.matrix_t, *plan.block_edges, plan.src_slots,
                      plan.dst, plan.load_rows, plan.load_slots, *plan.pull_slots, *plan.serve, *plan.push,
                      *plan.take, plan.flush_rows, plan.flush_slots, plan.clear_slots)

    def _compute(self, phase: str, layer: int, j: int, fn: Callable[[], T]) -> T:
        """Run ``fn`` as batch j's ``forward`` or ``backward`` compute span of layer ``layer``."""
        t0 = now()
        out = fn()
        if self.mover.traced:
            self.rec.add(phase, t0, now(), "compute", self.mover.epoch, 0,
                         flops=self.flops[j][layer][0 if phase == "forward" else 1], layer=layer, batch=j)
        return out

    def _fetch(self, layer: int, j: int, plan: BatchPlan, buf: torch.Tensor, direction: str,
               gather: tuple[tuple[torch.Tensor, torch.Tensor], ...] = ()) -> list[torch.Tensor]:
        """Fill the buffer's missing rows of batch j (h2d, then the peers' rows) and gather ``gather`` too."""
        where = {"layer": layer, "batch": j, "direction": direction}
        host = self.store.h[layer]
        got = self.mover.h2d(where, [(host, plan.load_rows, buf, plan.load_slots)], gather,
                             reused_bytes=4.0 * plan.fetch.num_reused * buf.shape[1])
        source = host if self.knobs.dedup == "none" else buf

        def land(k: int, rows: torch.Tensor) -> None:
            fill(buf, plan.pull_slots[k], rows)

        if plan.pulls_anywhere:
            self.mover.peers(where, plan.serve, source, [len(v) for v in plan.fetch.pulls], land, push=False,
                             path="host_to_gpu" if self.knobs.dedup == "none" else "peer")
        return got

    # ------------------------------------------------------------------------------------------- one epoch

    def _forward(self, layer: int, j: int, plan: BatchPlan, buf: torch.Tensor, epoch: int,
                 training: bool) -> tuple[float, torch.Tensor]:
        """Batch j of layer ``layer``'s forward pass; returns (its loss share, the last layer's logits when not
        training, else an empty tensor)."""
        self._hold_structure(plan)
        self._fetch(layer, j, plan, buf, "forward")
        last = layer == len(self.widths) - 2
        box: dict[str, float] = {"ce": 0.0}

        def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
            mask = self._mask(layer, plan, epoch, training)
            with torch.no_grad():
                a = ops.gcn_aggregate(plan.matrix, buf) if self.arch == "gcn" else buf[plan.src_slots]
                out = ops.gcn_update(self.model, layer, a, mask) if self.arch == "gcn" else \
                    ops.gat_apply(self.model, layer, plan.block, a, mask)
            if last and training:
                box["ce"], out = ops.loss_and_grad(out, plan.positions["train"], plan.labels["train"], self.num_train)
            return a, out, mask

        a, out, mask = self._compute("forward", layer, j, run)
        self.ws.hold("chunk tensors", a, out, mask)
        if not training:
            if not last:
                self.store.h[layer + 1][plan.dst] = out
            self.ws.drop("chunk tensors")
            return 0.0, out if last else torch.empty(0)
        target = self.store.grad[layer + 1] if last else self.store.h[layer + 1]
        writes = [(target, plan.dst, out)] + ([(self.store.a[layer], plan.dst, a)] if self.arch == "gcn" else [])
        self.mover.d2h({"layer": layer, "batch": j, "direction": "forward"}, writes)
        self.ws.drop("chunk tensors")
        return box["ce"], torch.empty(0)

    def _backward(self, layer: int, j: int, plan: BatchPlan, buf: torch.Tensor, grad: torch.Tensor | None,
                  epoch: int) -> None:
        """Batch j of layer ``layer``'s backward pass (module docstring, step 2); ``buf`` is the vertex buffer (GAT
        reloads its neighbours into it, GCN does not use it), ``grad`` the gradient buffer (None at layer 0)."""
        self._hold_structure(plan)
        upstream = self.store.grad[layer + 1]
        checkpoint: torch.Tensor | None = None
        if self.arch == "gcn":
            gz, checkpoint = self.mover.h2d({"layer": layer, "batch": j, "direction": "backward"}, [],
                                            ((upstream, plan.dst), (self.store.a[layer], plan.dst)))
        else:
            (gz,) = self._fetch(layer, j, plan, buf, "backward", ((upstream, plan.dst),))
        self.ws.hold("chunk tensors", gz, checkpoint)

        def run() -> torch.Tensor | None:
            mask = self._mask(layer, plan, epoch, True)
            src = checkpoint if checkpoint is not None else buf[plan.src_slots]
            src.requires_grad_(layer > 0)
            self.ws.add("chunk tensors", src, mask)
            with self.ws.saving():
                partial = self._recompute(layer, plan, src, gz, mask)
            if partial is not None and grad is not None:
                self.ws.add("chunk tensors", partial)
                grad.index_add_(0, plan.src_slots, partial)
            return partial

        partial = self._compute("backward", layer, j, run)
        self.ws.drop("saved")
        if grad is not None and partial is not None:
            self._push(layer, j, plan, grad)
        self.ws.drop("chunk tensors")

    def _recompute(self, layer: int, plan: BatchPlan, a: torch.Tensor, gz: torch.Tensor,
                   mask: torch.Tensor | None) -> torch.Tensor | None:
        """Re-run the layer (GCN: UPDATE from a^l; GAT: all of it), back-propagate ∇h^{l+1}; returns the partial
        gradients of the chunk's sources (None at layer 0)."""
        if self.arch == "gcn":
            ops.gcn_update(self.model, layer, a, mask).backward(gz)
            return None if a.grad is None else ops.gcn_input_grad(plan.matrix_t, a.grad)
        ops.gat_apply(self.model, layer, plan.block, a, mask).backward(gz)
        return a.grad

    def _push(self, layer: int, j: int, plan: BatchPlan, grad: torch.Tensor) -> None:
        """Algorithm 3: push partial gradients to their owners, flush this worker's rows to its host."""
        where, host = {"layer": layer, "batch": j, "direction": "backward"}, self.store.grad[layer]
        received: list[tuple[torch.Tensor, torch.Tensor]] = []

        def land(k: int, rows: torch.Tensor) -> None:
            if self.knobs.dedup == "none":
                received.append((plan.take[k], rows))
                self.ws.add("received gradients", rows)
            else:
                grad.index_add_(0, plan.take[k], rows)

        if plan.pushes_anywhere:
            self.mover.peers(where, plan.push, grad, [len(t) for t in plan.take], land, push=True,
                             path="gpu_to_host" if self.knobs.dedup == "none" else "peer")
        self.mover.flush(where, grad, plan.flush_slots, host, plan.flush_rows, received)
        grad[plan.clear_slots] = 0.0

    def step(self, epoch: int = -1) -> float:
        """Forward, backward and the gradient all-reduce (collective); no optimizer step.

        Returns:
            The summed cross-entropy of this worker's training vertices.
        """
        self.store.zero_gradients()
        ce = 0.0
        for layer in range(len(self.widths) - 1):
            buf = self._rows(self.values, layer)
            ce += sum(self._forward(layer, j, p, buf, epoch, True)[0] for j, p in enumerate(self.plans))
        for layer in range(len(self.widths) - 2, -1, -1):
            grad = self._rows(self.grads, layer).zero_() if layer > 0 else None
            for j, p in enumerate(self.plans):
                self._backward(layer, j, p, self._rows(self.values, layer), grad, epoch)
        self.ws.drop("chunk index structure")
        self._all_reduce(epoch)
        return ce

    def _all_reduce(self, epoch: int) -> None:
        t0 = now()
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in self.params])
        if self.world > 1:
            comm.all_reduce_(flat)
        offset = 0
        for p in self.params:
            p.grad = flat[offset: offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self._hold_model()
        self.rec.add("all_reduce", t0, now(), "network", epoch, 0, nbytes=self.gradient_bytes)

    # --------------------------------------------------------------------------------------- the protocol

    def train_epoch(self, epoch: int) -> EpochStats:
        """One full-graph step, traced (collective)."""
        self.mover.epoch, self.mover.traced = epoch, True
        before, sent, start = self.mover.bytes.as_dict(), comm.traffic_mark(), now()
        self.optimizer.zero_grad()
        ce = self.step(epoch)
        t1 = now()
        self.optimizer.step()
        end = now()
        self._hold_model()
        self.rec.add("optimizer", t1, end, "compute", epoch, 0, flops=self.optimizer_flops)
        self.rec.add("iteration", start, end, "host", epoch, 0)
        self.rec.add("epoch", start, end, "host", epoch)
        after = self.mover.bytes.as_dict()
        return EpochStats(epoch_s=end - start, loss_sum=ce, num_seeds=self.my_train, num_iterations=1,
                          hit_bytes=int(after["reuse"] - before["reuse"]),
                          # both directions cross PCIe, as the simulator's link bytes count them
                          local_bytes=int(sum(after[k] - before[k] for k in ("host_to_gpu", "gpu_to_host"))),
                          **traffic_fields(comm.traffic_since(sent)))

    def gradient(self) -> tuple[float, dict[str, torch.Tensor]]:
        """(this worker's loss share, the all-reduced full-graph gradient by parameter name) (collective)."""
        self.mover.traced = False
        self.optimizer.zero_grad()
        ce = self.step()
        grads = {n: p.grad.detach().clone() for n, p in self.model.named_parameters() if p.grad is not None}
        self.optimizer.zero_grad()
        return ce / max(self.num_train, 1), grads

    def evaluate(self, epoch: int = -1) -> Accuracy:
        """Validation / test accuracy counts of this worker's vertices: the forward pass without dropout, not
        traced or counted (collective: it moves rows between workers); ``epoch`` is unused."""
        self.mover.traced = False
        correct = {"val": 0, "test": 0}
        total = {"val": 0, "test": 0}
        for layer in range(len(self.widths) - 1):
            buf = self._rows(self.values, layer)
            for j, p in enumerate(self.plans):
                _, logits = self._forward(layer, j, p, buf, -1, False)
                if layer < len(self.widths) - 2:
                    continue
                for split in correct:
                    pred = logits[p.positions[split]].argmax(1)
                    correct[split] += int((pred == p.labels[split]).sum())
                    total[split] += len(p.positions[split])
        self.mover.traced = True
        return Accuracy(correct["val"], total["val"], correct["test"], total["test"])

    def close(self) -> None:
        """Nothing to release (the host store's files are unlinked at construction)."""
