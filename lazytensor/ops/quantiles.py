"""np.median, percentile, quantile and their NaN-ignoring forms. An order statistic needs the
values sorted, no elementwise work to fuse: the operand is evaluated and the device's array
library (NumPy on the CPU, CuPy on CUDA) computes them into a new tensor, with NumPy's methods,
keywords and dtypes.
"""
from __future__ import annotations

import numpy as np

from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor
from lazytensor.ops.device_arrays import array_module, evaluated
from lazytensor.ops.output import to_out


def _host_q(q):
    """q as a host array (a tensor's values are read: NumPy checks them against [0, 1] first)."""
    if isinstance(q, Operand):
        from lazytensor.assign.evaluate import to_numpy
        return to_numpy(q)
    return q


def _call(name, a, q, axis, out, keepdims, **kwargs):
    t = evaluated(a)
    xp = array_module(t.device)
    if not hasattr(xp, name):
        raise TypeError(f"np.{name} on a {t.device} tensor: {xp.__name__} has no {name}; compute it on the host "
                        f"on purpose with np.{name}(t.numpy(), ...)")
    args = () if q is None else (_q_on(xp, _host_q(q)),)
    result = xp.asarray(getattr(xp, name)(t.data, *args, axis=axis, keepdims=keepdims, **kwargs))
    if xp is not np and name in _PROPAGATES_NAN and t.dtype.kind in "fc":
        # NumPy gives NaN for a slice that holds one, whatever the method; CuPy sorts NaN last and
        # takes its "nearest", "lower", ... element without looking at it.
        nan = xp.isnan(t.data).any(axis=axis, keepdims=keepdims)
        result = xp.where(nan, xp.asarray(np.nan, dtype=result.dtype), result)
    return to_out(Tensor(result, t.device), out)


_PROPAGATES_NAN = ("quantile", "percentile")


def _q_on(xp, q):
    return q if xp is np or np.isscalar(q) else xp.asarray(q)


def _methods(method, weights):
    out = {} if method == "linear" else {"method": method}
    if weights is not None:
        out["weights"] = evaluated(weights).data
    return out


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False) -> Tensor:
    """np.median along `axis` (int, tuple or None); NaN where a slice holds a NaN. Evaluated now
    (a new Tensor): a median sorts its operand. `overwrite_input` is accepted and the operand
    left as it is (NumPy's permission to scramble it, not a duty)."""
    return _call("median", a, None, axis, out, keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False) -> Tensor:
    """np.nanmedian: the median ignoring NaNs. Evaluated now (a new Tensor)."""
    return _call("nanmedian", a, None, axis, out, keepdims)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
             weights=None) -> Tensor:
    """np.quantile: the q-th quantiles (q in [0, 1], a number or an array) along `axis`, with
    NumPy's `method`s. Evaluated now (a new Tensor): a quantile sorts its operand."""
    return _call("quantile", a, q, axis, out, keepdims, **_methods(method, weights))


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
               weights=None) -> Tensor:
    """np.percentile: quantile with q in percent ([0, 100]). Evaluated now (a new Tensor)."""
    return _call("percentile", a, q, axis, out, keepdims, **_methods(method, weights))


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                weights=None) -> Tensor:
    """np.nanquantile: quantile ignoring NaNs. Evaluated now (a new Tensor)."""
    return _call("nanquantile", a, q, axis, out, keepdims, **_methods(method, weights))


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
                  weights=None) -> Tensor:
    """np.nanpercentile: percentile ignoring NaNs. Evaluated now (a new Tensor)."""
    return _call("nanpercentile", a, q, axis, out, keepdims, **_methods(method, weights))
