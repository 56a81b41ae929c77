"""A plan: what to run (cluster, workload, strategy, knobs) and what the simulator predicted for it.

Written by ``gnnplan tune -o PLAN`` and read by ``gnnplan run PLAN``. Cluster and workload are stored inline
so a plan is self-contained and reproducible.

Example::

    strategy: dp
    knobs: {cache_fraction: 0.1, partitioner: metis, num_sampler_workers: 0}
    num_workers: 2
    cluster: {name: local, ...}
    workload: {dataset: cora, model: {...}, training: {...}}
    prediction: {epoch_time_s: 0.41, ..., configuration: "c1:3f2a..."}

``prediction.configuration`` is the digest of the configuration the prediction is of (:func:`configuration_digest`):
a plan edited by hand afterwards no longer matches it, and ``gnnplan run`` says its prediction is stale instead of
comparing the run with it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.io import atomic_write_yaml, read_yaml
from gnnplan.simulator.limits import check_block
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.workload.spec import WorkloadSpec


class Plan(SpecModel):
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
    if not isinstance(path, (str, os.PathLike)):
        raise SpecError(f"plan: a plan YAML's path (got {type(path).__name__})")
    return plan_from_dict(read_yaml(path, "plan"), f"plan {Path(path).name}")


def plan_from_dict(data: Any, where: str = "plan") -> Plan:
    """Validate a mapping as a :class:`Plan`, its blocks read as their own files are (units in the cluster,
    misspelt keys named), raising :class:`SpecError` with a one-line message."""
    from gnnplan.simulator.overrides import file_values, unknown_key
    from gnnplan.simulator.spec_checked import mark_valid

    if isinstance(data, dict):
        unknown_key(Plan, data, where)
        if isinstance(data.get("cluster"), dict):
            data = {**data, "cluster": file_values(ClusterSpec, data["cluster"], f"{where}: cluster")}
        unknown_key(WorkloadSpec, data.get("workload"), f"{where}: workload")
    try:
        return mark_valid(Plan.model_validate(data))
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None


def checked_plan(plan: Plan) -> Plan:
    """``plan`` validated again from every attribute it holds when it was built or edited in Python
    (``model_copy(update=...)`` does not validate: a plan whose cluster was edited to 0 machines ran, 2026-12-01),
    as :func:`simulator.spec_checked.checked` does for clusters and workloads.

    Raises:
        SpecError: one line naming the field.
    """
    from gnnplan.simulator.spec_checked import checked

    return checked(plan, plan_from_dict)


def save_plan(path: str | Path, plan: Plan) -> Path:
    """Write a plan atomically."""
    return atomic_write_yaml(path, plan.model_dump(mode="json"))


DIGEST_KEY = "configuration"
"""Key of the prediction block that holds :func:`configuration_digest` of the plan it was made for."""
DIGEST_FORMAT = "c1"
"""Version of :func:`configuration_digest`, the stamp's prefix (``c1:<hex>``): a stamp of another version (an older
gnnplan's) cannot tell an edit from a change of the formula, so the prediction is then taken as it is."""


def configuration_digest(plan: Plan) -> str:
    """A digest (16 hex digits of SHA-1) of everything a plan's prediction depends on: strategy, knobs, workers,
    cluster (but where its numbers come from, ``sources``) and workload (but its epoch count: the prediction is per
    epoch), as they read back from the plan's YAML."""
    data = plan.model_dump(mode="json", include={"strategy", "knobs", "num_workers", "cluster", "workload"})
    data["cluster"].pop("sources", None)
    data["workload"]["training"].pop("num_epochs", None)
    return f"{DIGEST_FORMAT}:{hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]}"


def with_prediction(plan: Plan, prediction: dict[str, Any]) -> Plan:
    """``plan`` holding ``prediction``, stamped with the digest of the configuration it predicts."""
    return plan.model_copy(update={"prediction": {**prediction, DIGEST_KEY: configuration_digest(plan)}})


def predicted_epoch_s(plan: Plan) -> tuple[float | None, str | None]:
    """The plan's predicted epoch time in seconds, or None with why not: no prediction, an infeasible one, or one
    made before the plan was edited (its :data:`DIGEST_KEY` differs from the plan's configuration). A plan without
    a stamp of this :data:`DIGEST_FORMAT` (written before 2026-12-01, or by another version) is taken as it is."""
    pred = plan.prediction
    value = pred.get("epoch_time_s")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not pred.get("feasible", True):
        return None, "the plan holds no feasible prediction"
    stamp, now = pred.get(DIGEST_KEY), configuration_digest(plan)
    if isinstance(stamp, str) and stamp.startswith(f"{DIGEST_FORMAT}:") and stamp != now:
        return None, ("the plan's configuration is not the one its prediction was made for (its strategy, knobs, "
                      "workers, cluster or workload were changed since, by hand or for another layout): simulate "
                      "it again")
    return float(value), None
