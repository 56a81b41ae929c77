"""The OGB node-property raw layout on disk (``gnnplan.simulator.workload.datasets`` loads and caches it).

A folder holds ``raw/`` (``edge.csv.gz``, ``node-feat.csv.gz``, ``node-label.csv.gz``, ``num-node-list.csv.gz``,
``num-edge-list.csv.gz``; or the binary ``data.npz`` + ``node-label.npz`` of the large datasets such as
ogbn-papers100M) and ``split/<scheme>/{train,valid,test}.csv.gz``; ``add_inverse_edge`` follows OGB's master.csv
(:data:`~simulator.workload.datasets.OGB_ADD_INVERSE_EDGE`). Source: OGB, ``ogb/nodeproppred/master.csv`` and
``ogb/io/read_graph_raw.py`` (Hu et al., "Open Graph Benchmark", NeurIPS 2020).
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.io import atomic_save_npy
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.datasets import (
    BYTES_PER_VERTEX,
    INVERSE_BYTES_PER_EDGE,
    LOAD_BYTES_PER_EDGE,
    OGB_ADD_INVERSE_EDGE,
    OGB_DOWNLOAD_NAMES,
    RAW_NPZ,
    GraphData,
    LazyFeatures,
    check_host_memory,
)
from gnnplan.simulator.workload.validate import check_features, check_labels


def ogb_name(folder: Path) -> str:
    """The OGB dataset name a folder holds, from its name (``ogbn_products``, ``ogbn-products`` or the download
    name ``products``); the folder name itself when it is none of these."""
    name = folder.name
    if name in OGB_DOWNLOAD_NAMES:
        return OGB_DOWNLOAD_NAMES[name]
    dashed = name.replace("_", "-")
    return dashed if dashed in OGB_ADD_INVERSE_EDGE else name


def add_inverse_edge(folder: Path) -> bool:
    """OGB's ``add_inverse_edge`` for the dataset in ``folder`` (:data:`OGB_ADD_INVERSE_EDGE`; False for a folder
    that is no OGB dataset: its edge list is taken as complete)."""
    return OGB_ADD_INVERSE_EDGE.get(ogb_name(folder), False)


VERTEX_COUNT_FILE = {False: "raw/num-node-list.csv.gz", True: "raw/data.npz num_nodes_list"}
"""Where each layout (npz: True) gives the vertex count, for messages."""
EDGE_COUNT_FILE = {False: "raw/num-edge-list.csv.gz", True: "raw/data.npz num_edges_list"}
"""Where each layout (npz: True) gives the edge count, for messages."""


def read_ogb_folder(folder: Path) -> GraphData:
    """Parse an OGB node-property raw folder, CSV or npz layout (module docstring); features stay on disk
    (:class:`LazyFeatures`) and ``add_inverse_edge`` datasets get both directions of every stored edge.

    Raises:
        SpecError: a file is missing or corrupt (the message names the file), or the graph will not fit in host
            memory (:func:`check_host_memory`, checked from the vertex and edge counts before the edges are read).
    """
    raw = folder / "raw"
    npz = all((raw / f).is_file() for f in RAW_NPZ)
    inverse = add_inverse_edge(folder)
    if npz:
        n, m, feature_dim = _npz_sizes(raw / "data.npz", folder)
    else:
        n = int(_read_ints(raw / "num-node-list.csv.gz", folder, cols=1)[0, 0])
        m = int(_read_ints(raw / "num-edge-list.csv.gz", folder, cols=1)[0, 0])
        feature_dim = _csv_columns(raw / "node-feat.csv.gz", folder)
    if n < 1:
        raise SpecError(f"dataset {folder.name}: {VERTEX_COUNT_FILE[npz]} says {n} vertices; it must be at least 1")
    if m < 0:
        raise SpecError(f"dataset {folder.name}: {EDGE_COUNT_FILE[npz]} says {m} edges; it must be at least 0")
    per_edge = LOAD_BYTES_PER_EDGE["npz" if npz else "csv"] + (INVERSE_BYTES_PER_EDGE if inverse else 0)
    check_host_memory(f"loading {folder.name} ({n} vertices, {m} edges{', plus inverses' if inverse else ''}; "
                      "features not materialised)", per_edge * m + BYTES_PER_VERTEX * n)
    if npz:
        edges, labels = _read_npz_graph(raw, folder, m)
    else:
        edges = _read_ints(raw / "edge.csv.gz", folder, cols=2)
        labels = _read_ints(raw / "node-label.csv.gz", folder, cols=1)[:, 0]
    what = "raw/data.npz edge_index" if npz else "raw/edge.csv.gz"
    if edges.shape[0] != m:
        raise SpecError(f"dataset {folder.name}: {what} has {edges.shape[0]} edges but the edge count file says {m}")
    _check_ids(edges.ravel(), n, folder, what, VERTEX_COUNT_FILE[npz])
    if labels.shape[0] != n:
        label_file = "raw/node-label.npz" if npz else "raw/node-label.csv.gz"
        raise SpecError(f"dataset {folder.name}: {label_file} has {labels.shape[0]} rows but the graph has "
                        f"{n} vertices")
    split = _split_folder(folder)
    idx = {}
    for part in ("train", "valid", "test"):
        ids = _read_ints(split / f"{part}.csv.gz", folder, cols=1)[:, 0]
        _check_ids(ids, n, folder, f"split/{split.name}/{part}.csv.gz", VERTEX_COUNT_FILE[npz])
        idx[part] = ids
    _check_split(idx, folder, split.name)
    check_labels(labels, idx["train"], folder.name, "raw/node-label.npz" if npz else "raw/node-label.csv.gz")
    num_classes = int(labels.max()) + 1 if labels.size else 0
    src, dst = edges[:, 0].copy(), edges[:, 1].copy()
    del edges
    if inverse:  # OGB read_csv_graph_raw: edge_index = concat(edge_index, edge_index[::-1]), no deduplication
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    features = LazyFeatures((n, feature_dim), lambda: _read_features(folder, n))
    return GraphData(folder.name, n, src, dst, features, labels, idx["train"], idx["valid"], idx["test"],
                     num_classes)


def _npz_sizes(path: Path, folder: Path) -> tuple[int, int, int]:
    """(vertices, edges, feature width) of an OGB ``data.npz`` from its small arrays and ``node_feat``'s header
    (the feature matrix is not read)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            n, m = int(z["num_nodes_list"][0]), int(z["num_edges_list"][0])
        with zipfile.ZipFile(path) as zf, zf.open("node_feat.npy") as fh:
            version = np.lib.format.read_magic(fh)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                np.lib.format.read_array_header_2_0
            shape, _, _ = read_header(fh)  # the header only, not the data
    except (OSError, KeyError, ValueError, IndexError, zipfile.BadZipFile) as exc:
        raise SpecError(f"dataset {folder.name}: raw/data.npz is corrupt or lacks num_nodes_list, num_edges_list "
                        f"or node_feat: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if len(shape) != 2 or shape[0] != n:
        raise SpecError(f"dataset {folder.name}: raw/data.npz node_feat has shape {tuple(shape)}, expected "
                        f"({n}, feature_dim)")
    return n, m, int(shape[1])


def _read_npz_graph(raw: Path, folder: Path, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(edges (E, 2) int64, labels (n,) int64 with NaN -> -1) of the npz layout."""
    try:
        with np.load(raw / "data.npz", allow_pickle=False) as z:
            edge_index = z["edge_index"]
        with np.load(raw / "node-label.npz", allow_pickle=False) as z:
            node_label = np.asarray(z["node_label"], dtype=np.float64).reshape(-1)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise SpecError(f"dataset {folder.name}: raw/data.npz or raw/node-label.npz is corrupt or lacks edge_index "
                        f"/ node_label: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise SpecError(f"dataset {folder.name}: raw/data.npz edge_index has shape {edge_index.shape}, expected "
                        f"(2, {m})")
    labels = np.where(np.isnan(node_label), -1, node_label).astype(np.int64)
    return np.ascontiguousarray(edge_index.T.astype(np.int64, copy=False)), labels


def _read_features(folder: Path, n: int) -> np.ndarray:
    """(n, d) float32 features of a folder: raw/data.npz ``node_feat`` or raw/node-feat.csv.gz.

    Raises:
        SpecError: missing or corrupt file, or a row count other than n.
    """
    raw = folder / "raw"
    if all((raw / f).is_file() for f in RAW_NPZ):
        try:
            with np.load(raw / "data.npz", allow_pickle=False) as z:
                features = np.ascontiguousarray(z["node_feat"], dtype=np.float32)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise SpecError(f"dataset {folder.name}: raw/data.npz node_feat is unreadable: {exc}") from None
        what = "raw/data.npz node_feat"
    else:
        features = _read_floats(raw / "node-feat.csv.gz", folder)
        what = "raw/node-feat.csv.gz"
    if features.shape[0] != n:
        raise SpecError(f"dataset {folder.name}: {what} has {features.shape[0]} rows but the graph has {n} vertices")
    check_features(features, folder.name, what)
    return features


def folder_features(folder: Path, key: str, n: int) -> LazyFeatures:
    """The folder's features, read once and then kept as ``<key>-features.npy`` in the cache (memory-mapped)."""
    raw = folder / "raw"
    dim = _npz_sizes(raw / "data.npz", folder)[2] if all((raw / f).is_file() for f in RAW_NPZ) else \
        _csv_columns(raw / "node-feat.csv.gz", folder)
    path = cache_dir() / "datasets" / f"{key}-features.npy"

    def load() -> np.ndarray:
        if path.is_file():
            try:
                arr = np.load(path, mmap_mode="r", allow_pickle=False)
                if arr.shape == (n, dim) and arr.dtype == np.float32:
                    return arr
            except (OSError, ValueError):
                pass  # a damaged cache entry is read again below
        arr = _read_features(folder, n)
        atomic_save_npy(path, arr)
        return arr

    return LazyFeatures((n, dim), load)


def _csv_columns(path: Path, folder: Path) -> int:
    """Columns of the first line of a gzip CSV (the feature width, read without parsing the file)."""
    import gzip

    if not path.is_file():
        raise SpecError(f"dataset {folder.name}: missing {path.relative_to(folder)}")
    try:
        with gzip.open(path, "rt") as fh:
            first = fh.readline()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} is corrupt: {exc}") from None
    if not first.strip():
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} is empty")
    return len(first.strip().split(","))


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
        with warnings.catch_warnings():  # pandas warns before it raises on an empty or fractional value
            warnings.simplefilter("ignore")
            df = pd.read_csv(path, header=None, dtype=np.int64, compression="gzip")
    except Exception as exc:  # pandas raises several types for corrupt gzip/CSV content
        first = _not_whole(path) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} is corrupt: {first}") from None
    if df.shape[1] != cols:
        raise SpecError(f"dataset {folder.name}: {path.relative_to(folder)} has {df.shape[1]} columns, "
                        f"expected {cols}")
    return df.to_numpy()


def _not_whole(path: Path) -> str | None:
    """Where an integer CSV file holds a value that is no whole number (``line L: 'x' is not a whole number``,
    an empty field ``''``), read again as text once the integer read failed; None when every field is one (the
    failure was something else: a ragged row, bad gzip)."""
    import pandas as pd

    try:
        text = pd.read_csv(path, header=None, dtype=str, keep_default_na=False, compression="gzip")
    except Exception:  # noqa: BLE001 (the caller reports the first error)
        return None
    for col in text.columns:
        bad = ~text[col].str.strip().str.fullmatch(r"[-+]?\d+")
        if bad.any():
            row = int(np.argmax(bad.to_numpy()))
            return f"line {row + 1}: {text[col].iloc[row]!r} is not a whole number"
    return None


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


def _check_split(idx: dict[str, np.ndarray], folder: Path, scheme: str) -> None:
    """Each split lists a vertex at most once and no vertex is in two of them (a duplicated training vertex would
    count twice in every epoch; one in training and test leaks its label into the test accuracy).

    Raises:
        SpecError: one line naming the file(s) and the first vertex at fault.
    """
    for part, ids in idx.items():
        uniq, counts = np.unique(ids, return_counts=True)
        again = np.flatnonzero(counts > 1)
        if again.size:
            raise SpecError(f"dataset {folder.name}: split/{scheme}/{part}.csv.gz lists vertex "
                            f"{int(uniq[again[0]])} {int(counts[again[0]])} times; each at most once")
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        both = np.intersect1d(idx[a], idx[b])
        if both.size:
            raise SpecError(f"dataset {folder.name}: vertex {int(both[0])} is in both split/{scheme}/{a}.csv.gz and "
                            f"{b}.csv.gz; the splits must not overlap")


def _check_ids(ids: np.ndarray, n: int, folder: Path, what: str, count_file: str) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        raise SpecError(f"dataset {folder.name}: {what} holds vertex id {bad}, outside [0, {n}) (the vertex count "
                        f"of {count_file})")


