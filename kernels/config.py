"""lt.config: the switches of the GPU math, read when a plan is made (PyTorch's defaults and names).

    lt.config.conv_allow_tf32   = True    convolutions in float32 may use TF32 tensor cores
    lt.config.matmul_allow_tf32 = False   float32 matmuls compute in full float32
    lt.config.allow_host        = False   a heavy op cuDNN cannot take on CUDA raises; True: on the host

Design: docs/design/cbr.md, section "kernels/config.py".
"""
from __future__ import annotations

import contextlib
import warnings

_DEFAULTS = {"conv_allow_tf32": True, "matmul_allow_tf32": False, "allow_host": False}
_HELP = {
    "conv_allow_tf32": "float32 convolutions (conv2d, its gradients, the CBR path) may use TF32 tensor cores "
                       "(torch.backends.cudnn.allow_tf32)",
    "matmul_allow_tf32": "float32 matmuls may use TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32)",
    "allow_host": "a heavy op on a CUDA tensor that cuDNN cannot take runs on the host and is copied back, "
                  "with a one-time warning, instead of raising",
}


class HostFallbackWarning(UserWarning):
    """A heavy op on CUDA ran on the host because lt.config.allow_host is on (said once per op and reason)."""


class Config:
    """The switches above. Setting one to a non-bool raises; every change drops the plans kept so far
    (they baked the old math in), so the next call plans again."""

    __slots__ = ("_values", "_listeners")

    def __init__(self):
        object.__setattr__(self, "_values", dict(_DEFAULTS))
        object.__setattr__(self, "_listeners", [])

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"lt.config has no switch {name!r}; its switches: {', '.join(_DEFAULTS)}") from None

    def __setattr__(self, name, value):
        if name not in _DEFAULTS:
            raise AttributeError(f"lt.config has no switch {name!r}; its switches: {', '.join(_DEFAULTS)}")
        if not isinstance(value, bool):
            raise TypeError(f"lt.config.{name} takes True or False; got {value!r}")
        if self._values[name] != value:
            self._values[name] = value
            for listener in list(self._listeners):
                listener()

    def __dir__(self):
        return list(_DEFAULTS) + ["override", "reset", "state", "on_change", "describe"]

    def __repr__(self) -> str:
        return "lt.config(" + ", ".join(f"{k}={v}" for k, v in self._values.items()) + ")"

    @contextlib.contextmanager
    def override(self, **switches):
        """with lt.config.override(conv_allow_tf32=False): ...  (the old values come back on exit)."""
        old = {name: getattr(self, name) for name in switches}
        try:
            for name, value in switches.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in old.items():
                setattr(self, name, value)

    def reset(self) -> None:
        """Every switch back to its default."""
        for name, value in _DEFAULTS.items():
            setattr(self, name, value)

    def state(self) -> tuple:
        """The switches' values, for a cache key (a plan made under other switches is another plan)."""
        return tuple(self._values.values())

    def on_change(self, listener) -> None:
        """Call `listener()` after every change of a switch (the plan caches register here)."""
        self._listeners.append(listener)

    def describe(self) -> str:
        return "\n".join(f"lt.config.{k} = {v}: {_HELP[k]}" for k, v in self._values.items())


config = Config()
_warned: set = set()


def warn_host_once(op: str, reason: str) -> None:
    """The one-time warning that `op` runs on the host (lt.config.allow_host), per (op, reason)."""
    if (op, reason) in _warned:
        return
    _warned.add((op, reason))
    warnings.warn(f"{op} runs on the host and is copied back to the GPU (lt.config.allow_host is True): {reason}",
                  HostFallbackWarning, stacklevel=3)


class UnsupportedOnDevice(RuntimeError):
    """A heavy op on a CUDA tensor that no device library takes (a dtype or layout without an engine),
    raised instead of computing it on the host: the message names the op, the reason and the fixes."""

    def __init__(self, op: str, reason: str, fix: str = ""):
        self.op, self.reason, self.fix = op, reason, fix
        fixes = f"{fix}; or " if fix else ""
        super().__init__(f"{op} cannot run on the GPU: {reason}. To fix: {fixes}set lt.config.allow_host = True "
                         f"to compute it on the host and copy it back (slow; a warning says so once)")


def host_or_raise(op: str, reason: str, fix: str = "") -> None:
    """Where a heavy op on CUDA would go to the host: raise UnsupportedOnDevice, or, with
    lt.config.allow_host, warn once and return (the caller then runs it on the host)."""
    if not config.allow_host:
        raise UnsupportedOnDevice(op, reason, fix)
    warn_host_once(op, reason)
