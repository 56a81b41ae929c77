"""Workload specification (pydantic), loaded from YAML: dataset, model and training (DESIGN.md, "Workload YAML").

Example::

    dataset: cora                 # preset name, an OGB-layout folder, {generator: rmat, ...} or {generator: sbm, ...}
    model:    {arch: sage, num_layers: 2, hidden_dim: 16, num_heads: 1}
    training: {mode: mini-batch, batch_size: 64, fanouts: [10, 10], num_epochs: 10}

``training.batch_size`` is the number of seed vertices per iteration summed over all workers (the global
mini-batch); each of W workers takes ``batch_size / W`` of them. ``fanouts`` are per layer, input side first, as
DGL's ``NeighborSampler``; -1 takes all neighbours.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.file_names import FileNamePart
from gnnplan.simulator.io import check_path_text, read_yaml
from gnnplan.simulator.limits import SEED_LIMIT, check_unit_ranges
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.wording import unknown_name

PRESET_DIR = Path(__file__).parent / "presets"
Arch = Literal["gcn", "sage", "gat", "gin", "sgc", "sign"]
MESSAGE_PASSING_ARCHS = ("gcn", "sage", "gat", "gin")
SELF_LOOP_ARCHS = ("gcn", "gat")
"""Architectures trained with one self-loop per vertex; equals :data:`executor.data.SELF_LOOP_ARCHS` (checked by
the tests). Source: Kipf and Welling, ICLR 2017, eq. 2 (A + I); Velickovic et al., ICLR 2018, §2.1."""


class _Spec(SpecModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class GeneratedSpec(_Spec):
    """A generated graph with random features and a random train/validation/test split: the fields every
    generator shares. Concrete generators: :class:`RmatSpec`, :class:`SbmSpec` (``generator`` tells them apart);
    code that accepts any generated graph checks ``isinstance(ref, GeneratedSpec)``."""

    generator: str
    num_vertices: int = Field(ge=16)
    feature_dim: int = Field(default=128, ge=1)
    num_classes: int = Field(default=16, ge=2)
    train_fraction: float = Field(default=0.1, gt=0, lt=1)
    val_fraction: float = Field(default=0.05, ge=0, lt=1)
    test_fraction: float = Field(default=0.1, ge=0, lt=1)
    seed: int = Field(default=0, ge=0, lt=SEED_LIMIT, description="the generator's seed")

    @property
    def name(self) -> str:
        """A stable name used for caches and reports: differs for every change of any field (a generator adds
        its own fields through :meth:`_generator_name`)."""
        return (f"{self.generator}-n{self.num_vertices}{self._generator_name()}-f{self.feature_dim}"
                f"-c{self.num_classes}-t{self.train_fraction:g}-v{self.val_fraction:g}-s{self.test_fraction:g}"
                f"-seed{self.seed}")

    def _generator_name(self) -> str:
        """The generator's own fields in :attr:`name` (``-<key><value>`` parts); none for the common fields."""
        return ""


GRAPH500_A, GRAPH500_B, GRAPH500_C = 0.57, 0.19, 0.19
"""R-MAT quadrant probabilities of the Graph500 Kronecker generator (specification §3.3)."""


class RmatSpec(GeneratedSpec):
    """A generated power-law graph: R-MAT, by default with the Graph500 parameters; uniform random labels.

    Source: Chakrabarti, Zhan and Faloutsos, "R-MAT", SDM 2004; parameters a=0.57, b=0.19, c=0.19, d=0.05 and
    edge factor 16 from the Graph500 benchmark specification (Kronecker generator, §3.3). Vertex ids are
    randomly permuted (Graph500), so they carry no locality.
    """

    generator: Literal["rmat"]
    edge_factor: int = Field(default=16, ge=1, description="undirected edges generated per vertex")
    a: float = Field(default=GRAPH500_A, gt=0, lt=1, description="R-MAT probability of the top-left quadrant")
    b: float = Field(default=GRAPH500_B, ge=0, lt=1, description="R-MAT probability of the top-right quadrant")
    c: float = Field(default=GRAPH500_C, ge=0, lt=1, description="R-MAT probability of the bottom-left quadrant")

    @model_validator(mode="after")
    def _quadrants(self) -> RmatSpec:
        if self.a + self.b + self.c >= 1:
            raise ValueError(f"a + b + c must be < 1 (d = 1 - a - b - c > 0), got {self.a + self.b + self.c:g}")
        return self

    def _generator_name(self) -> str:
        """Edge factor and quadrants (the Graph500 quadrants are not spelled out, so names and caches of graphs
        generated before a, b, c were configurable do not change)."""
        abc = "" if (self.a, self.b, self.c) == (GRAPH500_A, GRAPH500_B, GRAPH500_C) else \
            f"-abc{self.a:g},{self.b:g},{self.c:g}"
        return f"-e{self.edge_factor}{abc}"


class SbmSpec(GeneratedSpec):
    """A generated graph with community structure: a degree-corrected stochastic block model
    (:mod:`simulator.workload.sbm`), communities laid out in id order, labels = community mod ``num_classes``,
    features N(0, 1) noise plus ``feature_signal`` x a random centroid of the vertex's class.

    Source: Karrer and Newman, Phys. Rev. E 83, 016107 (2011) (DC-SBM); mixing parameter ``mu`` and power-law
    degrees as the LFR benchmark (Lancichinetti, Fortunato and Radicchi, Phys. Rev. E 78, 046110 (2008)).
    """

    generator: Literal["sbm"]
    num_communities: int = Field(default=16, ge=1, description="communities: contiguous, near-equal id ranges")
    mu: float = Field(default=0.2, ge=0, lt=1, description="mixing parameter: fraction of inter-community edges")
    mean_degree: float = Field(default=16.0, gt=0, description="mean vertex degree (undirected edges x 2 / n)")
    degree_exponent: float = Field(default=2.5, gt=1, le=6, description="power-law exponent of expected degrees")
    max_degree: float | None = Field(
        default=None, gt=0, description="largest expected degree; None = 2 sqrt(mean_degree x community size)")
    feature_signal: float = Field(default=1.0, ge=0, description="scale of the class centroid added to features")
    permute_ids: bool = Field(default=False, description="number vertices in random order (ids carry no community "
                                                         "locality, as Graph500 R-MAT) instead of community order")
    isolated_fraction: float = Field(default=0.0, ge=0, le=0.95,
                                     description="fraction of vertices without edges (mean_degree stays the mean over "
                                                 "all vertices; the others carry the edges)")

    @model_validator(mode="after")
    def _feasible(self) -> SbmSpec:
        if self.num_communities > self.num_vertices // 2:
            raise ValueError(f"num_communities must be at most num_vertices / 2, got {self.num_communities}")
        if self.num_communities == 1 and self.mu > 0:
            raise ValueError("mu must be 0 with one community (no inter-community edges)")
        if self.degree_exponent == 2.0:
            raise ValueError("degree_exponent must not be 2 (the mean of the power law has no closed form there)")
        if self.max_degree is not None and self.max_degree <= self.mean_degree / (1 - self.isolated_fraction):
            raise ValueError(f"max_degree must exceed the mean degree of the connected vertices "
                             f"({self.mean_degree / (1 - self.isolated_fraction):g}), got {self.max_degree:g}")
        if self.num_communities > self.connected_vertices // 2:
            raise ValueError(f"num_communities must be at most the connected vertices / 2, got {self.num_communities}")
        return self

    @property
    def connected_vertices(self) -> int:
        """Vertices that carry the edges: ``num_vertices`` less the isolated ones."""
        return self.num_vertices - round(self.isolated_fraction * self.num_vertices)

    def _generator_name(self) -> str:
        """Communities, mixing, degrees and feature signal."""
        cap = "auto" if self.max_degree is None else f"{self.max_degree:g}"
        return (f"-k{self.num_communities}-mu{self.mu:g}-d{self.mean_degree:g}-g{self.degree_exponent:g}-x{cap}"
                f"-fs{self.feature_signal:g}{'-perm' if self.permute_ids else ''}"
                f"{f'-iso{self.isolated_fraction:g}' if self.isolated_fraction else ''}")


GeneratedGraph = Annotated[RmatSpec | SbmSpec, Field(discriminator="generator")]
"""A ``workload.dataset`` mapping: one of the generators, chosen by its ``generator`` field."""


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
    seed: int = Field(default=0, ge=0, lt=SEED_LIMIT, description="seed of initial weights, shuffles and sampling")
    ddp_bucket_bytes: float = Field(
        default=25.0 * 2**20, gt=0,
        description="DDP gradient bucket size: each bucket is all-reduced as soon as backward has produced its "
                    "gradients, overlapping the rest of backward; default 25 MiB, DDP's bucket_cap_mb (Li et al., "
                    "'PyTorch Distributed', VLDB 2020, §3.2.3)")

    @field_validator("fanouts")
    @classmethod
    def _fanouts(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("one fanout per layer, each a positive integer or -1 (all neighbours); got none")
        if any(f == 0 or f < -1 for f in v):
            raise ValueError("each fanout must be a positive integer or -1 (all neighbours)")
        return v


class WorkloadSpec(_Spec):
    """Dataset + model + training."""

    name: FileNamePart = ""
    dataset: GeneratedGraph | str
    model: ModelSpec
    training: TrainingSpec = TrainingSpec()

    @model_validator(mode="before")
    @classmethod
    def _dataset_given(cls, data: Any) -> Any:
        """A missing or empty ``dataset`` says what one is (pydantic's own message for None asked for "a valid
        dictionary", the generator form only, 2026-12-01)."""
        if isinstance(data, dict) and "dataset" in data and (data["dataset"] is None or data["dataset"] == ""):
            raise ValueError("dataset: a preset (cora, citeseer), a card (card:<name>), an OGB folder or a generator "
                             "mapping ({generator: rmat, ...})")
        return data

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSpec:
        n, layers = len(self.training.fanouts), self.model.num_layers
        if self.training.mode == "mini-batch" and self.model.arch in MESSAGE_PASSING_ARCHS and n != layers:
            raise ValueError(f"training.fanouts has {n} entries but model.num_layers is {layers}; "
                             "give one fanout per layer")
        return self

    @model_validator(mode="after")
    def _plausible(self) -> WorkloadSpec:
        """Integers fit in 64 bits and sizes in their plausible range (:func:`simulator.limits.check_unit_ranges`:
        a fanout of 1e20 used to fail inside numpy with a message naming no field)."""
        check_unit_ranges(self)
        return self

    @property
    def dataset_name(self) -> str:
        """The dataset's display name."""
        return self.dataset.name if isinstance(self.dataset, GeneratedSpec) else Path(self.dataset).name

    def to_yaml_dict(self) -> dict[str, Any]:
        """The spec as a plain mapping."""
        return self.model_dump(mode="json")


def preset_names() -> list[str]:
    """Names of the workload presets shipped with the package."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_workload(ref: str | Path | WorkloadSpec | Mapping[str, Any]) -> WorkloadSpec:
    """Load a workload from a preset name, a YAML path or a mapping of its fields (as in its YAML); a spec is
    returned as is once valid (one edited with ``model_copy`` is validated again, :mod:`simulator.spec_checked`).

    Raises:
        SpecError: unknown preset, unreadable file, or an invalid field (message names the field).
    """
    from gnnplan.simulator.spec_checked import checked

    if isinstance(ref, WorkloadSpec):
        return checked(ref, workload_from_dict)
    if isinstance(ref, Mapping):
        return workload_from_dict(dict(ref))
    if not isinstance(ref, (str, Path)):
        raise SpecError(f"workload: a preset name, a YAML path, a mapping of its fields or a WorkloadSpec (got "
                        f"{type(ref).__name__})")
    check_path_text(ref, "workload", "a preset name or a YAML file")
    path = Path(ref)
    if not path.suffix:
        if path.is_dir() and not (PRESET_DIR / f"{ref}.yaml").is_file():
            raise SpecError(f"workload: {str(ref)!r} is a folder, not a preset or a YAML file")
        path = PRESET_DIR / f"{ref}.yaml"
        if not path.is_file():
            raise SpecError(f"workload: {unknown_name('preset', str(ref), preset_names(), ' or a YAML file')}")
    data = read_yaml(path, "workload")
    data.setdefault("name", path.stem)
    return workload_from_dict(data, where=f"workload {path.name}")


def workload_from_dict(data: dict[str, Any], where: str = "workload") -> WorkloadSpec:
    """Validate a mapping as a :class:`WorkloadSpec`, raising :class:`SpecError` with a one-line message."""
    from gnnplan.simulator.overrides import file_values, unknown_key
    from gnnplan.simulator.spec_checked import mark_valid

    unknown_key(WorkloadSpec, data, where)
    if isinstance(data.get("training"), dict):  # its sizes read with units, as a cluster file's (25MB)
        data = {**data, "training": file_values(TrainingSpec, data["training"], where, "training")}
    try:
        return mark_valid(WorkloadSpec.model_validate(data))
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None
