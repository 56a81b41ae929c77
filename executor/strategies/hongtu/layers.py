"""The per-chunk layer computations of ``hongtu``'s executor, on the parameters of the executor's own model
(:class:`executor.models.GNN`), so that one epoch computes exactly the single-process full-graph gradient.

Notation as :mod:`simulator.strategies.hongtu.work`: layer l maps h^l (width d_l) to h^{l+1}; a chunk's rows
are V_ij (destinations) and N_ij (sources, held in buffer slots).

* GCN (hybrid, brief §1.4 (c); HongTu Eq. 2): forward ``a = A h_N`` (the chunk's rows of
  ``D^-1/2 (A + I) D^-1/2``, global degrees, :func:`executor.data.build_graph`), then UPDATE ``z = a W + b``,
  ReLU and dropout; a is the checkpoint. Backward recomputes UPDATE from a and back-propagates it; for l >= 1
  the input gradient of the aggregation is ``A^T ∇a``. DGL's ``GraphConv`` computes the same function (it may
  apply W before aggregating when that is cheaper; the sum is the same up to float rounding).
* GAT (pure recomputation, brief §1.4 (b)): the model's ``GATConv`` on the chunk's block, heads concatenated
  (hidden layers) or averaged (the last), then ELU and dropout; the backward re-runs it with autograd.

Dropout masks are drawn from a generator seeded by (seed, epoch, layer, chunk), so the backward recomputation
applies the very mask of the forward pass (HongTu §4.2: "the regenerated intermediates are the same"); inverted
dropout scales kept values by 1 / (1 - p), as ``torch.nn.Dropout``. Source: Srivastava et al., "Dropout", JMLR
15, 2014, §10 (scaling at training time instead of at test time).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gnnplan.executor.models import GNN


def dropout_mask(p: float, shape: tuple[int, int], seed: tuple[int, ...]) -> torch.Tensor | None:
    """Inverted-dropout multipliers (0 or 1 / (1 - p)) for one chunk's layer output, None when ``p == 0``.

    Shapes:
        -> ``shape`` float32.
    """
    if p <= 0:
        return None
    gen = torch.Generator().manual_seed(int(np.random.SeedSequence([abs(s) for s in seed]).generate_state(1)[0]))
    return (torch.rand(shape, generator=gen) >= p).float() / (1.0 - p)


def gcn_aggregate(matrix: Any, buffer: torch.Tensor) -> torch.Tensor:
    """a^l of the chunk: its rows of the normalised adjacency times the buffer.

    Shapes:
        matrix: (|V_ij|, capacity) sparse CSR; buffer: (capacity, d_l) -> (|V_ij|, d_l).
    """
    return torch.sparse.mm(matrix, buffer)


def gcn_update(model: GNN, layer: int, a: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """UPDATE of GCN layer ``layer``: ``a W + b``, then (hidden layers) ReLU and dropout.

    Shapes:
        a: (|V_ij|, d_l) -> (|V_ij|, d_{l+1}).
    """
    conv = model.layers[layer]
    z = a @ conv.weight + conv.bias
    if layer == len(model.layers) - 1:
        return z
    h = model.activation(z)
    return h if mask is None else h * mask


def gcn_input_grad(matrix_t: Any, grad_a: torch.Tensor) -> torch.Tensor:
    """Partial gradients of the chunk's sources: ``A^T ∇a``.

    Shapes:
        matrix_t: (|N_ij|, |V_ij|) sparse CSR; grad_a: (|V_ij|, d_l) -> (|N_ij|, d_l).
    """
    return torch.sparse.mm(matrix_t, grad_a)


def gat_apply(model: GNN, layer: int, block: Any, h_src: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """GAT layer ``layer`` on the chunk's block (``GATConv``), heads concatenated or averaged, ELU and dropout.

    Shapes:
        h_src: (|N_ij|, d_l), destinations first -> (|V_ij|, d_{l+1}).
    """
    out = model.layers[layer](block, h_src)
    if layer == len(model.layers) - 1:
        return out.mean(1)
    h = model.activation(out.flatten(1))
    return h if mask is None else h * mask


def loss_and_grad(logits: torch.Tensor, positions: torch.Tensor, labels: torch.Tensor,
                  num_train: int) -> tuple[float, torch.Tensor]:
    """The chunk's share of the loss (summed cross-entropy of its training vertices) and ∇h^L of its rows, the
    gradient of (that sum / all training vertices), the full-graph mean cross-entropy.

    Shapes:
        logits: (|V_ij|, C); positions, labels: (k,) -> ∇h^L (|V_ij|, C).
    """
    z = logits.detach().requires_grad_(True)
    if len(positions) == 0:
        return 0.0, torch.zeros_like(z)
    with torch.enable_grad():
        ce = F.cross_entropy(z[positions], labels, reduction="sum")
        (ce / max(num_train, 1)).backward()
    return float(ce.detach()), z.grad if z.grad is not None else torch.zeros_like(z)
