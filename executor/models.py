"""The message-passing GNNs the executor trains, built from DGL layers (what
:mod:`simulator.workload.model_cost` prices).

Layer l of L: ``in = feature_dim`` if l == 0 else ``hidden_dim`` (x ``num_heads`` for gat), ``out =
num_classes`` at the last layer else ``hidden_dim``; an activation (ReLU; ELU for GAT, as Velickovic et al.,
ICLR 2018, §3.3) and dropout follow every layer but the last (DGL's GraphSAGE example,
examples/pytorch/graphsage/node_classification.py).

* ``gcn``: ``GraphConv(i, o, norm="none")`` fed per-edge weights ``block.edata["w"]`` = Kipf and Welling's
  ``1 / sqrt(d_u d_v)`` with global degrees (:func:`executor.data.build_graph`; ICLR 2017, eq. 2);
  parameters ``i o + o``.
* ``sage``: ``SAGEConv(i, o, "mean")`` (Hamilton et al., NeurIPS 2017, Algorithm 1); ``2 i o + o``.
* ``gat``: ``GATConv(i, o, heads)``, hidden heads concatenated, the last layer one head; ``i h o + 3 h o``.
* ``gin``: ``GINConv(MLP, "sum")`` with MLP = Linear(i, o) -> ReLU -> Linear(o, o) (Xu et al., ICLR 2019,
  eq. 4.1, eps = 0 fixed); ``(i o + o) + (o o + o)``.

The counts equal :func:`simulator.workload.model_cost.param_count` (checked by the tests).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gnnplan.simulator.workload.spec import ModelSpec

EDGE_WEIGHT = "w"
"""Edge-data key of GCN's per-edge normalisation weights in a block."""


def make_layer(arch: str, in_dim: int, out_dim: int, num_heads: int) -> nn.Module:
    """One DGL layer (module docstring).

    Raises:
        ValueError: ``arch`` has no message-passing layer here.
    """
    from dgl.nn.pytorch import GATConv, GINConv, GraphConv, SAGEConv

    if arch == "gcn":
        return GraphConv(in_dim, out_dim, norm="none", allow_zero_in_degree=True)
    if arch == "sage":
        return SAGEConv(in_dim, out_dim, "mean")
    if arch == "gat":
        return GATConv(in_dim, out_dim, num_heads, allow_zero_in_degree=True)
    if arch == "gin":
        mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))
        return GINConv(mlp, "sum")
    raise ValueError(f"model.arch: {arch!r} is not one of gcn, sage, gat, gin")


class GNN(nn.Module):
    """An L-layer GNN applied to a list of DGL blocks (input side first).

    Args:
        spec: architecture, depth, widths, heads, dropout.
        feature_dim: input width.
        num_classes: output width.
    """

    def __init__(self, spec: ModelSpec, feature_dim: int, num_classes: int) -> None:
        super().__init__()
        self.arch = spec.arch
        heads = spec.num_heads if spec.arch == "gat" else 1
        self.layers = nn.ModuleList()
        for layer in range(spec.num_layers):
            last = layer == spec.num_layers - 1
            in_dim = feature_dim if layer == 0 else spec.hidden_dim * heads
            self.layers.append(make_layer(spec.arch, in_dim, num_classes if last else spec.hidden_dim,
                                          1 if last else heads))
        self.activation: nn.Module = nn.ELU() if spec.arch == "gat" else nn.ReLU()
        self.dropout = nn.Dropout(spec.dropout)

    def apply_layer(self, index: int, block: Any, h: torch.Tensor) -> torch.Tensor:
        """Layer ``index`` on one block, with the activation and dropout that follow it.

        Shapes:
            h: (block.num_src_nodes(), in) -> (block.num_dst_nodes(), out).
        """
        conv = self.layers[index]
        if self.arch == "gcn":
            h = conv(block, h, edge_weight=block.edata[EDGE_WEIGHT])
        else:
            h = conv(block, h)
        last = index == len(self.layers) - 1
        if self.arch == "gat":
            h = h.mean(1) if last else h.flatten(1)
        if not last:
            h = self.dropout(self.activation(h))
        return h

    def forward(self, blocks: list[Any], x: torch.Tensor) -> torch.Tensor:
        """Logits of the last block's destination vertices.

        Shapes:
            x: (blocks[0].num_src_nodes(), feature_dim) -> (blocks[-1].num_dst_nodes(), num_classes).
        """
        h = x
        for index, block in enumerate(blocks):
            h = self.apply_layer(index, block, h)
        return h


def attach_edge_weights(blocks: list[Any], edge_weight: torch.Tensor | None) -> None:
    """Give every block GCN's weights of its edges (looked up by parent edge id); no-op without weights.

    Shapes:
        edge_weight: (num_edges of the sampled graph,) float32.
    """
    if edge_weight is None:
        return
    import dgl

    for block in blocks:
        block.edata[EDGE_WEIGHT] = edge_weight[block.edata[dgl.EID].to(edge_weight.device)].to(block.device)


def num_params(model: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
