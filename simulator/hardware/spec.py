"""Cluster specification (pydantic), loaded from YAML; SI units with the unit in every field name.

A cluster is ``num_machines`` identical machines with ``gpus_per_machine`` GPUs each. Links are modelled per
endpoint and per direction: ``pcie`` and ``nvlink`` per GPU, ``network`` per NIC (``nics_per_machine`` of them per
machine), ``storage`` per machine. A machine's GPUs share its host side: their PCIe switch uplinks
(``pcie.gpus_per_uplink``, ``pcie.uplink_bandwidth_bytes_per_s``) and its host memory
(``host.memory_bandwidth_bytes_per_s``), see :class:`PcieSpec`. On a CPU-only machine (``gnnplan probe``) the "GPU"
is one worker's share of the host cores and ``gpu.is_host_cpu`` is true: its compute then shares the cores that
sample.

The optional ``efficiency`` block and ``iteration_overhead_s`` are among what :mod:`simulator.calibrate` fits;
their defaults (1.0 and 0 s) mean "the roofline bound" (Williams, Waterman and Patterson, "Roofline", CACM 2009).
Fixed costs have their own fields, each 0 (not modelled) unless measured: ``gpu.kernel_overhead_s`` per kernel,
``network.latency_s`` per message, ``network.per_collective_s`` per collective call, ``host.sampler_handoff_s``
per batch taken from a sampler process, ``iteration_overhead_s`` per iteration. ``jitter_s`` (0: not modelled)
is the stragglers' variance rate at synchronous collectives, measured by ``gnnplan probe``.

Priors: the optional ``priors`` block maps a field path to the value ``gnnplan probe`` measured for it
(``priors: {network.latency_s: 1.1e-04, ...}``). Calibration regularises each fitted parameter toward its prior
(the field's own value when the block has no entry) and copies the block unchanged into the calibrated cluster,
so fitting again starts from the measurement rather than from the previous fit.

Example (DESIGN.md, "Cluster YAML")::

    name: 4x-a100-10gbe
    num_machines: 4
    gpus_per_machine: 1
    gpu: {model: A100-SXM4-40GB, peak_flops_per_s: 19.5e+12, memory_bytes: 40.0e+9,
          memory_bandwidth_bytes_per_s: 1.555e+12}
    ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.file_names import FileNamePart
from gnnplan.simulator.io import check_path_text, read_yaml
from gnnplan.simulator.limits import check_unit_ranges
from gnnplan.simulator.spec_model import SpecModel
from gnnplan.simulator.wording import unknown_name

PRESET_DIR = Path(__file__).parent / "presets"


class _Spec(SpecModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class GpuSpec(_Spec):
    """One accelerator (or, with ``is_host_cpu``, one worker's share of the host CPU)."""

    model: str
    peak_flops_per_s: float = Field(gt=0, description="dense FP32 peak, FLOP/s")
    memory_bytes: float = Field(gt=0)
    memory_bandwidth_bytes_per_s: float = Field(gt=0)
    sparse_flops_per_s: float | None = Field(
        default=None, gt=0, description="measured SpMM throughput; None = roofline from memory bandwidth")
    weighted_sparse_flops_per_s: float | None = Field(
        default=None, gt=0,
        description="measured throughput of a DGL aggregation whose messages are multiplied by an edge value "
                    "(update_all with u_mul_e then sum: GCN's edge weights, GAT's attention), FLOP/s (2 per edge "
                    "and column); None = sparse_flops_per_s. gnnplan probe measures it on CPU workers "
                    "(executor.probe_host.weighted_spmm_flops_per_s): DGL 1.1.3's CPU kernel for u_mul_e ran at "
                    "0.4-1.3 GFLOP/s on one core of the development machine where torch.sparse.mm of the same "
                    "matrix ran at 3.2-6.7 and DGL's copy_u + mean at 2.9-3.8 (2026-11-30)")
    is_host_cpu: bool = Field(default=False, description="compute runs on the host cores (no accelerator)")
    kernel_overhead_s: float = Field(
        default=0.0, ge=0,
        description="fixed time per kernel (launch and framework dispatch), added to its roofline time; "
                    "measured by gnnplan probe, 0 = not modelled")
    backward_overhead_ratio: float = Field(
        default=1.0, gt=0, le=10,
        description="a backward kernel's fixed time over a forward kernel's (kernel_overhead_s): the forward's "
                    "kernels are dispatched by the model's Python code, the backward's by autograd's C++ engine; "
                    "default 1 = the same cost; gnnplan probe measures it (executor.probe_host.kernel_overheads: "
                    "~0.4-0.5 with one thread on the 2-core development machine, 2026-11-30)")
    graph_op_overhead_s: float = Field(
        default=0.0, ge=0,
        description="fixed time of one DGL message-passing call (update_all / apply_edges / edge_softmax: "
                    "DGL's Python dispatch, local scope, frame and format handling) beyond its kernel's "
                    "kernel_overhead_s, paid by each aggregation of a DGL layer forward and by its gradient; "
                    "default 0 = not modelled; gnnplan probe measures it (executor.probe_calls."
                    "graph_op_overhead_s: 0.18-0.23 ms on the 2-core development machine, DGL 1.1.3, 2026-12-02)")
    rng_elements_per_s: float | None = Field(
        default=None, gt=0,
        description="random numbers per second one worker draws for a dropout mask (Bernoulli), priced on top of "
                    "the dropout kernel's memory-bound roofline time; None = free (a GPU's fused dropout draws "
                    "Philox numbers in registers); gnnplan probe measures it on CPU workers (executor."
                    "probe_calls.dropout_elements_per_s: ~3-5e7/s on one core of the development machine)")


class HostSpec(_Spec):
    """A machine's CPU side."""

    num_cores: int = Field(ge=1)
    memory_bytes: float = Field(gt=0)
    memory_bandwidth_bytes_per_s: float = Field(
        gt=0, description="DRAM bandwidth of the machine, shared by all its host gathers and host<->GPU copies "
                          "(pcie)")
    sampling_edges_per_s_per_core: float = Field(
        default=2.0e7, gt=0,
        description="neighbour-sampling throughput of one core, sampled edges per second")
    process_bytes: float = Field(
        default=3.0e8, ge=0,
        description="host memory of one worker process beyond the memory model's data terms (resident set); "
                    "default: 277 MB VmRSS of a fresh process after importing torch 2.13 CPU and DGL 1.1.3, rounded "
                    "up to 300 MB; gnnplan probe measures it on a small training run (a training worker's peak less "
                    "the model's terms: 345-351 MB on the development machine) and gnnplan calibrate fits it to "
                    "runs' measured peaks")
    row_index_s: float = Field(
        default=6.0e-6, ge=0,
        description="seconds per row and matrix of a per-row Python loader (Dataset.__getitem__ + "
                    "default_collate; PP-GNN brief section 2.4 t_item); default: 4-12 us measured with torch 2.13 "
                    "CPU on Cora and CiteSeer rows, one thread; gnnplan probe measures it")
    sampler_call_s: float = Field(
        default=0.0, ge=0,
        description="fixed seconds of one sampler call, one per layer of a batch (DGL sample_neighbors + "
                    "to_block: Python dispatch, frontier and block construction), beyond its edges at "
                    "sampling_edges_per_s_per_core; default 0 = not modelled; gnnplan probe measures it "
                    "(executor.probe_overheads.sampler_call_s: 0.14-0.7 ms on the 2-core development machine, "
                    "DGL 1.1.3)")
    split_items_per_s_per_core: float = Field(
        default=2.0e7, gt=0,
        description="gsplit's online split of a sampled batch on one core: block vertices looked up and split per "
                    "second (owner lookup and split plan per layer, gsplit brief section 1.4); default: "
                    "sampling_edges_per_s_per_core's default (assumption: an item costs what a sampled edge "
                    "does); gnnplan probe measures it (executor.probe_calls.split_costs: 1.0-1.4e7 on the 2-core "
                    "development machine, numpy, one thread, 2026-11-28)")
    split_call_s: float = Field(
        default=0.0, ge=0,
        description="fixed seconds of gsplit's split of one layer, beyond its items at "
                    "split_items_per_s_per_core; default 0 = not modelled; gnnplan probe measures it "
                    "(executor.probe_calls.split_costs: 65-73 us on the 2-core development machine, 2026-11-28)")
    sampler_handoff_s: float = Field(
        default=0.0, ge=0,
        description="seconds a trainer spends taking one sampled mini-batch from a sampler process (PyTorch "
                    "DataLoader queue get + unpickling the blocks' tensors, each a shared-memory file descriptor "
                    "fetched from the sender), paid per batch when num_sampler_workers > 0; default 0 = not "
                    "modelled (the presets' sources); gnnplan probe measures it "
                    "(executor.probe_overheads.sampler_handoff_s: 5-12 ms per 2-layer batch on the 2-core "
                    "development machine, torch 2.13 CPU, DGL 1.1.3)")
    full_neighbour_sampling_ratio: float = Field(
        default=1.0, gt=0, le=100,
        description="edges per second of full-neighbour sampling (every in-edge of a chunk of destination "
                    "vertices: the evaluation's layer-wise inference blocks) over sampling_edges_per_s_per_core, "
                    "the rate of a training batch's random fanout choice; default 1 = the same rate; gnnplan "
                    "probe measures it (executor.probe_host.sampling_rates: 2.95 on the 2-core development machine, "
                    "DGL 1.1.3, 2026-11-29) and gnnplan calibrate fits it to a run's eval_sample spans")


class LinkSpec(_Spec):
    """A point-to-point link: alpha-beta model, time = latency_s + bytes / bandwidth_bytes_per_s."""

    bandwidth_bytes_per_s: float = Field(gt=0)
    latency_s: float = Field(ge=0)


class PcieSpec(LinkSpec):
    """Each GPU's PCIe link to the host (alpha-beta per copy, as :class:`LinkSpec`; bandwidth per GPU and
    direction) and the part of the path the machine's GPUs share.

    Host-to-device and device-to-host copies (DMA) cross the GPU's own link, then the uplink of the PCIe switch
    the GPU sits behind (``gpus_per_uplink`` consecutive GPUs of a machine share one switch; 1 = every GPU on a
    root port of its own), then the CPU root complex into host memory, whose bandwidth
    (``host.memory_bandwidth_bytes_per_s``) every copy and host gather of the machine shares. Defaults keep a
    copy as fast as the GPU's link alone. Source: PCI Express Base Specification 4.0 §1.3 (a switch forwards
    its downstream ports' traffic through one upstream port); NVIDIA DGX A100 system topology (four PCIe Gen4
    switches, two GPUs behind each x16 uplink); Supermicro SYS-4029GP-TRT3 PCIe root architecture (eight GPUs
    behind one x16 Gen3 link to the CPU).
    """

    gpus_per_uplink: int = Field(
        default=1, ge=1,
        description="GPUs of a machine behind one PCIe switch uplink to the CPU root complex (consecutive local "
                    "GPU ids; capped at gpus_per_machine); 1 = each GPU on a root port of its own")
    uplink_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0,
        description="achieved bandwidth of one switch uplink per direction, shared by its GPUs' copies; None = "
                    "the GPU link's bandwidth_bytes_per_s (an x16 uplink of the same PCIe generation)")

    @property
    def uplink_bytes_per_s(self) -> float:
        """Bandwidth of one uplink per direction (``uplink_bandwidth_bytes_per_s``, else the GPU link's)."""
        return self.uplink_bandwidth_bytes_per_s or self.bandwidth_bytes_per_s


class NetworkSpec(LinkSpec):
    """A machine's NIC (alpha-beta per message, as :class:`LinkSpec`) and the communication backend's fixed cost
    per collective call."""

    per_collective_s: float = Field(
        default=0.0, ge=0,
        description="fixed seconds of one collective call (torch.distributed dispatch, the backend's algorithm "
                    "set-up and completion wait) beyond its messages' latency_s, paid once per all-reduce of a "
                    "multi-worker cluster; default 0 = not modelled (the presets' sources); gnnplan probe "
                    "measures it (executor.probe_collectives.per_collective_s: the mean 1 KiB gloo all_reduce after "
                    "compute minus its ring's 2 (W - 1) one-way latencies and its bytes)")
    per_all_to_all_s: float = Field(
        default=0.0, ge=0,
        description="fixed seconds of one all_to_all call (each of a feature pull's three calls, a gsplit "
                    "shuffle) beyond its messages' latency_s, paid once per call of a multi-worker cluster; absent "
                    "= per_collective_s (a cluster written before it existed keeps its prices); gnnplan probe "
                    "measures it as per_collective_s, on a 1 KiB all_to_all_single after compute minus its one "
                    "message's latency and bytes (executor.probe_collectives.per_collective_s). Its own field because "
                    "the two calls run different algorithms: two local processes after 1 ms of compute, 1 KiB "
                    "(2026-11-28): all_to_all_single 0.31-0.51 ms mean against all_reduce 1.38-2.04 ms while "
                    "gloo's event-loop thread spun (before executor.gloo_loop), 0.30-0.48 against 0.32-0.47 ms "
                    "with it in SCHED_IDLE")
    ddp_per_bucket_s: float = Field(
        default=0.0, ge=0,
        description="fixed seconds PyTorch DistributedDataParallel's reducer adds to each gradient bucket's "
                    "all-reduce beyond the collective itself (the communication hook's dispatch and future, the "
                    "copy of the reduced bucket back into the gradients, the finalisation after backward); paid "
                    "by dp, whose executor trains with DDP (hopgnn and gsplit all-reduce a flat gradient); default "
                    "0 = not modelled; gnnplan probe measures it (executor.probe_collectives.per_collective_s: a DDP "
                    "bucket's time from the last rank's launch to backward's return minus a plain all_reduce of "
                    "the same bytes after the same backward, from the last rank's call)")
    nics_per_machine: int = Field(
        default=1, ge=1, le=64,
        description="NICs of one machine, each with bandwidth_bytes_per_s per direction; GPU l of g uses NIC "
                    "floor(l x nics / g) (its PCIe-affine NIC, e.g. DGX A100: 8 compute NICs, one per GPU), and "
                    "flows between machines stay on one rail (NIC k to NIC k: a rail-optimised fabric); default "
                    "1 = one NIC shared by the machine")
    gpudirect_rdma: bool = Field(
        default=False,
        description="GPUDirect RDMA: the NIC reads and writes GPU memory directly, so a GPU's network transfer "
                    "skips the host staging copy (PCIe device-to-host on the sender, host-to-device on the "
                    "receiver, and host memory); default false = staged through host memory (kernel TCP, or a "
                    "GPU/NIC pair without peer-to-peer support)")

    @model_validator(mode="before")
    @classmethod
    def _all_to_all_defaults_to_the_collective(cls, data: Any) -> Any:
        """``per_all_to_all_s`` absent: ``per_collective_s`` (what every call paid before the field existed)."""
        if isinstance(data, dict) and "per_all_to_all_s" not in data and "per_collective_s" in data:
            return {**data, "per_all_to_all_s": data["per_collective_s"]}
        return data


class NvlinkSpec(LinkSpec):
    """NVLink between the GPUs of one machine: ``bandwidth_bytes_per_s`` is one GPU's aggregate per direction;
    ``topology`` says how a copy between two GPUs uses it."""

    topology: Literal["nvswitch", "pairwise"] = Field(
        default="nvswitch",
        description="nvswitch: every GPU's links go to an NVSwitch fabric, so any pair copies at the GPU's full "
                    "bandwidth (DGX/HGX A100 and H100); pairwise: the GPU's links are split evenly into direct "
                    "links to each of the other g - 1 GPUs (HGX A100 4-GPU, DGX-1 style meshes, NVLink "
                    "bridges), so one pair copies at bandwidth / (g - 1) and only a copy to every peer at once "
                    "reaches the full bandwidth")


class StorageSpec(LinkSpec):
    """Per-machine storage (NVMe); ``gpudirect`` = GPUDirect Storage reads bypass host memory."""

    gpudirect: bool = False
    concurrency: float = Field(
        default=32.0, ge=1,
        description="requests the device serves at once at full per-request latency; default 32: NVMe SSDs "
                    "reach their rated random-read IOPS at queue depth 32 (Samsung PM9A3 product brief, 4 KB "
                    "random read at QD32); a virtualised disk may serve ~1; gnnplan probe measures it")


class EfficiencySpec(_Spec):
    """Achieved fraction of the roofline bound per phase (fitted by calibration; 1.0 = roofline).

    Unlike DESIGN.md's other ``_fraction`` names (0-1), these may exceed 1 (up to 10): the roofline is priced at
    the device's measured or datasheet rates, and work whose data stays in a cache beats the memory-bandwidth
    roof. Measured (2026-12-01, this 2-core machine's probe, Cora traces of ``benchmarks/bench_transfer.py``): the
    probe's own gather fraction 0.77, but gathers fitted to 1.03 on dp's traces and 1.87 on hopgnn's, whose
    gathers are smaller [inferred: their rows stay in cache]; clamping at 1 would price them at the memory roof.
    The names are the cluster YAML's since the first presets, so they stay."""

    forward_fraction: float = Field(default=1.0, gt=0, le=10)
    backward_fraction: float = Field(default=1.0, gt=0, le=10)
    gather_fraction: float = Field(
        default=1.0, gt=0, le=10,
        description="achieved fraction of the memory bandwidth a gather's traffic reaches (2 bytes per gathered byte, "
                    "read and written: simulator.hardware.formulas.GATHER_TRAFFIC); default 1 = roofline; gnnplan "
                    "probe measures it, the catalogue's presets take the sustained copy's fraction")
    optimizer_fraction: float = Field(default=1.0, gt=0, le=10)
    inference_ratio: float = Field(
        default=1.0, gt=0, le=100,
        description="achieved fraction of the evaluation's forward kernels (layer-wise inference: a chunk's whole "
                    "in-neighbourhood, far larger than a training batch) over forward_fraction; default 1 = "
                    "forward_fraction's; gnnplan calibrate fits it to a run's eval_forward spans")


class ClusterSpec(_Spec):
    """A homogeneous cluster. See the module docstring for units and conventions."""

    name: FileNamePart = Field(min_length=1)
    num_machines: int = Field(ge=1)
    gpus_per_machine: int = Field(ge=1)
    gpu: GpuSpec
    host: HostSpec
    pcie: PcieSpec
    nvlink: NvlinkSpec | None = None
    network: NetworkSpec
    storage: StorageSpec
    efficiency: EfficiencySpec = EfficiencySpec()
    iteration_overhead_s: float = Field(
        default=0.0, ge=0,
        description="fixed framework seconds per iteration outside its phases (the training loop's Python between "
                    "them: batch iteration, span records, loss bookkeeping); default 0 = not modelled; gnnplan "
                    "probe measures it (executor.probe_overheads.iteration_overhead_s)")
    jitter_s: float = Field(
        default=0.0, ge=0, le=1.0,
        description="stragglers at synchronous collectives: a worker that has worked T seconds since the previous "
                    "collective released arrives at the next with a random delay of standard deviation "
                    "sqrt(jitter_s * T) (a random walk: noise accumulating with the work, independent across "
                    "workers and collectives), so each collective releases at the expected maximum of its "
                    "participants' arrivals (simulator.order_stats; Dean and Barroso, 'The tail at scale', CACM "
                    "2013), not at the last deterministic one; seconds of variance per second of work; default 0 = "
                    "not modelled (the presets: no published figure); gnnplan probe measures it "
                    "(executor.probe_io.straggler_jitter, simulator.jitter) and calibration keeps it")
    sources: dict[str, str] = Field(default_factory=dict, description="field path -> where the number comes from")
    priors: dict[str, float] = Field(
        default_factory=dict,
        description="field path -> the value gnnplan probe measured for a parameter calibration fits: the centre "
                    "calibration regularises toward (default: the field's own value), kept unchanged by "
                    "calibration so a recalibration starts from the measurement, not from the previous fit")

    @model_validator(mode="after")
    def _priors_name_numeric_fields(self) -> ClusterSpec:
        """Every ``priors`` key names a numeric field and its value is >= 0 (non-finite values are rejected)."""
        for path, value in self.priors.items():
            obj: Any = self
            for part in path.split("."):
                obj = getattr(obj, part, None)
            if isinstance(obj, bool) or not isinstance(obj, int | float):
                raise ValueError(  # noqa: TRY004 (pydantic reports a validator's ValueError, not a TypeError)
                    f"priors: {path!r} is not a numeric cluster field (e.g. network.latency_s)")
            if value < 0:
                raise ValueError(f"priors: {path} must be >= 0 (got {value})")
        return self

    @model_validator(mode="after")
    def _plausible(self) -> ClusterSpec:
        """Every number within its unit's plausible range (:func:`simulator.limits.check_unit_ranges`: finite
        but absurd values such as a 1e-320 B/s bandwidth made the simulator's arithmetic end in NaN)."""
        check_unit_ranges(self)
        return self

    @property
    def num_gpus(self) -> int:
        """Total GPUs (= workers = ranks)."""
        return self.num_machines * self.gpus_per_machine

    def to_yaml_dict(self) -> dict[str, Any]:
        """The spec as a plain mapping, ready for :func:`simulator.io.atomic_write_yaml`."""
        return self.model_dump(mode="json")


def preset_dirs() -> list[Path]:
    """Folders searched for cluster presets: the user's (``$GNNPLAN_HOME/presets``, default ``~/.gnnplan``)
    first, so ``gnnplan probe`` can replace ``local``, then the presets shipped with the package."""
    from gnnplan.simulator.paths import user_home

    return [user_home() / "presets", PRESET_DIR]


def preset_names() -> list[str]:
    """Names of the available cluster presets."""
    names = {p.stem for d in preset_dirs() if d.is_dir() for p in d.glob("*.yaml")}
    return sorted(names)


def runs_as(device: str, cluster: ClusterSpec) -> bool:
    """Whether a run's recorded device (a trace's ``results.device``: the CUDA device's name, or for a run on CPU
    the CPU's name as ``gnnplan probe`` writes it into a cluster's ``gpu.model``) is the kind ``cluster`` models: it
    names the cluster's GPU model."""
    return bool(cluster.gpu.model) and cluster.gpu.model in device


def load_cluster(ref: str | Path | ClusterSpec) -> ClusterSpec:
    """Load a cluster from a preset name or a YAML path.

    Args:
        ref: preset name (``4x-a100-10gbe``, ``dgx-a100``, ``local``), a YAML file, or a spec (returned as is
            once valid: one edited with ``model_copy`` is validated again, :mod:`simulator.spec_checked`).

    Returns:
        The validated spec.

    Raises:
        SpecError: unknown preset, unreadable file, or a field out of range (message names the field).
    """
    if isinstance(ref, ClusterSpec):
        from gnnplan.simulator.spec_checked import checked

        return checked(ref, cluster_from_dict)
    if not isinstance(ref, (str, Path)):
        raise SpecError(f"cluster: a preset name, a YAML path or a ClusterSpec (got {type(ref).__name__})")
    check_path_text(ref, "cluster", "a preset name or a YAML file")
    path = Path(ref)
    if not path.suffix:
        found = [d / f"{ref}.yaml" for d in preset_dirs() if (d / f"{ref}.yaml").is_file()]
        if not found and path.is_dir():
            raise SpecError(f"cluster: {str(ref)!r} is a folder, not a preset or a YAML file")
        if not found:
            raise SpecError(f"cluster: {unknown_name('preset', str(ref), preset_names(), ' or a YAML file')}")
        path = found[0]
    return cluster_from_dict(read_yaml(path, "cluster"), where=f"cluster {path.name}")


def cluster_from_dict(data: dict[str, Any], where: str = "cluster") -> ClusterSpec:
    """Validate a mapping as a :class:`ClusterSpec`, raising :class:`SpecError` with a one-line message."""
    from gnnplan.simulator.overrides import file_values
    from gnnplan.simulator.spec_checked import mark_valid

    try:
        return mark_valid(ClusterSpec.model_validate(file_values(ClusterSpec, data, where)))
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None
