"""lt.fft: NumPy's np.fft over lazy tensors, with its names, signatures and dtypes (NumPy 2 keeps
float32 and complex64 in single precision). Each transform is a heavy node (op "fft") over its operand:
pocketfft through NumPy on the CPU, cuFFT through CuPy on CUDA (lazytensor.plan.heavy.fft); the
elementwise work before it fuses into the kernel evaluating its operand, the work after it into the
next kernel. fftfreq and rfftfreq are tensors made lazily from arange; fftshift and ifftshift are rolls."""
from __future__ import annotations

import operator

import numpy as np

from lazytensor.core import tensor as _tensor
from lazytensor.core.expr import Expr, astype
from lazytensor.core.operand import Operand
from lazytensor.kernels.fft import ONE_AXIS
from lazytensor.kernels.ops import real_dtype
from lazytensor.ops.joining import roll

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_dtypes: dict = {}


def _operand(x):
    if isinstance(x, Operand):
        return x
    return _tensor.as_node(x if isinstance(x, np.ndarray) else np.asarray(x))


def _result_dtype(fn: str, dtype: np.dtype) -> np.dtype:
    """NumPy's result dtype of `fn` for `dtype` operands, asked of NumPy once on a tiny array."""
    key = (fn, dtype)
    out = _dtypes.get(key)
    if out is None:
        out = _dtypes[key] = np.dtype(getattr(np.fft, fn)(np.ones((4,) * (1 if ONE_AXIS[fn] else 2), dtype)).dtype)
    return out


def _axis(axis, ndim) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def _last_size(fn: str, n: int | None, m: int) -> int:
    """The length of the transformed axis in the result, for input length m and NumPy's n."""
    if fn in ("irfft", "irfftn", "hfft"):
        size = 2 * (m - 1) if n is None else n
    else:
        size = m if n is None else n
    if size < 1:
        raise ValueError(f"Invalid number of FFT data points ({size}) specified.")
    return size // 2 + 1 if fn in ("rfft", "rfftn", "ihfft") else size


def _node(fn, x, shape, params):
    """The node of transform `fn`, its operand cast to the dtype the transform computes in (as NumPy
    does): the result's for complex-to-complex transforms, its real dtype for real-to-complex ones
    (rfft, rfftn, ihfft), the complex of its width for complex-to-real ones (irfft, irfftn, hfft)."""
    dtype = _result_dtype(fn, x.dtype)
    if fn in ("rfft", "rfftn", "ihfft"):
        src = real_dtype(dtype)
    elif fn in ("irfft", "irfftn", "hfft"):
        src = np.dtype(np.complex64 if dtype == np.float32 else np.complex128)
    else:
        src = dtype
    return Expr("fft", (astype(x, src),), tuple(shape), dtype, x.device, heavy=True, attrs=(fn, params))


def _one_axis(fn, a, n, axis, norm):
    a = _operand(a)
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    if a.ndim == 0:
        raise ValueError("fft of a 0-d array: it needs at least one axis")
    axis = _axis(axis, a.ndim)
    n = None if n is None else operator.index(n)
    shape = list(a.shape)
    shape[axis] = _last_size(fn, n, a.shape[axis])
    if 0 in shape and fn not in ("irfft", "hfft"):
        raise ValueError(f"Invalid number of FFT data points ({shape[axis]}) specified.")
    return _node(fn, a, shape, (n, axis, norm))


def _many_axes(fn, a, s, axes, norm):
    a = _operand(a)
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    if axes is None:
        axes = tuple(range(a.ndim)) if s is None else tuple(range(a.ndim - len(s), a.ndim))
    axes = tuple(_axis(ax, a.ndim) for ax in (axes if isinstance(axes, (tuple, list)) else (axes,)))
    if s is not None:
        s = tuple(operator.index(k) for k in s)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    shape = list(a.shape)
    for k, ax in enumerate(axes):
        size = None if s is None else s[k]
        last = k == len(axes) - 1
        if last:
            shape[ax] = _last_size(fn, size, a.shape[ax])
        else:
            shape[ax] = a.shape[ax] if size is None else size
    return _node(fn, a, shape, (s, axes, norm))


def fft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.fft: the 1-D discrete Fourier transform along `axis`."""
    return _written(_one_axis("fft", a, n, axis, norm), out)


def ifft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.ifft: the 1-D inverse transform."""
    return _written(_one_axis("ifft", a, n, axis, norm), out)


def rfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.rfft: the 1-D transform of real input, n // 2 + 1 frequencies."""
    return _written(_one_axis("rfft", a, n, axis, norm), out)


def irfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.irfft: the inverse of rfft, n real values (2 * (m - 1) by default)."""
    return _written(_one_axis("irfft", a, n, axis, norm), out)


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.hfft: the transform of a Hermitian-symmetric signal, n real values."""
    return _written(_one_axis("hfft", a, n, axis, norm), out)


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """np.fft.ihfft: the inverse of hfft, n // 2 + 1 complex values."""
    return _written(_one_axis("ihfft", a, n, axis, norm), out)


def fftn(a, s=None, axes=None, norm=None, out=None):
    """np.fft.fftn: the N-D transform over `axes` (all by default)."""
    return _written(_many_axes("fftn", a, s, axes, norm), out)


def ifftn(a, s=None, axes=None, norm=None, out=None):
    return _written(_many_axes("ifftn", a, s, axes, norm), out)


def rfftn(a, s=None, axes=None, norm=None, out=None):
    return _written(_many_axes("rfftn", a, s, axes, norm), out)


def irfftn(a, s=None, axes=None, norm=None, out=None):
    return _written(_many_axes("irfftn", a, s, axes, norm), out)


def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return fftn(a, s, axes, norm, out)


def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return ifftn(a, s, axes, norm, out)


def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return rfftn(a, s, axes, norm, out)


def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return irfftn(a, s, axes, norm, out)


def _written(expr, out):
    if out is None:
        return expr
    from lazytensor.assign.evaluate import assign
    assign(out, expr)
    return out


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """np.fft.fftfreq: the sample frequencies [0, 1, ..., n/2 - 1, -n/2, ..., -1] / (d * n) (float64
    unless `dtype`)."""
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    k = np.arange(n)
    k = np.where(k < (n + 1) // 2, k, k - n)
    values = (k / (d * n))
    return _tensor.asarray(values.astype(dtype) if dtype is not None else values, device=device)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """np.fft.rfftfreq: [0, 1, ..., n // 2] / (d * n)."""
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    values = np.arange(n // 2 + 1) / (d * n)
    return _tensor.asarray(values.astype(dtype) if dtype is not None else values, device=device)


def _shift(x, axes, sign):
    x = _operand(x)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif not isinstance(axes, (tuple, list)):
        axes = (axes,)
    axes = tuple(_axis(a, x.ndim) for a in axes)
    shifts = tuple((x.shape[a] // 2) if sign > 0 else -(x.shape[a] // 2) for a in axes)
    return roll(x, shifts, axes) if axes else x


def fftshift(x, axes=None):
    """np.fft.fftshift: the zero frequency moved to the middle (a roll by n // 2 along each axis)."""
    return _shift(x, axes, 1)


def ifftshift(x, axes=None):
    """np.fft.ifftshift: fftshift's inverse (a roll by -(n // 2))."""
    return _shift(x, axes, -1)
