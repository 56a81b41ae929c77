"""Generated graphs: the DC-SBM's community structure and degrees match its parameters, it is reproducible by seed,
R-MAT's quadrant probabilities are configurable, and every generated spec is named and cached by every field."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.workload.datasets import dataset_key, load_dataset
from gnnplan.simulator.workload.sbm import communities, sbm_edges
from gnnplan.simulator.workload.spec import GeneratedSpec, RmatSpec, SbmSpec, load_workload, workload_from_dict

SBM = {"generator": "sbm", "num_vertices": 20000, "num_communities": 10, "mu": 0.3, "mean_degree": 10.0,
       "feature_dim": 8, "num_classes": 5, "seed": 0}


def powerlaw_exponent(degrees: np.ndarray, lo: float, hi: float) -> float:
    """Maximum-likelihood exponent of a power law truncated to [lo, hi], fitted to integer degrees in that range
    (continuous approximation with the half-integer correction of Clauset, Shalizi and Newman, SIAM Review 51,
    661 (2009), eq. 3.7)."""
    x = degrees[(degrees >= lo) & (degrees <= hi)].astype(float)
    a, b = lo - 0.5, hi + 0.5

    def nll(g: float) -> float:
        return -(len(x) * np.log((g - 1) / (a ** (1 - g) - b ** (1 - g))) - g * np.log(x).sum())

    return float(minimize_scalar(nll, bounds=(1.1, 6.0), method="bounded").x)


@pytest.mark.parametrize(("mu", "exponent"), [(0.3, 2.5), (0.1, 3.0)])
def test_sbm_matches_mixing_degrees_and_modularity(mu: float, exponent: float) -> None:
    spec = SbmSpec(**{**SBM, "mu": mu, "degree_exponent": exponent})
    g = load_dataset(spec)
    comm = communities(spec.num_vertices, spec.num_communities)
    assert (np.diff(comm) >= 0).all() and np.bincount(comm).min() == spec.num_vertices // spec.num_communities
    src, dst = g.src, g.dst
    assert (src != dst).all() and len(np.unique(src * g.num_vertices + dst)) == len(src)
    assert np.array_equal(np.sort(src * g.num_vertices + dst), np.sort(dst * g.num_vertices + src))  # symmetric
    intra = float((comm[src] == comm[dst]).mean())
    assert abs(intra - (1 - mu)) <= 0.03
    degree = np.bincount(src, minlength=g.num_vertices)
    assert abs(degree.mean() / spec.mean_degree - 1) <= 0.10
    cap = 2 * np.sqrt(spec.mean_degree * spec.num_vertices / spec.num_communities)   # the default max_degree
    assert abs(powerlaw_exponent(degree, 2 * spec.mean_degree, cap) / exponent - 1) <= 0.10
    # Newman's modularity of the planted partition: intra fraction minus the degree-mass term (~ 1 - mu - 1/K)
    mass = np.bincount(comm, weights=degree) / degree.sum()
    modularity = intra - float((mass ** 2).sum())
    assert abs(modularity - (1 - mu - 1 / spec.num_communities)) <= 0.03
    # labels follow the communities; features carry the class signal (centroids ~ N(0, 1) per dimension)
    assert np.array_equal(g.labels, comm % spec.num_classes)
    means = np.stack([g.features[g.labels == c].mean(0) for c in range(spec.num_classes)])
    assert np.linalg.norm(means[0] - means[1]) > 1.0


def test_sbm_is_reproducible_by_seed_and_keyed_by_every_field() -> None:
    a = sbm_edges(3000, 6, 0.2, 8.0, 2.5, 60.0, seed=4)
    b = sbm_edges(3000, 6, 0.2, 8.0, 2.5, 60.0, seed=4)
    c = sbm_edges(3000, 6, 0.2, 8.0, 2.5, 60.0, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and not np.array_equal(a[0], c[0])
    base = SbmSpec(**SBM)
    changes = {"num_vertices": 20001, "num_communities": 11, "mu": 0.31, "mean_degree": 11.0, "degree_exponent": 2.6,
               "max_degree": 90.0, "feature_signal": 0.5, "feature_dim": 9, "num_classes": 6, "train_fraction": 0.2,
               "val_fraction": 0.1, "test_fraction": 0.2, "seed": 1, "permute_ids": True,
               "isolated_fraction": 0.1}
    assert set(changes) == set(SbmSpec.model_fields) - {"generator"}
    keys = {dataset_key(base)} | {dataset_key(base.model_copy(update={k: v})) for k, v in changes.items()}
    assert len(keys) == len(changes) + 1


def test_rmat_quadrants_are_configurable_and_default_names_unchanged() -> None:
    default = load_workload("rmat100k-sage").dataset
    assert isinstance(default, RmatSpec) and isinstance(default, GeneratedSpec)
    assert default.name == "rmat-n100000-e16-f128-c16-t0.1-v0.05-s0.1-seed0"   # caches of earlier runs stay valid
    small = RmatSpec(generator="rmat", num_vertices=2000, edge_factor=4)
    skewed = small.model_copy(update={"a": 0.45, "b": 0.15, "c": 0.15})
    assert skewed.name != small.name and dataset_key(skewed) != dataset_key(small)
    g0, g1 = load_dataset(small), load_dataset(skewed)
    assert g0.in_degrees().max() > g1.in_degrees().max()   # less skew, smaller hubs


def test_workload_yaml_selects_the_generator() -> None:
    data = load_workload("cora-sage").model_dump(mode="json")
    data["dataset"] = SBM
    wl = workload_from_dict(data)
    assert isinstance(wl.dataset, SbmSpec) and wl.dataset_name.startswith("sbm-n20000-k10-mu0.3")
    for bad, match in (({**SBM, "mu": 1.0}, "mu"), ({**SBM, "generator": "lfr"}, "generator"),
                       ({"generator": "rmat", "num_vertices": 100, "a": 0.6, "b": 0.3, "c": 0.2}, "a \\+ b \\+ c"),
                       ({**SBM, "num_communities": 1}, "mu must be 0")):
        data["dataset"] = bad
        with pytest.raises(SpecError, match=match):
            workload_from_dict(data)


def test_degseq_membership_and_first_occurrence_equal_numpy_s() -> None:
    """The binary-search membership and the stable-sort first occurrences the configuration model wires with give
    ``np.isin``'s and ``np.unique(return_index=True)``'s answers exactly (repeats, misses, empty sides)."""
    from gnnplan.simulator.workload.degseq import first_of_each, in_sorted

    rng = np.random.default_rng(7)
    for n_keys, n_set in ((0, 5), (50, 0), (1000, 300), (20000, 20000)):
        keys = rng.integers(0, 3000, n_keys)
        known = np.unique(rng.integers(0, 3000, n_set))
        assert np.array_equal(in_sorted(keys, known), np.isin(keys, known))
        uniq, first = first_of_each(keys)
        want_uniq, want_first = np.unique(keys, return_index=True)
        assert np.array_equal(uniq, want_uniq) and np.array_equal(first, want_first)


def test_labels_and_split_follow_the_features_stream_below_the_limit_and_their_own_above(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator's labels and split are drawn after its features' values (the same graph whether the features
    were drawn first or skipped in chunks); above SKIP_FEATURES_LIMIT values from a stream of their own, in bounded
    memory (1,000 vertices x 10^8 feature columns asked 373 GiB to skip)."""
    from gnnplan.simulator.workload import datasets

    spec = RmatSpec(generator="rmat", num_vertices=300, edge_factor=4, feature_dim=37, seed=5)
    g = datasets.generate_rmat(spec)
    rng = np.random.default_rng(spec.seed + 1)
    assert (rng.standard_normal((300, 37), dtype=np.float32) == g.features).all()  # drawn first, as before
    assert (g.labels == rng.integers(0, spec.num_classes, 300, dtype=np.int64)).all()
    sbm = SbmSpec(generator="sbm", num_vertices=200, num_communities=4, mu=0.2, mean_degree=6, feature_dim=37)
    before = datasets.generate_sbm(sbm)
    monkeypatch.setattr(datasets, "FEATURE_CHUNK_ELEMENTS", 1000)  # chunks end where one draw would
    again = datasets.generate_sbm(sbm)
    assert (before.train_idx == again.train_idx).all() and (before.labels == again.labels).all()
    monkeypatch.setattr(datasets, "SKIP_FEATURES_LIMIT", 300 * 37 - 1)
    own = datasets.generate_rmat(spec)
    assert (own.labels == np.random.default_rng((spec.seed, 7)).integers(0, spec.num_classes, 300)).all()
    assert (own.features == g.features).all()  # the features themselves do not move
    wide = RmatSpec(generator="rmat", num_vertices=1000, edge_factor=4, feature_dim=10**8)
    monkeypatch.undo()
    big = datasets.generate_rmat(wide)  # lazily: nothing of that size drawn
    assert big.feature_dim == 10**8
    with pytest.raises(SpecError, match=r"^workload.dataset: features needs ~400 GB of host memory"):
        big.features  # noqa: B018 (features load on first use)
