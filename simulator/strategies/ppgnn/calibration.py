"""How calibration prices ``ppgnn``'s spans (the plug-in's ``CALIBRATION``): its loaders' spans as
:func:`~gnnplan.simulator.hardware.pricing.batch_load_s`, so ``host.row_index_s`` (per-row indexing) and
``storage.concurrency`` (storage requests served at once) are fitted from ppgnn traces like any other parameter.

Spans (the simulator's :mod:`gnnplan.simulator.strategies.ppgnn` and the executor's
:mod:`gnnplan.executor.strategies.ppgnn` record the same ones; notation of :mod:`.work`: ``M`` matrices, ``b``
rows, ``s`` bytes per row and matrix):

* ``row_index`` (stream ``loader``): a ``baseline`` DataLoader worker process assembling one batch: ``b M``
  per-row index operations (``num_requests``) and, from ``ssd``, as many direct reads, one in flight per worker,
  :data:`~.work.BASELINE_WORKERS` workers sharing the device.
* ``load``: what the trainer (or the double buffer's producer) spends on a batch:

  - when nobody loaded ahead (``fused``, the ``baseline`` on device-resident matrices) or a producer thread did
    (``double_buffer``: its span is the load alone), the whole load: the baseline's per-row indexing, ``ssd``
    reads (one per row and matrix, or per run and matrix under chunk reshuffling, :data:`~.work.IO_THREADS` in
    flight, ``PAGE_BYTES`` more per read: the enclosing aligned range), the host gather of a random batch from
    host memory, the host-to-device copy (``M`` transfers, or one per run and matrix for chunks from host
    memory; none for GPUDirect reads or device-resident matrices) and the device gather of device-resident rows;
  - after ``baseline`` DataLoader workers (host or ssd placement): the copy alone, measured from when the batch
    was ready (the end of its ``row_index`` span) to the end of the load: the trainer's wait for the workers is
    theirs, priced by their ``row_index`` span.

* ``iteration``: the fixed per-iteration cost, the iteration minus its trainer phases; a double-buffered load
  overlaps the previous iteration, so only the trainer's wait for it (from the iteration's start to the load's
  end) is on its path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gnnplan.simulator.hardware.phase_rules import PhaseRule, SpanRow
from gnnplan.simulator.strategies import calibration_rules as rules
from gnnplan.simulator.strategies.ppgnn.knobs import Knobs
from gnnplan.simulator.strategies.ppgnn.work import BASELINE_WORKERS, IO_THREADS, PAGE_BYTES

ROW_INDEX_PHASE = "row_index"
TRAINER_PHASES = ("forward", "backward", "all_reduce", "optimizer")


def _knobs(row: SpanRow) -> Knobs:
    """The plan's knobs with their defaults (an executor's plan may name only some)."""
    return Knobs.model_validate(dict(row.knobs))


def _background(row: SpanRow) -> bool:
    """Whether the row's batches were indexed ahead by DataLoader workers (the span records their wait)."""
    return _knobs(row).loader == "baseline" and rules.span_arg(row, "hit_bytes") <= 0


def _ready_s(row: SpanRow) -> float | None:
    """When the iteration's batch was ready: the end of its ``row_index`` span (None without one)."""
    spans = row.iteration.get(ROW_INDEX_PHASE, ())
    return max(s.end_s for s in spans) if spans else None


def _storage(row: SpanRow, in_flight: float, sharers: float, direct: bool) -> dict[str, float]:
    """The direct reads of a span: ``num_requests`` reads of the span's rows, ``PAGE_BYTES`` more each."""
    reads = rules.span_arg(row, "num_requests")
    return {"storage_reads": reads, "storage_bytes": rules.span_arg(row, "local_bytes") + reads * PAGE_BYTES,
            "in_flight": in_flight, "sharers": sharers, "direct": float(direct)}


def _beside(row: SpanRow, work: dict[str, Any]) -> dict[str, Any]:
    """``work`` with what the loads the machine's other GPUs ran at the same time move on the resources it
    crosses (``row.peers``, processor sharing: :func:`~.calibration_rules.contended_bytes`): the storage device,
    the host memory's gathers and the copies' path. Until 2026-11-29 a load was priced alone: a trace predicted on 2
    machines x 2 GPUs reading from storage, calibrated on its own cluster, fitted PCIe 0.14x (the two GPUs' reads
    sharing the device taken for slow copies)."""
    if not row.peers:
        return work
    local = rules.span_arg(row, "local_bytes")
    if work.get("storage_bytes"):
        storage = rules.span_arg(row, "storage_bytes")
        work["peer_storage_bytes"] = rules.contended_bytes(row, storage, rules.arg_of("storage_bytes"))
    if work.get("gather_bytes"):
        work["peer_gather_bytes"] = rules.contended_bytes(row, local, rules.arg_of("local_bytes"))
    if work.get("copy_bytes"):
        work["peer_uplink_bytes"] = rules.contended_bytes(row, local, rules.arg_of("local_bytes"),
                                                          rules.same_uplink(row))
        work["peer_memory_bytes"] = rules.contended_bytes(row, local, rules.arg_of("local_bytes"))
    return work


def _load_work(row: SpanRow) -> dict[str, float]:
    """A ``load`` span's work (module docstring), beside the machine's other loads (:func:`_beside`)."""
    return _beside(row, _own_load_work(row))


def _own_load_work(row: SpanRow) -> dict[str, float]:
    """A ``load`` span's own work (module docstring)."""
    k, m = _knobs(row), rules.span_arg(row, "num_matrices") or 1.0
    hits, local = rules.span_arg(row, "hit_bytes"), rules.span_arg(row, "local_bytes")
    if _background(row):
        return {"copy_bytes": local, "copy_messages": m}
    work: dict[str, Any] = {"index_items": rules.span_arg(row, "num_requests") if k.loader == "baseline" else 0.0,
                            "device_gather_bytes": hits}
    if hits > 0:
        return work
    chunk, ssd = k.reshuffle == "chunk", rules.span_arg(row, "storage_bytes") > 0
    direct = ssd and chunk and row.shape.storage.gpudirect
    if ssd:
        work.update(_storage(row, float(IO_THREADS), 1.0, direct))
    elif not chunk:
        work["gather_bytes"] = local
    if not direct:
        runs = chunk and not ssd
        work.update(copy_bytes=local, copy_messages=rules.span_arg(row, "num_requests") if runs else m)
    return work


def _load_target_s(row: SpanRow) -> float:
    """The measured seconds of a ``load`` row: the span, or after DataLoader workers its part after the batch
    was ready."""
    ready = _ready_s(row) if _background(row) else None
    s = row.span
    return s.dur_s if ready is None else s.end_s - min(max(s.start_s, ready), s.end_s)


def _load_priced(row: SpanRow) -> bool:
    """Loads after DataLoader workers are priced only when the trace has their ``row_index`` spans."""
    return not _background(row) or _ready_s(row) is not None


def _row_index_work(row: SpanRow) -> dict[str, float]:
    """A ``row_index`` span's work: ``num_requests`` per-row index operations and, from storage, as many reads,
    one in flight in each of the :data:`BASELINE_WORKERS` workers."""
    work = {"index_items": rules.span_arg(row, "num_requests")}
    if rules.span_arg(row, "storage_bytes") > 0:
        work.update(_storage(row, 1.0, float(BASELINE_WORKERS), False))
    return work


def _iteration_gap_s(row: SpanRow) -> float:
    """The iteration's time not on its trainer phases: minus the load span, or for a double buffer minus the
    trainer's wait for the producer's load."""
    it, s = row.iteration, row.span
    out = s.dur_s - sum(x.dur_s for p in TRAINER_PHASES for x in it.get(p, ()))
    loads = it.get("load", ())
    if _knobs(row).loader != "double_buffer":
        return out - sum(x.dur_s for x in loads)
    if loads:
        out -= min(max(0.0, max(x.end_s for x in loads) - s.start_s), s.dur_s)
    return out


CALIBRATION: Mapping[str, PhaseRule] = {
    "load": PhaseRule("batch_load", _load_work, target=_load_target_s, when=_load_priced, peers=True),
    ROW_INDEX_PHASE: PhaseRule("batch_load", _row_index_work),
    **rules.compute_rules(),
    "iteration": PhaseRule("iteration_overhead", lambda row: {"steps": 1.0, "handoffs": 0.0},
                           target=_iteration_gap_s),
    "all_reduce": rules.all_reduce_rule(),
}
"""``ppgnn``'s phase -> priced operation (module docstring)."""
