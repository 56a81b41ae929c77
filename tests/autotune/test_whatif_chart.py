"""The chart ``gnnplan whatif`` writes, as a person sees it: the README's network what-if (10 GbE -> 100 Gb
InfiniBand, the ``network`` group swapped whole), here on Cora so it runs in seconds, opened in headless Chromium
(tests/chromium.py): rendered without console errors, one line per strategy plus the winners' stars, and ink on
the screenshot where the chart is."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from chromium import PLOTLY_CHARTS_JS, png_size, render, require_chromium

from gnnplan.autotune.cli import main

TEN_GBE = "{bandwidth_bytes_per_s: 1.177e+9, latency_s: 2.0e-5, gpudirect_rdma: false}"
"""catalogue links.yaml eth-10g (achieved TCP goodput, kernel TCP latency), no GPUDirect RDMA over Ethernet."""
EDR_IB = "{bandwidth_bytes_per_s: 12.0e+9, latency_s: 5.0e-6, gpudirect_rdma: true}"
"""catalogue links.yaml ib-edr (achieved, RDMA latency), GPUDirect RDMA."""
STRATEGIES = ("dp", "hopgnn")


pytestmark = [pytest.mark.slow,  # ~15 s of graph statistics on an idle machine, ~50 s on a loaded one
              pytest.mark.serial]  # headless Chromium (tests/conftest.py)


@pytest.fixture(scope="module")
def whatif_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whatif-chart")
    code = main(["whatif", "--cluster", "4x-v100-32gb-100gbib", "--cluster-set", "num_machines=2", "--workload",
                 "cora-sage", "--vary",
                 f"network={TEN_GBE},{EDR_IB}", "--strategies", ",".join(STRATEGIES), "--trials", "3",
                 "-o", str(out)])
    assert code == 0
    return out


def test_the_network_what_if_says_infiniband_is_faster(whatif_dir: Path) -> None:
    with open(whatif_dir / "whatif.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["strategy"] for r in rows] == list(STRATEGIES) * 2
    slow = {r["strategy"]: float(r["epoch_time_s"]) for r in rows[:2]}
    fast = {r["strategy"]: float(r["epoch_time_s"]) for r in rows[2:]}
    assert all(fast[s] < slow[s] for s in STRATEGIES)  # 10x the bandwidth, a quarter of the latency


def test_the_chart_renders_in_chromium(whatif_dir: Path) -> None:
    browser = require_chromium()
    page = render(browser, whatif_dir / "whatif.html")
    assert page.errors == [], page.errors
    assert page.value["ready"] and len(page.value["charts"]) == 1
    (cid, chart), = page.value["charts"].items()
    assert chart["rendered"] and chart["traces"] == len(STRATEGIES) + 1  # a line per strategy, the stars
    assert chart["width"] > 1000 and chart["height"] >= 500
    assert png_size(page.screenshot_png)[0] == 1400
    assert page.ink is not None and page.ink["elements"][cid] > 0.02, page.ink  # lines, markers, axes drawn
    assert page.ink["colours"] > 5  # more than black on white: the strategies' colours


def test_proxy_draw_error_bars_are_drawn(tmp_path: Path) -> None:
    """``--proxy-draws 3`` on a card: every strategy's marker carries a bar from its least to its greatest epoch
    time over the draws, and Chromium draws one per point and strategy."""
    wl = tmp_path / "wl.yaml"
    wl.write_text("dataset: card:cora\nmodel: {arch: sage, num_layers: 2, hidden_dim: 64}\n"
                  "training: {mode: mini-batch, batch_size: 64, fanouts: [10, 10]}\n")
    code = main(["whatif", "--cluster", "4x-v100-32gb-100gbib", "--cluster-set", "num_machines=2", "--workload",
                 str(wl), "--vary", f"network={TEN_GBE},{EDR_IB}", "--strategies", ",".join(STRATEGIES),
                 "--trials", "2", "--proxy-draws", "3", "-o", str(tmp_path / "out")])
    assert code == 0
    browser = require_chromium()
    bars = f"Object.assign({PLOTLY_CHARTS_JS}, {{errorbars: document.querySelectorAll('g.errorbar').length}})"
    page = render(browser, tmp_path / "out" / "whatif.html", bars)
    assert page.errors == [], page.errors
    assert page.value["ready"] and page.value["errorbars"] == 2 * len(STRATEGIES), page.value


def test_the_time_axis_labels_every_tick_with_its_unit() -> None:
    """A log axis of seconds gets 1-2-5 ticks each with its unit (plotly's default labels only the decades and
    marks the rest '2', '5' with no unit: 0.02 s read as '2'), spanning the values."""
    from gnnplan.autotune.whatif import WhatifResult, parse_axis
    from gnnplan.autotune.whatif_report import figure, time_ticks

    ticks = time_ticks([0.0285, 0.0041, 0.00172])
    assert (ticks["tickvals"], ticks["ticktext"]) == ([0.001, 0.002, 0.005, 0.01, 0.02, 0.05],
                                                      ["1 ms", "2 ms", "5 ms", "10 ms", "20 ms", "50 ms"])
    assert ticks["range"] == pytest.approx([-3.05, math.log10(0.05) + 0.05])
    assert time_ticks([3e-4, 1.2])["ticktext"][0] == "200 us" and time_ticks([]) == {}
    axis = parse_axis("network.bandwidth_bytes_per_s=1Gbit/s,100Gbit/s")
    rows = [{"point": p, "index": [p], "strategy": "dp", "epoch_time_s": t, "knobs": {}} for p, t in ((0, 0.03),
                                                                                                      (1, 0.004))]
    summary = [{"point": p, "index": [p], "winner": "dp", "winner_epoch_time_s": t} for p, t in ((0, 0.03),
                                                                                                  (1, 0.004))]
    fig = figure(WhatifResult([axis], rows, summary, []), "t")
    assert list(fig.layout.yaxis.ticktext) == ["2 ms", "5 ms", "10 ms", "20 ms", "50 ms"]
    assert fig.layout.xaxis.title.text == "network.bandwidth_bytes_per_s"  # its tick labels carry the unit
