"""Change fields of a cluster or workload spec by dotted path, unit-aware (``--cluster-set``, ``gnnplan whatif``).

``network.bandwidth_bytes_per_s=10Gbit/s`` sets one field of a :class:`~gnnplan.simulator.hardware.spec.ClusterSpec`;
``model.hidden_dim=64`` one of a :class:`~gnnplan.simulator.workload.spec.WorkloadSpec`. A number field reads
units by its name's suffix (:mod:`gnnplan.simulator.units_parse`); ``none`` clears an optional field; a group
of fields (``nvlink``) takes a YAML mapping, its values unit-aware too (``nvlink={bandwidth_bytes_per_s: 300GB/s,
latency_s: 2us}``); other fields take a YAML scalar or list (``training.fanouts=[15,10]``). The result is validated
as a whole, and a cluster's ``sources`` records the override.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gnnplan.simulator.errors import SpecError, one_line
from gnnplan.simulator.units_parse import parse_field_value

M = TypeVar("M", bound=BaseModel)
NONE_WORDS = ("none", "null")


def split_assignment(item: str, option: str) -> tuple[str, str]:
    """``"a.b=v"`` -> ``("a.b", "v")``.

    Raises:
        SpecError: no ``=`` or an empty field (one line naming ``option``).
    """
    path, sep, value = item.partition("=")
    path, value = path.strip(), value.strip()
    if not sep or not path or not value:
        raise SpecError(f"{option}: {item!r} is not FIELD=VALUE (e.g. network.bandwidth_bytes_per_s=10Gbit/s)")
    return path, value


def _members(annotation: Any) -> list[Any]:
    """The types a (possibly ``Annotated``, possibly union) annotation admits, flattened."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _members(arg)]
    return [annotation]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation admits (``LinkSpec | None`` -> ``[LinkSpec]``)."""
    return [a for a in _members(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]


def _admits(annotation: Any, kind: type) -> bool:
    return kind in _members(annotation)


def leaf_annotation(cls: type[BaseModel], path: str, option: str) -> Any:
    """The annotation of the field at a dotted ``path`` of model ``cls``.

    Raises:
        SpecError: a part of the path is not a field (the message lists the fields allowed there).
    """
    parts = path.split(".")
    nodes: list[type[BaseModel]] = [cls]
    annotation: Any = None
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i])
        having = [n for n in nodes if part in n.model_fields]
        if not having:
            under = f" under {prefix}" if prefix else ""
            allowed = dict.fromkeys(f for n in nodes for f in n.model_fields)
            raise SpecError(f"{option}: unknown field {path!r}: no {part!r}{under}; allowed: {', '.join(allowed)}")
        annotation = having[0].model_fields[part].annotation
        if i < len(parts) - 1:
            nodes = [m for n in having for m in _models_in(n.model_fields[part].annotation)]
            if not nodes:
                name = ".".join(parts[:i + 1])
                # e.g. sources: its keys are field paths, dotted themselves
                if any(typing.get_origin(m) is dict or m is dict for m in _members(annotation)):
                    raise SpecError(f"{option}: {name} is a mapping, not a group of fields (in {path!r}); give it "
                                    f"whole: {name}={{KEY: VALUE, ...}}")
                raise SpecError(f"{option}: {name} is a value, not a group of fields (in {path!r})")
    return annotation


def coerce_text(annotation: Any, path: str, text: str) -> Any:
    """A command-line string as a value for a field of ``annotation`` (pydantic validates it afterwards)."""
    if text.lower() in NONE_WORDS and _admits(annotation, type(None)):
        return None
    if _admits(annotation, float):
        return parse_field_value(path, text)
    if annotation is str:
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SpecError(f"{path}: cannot read {text!r} (write a number, a word, [a, list] or "
                        "{a: mapping})") from None
    return _file_value(annotation, path, value)  # a group's mapping: its values as a file's (units, none)


def file_values(cls: type[BaseModel], data: Any, where: str, path: str = "") -> Any:
    """A spec file's mapping with its fields read as ``--cluster-set`` reads them: a number field's text by its
    unit (``bandwidth_bytes_per_s: 25Gbit/s``, ``memory_bytes: 40GiB``, ``latency_s: 5us``;
    :mod:`~gnnplan.simulator.units_parse`), ``none`` / ``null`` in an optional field as None (``nvlink: none``); a
    key that is no field of its group is named with the fields allowed there, before pydantic would report the
    field it misspells as missing; a boolean where a number goes is refused (YAML reads ``true`` as 1).

    ``path``: where ``data`` sits in the file, for a group read alone (``training`` of a workload).

    Raises:
        SpecError: one line, ``where`` first, naming the field.
    """
    if not isinstance(data, dict):
        return data  # the model's validation names what the file holds instead
    try:
        return _file_group(cls, path, data)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None


def unknown_key(cls: type[BaseModel], data: Any, where: str) -> None:
    """Refuse a key of ``data`` that is no field of ``cls`` (or of the group it sits in, where a group is of one
    model), naming it and the fields allowed there, before pydantic would report the field it misspells as
    missing.

    Raises:
        SpecError: one line, ``where`` first.
    """
    if not isinstance(data, dict):
        return
    try:
        _known_keys(cls, "", data, deep=True)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None


def _known_keys(cls: type[BaseModel], path: str, data: dict[str, Any], deep: bool = False) -> None:
    fields = cls.model_fields
    unknown = [k for k in data if k not in fields]
    if unknown:
        where = f" in {path}" if path else ""
        raise SpecError(f"{path + '.' if path else ''}{unknown[0]}: unknown field; allowed{where}: "
                        f"{', '.join(fields)}")
    for k, v in data.items() if deep else ():
        models = _models_in(fields[k].annotation)
        if isinstance(v, dict) and len(models) == 1:
            _known_keys(models[0], f"{path}.{k}" if path else str(k), v, deep=True)


def _file_group(cls: type[BaseModel], path: str, data: dict[str, Any]) -> dict[str, Any]:
    _known_keys(cls, path, data)
    fields = cls.model_fields
    return {k: _file_value(fields[k].annotation, f"{path}.{k}" if path else str(k), v) for k, v in data.items()}


def _file_value(annotation: Any, path: str, value: Any) -> Any:
    """One value of a spec file, or of a group's mapping on the command line (``nvlink={bandwidth_bytes_per_s:
    300GB/s, latency_s: 2us}``), for a field of ``annotation`` (:func:`file_values`); nested groups too."""
    numeric = _admits(annotation, float) and not _admits(annotation, str)
    if isinstance(value, str):
        text = value.strip()
        none = text.lower() in NONE_WORDS and _admits(annotation, type(None))
        return coerce_text(annotation, path, text) if numeric or none else value
    if isinstance(value, bool) and (numeric or _admits(annotation, int)) and not _admits(annotation, bool):
        raise SpecError(f"{path}: a number, not {str(value).lower()}")  # pydantic would take true as 1
    models = _models_in(annotation)
    if isinstance(value, dict) and models:
        return _file_group(models[0], path, value)
    return value


def with_fields(spec: M, items: Sequence[str], option: str) -> M:
    """A copy of ``spec`` with ``FIELD=VALUE`` assignments applied in order, validated as a whole.

    Args:
        spec: a cluster or workload spec.
        items: e.g. ``["network.bandwidth_bytes_per_s=1Gbit/s", "network.latency_s=50us"]``.
        option: the option's name for messages (``--cluster-set``).

    Raises:
        SpecError: malformed assignment, unknown field, unreadable value or a value out of range; one line
            naming the field.
    """
    if not items:
        return spec
    cls = type(spec)
    data = spec.model_dump(mode="python")
    for item in items:
        path, text = split_assignment(item, option)
        try:
            value = coerce_text(leaf_annotation(cls, path, option), path, text)
        except SpecError as exc:  # every --cluster-set error names the option (the field's own do not)
            raise SpecError(str(exc) if str(exc).startswith(f"{option}:") else f"{option}: {exc}") from None
        _assign(data, path, value, option)
        if "sources" in cls.model_fields and isinstance(data.get("sources"), dict):
            data["sources"] = {**data["sources"], path: f"set by {option} {path}={text}"}
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise SpecError(one_line(exc, option)) from None


def _assign(data: dict[str, Any], path: str, value: Any, option: str) -> None:
    parts = path.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if not isinstance(child, dict):
            group = ".".join(parts[:i + 1])
            raise SpecError(f"{option}: {group} is {'none' if child is None else repr(child)} here, so "
                            f"{path!r} cannot be set alone; set {group} whole ({group}={{field: value, ...}})")
        node = child
    node[parts[-1]] = value
