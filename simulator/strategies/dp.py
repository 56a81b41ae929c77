"""Data-parallel mini-batch training in the style of DGL/DistDGL (``dp``): the baseline strategy.

Per iteration, every worker (GPU) takes its share of the global mini-batch (seeds split by owner, DistDGL's
``node_split``), then:

1. samples an L-layer block list on the host CPU (DGL ``NeighborSampler``, fanouts input side first);
2. loads the input vertices' features: hits in its GPU feature cache (the ``cache_fraction`` highest-degree
   vertices, as PaGraph) cost a GPU-memory read; misses owned by its machine cross PCIe from host memory;
   misses owned by another machine cross that machine's NIC and then PCIe (DistDGL's KVStore pull);
3. runs forward and backward;
4. all-reduces the gradients (ring all-reduce, DDP).

With ``num_sampler_workers > 0`` sampling (and the host-side gather) of the next iterations runs ahead of
compute in separate processes, as DGL's DataLoader prefetches; with 0 it runs inline.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NAME = "dp"
SUPPORTS = ("mini-batch",)


class Knobs(BaseModel):
    """The ``dp`` strategy's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_fraction: float = Field(
        default=0.0, ge=0, le=1,
        description="fraction of all vertices whose features each GPU caches, highest in-degree first")
    partitioner: Literal["metis", "random"] = Field(
        default="metis", description="how vertices (and their features) are assigned to machines")
    num_sampler_workers: int = Field(
        default=0, ge=0, le=64, description="sampler processes per worker; 0 samples inline without overlap")
    batch_size: int | None = Field(
        default=None, ge=1, description="overrides training.batch_size (global seeds per iteration) if set")


def suggest(trial: Any, workload: Any, tune_batch_size: bool = False) -> Knobs:
    """The Optuna search space of ``dp`` (parameter names ``dp.<knob>``).

    Args:
        trial: an ``optuna.Trial`` (duck-typed: ``suggest_float``, ``suggest_categorical``, ``suggest_int``).
        workload: the :class:`~simulator.workload.spec.WorkloadSpec`; its batch size is the centre of the
            batch-size range when ``tune_batch_size`` is set.
        tune_batch_size: whether the user allows changing the batch size.

    Returns:
        The knobs of this trial.
    """
    knobs: dict[str, Any] = {
        "cache_fraction": trial.suggest_float(f"{NAME}.cache_fraction", 0.0, 1.0),
        "partitioner": trial.suggest_categorical(f"{NAME}.partitioner", ["metis", "random"]),
        "num_sampler_workers": trial.suggest_int(f"{NAME}.num_sampler_workers", 0, 4),
    }
    if tune_batch_size:
        base = workload.training.batch_size
        choices = sorted({max(1, base // 4), max(1, base // 2), base, base * 2, base * 4})
        knobs["batch_size"] = trial.suggest_categorical(f"{NAME}.batch_size", choices)
    return Knobs(**knobs)
