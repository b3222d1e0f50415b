"""Backends are asked what they can do (kernels.backend.Backend's capabilities), never who they are:
no comparison of a backend's name and no hasattr/getattr probe of a backend in the library."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lazytensor.kernels.backend import Backend, backend_for
from lazytensor.kernels.cpu.backend import CpuBackend
from lazytensor.kernels.cuda.backend import CudaBackend

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("lazytensor", "kernels", "cbr")


def _mentions_backend(node) -> bool:
    return "backend" in ast.unparse(node).lower()


def _device_string(node) -> bool:
    """A string constant naming a device, or a tuple/list/set of them."""
    if isinstance(node, ast.Constant):
        return node.value in ("cpu", "cuda")
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_device_string(e) for e in node.elts)
    return False


def identity_tests(source: str) -> list:
    """The lines of `source` that ask a backend who it is: its name (or a backend given as its name)
    compared with a device string, or hasattr/getattr on a backend."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = any((isinstance(s, ast.Attribute) and s.attr == "name" and _mentions_backend(s.value))
                        or (isinstance(s, ast.Name) and "backend" in s.id.lower()) for s in sides)
            if named and any(_device_string(s) for s in sides):
                found.append(node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
              and node.args and _mentions_backend(node.args[0])):
            found.append(node.lineno)
    return found


def library_identity_tests(root: Path) -> list:
    found = []
    for folder in LIBRARY:
        for path in sorted((root / folder).rglob("*.py")):
            found += [f"{path.relative_to(root)}:{line}" for line in identity_tests(path.read_text())]
    return found


def test_the_library_asks_capabilities_not_names():
    assert library_identity_tests(ROOT) == []


@pytest.mark.parametrize("line", [
    'if backend.name == "cuda": pass',
    'x = 1 if self.backend.name != "cpu" else 2',
    'ok = _backend(t).name in ("cpu", "cuda")',
    'ok = backend == "cpu"',
    'ok = hasattr(backend, "capture")',
    'f = getattr(self.backend, "free_cached_memory", None)',
])
def test_the_scan_finds_each_kind_of_identity_test(line):
    assert identity_tests(line) == [1]


@pytest.mark.parametrize("line", [
    'if backend.graphs: pass',
    'text = f"on {backend.name}"',
    'ok = t.device == "cuda"',
    'b = getattr(step, "backend", None)',
])
def test_the_scan_lets_capabilities_and_display_names_be(line):
    assert identity_tests(line) == []


def test_every_capability_has_a_default_on_the_base():
    for capability in Backend.CAPABILITIES:
        assert capability in vars(Backend)
    base = Backend()
    assert not any(getattr(base, c) for c in Backend.CAPABILITIES)
    assert base.bind_elementwise is None and base.reduction_scratch is None
    assert base.free_cached_memory() is None and base.memory_total() is None and base.current_device() == 0
    with pytest.raises(NotImplementedError, match="has no graphs"):
        base.capture(lambda: None)


def test_the_cpu_backend_declares_host_memory_and_numba_kernels():
    cpu = backend_for("cpu")
    assert isinstance(cpu, CpuBackend) and isinstance(cpu, Backend) and cpu.name == "cpu"
    assert {c: getattr(cpu, c) for c in Backend.CAPABILITIES} == {
        "host_memory": True, "graphs": False, "streams": False, "cudnn": False, "cublas": False,
        "cuda_kernels": False, "kernel_language": "numba"}
    assert cpu.bind_elementwise is None and cpu.reduction_scratch is None
    assert cpu.free_cached_memory() is None and cpu.memory_total() is None


def test_the_cuda_backend_declares_the_gpu_capabilities():
    assert issubclass(CudaBackend, Backend) and CudaBackend.name == "cuda"
    assert {c: getattr(CudaBackend, c) for c in Backend.CAPABILITIES} == {
        "host_memory": False, "graphs": True, "streams": True, "cudnn": True, "cublas": True,
        "cuda_kernels": True, "kernel_language": "CUDA C"}
    for operation in ("bind_elementwise", "reduction_scratch", "free_cached_memory", "memory_total",
                      "current_device", "capture"):
        assert getattr(CudaBackend, operation) is not getattr(Backend, operation), operation


def test_the_cuda_stand_in_declares_what_the_cuda_backend_declares(monkeypatch):
    from tests.support.cuda_stand_in import stand_in_backend, with_cuda_capabilities
    backend, _ = stand_in_backend(monkeypatch)
    assert backend.graphs and backend.cuda_kernels and not backend.host_memory

    @with_cuda_capabilities(graphs=False)
    class HostSide:
        pass
    assert not HostSide.graphs and HostSide.cudnn and HostSide.kernel_language == "CUDA C"
