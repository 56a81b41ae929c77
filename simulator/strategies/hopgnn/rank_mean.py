"""The per-rank mean of a dataset card's micrograph statistics: every worker hosts the mean micrograph group at
each time step, so ``hopgnn`` runs the representative-machine fast path (:mod:`gnnplan.simulator.symmetry`)
instead of every rank.

Why it is allowed for a card, and only there: a card's micrograph statistics are measured on one synthetic proxy
(:mod:`gnnplan.simulator.workload.proxy`): one random degree-matched graph, one METIS (or random) partition of
it, one draw of seeds and samples per iteration. Which worker hosts the larger group at a step, or pre-gathers
more rows, is an artefact of that draw; the real graph's partition would put it elsewhere. Only
distribution-level quantities carry over from proxy to card, so the simulator keeps the per-rank mean (what a
worker does on average at the k-th step) and drops the per-rank pattern. Measured statistics of a real graph
are simulated in full, worker by worker.

What is averaged, for every step count S (:class:`~.micrographs.MicrographStats`, index ``[S-1][w][k]``): over
the hosts w, the seeds of the group at step k, its block sizes (sources, destinations, edges per layer), its
local and remote input vertices, and each worker's pre-gathered remote and local rows. The schedule is then
the same on every machine (model d visits the machines in ring order; a pull takes equal shares from every
other machine; a migration goes to the next machine), so shifting machines maps it onto itself.

Totals over workers (seeds, sampled edges, input rows per step, pre-gathered rows, hence the bytes per link) are
unchanged; what is lost is the largest group's lead at every step's barrier (paper §5.1, the idle slots of
unbalanced groups) and the busiest pre-gather's, so the predicted epoch is shorter than the full simulation of the
proxy's per-rank statistics: by 8-12 % on ``ogbn-papers100M`` at 4, 16 and 64 GPUs (``benchmarks/bench_scale.py``
part 1, ``epoch diff``), by 0.1-2 % on the ``cora`` card at 2 x 2 GPUs
(tests/strategies/hopgnn/test_hopgnn_rank_mean.py bounds it). The memory check keeps the measured per-rank peaks
(:func:`measured_peaks`: the largest group and pre-gather buffer must fit).

Source: replacing per-component parameters that are estimation noise by their mean to obtain a symmetric model is
the mean-field reduction of symmetric systems; the representative model of :mod:`gnnplan.simulator.symmetry`
(Emerson and Sistla 1996) then applies to it exactly. The same rule as ``gsplit``'s
(:mod:`gnnplan.simulator.strategies.gsplit.rank_mean`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, overload

import numpy as np

from gnnplan.simulator import symmetry
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.hopgnn.micrographs import MicrographStats
from gnnplan.simulator.workload.cards import card_name

STEP_FIELDS = ("step_seeds", "step_src", "step_dst", "step_edges", "step_local_inputs", "step_remote_inputs")
"""``[S-1][w][k]`` (``[S-1][w][k][l]`` for block sizes) fields averaged over the hosts w."""
WORKER_FIELDS = ("pregather_remote", "pregather_local")
"""``[S-1][w]`` fields averaged over the workers w."""
NOTE = ("simulated with every worker at the per-rank mean of the proxy's micrograph groups and pre-gathers (per-rank "
        "differences are those of one proxy partition and draw) on one representative machine (hopgnn.rank_mean); "
        "no worker waits for a slower one at the step barriers, so the epoch is shorter than with the proxy's "
        "per-rank statistics (ogbn-papers100M, 4-64 GPUs: 8-12 %); the memory check uses the measured per-rank peaks")
"""What a result simulated with the mean says in ``estimated.statistics.micrograph_stats``."""


def applies(ctx: SimContext) -> bool:
    """Whether ``hopgnn`` simulates the per-rank mean: the dataset is a card (statistics estimated on its proxy),
    the cluster has several machines (else nothing to fold), and the fast path is on (not inside
    :func:`gnnplan.simulator.symmetry.disabled`)."""
    return (card_name(ctx.workload.dataset) is not None and ctx.cluster.num_machines > 1
            and symmetry.enabled())


def rank_mean_stats(mg: MicrographStats) -> MicrographStats:
    """The statistics with every worker's groups and pre-gather replaced by their mean over workers (module
    docstring).

    Shapes:
        every field of :data:`STEP_FIELDS` ``[S-1]``: (W, S) or (W, S, L) -> the same, every row equal (floats);
        every field of :data:`WORKER_FIELDS` ``[S-1]``: (W,) -> the same, every entry equal. Each ``[S-1]`` is
        averaged on first use (a simulation reads only the step counts it simulates).
    """
    out: dict[str, Any] = {name: _RankMeans(getattr(mg, name)) for name in STEP_FIELDS + WORKER_FIELDS}
    return replace(mg, **out)


class _RankMeans(Sequence[list[Any]]):
    """Per step count S, a (W, ...) nested list whose every row is the mean row of the measured one (one shared
    list of floats), computed on first use."""

    def __init__(self, measured: Sequence[Any]) -> None:
        self.measured = measured
        self.means: dict[int, list[Any]] = {}

    def __len__(self) -> int:
        return len(self.measured)

    @overload
    def __getitem__(self, index: int) -> list[Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[list[Any]]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        i = range(len(self))[index]
        if i not in self.means:
            values = self.measured[i]
            row = np.asarray(values, dtype=np.float64).mean(axis=0).tolist()
            self.means[i] = [row] * len(values)
        return self.means[i]


def measured_peaks(mg: MicrographStats, num_steps: int, row_bytes: float) -> tuple[float, float]:
    """(bytes of the largest group's input rows over workers and steps, the largest worker's pre-gathered rows,
    remote plus local) of the measured statistics with ``num_steps`` steps in a full iteration: what
    :func:`~simulator.strategies.hopgnn.memory_bytes` checks, from the per-rank statistics (a group without
    seeds loads nothing, as :func:`~simulator.strategies.hopgnn.work.step_work`).

    Args:
        mg: the measured statistics.
        num_steps: S, 1..M.
        row_bytes: bytes of one feature row.
    """
    i = num_steps - 1
    seeds = np.asarray(mg.step_seeds[i], dtype=np.float64)
    rows = np.asarray(mg.step_local_inputs[i], dtype=np.float64) + np.asarray(mg.step_remote_inputs[i])
    inputs = np.where(seeds > 0, rows * row_bytes, 0.0)
    buffer = np.asarray(mg.pregather_remote[i], dtype=np.float64) + np.asarray(mg.pregather_local[i])
    return float(inputs.max(initial=0.0)), float(buffer.max(initial=0.0))
