"""Limits on the numbers and free-form blocks a user hands to gnnplan: plausible ranges by unit, 64-bit integers,
finite values, and bounded nesting and size of free-form blocks (a plan's ``prediction``, a trace's ``metadata``).

Issue 13: finite but absurd values (a bandwidth of 1e-320 B/s, a latency of 1e308 s) made the simulator's
arithmetic overflow into a NaN "feasible" result; integers beyond 64 bits failed deep inside numpy with a message
naming no field. The ranges below are sanity bounds, not physics: each lies orders of magnitude beyond any real
machine, so they reject only values that are typos or hostile, and keep every product and quotient the
simulator forms from them finite in IEEE 754 double precision (about 1e-308 to 1e308).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from gnnplan.simulator.errors import SpecError

INT64_MAX = 2**63 - 1
"""Largest integer numpy's int64 (vertex ids, counts) holds."""

UNIT_RANGES: tuple[tuple[str, float, float, str], ...] = (
    ("_bytes_per_s", 1.0e3, 1.0e15, "B/s"),
    ("_flops_per_s", 1.0e6, 1.0e18, "FLOP/s"),
    ("_edges_per_s_per_core", 1.0, 1.0e12, "edges/s"),
    ("_elements_per_s", 1.0, 1.0e15, "elements/s"),
    ("_bytes", 0.0, 1.0e16, "B"),
    ("_s", 0.0, 3600.0, "s"),
)
"""(field-name suffix, lowest, highest, unit) checked on every cluster number, longest suffix first.

Rates: 1 kB/s is 10^5 below the slowest NIC of the presets (6 GbE), 1 PB/s 200 times HBM3e's 4.8 TB/s (NVIDIA
H200 datasheet); 1 MFLOP/s to 1 EFLOP/s spans a CPU core share to 250 times an H100's 4 PFLOP/s FP8 (NVIDIA H100
datasheet); sampling rates 1 to 1e12 edges/s per core around DGL's ~2e7; random-number rates 1 to 1e15 elements/s
around a CPU core's ~4e7 (PyTorch's bernoulli_). Sizes: up to 10 PB of memory. Times (every
``_s`` field is a fixed cost per message, kernel, call or iteration): up to an hour, 10^6 times the slowest
measured (kernel TCP latency ~1e-4 s, gnnplan probe's per-iteration overhead ~1e-3 s)."""

MIN_FRACTION = 1e-9
"""Smallest nonzero ``_fraction`` accepted: an achieved fraction of the roofline (``efficiency.*_fraction``) divides
a phase's time, so 5e-324 turned an epoch time into NaN; one part in 10^9 keeps it finite, and no split or cache
fraction of a real graph is smaller (10^9 vertices would hold one)."""

MAX_BLOCK_DEPTH = 16
"""Deepest nesting of a free-form block (a plan's prediction nests 3 levels, a trace's metadata 5)."""
MAX_BLOCK_ITEMS = 20_000
"""Most values (mapping entries, list items, scalars) in one free-form block (a prediction holds ~60, a trace's
metadata a few hundred per epoch recorded)."""
MAX_STRING_CHARS = 65_536
"""Longest string in a free-form block (names, reasons and version strings are under 1,000 characters)."""


def unit_range(name: str) -> tuple[float, float, str] | None:
    """The plausible (lowest, highest, unit) of a field by its name's unit suffix (:data:`UNIT_RANGES`), or None
    when the name carries no unit with a range (counts, fractions, flags)."""
    for suffix, low, high, unit in UNIT_RANGES:
        if name.endswith(suffix):
            return low, high, unit
    return None


def check_number(path: str, value: float, low: float, high: float, unit: str) -> None:
    """Raise when ``value`` lies outside ``[low, high]``; zero passes when ``low`` is 0.

    Raises:
        ValueError: ``"<path>: <value> <unit> is outside the plausible range <low> to <high> <unit>"``.
    """
    if not low <= value <= high:
        raise ValueError(f"{path}: {value:g} {unit} is outside the plausible range {low:g} to {high:g} {unit}")


def model_numbers(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every number of a pydantic model and its nested models: (dotted path, field name, value); bools are skipped,
    dict fields are walked with their keys as names (``priors``), other containers are walked by index."""
    for name in type(model).model_fields:
        yield from _numbers(getattr(model, name), f"{prefix}{name}", name)


def _numbers(value: Any, path: str, name: str) -> Iterator[tuple[str, str, Any]]:
    if isinstance(value, BaseModel):
        yield from model_numbers(value, f"{path}.")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}", str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}.{i}", name)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, name, value


def check_integers(model: BaseModel) -> None:
    """Every integer of ``model`` (nested models and lists included) fits in a signed 64-bit integer.

    Raises:
        ValueError: naming the first field that does not (``training.fanouts.0: ... does not fit ...``).
    """
    for path, _, value in model_numbers(model):
        if isinstance(value, int) and not -INT64_MAX <= value <= INT64_MAX:
            raise ValueError(f"{path}: {value} does not fit in a 64-bit integer (at most {INT64_MAX})")


def check_unit_ranges(model: BaseModel) -> None:
    """Every number of ``model`` whose name has a unit suffix lies in that unit's plausible range
    (:data:`UNIT_RANGES`), every nonzero ``_fraction`` is at least :data:`MIN_FRACTION`, and every integer fits in
    64 bits. ``priors`` entries are checked by their key's
    suffix (``priors.network.latency_s``).

    Raises:
        ValueError: naming the first field out of range and the range.
    """
    check_integers(model)
    for path, name, value in model_numbers(model):
        found = unit_range(name)
        if found is not None:
            check_number(path, float(value), *found)
        elif name.endswith("_fraction") and 0 < abs(value) < MIN_FRACTION:
            raise ValueError(f"{path}: {value:g} is below the smallest plausible nonzero fraction {MIN_FRACTION:g}")


def check_block(value: Any, max_depth: int = MAX_BLOCK_DEPTH, max_items: int = MAX_BLOCK_ITEMS) -> None:
    """A free-form block is plain data of bounded size: mappings with string keys, lists, strings of at most
    :data:`MAX_STRING_CHARS`, booleans, None, 64-bit integers and finite floats, nested at most ``max_depth``
    levels and holding at most ``max_items`` values. Iterative, so a hostile depth cannot exhaust the stack.

    Raises:
        ValueError: naming the path of the first offending value (``breakdown_s.load: ...``) or the limit.
    """
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    seen = 0
    while stack:
        item, path, depth = stack.pop()
        seen += 1
        if seen > max_items:
            raise ValueError(f"holds more than {max_items} values")
        where = path or "the block"
        if depth > max_depth:
            raise ValueError(f"{where}: nested deeper than {max_depth} levels")
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"{where}: keys must be strings, got {type(key).__name__} {key!r}")
                stack.append((child, f"{path}.{key}" if path else key, depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}.{i}" if path else str(i), depth + 1) for i, child in enumerate(item))
        else:
            _check_scalar(item, where)


def _check_scalar(item: Any, where: str) -> None:
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, str):
        if len(item) > MAX_STRING_CHARS:
            raise ValueError(f"{where}: string longer than {MAX_STRING_CHARS} characters")
    elif isinstance(item, int):
        if not -INT64_MAX <= item <= INT64_MAX:
            raise ValueError(f"{where}: {item} does not fit in a 64-bit integer")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise ValueError(f"{where}: must be a finite number (got {item})")
    else:
        raise ValueError(f"{where}: must be plain data (mapping, list, string, number), got {type(item).__name__}")


SEED_LIMIT = 2**32
"""Seeds run from 0 to ``SEED_LIMIT - 1`` (numpy's and Optuna's samplers' range)."""


def check_seed(name: str, value: Any) -> int:
    """``value`` as a sampler seed in [0, :data:`SEED_LIMIT`).

    Raises:
        SpecError: anything else (a bool, a float, a string, out of range), naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise SpecError(f"{name}: must be an integer from 0 to 2**32 - 1 (got {value!r})")
    return value
