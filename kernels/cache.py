"""KernelCache: compiled kernels by structural key, in memory, built once even under threads; and the
rules every disk cache of lazytensor follows.

Design: docs/design/caches.md, section "kernels/cache.py".
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from pathlib import Path


class CacheWarning(RuntimeWarning):
    """lazytensor's disk cache: a damaged entry was rebuilt, or the cache folder cannot be used."""


def cache_dir() -> Path:
    """LAZYTENSOR_CACHE_DIR, else the user cache folder."""
    env = os.environ.get("LAZYTENSOR_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lazytensor"


_guard = threading.Lock()
_unusable: dict = {}        # folder -> why it cannot be used (reported once, then skipped)
_reported: set = set()      # damaged files already reported by this process


def _warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=3)


def _root_of(path) -> Path:
    """lazytensor's cache folder when `path` lies in it, else `path` itself (absolute)."""
    root, path = Path(os.path.abspath(cache_dir())), Path(os.path.abspath(path))
    return root if path == root or root in path.parents else path


def disk_unusable(path, why) -> None:
    """Stop using the cache folder holding `path` in this process, after one warning saying why."""
    root = _root_of(path)
    with _guard:
        if str(root) in _unusable:
            return
        _unusable[str(root)] = str(why)
    if isinstance(why, OSError):
        why = f"{type(why).__name__}: {why.strerror or why}" + (f" ({why.filename})" if why.filename else "")
    hint = ("set LAZYTENSOR_CACHE_DIR to a writable folder" if root == _root_of(cache_dir())
            else "make that folder writable, or set NUMBA_CACHE_DIR to a writable folder")
    _warn(f"lazytensor cannot use the disk cache folder {root}: {why}. Running without the disk cache: "
          f"kernels are compiled again in every process. To fix it, {hint}.")


def usable(path) -> bool:
    """False once the cache folder holding `path` was found unusable in this process."""
    return not _unusable or str(_root_of(path)) not in _unusable


def cache_folder(sub: str = "") -> Path | None:
    """cache_dir() / sub, created if needed; None (after one CacheWarning) when it cannot be used."""
    root = cache_dir()
    if _unusable and str(_root_of(root)) in _unusable:
        return None
    folder = root / sub
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        file = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
        disk_unusable(root, f"{file} is a file, not a folder" if file is not None else e)
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        disk_unusable(root, "it is not writable")
        return None
    return folder


def report_damaged(path, why: str) -> None:
    """One CacheWarning naming the damaged entry `path`; the file is deleted, as it is being rebuilt."""
    path = Path(path)
    with _guard:
        first = str(path) not in _reported
        _reported.add(str(path))
    try:
        path.unlink()
    except OSError:
        pass
    if first:
        _warn(f"lazytensor found a damaged disk cache entry, {path} ({why}): it is rebuilt and replaced.")


def write_atomically(path, data) -> bool:
    """Write `data` (bytes or str) to `path` under a temporary name, then rename it into place: a
    reader sees the old entry, the new one, or none, never half of one, and concurrent writers of
    the same entry each rename a complete file. False (after one CacheWarning) when the folder
    cannot be written: the caller goes on without the disk cache."""
    path = Path(path)
    if not usable(path):
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except BaseException as e:          # an interrupt too: no temporary is left behind
        try:
            tmp.unlink()
        except OSError:
            pass
        if not isinstance(e, OSError):
            raise
        disk_unusable(path.parent, e)
        return False


# A sealed entry ends with this tag and the SHA-256 of what precedes it: an entry cut short, emptied
# or overwritten fails the check before a byte of it is used.
_SEAL = b"\n-- lazytensor sha256 "
_SEALED_TAIL = len(_SEAL) + 32


def seal(data: bytes) -> bytes:
    return data + _SEAL + hashlib.sha256(data).digest()


def unseal(blob: bytes) -> bytes | None:
    """The data of a sealed entry, or None when it is damaged."""
    if len(blob) < _SEALED_TAIL or blob[-_SEALED_TAIL:-32] != _SEAL:
        return None
    data = blob[:-_SEALED_TAIL]
    return data if hashlib.sha256(data).digest() == blob[-32:] else None


def read_sealed(path) -> bytes | None:
    """The data of the sealed entry at `path`; None when there is none, or when it was damaged
    (then reported and deleted)."""
    try:
        blob = Path(path).read_bytes()
    except OSError:
        return None
    data = unseal(blob)
    if data is None:
        report_damaged(path, "cut short or overwritten: its checksum does not match" if blob else "empty")
    return data


def write_sealed(path, data: bytes) -> bool:
    return write_atomically(path, seal(data))


class ChoicesFile:
    """A small JSON table in the cache folder, key -> a measured choice (the CBR stage-1, dBN and
    backward-stream choices): read whole and checked by `valid` (a value that fails it, or a file
    that is not a JSON object, is a damaged entry: one CacheWarning, deleted, measured again);
    written whole under a temporary name and renamed into place. Two processes adding a choice at
    once may drop one of them: it is measured again, never wrong."""

    def __init__(self, name: str, valid):
        self.name, self.valid = name, valid

    def load(self) -> dict:
        folder = cache_folder()
        if folder is None:
            return {}
        path = folder / self.name
        try:
            text = path.read_bytes()
        except OSError:
            return {}
        try:
            table = json.loads(text)
            if not isinstance(table, dict):
                raise ValueError(f"it holds a {type(table).__name__}, not an object")
            for key, value in table.items():
                if not self.valid(value):
                    raise ValueError(f"its entry for {key} is {value!r}")
        except ValueError as e:     # JSONDecodeError and UnicodeDecodeError included
            report_damaged(path, str(e)[:200])
            return {}
        return table

    def get(self, key):
        return self.load().get(key)

    def put(self, key: str, value) -> None:
        folder = cache_folder()
        if folder is None:
            return
        table = self.load()
        table[key] = value
        write_atomically(folder / self.name, json.dumps(table, indent=1))


class Unkept:
    """A build's result that get_or_build returns without keeping it (a recorded stand-in)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class KernelCache:
    def __init__(self):
        self._kernels: dict = {}
        self._locks: dict = {}
        self._guard = threading.Lock()

    def get(self, key):
        return self._kernels.get(key)

    def get_or_build(self, key, build):
        """The kernel for key; `build()` runs at most once per key, other threads wait for it."""
        kernel = self._kernels.get(key)
        if kernel is not None:
            return kernel
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            kernel = self._kernels.get(key)
            if kernel is None:
                kernel = build()
                if isinstance(kernel, Unkept):
                    return kernel.value
                self._kernels[key] = kernel
        return kernel

    def clear(self):
        with self._guard:
            self._kernels.clear()
            self._locks.clear()

    def __len__(self):
        return len(self._kernels)
