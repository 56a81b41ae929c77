"""A small card's statistics pooled over proxy draws: the medoid, which references are pooled, and what a pooled
card's results say (simulator/workload/proxy_pool.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from gnnplan.simulator.api import load_context, simulate
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.strategies import neutronstar
from gnnplan.simulator.workload import graphstats, inference, proxy_pool
from gnnplan.simulator.workload.spec import workload_from_dict

CLUSTER = "2x4-a100-nvlink3-200gbib"
WORKLOAD = {"dataset": "card:cora", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
            "training": {"batch_size": 64, "fanouts": [5, 5]}}


@dataclass(frozen=True)
class _Stats:
    name: str
    cut: float
    layers: tuple[float, ...]
    per_worker: np.ndarray


def test_medoid_is_the_element_nearest_the_medians_number_by_number() -> None:
    """Each number is measured against its median over the elements in units of its median absolute deviation; a
    field counts once however many numbers it holds (their mean squared deviation); a number that does not move is
    left out, and so is a field whose count of numbers differs between elements; strings are skipped; ties go to
    the first element."""
    a = _Stats("a", 0.1, (90.0, 27.0), np.array([1.0, 1.0]))
    b = _Stats("b", 0.2, (100.0, 30.0), np.array([2.0, 2.0]))
    c = _Stats("c", 0.4, (130.0, 39.0), np.array([4.0, 4.0]))
    assert proxy_pool.medoid([a, b, c]) is b and proxy_pool.medoid([c, a, b]) is b
    # the same mean per worker, but x and z put the load on one worker: y is the typical one
    x, y, z = (_Stats(n, 0.2, (100.0, 30.0), np.array(w)) for n, w in (("x", [1.0, 3.0]), ("y", [2.0, 2.0]),
                                                                         ("z", [3.0, 1.0])))
    assert proxy_pool.medoid([x, y, z]) is y
    twin = _Stats("twin", a.cut, a.layers, a.per_worker)
    assert proxy_pool.medoid([a, twin]) is a and proxy_pool.medoid([twin, a]) is twin  # a tie: the first
    assert proxy_pool.medoid([a]) is a
    with pytest.raises(ValueError, match="no values"):
        proxy_pool.medoid([])
    # d's layers have another count, so only cut and per_worker decide, and d and b tie there: d comes first
    d = _Stats("d", 0.2, (100.0, 30.0, 5.0), np.array([2.0, 2.0]))
    assert proxy_pool.medoid([a, d, b, c]) is d


@dataclass(frozen=True)
class _Summarised:
    SUMMARY_FIELDS: ClassVar[tuple[str, ...]] = ("share",)
    per_worker: tuple[float, ...]
    share: float


def test_summary_fields_are_their_own_median_and_the_rest_the_medoid_s() -> None:
    """A field the class lists in ``SUMMARY_FIELDS`` is the median over the elements; every other field is the
    medoid's, chosen on all numbers (the summary's included); one element, or a class listing none, is returned as
    it is; a summary that is not a number in every element is one error naming it."""
    a, b, c = (_Summarised(w, s) for w, s in (((1.0, 1.0), 0.9), ((2.0, 2.0), 0.1), ((4.0, 4.0), 0.3)))
    chosen = proxy_pool.medoid([a, b, c])
    assert chosen == _Summarised((2.0, 2.0), 0.3)  # b's workers, the median share (b's own is 0.1)
    assert proxy_pool.medoid_index([a, b, c]) == 1
    assert proxy_pool.medoid([c]) is c
    assert proxy_pool.with_summary_medians(c, [a, b, c]) == _Summarised((4.0, 4.0), 0.3)
    plain = [_Stats("p", cut, (1.0,), np.array([0.0])) for cut in (0.1, 0.5, 0.2)]
    assert proxy_pool.medoid(plain) is plain[2]
    with pytest.raises(ValueError, match=r"^SUMMARY_FIELDS: _Summarised.share is not a number in every draw$"):
        proxy_pool.medoid([a, replace(b, share=None)])  # type: ignore[arg-type]


def test_medoid_reaches_into_lists_of_dataclasses() -> None:
    """neutronstar's per-worker counts and hongtu's per-GPU, per-batch counts are lists of dataclasses."""
    draws = [[_Stats("w", cut, (1.0,), np.array([0.0])) for cut in cuts] for cuts in ((1, 1), (5, 5), (2, 2))]
    assert proxy_pool.medoid(draws) is draws[2]


def test_which_references_are_pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare card smaller than one proxy's budget pools ceil(10^5 / n_p) draws, at most 15; an explicit draw, a
    card of 10^5 vertices or more, a real graph or a generated spec is measured as it is; ``GNNPLAN_PROXY_POOL``
    caps the pool, and a bad value is one line naming it."""
    monkeypatch.delenv(proxy_pool.POOL_ENV, raising=False)
    assert proxy_pool.pooled_refs("card:cora") == [f"card:cora@{k}" for k in range(15)]
    assert proxy_pool.pooled_refs("card:citeseer")[-1] == "card:citeseer@14"
    for ref in ("card:cora@0", "card:cora@3", "card:ogbn-products", "card:ogbn-papers100M", "cora", "citeseer"):
        assert proxy_pool.pooled_refs(ref) is None, ref
    monkeypatch.setenv(proxy_pool.POOL_ENV, "3")
    assert proxy_pool.pooled_refs("card:cora") == ["card:cora@0", "card:cora@1", "card:cora@2"]
    monkeypatch.setenv(proxy_pool.POOL_ENV, "1")
    assert proxy_pool.pooled_refs("card:cora") is None
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(proxy_pool.POOL_ENV, bad)
        with pytest.raises(SpecError, match=r"^GNNPLAN_PROXY_POOL: must be an integer >= 1") as err:
            proxy_pool.pooled_refs("card:cora")
        assert "\n" not in str(err.value)


def test_a_pooled_card_s_statistics_are_the_medoid_of_its_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """card:cora with a pool of 3: dp's sample statistics, the evaluation's inference block and neutronstar's
    counts are each the medoid of draws 0-2's, and the result's ``estimated`` says it pooled 3 draws."""
    monkeypatch.setenv(proxy_pool.POOL_ENV, "3")
    args = ([5, 5], 8, 2, 4, "metis")
    draws = [graphstats.sample_stats(f"card:cora@{k}", *args) for k in range(3)]
    pooled = graphstats.sample_stats("card:cora", *args)
    assert pooled == proxy_pool.medoid(draws)
    assert len({d.edge_cut_fraction for d in draws}) == 3  # three different graphs
    # every priced number is one draw's; the edge cut, reported only, is the draws' median
    assert pooled.edge_cut_fraction == float(np.median([d.edge_cut_fraction for d in draws]))
    medoid_draw = draws[proxy_pool.medoid_index(draws)]
    assert replace(pooled, edge_cut_fraction=medoid_draw.edge_cut_fraction) == medoid_draw
    blocks = [inference.inference_stats(f"card:cora@{k}", 2, 4, "metis") for k in range(3)]
    assert inference.inference_stats("card:cora", 2, 4, "metis") == proxy_pool.medoid(blocks)
    full = {**WORKLOAD, "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": 16},
            "training": {"mode": "full-graph"}}
    kn = neutronstar.Knobs(mode="depcomm", partitioner="chunk")
    counts = [neutronstar.dependency_counts(load_context(CLUSTER, workload_from_dict(
        {**full, "dataset": f"card:cora@{k}"}), "neutronstar", kn)[2], kn) for k in range(3)]
    _, _, ctx = load_context(CLUSTER, workload_from_dict(full), "neutronstar", kn)
    assert neutronstar.dependency_counts(ctx, kn) == proxy_pool.medoid(counts)
    res = simulate(CLUSTER, workload_from_dict(WORKLOAD), "dp")
    assert res.estimated["pooled"]["draws"] == 3 and "medoid" in res.estimated["pooled"]["how"]
    assert "pooled" not in simulate(CLUSTER, workload_from_dict({**WORKLOAD, "dataset": "card:cora@1"}),
                                    "dp").estimated


def test_proxy_draws_of_a_pooled_card_are_single_draws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --proxy-draws 2`` on a pooled card: the prediction is the pooled one, and the draws listed are
    draws 0 and 1, each simulated alone (neither is the pooled prediction)."""
    from gnnplan.autotune.cli import main

    monkeypatch.setenv(proxy_pool.POOL_ENV, "3")
    path = tmp_path / "wl.yaml"
    path.write_text(json.dumps(WORKLOAD))
    assert main(["simulate", "--cluster", CLUSTER, "--workload", str(path), "--strategy", "dp", "--proxy-draws", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    alone = [simulate(CLUSTER, workload_from_dict({**WORKLOAD, "dataset": f"card:cora@{k}"}), "dp").epoch_time_s
             for k in (0, 1)]
    assert out["proxy_draws"] == {"draws": [0, 1], "epoch_time_s": alone}
    assert out["epoch_time_s"] == simulate(CLUSTER, workload_from_dict(WORKLOAD), "dp").epoch_time_s


def test_a_tuned_configuration_on_a_pooled_card_is_redrawn_on_every_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune`` and ``whatif --proxy-draws``: the configuration tuned on a pooled card is simulated on each single
    draw, its own (pooled) time not counted as draw 0's; on a single draw the first time is the tuned one."""
    from gnnplan.autotune.draws import on_draws
    from gnnplan.simulator.hardware.spec import load_cluster
    from gnnplan.simulator.workload.proxy_draws import requested_draws

    monkeypatch.setenv(proxy_pool.POOL_ENV, "3")
    cluster, workload = load_cluster(CLUSTER), workload_from_dict(WORKLOAD)
    found = {"feasible": True, "epoch_time_s": 1.0, "knobs": {}}
    alone = [simulate(cluster, workload_from_dict({**WORKLOAD, "dataset": f"card:cora@{k}"}), "dp").epoch_time_s
             for k in (0, 1)]
    drawn = on_draws(cluster, workload, "dp", found, requested_draws(workload.dataset, 2))
    assert drawn["proxy_draws"] == [0, 1] and drawn["epoch_time_draws_s"] == alone
    single = workload_from_dict({**WORKLOAD, "dataset": "card:cora@0"})
    drawn = on_draws(cluster, single, "dp", found, requested_draws(single.dataset, 2))
    assert drawn["epoch_time_draws_s"] == [1.0, alone[1]]


def test_hongtu_on_a_pooled_card_describes_its_medoid_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """hongtu on card:cora with a pool of 3: the batch counts are the medoid draw's, and so are the placement's
    Eq. 4 volumes in the epoch span and the hosts' rows in the memory parts: the whole prediction is that draw's
    (here not draw 0, whose placement the volumes and host rows were once taken from)."""
    from gnnplan.simulator.strategies import hongtu

    monkeypatch.setenv(proxy_pool.POOL_ENV, "3")
    full = {**WORKLOAD, "model": {"arch": "gcn", "num_layers": 2, "hidden_dim": 16},
            "training": {"mode": "full-graph"}}
    kn = hongtu.Knobs(num_chunks=4)
    contexts = [load_context(CLUSTER, workload_from_dict({**full, "dataset": f"card:cora@{k}"}), "hongtu", kn)[2]
                for k in range(3)]
    k = proxy_pool.medoid_index([hongtu.batch_counts(c, kn) for c in contexts])
    assert k != 0
    pooled = simulate(CLUSTER, workload_from_dict(full), "hongtu", kn)
    alone = [simulate(CLUSTER, workload_from_dict({**full, "dataset": f"card:cora@{j}"}), "hongtu", kn)
             for j in range(3)]

    def described(res: object) -> tuple[object, ...]:
        epoch = [s.args for s in res.spans if s.phase == "epoch"]  # type: ignore[attr-defined]
        return (res.epoch_time_s, res.bytes_per_epoch, res.peak_memory_parts, epoch)  # type: ignore[attr-defined]

    assert described(pooled) == described(alone[k])
    assert described(alone[0]) != described(alone[k])


def test_a_kept_medoid_is_reused_per_key_and_redrawn_when_the_card_changes(monkeypatch: pytest.MonkeyPatch,
                                                                           tmp_path: Path) -> None:
    """``pooled`` and ``medoid_context`` with a key measure the draws once per process and key; another key
    measures again, and so does an edit of the card file (its size and modification time are in the key)."""
    from gnnplan.simulator.workload.cards import card_file

    monkeypatch.setenv(proxy_pool.POOL_ENV, "3")
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path))
    (tmp_path / "cards").mkdir()
    mine = tmp_path / "cards" / "mine.yaml"
    mine.write_text(card_file("cora").read_text().replace("name: cora", "name: mine", 1))
    asked: list[str] = []

    def measure(ref: str) -> float:
        asked.append(ref)
        return float(ref.rsplit("@", 1)[1])  # draws 0, 1, 2: the medoid is draw 1's

    assert proxy_pool.pooled("card:mine", measure, ("test", 1)) == 1.0
    assert asked == ["card:mine@0", "card:mine@1", "card:mine@2"]
    assert proxy_pool.pooled("card:mine", measure, ("test", 1)) == 1.0 and len(asked) == 3  # kept
    proxy_pool.pooled("card:mine", measure, ("test", 2))
    assert len(asked) == 6  # another key
    mine.write_text(mine.read_text() + "\n")
    proxy_pool.pooled("card:mine", measure, ("test", 1))
    assert len(asked) == 9  # the card changed
    assert proxy_pool.pooled("card:mine", measure) == 1.0 and len(asked) == 12  # no key: nothing kept

    ctx = proxy_pool.context_on(load_context(CLUSTER, workload_from_dict(WORKLOAD), "dp")[2], "card:mine")
    for _ in range(2):
        drawn = proxy_pool.medoid_context(ctx, lambda c: measure(c.workload.dataset), ("test", 1))
        assert drawn.workload.dataset == "card:mine@1" and drawn.cluster is ctx.cluster
    assert len(asked) == 15  # chosen once, kept
    single = proxy_pool.context_on(ctx, "card:mine@2")
    assert proxy_pool.medoid_context(single, lambda c: measure(c.workload.dataset)) is single


def test_the_statistics_summary_fields_are_scalar_fields() -> None:
    """The summaries dp's and hopgnn's statistics declare (the edge cut; m_dgl, 1 - m_mg and R_micro) are fields
    of theirs annotated as one float, so a pooled card can take their median."""
    from dataclasses import fields

    from gnnplan.simulator.strategies.hopgnn.micrographs import MicrographStats

    for cls, names in ((graphstats.SampleStats, ("edge_cut_fraction",)),
                       (MicrographStats, ("dp_remote_fraction", "group_local_fraction", "micrograph_local_fraction"))):
        assert cls.SUMMARY_FIELDS == names
        types = {f.name: f.type for f in fields(cls)}
        assert all(types[name] in (float, "float") for name in names), cls
