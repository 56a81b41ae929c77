"""Which iterations of an epoch a mini-batch strategy simulates, and how the rest are extrapolated
(:class:`IterationPlan`, :func:`iteration_plan`, :func:`steady_period_s`, :func:`phase_breakdown`,
:func:`place_window`); the busiest rank's time per phase, which every strategy's breakdown reports
(:func:`busiest_phase_totals`, :func:`rank_phase_sums`).

Windowed simulation: an epoch of ``n`` iterations is simulated in full when ``n <= MAX_WINDOW_ITERATIONS``.
Otherwise the first ``MAX_WINDOW_ITERATIONS - 1`` iterations and the (possibly partial) last one are simulated,
and the ``n - MAX_WINDOW_ITERATIONS`` iterations in between are extrapolated at the steady-state period, measured
as the mean spacing of iteration ends over the last ``STEADY_ITERATIONS`` full iterations of the window. The
pipeline (prefetching samplers, synchronous all-reduce) reaches its periodic regime within a few iterations
because every full iteration does the same work, so the window's tail is the steady state.

With k prefetching sampler processes feeding one trainer (or one machine's trainers) the pipeline has a longer
transient and a longer period (:func:`window_shape`): the first ``PREFETCH_FACTOR * k`` batches are sampled
before any trainer holds them back, and k samplers that start together hand over their batches in waves of k, so
the steady period is measured over a whole number of waves (the smallest multiple of k of at least
``STEADY_ITERATIONS`` iterations) after that transient, the window's first part is lengthened to hold both, and
its end is the epoch's last wave, not only its last iteration (:func:`with_sampler_processes`). Measured over 8
iterations, 15 samplers' one wave of the window looked like the steady state (gsplit on ogbn-products' card, 4 V100:
0.31 s per epoch, below the 0.43 s its machine's 16 cores need for the 6.9 core-seconds of sampling), and 12
samplers' period was one wave per 8 iterations instead of per 12 (0.91 s); the lengthened window gives 0.66 s
for 12 samplers and 0.63 s for 15 (its 49 batches in 4 waves), and 0.52 s from 16 on, where the cores are the bound
(2026-12-01).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.trace import Span

MAX_WINDOW_ITERATIONS = 16
"""Iterations an epoch may have and still be simulated in full without sampler processes (module docstring)."""
STEADY_ITERATIONS = 8
"""Fewest full iterations whose mean spacing is the steady period (:func:`window_shape`)."""
PREFETCH_FACTOR = 2
"""Batches in flight per sampler process of a mini-batch strategy: ``prefetch_factor`` default of
torch.utils.data.DataLoader (PyTorch docs), used by DGL 1.1's ``dgl.dataloading.DataLoader``."""


@dataclass(frozen=True)
class IterationPlan:
    """The iterations of one epoch and the ones simulated.

    Attributes:
        num_iterations: iterations per epoch.
        seeds_per_worker: seeds of one worker in a full iteration (``batch_size // W``).
        last_fraction: seeds of the last iteration relative to a full one (0 < f <= 1).
        window: iteration indices simulated, in order.
        steady_iterations: full iterations at the window's end whose mean spacing is the steady period
            (:func:`window_shape`).
    """

    num_iterations: int
    seeds_per_worker: int
    last_fraction: float
    window: tuple[int, ...]
    steady_iterations: int = STEADY_ITERATIONS

    def scale(self, iteration: int) -> float:
        """Work of ``iteration`` relative to a full iteration (block sizes scale linearly with seeds)."""
        return self.last_fraction if iteration == self.num_iterations - 1 else 1.0

    @property
    def extrapolated(self) -> int:
        """Iterations not simulated (estimated at the steady-state period)."""
        return self.num_iterations - len(self.window)

    @property
    def head(self) -> int:
        """Window positions of the epoch's first iterations whose last ``steady_iterations`` give the steady
        period: those before the simulated tail (the epoch's last iterations) when iterations are extrapolated,
        else all but the last."""
        if not self.extrapolated:
            return len(self.window) - 1
        return next(pos for pos, it in enumerate(self.window) if it != pos)

    @property
    def tail_start(self) -> int:
        """The first iteration of the simulated tail (the last iteration when nothing is extrapolated)."""
        return self.window[self.head] if self.extrapolated else self.num_iterations - 1


def window_shape(sampler_processes: int) -> tuple[int, int]:
    """``(head, steady iterations)`` of the window of an epoch whose trainer (or machine's trainers) is fed by
    ``sampler_processes`` prefetching sampler processes (0: it samples inline): the first ``head`` iterations are
    simulated, the steady period measured on their last ``steady`` (then the epoch's tail:
    :func:`with_sampler_processes`); ``(MAX_WINDOW_ITERATIONS - 1, STEADY_ITERATIONS)`` unless k =
    ``sampler_processes`` needs more (module docstring).

    k samplers started together hand over their batches in waves of k (sampler j takes iterations j, j + k, ...),
    so the steady iterations are the smallest multiple of k of at least ``STEADY_ITERATIONS``, and the head is a
    multiple of k too: the steady period is then measured from the end of one whole wave to the end of another,
    and no wave is cut short (a wave's batches share the machine's cores: the first of a wave the window cut off
    would be sampled alone, faster). The measured waves come after the first ``PREFETCH_FACTOR * k``
    iterations, whose batches the samplers take before any trainer can hold them back.

    Where the trainers are the bound, the wave after those starts together when the first wave is taken (later
    ones start as trainers take theirs), so its sampling spans are longer than the steady ones: the breakdown's
    ``sample`` then counts them in the steady state (6 samplers per worker, a trainer-bound dp epoch: 12% high,
    the epoch time exact). Measuring after ``(PREFETCH_FACTOR + 1) * k`` iterations removes that but lengthens
    the head for k = 3 and 4, the tuner's, from 15-16 iterations to 18-20, and a 200-trial study at 64 GPUs
    took 17% longer (benchmarks/bench_scale.py, 74.5 s against 87.2 s in one run, 2026-12-01); not done.
    """
    k = sampler_processes
    if k <= 0:
        return MAX_WINDOW_ITERATIONS - 1, STEADY_ITERATIONS
    steady = k * math.ceil(STEADY_ITERATIONS / k)
    return k * math.ceil(max(MAX_WINDOW_ITERATIONS - 1, PREFETCH_FACTOR * k + steady) / k), steady


def iteration_plan(num_train: int, batch_size: int, num_workers: int, sampler_processes: int = 0) -> IterationPlan:
    """Iterations of an epoch when each of W workers takes ``batch_size // W`` of its ``ceil(num_train / W)``
    seeds per iteration (common.md: seeds split evenly among workers; the last batch may be smaller), and the
    window simulated of them (:func:`window_shape` of ``sampler_processes``, the prefetching sampler processes
    feeding one trainer or one machine's trainers).

    Raises:
        SpecError: batch_size < W (a worker would get no seed) or no training vertices.
    """
    per_iter = batch_size // num_workers
    if per_iter < 1:
        raise SpecError(f"training.batch_size: {batch_size} is smaller than the {num_workers} workers; "
                        f"use at least {num_workers}")
    if num_train < 1:
        raise SpecError("workload.dataset: no training vertices")
    per_worker = math.ceil(num_train / num_workers)
    n = math.ceil(per_worker / per_iter)
    last = per_worker - (n - 1) * per_iter
    return with_sampler_processes(IterationPlan(n, per_iter, last / per_iter, ()), sampler_processes)


def with_sampler_processes(plan: IterationPlan, sampler_processes: int) -> IterationPlan:
    """``plan`` with the window and steady iterations of :func:`window_shape` of ``sampler_processes``: the first
    ``head`` iterations, then the epoch's last wave (its last ``(n - 1) mod k + 1`` iterations, the last alone
    without sampler processes), so the extrapolated iterations between are whole waves and the last wave shares
    the cores as it does in the epoch; every iteration when the epoch is no longer than that."""
    head, steady = window_shape(sampler_processes)
    n = plan.num_iterations
    tail = (n - 1) % sampler_processes + 1 if sampler_processes > 0 else 1
    window = tuple(range(n)) if n <= head + tail else tuple(range(head)) + tuple(range(n - tail, n))
    return replace(plan, window=window, steady_iterations=steady)


def steady_period_s(iteration_ends: list[float], plan: IterationPlan) -> float:
    """Steady-state seconds per iteration from the window's iteration end times (slowest worker).

    Args:
        iteration_ends: end time of each window position (max over workers).
        plan: the plan; the positions after its head (the epoch's simulated tail) are excluded.
    """
    full = plan.head
    if full < 2:
        return iteration_ends[0]
    k = min(plan.steady_iterations, full - 1)
    return (iteration_ends[full - 1] - iteration_ends[full - 1 - k]) / k


def phase_breakdown(spans: list[Span], plan: IterationPlan, phases: tuple[str, ...]) -> dict[str, float]:
    """Per phase, the busiest worker's total time over the epoch: simulated window plus extrapolated iterations
    at the mean per-iteration time of the window's last ``plan.steady_iterations`` full iterations."""
    steady = set(plan.window[:plan.head][-plan.steady_iterations:]) or set(plan.window)
    total = rank_phase_sums(spans, phases)
    tail = rank_phase_sums([s for s in spans if s.iteration in steady], phases)
    return _busiest({key: t + plan.extrapolated * tail.get(key, 0.0) / len(steady) for key, t in total.items()},
                    phases)


def busiest_phase_totals(spans: list[Span], phases: tuple[str, ...]) -> dict[str, float]:
    """Per phase of ``phases``, the largest over ranks of a rank's summed span durations in it (seconds; 0 when no
    rank has one): a one-iteration epoch's ``breakdown_s`` (the full-graph strategies), nothing extrapolated."""
    return _busiest(rank_phase_sums(spans, phases), phases)


def rank_phase_sums(spans: list[Span], phases: tuple[str, ...]) -> dict[tuple[int, str], float]:
    """``{(rank, phase): seconds}``: each rank's span durations summed per phase of ``phases``, in span order, in
    one pass over ``spans``."""
    wanted = set(phases)
    sums: dict[tuple[int, str], float] = defaultdict(float)
    for s in spans:
        if s.phase in wanted:
            sums[(s.rank, s.phase)] += s.dur_s
    return dict(sums)


def _busiest(sums: dict[tuple[int, str], float], phases: tuple[str, ...]) -> dict[str, float]:
    """Per phase, the largest of ``sums`` over ranks (0 without any)."""
    out = dict.fromkeys(phases, 0.0)
    for (_, phase), t in sums.items():
        out[phase] = max(out[phase], t)
    return out


def place_window(spans: list[Span], plan: IterationPlan, period_s: float) -> list[Span]:
    """Lay the simulated window out on the epoch's time line: spans of the simulated tail (the last iterations,
    :attr:`IterationPlan.tail_start` on) move later by the extrapolated iterations' time, and each rank's
    ``epoch`` span covers the whole predicted epoch (its args say how many iterations were simulated and
    extrapolated)."""
    offset = plan.extrapolated * period_s
    tail = plan.tail_start
    out = []
    for s in spans:
        if s.phase == "epoch":
            args = {**s.args, "simulated_iterations": len(plan.window), "extrapolated_iterations": plan.extrapolated}
            s = replace(s, dur_s=s.dur_s + offset, args=args)
        elif s.iteration >= tail and offset:
            s = replace(s, start_s=s.start_s + offset)
        out.append(s)
    return out
