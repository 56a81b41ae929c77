"""What a study's trials share: results of configurations already simulated and the contexts they ran in.

A study's sampler proposes the same configuration again and again (TPE draws categorical and integer knobs from
the same few good values; most strategies' knobs are all categorical or integer). The simulator is deterministic
(its statistics are measured once with fixed seeds and cached, its event engine is seeded), so a configuration
equal to one already simulated has the same result: it is answered from the memo, not simulated again
(memoisation of a pure function; Michie, "Memo functions and machine learning", Nature 218, 1968). Equal means
the same candidate label and the same validated knobs (``Knobs.model_dump``, floats compared exactly: the
tuner's table merges near-equal floats for display, the memo never does), so a memoised value is the very value
a fresh simulation returns.

The simulation context (:func:`gnnplan.simulator.api.load_context`: cluster and workload checks, dataset sizes,
mini-batch statistics read from the disk cache, a card's estimation notes) depends on the candidate, the batch
size and the partitioner only; it is built once per such triple and reused by every trial that has them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from gnnplan.simulator.api import load_context, simulate_in_context
from gnnplan.simulator.hardware.spec import ClusterSpec
from gnnplan.simulator.result import SimResult
from gnnplan.simulator.strategies.base import SimContext, batch_size_of
from gnnplan.simulator.workload.spec import WorkloadSpec


def memo_key(label: str, knobs: BaseModel) -> str:
    """The identity of a configuration for the memo: candidate label and every knob, exactly (JSON, sorted)."""
    return json.dumps([label, knobs.model_dump(mode="json")], sort_keys=True)


@dataclass
class Outcome:
    """One trial's simulation, fresh or memoised.

    Attributes:
        result: the simulation result (the same object for every trial of one configuration).
        reused: whether it came from the memo (no simulation ran for this trial).
        setup_s: wall seconds this trial spent building the simulation context (0 when cached or reused).
        simulate_s: wall seconds of the strategy's ``simulate`` in this trial (0 when reused).
    """

    result: SimResult
    reused: bool
    setup_s: float
    simulate_s: float


@dataclass
class TrialCache:
    """Per-study memo of results and contexts (module docstring); one per process running the study.

    Attributes:
        results: memo key (:func:`memo_key`) -> result.
        contexts: (candidate label, batch size, partitioner) -> (strategy module, context).
        simulated, reused: trials simulated and trials answered from the memo so far.
        setup_s, simulate_s: wall seconds spent building contexts and in the strategies' ``simulate`` so far.
    """

    results: dict[str, SimResult] = field(default_factory=dict)
    contexts: dict[tuple[str, int, str], tuple[ModuleType, SimContext]] = field(default_factory=dict)
    simulated: int = 0
    reused: int = 0
    setup_s: float = 0.0
    simulate_s: float = 0.0

    def run(self, cluster: ClusterSpec, label: str, strategy: str, workload: WorkloadSpec,
            knobs: BaseModel) -> Outcome:
        """The result of ``strategy`` with ``knobs`` for candidate ``label``: from the memo, or simulated in the
        (cached) context, as :func:`gnnplan.simulator.api.simulate` does (``estimated`` set from the context unless
        the strategy set it; ``sim_wall_s`` here counts the simulation and, on the context's first use, building
        it).

        Args:
            cluster: the study's cluster (the same for every call on one cache).
            label: the candidate label (``dp``, ``ppgnn/sgc``), which fixes ``strategy`` and ``workload``.
            strategy: the strategy's name.
            workload: the candidate's workload.
            knobs: the trial's validated knobs (the strategy's ``Knobs``).

        Raises:
            SpecError: see :func:`gnnplan.simulator.api.load_context`.
        """
        key = memo_key(label, knobs)
        found = self.results.get(key)
        if found is not None:
            self.reused += 1
            return Outcome(found, True, 0.0, 0.0)
        started = time.perf_counter()
        batch = batch_size_of(knobs, workload)
        ctx_key = (label, int(batch), str(getattr(knobs, "partitioner", "metis")))
        if ctx_key not in self.contexts:
            module, _, ctx = load_context(cluster, workload, strategy, knobs)
            self.contexts[ctx_key] = (module, ctx)
        module, ctx = self.contexts[ctx_key]
        ready = time.perf_counter()
        result = simulate_in_context(module, knobs, ctx)
        done = time.perf_counter()
        result.sim_wall_s = done - started
        self.results[key] = result
        self.simulated += 1
        self.setup_s += ready - started
        self.simulate_s += done - ready
        return Outcome(result, False, ready - started, done - ready)

    def summary(self) -> dict[str, Any]:
        """Counters for reports: simulated, reused, contexts, setup_s, simulate_s."""
        return {"simulated": self.simulated, "reused": self.reused, "contexts": len(self.contexts),
                "setup_s": self.setup_s, "simulate_s": self.simulate_s}
