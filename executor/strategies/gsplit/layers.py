"""Split-parallel GraphSAGE and GAT layers: local SAGA operators around one split-aware shuffle per layer.

Each rank computes its split of a layer with the parameters of the DGL layer the single-process model uses
(:class:`gnnplan.executor.models.GNN`), so split-parallel and single-process training compute the same function:

* GraphSAGE (``SAGEConv(i, o, "mean")``; DGL applies ``fc_neigh`` before message passing when ``i > o``): the
  rank aggregates its own sources into one partial sum per destination, sends each partial sum to the
  destination's owner (the shuffle), which adds them, divides by the destination's in-degree in the block and
  adds ``fc_self`` of the destination's own row (brief §1.6).
* GAT (``GATConv(i, o, H)``): the rank projects its own sources (``fc``) and sends the projected rows its
  neighbours' owners need; each destination owner computes the attention scores, the edge softmax over all of
  the destination's in-edges and the weighted sum (brief §1.7: edges at the destination).

The shuffle (:class:`Shuffle`) is an autograd function: forward it exchanges rows with one
``all_to_all_single`` through :mod:`gnnplan.executor.comm` (one message per rank pair, bytes counted), which
also is the lockstep point (brief §8: 2L shuffle barriers per iteration): no rank leaves it before every rank
has arrived; backward it sends the gradients of the received rows back the same way. Every rank calls every shuffle in
the same order: forward layer 0..L-1, and
backward L-1..0, since each layer's shuffle input depends on the previous layer's output.

Notation: g -> ``world_size``, L -> layers, H -> heads, R_{i->j} / S_{i->j} -> rows of a shuffle (see
:mod:`gnnplan.simulator.strategies.gsplit.split`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gnnplan.executor import comm
from gnnplan.executor.models import GNN
from gnnplan.executor.trace import now
from gnnplan.simulator.strategies.gsplit.split import LayerPlan


@dataclass
class ShuffleRecord:
    """One shuffle seen from this rank: when it ran (waiting for the other ranks included) and the bytes it moved.

    Attributes:
        layer, direction: which shuffle (``forward`` / ``backward``).
        start_s, end_s: ``perf_counter()`` at arrival and after the exchange.
        sent, received: bytes to / from other ranks, per rank.
    """

    layer: int
    direction: str
    start_s: float
    end_s: float
    sent: list[int]
    received: list[int]


@dataclass
class ShuffleLog:
    """The shuffles of one iteration, in execution order."""

    records: list[ShuffleRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ShuffleSpec:
    """What a layer's shuffle exchanges: rows to and from every rank (forward), and where to log it."""

    layer: int
    send_counts: list[int]
    recv_counts: list[int]
    log: ShuffleLog


def exchange(rows: torch.Tensor, send_counts: list[int], recv_counts: list[int], spec: ShuffleSpec,
             direction: str) -> torch.Tensor:
    """One ``all_to_all_single`` of ``rows`` (grouped by destination rank; a local copy with one rank).

    Shapes:
        rows: (sum(send_counts), *row) -> (sum(recv_counts), *row).
    """
    start = now()
    flat = rows.reshape(rows.shape[0], -1).contiguous()
    out = flat.new_empty((sum(recv_counts), flat.shape[1]))
    if comm.world_size() > 1:
        comm.all_to_all_single(out, flat, recv_counts, send_counts)
    else:
        out.copy_(flat)
    row = flat.shape[1] * flat.element_size()
    me = comm.rank()
    sent = [0 if r == me else n * row for r, n in enumerate(send_counts)]
    received = [0 if r == me else n * row for r, n in enumerate(recv_counts)]
    spec.log.records.append(ShuffleRecord(spec.layer, direction, start, now(), sent, received))
    return out.reshape(out.shape[0], *rows.shape[1:])


class Shuffle(torch.autograd.Function):
    """The split-aware shuffle as an autograd function (module docstring)."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor, spec: ShuffleSpec) -> torch.Tensor:  # type: ignore[override]
        """Send ``rows`` to their destination owners (forward shuffle)."""
        ctx.spec = spec
        return exchange(rows, spec.send_counts, spec.recv_counts, spec, "forward")

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        """Send the gradients of the received rows back to their senders (backward shuffle)."""
        spec = ctx.spec
        return exchange(grad, spec.recv_counts, spec.send_counts, spec, "backward"), None


@dataclass(frozen=True)
class LayerTensors:
    """A :class:`~gnnplan.simulator.strategies.gsplit.split.LayerPlan` as device tensors (same field meanings)."""

    num_own_dst: int
    send_index: torch.Tensor
    gather_index: torch.Tensor
    scatter_index: torch.Tensor
    degree: torch.Tensor

    @classmethod
    def of(cls, plan: LayerPlan, device: torch.device) -> LayerTensors:
        """Move a plan's index arrays to ``device``."""
        def t(a: Any) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.int64).to(device)

        return cls(plan.num_own_dst, t(plan.send_index), t(plan.gather_index), t(plan.scatter_index),
                   t(plan.degree))


def sage_layer(conv: Any, p: LayerTensors, spec: ShuffleSpec, h: torch.Tensor) -> torch.Tensor:
    """One split of ``SAGEConv(i, o, "mean")`` (module docstring).

    Shapes:
        h: (own sources, i) -> (own destinations, o).
    """
    lin_before = conv._in_src_feats > conv._out_feats
    src = conv.fc_neigh(h) if lin_before else h
    partial = src.new_zeros((sum(spec.send_counts), src.shape[1])).index_add(0, p.send_index, src[p.gather_index])
    received = Shuffle.apply(partial, spec)
    agg = received.new_zeros((p.num_own_dst, received.shape[1])).index_add(0, p.scatter_index, received)
    agg = agg / p.degree.clamp(min=1).to(agg.dtype).unsqueeze(1)
    if not lin_before:
        agg = conv.fc_neigh(agg)
    return conv.fc_self(h[:p.num_own_dst]) + agg


def gat_layer(conv: Any, p: LayerTensors, spec: ShuffleSpec, h: torch.Tensor) -> torch.Tensor:
    """One split of ``GATConv(i, o, H)`` without feature / attention dropout (module docstring).

    Shapes:
        h: (own sources, i) -> (own destinations, H, o).
    """
    heads, width = conv._num_heads, conv._out_feats
    z = conv.fc(h).view(-1, heads, width)
    table = Shuffle.apply(z[p.send_index], spec)                                # (rows received, H, o)
    el = (table * conv.attn_l).sum(-1)
    er = (z[:p.num_own_dst] * conv.attn_r).sum(-1)
    e = conv.leaky_relu(el[p.gather_index] + er[p.scatter_index])               # (edges, H)
    index = p.scatter_index.unsqueeze(1).expand_as(e)
    top = e.new_zeros((p.num_own_dst, heads)).scatter_reduce(0, index, e.detach(), "amax", include_self=False)
    a = torch.exp(e - top[p.scatter_index])                                     # softmax is shift-invariant
    a = a / a.new_zeros((p.num_own_dst, heads)).index_add(0, p.scatter_index, a)[p.scatter_index]
    out = z.new_zeros((p.num_own_dst, heads, width)).index_add(0, p.scatter_index,
                                                                 a.unsqueeze(-1) * table[p.gather_index])
    return out + conv.bias.view(1, heads, width)


class SplitNet(torch.nn.Module):
    """The model's split-parallel forward as a module (so DDP can wrap it): :func:`split_forward`.

    Args:
        model: the single-process model whose parameters are used.
    """

    def __init__(self, model: GNN) -> None:
        super().__init__()
        self.model = model

    def forward(self, layers: list[LayerTensors], specs: list[ShuffleSpec], x: torch.Tensor) -> torch.Tensor:
        """Logits of this rank's targets (:func:`split_forward`)."""
        return split_forward(self.model, layers, specs, x)


def split_forward(model: GNN, layers: list[LayerTensors], specs: list[ShuffleSpec], x: torch.Tensor) -> torch.Tensor:
    """The model on this rank's split, layer by layer, with the activation and dropout of
    :meth:`gnnplan.executor.models.GNN.apply_layer`.

    Args:
        model: the model (its DGL layers' parameters are used).
        layers, specs: per layer, the split's index tensors and its shuffle.
        x: features of the rank's layer-0 vertices.

    Shapes:
        x: (own layer-0 vertices, feature_dim) -> (own targets, num_classes).
    """
    h = x
    last = len(layers) - 1
    for index, (conv, p, spec) in enumerate(zip(model.layers, layers, specs)):
        h = sage_layer(conv, p, spec, h) if model.arch == "sage" else gat_layer(conv, p, spec, h)
        if model.arch == "gat":
            h = h.mean(1) if index == last else h.flatten(1)
        if index != last:
            h = model.dropout(model.activation(h))
    return h
