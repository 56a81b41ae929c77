"""Big real graphs, lean: OGB's CSV and npz raw layouts load alike, ``add_inverse_edge`` datasets get both
directions, features stay on disk until used, and a graph that will not fit stops before any allocation."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.paths import cache_dir
from gnnplan.simulator.workload import datasets
from gnnplan.simulator.workload.graphstats import dataset_summary
from gnnplan.simulator.workload.spec import RmatSpec, SbmSpec

N, D = 40, 6


def _graph(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    edges = np.unique(rng.integers(0, N, (120, 2)), axis=0)
    edges = edges[edges[:, 0] != edges[:, 1]]
    features = rng.standard_normal((N, D)).astype(np.float32)
    labels = rng.integers(0, 3, N).astype(np.int64)
    labels[[5, 7]] = -1
    order = rng.permutation(N)
    return edges, features, labels, {"train": order[:10], "valid": order[10:15], "test": order[15:25]}


def _csv(path: Path, rows: np.ndarray, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        np.savetxt(fh, rows, fmt=fmt, delimiter=",")


def _split(folder: Path, split: dict[str, np.ndarray]) -> None:
    for part, ids in split.items():
        _csv(folder / "split" / "random" / f"{part}.csv.gz", ids.reshape(-1, 1), "%d")


def write_csv_folder(folder: Path, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    edges, features, labels, split = _graph(seed)
    raw = folder / "raw"
    _csv(raw / "edge.csv.gz", edges, "%d")
    _csv(raw / "node-feat.csv.gz", features, "%.7g")
    _csv(raw / "node-label.csv.gz", labels.reshape(-1, 1), "%d")
    _csv(raw / "num-node-list.csv.gz", np.array([[N]]), "%d")
    _csv(raw / "num-edge-list.csv.gz", np.array([[len(edges)]]), "%d")
    _split(folder, split)
    return edges, features, labels


def write_npz_folder(folder: Path, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OGB's binary layout (ogbn-papers100M): data.npz and node-label.npz with NaN for unlabeled vertices."""
    edges, features, labels, split = _graph(seed)
    raw = folder / "raw"
    raw.mkdir(parents=True)
    np.savez_compressed(raw / "data.npz", edge_index=edges.T.copy(), num_nodes_list=np.array([N]),
                        num_edges_list=np.array([len(edges)]), node_feat=features,
                        node_year=np.full((N, 1), 2020))
    node_label = np.where(labels < 0, np.nan, labels).astype(np.float32).reshape(-1, 1)
    np.savez_compressed(raw / "node-label.npz", node_label=node_label)
    _split(folder, split)
    return edges, features, labels


def test_csv_and_npz_layouts_load_alike(tmp_path: Path) -> None:
    edges, features, labels = write_csv_folder(tmp_path / "mine_csv")
    write_npz_folder(tmp_path / "mine_npz")
    a, b = datasets.load_dataset(str(tmp_path / "mine_csv")), datasets.load_dataset(str(tmp_path / "mine_npz"))
    for g in (a, b):
        assert not g.features_loaded and g.feature_dim == D  # known without reading the features
        assert np.array_equal(g.src, edges[:, 0]) and np.array_equal(g.dst, edges[:, 1])
        assert np.array_equal(g.labels, labels) and g.num_classes == 3
    assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("train_idx", "val_idx", "test_idx"))
    np.testing.assert_allclose(a.features, features, rtol=1e-6)
    np.testing.assert_array_equal(b.features, features)
    assert a.features_loaded and b.features_loaded


def test_statistics_never_read_features(tmp_path: Path) -> None:
    write_npz_folder(tmp_path / "lean")
    summary = dataset_summary(str(tmp_path / "lean"))
    assert (summary.num_vertices, summary.feature_dim) == (N, D)
    key = datasets.dataset_key(str(tmp_path / "lean"))
    assert not (cache_dir() / "datasets" / f"{key}-features.npy").exists()
    g = datasets.load_dataset(str(tmp_path / "lean"))
    g.features  # noqa: B018 (first use reads and caches them)
    assert (cache_dir() / "datasets" / f"{key}-features.npy").is_file()


@pytest.mark.parametrize("name,inverse", [("ogbn_products", True), ("products", True), ("ogbn-arxiv", False)])
def test_add_inverse_edge_of_ogb_master_csv(tmp_path: Path, name: str, inverse: bool) -> None:
    edges, _, _ = write_csv_folder(tmp_path / name)
    g = datasets.load_dataset(str(tmp_path / name))
    if inverse:  # OGB's read_csv_graph_raw: the reversed copy appended
        assert np.array_equal(g.src, np.concatenate([edges[:, 0], edges[:, 1]]))
        assert np.array_equal(g.dst, np.concatenate([edges[:, 1], edges[:, 0]]))
    else:
        assert g.num_edges == len(edges)


def test_a_graph_that_will_not_fit_stops_before_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_npz_folder(tmp_path / "huge")
    monkeypatch.setattr(datasets, "available_host_bytes", lambda: 1000.0)
    with pytest.raises(SpecError, match=r"^workload\.dataset: loading huge \(40 vertices, \d+ edges; features not "
                                        r"materialised\) needs ~[\d.e-]+ GB of host memory but only 1e-06 GB"):
        datasets.load_dataset(str(tmp_path / "huge"))
    assert not list((cache_dir() / "datasets").glob("huge-*"))
    with pytest.raises(SpecError, match="(generating|loading) rmat-n100000"):  # cached by an earlier test or not
        datasets.load_dataset(RmatSpec(generator="rmat", num_vertices=100_000))


def test_a_corrupt_npz_names_the_file(tmp_path: Path) -> None:
    write_npz_folder(tmp_path / "bad")
    (tmp_path / "bad" / "raw" / "data.npz").write_bytes(b"not a zip")
    with pytest.raises(SpecError, match="raw/data.npz is corrupt"):
        datasets.load_dataset(str(tmp_path / "bad"))


@pytest.mark.parametrize("spec", [RmatSpec(generator="rmat", num_vertices=3000, feature_dim=5, seed=2),
                                  SbmSpec(generator="sbm", num_vertices=3000, num_communities=4, feature_dim=5,
                                          seed=2, permute_ids=True)])
def test_generated_features_are_drawn_only_when_used(spec: RmatSpec | SbmSpec) -> None:
    g = datasets.load_dataset(spec)
    assert not g.features_loaded and g.feature_dim == 5
    again = datasets.load_dataset(spec)  # from the cache: still lazy, same values when drawn
    np.testing.assert_array_equal(g.features, datasets.generated_features(spec))
    np.testing.assert_array_equal(again.features, g.features)
    assert np.array_equal(again.labels, g.labels) and np.array_equal(again.train_idx, g.train_idx)
