"""Run a stored study's trials in memory and write each finished trial to the storage in one transaction.

Optuna's ``study.optimize`` on an RDB storage writes as the trial runs: creating the trial, every ``suggest_*``
(one parameter each), every user attribute, the constraint, the heartbeat and the final state each commit a
transaction of their own, about fifteen per trial here. On SQLite each commit costs an fsync and the ORM's work;
measured on this project's 2-core machine (``benchmarks/bench_scale.py`` part 3 and /tmp runs of the same objective
with no simulation), that is ~0.1-0.3 s per trial, as much as a fast simulation.

So the trials run on an in-memory study (same sampler, same seed, same direction) that starts with every finished
trial of the stored study (a resumed study samples as before), and each trial, once finished, is copied to the
storage with ``Study.add_trial`` (one transaction: parameters, attributes, constraint, values, state and its
start and end times). Before each next trial the finished trials other processes added meanwhile are read (one
query, incremental through Optuna's cached storage) and added to the in-memory study, so several processes still
share one study: each samples with everything finished so far, as Optuna's samplers do on a shared RDB (TPE
ignores running trials unless ``constant_liar``). A process killed mid-trial leaves nothing for that trial in the
storage (the stored study's heartbeats and ``fail_stale_trials`` still handle trials other clients leave RUNNING).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable

import optuna

WRITER_ATTR = "gnnplan:writer"
"""System attribute of a stored trial: the id of the :class:`MirroredRun` that wrote it (to skip its own trials
when reading back what other processes added)."""
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)


class MirroredRun:
    """The in-memory twin of a stored study (module docstring).

    Args:
        stored: the study on the shared storage (its sampler is not used).
        sampler: the sampler of the in-memory study.
    """

    def __init__(self, stored: optuna.Study, sampler: optuna.samplers.BaseSampler) -> None:
        self.stored = stored
        self.memory = optuna.create_study(sampler=sampler, directions=stored.directions)
        self.writer = uuid.uuid4().hex
        self._seen: set[int] = set()
        self._own: set[int] = set()
        self._written: set[int] = set()
        self.pull()

    def pull(self) -> int:
        """Add the stored study's finished trials not yet in memory (other processes' and, on the first call, those
        of earlier runs) to the in-memory study; returns how many were added."""
        added = 0
        for t in self.stored.get_trials(deepcopy=False, states=FINISHED):
            if t.number in self._seen:
                continue
            self._seen.add(t.number)
            if t.system_attrs.get(WRITER_ATTR) == self.writer:
                continue
            self.memory.add_trial(t)
            added += 1
        return added

    def push(self) -> int:
        """Write this process's finished trials not yet stored, each in one transaction; returns how many."""
        count = 0
        for t in self.memory.get_trials(deepcopy=False, states=FINISHED):
            if t.number not in self._own or t.number in self._written:
                continue
            frozen = copy.deepcopy(t)
            frozen.system_attrs = {**frozen.system_attrs, WRITER_ATTR: self.writer}
            self.stored.add_trial(frozen)
            self._written.add(t.number)
            count += 1
        return count

    def optimize(self, objective: Callable[[optuna.Trial], float], n_trials: int,
                 show_progress_bar: bool = False) -> optuna.Study:
        """Run ``n_trials`` trials of ``objective`` in memory, writing each to the storage as it finishes (also
        the failed trial when ``objective`` raises, before the error propagates); returns the stored study."""

        def own(trial: optuna.Trial) -> float:
            self._own.add(trial.number)
            return objective(trial)

        def after(_: optuna.Study, __: optuna.trial.FrozenTrial) -> None:
            self.push()
            self.pull()

        try:
            self.memory.optimize(own, n_trials=n_trials, show_progress_bar=show_progress_bar, catch=(),
                                 callbacks=[after])
        finally:
            self.push()
        return self.stored
