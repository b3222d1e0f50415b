"""The Array API's inspection namespace, `xp.__array_namespace_info__()`: what this namespace can do
(boolean indexing, data-dependent shapes), its devices ('cpu', and 'cuda' where CuPy sees a GPU),
and its dtypes. Defaults are NumPy's, which lazytensor follows: float64 and int64."""
from __future__ import annotations

import numpy as np

from lazytensor.kernels.backend import cuda_usable, default_device as _default_device

_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "integral": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
    "numeric": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
                "complex64", "complex128"),
}


class Info:
    """The object `__array_namespace_info__()` returns (the standard names no class, only methods)."""

    __module__ = "lazytensor.array_api"

    def capabilities(self) -> dict:
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> str:
        return _default_device()

    def devices(self) -> tuple:
        return ("cpu", "cuda") if cuda_usable() else ("cpu",)

    def default_dtypes(self, *, device=None) -> dict:
        _check_device(device)
        return {"real floating": np.dtype(np.float64), "complex floating": np.dtype(np.complex128),
                "integral": np.dtype(np.int64), "indexing": np.dtype(np.int64)}

    def dtypes(self, *, device=None, kind=None) -> dict:
        _check_device(device)
        if kind is None:
            names = ("bool",) + _KINDS["numeric"]
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            for k in kinds:
                if k not in _KINDS:
                    raise ValueError(f"unknown dtype kind {k!r}: expected one of {', '.join(map(repr, _KINDS))}")
            names = tuple(dict.fromkeys(n for k in kinds for n in _KINDS[k]))
        return {n: np.dtype(n) for n in names}


def _check_device(device):
    if device is not None and device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")


def __array_namespace_info__() -> Info:
    return Info()
