"""Per-call fixed costs: a sampler call per layer (``host.sampler_call_s``) and a DGL message-passing call per
aggregation of a DGL layer (``gpu.graph_op_overhead_s``), priced in one place and fitted by calibration; and gsplit's
split, priced with its own rate and per-layer cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gnnplan.simulator import api
from gnnplan.simulator.calibrate import calibrate_files, get_param, with_params
from gnnplan.simulator.hardware import pricing
from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.strategies.gsplit.work import split_cost
from gnnplan.simulator.workload.model_cost import Block, model_cost
from gnnplan.simulator.workload.spec import ModelSpec

SAGE = ModelSpec.model_validate({"arch": "sage", "num_layers": 2, "hidden_dim": 16})


def test_sampler_calls_and_graph_ops_are_priced() -> None:
    cl = with_params(load_cluster("local"), {"host.sampler_call_s": 5e-4, "gpu.graph_op_overhead_s": 1e-3})
    rate = cl.host.sampling_edges_per_s_per_core
    assert pricing.sampling_s(cl, 1000.0, num_calls=2) == pytest.approx(1000 / rate + 2 * 5e-4)
    assert pricing.sampling_s(cl, 1000.0) == 1000 / rate  # no call: as before
    assert pricing.phase_compute_s(cl, "forward", 0.0, 0.0, 10, graph_ops=2) == pytest.approx(
        10 * cl.gpu.kernel_overhead_s + 2e-3)
    blocks = [Block(300, 60, 600), Block(60, 10, 120)]
    dgl_cost = model_cost(SAGE, 128, 7, blocks)
    assert sum(k.graph_op for k in dgl_cost.forward) == 2  # one update_all per SAGEConv
    assert sum(k.graph_op for k in dgl_cost.backward) == 2  # and its gradient
    plain = with_params(cl, {"gpu.graph_op_overhead_s": 0.0})
    extra = compute_time_s(dgl_cost.forward, cl.gpu, 1.0) - compute_time_s(dgl_cost.forward, plain.gpu, 1.0)
    assert extra == pytest.approx(2e-3)
    # gsplit's split layers aggregate with torch index operations: no DGL call, the same kernels otherwise
    split = split_cost(SAGE, 128, 7, np.array([300, 60]), np.array([60, 10]), np.array([600, 120]))
    assert not any(k.graph_op for k in split.forward + split.backward)
    assert [k.name for k in split.forward] == [k.name for k in dgl_cost.forward]


def test_calibration_fits_the_per_call_costs(fake_graphstats: list[dict[str, Any]], tmp_path: Path) -> None:
    start = with_params(load_cluster("4x-a100-10gbe"), {"host.sampler_call_s": 2e-4, "gpu.graph_op_overhead_s": 3e-4,
                                                        "gpu.kernel_overhead_s": 1e-5})
    truth = with_params(start, {"host.sampler_call_s": 6e-4, "gpu.graph_op_overhead_s": 1e-3})
    paths = []
    for name, knobs in (("a.json", {}),):
        result = api.simulate(truth, "rmat100k-sage", "dp", knobs)
        sample = next(s for s in result.spans if s.phase == "sample")
        assert sample.args["num_sampler_calls"] == 2.0  # one per layer
        meta = api.trace_metadata(truth, "rmat100k-sage", "dp", result)
        paths.append(api.predicted_trace(result, tmp_path / name, meta))
    fitted, report = calibrate_files(paths, start)
    for p in ("host.sampler_call_s", "gpu.graph_op_overhead_s"):
        assert get_param(fitted, p) == pytest.approx(get_param(truth, p), rel=0.05), p
        assert "not informed" not in report["parameters"][p]["flags"], p
    row = report["traces"]["a.json"]
    assert row["fit_epoch_time_s"] == pytest.approx(row["measured_epoch_time_s"], rel=0.01)


def test_gsplit_split_is_priced_apart_from_sampling(tmp_path: Path) -> None:
    """gsplit's online split has its own rate and per-layer cost (``host.split_items_per_s_per_core``,
    ``host.split_call_s``): the simulated split follows them and not the sampler's, and calibration recovers them
    from gsplit traces, besides the sampler's own."""
    cl = with_params(load_cluster("local"), {"host.split_items_per_s_per_core": 1e7, "host.split_call_s": 7e-5,
                                            "host.sampler_call_s": 1e-4})
    assert pricing.split_s(cl, 1e5, num_calls=2) == pytest.approx(1e-2 + 1.4e-4)
    knobs = {"cache_fraction": 0.2, "split": "random"}
    base = api.simulate(cl, "cora-sage", "gsplit", knobs)
    splits = [s for s in base.spans if s.phase == "split"]
    assert splits and all(s.args["num_sampler_calls"] == 2.0 for s in splits)  # one per layer
    for s in splits:  # one core, uncontended: exactly the priced split
        assert s.end_s - s.start_s == pytest.approx(pricing.split_s(cl, s.args["num_split_items"], 2.0), rel=1e-9)
    slower_sampler = api.simulate(with_params(cl, {"host.sampler_call_s": 1e-3}), "cora-sage", "gsplit", knobs)
    assert [s.end_s - s.start_s for s in slower_sampler.spans if s.phase == "split"] == pytest.approx(
        [s.end_s - s.start_s for s in splits], rel=1e-12)
    truth = with_params(cl, {"host.split_items_per_s_per_core": 4e6, "host.split_call_s": 3e-4})
    result = api.simulate(truth, "cora-sage", "gsplit", knobs)
    path = api.predicted_trace(result, tmp_path / "g.json", api.trace_metadata(truth, "cora-sage", "gsplit", result))
    fitted, report = calibrate_files([path], cl)
    for p in ("host.split_items_per_s_per_core", "host.split_call_s"):
        assert get_param(fitted, p) == pytest.approx(get_param(truth, p), rel=0.05), p
        assert "not informed" not in report["parameters"][p]["flags"], p
