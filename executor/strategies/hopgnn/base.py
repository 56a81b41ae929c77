"""What both of hopgnn's executors share (micrograph training, :class:`~executor.strategies.hopgnn.MicrographTrainer`;
the naive variant, :class:`~executor.strategies.hopgnn.naive.NaiveTrainer`): the model, its optimizer and sampler,
every worker's seed batches, the global batch's split among the models, and the gradient all-reduce."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm
from gnnplan.executor.assemble import load_training_data
from gnnplan.executor.data import Topology
from gnnplan.executor.evaluate import Accuracy, Evaluator
from gnnplan.executor.sampling_keyed import make_sampler
from gnnplan.executor.strategies.base import adam, seeded_gnn
from gnnplan.executor.strategies.hopgnn.exchange import pack, unpack
from gnnplan.executor.strategies.hopgnn.home import HomeSchedule
from gnnplan.executor.trace import Recorder, defer_passes, now
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies.base import batch_size_of
from gnnplan.simulator.strategies.hopgnn import Knobs
from gnnplan.simulator.workload.batches import owner_split, random_split
from gnnplan.simulator.workload.model_cost import Block, model_cost


class HopTrainerBase:
    """One rank's model, optimizer, sampler and seed schedule (construction is collective: the training data).

    Args:
        topo: this worker's place.
        plan: strategy ``hopgnn``, its knobs and the workload.
        recorder: receives the spans.
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        self.topo, self.rec = topo, recorder
        self.workload = wl = plan.workload
        self.knobs = Knobs.model_validate(plan.knobs)
        self.per_iteration = batch_size_of(self.knobs, wl) // topo.world_size
        self.data = d = load_training_data(wl, self.knobs.partitioner, 0.0, topo)
        self.model = seeded_gnn(wl, d.feature_dim, d.num_classes, topo.device)
        self.params = list(self.model.parameters())
        self.optimizer, self.optimizer_flops = adam(self.model, wl)
        self.sampler = make_sampler(self.knobs.sampler, wl.training.fanouts, wl.training.seed)
        self.home = HomeSchedule(d.train_idx, d.owner, topo.num_machines, topo.gpus_per_machine, wl.training.seed,
                                 self.per_iteration, topo.rank, self.knobs.seed_split)
        self.evaluator = Evaluator(d, topo, rec=recorder, model_spec=wl.model)

    def schedule(self, epoch: int) -> tuple[list[list[np.ndarray]], list[int]]:
        """Every worker's seed batches of an epoch (``[worker][iteration]``) and each iteration's global size."""
        return self.home.batches(epoch)

    def split(self, seeds: np.ndarray) -> list[np.ndarray]:
        """A global batch's seeds split among the models as an epoch's are (``seed_split``)."""
        topo = self.topo
        seeds = np.asarray(seeds, dtype=np.int64)
        if self.knobs.seed_split == "random":
            return random_split(seeds, topo.world_size)
        return owner_split(seeds, self.data.owner, topo.num_machines, topo.gpus_per_machine)

    def all_reduce_gradients(self, start_s: float, epoch: int, it: int) -> None:
        """Sum every parameter's gradient over the workers (one flat all-reduce, collective) — span
        ``all_reduce`` from ``start_s``."""
        flat = comm.all_reduce_(pack(self.params, with_parameters=False))
        unpack(self.params, flat, with_parameters=False)
        self.rec.add("all_reduce", start_s, now(), "network", epoch, it, nbytes=flat.numel() * flat.element_size())

    def backward(self, ce: torch.Tensor, global_size: int, blocks: list[Any], start_s: float, epoch: int,
                 it: int, num_seeds: int) -> float:
        """Backward of ``ce / global_size`` (the summed cross-entropy of ``num_seeds`` seeds, forward begun at
        ``start_s`` on ``blocks``); the forward and backward spans are recorded later with their FLOPs
        (:func:`executor.trace.defer_passes`). Returns when backward ended."""
        t2 = now()
        (ce / global_size).backward()
        t3 = now()
        sizes = [Block(b.num_src_nodes(), b.num_dst_nodes(), b.num_edges()) for b in blocks]
        defer_passes(self.rec, functools.partial(model_cost, self.workload.model, self.data.feature_dim,
                                                 self.data.num_classes, sizes), (start_s, t2, t3), epoch, it,
                     num_seeds=num_seeds)
        return t3

    def optimizer_step(self, start_s: float, epoch: int, it: int) -> None:
        """Adam on the summed gradients — span ``optimizer`` — closing iteration ``it`` begun at ``start_s`` —
        span ``iteration``."""
        t1 = now()
        self.optimizer.step()
        t2 = now()
        self.rec.add("optimizer", t1, t2, "compute", epoch, it, flops=self.optimizer_flops)
        self.rec.add("iteration", start_s, t2, "host", epoch, it)

    def take_gradients(self) -> dict[str, torch.Tensor]:
        """The accumulated gradients (CPU copies, by parameter name), cleared afterwards."""
        grads = {n: p.grad.detach().cpu().clone() for n, p in self.model.named_parameters()}
        for p in self.params:
            p.grad = None
        return grads

    def evaluate(self, epoch: int = -1) -> Accuracy:
        """Validation / test accuracy counts of this rank's vertices (collective), by traced layer-wise inference
        (:class:`~gnnplan.executor.evaluate.Evaluator`; ``epoch`` labels its spans)."""
        return self.evaluator.run(self.model, epoch)
