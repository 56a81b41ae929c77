"""gnnplan card: a graph measured into a dataset card, written where workload.dataset finds it, and the
one-line refusals that leave the cards folder as it was."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from gnnplan.autotune.cli import main
from gnnplan.simulator.api import simulate
from gnnplan.simulator.workload import cards
from gnnplan.simulator.workload.spec import workload_from_dict


def test_card_writes_a_card_that_simulates_like_a_shipped_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    assert main(["card", "cora", "--name", "mycora", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    path = tmp_path / "home" / "cards" / "mycora.yaml"
    assert record["card"] == str(path) and record["structure"] == "blocks"
    assert (record["num_vertices"], record["num_edges"], record["num_communities"]) == (2708, 10556, 16)
    mine, shipped = cards.load_card("mycora"), cards.load_card("cora")
    for field in ("num_communities", "mu", "block_sizes", "block_edges", "block_train", "bridge_fraction",
                  "train_near_bridge_fraction"):
        assert getattr(mine.communities, field).value == getattr(shipped.communities, field).value, field
    assert mine.components.small_sizes.value == shipped.components.small_sizes.value
    wl = workload_from_dict({"dataset": "card:mycora", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                             "training": {"batch_size": 64, "fanouts": [5, 5]}})
    est = simulate("2x4-a100-nvlink3-200gbib", wl, "dp", {"partitioner": "random"}).to_json_dict()["estimated"]
    assert est["card"] == "mycora" and "communities of its block model" in est["proxy"]["communities"]
    # the printed line says the card's count is an effective number, and how many the block model holds
    assert main(["card", "cora", "--name", "mycora", "--force"]) == 0
    assert "16 effective communities (inverse Simpson index; 29 in its block model), mu 0.128" in \
        capsys.readouterr().out


def test_card_structure_none_keeps_no_communities(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["card", "citeseer", "--name", "bare", "--structure", "none", "-o", str(tmp_path)]) == 0
    assert "no communities (none;" in capsys.readouterr().out
    card = cards.card_from_dict(yaml.safe_load((tmp_path / "bare.yaml").read_text()), where="x")
    assert card.communities is None and card.components is None and card.num_vertices.value == 3327


def test_card_structure_cut_keeps_the_metis_edge_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gnnplan.simulator.workload.card_measures import metis_cut_fraction
    from gnnplan.simulator.workload.datasets import load_dataset

    assert main(["card", "citeseer", "--name", "cut", "--structure", "cut", "-o", str(tmp_path), "--json"]) == 0
    g = load_dataset("citeseer")
    cut = round(metis_cut_fraction(g.num_vertices, g.src, g.dst, 8), 5)
    record = json.loads(capsys.readouterr().out)
    assert record["metis_edge_cut"] == [[8, cut]] and record["num_communities"] is None
    card = cards.card_from_dict(yaml.safe_load((tmp_path / "cut.yaml").read_text()), where="x")
    assert card.communities is None and card.metis_edge_cut.value == [(8, cut)]
    assert main(["card", "citeseer", "--name", "cut", "--structure", "cut", "-o", str(tmp_path), "--force"]) == 0
    assert f"no communities, METIS edge cut {cut:g} at 8 parts (cut;" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv, needle", [
    (["card", "card:cora", "--name", "x"], "DATASET: 'card:cora' is a dataset card already"),
    (["card", "cora", "--name", "../x"], "card name: '../x' must be letters, digits, '.', '_' or '-'"),
    (["card", "cora", "--name", "a b"], "card name: 'a b' must be letters, digits"),
    (["card", "cora", "--name", "x@1"], "card name: 'x@1' must be letters, digits"),
    (["card", "/no/such/graph", "--name", "x"], "DATASET: '/no/such/graph' is neither a bundled graph (cora, "
                                                "citeseer) nor an existing folder in the OGB raw layout (CSV or npz)"),
])
def test_bad_card_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              argv: list[str], needle: str) -> None:
    assert main([*argv, "-o", str(tmp_path / "cards")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "cards").exists()


def test_an_unknown_structure_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["card", "cora", "--name", "x", "--structure", "metis", "-o", str(tmp_path / "cards")])
    assert exit_.value.code == 2 and "argument --structure: invalid choice: 'metis'" in capsys.readouterr().err
    assert not (tmp_path / "cards").exists()


def test_an_existing_card_is_replaced_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine.yaml"
    target.write_text("kept\n")
    assert main(["card", "cora", "--name", "mine", "-o", str(tmp_path)]) == 2
    assert "--name: " in capsys.readouterr().err and target.read_text() == "kept\n"
    assert main(["card", "cora", "--name", "mine", "-o", str(tmp_path), "--force"]) == 0
    assert "copy it into" in capsys.readouterr().out  # not the cards folder workload.dataset looks in
    assert cards.card_from_dict(yaml.safe_load(target.read_text()), where="x").name == "mine"


def test_a_shipped_cards_name_needs_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A card written into the user's cards folder under a shipped card's name replaces the shipped one for every
    workload (cards.card_dirs): ``gnnplan card`` refuses that without ``--force``, and the card it writes then says
    where its sizes come from (measured here), not that they are published."""
    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    assert main(["card", "cora", "--name", "ogbn-arxiv"]) == 2
    err = capsys.readouterr().err
    assert "--name: 'ogbn-arxiv' is a card shipped with gnnplan" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "home" / "cards").exists() and cards.load_card("ogbn-arxiv").num_vertices.value == 169343
    assert main(["card", "cora", "--name", "ogbn-arxiv", "--force", "--structure", "none"]) == 0
    card = cards.load_card("ogbn-arxiv")
    assert card.num_vertices.value == 2708
    wl = workload_from_dict({"dataset": "card:ogbn-arxiv", "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                             "training": {"batch_size": 64, "fanouts": [5, 5]}})
    est = simulate("2x4-a100-nvlink3-200gbib", wl, "dp", {"partitioner": "random"}).to_json_dict()["estimated"]
    assert est["sizes"] == f"the card's, exact ({card.num_vertices.source})" and "measured" in est["sizes"]


def test_tune_on_a_card_without_a_block_model_prints_its_caveat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A card that keeps only the Louvain communities' number and mixing: ``tune`` prints under its table what
    that does to partition-dependent statistics (proxy_estimated.MIXING_ONLY_EFFECT); on the shipped ``card:cora``
    it does not."""
    from gnnplan.simulator.workload.proxy_estimated import MIXING_ONLY_EFFECT

    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    assert main(["card", "cora", "--name", "coramix", "--structure", "louvain"]) == 0
    capsys.readouterr()
    for dataset, shown in (("card:coramix", True), ("card:cora", False)):
        wl = tmp_path / "wl.yaml"
        wl.write_text(yaml.safe_dump({"dataset": dataset, "model": {"arch": "sage", "num_layers": 2, "hidden_dim": 16},
                                      "training": {"batch_size": 64, "fanouts": [5, 5]}}))
        assert main(["tune", "--cluster", "2x4-a100-nvlink3-200gbib", "--workload", str(wl), "--strategies", "dp",
                     "--trials", "2", "--storage", f"sqlite:///{tmp_path / (dataset[5:] + '.db')}",
                     "-o", str(tmp_path / "plan.yaml")]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert (f"{dataset}: the proxy's communities: planted from the card: 17 communities of equal size mixed "
                f"uniformly, mixing mu 0.1171 (no block model); {MIXING_ONLY_EFFECT}" in out) is shown, out
        assert ("the proxy's communities" in out) is shown


def test_a_graph_beyond_host_memory_gets_advice_for_making_its_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The loader's one line for a graph that will not fit advises a dataset card; ``gnnplan card`` is making one,
    so it says how else to get one, and writes nothing."""
    from gnnplan.simulator.workload import datasets

    monkeypatch.setenv("GNNPLAN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(datasets, "available_host_bytes", lambda: 1.0)
    folder = tmp_path / "g"
    (folder / "raw").mkdir(parents=True)
    (folder / "split" / "x").mkdir(parents=True)
    np.savez(folder / "raw" / "data.npz", edge_index=np.array([[0, 1], [1, 0]]), num_nodes_list=np.array([2]),
             num_edges_list=np.array([2]), node_feat=np.zeros((2, 4), dtype=np.float32))
    np.savez(folder / "raw" / "node-label.npz", node_label=np.zeros((2, 1)))
    for part in ("train", "valid", "test"):
        with gzip.open(folder / "split" / "x" / f"{part}.csv.gz", "wt") as fh:
            fh.write("0\n")
    assert main(["card", str(folder), "--name", "mine"]) == 2
    err = capsys.readouterr().err.strip()
    assert "host memory" in err and "measure it on a machine with more memory" in err and "card:<name>" not in err
    assert not (tmp_path / "home" / "cards").exists()
