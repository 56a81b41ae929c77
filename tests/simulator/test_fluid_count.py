"""``FluidScheduler.start(..., count=n)``: n identical flows started as one give every flow (theirs and the
others') the same completion times as n separate starts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gnnplan.simulator.engine import Engine, FluidResource


def run(plan: list[tuple[float, tuple[int, ...], float, float, int]], bundled: bool) -> list[float]:
    """Start each (time, resources, amount, cap, n) of ``plan`` as n flows (one start with count=n if
    ``bundled``) on 4 shared resources; return every flow's completion time, in plan order."""
    engine = Engine()
    resources = [FluidResource(f"r{i}", c) for i, c in enumerate((10.0, 7.0, 3.0, 12.0))]
    done: list[list[float]] = [[] for _ in plan]

    def flow(i: int, at: float, res: tuple[int, ...], amount: float, cap: float, n: int) -> Any:
        yield engine.timeout(at)
        path = [resources[r] for r in res]
        starts = [engine.fluid.start(path, amount, cap, count=n)] if bundled else \
            [engine.fluid.start(path, amount, cap) for _ in range(n)]
        for event in starts:                    # separate flows: each one's own completion
            yield event
            done[i].extend([engine.now] * (n if bundled else 1))

    for i, step in enumerate(plan):
        engine.process(flow(i, *step))
    engine.run()
    assert engine.fluid.num_active == 0
    return [t for times in done for t in times]


def test_a_count_of_identical_flows_equals_separate_flows() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        plan = []
        for _ in range(8):
            res = tuple(sorted(rng.choice(4, size=int(rng.integers(1, 4)), replace=False).tolist()))
            cap = float(rng.choice([np.inf, 2.0]))
            plan.append((float(rng.integers(0, 3)), res, float(rng.uniform(1, 20)), cap, int(rng.integers(1, 5))))
        assert run(plan, bundled=True) == pytest.approx(run(plan, bundled=False), rel=1e-12, abs=1e-15)


def test_count_must_be_positive() -> None:
    engine = Engine()
    with pytest.raises(ValueError, match="count: 0 identical flows; must be >= 1"):
        engine.fluid.start([FluidResource("r", 1.0)], 1.0, count=0)
