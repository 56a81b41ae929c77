"""Pre-propagation of PP-GNNs (SGC, SIGN): the hop matrices X, BX, ..., B^R X of the labelled rows, one file per hop.

Notation (PP-GNN brief, /work/shared/papers/ppgnn.md §1.1; Yue, Deng and Zhang, MLSys 2025, Eq. 2-3): ``B`` is
the symmetric normalised adjacency with self-loops, ``D~^-1/2 (A + I) D~^-1/2`` with ``D~`` the row sums of
``A + I`` (Wu et al., "Simplifying Graph Convolutional Networks", ICML 2019, §2.1, the "augmented normalized
adjacency"); ``R`` = ``hops``; hop ``r`` is ``X_r = B X_{r-1}`` with ``X_0 = X``, one sparse-dense product per
hop (``torch.sparse.mm`` with a CSR matrix). Row ``v`` of ``B X`` sums ``B[v, u] X[u]`` over the edges
``u -> v`` and the self-loop; ``undirected=True`` (the default) first adds the reverse of every edge, so
``A`` is symmetric. Duplicate edges and self-loops of the input are dropped before ``I`` is added.

Only the labelled rows are stored, in ``train | val | test`` order (brief §1.1: the stored input is
proportional to the number of labelled vertices), as float32 ``hop_<r>.npy`` files of shape
``(num_labelled, feature_dim)``, plus ``labels.npy`` and ``meta.json``. Every file is written to a temporary
name and renamed (atomic); ``meta.json`` is written last, so a folder with a readable ``meta.json`` is complete.
:func:`prepropagated` caches the folder under :func:`simulator.paths.cache_dir` ``/ppgnn/`` keyed by the
dataset's cache key and the operator, and recomputes it when more hops are needed than stored.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnnplan.executor.data import input_features
from gnnplan.simulator.io import atomic_save_npy, atomic_write_json
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload.datasets import GraphData, dataset_key, load_dataset
from gnnplan.simulator.workload.spec import GeneratedSpec

FORMAT = 1
"""Version of the stored layout; part of the cache key."""
META_FILE = "meta.json"
LABELS_FILE = "labels.npy"


def hop_file(r: int) -> str:
    """File name of hop ``r``."""
    return f"hop_{r}.npy"


@dataclass(frozen=True)
class HopFiles:
    """A folder of pre-propagated hop matrices (module docstring).

    Attributes:
        folder: where the files are.
        hops: R; files ``hop_0.npy`` .. ``hop_R.npy`` exist.
        num_train, num_val, num_test: labelled rows, stored in this order.
        feature_dim: F.
        num_classes: label classes.
        undirected: whether the reverse of every edge was added before normalising.
    """

    folder: Path
    hops: int
    num_train: int
    num_val: int
    num_test: int
    feature_dim: int
    num_classes: int
    undirected: bool = True

    @property
    def num_rows(self) -> int:
        """Labelled rows stored per hop."""
        return self.num_train + self.num_val + self.num_test

    def path(self, r: int) -> Path:
        """The file of hop ``r``."""
        if not 0 <= r <= self.hops:
            raise ValueError(f"hop {r} is not stored; stored hops: 0..{self.hops}")
        return self.folder / hop_file(r)

    def labels(self) -> np.ndarray:
        """(num_rows,) int64 labels of the stored rows (-1 = unknown)."""
        return np.load(self.folder / LABELS_FILE, allow_pickle=False)

    def load(self, r: int, mmap: bool = False) -> np.ndarray:
        """Hop ``r`` as an array (read into memory, or memory-mapped read-only with ``mmap``).

        Shapes:
            returns (num_rows, feature_dim) float32.
        """
        return np.load(self.path(r), mmap_mode="r" if mmap else None, allow_pickle=False)

    def nbytes_per_hop(self) -> int:
        """Bytes of one stored hop matrix."""
        return self.num_rows * self.feature_dim * 4


def normalized_adjacency(src: np.ndarray, dst: np.ndarray, num_vertices: int,
                         undirected: bool = True) -> torch.Tensor:
    """``B = D~^-1/2 (A + I) D~^-1/2`` as a float32 CSR tensor; ``B[v, u] != 0`` for every edge ``u -> v``.

    Args:
        src, dst: (m,) int64 directed edges ``src -> dst`` (duplicates and self-loops are ignored).
        num_vertices: n.
        undirected: add the reverse of every edge first.

    Returns:
        (n, n) ``torch.sparse_csr`` float32 tensor.

    Source: Wu et al., ICML 2019, §2.1 (S = D~^-1/2 A~ D~^-1/2, A~ = A + I); Kipf and Welling, ICLR 2017, eq. 2.
    """
    import scipy.sparse as sp

    rows, cols = np.asarray(dst, dtype=np.int64), np.asarray(src, dtype=np.int64)
    if undirected:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    keep = rows != cols
    a = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (rows[keep], cols[keep])),
                      shape=(num_vertices, num_vertices))  # duplicates summed, then set to 1 below
    a.sum_duplicates()
    a.data[:] = 1.0
    a = (a + sp.identity(num_vertices, dtype=np.float32, format="csr")).tocsr()
    a.sort_indices()
    inv_sqrt = 1.0 / np.sqrt(np.diff(a.indptr).astype(np.float64))  # row sums of A + I (binary)
    row_of = np.repeat(np.arange(num_vertices), np.diff(a.indptr))
    values = (inv_sqrt[row_of] * inv_sqrt[a.indices]).astype(np.float32)
    crow, cols = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(cols), torch.from_numpy(values),
                                       size=(num_vertices, num_vertices), check_invariants=False)


def propagate(adjacency: torch.Tensor, features: torch.Tensor, hops: int) -> list[torch.Tensor]:
    """``[X, B X, ..., B^R X]`` with one sparse-dense product per hop (all rows kept).

    Shapes:
        adjacency: (n, n) sparse; features: (n, F) float32 -> R + 1 tensors of (n, F).
    """
    out = [features]
    for _ in range(hops):
        out.append(torch.sparse.mm(adjacency, out[-1]))
    return out


def labelled_rows(graph: GraphData) -> np.ndarray:
    """Vertex ids of the stored rows: ``train | val | test`` (int64)."""
    return np.concatenate([graph.train_idx, graph.val_idx, graph.test_idx]).astype(np.int64)


def check_inputs(graph: GraphData, features: np.ndarray, hops: int) -> None:
    """Raise ``ValueError`` unless ``hops >= 0`` and ``features`` has one row per vertex of ``graph``."""
    if hops < 0:
        raise ValueError(f"hops must be >= 0, got {hops}")
    if features.shape[0] != graph.num_vertices:
        raise ValueError(f"features have {features.shape[0]} rows, the graph has {graph.num_vertices} vertices")


def preprocess(graph: GraphData, features: np.ndarray, hops: int, folder: str | Path,
               undirected: bool = True) -> HopFiles:
    """Propagate ``features`` ``hops`` times over ``graph`` and write the labelled rows of every hop.

    Each hop is written as soon as it is computed, so peak memory is about two full (n, F) matrices.

    Args:
        graph: the graph (edges, labels, splits).
        features: (n, F) float32 input features (e.g. row-normalised, :func:`executor.data.input_features`).
        hops: R >= 0.
        folder: output folder (created).
        undirected: symmetrise the adjacency first.

    Returns:
        The written folder's description.

    Raises:
        ValueError: ``hops < 0`` or a feature matrix with the wrong number of rows.
    """
    check_inputs(graph, features, hops)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    rows = torch.from_numpy(labelled_rows(graph))
    adjacency = normalized_adjacency(graph.src, graph.dst, graph.num_vertices, undirected)
    x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    for r in range(hops + 1):
        if r:
            x = torch.sparse.mm(adjacency, x)
        atomic_save_npy(out / hop_file(r), x.index_select(0, rows).numpy())
    return write_meta(graph, out, hops, int(features.shape[1]), undirected)


def write_meta(graph: GraphData, folder: Path, hops: int, feature_dim: int, undirected: bool) -> HopFiles:
    """Complete a folder whose hop files are written: ``labels.npy``, then ``meta.json`` (last, atomically)."""
    atomic_save_npy(folder / LABELS_FILE, graph.labels[labelled_rows(graph)].astype(np.int64))
    files = HopFiles(folder, hops, len(graph.train_idx), len(graph.val_idx), len(graph.test_idx), feature_dim,
                     int(graph.num_classes), undirected)
    atomic_write_json(folder / META_FILE, {"format": FORMAT, "hops": hops, "num_train": files.num_train,
                                           "num_val": files.num_val, "num_test": files.num_test,
                                           "feature_dim": files.feature_dim, "num_classes": files.num_classes,
                                           "undirected": undirected})
    return files


def read_hop_files(folder: str | Path) -> HopFiles | None:
    """The description of a complete folder written by :func:`preprocess`, or None if it is incomplete."""
    path = Path(folder)
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("format") != FORMAT:
        return None
    files = HopFiles(path, int(meta["hops"]), int(meta["num_train"]), int(meta["num_val"]), int(meta["num_test"]),
                     int(meta["feature_dim"]), int(meta["num_classes"]), bool(meta["undirected"]))
    shape = (files.num_rows, files.feature_dim)
    for r in range(files.hops + 1):
        try:
            if np.load(path / hop_file(r), mmap_mode="r", allow_pickle=False).shape != shape:
                return None
        except (OSError, ValueError):
            return None
    return files if (path / LABELS_FILE).is_file() else None


def cache_folder(dataset: str | GeneratedSpec, undirected: bool = True) -> Path:
    """Where :func:`prepropagated` keeps a dataset's hop files."""
    op = "sym-undirected" if undirected else "sym-directed"
    return cache_dir() / "ppgnn" / f"{dataset_key(dataset)}-{op}-v{FORMAT}"


def prepropagated(dataset: str | GeneratedSpec, hops: int, undirected: bool = True,
                  folder: str | Path | None = None, sharded: bool = False) -> HopFiles:
    """The hop files of a dataset with at least ``hops`` hops, computed (and cached) if needed.

    Features of the Planetoid presets are row-normalised first (:func:`executor.data.input_features`), as in
    SGC's code (github.com/Tiiiger/SGC, ``utils.preprocess_citation``).

    Args:
        dataset: preset name, OGB-layout folder or R-MAT spec.
        hops: R needed.
        undirected: symmetrise the adjacency first.
        folder: where to keep the files (default :func:`cache_folder`).
        sharded: collective over the process group: every rank propagates its row shard
            (:func:`executor.strategies.ppgnn.preprop_shards.preprocess_sharded`); whether the cached folder
            is complete is rank 0's view.

    Returns:
        The folder's description (``hops`` may exceed the request if more were stored earlier).

    Raises:
        SpecError: the dataset cannot be loaded.
    """
    out = Path(folder) if folder is not None else cache_folder(dataset, undirected)
    files = read_hop_files(out)
    fresh = files is not None and files.hops >= hops and files.undirected == undirected
    if not sharded:
        return files if fresh and files is not None else _preprocess_dataset(dataset, hops, out, undirected)
    from gnnplan.executor import comm
    from gnnplan.executor.assemble import rank0_first
    from gnnplan.executor.strategies.ppgnn.preprop_shards import preprocess_sharded

    if not comm.broadcast_object(fresh):
        graph = rank0_first(lambda: load_dataset(dataset))
        preprocess_sharded(graph, input_features(graph, dataset), hops, out, undirected)
    files = read_hop_files(out)
    if files is None:
        raise RuntimeError(f"pre-propagation: {out} is incomplete after the sharded run (not a shared folder?)")
    return files


def _preprocess_dataset(dataset: str | GeneratedSpec, hops: int, out: Path, undirected: bool) -> HopFiles:
    graph = load_dataset(dataset)
    return preprocess(graph, input_features(graph, dataset), hops, out, undirected)
