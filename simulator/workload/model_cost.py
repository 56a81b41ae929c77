"""FLOPs, bytes, parameters and activation memory of the message-passing GNNs, per layer, from block sizes.

A mini-batch is a list of blocks, input side first (DGL's ``NeighborSampler``): block l has ``num_src``
source vertices, ``num_dst`` destination vertices and ``num_edges`` sampled edges. The models are the DGL layers
the executor builds; for layer l of L, ``in_dim = feature_dim`` if l == 0 else ``hidden_dim`` (x ``num_heads``
for gat), ``out_dim = num_classes`` if l == L-1 else ``hidden_dim``; GAT hidden layers have ``num_heads``
heads concatenated, the last layer one head. ReLU and dropout follow every layer but the last, as in DGL's
GraphSAGE example (examples/pytorch/graphsage/node_classification.py); the loss is cross-entropy.

Parameter counts (checked against DGL 1.1.3's source, dgl/nn/pytorch/conv/):

* gcn, ``GraphConv(i, o, norm="none")`` fed the normalised adjacency as per-edge weights (executor/models.py:
  messages ``u_mul_e``, then a sum): weight i*o + bias o.
* sage, ``SAGEConv(i, o, "mean")``: fc_neigh i*o (no bias) + fc_self i*o + o (its bias) = 2*i*o + o.
* gat, ``GATConv(i, o, h)``: fc i*h*o (no bias) + attn_l h*o + attn_r h*o + bias h*o.
* gin, ``GINConv(MLP, "sum", learn_eps=False)`` with MLP = Linear(i, o) -> ReLU -> Linear(o, o):
  (i*o + o) + (o*o + o). ASSUMPTION shared with the executor (its models.py builds this MLP).

Each layer is a sequence of :class:`Kernel` objects following DGL's forward code (GraphConv and SAGEConv apply
the dense transform before aggregating when ``in_dim > out_dim``). Dense kernels: ``2 * rows * in * out``
FLOPs. Aggregations: one add per edge and feature, reading a gathered source row per edge plus an int64 index
(GCN's weighted messages: a multiply too, and the edge's float32 weight).
Backward: a dense kernel costs twice its forward (input and weight gradients), an elementwise or sparse kernel
once (its transpose); in layer 0 kernels acting on the raw features need no input gradient (dense: weight
gradient only, others: nothing). Source: Kaplan et al., "Scaling laws for neural language models",
arXiv:2001.08361, 2020, §2.1 (backward = 2 x forward for matmuls); PyTorch autograd skips inputs with
``requires_grad=False`` (PyTorch docs, "Autograd mechanics: locally disabling gradient computation").
Not modelled: a weight gradient's speed depends on its shape where the forward's does not. On this 2-core CPU
(torch 2.13, 2026-12-01) the weight gradient ``X^T dZ`` of a layer of ``rows x 1433`` inputs (Cora's features)
and 16 outputs ran at half its forward's rate at 2 threads (0.26 -> 0.51 ms at 800 rows, 1.04 -> 2.20 ms at
2708, 4.42 -> 10.95 ms at 10,000) and a quarter at one (1.48 -> 5.87 ms at 2708), as ``X.t().contiguous() @ dZ``
did not (1.53 ms); at 64 outputs within 0.97-1.18x. So a calibration's backward fraction fitted on 64-wide layers
(dp's ``cora-sage``) predicts 16-wide ones (``cora-gcn-full``) fast: neutronstar's backward 3.7 ms for 8.6 measured,
hongtu's 3.1 for 5.2 (benchmarks/bench_transfer.py, 2 workers, calibrated on dp alone, the forwards within 4-10%).
The slowdown is no constant a calibration could fit: at one thread and 16 outputs ``X^T dZ`` ran at 1.7x its
forward's time while ``X`` (rows x 1433 float32) stayed below ~8 MiB and 3.7-3.9x from 11 MiB on (2026-12-01; 3.0x
at 11 MiB in a second run), at 512 inputs 1.1x below 1 MiB and 2.2-2.3x from 8 MiB, at 128 outputs 1.2-1.9x;
``dZ W^T`` (the input gradient) stayed within 0.8-1.3x but for one 3.8x. Pricing it would take a table per machine
(output width x operand bytes) that ``gnnplan probe`` measures; not done.
Activation memory: every kernel's output is kept for backward (float32) plus a one-byte dropout mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gnnplan.simulator.units import FLOAT_BYTES, INDEX_BYTES
from gnnplan.simulator.workload.spec import ModelSpec

__all__ = ["FLOAT_BYTES", "INDEX_BYTES", "ADAM_FLOPS_PER_PARAM", "Block", "Kernel", "ModelCost", "model_cost",
           "layer_dims", "model_state_bytes", "adam_kernels", "param_numels"]
ADAM_FLOPS_PER_PARAM = 14.0
"""Adam with L2 weight decay: ~14 FLOPs per parameter (Kingma and Ba, ICLR 2015, Algorithm 1: two moment
updates, bias corrections, sqrt, divide, update; plus the decay term)."""
ADAM_BYTES_PER_PARAM = 7 * FLOAT_BYTES
"""Adam reads parameter, gradient, m, v and writes parameter, m, v (float32 each)."""
ADAM_STATE_FACTOR = 2
"""Adam keeps two float32 moments per parameter (Kingma and Ba, ICLR 2015, Algorithm 1)."""


@dataclass(frozen=True)
class Block:
    """One sampled block (means over the measured batches, so counts may be fractional)."""

    num_src: float
    num_dst: float
    num_edges: float

    def scaled(self, factor: float) -> Block:
        """The block with every count multiplied by ``factor`` (a partial last batch)."""
        return Block(self.num_src * factor, self.num_dst * factor, self.num_edges * factor)


@dataclass(frozen=True)
class Kernel:
    """One unit of device work.

    Attributes:
        name: what it computes (``"sage0.fc_self"``).
        flops: floating-point operations.
        nbytes: bytes read plus written in device memory.
        sparse: an irregular gather/scatter kernel (aggregation), priced by ``gpu.sparse_flops_per_s`` if set.
        gemm: a dense matrix multiply (backward = 2 x forward).
        out_elems: float32 elements of the output, kept for backward.
        input_grad: whether the kernel's input requires a gradient in layer 0.
        graph_op: run as one DGL message-passing call (update_all / apply_edges / edge_softmax), which adds
            ``gpu.graph_op_overhead_s`` to its launch (its gradient is one too); the sparse kernels of the DGL
            layers are.
        random_elems: random numbers the kernel draws (a dropout mask: one Bernoulli draw per element), priced
            at ``gpu.rng_elements_per_s`` when that is measured (its gradient draws none).
        weighted: a DGL message-passing call whose messages are multiplied by an edge value before the sum
            (``u_mul_e``: GCN's edge weights, GAT's attention), priced by ``gpu.weighted_sparse_flops_per_s`` if set
            (DGL 1.1.3's CPU kernel for it is several times slower than its ``copy_u`` one; its gradient is one
            too).
        backward: a gradient kernel autograd runs (its fixed cost is ``gpu.kernel_overhead_s`` times
            ``gpu.backward_overhead_ratio``: autograd's C++ engine dispatches it, not the model's Python code).
    """

    name: str
    flops: float
    nbytes: float
    sparse: bool = False
    gemm: bool = False
    out_elems: float = 0.0
    input_grad: bool = True
    graph_op: bool = False
    random_elems: float = 0.0
    weighted: bool = False
    backward: bool = False


@dataclass(frozen=True)
class LayerDims:
    """Widths of one layer: input width, output width per head, heads."""

    in_dim: int
    out_dim: int
    num_heads: int = 1

    @property
    def out_total(self) -> int:
        """Output width after concatenating heads."""
        return self.out_dim * self.num_heads


@dataclass(frozen=True)
class ModelCost:
    """Per-iteration compute of one worker: kernels of forward, backward and optimizer, and memory sizes."""

    forward: tuple[Kernel, ...]
    backward: tuple[Kernel, ...]
    optimizer: tuple[Kernel, ...]
    num_params: int
    activation_bytes: float
    block_bytes: float

    @property
    def forward_flops(self) -> float:
        """FLOPs of the forward pass (the executor records the same number on ``forward`` spans)."""
        return sum(k.flops for k in self.forward)

    @property
    def backward_flops(self) -> float:
        """FLOPs of the backward pass."""
        return sum(k.flops for k in self.backward)


def layer_dims(model: ModelSpec, feature_dim: int, num_classes: int) -> list[LayerDims]:
    """Widths of every layer (see module docstring)."""
    heads = model.num_heads if model.arch == "gat" else 1
    dims = []
    for layer in range(model.num_layers):
        in_dim = feature_dim if layer == 0 else model.hidden_dim * heads
        last = layer == model.num_layers - 1
        dims.append(LayerDims(in_dim, num_classes if last else model.hidden_dim, 1 if last else heads))
    return dims


def layer_param_numels(arch: str, d: LayerDims) -> tuple[int, ...]:
    """Elements of each trainable parameter tensor of one DGL layer, one entry per tensor (see module docstring
    for each architecture).

    Raises:
        ValueError: ``arch`` has no message-passing layer.
    """
    i, o, h = d.in_dim, d.out_dim, d.num_heads
    numels = {"gcn": (i * o, o), "sage": (i * o, i * o, o), "gat": (i * h * o, h * o, h * o, h * o),
              "gin": (i * o, o, o * o, o)}
    if arch not in numels:
        raise ValueError(f"model.arch: {arch!r} is not a message-passing model; allowed: {', '.join(numels)}")
    return numels[arch]


def layer_param_count(arch: str, d: LayerDims) -> int:
    """Trainable parameters of one DGL layer (see module docstring for each architecture)."""
    return sum(layer_param_numels(arch, d))


def adam_kernels(numels: Sequence[int]) -> tuple[Kernel, ...]:
    """One Adam step: one kernel per parameter tensor of ``numels`` elements.

    PyTorch's Adam on CPU tensors takes its single-tensor path, a loop over the parameter tensors with about ten
    tensor operations each (torch.optim.adam._single_tensor_adam in PyTorch 2.x; the multi-tensor ``foreach`` path
    is the default only on CUDA), so a step's fixed cost grows with the number of tensors, not of parameters:
    each tensor's update is one modelled kernel, paying ``gpu.kernel_overhead_s``. Measured on the development
    machine (one thread, after a backward, 2026-11-23): GraphSAGE's 6 tensors took 0.50 ms with 18 k parameters
    and 0.89 ms with 184 k.
    """
    return tuple(Kernel(f"adam.{j}", ADAM_FLOPS_PER_PARAM * n, ADAM_BYTES_PER_PARAM * n) for j, n in enumerate(numels))


def param_count(model: ModelSpec, feature_dim: int, num_classes: int) -> int:
    """Trainable parameters of the whole model (equals ``sum(p.numel())`` of the executor's DGL model)."""
    return sum(param_numels(model, feature_dim, num_classes))


def param_numels(model: ModelSpec, feature_dim: int, num_classes: int) -> tuple[int, ...]:
    """Elements of every trainable parameter tensor of the model, layer by layer (:func:`layer_param_numels`)."""
    return tuple(n for d in layer_dims(model, feature_dim, num_classes) for n in layer_param_numels(model.arch, d))


def _gemm(name: str, rows: float, i: int, o: int, bias: bool, grad: bool) -> Kernel:
    flops = 2.0 * rows * i * o + (rows * o if bias else 0.0)
    nbytes = FLOAT_BYTES * (rows * i + i * o + rows * o + (o if bias else 0))
    return Kernel(name, flops, nbytes, gemm=True, out_elems=rows * o, input_grad=grad)


def _aggregate(name: str, edges: float, dst: float, width: int, grad: bool, weighted: bool = False) -> Kernel:
    """A sum of gathered source rows into destination rows; ``weighted``: each message first multiplied by its
    edge's weight (DGL's ``u_mul_e``: one more FLOP per edge and feature, and the weight read per edge)."""
    flops = edges * width * (2.0 if weighted else 1.0)
    nbytes = FLOAT_BYTES * (edges * width + dst * width + (edges if weighted else 0.0)) + INDEX_BYTES * edges
    return Kernel(name, flops, nbytes, sparse=True, out_elems=dst * width, input_grad=grad, graph_op=True,
                  weighted=weighted)


def _elementwise(name: str, n: float, grad: bool, flops_per: float = 1.0, reads: int = 1) -> Kernel:
    return Kernel(name, n * flops_per, FLOAT_BYTES * n * (reads + 1), out_elems=n, input_grad=grad)


def layer_kernels(arch: str, d: LayerDims, b: Block, tag: str) -> list[Kernel]:
    """Forward kernels of one layer on one block, following DGL 1.1.3's layer code (module docstring)."""
    i, o, h = d.in_dim, d.out_dim, d.num_heads
    s, t, e = b.num_src, b.num_dst, b.num_edges
    if arch == "gcn":  # norm="none" with edge weights: no degree-norm passes over the rows (before 2026-11-30
        # the kernels were norm="both"'s, a pass over the s x i input rows the executor never makes)
        if i > o:
            first = [_gemm(f"{tag}.weight", s, i, o, False, False),
                     _aggregate(f"{tag}.u_mul_e_sum", e, t, o, True, weighted=True)]
        else:
            first = [_aggregate(f"{tag}.u_mul_e_sum", e, t, i, False, weighted=True),
                     _gemm(f"{tag}.weight", t, i, o, False, False)]
        return first + [_elementwise(f"{tag}.bias", t * o, True)]
    if arch == "sage":
        if i > o:
            neigh = [_gemm(f"{tag}.fc_neigh", s, i, o, False, False), _aggregate(f"{tag}.mean", e, t, o, True),
                     _elementwise(f"{tag}.mean_div", t * o, True)]
        else:
            neigh = [_aggregate(f"{tag}.mean", e, t, i, False), _elementwise(f"{tag}.mean_div", t * i, False),
                     _gemm(f"{tag}.fc_neigh", t, i, o, False, False)]
        return neigh + [_gemm(f"{tag}.fc_self", t, i, o, True, False), _elementwise(f"{tag}.add", t * o, True, 1, 2)]
    if arch == "gat":
        ho = h * o
        message = Kernel(f"{tag}.u_mul_e_sum", 2.0 * e * ho,
                         FLOAT_BYTES * (e * ho + e * h + t * ho) + INDEX_BYTES * e, sparse=True, out_elems=t * ho,
                         graph_op=True, weighted=True)
        return [_gemm(f"{tag}.fc", s, i, ho, False, False), _elementwise(f"{tag}.el", s * ho, True, 2),
                _elementwise(f"{tag}.er", t * ho, True, 2),
                Kernel(f"{tag}.edge_score", 3.0 * e * h, FLOAT_BYTES * 3 * e * h + INDEX_BYTES * 2 * e,
                       sparse=True, out_elems=e * h, graph_op=True),
                Kernel(f"{tag}.edge_softmax", 5.0 * e * h, FLOAT_BYTES * 4 * e * h + INDEX_BYTES * e,
                       sparse=True, out_elems=e * h, graph_op=True),
                message, _elementwise(f"{tag}.bias", t * ho, True)]
    if arch == "gin":
        return [_aggregate(f"{tag}.sum", e, t, i, False), _elementwise(f"{tag}.self_add", t * i, False, 2, 2),
                _gemm(f"{tag}.mlp0", t, i, o, True, False), _elementwise(f"{tag}.mlp_relu", t * o, True),
                _gemm(f"{tag}.mlp1", t, o, o, True, True)]
    raise ValueError(f"model.arch: {arch!r} is not a message-passing model; allowed: gcn, sage, gat, gin")


def activation_kernel(tag: str, n: float) -> Kernel:
    """The activation after a hidden layer (the executor's ReLU; ELU for GAT) on ``n`` elements, named
    ``<tag>.relu``."""
    return _elementwise(f"{tag}.relu", n, True)


def inference_layer_kernels(arch: str, d: LayerDims, b: Block, last: bool, tag: str = "inference") -> list[Kernel]:
    """Forward kernels of one layer of the evaluation's layer-wise inference on block ``b`` (the executor's
    ``GNN.apply_layer`` in eval mode): :func:`layer_kernels`, then after a hidden layer (``last`` False) its
    activation; dropout is the identity in eval mode (no kernel)."""
    kernels = layer_kernels(arch, d, b, tag)
    return kernels if last else kernels + [activation_kernel(tag, b.num_dst * d.out_total)]


def _backward(kernel: Kernel, layer: int) -> Kernel | None:
    needs_input = layer > 0 or kernel.input_grad
    if kernel.gemm:
        factor = 2.0 if needs_input else 1.0
    elif needs_input:
        factor = 1.0
    else:
        return None
    return replace(kernel, name=f"{kernel.name}.grad", flops=kernel.flops * factor, nbytes=kernel.nbytes * factor,
                   out_elems=0.0, random_elems=0.0, backward=True)


def model_cost(model: ModelSpec, feature_dim: int, num_classes: int, blocks: Sequence[Block]) -> ModelCost:
    """Kernels, parameters and memory of one training iteration on one worker.

    Args:
        model: architecture and widths.
        feature_dim: input feature width.
        num_classes: output width.
        blocks: one block per layer, input side first.

    Returns:
        The iteration's :class:`ModelCost`.

    Raises:
        ValueError: ``len(blocks) != model.num_layers`` or an architecture without message passing.
    """
    if len(blocks) != model.num_layers:
        raise ValueError(f"model_cost: {len(blocks)} blocks for {model.num_layers} layers")
    forward: list[Kernel] = []
    backward: list[Kernel] = []
    activation = 0.0
    dims = layer_dims(model, feature_dim, num_classes)
    for layer, (d, b) in enumerate(zip(dims, blocks)):
        kernels = layer_kernels(model.arch, d, b, f"{model.arch}{layer}")
        if layer < model.num_layers - 1:
            n = b.num_dst * d.out_total
            kernels += [activation_kernel(f"{model.arch}{layer}", n),
                        replace(_elementwise(f"{model.arch}{layer}.dropout", n, True, 2),
                                random_elems=n if model.dropout > 0 else 0.0)]  # ATen returns p = 0 input as is
            activation += n  # one-byte dropout mask
        forward += kernels
        backward += [k for k in (_backward(k, layer) for k in reversed(kernels)) if k is not None]
        activation += FLOAT_BYTES * sum(k.out_elems for k in kernels)
    seeds = blocks[-1].num_dst
    loss = _elementwise("loss.cross_entropy", seeds * num_classes, True, 4)
    forward.append(loss)
    backward.insert(0, replace(loss, name="loss.grad", out_elems=0.0, backward=True))
    activation += FLOAT_BYTES * loss.out_elems
    numels = param_numels(model, feature_dim, num_classes)
    num_params = sum(numels)
    optimizer = adam_kernels(numels)
    block_bytes = sum(INDEX_BYTES * (2 * b.num_edges + b.num_src) for b in blocks)
    return ModelCost(tuple(forward), tuple(backward), optimizer, num_params, activation, block_bytes)


def model_state_bytes(num_params: int) -> float:
    """Device bytes of parameters, gradients and Adam's two moments (float32): 4 x 4 bytes per parameter."""
    return float(FLOAT_BYTES * num_params * (2 + ADAM_STATE_FACTOR))
