"""The discrete-event engine: a simpy environment (clock in seconds), a seeded RNG, and fluid sharing of capacities.

Nothing here knows about GNNs. Strategies describe work as simpy processes; :mod:`simulator.hardware.model` turns
work into time using the two primitives below:

* :class:`Engine` wraps ``simpy.Environment`` (``now`` in seconds) and a seeded ``numpy.random.Generator``.
* :class:`~simulator.fluid.FluidScheduler` (``Engine.fluid``) shares resource capacities among concurrent
  *flows* with max-min fairness (a fluid model of processor sharing). A flow moves ``amount`` units (bytes, or
  core-seconds) through a set of resources (e.g. the sender's NIC and the receiver's NIC) at a rate that is
  max-min fair over all active flows, optionally capped (e.g. one sampler process cannot use more than one
  core); between starts and finishes every rate is constant, so each flow's completion time is exact for the
  fluid model (:mod:`simulator.fluid`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

import numpy as np
import simpy

from gnnplan.simulator.fluid import INF, FluidResource, FluidScheduler, max_min_rates

__all__ = ["INF", "Engine", "FluidResource", "FluidScheduler", "Rendezvous", "max_min_rates"]


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
