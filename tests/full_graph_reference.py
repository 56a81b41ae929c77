"""Single-process full-graph training on a whole dataset, the reference the full-graph strategies' distributed
runs are compared with (``hongtu``, ``neutronstar``): the executor's model (:class:`executor.models.GNN`) on the
executor's graph and input features, seeded by the workload."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor.data import build_graph, input_features
from gnnplan.executor.models import EDGE_WEIGHT, GNN
from gnnplan.simulator.workload.datasets import GraphData, load_dataset
from gnnplan.simulator.workload.spec import WorkloadSpec


def _setup(workload: WorkloadSpec) -> tuple[GraphData, Any, GNN, torch.Tensor]:
    """(the dataset, its DGL graph with GCN edge weights where the model uses them, the model seeded by
    ``training.seed``, the (n, feature_dim) float32 input features)."""
    graph = load_dataset(workload.dataset)
    g, weight = build_graph(graph, workload.model.arch)
    if weight is not None:
        g.edata[EDGE_WEIGHT] = weight
    torch.manual_seed(workload.training.seed)
    model = GNN(workload.model, graph.feature_dim, graph.num_classes)
    return graph, g, model, torch.from_numpy(input_features(graph, workload.dataset))


def reference(workload: WorkloadSpec) -> tuple[float, dict[str, np.ndarray]]:
    """Single-process full-graph training step: (mean training cross-entropy, gradients by parameter name)."""
    graph, g, model, x = _setup(workload)
    logits = model([g] * workload.model.num_layers, x)
    train = torch.from_numpy(graph.train_idx)
    loss = F.cross_entropy(logits[train], torch.from_numpy(graph.labels)[train])
    loss.backward()
    return float(loss), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def reference_training(workload: WorkloadSpec, epochs: int) -> dict[str, Any]:
    """Single-process full-graph training with the trainers' optimizer (Adam, the workload's learning rate and
    weight decay): the mean training cross-entropy of each epoch's step, the parameters after the last step, the
    test vertices it then classifies correctly (of how many) and the training vertices."""
    graph, g, model, x = _setup(workload)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=workload.training.lr,
                                 weight_decay=workload.training.weight_decay)
    train, labels = torch.from_numpy(graph.train_idx), torch.from_numpy(graph.labels)
    losses = []
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = F.cross_entropy(model([g] * workload.model.num_layers, x)[train], labels[train])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    model.eval()
    with torch.no_grad():
        test = torch.from_numpy(graph.test_idx)
        correct = int((model([g] * workload.model.num_layers, x)[test].argmax(1) == labels[test]).sum())
    return {"losses": losses, "params": {n: p.detach().numpy().copy() for n, p in model.named_parameters()},
            "test_correct": correct, "test_total": len(graph.test_idx), "num_train": len(graph.train_idx)}
