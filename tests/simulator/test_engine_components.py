"""The fluid scheduler's incremental max-min (per connected component, grouped flows, one fill per instant, a
completion heap) against the reference: progressive filling over ALL active flows after every single start or
finish (the scheduler gnnplan used before, kept here verbatim on the engine's :func:`max_min_rates`)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import pytest
import simpy

from gnnplan.simulator.engine import Engine, FluidResource
from gnnplan.simulator.fluid import _REL_TOL, INF, _Flow, max_min_rates


class GlobalFluidScheduler:
    """The reference: every start and finish advances every flow and refills every rate."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._flows: list[_Flow] = []
        self._last = 0.0
        self._version = 0

    def start(self, resources: Any, amount: float, cap: float = INF) -> simpy.Event:
        event = self.env.event()
        res = tuple(resources)
        if amount <= 0 or not res:
            event.succeed()
            return event
        self._advance()
        self._flows.append(_Flow(res, float(amount), float(cap), event, remaining=float(amount)))
        self._reschedule()
        return event

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
            return
        self._advance()
        done = [f for f in self._flows if f.remaining <= _REL_TOL * f.amount or f.remaining / f.rate <= 1e-15]
        if not done:
            done = [min(self._flows, key=lambda f: f.remaining / f.rate)]
        for f in done:
            self._flows.remove(f)
            f.event.succeed()
        self._reschedule()


def random_case(seed: int) -> tuple[list[FluidResource], list[list[tuple[float, tuple[int, ...], float, float]]]]:
    """Resources and chains of flows: chain c waits ``delay`` then runs its flows one after the other (a chain
    restarts at the instant its previous flow finished, as a process does). Some capacities are equal and some
    start times coincide, so simultaneous saturations and same-instant starts occur."""
    rng = np.random.default_rng(seed)
    nres = int(rng.integers(3, 12))
    caps = rng.choice([1.0, 2.0, 0.5, 3.7], size=nres) if seed % 2 else rng.uniform(0.5, 4.0, size=nres)
    resources = [FluidResource(f"r{i}", float(c)) for i, c in enumerate(caps)]
    chains = []
    for _ in range(int(rng.integers(2, 25))):
        chain = []
        for _ in range(int(rng.integers(1, 5))):
            k = int(rng.integers(1, 4))
            res = tuple(int(i) for i in rng.choice(nres, size=k, replace=bool(rng.random() < 0.2)))
            amount = float(rng.choice([1.0, 2.0])) if rng.random() < 0.3 else float(rng.uniform(0.01, 5.0))
            cap = float(rng.uniform(0.1, 2.0)) if rng.random() < 0.25 else INF
            delay = float(rng.choice([0.0, 0.5, 1.0])) if rng.random() < 0.5 else float(rng.uniform(0.0, 3.0))
            chain.append((delay, res, amount, cap))
        chains.append(chain)
    return resources, chains


def run(case: Any, reference: bool) -> list[list[float]]:
    """Completion time of every flow of every chain."""
    resources, chains = case
    engine = Engine()
    fluid = GlobalFluidScheduler(engine.env) if reference else engine.fluid
    done = [[0.0] * len(c) for c in chains]

    def proc(c: int) -> Generator[Any, Any, None]:
        for k, (delay, res, amount, cap) in enumerate(chains[c]):
            if delay:
                yield engine.timeout(delay)
            yield fluid.start([resources[i] for i in res], amount, cap)
            done[c][k] = engine.now

    for c in range(len(chains)):
        engine.process(proc(c))
    engine.run()
    assert fluid is engine.fluid and engine.fluid.num_active == 0 or reference
    return done


@pytest.mark.parametrize("seed", range(60))
def test_completion_times_equal_the_global_recomputation(seed: int) -> None:
    case = random_case(seed)
    got, want = run(case, reference=False), run(case, reference=True)
    assert np.allclose(np.concatenate(got), np.concatenate(want), rtol=1e-9, atol=0.0)


def test_independent_components_keep_their_rates_and_flows_in_one_group_share() -> None:
    # a and b never meet: b's two identical flows halve each other, a's flow is untouched (exact times).
    engine = Engine()
    a, b = FluidResource("a", 2.0), FluidResource("b", 1.0)
    times: dict[str, float] = {}

    def one(name: str, res: list[FluidResource], amount: float, at: float) -> Generator[Any, Any, None]:
        yield engine.timeout(at)
        yield engine.fluid.start(res, amount)
        times[name] = engine.now

    for args in (("a", [a], 4.0, 0.0), ("b1", [b], 1.0, 0.0), ("b2", [b], 1.0, 0.0), ("b3", [b], 0.5, 1.0)):
        engine.process(one(*args))
    engine.run()
    # a: 4/2 = 2 s alone; b1, b2: 0.5 each by t = 1, then b3 joins: three flows at 1/3 -> b3 ends at 2.5,
    # b1 and b2 have 0.5 - 0.5 = 0 left at 2.5 too.
    assert times == {"a": pytest.approx(2.0, rel=1e-12), "b1": pytest.approx(2.5, rel=1e-12),
                     "b2": pytest.approx(2.5, rel=1e-12), "b3": pytest.approx(2.5, rel=1e-12)}


def test_changes_of_one_instant_are_filled_once() -> None:
    # 10 processes each send two 1-unit flows on one link, one after the other: a fill at t = 0 for the ten
    # starts, one at t = 10 for the ten finishes and the ten starts they trigger, one at t = 20 for the end.
    engine = Engine()
    link = FluidResource("l", 1.0)
    calls = []
    fill = engine.fluid._fill

    def counting(event: Any = None) -> None:
        calls.append(engine.now)
        fill(event)

    def two() -> Generator[Any, Any, None]:
        yield engine.fluid.start([link], 1.0)
        yield engine.fluid.start([link], 1.0)

    engine.fluid._fill = counting  # type: ignore[method-assign]
    for _ in range(10):
        engine.process(two())
    engine.run()
    assert engine.now == pytest.approx(20.0, rel=1e-12)
    assert calls == [0.0, pytest.approx(10.0, rel=1e-12), pytest.approx(20.0, rel=1e-12)]
