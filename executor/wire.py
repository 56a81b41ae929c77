"""What crosses between processes, as JSON: ranks' objects in :mod:`executor.comm` and the launcher's program,
messages and results in :mod:`executor.launch`. Nothing is pickled (DESIGN.md, "Errors and data safety": never
unpickle what another process sent), so a peer can send data but never code.

JSON values (``None``, ``bool``, ``int``, ``float`` including NaN/inf, ``str``, lists, dicts with string keys) are
themselves; other values are tagged objects ``{"$": tag, ...}``:

* ``tuple`` and dicts with non-string keys or a ``"$"`` key: their items;
* ``torch.Tensor`` and ``numpy.ndarray`` / numpy scalars: dtype, shape and the raw bytes in base64 (exact, any
  dtype, including bfloat16; numpy object arrays are refused);
* ``pathlib.Path``: its string;
* dataclass instances and pydantic models whose class lives in the ``gnnplan`` package: the class's import path
  and the fields (a decoder imports only ``gnnplan.*`` classes, checks they are dataclasses / pydantic models, and
  builds them from the fields, validating pydantic models).

Anything else (lambdas, open files, arbitrary classes) raises ``TypeError`` naming the type.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

PACKAGE = "gnnplan."
"""Only classes of this package are rebuilt from their import path."""

TAG = "$"


def encode(obj: Any) -> bytes:
    """``obj`` as UTF-8 JSON (module docstring).

    Raises:
        TypeError: a value of a type that cannot cross.
    """
    return json.dumps(_pack(obj), separators=(",", ":")).encode()


def decode(data: bytes | bytearray | memoryview) -> Any:
    """The object :func:`encode` was given.

    Raises:
        ValueError: not JSON written by :func:`encode`, or a class outside the ``gnnplan`` package.
    """
    try:
        tree = json.loads(bytes(data).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"wire: not a JSON message ({exc})") from None
    return _unpack(tree)


def _pack(obj: Any) -> Any:
    if obj is None or isinstance(obj, (bool, int, float, str)) and not isinstance(obj, np.generic):
        return obj
    if isinstance(obj, list):
        return [_pack(v) for v in obj]
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return {TAG: "tuple", "items": [_pack(v) for v in obj]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and TAG not in obj:
            return {k: _pack(v) for k, v in obj.items()}
        return {TAG: "dict", "items": [[_pack(k), _pack(v)] for k, v in obj.items()]}
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {TAG: "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "data": base64.b64encode(raw).decode()}
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        if arr.dtype.hasobject:
            raise TypeError("wire: numpy object arrays cannot cross between processes")
        return {TAG: "ndarray", "scalar": isinstance(obj, np.generic), "dtype": arr.dtype.str,
                "shape": list(arr.shape), "data": base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode()}
    if isinstance(obj, Path):
        return {TAG: "path", "value": str(obj)}
    return _pack_class(obj)


def _pack_class(obj: Any) -> Any:
    cls = type(obj)
    name = f"{cls.__module__}:{cls.__qualname__}"
    if not cls.__module__.startswith(PACKAGE):
        raise TypeError(f"wire: a {name} cannot cross between processes (JSON values, tensors, arrays and gnnplan "
                        "dataclasses / pydantic models can)")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {TAG: "dataclass", "type": name,
                "fields": {f.name: _pack(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if hasattr(obj, "model_dump") and hasattr(cls, "model_validate"):
        return {TAG: "model", "type": name, "data": obj.model_dump(mode="json")}
    raise TypeError(f"wire: a {name} cannot cross between processes (not a dataclass or pydantic model)")


def _unpack(tree: Any) -> Any:
    if isinstance(tree, list):
        return [_unpack(v) for v in tree]
    if not isinstance(tree, dict):
        return tree
    tag = tree.get(TAG)
    if tag is None:
        return {k: _unpack(v) for k, v in tree.items()}
    if tag == "tuple":
        return tuple(_unpack(v) for v in tree["items"])
    if tag == "dict":
        return {_unpack(k): _unpack(v) for k, v in tree["items"]}
    if tag == "tensor":
        raw = bytearray(base64.b64decode(tree["data"]))
        dtype = getattr(torch, tree["dtype"])
        if not raw:
            return torch.empty(tree["shape"], dtype=dtype)
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(tree["shape"]).clone()
    if tag == "ndarray":
        arr = np.frombuffer(base64.b64decode(tree["data"]), dtype=np.dtype(tree["dtype"])).reshape(tree["shape"])
        return arr[()] if tree["scalar"] else arr.copy()
    if tag == "path":
        return Path(tree["value"])
    if tag in ("dataclass", "model"):
        return _unpack_class(tag, tree)
    raise ValueError(f"wire: unknown tag {tag!r}")


def _unpack_class(tag: str, tree: dict[str, Any]) -> Any:
    module, _, qualname = str(tree["type"]).partition(":")
    if not module.startswith(PACKAGE):
        raise ValueError(f"wire: refusing to build {tree['type']!r} (only gnnplan classes)")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if tag == "model":
        return cls.model_validate(tree["data"])
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"wire: {tree['type']!r} is not a dataclass")
    values = {k: _unpack(v) for k, v in tree["fields"].items()}
    init = {f.name for f in dataclasses.fields(cls) if f.init}
    obj = cls(**{k: v for k, v in values.items() if k in init})
    for k, v in values.items():
        if k not in init:
            object.__setattr__(obj, k, v)
    return obj
