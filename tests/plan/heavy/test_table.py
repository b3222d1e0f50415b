"""The table of heavy ops (lazytensor.plan.heavy.table): written out literally, complete as soon as the
planner is imported, and changed by no module."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import lazytensor

PACKAGE = pathlib.Path(lazytensor.__file__).parent
TABLE = PACKAGE / "plan" / "heavy" / "table.py"
NAMES = ("HEAVY", "ROOT_WRITERS", "PATTERNS")


def _assigned(tree, name):
    [value] = [node.value for node in tree.body if isinstance(node, ast.Assign)
               and [getattr(t, "id", None) for t in node.targets] == [name]]
    return value


def _literal_table() -> dict:
    """HEAVY, ROOT_WRITERS and PATTERNS as the table's source writes them: op names and builder names."""
    tree = ast.parse(TABLE.read_text())
    heavy = _assigned(tree, "HEAVY")
    assert isinstance(heavy, ast.Dict)
    ops = {}
    for key, builders in zip(heavy.keys, heavy.values):
        assert isinstance(key, ast.Constant) and isinstance(builders, ast.Tuple), ast.dump(key)
        assert builders.elts and all(isinstance(b, ast.Name) for b in builders.elts), key.value
        ops[key.value] = tuple(b.id for b in builders.elts)
    writers = _assigned(tree, "ROOT_WRITERS")
    assert isinstance(writers, ast.Call) and writers.func.id == "frozenset"
    [literal] = writers.args
    assert isinstance(literal, ast.Set) and all(isinstance(e, ast.Constant) for e in literal.elts)
    patterns = _assigned(tree, "PATTERNS")
    assert isinstance(patterns, ast.Tuple)
    named = []
    for entry in patterns.elts:
        name, match = entry.elts
        assert isinstance(name, ast.Constant) and isinstance(match, ast.Name)
        named.append((name.value, match.id))
    return {"HEAVY": ops, "ROOT_WRITERS": sorted(e.value for e in literal.elts), "PATTERNS": named}


# Printed by a fresh interpreter: the table as the planner sees it right after its own import, then
# again after every module of the package is imported.
_SNAPSHOT = """
import importlib, json, pkgutil, sys
import lazytensor.plan.planner as planner
table = sys.modules["lazytensor.plan.heavy.table"]
named = {id(v): k for k, v in vars(table).items() if callable(v)}       # a builder -> its name in the table
def snapshot(table):
    return {"HEAVY": {op: [named.get(id(b), repr(b)) for b in builders] for op, builders in table.HEAVY.items()},
            "ROOT_WRITERS": sorted(table.ROOT_WRITERS), "PATTERNS": [[n, named.get(id(m), repr(m))]
                                                                     for n, m in table.PATTERNS]}
first = snapshot(planner)
import lazytensor
for module in pkgutil.walk_packages(lazytensor.__path__, "lazytensor."):
    if not module.name.startswith(("lazytensor.bench", "lazytensor.kernels.cuda", "lazytensor.cbr")):
        try:
            importlib.import_module(module.name)
        except ImportError:         # a module needing a GPU library
            pass
print(json.dumps([first, snapshot(planner)]))
"""


def _snapshots():
    import json
    run = subprocess.run([sys.executable, "-c", _SNAPSHOT], capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def _heavy_ops_built() -> set:
    """The op names of heavy nodes the package's code builds: Expr("op", ..., heavy=True) and
    heavy_over_tensor("op", ...) with a literal name."""
    ops = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            heavy = name == "heavy_over_tensor" or (
                name == "Expr" and (any(k.arg == "heavy" and getattr(k.value, "value", None) is True
                                        for k in node.keywords)
                                    or (len(node.args) > 5 and getattr(node.args[5], "value", None) is True)))
            if heavy:
                ops.add(node.args[0].value)
    return ops


def test_the_table_is_literal_and_complete_once_the_planner_is_imported():
    literal = _literal_table()
    first, after_everything = _snapshots()
    want = {"HEAVY": {op: list(b) for op, b in literal["HEAVY"].items()}, "ROOT_WRITERS": literal["ROOT_WRITERS"],
            "PATTERNS": [list(p) for p in literal["PATTERNS"]]}
    assert first == want
    assert after_everything == want
    built = _heavy_ops_built()
    assert {"reduce", "matmul", "conv2d", "materialize"} <= built
    assert built <= set(literal["HEAVY"]), built - set(literal["HEAVY"])
    assert set(literal["ROOT_WRITERS"]) <= set(literal["HEAVY"])


def _name(node):
    return getattr(node, "id", getattr(node, "attr", None))


def test_no_module_changes_the_table():
    mutating = {"update", "add", "append", "extend", "insert", "pop", "popitem", "remove", "discard", "clear",
                "setdefault", "__setitem__"}
    changed = []
    for path in PACKAGE.rglob("*.py"):
        if path == TABLE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Assign, ast.Delete)):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            else:
                targets = []
            hits = [t for t in targets if (isinstance(t, ast.Subscript) and _name(t.value) in NAMES)
                    or (isinstance(t, ast.Attribute) and t.attr in NAMES)]       # HEAVY[op] = ..., planner.HEAVY = ...
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in mutating
                    and _name(node.func.value) in NAMES):                          # ROOT_WRITERS.add(...)
                hits.append(node)
            changed += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for _ in hits[:1]]
    assert not changed, changed
