"""FLOPs, bytes, parameters and memory of the PP-GNN models (SGC, SIGN) and of their pre-propagation.

Notation (PP-GNN brief /work/shared/papers/ppgnn.md §2.1-2.3): ``R`` hops, ``F`` feature_dim, ``h``
hidden_dim, ``c`` classes, ``L`` = ``model.num_layers`` (linear layers per feed-forward net), ``b`` rows of a
batch, ``M`` matrices loaded per row (1 for SGC, R + 1 for SIGN), ``n`` vertices, ``nnz`` non-zeros of
``B = D~^-1/2 (A + I) D~^-1/2``.

The models are the executor's (:mod:`executor.strategies.ppgnn.models`): SGC = ``Linear(F, c)`` on hop R; SIGN = per hop
a feed-forward net ``F -> h .. -> h`` (L linear layers, one shared PReLU + dropout between layers), concat,
PReLU, dropout, projection ``(R+1) h -> h .. -> c`` (L layers). Dense kernels cost ``2 rows in out`` FLOPs
(+ ``rows out`` for the bias); backward = 2 x forward for a matmul whose input needs a gradient, 1 x for
the first matmul on the loaded (raw) rows (weight gradient only) and 1 x for elementwise kernels. Source:
Kaplan et al., arXiv:2001.08361, §2.1; brief §2.3 (training ~ 6 x forward MACs, i.e. 3 x forward FLOPs).
Pre-propagation: R sparse-dense products ``X_r = B X_{r-1}``, ``2 nnz F`` FLOPs each (brief §2.2, O(K R m F)).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from gnnplan.simulator.workload.model_cost import (
    FLOAT_BYTES,
    INDEX_BYTES,
    Kernel,
    ModelCost,
    adam_kernels,
)
from gnnplan.simulator.workload.spec import ModelSpec

PP_ARCHS = ("sgc", "sign")


def num_matrices(arch: str, hops: int) -> int:
    """M: matrices a model reads per row (brief §1.2: SGC reads hop R only, SIGN hops 0..R).

    Raises:
        ValueError: not a PP-GNN architecture.
    """
    if arch == "sgc":
        return 1
    if arch == "sign":
        return hops + 1
    raise ValueError(f"model.arch: {arch!r} is not a pre-propagation model; allowed: {', '.join(PP_ARCHS)}")


def _ffn_numels(i: int, h: int, o: int, layers: int) -> tuple[int, ...]:
    widths = [i] + [h] * (layers - 1) + [o]
    return tuple(n for a, b in itertools.pairwise(widths) for n in (a * b, b)) + ((1,) if layers > 1 else ())


def param_numels(model: ModelSpec, feature_dim: int, num_classes: int, hops: int) -> tuple[int, ...]:
    """Elements of every trainable parameter tensor (weights, biases, PReLU slopes), one entry per tensor of
    :func:`executor.strategies.ppgnn.models.build_model`."""
    f, c, h, layers = feature_dim, num_classes, model.hidden_dim, model.num_layers
    if model.arch == "sgc":
        return (f * c, c)
    num_matrices(model.arch, hops)
    return (_ffn_numels(f, h, h, layers) * (hops + 1) + (1,) + _ffn_numels((hops + 1) * h, h, c, layers))


def param_count(model: ModelSpec, feature_dim: int, num_classes: int, hops: int) -> int:
    """Trainable parameters (equals ``sum(p.numel())`` of :func:`executor.strategies.ppgnn.models.build_model`)."""
    return sum(param_numels(model, feature_dim, num_classes, hops))


def _gemm(name: str, rows: float, i: int, o: int, input_grad: bool = True) -> Kernel:
    return Kernel(name, 2.0 * rows * i * o + rows * o, FLOAT_BYTES * (rows * i + i * o + rows * o + o), gemm=True,
                  out_elems=rows * o, input_grad=input_grad)


def _elementwise(name: str, n: float, flops_per: float = 1.0, reads: int = 1) -> Kernel:
    return Kernel(name, n * flops_per, FLOAT_BYTES * n * (reads + 1), out_elems=n)


def _dropout(name: str, n: float, p: float) -> Kernel:
    """A dropout of ``n`` elements: elementwise, drawing its mask (none at ``p = 0``: ATen returns the input)."""
    return replace(_elementwise(name, n, 2.0), random_elems=n if p > 0 else 0.0)


def _ffn(tag: str, rows: float, i: int, h: int, o: int, layers: int, on_input: bool, p: float) -> list[Kernel]:
    widths = [i] + [h] * (layers - 1) + [o]
    out: list[Kernel] = []
    for k, (a, b) in enumerate(itertools.pairwise(widths)):
        out.append(_gemm(f"{tag}.linear{k}", rows, a, b, input_grad=not (on_input and k == 0)))
        if k < layers - 1:
            out += [_elementwise(f"{tag}.prelu{k}", rows * b, 2.0), _dropout(f"{tag}.dropout{k}", rows * b, p)]
    return out


def forward_kernels(model: ModelSpec, feature_dim: int, num_classes: int, hops: int, rows: float) -> list[Kernel]:
    """Forward kernels of one batch of ``rows`` rows (module docstring), loss included."""
    f, c, h, layers = feature_dim, num_classes, model.hidden_dim, model.num_layers
    if model.arch == "sgc":
        kernels = [_gemm("sgc.linear", rows, f, c, input_grad=False)]
    else:
        num_matrices(model.arch, hops)
        kernels = []
        for r in range(hops + 1):
            kernels += _ffn(f"sign.hop{r}", rows, f, h, h, layers, True, model.dropout)
        width = (hops + 1) * h
        kernels += [_elementwise("sign.concat", rows * width), _elementwise("sign.prelu", rows * width, 2.0),
                    _dropout("sign.dropout", rows * width, model.dropout)]
        kernels += _ffn("sign.project", rows, width, h, c, layers, False, model.dropout)
    return kernels + [_elementwise("loss.cross_entropy", rows * c, 4.0)]


def model_cost(model: ModelSpec, feature_dim: int, num_classes: int, hops: int, rows: float) -> ModelCost:
    """Kernels, parameters and activation memory of one training step on ``rows`` rows.

    Raises:
        ValueError: not a PP-GNN architecture.
    """
    forward = forward_kernels(model, feature_dim, num_classes, hops, rows)
    backward = []
    for k in reversed(forward):
        factor = (2.0 if k.input_grad else 1.0) if k.gemm else 1.0
        backward.append(replace(k, name=f"{k.name}.grad", flops=k.flops * factor, nbytes=k.nbytes * factor,
                                out_elems=0.0, random_elems=0.0, backward=True))
    numels = param_numels(model, feature_dim, num_classes, hops)
    params = sum(numels)
    optimizer = adam_kernels(numels)
    masks = sum(k.out_elems for k in forward if ".dropout" in k.name)  # one byte per dropout mask element
    activation = FLOAT_BYTES * sum(k.out_elems for k in forward) + masks
    return ModelCost(tuple(forward), tuple(backward), optimizer, params, activation, block_bytes=0.0)


def input_bytes(num_labelled: int, feature_dim: int, arch: str, hops: int) -> float:
    """Bytes of the stored rows one run reads: ``num_labelled M F 4`` (brief §2.1, input expansion)."""
    return float(num_labelled) * num_matrices(arch, hops) * feature_dim * FLOAT_BYTES


def preprocess_kernels(num_vertices: int, num_edges: int, feature_dim: int, hops: int) -> list[Kernel]:
    """The R sparse-dense products of pre-propagation (one-off; brief §1.1, §2.2).

    ``nnz = num_edges + num_vertices`` (every listed directed edge plus the self-loops; exact for graphs that
    list both directions of each edge once, as the presets and R-MAT graphs do). Each product reads the CSR
    structure (values + column ids + row pointers), ``nnz`` gathered input rows and writes ``n`` rows.
    """
    nnz = float(num_edges + num_vertices)
    structure = (FLOAT_BYTES + INDEX_BYTES) * nnz + INDEX_BYTES * (num_vertices + 1)
    rows = FLOAT_BYTES * feature_dim * (nnz + num_vertices)
    return [Kernel(f"preprop.spmm{r + 1}", 2.0 * nnz * feature_dim, structure + rows, sparse=True,
                   out_elems=float(num_vertices * feature_dim)) for r in range(hops)]


def preprocess_memory_bytes(num_vertices: int, num_edges: int, feature_dim: int) -> float:
    """Peak memory of pre-propagation: the CSR matrix and two (n, F) float32 matrices."""
    nnz = float(num_edges + num_vertices)
    return (FLOAT_BYTES + INDEX_BYTES) * nnz + INDEX_BYTES * (num_vertices + 1) + \
        2.0 * FLOAT_BYTES * num_vertices * feature_dim
