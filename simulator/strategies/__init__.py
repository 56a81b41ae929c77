"""Strategy plug-ins: one module per strategy, registered in ``STRATEGIES`` (DESIGN.md, "A strategy is one plug-in").

Each module satisfies :class:`~gnnplan.simulator.strategies.contract.Strategy` (``NAME``, ``EXECUTOR``,
``SUPPORTS``, ``MODEL_ARCHS``, ``NEEDS_SAMPLE_STATS``, ``Knobs``, ``CALIBRATION``, ``suggest``, ``simulate``,
``compute_profile``). ``STRATEGIES`` is the one registry: the executor finds a strategy's module through its
``EXECUTOR``, the tuner and calibration through this mapping.
"""

from __future__ import annotations

from types import ModuleType

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies import dp, gsplit, hongtu, hopgnn, neutronstar, ppgnn

STRATEGIES: dict[str, ModuleType] = {m.NAME: m for m in (dp, hopgnn, neutronstar, ppgnn, gsplit, hongtu)}


def get_strategy(name: str, field: str = "strategy") -> ModuleType:
    """Look up a strategy plug-in by name.

    Raises:
        SpecError: unknown name, naming ``field`` (the message lists the known ones).
    """
    if not isinstance(name, str) or name not in STRATEGIES:
        raise SpecError(f"{field}: unknown strategy {name!r}; allowed: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]
