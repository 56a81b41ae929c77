"""The typed contract every strategy plug-in satisfies (DESIGN.md, "A strategy is one plug-in").

A plug-in is a module (``strategies/<name>.py``) or a package (``strategies/<name>/``, its ``__init__`` the
plug-in) exposing the names of :class:`Strategy`. :func:`conforms` checks a module against it (the conformance
suite runs it over every registered strategy), and :func:`check_workload` is the one supported-workload check:
the workload's ``training.mode`` must be in the plug-in's ``SUPPORTS`` and its ``model.arch`` in
``MODEL_ARCHS``.

Adding a strategy: a simulator package ``strategies/<name>/`` with these names, an executor package
``executor/strategies/<name>/`` (``EXECUTOR`` names it) exposing ``NAME``, ``Knobs`` and ``Trainer``, one line in
:data:`gnnplan.simulator.strategies.STRATEGIES`, and its tests under ``tests/strategies/<name>/`` (README,
"Adding a strategy").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.phase_rules import PhaseRule
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies.base import PhaseProfile, SimContext
from gnnplan.simulator.workload.spec import WorkloadSpec

TRAINING_MODES = ("mini-batch", "full-graph")
"""Values of ``training.mode`` (DESIGN.md, "Workload YAML")."""


@runtime_checkable
class Strategy(Protocol):
    """What a strategy plug-in module provides.

    Attributes:
        NAME: the strategy's name (``dp``, ``hopgnn``, ``gsplit``, ``hongtu``, ``neutronstar``, ``ppgnn``).
        EXECUTOR: dotted module path of the executor plug-in that runs it for real (exposing the same ``NAME``
            and ``Knobs``), or None for a strategy that is only simulated.
        SUPPORTS: the training modes it runs (subset of :data:`TRAINING_MODES`).
        MODEL_ARCHS: the ``model.arch`` values it trains.
        NEEDS_SAMPLE_STATS: whether :func:`gnnplan.simulator.api.load_context` measures mini-batch statistics.
        Knobs: a frozen pydantic model (``extra="forbid"``), each field documented.
        CALIBRATION: trace phase -> :class:`~gnnplan.simulator.hardware.phase_rules.PhaseRule`: which priced
            operation a span of that phase is and the work it carries; calibration reads nothing else.
    """

    NAME: str
    EXECUTOR: str | None
    SUPPORTS: tuple[str, ...]
    MODEL_ARCHS: tuple[str, ...]
    NEEDS_SAMPLE_STATS: bool
    Knobs: type[BaseModel]
    CALIBRATION: Mapping[str, PhaseRule]

    def suggest(self, trial: Any, workload: WorkloadSpec, tune_batch_size: bool = False) -> BaseModel:
        """The Optuna search space (parameter names ``<NAME>.<knob>``); returns this trial's knobs."""
        ...

    def simulate(self, ctx: SimContext, knobs: Any) -> SimResult:
        """One epoch on the hardware model: the ``simulate --json`` result with its spans."""
        ...

    def compute_profile(self, ctx: SimContext, knobs: Any) -> dict[str, PhaseProfile]:
        """Per compute phase (forward, backward, optimizer), seconds per FLOP and kernels per span (for
        calibration); empty when the strategy records no compute spans."""
        ...


def conforms(module: Any) -> list[str]:
    """What a plug-in module lacks or gets wrong against :class:`Strategy` (empty = conforms)."""
    problems = [f"missing {name}" for name in ("NAME", "EXECUTOR", "SUPPORTS", "MODEL_ARCHS", "NEEDS_SAMPLE_STATS",
                                               "Knobs", "CALIBRATION", "suggest", "simulate", "compute_profile")
                if not hasattr(module, name)]
    if problems:
        return problems
    if not isinstance(module.NAME, str) or not module.NAME:
        problems.append("NAME must be a non-empty string")
    if module.EXECUTOR is not None and not (isinstance(module.EXECUTOR, str) and module.EXECUTOR):
        problems.append("EXECUTOR must be a dotted module path or None")
    if not module.SUPPORTS or not set(module.SUPPORTS) <= set(TRAINING_MODES):
        problems.append(f"SUPPORTS {module.SUPPORTS} must be a non-empty subset of {TRAINING_MODES}")
    if not module.MODEL_ARCHS or not all(isinstance(a, str) for a in module.MODEL_ARCHS):
        problems.append(f"MODEL_ARCHS {module.MODEL_ARCHS} must be a non-empty tuple of model.arch values")
    if not isinstance(module.NEEDS_SAMPLE_STATS, bool):
        problems.append("NEEDS_SAMPLE_STATS must be a bool")
    if not all(callable(getattr(module, f)) for f in ("suggest", "simulate", "compute_profile")):
        problems.append("suggest, simulate and compute_profile must be functions")
    if not (isinstance(module.Knobs, type) and issubclass(module.Knobs, BaseModel)):
        return problems + ["Knobs must be a pydantic model"]
    config = module.Knobs.model_config
    if not (config.get("frozen") and config.get("extra") == "forbid"):
        problems.append("Knobs must be frozen with extra='forbid'")
    undocumented = [n for n, f in module.Knobs.model_fields.items() if not f.description]
    if undocumented:
        problems.append(f"undocumented knobs: {', '.join(undocumented)}")
    if not isinstance(module.CALIBRATION, Mapping):
        return problems + ["CALIBRATION must map trace phases to PhaseRule"]
    bad_rules = [p for p, r in module.CALIBRATION.items() if not isinstance(r, PhaseRule)]
    if bad_rules:
        problems.append(f"CALIBRATION entries that are not PhaseRule: {', '.join(bad_rules)}")
    return problems


def check_workload(module: Any, workload: WorkloadSpec) -> None:
    """The one supported-workload check of every strategy.

    Raises:
        SpecError: ``training.mode`` not in ``module.SUPPORTS`` or ``model.arch`` not in ``module.MODEL_ARCHS``
            (one line naming the field and the allowed values).
    """
    mode, arch = workload.training.mode, workload.model.arch
    if mode not in module.SUPPORTS:
        raise SpecError(f"training.mode: strategy {module.NAME} supports {', '.join(module.SUPPORTS)}, got {mode!r}")
    if arch not in module.MODEL_ARCHS:
        raise SpecError(f"model.arch: strategy {module.NAME} supports {', '.join(module.MODEL_ARCHS)}, got {arch!r}")


def accepts(module: Any, workload: WorkloadSpec) -> bool:
    """Whether :func:`check_workload` passes."""
    try:
        check_workload(module, workload)
    except SpecError:
        return False
    return True
