"""The discrete-event engine: a simpy environment (clock in seconds), a seeded RNG, and fluid sharing of capacities.

Nothing here knows about GNNs. Strategies describe work as simpy processes; :mod:`simulator.hardware.model` turns
work into time using the two primitives below:

* :class:`Engine` wraps ``simpy.Environment`` (``now`` in seconds) and a seeded ``numpy.random.Generator``.
* :class:`FluidScheduler` shares resource capacities among concurrent *flows* with max-min fairness (a fluid
  model of processor sharing). A flow moves ``amount`` units (bytes, or core-seconds) through a set of
  resources (e.g. the sender's NIC and the receiver's NIC) at a rate that is max-min fair over all active
  flows, optionally capped (e.g. one sampler process cannot use more than one core). Rates are recomputed by
  progressive filling each time a flow starts or ends; between such events every rate is constant, so each
  flow's completion time is exact for the fluid model.

Source: max-min fairness and progressive filling: Bertsekas and Gallager, "Data Networks", 2nd ed., 1992,
§6.5.2; fluid processor sharing: Kleinrock, "Queueing Systems, Vol. 2", 1976, §4.4. Two equal flows on one link
each get half the bandwidth, so each takes twice as long as alone.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

INF = float("inf")
_REL_TOL = 1e-9


class Engine:
    """A simpy environment with the clock in seconds and a seeded RNG.

    Args:
        seed: seed of :attr:`rng`.
    """

    def __init__(self, seed: int = 0) -> None:
        self.env = simpy.Environment()
        self.rng = np.random.default_rng(seed)
        self.fluid = FluidScheduler(self.env)

    @property
    def now(self) -> float:
        """Simulated time in seconds."""
        return float(self.env.now)

    def process(self, generator: Generator[simpy.Event, Any, Any]) -> simpy.Process:
        """Start a simpy process."""
        return self.env.process(generator)

    def timeout(self, delay_s: float) -> simpy.Event:
        """An event that fires after ``delay_s`` seconds."""
        return self.env.timeout(max(0.0, delay_s))

    def event(self) -> simpy.Event:
        """A bare event, triggered with ``succeed()``."""
        return self.env.event()

    def all_of(self, events: Iterable[simpy.Event]) -> simpy.Event:
        """An event that fires when all ``events`` have fired."""
        return self.env.all_of(list(events))

    def run(self, until: float | simpy.Event | None = None) -> None:
        """Run until no events are left (or until a time / event)."""
        self.env.run(until=until)


class Rendezvous:
    """Named all-party barriers: ``wait(key)`` returns an event that fires once ``num_parties`` processes have
    called ``wait`` with that key (a synchronous collective waits for its slowest participant).

    Args:
        engine: the engine.
        num_parties: processes that meet at every key.
    """

    def __init__(self, engine: Engine, num_parties: int) -> None:
        self.engine, self.num_parties = engine, num_parties
        self._count: dict[Any, int] = {}
        self._events: dict[Any, simpy.Event] = {}

    def wait(self, key: Any) -> simpy.Event:
        """Arrive at ``key``; the returned event fires when the last party has arrived."""
        event = self._events.setdefault(key, self.engine.event())
        self._count[key] = self._count.get(key, 0) + 1
        if self._count[key] == self.num_parties:
            event.succeed()
        return event


@dataclass(eq=False)
class FluidResource:
    """A divisible capacity shared by flows (a link direction in bytes/s, or host cores in cores).

    Attributes:
        name: label for debugging.
        capacity: units per second (bytes/s for a link, cores for a CPU).
    """

    name: str
    capacity: float


@dataclass(eq=False)
class _Flow:
    resources: tuple[FluidResource, ...]
    amount: float
    cap: float
    event: simpy.Event
    remaining: float = 0.0
    rate: float = 0.0
    frozen: bool = field(default=False, repr=False)


class FluidScheduler:
    """Max-min fair sharing of :class:`FluidResource` capacities among active flows (see module docstring)."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._flows: list[_Flow] = []
        self._last = 0.0
        self._version = 0

    def start(self, resources: Iterable[FluidResource], amount: float, cap: float = INF) -> simpy.Event:
        """Start a flow now.

        Args:
            resources: every resource the flow crosses (it gets the same rate on all of them).
            amount: units to move (bytes, or core-seconds); <= 0 completes immediately.
            cap: maximum rate of this flow (e.g. 1 core), default unbounded.

        Returns:
            An event that fires when the flow has moved ``amount``.
        """
        event = self.env.event()
        res = tuple(resources)
        if amount <= 0 or not res:
            event.succeed()
            return event
        self._advance()
        self._flows.append(_Flow(res, float(amount), float(cap), event, remaining=float(amount)))
        self._reschedule()
        return event

    @property
    def num_active(self) -> int:
        """Flows in progress."""
        return len(self._flows)

    def _advance(self) -> None:
        now = float(self.env.now)
        dt = now - self._last
        if dt > 0:
            for f in self._flows:
                f.remaining -= f.rate * dt
        self._last = now

    def _reschedule(self) -> None:
        self._version += 1
        if not self._flows:
            return
        max_min_rates(self._flows)
        delay = min(f.remaining / f.rate for f in self._flows)
        version = self._version
        timer = self.env.timeout(max(0.0, delay))
        timer.callbacks.append(lambda _ev: self._wake(version))

    def _wake(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later start or finish
        self._advance()
        done = [f for f in self._flows if f.remaining <= _REL_TOL * f.amount or f.remaining / f.rate <= 1e-15]
        if not done:  # floating-point: finish the flow that is closest to done
            done = [min(self._flows, key=lambda f: f.remaining / f.rate)]
        for f in done:
            self._flows.remove(f)
            f.event.succeed()
        self._reschedule()


def max_min_rates(flows: list[_Flow]) -> None:
    """Set each flow's ``rate`` to its max-min fair share (progressive filling with per-flow caps).

    All unfrozen flows grow at the same pace until a resource saturates (its flows freeze) or a flow reaches its
    cap (that flow freezes). Source: Bertsekas and Gallager, "Data Networks", 1992, §6.5.2.

    Every unfrozen flow has the same rate (the filling level), so a flow's rate is the level at which it froze;
    each resource keeps the count of its unfrozen flows, so a filling step costs the resources still in use,
    not a pass over every flow's resources.
    """
    left: dict[FluidResource, float] = {}
    users: dict[FluidResource, int] = {}
    for f in flows:
        f.rate, f.frozen = 0.0, False
        for r in f.resources:
            if r in users:
                users[r] += 1
            else:
                left[r], users[r] = r.capacity, 1
    active, level = list(flows), 0.0
    while active:
        step = min(left[r] / n for r, n in users.items())
        step = min(step, min(f.cap for f in active) - level)
        level += step
        saturated = set()
        for r, n in users.items():
            left[r] -= step * n
            if left[r] <= _REL_TOL * r.capacity:
                saturated.add(r)
        still = []
        for f in active:
            if (f.cap < INF and f.cap - level <= _REL_TOL * f.cap) or any(r in saturated for r in f.resources):
                f.rate, f.frozen = level, True
                for r in f.resources:
                    users[r] -= 1
                    if not users[r]:
                        del users[r]
            else:
                still.append(f)
        for f in still:
            f.rate = level
        active = still
