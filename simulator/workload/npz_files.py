"""Arrays of an uncompressed ``.npz`` (what ``np.savez`` writes, the dataset cache's format) without reading them:
their sizes from the zip directory, and each member memory-mapped at its offset in the file."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["npz_array_bytes", "npz_member"]


def npz_member(path: Path, name: str) -> np.ndarray:
    """Array ``name`` of the uncompressed ``.npz`` at ``path``, memory-mapped copy-on-write (``np.memmap`` mode
    ``c``): its pages are read when touched, and every process that maps the same cache file shares them in the
    page cache (clean file pages, which the kernel can drop, not each process's private copy). ``np.savez`` stores
    each member as a ``.npy`` file without compression at an offset of the zip file: the zip local header
    (APPNOTE.TXT §4.3.7: 30 bytes, then the name and the extra field) and the ``.npy`` header
    (``numpy.lib.format``) precede its data. Falls back to reading the member (``np.load``) where it cannot be
    mapped (compressed, object or Fortran-ordered data, a scalar, or an unexpected layout).

    Returns:
        The member with the dtype and shape it was saved with (a ``np.memmap`` where mapped).

    Raises:
        KeyError: ``path`` has no member ``name``.
        zipfile.BadZipFile: ``path`` is not a zip file.
        OSError: ``path`` cannot be read.
    """
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(f"{name}.npy")
    if info.compress_type == zipfile.ZIP_STORED:
        with open(path, "rb") as f:
            f.seek(info.header_offset)
            local = f.read(30)
            if local[:4] == b"PK\x03\x04":
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                f.seek(info.header_offset + 30 + name_len + extra_len)
                version = np.lib.format.read_magic(f)
                readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                shape, fortran, dtype = readers[version](f) if version in readers else ((), True, None)
                if dtype is not None and not fortran and not dtype.hasobject and shape:  # a scalar is read
                    if 0 in shape:
                        return np.zeros(shape, dtype=dtype)
                    return np.memmap(path, dtype=dtype, mode="c", offset=f.tell(), shape=shape)
    with np.load(path, allow_pickle=False) as z:
        return z[name]


def npz_array_bytes(path: Path) -> float:
    """Bytes the arrays of an uncompressed ``.npz`` take once loaded: the sizes of its members (``np.savez``
    stores each array as a ``.npy`` member without compression, so the member sizes are the array bytes plus a
    header)."""
    with zipfile.ZipFile(path) as zf:
        return float(sum(info.file_size for info in zf.infolist()))
