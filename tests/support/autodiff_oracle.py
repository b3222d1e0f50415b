"""The oracle of the gradient tests: central finite differences in float64, computed by NumPy.

`numpy_value(expr, values)` evaluates a lazytensor expression DAG with NumPy alone, node by node
(each elementwise op by its NumPy reference in kernels.ops.OPS, reductions by np.sum / np.prod /
..., views by NumPy indexing, transposes, reshapes and broadcasts), with some tensors' values
replaced: a view tensor is recomputed from its base's (replaced) value through its recorded steps,
so perturbing `a` perturbs `a[::2]` too. Nothing of lazytensor's planning or kernels is used.

`finite_difference(expr, inputs, weights)` is the gradient of sum(expr * weights) with respect to
each input by central differences, with NaN where the function is not smooth at that element
(two step sizes disagree: a kink or a jump within reach).
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.expr import Const
from lazytensor.core.tensor import Tensor
from lazytensor.kernels.ops import OPS

_NUMPY_REDUCTIONS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean,
                     "any": np.any, "all": np.all, "argmax": np.argmax, "argmin": np.argmin}


def _index(key):
    return tuple(slice(*k[1:]) if isinstance(k, tuple) else k for k in key)


def apply_view(a, step):
    kind, arg = step
    if kind == "index":
        return a[_index(arg)]
    if kind == "transpose":
        return np.transpose(a, arg)
    if kind == "broadcast":
        return np.broadcast_to(a, arg)
    if kind == "reshape":
        return np.reshape(a, arg)
    raise AssertionError(kind)


def numpy_value(root, values: dict | None = None) -> np.ndarray:
    """root's value computed by NumPy; values: id(tensor) -> array replacing that tensor's value."""
    values = dict(values or {})
    memo: dict = {}

    def value(node):
        key = id(node)
        if key in memo:
            return memo[key]
        if isinstance(node, Const):
            out = node.dtype.type(node.value)
        elif isinstance(node, Tensor):
            if key in values:
                out = values[key]
            elif node.view_of is not None:
                base, steps = node.view_of
                out = value(base)
                for step, _ in steps:
                    out = apply_view(out, step)
            else:
                out = node.numpy()
        else:
            args = [value(a) for a in node.args]
            with np.errstate(all="ignore"):
                out = np.asarray(_op(node, args))
            if out.dtype != node.dtype:
                out = out.astype(node.dtype)
        memo[key] = out
        return out
    return np.asarray(value(root))


def _op(node, args):
    if node.op == "astype":
        return args[0].astype(node.dtype)
    if node.op == "materialize":
        return apply_view(args[0], node.attrs[0])
    if node.op == "reduce":
        spec = node.attrs
        x = args[0]
        if spec.kind == "var":
            out = np.var(x.astype(spec.acc_dtype), axis=spec.axes, ddof=spec.ddof)
            return np.sqrt(out) if spec.root else out
        if spec.kind in ("argmax", "argmin"):
            return _NUMPY_REDUCTIONS[spec.kind](x, axis=spec.axes[0])
        acc = spec.acc_dtype if spec.acc_dtype.kind == "f" else None
        return _NUMPY_REDUCTIONS[spec.kind](x if acc is None else x.astype(acc), axis=spec.axes)
    return OPS[node.op].reference(*args)


def finite_difference(expr, inputs, weights, h: float = 1e-6) -> list:
    """d sum(expr * weights) / d input, per input (float64 arrays), by central differences; NaN
    where steps of h and h / 4 disagree (not smooth there)."""
    weights = np.asarray(weights, np.float64)
    base = {id(x): x.numpy().astype(np.float64) for x in inputs}

    def loss(key, index, delta):
        values = dict(base)
        v = values[key].copy()
        v[index] += delta
        values[key] = v
        return float(np.sum(numpy_value(expr, values).astype(np.float64) * weights))

    out = []
    for x in inputs:
        key = id(x)
        grad = np.empty(x.shape, np.float64)
        for index in np.ndindex(*x.shape):
            step = h * max(1.0, abs(base[key][index]))
            coarse = (loss(key, index, step) - loss(key, index, -step)) / (2 * step)
            fine = (loss(key, index, step / 4) - loss(key, index, -step / 4)) / (step / 2)
            smooth = abs(coarse - fine) <= 1e-4 * max(1.0, abs(coarse))
            grad[index] = coarse if smooth else np.nan
        out.append(grad)
    return out


def assert_gradients_match(got, expected, rtol=1e-5, atol=1e-6, context=""):
    """got (lazytensor's gradients) against finite differences, where those are defined."""
    for k, (g, e) in enumerate(zip(got, expected)):
        g = np.asarray(g, np.float64)
        assert g.shape == e.shape, f"{context}: gradient {k} has shape {g.shape}, expected {e.shape}"
        defined = np.isfinite(e)
        close = np.abs(g - e) <= atol + rtol * np.abs(e)
        bad = defined & ~close
        if bad.any():
            idx = tuple(np.argwhere(bad)[0])
            raise AssertionError(f"{context}: gradient {k}: {int(bad.sum())} of {bad.size} elements differ from "
                                 f"finite differences; first at {idx}: lazytensor {g[idx]!r}, finite difference "
                                 f"{e[idx]!r}")


def complex_finite_differences(f, z, h=1e-6):
    """dL/dx + i dL/dy of a real NumPy function f at every element of z (complex128), by central
    differences along each part (PyTorch's convention for complex gradients); a real z: dL/dx alone."""
    g = np.zeros(z.shape, np.complex128)
    for idx in np.ndindex(z.shape):
        for step in (1, 1j) if z.dtype.kind == "c" else (1,):
            zp, zm = z.copy(), z.copy()
            zp[idx] += h * step
            zm[idx] -= h * step
            g[idx] += step * (f(zp) - f(zm)) / (2 * h)
    return g if z.dtype.kind == "c" else g.real
