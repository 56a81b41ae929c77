"""Where the PP-GNN hop matrices live for training (:class:`HopSource`: ``gpu``, ``host`` or ``ssd`` placement,
see :mod:`executor.strategies.ppgnn.loaders`) and the direct reads of the ``ssd`` tier (:class:`DirectReader`).

Files are opened with ``O_DIRECT``, so every read goes to the storage device and nothing is kept in the page
cache: the stand-in for data larger than host memory, read the way GPUDirect Storage reads (cuFile requires
``O_DIRECT``; NVIDIA GPUDirect Storage Design Guide, "Direct I/O"). ``O_DIRECT`` needs the buffer address, the
file offset and the length aligned to the logical block size (open(2), "O_DIRECT"); a read of any byte range
therefore reads the enclosing :data:`ALIGN`-aligned range into a page-aligned bounce buffer (one per thread)
and copies the wanted bytes out. Where ``O_DIRECT`` is refused (e.g. tmpfs: ``EINVAL``) the file is read
through the page cache instead (``direct`` is then False).
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
from collections.abc import Sequence

import numpy as np
import torch

from gnnplan.executor.strategies.ppgnn.preprop import HopFiles

PLACEMENTS = ("gpu", "host", "ssd")
ALIGN = 4096
"""Alignment of direct reads: the page size, a multiple of every common logical block size (512 B, 4 KiB)."""


class DirectReader:
    """Reads byte ranges of one file, bypassing the page cache when the file system allows it.

    Args:
        path: the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self.fd, self.direct = self._open()
        self._local = threading.local()

    def _open(self) -> tuple[int, bool]:
        flag = getattr(os, "O_DIRECT", 0)
        if flag:
            try:
                fd = os.open(self.path, os.O_RDONLY | flag)
                probe = mmap.mmap(-1, ALIGN)
                try:
                    os.preadv(fd, [probe], 0)
                    return fd, True
                except OSError as exc:
                    os.close(fd)
                    if exc.errno != errno.EINVAL:
                        raise
                finally:
                    probe.close()
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
        return os.open(self.path, os.O_RDONLY), False

    def _bounce(self, size: int) -> memoryview:
        """This thread's page-aligned bounce buffer (an anonymous mapping) of at least ``size`` bytes."""
        view = getattr(self._local, "view", None)
        if view is None or len(view) < size:
            self._local.buf = mmap.mmap(-1, max(size, 16 * ALIGN))  # anonymous mappings are page-aligned
            view = self._local.view = memoryview(self._local.buf)
        return view

    def read(self, offset: int, out: memoryview) -> None:
        """Fill ``out`` (a writable byte view) with the file's bytes ``offset .. offset + len(out)``.

        Raises:
            OSError: the file ends before the range does.
        """
        length = len(out)
        if not self.direct:
            _read_exactly(self.fd, out, offset, length, self.path)
            return
        start = offset - offset % ALIGN
        size = -(-(offset + length - start) // ALIGN) * ALIGN
        view = self._bounce(size)
        got = os.preadv(self.fd, [view[:size]], start)  # one request; retried below only if it came up short
        if got < offset + length - start:
            _read_exactly(self.fd, view[:size], start, offset + length - start, self.path)
        out[:] = view[offset - start:offset - start + length]

    def read_rows(self, data_offset: int, row_bytes: int, rows: Sequence[int], out: np.ndarray) -> None:
        """Read rows (``row_bytes`` each, from ``data_offset``) into the rows of ``out``, one request per row.

        Shapes:
            out: (len(rows), row_bytes / itemsize), C-contiguous.
        """
        for k, row in enumerate(rows):
            self.read(data_offset + int(row) * row_bytes, memoryview(out[k]).cast("B"))

    def drop_page_cache(self) -> None:
        """Ask the kernel to drop the file's cached pages (``posix_fadvise(POSIX_FADV_DONTNEED)``)."""
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def close(self) -> None:
        """Close the file."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _read_exactly(fd: int, view: memoryview, offset: int, needed: int, path: str) -> None:
    """``preadv`` into ``view`` from ``offset`` until at least ``needed`` bytes arrived (short reads retried)."""
    done = 0
    while done < needed:
        n = os.preadv(fd, [view[done:]], offset + done)
        if n <= 0:
            raise OSError(f"unexpected end of {path} at byte {offset + done}")
        done += n


class HopSource:
    """The matrices one run reads, held at a placement (module docstring).

    Args:
        files: the pre-propagated folder.
        hops: which stored hops to read (:func:`executor.strategies.ppgnn.models.loaded_hops`).
        placement: ``gpu``, ``host`` or ``ssd``.
        device: the training device.

    Raises:
        ValueError: unknown placement.
    """

    def __init__(self, files: HopFiles, hops: Sequence[int], placement: str, device: torch.device) -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
        self.files, self.hops, self.placement, self.device = files, list(hops), placement, device
        self.num_rows, self.feature_dim = files.num_rows, files.feature_dim
        self.tensors: list[torch.Tensor] = []
        self.readers: list[DirectReader] = []
        self.offsets: list[int] = []
        pin = torch.cuda.is_available()
        if placement == "gpu":
            self.tensors = [torch.from_numpy(files.load(r)).to(device) for r in self.hops]
        elif placement == "host":
            self.tensors = [torch.from_numpy(files.load(r)) for r in self.hops]
            self.tensors = [t.pin_memory() for t in self.tensors] if pin else self.tensors
        else:
            self.offsets = [int(files.load(r, mmap=True).offset) for r in self.hops]  # type: ignore[attr-defined]
            self.readers = [DirectReader(files.path(r)) for r in self.hops]

    @property
    def num_matrices(self) -> int:
        """M."""
        return len(self.hops)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row of one matrix (float32)."""
        return self.feature_dim * 4

    def drop_page_cache(self) -> None:
        """``ssd`` only: drop the files' cached pages, so buffered reads (no ``O_DIRECT``) hit the device."""
        for reader in self.readers:
            reader.drop_page_cache()

    def read_run(self, m: int, first: int, out: np.ndarray) -> None:
        """``ssd``: read rows ``first .. first + len(out)`` of matrix ``m`` into ``out`` (one request)."""
        self.readers[m].read(self.offsets[m] + first * self.row_bytes, memoryview(out).cast("B"))

    def read_rows(self, m: int, rows: np.ndarray, out: np.ndarray) -> None:
        """``ssd``: read the given rows of matrix ``m`` into ``out`` (one request per row)."""
        self.readers[m].read_rows(self.offsets[m], self.row_bytes, rows.tolist(), out)

    def rows(self, first: int, stop: int) -> list[torch.Tensor]:
        """Rows ``first .. stop`` of every matrix as device tensors (evaluation)."""
        if self.placement != "ssd":
            return [t[first:stop].to(self.device) for t in self.tensors]
        out = []
        for m in range(self.num_matrices):
            part = np.empty((stop - first, self.feature_dim), np.float32)
            self.read_run(m, first, part)
            out.append(torch.from_numpy(part).to(self.device))
        return out

    def close(self) -> None:
        """Close the files (``ssd``)."""
        for reader in self.readers:
            reader.close()
        self.readers = []
