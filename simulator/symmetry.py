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
as in the full simulation: links the machines share stay shared. The GPUs of the representative machine are
all simulated, because the topology inside a machine need not be symmetric (PCIe switches, pairwise NVLink).

Cost: the full simulation has ``M (M - 1) g`` concurrent pulls in an all-to-all fetch and recomputes max-min
rates over all of them at every flow event, ~10x per doubling of GPUs (issue 10); the representative has
``(M - 1) g`` flows and ``M``-fold fewer events.

Asymmetric cases are simulated in full: a strategy passes each rank's work (:func:`machine_symmetric`); when
any rank's work differs from its image on machine 0 (skewed partitions, per-rank measured statistics, a
straggler), every rank is simulated. :func:`disabled` forces the full simulation (tests, benchmarks).

Source: exploiting symmetry to simulate one representative of a class of identical components is the standard
reduction of symmetric models (Emerson and Sistla, "Symmetry and model checking", Formal Methods in System
Design 9, 1996, the quotient structure); max-min fairness is preserved because progressive filling treats
identical flows identically (Bertsekas and Gallager, "Data Networks", 1992, §6.5.2).
"""

from __future__ import annotations

import contextlib
import contextvars
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
        ranks: the ranks simulated (all of them, or machine 0's).
        num_machines_represented: machines each simulated machine stands for (1 = full simulation).
    """

    ranks: tuple[int, ...]
    num_machines_represented: int

    @property
    def folded(self) -> bool:
        """Whether only a representative machine is simulated."""
        return self.num_machines_represented > 1


def representatives(num_machines: int, gpus_per_machine: int, rank_works: Sequence[Any] | None,
                    same: Callable[[Any, Any, int], bool] | None = None) -> Representatives:
    """The ranks to simulate: machine 0's when ``rank_works`` is given and machine-symmetric (and the fast path
    is :func:`enabled`), else every rank.

    Args:
        num_machines, gpus_per_machine: the cluster's shape.
        rank_works: each rank's work, or None when the strategy claims no symmetry (always the full simulation).
        same: see :func:`machine_symmetric`.
    """
    num_ranks = num_machines * gpus_per_machine
    if (rank_works is None or num_machines < 2 or not enabled()
            or not machine_symmetric(rank_works, num_machines, gpus_per_machine, same)):
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
    for name, value in vars(hw).items():
        if not isinstance(value, list) or not value or not all(_foldable(v) for v in value):
            continue
        if len(value) % num_machines:
            raise ValueError(f"HardwareModel.{name}: {len(value)} resources for {num_machines} machines; a "
                             f"resource list must hold the same number per machine")
        per = len(value) // num_machines
        value[:] = [value[i % per] for i in range(len(value))]
        folded.append(name)
    return folded


def simulated_ranks(engine: Any, hw: Any, cluster: Any, rank_works: Sequence[Any] | None,
                    same: Callable[[Any, Any, int], bool] | None = None) -> tuple[Representatives, Rendezvous]:
    """The set-up every rank-parallel run shares: which ranks to simulate (:func:`representatives`), the hardware
    folded onto machine 0 when only its ranks are (:func:`fold_machines`), and the barriers those ranks meet at,
    each standing for the machines it represents (:class:`~simulator.engine.Rendezvous`, with the cluster's
    ``jitter_s``).

    Args:
        engine: the run's engine; hw: its hardware model (before any flow starts); cluster: the ClusterSpec.
        rank_works, same: see :func:`representatives`.
    """
    represent = representatives(cluster.num_machines, cluster.gpus_per_machine, rank_works, same)
    if represent.folded:
        fold_machines(hw, cluster.num_machines)
    return represent, Rendezvous(engine, len(represent.ranks), cluster.jitter_s, represent.num_machines_represented)
