"""Datasets: the OGB node-property raw layout loader, the shipped presets, and generated graphs (R-MAT, DC-SBM).

OGB raw layout (what ``ogb``'s ``NodePropPredDataset`` downloads, and what a user's own folder must hold)::

    <folder>/raw/edge.csv.gz            src,dst per line (directed; both directions listed for undirected)
    <folder>/raw/node-feat.csv.gz       one row of float features per vertex
    <folder>/raw/node-label.csv.gz      one class id per vertex (-1 = unlabeled)
    <folder>/raw/num-node-list.csv.gz   number of vertices
    <folder>/raw/num-edge-list.csv.gz   number of edges
    <folder>/split/<name>/{train,valid,test}.csv.gz   vertex ids

Parsed graphs are cached as ``.npz`` under :func:`simulator.paths.cache_dir`, keyed by the files' sizes and
modification times (or the generator's parameters), so a second load is fast.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.rmat import rmat_edges
from gnnplan.simulator.workload.sbm import communities, default_max_degree, sbm_edges
from gnnplan.simulator.workload.spec import GeneratedSpec, RmatSpec, SbmSpec

DATA_DIR = Path(__file__).parent / "data"
PRESETS = ("cora", "citeseer")
_RAW = ("edge.csv.gz", "node-feat.csv.gz", "node-label.csv.gz", "num-node-list.csv.gz", "num-edge-list.csv.gz")


@dataclass(frozen=True)
class GraphData:
    """A node-classification graph held in host memory.

    Shapes:
        src, dst: (num_edges,) int64, directed edges src -> dst (a message flows from src to dst).
        features: (num_vertices, feature_dim) float32.
        labels: (num_vertices,) int64, -1 where unlabeled.
        train_idx, val_idx, test_idx: (k,) int64 vertex ids.
    """

    name: str
    num_vertices: int
    src: np.ndarray
    dst: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    train_idx: np.ndarray
    val_idx: np.ndarray
    test_idx: np.ndarray
    num_classes: int

    @property
    def num_edges(self) -> int:
        """Directed edges."""
        return int(self.src.shape[0])

    @property
    def feature_dim(self) -> int:
        """Input feature width."""
        return int(self.features.shape[1])

    def in_degrees(self) -> np.ndarray:
        """(num_vertices,) int64 in-degree of every vertex."""
        return np.bincount(self.dst, minlength=self.num_vertices).astype(np.int64)


def resolve_dataset(ref: str | GeneratedSpec) -> str | GeneratedSpec:
    """Check that a dataset reference can be loaded, without loading it.

    Raises:
        SpecError: ``workload.dataset`` names neither a preset nor an existing OGB-layout folder.
    """
    if isinstance(ref, GeneratedSpec) or ref in PRESETS:
        return ref
    folder = Path(ref)
    if not folder.is_dir():
        raise SpecError(f"workload.dataset: {ref!r} is neither a preset ({', '.join(PRESETS)}) nor an existing "
                        "folder in the OGB raw layout")
    missing = [f for f in _RAW if not (folder / "raw" / f).is_file()]
    if missing:
        raise SpecError(f"workload.dataset: folder {ref!r} lacks raw/{missing[0]} (OGB raw layout required)")
    return ref


def load_dataset(ref: str | GeneratedSpec) -> GraphData:
    """Load a preset (``cora``, ``citeseer``), an OGB-layout folder, or generate a graph (R-MAT, DC-SBM).

    Args:
        ref: preset name, folder path, or a :class:`GeneratedSpec` (:class:`RmatSpec`, :class:`SbmSpec`).

    Returns:
        The graph; cached on disk after the first load.

    Raises:
        SpecError: missing folder or file, or a corrupt file (the message names the file and line).
    """
    ref = resolve_dataset(ref)
    key = dataset_key(ref)
    if isinstance(ref, GeneratedSpec):
        spec = ref
        return _cached(key, lambda: generate_graph(spec))
    folder = _folder(ref)
    return _cached(key, lambda: read_ogb_folder(folder))


def dataset_key(ref: str | GeneratedSpec) -> str:
    """A stable cache key of a dataset, computed without loading it (milliseconds).

    A generated graph is keyed by its generator parameters; a folder (or preset) by its resolved path and the
    sizes and modification times of its ``.csv.gz`` files, so editing a file invalidates every cache entry.

    Args:
        ref: preset name, folder path, or a :class:`GeneratedSpec`.

    Returns:
        ``<name>-<16 hex digits>``, usable as a file name.

    Raises:
        SpecError: see :func:`resolve_dataset`.
    """
    ref = resolve_dataset(ref)
    if isinstance(ref, GeneratedSpec):
        return f"{ref.name}-{hashlib.sha1(ref.name.encode()).hexdigest()[:16]}"
    folder = _folder(ref)
    stamp = "".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in sorted(folder.rglob("*.csv.gz")))
    return f"{folder.name}-{hashlib.sha1(f'{folder.resolve()}|{stamp}'.encode()).hexdigest()[:16]}"


def _folder(ref: str) -> Path:
    return DATA_DIR / ref if ref in PRESETS else Path(ref)


def generate_graph(spec: GeneratedSpec) -> GraphData:
    """Generate the graph a :class:`GeneratedSpec` describes (dispatch on its generator).

    Raises:
        SpecError: a generator this module does not know, or parameters it cannot satisfy.
    """
    if isinstance(spec, RmatSpec):
        return generate_rmat(spec)
    if isinstance(spec, SbmSpec):
        try:
            return generate_sbm(spec)
        except ValueError as exc:
            raise SpecError(f"workload.dataset: {exc}") from None
    raise SpecError(f"workload.dataset: unknown generator {spec.generator!r}")


def generate_rmat(spec: RmatSpec) -> GraphData:
    """Generate the graph an :class:`RmatSpec` describes: R-MAT edges, N(0,1) features, uniform labels and a
    random train/validation/test split (all seeded by ``spec.seed``)."""
    n = spec.num_vertices
    src, dst = rmat_edges(n, spec.edge_factor * n, seed=spec.seed, abc=(spec.a, spec.b, spec.c))
    rng = np.random.default_rng(spec.seed + 1)
    features = rng.standard_normal((n, spec.feature_dim), dtype=np.float32)
    labels = rng.integers(0, spec.num_classes, n, dtype=np.int64)
    return _with_split(spec, src, dst, features, labels, rng)


def generate_sbm(spec: SbmSpec) -> GraphData:
    """Generate the graph an :class:`SbmSpec` describes: DC-SBM edges (:func:`simulator.workload.sbm.sbm_edges`),
    labels = community mod ``num_classes``, features = N(0,1) + ``feature_signal`` x the class's N(0,1) centroid,
    and a random train/validation/test split (all seeded by ``spec.seed``)."""
    n, k = spec.num_vertices, spec.num_communities
    cap = spec.max_degree or default_max_degree(n, k, spec.mean_degree)
    src, dst = sbm_edges(n, k, spec.mu, spec.mean_degree, spec.degree_exponent, cap, seed=spec.seed)
    rng = np.random.default_rng(spec.seed + 1)
    labels = communities(n, k) % spec.num_classes
    centroids = rng.standard_normal((spec.num_classes, spec.feature_dim), dtype=np.float32)
    features = rng.standard_normal((n, spec.feature_dim), dtype=np.float32)
    features += np.float32(spec.feature_signal) * centroids[labels]
    return _with_split(spec, src, dst, features, labels, rng)


def _with_split(spec: GeneratedSpec, src: np.ndarray, dst: np.ndarray, features: np.ndarray, labels: np.ndarray,
                rng: np.random.Generator) -> GraphData:
    """The graph with a random train/validation/test split of the spec's fractions."""
    n = spec.num_vertices
    order = rng.permutation(n)
    a = int(spec.train_fraction * n)
    b = a + int(spec.val_fraction * n)
    c = b + int(spec.test_fraction * n)
    return GraphData(spec.name, n, src, dst, features, labels, np.sort(order[:a]), np.sort(order[a:b]),
                     np.sort(order[b:c]), spec.num_classes)


def read_ogb_folder(folder: Path) -> GraphData:
    """Parse an OGB node-property raw folder (see module docstring).

    Raises:
        SpecError: a file is missing or corrupt; the message names the file.
    """
    raw = folder / "raw"
    n = int(_read_ints(raw / "num-node-list.csv.gz", folder, cols=1)[0, 0])
    m = int(_read_ints(raw / "num-edge-list.csv.gz", folder, cols=1)[0, 0])
    edges = _read_ints(raw / "edge.csv.gz", folder, cols=2)
    if edges.shape[0] != m:
        raise SpecError(f"dataset {folder.name}: raw/edge.csv.gz has {edges.shape[0]} edges but "
                        f"raw/num-edge-list.csv.gz says {m}")
    _check_ids(edges.ravel(), n, folder, "raw/edge.csv.gz")
    features = _read_floats(raw / "node-feat.csv.gz", folder)
    labels = _read_ints(raw / "node-label.csv.gz", folder, cols=1)[:, 0]
    for what, arr in (("raw/node-feat.csv.gz", features), ("raw/node-label.csv.gz", labels)):
        if arr.shape[0] != n:
            raise SpecError(f"dataset {folder.name}: {what} has {arr.shape[0]} rows but the graph has {n} vertices")
    split = _split_folder(folder)
    idx = {}
    for part in ("train", "valid", "test"):
        ids = _read_ints(split / f"{part}.csv.gz", folder, cols=1)[:, 0]
        _check_ids(ids, n, folder, f"split/{split.name}/{part}.csv.gz")
        idx[part] = ids
    num_classes = int(labels.max()) + 1 if labels.size else 0
    return GraphData(folder.name, n, edges[:, 0].copy(), edges[:, 1].copy(), features, labels,
                     idx["train"], idx["valid"], idx["test"], num_classes)


def _split_folder(folder: Path) -> Path:
    splits = sorted(p for p in (folder / "split").glob("*") if p.is_dir())
    if not splits:
        raise SpecError(f"dataset {folder.name}: no split/<name>/ folder with train/valid/test.csv.gz")
    return splits[0]


def _read_ints(path: Path, folder: Path, cols: int) -> np.ndarray:
    import pandas as pd

    if not path.is_file():
        raise SpecError(f"dataset {folder.name}: missing {path.relative_to(folder)}")
    try:
        df = pd.read_csv(path, header=None, dtype=np.int64, compression="gzip")
    except Exception as exc:  # pandas raises several types for corrupt gzip/CSV content
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} is corrupt: {first}") from None
    if df.shape[1] != cols:
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} has {df.shape[1]} columns, "
                        f"expected {cols}")
    return df.to_numpy()


def _read_floats(path: Path, folder: Path) -> np.ndarray:
    import pandas as pd

    if not path.is_file():
        raise SpecError(f"dataset {folder.name}: missing {path.relative_to(folder)}")
    try:
        df = pd.read_csv(path, header=None, dtype=np.float32, compression="gzip")
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} is corrupt: {first}") from None
    return np.ascontiguousarray(df.to_numpy(dtype=np.float32))


def _check_ids(ids: np.ndarray, n: int, folder: Path, what: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        raise SpecError(f"dataset {folder.name}: {what} holds vertex id {bad}, outside [0, {n})")


def _cached(stem: str, build) -> GraphData:  # type: ignore[no-untyped-def]
    path = cache_dir() / "datasets" / f"{stem}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = z["meta"]
                return GraphData(str(meta[0]), int(meta[1]), z["src"], z["dst"], z["features"], z["labels"],
                                 z["train_idx"], z["val_idx"], z["test_idx"], int(meta[2]))
        except (OSError, KeyError, ValueError):
            pass  # a damaged cache entry is rebuilt below
    g = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    np.savez(tmp, meta=np.array([g.name, str(g.num_vertices), str(g.num_classes)]), src=g.src, dst=g.dst,
             features=g.features, labels=g.labels, train_idx=g.train_idx, val_idx=g.val_idx, test_idx=g.test_idx)
    os.replace(tmp, path)
    return g
