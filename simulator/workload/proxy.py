"""Statistics without the graph: a dataset card's degree-matched synthetic proxy, and the rules that scale what is
measured on it to the card's size.

The proxy (:func:`proxy_spec`) is a degree-corrected SBM (:mod:`simulator.workload.sbm`) of
``n_p = min(n, proxy_vertices)`` vertices with the card's mean in-degree, share of vertices without in-edges
(isolated in the proxy), in-degree exponent of the others, feature width,
classes, split fractions and, where the card gives them, its communities and mixing ``mu`` (where it gives none
but a published METIS edge cut, communities fitted to that cut: :mod:`simulator.workload.cut_fit`). Its largest
expected degree is the ``1 - 1/n_p`` quantile of the card's degree law (what the largest of ``n_p`` draws from it is
expected to reach; the card's own maximum at full size), at most half a community (so the generator can realise
it). Its vertex ids are randomly permuted: a card says nothing about how ids are ordered, so they carry no
locality (as Graph500 R-MAT), and contiguous-range partitioners (neutronstar's and hongtu's ``chunk``) see what
they would on a randomly numbered graph. The card's degree law is the truncated power law of
:func:`simulator.workload.sbm.expected_degrees` between the cut-off solved from the mean and the published maximum
in-degree, or, where none is published, the natural cut-off ``x_min n^(1/(gamma-1))`` (Cohen, Erez, ben-Avraham
and Havlin, PRL 85, 4626 (2000)), at most n - 1.

A card with a log-binned in-degree histogram (``degree.in_degree_histogram``) gets a
:class:`simulator.workload.degseq.DegreeSequenceSpec` proxy instead: its degrees are the histogram's, stratified
to ``n_p`` vertices (the bulk as it is; each proxy vertex of the tail the mean of the ``n / n_p`` largest it
stands for, so the tail keeps its share of edge ends), realised exactly by a planted-partition configuration
model with the card's communities (and, if the card gives them, nested fine communities:
``communities.fine_num_communities`` / ``fine_mu``, kept at their size), and, if the card gives the training
vertices' histogram (``split.train_in_degree_histogram``: a split chosen by label or popularity), training
vertices drawn to match it; if the card lists its small connected components (``components``), they are
planted as separate pieces beside the largest (as many per vertex; random trees plus the card's extra edges).
If the card gives its communities' block model (``communities.block_sizes`` / ``block_edges``), those
communities are planted instead of equal ones, sizes in proportion, with the card's edge counts exactly
(:mod:`simulator.workload.blockmodel`), its training vertices per community (``block_train``) if given; a card's
degree ``assortativity`` and average clustering are reached by rewiring (:mod:`simulator.workload.structure`).

Every strategy measures its statistics on the proxy with the same code that measures real graphs (the card
loads as its proxy graph: :func:`simulator.workload.datasets.load_dataset`), and the results are scaled
(:func:`scale_counts`):

* **fractions** (cache hit curve, local / remote input fractions, edge cut, locality fractions) are kept: for
  sparse graphs with a fixed degree law and community fractions, neighbourhood statistics converge as n grows
  (local weak convergence of the configuration model and of the SBM: van der Hofstad, *Random Graphs and Complex
  Networks* Vol. 2, ch. 2 and 3; the minimum-cut fraction of sparse random graphs converges: Dembo, Montanari and
  Sen, Ann. Probab. 45(2) 2017);
* **per-batch counts** (sampled vertices and edges per layer of a mini-batch of fixed seeds) are kept: a batch's
  sampled neighbourhood is the same local tree-like ball at any size once it is small against n (same
  references); the proxy is sized so a batch's reach stays a small part of it. Where it does not (a heavy tail:
  a batch's draws pile up on the proxy's hubs), a card with a degree histogram has the per-batch rule of
  :mod:`simulator.workload.proxy_batch` (``scale_sample_stats`` / ``batch_reach_scale``): counts times the ratio
  of the expected distinct vertices and edges of the occupancy model :func:`simulator.workload.reach.batch_reach`
  at the card's size over the proxy's, and the hit / local / remote split of the inputs re-weighted by degree
  band (an R-MAT graph of 2M vertices from a 10^5-vertex proxy: layer-0 inputs 47% low kept, 8% low scaled;
  benchmarks/bench_proxy.py);
* **whole-graph counts** (a worker's owned vertices and edges, remote dependencies, replicated closures, chunk
  neighbour sets, rows moved per epoch) scale by ``vertex_factor = n / n_p`` (vertex counts) and
  ``edge_factor = loaded edges / proxy edges`` (edge counts): with the fractions fixed, counts are extensive;
* **dataset sizes** come from the card itself (published, exact).

:func:`simulator.workload.proxy_estimated.estimated` describes all of this for a result's ``estimated`` field. The
proxy is one random draw (:data:`PROXY_SEED`); ``card:<name>@K`` names draw K of the same card
(:func:`card_proxy`). A card smaller than one proxy's budget (:data:`DEFAULT_PROXY_VERTICES`) spends it on several
draws of its own size instead: the statistics of ``card:<name>`` are then each the medoid of draws 0 to R - 1
(:mod:`simulator.workload.proxy_pool`), while ``card:<name>@K`` stays one draw.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import lru_cache
from typing import Any

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload.cards import (
    Card,
    card_draw,
    card_file,
    card_name,
    card_names,
    load_card,
)
from gnnplan.simulator.workload.degseq import DegreeSequenceSpec
from gnnplan.simulator.workload.sbm import powerlaw_min_degree
from gnnplan.simulator.workload.spec import SbmSpec

DEFAULT_PROXY_VERTICES = 100_000
"""Vertices of a card's proxy (fewer when the card is smaller): 10^5 vertices are generated in < 1 s and measured
in seconds, while a mini-batch of 16-64 seeds per worker with fanouts (15, 10, 5) reaches at most ~10% of them."""
PROXY_SEED = 0
"""Seed of a card's proxy when the card is named without a draw (``card:<name>``; ``card:<name>@K`` is draw K,
:func:`card_proxy`): a card's statistics are reproducible, and they are one random draw. Over 16 draws
(``python benchmarks/bench_proxy.py``, 2026-11-30, the cards' ``bridge_fraction`` and
``train_near_bridge_fraction`` planted) the statistics within 15% of the measured ones were 118-125 of 129 per
draw (median 123); this draw scores 123 (Cora 39-43 of 43, this draw 42; CiteSeer 38-42, this draw 38; R-MAT 2M
40-43, 43). The draw-sensitive statistics are those of a 2-part METIS partition of a small graph or a small
training set: remote input fractions (CiteSeer 0.020-0.114 over the draws, mean 0.055, this draw 0.099, measured
0.051; R-MAT's 0.0043-0.0154, measured 0.0054), edge cut (CiteSeer 0.0033-0.0114, mean 0.0066, this draw 0.0114,
measured 0.0068), hongtu's peer rows and gsplit's split inputs; the rest move by a few percent.
``--proxy-draws R`` of simulate, tune and whatif repeats a prediction over draws to show how much of it is the
draw's (:func:`simulator.workload.proxy_draws.requested_draws`). Cora's and CiteSeer's cards, smaller than
:data:`DEFAULT_PROXY_VERTICES`, are no longer estimated from this draw alone: ``card:<name>`` is the medoid of draws
0-14 (:mod:`.proxy_pool`; 129 of 129 within 15% in the same benchmark since the largest component is closed to
its own clustering, 2026-12-02: :mod:`.structure`; 128 before, 126 before its summary scalars were the draws'
medians, this draw alone 123)."""
PROXY_MIN_TRAIN_FRACTION = 0.25
"""Smallest training fraction of a proxy: per-batch statistics need every worker's share of training vertices to hold
full batches (ogbn-papers100M trains on 1.1% of its vertices: 1,087 of a 10^5-vertex proxy); they do not depend on
how many training vertices there are, and the iterations per epoch come from the card's split. One exception,
measured and kept: DistDGL's seed spill (a partition holding more training vertices than its machines' even share
passes the excess to the others, :func:`simulator.workload.partition.split_seeds`) is a count of few vertices when
the training set is small, and its share shrinks as the set grows. On CiteSeer's card (120 training vertices, 2 METIS
parts, 16 proxy seeds) the proxy's mean spill is 1.9% of its training vertices at this fraction (831 of them) and
2.3% with the card's 120, against 2.9% on the real graph over 32 relabelings. With the card's own count the proxy's
remote input fraction stays where it is (0.0352 against 0.0350, the real median 0.0507) while single-draw per-batch
sizes get noisier (layer-0 inputs of a random partition 17% high instead of 10%; bench_proxy 63/66 instead of 65/66
on the real graphs), so the fraction is kept (benchmarks/bench_proxy.py, 2026-11-28; again on 2026-11-30 with the
cards' bridges and training vertices near them planted: the median over 16 draws of CiteSeer's METIS remote input
fraction 0.046 with the card's count, 0.052 at this fraction, measured 0.051; bench_proxy 81/86 on the real graphs,
83 at this fraction). Also tried and not kept: batch seeds drawn at the card's count matched for sampling noise
(``1/a_p - 1/n_p = 1/a - 1/n``, finite population correction: CiteSeer's 120; R-MAT 2M's 200,000 -> 68,966 of a
10^5-vertex proxy), 32 draws averaged. The spill came closer to the real graphs' (2 METIS parts: Cora 6.3% against
5.6%, this split 4.7%; CiteSeer 2.0% against 2.9%, this split 1.0%), the expected remote input fraction did not: Cora
+23% (this split +9.5%), CiteSeer -28% (-38%), R-MAT 2M -6% (0%), against the real graphs' mean over 32 relabelings
(per seed, one epoch) and R-MAT's over 16 uniform redraws of its split (128 batches). Cora's proxy has 36% more
remote inputs per seed its machine owns (its METIS boundary touches 12.7% of the vertices, the real graph's 10.1%),
which this split's smaller spill offsets; bench_proxy fell from 97/99 to 93/99 (2026-11-28)."""
PROXY_FORMAT = 1
"""Version of the proxy construction; part of the cache key of a card's statistics."""


@dataclass(frozen=True)
class ProxyScale:
    """How a card relates to its proxy.

    Attributes:
        card: the card's name.
        num_vertices, num_edges: the card's vertices and loaded (directed) edges.
        proxy_vertices, proxy_edges: the proxy's vertices and directed edges.
        vertex_factor: ``num_vertices / proxy_vertices``.
        edge_factor: ``num_edges / proxy_edges``.
    """

    card: str
    num_vertices: int
    num_edges: int
    proxy_vertices: int
    proxy_edges: int

    @property
    def vertex_factor(self) -> float:
        """n / n_p."""
        return self.num_vertices / self.proxy_vertices

    @property
    def edge_factor(self) -> float:
        """Loaded edges / proxy edges."""
        return self.num_edges / self.proxy_edges


def card_max_degree(card: Card) -> float:
    """The largest in-degree of the card's degree law: the published one, else the natural cut-off
    ``x_min n^(1/(gamma-1))`` with ``x_min`` the lower cut-off of the untruncated law of the card's mean
    (gamma > 2: ``mean (gamma-2)/(gamma-1)``), at most n - 1 (module docstring)."""
    n, gamma, mean = card.num_vertices.value, card.degree.exponent.value, card.connected_mean_in_degree
    if card.degree.max_in_degree.value is not None:
        return float(card.degree.max_in_degree.value)
    if gamma <= 2.0:
        return float(n - 1)
    x_min = mean * (gamma - 2.0) / (gamma - 1.0)
    return float(min(n - 1, max(2.0 * mean, x_min * n ** (1.0 / (gamma - 1.0)))))


def proxy_max_degree(card: Card, proxy_vertices: int, num_communities: int) -> float:
    """The proxy's largest expected degree: the ``1 - 1/n_p`` quantile of the card's truncated power law (the
    card's maximum when ``n_p = n``), at most half a community of the proxy and at least 1.5 x the mean
    (module docstring)."""
    mean, gamma = card.connected_mean_in_degree, card.degree.exponent.value
    k_max = card_max_degree(card)
    a = gamma - 1.0
    if proxy_vertices >= card.num_vertices.value:
        quantile = k_max
    else:
        x = powerlaw_min_degree(mean, gamma, k_max)
        quantile = (k_max ** -a + (x ** -a - k_max ** -a) / proxy_vertices) ** (-1.0 / a)
    half_community = proxy_vertices * (1.0 - card.degree.zero_fraction) / num_communities / 2.0
    return float(max(1.5 * mean, min(quantile, half_community)))


def proxy_spec(card: str | Card, num_vertices: int | None = None, seed: int = PROXY_SEED) -> SbmSpec:
    """The degree-matched synthetic proxy of a card (module docstring).

    Args:
        card: card name or card.
        num_vertices: proxy vertices at most (the card's own count when smaller); None =
            :data:`DEFAULT_PROXY_VERTICES`.
        seed: generator seed.

    Returns:
        A :class:`SbmSpec`, a :class:`DegreeSequenceSpec` when the card has a degree histogram or communities
        fitted to its METIS edge cut (features drawn lazily, only if the executor asks for them).

    Raises:
        SpecError: unknown card.
    """
    c = load_card(card) if isinstance(card, str) else card
    n_p = min(c.num_vertices.value, int(DEFAULT_PROXY_VERTICES if num_vertices is None else num_vertices))
    fitted = c.communities is None and c.metis_edge_cut is not None
    if fitted:  # communities fitted to the published cut
        from gnnplan.simulator.workload.cut_fit import with_fitted_communities

        c = with_fitted_communities(c, n_p)
    return planted_spec(c, n_p, seed, law_degrees=fitted, hierarchical=fitted)


def planted_spec(c: Card, n_p: int, seed: int, law_degrees: bool = False, hierarchical: bool = False) -> SbmSpec:
    """The proxy of card ``c`` at ``n_p`` vertices and ``seed`` with the communities ``c`` gives
    (:func:`proxy_spec` once any communities are fitted).

    With ``hierarchical`` (communities fitted to a METIS cut, :mod:`simulator.workload.cut_fit`) the edge ends that
    leave a community spread evenly over the levels of a binary hierarchy of the communities
    (:func:`simulator.workload.degseq.hierarchy_levels`), so METIS cuts the proxy more at every doubling of the
    parts, as it cuts real graphs, instead of nearly the fitted cut at any number of parts. Only a proxy drawn from
    degrees (a histogram, or ``law_degrees``) has it: the SBM proxy mixes uniformly.

    With ``law_degrees`` a card without a degree histogram is drawn by the planted-partition configuration model
    from the degrees its SBM proxy without communities would be drawn with (:func:`law_histogram`): an SBM
    realises a vertex's edges inside its community only up to the community's size, so planting many small
    communities (:mod:`simulator.workload.cut_fit`) would cap the card's hubs at half a community (ogbn-products'
    proxy: 35,578 -> 195 with 256 communities), where the configuration model sends a hub's surplus across
    communities and keeps its degree, but for the edge ends no distinct partner is left for (ogbn-products'
    fitted proxy has 0.966 of its 5,051,728 edges, largest degree 7,629, where its hubs would have had up to
    20,555; with its communities mixed uniformly, 0.969 and 15,112; 2026-11-30).
    """
    n = c.num_vertices.value
    k = c.communities.num_communities.value if c.communities is not None else 1
    k = max(1, min(k, n_p // 16))  # communities of at least 16 vertices in a small proxy
    mu = c.communities.mu.value if c.communities is not None and k > 1 else 0.0
    train = max(c.split.train.value / n, PROXY_MIN_TRAIN_FRACTION)
    rest = 1.0 - train  # validation and test keep their published fractions while they fit beside training
    val, test = min(c.split.valid.value / n, rest / 2), min(c.split.test.value / n, rest / 2)
    common = dict(generator="sbm", num_vertices=n_p, feature_dim=c.feature_dim.value,
                  num_classes=c.num_classes.value, train_fraction=train, val_fraction=val, test_fraction=test,
                  seed=seed, num_communities=k, mu=mu, mean_degree=c.mean_in_degree,
                  degree_exponent=c.degree.exponent.value, permute_ids=True)
    hist = c.degree.in_degree_histogram
    degrees, source = ((hist.value, n) if hist is not None else (law_histogram(c, n_p), n_p) if law_degrees
                       else (None, n))
    if degrees is not None:  # the card's own degree distribution, bulk and tail (simulator/workload/degseq.py)
        top = max(1.5 * c.mean_in_degree, min(degrees[-1][0], n_p - 1.0))
        train_hist = c.split.train_in_degree_histogram
        fine = c.communities.fine_num_communities if c.communities is not None and k > 1 else None
        if fine is not None:  # fine communities keep their size: per community, at least 2 vertices each
            per = max(1, min(round(fine.value * n_p / n / k), n_p // (2 * k)))
            common.update(fine_per_community=per, fine_mu=c.communities.fine_mu.value)
        if c.communities is not None and c.communities.block_sizes is not None and k > 1:
            common.update(block_sizes=tuple(c.communities.block_sizes.value),
                          block_edges=tuple(map(tuple, c.communities.block_edges.value)))
            if c.communities.block_train is not None:  # per community, then outside the largest component
                train_in = c.communities.block_train.value
                common.update(block_train=(*train_in, c.split.train.value - sum(train_in)))
                near = c.communities.train_near_bridge_fraction
                if near is not None:  # and how near the communities' boundaries they sit
                    common.update(train_near_bridge_fraction=near.value)
            if c.communities.bridge_fraction is not None:
                common.update(bridge_fraction=c.communities.bridge_fraction.value)
        if hierarchical and k > 1:
            common.update(hierarchical_mixing=True)
        common.update(assortativity=None if c.degree.assortativity is None else c.degree.assortativity.value,
                      average_clustering=None if c.clustering is None else c.clustering.average_clustering.value)
        if c.clustering is not None and c.clustering.largest_component is not None and c.components is not None:
            common.update(largest_component_clustering=c.clustering.largest_component.value)
        if c.components is not None:  # planted beside the largest, as many per vertex as the card has
            rows = [(size, round(count * n_p / n)) for size, count in c.components.small_sizes.value]
            rows = [(int(size), int(count)) for size, count in rows if count > 0]
            least = sum((size - 1) * count for size, count in rows)
            most = sum(size * (size - 1) // 2 * count for size, count in rows)
            edges = round(c.components.small_edges.value * sum(sz * k_ for sz, k_ in rows)
                          / c.components.num_small_vertices)
            common.update(small_components=tuple(rows) or None, small_component_edges=min(most, max(least, edges)))
        return DegreeSequenceSpec(**common, max_degree=top, degree_histogram=tuple(map(tuple, degrees)),
                                  source_vertices=source, train_degree_histogram=None if train_hist is None else
                                  tuple(map(tuple, train_hist.value)))
    return SbmSpec(**common, max_degree=proxy_max_degree(c, n_p, k), isolated_fraction=c.degree.zero_fraction)


def law_histogram(c: Card, n_p: int) -> list[list[float]]:
    """The log-binned histogram (:func:`simulator.workload.degree_bins.degree_histogram`) of the degrees card
    ``c``'s SBM proxy of ``n_p`` vertices without communities is drawn with: the card's zero-in-degree fraction
    at 0 and the others' expected degrees from its truncated power law (:func:`simulator.workload.sbm.expected_degrees`,
    the connected mean, the exponent and :func:`proxy_max_degree` for one community; seed 0), rounded, at least 1.
    It describes the proxy's own size (its ``source_vertices`` is ``n_p``: no tail stratification)."""
    import numpy as np

    from gnnplan.simulator.workload.degree_bins import degree_histogram
    from gnnplan.simulator.workload.sbm import expected_degrees

    connected = round(n_p * (1.0 - c.degree.zero_fraction))
    theta = expected_degrees(connected, c.connected_mean_in_degree, c.degree.exponent.value,
                             proxy_max_degree(c, n_p, 1), np.random.default_rng(0))
    degrees = np.concatenate([np.maximum(1, np.rint(theta)), np.zeros(n_p - connected)]).astype(np.int64)
    return degree_histogram(degrees)


def proxy_scale(card: str | Card, spec: SbmSpec | None = None) -> ProxyScale:
    """The :class:`ProxyScale` of a card and its proxy (default :func:`proxy_spec`), with the proxy's edges as
    :func:`proxy_edges` counts them."""
    if isinstance(card, str) and spec is None:
        return _named_scale(card)
    c = load_card(card) if isinstance(card, str) else card
    spec = spec or proxy_spec(c)
    return ProxyScale(c.name, c.num_vertices.value, c.loaded_edges, spec.num_vertices, proxy_edges(spec))


def proxy_edges(spec: SbmSpec) -> int:
    """The directed edges of proxy ``spec``: an SBM proxy has the generator's exact ``2 round(n_p mean / 2)``
    (:func:`simulator.workload.sbm.sbm_edges`); a proxy drawn from a degree sequence is counted on the generated
    graph (:func:`~simulator.workload.datasets.load_dataset`, cached after its first draw; the count is kept per
    proxy for the process, as every simulated context asks for it), because the configuration model drops the
    edge ends (stubs) of a hub that find no distinct partner
    (:func:`simulator.workload.degseq.degree_sequence_edges`): ogbn-products' cut-fitted proxy keeps 4,879,368
    of the 5,051,728 its degrees sum to (0.966; 2026-11-30), and an edge factor from the degree sum would scale
    its edge counts 3% short (on benchmarks/bench_proxy.py's R-MAT 2M, whose proxy keeps about 0.92, neutronstar's
    replicated in-edges went from 8.5% to 0.3% below the graph's)."""
    if isinstance(spec, DegreeSequenceSpec):
        return _generated_edges(spec)
    return 2 * round(spec.num_vertices * spec.mean_degree / 2)


@lru_cache(maxsize=64)
def _generated_edges(spec: DegreeSequenceSpec) -> int:
    from gnnplan.simulator.workload.datasets import load_dataset

    return load_dataset(spec).num_edges


@lru_cache(maxsize=64)
def _named_scale(name: str) -> ProxyScale:
    return proxy_scale(load_card(name), proxy_spec(name))


@lru_cache(maxsize=64)
def proxy_key(name: str, seed: int = PROXY_SEED) -> str:
    """Cache key of a card's statistics on proxy draw ``seed``: the card file's bytes, the proxy's parameters (its
    seed included) and :data:`PROXY_FORMAT` (editing the card or the proxy rules invalidates every entry)."""
    text = card_file(name).read_bytes() + f"|{proxy_spec(name, seed=seed).name}|{PROXY_FORMAT}".encode()
    return f"card-{name}-{hashlib.sha1(text).hexdigest()[:16]}"


def card_proxy(ref: str) -> SbmSpec:
    """The proxy graph a card reference loads: :func:`proxy_spec` of its card at its draw (``card:<name>@<K>``
    -> seed K, :func:`~simulator.workload.cards.card_draw`; no suffix -> :data:`PROXY_SEED`).

    Raises:
        SpecError: ``ref`` names no card, or its draw suffix is malformed.
    """
    name = card_name(ref)
    if name is None:
        raise SpecError(f"workload.dataset: {ref!r} names no dataset card ({', '.join(card_names())})")
    return proxy_spec(name, seed=proxy_draw(ref))


def proxy_draw(ref: str) -> int:
    """The proxy seed of a card reference: its ``@K`` suffix, else :data:`PROXY_SEED`."""
    draw = card_draw(ref)
    return PROXY_SEED if draw is None else draw


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_scaled(v, factor) for v in value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(round(value * factor))
    if hasattr(value, "dtype"):  # numpy arrays keep their dtype kind (integers are rounded)
        out = value * factor
        return out.round().astype(value.dtype) if value.dtype.kind in "iu" else out.astype(value.dtype)
    return float(value) * factor


def scale_counts(stats: Any, scale: ProxyScale, vertex_fields: Iterable[str] = (),
                 edge_fields: Iterable[str] = ()) -> Any:
    """A copy of a statistics dataclass with its whole-graph counts scaled from the proxy to the card (module
    docstring): ``vertex_fields`` by ``vertex_factor``, ``edge_fields`` by ``edge_factor`` (integers rounded,
    nested tuples and numpy arrays element-wise); every other field is kept.

    Raises:
        TypeError: ``stats`` is not a dataclass, or a named field does not exist.
    """
    if not is_dataclass(stats) or isinstance(stats, type):
        raise TypeError(f"scale_counts: {type(stats).__name__} is not a dataclass")
    names = {f.name for f in fields(stats)}
    changes: dict[str, Any] = {}
    for group, factor in ((vertex_fields, scale.vertex_factor), (edge_fields, scale.edge_factor)):
        for name in group:
            if name not in names:
                raise TypeError(f"scale_counts: {type(stats).__name__} has no field {name!r}")
            changes[name] = _scaled(getattr(stats, name), factor)
    return replace(stats, **changes)


def for_card(ref: object, stats: Any, vertex_fields: Iterable[str] = (), edge_fields: Iterable[str] = ()) -> Any:
    """The hook of a statistics module: ``stats`` measured on ``ref``'s graph, with its whole-graph counts scaled
    to the card's size when ``ref`` is a card (:func:`scale_counts`), else unchanged."""
    name = card_name(ref)
    if name is None:
        return stats
    return scale_counts(stats, proxy_scale(name), vertex_fields, edge_fields)


def max_relative_error(estimate: float, measured: float) -> float:
    """|estimate - measured| / |measured| (0 when both are 0, inf when only the measurement is 0)."""
    if measured == 0:
        return 0.0 if estimate == 0 else math.inf
    return abs(estimate - measured) / abs(measured)
