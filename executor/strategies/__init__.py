"""Executor strategies: one module per strategy, named like the simulator plug-in, with the same ``NAME`` and
``Knobs``.

There is no list here: the registry is :data:`gnnplan.simulator.strategies.STRATEGIES`, and a plug-in's
``EXECUTOR`` names the module that runs it (None: simulated only). tests/strategies/test_conformance.py checks
that every such module imports and matches its plug-in.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies import STRATEGIES


def runnable() -> list[str]:
    """Names of the registered strategies the executor can run (their plug-in names an ``EXECUTOR``)."""
    return [name for name, module in STRATEGIES.items() if getattr(module, "EXECUTOR", None)]


def get_executor(name: str) -> ModuleType:
    """The executor module of a strategy (its plug-in's ``EXECUTOR``).

    Raises:
        SpecError: an unknown strategy or one without an executor.
    """
    path = getattr(STRATEGIES.get(name), "EXECUTOR", None)
    if not path:
        raise SpecError(f"strategy: {name!r} cannot be run by the executor; runnable: {', '.join(runnable())}")
    return importlib.import_module(path)
