"""Helpers of the fault and checkpoint tests: tiny plans, a hard time limit, and the processes of a run."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.spec import load_workload, workload_from_dict

TINY_GRAPH = {"generator": "rmat", "num_vertices": 600, "edge_factor": 4, "feature_dim": 8, "num_classes": 4,
              "train_fraction": 0.3, "seed": 0}


def tiny_plan(strategy: str = "dp", num_workers: int = 2, knobs: dict[str, Any] | None = None,
              num_epochs: int = 4) -> Plan:
    """A plan on a 600-vertex R-MAT graph with dropout (so resuming must restore the RNG), ``num_workers``
    machines x 1 worker; mini-batch for dp, full-graph GCN for neutronstar / hongtu."""
    data = load_workload("cora-sage").model_dump(mode="json")
    data["dataset"] = dict(TINY_GRAPH)
    data["model"].update(hidden_dim=8, dropout=0.5)
    data["training"].update(batch_size=64, fanouts=[3, 3], num_epochs=num_epochs)
    if strategy in ("neutronstar", "hongtu"):
        data["model"]["arch"] = "gcn"
        data["training"].update(mode="full-graph", fanouts=[-1, -1])
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": num_workers})
    return Plan(strategy=strategy, knobs=knobs or {}, num_workers=num_workers, cluster=cluster,
                workload=workload_from_dict(data))


@contextlib.contextmanager
def hard_limit(seconds: float) -> Iterator[None]:
    """Raise ``TimeoutError`` in the main thread once ``seconds`` have passed (SIGALRM), so a hang fails the test
    instead of stalling the suite; the launcher's clean-up then stops any workers."""

    def expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"test exceeded its hard limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, name) of every process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1: stat.rindex(")")]
        table[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), name)
    return table


def workers_of(root: int) -> dict[str, int]:
    """Worker processes (named ``gnnplan-rank<R>``) descending from ``root``: name -> pid."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            name = table[child][1]
            if name.startswith("gnnplan-rank"):
                found[name] = child
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` still exists as a worker (not a zombie, still named ``gnnplan-rank*``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state != "Z" and "(gnnplan-rank" in stat


def wait_until(condition: Callable[[], Any], timeout_s: float, poll_s: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy (returned) or ``timeout_s`` passes (AssertionError)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"condition not met within {timeout_s:g} s")


def partial_files(*folders: Path) -> list[Path]:
    """Temporary files of atomic writes and unfinished checkpoint folders left in ``folders``."""
    out: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            out += [p for p in folder.rglob(".*") if p.name != ".metadata"]
    return out


def env() -> dict[str, str]:
    """The environment of a CLI subprocess: this one's (private gnnplan home) with DGL on PyTorch."""
    return {**os.environ, "DGLBACKEND": "pytorch", "PYTHONUNBUFFERED": "1"}
