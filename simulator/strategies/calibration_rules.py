"""Calibration rules shared by strategy plug-ins: how their common trace phases are priced.

A plug-in's ``CALIBRATION`` maps each trace phase it records to a
:class:`~gnnplan.simulator.hardware.phase_rules.PhaseRule` (the priced operation and the work a span carries);
:mod:`gnnplan.simulator.calibrate` applies the rules and knows no strategy. The builders here cover the phases
several strategies share; a strategy with its own phase writes its own rule beside them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gnnplan.simulator.hardware.collectives import nic_index, uplink_index
from gnnplan.simulator.hardware.phase_rules import PhaseRule, SpanRow
from gnnplan.simulator.strategies.inference_time import EVALUATION_COMPUTE_PHASE, layer_profile_key
from gnnplan.simulator.trace import Span

COMPUTE_PHASES = ("forward", "backward", "optimizer")


def span_arg(row: SpanRow, name: str) -> float:
    """A numeric span argument (0 when absent)."""
    return float(row.span.args.get(name, 0.0))


def _compute_work(phase: str) -> Callable[[SpanRow], dict[str, float]]:
    def work(row: SpanRow) -> dict[str, float]:
        prof = row.profile[phase]
        spans = span_arg(row, "num_spans")
        return {"flops": row.span.flops, "seconds_per_flop": prof.seconds_per_flop,
                "kernels": spans * prof.kernels_per_span, "graph_ops": spans * prof.graph_ops_per_span,
                "random_elems": spans * prof.random_elems_per_span,
                "roofline_fixed_s": spans * prof.roofline_fixed_s,
                "backward_kernels": spans * prof.backward_kernels_per_span}
    return work


def compute_rules() -> dict[str, PhaseRule]:
    """``forward`` / ``backward`` / ``optimizer``: one row per rank and iteration (a full-graph strategy runs
    several blocks of different shape per phase), priced with the plug-in's ``compute_profile``."""
    return {p: PhaseRule(p, _compute_work(p), rows="iteration_sum", profiled=True) for p in COMPUTE_PHASES}


def device_copy_rule() -> PhaseRule:
    """A row copy in device memory recorded as its own span (neutronstar's ``pack`` and ``unpack`` around an
    exchange, and ``gather``, a block's source rows): the span's bytes gathered at the GPU's memory bandwidth
    (:func:`~gnnplan.simulator.hardware.pricing.gpu_gather_s`)."""
    return PhaseRule("gpu_gather", lambda row: {"nbytes": row.span.nbytes})


def sample_rule() -> PhaseRule:
    """``sample``: the span's ``num_sampled_edges`` in its ``num_sampler_calls`` sampler calls on one host core;
    only spans that exchanged nothing (``nbytes`` 0 or absent): on a partitioned structure (dp's
    ``graph_structure = partitioned``) the span also holds the requests to other machines, whose network time is
    not the sampling rate's."""
    return PhaseRule("sampling", lambda row: {"num_edges": span_arg(row, "num_sampled_edges"),
                                              "num_calls": span_arg(row, "num_sampler_calls")},
                     when=lambda row: not row.span.nbytes)


def all_reduce_rule(ddp: bool = False) -> PhaseRule:
    """``all_reduce``: the gradient bytes, one row per call timed from the last rank's arrival (``per_call``),
    traces with 2+ workers; only spans of one
    DDP bucket (``num_buckets`` absent or 1): with several the span is the part of the buckets' all-reduces left
    after backward, not an all-reduce of its bytes. With ``ddp`` (a strategy whose executor trains with
    DistributedDataParallel) priced with the reducer's fixed cost per bucket
    (:func:`~gnnplan.simulator.hardware.pricing.ddp_all_reduce_s`)."""
    return PhaseRule("ddp_all_reduce" if ddp else "all_reduce", lambda row: {"nbytes": row.span.nbytes},
                     rows="per_call", min_workers=2, when=lambda row: span_arg(row, "num_buckets") <= 1)


def fetch_rule(request_messages: int, num_collectives: int = 0) -> PhaseRule:
    """``fetch``: a pull of remote rows with ``request_messages`` messages before the rows come back, the
    machine's workers sharing its NIC. With ``num_collectives`` > 0 the pull is that many collective calls over
    all workers (the executor's ``RowStore.pull``), each priced with its fixed cost
    (``network.per_all_to_all_s``); a rank's span then also holds the wait for the slowest rank at each call,
    which the simulator's barriers produce and the price leaves out, so the row is the span of the rank that
    received the most, from the last rank's arrival to its end (calibration's ``per_call`` rows), traces with 2+
    machines: the call ends when its busiest NIC is done. A simulated span carries the bytes its rank pulled
    (dp: the slowest machine's worker, :func:`~gnnplan.simulator.strategies.dp.work.worker_work`). A call's row
    is priced on the bytes of the machine whose ranks pulled the most (``machine_bytes``), an equal share per GPU
    through the machine's NICs: its GPUs pull different amounts, and until 2026-11-29 the busiest GPU's bytes
    times the machine's GPUs over-priced the call (a predicted trace's network bandwidth fitted 1.24x its own
    cluster's at 2 GPUs per machine, 1.94x at 4)."""
    def work(row: SpanRow) -> dict[str, float]:
        g = float(row.shape.gpus_per_machine)
        nbytes = span_arg(row, "machine_bytes") / g if "machine_bytes" in row.span.args else row.span.nbytes
        return {"nbytes": nbytes, "request_messages": float(request_messages), "sharers": g,
                "num_collectives": float(num_collectives)}
    if num_collectives:
        return PhaseRule("feature_fetch", work, rows="per_call", min_machines=2)
    return PhaseRule("feature_fetch", work)


def overlap_fraction(span: Span, peer: Span) -> float:
    """The time two spans overlap over the shorter one's duration (1: the shorter ran wholly inside the other)."""
    both = min(span.start_s + span.dur_s, peer.start_s + peer.dur_s) - max(span.start_s, peer.start_s)
    return max(0.0, both) / min(span.dur_s, peer.dur_s)


def contended_bytes(row: SpanRow, own: float, amount: Callable[[Span], float],
                    peers: Sequence[Span] | None = None) -> float:
    """What the spans beside ``row``'s (``row.peers``, or ``peers``) move on a resource this span's ``own`` bytes
    cross, under processor sharing: of each, ``amount(peer)`` bytes or ``own`` if fewer (flows that start together
    share the resource equally until the smaller ends), weighted by :func:`overlap_fraction`."""
    beside = row.peers if peers is None else peers
    return sum(overlap_fraction(row.span, p) * min(amount(p), own) for p in beside)


def arg_of(name: str) -> Callable[[Span], float]:
    """A span's numeric argument ``name`` (0 when absent), as a function of the span."""
    return lambda span: float(span.args.get(name, 0.0))


def load_rule(nested: tuple[str, ...] = ("fetch",), copied: str = "remote_bytes") -> PhaseRule:
    """``load``: the span's local bytes gathered from host memory, those and its ``copied`` bytes (rows pulled
    from other machines; gsplit: the split's structure) copied to the GPU, and its cache hits gathered there, one
    step after the other with the measured time of the iteration's ``nested`` spans (the pull, ``fetch``; dp's
    reads of the machine's cache slices from its other GPUs, ``peer_fetch``).

    The loads the machine's other GPUs ran at the same time (``row.peers``) share its host memory and PCIe path
    (:func:`~gnnplan.simulator.hardware.pricing.feature_load_s`): of each, as many bytes as this load's or its
    own if fewer (loads that start together share a link equally), weighted by how much of the shorter of the
    two spans they overlap; copies to GPUs behind the same PCIe switch share its uplink. A gather and another
    GPU's copy at the same moment are not priced as sharing the memory (on 4 GPUs per machine, gsplit's loads
    priced at 0.97x what the simulation took). Until 2026-11-29 loads were priced alone, and a trace the
    simulator predicted on 2 GPUs per machine fitted its own cluster's PCIe bandwidth 0.52x (dp: the second
    GPU's gathers, sharing the host memory, taken for slow copies); gsplit's were priced as ``g`` equal loads
    (1.06x what the simulation took on 2 GPUs, 1.12x on 4)."""
    def copy_of(span: Span) -> float:
        return float(span.args.get("local_bytes", 0.0)) + float(span.args.get(copied, 0.0))

    def work(row: SpanRow) -> dict[str, float]:
        local, copy = span_arg(row, "local_bytes"), copy_of(row.span)
        return {"local_bytes": local, "remote_bytes": span_arg(row, copied),
                "hit_bytes": span_arg(row, "hit_bytes"),
                "fetch_s": sum(s.dur_s for phase in nested for s in row.iteration.get(phase, ())),
                "peer_gather_bytes": contended_bytes(row, local, arg_of("local_bytes")),
                "peer_uplink_bytes": contended_bytes(row, copy, copy_of, same_uplink(row)),
                "peer_memory_bytes": contended_bytes(row, copy, copy_of)}
    return PhaseRule("feature_load", work, peers=True, contains=nested)


def same_uplink(row: SpanRow) -> list[Span]:
    """The spans beside ``row``'s whose GPU sits behind the same PCIe switch
    (:func:`~gnnplan.simulator.hardware.collectives.uplink_index`, as the event model places them)."""
    g, per_uplink = row.shape.gpus_per_machine, row.shape.pcie.gpus_per_uplink
    mine = uplink_index(row.span.rank % g, g, per_uplink)
    return [p for p in row.peers if uplink_index(p.rank % g, g, per_uplink) == mine]


def same_nic(row: SpanRow) -> list[Span]:
    """The spans beside ``row``'s whose GPU sends and receives through the same NIC (its PCIe-affine one,
    :func:`~gnnplan.simulator.hardware.collectives.nic_index`, as the event model routes it)."""
    g, nics = row.shape.gpus_per_machine, row.shape.network.nics_per_machine
    rail = nic_index(row.span.rank % g, g, nics)
    return [p for p in row.peers if nic_index(p.rank % g, g, nics) == rail]


def nic_work(row: SpanRow) -> dict[str, float]:
    """An exchange span that tells the bytes to and from other machines apart (``network_bytes``,
    ``network_received_bytes``), priced on those, in the direction whose NIC carries more while it runs: its own
    bytes and, of each span beside it (``row.peers``) of a GPU behind the same NIC crossing in that direction, as
    many as its own or that span's if fewer (:func:`contended_bytes`; ``nic_bytes`` of
    :func:`~gnnplan.simulator.hardware.pricing.exchange_s`); the bytes to or from a GPU of the same machine move
    over NVLink or PCIe meanwhile and are not priced."""
    beside = same_nic(row)
    directions = []
    for arg in ("network_bytes", "network_received_bytes"):
        own = span_arg(row, arg)
        directions.append((own + contended_bytes(row, own, arg_of(arg), beside), own))
    nic_bytes, nbytes = max(directions)
    return {"nbytes": nbytes, "nic_bytes": nic_bytes}


def exchange_rule(ring_knob: str | None = None) -> PhaseRule:
    """``exchange``: the larger of sent and received bytes, in W - 1 sequential steps when the plan's
    ``ring_knob`` is on, else one; traces with 2+ machines. One row per exchange call (``per_call``: every rank
    exchanges in each layer's call, so a rank's span also holds its wait for the last one to arrive, which the
    row leaves out), the rank whose NIC traffic is largest. A span that tells the bytes to and from other machines
    apart is priced on those, through its NIC shared with the machine's other GPUs' exchanges beside it
    (:func:`nic_work`). Until 2026-11-29 each rank's span was a row, waits included, and every GPU of the machine
    was taken to send as much as it (``sharers``): a trace predicted on 2 machines x 4 GPUs, calibrated on its own
    cluster, fitted the network bandwidth 1.10x and its latency 1.9x (1.08x and 0.65x while a ring's slots inside
    the machine were priced with the network's latency; now only the slots across pay it,
    :func:`ring_steps_across`)."""
    def network_load(row: SpanRow) -> float:
        if "network_bytes" in row.span.args:
            return max(span_arg(row, "network_bytes"), span_arg(row, "network_received_bytes"))
        return max(row.span.nbytes, span_arg(row, "received_bytes"))

    def work(row: SpanRow) -> dict[str, float]:
        steps = 1
        if ring_knob and row.knobs.get(ring_knob):
            steps = ring_steps_across(row.span.rank, row.shape.num_gpus, row.shape.gpus_per_machine)
        priced = nic_work(row) if "network_bytes" in row.span.args else {"nbytes": network_load(row)}
        return {**priced, "steps": float(steps)}
    return PhaseRule("exchange", work, min_machines=2, peers=True, rows="per_call", call_load=network_load)


def ring_steps_across(rank: int, num_workers: int, gpus_per_machine: int) -> int:
    """Slots of a ring-scheduled exchange (NeutronStar §4.3: in slot s = 0..W-2 worker i sends to i + s + 1 and
    receives from i - s - 1, mod W) in which ``rank`` sends to or receives from a worker of another machine, each
    paying the network's latency; a slot whose two peers share its machine moves over NVLink or PCIe. Ranks are
    numbered machine by machine (``gpus_per_machine`` each). On 2 machines x 4 GPUs: 7 of 7 slots for rank 0, 5 for
    rank 1 (its slots 0 and 6 stay inside the machine)."""
    machine = rank // gpus_per_machine
    return sum((rank + s + 1) % num_workers // gpus_per_machine != machine
               or (rank - s - 1) % num_workers // gpus_per_machine != machine for s in range(num_workers - 1))


def iteration_rule(trainer_phases: tuple[str, ...], sampler_knob: str | None = "num_sampler_workers",
                   per_span_of: str | None = None, batch_phases: tuple[str, ...] = ("sample",),
                   wait_for_batch: bool = False) -> PhaseRule:
    """``iteration``: the fixed per-iteration cost, measured as the iteration's time minus the time covered by
    its phases on the trainer's path (``trainer_phases``; overlapping spans once, :func:`covered_s`) and the
    making of its batch (``batch_phases``: gsplit also splits it): those spans inline when ``sampler_knob`` is 0
    or absent, else the wait for the prefetched batch (from the iteration start to the batch spans' last end),
    after which the trainer takes the batch (one sampler hand-off per iteration). With ``wait_for_batch`` a rank
    that has no batch span waits for another rank's (gsplit's simulated machines sample once, on their first
    GPU): the time from the iteration start to its first trainer phase is that wait. With ``per_span_of`` the
    strategy pays ``iteration_overhead_s`` once per span of that phase (hopgnn: once per step, i.e. per
    ``forward`` span). Priced by ``iteration_overhead``
    (:func:`~gnnplan.simulator.hardware.pricing.iteration_fixed_s`)."""
    def prefetched(row: SpanRow) -> bool:
        return bool(sampler_knob and row.knobs.get(sampler_knob, 0))

    def work(row: SpanRow) -> dict[str, float]:
        steps = len(row.iteration.get(per_span_of, ())) if per_span_of else 1
        return {"steps": float(max(steps, 1)), "handoffs": float(prefetched(row))}

    def gap(row: SpanRow) -> float:
        it, s = row.iteration, row.span
        busy = [(x.start_s, x.end_s) for p in trainer_phases for x in it.get(p, ())]
        batch = [x for p in batch_phases for x in it.get(p, ())]
        if batch and not prefetched(row):
            busy += [(x.start_s, x.end_s) for x in batch]
        elif batch or (wait_for_batch and busy):  # waited from the start for the batch to be ready
            ready = max(x.end_s for x in batch) if batch else min(start for start, _ in busy)
            busy.append((s.start_s, min(max(s.start_s, ready), s.end_s)))
        return s.dur_s - covered_s(busy)
    return PhaseRule("iteration_overhead", work, target=gap)


def covered_s(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``(start, end)`` intervals (seconds on one clock): phases that overlap
    (neutronstar's replica compute while its exchange is in flight, ``overlap``) count once, as the time the
    iteration spent in them; 0 for none."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def evaluation_rules() -> dict[str, PhaseRule]:
    """The evaluation's spans (executor/evaluate.py, layer-wise inference; one iteration per layer and chunk) that
    calibration fits, priced as :mod:`~gnnplan.simulator.strategies.inference_time` prices them: ``eval_sample``
    (``full_sampling``: a chunk's whole in-neighbourhood in one sampler call) and ``eval_forward`` (``inference``:
    the layer's forward kernels, one span each, priced with the plug-in's compute profile of that layer,
    :func:`~gnnplan.simulator.strategies.inference_time.evaluation_profiles`). Each is priced at the training rate
    it scales times a ratio of its own (``host.full_neighbour_sampling_ratio``, ``efficiency.inference_ratio``),
    which takes up the difference. Priced at training's parameters alone, the evaluation's far larger blocks moved
    those off what the training spans say (benchmarks/bench_evaluation.py, 2026-11-29: held-out epoch times' mean
    |error| 16.4% -> 18.3% in one run, 22.7% -> 26.9% in another); with the ratios 11.3% without and 11.7% with
    the evaluation's spans (11.9% and 12.1% in a later run). The loads and fetches (``eval_load``, ``eval_fetch``)
    are not fitted: they are training's operations, and a rank's fetch also waits for the other ranks' chunks."""
    def forward(row: SpanRow) -> dict[str, float]:  # the span's layer's kernels, else the layers' mean
        layer = row.span.args.get("layer")
        key = EVALUATION_COMPUTE_PHASE if layer is None else layer_profile_key(int(layer))
        prof = row.profile.get(key, row.profile[EVALUATION_COMPUTE_PHASE])
        return {"flops": row.span.flops, "seconds_per_flop": prof.seconds_per_flop,
                "kernels": prof.kernels_per_span, "graph_ops": prof.graph_ops_per_span}
    return {"eval_sample": PhaseRule("full_sampling", lambda row: {"num_edges": span_arg(row, "num_sampled_edges"),
                                                                   "num_calls": span_arg(row, "num_sampler_calls")}),
            EVALUATION_COMPUTE_PHASE: PhaseRule("inference", forward, profiled=True)}
