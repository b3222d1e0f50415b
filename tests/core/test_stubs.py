"""The stubs core/operand.pyi and core/tensor.pyi, which editors read for completion, declare what
the classes have: the IR's own attributes and the user methods lazytensor.array_methods installs."""
import ast
from pathlib import Path

import lazytensor  # noqa: F401  (installs the methods)
from lazytensor import array_methods
from lazytensor.core import operand, tensor
from lazytensor.core.expr import Expr
from lazytensor.core.operand import Operand
from lazytensor.core.tensor import Tensor

# Declared on Operand, defined by each kind of operand (slots of Tensor and of Expr).
PER_KIND = {"shape", "dtype", "device"}


def class_names(path: Path, name: str) -> set:
    """The names a class body in `path` defines: methods, properties, annotated and assigned attributes,
    and for a .py its __slots__."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    for target in item.targets:
                        if target.id == "__slots__":
                            names.update(ast.literal_eval(item.value))
                        else:
                            names.add(target.id)
            return names - {"__slots__", "__weakref__"}
    raise AssertionError(f"no class {name} in {path}")


def module_functions(path: Path) -> set:
    return {node.name for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}


def stub(module) -> Path:
    return Path(module.__file__).with_suffix(".pyi")


def test_the_stubs_declare_what_each_class_has():
    installed = array_methods.installed()
    for module, cls, extra in ((operand, Operand, PER_KIND), (tensor, Tensor, set())):
        own = class_names(Path(module.__file__), cls.__name__)
        declared = class_names(stub(module), cls.__name__)
        names = set(installed[cls])
        assert not own & names, f"{cls.__name__}: installed over the IR's own: {sorted(own & names)}"
        assert names - declared == set(), f"installed on {cls.__name__}, not in its stub: {sorted(names - declared)}"
        assert declared - names - own - extra == set(), \
            f"in the stub of {cls.__name__}, neither installed nor defined: {sorted(declared - names - own - extra)}"
        assert own - declared == set(), f"{cls.__name__}'s own, not in its stub: {sorted(own - declared)}"
        for name in declared - extra:
            assert name in vars(cls), f"{cls.__name__}.{name} is declared but missing"
    for name in PER_KIND:
        assert name in Tensor.__slots__ and name in Expr.__slots__


def test_the_tensor_stub_declares_the_constructors():
    path = Path(tensor.__file__)
    assert module_functions(stub(tensor)) == module_functions(path)
