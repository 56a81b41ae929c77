"""The hardware catalogue: every number has a source; presets are built from it and every preset loads."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.builder import build_cluster, preset_name, preset_text, write_presets
from gnnplan.simulator.hardware.catalogue import CATALOGUE_DIR, load_catalogue
from gnnplan.simulator.hardware.spec import PRESET_DIR, ClusterSpec, load_cluster, preset_names

KINDS = re.compile(r"\b(peak|achieved|assumption|paper|datasheet)\b")
PAPER_TESTBEDS = {"4x-rtx3090ti-pcie3": "GSplit", "4x-v100-nvlink2": "GSplit", "4x-a100-80gb-nvlink3": "HongTu",
                  "16x-t4-6gbe": "NeutronStar", "8x-t4-6gbe": "NeutronStar", "8x-v100-32gb-100gbib": "NeutronStar",
                  "4x-a6000-pcie4": "PP-GNN"}


def test_every_catalogue_number_has_a_source_saying_what_kind_it_is() -> None:
    values = load_catalogue().sourced_values()
    assert len(values) > 100
    for path, sourced in values:
        assert KINDS.search(sourced.source), f"{path}: source {sourced.source!r} says neither peak, achieved, " \
                                             "assumption, paper nor datasheet"


def test_catalogue_covers_the_issue_s_hardware() -> None:
    cat = load_catalogue()
    assert {"T4", "V100-SXM2-16GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "RTX-A6000", "RTX-3090-Ti",
            "H100-SXM5-80GB", "H200-SXM-141GB"} <= set(cat.gpu.gpus)
    assert {"pcie3-x16", "pcie4-x16", "pcie5-x16"} == set(cat.link.pcie)
    assert {"nvlink2", "nvlink3", "nvlink4", "nvlink3-nvswitch", "nvlink4-nvswitch"} == set(cat.link.nvlink)
    assert {"eth-1g", "eth-10g", "eth-25g", "eth-100g", "ib-edr", "ib-hdr", "ib-ndr"} <= set(cat.link.network)
    for gpu in cat.gpu.gpus.values():  # achieved never above peak
        assert gpu.gemm_flops_per_s.value <= gpu.peak_flops_per_s.value
        assert gpu.copy_bandwidth_bytes_per_s.value <= gpu.memory_bandwidth_bytes_per_s.value
    for link in [*cat.link.pcie.values(), *cat.link.nvlink.values(), *cat.link.network.values()]:
        assert link.bandwidth_bytes_per_s.value < link.peak_bandwidth_bytes_per_s.value


def _copy_catalogue(tmp_path: Path) -> Path:
    folder = tmp_path / "catalogue"
    shutil.copytree(CATALOGUE_DIR, folder)
    return folder


def test_an_entry_without_a_source_is_rejected(tmp_path: Path) -> None:
    folder = _copy_catalogue(tmp_path)
    data = yaml.safe_load((folder / "gpus.yaml").read_text())
    del data["gpus"]["T4"]["gemm_flops_per_s"]["source"]
    (folder / "gpus.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=r"catalogue gpus.yaml: gpus.T4.gemm_flops_per_s.source: Field required"):
        load_catalogue(folder)


def test_a_recipe_naming_an_unknown_entry_is_rejected(tmp_path: Path) -> None:
    folder = _copy_catalogue(tmp_path)
    data = yaml.safe_load((folder / "clusters.yaml").read_text())
    data["clusters"][0]["network"] = "eth-9g"
    (folder / "clusters.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=r"network: unknown entry 'eth-9g'; allowed: eth-1g"):
        load_catalogue(folder)


def test_every_preset_loads_and_the_catalogue_presets_are_up_to_date() -> None:
    names = preset_names()
    for name in names:
        assert isinstance(load_cluster(name), ClusterSpec)
    cat = load_catalogue()
    assert {r.name for r in cat.recipes.clusters} | {"4x-a100-10gbe", "dgx-a100", "local"} <= set(names)
    for recipe in cat.recipes.clusters:
        shipped = (PRESET_DIR / f"{recipe.name}.yaml").read_text()
        assert shipped == preset_text(build_cluster(recipe, cat)), \
            f"{recipe.name}.yaml is stale: run python3 -m gnnplan.simulator.hardware.builder"


def test_preset_names_follow_gpus_x_model_interconnect() -> None:
    cat = load_catalogue()
    assert {r.name: preset_name(r, cat) for r in cat.recipes.clusters} == {r.name: r.name for r in cat.recipes.clusters}
    assert "2x4-v100-nvlink2-100gbib" in {r.name for r in cat.recipes.clusters}  # machines x GPUs form
    recipe = cat.recipes.clusters[0].model_copy(update={"name": "wrong-name"})
    with pytest.raises(SpecError, match="must be named '4x-rtx3090ti-pcie3'"):
        build_cluster(recipe, cat)


def test_paper_testbeds_are_presets_that_name_their_paper() -> None:
    for name, paper in PAPER_TESTBEDS.items():
        assert paper in load_cluster(name).sources["num_machines"], name


def test_built_presets_carry_achieved_rates_with_sources() -> None:
    cl = load_cluster("8x-a100-nvswitch")
    # sustained SGEMM 18.88 of 19.5 TFLOPS, copy 1355 of 1555 GB/s, NCCL 200 GB/s of 300, PCIe 25.13 of 31.5 GB/s
    assert cl.efficiency.forward_fraction == pytest.approx(18.88 / 19.5, abs=1e-4)
    assert cl.efficiency.gather_fraction == pytest.approx(1355 / 1555, abs=1e-4)
    assert cl.gpu.sparse_flops_per_s == pytest.approx(1.355e12 / 4)
    assert cl.nvlink is not None and cl.nvlink.bandwidth_bytes_per_s == 200e9
    assert cl.pcie.bandwidth_bytes_per_s == 25.13e9 and cl.storage.bandwidth_bytes_per_s == 4 * 6.5e9
    numeric = [f"{group}.{key}" for group, block in cl.model_dump(exclude_unset=True).items()
               if isinstance(block, dict) and group != "sources"
               for key, value in block.items() if isinstance(value, (int, float)) and not isinstance(value, bool)]
    missing = [path for path in numeric if path not in cl.sources]
    assert numeric and not missing, missing


def test_write_presets_writes_one_loadable_file_per_recipe(tmp_path: Path) -> None:
    paths = write_presets(tmp_path)
    assert len(paths) == len(load_catalogue().recipes.clusters)
    for p in paths:
        assert load_cluster(p).name == p.stem


def test_a_cluster_at_datasheet_peaks_is_named_with_the_presets_that_carry_achieved_rates(
        capsys: pytest.CaptureFixture[str]) -> None:
    """dgx-a100 and 4x-a100-10gbe (DESIGN.md's examples) keep datasheet rates; the catalogue's presets carry
    achieved ones, and a calibrated cluster has them once it fits an efficiency."""
    from gnnplan.autotune.cli import main
    from gnnplan.simulator.hardware.peak_rates import achieved_alternatives, at_peak_rates, peak_rates_caveat
    from gnnplan.simulator.hardware.spec import EfficiencySpec, load_cluster, preset_names

    assert [n for n in preset_names() if at_peak_rates(load_cluster(n))] == ["4x-a100-10gbe", "dgx-a100"]
    dgx = load_cluster("dgx-a100")
    assert achieved_alternatives(dgx) == ["2x4-a100-nvlink3-200gbib", "8x-a100-nvswitch"]
    fitted = dgx.model_copy(update={"efficiency": EfficiencySpec(forward_fraction=0.5)})
    assert not at_peak_rates(fitted) and peak_rates_caveat(fitted) is None
    assert main(["simulate", "--cluster", "dgx-a100", "--workload", "cora-sage", "--strategy", "dp"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("cluster dgx-a100 prices compute at datasheet peaks (no achieved GEMM or memory efficiency, aggregation "
            "rate or per-kernel cost), where compute looks nearly free next to communication; presets of the same "
            "GPU with achieved rates: 2x4-a100-nvlink3-200gbib, 8x-a100-nvswitch") in out
    assert main(["simulate", "--cluster", "8x-a100-nvswitch", "--workload", "cora-sage", "--strategy", "dp"]) == 0
    assert "datasheet peaks" not in capsys.readouterr().out
