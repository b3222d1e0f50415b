"""Readable text of an expression tree, for repr and explain (t0, t1, ... name the tensors)."""
from __future__ import annotations

from lazytensor.core.const import Const
from lazytensor.kernels.ops import OPS


def render_tree(root) -> str:
    names: dict = {}

    def name(node) -> str:
        if isinstance(node, Const):
            return repr(node.value)
        if not hasattr(node, "op") or node.result is not None:     # a tensor, or an evaluated node
            return names.setdefault(id(node), f"t{len(names)}")
        args = [name(a) for a in node.args]
        call_args = [a[1:-1] if a.startswith("(") and a.endswith(")") else a for a in args]
        if node.op == "reduce":
            spec = node.attrs
            kind = "std" if spec.root else spec.kind
            return f"{kind}({call_args[0]}, axis={spec.axes})"
        if node.op == "scan":
            return f"{node.attrs.kind}({call_args[0]}, axis={node.attrs.axis})"
        if node.op == "concatenate":
            return f"concatenate([{', '.join(call_args)}], axis={node.attrs})"
        if node.op == "materialize":
            return f"materialize({call_args[0]})"
        if node.op == "linalg":
            spec = node.attrs
            which = f"[{spec.index}]" if len(spec.shapes) > 1 else ""
            return f"linalg.{spec.fn}({', '.join(call_args)}){which}"
        if node.op == "astype":
            return f"{args[0]}.astype({node.dtype.name})"
        sym = OPS[node.op].symbol if node.op in OPS else None
        if sym and len(args) == 2:
            return f"({args[0]} {sym} {args[1]})"
        if node.op == "negative":
            return f"-{args[0]}"
        return f"{node.op}({', '.join(call_args)})"

    text = name(root)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text
