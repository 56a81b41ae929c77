"""What a simulation returns: the ``simulate --json`` contract of DESIGN.md, plus the predicted spans.

Keys (all SI units): ``strategy, knobs, feasible, reason, epoch_time_s, iteration_time_s, num_iterations,
breakdown_s{phase: s}, bytes_per_epoch{pcie, nvlink, network, storage}, peak_memory_bytes{gpu, host},
sim_wall_s``, ``peak_memory_parts{gpu, host}{part: bytes}`` (what the peak is made of: per GPU and per
machine's host, named by the strategy's memory model) and, for a dataset card, ``estimated``
(:func:`simulator.workload.proxy_estimated.estimated`); where the strategy prices its evaluation,
``peak_memory_phases{training, evaluation}{gpu, host}`` (``peak_memory_bytes`` is then the larger of the two per
memory) and ``evaluation_time_s`` (one evaluation after an epoch, not part of ``epoch_time_s``;
:mod:`simulator.strategies.inference_time`).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gnnplan.simulator.trace import Span

LINKS = ("pcie", "nvlink", "network", "storage")
ONE_OFF_PHASES = ("preprocess",)
"""Phases of ``breakdown_s`` done once before training, not in every epoch nor in ``epoch_time_s`` (ppgnn's
pre-propagation: simulator/strategies/ppgnn)."""


class SimResult(BaseModel):
    """One simulated configuration.

    ``breakdown_s`` holds, per phase, the time of the slowest worker summed over one epoch, from each span's start to
    its end as the executor records it (a collective's span holds its wait for the other workers, a load overlapped
    with compute its wait for the GPU or the buffer; phases may overlap, so the parts can add up to more than
    ``epoch_time_s``), and the one-off phases' seconds
    (:data:`ONE_OFF_PHASES`, not part of an epoch). ``nested_phases`` maps a phase of ``breakdown_s`` whose spans
    lie inside another's to that phase (dp's ``fetch`` inside ``load``): its time is part of the other's, not
    beside it. ``bytes_per_epoch`` sums all workers'
    traffic on each link kind. ``peak_memory_bytes`` is per GPU and per machine's host memory. ``notes`` is what
    a reader of the prediction should know of its configuration (:func:`simulator.api.simulate` says there when the
    batch is larger than the training set: :func:`simulator.strategies.base.oversized_batch_note`). An infeasible
    configuration has ``feasible = False``, a ``reason`` and still carries its memory estimate; its times are
    ``inf``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    strategy: str
    knobs: dict[str, Any]
    feasible: bool
    reason: str = ""
    epoch_time_s: float
    iteration_time_s: float
    num_iterations: int
    breakdown_s: dict[str, float] = Field(default_factory=dict)
    nested_phases: dict[str, str] = Field(default_factory=dict)
    bytes_per_epoch: dict[str, float] = Field(default_factory=lambda: {k: 0.0 for k in LINKS})
    peak_memory_bytes: dict[str, float] = Field(default_factory=lambda: {"gpu": 0.0, "host": 0.0})
    sim_wall_s: float = 0.0
    estimated: dict[str, Any] | None = None
    peak_memory_phases: dict[str, dict[str, float]] | None = None
    peak_memory_parts: dict[str, dict[str, float]] | None = None
    evaluation_time_s: float | None = None
    notes: list[str] = Field(default_factory=list)
    spans: list[Span] = Field(default_factory=list, exclude=True)

    @field_validator("epoch_time_s", "iteration_time_s", mode="before")
    @classmethod
    def _null_is_infeasible(cls, value: Any) -> Any:
        """``null`` reads back as ``inf``: :meth:`to_json_dict` writes an infeasible result's times so (strict
        JSON has no infinity), and ``SimResult.model_validate`` of that object must give the result back."""
        return math.inf if value is None else value

    @classmethod
    def infeasible(cls, reason: str, **fields: Any) -> SimResult:
        """A configuration that does not fit: infinite times, the reason, and the other ``fields``."""
        return cls(feasible=False, reason=reason, epoch_time_s=math.inf, iteration_time_s=math.inf, **fields)

    def to_json_dict(self) -> dict[str, Any]:
        """The contract object (spans excluded; ``inf`` rendered as ``null``; ``estimated`` only when the
        dataset is a card: which statistics came from its synthetic proxy and how; ``peak_memory_phases`` and
        ``evaluation_time_s`` only where the strategy prices its evaluation; ``notes`` only when there are some;
        ``one_off_phases``: the phases of ``breakdown_s`` done once before training, not part of an epoch
        (:data:`ONE_OFF_PHASES`), only when it has some)."""
        out = self.model_dump(mode="json")
        for optional in ("estimated", "peak_memory_phases", "peak_memory_parts", "evaluation_time_s", "notes"):
            if out.get(optional) in (None, []):
                out.pop(optional, None)
        for key in ("epoch_time_s", "iteration_time_s"):
            if out[key] in (float("inf"), "Infinity"):
                out[key] = None
        one_off = [phase for phase in ONE_OFF_PHASES if phase in self.breakdown_s]
        if one_off:  # a reader summing breakdown_s into an epoch leaves these out
            out["one_off_phases"] = one_off
        return out
