"""HopGNN's data movement in the executor: the pre-gather buffer, model migration and the merge controller
(mechanism and terms: :mod:`simulator.strategies.hopgnn`; paper-private terms are defined in
:mod:`simulator.strategies.hopgnn.micrographs`). The micrograph groups are sampled at home and move nowhere
(:mod:`executor.strategies.hopgnn.home`).

Notation: M -> ``num_machines``, S -> ``num_steps``, mg_d^s -> a micrograph group, |R_s| -> the pre-gather's
remote rows, m (merges) -> ``num_merges``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnnplan.executor import comm
from gnnplan.executor.data import Topology
from gnnplan.executor.features import FeatureStore, PullStats
from gnnplan.executor.strategies.hopgnn.home import Hosted


@dataclass
class Buffer:
    """Feature rows of an iteration's input vertices (the pre-gather buffer), looked up by vertex id.

    Shapes:
        ids: (u,) sorted int64; rows: (u, d) float32.
    """

    ids: torch.Tensor
    rows: torch.Tensor
    pull: PullStats | None
    num_local: int

    def lookup(self, nodes: torch.Tensor) -> torch.Tensor:
        """Rows of ``nodes`` (all must be in the buffer). Shapes: (k,) int64 -> (k, d)."""
        return torch.index_select(self.rows, 0, torch.searchsorted(self.ids, nodes))


def pregather(store: FeatureStore, topo: Topology, hosted: dict[int, Hosted]) -> Buffer:
    """Gather the distinct input rows of all hosted groups: local ones from the machine's partition, remote ones
    in ONE pull from their owners (collective on a multi-machine cluster; paper §5.2)."""
    parts = [h.input_nodes for h in hosted.values()]
    ids = torch.unique(torch.cat(parts)) if parts else torch.empty(0, dtype=torch.int64)
    if topo.num_machines == 1:
        return Buffer(ids, store.store.gather(ids), None, len(ids))
    rows = torch.empty((len(ids), store.dim))
    own = store.owner[ids]
    local = own == topo.machine
    rows[local] = store.store.gather(ids[local])
    pulled, stats = store.store.pull(ids[~local], own[~local] * topo.gpus_per_machine + topo.local_rank)
    rows[~local] = pulled
    return Buffer(ids, rows, stats, int(local.sum()))


def pack(params: list[torch.Tensor], with_parameters: bool) -> torch.Tensor:
    """The migration payload: (parameters and) accumulated gradients, flattened (float32)."""
    grads = [p.grad.reshape(-1) for p in params]
    return torch.cat(([p.detach().reshape(-1) for p in params] if with_parameters else []) + grads)


def unpack(params: list[torch.Tensor], flat: torch.Tensor, with_parameters: bool) -> None:
    """Load a migration payload into the replica: parameters (if carried) and gradients."""
    offset = 0
    with torch.no_grad():
        for part in ("data", "grad") if with_parameters else ("grad",):
            for p in params:
                n = p.numel()
                getattr(p, part).copy_(flat[offset:offset + n].view_as(p))
                offset += n


def migrate(params: list[torch.Tensor], with_parameters: bool, dst: int, src: int) -> int:
    """Send this replica's state to ``dst`` and take over the one arriving from ``src`` (ring shift); returns
    the bytes sent (0 when the model stays)."""
    flat = pack(params, with_parameters)
    incoming = torch.empty_like(flat)
    comm.shift(flat, dst, incoming, src)
    unpack(params, incoming, with_parameters)
    return 0 if dst == comm.rank() else flat.numel() * flat.element_size()


class MergeController:
    """The number of merges per epoch (paper §5.3; brief §1.9 step 10).

    The first ``1 + warmup_epochs`` epochs run M steps (the paper has no warm-up: its epoch 0 is the reference;
    [inferred] a cold first epoch carries one-time costs that would make any merge look profitable); after that
    one more step is merged per epoch while the epoch time (slowest rank) falls; at the first epoch that is not
    faster than the one before, the count freezes: at the previous count with ``revert`` (the fastest seen),
    else at the current one. A fixed ``num_steps`` disables the climb.

    Args:
        num_machines: M.
        num_steps: fixed S (capped at M) or None.
        revert: see above.
        warmup_epochs: epochs at M steps before the reference epoch.
    """

    def __init__(self, num_machines: int, num_steps: int | None, revert: bool, warmup_epochs: int = 0) -> None:
        self.m, self.revert, self.warmup = num_machines, revert, warmup_epochs
        self.frozen = num_steps is not None or num_machines == 1
        self.merges = num_machines - min(num_steps or num_machines, num_machines)
        self.history: list[tuple[int, float]] = []

    @property
    def num_steps(self) -> int:
        """S of the next epoch."""
        return self.m - self.merges

    def update(self, epoch_s: float) -> None:
        """Record an epoch's time (the same on every rank) and choose the next epoch's merges."""
        self.history.append((self.num_steps, epoch_s))
        if self.frozen or len(self.history) <= self.warmup:
            return
        if len(self.history) == self.warmup + 1 or epoch_s < self.history[-2][1]:
            if self.merges < self.m - 1:
                self.merges += 1
            else:
                self.frozen = True
            return
        self.frozen = True
        if self.revert:
            self.merges -= 1


__all__ = ["Buffer", "MergeController", "migrate", "pregather"]
