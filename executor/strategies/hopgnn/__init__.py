"""HopGNN (``hopgnn``) for real: models migrate through a ring of workers to the features of their micrographs.

The same strategy as :mod:`simulator.strategies.hopgnn` (same ``NAME`` and ``Knobs``; terms defined there and in
:mod:`simulator.strategies.hopgnn.micrographs`). Built on the ``dp`` pipeline: the same shuffled seeds and
per-worker split (:func:`simulator.workload.batches.epoch_seeds`), so model d trains exactly ``dp``'s worker-d
mini-batch. Per iteration worker s

1. samples, at home, the micrograph groups it trains (:mod:`executor.strategies.hopgnn.home`): every rank knows
   every model's batch from the shared seed schedule, groups the seeds by home machine, merges steps
   (:class:`~executor.strategies.hopgnn.exchange.MergeController`) and samples each group it hosts with one
   sampler call (DGL's ``NeighborSampler``, or with ``sampler = keyed`` the
   :class:`~executor.sampling_keyed.KeyedSampler`), inline or ahead in sampler processes — span ``sample``; no
   message is needed (paper §5.1 steps 1-2; brief §1.9 step 4). With ``seed_split = random`` the models' batches
   are even cuts of the shuffled seeds (the paper's globally random mini-batches) instead of ``dp``'s per-worker
   batches (the global batch, and its gradient in expectation, are the same);
2. with ``pregather``, pulls the distinct remote input rows of all groups it trains once — ``pregather``
   (``nbytes`` = requests and rows received);
3. for each step: takes the rows of its group (buffer, or a per-step ``fetch`` pull without pre-gathering) —
   ``load``; forward and backward with loss ``sum(cross-entropy) / B`` (B = global seeds of the iteration) added
   to the hosted model's accumulated gradient — ``forward``, ``backward``; then, except after the last step,
   sends parameters and accumulated gradients to the worker hosting the model at the next step and takes over
   the model arriving — ``migrate`` (``nbytes`` = bytes sent; includes waiting for the partner);
4. sums the gradients over workers — ``all_reduce`` — and runs Adam — ``optimizer``.

The summed gradient is ``dp``'s averaged gradient of the same global mini-batch when both sample the same
neighbours: always with ``sampler = keyed`` (a vertex's sample is keyed by (seed, epoch, iteration, layer,
vertex), so a group sampled at home is exactly the part of ``dp``'s batch sample reaching its seeds), and with
DGL's sampler only in distribution (home machines draw from their own RNG streams). The naive variant
(``micrograph = false``: every model tours all machines with its whole subgraph) is
:class:`~executor.strategies.hopgnn.naive.NaiveTrainer`; :func:`Trainer` picks by the knob.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.models import attach_edge_weights
from gnnplan.executor.strategies.base import EpochStats
from gnnplan.executor.strategies.hopgnn.base import HopTrainerBase
from gnnplan.executor.strategies.hopgnn.exchange import Buffer, MergeController, migrate, pregather
from gnnplan.executor.strategies.hopgnn.home import (
    GroupStream,
    Hosted,
    HostedBatch,
    hosted_groups,
    sample_hosted,
)
from gnnplan.executor.strategies.hopgnn.naive import ARCHS, NaiveTrainer
from gnnplan.executor.trace import Recorder, now, record_load
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.strategies.hopgnn import NAME, Knobs
from gnnplan.simulator.strategies.hopgnn.micrographs import host_worker
from gnnplan.simulator.workload.spec import WorkloadSpec

__all__ = ["NAME", "Knobs", "Trainer", "check_knobs"]


def check_knobs(knobs: Knobs, workload: WorkloadSpec | None = None) -> None:
    """Reject knobs the executor cannot run (called by :func:`executor.runner.resolved_plan` before spawning).

    Raises:
        SpecError: the naive variant (``micrograph = false``) with sampler processes (it samples in the trainer),
            or for a ``gat`` workload (its attention is no sum over in-edges: :mod:`executor.strategies.hopgnn.naive`;
            simulated only).
    """
    if knobs.micrograph:
        return
    if knobs.num_sampler_workers > 0:
        raise SpecError("knobs.num_sampler_workers: the naive variant (micrograph=false) samples in the trainer; set "
                        f"it to 0 (got {knobs.num_sampler_workers})")
    if workload is not None and workload.model.arch not in ARCHS:
        raise SpecError(f"model.arch: the naive variant (micrograph=false) runs {', '.join(ARCHS)}; "
                        f"{workload.model.arch}'s attention needs every input row at once (simulated only)")


def Trainer(topo: Topology, plan: Plan, recorder: Recorder) -> MicrographTrainer | NaiveTrainer:  # noqa: N802
    """One rank of a ``hopgnn`` run (the executor's plug-in entry, construction collective): micrograph training,
    or with ``micrograph = false`` the naive variant.

    Raises:
        SpecError: knobs the executor cannot run (:func:`check_knobs`).
    """
    knobs = Knobs.model_validate(plan.knobs)
    check_knobs(knobs, plan.workload)
    return MicrographTrainer(topo, plan, recorder) if knobs.micrograph else NaiveTrainer(topo, plan, recorder)


class MicrographTrainer(HopTrainerBase):
    """One rank of a ``hopgnn`` run (construction is collective).

    Args:
        topo: this worker's place.
        plan: strategy ``hopgnn``, its knobs and the workload.
        recorder: receives the spans.

    Raises:
        SpecError: ``micrograph = false`` (that is :class:`~executor.strategies.hopgnn.naive.NaiveTrainer`).
    """

    def __init__(self, topo: Topology, plan: Plan, recorder: Recorder) -> None:
        super().__init__(topo, plan, recorder)
        if not self.knobs.micrograph:
            raise SpecError("knobs.micrograph: false is the naive variant (executor.strategies.hopgnn.naive)")
        wl, d = self.workload, self.data
        self.stream = GroupStream(d.graph, self.sampler, self.home, len(self.schedule(0)[1]),
                                  self.knobs.num_sampler_workers, wl.training.seed)
        self.controller = MergeController(topo.num_machines, self.knobs.num_steps, self.knobs.merge_revert,
                                          self.knobs.controller_warmup_epochs)
        torch.manual_seed(wl.training.seed * 7919 + topo.rank)  # dropout masks differ between ranks

    def epoch_settings(self) -> dict[str, int]:
        """The next epoch's step count S (the merge controller's choice, :class:`MergeController`)."""
        return {"num_steps": self.controller.num_steps}

    def train_epoch(self, epoch: int) -> EpochStats:
        """Train one epoch with the controller's step count, recording spans (collective)."""
        sizes = self.schedule(epoch)[1]
        merges = self.controller.merges
        stream = self.stream.epoch(epoch, merges)
        stats = EpochStats(num_iterations=len(sizes))
        sent, start = comm.traffic_mark(), now()
        loss_sum = torch.zeros((), dtype=torch.float64)
        for it, size in enumerate(sizes):
            t0 = now()
            hosted = next(stream)
            self.rec.add("sample", hosted.start_s, hosted.end_s, "sampler", epoch, it,
                         num_input_vertices=hosted.num_input_vertices, num_sampled_edges=hosted.num_sampled_edges,
                         num_groups=len(hosted.groups),
                         num_sampler_calls=sum(len(h.blocks) for h in hosted.groups.values()))
            loss_sum += self.iteration(hosted, size, epoch, it, stats)
            self.optimizer_step(t0, epoch, it)
        end = now()
        self.rec.add("epoch", start, end, "host", epoch, num_steps=self.topo.num_machines - merges)
        stats.epoch_s, stats.loss_sum = end - start, float(loss_sum)
        stats.network_bytes, stats.intra_machine_bytes = comm.traffic_since(sent)
        self.controller.update(comm.max_over_ranks(stats.epoch_s))
        return stats

    def iteration(self, hosted: HostedBatch, global_size: int, epoch: int = -1, it: int = -1,
                  stats: EpochStats | None = None) -> torch.Tensor:
        """Pre-gather, the steps with migrations, and the gradient all-reduce of one iteration (collective); no
        optimizer step. Returns the summed cross-entropy of the seeds trained here."""
        for p in self.params:
            p.grad = torch.zeros_like(p)
        t1 = now()
        steps = hosted.steps
        buffer = None
        if self.knobs.pregather:
            buffer = pregather(self.data.store, self.topo, hosted.groups)
            t2 = now()
            pulled = buffer.pull
            nbytes = 0 if pulled is None else pulled.reply_bytes + pulled.request_bytes
            self.rec.add("pregather", t1, t2, "network", epoch, it, nbytes=nbytes,
                         num_remote_vertices=0 if pulled is None else pulled.num_rows,
                         num_local_vertices=buffer.num_local)
            if stats is not None and pulled is not None:
                stats.remote_bytes += pulled.reply_bytes
                stats.local_bytes -= pulled.reply_bytes  # the steps count every input row as copied to the device
        loss = torch.zeros((), dtype=torch.float64)
        for k, t in enumerate(steps):
            loss += self._step(k, hosted.groups.get(k), buffer, global_size, epoch, it, stats)
            if k < len(steps) - 1:
                self._migrate(k, t, steps[k + 1], epoch, it)
        self.all_reduce_gradients(now(), epoch, it)
        return loss

    def _step(self, k: int, group: Hosted | None, buffer: Buffer | None, global_size: int, epoch: int, it: int,
              stats: EpochStats | None) -> torch.Tensor:
        """Load, forward and backward of the group hosted at step k (an idle slot if None; without
        pre-gathering the per-step pull is collective, so it runs on every rank)."""
        t0 = now()
        store, row = self.data.store, self.data.store.row_bytes
        nodes = group.input_nodes if group is not None else torch.empty(0, dtype=torch.int64)
        fetch, remote = None, 0
        if buffer is not None:
            x = buffer.lookup(nodes)
        else:
            x, loaded = store.load(nodes)
            fetch, remote = loaded.fetch, loaded.num_remote
        t1 = now()
        _, local_bytes, remote_bytes = record_load(self.rec, ("load", "fetch"), (t0, t1), epoch, it, row,
                                                   (len(nodes), 0, len(nodes) - remote, remote), fetch, step=k)
        if stats is not None:
            stats.remote_bytes += remote_bytes
            stats.local_bytes += local_bytes
        if group is None:
            return torch.zeros((), dtype=torch.float64)
        if stats is not None:
            stats.num_seeds += len(group.seeds)
        return self._train_group(group, x, global_size, epoch, it, t1)

    def _train_group(self, group: Hosted, x: torch.Tensor, global_size: int, epoch: int, it: int,
                     t1: float) -> torch.Tensor:
        """Forward and backward of one micrograph group; gradients add to the hosted model's."""
        attach_edge_weights(group.blocks, self.data.edge_weight)
        blocks = group.blocks
        y = self.data.labels[torch.from_numpy(group.seeds)]
        ce = F.cross_entropy(self.model(blocks, x), y, reduction="sum")
        self.backward(ce, global_size, blocks, t1, epoch, it, len(group.seeds))
        return ce.detach().double()

    def _migrate(self, k: int, step: int, next_step: int, epoch: int, it: int) -> None:
        """Ring shift from step ``step`` to ``next_step``: the model here moves on, the next one arrives."""
        topo = self.topo
        m, g = topo.num_machines, topo.gpus_per_machine
        here = ((topo.machine - step) % m) * g + topo.local_rank          # model hosted now
        coming = ((topo.machine - next_step) % m) * g + topo.local_rank   # model hosted at the next step
        t0 = now()
        nbytes = migrate(self.params, self.knobs.migrate_parameters, host_worker(here, next_step, m, g),
                         host_worker(coming, step, m, g))
        self.rec.add("migrate", t0, now(), "network", epoch, it, nbytes=nbytes, step=k)

    def gradient(self, seeds: np.ndarray) -> dict[str, torch.Tensor]:
        """The summed gradient of one global mini-batch with explicit seeds by the training code path (collective;
        every rank passes the same ``seeds``), with the knobs' fixed step count (M without ``num_steps``).

        Returns:
            Parameter name -> gradient (CPU copies), identical on every rank.
        """
        topo = self.topo
        steps, groups = hosted_groups(self.split(seeds), self.data.owner, topo.num_machines, topo.gpus_per_machine,
                                      self.controller.merges, topo.rank)
        self.iteration(sample_hosted(self.data.graph, self.sampler, steps, groups, None), len(seeds))
        return self.take_gradients()

    def extra_state(self) -> dict[str, object]:
        """The merge controller's state, saved with checkpoints (:mod:`executor.checkpoint`)."""
        c = self.controller
        return {"merges": c.merges, "frozen": c.frozen, "history": [[s, t] for s, t in c.history]}

    def load_extra_state(self, state: dict) -> None:  # type: ignore[type-arg]
        """Restore what :meth:`extra_state` saved."""
        c = self.controller
        c.merges, c.frozen = int(state["merges"]), bool(state["frozen"])
        c.history = [(int(s), float(t)) for s, t in state["history"]]

    def close(self) -> None:
        """Stop the sampler processes."""
        self.stream.close()
