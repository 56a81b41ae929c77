"""A plan: what to run (cluster, workload, strategy, knobs) and what the simulator predicted for it.

Written by ``gnnplan tune -o PLAN`` and read by ``gnnplan run PLAN``. Cluster and workload are stored inline
so a plan is self-contained and reproducible.

Example::

    strategy: dp
    knobs: {cache_fraction: 0.1, partitioner: metis, num_sampler_workers: 0}
    num_workers: 2
    cluster: {name: local, ...}
    workload: {dataset: cora, model: {...}, training: {...}}
    prediction: {epoch_time_s: 0.41, ...}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.io import atomic_write_yaml, read_yaml
from gnnplan.simulator.limits import check_block
from gnnplan.simulator.workload.spec import WorkloadSpec


class Plan(BaseModel):
    """A runnable configuration.

    The free-form blocks (``knobs`` before the strategy validates them, ``prediction``) hold plain data only:
    finite numbers, bounded nesting and size (:func:`simulator.limits.check_block`); the YAML reader already
    refuses aliases (:func:`simulator.io.read_yaml`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    strategy: str
    knobs: dict[str, Any] = Field(default_factory=dict)
    num_workers: int = Field(ge=1, description="worker processes (ranks); the cluster's GPU count by default")
    cluster: ClusterSpec
    workload: WorkloadSpec
    prediction: dict[str, Any] = Field(default_factory=dict)

    @field_validator("knobs", "prediction")
    @classmethod
    def _plain_data(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Free-form blocks: plain, finite, bounded data (:func:`simulator.limits.check_block`)."""
        check_block(value)
        return value


def shaped_like(cluster: ClusterSpec, plan: Plan) -> ClusterSpec:
    """``cluster``'s parameters at ``plan``'s shape (its cluster's machines and GPUs per machine): how a cluster
    calibrated on some runs predicts the plan of another."""
    return cluster.model_copy(update={"num_machines": plan.cluster.num_machines,
                                      "gpus_per_machine": plan.cluster.gpus_per_machine})


def load_plan(path: str | Path) -> Plan:
    """Read and validate a plan YAML.

    Raises:
        SpecError: missing file, malformed YAML, or an invalid field.
    """
    from gnnplan.simulator.overrides import file_values, unknown_key

    data = read_yaml(path, "plan")
    where = f"plan {Path(path).name}"
    if isinstance(data, dict):  # its blocks read as their own files are (units in the cluster, misspelt keys)
        unknown_key(Plan, data, where)
        if isinstance(data.get("cluster"), dict):
            data = {**data, "cluster": file_values(ClusterSpec, data["cluster"], f"{where}: cluster")}
        unknown_key(WorkloadSpec, data.get("workload"), f"{where}: workload")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None


def save_plan(path: str | Path, plan: Plan) -> Path:
    """Write a plan atomically."""
    return atomic_write_yaml(path, plan.model_dump(mode="json"))
