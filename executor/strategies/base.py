"""What every executor strategy's trainer reports per epoch, and the interface the runner drives.

A strategy module ``executor/strategies/<name>.py`` has the simulator plug-in's ``NAME`` and ``Knobs`` and a
``Trainer(topo, plan, recorder)`` (a class, or a function choosing one by the knobs, as hopgnn's) whose result
has ``train_epoch(epoch) -> EpochStats`` and ``evaluate(epoch) -> Accuracy``, both collective (every rank calls them
in the same order), and ``close()`` to release its processes; optionally ``check_knobs(knobs, workload)``,
raising SpecError for knobs that are simulated but cannot be run (for that workload), and on the trainer
``epoch_settings() -> dict`` when a controller changes its configuration between epochs (:class:`Trainer`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Protocol

import torch

from gnnplan.executor.evaluate import Accuracy
from gnnplan.executor.models import GNN, num_params
from gnnplan.simulator.workload.dgl_seed import seed_dgl
from gnnplan.simulator.workload.model_cost import ADAM_FLOPS_PER_PARAM
from gnnplan.simulator.workload.spec import WorkloadSpec


def seeded_gnn(workload: WorkloadSpec, feature_dim: int, num_classes: int, device: torch.device) -> GNN:
    """The message-passing model every rank builds identically: torch's and DGL's RNGs seeded with
    ``training.seed`` first, so the initial weights agree without a broadcast (dp, gsplit, hopgnn)."""
    torch.manual_seed(workload.training.seed)
    seed_dgl(workload.training.seed)
    return GNN(workload.model, feature_dim, num_classes).to(device)


def adam(model: torch.nn.Module, workload: WorkloadSpec) -> tuple[torch.optim.Adam, float]:
    """Adam on ``model``'s parameters with ``training.lr`` and ``training.weight_decay``, and its FLOPs per step
    (:data:`simulator.workload.model_cost.ADAM_FLOPS_PER_PARAM` per parameter, what the ``optimizer`` span
    carries)."""
    t = workload.training
    optimizer = torch.optim.Adam(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    return optimizer, ADAM_FLOPS_PER_PARAM * num_params(model)


def traffic_fields(traffic: tuple[int, int]) -> dict[str, int]:
    """:class:`EpochStats`' byte fields from :func:`executor.comm.traffic_since`: (other machines, this machine)."""
    return {"network_bytes": traffic[0], "intra_machine_bytes": traffic[1]}


@dataclass
class EpochStats:
    """One rank's epoch.

    Attributes:
        epoch_s: wall time of the epoch's iterations (evaluation excluded).
        loss_sum: summed cross-entropy of this rank's seeds.
        num_seeds: seeds this rank trained on.
        num_iterations: iterations (the same on every rank).
        hit_bytes, local_bytes, remote_bytes: feature bytes read from the cache, the machine's partition,
            and other machines.
        network_bytes: bytes this rank sent to ranks of other machines (feature requests and replies, gradients).
        intra_machine_bytes: bytes this rank sent to ranks of its own machine (NVLink or PCIe peer to peer on a GPU
            machine; :func:`executor.comm.traffic_since`).
    """

    epoch_s: float = 0.0
    loss_sum: float = 0.0
    num_seeds: int = 0
    num_iterations: int = 0
    hit_bytes: int = 0
    local_bytes: int = 0
    remote_bytes: int = 0
    network_bytes: int = 0
    intra_machine_bytes: int = 0

    @property
    def pcie_bytes(self) -> int:
        """Bytes copied host-to-device: local and remote misses."""
        return self.local_bytes + self.remote_bytes

    def as_list(self) -> list[float]:
        """Field values in declaration order (for a collective)."""
        return [float(getattr(self, f.name)) for f in fields(self)]


class Trainer(Protocol):
    """What :mod:`executor.runner` needs of a strategy's trainer.

    Optional: ``epoch_settings() -> dict[str, int]``, the settings the next epoch runs with where a controller
    changes them between epochs (hopgnn's ``num_steps``). Each epoch's record then carries them as ``settings``,
    and the run's steady-state figures use only the epochs that ran with the last epoch's settings
    (:func:`executor.runner.summarise`), as the simulator predicts the settled configuration.
    """

    def train_epoch(self, epoch: int) -> EpochStats:
        """Train one epoch (collective)."""

    def evaluate(self, epoch: int = -1) -> Accuracy:
        """Validation / test accuracy counts of this rank's share (collective); a trainer that traces its
        evaluation labels the spans with ``epoch``."""

    def close(self) -> None:
        """Release sampler processes and the like."""
