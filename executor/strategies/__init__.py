"""Executor strategies: one module per strategy, named like the simulator plug-in, with the same ``Knobs``.

Every simulated strategy has one (tests/strategies/test_conformance.py checks it).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gnnplan.simulator.errors import SpecError

EXECUTORS = {name: f"gnnplan.executor.strategies.{name}" for name in ("dp", "hopgnn", "neutronstar", "ppgnn")}
"""Strategy name -> module implementing it for real."""


def get_executor(name: str) -> ModuleType:
    """The executor module of a strategy.

    Raises:
        SpecError: the strategy has no executor.
    """
    if name not in EXECUTORS:
        raise SpecError(f"strategy: {name!r} cannot be run by the executor; runnable: {', '.join(EXECUTORS)}")
    return importlib.import_module(EXECUTORS[name])
