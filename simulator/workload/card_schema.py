"""The dataset card schema: the pydantic models a card file validates against (:class:`Card` and its
parts), each number a :class:`Sourced` value with where it was published. What the fields mean, and where cards
are found, read and written, is :mod:`simulator.workload.cards`."""

from __future__ import annotations

import math
from typing import Generic, Literal, TypeVar

from pydantic import ConfigDict, Field, model_validator

from gnnplan.simulator.spec_model import SpecModel

T = TypeVar("T")


class _Model(SpecModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Sourced(_Model, Generic[T]):
    """One number of a card and where it comes from."""

    value: T
    source: str = Field(min_length=3, description="publication / page, or 'derived: ...' / 'assumed: ...'")


def _check_histogram(rows: list[tuple[float, float]], field: str) -> None:
    total = sum(f for _, f in rows)
    if not rows or any(m < 0 or not 0 < f <= 1 for m, f in rows) or abs(total - 1.0) > 1e-3 or any(
            b[0] <= a[0] for a, b in zip(rows, rows[1:])):
        raise ValueError(f"{field}: rows [mean degree >= 0, fraction in (0, 1]] in increasing degree, fractions "
                         "summing to 1")


class Split(_Model):
    """Train / validation / test vertex counts and, optionally, the in-degree histogram of the training vertices
    (rows as :attr:`DegreeSummary.in_degree_histogram`): a split chosen by label or popularity (Planetoid's 20
    labelled vertices per class, OGB's sales-rank split) is not a uniform sample of the degrees, and mini-batch
    seeds are training vertices; the proxy then draws its training vertices to match it."""

    train: Sourced[int]
    valid: Sourced[int]
    test: Sourced[int]
    train_in_degree_histogram: Sourced[list[tuple[float, float]]] | None = None

    @model_validator(mode="after")
    def _histogram(self) -> Split:
        if self.train_in_degree_histogram is not None:
            _check_histogram(self.train_in_degree_histogram.value, "split.train_in_degree_histogram")
        return self


class DegreeSummary(_Model):
    """The in-degree distribution: its largest value (None = not published), the power-law exponent of the
    vertices that have in-edges, the fraction that have none (absent = 0: every vertex has in-edges) and,
    optionally, the log-binned histogram of :func:`simulator.workload.degree_bins.degree_histogram` (rows
    ``[mean in-degree of the bin, fraction of vertices]``, increasing degree), which then decides the proxy's
    degrees instead of the power law; optionally the degree ``assortativity`` (Newman, Phys. Rev. Lett. 89,
    208701 (2002): the correlation of the degrees at the two ends of an edge), to which such a proxy is then
    rewired (:mod:`simulator.workload.assortativity`)."""

    max_in_degree: Sourced[float | None]
    exponent: Sourced[float]
    zero_in_degree_fraction: Sourced[float] | None = None
    in_degree_histogram: Sourced[list[tuple[float, float]]] | None = None
    assortativity: Sourced[float] | None = None

    @model_validator(mode="after")
    def _histogram(self) -> DegreeSummary:
        if self.in_degree_histogram is not None:
            _check_histogram(self.in_degree_histogram.value, "degree.in_degree_histogram")
        if self.assortativity is not None and not -1.0 < self.assortativity.value < 1.0:
            raise ValueError("degree.assortativity must be in (-1, 1)")
        return self

    @property
    def zero_fraction(self) -> float:
        """Fraction of vertices without in-edges (0 when the card gives none)."""
        return 0.0 if self.zero_in_degree_fraction is None else float(self.zero_in_degree_fraction.value)


class Communities(_Model):
    """Community structure the proxy plants: how many communities and the fraction of edges between them;
    optionally a finer level nested in them (e.g. the first level of the Louvain dendrogram, whose last level
    gives the communities): how many fine communities and the fraction of edge ends leaving them (>= mu); and
    optionally the communities' block model (``block_sizes``: vertices of each; ``block_edges``: rows ``[i, j,
    m_ij]``, i <= j, the undirected edges between communities i and j, inside i when i = j: the edge counts of
    a degree-corrected SBM, Karrer and Newman, Phys. Rev. E 83, 016107 (2011)), which a proxy drawn from a
    degree histogram then plants instead of ``num_communities`` equal communities mixed uniformly (which
    communities share their edges decides how a partitioner can cut the graph); optionally the training
    vertices in each of them (``block_train``: a split chosen by label, such as Planetoid's 20 per class, is not
    spread over the communities in proportion to their size, and a partitioner that keeps communities whole then
    gives its parts unequal shares of the seeds), which the proxy's training vertices then follow; optionally,
    with the block model, the fraction of the largest component's vertices with an edge to another community
    (``bridge_fraction``: the edges between communities sit on fewer vertices than a random deal of edge ends gives
    them), which the proxy's communities then meet at; optionally, with ``block_train``, the share of the training
    vertices in those communities that are at most one hop from such a vertex (``train_near_bridge_fraction``: a
    split chosen by label can sit nearer the communities' boundaries than its degrees alone would put it, and its
    sampled neighbourhoods then cross a partition's boundary more often), which the proxy's training vertices
    then follow."""

    num_communities: Sourced[int]
    mu: Sourced[float]
    fine_num_communities: Sourced[int] | None = None
    fine_mu: Sourced[float] | None = None
    block_sizes: Sourced[list[int]] | None = None
    block_edges: Sourced[list[tuple[int, int, int]]] | None = None
    block_train: Sourced[list[int]] | None = None
    bridge_fraction: Sourced[float] | None = None
    train_near_bridge_fraction: Sourced[float] | None = None

    @model_validator(mode="after")
    def _fine(self) -> Communities:
        if (self.fine_num_communities is None) != (self.fine_mu is None):
            raise ValueError("communities: fine_num_communities and fine_mu go together")
        if self.fine_num_communities is not None and self.fine_mu is not None and (
                self.fine_num_communities.value < self.num_communities.value
                or not self.mu.value <= self.fine_mu.value < 1.0):
            raise ValueError("communities: need fine_num_communities >= num_communities and mu <= fine_mu < 1")
        if (self.block_sizes is None) != (self.block_edges is None):
            raise ValueError("communities: block_sizes and block_edges go together")
        if self.block_sizes is not None and self.block_edges is not None:
            k = len(self.block_sizes.value)
            if k < 2 or min(self.block_sizes.value) < 1 or any(
                    not 0 <= i <= j < k or m < 1 for i, j, m in self.block_edges.value):
                raise ValueError("communities: block_sizes >= 1 (two or more) and block_edges rows [i <= j < "
                                 "len(block_sizes), edges >= 1]")
        if self.block_train is not None and (self.block_sizes is None or len(self.block_train.value) != len(
                self.block_sizes.value) or any(not 0 <= t <= s for t, s in zip(self.block_train.value,
                                                                                 self.block_sizes.value))):
            raise ValueError("communities: block_train needs block_sizes, one count in [0, size] per community")
        if self.bridge_fraction is not None and (self.block_sizes is None
                                                 or not 0.0 < self.bridge_fraction.value < 1.0):
            raise ValueError("communities: bridge_fraction needs block_sizes and lies in (0, 1)")
        if self.train_near_bridge_fraction is not None and (
                self.block_train is None or not 0.0 <= self.train_near_bridge_fraction.value <= 1.0):
            raise ValueError("communities: train_near_bridge_fraction needs block_train and lies in [0, 1]")
        return self


class Components(_Model):
    """The connected components other than the largest (of the undirected graph): ``small_sizes`` rows
    ``[component size, number of such components]`` in increasing size and ``small_edges``, the undirected
    edges inside them. A partitioner keeps a small component whole (METIS cuts none of its edges) and a
    mini-batch seeded in one reaches only it, so a graph with many (CiteSeer: 438 components, 36% of the vertices
    outside the largest) has a smaller cut and smaller batches than one connected graph of the same degrees; the
    proxy plants them as separate pieces (:mod:`simulator.workload.degseq`)."""

    small_sizes: Sourced[list[tuple[int, int]]]
    small_edges: Sourced[int]

    @model_validator(mode="after")
    def _sizes(self) -> Components:
        rows = self.small_sizes.value
        if any(size < 1 or count < 1 for size, count in rows) or any(b[0] <= a[0] for a, b in zip(rows, rows[1:])):
            raise ValueError("components.small_sizes: rows [size >= 1, count >= 1] in increasing size")
        least = sum((size - 1) * count for size, count in rows)
        most = sum(size * (size - 1) // 2 * count for size, count in rows)
        if not least <= self.small_edges.value <= most:
            raise ValueError(f"components.small_edges: a component of s vertices has s - 1 to s (s - 1) / 2 edges: "
                             f"need {least} to {most}, got {self.small_edges.value}")
        return self

    @property
    def num_small_vertices(self) -> int:
        """Vertices outside the largest component."""
        return sum(size * count for size, count in self.small_sizes.value)


class Clustering(_Model):
    """How clustered the graph is: its average clustering coefficient (Watts and Strogatz, Nature 393, 440
    (1998); vertices of degree < 2 count 0, as networkx ``average_clustering`` and SNAP's published "Average
    clustering coefficient"), which a proxy drawn from a degree histogram reaches by degree-preserving triangle
    closure (:mod:`simulator.workload.clustering`); without it the proxy keeps the few triangles its random
    pairing makes."""

    average_clustering: Sourced[float]
    largest_component: Sourced[float] | None = None
    """The same average over the vertices of the largest connected component only (optional; a derived card with
    ``components`` gives it). A proxy plants its small components as the card lists them and closes triangles in
    its largest component alone, so with this number it closes them up to the largest component's own clustering;
    without it, up to ``average_clustering`` over all its vertices, which over-closes the largest component when
    the planted small components hold fewer triangles than the graph's: CiteSeer's and Cora's proxies closed theirs
    to 0.184-0.191 and 0.253-0.254 for the real 0.170 and 0.238, their small components holding 0.054-0.064 and
    0.097-0.110 for 0.092 and 0.275 (draws 0-2, 2026-12-02; what that did to their statistics:
    :mod:`simulator.workload.structure`)."""

    @model_validator(mode="after")
    def _range(self) -> Clustering:
        if not 0.0 <= self.average_clustering.value < 1.0:
            raise ValueError("clustering.average_clustering must be in [0, 1)")
        if self.largest_component is not None and not 0.0 <= self.largest_component.value < 1.0:
            raise ValueError("clustering.largest_component must be in [0, 1)")
        return self


class Card(_Model):
    """A dataset card (its fields: the docstring of :mod:`simulator.workload.cards`)."""

    name: str
    description: str
    num_vertices: Sourced[int]
    num_edges: Sourced[int]
    edge_direction: Sourced[Literal["directed", "undirected"]]
    feature_dim: Sourced[int]
    num_classes: Sourced[int]
    split: Split
    degree: DegreeSummary
    communities: Communities | None = None
    components: Components | None = None
    clustering: Clustering | None = None
    metis_edge_cut: Sourced[list[tuple[int, float]]] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Card:
        n = self.num_vertices.value
        if n < 16 or self.num_edges.value < 1:
            raise ValueError("num_vertices must be >= 16 and num_edges >= 1")
        if self.feature_dim.value < 1 or self.num_classes.value < 2:
            raise ValueError("feature_dim must be >= 1 and num_classes >= 2")
        parts = (self.split.train.value, self.split.valid.value, self.split.test.value)
        if self.split.train.value < 1 or min(parts) < 0 or sum(parts) > n:
            raise ValueError(f"split: train >= 1, valid and test >= 0 and together at most num_vertices ({n}), "
                             f"got {parts}")
        if not 1.0 < self.degree.exponent.value <= 6.0 or self.degree.exponent.value == 2.0:
            raise ValueError("degree.exponent must be in (1, 6] and not 2")
        if not 0.0 <= self.degree.zero_fraction <= 0.95:
            raise ValueError("degree.zero_in_degree_fraction must be in [0, 0.95]")
        cap = self.degree.max_in_degree.value
        if cap is not None and not self.mean_in_degree < cap < n:
            raise ValueError(f"degree.max_in_degree must lie between the mean in-degree ({self.mean_in_degree:.3g}) "
                             f"and num_vertices, got {cap:g}")
        if self.communities is not None:
            k, mu = self.communities.num_communities.value, self.communities.mu.value
            if not 1 <= k <= n // 2 or not 0.0 <= mu < 1.0 or (k == 1 and mu > 0):
                raise ValueError("communities: need 1 <= num_communities <= num_vertices / 2 and 0 <= mu < 1 "
                                 "(mu = 0 with one community)")
        if self.communities is not None and self.communities.block_train is not None and \
                sum(self.communities.block_train.value) > self.split.train.value:
            raise ValueError("communities.block_train: more training vertices than split.train")
        cuts = [] if self.metis_edge_cut is None else self.metis_edge_cut.value
        if self.metis_edge_cut is not None and (not cuts or any(
                not 2 <= p <= n // 16 or not 0.0 < f < 1.0 for p, f in cuts) or any(
                b[0] <= a[0] for a, b in zip(cuts, cuts[1:]))):
            raise ValueError(f"metis_edge_cut: rows [parts in [2, num_vertices / 16 = {n // 16}], fraction in "
                             "(0, 1)] in increasing parts")
        if self.components is not None and not self.components.num_small_vertices <= n - 16:
            raise ValueError("components: the small components leave fewer than 16 vertices to the largest")
        need, who = self.least_loaded_edges()
        if self.loaded_edges < need:
            raise ValueError(f"num_edges: {self.num_edges.value} is too few for the card's other figures: {who} "
                             f"need at least {need} loaded edges, got {self.loaded_edges}")
        return self

    def least_loaded_edges(self) -> tuple[int, str]:
        """The fewest loaded edges the card's other figures leave room for, and who needs them: one in-edge for
        every vertex the degree summary gives in-edges, and with ``components`` both directions of the small
        components' edges plus one in-edge for every vertex of the largest (a card below it, edited by hand, gave
        its proxy's degree sequence negative degrees: 2026-12-01, a new user's pass)."""
        n = self.num_vertices.value
        if self.components is None:
            return math.ceil(n * (1.0 - self.degree.zero_fraction)), "its vertices with in-edges (one each)"
        largest = n - self.components.num_small_vertices
        return (2 * self.components.small_edges.value + largest,
                "the small components' edges (both directions) and the largest component's vertices (one each)")

    @property
    def loaded_edges(self) -> int:
        """Directed edges of the graph as loaded (both directions of an undirected pair)."""
        return self.num_edges.value * (2 if self.edge_direction.value == "undirected" else 1)

    @property
    def mean_in_degree(self) -> float:
        """Mean in-degree of the loaded graph: ``loaded_edges / num_vertices`` (exact, from the published sizes)."""
        return self.loaded_edges / self.num_vertices.value

    @property
    def connected_mean_in_degree(self) -> float:
        """Mean in-degree of the vertices that have in-edges: ``mean_in_degree / (1 - zero fraction)``."""
        return self.mean_in_degree / (1.0 - self.degree.zero_fraction)
