"""The ``ppgnn`` executor strategy: data-parallel training over two gloo workers equals one worker, spans carry
bytes per load, and the runner drives it (registered here for the test only)."""

from __future__ import annotations

import numpy as np
import pytest
from ppgnn_workers import SGC_CORA, SIGN_CORA, make_plan, param_arrays, train_ranks

import gnnplan.simulator.strategies as simulator_strategies
from gnnplan.executor.launch import run_in_process, spawn
from gnnplan.simulator.strategies import ppgnn

TRAINING = {"batch_size": 40, "num_epochs": 2, "lr": 0.05, "weight_decay": 5e-4, "seed": 0}
SIGN_NO_DROPOUT = {**SIGN_CORA, "dropout": 0.0, "hidden_dim": 16}


@pytest.fixture(scope="module")
def runs():  # type: ignore[no-untyped-def]
    """Two epochs of SIGN (R = 2) on Cora, chunk reshuffling, double buffering, host placement: 1 vs 2 workers."""
    knobs = {"hops": 2, "placement": "host", "loader": "double_buffer", "reshuffle": "chunk", "chunk_size": 16}
    one = run_in_process(train_ranks, (make_plan("cora", SIGN_NO_DROPOUT, TRAINING, knobs, 1), 2))
    two = spawn(train_ranks, 2, (make_plan("cora", SIGN_NO_DROPOUT, TRAINING, knobs, 2), 2))
    return one, two


def test_two_workers_train_the_same_model_as_one(runs) -> None:  # type: ignore[no-untyped-def]
    one, two = runs
    ref = param_arrays(one)
    for rank in two["ranks"]:
        for name, value in ref.items():
            # Adam amplifies rounding
            np.testing.assert_allclose(rank["params"][name], value, rtol=1e-4, atol=1e-5, err_msg=name)


def test_each_worker_takes_its_part_of_every_global_batch(runs) -> None:  # type: ignore[no-untyped-def]
    one, two = runs
    assert one["ranks"][0]["schedule"] == [40, 40, 40, 20]
    assert [r["schedule"] for r in two["ranks"]] == [[20, 20, 20, 10]] * 2
    for r in two["ranks"]:
        assert [s.num_seeds for s in r["stats"]] == [70, 70]
        assert [s.num_iterations for s in r["stats"]] == [4, 4]


def test_spans_carry_bytes_per_load(runs) -> None:  # type: ignore[no-untyped-def]
    _, two = runs
    row = 1433 * 4
    for r in two["ranks"]:
        spans = r["spans"]
        loads = [s for s in spans if s.phase == "load" and s.epoch == 1]
        assert [s.nbytes for s in loads] == [n * 3 * row for n in (20, 20, 20, 10)]
        assert all(s.args["local_bytes"] == s.nbytes and s.args["hit_bytes"] == 0 for s in loads)
        assert [s.args["num_input_vertices"] for s in loads] == [20, 20, 20, 10]
        reduces = [s for s in spans if s.phase == "all_reduce"]
        assert len(reduces) == 8 and len({s.nbytes for s in reduces}) == 1 and reduces[0].nbytes > 0
        phases = {s.phase for s in spans}
        assert {"load", "forward", "backward", "all_reduce", "optimizer", "iteration", "epoch"} <= phases
        assert all(s.flops > 0 for s in spans if s.phase in ("forward", "backward", "optimizer"))
        assert r["stats"][1].local_bytes == 70 * 3 * row and r["stats"][1].network_bytes > 0
        assert r["placement"] == "host"


def test_gpu_placement_loads_count_as_device_hits() -> None:
    out = run_in_process(train_ranks, (make_plan("cora", SGC_CORA, TRAINING, {"hops": 2}, 1), 1))
    rank = out["ranks"][0]
    assert rank["placement"] == "gpu"  # the paper's rule: Cora's hop matrix fits a 40 GB GPU
    loads = [s for s in rank["spans"] if s.phase == "load"]
    assert all(s.nbytes == 0 and s.args["hit_bytes"] == s.args["num_input_vertices"] * 1433 * 4 for s in loads)


def test_runner_drives_the_strategy(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gnnplan.executor.runner import run_plan
    from gnnplan.simulator.trace import read_trace

    monkeypatch.setitem(simulator_strategies.STRATEGIES, "ppgnn", ppgnn)
    plan = make_plan("cora", SGC_CORA, {**TRAINING, "batch_size": 140, "lr": 0.2, "weight_decay": 2e-5,
                                        "num_epochs": 3}, {"hops": 2, "placement": "ssd", "loader": "fused"})
    result = run_plan(plan, nprocs=1, trace_dir=tmp_path, progress=False)
    assert result["num_iterations"] == 1 and len(result["epoch_times_s"]) == 3
    assert result["bytes_per_epoch"]["pcie"] == 140 * 1433 * 4
    assert 0.3 < result["test_accuracy"] <= 1.0
    trace = read_trace(result["trace"])
    assert trace is not None
