"""HopGNN's micrographs: the schedule (grouping by home machine, merging) and their locality, measured on the graph.

Terms (paper-private, HopGNN: Chen, He, Qu and Zhang, "HopGNN: Boosting Distributed GNN Training Efficiency via
Feature-Centric Model Migration", 2024; brief ../shared/papers/hopgnn.md):

* micrograph: the L-hop sampled computation graph of ONE seed (root) vertex of a mini-batch (§4). A group of
  micrographs (the seeds of one model homed on one machine) is sampled on that machine with one sampler call
  (§5.1 step 2: "a single set mg_d^i of micrographs for each vertex group"), so vertices shared by micrographs
  of one group are deduplicated in its blocks; one seed's micrograph is cut out of them (:func:`cut_blocks`).
* home machine of a seed: the machine owning its features (its partition).
* model d: the replica that starts an iteration on worker d and trains worker d's mini-batch B_d.
* time step t: in step t model d runs on machine ``(m_d + t) mod M`` (``m_d`` = d's machine) on the seeds of B_d
  homed there, ``G[d][t]`` (§5.1, Fig 9). A worker hosts exactly one model per step.
* merging: removing a step t* = argmin_t sum_d |G[d][t]|, dealing its seeds round-robin onto the same model's
  other steps, smallest first (§5.3, Fig 10; recipe of brief §1.9 step 5).

Notation: N (servers) -> ``num_machines`` M (one ring over machines; a machine's g workers are g lanes), B_d ->
``batches[d]``, mg_d^i / G[d][t] -> ``groups[d][t]``, S -> ``num_steps``, m (merges) -> ``num_merges``,
R_micro -> ``micrograph_local_fraction``, m_mg -> ``1 - group_local_fraction``, m_dgl -> ``dp_remote_fraction``,
|R_s| -> ``pregather_remote``.

:func:`micrograph_stats` measures, for every step count S = 1..M, what every worker does per step (seeds, block
sizes of the group it samples at home, local and remote input vertices) and the deduplicated remote vertices of its
pre-gather, on the same partitions, shuffles and per-worker batches as
:func:`simulator.workload.graphstats.sample_stats` (so ``dp`` and ``hopgnn`` predictions refer to the same
mini-batches). Each group's blocks are cut out of its model's sampled mini-batch (:mod:`.cuts`: distributed as
the group's own sample), so one iteration costs W sampler calls and M sparse products per layer, not the
``W M (M + 1) / 2`` sampler calls of sampling every group of every S (135,168 per iteration at 32 x 8 GPUs; 16
iterations on ogbn-papers100M's proxy there took 53 s against 333 s, 2026-12-01).
Results are cached under ``<cache>/stats/<dataset>/micrograph-<digest>.json``. DGL is imported lazily.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from gnnplan.simulator.io import atomic_write_json
from gnnplan.simulator.strategies.hopgnn import cuts
from gnnplan.simulator.workload import graphstats, owners
from gnnplan.simulator.workload.batches import check_seed_split, seeded_sampler, worker_batches
from gnnplan.simulator.workload.datasets import GraphData, load_dataset
from gnnplan.simulator.workload.proxy_pool import pooled
from gnnplan.simulator.workload.spec import GeneratedSpec
from gnnplan.simulator.workload.stats_cache import entry_path, read_entry

MICROGRAPH_FORMAT = 4
"""Version of the measurement (part of the cache key; 3: the ``owner`` split's seeds in random order within each
worker, :func:`simulator.workload.batches.epoch_seeds`; 4: groups cut out of their model's sample, :mod:`.cuts`,
instead of sampled one by one)."""
DEFAULT_NUM_ITERATIONS = 16
"""Iterations (N mini-batches each) measured by :func:`micrograph_stats`. Measured on Cora (32 seeds per worker)
and a 20k-vertex R-MAT graph (128 seeds per worker), 4 METIS parts, random split: from 16 to 32 iterations the
group locality moves by < 0.1% and the pre-gathered rows by < 0.4%, at half the measuring time. The dp remote
share of a 2-part METIS partition moves more, being the share of few seeds (those DistDGL's split moves off the
partition holding too many): on the 2M-vertex R-MAT graph of benchmarks/bench_proxy.py 0.00558 over 16 iterations,
0.00548 over 32 (dp's sampling statistics, 32 batches: 0.00539), its 10^5-vertex proxy's 0.00655 and 0.00600
(2026-11-29). 32 iterations were tried and not kept: the proxy then met that share within 15%, but hopgnn's
predicted traces on 2 machines x 2 GPUs (tests/simulator/test_calibrate_fixed_point.py) calibrated to a PCIe
bandwidth 0.85x and a gather fraction 1.21x their own cluster's (1.02x and 0.98x over 16 iterations): the gap its
docstring lists as not yet closed (loads of a machine's GPUs that start apart, the gather and the copy inside a
load not told apart) then shows on the default configuration. (These figures were measured with format 3, every
group sampled on its own.)"""


# ------------------------------------------------------------------------------------------------ schedule

def home_steps(batches: Sequence[np.ndarray], owner: np.ndarray, num_machines: int,
               gpus_per_machine: int = 1) -> list[np.ndarray]:
    """The step at which every model visits each of its seeds' home machine (§5.1 step 1).

    Args:
        batches: per model (worker) d, its seeds B_d.
        owner: (n,) int64 owner machine of every vertex.
        num_machines: M.
        gpus_per_machine: g; model d starts on machine d // g.

    Returns:
        Per model d, (|B_d|,) int64: seed i is homed on machine ``(d // g + step[i]) mod M``.
    """
    return [(owner[np.asarray(seeds, dtype=np.int64)] - d // gpus_per_machine) % num_machines
            for d, seeds in enumerate(batches)]


def home_groups(batches: Sequence[np.ndarray], owner: np.ndarray, num_machines: int,
                gpus_per_machine: int = 1) -> list[list[np.ndarray]]:
    """Group every model's seeds by the step that visits their home machine (§5.1 step 1; :func:`home_steps`).

    Returns:
        ``groups[d][t]``: seeds of B_d owned by machine ``(d // g + t) mod M``, in batch order.
    """
    steps = home_steps(batches, owner, num_machines, gpus_per_machine)
    return [[np.asarray(seeds, dtype=np.int64)[step == t] for t in range(num_machines)]
            for seeds, step in zip(batches, steps)]


def merge_groups(groups: list[list[np.ndarray]], num_merges: int) -> tuple[list[int], list[list[np.ndarray]]]:
    """Remove ``num_merges`` steps (§5.3): each time the step with the fewest seeds over all models (ties: the
    lowest index) goes, and each model deals its seeds there round-robin onto its remaining steps ordered by
    size, smallest first (ties: lower index).

    Args:
        groups: ``groups[d][t]`` from :func:`home_groups` (M steps).
        num_merges: in [0, M - 1].

    Returns:
        (remaining original step indices, ascending; ``merged[d][k]`` = seeds model d trains at the k-th of them).

    Raises:
        ValueError: num_merges outside [0, M - 1].
    """
    num_steps = len(groups[0]) if groups else 1
    if not 0 <= num_merges < max(num_steps, 1):
        raise ValueError(f"num_merges: must be in [0, {num_steps - 1}], got {num_merges}")
    for done, (steps, work) in enumerate(_merges(groups)):
        if done == num_merges:
            return steps, _as_arrays(steps, work)
    raise AssertionError("_merges yields M states")


def merge_sequence(groups: list[list[np.ndarray]]) -> Iterator[tuple[list[int], list[list[np.ndarray]]]]:
    """The schedules of S = M, M - 1, ..., 1 steps, each one merge (:func:`merge_groups`) after the one before:
    the merge is greedy, so removing m steps is removing one step m times. One pass gives every step count at the
    cost of the last (hopgnn's measurement needs them all, :func:`micrograph_stats`).

    Yields:
        ``(steps, merged)`` as :func:`merge_groups` returns them, M of them, fewest merges first.
    """
    for steps, work in _merges(groups):
        yield steps, _as_arrays(steps, work)


def _merges(groups: list[list[np.ndarray]]) -> Iterator[tuple[list[int], list[list[list[int]]]]]:
    """The merge states of :func:`merge_sequence`: (remaining steps, ``work[d][t]`` model d's seeds at original
    step t as a list), the same lists updated in place by the next merge (read them before asking for it)."""
    num_steps = len(groups[0]) if groups else 1
    work = [[np.asarray(g).tolist() for g in row] for row in groups]
    steps = list(range(num_steps))
    while True:
        yield list(steps), work
        if len(steps) == 1:
            return
        victim = min(steps, key=lambda t: (sum(len(row[t]) for row in work), t))
        steps.remove(victim)
        for row in work:
            order = sorted(steps, key=lambda t: (len(row[t]), t))
            for i, seed in enumerate(row[victim]):
                row[order[i % len(order)]].append(seed)
            row[victim] = []


def _as_arrays(steps: list[int], work: list[list[list[int]]]) -> list[list[np.ndarray]]:
    """``merged[d][k]``: model d's seeds at the k-th remaining step, as int64 arrays."""
    return [[np.asarray(row[t], dtype=np.int64) for t in steps] for row in work]


def host_worker(model: int, step: int, num_machines: int, gpus_per_machine: int = 1) -> int:
    """The worker hosting ``model`` at original step ``step``: same lane on machine ``(m_d + step) mod M``."""
    machine = (model // gpus_per_machine + step) % num_machines
    return machine * gpus_per_machine + model % gpus_per_machine


# ------------------------------------------------------------------------------------------------ micrographs

def cut_blocks(blocks: list[Any], positions: np.ndarray
               ) -> tuple[list[np.ndarray], np.ndarray, list[tuple[int, int, int]]]:
    """The micrographs of some seeds of a sampled batch: every edge of the batch's blocks that reaches them.

    A destination vertex kept in block l keeps ALL its in-edges of block l, so each kept seed's output is
    computed from exactly the neighbours DGL sampled for the batch.

    Args:
        blocks: the batch's DGL blocks, input side first (``dgl.NID`` / ``dgl.EID`` set, as NeighborSampler does).
        positions: (k,) indices of the seeds among ``blocks[-1]``'s destination vertices.

    Returns:
        (per layer, input side first, the (e_l,) int64 graph edge ids kept; the (v,) int64 input vertices;
        per layer (num_src, num_dst, num_edges) of the cut blocks).
    """
    import dgl
    import torch

    need = np.unique(np.asarray(positions, dtype=np.int64))
    eids: list[np.ndarray] = []
    sizes: list[tuple[int, int, int]] = []
    for block in reversed(blocks):
        local = block.in_edges(torch.from_numpy(need), form="eid")
        src, _ = block.find_edges(local)
        src_need = np.union1d(need, src.numpy())
        eids.insert(0, block.edata[dgl.EID][local].numpy().astype(np.int64))
        sizes.insert(0, (len(src_need), len(need), len(local)))
        need = src_need
    return eids, blocks[0].srcdata[dgl.NID].numpy()[need], sizes


# ------------------------------------------------------------------------------------------------ statistics

@dataclass(frozen=True)
class MicrographStats:
    """What every worker does in a mean iteration of ``hopgnn``, for every step count S = 1..M.

    Index ``[S - 1][w][k]`` = worker w (the host) at the k-th remaining step (k < S), means over the measured
    iterations (0 where a worker hosts nothing). Per-layer lists are input side first, like DGL's blocks.

    Attributes:
        step_seeds: seeds trained.
        step_src, step_dst, step_edges: ``[S-1][w][k][l]`` sizes of the blocks of the micrograph group, sampled on
            the host's machine (the host's sampling work is the sum of ``step_edges`` over k and l).
        step_local_inputs, step_remote_inputs: input vertices owned by the host's machine / by another machine.
        pregather_remote, pregather_local: ``[S-1][w]`` distinct input vertices over all of w's groups of the
            iteration owned by another machine (the pre-gather's rows, |R_s|) / by w's machine.
        dp_input_vertices: ``[w]`` input vertices of w's whole mini-batch (what ``dp`` loads).
        dp_remote_fraction: share of the input vertices of each model's whole mini-batch owned by another machine
            than the model's (model-centric training of the same batches, m_dgl; ``dp``'s with the owner split).
        group_local_fraction: share of micrograph-group input vertices (S = M) owned by the host's machine
            (1 - m_mg).
        micrograph_local_fraction: the paper's R_micro, mean over seeds of (co-located non-root vertices) /
            (all vertices of the seed's micrograph) (§4).
        num_iterations: iterations measured.
    """

    SUMMARY_FIELDS: ClassVar[tuple[str, ...]] = ("dp_remote_fraction", "group_local_fraction",
                                                 "micrograph_local_fraction")
    """The paper's m_dgl, 1 - m_mg and R_micro: reported, not priced (the simulation prices the per-step
    counts); a pooled card's values are their medians over the draws
    (:data:`simulator.workload.proxy_pool.SUMMARY_FIELDS`)."""

    fanouts: tuple[int, ...]
    batch_size_per_worker: int
    num_machines: int
    gpus_per_machine: int
    partitioner: str
    step_seeds: list[Any]
    step_src: list[Any]
    step_dst: list[Any]
    step_edges: list[Any]
    step_local_inputs: list[Any]
    step_remote_inputs: list[Any]
    pregather_remote: list[Any]
    pregather_local: list[Any]
    dp_input_vertices: list[float]
    dp_remote_fraction: float
    group_local_fraction: float
    micrograph_local_fraction: float
    num_iterations: int


def micrograph_stats(ref: str | GeneratedSpec, fanouts: Sequence[int], batch_size_per_worker: int, num_machines: int,
                     gpus_per_machine: int, partitioner: str, seed: int = 0,
                     num_iterations: int = DEFAULT_NUM_ITERATIONS, seed_split: str = "owner") -> MicrographStats:
    """Micrograph statistics (class docstring), read from the cache or measured once and cached.

    Measurement: the batches of :func:`simulator.workload.graphstats.sample_stats` (same partition and
    shuffles; seed split ``owner`` or ``random``: :data:`~gnnplan.simulator.workload.batches.SEED_SPLITS`); each
    iteration takes every worker's next batch and samples it with DGL's ``NeighborSampler(fanouts)`` (one thread,
    ``dgl.seed(seed)``: ``dp``'s view, for m_dgl), groups seeds by home machine, merges to every S
    (:func:`merge_sequence`) and cuts each group out of its model's sample, as its host would sample it
    (:mod:`.cuts`; R_micro: each seed's micrograph cut out of it).

    Raises:
        SpecError: invalid arguments or a dataset that cannot be loaded (as ``sample_stats``).
    """
    args = (tuple(fanouts), batch_size_per_worker, num_machines, gpus_per_machine, partitioner, seed, num_iterations,
            seed_split)
    pool = pooled(ref, lambda r: micrograph_stats(r, *args), ("micrograph", *args))
    if pool is not None:  # a small card: the medoid of its proxy draws (simulator/workload/proxy_pool.py)
        return pool
    params = graphstats.sample_params(ref, fanouts, batch_size_per_worker, num_machines, gpus_per_machine,
                                      partitioner, seed, num_iterations)
    check_seed_split(seed_split)
    params.update(format=MICROGRAPH_FORMAT, seed_split=seed_split)
    path = entry_path("micrograph", params)
    try:
        stat = path.stat()
        key: tuple[str, int, int] | None = (str(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = None
    if key is not None and key in _READ:
        return _READ[key]
    data = read_entry(path, params)
    if data is not None:
        try:
            fields: dict[str, Any] = {k: tuple(v) if k == "fanouts" else v for k, v in data.items()}
            stats = MicrographStats(**fields)
        except TypeError:
            pass  # a damaged entry is measured again
        else:
            if key is not None:
                _READ.clear()  # keep one: a study or the merge controller reads the same file again and again
                _READ[key] = stats
            return stats
    graph = load_dataset(ref)
    owner = owners.partition_owners(ref, num_machines, partitioner, seed, graph=graph)
    stats = _measure(graph, owner, params)
    fresh = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}  # asdict deep-copies every list
    atomic_write_json(path, {"params": params, "stats": fresh}, indent=None)
    return stats


_READ: dict[tuple[str, int, int], MicrographStats] = {}
"""The statistics last read from the cache in this process, by (file, modification time, size): parsing the JSON
of 256 workers takes seconds, and a file rewritten (re-measured) is read again."""


class _Totals:
    """Running sums of :class:`MicrographStats`' fields."""

    def __init__(self, num_machines: int, gpus: int, num_layers: int) -> None:
        w = num_machines * gpus
        self.step = {s: np.zeros((w, s, 3 + 3 * num_layers)) for s in range(1, num_machines + 1)}
        self.worker = {s: np.zeros((w, 2)) for s in range(1, num_machines + 1)}  # pg remote, pg local
        self.dp = np.zeros((w, 2))                                                 # inputs, remote inputs
        self.group = np.zeros(2)                                                   # local inputs, inputs (S = M)
        self.micro = np.zeros(2)                                                   # sum of R_micro, seeds


def _measure(graph: GraphData, owner: np.ndarray, params: dict[str, Any]) -> MicrographStats:
    """Sample the iterations and accumulate every step count's schedule (module docstring)."""
    m, gpus, fan = params["num_machines"], params["gpus_per_machine"], params["fanouts"]
    batches = worker_batches(graph.train_idx, owner, m, gpus, params["batch_size_per_worker"], params["seed"],
                             params["num_batches"], partial=False,
                             seed_split=params["seed_split"])
    num_it = min((len(b) for b in batches if b), default=0)
    tot = _Totals(m, gpus, len(fan))
    counter = cuts.DistinctCounter(len(owner))
    with seeded_sampler(graph, fan, params["seed"]) as sample:
        for it in range(num_it):
            batch_list = [b[it] if it < len(b) else np.empty(0, np.int64) for b in batches]
            sampled = {d: sample(seeds) for d, seeds in enumerate(batch_list) if len(seeds)}
            for d, blocks in sampled.items():
                inputs = blocks[0].srcdata["_ID"].numpy()  # "_ID" = dgl.NID
                tot.dp[d] += (len(inputs), int((owner[inputs] != d // gpus).sum()))
            if sampled:
                _account(tot, batch_list, sampled, owner, m, gpus, counter)
    return _finish(tot, params, max(num_it, 1))


def _locality_sum(inputs: Any, input_ids: np.ndarray, owner: np.ndarray, seed_owner: np.ndarray) -> float:
    """Sum over seeds of R_micro = (inputs on the seed's machine, seed excluded) / inputs (§4), summed in seed order.

    Shapes:
        inputs: (k, n) CSR 0/1, seed i's micrograph inputs in row i (columns: positions in ``input_ids``; the rows
        of :func:`.cuts.cut` of one-seed groups, :func:`.cuts.each_seed`); input_ids: (n,) graph ids; owner:
        (num_vertices,) machine of every vertex; seed_owner: (k,) machine of every seed.
    """
    per_seed = np.diff(inputs.indptr)
    rows = np.repeat(np.arange(len(seed_owner)), per_seed)
    home = owner[input_ids[inputs.indices]] == seed_owner[rows]
    same = np.bincount(rows[home], minlength=len(seed_owner))
    total = 0.0
    for value in ((same - 1) / per_seed).tolist():
        total += value
    return total


def _account(tot: _Totals, batch_list: list[np.ndarray], sampled: dict[int, list[Any]], owner: np.ndarray,
             m: int, gpus: int, counter: cuts.DistinctCounter) -> None:
    """Add one iteration to the totals: R_micro of every seed, then the schedule of every step count S = M..1,
    each group cut out of its model's sampled batch as its host would sample it (:mod:`.cuts`)."""
    models = sorted(sampled)
    stacked = cuts.stack_blocks([sampled[d] for d in models])
    at = dict(zip(models, np.cumsum([0] + [len(batch_list[d]) for d in models]).tolist()))
    seeds = np.concatenate([batch_list[d] for d in models])
    one = cuts.cut(stacked, cuts.each_seed(len(seeds)))
    tot.micro += (_locality_sum(one.inputs, stacked.input_ids, owner, owner[seeds]), len(seeds))
    steps_of = home_steps(batch_list, owner, m, gpus)
    positions = [[np.flatnonzero(steps_of[d] == t) + at.get(d, 0) for t in range(m)] for d in range(len(batch_list))]
    column_owner = owner[stacked.input_ids]
    for steps, merged in merge_sequence(positions):
        hosted = sorted((host_worker(d, t, m, gpus), k, pos) for d, row in enumerate(merged)
                        for k, (t, pos) in enumerate(zip(steps, row)) if len(pos))  # by host: its entries together
        _account_steps(tot, len(steps), hosted, stacked, column_owner, gpus, counter)


def _account_steps(tot: _Totals, s: int, hosted: list[tuple[int, int, np.ndarray]], stacked: cuts.StackedBlocks,
                   column_owner: np.ndarray, gpus: int, counter: cuts.DistinctCounter) -> None:
    """Add one iteration's schedule with S = ``s`` steps: ``hosted`` lists (host worker, step k, the group's seed
    positions in ``stacked``) sorted by host; ``column_owner`` is the owner machine of every stacked input."""
    hosts = np.array([h for h, _, _ in hosted], dtype=np.int64)
    group = cuts.cut(stacked, cuts.members([pos for _, _, pos in hosted], stacked.num_seeds))
    columns, starts = group.inputs.indices, group.inputs.indptr
    n_in = np.diff(starts)
    mine = column_owner[columns] == np.repeat(hosts // gpus, n_in)
    n_local = np.add.reduceat(mine.astype(np.int64), starts[:-1])  # every group has a seed, so an input
    n_seeds = np.array([len(pos) for _, _, pos in hosted], dtype=np.float64)
    values = np.column_stack([n_seeds, n_local, n_in - n_local, group.sizes.reshape(len(hosted), -1)])
    np.add.at(tot.step[s], (hosts, np.array([k for _, k, _ in hosted], dtype=np.int64)), values)
    ids = stacked.input_ids[columns]
    workers = tot.dp.shape[0]
    for col, part, count in ((0, ~mine, n_in - n_local), (1, mine, n_local)):  # pre-gather rows: remote, local
        bounds = np.concatenate([[0], np.cumsum(np.bincount(hosts, weights=count, minlength=workers))])
        tot.worker[s][:, col] += counter.count(ids[part], bounds.astype(np.int64))
    if s == len(tot.step):
        tot.group += (n_local.sum(), n_in.sum())


def _finish(tot: _Totals, params: dict[str, Any], num_it: int) -> MicrographStats:
    """Means over iterations, as nested lists."""
    m = params["num_machines"]
    steps = {s: tot.step[s] / num_it for s in range(1, m + 1)}
    workers = {s: tot.worker[s] / num_it for s in range(1, m + 1)}

    def layer(s: int, j: int) -> list[Any]:
        return steps[s][:, :, 3 + j::3].tolist()

    ss = range(1, m + 1)
    dp = tot.dp / num_it
    return MicrographStats(
        tuple(params["fanouts"]), params["batch_size_per_worker"], m, params["gpus_per_machine"],
        params["partitioner"], [steps[s][:, :, 0].tolist() for s in ss], [layer(s, 0) for s in ss],
        [layer(s, 1) for s in ss], [layer(s, 2) for s in ss], [steps[s][:, :, 1].tolist() for s in ss],
        [steps[s][:, :, 2].tolist() for s in ss], [workers[s][:, 0].tolist() for s in ss],
        [workers[s][:, 1].tolist() for s in ss], dp[:, 0].tolist(),
        float(dp[:, 1].sum() / max(dp[:, 0].sum(), 1)), float(tot.group[0] / max(tot.group[1], 1)),
        float(tot.micro[0] / max(tot.micro[1], 1)), num_it)
