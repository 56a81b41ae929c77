"""The dataset cache's edge lists are memory-mapped from the ``.npz`` (npz_files.npz_member), not read: the same
values, copy-on-write, and a read where a member cannot be mapped."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gnnplan.simulator.workload.npz_files import npz_member


def test_members_are_mapped_with_their_values(tmp_path: Path) -> None:
    path = tmp_path / "g.npz"
    arrays = {"src": np.arange(100_000, dtype=np.int64) * 7, "empty": np.array([], dtype=np.int64),
              "rows": np.arange(12, dtype=np.float32).reshape(3, 4), "meta": np.array(["a", "b"])}
    np.savez(path, **arrays)
    for name, values in arrays.items():
        got = npz_member(path, name)
        np.testing.assert_array_equal(got, values)
        assert got.dtype == values.dtype and got.shape == values.shape
    assert isinstance(npz_member(path, "src"), np.memmap) and isinstance(npz_member(path, "rows"), np.memmap)
    mapped = npz_member(path, "src")
    mapped[0] = -1  # copy-on-write: the file keeps its values
    assert npz_member(path, "src")[0] == 0


def test_compressed_and_fortran_members_are_read(tmp_path: Path) -> None:
    fortran = np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3))
    np.savez(tmp_path / "f.npz", x=fortran)
    np.savez_compressed(tmp_path / "c.npz", x=np.arange(50, dtype=np.int64))
    got = npz_member(tmp_path / "f.npz", "x")
    assert not isinstance(got, np.memmap)
    np.testing.assert_array_equal(got, fortran)
    got = npz_member(tmp_path / "c.npz", "x")
    assert not isinstance(got, np.memmap)
    np.testing.assert_array_equal(got, np.arange(50))
