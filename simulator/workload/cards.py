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
  (``block_train``), the share of vertices with an edge to another community (``bridge_fraction``) and the share
  of the training vertices at most one hop from such a vertex (``train_near_bridge_fraction``).
* ``components`` (optional): the sizes of the connected components other than the largest and their edges,
  planted as separate pieces by a proxy drawn from a degree histogram (the communities then describe the
  largest component).
* ``clustering`` (optional): the average clustering coefficient, reached by a proxy drawn from a degree
  histogram through triangle closure; with ``largest_component``, the largest component's own average, which the
  proxy's largest component then reaches instead (its small components keep the triangles they were planted with).
* ``split.train_in_degree_histogram`` (optional): the training vertices' in-degrees, when the split is not a
  uniform sample (the proxy's training vertices then match it).
* ``metis_edge_cut`` (optional): published METIS k-way edge cuts of the graph, rows ``[parts, fraction]`` (the
  fraction of edges whose ends METIS puts in different parts; a symmetric graph's directed and undirected counts
  give the same fraction). A card without ``communities`` then gets a proxy whose communities are fitted to it
  (:mod:`simulator.workload.cut_fit`): what a partitioner can keep local is what decides remote inputs, and a
  METIS cut is published far more often than a community structure.

The models a card validates against are :mod:`simulator.workload.card_schema` (imported here too).
Measuring a graph in memory into card values (exponents, components, communities, a whole derived card) is
:mod:`simulator.workload.card_measures`.

Names: the file stem. ``cora`` and ``citeseer`` are bundled real graphs too; the bare name loads the real graph
and ``card:cora`` its card (any card may be written ``card:<name>``). A suffix ``@K`` (``card:ogbn-products@3``,
K a non-negative integer) names the K-th draw of the card's proxy (the generator seed of
:func:`simulator.workload.proxy.proxy_spec`; without it, draw :data:`simulator.workload.proxy.PROXY_SEED`): the
same card, another random graph with its statistics, so a prediction can be repeated over draws to see how much
of it is the proxy's chance (``--proxy-draws R`` of simulate, tune and whatif). Without it, a card of fewer than
10^5 vertices has its statistics pooled over several draws (:mod:`simulator.workload.proxy_pool`).
"""


from __future__ import annotations

import copy
import re
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.io import read_yaml
from gnnplan.simulator.limits import SEED_LIMIT
from gnnplan.simulator.wording import unknown_name

# the schema's models, imported here so a card and its parts keep one import path
from gnnplan.simulator.workload.card_schema import (
    Card,
    Clustering,
    Communities,
    Components,
    DegreeSummary,
    Sourced,
    Split,
)

__all__ = ["CARD_DIR", "CARD_PREFIX", "DRAW_SEPARATOR", "Card", "Clustering", "Communities", "Components",
           "DegreeSummary", "Sourced", "Split", "card_dirs", "card_draw", "card_file", "card_from_dict",
           "card_name", "card_names", "card_path", "card_with_histogram", "check_card_name", "load_card",
           "write_card"]

CARD_DIR = Path(__file__).parent / "cards"
CARD_PREFIX = "card:"
DRAW_SEPARATOR = "@"
"""Separates a card's name from the draw of its proxy (``card:<name>@<K>``, module docstring)."""


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
        raise SpecError(f"workload.dataset: {unknown_name('card', name, card_names())}")
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


CARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""What a card written by gnnplan may be named: it is referred to as ``card:<name>[@K]``, also inside the comma
lists of ``--vary`` and ``--strategies``-like options, so no space, ``@``, ``,`` or ``=``, and no path part."""


def check_card_name(name: str) -> None:
    """Raise :class:`SpecError` unless ``name`` is a :data:`CARD_NAME` (what a card is written under)."""
    if not CARD_NAME.match(name):
        raise SpecError(f"card name: {name!r} must be letters, digits, '.', '_' or '-', starting with a letter or "
                        "digit (it is named as card:<name>[@K], also in comma-separated lists)")


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
    if not draw.isdigit() or not draw.isascii() or int(draw) >= SEED_LIMIT:
        raise SpecError(f"workload.dataset: {ref!r}: the proxy draw after {DRAW_SEPARATOR!r} must be an integer "
                        f"from 0 to 2**32 - 1, the proxy's seed (card:<name>{DRAW_SEPARATOR}<K>), got {draw!r}")
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
