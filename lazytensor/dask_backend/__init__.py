"""Dask arrays of lazytensor chunks: the `dask.array.backends` entry point ("lazytensor"), the
chunk type in Dask's dispatch tables, and a graph pass that evaluates each task's result in the
task (a chain Dask fused into one task runs as one kernel). Dask is imported only when Dask asks
for lazytensor (the entry point, or a tensor handed to dask.array), never by `import lazytensor`.

Design: docs/design/dask.md
"""
from lazytensor.dask_backend.hooks import register

__all__ = ["register"]
