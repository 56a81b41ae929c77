"""Dataset cards: the published sizes of a graph, each number with its source, so a workload can name a graph this
machine does not hold (``workload.dataset: ogbn-papers100M``) and be simulated from statistics estimated on a
synthetic proxy (:mod:`simulator.workload.proxy`).

A card is a YAML file in ``cards/`` (``<name>.yaml``); every number is a mapping ``{value, source}`` whose
``source`` says where it was published, or, starting with ``derived:`` / ``assumed:``, how it was obtained (a
number nobody published, e.g. a degree exponent, must say so). Fields (:class:`Card`):

* ``num_vertices``, ``num_edges`` and ``edge_direction``: ``directed`` means the edge list is loaded as listed
  (``num_edges`` directed edges, a message flows src -> dst); ``undirected`` means each pair is listed once and
  loaded in both directions (OGB ``add_inverse_edge``, SNAP ``.ungraph``): ``2 x num_edges`` directed edges.
* ``feature_dim``, ``num_classes``, ``split`` (train / valid / test vertex counts).
* ``degree``: ``max_in_degree`` (None = not published) and the power-law ``exponent`` of the in-degrees: a
  published (tail) fit where one exists, else an assumption saying so; cards derived from a graph in memory use
  :func:`moment_exponent` (the single law whose size-biased mean matches the graph's, what sampling feels).
  Optionally ``in_degree_histogram`` (log-binned, :mod:`simulator.workload.degseq`): the proxy then draws its
  degrees from it (bulk and tail each as they are) instead of from the power law.
* ``communities`` (optional): ``num_communities`` and the mixing parameter ``mu`` (fraction of edges between
  communities, e.g. 1 - the edge homophily of the labels), which the proxy plants; optionally a nested finer
  level (``fine_num_communities``, ``fine_mu``), planted by a proxy drawn from a degree histogram.
* ``components`` (optional): the sizes of the connected components other than the largest and their edges,
  planted as separate pieces by a proxy drawn from a degree histogram (the communities then describe the
  largest component).
* ``split.train_in_degree_histogram`` (optional): the training vertices' in-degrees, when the split is not a
  uniform sample (the proxy's training vertices then match it).

Names: the file stem. ``cora`` and ``citeseer`` are bundled real graphs too; the bare name loads the real graph
and ``card:cora`` its card (any card may be written ``card:<name>``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Generic, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.io import read_yaml

CARD_DIR = Path(__file__).parent / "cards"
CARD_PREFIX = "card:"
T = TypeVar("T")


class _Model(BaseModel):
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
    optionally, the log-binned histogram of :func:`simulator.workload.degseq.degree_histogram` (rows
    ``[mean in-degree of the bin, fraction of vertices]``, increasing degree), which then decides the proxy's
    degrees instead of the power law."""

    max_in_degree: Sourced[float | None]
    exponent: Sourced[float]
    zero_in_degree_fraction: Sourced[float] | None = None
    in_degree_histogram: Sourced[list[tuple[float, float]]] | None = None

    @model_validator(mode="after")
    def _histogram(self) -> DegreeSummary:
        if self.in_degree_histogram is not None:
            _check_histogram(self.in_degree_histogram.value, "degree.in_degree_histogram")
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
    communities share their edges decides how a partitioner can cut the graph)."""

    num_communities: Sourced[int]
    mu: Sourced[float]
    fine_num_communities: Sourced[int] | None = None
    fine_mu: Sourced[float] | None = None
    block_sizes: Sourced[list[int]] | None = None
    block_edges: Sourced[list[tuple[int, int, int]]] | None = None

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


class Card(_Model):
    """A dataset card (module docstring)."""

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
        if self.components is not None and not self.components.num_small_vertices <= n - 16:
            raise ValueError("components: the small components leave fewer than 16 vertices to the largest")
        return self

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


def card_names() -> list[str]:
    """Names of the cards shipped with the package."""
    return sorted(p.stem for p in CARD_DIR.glob("*.yaml"))


def card_name(ref: object) -> str | None:
    """The card a ``workload.dataset`` string names, or None.

    ``card:<name>`` always names a card; a bare name does when it is a card and not a bundled real graph
    (``cora``, ``citeseer``) or an existing folder.
    """
    from gnnplan.simulator.workload.datasets import PRESETS

    if not isinstance(ref, str):
        return None
    if ref.startswith(CARD_PREFIX):
        return ref[len(CARD_PREFIX):]
    if ref in PRESETS or Path(ref).is_dir():
        return None
    return ref if (CARD_DIR / f"{ref}.yaml").is_file() else None


@lru_cache(maxsize=64)
def load_card(name: str) -> Card:
    """Read and validate a card.

    Raises:
        SpecError: unknown card (the message lists the known ones) or an invalid field (one line naming it).
    """
    path = CARD_DIR / f"{name}.yaml"
    if not path.is_file():
        raise SpecError(f"workload.dataset: unknown card {name!r}; allowed: {', '.join(card_names())}")
    return card_from_dict(read_yaml(path, f"card {name}"), where=f"card {name}")


def card_from_dict(data: dict, where: str = "card") -> Card:  # type: ignore[type-arg]
    """Validate a mapping as a :class:`Card`, raising :class:`SpecError` with a one-line message."""
    try:
        return Card.model_validate(data)
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None


def tail_exponent(degrees: np.ndarray, min_tail: int = 50) -> tuple[float, int]:
    """Power-law exponent of the tail of a degree sequence and the cut-off where the tail starts.

    Source: Clauset, Shalizi and Newman, "Power-law distributions in empirical data", SIAM Rev. 51, 661 (2009):
    the discrete maximum-likelihood approximation of eq. 3.7, gamma = 1 + k [sum ln(d_i / (d_min - 1/2))]^-1
    over the k degrees d_i >= d_min, with d_min chosen to minimise the Kolmogorov-Smirnov distance between the
    tail and the fitted law (§3.3). Candidates d_min are the distinct degrees with at least ``min_tail`` degrees
    at or above them.

    Args:
        degrees: (n,) int degrees (zeros are ignored).
        min_tail: smallest tail that is fitted.

    Returns:
        (gamma, d_min).

    Raises:
        ValueError: fewer than ``min_tail`` positive degrees.
    """
    d = np.sort(np.asarray(degrees)[np.asarray(degrees) > 0]).astype(np.float64)
    if len(d) < min_tail:
        raise ValueError(f"tail_exponent: need at least {min_tail} positive degrees, got {len(d)}")
    best = (math.inf, 2.5, 1)
    for d_min in np.unique(d):
        tail = d[d >= d_min]
        if len(tail) < min_tail:
            break
        gamma = 1.0 + len(tail) / float(np.sum(np.log(tail / (d_min - 0.5))))
        # KS distance between the empirical tail CDF and the continuous-approximation CDF of the fitted law
        emp = np.arange(1, len(tail) + 1) / len(tail)
        model = 1.0 - (tail / (d_min - 0.5)) ** (1.0 - gamma)
        ks = float(np.max(np.abs(emp - model)))
        if ks < best[0]:
            best = (ks, gamma, int(d_min))
    return float(best[1]), best[2]


def moment_exponent(degrees: np.ndarray, max_degree: float | None = None) -> float:
    """The exponent gamma of the truncated power law that the proxy draws expected degrees from
    (:func:`simulator.workload.sbm.expected_degrees`: lower cut-off solved from the mean, upper ``max_degree``)
    whose size-biased mean E[theta^2] / E[theta] matches the degree sequence's E[d^2] / E[d] - 1.

    The size-biased mean is the mean degree of a vertex reached over an edge, which sets how a sampled
    neighbourhood grows (Newman, Strogatz and Watts, Phys. Rev. E 64, 026118 (2001), §II.A: the mean excess
    degree); the ``- 1`` removes the Poisson scatter of realised around expected degrees (E[d^2] = E[theta^2] +
    E[theta] for d ~ Poisson(theta)).

    Args:
        degrees: (n,) int degrees.
        max_degree: upper cut-off (default: the largest degree).

    Returns:
        gamma in [1.05, 6] (not 2); the bound that comes closest when no exponent matches exactly.
    """
    from scipy.optimize import brentq

    from gnnplan.simulator.workload.sbm import powerlaw_min_degree

    d = np.asarray(degrees, dtype=np.float64)
    mean = float(d.mean())
    cap = float(max_degree if max_degree is not None else d.max())
    target = float((d ** 2).mean() / mean) - 1.0

    def size_biased(gamma: float) -> float:
        a = gamma - 1.0
        try:
            x = powerlaw_min_degree(mean, gamma, cap)
        except ValueError:  # no lower cut-off gives this mean: the law is heavier than the sequence
            return math.inf
        if abs(a - 2.0) < 1e-9:
            second = a * x ** a * math.log(cap / x) / (1.0 - (x / cap) ** a)
        else:
            second = a / (2.0 - a) * x ** a * (cap ** (2.0 - a) - x ** (2.0 - a)) / (1.0 - (x / cap) ** a)
        return second / mean - target

    lo, hi = 1.05, 6.0
    f_lo, f_hi = size_biased(lo), size_biased(hi)
    if f_lo > 0 and f_hi > 0 or f_lo < 0 and f_hi < 0:
        return lo if abs(f_lo) < abs(f_hi) else hi
    # the mean of the truncated law has no closed form at gamma = 2 (sbm.powerlaw_min_degree): step around it
    for a_, b_ in ((lo, 1.999), (2.001, hi)):
        fa, fb = size_biased(a_), size_biased(b_)
        if (fa >= 0) != (fb >= 0):
            return float(brentq(size_biased, a_, b_, xtol=1e-4))
    return 2.001


def derived_card(name: str, num_vertices: int, src: np.ndarray, dst: np.ndarray, feature_dim: int,
                 num_classes: int, split: tuple[int, int, int], labels: np.ndarray | None = None,
                 how: str = "measured on the graph", communities: str | None = None) -> Card:
    """A card whose every number is measured on a graph in memory (for graphs without a published card, and to
    check a proxy against the graph it stands for: benchmarks/bench_proxy.py).

    The degree summary is the largest in-degree, :func:`moment_exponent` of the positive in-degrees, the
    fraction of vertices without in-edges and the log-binned in-degree histogram. Communities:
    ``"labels"`` takes the label classes, ``mu`` the fraction of edges whose ends have different labels
    (1 - edge homophily; Zhu et al., "Beyond Homophily in Graph Neural Networks", NeurIPS 2020, §2);
    ``"louvain"`` :func:`louvain_communities`; None plants none.

    Args:
        name: the card's name.
        num_vertices: n.
        src, dst: (E,) int64 directed edges as loaded (``edge_direction`` = ``directed``).
        feature_dim, num_classes: feature width and classes.
        split: (train, valid, test) vertex counts.
        labels: (n,) int64 class per vertex (-1 = unlabelled; edges touching one are left out of ``mu``).
        how: what the numbers were measured on (goes into every ``source``).
        communities: ``"labels"``, ``"louvain"`` or None.
    """
    from gnnplan.simulator.workload.degseq import degree_histogram

    deg = np.bincount(dst, minlength=num_vertices)
    gamma = moment_exponent(deg[deg > 0])
    src_text = f"derived: {how}"
    data: dict = {  # type: ignore[type-arg]
        "name": name, "description": f"derived card of {name}",
        "num_vertices": {"value": int(num_vertices), "source": src_text},
        "num_edges": {"value": int(len(src)), "source": src_text},
        "edge_direction": {"value": "directed", "source": f"{src_text} (edges as loaded)"},
        "feature_dim": {"value": int(feature_dim), "source": src_text},
        "num_classes": {"value": int(num_classes), "source": src_text},
        "split": {k: {"value": int(v), "source": src_text} for k, v in zip(("train", "valid", "test"), split)},
        "degree": {"max_in_degree": {"value": float(deg.max()), "source": f"{src_text}: largest in-degree"},
                   "exponent": {"value": round(gamma, 3),
                                "source": f"{src_text}: moment_exponent of the positive in-degrees"},
                   "zero_in_degree_fraction": {"value": round(float(np.mean(deg == 0)), 4),
                                               "source": f"{src_text}: vertices without in-edges"},
                   "in_degree_histogram": {"value": degree_histogram(deg),
                                           "source": f"{src_text}: degseq.degree_histogram of the in-degrees"}},
    }
    if communities == "labels" and labels is not None:
        keep = (labels[src] >= 0) & (labels[dst] >= 0)
        mu = float(np.mean(labels[src[keep]] != labels[dst[keep]])) if keep.any() else 0.0
        k = int(len(np.unique(labels[labels >= 0])))
        data["communities"] = {"num_communities": {"value": k, "source": f"{src_text}: label classes"},
                               "mu": {"value": round(mu, 4), "source": f"{src_text}: 1 - edge homophily"}}
    elif communities == "louvain":
        k, mu = louvain_communities(num_vertices, src, dst)
        data["communities"] = {
            "num_communities": {"value": k, "source": f"{src_text}: effective number (inverse Simpson index) of "
                                                      "the Louvain communities (networkx, seed 0)"},
            "mu": {"value": round(mu, 4), "source": f"{src_text}: fraction of edges between Louvain communities"}}
    return card_from_dict(data, where=f"card {name}")


def component_summary(num_vertices: int, src: np.ndarray, dst: np.ndarray
                      ) -> tuple[list[list[int]], int, np.ndarray]:
    """The connected components of a graph taken as undirected (scipy ``connected_components``): rows ``[size,
    count]`` of the components other than the largest (increasing size; a card's ``components.small_sizes``),
    the undirected edges inside them (``components.small_edges``; repeated pairs and self-loops counted once)
    and the (num_vertices,) bool mask of the largest component."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    a = sp.coo_matrix((np.ones(len(src)), (src, dst)), shape=(num_vertices, num_vertices)).tocsr()
    a = ((a + a.T) > 0).astype(np.int8)
    _, label = connected_components(a, directed=False)
    size = np.bincount(label)
    largest = int(size.argmax())
    counts = np.bincount(np.delete(size, largest)) if len(size) > 1 else np.zeros(1, dtype=np.int64)
    rows = [[int(s), int(c)] for s, c in enumerate(counts) if c]
    upper = sp.triu(a, 1).tocoo()
    return rows, int(np.sum(label[upper.row] != largest)), label == largest


def largest_component(num_vertices: int, src: np.ndarray, dst: np.ndarray
                      ) -> tuple[int, np.ndarray, np.ndarray]:
    """(vertices, src, dst) of the largest connected component (:func:`component_summary`), renumbered
    0..n_c - 1 in id order."""
    keep = component_summary(num_vertices, src, dst)[2]
    new = np.full(num_vertices, -1, dtype=np.int64)
    new[keep] = np.arange(int(keep.sum()))
    inside = keep[src] & keep[dst]
    return int(keep.sum()), new[src[inside]], new[dst[inside]]


def louvain_blocks(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = 0
                   ) -> tuple[list[int], list[list[int]]]:
    """The block model of a graph's Louvain communities (the same networkx run as :func:`louvain_communities`):
    the vertices of every community and rows ``[i, j, m_ij]`` (i <= j, m_ij >= 1) of the undirected simple
    edges between communities i and j (inside i when i = j): a card's ``communities.block_sizes`` and
    ``block_edges``."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(num_vertices))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    comm = np.zeros(num_vertices, dtype=np.int64)
    groups = nx.community.louvain_communities(g, seed=seed)
    for i, members in enumerate(groups):
        comm[list(members)] = i
    k = len(groups)
    a, b = np.array([e for e in g.edges() if e[0] != e[1]], dtype=np.int64).reshape(-1, 2).T
    ca, cb = np.minimum(comm[a], comm[b]), np.maximum(comm[a], comm[b])
    m = np.bincount(ca * k + cb, minlength=k * k).reshape(k, k)
    rows = [[int(i), int(j), int(m[i, j])] for i, j in zip(*np.nonzero(m))]
    return np.bincount(comm, minlength=k).tolist(), rows


def louvain_communities(num_vertices: int, src: np.ndarray, dst: np.ndarray, seed: int = 0) -> tuple[int, float]:
    """(effective number of communities, mixing mu) of a graph's Louvain communities.

    Communities: networkx ``louvain_communities`` (Blondel et al., J. Stat. Mech. P10008 (2008)) on the
    undirected simple graph. The effective number is the inverse Simpson index ``1 / sum_c (n_c / n)^2`` (Hill,
    Ecology 54, 427 (1973)), so many tiny communities (isolated pairs) count as little as they weigh; mu is the
    fraction of edges whose ends lie in different communities (the LFR mixing parameter). Pure Python: meant for
    graphs up to ~10^6 edges.
    """
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(num_vertices))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    comm = np.zeros(num_vertices, dtype=np.int64)
    for i, members in enumerate(nx.community.louvain_communities(g, seed=seed)):
        comm[list(members)] = i
    share = np.bincount(comm) / num_vertices
    k = max(1, int(round(1.0 / float(np.sum(share ** 2)))))
    mu = float(np.mean(comm[src] != comm[dst])) if len(src) else 0.0
    return (k, mu) if k > 1 else (1, 0.0)
