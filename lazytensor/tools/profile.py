"""lt.profile(): collect one record per kernel launch inside a `with` block."""
from __future__ import annotations

from contextlib import contextmanager

from lazytensor.kernels import launch_log


class Profile:
    def __init__(self):
        self.kernels: list = []   # KernelRecord per launch: name, backend, elements, cache, compile_seconds

    @property
    def launches(self) -> int:
        return len(self.kernels)

    def to_pandas(self):
        """The launches as a pandas DataFrame, one row each (pandas is an optional extra:
        pip install 'lazytensor[notebooks]')."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("Profile.to_pandas needs pandas: pip install 'lazytensor[notebooks]' "
                              "(or pip install pandas)") from exc
        columns = ["kernel", "backend", "kind", "elements", "cache", "compile_seconds"]
        return pd.DataFrame([(k.name, k.backend, k.kind, k.elements, k.cache, k.compile_seconds)
                             for k in self.kernels], columns=columns)

    def __repr__(self):
        rows = [f"{'kernel':24} {'backend':7} {'kind':11} {'elements':>10} {'cache':9} {'compile s':>9}"]
        for k in self.kernels:
            rows.append(f"{k.name:24} {k.backend:7} {k.kind:11} {k.elements:>10} {k.cache:9} {k.compile_seconds:>9.3f}")
        return "\n".join(rows)


@contextmanager
def profile():
    p = Profile()
    with launch_log.listening(p.kernels):
        yield p
