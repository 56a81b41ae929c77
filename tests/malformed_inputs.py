"""Shared pieces of the malformed-input tests (issue 13): calling the CLI in-process and checking the outcome,
tiny OGB-layout folders, and hypothesis strategies of bad values.

An outcome is acceptable when the CLI either succeeds (exit 0, every number it prints finite) or rejects the input
with exit 2 and exactly ONE stderr line that is neither a traceback nor the CLI's last-resort "internal error",
and leaves no file (complete or partial) in the output folder.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from gnnplan.autotune.cli import main

HANG_S = 60
"""Wall seconds after which one CLI call counts as hung (SIGALRM interrupts it)."""

BAD_FLOATS = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e400, 5e-324, 1e-320, 1e308, -1.0, 0.0, 1e300, -1e300]),
    st.floats(allow_nan=True, allow_infinity=True))
BAD_INTS = st.one_of(st.sampled_from([0, -1, -2, 2**63, 2**64, 10**30, -(10**30), 2**31]),
                     st.integers(min_value=-(2**70), max_value=2**70))
SCALARS = st.one_of(BAD_FLOATS, BAD_INTS, st.text(max_size=12), st.none(), st.booleans())
JUNK = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=8)
"""Any YAML/JSON-representable value, mostly out of range."""


class Hang(Exception):
    """A CLI call ran longer than :data:`HANG_S`."""


@contextlib.contextmanager
def deadline(seconds: int = HANG_S) -> Iterator[None]:
    """Raise :class:`Hang` in the main thread if the block runs longer than ``seconds``."""
    def ring(*_: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def call(capsys: pytest.CaptureFixture[str], argv: Sequence[str]) -> tuple[int, str, str]:
    """Run ``gnnplan argv`` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    with deadline():
        code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def files_in(folder: Path) -> list[Path]:
    """Every file under ``folder`` (hidden temp files included)."""
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def check_outcome(code: int, out: str, err: str, out_dir: Path) -> str:
    """Assert the acceptable outcomes (module docstring); returns ``"accepted"`` or ``"rejected"``."""
    if code == 0:
        assert not [p for p in files_in(out_dir) if p.name.startswith(".")], files_in(out_dir)
        if out.strip().startswith("{"):
            assert_finite(json.loads(out))
        return "accepted"
    lines = err.strip().splitlines()
    assert code == 2, (code, err[-2000:])
    assert len(lines) == 1, err[-2000:]
    assert "Traceback" not in err and "internal error" not in err, err
    assert lines[0].startswith("gnnplan "), lines[0]
    assert files_in(out_dir) == [], files_in(out_dir)
    return "rejected"


def assert_finite(value: Any, path: str = "") -> None:
    """Every float in a JSON value is finite (``None`` stands for "not applicable")."""
    if isinstance(value, dict):
        for k, v in value.items():
            assert_finite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            assert_finite(v, f"{path}.{i}")
    elif isinstance(value, float):
        assert math.isfinite(value), f"{path} = {value}"


def leaves(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths (key tuples) to every scalar of a nested mapping/list."""
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in leaves(v, (*prefix, k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in leaves(v, (*prefix, i))] or [prefix]
    return [prefix]


def set_path(data: Any, path: tuple[Any, ...], value: Any) -> None:
    """``data[path[0]]...[path[-1]] = value``."""
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def delete_path(data: Any, path: tuple[Any, ...]) -> None:
    """Remove the key or item at ``path``."""
    node = data
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]


def write_gz(path: Path, text: str) -> None:
    """Write ``text`` gzip-compressed (the OGB raw layout's ``.csv.gz``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write(text)


def ogb_tables(n: int, dim: int, seed: int) -> dict[str, list[list[str]]]:
    """The CSV rows of a small valid OGB raw folder: a ring plus chords, features, labels and a split."""
    rng = np.random.default_rng(seed)
    edges = [[i, (i + 1) % n] for i in range(n)] + [[(i + 1) % n, i] for i in range(n)]
    feats = rng.standard_normal((n, dim)).round(3)
    labels = [i % 3 for i in range(n)]
    ids = list(range(n))
    return {"raw/edge.csv.gz": [[str(a), str(b)] for a, b in edges],
            "raw/node-feat.csv.gz": [[str(x) for x in row] for row in feats],
            "raw/node-label.csv.gz": [[str(y)] for y in labels],
            "raw/num-node-list.csv.gz": [[str(n)]],
            "raw/num-edge-list.csv.gz": [[str(len(edges))]],
            "split/s/train.csv.gz": [[str(i)] for i in ids[: n // 2]],
            "split/s/valid.csv.gz": [[str(i)] for i in ids[n // 2: 3 * n // 4]],
            "split/s/test.csv.gz": [[str(i)] for i in ids[3 * n // 4:]]}


def write_ogb(folder: Path, tables: dict[str, list[list[str]]]) -> Path:
    """Write the tables of :func:`ogb_tables` as a folder in the OGB raw layout."""
    for name, rows in tables.items():
        write_gz(folder / name, "".join(",".join(r) + "\n" for r in rows))
    return folder
