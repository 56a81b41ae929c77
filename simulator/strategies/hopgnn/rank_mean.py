"""A dataset card's per-rank micrograph work folded onto one representative machine that runs, at every time
step, the groups of the machine whose worker is slowest at that step, so ``hopgnn`` runs the representative-machine
fast path (:mod:`gnnplan.simulator.symmetry`) instead of every rank.

Why it is allowed for a card, and only there: a card's micrograph statistics are measured on one synthetic proxy
(:mod:`gnnplan.simulator.workload.proxy`): one random degree-matched graph, one METIS (or random) partition of
it, one draw of seeds and samples per iteration. Which worker hosts the larger group at a step, or pre-gathers
more rows, is an artefact of that draw; the real graph's partition would put it elsewhere. Only
distribution-level quantities carry over from proxy to card: how much the slowest machine lags at each barrier,
not where it sits. Measured statistics of a real graph are simulated in full, worker by worker.

The rule (:func:`slowest_machine_works`). Every time step ends at a barrier (the migration's rendezvous; the last
one at the gradient all-reduce), which waits for the slowest worker (brief ../shared/papers/hopgnn.md §2.2:
``T_step(t) = max_s [...]``, ``T_iter = max_s T_sample(s) + max_s T_pg(s) + ...``; §5.1, idle slots), and so does
every pull of remote rows, whose calls are collective (the executor's ``RowStore.pull``: the pre-gather's before
step 0, or without pre-gathering each step's after its local gather). Between two barriers the workers run
independently except for what their machine shares. So the representative machine runs, in each barrier segment,
the measured work of the machine holding the slowest worker of that segment: after step k's pull (m*_k) its local
GPU j does rank ``m*_k g + j``'s group at step k (seeds, block sizes, remote input rows, hence its fetch, load,
forward and backward) and, pre-gathering, at k = 0 pulls that rank's pre-gathered remote rows; before the pull
(m'_k) it samples (inline samplers) and gathers the pre-gather's local rows as rank ``m'_0 g + j`` (k = 0) or,
without pre-gathering, gathers the local rows of rank ``m'_k g + j``'s group. One whole machine is taken, not the
slowest worker copied g times, because its other GPUs share its NICs, host memory and PCIe uplinks with it: the
slowest worker's finish depends on its machine-mates' real loads. The representative's pulls then load every
machine's NIC with m*_0's rows, as the busiest machine's NIC is loaded in the full simulation (a pull takes equal
shares from every other machine, so the busiest receiver is the busiest link; the senders' loads are averages of
the receivers'), i.e. the pre-gather lasts what the full simulation's bottleneck link gives it.

Which worker is slowest in a segment is decided by an estimate (:func:`segment_estimates`, seconds): per worker
and step, the uncontended forward and backward, the host-to-device copy of its input rows, and its gather (and,
without pre-gathering, its fetch) at the processor-sharing finish time on its machine's host memory (network:
its NICs), ``sum_j min(b_j, b_w) / rate`` over the machine's workers j (equal flows started together, max-min
fair); the segment before step 0's pull adds the inline sampling (:func:`~simulator.hardware.pricing.sampling_s`)
and the gather of the pre-gather's local rows, the one after it the pull of its remote rows, each at that finish
time. The estimate only chooses the machine; the simulation then prices the chosen work with every contention modelled.

What is kept: every worker leaves a barrier at the same instant, so nothing carries from one segment into the next and
the iteration is the sum over segments of the slowest worker's segment time; running each segment's slowest machine, as
measured, keeps every term when the estimate picks the right machine. Exactness on machine-symmetric statistics (every
machine is then the same, whichever is picked: tests/strategies/hopgnn/test_hopgnn_rank_mean.py). The bytes per link and
the memory check, computed from every rank's measured work, as in the full simulation. What is lost: a wrong pick (two
machines within the estimate's error) drops the difference between them; the senders of the representative's pulls are
as busy as its receiver (the full simulation's senders carry the mean), which changes nothing while the receiving NIC is
the bottleneck; with sampler processes the sampling overlaps the previous iteration (then not within one segment) and is
taken from m'_0 all the same; the pull's count and id calls move the ids of the rank whose rows it pulls; the last,
partial iteration keeps the full iteration's picks. Measured on ``ogbn-papers100M`` (``benchmarks/bench_scale.py`` part
1, 2 steps; 2026-11-23): the epoch equals the full simulation's at 4, 16 and 64 GPUs (``epoch diff`` 0), and so it does
at 16 GPUs with the controller, with 4 steps and random seeds, with sampler processes, and at 64 GPUs without
pre-gathering or without migrating parameters. Before the pulls were priced as the executor's collective calls (whose
barriers split segment 0 where the estimate now splits it) the epoch was 0.03 %, 0.17 % and 0.91 % shorter at 4, 16 and
64 GPUs, and 8.8 %, 7.6 % and 12 % shorter with the per-rank mean this replaces. On the ``cora`` card at 2 x 2, 4 x 1
and 4 x 2 GPUs the epochs are equal (0 apart, 3.5e-6 at 4 x 1 with 2 steps;
tests/strategies/hopgnn/test_hopgnn_rank_mean.py bounds 2 x 2 at 1e-9, and a skewed draw whose slowest machine differs
between the two steps at 0.01 %; the per-rank mean: 4.9 %).
Cost: every rank's full iteration is priced (:func:`~.work.hop_work`, as the full simulation does) to find the
slowest machines and the bytes; the last iteration only for the representative.

Source: the barrier's wait is the maximum over workers (brief §2.2, the derived cost model); folding identical
machines onto one representative is the quotient of a symmetric model (Emerson and Sistla 1996,
:mod:`gnnplan.simulator.symmetry`), applied to the machine-symmetric work built here; max-min fairness and
processor sharing of equal flows: Bertsekas and Gallager, "Data Networks", 1992, §6.5.2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, overload

import numpy as np

from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.strategies.base import SimContext, folds_proxy_ranks
from gnnplan.simulator.strategies.hopgnn.micrographs import MicrographStats
from gnnplan.simulator.strategies.hopgnn.work import HopWork, StepWork, hop_work, step_work
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, Block

STEP_FIELDS = ("step_seeds", "step_src", "step_dst", "step_edges", "step_local_inputs", "step_remote_inputs")
"""``[S-1][w][k]`` (``[S-1][w][k][l]`` for block sizes) fields of :func:`rank_mean_stats`."""
WORKER_FIELDS = ("pregather_remote", "pregather_local")
"""``[S-1][w]`` fields of :func:`rank_mean_stats`."""
NOTE = ("simulated on one representative machine that runs, between two step barriers, the proxy's measured "
        "micrograph groups of the machine whose worker is slowest there (hopgnn.rank_mean; which machine is slowest "
        "is an artefact of one proxy partition and draw, how much it lags is kept); bytes per link and the memory "
        "check use every rank's measured work")
"""What a result simulated with :func:`slowest_machine_works` says in ``estimated.statistics.micrograph_stats``."""


def applies(ctx: SimContext) -> bool:
    """Whether ``hopgnn`` simulates the representative of :func:`slowest_machine_works`
    (:func:`~gnnplan.simulator.strategies.base.folds_proxy_ranks`)."""
    return folds_proxy_ranks(ctx)


def _shared_finish(nbytes: np.ndarray) -> np.ndarray:
    """Per worker, the bytes its machine's resource has carried when its own flow ends, all the machine's flows
    starting together at equal (max-min fair) rates: ``sum_j min(b_j, b_w)`` over the machine's workers j.

    Shapes:
        nbytes: (M, g, ...) -> (M, g, ...).
    """
    return np.minimum(nbytes[:, :, None], nbytes[:, None, :]).sum(axis=2)


def segment_estimates(ctx: SimContext, works: Sequence[HopWork], pregather: bool,
                      inline_sampling: bool) -> np.ndarray:
    """Estimated seconds each worker spends in each barrier segment (module docstring). Step k has two: the part
    before the first collective call of its pull (k = 0: the inline sampling and, pre-gathering, the gather of
    the pre-gather's local rows; without pre-gathering, every step: the gather of its local rows) and the rest
    (the pull's rows, k = 0 only when pre-gathering; the step's load, host-to-device copy, forward and backward).
    Used only to rank workers.

    Args:
        ctx: the context (cluster of M machines x g GPUs).
        works: every rank's work, rank ``m * g + l`` at index ``m * g + l``, all with the same step count S.
        pregather: whether the rows are pre-gathered (else each step fetches its remote rows).
        inline_sampling: whether the trainer samples (no sampler processes), so sampling is in segment 0.

    Returns:
        (M, g, S, 2) seconds: ``[..., k, 0]`` before step k's pull, ``[..., k, 1]`` after it.
    """
    cl = ctx.cluster
    m, g = cl.num_machines, cl.gpus_per_machine
    gather_rate = 1.0 / pricing.host_gather_s(cl, 1.0)  # gathered bytes per second of one worker alone
    net_rate = cl.network.bandwidth_bytes_per_s * cl.network.nics_per_machine
    row = works[0].row_bytes
    steps = [[(s.input_bytes, s.local_bytes, s.remote_bytes, s.forward_s + s.backward_s) for s in w.steps]
             for w in works]
    arr = np.asarray(steps, dtype=np.float64).reshape(m, g, works[0].num_steps, 4)
    inputs, local, remote, compute = (arr[..., i] for i in range(4))
    h2d = np.vectorize(lambda b: pricing.host_to_gpu_s(cl, float(b)), otypes=[float])(inputs)
    before, after = np.zeros_like(compute), compute + h2d
    if pregather:
        after = after + _shared_finish(inputs) / gather_rate
    else:
        before = before + _shared_finish(local) / gather_rate
        if m > 1:
            after = after + _shared_finish(remote / row * (row + INDEX_BYTES)) / net_rate
    if inline_sampling:
        calls = [float(sum(len(s.blocks) for s in w.steps)) for w in works]
        before[:, :, 0] += np.asarray([pricing.sampling_s(cl, w.num_sampled_edges, num_calls=c)
                                       for w, c in zip(works, calls)]).reshape(m, g)
    if pregather:
        local_rows = np.asarray([w.pregather_local_rows for w in works], dtype=np.float64).reshape(m, g)
        remote_rows = np.asarray([w.pregather_remote_rows for w in works], dtype=np.float64).reshape(m, g)
        if m > 1:  # the pull, and the buffer assembled from both parts (run.HopRun._pregather)
            before[:, :, 0] += _shared_finish(2.0 * local_rows * row) / gather_rate
            after[:, :, 0] += _shared_finish(remote_rows * (row + INDEX_BYTES)) / net_rate
            after[:, :, 0] += _shared_finish(remote_rows * row) / gather_rate
        else:
            before[:, :, 0] += _shared_finish(local_rows * row) / gather_rate
    return np.stack([before, after], axis=-1)


def slowest_machines(ctx: SimContext, works: Sequence[HopWork], pregather: bool,
                     inline_sampling: bool) -> list[tuple[int, int]]:
    """Per step k, (m*_k before its pull, m*_k after it) (module docstring): the machine of the worker with the
    largest :func:`segment_estimates` in that segment, the first such machine on ties.

    Args:
        ctx, works, pregather, inline_sampling: as :func:`segment_estimates`.

    Shapes:
        -> (S,) pairs of machine indices.
    """
    picks = segment_estimates(ctx, works, pregather, inline_sampling).max(axis=1).argmax(axis=0)  # (S, 2)
    return [(int(before), int(after)) for before, after in picks]


def slowest_machine_works(ctx: SimContext, mg: MicrographStats, works: Sequence[HopWork], pregather: bool,
                          inline_sampling: bool, migrate_parameters: bool,
                          last_fraction: float) -> tuple[list[HopWork], list[HopWork]]:
    """The representative machine's work in a full and in the last iteration, one copy per machine (module
    docstring): local GPU j does, at step k, the group of rank ``m*_k g + j`` after the step's pull
    (:func:`slowest_machines` of the full iteration, kept for the last one: the same draw at ``last_fraction`` of
    the seeds), and without pre-gathering the local gather of rank ``m'_k g + j``'s group before it; it samples
    and gathers the pre-gather's local rows as rank ``m'_0 g + j`` and pulls the pre-gather's remote rows of rank
    ``m*_0 g + j``; everything else is the same on every rank.

    Args:
        ctx, pregather, inline_sampling: as :func:`segment_estimates`.
        mg: the measured statistics that priced ``works``.
        works: every rank's work in a full iteration (:func:`~.work.hop_work`), S steps.
        migrate_parameters: as :func:`~.work.hop_work`.
        last_fraction: seeds of the last iteration over a full one's.

    Returns:
        (full, last): W works each, rank r's the same object as rank ``r mod g``'s (machine-symmetric:
        :func:`gnnplan.simulator.symmetry.machine_symmetric` holds).
    """
    g, n = ctx.cluster.gpus_per_machine, len(works)
    if not works or works[0].num_steps == 0:
        return list(works), list(works)
    picks = slowest_machines(ctx, works, pregather, inline_sampling)
    num_steps = len(picks)
    out = []
    for scale in (1.0, last_fraction):
        def whole(m: int, j: int) -> HopWork:
            return works[m * g + j] if scale == 1.0 else \
                hop_work(ctx, mg, m * g + j, num_steps, migrate_parameters, scale)

        def step(m: int, j: int, k: int) -> StepWork:
            return works[m * g + j].steps[k] if scale == 1.0 else _step(ctx, mg, m * g + j, k, num_steps, scale)

        rep = []
        for j in range(g):
            home, pulls = whole(picks[0][0], j), whole(picks[0][1], j)
            steps = tuple(step(after, j, k) if pregather or before == after else
                          replace(step(after, j, k), local_bytes=step(before, j, k).local_bytes)
                          for k, (before, after) in enumerate(picks))
            rep.append(replace(home, steps=steps, pregather_remote_rows=pulls.pregather_remote_rows))
        out.append([rep[r % g] for r in range(n)])
    return out[0], out[1]


def _step(ctx: SimContext, mg: MicrographStats, rank: int, k: int, num_steps: int, scale: float) -> StepWork:
    """Rank ``rank``'s step k of S = ``num_steps`` at ``scale`` x a full batch, as :func:`~.work.hop_work`
    prices it."""
    i = num_steps - 1
    blocks = [Block(s * scale, d * scale, e * scale) for s, d, e in
              zip(mg.step_src[i][rank][k], mg.step_dst[i][rank][k], mg.step_edges[i][rank][k])]
    return step_work(ctx, blocks, mg.step_seeds[i][rank][k] * scale, mg.step_local_inputs[i][rank][k] * scale,
                     mg.step_remote_inputs[i][rank][k] * scale)


def rank_mean_stats(mg: MicrographStats) -> MicrographStats:
    """The statistics with every worker's groups and pre-gather replaced by their mean over workers: totals over
    workers kept, every worker the same (machine-symmetric statistics; what this module's fast path simulated
    before :func:`slowest_machine_works`, 8-12 % short of the full simulation on ``ogbn-papers100M``).

    Shapes:
        every field of :data:`STEP_FIELDS` ``[S-1]``: (W, S) or (W, S, L) -> the same, every row equal (floats);
        every field of :data:`WORKER_FIELDS` ``[S-1]``: (W,) -> the same, every entry equal. Each ``[S-1]`` is
        averaged on first use.
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
