"""Strategy plug-ins: one module per strategy, registered in ``STRATEGIES`` (DESIGN.md, "A strategy is one plug-in").

Each module provides ``NAME``, a frozen pydantic ``Knobs`` model, ``SUPPORTS`` (training modes / model kinds),
``suggest(trial, workload, tune_batch_size) -> Knobs`` and ``simulate(ctx, knobs) -> SimResult``; optionally
``check_workload(workload)``, ``NEEDS_SAMPLE_STATS = False`` and ``compute_profile(ctx, knobs)`` (calibration).
"""

from __future__ import annotations

from types import ModuleType

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies import dp, hopgnn, neutronstar, ppgnn

STRATEGIES: dict[str, ModuleType] = {m.NAME: m for m in (dp, hopgnn, neutronstar, ppgnn)}


def get_strategy(name: str) -> ModuleType:
    """Look up a strategy plug-in by name.

    Raises:
        SpecError: unknown name (the message lists the known ones).
    """
    if name not in STRATEGIES:
        raise SpecError(f"strategy: unknown strategy {name!r}; allowed: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]
