"""Datasets: the OGB node-property raw layouts, the shipped presets, dataset cards, and generated graphs (R-MAT,
DC-SBM).

OGB raw layouts (what ``ogb``'s ``NodePropPredDataset`` downloads, and what a user's own folder must hold). CSV::

    <folder>/raw/edge.csv.gz            src,dst per line (one line per edge as stored; see add_inverse_edge)
    <folder>/raw/node-feat.csv.gz       one row of float features per vertex
    <folder>/raw/node-label.csv.gz      one class id per vertex (-1 = unlabeled)
    <folder>/raw/num-node-list.csv.gz   number of vertices
    <folder>/raw/num-edge-list.csv.gz   number of edges
    <folder>/split/<name>/{train,valid,test}.csv.gz   vertex ids

or the binary layout of the large datasets (ogbn-papers100M; OGB ``read_binary_graph_raw``)::

    <folder>/raw/data.npz               edge_index (2, E), num_nodes_list (1,), num_edges_list (1,),
                                        node_feat (n, d) [, node_year]
    <folder>/raw/node-label.npz         node_label (n, 1) float, NaN = unlabeled
    <folder>/split/<name>/{train,valid,test}.csv.gz

``add_inverse_edge`` (OGB ``nodeproppred/master.csv``): ogbn-products and ogbn-proteins list each undirected
pair once and are loaded with both directions (the reversed copy appended, as OGB's ``read_csv_graph_raw``
does); the flag is looked up by the folder's OGB name (``ogbn-products``, ``ogbn_products`` or its download name
``products``; :data:`OGB_ADD_INVERSE_EDGE`).

Features are never materialised for statistics: :class:`GraphData` holds them as a :class:`LazyFeatures` (shape
known, values read or generated on first use of ``GraphData.features``) for folders, R-MAT and DC-SBM graphs.
Before a graph is loaded or generated, :func:`check_host_memory` compares an estimate of the bytes it needs with
the host memory available and stops with one line when it will not fit.

A dataset card (:mod:`simulator.workload.cards`) is loaded as its degree-matched synthetic proxy
(:mod:`simulator.workload.proxy`), on which every statistic is measured and then scaled to the card's size.

Parsed graphs are cached as ``.npz`` under :func:`simulator.paths.cache_dir` (without features), keyed by the
files' sizes and modification times (or the generator's parameters), so a second load is fast; a folder's
features, once read, are cached as ``<key>-features.npy`` and memory-mapped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.npz_files import npz_array_bytes, npz_member
from gnnplan.simulator.workload.rmat import rmat_edges
from gnnplan.simulator.workload.sbm import communities, default_max_degree, sbm_edges
from gnnplan.simulator.workload.spec import GeneratedSpec, RmatSpec, SbmSpec

DATA_DIR = Path(__file__).parent / "data"
PRESETS = ("cora", "citeseer")
RAW_CSV = ("edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz")
RAW_NPZ = ("data.npz", "node-label.npz")
CACHE_FORMAT = "2"
"""Version of the cached ``.npz`` layout (2: no features, feature width in ``meta``); older entries are rebuilt."""
OGB_ADD_INVERSE_EDGE = {"ogbn-proteins": True, "ogbn-products": True, "ogbn-arxiv": False, "ogbn-mag": False,
                        "ogbn-papers100M": False}
"""``add_inverse_edge`` of OGB's node-property datasets (ogb/nodeproppred/master.csv, ogb 1.3)."""
OGB_DOWNLOAD_NAMES = {"proteinfunc_v4": "ogbn-proteins", "products": "ogbn-products", "arxiv": "ogbn-arxiv",
                      "mag": "ogbn-mag", "papers100M-bin": "ogbn-papers100M"}
"""OGB ``download_name`` -> dataset name (ogb/nodeproppred/master.csv), for folders kept under their zip's name."""
FEATURE_CHUNK_ELEMENTS = 65536 * 128
"""Random feature values drawn at a time when a generator only advances its RNG past them (32 MiB of float32:
bounded memory at any feature width; a stream drawn in chunks ends where one draw would)."""
SKIP_FEATURES_LIMIT = 2**30
"""Most feature values a generator advances its RNG past before drawing labels and split (~18 s at the ~60 M
float32 normals per second of one core of the development machine, 2026-12-01). A larger graph draws them from a
stream of their own (:func:`_after_features`): a workload of 1,000 R-MAT vertices with 10^8-wide features took
373 GiB to skip in rows and would take ~30 min in chunks (2026-12-01, a new user's pass), and a 100M-vertex
what-if graph of 128-wide features ~4 min, for values it never uses."""
LOAD_BYTES_PER_EDGE = {"csv": 48, "npz": 32}
"""Peak host bytes per stored edge while loading: the final (src, dst) int64 pair (16 B) plus the parser's copies
(CSV: pandas' frame and its ``to_numpy`` copy, 32 B; npz: the (2, E) ``edge_index``, 16 B). [inferred] from the
arrays alive at once in :func:`simulator.workload.ogb.read_ogb_folder`."""
INVERSE_BYTES_PER_EDGE = 32
"""Extra peak bytes per stored edge when ``add_inverse_edge`` appends the reversed copy (16 B kept, 16 B copy)."""
GENERATE_BYTES_PER_EDGE = 48
"""Peak host bytes per directed edge while generating R-MAT / DC-SBM: the pair keys of both directions (8 B), their
sorted copy (8 B) and the final (src, dst) int64 (16 B), with 50% for the draws topped up. [inferred] from
:func:`simulator.workload.rmat.rmat_edges` and :func:`simulator.workload.sbm.sbm_edges`."""
BYTES_PER_VERTEX = 40
"""Host bytes per vertex besides features: labels, split ids, degrees and the partition (int64 each), [inferred]."""


class LazyFeatures:
    """Vertex features known by shape and produced only when first used (read from files or generated).

    Attributes:
        shape: (num_vertices, feature_dim).
    """

    def __init__(self, shape: tuple[int, int], load: Callable[[], np.ndarray]) -> None:
        self.shape = (int(shape[0]), int(shape[1]))
        self._load = load

    def load(self) -> np.ndarray:
        """The (num_vertices, feature_dim) float32 features (after :func:`check_host_memory`).

        Raises:
            SpecError: they do not fit in host memory, or their file is corrupt.
        """
        check_host_memory("features", 4.0 * self.shape[0] * self.shape[1])
        return self._load()


@dataclass(frozen=True)
class GraphData:
    """A node-classification graph held in host memory (features on first use).

    Shapes:
        src, dst: (num_edges,) int64, directed edges src -> dst (a message flows from src to dst).
        feature_source: (num_vertices, feature_dim) float32 array, or a :class:`LazyFeatures` of that shape.
        features: (num_vertices, feature_dim) float32 (materialised from ``feature_source`` on first access).
        labels: (num_vertices,) int64, -1 where unlabeled.
        train_idx, val_idx, test_idx: (k,) int64 vertex ids.
    """

    name: str
    num_vertices: int
    src: np.ndarray
    dst: np.ndarray
    feature_source: np.ndarray | LazyFeatures
    labels: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int

    @cached_property
    def features(self) -> np.ndarray:
        """(num_vertices, feature_dim) float32 features, read or generated on first access."""
        src = self.feature_source
        return src.load() if isinstance(src, LazyFeatures) else src

    @property
    def features_loaded(self) -> bool:
        """Whether the features are in memory (an array given, or ``features`` accessed)."""
        return isinstance(self.feature_source, np.ndarray) or "features" in self.__dict__

    @property
    def num_edges(self) -> int:
        """Directed edges."""
        return int(self.src.shape[0])

    @property
    def feature_dim(self) -> int:
        """Input feature width (known without loading the features)."""
        return int(self.feature_source.shape[1])

    def in_degrees(self) -> np.ndarray:
        """(num_vertices,) int64 in-degree of every vertex."""
        return np.bincount(self.dst, minlength=self.num_vertices).astype(np.int64)


def resolve_dataset(ref: str | GeneratedSpec) -> str | GeneratedSpec:
    """Check that a dataset reference can be loaded, without loading it.

    Raises:
        SpecError: ``workload.dataset`` names neither a preset, a card nor an existing OGB-layout folder.
    """
    from gnnplan.simulator.workload.cards import card_name, card_names, load_card

    if isinstance(ref, GeneratedSpec) or ref in PRESETS:
        return ref
    card = card_name(ref)
    if card is not None:
        load_card(card)
        return ref
    folder = Path(ref)
    if not folder.is_dir():
        raise SpecError(f"workload.dataset: {ref!r} is neither a preset ({', '.join(PRESETS)}), a card "
                        f"({', '.join(card_names())}) nor an existing folder in the OGB raw layout")
    if all((folder / "raw" / f).is_file() for f in RAW_NPZ):
        return ref
    missing = [f for f in RAW_CSV if not (folder / "raw" / f).is_file()]
    if missing:
        raise SpecError(f"workload.dataset: folder {ref!r} lacks raw/{missing[0]} (OGB raw layout required: "
                        "raw/*.csv.gz, or raw/data.npz with raw/node-label.npz)")
    return ref


def load_dataset(ref: str | GeneratedSpec) -> GraphData:
    """Load a preset (``cora``, ``citeseer``), an OGB-layout folder, a card's proxy, or generate a graph.

    Args:
        ref: preset name, card name (``card:<name>`` or a bare card name, ``@K`` for the proxy's K-th draw),
            folder path, or a :class:`GeneratedSpec` (:class:`RmatSpec`, :class:`SbmSpec`).

    Returns:
        The graph, features not yet materialised (``GraphData.features`` reads or generates them); cached on
        disk after the first load, and from the cache its edge lists are memory-mapped (:func:`npz_member`). A
        card yields its proxy graph (:func:`simulator.workload.proxy.proxy_spec`).

    Raises:
        SpecError: missing folder or file, a corrupt file (the message names the file and line), or a graph
            that will not fit in host memory.
    """
    from gnnplan.simulator.workload.cards import card_name

    ref = resolve_dataset(ref)
    if card_name(ref) is not None:
        from gnnplan.simulator.workload.proxy import card_proxy

        ref = card_proxy(ref)
    key = dataset_key(ref)
    if isinstance(ref, GeneratedSpec):
        spec = ref
        return _cached(key, lambda: generate_graph(spec), lambda g: _generated_features(spec, g))
    folder = _folder(ref)
    from gnnplan.simulator.workload.ogb import folder_features, read_ogb_folder  # ogb.py builds on this module

    return _cached(key, lambda: read_ogb_folder(folder), lambda g: folder_features(folder, key, g.num_vertices))


def dataset_key(ref: str | GeneratedSpec) -> str:
    """A stable cache key of a dataset, computed without loading it (milliseconds).

    A generated graph is keyed by its generator parameters; a card by its file and proxy parameters
    (:func:`simulator.workload.proxy.proxy_key`); a folder (or preset) by its resolved path and the sizes and
    modification times of its raw and split files, so editing a file invalidates every cache entry.

    Args:
        ref: preset name, card name, folder path, or a :class:`GeneratedSpec`.

    Returns:
        ``<name>-<16 hex digits>``, usable as a file name.

    Raises:
        SpecError: see :func:`resolve_dataset`.
    """
    from gnnplan.simulator.workload.cards import card_name

    ref = resolve_dataset(ref)
    if isinstance(ref, GeneratedSpec):
        return f"{ref.name}-{hashlib.sha1(ref.name.encode()).hexdigest()[:16]}"
    card = card_name(ref)
    if card is not None:
        from gnnplan.simulator.workload.proxy import proxy_draw, proxy_key

        return proxy_key(card, proxy_draw(ref))
    folder = _folder(ref)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".csv.gz", ".npz")))
    stamp = "".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    return f"{folder.name}-{hashlib.sha1(f'{folder.resolve()}|{stamp}'.encode()).hexdigest()[:16]}"


def _folder(ref: str) -> Path:
    return DATA_DIR / ref if ref in PRESETS else Path(ref)


def available_host_bytes() -> float:
    """Host memory available to a new allocation: ``MemAvailable`` of /proc/meminfo (Linux), else the physical
    memory (``os.sysconf``)."""
    with contextlib.suppress(OSError):  # no /proc (not Linux): fall back to physical memory
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024.0
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def check_host_memory(what: str, nbytes: float) -> None:
    """Stop before an allocation that will not fit in host memory.

    Args:
        what: what is being allocated (goes into the message).
        nbytes: estimated peak bytes.

    Raises:
        SpecError: ``nbytes`` exceeds :func:`available_host_bytes` (one line with both numbers).
    """
    free = available_host_bytes()
    if nbytes > free:
        raise SpecError(f"workload.dataset: {what} needs ~{nbytes / 1e9:.3g} GB of host memory but only "
                        f"{free / 1e9:.3g} GB is available; use a dataset card (card:<name>) for statistics "
                        "without the graph, or a machine with more memory")


def generate_graph(spec: GeneratedSpec) -> GraphData:
    """Generate the graph a :class:`GeneratedSpec` describes (dispatch on its generator); features lazily.

    Raises:
        SpecError: a generator this module does not know, parameters it cannot satisfy, or a graph that will not
            fit in host memory (:data:`GENERATE_BYTES_PER_EDGE`).
    """
    if isinstance(spec, RmatSpec):
        edges = 2.0 * spec.edge_factor * spec.num_vertices
    elif isinstance(spec, SbmSpec):
        edges = spec.mean_degree * spec.num_vertices  # over all vertices, isolated ones included
    else:
        raise SpecError(f"workload.dataset: unknown generator {spec.generator!r}")
    check_host_memory(f"generating {spec.name} ({edges:.3g} directed edges, features not materialised)",
                      GENERATE_BYTES_PER_EDGE * edges + BYTES_PER_VERTEX * spec.num_vertices)
    if isinstance(spec, RmatSpec):
        return generate_rmat(spec)
    try:
        return generate_sbm(spec)
    except ValueError as exc:
        raise SpecError(f"workload.dataset: {exc}") from None


def generate_rmat(spec: RmatSpec) -> GraphData:
    """Generate the graph an :class:`RmatSpec` describes: R-MAT edges, N(0,1) features (drawn lazily: the RNG is
    advanced past them in chunks), uniform labels and a random train/validation/test split (all seeded by
    ``spec.seed``; the same values as drawing the features first)."""
    n = spec.num_vertices
    src, dst = rmat_edges(n, spec.edge_factor * n, seed=spec.seed, abc=(spec.a, spec.b, spec.c))
    rng = _after_features(spec, [n])
    labels = rng.integers(0, spec.num_classes, n, dtype=np.int64)
    return _with_split(spec, src, dst, _lazy_generated(spec), labels, rng)


def generate_sbm(spec: SbmSpec) -> GraphData:
    """Generate the graph an :class:`SbmSpec` describes: DC-SBM edges (:func:`simulator.workload.sbm.sbm_edges`),
    labels = community mod ``num_classes``, features = N(0,1) + ``feature_signal`` x the class's N(0,1) centroid
    (lazily, as in :func:`generate_rmat`), and a random train/validation/test split (all seeded by
    ``spec.seed``)."""
    n, k, nc = spec.num_vertices, spec.num_communities, spec.connected_vertices
    mean = spec.mean_degree * n / nc  # the isolated vertices (ids nc..n-1 before permuting) carry no edge
    cap = spec.max_degree or default_max_degree(nc, k, mean)
    from gnnplan.simulator.workload.degseq import DegreeSequenceSpec, degree_sequence_edges
    from gnnplan.simulator.workload.train_split import with_degree_matched_train

    if isinstance(spec, DegreeSequenceSpec):  # a card's proxy drawn from its degree histogram
        src, dst = degree_sequence_edges(spec)
    else:
        src, dst = sbm_edges(nc, k, spec.mu, mean, spec.degree_exponent, cap, seed=spec.seed)
    rng = _after_features(spec, [spec.num_classes, n])  # the class centroids, then the vertices' rows
    labels = _sbm_labels(spec)
    if spec.permute_ids:  # vertex v becomes perm[v]; its label moves with it
        perm = _id_permutation(spec)
        src, dst = perm[src], perm[dst]
        labels = labels[np.argsort(perm)]
    g = _with_split(spec, src, dst, _lazy_generated(spec), labels, rng)
    return with_degree_matched_train(spec, g) if isinstance(spec, DegreeSequenceSpec) else g


def _sbm_labels(spec: SbmSpec) -> np.ndarray:
    """(n,) labels of a DC-SBM graph in community order: community mod ``num_classes``, the isolated vertices
    (after the connected ones) split into communities of their own range alike."""
    nc, k = spec.connected_vertices, spec.num_communities
    rest = spec.num_vertices - nc
    parts = [communities(nc, k)] + ([communities(rest, min(k, rest))] if rest else [])
    return np.concatenate(parts) % spec.num_classes


def _id_permutation(spec: SbmSpec) -> np.ndarray:
    """(n,) new id of every community-ordered vertex when ``spec.permute_ids`` (its own RNG stream, so every
    other draw of the generator is unchanged)."""
    return np.random.default_rng((spec.seed, 2)).permutation(spec.num_vertices).astype(np.int64)


def _after_features(spec: GeneratedSpec, rows: list[int]) -> np.random.Generator:
    """The generator's stream for labels and split: its feature stream (``seed + 1``) advanced past the
    ``rows`` x ``feature_dim`` feature values :func:`generated_features` draws from it, so the features are the same
    whether drawn first or later; above :data:`SKIP_FEATURES_LIMIT` values, a stream of their own
    (``(seed, 7)``, the same distributions)."""
    values = sum(rows) * spec.feature_dim
    if values > SKIP_FEATURES_LIMIT:
        return np.random.default_rng((spec.seed, 7))
    rng = np.random.default_rng(spec.seed + 1)
    for start in range(0, values, FEATURE_CHUNK_ELEMENTS):
        rng.standard_normal(min(FEATURE_CHUNK_ELEMENTS, values - start), dtype=np.float32)
    return rng


def generated_features(spec: GeneratedSpec) -> np.ndarray:
    """(n, feature_dim) float32 features of a generated graph, drawn as its generator defines them.

    Raises:
        SpecError: a generator this module does not know.
    """
    n = spec.num_vertices
    rng = np.random.default_rng(spec.seed + 1)
    if isinstance(spec, RmatSpec):
        return rng.standard_normal((n, spec.feature_dim), dtype=np.float32)
    if isinstance(spec, SbmSpec):
        labels = _sbm_labels(spec)
        centroids = rng.standard_normal((spec.num_classes, spec.feature_dim), dtype=np.float32)
        features = rng.standard_normal((n, spec.feature_dim), dtype=np.float32)
        features += np.float32(spec.feature_signal) * centroids[labels]
        return features[np.argsort(_id_permutation(spec))] if spec.permute_ids else features
    raise SpecError(f"workload.dataset: unknown generator {spec.generator!r}")


def _lazy_generated(spec: GeneratedSpec) -> LazyFeatures:
    return LazyFeatures((spec.num_vertices, spec.feature_dim), lambda: generated_features(spec))


def _generated_features(spec: GeneratedSpec, g: GraphData) -> LazyFeatures:
    return _lazy_generated(spec)


def _with_split(spec: GeneratedSpec, src: np.ndarray, dst: np.ndarray, features: np.ndarray | LazyFeatures,
                labels: np.ndarray, rng: np.random.Generator) -> GraphData:
    """The graph with a random train/validation/test split of the spec's fractions."""
    n = spec.num_vertices
    order = rng.permutation(n)
    a = int(spec.train_fraction * n)
    b = a + int(spec.val_fraction * n)
    c = b + int(spec.test_fraction * n)
    return GraphData(spec.name, n, src, dst, features, labels, np.sort(order[:a]), np.sort(order[a:b]),
                     np.sort(order[b:c]), spec.num_classes)


def _cached(stem: str, build: Callable[[], GraphData],
            features_of: Callable[[GraphData], LazyFeatures]) -> GraphData:
    """The graph from ``<cache>/datasets/<stem>.npz`` (structure, labels and split; features from
    ``features_of``), or built, saved atomically without features, and returned."""
    path = cache_dir() / "datasets" / f"{stem}.npz"
    if path.is_file():
        try:
            nbytes = npz_array_bytes(path)
        except (OSError, zipfile.BadZipFile):
            nbytes = 0.0  # a damaged entry is rebuilt below, which checks memory itself
        check_host_memory(f"loading {stem} from the cache (features not materialised)", nbytes)
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = z["meta"]
                if len(meta) == 5 and str(meta[4]) == CACHE_FORMAT:  # the edge lists mapped, not read (npz_member)
                    g = GraphData(str(meta[0]), int(meta[1]), npz_member(path, "src"), npz_member(path, "dst"),
                                  LazyFeatures((int(meta[1]), int(meta[3])), lambda: np.empty((0, 0))), z["labels"],
                                  z["train_idx"], z["val_idx"], z["test_idx"], int(meta[2]))
                    return GraphData(g.name, g.num_vertices, g.src, g.dst, features_of(g), g.labels, g.train_idx,
                                     g.val_idx, g.test_idx, g.num_classes)
        except (OSError, KeyError, ValueError, IndexError, zipfile.BadZipFile):
            pass  # a damaged or old-format cache entry is rebuilt below
    g = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    np.savez(tmp, meta=np.array([g.name, str(g.num_vertices), str(g.num_classes), str(g.feature_dim), CACHE_FORMAT]),
             src=g.src, dst=g.dst, labels=g.labels, train_idx=g.train_idx, val_idx=g.val_idx, test_idx=g.test_idx)
    os.replace(tmp, path)
    if g.features_loaded:
        return g
    return GraphData(g.name, g.num_vertices, g.src, g.dst, features_of(g), g.labels, g.train_idx, g.val_idx,
                     g.test_idx, g.num_classes)
