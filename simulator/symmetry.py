"""Simulation at scale: identical machines simulated once, as a representative, when the schedule is symmetric.

A cluster of M identical machines whose workers all do the same work is symmetric under the cyclic shift of
machines (machine m -> m + 1 mod M, rank m*g + l -> (m+1)*g + l): every collective the strategies schedule (the
ring all-reduce to the next machine, equal-share pulls from every other machine, the ring migration) maps onto
itself. Then every machine's processes and flows are copies of machine 0's, shifted, and only machine 0 needs to
be simulated: its ``g`` workers run as usual, and every resource of another machine is replaced by its *image*
on machine 0 (:func:`fold_machines`). A flow between machine 0 and machine m keeps both ends: its sender side on
machine 0's resources, its receiver side on the image of machine m's receive resources, which machine 0's own
NICs are. By the shift symmetry, machine m's receive side carries, at every instant, exactly the flows machine
0's receive side carries in the full simulation, so the max-min rates (and every completion time) are the same
as in the full simulation: links the machines share stay shared.

The GPUs of a machine are folded the same way when its hardware is symmetric under a shift of local GPUs
(:func:`gpu_shift`: GPUs sharing a PCIe switch uplink or a NIC move together) and every rank's work equals its
image's, for a strategy whose every flow belongs to one rank's processes (``WindowRun.GPU_SYMMETRIC``: dp, ppgnn).
Only the first ``s`` GPUs of machine 0 run, each standing for ``g / s`` (:func:`fold_gpus`): each of its flows counts
``g / s`` times, and each resource of a block of GPUs (links, uplink, NIC) stands for its ``g / s`` images with
``g / s`` times the capacity, while the machine's own (cores, host memory) carry every copy; the max-min rates are
again the full simulation's (tests/simulator/test_symmetry_gpus.py: equal to 1e-9; observed 0).

Cost: the full simulation has ``M (M - 1) g`` concurrent pulls in an all-to-all fetch and recomputes max-min
rates over all of them at every flow event, ~10x per doubling of GPUs (issue 10); the representative has
``(M - 1) g`` flows and ``M``-fold fewer events, ``(M - 1) s`` and ``M g / s``-fold fewer with its GPUs folded.

Asymmetric cases are simulated in full: a strategy passes each rank's work (:func:`machine_symmetric`); when
any rank's work differs from its image on machine 0 (skewed partitions, per-rank measured statistics, a
straggler), every rank is simulated. :func:`disabled` forces the full simulation (tests, benchmarks). dp runs
the pace-setting machine's slowest worker on each GPU of it when its workers differ by at most
``dp.work.GPU_FOLD_SPREAD``, so that its GPUs fold (an approximation, with the fast path only: the full simulation
keeps every worker's own work).

Source: exploiting symmetry to simulate one representative of a class of identical components is the standard
reduction of symmetric models (Emerson and Sistla, "Symmetry and model checking", Formal Methods in System
Design 9, 1996, the quotient structure); max-min fairness is preserved because progressive filling treats
identical flows identically (Bertsekas and Gallager, "Data Networks", 1992, §6.5.2).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from gnnplan.simulator.engine import FluidResource, Rendezvous

_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("gnnplan_symmetry_enabled", default=True)


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within this block every simulation runs every rank (the full simulation), as a reference."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def enabled() -> bool:
    """Whether the representative fast path may be used (False inside :func:`disabled`)."""
    return _ENABLED.get()


def machine_symmetric(rank_works: Sequence[Any], num_machines: int, gpus_per_machine: int,
                      same: Callable[[Any, Any, int], bool] | None = None) -> bool:
    """Whether every rank's work equals that of its image on machine 0.

    Args:
        rank_works: one entry per rank (``num_machines * gpus_per_machine``), compared with ``==`` (frozen
            dataclasses compare field by field, exactly).
        num_machines, gpus_per_machine: M and g.
        same: ``same(work, image_work, shift)`` for work that names other ranks (e.g. rows received from each
            owner), which must be compared after shifting by ``shift`` machines; default ``==``.

    Returns:
        True iff rank ``m*g + l``'s work equals rank ``l``'s for every m and l.

    Raises:
        ValueError: ``rank_works`` does not have one entry per rank.
    """
    if len(rank_works) != num_machines * gpus_per_machine:
        raise ValueError(f"rank_works: {len(rank_works)} entries for {num_machines} x {gpus_per_machine} ranks; "
                         f"need one per rank")
    for rank in range(gpus_per_machine, len(rank_works)):
        shift, local = divmod(rank, gpus_per_machine)
        a, b = rank_works[rank], rank_works[local]
        if not (same(a, b, shift) if same is not None else a == b):
            return False
    return True


def shift_peers(values: Sequence[Any], ranks: int) -> tuple[Any, ...]:
    """A per-peer vector (entry k about rank k) as seen from the rank ``ranks`` further on: entry ``k + ranks``
    (mod the length) of the result is entry k of ``values``. Compare ``work.rows == shift_peers(image.rows, s * g)``
    in a ``same`` of :func:`machine_symmetric` for work shifted by s machines of g GPUs.

    Shapes:
        values: (W,) -> (W,) tuple.
    """
    values = tuple(values)
    if not values:
        return values
    ranks %= len(values)
    return values[len(values) - ranks:] + values[:len(values) - ranks]


@dataclass(frozen=True)
class Representatives:
    """Which ranks a simulation runs.

    Attributes:
        ranks: the ranks simulated (all of them, machine 0's, or machine 0's first ``g / gpus_represented``).
        num_machines_represented: machines each simulated machine stands for (1 = full simulation).
        gpus_represented: GPUs of its machine each simulated GPU stands for (1: every GPU of the machine runs;
            :func:`fold_gpus`).
    """

    ranks: tuple[int, ...]
    num_machines_represented: int
    gpus_represented: int = 1

    @property
    def folded(self) -> bool:
        """Whether only a representative machine (or a representative share of its GPUs) is simulated."""
        return self.num_machines_represented > 1 or self.gpus_represented > 1

    @property
    def copies(self) -> int:
        """Ranks each simulated rank stands for (itself included)."""
        return self.num_machines_represented * self.gpus_represented

    def images(self, rank: int, num_machines: int, gpus_per_machine: int) -> list[int]:
        """The ranks simulated rank ``rank`` stands for, itself excluded: the same local GPU of every other machine
        and, with :attr:`gpus_represented` > 1, the GPUs ``rank + j * s`` of every machine (``s = g /
        gpus_represented``, the shift of :func:`fold_gpus`)."""
        g = gpus_per_machine
        shift = g // self.gpus_represented
        locals_ = range(rank % g, g, shift)
        machines = range(num_machines) if self.num_machines_represented > 1 else range(rank // g, rank // g + 1)
        return [m * g + local for m in machines for local in locals_ if m * g + local != rank]


def representatives(num_machines: int, gpus_per_machine: int, rank_works: Sequence[Any] | None,
                    same: Callable[[Any, Any, int], bool] | None = None,
                    gpu_shift: int | None = None) -> Representatives:
    """The ranks to simulate: machine 0's when ``rank_works`` is given and machine-symmetric (and the fast path
    is :func:`enabled`), else every rank; of those only the first ``gpu_shift`` when every rank's work also equals
    that of local GPU ``local mod gpu_shift`` of machine 0 (:func:`fold_gpus`; a machine alone too).

    Args:
        num_machines, gpus_per_machine: the cluster's shape.
        rank_works: each rank's work, or None when the strategy claims no symmetry (always the full simulation).
        same: see :func:`machine_symmetric` (work compared after a shift of machines: no GPU folding).
        gpu_shift: the shift of local GPUs the hardware is symmetric under (:func:`gpu_shift`), when the strategy's
            every flow belongs to one rank's processes (a strategy opts in); None: the GPUs are not folded.
    """
    num_ranks = num_machines * gpus_per_machine
    if rank_works is None or not enabled():
        return Representatives(tuple(range(num_ranks)), 1)
    g = gpus_per_machine
    if (gpu_shift is not None and same is None and gpu_shift < g and len(rank_works) == num_ranks
            and all(rank_works[r] == rank_works[r % g % gpu_shift] for r in range(num_ranks))):
        return Representatives(tuple(range(gpu_shift)), num_machines, g // gpu_shift)
    if num_machines < 2 or not machine_symmetric(rank_works, num_machines, gpus_per_machine, same):
        return Representatives(tuple(range(num_ranks)), 1)
    return Representatives(tuple(range(gpus_per_machine)), num_machines)


def _foldable(item: Any) -> bool:
    if isinstance(item, (FluidResource, simpy.Resource)):
        return True
    return isinstance(item, tuple) and all(isinstance(r, FluidResource) for r in item)


def fold_machines(hw: Any, num_machines: int) -> list[str]:
    """Replace every resource of machines 1..M-1 of a hardware model by its image on machine 0 (module
    docstring), in place.

    Every list attribute of :class:`~simulator.hardware.model.HardwareModel` that holds resources (a
    :class:`~simulator.engine.FluidResource`, a ``simpy.Resource``, or a tuple of FluidResources such as a
    precomputed path) is machine-major: with ``k = len / M`` entries per machine, entry ``i`` belongs to machine
    ``i // k`` (per GPU: ``k = g``; per machine: 1; per NIC: ``nics_per_machine``; per PCIe switch uplink: the
    uplinks of a machine). Entry ``i`` becomes entry ``i mod k``, machine 0's, so every method that indexes these
    lists by rank or machine reaches the image. Resources created on demand from a pair of ranks of one machine
    (pairwise NVLink) are only ever created for machine 0's ranks, the only ones simulated.

    Args:
        hw: the hardware model (after construction, before any flow starts).
        num_machines: M.

    Returns:
        The names of the attributes folded.

    Raises:
        ValueError: ``num_machines`` < 1, or a resource list whose length is not a multiple of M (the layout
            above is broken: folding it would be wrong).
    """
    if num_machines < 1:
        raise ValueError(f"num_machines: {num_machines}; must be >= 1")
    folded = []
    for name, value, per in _resource_lists(hw, num_machines):
        value[:] = [value[i % per] for i in range(len(value))]
        folded.append(name)
    return folded


def _resource_lists(hw: Any, num_machines: int) -> Iterator[tuple[str, list[Any], int]]:
    """Every resource list of ``hw`` (layout: :func:`fold_machines`) as (attribute name, the list, entries per
    machine).

    Raises:
        ValueError: a list whose length is not a multiple of ``num_machines``.
    """
    for name, value in vars(hw).items():
        if not isinstance(value, list) or not value or not all(_foldable(v) for v in value):
            continue
        if len(value) % num_machines:
            raise ValueError(f"HardwareModel.{name}: {len(value)} resources for {num_machines} machines; a "
                             f"resource list must hold the same number per machine")
        yield name, value, len(value) // num_machines


def gpu_shift(hw: Any, num_machines: int, gpus_per_machine: int) -> int:
    """The smallest shift ``s`` of local GPUs (GPU l -> l + s mod g on every machine) that maps the machine's
    hardware onto itself: ``g`` (no symmetry but the identity) unless every resource list of the hardware model
    holds, per machine, a number ``p`` of entries that divides ``g``; then ``s`` is the least common multiple of
    ``g / p`` over the lists with ``p > 1``.

    The lists are machine-major, and within a machine a list of ``p`` entries covers the GPUs in contiguous
    blocks of ``g / p`` (a GPU's own links: p = g; its PCIe switch uplink, ``uplink_index``; its NIC,
    ``nic_index``; the machine's cores, memory and drives: p = 1), so a shift by a multiple of every ``g / p``
    maps each block onto another block. Pairwise NVLink (every pair of GPUs its own link of one bandwidth) and
    the machine's ring of GPUs are symmetric under every shift.

    Raises:
        ValueError: a resource list whose length is not a multiple of ``num_machines``.
    """
    g, shift = gpus_per_machine, 1
    for _, _, per in _resource_lists(hw, num_machines):
        if g % per:
            return g
        shift = math.lcm(shift, g // per) if per > 1 else shift
    return shift


def fold_gpus(hw: Any, num_machines: int, gpus_per_machine: int, shift: int) -> list[str]:
    """Fold the GPUs of a machine onto its first ``shift`` (after :func:`fold_machines` when there are several
    machines), in place: each simulated GPU stands for the ``k = g / shift`` GPUs ``l, l + shift, ...``.

    Under the shift (:func:`gpu_shift`) the ``k`` GPUs of an orbit run the same processes and flows, shifted.
    Each flow a simulated rank starts stands for its ``k`` images: the hardware model starts it ``k`` times
    (``hw.gpu_copies``, a flow's ``count``: :meth:`~simulator.fluid.FluidScheduler.start`). A resource owned by a
    block of GPUs (their links, PCIe switch uplink, NIC: ``p > 1`` entries per machine) is replaced by its image
    among the simulated GPUs', whose capacity is multiplied by ``k``: it stands for the ``k`` resources of its
    orbit, and carries ``k`` times their flows, so every max-min rate and completion time is that of the full
    simulation (a resource is saturated at the same fair share). A resource of the whole machine (cores, host
    memory, drives: ``p = 1``) is kept: it carries all ``k`` copies of every flow, as it does in full. The
    pairwise NVLink created later (``hw.nvlink_pair``) reads ``hw.gpu_shift`` to name a pair by its orbit.

    Args:
        hw: the hardware model (before any flow starts); num_machines, gpus_per_machine: M and g.
        shift: the GPUs kept per machine (a divisor of g that :func:`gpu_shift` divides).

    Returns:
        The names of the attributes folded.

    Raises:
        ValueError: ``shift`` is not such a divisor of g.
    """
    g, least = gpus_per_machine, gpu_shift(hw, num_machines, gpus_per_machine)
    if shift < 1 or g % shift or shift % least:
        raise ValueError(f"shift: {shift} GPUs kept of {g}; must divide {g} and be a multiple of the hardware's "
                         f"shift {least}")
    copies, scaled, folded = g // shift, set(), []
    for name, value, per in _resource_lists(hw, num_machines):
        if per == 1:
            continue
        kept = per * shift // g
        value[:] = [value[(i % per) % kept] for i in range(len(value))]
        for r in value[:kept]:
            if isinstance(r, FluidResource) and id(r) not in scaled:
                r.capacity *= copies
                scaled.add(id(r))
        folded.append(name)
    hw.gpu_copies, hw.gpu_shift = copies, shift
    return folded


def machine_images(spans: list[Any], gpus_per_machine: int, num_workers: int) -> list[Any]:
    """``spans`` of a representative machine's GPUs (ranks < ``gpus_per_machine``) followed by their copies on
    the same GPU of every other machine, machine by machine (``Span.on_rank``): a folded run's spans for every
    rank (:func:`fold_machines`; used where a run keeps no :class:`Representatives` to ask, hopgnn's finished
    result, and by the full-graph runs).

    Shapes:
        spans: (n,) -> (n * num_workers / gpus_per_machine,).
    """
    out = list(spans)
    for shift in range(gpus_per_machine, num_workers, gpus_per_machine):
        out.extend(s.on_rank(s.rank + shift) for s in spans)
    return out


def simulated_ranks(engine: Any, hw: Any, cluster: Any, rank_works: Sequence[Any] | None,
                    same: Callable[[Any, Any, int], bool] | None = None,
                    gpu_symmetric: bool = False) -> tuple[Representatives, Rendezvous]:
    """The set-up every rank-parallel run shares: which ranks to simulate (:func:`representatives`), the hardware
    folded onto machine 0 when only its ranks are (:func:`fold_machines`) and onto its first GPUs when only
    those are (:func:`fold_gpus`), and the barriers those ranks meet at, each standing for the ranks it represents
    (:class:`~simulator.engine.Rendezvous`, with the cluster's ``jitter_s``).

    Args:
        engine: the run's engine; hw: its hardware model (before any flow starts); cluster: the ClusterSpec.
        rank_works, same: see :func:`representatives`.
        gpu_symmetric: the strategy's every flow is started by one rank's processes (its trainer, its samplers),
            so the GPUs of a machine may be folded too (:func:`fold_gpus`).
    """
    m, g = cluster.num_machines, cluster.gpus_per_machine
    shift = gpu_shift(hw, m, g) if gpu_symmetric else None
    represent = representatives(m, g, rank_works, same, shift)
    if represent.num_machines_represented > 1:
        fold_machines(hw, m)
    if represent.gpus_represented > 1:
        fold_gpus(hw, m, g, g // represent.gpus_represented)
    return represent, Rendezvous(engine, len(represent.ranks), cluster.jitter_s, represent.copies)
