"""What the tuner may run for a workload: (strategy, model) candidates.

Training semantics differ between strategies (DESIGN.md, "A strategy is one plug-in"): ``dp``, ``hopgnn`` and
``gsplit`` compute the same mini-batch gradient, ``hongtu`` and ``neutronstar`` the same full-graph gradient,
and ``ppgnn`` trains a different model (SGC or SIGN on pre-propagated features). The tuner compares the
strategies that accept the workload as given (its training mode in ``SUPPORTS``, its model in ``MODEL_ARCHS``).
When the user allows a model change it also compares the workload with its model swapped between message
passing and pre-propagation at the same depth: an L-layer message-passing GNN becomes SGC and SIGN with
R = L hops (``ppgnn``'s ``hops`` knob fixed to L), and an SGC / SIGN workload also runs as the other
pre-propagation model and as an L-layer GraphSAGE with its fanouts (10 per layer when it has none for every
layer). Such candidates are labelled ``<strategy>/<arch>`` and the tuner's output says the model changed.

Source of the depth correspondence: Wu et al., "Simplifying Graph Convolutional Networks" (SGC), ICML 2019, §3
(K-step propagation replaces K GCN layers); Frasca et al., "SIGN", 2020, §3 (r hops ~ an r-layer receptive field).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna

from gnnplan.simulator.api import coerce_knobs
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies import STRATEGIES, contract, get_strategy
from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS, WorkloadSpec

PRE_PROPAGATION_ARCHS = ("sgc", "sign")
DEFAULT_FANOUT = 10
"""Fanout per layer of the GraphSAGE alternative to an SGC / SIGN workload: the value of the shipped
workload presets (GraphSAGE's paper uses 25 and 10; Hamilton et al., NeurIPS 2017, §4.1)."""


@dataclass(frozen=True)
class Candidate:
    """One thing the tuner may choose.

    Attributes:
        label: the value of the trial's ``strategy`` parameter (``dp``, or ``ppgnn/sgc`` with a changed model).
        strategy: the strategy plug-in's name.
        workload: the workload this candidate runs (the user's, or the one with the model swapped).
        fixed_knobs: knob values the model swap implies (``ppgnn``'s ``hops``), applied over the suggestion.
    """

    label: str
    strategy: str
    workload: WorkloadSpec
    fixed_knobs: dict[str, Any] = field(default_factory=dict)
    model_changed: bool = False

    def default_params(self) -> dict[str, Any]:
        """The candidate's default knobs as trial parameters (``<strategy>.<knob>``, DESIGN.md), to enqueue so a
        study also tries the strategy as shipped. A knob that defaults to None is enqueued as None where the
        strategy's search space offers None (hopgnn's ``num_steps``: the runtime merge controller; neutronstar's
        ``cache_budget_bytes``: no budget), found by running its ``suggest`` on a throwaway trial with the other
        defaults fixed; elsewhere (``batch_size``: the workload's, unless the batch size is tuned) it is left to
        the sampler. Before 2026-11-30 every None knob was sampled, so the "default" trial could be another
        configuration (hopgnn at 8 steps: 57 ms where the default takes 11 ms)."""
        knobs = coerce_knobs(self.strategy, self.fixed_knobs or None).model_dump()
        params: dict[str, Any] = {"strategy": self.label,
                                  **{f"{self.strategy}.{k}": v for k, v in knobs.items() if v is not None}}
        unset = [f"{self.strategy}.{k}" for k, v in knobs.items() if v is None]
        if unset:
            level = optuna.logging.get_verbosity()
            optuna.logging.set_verbosity(optuna.logging.WARNING)  # the throwaway study is not news
            try:
                probe = optuna.create_study()
                probe.enqueue_trial(params)
                trial = probe.ask()
                get_strategy(self.strategy).suggest(trial, self.workload)
            finally:
                optuna.logging.set_verbosity(level)
            for name in unset:
                space = trial.distributions.get(name)
                if isinstance(space, optuna.distributions.CategoricalDistribution) and None in space.choices:
                    params[name] = None
        return params


def accepts(strategy: str, workload: WorkloadSpec) -> bool:
    """Whether a strategy can run a workload (:func:`gnnplan.simulator.strategies.contract.accepts`)."""
    return contract.accepts(get_strategy(strategy), workload)


def model_variants(workload: WorkloadSpec) -> list[tuple[WorkloadSpec, dict[str, Any]]]:
    """The workload with its model swapped (module docstring), each with the knobs the swap implies."""
    model, training = workload.model, workload.training
    out: list[tuple[WorkloadSpec, dict[str, Any]]] = []
    if model.arch in MESSAGE_PASSING_ARCHS:
        for arch in PRE_PROPAGATION_ARCHS:
            out.append((_with_model(workload, arch=arch), {"hops": model.num_layers}))
    else:
        other = [a for a in PRE_PROPAGATION_ARCHS if a != model.arch]
        out.extend((_with_model(workload, arch=a), {}) for a in other)
        fanouts = training.fanouts if len(training.fanouts) == model.num_layers else \
            [DEFAULT_FANOUT] * model.num_layers
        sage = _with_model(workload, arch="sage").model_copy(
            update={"training": training.model_copy(update={"fanouts": fanouts})})
        out.append((sage, {}))
    return out


def _with_model(workload: WorkloadSpec, **changes: Any) -> WorkloadSpec:
    return workload.model_copy(update={"model": workload.model.model_copy(update=changes)})


def candidates(workload: WorkloadSpec, requested: list[str] | None = None,
               allow_model_change: bool = False) -> tuple[Candidate, ...]:
    """Every (strategy, model) the tuner may choose for ``workload``.

    Args:
        workload: the user's workload.
        requested: strategy names to restrict to, in any order (None = all registered).
        allow_model_change: also consider the model swaps of :func:`model_variants`.

    Returns:
        Candidates, the user's model first, strategies in alphabetical order.

    Raises:
        SpecError: an unknown requested strategy, one that can run neither the workload nor (when allowed) a
            model swap of it, or no candidate at all.
    """
    names = sorted(set(requested or STRATEGIES))  # in one order however they were listed: the study's strategy
    # choice is a categorical whose choices Optuna keeps in order (a resumed study listed otherwise was refused)
    variants: list[tuple[WorkloadSpec, dict[str, Any]]] = [(workload, {})]
    if allow_model_change:
        variants += model_variants(workload)
    out: list[Candidate] = []
    for name in names:
        found = False
        for i, (wl, fixed) in enumerate(variants):
            if accepts(name, wl):
                label = name if i == 0 else f"{name}/{wl.model.arch}"
                out.append(Candidate(label, name, wl, fixed, model_changed=i > 0))
                found = True
        if requested and not found:
            raise SpecError(_rejection(name, workload, allow_model_change))
    if not out:
        raise SpecError(f"--strategies: no strategy runs training.mode {workload.training.mode!r} with "
                        f"model.arch {workload.model.arch!r}")
    out.sort(key=lambda c: c.model_changed)
    return tuple(out)


def _rejection(name: str, workload: WorkloadSpec, allow_model_change: bool) -> str:
    module = get_strategy(name)
    mode = workload.training.mode
    if mode not in module.SUPPORTS:
        return f"--strategies: {name!r} does not support training.mode {mode!r} (it supports " \
               f"{', '.join(module.SUPPORTS)})"
    hint = "" if allow_model_change else " (add --allow-model-change to let the tuner swap the model)"
    return f"--strategies: {name!r} cannot train model.arch {workload.model.arch!r}{hint}"
