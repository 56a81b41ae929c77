"""The per-rank mean of a dataset card's split statistics: every GPU does the mean split, so ``gsplit`` runs the
representative-machine fast path (:mod:`gnnplan.simulator.symmetry`) instead of every rank.

Why it is allowed for a card, and only there: a card's split statistics are measured on one synthetic proxy
(:mod:`gnnplan.simulator.workload.proxy`): one random degree-matched graph, one partition of it into g parts,
one sample per batch. Which GPU gets the heavier split and which GPU pair exchanges more rows are artefacts of
that one draw; the real graph's partition would put them elsewhere. Only distribution-level quantities carry
over from proxy to card, so the simulator keeps what every GPU does on average and how unbalanced the busiest
link is, and drops where the imbalance sits. Measured splits of a real graph are simulated rank by rank.

What is averaged, per measured batch and layer (:class:`~.stats.SplitStats`, :func:`rank_mean_stats`):

* every per-split count (owned sources and destinations, edges by source and destination owner, local edges,
  layer-0 cache hits at every grid fraction, partition sizes): its mean over the g splits;
* the shuffle rows from split i to split j: the mean over the pairs of the same kind, (i = j), (i != j on one
  machine), (different machines), so the rows kept locally, sent over NVLink (or PCIe) and sent over the
  network keep their totals exactly (the bytes per link of the result).

The simulated shuffles then scale the mean rows (:func:`busiest_shuffles`): the rows across machines so that
every machine sends and receives what the busiest machine of the measured split sends or receives (the larger),
the rows inside a machine so that every GPU sends and receives what the busiest GPU does. All GPUs start a
shuffle together after the lockstep and the next lockstep waits for the last one, so a shuffle lasts at least
its busiest link's bytes over the link's rate (work conservation on that link), and the symmetric shuffle with
every link that busy lasts exactly that when those links are its bottleneck (max-min fairness on equal flows
keeps every one of them saturated to the end). On
``ogbn-papers100M`` at 8 x 8 GPUs the shuffles then take what the full simulation of the proxy's per-rank
splits gives to 4 digits (the plain mean: 29 % less); the epoch differs by -0.03 % (METIS split) and -0.001 %
(random split), the plain mean's by -1.4 % and -0.02 % (``benchmarks/bench_scale.py --parts card --card-full
gsplit``); tests/strategies/gsplit/test_gsplit_rank_mean.py bounds the difference on the cora card (2 %;
observed 0.83 %). What is lost is the slowest split's compute lead at every lockstep (brief
../shared/papers/gsplit.md §2.1, edge skew) and a busiest GPU's PCIe link when it, not its machine's NIC, is
the bottleneck of a staged shuffle. The memory check keeps the measured per-rank splits (the largest split
and shuffle buffer must fit).

Source: replacing per-component parameters that are estimation noise by their mean to obtain a symmetric model is
the mean-field reduction of symmetric systems; the representative model of :mod:`gnnplan.simulator.symmetry`
(Emerson and Sistla 1996) then applies to it exactly. Work conservation and max-min fairness: Bertsekas and
Gallager, "Data Networks", 1992, §6.5.2.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gnnplan.simulator.strategies.base import SimContext, folds_proxy_ranks
from gnnplan.simulator.strategies.gsplit.stats import SplitStats
from gnnplan.simulator.strategies.gsplit.work import IterationWork

PER_SPLIT_FIELDS = ("split_src", "split_dst", "edges_by_src", "edges_by_dst", "local_edges")
"""(n_b, L, g) fields averaged over their last axis."""
ROW_FIELDS = ("sage_rows", "gat_rows")
"""(n_b, L, g, g) fields averaged over the pairs of each kind (module docstring)."""
NOTE = ("simulated with every GPU at the per-rank mean of the proxy's splits (per-rank differences are those of "
        "one proxy partition) on one representative machine, each shuffle's rows averaged per link kind and scaled "
        "to the busiest machine's network load and the busiest GPU's load inside a machine (gsplit.rank_mean); the "
        "memory check uses the largest measured split, bytes per link are the measured totals")
"""What a result simulated with the mean says in ``estimated.statistics.split_stats``."""


def applies(ctx: SimContext) -> bool:
    """Whether ``gsplit`` simulates the per-rank mean (:func:`~gnnplan.simulator.strategies.base.folds_proxy_ranks`)."""
    return folds_proxy_ranks(ctx)


def rank_mean_stats(stats: SplitStats, gpus_per_machine: int) -> SplitStats:
    """The statistics with every GPU's split replaced by the mean split (module docstring).

    Args:
        stats: measured statistics, g = ``stats.num_splits`` splits.
        gpus_per_machine: GPUs per machine (splits ``m * gpus_per_machine ...`` live on machine m).

    Returns:
        Statistics of the same shapes (float64 counts) in which every split is the same, and the rows between
        two splits depend only on whether they are the same split, on one machine, or on two machines.

    Raises:
        ValueError: ``gpus_per_machine`` < 1 or does not divide g.
    """
    g = stats.num_splits
    if gpus_per_machine < 1 or g % gpus_per_machine:
        raise ValueError(f"gpus_per_machine: {gpus_per_machine} does not divide the {g} splits")
    out: dict[str, np.ndarray] = {}
    for name in PER_SPLIT_FIELDS:
        out[name] = _mean_over(getattr(stats, name), axis=-1)
    out["input_hits"] = _mean_over(stats.input_hits, axis=1)
    out["partition_sizes"] = _mean_over(stats.partition_sizes, axis=0)
    machine = np.arange(g) // gpus_per_machine
    same = machine[:, None] == machine[None, :]
    diagonal = np.eye(g, dtype=bool)
    for name in ROW_FIELDS:
        rows = np.asarray(getattr(stats, name), dtype=np.float64)
        mean = np.empty_like(rows)
        for kind in (diagonal, same & ~diagonal, ~same):
            if kind.any():
                mean[..., kind] = rows[..., kind].mean(axis=-1, keepdims=True)
        out[name] = mean
    return replace(stats, **out)


def _mean_over(values: np.ndarray, axis: int) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    return np.broadcast_to(v.mean(axis=axis, keepdims=True), v.shape).copy()


def busiest_shuffles(works: list[IterationWork], stats: SplitStats, arch: str,
                     gpus_per_machine: int) -> list[IterationWork]:
    """``works`` of :func:`rank_mean_stats` with every shuffle's mean rows scaled to the busiest measured load
    (module docstring): per batch and layer, the rows across machines by ``max_m max(sent_m, received_m) /
    mean_m sent_m`` (network rows of machine m), the rows inside a machine by ``max_i max(sent_i, received_i) /
    mean_i sent_i`` (rows GPU i exchanges with its machine's other GPUs); a kind with no rows keeps 0.

    Args:
        works: the mean's iteration works (one per window position, ``work.batch`` indexing ``stats``).
        stats: the measured statistics (g splits); arch: ``sage`` or ``gat`` (whose rows are shuffled).
        gpus_per_machine: GPUs per machine.

    Returns:
        The works with ``shuffle_bytes`` scaled (everything else shared).
    """
    g = stats.num_splits
    machines = g // gpus_per_machine
    machine = np.arange(g) // gpus_per_machine
    same = machine[:, None] == machine[None, :]
    intra = same & ~np.eye(g, dtype=bool)
    out = []
    for w in works:
        rows = np.asarray(stats.rows(arch)[w.batch], dtype=np.float64)            # (L, g, g)
        scale = np.ones_like(rows)
        for kind, groups in ((~same, machines), (intra, g)):
            masked = np.where(kind, rows, 0.0)
            sent = masked.sum(axis=2).reshape(len(rows), groups, -1).sum(axis=2)    # (L, groups)
            received = masked.sum(axis=1).reshape(len(rows), groups, -1).sum(axis=2)
            mean = masked.sum(axis=(1, 2)) / groups
            busiest = np.maximum(sent.max(axis=1), received.max(axis=1))
            ratio = np.divide(busiest, mean, out=np.ones_like(mean), where=mean > 0)
            scale[:, kind] = ratio[:, None]
        out.append(replace(w, shuffle_bytes=w.shuffle_bytes * scale))
    return out
