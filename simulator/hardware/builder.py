"""Cluster presets built from the hardware catalogue: machines x GPUs x GPU model x intra link x NIC.

:func:`build_cluster` turns a :class:`~gnnplan.simulator.hardware.catalogue.ClusterRecipe` into a
:class:`~gnnplan.simulator.hardware.spec.ClusterSpec` whose ``sources`` block names the source of every number;
:func:`write_presets` writes one preset YAML per recipe of ``catalogue/clusters.yaml`` into ``presets/``
(``python3 -m gnnplan.simulator.hardware.builder`` rebuilds them after a catalogue change; a test checks the
shipped files equal what the builder writes).

How achieved rates enter the spec (whose rate fields are peaks where the name says so):

* ``gpu.peak_flops_per_s``, ``gpu.memory_bandwidth_bytes_per_s``: datasheet peaks.
* ``efficiency.forward_fraction`` = ``backward_fraction`` = sustained GEMM / peak FLOP/s: the achieved fraction
  of the roofline bound (:mod:`gnnplan.simulator.hardware.model`).
* ``efficiency.gather_fraction`` = ``optimizer_fraction`` = sustained copy / peak memory bandwidth: gathers and
  the element-wise optimizer update are memory-bound; host gathers use the host's DRAM peak times the same
  fraction.
* ``gpu.sparse_flops_per_s`` = sustained copy bandwidth / 4 bytes per FLOP: an aggregation does one FLOP per
  gathered float32 (:func:`gnnplan.simulator.workload.model_cost` ``_aggregate``); its phase's fraction divides
  it too, so an aggregation ends below a streaming copy, as irregular gathers do.
* ``gpu.kernel_overhead_s``: the framework's per-kernel cost (``gpus.yaml`` ``framework``).
* ``pcie``, ``nvlink``, ``network`` bandwidths: achieved host-to-GPU copy, NCCL bus bandwidth, TCP / RDMA
  goodput (``links.yaml``); ``storage``: the drive's sequential rate times ``num_drives``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.catalogue import Catalogue, ClusterRecipe, LinkEntry, Sourced, load_catalogue
from gnnplan.simulator.hardware.spec import PRESET_DIR, ClusterSpec, HostSpec, StorageSpec, cluster_from_dict
from gnnplan.simulator.io import atomic_write_text
from gnnplan.simulator.units import FLOAT_BYTES

NVME_QUEUE_DEPTH = StorageSpec.model_fields["concurrency"].default
"""Requests one drive serves at once (the cluster spec's default, 32: NVMe rated IOPS at queue depth 32)."""
SAMPLING_SOURCE = ("assumption: 2e7 sampled edges/s per core, order of DGL 1.x CPU NeighborSampler (the shipped "
                   "presets' value); replace by calibration")
FULL_NEIGHBOUR_SAMPLING_RATIO = 2.95
"""Full-neighbour over fanout sampling rate of DGL's CPU sampler (``host.full_neighbour_sampling_ratio``, the
evaluation's blocks), measured by ``gnnplan probe`` on the 2-core development machine (:data:`FULL_SAMPLING_SOURCE`)."""
FULL_SAMPLING_SOURCE = ("measured on the 2-core development machine (AMD EPYC, 2026-11-29) by gnnplan probe "
                        "(executor.probe_host.sampling_rates): DGL 1.1.3 NeighborSampler, fanouts [-1] on chunks of "
                        "16384 destinations over fanouts [10, 10] on batches of 512 seeds, one core, R-MAT graph of "
                        "100000 vertices: 3.006e+07 / 1.018e+07 edges/s = 2.95 [inferred: a ratio of two sampling "
                        "algorithms of the same library on one core, kept on other x86 server cores]; replace by "
                        "calibration (eval_sample spans)")
HEADER = ("# Built by gnnplan.simulator.hardware.builder from the hardware catalogue (simulator/hardware/catalogue/):\n"
          "# edit the catalogue and rebuild (python3 -m gnnplan.simulator.hardware.builder), not this file.\n"
          "# SI units; every number's source is in `sources`.\n")


def preset_name(recipe: ClusterRecipe, catalogue: Catalogue | None = None) -> str:
    """The name a recipe's preset must have: ``<n>x-<gpu>[-<intra>][-<nic>]`` (``<m>x<g>-`` for m machines
    of g GPUs each); the intra-machine link only with several GPUs per machine, the NIC only with several
    machines."""
    cat = catalogue or load_catalogue()
    m, g = recipe.num_machines, recipe.gpus_per_machine
    parts = [f"{m * g}x" if m == 1 or g == 1 else f"{m}x{g}", cat.gpu.gpus[recipe.gpu].token]
    if g > 1:
        nvlink = _nvlink(recipe, cat)
        parts.append(nvlink.token if nvlink is not None else _pcie(recipe, cat).token)
    if m > 1:
        parts.append(cat.link.network[recipe.network].token)
    return "-".join(parts)


def _pcie(recipe: ClusterRecipe, cat: Catalogue) -> LinkEntry:
    return cat.link.pcie[recipe.pcie or cat.gpu.gpus[recipe.gpu].pcie]


def _nvlink(recipe: ClusterRecipe, cat: Catalogue) -> LinkEntry | None:
    key = cat.gpu.gpus[recipe.gpu].nvlink if recipe.nvlink == "gpu" else recipe.nvlink
    return None if key is None or recipe.gpus_per_machine == 1 else cat.link.nvlink[key]


def _link(entry: LinkEntry, key: str, sources: dict[str, str]) -> dict[str, float]:
    sources[f"{key}.bandwidth_bytes_per_s"] = (f"{entry.description}: {entry.bandwidth_bytes_per_s.source}; "
                                               f"{entry.peak_bandwidth_bytes_per_s.source}")
    sources[f"{key}.latency_s"] = entry.latency_s.source
    return {"bandwidth_bytes_per_s": entry.bandwidth_bytes_per_s.value, "latency_s": entry.latency_s.value}


def _pcie_part(recipe: ClusterRecipe, cat: Catalogue, sources: dict[str, str]) -> dict[str, Any]:
    """The ``pcie`` block: the GPU's link and, when the recipe states it, how many GPUs share a switch uplink
    (the uplink an x16 link of the GPU's generation: the spec's default)."""
    block: dict[str, Any] = _link(_pcie(recipe, cat), "pcie", sources)
    shared = recipe.gpus_per_pcie_uplink
    if shared is not None:
        if shared.value != int(shared.value):
            raise SpecError(f"catalogue clusters.yaml {recipe.name}.gpus_per_pcie_uplink: must be a whole number, "
                            f"got {shared.value:g}")
        block["gpus_per_uplink"] = int(shared.value)
        sources["pcie.gpus_per_uplink"] = shared.source
    return block


def _network_part(recipe: ClusterRecipe, cat: Catalogue, sources: dict[str, str]) -> dict[str, Any]:
    """The ``network`` block: the NIC's link and, when the recipe states them, the NICs per machine and
    GPUDirect RDMA."""
    block: dict[str, Any] = _link(cat.link.network[recipe.network], "network", sources)
    nics = recipe.nics_per_machine
    if nics is not None:
        if nics.value != int(nics.value):
            raise SpecError(f"catalogue clusters.yaml {recipe.name}.nics_per_machine: must be a whole number, "
                            f"got {nics.value:g}")
        block["nics_per_machine"] = int(nics.value)
        sources["network.nics_per_machine"] = nics.source
    if recipe.gpudirect_rdma is not None:
        block["gpudirect_rdma"] = recipe.gpudirect_rdma.value
        sources["network.gpudirect_rdma"] = recipe.gpudirect_rdma.source
    return block


def _nvlink_part(nvlink: LinkEntry | None, sources: dict[str, str]) -> dict[str, Any] | None:
    """The ``nvlink`` block: the link and, for an entry that states it, its topology."""
    if nvlink is None:
        return None
    block: dict[str, Any] = _link(nvlink, "nvlink", sources)
    if nvlink.topology is not None:
        block["topology"] = nvlink.topology
        sources["nvlink.topology"] = f"{nvlink.topology}: {nvlink.description}"
    return block


def _fraction(achieved: Sourced, peak: Sourced) -> float:
    return round(achieved.value / peak.value, 4)


def _gpu_part(recipe: ClusterRecipe, cat: Catalogue, sources: dict[str, str]) -> tuple[dict[str, Any], ...]:
    """The ``gpu`` and ``efficiency`` blocks (module docstring)."""
    gpu = cat.gpu.gpus[recipe.gpu]
    overhead = cat.gpu.framework.kernel_overhead_s
    copy = gpu.copy_bandwidth_bytes_per_s
    block = {"model": gpu.model, "peak_flops_per_s": gpu.peak_flops_per_s.value,
             "memory_bytes": gpu.memory_bytes.value,
             "memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s.value,
             "sparse_flops_per_s": copy.value / FLOAT_BYTES, "kernel_overhead_s": overhead.value}
    gemm = _fraction(gpu.gemm_flops_per_s, gpu.peak_flops_per_s)
    mem = _fraction(copy, gpu.memory_bandwidth_bytes_per_s)
    efficiency = {"forward_fraction": gemm, "backward_fraction": gemm, "gather_fraction": mem,
                  "optimizer_fraction": mem}
    for name in ("peak_flops_per_s", "memory_bytes", "memory_bandwidth_bytes_per_s"):
        sources[f"gpu.{name}"] = getattr(gpu, name).source
    sources["gpu.sparse_flops_per_s"] = (f"achieved (derived): sustained copy {copy.value:.4g} B/s / {FLOAT_BYTES} B "
                                         f"per FLOP (one FLOP per gathered float32 in an aggregation); {copy.source}")
    sources["gpu.kernel_overhead_s"] = overhead.source
    gemm_src = f"sustained GEMM / peak = {gpu.gemm_flops_per_s.value:.4g} / {gpu.peak_flops_per_s.value:.4g}: " \
               f"{gpu.gemm_flops_per_s.source}"
    mem_src = f"sustained copy / peak bandwidth = {copy.value:.4g} / " \
              f"{gpu.memory_bandwidth_bytes_per_s.value:.4g}: {copy.source}"
    sources.update({"efficiency.forward_fraction": gemm_src, "efficiency.backward_fraction": gemm_src,
                    "efficiency.gather_fraction": mem_src, "efficiency.optimizer_fraction": mem_src})
    return block, efficiency


def _host_part(recipe: ClusterRecipe, cat: Catalogue, sources: dict[str, str]) -> dict[str, Any]:
    host = cat.host.hosts[recipe.host]
    for name in ("num_cores", "memory_bytes", "memory_bandwidth_bytes_per_s"):
        sources[f"host.{name}"] = f"{host.description}: {getattr(host, name).source}"
    sources["host.sampling_edges_per_s_per_core"] = SAMPLING_SOURCE
    sources["host.full_neighbour_sampling_ratio"] = FULL_SAMPLING_SOURCE
    return {"num_cores": int(host.num_cores.value), "memory_bytes": host.memory_bytes.value,
            "memory_bandwidth_bytes_per_s": host.memory_bandwidth_bytes_per_s.value,
            "sampling_edges_per_s_per_core": HostSpec.model_fields["sampling_edges_per_s_per_core"].default,
            "full_neighbour_sampling_ratio": FULL_NEIGHBOUR_SAMPLING_RATIO}


def _storage_part(recipe: ClusterRecipe, cat: Catalogue, sources: dict[str, str]) -> dict[str, Any]:
    drive, n = cat.storage.nvme[recipe.storage], recipe.num_drives
    striped = f"{n} x " if n > 1 else ""
    sources["storage.bandwidth_bytes_per_s"] = f"{striped}{drive.description}: {drive.bandwidth_bytes_per_s.source}"
    sources["storage.latency_s"] = drive.latency_s.source
    sources["storage.concurrency"] = f"{NVME_QUEUE_DEPTH:g} requests per drive (NVMe rated IOPS at queue depth " \
                                     f"32, the spec's default) x {n} drive(s)"
    sources["storage.gpudirect"] = cat.storage.gpudirect.source if recipe.gpudirect else \
        "no GPUDirect Storage: reads go through host memory"
    return {"bandwidth_bytes_per_s": drive.bandwidth_bytes_per_s.value * n, "latency_s": drive.latency_s.value,
            "gpudirect": recipe.gpudirect, "concurrency": NVME_QUEUE_DEPTH * n}


def build_cluster(recipe: ClusterRecipe, catalogue: Catalogue | None = None) -> ClusterSpec:
    """Build the cluster a recipe describes, with a source for every number.

    Raises:
        SpecError: the recipe's name is not :func:`preset_name`, or the result fails validation.
    """
    cat = catalogue or load_catalogue()
    expected = preset_name(recipe, cat)
    if recipe.name != expected:
        raise SpecError(f"catalogue clusters.yaml: recipe {recipe.name!r} must be named {expected!r} "
                         "(GPUs x model - interconnect)")
    sources = {"num_machines": recipe.testbed, "gpus_per_machine": recipe.testbed}
    gpu, efficiency = _gpu_part(recipe, cat, sources)
    nvlink = _nvlink(recipe, cat)
    sources["nvlink"] = "none: one GPU per machine" if recipe.gpus_per_machine == 1 and nvlink is None else \
        "none" if nvlink is None else nvlink.description
    data = {"name": recipe.name, "num_machines": recipe.num_machines, "gpus_per_machine": recipe.gpus_per_machine,
            "gpu": gpu, "host": _host_part(recipe, cat, sources),
            "pcie": _pcie_part(recipe, cat, sources),
            "nvlink": _nvlink_part(nvlink, sources),
            "network": _network_part(recipe, cat, sources),
            "storage": _storage_part(recipe, cat, sources), "efficiency": efficiency, "sources": sources}
    return cluster_from_dict(data, where=f"catalogue recipe {recipe.name}")


class _Dumper(yaml.SafeDumper):
    """Floats as ``1.555e+12`` (a dot and a signed exponent: YAML 1.1 loaders read them as floats)."""


def _float(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    text = f"{value:.6g}"
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return dumper.represent_scalar("tag:yaml.org,2002:float", mantissa + e + exponent)


_Dumper.add_representer(float, _float)


def preset_text(cluster: ClusterSpec) -> str:
    """The preset file of a built cluster: a header, then the fields the builder set (sources last), so a field
    added to the spec later keeps its default in the file."""
    data = cluster.model_dump(mode="json", exclude_unset=True)
    return HEADER + yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def write_presets(folder: Path = PRESET_DIR, catalogue: Catalogue | None = None) -> list[Path]:
    """Write one preset per recipe of ``clusters.yaml`` into ``folder`` (atomically).

    Returns:
        The paths written.
    """
    cat = catalogue or load_catalogue()
    return [atomic_write_text(folder / f"{r.name}.yaml", preset_text(build_cluster(r, cat)))
            for r in cat.recipes.clusters]


def main() -> int:
    """Rebuild the shipped presets from the catalogue (``python3 -m gnnplan.simulator.hardware.builder``)."""
    write_presets()
    return 0


if __name__ == "__main__":
    sys.exit(main())
