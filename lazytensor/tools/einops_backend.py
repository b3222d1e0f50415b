"""einops' backend for lazytensor arrays: einops.rearrange, reduce, repeat, einsum, pack and unpack
take tensors and expressions and return lazy results. einops finds backends as subclasses of its
AbstractBackend, so the class is defined when einops loads that module (an import hook installed
by `import lazytensor`, which itself never imports einops) or at once if einops is already loaded."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys

_MODULE = "einops._backends"


def install() -> None:
    """Give einops a lazytensor backend now if it is loaded, else when it is."""
    if _MODULE in sys.modules:
        define(sys.modules[_MODULE])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    """Finds einops._backends through the other finders and loads it with define() run after."""

    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenDefine(spec.loader)
        return spec


class _ThenDefine(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        define(module)


def define(einops_module) -> None:
    """The backend class, kept on einops' module (einops lists subclasses, which are weakly held)."""
    if hasattr(einops_module, "LazytensorBackend"):
        return
    from lazytensor.core.operand import Operand

    class LazytensorBackend(einops_module.AbstractBackend):
        framework_name = "lazytensor"

        def is_appropriate_type(self, tensor):
            return isinstance(tensor, Operand)

        def from_numpy(self, x):
            from lazytensor.core.tensor import asarray
            return asarray(x)

        def to_numpy(self, x):
            return x.numpy()

        def arange(self, start, stop):
            from lazytensor.core.tensor import arange
            return arange(start, stop)

        def stack_on_zeroth_dimension(self, tensors: list):
            from lazytensor.ops.joining import stack
            return stack(tensors)

        def add_axis(self, x, new_position):
            from lazytensor.ops.views import expand_dims
            return expand_dims(x, new_position)

        def add_axes(self, x, n_axes, pos2len):
            # A broadcast view made a value of its own (einops' other backends tile: a copy), lazily.
            from lazytensor.core.expr import apply
            from lazytensor.ops.views import broadcast_to, expand_dims
            shape = [1] * n_axes
            for position in sorted(pos2len):
                x = expand_dims(x, position)
            for i, d in enumerate(x.shape):
                shape[i] = pos2len.get(i, d)
            x = broadcast_to(x, tuple(shape))
            return apply("trunc", x) if x.dtype.kind in "biu" else apply("add", x, -0.0)

        def tile(self, x, repeats):
            from lazytensor.ops.joining import tile
            return tile(x, repeats)

        def concat(self, tensors, axis: int):
            from lazytensor.ops.joining import concatenate
            return concatenate(tensors, axis=axis)

        def is_float_type(self, x):
            return x.dtype.kind == "f"

        def einsum(self, pattern, *x):
            from lazytensor.ops.einsum import einsum
            return einsum(pattern, *x)

    einops_module.LazytensorBackend = LazytensorBackend
