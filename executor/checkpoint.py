"""Checkpoints of a run (``gnnplan run --checkpoint-every N``) and resuming from the last one (``--resume``).

Every ``N`` epochs (and after the last epoch) every rank saves, with ``torch.distributed.checkpoint`` (DCP):
the model's and the optimizer's state (``get_model_state_dict`` / ``get_optimizer_state_dict``: names, not
parameter ids) and its RNG states (torch CPU and CUDA, numpy's and Python's global generators, as tensors), plus a
``state.json`` (:mod:`executor.wire` JSON) with the epoch records so far, its spans (so a resumed run's trace and
results cover every epoch) and the trainer's own state (``extra_state()``, e.g. hopgnn's merge controller).
Everything else a trainer does is a function of ``(training.seed, epoch)``: seed schedules, DGL's sampling RNG
(re-seeded per epoch, :func:`executor.sampling.epoch_seed`) and hongtu's dropout masks, so a resumed run repeats
the uninterrupted one exactly (tests/executor/test_checkpoint.py compares the final weights).

Layout (each rank writes its own folder, so ranks on machines without a shared file system work alike)::

    DIR/run.json                     the plan it belongs to (without num_epochs) and the save interval
    DIR/epoch-000003/rank-0/         DCP files (.metadata, *.distcp) and state.json
    DIR/epoch-000003/rank-1/

Atomic: a rank writes ``DIR/epoch-E/.rank-R.tmp`` and renames it to ``rank-R`` once complete; an epoch is
complete when every rank's folder is there. After a save the ranks meet at a barrier, then each deletes its
folders older than the last :data:`KEEP` epochs, so at any moment every rank holds the newest complete epoch.
Resuming, the ranks agree on the newest epoch every one of them holds (an all-reduce of minima) and delete their
newer, incomplete ones. DCP's ``.metadata`` is a pickle it writes and reads itself; this module reads it only
from the run's own checkpoint folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnplan.executor import comm, wire
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_write, atomic_write_json
from gnnplan.simulator.plan import Plan

RUN_FILE = "run.json"
STATE_FILE = "state.json"
KEEP = 2
"""Complete epochs each rank keeps (module docstring)."""


@dataclass(frozen=True)
class Checkpointing:
    """Where and how often a run saves, and whether it resumes.

    Attributes:
        directory: the checkpoint folder.
        every: save after every ``every``-th epoch and after the last one (0 = never).
        resume: continue from the newest complete checkpoint in ``directory``.
    """

    directory: str
    every: int = 0
    resume: bool = False

    def due(self, epoch: int, num_epochs: int) -> bool:
        """Whether the run saves after ``epoch`` (0-based)."""
        return self.every > 0 and ((epoch + 1) % self.every == 0 or epoch == num_epochs - 1)


def epoch_dir(directory: str | Path, epoch: int) -> Path:
    """``DIR/epoch-EEEEEE``."""
    return Path(directory) / f"epoch-{epoch:06d}"


def rank_dir(directory: str | Path, epoch: int, rank: int) -> Path:
    """``DIR/epoch-EEEEEE/rank-R``: one rank's complete checkpoint of ``epoch``."""
    return epoch_dir(directory, epoch) / f"rank-{rank}"


def fingerprint(plan: Plan) -> dict[str, Any]:
    """What must not change between a run and its resumption: the plan without ``num_epochs`` and prediction."""
    data = plan.model_dump(mode="json")
    data.pop("prediction", None)
    data["workload"]["training"].pop("num_epochs", None)
    return data


def saved_epochs(directory: str | Path, rank: int) -> list[int]:
    """Epochs of which ``rank`` holds a complete checkpoint, ascending."""
    root = Path(directory)
    found = []
    for path in root.glob("epoch-*") if root.is_dir() else ():
        try:
            epoch = int(path.name.removeprefix("epoch-"))
        except ValueError:
            continue
        if (path / f"rank-{rank}" / STATE_FILE).is_file():
            found.append(epoch)
    return sorted(found)


def complete_epochs(directory: str | Path, num_ranks: int) -> list[int]:
    """Epochs every one of ``num_ranks`` ranks holds (on a shared file system), ascending."""
    common = set(saved_epochs(directory, 0))
    for rank in range(1, num_ranks):
        common &= set(saved_epochs(directory, rank))
    return sorted(common)


def prepare(options: Checkpointing, plan: Plan) -> Checkpointing:
    """Check the checkpoint folder before a run (on the launching machine or rank 0) and record the run in it.

    A fresh run that saves needs a folder without checkpoints (so a later ``--resume`` cannot pick up another
    run's epochs); ``--resume`` needs ``run.json`` of the same plan and a complete epoch. Without
    ``--checkpoint-every``, a resumed run saves as often as the run it continues.

    Returns:
        The options to run with.

    Raises:
        SpecError: a negative interval, a folder with another run's checkpoints, or nothing to resume.
    """
    if options.every < 0:
        raise SpecError(f"--checkpoint-every: must be >= 0 epochs, got {options.every}")
    root = Path(options.directory)
    if root.exists() and not root.is_dir():
        raise SpecError(f"--checkpoint-dir: {root} is not a folder")
    if not options.resume:
        if options.every and any(root.glob("epoch-*")):
            raise SpecError(f"--checkpoint-dir: {root} holds checkpoints of an earlier run; continue it with "
                            "--resume or choose another folder")
        if options.every:
            atomic_write_json(root / RUN_FILE, {"plan": fingerprint(plan), "every": options.every})
        return options
    try:
        recorded = json.loads((root / RUN_FILE).read_text())
    except (OSError, ValueError):
        raise SpecError(f"--resume: {root} holds no checkpoints ({RUN_FILE} missing or unreadable)") from None
    if recorded.get("plan") != fingerprint(plan):
        what = differing(recorded.get("plan"), fingerprint(plan))
        raise SpecError(f"--resume: the checkpoints in {root} belong to another plan ({what})")
    done = complete_epochs(root, plan.num_workers)
    if not done:
        raise SpecError(f"--resume: {root} holds no complete checkpoint of all {plan.num_workers} ranks")
    wanted = plan.workload.training.num_epochs
    if done[-1] + 1 > wanted:
        raise SpecError(f"--epochs: the run in {root} has done {done[-1] + 1} epochs already, more than {wanted}; "
                        f"resume with --epochs above {done[-1] + 1} to train more")
    return dataclasses.replace(options, every=options.every or int(recorded.get("every", 0)))


def differing(recorded: Any, current: dict[str, Any]) -> str:
    """What differs between a checkpoint folder's plan and this run's (both as :func:`fingerprint` gives them), as
    a clause: the number of workers and the cluster's shape (machines, GPUs per machine: a run with other
    ``--nprocs`` or ``--gpus-per-machine``), else the top-level fields that differ (``its cluster differs``,
    ``its cluster and knobs differ``)."""
    if not isinstance(recorded, dict):
        return "its plan differs"
    shape = ("num_workers",), ("cluster", "num_machines"), ("cluster", "gpus_per_machine")

    def at(data: dict[str, Any], path: tuple[str, ...]) -> Any:
        for key in path:
            data = data.get(key, {}) if isinstance(data, dict) else {}
        return data

    if any(at(recorded, p) != at(current, p) for p in shape):
        return (f"the workers differ: {at(recorded, shape[0])} as {at(recorded, shape[1])} machine(s) x "
                f"{at(recorded, shape[2])} there, {at(current, shape[0])} as {at(current, shape[1])} x "
                f"{at(current, shape[2])} here")
    keys = sorted(k for k in set(recorded) | set(current) if recorded.get(k) != current.get(k))
    if not keys:
        return "its plan differs"
    return f"its {keys[0]} differs" if len(keys) == 1 else f"its {', '.join(keys[:-1])} and {keys[-1]} differ"


def rng_state() -> dict[str, torch.Tensor]:
    """This process's RNG states as tensors: torch (CPU, and every CUDA device), numpy's and Python's global
    generators."""
    _, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    state = {"torch": torch.get_rng_state(), "numpy_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
             "numpy_rest": torch.tensor([pos, has_gauss, cached], dtype=torch.float64),
             "python_internal": torch.tensor(internal, dtype=torch.int64),
             "python_rest": torch.tensor([version, float("nan") if gauss is None else gauss], dtype=torch.float64)}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            state[f"cuda{i}"] = s
    return state


def set_rng_state(state: dict[str, torch.Tensor]) -> None:
    """Restore what :func:`rng_state` captured."""
    torch.set_rng_state(state["torch"])
    pos, has_gauss, cached = state["numpy_rest"].tolist()
    np.random.set_state(("MT19937", state["numpy_keys"].numpy().astype(np.uint32), int(pos), int(has_gauss), cached))
    version, gauss = state["python_rest"].tolist()
    random.setstate((int(version), tuple(int(v) for v in state["python_internal"].tolist()),
                     None if gauss != gauss else gauss))
    if torch.cuda.is_available():
        torch.cuda.set_rng_state_all([state[f"cuda{i}"] for i in range(torch.cuda.device_count())])


def _modules(trainer: Any) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The trainer's model (unwrapped) and optimizer (every executor trainer has ``model`` and ``optimizer``)."""
    return trainer.model, trainer.optimizer


def _dcp_state(trainer: Any) -> dict[str, Any]:
    """The tensors DCP saves into / loads into (the optimizer's state is created if it has none yet)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    model, optimizer = _modules(trainer)
    return {"model": get_model_state_dict(model), "optimizer": get_optimizer_state_dict(model, optimizer),
            "rng": rng_state()}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """DCP warns that it saves "in a single process" when told ``no_dist``: each rank saves its own folder."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*single process.*")
        yield


def save(trainer: Any, options: Checkpointing, epoch: int, rank: int, payload: dict[str, Any]) -> Path:
    """Save this rank's checkpoint of ``epoch`` atomically, wait for every rank, prune old ones (collective).

    Args:
        trainer: the rank's trainer (``model``, ``optimizer``, optional ``extra_state()``).
        options: where.
        epoch: the epoch just trained.
        rank: this rank.
        payload: JSON-able state saved next to the tensors (records, spans).

    Returns:
        The rank's checkpoint folder.
    """
    import torch.distributed.checkpoint as dcp

    final = rank_dir(options.directory, epoch, rank)
    tmp = final.parent / f".rank-{rank}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with _quiet():
        dcp.save(_dcp_state(trainer), storage_writer=dcp.FileSystemWriter(str(tmp)), no_dist=True)
    extra = trainer.extra_state() if hasattr(trainer, "extra_state") else {}
    atomic_write(tmp / STATE_FILE, lambda fh: fh.write(wire.encode({**payload, "epoch": epoch, "extra": extra})))
    if final.exists():  # an incomplete epoch of an interrupted run, saved again
        shutil.rmtree(final)
    os.rename(tmp, final)
    _fsync_dir(final.parent)
    comm.barrier()
    for old in saved_epochs(options.directory, rank)[:-KEEP]:
        _remove_rank(options.directory, old, rank)
    return final


def agreed_epoch(options: Checkpointing, rank: int) -> int:
    """The newest epoch every rank holds a checkpoint of (collective); removes this rank's newer, incomplete
    checkpoints and temporary folders.

    Raises:
        SpecError: some rank holds no checkpoint, or not the agreed one.
    """
    mine = saved_epochs(options.directory, rank)
    newest = torch.tensor([mine[-1] if mine else -1], dtype=torch.int64, device=comm.device())
    epoch = int(comm.all_reduce_(newest, "min").item())
    held = torch.tensor([1 if epoch in mine else 0], dtype=torch.int64, device=comm.device())
    if epoch < 0 or int(comm.all_reduce_(held, "min").item()) == 0:
        raise SpecError(f"--resume: {options.directory} holds no checkpoint that every rank saved")
    for newer in (e for e in mine if e > epoch):
        _remove_rank(options.directory, newer, rank)
    for stale in Path(options.directory).glob(f"epoch-*/.rank-{rank}.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
        with contextlib.suppress(OSError):  # an epoch folder a stopped save left empty; others' folders stay
            stale.parent.rmdir()
    return epoch


def restore(trainer: Any, options: Checkpointing, epoch: int, rank: int) -> dict[str, Any]:
    """Load this rank's checkpoint of ``epoch`` into the trainer (model, optimizer, RNG states, extra state).

    Returns:
        The saved payload (``records``, ``spans``, ``epoch``, ``extra``).
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    folder = rank_dir(options.directory, epoch, rank)
    state = _dcp_state(trainer)
    try:
        with _quiet():
            dcp.load(state, storage_reader=dcp.FileSystemReader(str(folder)), no_dist=True)
        model, optimizer = _modules(trainer)
        set_model_state_dict(model, state["model"])
        set_optimizer_state_dict(model, optimizer, state["optimizer"])
        payload = wire.decode((folder / STATE_FILE).read_bytes())
    except (Exception, CheckpointException) as exc:  # DCP's exception is a BaseException; the state file's a ValueError
        raise SpecError(unreadable(folder, exc)) from None
    if hasattr(trainer, "load_extra_state"):
        trainer.load_extra_state(payload.get("extra") or {})
    set_rng_state(state["rng"])
    return payload


def unreadable(folder: Path, exc: BaseException) -> str:
    """The one line saying a rank's checkpoint folder cannot be restored: which folder, what failed first, and how
    to go on (the folder of an earlier epoch is kept, :data:`KEEP`)."""
    first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"--resume: the checkpoint {folder} cannot be read; remove {folder.parent.name} to resume from the "
            f"epoch before it, or run without --resume ({type(exc).__name__}: {first})")


def load_model_state(directory: str | Path, epoch: int | None = None, rank: int = 0) -> dict[str, torch.Tensor]:
    """The model weights a run saved (parameter name -> tensor), without a trainer or a process group.

    Args:
        directory: the checkpoint folder.
        epoch: which epoch (None = the newest ``rank`` holds).
        rank: whose copy (the weights are the same on every rank).

    Raises:
        SpecError: no such checkpoint.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    epochs = saved_epochs(directory, rank)
    if epoch is None and epochs:
        epoch = epochs[-1]
    if epoch is None or epoch not in epochs:
        raise SpecError(f"checkpoint: {directory} holds no checkpoint of epoch {epoch} for rank {rank}")
    reader = dcp.FileSystemReader(str(rank_dir(directory, epoch, rank)))
    meta = reader.read_metadata().state_dict_metadata
    model = {key.removeprefix("model."): torch.empty(tuple(m.size), dtype=m.properties.dtype)
             for key, m in meta.items() if key.startswith("model.") and isinstance(m, TensorStorageMetadata)}
    with _quiet():
        dcp.load({"model": model}, storage_reader=reader, no_dist=True)
    return model


def _remove_rank(directory: str | Path, epoch: int, rank: int) -> None:
    """Delete ``rank``'s checkpoint of ``epoch`` (and the epoch's folder once empty)."""
    shutil.rmtree(rank_dir(directory, epoch, rank), ignore_errors=True)
    with contextlib.suppress(OSError):  # other ranks' checkpoints still in it
        epoch_dir(directory, epoch).rmdir()


def _fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
