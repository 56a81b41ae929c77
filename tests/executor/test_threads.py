"""Thread pools: the share of the cores (one function for the simulator and the executor), spawned workers and
their sampler processes sized by it, and the environment children inherit (the torchrun entry's and a run's
thread counts are checked with the runs in test_executor_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from executor_workers import environment_of, thread_counts

from gnnplan.executor.launch import run_in_process, spawn
from gnnplan.executor.threads import (
    THREAD_ENV,
    WAIT_POLICY,
    ThreadCounts,
    child_environment,
    cpu_count,
    current_threads,
    worker_threads,
)
from gnnplan.simulator.hardware.formulas import thread_share, worker_cores
from gnnplan.simulator.hardware.spec import load_cluster


@pytest.mark.parametrize("cores, workers, samplers, share", [
    (48, 1, 0, 48), (48, 8, 0, 6), (48, 8, 1, 3), (48, 4, 2, 4), (2, 1, 0, 2), (2, 2, 0, 1), (2, 1, 1, 1),
    (2, 2, 3, 1), (1, 4, 4, 1), (7, 2, 0, 3)])
def test_thread_share_splits_cores_among_workers_and_samplers(cores: int, workers: int, samplers: int,
                                                             share: int) -> None:
    assert thread_share(cores, workers, samplers) == share


@pytest.mark.parametrize("args", [(0, 1, 0), (4, 0, 0), (4, 1, -1)])
def test_thread_share_rejects_impossible_machines(args: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match="thread_share"):
        thread_share(*args)


def test_simulator_worker_cores_is_the_thread_share() -> None:
    dgx = load_cluster("dgx-a100")  # 8 GPUs per machine
    assert worker_cores(dgx) == thread_share(dgx.host.num_cores, 8) == dgx.host.num_cores // 8
    assert worker_cores(dgx, 2) == thread_share(dgx.host.num_cores, 8, 2) == dgx.host.num_cores // 24
    assert worker_threads(1, 1) == thread_share(cpu_count(), 1, 1)


def test_child_environment_is_set_while_starting_and_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    names = (*THREAD_ENV, WAIT_POLICY[0])
    monkeypatch.delenv(WAIT_POLICY[0], raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "5")
    before = {name: os.environ.get(name) for name in names}
    with child_environment(3):
        assert all(os.environ[name] == "3" for name in THREAD_ENV)
        code = "import os; print(os.environ['OMP_NUM_THREADS'], os.environ['OMP_WAIT_POLICY'])"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["3", WAIT_POLICY[1]]
    assert {name: os.environ.get(name) for name in names} == before
    monkeypatch.setenv(WAIT_POLICY[0], "ACTIVE")  # the user's choice is kept
    with child_environment(2):
        assert os.environ[WAIT_POLICY[0]] == "ACTIVE"
    with pytest.raises(ValueError, match="num_threads"), child_environment(0):
        pass


def test_two_spawned_workers_use_their_share() -> None:
    """On 2 cores each of 2 workers gets 1 thread in every pool (the default would be 2)."""
    share = thread_share(cpu_count(), 2)
    out = spawn(thread_counts, 2, (0,))
    assert len(out["ranks"]) == 2
    for rank in out["ranks"]:
        assert rank["threads"] == ThreadCounts(share, share, share)
        assert rank["env"] == [str(share)] * len(THREAD_ENV)
        assert rank["wait_policy"] == os.environ.get(*WAIT_POLICY)


def test_workers_see_the_callers_environment_at_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forkserver child starts with the server's environment, the caller's when its first run started the server:
    a variable set, changed or removed between two runs of one process reaches the next run's workers (before
    2026-12-02 the second run's workers saw it as it was at the first)."""
    name = "GNNPLAN_TEST_ENVIRONMENT_MARK"
    for value in ("first", "second", None):
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
        assert spawn(environment_of, 2, (name,)) == value


def test_sampler_processes_use_one_thread() -> None:
    """A worker alone on the machine (here: in this process) computes on all cores, its sampler processes on one
    thread each; afterwards this process has its own thread counts back."""
    before = current_threads()
    out = run_in_process(thread_counts, (2,))
    share = thread_share(cpu_count(), 1)
    worker = out["ranks"][0]["threads"]
    assert (worker.intra_op, worker.dgl) == (share, share)
    assert len({pid for pid, _ in out["samplers"]}) == 2
    for _, threads in out["samplers"]:
        assert (threads.intra_op, threads.dgl) == (1, 1)
    assert current_threads() == before


def test_simulator_computes_on_the_same_share_as_the_executor() -> None:
    """On a CPU-only cluster the simulated compute is capped at the worker's thread share less its samplers'."""
    from gnnplan.simulator.engine import Engine
    from gnnplan.simulator.hardware.formulas import thread_share
    from gnnplan.simulator.hardware.model import HardwareModel
    from gnnplan.simulator.hardware.spec import load_cluster

    base = load_cluster("local")
    cluster = base.model_copy(update={"num_machines": 1, "gpus_per_machine": 2,
                                      "host": base.host.model_copy(update={"num_cores": 16})})
    for samplers in (0, 1, 3):
        engine = Engine(0)
        hw = HardwareModel(cluster, engine, samplers)
        assert hw.compute_cores == thread_share(16, 2, samplers)
        engine.process(hw.compute(0, 1.0))
        engine.run()
        # one second on the whole share (8 cores) of core-seconds, at the reduced cap
        assert engine.now == pytest.approx(8 / thread_share(16, 2, samplers))
