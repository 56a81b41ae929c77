"""The PP-GNN models: SGC and SIGN, applied to pre-propagated hop matrices (:mod:`executor.strategies.ppgnn.preprop`).

Notation (PP-GNN brief /work/shared/papers/ppgnn.md §1.2): ``R`` = hops, ``F`` = feature_dim, ``h`` =
``model.hidden_dim``, ``c`` = classes, ``L`` = ``model.num_layers`` (linear layers of each feed-forward net).

* ``sgc``: one linear layer ``F -> c`` on ``B^R X`` only (Wu et al., "Simplifying Graph Convolutional
  Networks", ICML 2019, eq. 8: ``softmax(S^K X Theta)``); it reads one matrix, hop R. No dropout, no hidden
  layer (``num_layers`` and ``hidden_dim`` do not apply). Parameters ``F c + c``.
* ``sign``: for every hop r = 0..R a feed-forward net ``FFN_r: F -> h -> ... -> h`` (L linear layers), the
  R + 1 outputs concatenated, then PReLU and dropout, then a projection ``FFN: (R+1) h -> h -> ... -> c``
  (L linear layers). Inside a feed-forward net every linear layer but the last is followed by one shared PReLU
  and dropout. This follows DGL's SIGN example (examples/pytorch/sign/sign.py, ``FeedForwardNet`` and
  ``Model``; Frasca et al., "SIGN: Scalable Inception Graph Neural Networks", 2020, eq. 3); it reads R + 1
  matrices. Weights are Xavier-uniform with the ReLU gain and biases zero, as that example.

:func:`simulator.strategies.ppgnn.param_count` gives the same parameter counts (checked by the tests).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn

from gnnplan.simulator.workload.spec import ModelSpec

PP_ARCHS = ("sgc", "sign")


def loaded_hops(arch: str, hops: int) -> list[int]:
    """Which stored hop matrices a model reads: ``[R]`` for sgc, ``[0, ..., R]`` for sign.

    Raises:
        ValueError: ``arch`` is not a PP-GNN.
    """
    if arch == "sgc":
        return [hops]
    if arch == "sign":
        return list(range(hops + 1))
    raise ValueError(f"model.arch: {arch!r} is not a pre-propagation model; allowed: {', '.join(PP_ARCHS)}")


class FeedForwardNet(nn.Module):
    """``num_layers`` linear layers ``in -> hidden -> ... -> out``, PReLU + dropout between them.

    Shapes:
        forward: (b, in_dim) -> (b, out_dim).
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, num_layers: int, dropout: float) -> None:
        super().__init__()
        widths = [in_dim] + [hidden_dim] * (num_layers - 1) + [out_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.prelu = nn.PReLU() if num_layers > 1 else None
        self.dropout = nn.Dropout(dropout)
        gain = nn.init.calculate_gain("relu")
        for layer in self.layers:
            nn.init.xavier_uniform_(layer.weight, gain=gain)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the layers."""
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last and self.prelu is not None:
                x = self.dropout(self.prelu(x))
        return x


class SGC(nn.Module):
    """Linear logistic regression on hop R (module docstring).

    Shapes:
        forward: [(b, F)] -> (b, c).
    """

    def __init__(self, feature_dim: int, num_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(feature_dim, num_classes)

    def forward(self, xs: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits from the single loaded matrix."""
        return self.linear(xs[0])


class SIGN(nn.Module):
    """Per-hop feed-forward nets, concatenation, projection (module docstring).

    Shapes:
        forward: R + 1 tensors (b, F) -> (b, c).
    """

    def __init__(self, feature_dim: int, hidden_dim: int, num_classes: int, hops: int, num_layers: int,
                 dropout: float) -> None:
        super().__init__()
        self.inception = nn.ModuleList(FeedForwardNet(feature_dim, hidden_dim, hidden_dim, num_layers, dropout)
                                       for _ in range(hops + 1))
        self.prelu = nn.PReLU()
        self.dropout = nn.Dropout(dropout)
        self.project = FeedForwardNet((hops + 1) * hidden_dim, hidden_dim, num_classes, num_layers, dropout)

    def forward(self, xs: Sequence[torch.Tensor]) -> torch.Tensor:
        """Logits from the R + 1 loaded matrices."""
        hidden = torch.cat([ff(x) for ff, x in zip(self.inception, xs)], dim=-1)
        return self.project(self.dropout(self.prelu(hidden)))


def build_model(spec: ModelSpec, feature_dim: int, num_classes: int, hops: int) -> nn.Module:
    """The PP-GNN of a workload's model spec.

    Raises:
        ValueError: ``spec.arch`` is not sgc or sign.
    """
    if spec.arch == "sgc":
        return SGC(feature_dim, num_classes)
    if spec.arch == "sign":
        return SIGN(feature_dim, spec.hidden_dim, num_classes, hops, spec.num_layers, spec.dropout)
    raise ValueError(f"model.arch: {spec.arch!r} is not a pre-propagation model; allowed: {', '.join(PP_ARCHS)}")
