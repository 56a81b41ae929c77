"""Dataset cards: the published sizes of a graph, each number with its source, so a workload can name a graph this
machine does not hold (``workload.dataset: ogbn-papers100M``) and be simulated from statistics estimated on a
synthetic proxy (:mod:`simulator.workload.proxy`).

A card is a YAML file ``<name>.yaml`` in the package's ``cards/`` or in the user's ``$GNNPLAN_HOME/cards`` (searched
first, :func:`card_dirs`; :func:`write_card` writes one there, e.g. a card measured on a graph in memory with
:func:`simulator.workload.card_measures.derived_card`); every number is a mapping ``{value, source}`` whose
``source`` says where it was published, or, starting with ``derived:`` / ``assumed:``, how it was obtained (a
number nobody published, e.g. a degree exponent, must say so). Fields (:class:`Card`):

* ``num_vertices``, ``num_edges`` and ``edge_direction``: ``directed`` means the edge list is loaded as listed
  (``num_edges`` directed edges, a message flows src -> dst); ``undirected`` means each pair is listed once and
  loaded in both directions (OGB ``add_inverse_edge``, SNAP ``.ungraph``): ``2 x num_edges`` directed edges.
* ``feature_dim``, ``num_classes``, ``split`` (train / valid / test vertex counts).
* ``degree``: ``max_in_degree`` (None = not published) and the power-law ``exponent`` of the in-degrees: a
  published (tail) fit where one exists, else an assumption saying so; cards derived from a graph in memory use
  :func:`~.card_measures.moment_exponent` (the single law whose size-biased mean matches the graph's, what
  sampling feels).
  Optionally ``in_degree_histogram`` (log-binned, :mod:`simulator.workload.degree_bins`): the proxy then draws its
  degrees from it (bulk and tail each as they are) instead of from the power law; and ``assortativity`` (the
  degree correlation of an edge's ends), to which such a proxy is rewired.
* ``communities`` (optional): ``num_communities`` and the mixing parameter ``mu`` (fraction of edges between
  communities, e.g. 1 - the edge homophily of the labels), which the proxy plants; optionally a nested finer
  level (``fine_num_communities``, ``fine_mu``), planted by a proxy drawn from a degree histogram; optionally
  the block model (``block_sizes``, ``block_edges``), the training vertices in each community
  (``block_train``) and the share of vertices with an edge to another community (``bridge_fraction``).
* ``components`` (optional): the sizes of the connected components other than the largest and their edges,
  planted as separate pieces by a proxy drawn from a degree histogram (the communities then describe the
  largest component).
* ``clustering`` (optional): the average clustering coefficient, reached by a proxy drawn from a degree
  histogram through triangle closure.
* ``split.train_in_degree_histogram`` (optional): the training vertices' in-degrees, when the split is not a
  uniform sample (the proxy's training vertices then match it).
* ``metis_edge_cut`` (optional): published METIS k-way edge cuts of the graph, rows ``[parts, fraction]`` (the
  fraction of edges whose ends METIS puts in different parts; a symmetric graph's directed and undirected counts
  give the same fraction). A card without ``communities`` then gets a proxy whose communities are fitted to it
  (:mod:`simulator.workload.cut_fit`): what a partitioner can keep local is what decides remote inputs, and a
  METIS cut is published far more often than a community structure.

Measuring a graph in memory into card values (exponents, components, communities, a whole derived card) is
:mod:`simulator.workload.card_measures`.

Names: the file stem. ``cora`` and ``citeseer`` are bundled real graphs too; the bare name loads the real graph
and ``card:cora`` its card (any card may be written ``card:<name>``). A suffix ``@K`` (``card:ogbn-products@3``,
K a non-negative integer) names the K-th draw of the card's proxy (the generator seed of
:func:`simulator.workload.proxy.proxy_spec`; without it, draw :data:`simulator.workload.proxy.PROXY_SEED`): the
same card, another random graph with its statistics, so a prediction can be repeated over draws to see how much
of it is the proxy's chance (``--proxy-draws R`` of simulate, tune and whatif).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.io import read_yaml

CARD_DIR = Path(__file__).parent / "cards"
CARD_PREFIX = "card:"
DRAW_SEPARATOR = "@"
"""Separates a card's name from the draw of its proxy (``card:<name>@<K>``, module docstring)."""
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
    them), which the proxy's communities then meet at."""

    num_communities: Sourced[int]
    mu: Sourced[float]
    fine_num_communities: Sourced[int] | None = None
    fine_mu: Sourced[float] | None = None
    block_sizes: Sourced[list[int]] | None = None
    block_edges: Sourced[list[tuple[int, int, int]]] | None = None
    block_train: Sourced[list[int]] | None = None
    bridge_fraction: Sourced[float] | None = None

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

    @model_validator(mode="after")
    def _range(self) -> Clustering:
        if not 0.0 <= self.average_clustering.value < 1.0:
            raise ValueError("clustering.average_clustering must be in [0, 1)")
        return self


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


def card_dirs() -> list[Path]:
    """Folders searched for dataset cards, in order: the user's (``$GNNPLAN_HOME/cards``, default
    ``~/.gnnplan/cards``), so a card written there names a graph the package does not ship (or replaces a shipped
    one of the same name, as the user's cluster presets do), then the package's ``cards/``."""
    from gnnplan.simulator.paths import user_home

    return [user_home() / "cards", CARD_DIR]


def card_path(name: str) -> Path | None:
    """The file of card ``name``: the first ``<name>.yaml`` of :func:`card_dirs`; None when there is none or the
    name is not a plain file stem (a path separator or a leading dot)."""
    if not _plain_stem(name):
        return None
    for folder in card_dirs():
        path = folder / f"{name}.yaml"
        if path.is_file():
            return path
    return None


def card_file(name: str) -> Path:
    """:func:`card_path` of a card that must exist.

    Raises:
        SpecError: unknown card (the message lists the known ones).
    """
    path = card_path(name)
    if path is None:
        raise SpecError(f"workload.dataset: unknown card {name!r}; allowed: {', '.join(card_names())}")
    return path


def card_names() -> list[str]:
    """Names of the available cards: the user's and those shipped with the package (:func:`card_dirs`)."""
    return sorted({p.stem for d in card_dirs() if d.is_dir() for p in d.glob("*.yaml")})


def write_card(card: Card, folder: Path | None = None) -> Path:
    """Write ``card`` as ``<card.name>.yaml`` into ``folder`` (default the user's cards folder, the first of
    :func:`card_dirs`), atomically, in the layout :func:`load_card` reads (every number with its source); returns
    the file. A card measured on a graph in memory (:func:`simulator.workload.card_measures.derived_card`) is then
    a dataset like the shipped ones (``workload.dataset: card:<name>``).

    Raises:
        SpecError: the card's name is not a plain file stem.
    """
    from gnnplan.simulator.io import atomic_write_yaml

    check_card_name(card.name)
    target = (folder or card_dirs()[0]) / f"{card.name}.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    # fields given (a number not published is a value None with its source); optional fields left out stay out
    return atomic_write_yaml(target, card.model_dump(mode="json", exclude_unset=True))


def check_card_name(name: str) -> None:
    """Raise :class:`SpecError` unless ``name`` can be a card file's stem (:func:`_plain_stem`)."""
    if not _plain_stem(name):
        raise SpecError(f"card name: {name!r} must be a plain file name (no path separator, no leading dot)")


def _plain_stem(name: str) -> bool:
    """Whether ``name`` can be a card file's stem inside a cards folder (no path separator, no leading dot)."""
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


def card_name(ref: object) -> str | None:
    """The card a ``workload.dataset`` string names, or None; a proxy draw suffix ``@K`` is not part of the name
    (:func:`card_draw`).

    ``card:<name>`` always names a card; a bare name does when it is a card and not a bundled real graph
    (``cora``, ``citeseer``: their draws are ``card:cora@K``) or an existing folder.

    Raises:
        SpecError: a card reference whose ``@`` suffix is not a non-negative integer.
    """
    from gnnplan.simulator.workload.datasets import PRESETS

    if not isinstance(ref, str):
        return None
    if ref.startswith(CARD_PREFIX):
        return _split_draw(ref[len(CARD_PREFIX):], ref)[0]
    if Path(ref).is_dir():
        return None
    name = ref.partition(DRAW_SEPARATOR)[0]
    if name in PRESETS or card_path(name) is None:
        return None
    return _split_draw(ref, ref)[0]


def card_draw(ref: object) -> int | None:
    """The proxy draw a card reference names (``card:<name>@<K>`` -> K), None when it names none (the default
    draw) or is not a card.

    Raises:
        SpecError: a card reference whose ``@`` suffix is not a non-negative integer.
    """
    if card_name(ref) is None:
        return None
    return _split_draw(str(ref).removeprefix(CARD_PREFIX), str(ref))[1]


def _split_draw(text: str, ref: str) -> tuple[str, int | None]:
    """(name, draw) of ``name[@K]``; raises SpecError naming ``workload.dataset`` when K is malformed."""
    name, sep, draw = text.partition(DRAW_SEPARATOR)
    if not sep:
        return name, None
    if not draw.isdigit() or not draw.isascii():
        raise SpecError(f"workload.dataset: {ref!r}: the proxy draw after {DRAW_SEPARATOR!r} must be a "
                        f"non-negative integer (card:<name>{DRAW_SEPARATOR}<K>), got {draw!r}")
    return name, int(draw)


@lru_cache(maxsize=64)
def card_with_histogram(ref: object) -> str | None:
    """The card a ``workload.dataset`` names (:func:`card_name`) when it has ``degree.in_degree_histogram`` (what
    the proxy's per-batch scaling rule needs, :func:`simulator.workload.proxy_batch.batch_reach_scale`), else None."""
    name = card_name(ref)
    return name if name is not None and load_card(name).degree.in_degree_histogram is not None else None


def load_card(name: str) -> Card:
    """Read and validate a card.

    Raises:
        SpecError: unknown card (the message lists the known ones) or an invalid field (one line naming it).
    """
    path = card_file(name)
    where = f"card {name}" if path.parent == CARD_DIR else f"card {path}"  # a user's card by its file
    card = card_from_dict(copy.deepcopy(_card_mapping(str(path), path.stat().st_mtime_ns)), where=where)
    if card.name != name:
        raise SpecError(f"card {path}: name: {card.name!r} must be the file's name {name!r}")
    return card


@lru_cache(maxsize=64)
def _card_mapping(path: str, mtime_ns: int) -> dict:  # type: ignore[type-arg]
    """A card file's parsed YAML, read once per process and version of the file: a study loads its card in every
    trial, and pure-Python YAML took 0.05 s per card here (~6 s of a 12-trial, 2-draw tune of ``card:cora``,
    2026-11-29). :func:`load_card` validates a deep copy, so no card shares a mutable part with it."""
    return read_yaml(path, f"card {Path(path).stem}")


def card_from_dict(data: dict, where: str = "card") -> Card:  # type: ignore[type-arg]
    """Validate a mapping as a :class:`Card`, raising :class:`SpecError` with a one-line message."""
    try:
        return Card.model_validate(data)
    except ValidationError as exc:
        raise SpecError(one_line(exc, where)) from None
