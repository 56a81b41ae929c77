"""What the tuner compares: strategies that run the workload as given, and model swaps only when allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnnplan.autotune.candidates import accepts, candidates, model_variants
from gnnplan.autotune.planning import tune_to_plan
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import load_plan
from gnnplan.simulator.strategies import STRATEGIES
from gnnplan.simulator.workload.spec import MESSAGE_PASSING_ARCHS, load_workload

SAGE = load_workload("cora-sage")
SGC = load_workload("cora-sgc")


def test_without_model_change_only_strategies_that_accept_the_workload() -> None:
    labels = [c.label for c in candidates(SAGE)]
    assert "dp" in labels and not any(label.startswith("ppgnn") for label in labels)
    assert all(accepts(c.strategy, SAGE) and not c.model_changed and c.workload == SAGE for c in candidates(SAGE))
    assert [c.label for c in candidates(SGC)] == ["ppgnn"]
    assert sorted(c.label for c in candidates(SAGE)) == sorted(n for n in STRATEGIES if accepts(n, SAGE))


def test_model_change_swaps_message_passing_and_pre_propagation_at_equal_depth() -> None:
    found = {c.label: c for c in candidates(SAGE, allow_model_change=True)}
    for arch in ("sgc", "sign"):
        c = found[f"ppgnn/{arch}"]
        assert c.model_changed and c.workload.model.arch == arch
        assert c.fixed_knobs == {"hops": SAGE.model.num_layers}
        assert c.workload.training == SAGE.training and c.workload.dataset == SAGE.dataset
    assert next(iter(found)) == "dp"  # the user's model first
    back = {c.label: c for c in candidates(SGC, allow_model_change=True)}
    assert back["ppgnn"].workload == SGC and back["ppgnn/sign"].workload.model.arch == "sign"
    assert back["dp/sage"].workload.model.arch == "sage"
    assert back["dp/sage"].workload.training.fanouts == SGC.training.fanouts == [-1]  # one per layer: kept
    deeper = SGC.model_copy(update={"model": SGC.model.model_copy(update={"num_layers": 2})})
    sage = {c.label: c for c in candidates(deeper, allow_model_change=True)}["dp/sage"].workload
    assert sage.model.num_layers == 2 and sage.training.fanouts == [10, 10]  # not one per layer: the default


def test_variants_keep_everything_but_the_model() -> None:
    for workload in (SAGE, SGC):
        for variant, _ in model_variants(workload):
            assert variant.model.arch != workload.model.arch
            assert (variant.model.arch in MESSAGE_PASSING_ARCHS) != (workload.model.arch in MESSAGE_PASSING_ARCHS) \
                or {variant.model.arch, workload.model.arch} == {"sgc", "sign"}
            assert variant.dataset == workload.dataset and variant.training.mode == workload.training.mode


def test_requested_strategy_that_cannot_train_the_model_names_the_flag() -> None:
    with pytest.raises(SpecError, match=r"--strategies: 'dp' cannot train model.arch 'sgc' \(add --allow-model-change"):
        candidates(SGC, ["dp"])
    assert [c.label for c in candidates(SGC, ["dp"], allow_model_change=True)] == ["dp/sage"]
    with pytest.raises(SpecError, match="unknown strategy 'nope'"):
        candidates(SAGE, ["nope"])


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_tuner_plan_carries_the_swapped_model(tmp_path: Path) -> None:
    """On 4 A100s over 10 GbE, Cora's SGC (one 2708 x 1433 matrix resident on each GPU, a linear model) beats
    sampled GraphSAGE with remote feature fetches by orders of magnitude, so the tuner must pick it once it is
    allowed to, and the plan it writes must train SGC, not the workload's GraphSAGE."""
    cluster = load_cluster("4x-a100-10gbe")
    out = tune_to_plan(cluster, SAGE, ["dp", "ppgnn"], 12, f"sqlite:///{tmp_path / 's.db'}", None,
                       False, 0, tmp_path / "plan.yaml", allow_model_change=True)
    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.strategy == "ppgnn" and plan.workload.model.arch in ("sgc", "sign") and out["model_changed"]
    assert plan.knobs["hops"] == SAGE.model.num_layers
    assert "instead of sage" in out["note"]
    kept = tune_to_plan(cluster, SAGE, None, 4, f"sqlite:///{tmp_path / 't.db'}", None, False, 0,
                        tmp_path / "kept.yaml")
    assert load_plan(tmp_path / "kept.yaml").workload == SAGE and kept["model_changed"] is False
    assert "--allow-model-change compares those that train another model, SGC or SIGN" in kept["note"]


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_full_graph_workload_says_no_model_change_applies(tmp_path: Path) -> None:
    """SGC and SIGN train mini-batches (ppgnn), so a full-graph workload has no model swap: the note says so with
    --allow-model-change, and does not suggest the flag without it (2026-12-01: 'model changes allowed' and
    nothing compared; the flag suggested where it changes nothing)."""
    cluster, full = load_cluster("4x-a100-10gbe"), load_workload("cora-gcn-full")
    allowed = tune_to_plan(cluster, full, None, 2, f"sqlite:///{tmp_path / 'a.db'}", None, False, 0,
                           tmp_path / "a.yaml", allow_model_change=True)
    assert "(model changes allowed, but none applies to full-graph training: SGC and SIGN train mini-batches" \
        in allowed["note"]
    plain = tune_to_plan(cluster, full, None, 2, f"sqlite:///{tmp_path / 'b.db'}", None, False, 0,
                         tmp_path / "b.yaml")
    assert "of other training semantics)" in plain["note"] and "--allow-model-change" not in plain["note"]
