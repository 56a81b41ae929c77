"""Atomic writes: all or nothing, with ordinary file permissions."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from gnnplan.simulator.io import atomic_save_npy, atomic_write, atomic_write_files, atomic_write_text


def test_written_files_get_open_permissions_not_mkstemp_ones(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "sub" / "a.yaml", "x: 1\n")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        assert path.read_text() == "x: 1\n"
    finally:
        os.umask(old)


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    path = atomic_write_text(tmp_path / "a.txt", "old")

    def boom(fh) -> None:  # type: ignore[no-untyped-def]
        fh.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, boom)
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_npy_round_trip_without_pickle(tmp_path: Path) -> None:
    array = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::2]  # not contiguous
    path = atomic_save_npy(tmp_path / "a.npy", array)
    np.testing.assert_array_equal(np.load(path, allow_pickle=False), array)


def test_a_group_write_replaces_no_file_unless_all_can_be_written(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("old")
    (tmp_path / "b.json").mkdir()  # cannot be replaced by a file
    with pytest.raises(IsADirectoryError) as exc:
        atomic_write_files({tmp_path / "a.csv": "new", tmp_path / "b.json": "{}", tmp_path / "c.html": "<p>"})
    assert exc.value.filename == str(tmp_path / "b.json")  # the destination, not the temp file
    assert (tmp_path / "a.csv").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.json"]  # no temp file, no c.html
    paths = atomic_write_files({tmp_path / "a.csv": "new", tmp_path / "sub" / "c.html": "<p>"})
    assert paths == [tmp_path / "a.csv", tmp_path / "sub" / "c.html"]
    assert [p.read_text() for p in paths] == ["new", "<p>"]
