"""The hardware catalogue: GPUs, links, storage and hosts, every number with its source.

The data are YAML files in ``catalogue/`` next to this module (``gpus.yaml``, ``links.yaml``, ``storage.yaml``,
``hosts.yaml``, and ``clusters.yaml``, the recipes of the presets built from them by
:mod:`gnnplan.simulator.hardware.builder`). Each number is a :class:`Sourced` value: SI units (DESIGN.md, "Units
and names") and a ``source`` saying whether it is a peak (datasheet, specification), an achieved rate measured
somewhere (a published benchmark, cited), an achieved rate derived from a peak with a stated, cited efficiency,
or an assumption.

Presets carry achieved rates because GNN kernels are far from the roofline: priced at datasheet peaks, compute
looks almost free next to communication, which flips which strategy wins.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.io import read_yaml
from gnnplan.simulator.spec_model import SpecModel

CATALOGUE_DIR = Path(__file__).parent / "catalogue"
MIN_SOURCE_CHARS = 12
"""A source shorter than this cannot say where a number comes from."""


class _Entry(SpecModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Sourced(_Entry):
    """A number (SI units) and where it comes from."""

    value: float = Field(gt=0)
    source: str = Field(min_length=MIN_SOURCE_CHARS)


class GpuEntry(_Entry):
    """One GPU model: datasheet peaks and achieved rates.

    Attributes:
        token: the model's name in preset names (``a100-80gb``).
        model: the ``gpu.model`` string of a cluster built with it.
        gemm_flops_per_s: sustained dense FP32 GEMM rate.
        copy_bandwidth_bytes_per_s: sustained device-memory copy rate (read + write counted once each, as a
            STREAM copy reports it), the rate of gathers and aggregations.
        pcie: key of its host interface in ``links.yaml`` ``pcie``.
        nvlink: key of its GPU-GPU link in ``links.yaml`` ``nvlink`` (None: none).
    """

    token: str = Field(pattern=r"^[a-z0-9-]+$")
    model: str
    peak_flops_per_s: Sourced
    memory_bytes: Sourced
    memory_bandwidth_bytes_per_s: Sourced
    gemm_flops_per_s: Sourced
    copy_bandwidth_bytes_per_s: Sourced
    pcie: str
    nvlink: str | None = None


class Framework(_Entry):
    """Costs of the training framework rather than of a device."""

    kernel_overhead_s: Sourced


class GpuCatalogue(_Entry):
    """``gpus.yaml``."""

    framework: Framework
    gpus: dict[str, GpuEntry]


class SourcedFlag(_Entry):
    """A yes/no property of a machine and where it comes from."""

    value: bool
    source: str = Field(min_length=MIN_SOURCE_CHARS)


class LinkEntry(_Entry):
    """One link, per endpoint and direction: its peak, the achieved rate the simulator uses, its latency.

    Attributes:
        topology: NVLink entries only: ``nvswitch`` (any GPU pair at the full per-GPU rate) or ``pairwise``
            (direct links, each pair a ``1 / (g - 1)`` share); the ``description`` says which machine has it.
    """

    token: str = Field(pattern=r"^[a-z0-9-]+$")
    description: str
    peak_bandwidth_bytes_per_s: Sourced
    bandwidth_bytes_per_s: Sourced
    latency_s: Sourced
    topology: Literal["nvswitch", "pairwise"] | None = None


class LinkCatalogue(_Entry):
    """``links.yaml``: host-GPU, GPU-GPU and machine-machine links."""

    pcie: dict[str, LinkEntry]
    nvlink: dict[str, LinkEntry]
    network: dict[str, LinkEntry]


class StorageEntry(_Entry):
    """One storage device (sequential-read rate and per-request latency)."""

    token: str = Field(pattern=r"^[a-z0-9-]+$")
    description: str
    bandwidth_bytes_per_s: Sourced
    latency_s: Sourced


class GpuDirectEntry(_Entry):
    """GPUDirect Storage: reads DMA'd from the drive into GPU memory."""

    description: str
    source: str = Field(min_length=MIN_SOURCE_CHARS)


class StorageCatalogue(_Entry):
    """``storage.yaml``."""

    nvme: dict[str, StorageEntry]
    gpudirect: GpuDirectEntry


class HostEntry(_Entry):
    """The CPU side of one machine."""

    description: str
    num_cores: Sourced
    memory_bytes: Sourced
    memory_bandwidth_bytes_per_s: Sourced


class HostCatalogue(_Entry):
    """``hosts.yaml``."""

    hosts: dict[str, HostEntry]


class ClusterRecipe(_Entry):
    """How to build one preset from catalogue keys (see ``clusters.yaml``)."""

    name: str = Field(pattern=r"^[a-z0-9-]+$")
    testbed: str = Field(min_length=MIN_SOURCE_CHARS)
    num_machines: int = Field(ge=1)
    gpus_per_machine: int = Field(ge=1)
    gpu: str
    pcie: str | None = Field(default=None, description="None = the GPU's own interface")
    nvlink: str | None = Field(default="gpu", description="'gpu' = the GPU's own NVLink; None = no NVLink")
    network: str
    host: str
    storage: str
    num_drives: int = Field(default=1, ge=1, description="drives striped per machine")
    gpus_per_pcie_uplink: Sourced | None = Field(
        default=None, description="GPUs behind one PCIe switch uplink to the CPU (a whole number; None = each GPU "
                                  "on a root port of its own), the preset's pcie.gpus_per_uplink")
    gpudirect: bool = False
    nics_per_machine: Sourced | None = Field(
        default=None, description="NICs of the network's kind per machine, one per GPU or GPU pair (a whole "
                                  "number; None = one), the preset's network.nics_per_machine")
    gpudirect_rdma: SourcedFlag | None = Field(
        default=None, description="whether the NICs read and write GPU memory directly (None = not stated: "
                                  "staged through host memory), the preset's network.gpudirect_rdma")


class RecipeCatalogue(_Entry):
    """``clusters.yaml``."""

    clusters: list[ClusterRecipe]


class Catalogue(_Entry):
    """Everything in ``catalogue/``."""

    gpu: GpuCatalogue
    link: LinkCatalogue
    storage: StorageCatalogue
    host: HostCatalogue
    recipes: RecipeCatalogue

    def sourced_values(self) -> list[tuple[str, Sourced]]:
        """Every number of the catalogue with its dotted path (e.g. ``gpu.gpus.T4.peak_flops_per_s``)."""
        out: list[tuple[str, Sourced]] = []

        def walk(node: Any, path: str) -> None:
            if isinstance(node, Sourced):
                out.append((path, node))
            elif isinstance(node, BaseModel):
                for name in type(node).model_fields:
                    walk(getattr(node, name), f"{path}.{name}")
            elif isinstance(node, dict):
                for key, value in node.items():
                    walk(value, f"{path}.{key}")
            elif isinstance(node, list):
                for i, value in enumerate(node):
                    walk(value, f"{path}[{i}]")

        for name in type(self).model_fields:
            walk(getattr(self, name), name)
        return out


_FILES: dict[str, tuple[str, type[_Entry]]] = {
    "gpu": ("gpus.yaml", GpuCatalogue), "link": ("links.yaml", LinkCatalogue),
    "storage": ("storage.yaml", StorageCatalogue), "host": ("hosts.yaml", HostCatalogue),
    "recipes": ("clusters.yaml", RecipeCatalogue),
}


def load_catalogue(folder: Path | None = None) -> Catalogue:
    """Read and validate the catalogue (cached for the package's own folder).

    Args:
        folder: a folder holding the five YAML files (None = the package's ``catalogue/``).

    Raises:
        SpecError: a file is missing or malformed, a field is out of range or a source is missing (one line
            naming the file and field), or a key refers to an entry that does not exist.
    """
    return _load_default() if folder is None else _load(folder)


@lru_cache(maxsize=1)
def _load_default() -> Catalogue:
    return _load(CATALOGUE_DIR)


def _load(folder: Path) -> Catalogue:
    parts: dict[str, Any] = {}
    for key, (filename, model) in _FILES.items():
        try:
            parts[key] = model.model_validate(read_yaml(folder / filename, f"catalogue {filename}"))
        except ValidationError as exc:
            raise SpecError(one_line(exc, f"catalogue {filename}")) from None
    catalogue = Catalogue(**parts)
    _check_references(catalogue)
    return catalogue


def _check_references(cat: Catalogue) -> None:
    """Every key a GPU or recipe names must exist."""
    links = cat.link
    for name, gpu in cat.gpu.gpus.items():
        _known(gpu.pcie, links.pcie, f"gpus.yaml {name}.pcie")
        if gpu.nvlink is not None:
            _known(gpu.nvlink, links.nvlink, f"gpus.yaml {name}.nvlink")
    for r in cat.recipes.clusters:
        where = f"clusters.yaml {r.name}"
        _known(r.gpu, cat.gpu.gpus, f"{where}.gpu")
        _known(r.network, links.network, f"{where}.network")
        _known(r.host, cat.host.hosts, f"{where}.host")
        _known(r.storage, cat.storage.nvme, f"{where}.storage")
        if r.pcie is not None:
            _known(r.pcie, links.pcie, f"{where}.pcie")
        if r.nvlink not in (None, "gpu"):
            _known(r.nvlink, links.nvlink, f"{where}.nvlink")


def _known(key: str, table: dict[str, Any], where: str) -> None:
    if key not in table:
        raise SpecError(f"catalogue {where}: unknown entry {key!r}; allowed: {', '.join(table)}")
