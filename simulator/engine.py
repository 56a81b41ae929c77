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

import math
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
    """Named all-party barriers: ``wait(key, party)`` returns an event that fires once ``num_parties`` processes
    have called ``wait`` with that key (a synchronous collective waits for its slowest participant).

    Stragglers (``jitter_s > 0``): a party that has worked ``T`` seconds since its previous barrier released
    arrives with a random delay of standard deviation ``sqrt(jitter_s * T)`` (independent across parties and
    barriers), so the barrier releases at the expected maximum of the arrivals
    (:func:`~gnnplan.simulator.order_stats.expected_max`), after the last deterministic arrival. The cluster field
    ``jitter_s`` documents the model; 0 (the presets) releases at the last arrival.

    Args:
        engine: the engine.
        num_parties: processes that meet at every key.
        jitter_s: arrival variance per second of work since the party's previous barrier (seconds).
        copies: how many identical ranks each party stands for (the machines a representative machine folds,
            :mod:`simulator.symmetry`): the maximum is over all of them.
    """

    def __init__(self, engine: Engine, num_parties: int, jitter_s: float = 0.0, copies: int = 1) -> None:
        self.engine, self.num_parties = engine, num_parties
        self.jitter_s, self.copies = float(jitter_s), int(copies)
        self._arrivals: dict[Any, list[tuple[int, float]]] = {}  # key -> (party, arrival s)
        self._events: dict[Any, simpy.Event] = {}
        self._released: dict[int, float] = {}
        self._straggled: dict[int, float] = {}

    def wait(self, key: Any, party: int) -> simpy.Event:
        """Party ``party`` arrives at ``key``; the returned event fires when the last party has arrived (plus the
        expected straggler delay when ``jitter_s > 0``)."""
        event = self._events.setdefault(key, self.engine.event())
        now = self.engine.now
        arrivals = self._arrivals.setdefault(key, [])
        arrivals.append((party, now))
        if len(arrivals) == self.num_parties:
            last = max(t for _, t in arrivals)
            delay = self._straggler_delay(arrivals, last)
            for p, _ in arrivals:
                self._released[p] = last + delay
                self._straggled[p] = self._straggled.get(p, 0.0) + delay
            if delay > 0:
                def release(_: object) -> None:
                    event.succeed()

                self.engine.timeout(delay).callbacks.append(release)
            else:
                event.succeed()
        return event

    def straggled_s(self, party: int) -> float:
        """Seconds party ``party`` has waited, over all its barriers so far, for the expected stragglers after the
        last deterministic arrival (0 without jitter)."""
        return self._straggled.get(party, 0.0)

    def straggler_args(self, party: int, since_s: float) -> dict[str, float]:
        """A span's ``straggler_s`` arg: what :meth:`straggled_s` grew by since it read ``since_s`` (none when 0).
        A real trace shows the stragglers as ranks arriving at a collective at different times, which calibration
        times the call from the last of (``calibrate_calls.call_row``); a simulated collective's span holds the
        expected straggler wait after the last deterministic arrival instead, so it says how much, and
        calibration leaves it out the same way."""
        grown = self.straggled_s(party) - since_s
        return {"straggler_s": grown} if grown > 0 else {}

    def _straggler_delay(self, arrivals: list[tuple[int, float]], last: float) -> float:
        """Seconds from the last arrival to the expected maximum of the noisy arrivals (0 without jitter)."""
        if self.jitter_s <= 0:
            return 0.0
        from gnnplan.simulator.order_stats import expected_max

        sds = [math.sqrt(self.jitter_s * max(0.0, t - self._released.get(p, 0.0))) for p, t in arrivals]
        means = [t for _, t in arrivals]
        return max(0.0, expected_max(means, sds, [self.copies] * len(means)) - last)
