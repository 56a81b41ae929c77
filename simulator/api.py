"""The simulator's entry points for the CLI and the tuner: simulate a configuration, parse ``--set`` knobs, write
the predicted timeline as a Chrome trace.

``simulate`` loads the graph statistics the strategy needs (measured once per dataset, fanouts, per-worker batch
size, cluster shape and partitioner, then cached on disk by :mod:`simulator.workload.graphstats`) and runs the
strategy's ``simulate(ctx, knobs)``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

import gnnplan.simulator as simulator
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.limits import check_seed
from gnnplan.simulator.plan import Plan, with_prediction
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies import get_strategy
from gnnplan.simulator.strategies.base import SimContext, batch_size_of
from gnnplan.simulator.strategies.contract import check_workload
from gnnplan.simulator.trace import write_trace
from gnnplan.simulator.workload import graphstats
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload

_NONE_WORDS = ("none", "null")


def coerce_knobs(strategy: str, knobs: Mapping[str, Any] | BaseModel | None) -> BaseModel:
    """Validate knobs as the strategy's ``Knobs`` model.

    Args:
        strategy: strategy name.
        knobs: a mapping (validated), an instance of the strategy's ``Knobs`` (validated again from what it holds
            unless this module or a loader validated it: ``model_copy(update=...)`` does not validate, and an edited
            ``sampler="zzz"`` was simulated, 2026-12-01; :func:`simulator.spec_checked.checked`) or None (defaults).

    Raises:
        SpecError: unknown strategy, unknown knob, or a value out of range (one line naming the allowed values).
    """
    from gnnplan.simulator.spec_checked import checked, mark_valid

    module = get_strategy(strategy)
    model: type[BaseModel] = module.Knobs
    if isinstance(knobs, model):
        return checked(knobs, lambda data: coerce_knobs(strategy, data))
    if knobs is not None and not isinstance(knobs, (Mapping, BaseModel)):
        raise SpecError(f"knobs: a mapping of knob names to values, e.g. {{'cache_fraction': 0.2}}, or None for "
                        f"the defaults (got {type(knobs).__name__})")
    data = dict(knobs.model_dump() if isinstance(knobs, BaseModel) else (knobs or {}))
    unknown = sorted(set(data) - set(model.model_fields))
    if unknown:
        raise SpecError(f"knobs: unknown knob {unknown[0]!r} for strategy {strategy}; allowed: "
                        f"{', '.join(model.model_fields)}")
    try:
        return mark_valid(model.model_validate(data))
    except ValidationError as exc:
        name = str(exc.errors()[0]["loc"][0])
        raise SpecError(f"knobs: {name}={data.get(name)!r} is invalid for strategy {strategy}; "
                        f"{name} must be {allowed_values(model, name)}") from None


def allowed_values(model: type[BaseModel], name: str) -> str:
    """A short description of what a knob accepts, from its JSON schema (e.g. ``a number in [0, 1]``)."""
    prop = model.model_json_schema()["properties"][name]
    options = prop.get("anyOf", [prop])
    words = []
    for opt in options:
        kind = opt.get("type")
        if "enum" in opt or "const" in opt:
            words.append("one of " + ", ".join(str(v) for v in opt.get("enum", [opt.get("const")])))
        elif kind in ("number", "integer"):
            noun = "an integer" if kind == "integer" else "a number"
            lo, hi = opt.get("minimum", opt.get("exclusiveMinimum")), opt.get("maximum", opt.get("exclusiveMaximum"))
            words.append(f"{noun} in [{lo}, {hi}]" if lo is not None and hi is not None else
                         f"{noun} >= {lo}" if lo is not None else f"{noun} <= {hi}" if hi is not None else noun)
        elif kind == "null":
            words.append("none")
        elif kind == "boolean":
            words.append("true or false")
        else:
            words.append(str(kind or "a value"))
    return " or ".join(words)


def parse_knobs(strategy: str, assignments: list[str]) -> dict[str, Any]:
    """Parse ``--set KNOB=VALUE`` strings into typed knob values (later assignments win).

    Args:
        strategy: strategy name.
        assignments: e.g. ``["cache_fraction=0.2", "partitioner=random"]``; ``none`` / ``null`` set an
            optional knob to None.

    Returns:
        ``{knob: value}`` for the knobs given, coerced by the strategy's ``Knobs`` model.

    Raises:
        SpecError: malformed assignment, unknown strategy or knob, or a bad value; one line naming the allowed
            knobs or values.
    """
    model: type[BaseModel] = get_strategy(strategy).Knobs
    raw: dict[str, Any] = {}
    for item in assignments:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SpecError(f"--set: {item!r} is not KNOB=VALUE")
        if name not in model.model_fields:
            raise SpecError(f"--set: unknown knob {name!r} for strategy {strategy}; allowed: "
                            f"{', '.join(model.model_fields)}")
        raw[name] = _knob_value(model, name, value.strip())
    out = {}
    for name, value in raw.items():
        try:
            out[name] = getattr(model.model_validate({name: value}), name)
        except ValidationError:
            raise SpecError(f"--set {name}={value if value is not None else 'none'}: {name} must be "
                            f"{allowed_values(model, name)}") from None
    return out


def _knob_value(model: type[BaseModel], name: str, text: str) -> Any:
    """The raw value of ``--set NAME=TEXT``: None for a none word where the knob admits None (a knob whose value
    is the word itself, hongtu's ``dedup=none``, keeps it); for a knob whose name gives a unit (``*_bytes``,
    ``*_s``: :func:`~gnnplan.simulator.units_parse.kind_of`) a value with a unit in base units (``1GB``); else the
    text, for the model to coerce."""
    from gnnplan.simulator.units_parse import kind_of, parse_field_value

    if text.lower() in _NONE_WORDS:
        try:
            model.model_validate({name: None})
            return None
        except ValidationError:
            return text
    if kind_of(name) != "number" and text and not text[-1].isdigit():
        try:
            return parse_field_value(f"--set {name}", text)
        except SpecError:
            return text  # not a quantity: the model's message names what the knob accepts
    return text


def load_context(cluster: str | Path | ClusterSpec, workload: str | Path | WorkloadSpec, strategy: str,
                 knobs: Mapping[str, Any] | BaseModel | None = None, *,
                 stats_seed: int = 0) -> tuple[ModuleType, BaseModel, SimContext]:
    """Resolve everything a simulation needs, measuring (or reading cached) graph statistics.

    Mini-batch sampling statistics are measured only for strategies that use them (``NEEDS_SAMPLE_STATS``; a
    plug-in without them gets ``stats=None`` and measures what it needs), on the batches of the strategy's
    ``partitioner`` and ``seed_split`` knobs if it has them (else ``metis`` and ``owner``).

    Returns:
        (strategy module, validated knobs, context).

    Raises:
        SpecError: unknown preset or strategy, bad knobs, a workload the strategy does not support, or a
            batch smaller than the number of workers.
    """
    cl, wl = load_cluster(cluster), load_workload(workload)
    check_seed("stats_seed", stats_seed)
    module = get_strategy(strategy)
    kn = coerce_knobs(strategy, knobs)
    check_workload(module, wl)
    batch = batch_size_of(kn, wl)
    if batch < cl.num_gpus:
        field = "knobs: batch_size" if getattr(kn, "batch_size", None) is not None else "training.batch_size"
        raise SpecError(f"{field}: {batch} is smaller than the {cl.num_gpus} workers of cluster {cl.name}; use at "
                        f"least {cl.num_gpus}")
    summary = graphstats.dataset_summary(wl.dataset)
    stats = None
    if module.NEEDS_SAMPLE_STATS:
        stats = graphstats.sample_stats(wl.dataset, tuple(wl.training.fanouts), batch // cl.num_gpus,
                                        cl.num_machines, cl.gpus_per_machine, getattr(kn, "partitioner", "metis"),
                                        seed=stats_seed, seed_split=getattr(kn, "seed_split", "owner"))
    return module, kn, SimContext(cl, wl, stats, summary, batch, seed=stats_seed, estimated=_estimated(wl, module))


def _estimated(workload: WorkloadSpec, module: ModuleType) -> dict[str, Any] | None:
    """For a dataset card, which statistics are estimated on its proxy and how
    (:mod:`simulator.workload.proxy_estimated`); None for a real or generated graph."""
    from gnnplan.simulator.workload import proxy_estimated

    return proxy_estimated.for_dataset(workload.dataset, proxy_estimated.strategy_statistics(
        module.NAME, module.NEEDS_SAMPLE_STATS))


def simulate(cluster: str | Path | ClusterSpec, workload: str | Path | WorkloadSpec | Mapping[str, Any],
             strategy: str, knobs: Mapping[str, Any] | BaseModel | None = None, *, stats_seed: int = 0,
             cluster_set: Sequence[str] = ()) -> SimResult:
    """Simulate one epoch of ``strategy`` with ``knobs`` on ``cluster`` for ``workload``.

    Args:
        cluster: preset name, YAML path or spec (one edited with ``model_copy`` is validated again).
        workload: preset name, YAML path, spec, or a mapping of its fields (as in its YAML).
        strategy: strategy name (``dp``, ...).
        knobs: knob values (mapping or the strategy's ``Knobs``); missing ones take their defaults.
        stats_seed: seed of the sampled batches the graph statistics are measured on.
        cluster_set: ``FIELD=VALUE`` changes to the cluster, unit-aware, as ``--cluster-set``
            (``["network.bandwidth_bytes_per_s=25Gbit/s", "nvlink=none"]``; :func:`simulator.overrides.with_fields`).

    Returns:
        The result; ``sim_wall_s`` is the wall time of this call (statistics from cache + simulation); its
        ``notes`` are the strategy's (hopgnn's merge controller: the step count it settled on) and say when the
        batch is larger than the training set and what an epoch then is
        (:func:`simulator.strategies.base.oversized_batch_note`) and when a card's per-batch counts come from a
        proxy too small for the batch (:func:`simulator.workload.proxy_batch.saturation_note`), as ``gnnplan
        simulate`` prints them.

    Raises:
        SpecError: see :func:`load_context`.
    """
    from gnnplan.simulator.strategies.base import oversized_batch_note

    started = time.perf_counter()
    module, kn, ctx = load_context(with_cluster_set(cluster, cluster_set), workload, strategy, knobs,
                                   stats_seed=stats_seed)
    result = simulate_in_context(module, kn, ctx)
    notes = (oversized_batch_note(ctx.workload, ctx.cluster.num_gpus, result.knobs, ctx.summary.num_train),
             _saturation_note(module, ctx))
    result.notes = [*result.notes, *(n for n in notes if n)]
    result.sim_wall_s = time.perf_counter() - started
    return result


def _saturation_note(module: ModuleType, ctx: SimContext) -> str | None:
    """:func:`simulator.workload.proxy_batch.saturation_note` for a strategy that samples neighbourhoods (a
    mini-batch workload of a message-passing model): each worker's batch, or with no per-worker statistics
    (``gsplit``) the whole batch its machine samples."""
    from gnnplan.simulator.workload.proxy_batch import saturation_note
    from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS

    wl = ctx.workload
    if wl.training.mode != "mini-batch" or wl.model.arch not in MESSAGE_PASSING_ARCHS:
        return None
    batch = ctx.batch_size // ctx.num_workers if module.NEEDS_SAMPLE_STATS else ctx.batch_size
    return saturation_note(wl.dataset, wl.training.fanouts, max(1, batch))


def simulate_on_draws(cluster: str | Path | ClusterSpec, workload: str | Path | WorkloadSpec, strategy: str,
                      knobs: Mapping[str, Any] | BaseModel | None, refs: Sequence[str],
                      cluster_set: Sequence[str] = ()) -> list[SimResult]:
    """:func:`simulate` of the same configuration with ``workload.dataset`` set to each of ``refs`` in turn: the
    proxy draws of a dataset card (:func:`simulator.workload.proxy_draws.draw_refs`), whose statistics are each one
    random draw, so the spread of the results is how much of a prediction is the draw's (``cluster_set``: as
    :func:`simulate`'s).

    Raises:
        SpecError: see :func:`load_context`; a reference that names no dataset; ``refs`` empty or not strings (a
            lone string is one reference).
    """
    from gnnplan.simulator.overrides import with_fields

    spec = load_workload(workload)
    return [simulate(cluster, with_fields(spec, [f"dataset={ref}"], "workload.dataset"), strategy, knobs,
                     cluster_set=cluster_set) for ref in text_list("refs", refs)]


def with_cluster_set(cluster: str | Path | ClusterSpec, cluster_set: Sequence[str]) -> ClusterSpec:
    """``cluster`` loaded (:func:`~simulator.hardware.spec.load_cluster`) with the API's ``cluster_set`` changes
    applied, ``FIELD=VALUE`` unit-aware as ``--cluster-set`` (:func:`simulator.overrides.with_fields`); as loaded
    when there are none.

    Raises:
        SpecError: the cluster does not load; ``cluster_set`` is not a string or strings, or a change names no
            field or a value its field cannot take (naming ``cluster_set``).
    """
    from gnnplan.simulator.overrides import with_fields

    spec = load_cluster(cluster)
    return with_fields(spec, text_list("cluster_set", cluster_set), "cluster_set") if cluster_set else spec


def text_list(name: str, value: Any) -> list[str]:
    """One string or a sequence of strings (or paths) as a list; a lone string is one item, not its characters.

    Raises:
        SpecError: an empty sequence, or items that are not strings or paths, naming ``name``.
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not items or not all(isinstance(v, str) or hasattr(v, "__fspath__")
                                                               for v in items):
        raise SpecError(f"{name}: one or more strings (got {value!r})")
    return [str(v) for v in items]


def simulate_in_context(module: ModuleType, knobs: BaseModel, ctx: SimContext) -> SimResult:
    """The strategy plug-in ``module``'s simulation on a context :func:`load_context` built, with the context's
    ``estimated`` note unless the strategy set a fuller one (gsplit and hopgnn say how they used a card's
    estimates) and its ``nested_phases`` (from the plug-in's ``CALIBRATION``); ``sim_wall_s`` is left to the
    caller."""
    from gnnplan.simulator.hardware.phase_rules import nested_phases

    result: SimResult = module.simulate(ctx, knobs)
    if result.estimated is None:
        result.estimated = ctx.estimated
    result.nested_phases = {inner: outer for inner, outer in nested_phases(getattr(module, "CALIBRATION", {})).items()
                            if inner in result.breakdown_s and outer in result.breakdown_s}
    return result


def trace_metadata(cluster: str | Path | ClusterSpec, workload: str | Path | WorkloadSpec, strategy: str,
                   result: SimResult) -> dict[str, Any]:
    """Metadata of a predicted trace, shaped like the executor's: ``plan`` (a :class:`~simulator.plan.Plan`
    dict), ``results`` (predicted ``epoch_time_s`` / ``epoch_times_s``), ``prediction`` (the JSON result),
    ``source`` = ``"simulator"`` and ``versions``."""
    cl, wl = load_cluster(cluster), load_workload(workload)
    plan = with_prediction(Plan(strategy=strategy, knobs=result.knobs, num_workers=cl.num_gpus, cluster=cl,
                                workload=wl), result.to_json_dict())
    return {"plan": plan.model_dump(mode="json"), "source": "simulator",
            "results": {"epoch_time_s": result.epoch_time_s, "epoch_times_s": [result.epoch_time_s]},
            "prediction": result.to_json_dict(), "versions": {"gnnplan": simulator.__version__}}


def predicted_trace(result: SimResult, path: str | Path, metadata: Mapping[str, Any] | None = None) -> Path:
    """Write a simulation's predicted timeline as a Chrome trace (same format as the executor's).

    Args:
        result: a simulation result (its ``spans``).
        path: output file (written atomically).
        metadata: extra metadata (e.g. :func:`trace_metadata`); ``strategy``, ``knobs`` and ``prediction``
            are added when missing.

    Returns:
        The path written.
    """
    meta = {"strategy": result.strategy, "knobs": result.knobs, "prediction": result.to_json_dict(),
            **dict(metadata or {})}
    return write_trace(path, result.spans, meta)
