"""What a local run of a plan should tell its user before and after it trains: where the run's layout or device
is not the one the plan was tuned for, so that the plan's prediction is not the run's (``gnnplan run`` prints
these lines on stderr; the Python API :func:`gnnplan.run` raises them as :class:`RunNote` warnings)."""

from __future__ import annotations

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


def prediction_for_run(plan: Plan, layout: str | None, device: str | None) -> tuple[float | None, str | None]:
    """The plan's predicted epoch time (s) to set beside a run of it, or None with why not: the run's
    ``layout`` or ``device`` note (:func:`layout_note`, :func:`device_note`) says it is not the configuration
    predicted, or the plan holds no prediction of its configuration (:func:`simulator.plan.predicted_epoch_s`)."""
    if layout or device:
        return None, "the run is not the configuration the plan predicts (the notes above)"
    return predicted_epoch_s(plan)
