"""SGC and SIGN reach the published accuracy range on Cora's standard (Planetoid) split, and chunk reshuffling
changes test accuracy by less than one point against random reshuffling on Cora and CiteSeer.

Recipes: SGC as Wu et al., "Simplifying Graph Convolutional Networks", ICML 2019 (K = 2, Adam lr 0.2, 100
epochs, full batch, weight decay tuned on validation; published Cora test accuracy 81.0): weight decay 2e-5
from the grid {5e-6, 1e-5, 2e-5, 5e-5} (val accuracy 0.79-0.80, test 0.806-0.818 with seed 0). SIGN: R = 3,
one linear layer per hop and in the projection, hidden 64, dropout 0.5, Adam lr 0.002, weight decay 5e-4,
100 epochs, full batch (tuned by hand on the validation split: deeper / wider nets overfit Cora's 140 training
rows). The published range of propagation-based models on this split is ~0.80-0.82 (SGC 81.0, Wu et al.
2019; GCN 81.5, Kipf and Welling, ICLR 2017); the tests accept [0.80, 0.83] for SGC and [0.78, 0.83] for SIGN.
"""

from __future__ import annotations

import statistics

import pytest
from ppgnn_workers import SGC_CORA, SIGN_CORA, make_plan, train_in_process

SGC_TRAINING = {"batch_size": 140, "num_epochs": 100, "lr": 0.2, "weight_decay": 2e-5, "seed": 0}
SIGN_TRAINING = {"batch_size": 140, "num_epochs": 100, "lr": 0.002, "weight_decay": 5e-4, "seed": 0}
SEEDS = (0, 1, 2, 3, 4)


def test_sgc_cora_standard_split() -> None:
    out = train_in_process(make_plan("cora", SGC_CORA, SGC_TRAINING, {"hops": 2, "placement": "host",
                                                                      "loader": "fused"}))
    assert 0.80 <= out["test"] <= 0.83, out["test"]


def test_sign_cora_standard_split() -> None:
    out = train_in_process(make_plan("cora", SIGN_CORA, SIGN_TRAINING, {"hops": 3, "placement": "gpu"}))
    assert 0.78 <= out["test"] <= 0.83, out["test"]


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
def test_chunk_reshuffling_changes_accuracy_by_less_than_a_point(dataset: str) -> None:
    """Mini-batches of 32 rows (so the order matters); chunks of 32 rows: every batch is one stored chunk
    (the paper's chunk = batch setting, §6.2); mean test accuracy over five seeds."""
    acc = {}
    for reshuffle in ("random", "chunk"):
        runs = []
        for seed in SEEDS:
            training = {**SGC_TRAINING, "batch_size": 32, "seed": seed}
            knobs = {"hops": 2, "placement": "host", "loader": "fused", "reshuffle": reshuffle, "chunk_size": 32}
            runs.append(train_in_process(make_plan(dataset, SGC_CORA, training, knobs))["test"])
        acc[reshuffle] = statistics.fmean(runs)
    assert abs(acc["chunk"] - acc["random"]) < 0.01, acc
