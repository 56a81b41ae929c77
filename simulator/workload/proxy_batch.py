"""The per-batch rule of a card's proxy (:mod:`simulator.workload.proxy`): mini-batch counts measured on a proxy
too small for a batch's reach, scaled to the card's size.

A batch's sampled neighbourhood is size-invariant only while it is a small part of the graph; on a heavy-tailed
proxy a batch's draws pile up on the proxy's hubs. :func:`batch_reach_scale` gives, per block, the ratio of the
expected distinct vertices and edges of the occupancy model :func:`simulator.workload.reach.batch_reach` at the
card's size over the proxy's; :func:`scale_sample_stats` applies it to dp's
:class:`~simulator.workload.graphstats.SampleStats` (block sizes, and the hit / local / remote split re-weighted
by degree band), :func:`scale_layers` to other per-layer counts (gsplit's split inputs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from gnnplan.simulator.workload.cards import Card, load_card
from gnnplan.simulator.workload.reach import BatchReach, batch_reach, class_share, histogram_classes


@dataclass(frozen=True)
class BatchReachScale:
    """Per-batch ratios from a proxy to its card (:func:`batch_reach_scale`): the expected block sizes of
    :func:`simulator.workload.reach.batch_reach` at the card's size over those at the proxy's.

    Attributes:
        src_ratio, dst_ratio, edge_ratio: (L,) ratios of source vertices, destination vertices and sampled
            edges per block, input side first.
        full, proxy: the two :class:`simulator.workload.reach.BatchReach` (band shares of the input vertices,
            own and other parts, for :func:`scale_sample_stats`).
    """

    src_ratio: np.ndarray
    dst_ratio: np.ndarray
    edge_ratio: np.ndarray
    full: BatchReach
    proxy: BatchReach

    @property
    def remote_ratio(self) -> float:
        """Ratio of the share of a batch's input vertices owned by another part (a remote-input fraction
        without a cache), card over proxy."""
        full = self.full.other_inputs.sum() / self.full.num_src[0]
        prox = self.proxy.other_inputs.sum() / self.proxy.num_src[0]
        return float(full / prox) if prox > 0 else 1.0


def batch_reach_scale(card: str | Card, graph: Any, fanouts: Iterable[int], batch_size: float, num_parts: int = 1,
                      cut: float = 0.0) -> BatchReachScale:
    """The per-batch scaling rule from a proxy graph to its card: a mini-batch's sampled neighbourhood is not
    size-invariant when the proxy is small enough that a batch's reach overlaps itself (an R-MAT graph of 2M
    vertices at a 10^5-vertex proxy: 1024 seeds with fanouts (10, 10) make ~10^5 draws, most of them on
    vertices drawn already), so per-batch counts are scaled by the ratio of the expected distinct counts of
    :func:`simulator.workload.reach.batch_reach` (occupancy of size-biased edge-end draws, layer by layer) at
    the card's size (its degree histogram at n vertices, its training vertices' histogram or a uniform sample
    as the seeds) and at the proxy's (the proxy graph's realised degrees and training vertices, so the
    half-edges a hub lost in the proxy are accounted for). Degree correlations, communities and cycles are
    in the proxy's measurement and assumed to change the count by the same factor at both sizes. At ``n_p = n``
    the ratios differ from 1 only by the histogram's binning.

    Args:
        card: the card (name or :class:`Card`), which must have ``degree.in_degree_histogram``.
        graph: the proxy graph (:class:`simulator.workload.datasets.GraphData`; its ``in_degrees()`` and
            ``train_idx``).
        fanouts: per block, input side first.
        batch_size: seeds of one batch (per worker for ``dp``, the whole batch for ``gsplit``).
        num_parts: machines of the partition the seeds are split by (1: a uniform sample of all training
            vertices).
        cut: the partition's edge-cut fraction (as measured on the proxy; the cut fraction is kept).

    Returns:
        The :class:`BatchReachScale`.

    Raises:
        ValueError: the card has no degree histogram.
    """
    c = load_card(card) if isinstance(card, str) else card
    hist = c.degree.in_degree_histogram
    if hist is None:
        raise ValueError(f"batch_reach_scale: card {c.name} has no degree.in_degree_histogram")
    fan = tuple(int(f) for f in fanouts)
    deg_f, cnt_f = histogram_classes(hist.value, c.num_vertices.value)
    train_hist = c.split.train_in_degree_histogram
    share_f = class_share(deg_f, None if train_hist is None else train_hist.value, cnt_f)
    full = batch_reach(deg_f, cnt_f, share_f, batch_size, fan, num_parts, cut)
    deg = graph.in_degrees()
    values, cnt_p = np.unique(deg, return_counts=True)
    train = np.asarray(graph.train_idx)
    share_p = np.bincount(np.searchsorted(values, deg[train]), minlength=len(values)) / max(len(train), 1)
    proxy = batch_reach(values.astype(np.float64), cnt_p.astype(np.float64), share_p, batch_size, fan, num_parts,
                        cut)

    def ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), 1.0)

    return BatchReachScale(ratio(full.num_src, proxy.num_src), ratio(full.num_dst, proxy.num_dst),
                           ratio(full.num_edges, proxy.num_edges), full, proxy)


def scale_sample_stats(stats: Any, card: str | Card, graph: Any) -> Any:
    """A proxy's :class:`simulator.workload.graphstats.SampleStats` at the card's size (:func:`batch_reach_scale`
    with the stats' fanouts, seeds per worker, machines and the proxy's measured edge cut): block sizes times
    their ratios; the input vertices' split into cache hits, local and remote misses re-weighted band by band,
    where a band is the vertices between two cache fractions in degree order (PaGraph's cache holds the
    highest-degree ones): the proxy's measured local and remote inputs of a band times the ratio of the model's
    share of the inputs in that band owned by the worker's machine (local) or another (remote), at the card's
    size over the proxy's (post-stratification by degree band: what is kept is each band's local / remote
    composition relative to the model, what changes is how many of a batch's inputs fall in each band),
    renormalised to 1. ``remote_busiest_ratio``, ``slowest_input_ratio``, the per-worker input and edge ratios and
    the edge cut are kept (ratios of one iteration's busiest or slowest worker to the mean one, [inferred] to carry
    over at the proxy's scale); the per-worker shares follow the mean's (:func:`_scale_workers`).

    Raises:
        ValueError: the card has no degree histogram.
    """
    rs = batch_reach_scale(card, graph, stats.fanouts, stats.batch_size_per_worker, stats.num_machines,
                           stats.edge_cut_fraction)
    grid = np.asarray(stats.cache_fractions, dtype=np.float64)
    hit = np.asarray(stats.hit_fraction)
    local, remote = np.asarray(stats.local_miss_fraction), np.asarray(stats.remote_miss_fraction)
    band_local, band_remote = local[:-1] - local[1:], remote[:-1] - remote[1:]  # measured, per band

    def weight(part: str) -> np.ndarray:
        full = rs.full.band_inputs(grid, part) / rs.full.num_src[0]
        prox = rs.proxy.band_inputs(grid, part) / rs.proxy.num_src[0]
        return np.where(prox > 0, full / np.where(prox > 0, prox, 1.0), 1.0)

    new_local, new_remote = band_local * weight("own"), band_remote * weight("other")
    total = float(new_local.sum() + new_remote.sum())
    if total <= 0 or not np.isclose(hit[0], 0.0) or not np.isclose(grid[-1], 1.0):
        new_hit, new_loc, new_rem = hit, local, remote
    else:
        new_local, new_remote = new_local / total, new_remote / total
        new_loc = np.concatenate([np.cumsum(new_local[::-1])[::-1], [0.0]])
        new_rem = np.concatenate([np.cumsum(new_remote[::-1])[::-1], [0.0]])
        new_hit = 1.0 - new_loc - new_rem
    return replace(stats, num_src_vertices=tuple((np.asarray(stats.num_src_vertices) * rs.src_ratio).tolist()),
                   num_dst_vertices=tuple((np.asarray(stats.num_dst_vertices) * rs.dst_ratio).tolist()),
                   num_edges=tuple((np.asarray(stats.num_edges) * rs.edge_ratio).tolist()),
                   hit_fraction=tuple(np.clip(new_hit, 0.0, 1.0).tolist()),
                   local_miss_fraction=tuple(np.clip(new_loc, 0.0, 1.0).tolist()),
                   remote_miss_fraction=tuple(np.clip(new_rem, 0.0, 1.0).tolist()),
                   **_scale_workers(stats, np.asarray(new_hit), np.asarray(new_rem)))


def _scale_workers(stats: Any, new_hit: np.ndarray, new_remote: np.ndarray) -> dict[str, Any]:
    """The per-worker and per-machine fields of ``stats`` at the card's size: each worker's hit and remote shares,
    and each machine's sent rows, times the mean's change at every cache fraction (``new_hit``, ``new_remote``:
    (grid,) the mean's shares at the card's size; factor 1 where the measured share is 0) [inferred: the workers
    keep their shares relative to the mean one, as the ratios do], a worker's hit and remote shares capped at 1
    together."""
    if not stats.worker_hit_fraction:
        return {}

    def change(new: np.ndarray, old: Any) -> np.ndarray:
        old = np.asarray(old, dtype=np.float64)
        return np.where(old > 0, new / np.where(old > 0, old, 1.0), 1.0)

    hits = np.clip(np.asarray(stats.worker_hit_fraction) * change(new_hit, stats.hit_fraction), 0.0, 1.0)
    remote_change = change(new_remote, stats.remote_miss_fraction)
    remotes = np.clip(np.asarray(stats.worker_remote_fraction) * remote_change, 0.0, 1.0 - hits)
    sent = np.asarray(stats.machine_sent_ratio) * remote_change
    return {"worker_hit_fraction": tuple(tuple(r) for r in hits.tolist()),
            "worker_remote_fraction": tuple(tuple(r) for r in remotes.tolist()),
            "machine_sent_ratio": tuple(tuple(r) for r in sent.tolist())}


def scale_layers(values: np.ndarray, ratios: np.ndarray, axis: int) -> np.ndarray:
    """``values`` (any shape, float) with its layer axis ``axis`` multiplied by ``ratios`` (L,) (a
    :class:`BatchReachScale` ratio applied to per-batch, per-layer counts such as gsplit's ``split_src``)."""
    v = np.asarray(values, dtype=np.float64)
    shape = [1] * v.ndim
    shape[axis] = len(ratios)
    return v * np.asarray(ratios, dtype=np.float64).reshape(shape)


def card_law_histogram(c: Card) -> list[list[float]]:
    """The log-binned histogram (bins of :func:`simulator.workload.degree_bins.bin_edges`) of card ``c``'s degree
    law at the card's own size, from the law's distribution function (no draws: a card of 10^8 vertices would
    need as many): the zero-in-degree fraction at 0, and the others' expected degrees (the truncated power law of
    :func:`simulator.workload.sbm.expected_degrees` with the connected mean, the exponent and
    :func:`simulator.workload.proxy.proxy_max_degree` at the card's size, its own maximum) rounded to the nearest
    degree, at least 1, in the bins of single degrees below 16 and at their conditional mean in the log bins above
    (:func:`simulator.workload.proxy.law_histogram` at ``n_p = n`` draws the same law). Rows ``[degree,
    fraction]``, fractions unrounded (the tail of 10^8 vertices lies below a rounded fraction's last digit).

    Source: distribution function and conditional mean of the truncated Pareto distribution with shape
    a = exponent - 1 on [x_min, k_max] (:func:`simulator.workload.sbm.powerlaw_min_degree`).
    """
    from gnnplan.simulator.workload.degree_bins import EXACT_DEGREES, bin_edges
    from gnnplan.simulator.workload.proxy import proxy_max_degree
    from gnnplan.simulator.workload.sbm import powerlaw_min_degree

    n, zero = c.num_vertices.value, c.degree.zero_fraction
    k_max = proxy_max_degree(c, n, 1)
    a = c.degree.exponent.value - 1.0
    x_min = powerlaw_min_degree(c.connected_mean_in_degree, c.degree.exponent.value, k_max)

    def tail(x: np.ndarray) -> np.ndarray:  # x^-a at x clipped to the law's support
        return np.clip(x, x_min, k_max) ** -a

    edges = bin_edges(k_max)[1:]                        # lower edges from degree 1
    lo, hi = edges[:-1] - 0.5, edges[1:] - 0.5          # theta rounds to the bin's degrees
    lo[0] = x_min
    mass = (tail(lo) - tail(hi)) / (x_min ** -a - k_max ** -a)
    clo, chi = np.clip(lo, x_min, k_max), np.clip(hi, x_min, k_max)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = a / (1.0 - a) * (chi ** (1.0 - a) - clo ** (1.0 - a)) / (clo ** -a - chi ** -a)
    exact = edges[:-1] < EXACT_DEGREES
    degree = np.where(exact, edges[:-1], np.where(np.isfinite(mean), mean, edges[:-1]))
    rows = [[0.0, zero]] if zero > 0 else []
    rows += [[float(d), float(m * (1.0 - zero))] for d, m in zip(degree, mass) if m > 0]
    return rows


SATURATION_NOTE_RATIO = 1.5
"""Ratio of a batch's input vertices at a card's size to its proxy's, by the degree law (:func:`saturation_note`),
above which the note speaks: the law's ratio overstates the proxy's deficit (held out on rmat100k, 64 seeds of
fanouts (5, 5): the law gave 1.27, the proxy's counts were 6% high), so it speaks where the deficit is clear."""


def saturation_note(ref: object, fanouts: Iterable[int], batch_size: int) -> str | None:
    """A note when a card's per-batch counts are kept from a proxy on which a batch's neighbourhood overlaps
    itself, else None.

    For a card without a degree histogram and larger than its proxy the per-batch rule does not apply
    (:func:`simulator.workload.cards.card_with_histogram`): block sizes are the proxy's as measured. The note gives
    the ratio of the layer-0 input vertices of :func:`simulator.workload.reach.batch_reach` (the occupancy
    model of :func:`batch_reach_scale`) with the card's degree law at its size
    (:func:`card_law_histogram`) over the same law at the proxy's
    (:func:`simulator.workload.proxy.law_histogram`), seeds a uniform sample of the vertices and the graph not
    partitioned (a partition with its cut changes both sizes alike: :func:`batch_reach_scale` keeps the proxy's cut).

    The ratio is an upper estimate, not a correction. Held out on rmat100k (10^5 vertices; cards derived from it,
    proxies of 10^4, dp's layer-0 input vertices against the graph's, 2026-12-01): the proxy of the card without
    its histogram kept counts 24% low (fanouts (10, 10), 256 seeds), 51% (1024 seeds) and 64% ((10, 10, 10), 256
    seeds), where the law's ratio was 2.45, 4.4 and 6.5 (scaling by it would have put them 85-135% high); the card
    with its degree histogram, scaled by :func:`batch_reach_scale`, was 5-9% low. A truncated power law is not
    the degree distribution of every graph, so only a measured histogram makes the per-batch rule.

    Args:
        ref: ``workload.dataset``.
        fanouts: per layer, input side first.
        batch_size: seeds of one batch (per worker for ``dp`` and ``hopgnn``, the whole batch for ``gsplit``).
    """
    from gnnplan.simulator.workload.cards import card_name, card_with_histogram

    name = card_name(ref)
    if name is None or card_with_histogram(ref) is not None:
        return None
    fan = tuple(int(f) for f in fanouts)
    ratio = _saturation(name, fan, int(batch_size))
    if ratio is None or ratio <= SATURATION_NOTE_RATIO:
        return None
    return (f"card {name}: its per-batch counts are measured on its proxy, where a batch's {len(fan)}-hop "
            f"neighbourhood overlaps itself, so this prediction's feature loads and sampling per batch are low (by "
            f"the occupancy model with the card's degree law a batch reaches {ratio:.1f}x as many input vertices "
            f"at the card's size, an upper estimate); the per-batch rule that corrects it needs the card's degree "
            f"histogram (degree.in_degree_histogram)")


@lru_cache(maxsize=64)
def _saturation(name: str, fanouts: tuple[int, ...], batch_size: int) -> float | None:
    """Layer-0 input vertices of a batch at card ``name``'s size over those at its proxy's, both from its degree
    law (:func:`saturation_note`); None when the card is no larger than its proxy."""
    from gnnplan.simulator.workload.proxy import DEFAULT_PROXY_VERTICES, law_histogram

    c = load_card(name)
    n, n_p = c.num_vertices.value, min(c.num_vertices.value, DEFAULT_PROXY_VERTICES)
    if n <= n_p:
        return None
    inputs = []
    for hist, size in ((card_law_histogram(c), n), (law_histogram(c, n_p), n_p)):
        degrees, counts = histogram_classes(hist, size)
        reach = batch_reach(degrees, counts, class_share(degrees, None, counts), batch_size, fanouts)
        inputs.append(float(reach.num_src[0]))
    return inputs[0] / inputs[1] if inputs[1] > 0 else None
