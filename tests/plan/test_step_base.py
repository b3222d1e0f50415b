"""Every step class of the planner follows lazytensor.plan.steps.Step: the contract plan recipes
(lazytensor.reuse.recipes) rebuild steps by, slots only, with run, describe and capture_refusal."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import lazytensor.plan
from lazytensor.kernels.cpu.backend import CpuBackend
from lazytensor.kernels.cuda.backend import CudaBackend
from lazytensor.plan.steps import Step, first_refusal


def _step_classes():
    for module in pkgutil.walk_packages(lazytensor.plan.__path__, "lazytensor.plan."):
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if cls.__module__ == module.name and callable(getattr(cls, "run", None)) and hasattr(cls, "describe"):
                yield cls


def test_every_step_class_is_a_step_of_slots_only():
    classes = list(_step_classes())
    assert len(classes) > 20
    for cls in classes:
        assert issubclass(cls, Step), cls
        assert all("__slots__" in c.__dict__ for c in cls.__mro__[:-1]), cls     # no __dict__: a recipe sets slots
        for name in ("run", "describe", "capture_refusal"):
            assert callable(getattr(cls, name)), (cls, name)


def test_the_default_refusal_is_the_backends():
    class Launch(Step):
        __slots__ = ("backend",)

    on = Launch.__new__(Launch)
    on.backend = CudaBackend.__new__(CudaBackend)     # capabilities are class attributes: no device needed
    off = Launch.__new__(Launch)
    off.backend = CpuBackend()
    assert first_refusal([on]) is None
    assert first_refusal([on, off]) == "the cpu backend has no graphs"
    assert first_refusal([object()]) == "object steps cannot be captured"
