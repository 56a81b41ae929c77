"""Probe measurements of the machine constants held as cluster fields (host.process_bytes, host.row_index_s,
storage.concurrency): physically plausible values on this machine, and they load into a ClusterSpec."""

from __future__ import annotations

from pathlib import Path

from gnnplan.executor import probe_constants as pc
from gnnplan.simulator.hardware.spec import load_cluster


def test_measured_constants_are_plausible_and_valid_fields(tmp_path: Path) -> None:
    rss = pc.worker_process_bytes()
    row = pc.row_index_s(num_rows=2048, repeats=4)
    depth = pc.storage_concurrency(tmp_path, file_bytes=8 * 2**20, pages=128, threads=4)
    assert 5e7 < rss < 4e9  # torch + DGL take tens to hundreds of MB, not GBs
    assert 1e-8 < row < 1e-3  # microseconds per row and matrix of Python indexing
    assert 1.0 <= depth < 64.0
    base = load_cluster("4x-a100-10gbe")
    cl = base.model_copy(update={"host": base.host.model_copy(update={"process_bytes": rss, "row_index_s": row}),
                                 "storage": base.storage.model_copy(update={"concurrency": depth})})
    assert type(cl).model_validate(cl.to_yaml_dict()).host.row_index_s == row
