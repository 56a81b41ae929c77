"""Spec and plan YAML is read without aliases, with bounded nesting and size (issue 13: alias bombs, deep
nesting)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnnplan.simulator import io
from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.hardware.spec import load_cluster


def test_alias_bomb_is_rejected(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(8)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError, match=r"cluster: .* aliases \(\*a\) are not allowed"):
        load_cluster(path)


def test_deep_nesting_is_rejected_without_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SpecError, match="nested deeper than 64"):
        io.read_yaml(path, "plan")


def test_oversized_and_binary_files_are_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" * 10)
    monkeypatch.setattr(io, "MAX_SPEC_BYTES", 16)
    with pytest.raises(SpecError, match="larger than"):
        io.read_yaml(big, "workload")
    monkeypatch.undo()
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00a: 1")
    with pytest.raises(SpecError, match="workload: .*"):
        io.read_yaml(binary, "workload")


def test_anchors_without_aliases_and_plain_specs_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("a: &x 1\nb: [1, 2, {c: 3}]\n")
    assert io.read_yaml(path, "plan") == {"a": 1, "b": [1, 2, {"c": 3}]}
