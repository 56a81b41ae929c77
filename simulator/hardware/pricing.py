"""Priced operations: the one place where work (bytes, edges, FLOPs, messages) becomes seconds.

Every strategy states work; the simpy processes of :class:`~gnnplan.simulator.hardware.model.HardwareModel` and
:mod:`gnnplan.simulator.calibrate` both turn it into time through the functions here, so a simulation and a fit
agree by construction. Each function returns the *uncontended* time (the simulator shares links and cores
among concurrent flows on top of it). :data:`OPERATIONS` names each one with the cluster parameters its price
depends on; a strategy's ``CALIBRATION`` maps its trace phases to these names (:class:`PhaseRule`), which is
all calibration needs to know about a strategy.

Formulas and sources:

* transfer over a link (PCIe, NVLink, NIC, storage): alpha-beta, ``num_messages * latency_s + nbytes /
  bandwidth_bytes_per_s``. Source: Hockney, "The communication challenge for MPP", Parallel Computing 20(3),
  1994.
* gather of rows (``index_select``) from a memory: ``nbytes / (memory_bandwidth_bytes_per_s *
  efficiency.gather_fraction)``: memory-bound (Williams, Waterman and Patterson, "Roofline", CACM 52(4), 2009).
* sampling: ``num_edges / (host.sampling_edges_per_s_per_core * cores)`` (DGL's sampler is edge-bound on one
  core per sampler process).
* compute of a phase: ``flops * seconds_per_flop / efficiency.<phase>_fraction + kernels *
  gpu.kernel_overhead_s`` (:func:`gnnplan.simulator.hardware.model.compute_time_s` on a kernel list).
* all-reduce: hierarchical ring (:func:`gnnplan.simulator.hardware.collectives.hierarchical_all_reduce_time_s`)
  plus ``network.per_collective_s`` once per call on a multi-worker cluster (the backend's fixed cost of a
  collective beyond its messages' latencies: dispatch, algorithm set-up, completion wait).
* sampler hand-off: ``num_batches * host.sampler_handoff_s``, what a trainer spends taking a batch from a
  sampler process (PyTorch DataLoader: queue get, then unpickling every tensor of the blocks through a
  shared-memory file descriptor fetched from the sender; torch.multiprocessing "file_descriptor" sharing
  strategy, torch/multiprocessing/reductions.py ``rebuild_storage_fd``).
* fixed per-iteration cost: ``steps * iteration_overhead_s + sampler hand-off`` (:func:`iteration_fixed_s`).
* feature fetch (a pull of remote rows, DistDGL KVStore style): ``(request_messages + 1) * network.latency_s +
  sharers * nbytes / network.bandwidth_bytes_per_s``: the requests, then the rows back, ``sharers`` workers
  of the machine pulling at once through its NIC.
* feature load: ``max(host gather of local rows, fetch_s) + host-to-GPU copy of local + remote rows + GPU
  gather of cache hits``.
* exchange (per-layer representations or gradients between workers of different machines): ``steps *
  (network.latency_s + 2 pcie.latency_s) + nbytes * (1 / network bandwidth + 2 / pcie bandwidth)``: out over
  PCIe, across the network, in over PCIe.
* shuffle (``gsplit``: one all-to-all call, one message per GPU pair at once): ``per_collective_s + max(gpu_to_gpu
  of the bytes inside the machine, exchange of the bytes across machines)``; it informs only the network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gnnplan.simulator.hardware.collectives import hierarchical_all_reduce_time_s, intra_machine_link
from gnnplan.simulator.hardware.spec import ClusterSpec, LinkSpec
from gnnplan.simulator.trace import Span


def link_s(link: LinkSpec, nbytes: float, num_messages: float = 1.0) -> float:
    """Alpha-beta time of ``num_messages`` back-to-back messages carrying ``nbytes`` in all (0 for no bytes)."""
    return 0.0 if nbytes <= 0 else num_messages * link.latency_s + nbytes / link.bandwidth_bytes_per_s


def bandwidth_s(link: LinkSpec, nbytes: float) -> float:
    """The bandwidth term of :func:`link_s` alone, ``nbytes / bandwidth_bytes_per_s`` (for a caller that prices
    the messages' latencies itself)."""
    return nbytes / link.bandwidth_bytes_per_s


def host_to_gpu_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Copy host memory to one GPU over its PCIe link (host-to-device)."""
    return link_s(cluster.pcie, nbytes)


def gpu_to_host_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Copy one GPU's memory to the host over its PCIe link (device-to-host)."""
    return link_s(cluster.pcie, nbytes)


def gpu_to_gpu_s(cluster: ClusterSpec, nbytes: float, num_messages: float = 1.0) -> float:
    """Copy between two GPUs of one machine: NVLink if present, else PCIe through the host (one leg priced)."""
    return link_s(intra_machine_link(cluster)[0], nbytes, num_messages)


def network_s(cluster: ClusterSpec, nbytes: float, num_messages: float = 1.0) -> float:
    """Send ``nbytes`` from one machine's NIC to another's in ``num_messages`` messages."""
    return link_s(cluster.network, nbytes, num_messages)


def storage_read_s(cluster: ClusterSpec, nbytes: float, num_reads: float = 1.0) -> float:
    """Read ``nbytes`` from a machine's storage device in ``num_reads`` requests."""
    return link_s(cluster.storage, nbytes, num_reads)


def host_gather_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Gather ``nbytes`` of rows from host memory (memory-bound ``index_select``)."""
    return nbytes / (cluster.host.memory_bandwidth_bytes_per_s * cluster.efficiency.gather_fraction)


def gpu_gather_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Gather ``nbytes`` of rows from GPU memory (e.g. feature-cache hits)."""
    return nbytes / (cluster.gpu.memory_bandwidth_bytes_per_s * cluster.efficiency.gather_fraction)


def sampling_s(cluster: ClusterSpec, num_edges: float, cores: float = 1.0) -> float:
    """Sample ``num_edges`` neighbour edges on ``cores`` host cores; with ``cores=1`` also its core-seconds."""
    return num_edges / (cluster.host.sampling_edges_per_s_per_core * cores)


def all_reduce_s(cluster: ClusterSpec, nbytes: float) -> float:
    """Hierarchical ring all-reduce of ``nbytes`` per GPU over the whole cluster, plus the collective's fixed
    cost (:func:`collective_s`)."""
    return hierarchical_all_reduce_time_s(nbytes, cluster) + collective_s(cluster, nbytes)


def collective_s(cluster: ClusterSpec, nbytes: float) -> float:
    """The fixed cost of one collective call of ``nbytes`` per worker: ``network.per_collective_s`` when there
    is something to exchange (several workers, bytes > 0), else 0."""
    return cluster.network.per_collective_s if cluster.num_gpus > 1 and nbytes > 0 else 0.0


def sampler_handoff_s(cluster: ClusterSpec, num_batches: float = 1.0) -> float:
    """A trainer taking ``num_batches`` sampled batches from sampler processes (``host.sampler_handoff_s``
    each)."""
    return num_batches * cluster.host.sampler_handoff_s


def feature_fetch_s(cluster: ClusterSpec, nbytes: float, request_messages: float = 2.0, sharers: float = 1.0) -> float:
    """Pull ``nbytes`` of remote rows: requests, then the rows back, ``sharers`` pullers on one NIC."""
    net = cluster.network
    return (request_messages + 1.0) * net.latency_s + sharers * nbytes / net.bandwidth_bytes_per_s


def feature_load_s(cluster: ClusterSpec, local_bytes: float, remote_bytes: float, hit_bytes: float,
                   fetch_s: float = 0.0) -> float:
    """Load a batch's input features: host gather of local rows overlapping the remote fetch (``fetch_s``),
    then the host-to-GPU copy of every miss, then the GPU gather of cache hits."""
    return (max(host_gather_s(cluster, local_bytes), fetch_s) + host_to_gpu_s(cluster, local_bytes + remote_bytes)
            + gpu_gather_s(cluster, hit_bytes))


def exchange_s(cluster: ClusterSpec, nbytes: float, steps: float = 1.0) -> float:
    """Exchange ``nbytes`` with workers of other machines in ``steps`` sequential rounds (PCIe out, network,
    PCIe in per message)."""
    if nbytes <= 0:
        return 0.0
    return steps * (cluster.network.latency_s + 2.0 * cluster.pcie.latency_s) + nbytes * exchange_per_byte_s(cluster)


def exchange_per_byte_s(cluster: ClusterSpec) -> float:
    """Marginal seconds per byte of an exchange between machines: ``1 / network bandwidth + 2 / PCIe bandwidth``
    (PCIe out, the network, PCIe in; :func:`exchange_s` without its latencies)."""
    return 1.0 / cluster.network.bandwidth_bytes_per_s + 2.0 / cluster.pcie.bandwidth_bytes_per_s


def shuffle_s(cluster: ClusterSpec, intra_bytes: float = 0.0, network_bytes: float = 0.0) -> float:
    """One GPU's part of a split-aware shuffle (``gsplit``): one message to every other GPU at once, those of its
    machine over NVLink (PCIe through the host without it; ``intra_bytes``), those of other machines as an
    :func:`exchange_s` (``network_bytes``; on a CPU-only cluster the rows already are in host memory, so just
    :func:`network_s`); it ends with the slower of the two, after the collective's fixed cost
    (:func:`collective_s`: the shuffle is one all-to-all call). Each ``*_bytes`` is the larger of what the GPU
    sends and receives on that path."""
    across = network_s(cluster, network_bytes) if cluster.gpu.is_host_cpu else exchange_s(cluster, network_bytes)
    return collective_s(cluster, intra_bytes + network_bytes) + max(gpu_to_gpu_s(cluster, intra_bytes), across)


def phase_compute_s(cluster: ClusterSpec, phase: str, flops: float, seconds_per_flop: float,
                    kernels: float) -> float:
    """A compute phase (``forward``, ``backward``, ``optimizer``) from its FLOPs, its roofline seconds per FLOP
    and its kernel count: ``flops * seconds_per_flop / efficiency + kernels * gpu.kernel_overhead_s``."""
    fraction = getattr(cluster.efficiency, f"{phase}_fraction")
    return flops * seconds_per_flop / fraction + kernels * cluster.gpu.kernel_overhead_s


def iteration_overhead_s(cluster: ClusterSpec) -> float:
    """The fixed framework seconds per iteration (``iteration_overhead_s``)."""
    return cluster.iteration_overhead_s


def iteration_fixed_s(cluster: ClusterSpec, steps: float = 1.0, handoffs: float = 0.0) -> float:
    """An iteration's fixed seconds outside its phases: ``steps`` times ``iteration_overhead_s`` (a strategy
    paying it per training step, e.g. hopgnn) plus ``handoffs`` batches taken from sampler processes."""
    return steps * cluster.iteration_overhead_s + sampler_handoff_s(cluster, handoffs)


@dataclass(frozen=True)
class PricedOp:
    """A priced operation and the cluster parameters (dotted field paths) its price depends on and that
    calibration may fit from spans priced by it."""

    name: str
    seconds: Callable[..., float]
    params: tuple[str, ...]


_NET = ("network.bandwidth_bytes_per_s", "network.latency_s")
_PCIE = ("pcie.bandwidth_bytes_per_s", "pcie.latency_s")
_KERNEL = ("gpu.kernel_overhead_s",)
OPERATIONS: dict[str, PricedOp] = {op.name: op for op in (
    PricedOp("host_to_gpu", host_to_gpu_s, _PCIE),
    PricedOp("gpu_to_host", gpu_to_host_s, _PCIE),
    PricedOp("gpu_to_gpu", gpu_to_gpu_s, ("nvlink.bandwidth_bytes_per_s", "nvlink.latency_s")),
    PricedOp("network", network_s, _NET),
    PricedOp("storage_read", storage_read_s, ("storage.bandwidth_bytes_per_s", "storage.latency_s")),
    PricedOp("host_gather", host_gather_s, ("efficiency.gather_fraction",)),
    PricedOp("sampling", sampling_s, ("host.sampling_edges_per_s_per_core",)),
    PricedOp("all_reduce", all_reduce_s, _NET + _PCIE + ("network.per_collective_s",)),
    PricedOp("feature_fetch", feature_fetch_s, _NET),
    PricedOp("feature_load", feature_load_s, _PCIE + ("efficiency.gather_fraction",)),
    PricedOp("exchange", exchange_s, _NET),
    PricedOp("shuffle", shuffle_s, _NET + ("network.per_collective_s",)),
    PricedOp("forward", lambda cl, **w: phase_compute_s(cl, "forward", **w),
             ("efficiency.forward_fraction",) + _KERNEL),
    PricedOp("backward", lambda cl, **w: phase_compute_s(cl, "backward", **w),
             ("efficiency.backward_fraction",) + _KERNEL),
    PricedOp("optimizer", lambda cl, **w: phase_compute_s(cl, "optimizer", **w),
             ("efficiency.optimizer_fraction",) + _KERNEL),
    PricedOp("sampler_handoff", sampler_handoff_s, ("host.sampler_handoff_s",)),
    PricedOp("iteration_overhead", iteration_fixed_s, ("iteration_overhead_s", "host.sampler_handoff_s")),
)}
"""Every priced operation by name. ``exchange`` informs only the network: one span cannot tell its PCIe legs
from its network leg, and PCIe is determined by ``load`` spans. ``iteration_overhead`` is the fixed cost an
iteration's phases leave over (:func:`iteration_fixed_s`): its rows inform the per-iteration overhead and, for
runs with sampler processes, the hand-off (their sum; the probe's priors tell them apart)."""


@dataclass(frozen=True)
class SpanRow:
    """What a :class:`PhaseRule` sees of one measured span.

    Attributes:
        span: the span (for ``rows="iteration_sum"``, one span summing the phase's spans of the iteration:
            durations, FLOPs and bytes added, ``args["num_spans"]`` their count).
        iteration: the spans of positive duration of the same rank, epoch and iteration, by phase.
        knobs: the plan's knob values.
        shape: the trace's cluster (its machines x GPUs) at the starting parameters. A rule's ``work`` reads its
            shape (and parameters calibration does not fit), never a fitted parameter: calibration prices the
            work at each trial's parameters by passing that cluster to :meth:`PhaseRule.predicted_s`.
        profile: the strategy's compute profile (``compute_profile``) on that shape, by phase (filled for the
            rules with ``profiled``).
    """

    span: Span
    iteration: Mapping[str, Sequence[Span]]
    knobs: Mapping[str, Any]
    shape: ClusterSpec
    profile: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PhaseRule:
    """How calibration prices the spans of one trace phase.

    Attributes:
        op: a key of :data:`OPERATIONS`.
        work: the operation's keyword arguments for one row (its ``cluster`` is supplied by calibration).
        rows: ``each`` span is a row; ``iteration_sum``: the phase's spans of one rank and iteration summed
            into one row; ``fastest``: per iteration, the fastest rank's span only (a collective, so waiting for
            stragglers is excluded).
        target: the measured seconds the prediction is compared with (default: the span's duration).
        min_machines: rows are used only for traces with at least this many machines (e.g. 2 for a network
            phase that is empty on one machine).
        min_workers: likewise in workers.
        profiled: ``work`` reads ``row.profile[phase]``: calibration computes the plug-in's compute profile for
            the trace and drops the rows of a phase the profile lacks.
    """

    op: str
    work: Callable[[SpanRow], dict[str, float]]
    rows: Literal["each", "iteration_sum", "fastest"] = "each"
    target: Callable[[SpanRow], float] | None = None
    min_machines: int = 1
    min_workers: int = 1
    profiled: bool = False

    def __post_init__(self) -> None:
        if self.op not in OPERATIONS:
            raise ValueError(f"op: unknown priced operation {self.op!r}; allowed: {', '.join(OPERATIONS)}")
        if self.rows not in ("each", "iteration_sum", "fastest"):
            raise ValueError(f"rows: unknown row kind {self.rows!r}; allowed: each, iteration_sum, fastest")

    @property
    def params(self) -> tuple[str, ...]:
        """The cluster parameters (dotted paths) this rule's spans inform: its operation's."""
        return OPERATIONS[self.op].params

    def measured_s(self, row: SpanRow) -> float:
        """The measured seconds of a row."""
        return self.target(row) if self.target is not None else row.span.dur_s

    def predicted_s(self, row: SpanRow, cluster: ClusterSpec | None = None) -> float:
        """The priced seconds of a row on ``cluster`` (default ``row.shape``; calibration passes the shape with
        the trial's values of :attr:`params`)."""
        return OPERATIONS[self.op].seconds(row.shape if cluster is None else cluster, **self.work(row))
