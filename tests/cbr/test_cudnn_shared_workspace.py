"""cuDNN workspaces: one per graph kind and device, as large as the largest of its graphs needs;
graphs built before a larger one move to it, and a captured CUDA graph keeps the one it was captured
over (its steps' learned values include it). On the CPU with a stand-in for CuPy's allocation."""
import types

import numpy as np

from lazytensor.cbr.cudnn_cache import CompiledConvGraph, ConvGraphCache
from lazytensor.cbr.cudnn_graphs import GraphKind
from lazytensor.reuse.replay import _learned
from lazytensor.plan.steps import Learned


class _Buffer:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.data = types.SimpleNamespace(ptr=id(self))


_cupy = types.SimpleNamespace(empty=lambda n, dtype: _Buffer(n), uint8=np.uint8)


def _entry(cache, kind, name, nbytes):
    workspace = cache._shared_workspace(_cupy, kind, 0, nbytes)
    entry = CompiledConvGraph(None, None, 0, workspace, workspace.data.ptr)
    cache._entries[(kind, name, 0)] = entry
    return entry


def test_graphs_of_one_kind_share_the_largest_workspace():
    cache = ConvGraphCache(table=None)
    small = _entry(cache, GraphKind.CONV_WGRAD, "a", 1 << 20)
    first = small.workspace
    assert _entry(cache, GraphKind.CONV_WGRAD, "b", 1 << 10).workspace is first      # big enough already
    large = _entry(cache, GraphKind.CONV_WGRAD, "c", 8 << 20)
    assert large.workspace.nbytes == 8 << 20 and small.workspace is large.workspace
    assert small.workspace_ptr == large.workspace.data.ptr
    dgrad = _entry(cache, GraphKind.CONV_DGRAD, "a", 2 << 20)
    assert dgrad.workspace is not large.workspace                # another kind: its own
    assert sorted(cache.workspaces()) == [2 << 20, 8 << 20]     # not one per graph: 11 MB


def test_a_captured_graph_keeps_the_workspace_it_was_captured_over():
    cache = ConvGraphCache(table=None)
    entry = _entry(cache, GraphKind.CONV, "a", 1 << 20)

    class Step:
        __slots__ = ("built",)

        def run(self):
            pass
    step = Step()
    step.built = Learned()
    step.built.value = entry
    kept = list(_learned([step]))
    assert kept[0] is entry and kept[1] is entry.workspace
