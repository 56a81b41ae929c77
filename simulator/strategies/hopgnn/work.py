"""Work of one ``hopgnn`` iteration per worker, from the measured micrograph statistics (see
:mod:`simulator.strategies.hopgnn` for the mechanism and the paper-private terms).

Notation: S -> ``num_steps``, P -> ``num_params``, b_p = b_f = ``FLOAT_BYTES``, D -> ``feature_dim``,
|R_s| -> ``pregather_remote_rows``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnplan.simulator.hardware.formulas import compute_time_s
from gnnplan.simulator.hardware.model import FLOAT_BYTES
from gnnplan.simulator.strategies.base import SimContext
from gnnplan.simulator.strategies.hopgnn.micrographs import MicrographStats
from gnnplan.simulator.workload.model_cost import INDEX_BYTES, Block, ModelCost, adam_kernels, model_cost, param_numels


@dataclass(frozen=True)
class StepWork:
    """One worker's share of one time step.

    Attributes:
        num_seeds: seeds of the micrograph group trained.
        input_bytes: feature bytes of the group's input vertices (all cross host-to-device).
        local_bytes, remote_bytes: of those, owned by the host's machine / by another machine.
        forward_s, backward_s: uncontended compute seconds; ``*_flops`` the FLOPs.
        blocks: the group's block sizes (sampled on the host's machine), input side first.
    """

    num_seeds: float
    input_bytes: float
    local_bytes: float
    remote_bytes: float
    forward_s: float
    backward_s: float
    forward_flops: float
    backward_flops: float
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class HopWork:
    """One worker's work in one iteration of ``hopgnn`` with S steps.

    Attributes:
        steps: the S time steps in order.
        num_sampled_edges: edges of the micrograph groups the worker hosts, sampled on its machine (home
            sampling; the naive variant: its own mini-batch).
        pregather_remote_rows, pregather_local_rows: distinct remote / local input rows of all the worker's
            groups (|R_s| and its local counterpart).
        migration_bytes: bytes one migration moves (parameters and accumulated gradients).
        gradient_bytes: bytes of the gradient all-reduce.
        optimizer_s, optimizer_flops: Adam.
        row_bytes: one feature row.
    """

    steps: tuple[StepWork, ...]
    num_sampled_edges: float
    pregather_remote_rows: float
    pregather_local_rows: float
    migration_bytes: float
    gradient_bytes: float
    optimizer_s: float
    optimizer_flops: float
    row_bytes: float
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        """S."""
        return len(self.steps)

    @property
    def paid_steps(self) -> tuple[int, ...]:
        """The steps whose end pays ``iteration_overhead_s`` before the next one (the last step's is paid by the
        update): every step that trains a group (forward seconds > 0) but the last of them. A step that only
        loads (the naive variant's tour) or hosts nothing runs no framework step, so an iteration pays
        ``max(compute steps, 1)`` overheads, as calibration counts them (one per ``forward`` span,
        ``hopgnn.CALIBRATION``)."""
        compute = [k for k, step in enumerate(self.steps) if step.forward_s > 0]
        return tuple(compute[:-1])

    @property
    def num_overhead_steps(self) -> int:
        """Overheads an iteration pays: ``max(compute steps, 1)`` (:attr:`paid_steps`)."""
        return len(self.paid_steps) + 1


def step_work(ctx: SimContext, blocks: list[Block], num_seeds: float, local_rows: float,
              remote_rows: float) -> StepWork:
    """Price one group: its kernels on the cluster's device and its feature bytes."""
    cl, row = ctx.cluster, ctx.summary.feature_dim * FLOAT_BYTES
    if num_seeds <= 0:
        return StepWork(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, tuple(blocks))
    cost = model_cost(ctx.workload.model, ctx.summary.feature_dim, ctx.summary.num_classes, blocks)
    eff = cl.efficiency
    return StepWork(num_seeds, (local_rows + remote_rows) * row, local_rows * row, remote_rows * row,
                    compute_time_s(cost.forward, cl.gpu, eff.forward_fraction),
                    compute_time_s(cost.backward, cl.gpu, eff.backward_fraction),
                    cost.forward_flops, cost.backward_flops, tuple(blocks))


def model_costs(ctx: SimContext) -> ModelCost:
    """The model's kernels on one worker's whole mini-batch (sizes of ``dp``'s statistics)."""
    st = ctx.sample
    blocks = [Block(s, d, e) for s, d, e in zip(st.num_src_vertices, st.num_dst_vertices, st.num_edges)]
    return model_cost(ctx.workload.model, ctx.summary.feature_dim, ctx.summary.num_classes, blocks)


def update_costs(ctx: SimContext) -> tuple[float, float, float]:
    """(gradient bytes, optimizer seconds, optimizer FLOPs) of one Adam step of the workload's model: they depend on
    its parameter tensors only (:func:`~gnnplan.simulator.workload.model_cost.param_numels`,
    :func:`~gnnplan.simulator.workload.model_cost.adam_kernels`), not on a batch."""
    numels = param_numels(ctx.workload.model, ctx.summary.feature_dim, ctx.summary.num_classes)
    adam, cl = adam_kernels(numels), ctx.cluster
    return (float(FLOAT_BYTES * sum(numels)), compute_time_s(adam, cl.gpu, cl.efficiency.optimizer_fraction),
            sum(k.flops for k in adam))


def hop_work(ctx: SimContext, mg: MicrographStats, rank: int, num_steps: int, migrate_parameters: bool,
             scale: float = 1.0) -> HopWork:
    """Worker ``rank``'s work in an iteration with ``num_steps`` steps whose seeds are ``scale`` x a full batch.

    Source: brief ../shared/papers/hopgnn.md §2.2 (derived cost model: T_sample(s) of the groups sampled at home,
    T_redistribute ~ 0, one pre-gather of |R_s| rows, S steps of host-to-device copy + forward + backward, S - 1
    migrations of 2 P b_p bytes, all-reduce).
    """
    i = num_steps - 1
    steps = []
    for k in range(num_steps):
        blocks = [Block(s * scale, d * scale, e * scale) for s, d, e in
                  zip(mg.step_src[i][rank][k], mg.step_dst[i][rank][k], mg.step_edges[i][rank][k])]
        steps.append(step_work(ctx, blocks, mg.step_seeds[i][rank][k] * scale,
                               mg.step_local_inputs[i][rank][k] * scale, mg.step_remote_inputs[i][rank][k] * scale))
    grad, optimizer_s, optimizer_flops = update_costs(ctx)
    return HopWork(
        steps=tuple(steps), num_sampled_edges=sum(b.num_edges for w in steps for b in w.blocks),
        pregather_remote_rows=mg.pregather_remote[i][rank] * scale,
        pregather_local_rows=mg.pregather_local[i][rank] * scale,
        migration_bytes=grad * (2.0 if migrate_parameters else 1.0), gradient_bytes=grad,
        optimizer_s=optimizer_s, optimizer_flops=optimizer_flops,
        row_bytes=float(ctx.summary.feature_dim * FLOAT_BYTES))


def naive_work(ctx: SimContext, rank: int, scale: float = 1.0) -> HopWork:
    """Worker ``rank``'s work in an iteration of the naive feature-centric variant (micrograph training off).

    [inferred] from the brief §1.2 (paper §3.2, Fig 6): model d tours all M machines with its whole mini-batch
    subgraph; at each stop it reads the input features stored there (local reads only) and computes the partial
    layer-1 aggregations, then migrates carrying its parameters, the partial aggregates and the destination
    features of block 0 (2 x dst_0 x D floats) and block 0's topology, what the stops read (as the executor's
    :class:`~gnnplan.executor.strategies.hopgnn.naive.Tour` sends it: the dst_0 destination ids, and per edge
    the source id, destination index and edge id, int64 each; the upper blocks stay at home); after the tour it
    is back home (M migrations) and runs the rest of forward and the backward pass (an extra, load-free step).
    """
    st, cl = ctx.sample, ctx.cluster
    m = cl.num_machines
    row = float(ctx.summary.feature_dim * FLOAT_BYTES)
    inputs = st.num_src_vertices[0] * scale
    local_share = 1.0 - st.remote_miss_fraction[0]
    shares = [local_share] + [(1.0 - local_share) / max(m - 1, 1)] * (m - 1)
    eff = cl.efficiency
    steps = [StepWork(0.0, inputs * f * row, inputs * f * row, 0.0, 0.0, 0.0, 0.0, 0.0, ()) for f in shares]
    blocks = [Block(s, d, e).scaled(scale) for s, d, e in zip(st.num_src_vertices, st.num_dst_vertices, st.num_edges)]
    full = model_cost(ctx.workload.model, ctx.summary.feature_dim, ctx.summary.num_classes, blocks)
    steps.append(StepWork(st.num_dst_vertices[-1] * scale, 0.0, 0.0, 0.0,
                          compute_time_s(full.forward, cl.gpu, eff.forward_fraction),
                          compute_time_s(full.backward, cl.gpu, eff.backward_fraction),
                          full.forward_flops, full.backward_flops, tuple(blocks)))
    grad, optimizer_s, optimizer_flops = update_costs(ctx)
    dst0, edges0 = st.num_dst_vertices[0] * scale, st.num_edges[0] * scale
    carried = grad + 2.0 * dst0 * row + INDEX_BYTES * (dst0 + 3.0 * edges0 + 2.0)  # + the two sizes sent first
    return HopWork(tuple(steps), sum(st.num_edges) * scale, 0.0, 0.0, carried, grad, optimizer_s, optimizer_flops,
                   row, {"naive_migrations": float(m)})
