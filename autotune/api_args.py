"""The Python API's arguments checked as the command line checks its flags (argparse's types, the subcommands'
own checks), so ``gnnplan.tune(trials=0)`` fails as ``gnnplan tune --trials 0`` does: one :class:`SpecError` line
naming the argument, before any work. The CLI reaches the same functions through :mod:`gnnplan.autotune.commands`.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gnnplan.simulator.errors import SpecError
from gnnplan.simulator.limits import check_seed


def positive_count(name: str, value: Any) -> int:
    """``value`` as a positive integer (a Python or numpy integer; a bool or a float is none).

    Raises:
        SpecError: anything else, naming ``name``.
    """
    return _integer(name, value, 1, "a positive integer")


def count(name: str, value: Any) -> int:
    """``value`` as an integer >= 0 (``checkpoint_every``: 0 = never; a bool or a float is none).

    Raises:
        SpecError: anything else, naming ``name``.
    """
    return _integer(name, value, 0, "an integer >= 0")


def _integer(name: str, value: Any, minimum: int, words: str) -> int:
    """``value`` as a Python or numpy integer of at least ``minimum`` (a bool or a float is none), else a
    :class:`SpecError` ``<name>: must be <words>``."""
    if _is_bool(value) or not isinstance(value, numbers.Integral) or value < minimum:
        raise SpecError(f"{name}: must be {words} (got {value!r})")
    return int(value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def seconds(name: str, value: Any) -> float:
    """``value`` as a positive, finite number of seconds (a bool or a string is none).

    Raises:
        SpecError: anything else, naming ``name``.
    """
    if _is_bool(value) or not isinstance(value, numbers.Real) or not 0 < float(value) < math.inf:
        raise SpecError(f"{name}: must be a positive number of seconds (got {value!r})")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """``value`` as a switch: True or False only (``allow_model_change="false"`` is a non-empty string, which
    Python takes as true: it trained SIGN where the caller asked for no model change, 2026-12-01).

    Raises:
        SpecError: anything else, naming ``name``.
    """
    if not _is_bool(value):
        raise SpecError(f"{name}: True or False (got {value!r})")
    return bool(value)


def path(name: str, value: Any, optional: bool = False) -> Path | None:
    """``value`` as a file or folder path: a non-empty ``str`` or ``os.PathLike`` (None too when ``optional``).

    Raises:
        SpecError: anything else, naming ``name``.
    """
    if value is None and optional:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        allowed = "a path (str or Path)" + (" or None" if optional else "")
        raise SpecError(f"{name}: {allowed} (got {value!r})")
    return Path(value)


def text(name: str, value: Any) -> str | None:
    """``value`` as a non-empty string, or None (``storage``, ``study_name``: None = the default).

    Raises:
        SpecError: anything else, naming ``name``.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{name}: a non-empty string or None (got {value!r})")
    return value


def seed(name: str, value: Any) -> int:
    """``value`` as a sampler seed (:func:`simulator.limits.check_seed`)."""
    return check_seed(name, value)


def names(name: str, value: Any) -> list[str] | None:
    """Strategy names: None (all that fit the workload), a list of names, or one comma-separated string
    (``"dp,hopgnn"``, as ``--strategies``).

    Raises:
        SpecError: an empty selection (``[]``, ``",,"``), items that are not strings or an unregistered strategy,
            naming ``name``.
    """
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(v, str) for v in items):
        raise SpecError(f"{name}: a list of strategy names or 'a,b' (got {value!r})")
    found = [v.strip() for v in items if v.strip()]
    if not found:
        example = "dp,hopgnn, or leave the option out" if name.startswith("--") else "['dp', 'hopgnn'], or None"
        raise SpecError(f"{name}: {value!r} names no strategy; give e.g. {example} for all")
    from gnnplan.simulator.strategies import get_strategy

    for v in found:
        get_strategy(v, name)
    return found


def texts(name: str, value: Any) -> list[str]:
    """One string or a sequence of strings (``vary``, trace paths) as a list: :func:`gnnplan.simulator.api.text_list`.

    Raises:
        SpecError: an empty sequence or items that are not strings or paths, naming ``name``.
    """
    from gnnplan.simulator.api import text_list

    return text_list(name, value)


@contextlib.contextmanager
def as_arguments(*names: str, flags: Mapping[str, str] | None = None,
                 fields: Mapping[str, str] | None = None) -> Iterator[None]:
    """Re-raise a :class:`SpecError` from the code the CLI shares with the Python API so that it names the
    calling function's arguments, not the command-line flags they stand for: ``--storage`` becomes ``storage``,
    ``--gpus-per-machine`` ``gpus_per_machine``, for the argument names in ``names``; a flag whose argument is
    named otherwise as ``flags`` says (``{"study": "study_name", "resume": "resume=True"}``, keys with ``_`` for
    ``-``), and a message's leading field as ``fields`` says (``{"TRACE": "traces"}``, also before a name it
    gives: ``TRACE t.json: ...``). Other flags are kept (the
    same error class, one line). ``gnnplan.tune(storage="x://")`` then fails with "storage: 'x://' failed ...",
    as ``gnnplan tune --storage x://`` fails with "--storage: ..."."""
    flags, fields = flags or {}, fields or {}
    try:
        yield
    except SpecError as exc:
        def renamed(match: re.Match[str]) -> str:
            flag = match.group(1).replace("-", "_")
            return flags.get(flag, flag if flag in names else match.group(0))

        text = re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", renamed, str(exc))
        field, colon, rest = text.partition(":")
        first, space, named = field.partition(" ")  # "TRACE t.json: ...": the field and what it names
        if colon and first in fields:
            text = fields[first] + space + named + colon + rest
        if text == str(exc):
            raise
        raise type(exc)(text) from None
