"""``hopgnn`` on gloo workers: with the keyed sampler its home-sampled gradient equals ``dp``'s for the same
mini-batch, bytes are accounted, the merge controller runs, sampler processes sample the same groups as inline
sampling, and Cora accuracy matches ``dp``."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hopgnn_workers import assert_same_gradients, epochs, gradients

from gnnplan.executor.launch import spawn
from gnnplan.executor.runner import run_plan
from gnnplan.simulator.hardware.spec import load_cluster
from gnnplan.simulator.plan import Plan
from gnnplan.simulator.workload.datasets import load_dataset
from gnnplan.simulator.workload.spec import load_workload

FANOUTS = [10, 10]
KEYED = {"sampler": "keyed"}
ACCURACY_EPOCHS = 20


@pytest.fixture(scope="module")
def cora():  # type: ignore[no-untyped-def]
    return load_dataset("cora")


def test_two_workers_hopgnn_gradient_equals_dp(cora) -> None:  # type: ignore[no-untyped-def]
    """Home sampling with the keyed sampler draws exactly dp's sample of the same mini-batch (executor.sampling_keyed),
    so the gradients agree to float rounding."""
    seeds = np.random.default_rng(0).choice(cora.train_idx, 40, replace=False).tolist()
    variants = [("sage", {}, {}, seeds), ("gcn", {"pregather": False}, {}, seeds),
                ("gat", {"migrate_parameters": False}, {"num_heads": 2}, seeds),
                ("gcn", {"num_steps": 1}, {}, seeds),
                ("sage", {}, {}, seeds[:1])]  # one seed: model 1 has nothing to train anywhere
    cases = []
    for arch, knobs, model, batch in variants:
        cases += [("dp", arch, KEYED, model, batch), ("hopgnn", arch, {**KEYED, **knobs}, model, batch)]
    out = spawn(gradients, 2, (cases, FANOUTS))
    for i, (arch, knobs, _, _) in enumerate(variants):
        assert_same_gradients(out[2 * i], out[2 * i + 1], f"{arch} {knobs}")


def test_three_workers_ring_and_merged_steps_keep_the_gradient(cora) -> None:  # type: ignore[no-untyped-def]
    seeds = np.random.default_rng(1).choice(cora.train_idx, 60, replace=False).tolist()
    cases = [("dp", "sage", KEYED, {}, seeds), ("hopgnn", "sage", KEYED, {}, seeds),
             ("hopgnn", "sage", {**KEYED, "num_steps": 2}, {}, seeds),
             # the paper's globally random per-model batches with DGL's sampler: all neighbours, so no sampling
             ("dp", "gcn", {}, {}, seeds, [-1, -1]), ("hopgnn", "gcn", {"seed_split": "random"}, {}, seeds, [-1, -1])]
    dp_grad, full, merged, dp_all, random_all = spawn(gradients, 3, (cases, FANOUTS))
    assert_same_gradients(dp_grad, full, "3 steps")
    assert_same_gradients(dp_grad, merged, "2 steps")
    assert_same_gradients(dp_all, random_all, "random seed split")


def test_epochs_account_bytes_and_run_the_controller() -> None:
    res = spawn(epochs, 2, ({"controller_warmup_epochs": 0}, 3))["ranks"]
    history = res[0]["history"]
    assert history == res[1]["history"] and [s for s, _ in history][:2] == [2, 1]
    gradient_bytes = None
    for r in res:
        spans = r["spans"]
        per_it = Counter((s.epoch, s.iteration) for s in spans if s.phase == "migrate")
        steps = {e: s for e, (s, _) in enumerate(history)}
        for (epoch, _), n in per_it.items():
            assert n == steps[epoch] - 1
        samples = [s for s in spans if s.phase == "sample"]
        assert all(s.args["num_groups"] <= steps[s.epoch] for s in samples)
        assert sum(s.args["num_groups"] for s in samples) > 0
        assert not any(s.phase == "redistribute" for s in spans)   # home sampling: nothing is shipped
        forward = [s for s in spans if s.phase == "all_reduce"]
        gradient_bytes = forward[0].nbytes
        assert all(s.nbytes == 2 * gradient_bytes for s in spans if s.phase == "migrate")
        for e, st in enumerate(r["stats"]):
            loads = [s for s in spans if s.phase == "load" and s.epoch == e]
            pregather = [s for s in spans if s.phase == "pregather" and s.epoch == e]
            assert st.pcie_bytes == sum(s.nbytes for s in loads)
            assert st.remote_bytes == sum(s.nbytes - 8 * (1 + s.args["num_remote_vertices"]) for s in pregather)
            assert st.remote_bytes > 0 and st.num_seeds > 0
    assert sum(st.num_seeds for r in res for st in r["stats"][:1]) == 140


@pytest.mark.slow
def test_cora_accuracy_matches_dp(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cluster = load_cluster("4x-a100-10gbe").model_copy(update={"num_machines": 2})
    acc = {}
    # a fixed step count: the controller's choice depends on timing, which would make the run nondeterministic
    for strategy, knobs in (("dp", {}), ("hopgnn", {"num_steps": 2})):
        plan = Plan(strategy=strategy, knobs=knobs, num_workers=2, cluster=cluster,
                    workload=load_workload("cora-sage"))
        epochs = run_plan(plan, epochs=ACCURACY_EPOCHS, trace_dir=tmp_path, progress=False)["epochs"]
        acc[strategy] = [r["test_accuracy"] for r in epochs]
        # each epoch's record carries the step count it ran with (the run's steady state is those at the last one)
        assert [r.get("settings") for r in epochs] == [{"num_steps": 2} if strategy == "hopgnn" else None] * \
            ACCURACY_EPOCHS
    # the plateau: the mean of the last 10 of 20 epochs (one epoch's accuracy moves by 1-2 points from the next;
    # 0.785 for dp and 0.787 for hopgnn here, 0.793 and 0.796 over the last 10 of cora-sage's 30, 2026-12-01)
    plateau = {strategy: sum(a[-10:]) / 10 for strategy, a in acc.items()}
    assert plateau["dp"] > 0.75
    # within 1 point (10 of Cora's 1000 test vertices); home sampling draws other neighbours than dp's workers
    assert abs(plateau["hopgnn"] - plateau["dp"]) <= 0.01 + 1e-9, plateau
