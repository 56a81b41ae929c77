"""A tuned configuration simulated again on further draws of a dataset card's proxy (``--proxy-draws`` of
``gnnplan tune`` and ``gnnplan whatif``): a card's statistics are one random draw of its synthetic proxy
(:mod:`gnnplan.simulator.workload.proxy`), so the spread over draws is how much of a prediction is the draw's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gnnplan.simulator.api import simulate_on_draws
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.workload.proxy import proxy_draw
from gnnplan.simulator.workload.proxy_draws import redrawn
from gnnplan.simulator.workload.spec import WorkloadSpec


def draws_record(refs: Sequence[str], results: Sequence[Any]) -> dict[str, Any]:
    """``simulate --json``'s ``proxy_draws``: the draw numbers of the card references ``refs`` and the epoch time
    (s) simulated on each (``results``, :class:`simulator.result.SimResult`; None where it does not fit)."""
    return {"draws": [proxy_draw(ref) for ref in refs], "epoch_time_s": [fitting_time(r) for r in results]}


def fitting_time(res: Any) -> float | None:
    """A simulation's epoch time (s), None where the configuration does not fit."""
    return res.epoch_time_s if res.feasible else None


def on_draws(cluster: ClusterSpec, workload: WorkloadSpec, strategy: str, found: dict[str, Any],
             refs: Sequence[str]) -> dict[str, Any]:
    """A tuned configuration (``found``: ``feasible``, ``epoch_time_s`` and ``knobs``, as tuned on
    ``workload.dataset``, the draw ``refs[0]``) simulated again, same knobs, on the other proxy draws ``refs[1:]``
    (:func:`simulator.workload.proxy_draws.draw_refs`); on every draw of ``refs`` when the dataset's statistics are
    pooled over draws (:func:`simulator.workload.proxy_draws.redrawn`: the tuned prediction is none of them).

    Returns:
        ``proxy_draws`` (the R draw numbers), ``epoch_time_draws_s`` (R epoch times in s, the first the tuned one
        unless pooled; None where the configuration does not fit) and their ``epoch_time_min_s`` /
        ``epoch_time_max_s`` (None when it fits on no draw).
    """
    todo = redrawn(workload.dataset, list(refs))
    times: list[float | None] = [] if len(todo) == len(refs) else [
        found["epoch_time_s"] if found["feasible"] else None]
    if found["feasible"]:  # what does not fit where it was tuned is not simulated on the draws
        again = simulate_on_draws(cluster, workload, strategy, found["knobs"], todo)
        times += [fitting_time(res) for res in again]
    else:
        times += [None] * len(todo)
    fits = [t for t in times if t is not None]
    return {"proxy_draws": [proxy_draw(ref) for ref in refs], "epoch_time_draws_s": times,
            "epoch_time_min_s": min(fits) if fits else None, "epoch_time_max_s": max(fits) if fits else None}


def draw_winner(rows: Sequence[dict[str, Any]], draw: int, name: str = "strategy") -> Any:
    """The ``name`` field (``strategy``; ``rank`` for tune's rows) of the row with the smallest epoch time on
    proxy draw number ``draw`` (position in ``epoch_time_draws_s``; ties to the smaller ``name``), None when none
    fits there."""
    fits = [(r["epoch_time_draws_s"][draw], r[name]) for r in rows if r["epoch_time_draws_s"][draw] is not None]
    return min(fits)[1] if fits else None
