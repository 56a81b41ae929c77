"""What a local run of a plan should tell its user before and after it trains: where the run's layout or device
is not the one the plan was tuned for, so that the plan's prediction is not the run's (``gnnplan run`` prints
these lines on stderr; the Python API :func:`gnnplan.run` raises them as :class:`RunNote` warnings)."""

from __future__ import annotations

from gnnplan.executor.emulate import QUOTA_SOURCE, SHAPED_SOURCE, MachineLimits
from gnnplan.simulator.plan import Plan, predicted_epoch_s
from gnnplan.simulator.wording import counted


class RunNote(UserWarning):
    """A run of a plan that is not the configuration the plan predicts (:func:`gnnplan.run`)."""


def layout_note(plan: Plan, nprocs: int, gpus_per_machine: int) -> str | None:
    """The note for a run as ``nprocs // gpus_per_machine`` machines x ``gpus_per_machine`` workers when the plan
    was tuned for another shape, else None (also when ``gpus_per_machine`` does not divide ``nprocs``: the run
    refuses that itself)."""
    shape = (nprocs // gpus_per_machine, gpus_per_machine)
    planned = (plan.cluster.num_machines, plan.cluster.gpus_per_machine)
    if shape == planned or nprocs % gpus_per_machine:
        return None
    unit = "worker" if plan.cluster.gpu.is_host_cpu else "GPU"
    return (f"running as {counted(shape[0], 'machine')} x {counted(shape[1], 'worker')}; the plan was tuned for "
            f"{counted(planned[0], 'machine')} x {counted(planned[1], unit)} of {plan.cluster.name}, so its "
            "prediction is not this run's (the trace records the layout run)")


def device_note(plan: Plan, has_cuda: bool) -> str | None:
    """The note for a plan of GPUs run without a CUDA device (its workers computed on the CPU), else None."""
    if plan.cluster.gpu.is_host_cpu or has_cuda:
        return None
    return (f"the plan is for {plan.cluster.name}'s {plan.cluster.gpu.model} GPUs and this machine has no CUDA "
            "device, so its workers computed on the CPU: the plan's prediction is not this run's (the trace records "
            "the device; calibrate it against local)")


def has_cuda() -> bool:
    """Whether a CUDA device is visible to this process."""
    import torch

    return bool(torch.cuda.is_available())


def prediction_for_run(plan: Plan, *notes: str | None) -> tuple[float | None, str | None]:
    """The plan's predicted epoch time (s) to set beside a run of it, or None with why not: a note on the run
    (:func:`layout_note`, :func:`device_note`, :func:`emulation_note`) says it is not the configuration predicted,
    or the plan holds no prediction of its configuration (:func:`simulator.plan.predicted_epoch_s`)."""
    if any(notes):
        return None, "the run is not the configuration the plan predicts (its notes say how)"
    return predicted_epoch_s(plan)


def after_run_notes(plan: Plan, num_workers: int, layout: str | None, emulation: str | None,
                    background: str | None) -> tuple[list[str], float | None, str | None]:
    """Every note on a finished run of ``plan`` by ``num_workers`` workers, in the order ``gnnplan run`` gives
    them (the non-empty of: ``layout`` and ``emulation`` as the caller found them, :func:`device_note`, the
    machine's ``background`` load, and a batch larger than the training set:
    :func:`simulator.strategies.base.oversized_batch_note`), and the plan's prediction (s) to set beside the run or
    why not (:func:`prediction_for_run`). The one list ``gnnplan run`` prints and :func:`gnnplan.run` returns."""
    from gnnplan.simulator.strategies.base import oversized_batch_note

    device = device_note(plan, has_cuda())
    batch = oversized_batch_note(plan.workload, num_workers, plan.knobs)
    predicted, why = prediction_for_run(plan, layout, emulation, device)
    return [n for n in (layout, emulation, device, background, batch) if n], predicted, why


EMULATED_SOURCE = "emulated machines (network namespaces"
"""What ``gnnplan probe --emulate`` writes in a cluster's ``sources`` (:mod:`executor.probe_emulated`): the mark of
an emulated cluster, with its CPU quota and NIC shaping (:data:`~executor.emulate.QUOTA_SOURCE`,
:data:`~executor.emulate.SHAPED_SOURCE`)."""


def emulation_note(plan: Plan, limits: MachineLimits | None, bandwidth_given: bool) -> str | None:
    """The note for a run whose machines are not the ones the plan's cluster measured, else None: an emulated
    cluster's plan run without emulation (``limits`` None: on this machine's loopback), or emulated machines with a
    ``--bandwidth`` (when ``bandwidth_given``; else the plan's own rate is used) or ``--cpu-quota`` other than the
    ones its cluster was probed with (read from its ``sources``, as ``probe --emulate`` wrote them:
    :data:`~executor.emulate.SHAPED_SOURCE`, :data:`~executor.emulate.QUOTA_SOURCE`; a cluster not probed so had
    neither)."""
    said = " ".join(plan.cluster.sources.values())
    if limits is None:
        return (f"{plan.cluster.name} is an emulated cluster (gnnplan probe --emulate) and this run is not emulated, "
                "so the plan's prediction is not this run's: run it with --emulate") if EMULATED_SOURCE in said \
            else None
    apart = []
    rate = limits.bandwidth_bytes_per_s
    if bandwidth_given and rate is not None and SHAPED_SOURCE.format(rate) not in said:
        apart.append(f"NICs shaped to {rate * 8:.4g} bit/s")
    quota = limits.cpu_quota_cores
    if quota is not None and QUOTA_SOURCE.format(quota) not in said:
        apart.append(f"a CPU quota of {quota:g} cores")
    elif quota is None and QUOTA_SOURCE.split("{")[0] in said:  # probed under a quota, run without one
        apart.append("no CPU quota")
    if not apart:
        return None
    return (f"the emulated machines run with {' and '.join(apart)}, which {plan.cluster.name} was not probed with, "
            "so the plan's prediction is not this run's (simulate the plan with --cluster-set, or probe --emulate "
            "with the same limits and tune on that)")
