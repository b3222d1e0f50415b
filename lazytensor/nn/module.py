"""Module: what every layer shares, as in PyTorch: parameters and buffers found by walking the
attributes, train()/eval(), and state dicts of NumPy arrays in PyTorch's layout.

Calling a module builds its lazy expression (nothing runs), so a whole network's forward is one
expression DAG: `lt.evaluate(model(x))` plans it at once, `lt.grad` differentiates it, and the
elementwise work between heavy steps fuses across layers.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.tensor import Tensor, asarray


class Module:
    training: bool = True

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):
        raise NotImplementedError(f"{type(self).__name__} defines no forward")

    # -- what a module holds -------------------------------------------------------------------
    def _own(self, kind: str):
        """(name, tensor) of this module's own parameters ('params') or buffers ('buffers')."""
        for name in getattr(self, f"_{kind}", ()):
            yield name, getattr(self, name)

    def children(self):
        for value in vars(self).values():
            if isinstance(value, Module):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from (v for v in value if isinstance(v, Module))

    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield from value.named_modules(f"{prefix}{name}.")
            elif isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    if isinstance(v, Module):
                        yield from v.named_modules(f"{prefix}{i}." if name == "layers" else f"{prefix}{name}.{i}.")

    def named_parameters(self):
        for prefix, module in self.named_modules():
            for name, t in module._own("params"):
                yield prefix + name, t

    def parameters(self) -> list:
        return [t for _, t in self.named_parameters()]

    def named_buffers(self):
        for prefix, module in self.named_modules():
            for name, t in module._own("buffers"):
                yield prefix + name, t

    def train(self, mode: bool = True):
        for _, module in self.named_modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    # -- state dicts in PyTorch's layout -------------------------------------------------------
    def to_torch_layout(self, name: str, value: np.ndarray) -> np.ndarray:
        """A tensor of this module as PyTorch stores it (modules with another layout override)."""
        return value

    def from_torch_layout(self, name: str, value: np.ndarray) -> np.ndarray:
        return value

    def state_dict(self) -> dict:
        """{PyTorch name: NumPy array in PyTorch's layout}: parameters and buffers."""
        out = {}
        for prefix, module in self.named_modules():
            for kind in ("params", "buffers"):
                for name, t in module._own(kind):
                    out[prefix + name] = module.to_torch_layout(name, t.numpy())
        return out

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Copy arrays in PyTorch's layout (NCHW/KCRS; a torch state_dict through .numpy()) into this
        module's tensors, converting to lazytensor's layout (NHWC/KRSC) and to each tensor's dtype.
        strict: every name must match both ways (PyTorch's num_batches_tracked is ignored)."""
        missing = []
        seen = set()
        for prefix, module in self.named_modules():
            for kind in ("params", "buffers"):
                for name, t in module._own(kind):
                    key = prefix + name
                    if key not in state:
                        missing.append(key)
                        continue
                    seen.add(key)
                    value = module.from_torch_layout(name, np.asarray(state[key]))
                    if value.shape != t.shape:
                        raise ValueError(f"load_state_dict: {key} has shape {value.shape} after conversion to "
                                         f"lazytensor's layout; the module's tensor has {t.shape}")
                    t[...] = asarray(np.ascontiguousarray(value).astype(t.dtype), device=t.device)
        unexpected = [k for k in state if k not in seen and not k.endswith("num_batches_tracked")]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                           f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")

    def __repr__(self):
        inner = [f"  ({name or '-'}): {type(m).__name__}" for name, m in list(self.named_modules())[1:]
                 if name.count(".") <= 1]
        return f"{type(self).__name__}(\n" + "\n".join(inner) + "\n)" if inner else f"{type(self).__name__}()"


def parameter(values: np.ndarray, dtype, device) -> Tensor:
    return asarray(np.ascontiguousarray(values).astype(dtype), device=device)
