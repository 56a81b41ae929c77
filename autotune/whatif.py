"""``gnnplan whatif``: sweep cluster or workload fields; at every point tune every allowed strategy.

A sweep is one or more axes (``--vary FIELD=V1,V2,...``); several axes make a grid (every combination). FIELD is

* ``cluster`` or ``workload``: the values are presets or YAML files;
* a cluster field path, bare or prefixed (``network.bandwidth_bytes_per_s``, ``cluster.gpu.memory_bytes``), or
  a workload field path prefixed with ``workload.`` (``workload.model.hidden_dim``) or starting with one of the
  workload's top-level fields (``training.batch_size``); values are unit-aware (:mod:`gnnplan.simulator.overrides`).

At every point each candidate the tuner may choose (:func:`gnnplan.autotune.candidates.candidates`: the
strategies that run the workload as given, and model swaps when allowed) gets a small in-memory Optuna study
over its knobs, warm-started by enqueueing that candidate's best parameters at the previous point (neighbouring
points mostly share their best knobs, so a few trials suffice). The point's winner is the candidate with the
smallest simulated epoch time; its speedup is the runner-up's time over its own; a crossover is a pair of
neighbouring points (one axis step apart) with different winners.

A card's statistics are estimated on its synthetic proxy (:mod:`gnnplan.simulator.workload.proxy`): a card smaller
than one proxy's 10^5 vertices on the medoid of several draws (:mod:`gnnplan.simulator.workload.proxy_pool`), a
larger one on one draw, ``card:<name>@K`` on draw K; :attr:`WhatifResult.card_statistics` says which. With
``proxy_draws`` R > 1 every point whose dataset is a card also simulates each candidate's tuned configuration on
single draws (K + 1, ..., K + R - 1 after draw K; draws 0, ..., R - 1 for a pooled card, whose tuned prediction is
none of its draws'; the knobs stay those tuned) and says how many of the R draws the point's winner wins: how much
of the answer is the draw's.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from gnnplan.autotune.candidates import Candidate, candidates
from gnnplan.autotune.draws import draw_winner, on_draws
from gnnplan.autotune.study import TuneRequest, objective, validate_request
from gnnplan.autotune.trial_cache import TrialCache
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.peak_rates import peak_rates_caveat
from gnnplan.simulator.hardware.spec import ClusterSpec, load_cluster
from gnnplan.simulator.overrides import coerce_text, leaf_annotation, split_assignment, with_fields
from gnnplan.simulator.strategies.base import oversized_batch_note
from gnnplan.simulator.units_parse import kind_of
from gnnplan.simulator.workload.datasets import resolve_dataset
from gnnplan.simulator.workload.proxy import proxy_draw
from gnnplan.simulator.workload.proxy_draws import no_draws_error, redrawn, requested_draws
from gnnplan.simulator.workload.proxy_estimated import community_caveat, for_dataset
from gnnplan.simulator.workload.spec import WorkloadSpec, load_workload

OPTION = "--vary"
TIE_FRACTION = 0.01
"""A candidate whose tuned epoch time is within this fraction of the winner's is tied with it: the point does not
tell them apart, and a change of winner between them is no crossover (:func:`crossovers`). Each is the best of a
small study (:data:`DEFAULT_TRIALS` trials), which lands near, not on, its strategy's optimum: measured by
benchmarks/bench_whatif_tuning.py (2026-12-01; 13 (point, strategy) pairs of two Cora sweeps against a 128-trial study
each), at 16 trials at most 0.17% off (90th percentile 0.10%), at 8 trials up to 12% (90th percentile 3.2%), at 4
up to 14%, where one point of 5 changed winner. Studies of fewer trials than the default can be further apart than
this margin (:func:`few_trials_note`)."""
DEFAULT_TRIALS = 16
"""Trials per (point, candidate): a small study, enough with a warm start for the few knobs of one strategy."""


@dataclass(frozen=True)
class Axis:
    """One varied field.

    Attributes:
        field: as the user wrote it (``network.bandwidth_bytes_per_s``, ``cluster``, ``workload.model.hidden_dim``).
        target: ``cluster`` or ``workload`` (the spec it changes).
        path: the dotted path inside the target; empty when the values are presets.
        labels: the values as written (``1Gbit/s``).
        values: the values in SI base units for a number field, else the labels.
    """

    field: str
    target: str
    path: str
    labels: tuple[str, ...]
    values: tuple[Any, ...]

    @property
    def numeric(self) -> bool:
        """Whether every value is a number (the chart then uses a numeric x axis)."""
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.values)

    @property
    def kind(self) -> str:
        """The unit kind of the field (``bandwidth``, ``time``, ...; ``preset`` for presets)."""
        return kind_of(self.path) if self.path else "preset"


def split_values(text: str) -> list[str]:
    """Split ``V1,V2,...`` at commas outside brackets and braces (``[10,10],[15,10]`` is two values)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def _target(path: str) -> tuple[str, str]:
    """(target, path inside it) of a ``--vary`` field (module docstring)."""
    head, _, rest = path.partition(".")
    if head in ("cluster", "workload"):
        return head, rest
    if head in ClusterSpec.model_fields:
        return "cluster", path
    if head in WorkloadSpec.model_fields:
        return "workload", path
    listed = [f for f in ClusterSpec.model_fields if f not in ("sources", "priors")]  # bookkeeping, not hardware
    raise SpecError(f"{OPTION}: unknown field {path!r}; use cluster, workload, a cluster field "
                    f"({', '.join(listed)}) or workload.<field> ({', '.join(WorkloadSpec.model_fields)})")


def parse_axis(item: str) -> Axis:
    """Read one ``--vary FIELD=V1,V2,...``.

    Raises:
        SpecError: malformed, an unknown field, an empty or repeated value (as written or as read: 10Gbit/s
            and 1.25GB/s), or a value that cannot be read (one line naming the field).
    """
    fld, text = split_assignment(item, OPTION)
    target, path = _target(fld)
    labels = split_values(text)
    if any(not label for label in labels):
        raise SpecError(f"{OPTION} {fld}: empty value in {text!r}; write V1,V2,...")
    if len(set(labels)) != len(labels):
        raise SpecError(f"{OPTION} {fld}: a value is repeated in {text!r}")
    if not path:  # whole specs: two spellings of one file are one point (c.yaml and ./c.yaml)
        twice = _first_repeat(labels, [str(Path(x).resolve()) if Path(x).is_file() else x for x in labels])
        if twice is not None:
            raise SpecError(f"{OPTION} {fld}: {twice[0]!r} and {twice[1]!r} are the same file")
        return Axis(fld, target, "", tuple(labels), tuple(labels))
    cls = ClusterSpec if target == "cluster" else WorkloadSpec
    annotation = leaf_annotation(cls, path, f"{OPTION} {target}")
    try:
        values = tuple(coerce_text(annotation, path, label) for label in labels)
    except SpecError as exc:
        raise SpecError(f"{OPTION}: {exc}") from None
    same = _first_repeat(labels, values)
    if same is not None:  # 10Gbit/s and 1.25GB/s are one point
        raise SpecError(f"{OPTION} {fld}: {same[0]!r} and {same[1]!r} are the same value")
    return Axis(fld, target, path, tuple(labels), values)


def _first_repeat(labels: Sequence[str], keys: Sequence[Any]) -> tuple[str, str] | None:
    """The labels of the first two positions whose ``keys`` are equal (what they read as), or None."""
    return next(((labels[i], labels[j]) for i in range(len(keys)) for j in range(i + 1, len(keys))
                 if keys[i] == keys[j]), None)


def parse_axes(items: Sequence[str]) -> list[Axis]:
    """Every ``--vary`` (:func:`parse_axis`), each field at most once.

    Raises:
        SpecError: as :func:`parse_axis`, or a field varied twice.
    """
    axes = [parse_axis(item) for item in items]
    fields = [a.field for a in axes]
    if len(set(fields)) != len(fields):
        raise SpecError(f"{OPTION}: field {next(f for f in fields if fields.count(f) > 1)!r} is varied twice")
    return axes


@dataclass(frozen=True)
class Point:
    """One grid point: an index per axis, the labels, and the cluster and workload there."""

    index: tuple[int, ...]
    labels: tuple[str, ...]
    cluster: ClusterSpec
    workload: WorkloadSpec


def grid(cluster: str, workload: str, axes: Sequence[Axis], cluster_sets: Sequence[str] = ()) -> list[Point]:
    """Every combination of the axes' values (the first axis varies slowest).

    ``cluster_sets`` (``--cluster-set``) apply to every point, after a varied preset is loaded and before the
    varied cluster fields.

    Raises:
        SpecError: an unknown preset or dataset, a cluster field both varied and set by ``cluster_sets``, or a
            combination that fails validation (naming the field).
    """
    fixed = {split_assignment(item, "--cluster-set")[0] for item in cluster_sets}
    both = next((a.field for a in axes if a.target == "cluster" and a.path and a.path in fixed), None)
    if both is not None:  # --vary would overwrite --cluster-set at every point
        raise SpecError(f"{OPTION}: {both} is also set by --cluster-set; vary it or set it, not both")
    points = []
    for index in itertools.product(*(range(len(a.labels)) for a in axes)):
        cl_ref, wl_ref = cluster, workload
        cl_sets, wl_sets = list[str](), list[str]()  # the axes' changes; --cluster-set's are applied first
        for axis, i in zip(axes, index):
            label = axis.labels[i]
            if axis.target == "cluster" and not axis.path:
                cl_ref = label
            elif axis.target == "workload" and not axis.path:
                wl_ref = label
            else:
                (cl_sets if axis.target == "cluster" else wl_sets).append(f"{axis.path}={label}")
        cl = with_fields(with_fields(load_cluster(cl_ref), list(cluster_sets), "--cluster-set"), cl_sets, OPTION)
        try:
            wl = with_fields(load_workload(wl_ref), wl_sets, OPTION)
        except SpecError as exc:
            depth = {"model.num_layers", "training.fanouts"} & {a.path for a in axes if a.target == "workload"}
            if depth and "fanout" in str(exc):  # the two fields go together: one axis of whole workloads
                raise SpecError(f"{exc} (a mini-batch model's depth and its fanouts change together: vary whole "
                                f"workloads, {OPTION} workload=a.yaml,b.yaml)") from None
            raise
        resolve_dataset(wl.dataset)  # an unknown dataset or card draw stops the sweep before any point is tuned
        points.append(Point(index, tuple(a.labels[i] for a, i in zip(axes, index)), cl, wl))
    return points


@dataclass
class WhatifRequest:
    """A sweep: base cluster and workload (preset or YAML), axes, and the per-point study budget."""

    cluster: str
    workload: str
    axes: list[Axis]
    strategies: list[str] | None = None
    trials: int = DEFAULT_TRIALS
    seed: int = 0
    allow_model_change: bool = False
    cluster_sets: list[str] = field(default_factory=list)
    proxy_draws: int = 1


@dataclass
class WhatifResult:
    """Rows (one per point and candidate), the per-point summary, the crossovers, per dataset card of the sweep
    whose proxy has no block model what its communities are and do
    (:func:`gnnplan.simulator.workload.proxy_estimated.community_caveat`), and per dataset card of the sweep the
    ``estimated`` record of its statistics without the per-strategy list (the proxy, its draw or pooled draws:
    :func:`gnnplan.simulator.workload.proxy_estimated.for_dataset`), and a sentence per cluster of the sweep
    priced at datasheet peaks (:func:`gnnplan.simulator.hardware.peak_rates.peak_rates_caveat`), and notes on
    points that may not be what was meant (a batch larger than the training set:
    :func:`gnnplan.simulator.strategies.base.oversized_batch_note`), each with the points it applies to."""

    axes: list[Axis]
    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    crossovers: list[dict[str, Any]]
    card_communities: dict[str, str] = field(default_factory=dict)
    card_statistics: dict[str, dict[str, Any]] = field(default_factory=dict)
    peak_rates: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def tune_candidate(point: Point, cand: Candidate, trials: int, seed: int,
                   warm: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A small in-memory study of one candidate's knobs at one point, its first trials the previous point's best
    (``warm``) and the defaults (:meth:`Candidate.default_params`).

    Returns:
        (row fields: feasible, epoch_time_s, iteration_time_s, knobs, reason, num_trials, bytes_per_epoch
        {pcie, nvlink, network, storage} and peak_memory_bytes {gpu, host} as ``simulate`` gives them; the best trial's
        parameters to warm-start the next point, None when no trial was feasible).
    """
    req = TuneRequest(point.cluster, cand.workload, (cand.strategy,), trials, seed=seed,
                      allow_model_change=cand.model_changed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                             n_startup_trials=max(1, trials // 3))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    for first in (warm, cand.default_params()):
        if first:
            study.enqueue_trial(first, skip_if_exists=True)
    cache = TrialCache()  # a repeated configuration is not simulated again; one context per batch/partitioner
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial's error reaches the caller as one line
    try:
        study.optimize(lambda t: objective(req, t, {cand.label: cand}, cache), n_trials=trials, catch=())
    finally:
        optuna.logging.set_verbosity(level)
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    try:
        best = study.best_trial
        params: dict[str, Any] | None = dict(best.params)
    except ValueError:  # no feasible trial: report the one closest to fitting
        best = min(done, key=lambda t: max(t.constraints.values(), default=math.inf))
        params = None
    res = best.user_attrs["result"]
    return {"feasible": bool(res["feasible"]), "epoch_time_s": res["epoch_time_s"] if res["feasible"] else None,
            "iteration_time_s": res["iteration_time_s"], "knobs": res["knobs"], "reason": res["reason"],
            "num_trials": len(done), "bytes_per_epoch": dict(res.get("bytes_per_epoch") or {}),
            "peak_memory_bytes": dict(res.get("peak_memory_bytes") or {})}, params


def run_whatif(req: WhatifRequest, say: Callable[[str], None] | None = None) -> WhatifResult:
    """Run the sweep.

    Args:
        req: the sweep.
        say: progress callback (one line per point), or None.

    Raises:
        SpecError: bad axes, presets, fields or strategies; ``proxy_draws`` below 1, or above 1 with no point
            whose dataset is a card.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    points = grid(req.cluster, req.workload, req.axes, req.cluster_sets)
    draws = [requested_draws(p.workload.dataset, req.proxy_draws, card_required=False) for p in points]
    if req.proxy_draws > 1 and not any(draws):
        raise no_draws_error(points[0].workload.dataset)
    chosen = [validated_candidates(req, point) for point in points]
    rows: list[dict[str, Any]] = []
    warm: dict[str, dict[str, Any] | None] = {}
    for n, (point, refs, cands) in enumerate(zip(points, draws, chosen), 1):
        todo = redrawn(point.workload.dataset, refs) if refs else []  # all of them when the card is pooled
        if say is not None:
            say(f"point {n}/{len(points)}: {_point_text(req.axes, point)}: tuning {', '.join(c.label for c in cands)}"
                + (f", then each best configuration on {len(todo)} single proxy draws" if todo else ""))
        for cand in cands:
            found, warm[cand.label] = tune_candidate(point, cand, req.trials, req.seed, warm.get(cand.label))
            if refs:
                if say is not None and todo:  # a draw's first statistics take minutes on a big card
                    say(f"  {cand.label}: tuned; simulating its best on proxy draws {proxy_draw(todo[0])}-"
                        f"{proxy_draw(todo[-1])}")
                found.update(on_draws(point.cluster, cand.workload, cand.strategy, found, refs))
            rows.append({"point": n - 1, "index": point.index, "labels": dict(zip(_fields(req.axes), point.labels)),
                         "cluster": point.cluster.name, "strategy": cand.label, "model": cand.workload.model.arch,
                         **found})
    summary = summarize(rows, points)
    caveats = {str(p.workload.dataset): community_caveat(p.workload.dataset) for p in points}
    estimates = {str(p.workload.dataset): for_dataset(p.workload.dataset, {}) for p in points}
    distinct = {p.cluster.model_dump_json(): p.cluster for p in points}.values()  # a caveat reads every preset
    peaks = [line for line in dict.fromkeys(peak_rates_caveat(c) for c in distinct) if line]
    return WhatifResult(req.axes, rows, summary, crossovers(summary), {k: v for k, v in caveats.items() if v},
                        {k: v for k, v in estimates.items() if v}, peaks,
                        [n for n in (few_trials_note(req.trials),) if n] + point_notes(req.axes, points))


def few_trials_note(trials: int) -> str | None:
    """A note when the sweep tunes each candidate with fewer trials than :data:`DEFAULT_TRIALS`, else None."""
    if trials >= DEFAULT_TRIALS:
        return None
    return (f"{trials} trials per point and strategy: a strategy's best can then be several percent off its optimum "
            f"(up to 12-14% at 4-8 trials, 0.17% at {DEFAULT_TRIALS}: benchmarks/bench_whatif_tuning.py), more than "
            f"the {TIE_FRACTION:.0%} that counts as a tie; close winners may be the search's, not the strategies'")


def point_notes(axes: Sequence[Axis], points: Sequence[Point]) -> list[str]:
    """Each distinct note on the points' workloads (:func:`~gnnplan.simulator.strategies.base.oversized_batch_note`)
    with the points it applies to."""
    found: dict[str, list[str]] = {}
    for point in points:
        note = oversized_batch_note(point.workload, point.cluster.num_gpus)
        if note:
            found.setdefault(note, []).append(_point_text(axes, point) or "every point")
    return [f"at {'; '.join(where)}: {note}" for note, where in found.items()]


def validated_candidates(req: WhatifRequest, point: Point) -> list[Candidate]:
    """The candidates of ``point``, each checked as ``gnnplan tune`` checks its request
    (:func:`gnnplan.autotune.study.validate_request`: workload support, batch size against the workers, the dataset
    loads). :func:`run_whatif` checks every point before it tunes any, so bad input anywhere in the grid stops the
    sweep at once with one line, not a failed trial after hours of tuning.

    Raises:
        SpecError: the first problem, one line.
    """
    cands = candidates(point.workload, req.strategies, req.allow_model_change)
    for cand in cands:
        validate_request(TuneRequest(point.cluster, cand.workload, (cand.strategy,), req.trials, seed=req.seed,
                                     allow_model_change=cand.model_changed))
    return cands


def _fields(axes: Sequence[Axis]) -> list[str]:
    return [a.field for a in axes]


def _point_text(axes: Sequence[Axis], point: Point) -> str:
    return ", ".join(f"{a.field}={label}" for a, label in zip(axes, point.labels))


def summarize(rows: Sequence[dict[str, Any]], points: Sequence[Point]) -> list[dict[str, Any]]:
    """Per point: winner, its epoch time, runner-up and the winner's speedup over it (None without one), the
    candidates tied with the winner (``tied``: within :data:`TIE_FRACTION` of its epoch time, fastest first); where
    the rows were simulated on several proxy draws (:func:`autotune.draws.on_draws`), also ``draw_winners`` (the fastest
    candidate on each draw, None where none fits) and ``winner_draws`` (on how many of them the point's winner,
    chosen on the first draw, is the fastest)."""
    out = []
    for n, point in enumerate(points):
        mine = [r for r in rows if r["point"] == n]
        ranked = sorted((r for r in mine if r["feasible"]), key=lambda r: r["epoch_time_s"])
        win = ranked[0] if ranked else None
        second = ranked[1] if len(ranked) > 1 else None
        entry = {"point": n, "index": point.index, "labels": point.labels,
                 "winner": win["strategy"] if win else None,
                 "winner_epoch_time_s": win["epoch_time_s"] if win else None,
                 "runner_up": second["strategy"] if second else None,
                 "runner_up_epoch_time_s": second["epoch_time_s"] if second else None,
                 "speedup": second["epoch_time_s"] / win["epoch_time_s"] if win and second else None,
                 "tied": [r["strategy"] for r in ranked[1:]
                          if win and r["epoch_time_s"] <= win["epoch_time_s"] * (1.0 + TIE_FRACTION)]}
        if mine and "epoch_time_draws_s" in mine[0]:
            winners = [draw_winner(mine, d) for d in range(len(mine[0]["epoch_time_draws_s"]))]
            entry.update(draw_winners=winners, winner_draws=sum(w is not None and w == entry["winner"]
                                                                for w in winners))
        out.append(entry)
    return out


def crossovers(summary: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of neighbouring points (one step apart along one axis) whose winners differ, but not where either
    point has the other's winner tied with its own (``tied``, :func:`summarize`): a tie is no change of winner.

    Returns:
        ``[{axis, from_point, to_point, from_winner, to_winner}]`` (axis = its position), in grid order.
    """
    by_index = {tuple(s["index"]): s for s in summary}
    out = []
    for s in summary:
        for axis in range(len(s["index"])):
            nxt = list(s["index"])
            nxt[axis] += 1
            other = by_index.get(tuple(nxt))
            if other is not None and s["winner"] != other["winner"] and s["winner"] not in other.get("tied", ()) \
                    and other["winner"] not in s.get("tied", ()):
                out.append({"axis": axis, "from_point": s["point"], "to_point": other["point"],
                            "from_winner": s["winner"], "to_winner": other["winner"]})
    return out
