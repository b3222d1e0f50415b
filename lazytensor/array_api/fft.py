"""The Array API's fft extension (`xp.fft`), the standard's signatures over lt.fft (lazytensor.ops.fft):
positional-only arrays, keyword-only options, `device` for the frequency functions, and
fftshift/ifftshift over all axes by default."""
from __future__ import annotations

from lazytensor.ops import fft as _fft

__all__ = ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def _one(name):
    def f(x, /, *, n=None, axis=-1, norm="backward"):
        return getattr(_fft, name)(x, n=n, axis=axis, norm=norm)
    f.__name__ = f.__qualname__ = name
    return f


def _many(name):
    def f(x, /, *, s=None, axes=None, norm="backward"):
        return getattr(_fft, name)(x, s=s, axes=axes, norm=norm)
    f.__name__ = f.__qualname__ = name
    return f


fft, ifft, rfft, irfft, hfft, ihfft = (_one(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"))
fftn, ifftn, rfftn, irfftn = (_many(n) for n in ("fftn", "ifftn", "rfftn", "irfftn"))


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _fft.fftfreq(n, d, dtype=dtype, device=device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    return _fft.rfftfreq(n, d, dtype=dtype, device=device)


def fftshift(x, /, *, axes=None):
    return _fft.fftshift(x, axes)


def ifftshift(x, /, *, axes=None):
    return _fft.ifftshift(x, axes)
