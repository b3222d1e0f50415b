"""numba's disk cache, made to follow lazytensor's cache rules (kernels/cache.py).

Design: docs/design/caches.md, section "kernels/cpu/numba_cache.py".
"""
from __future__ import annotations

import io
import os
import pickle

import numba
from numba.core import caching, registry
from numba.core.serialize import dumps

from lazytensor.kernels.cache import disk_unusable, read_sealed, report_damaged, usable, write_sealed

_FORMAT = 1


class CheckedCacheFile:
    """The index and data files of one function (what numba's IndexDataCacheFile does), checked."""

    def __init__(self, cache_path, filename_base, source_stamp):
        self._cache_path = cache_path
        self._index_path = os.path.join(cache_path, f"{filename_base}.lt.nbi")
        self._data_pattern = f"{filename_base}.lt.{{}}.nbc"     # names, not paths: a folder may move
        self._source_stamp = source_stamp
        self._version = (numba.__version__, _FORMAT)

    def flush(self):
        self._save_index({})

    def save(self, key, data):
        overloads = self._load_index()
        name = overloads.get(key)
        if name is None:
            taken = set(overloads.values())
            n = 1
            while self._data_pattern.format(n) in taken:
                n += 1
            name = overloads[key] = self._data_pattern.format(n)
            self._save_index(overloads)
        write_sealed(self.data_path(name), dumps((key, data)))

    def data_path(self, name: str) -> str:
        return os.path.join(self._cache_path, os.path.basename(name))

    def load(self, key):
        name = self._load_index().get(key)
        if name is None:
            return None
        path = self.data_path(name)
        blob = read_sealed(path)
        if blob is None:
            return None
        try:
            stored_key, data = pickle.loads(blob)
        except Exception as e:  # noqa: BLE001  (checksum right, content not: written by something else)
            report_damaged(path, f"{type(e).__name__}: {e}")
            return None
        return data if stored_key == key else None

    def _load_index(self) -> dict:
        blob = read_sealed(self._index_path)
        if blob is None:
            return {}
        try:
            f = io.BytesIO(blob)
            version = pickle.load(f)
            if version != self._version:
                return {}
            stamp, overloads = pickle.loads(f.read())
        except Exception as e:  # noqa: BLE001
            report_damaged(self._index_path, f"{type(e).__name__}: {e}")
            return {}
        if stamp != self._source_stamp or not isinstance(overloads, dict):
            return {}       # the source changed: stale, not damaged; the next save replaces it
        return overloads

    def _save_index(self, overloads):
        blob = pickle.dumps(self._version, protocol=-1) + dumps((self._source_stamp, overloads))
        write_sealed(self._index_path, blob)


class CheckedFunctionCache(caching.FunctionCache):
    """numba's FunctionCache over CheckedCacheFile; a cached entry numba cannot rebuild is reported
    and compiled afresh, and a folder that cannot be written turns the disk cache off."""

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = CheckedCacheFile(self._cache_path, self._impl.filename_base,
                                            self._impl.locator.get_source_stamp())

    def _load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        key = self._index_key(sig, target_context.codegen())
        data = self._cache_file.load(key)
        if data is None:
            return None
        try:
            return self._impl.rebuild(target_context, data)
        except Exception as e:  # noqa: BLE001  (whatever the damage: compile afresh)
            name = self._cache_file._load_index().get(key)
            report_damaged(self._cache_file.data_path(name) if name else self._cache_file._index_path,
                           f"numba could not rebuild it: {type(e).__name__}: {e}")
            return None

    def save_overload(self, sig, data):
        if not usable(self._cache_path):
            return
        try:
            super().save_overload(sig, data)
        except OSError as e:
            disk_unusable(self._cache_path, e)
            self.disable()


def checked(dispatcher):
    """`dispatcher` (numba, cache=True) with a CheckedFunctionCache in place of numba's own; returned."""
    cache = getattr(dispatcher, "_cache", None)
    if isinstance(cache, caching.FunctionCache) and not isinstance(cache, CheckedFunctionCache):
        dispatcher._cache = CheckedFunctionCache(dispatcher.py_func)
    return dispatcher


def check_module(module) -> None:
    """Give every cached numba function of `module` a checked cache."""
    for value in list(vars(module).values()):
        if isinstance(value, registry.CPUDispatcher):
            checked(value)
