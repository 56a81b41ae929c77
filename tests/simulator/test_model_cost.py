"""Model arithmetic: parameter counts equal DGL's layers, FLOPs follow DGL's forward code."""

from __future__ import annotations

import pytest

from gnnplan.simulator.workload.model_cost import (
    Block,
    LayerDims,
    layer_dims,
    layer_param_count,
    layer_param_numels,
    model_cost,
    model_state_bytes,
    param_count,
)
from gnnplan.simulator.workload.spec import ModelSpec


@pytest.mark.parametrize("arch", ["gcn", "sage", "gat", "gin"])
def test_parameter_counts_equal_dgl_layers(arch: str) -> None:
    torch = pytest.importorskip("torch")
    dglnn = pytest.importorskip("dgl.nn")
    i, o, h = 37, 11, 3
    layer = {"gcn": lambda: dglnn.GraphConv(i, o), "sage": lambda: dglnn.SAGEConv(i, o, "mean"),
             "gat": lambda: dglnn.GATConv(i, o, h),
             "gin": lambda: dglnn.GINConv(torch.nn.Sequential(torch.nn.Linear(i, o), torch.nn.ReLU(),
                                                              torch.nn.Linear(o, o)), "sum")}[arch]()
    assert layer_param_count(arch, LayerDims(i, o, h if arch == "gat" else 1)) == \
        sum(p.numel() for p in layer.parameters())
    assert sorted(layer_param_numels(arch, LayerDims(i, o, h if arch == "gat" else 1))) == \
        sorted(p.numel() for p in layer.parameters())


def test_layer_widths_and_whole_model_parameters() -> None:
    gat = ModelSpec(arch="gat", num_layers=3, hidden_dim=8, num_heads=4)
    assert layer_dims(gat, 100, 7) == [LayerDims(100, 8, 4), LayerDims(32, 8, 4), LayerDims(32, 7, 1)]
    sage = ModelSpec(arch="sage", num_layers=2, hidden_dim=16)
    assert param_count(sage, 100, 7) == (2 * 100 * 16 + 16) + (2 * 16 * 7 + 7)
    assert model_state_bytes(10) == 160.0


def test_sage_flops_follow_dgl_forward_and_backward_rules() -> None:
    # one layer, in 4 <= out 8: aggregate on the input width first (DGL SAGEConv lin_before_mp is False)
    model = ModelSpec(arch="sage", num_layers=1, hidden_dim=8)
    s, d, e, i, o = 50.0, 10.0, 40.0, 4, 8
    cost = model_cost(model, i, o, [Block(s, d, e)])
    forward = e * i + d * i + 2 * d * i * o + (2 * d * i * o + d * o) + d * o + 4 * d * o
    assert cost.forward_flops == pytest.approx(forward, rel=1e-15)
    # layer 0: aggregation of raw features needs no gradient, dense kernels only their weight gradient (1x)
    backward = 2 * d * i * o + (2 * d * i * o + d * o) + d * o + 4 * d * o
    assert cost.backward_flops == pytest.approx(backward, rel=1e-15)
    assert cost.num_params == 2 * i * o + o
    assert cost.activation_bytes > 0 and cost.block_bytes == 8 * (2 * e + s)


def test_hidden_layers_backward_costs_twice_the_dense_forward() -> None:
    model = ModelSpec(arch="gcn", num_layers=2, hidden_dim=16)
    blocks = [Block(1000.0, 100.0, 900.0), Block(100.0, 10.0, 90.0)]
    cost = model_cost(model, 16, 16, blocks)
    layer1 = [k for k in cost.forward if k.name.startswith("gcn1")]
    layer1_back = [k for k in cost.backward if k.name.startswith("gcn1")]
    expected = sum(2 * k.flops if k.gemm else k.flops for k in layer1)
    assert sum(k.flops for k in layer1_back) == pytest.approx(expected)


def test_wrong_block_count_and_unknown_arch_raise() -> None:
    with pytest.raises(ValueError, match="blocks"):
        model_cost(ModelSpec(arch="sage", num_layers=2, hidden_dim=8), 4, 3, [Block(1, 1, 1)])
    with pytest.raises(ValueError, match="allowed"):
        layer_param_count("sgc", LayerDims(4, 3))


def test_adam_is_one_kernel_per_parameter_tensor_and_dropout_draws_its_mask() -> None:
    model = ModelSpec(arch="sage", num_layers=2, hidden_dim=8, dropout=0.5)
    cost = model_cost(model, 4, 3, [Block(50.0, 10.0, 40.0), Block(10.0, 2.0, 8.0)])
    assert [k.nbytes / 28 for k in cost.optimizer] == [32, 32, 8, 24, 24, 3]  # 7 float32 per parameter
    assert sum(k.flops for k in cost.optimizer) == 14 * cost.num_params
    drawn = [(k.name, k.random_elems) for k in cost.forward + cost.backward if k.random_elems]
    assert drawn == [("sage0.dropout", 10.0 * 8)]  # the hidden layer's mask; its gradient reuses it


@pytest.mark.parametrize(("i", "o"), [(1433, 16), (4, 8)])
def test_gcn_kernels_follow_the_executors_weighted_graphconv(i: int, o: int) -> None:
    """The executor's GCN layer is ``GraphConv(norm="none")`` fed the normalised adjacency as edge weights
    (executor/models.py): the dense transform (before aggregating when ``i > o``, as DGL orders it), one weighted
    aggregation (``u_mul_e`` then a sum: 2 FLOPs per edge and feature) and the bias, and no degree-norm pass over
    the rows (norm="both"'s, priced before 2026-11-30: a pass over the s x i input rows)."""
    from gnnplan.executor.models import GNN

    executed = GNN(ModelSpec(arch="gcn", num_layers=1, hidden_dim=8), i, o).layers[0]
    assert executed._norm == "none"
    s, d, e = 50.0, 10.0, 40.0
    cost = model_cost(ModelSpec(arch="gcn", num_layers=1, hidden_dim=8), i, o, [Block(s, d, e)])
    names = [k.name for k in cost.forward]
    assert not [n for n in names if "norm" in n]
    rows = s if i > o else d  # W first on every source row, else on the aggregated destination rows
    width = o if i > o else i
    layer = 2 * rows * i * o + 2 * e * width + d * o  # dense, weighted aggregation, bias
    assert sum(k.flops for k in cost.forward if k.name.startswith("gcn0")) == pytest.approx(layer, rel=1e-15)
    aggregation = next(k for k in cost.forward if k.name == "gcn0.u_mul_e_sum")
    assert aggregation.nbytes == 4 * (e * width + d * width + e) + 8 * e  # rows, outputs, edge weights, ids
    assert aggregation.graph_op and aggregation.sparse
