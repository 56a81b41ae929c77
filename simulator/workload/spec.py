"""Workload specification (pydantic), loaded from YAML: dataset, model and training (DESIGN.md, "Workload YAML").

Example::

    dataset: cora                 # preset name, an OGB-layout folder, or {generator: rmat, ...}
    model:    {arch: sage, num_layers: 2, hidden_dim: 16, num_heads: 1}
    training: {mode: mini-batch, batch_size: 64, fanouts: [10, 10], num_epochs: 10}

``training.batch_size`` is the number of seed vertices per iteration summed over all workers (the global
mini-batch); each of W workers takes ``batch_size / W`` of them. ``fanouts`` are per layer, input side first, as
DGL's ``NeighborSampler``; -1 takes all neighbours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.io import read_yaml

PRESET_DIR = Path(__file__).parent / "presets"
Arch = Literal["gcn", "sage", "gat", "gin", "sgc", "sign"]
MESSAGE_PASSING_ARCHS = ("gcn", "sage", "gat", "gin")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RmatSpec(_Spec):
    """A generated power-law graph: R-MAT with the Graph500 parameters, random features and labels.

    Source: Chakrabarti, Zhan and Faloutsos, "R-MAT", SDM 2004; parameters a=0.57, b=0.19, c=0.19, d=0.05 and
    edge factor 16 from the Graph500 benchmark specification (Kronecker generator, §3.3).
    """

    generator: Literal["rmat"]
    num_vertices: int = Field(ge=16)
    edge_factor: int = Field(default=16, ge=1, description="undirected edges generated per vertex")
    feature_dim: int = Field(default=128, ge=1)
    num_classes: int = Field(default=16, ge=2)
    train_fraction: float = Field(default=0.1, gt=0, lt=1)
    val_fraction: float = Field(default=0.05, ge=0, lt=1)
    test_fraction: float = Field(default=0.1, ge=0, lt=1)
    seed: int = 0

    @property
    def name(self) -> str:
        """A stable name used for caches and reports."""
        return (f"rmat-n{self.num_vertices}-e{self.edge_factor}-f{self.feature_dim}-c{self.num_classes}"
                f"-t{self.train_fraction:g}-v{self.val_fraction:g}-s{self.test_fraction:g}-seed{self.seed}")


class ModelSpec(_Spec):
    """The GNN: architecture, depth and widths."""

    arch: Arch
    num_layers: int = Field(ge=1, le=16)
    hidden_dim: int = Field(ge=1)
    num_heads: int = Field(default=1, ge=1, description="attention heads (gat only)")
    dropout: float = Field(default=0.5, ge=0, lt=1)


class TrainingSpec(_Spec):
    """How to train: mini-batch or full-graph, batch size and fanouts, epochs and optimiser settings."""

    mode: Literal["mini-batch", "full-graph"] = "mini-batch"
    batch_size: int = Field(default=1024, ge=1, description="global seed vertices per iteration")
    fanouts: list[int] = Field(default_factory=lambda: [10, 10])
    num_epochs: int = Field(default=10, ge=1)
    lr: float = Field(default=0.01, gt=0)
    weight_decay: float = Field(default=5e-4, ge=0)
    seed: int = 0

    @field_validator("fanouts")
    @classmethod
    def _fanouts(cls, v: list[int]) -> list[int]:
        if not v or any(f == 0 or f < -1 for f in v):
            raise ValueError("each fanout must be a positive integer or -1 (all neighbours)")
        return v


class WorkloadSpec(_Spec):
    """Dataset + model + training."""

    name: str = ""
    dataset: str | RmatSpec
    model: ModelSpec
    training: TrainingSpec = TrainingSpec()

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        n, layers = len(self.training.fanouts), self.model.num_layers
        if self.training.mode == "mini-batch" and self.model.arch in MESSAGE_PASSING_ARCHS and n != layers:
            raise ValueError(f"training.fanouts has {n} entries but model.num_layers is {layers}; "
                             "give one fanout per layer")
        return self

    @property
    def dataset_name(self) -> str:
        """The dataset's display name."""
        return self.dataset.name if isinstance(self.dataset, RmatSpec) else Path(self.dataset).name

    def to_yaml_dict(self) -> dict[str, Any]:
        """The spec as a plain mapping."""
        return self.model_dump(mode="json")


def preset_names() -> list[str]:
    """Names of the workload presets shipped with the package."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_workload(ref: str | Path | WorkloadSpec) -> WorkloadSpec:
    """Load a workload from a preset name or a YAML path.

    Raises:
        SpecError: unknown preset, unreadable file, or an invalid field (message names the field).
    """
    if isinstance(ref, WorkloadSpec):
        return ref
    path = Path(ref)
    if not path.suffix:
        path = PRESET_DIR / f"{ref}.yaml"
        if not path.is_file():
            raise SpecError(f"workload: unknown preset {str(ref)!r}; allowed: {', '.join(preset_names())} "
                            "or a YAML file")
    data = read_yaml(path, "workload")
    data.setdefault("name", path.stem)
    return workload_from_dict(data, where=f"workload {path.name}")


def workload_from_dict(data: dict[str, Any], where: str = "workload") -> WorkloadSpec:
    """Validate a mapping as a :class:`WorkloadSpec`, raising :class:`SpecError` with a one-line message."""
    try:
        return WorkloadSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None
