"""The walk of a batch of trees that level batching runs before each call (``tree_batching``).

For each plan, Python source is generated once: a depth-first walk that reads each node's
attributes the way the recursive function does (its branch test first, then the reads of the
branch it takes), from the node's ``__dict__`` or the call's heap copies, with the checks of the
graph's heap reads (``pyheap.Expectation``) written out inline. A walk in generic Python (a loop
over read descriptions, a test interpreted op by op) cost about 3 µs a node, most of a TreeRNN
batch's time; the generated one does the same work in straight-line code.

The walk recurses as the function does, at most as deep as eager could (the call's recursion budget,
checked before each level), and finds cycles, which eager would recurse into until ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.framework import tensor_util

from janus.ops import pyheap

_MISSING = object()


class WalkFailed(Exception):
    """A tree the batched graph was not made for: ``assumption`` names what broke."""

    def __init__(self, assumption: str, why: str) -> None:
        super().__init__(why)
        self.assumption = assumption  # "batching" or "depth", or an expectation's assumption id


def compile_walk(plan) -> Callable:
    """``walk(trees, local, budget)`` -> (rows, heights, roots): each node's reads in post order
    (a tuple with a child as its index in post order, a read the node does not make as zeros),
    its height, and each tree's index. Raises ``WalkFailed``; ``NotBatchable`` at compile time."""
    from janus.graphgen.tree_batching import NotBatchable  # tree_batching imports this module

    names = {"cls": plan.cls, "M": _MISSING, "WalkFailed": WalkFailed}
    cls_name = plan.cls.__name__
    lines = [
        "def walk(trees, local, budget):",
        "    rows, heights, done = [], [], {}",
        "    def visit(node, depth):",
        "        key = id(node)",
        "        index = done.get(key)",
        "        if index is not None:",
        "            if index < 0:",
        "                raise WalkFailed('depth', 'a tree holds a cycle: eager recurses until RecursionError')",
        "            if depth + heights[index] > budget:",
        "                raise WalkFailed('depth', 'the tree is deeper than Python\\'s recursion limit allows')",
        "            return index",
        "        if depth > budget:",
        "            raise WalkFailed('depth', 'the tree is deeper than Python\\'s recursion limit allows')",
        "        if type(node) is not cls:",
        f"            raise WalkFailed('batching', 'a tree node is a ' + type(node).__name__ + ', not a {cls_name}')",
        "        d = node.__dict__",
    ]
    indent = " " * 8
    for i, r in enumerate(plan.reads):
        if r.branch is None:
            lines += _read_lines(plan, i, r, indent, names)
    lines.append(f"{indent}done[key] = -1")
    lines.append(f"{indent}if {_test_expression(plan, NotBatchable)}:")
    for taken in (True, False):
        if not taken:
            lines.append(f"{indent}else:")
        inner = indent + "    "
        kids = []
        for i, r in enumerate(plan.reads):
            if r.branch is taken:
                lines += _read_lines(plan, i, r, inner, names)
        for i, r in enumerate(plan.reads):
            if r.branch is taken and r.child:  # the children after every read, as the body invokes last
                lines.append(f"{inner}v{i} = visit(v{i}, depth + 1)")
                kids.append(f"heights[v{i}]")
        values = [f"v{i}" if r.branch in (None, taken) else repr(r.zero) for i, r in enumerate(plan.reads)]
        lines.append(f"{inner}row = ({''.join(v + ', ' for v in values)})")
        height = f"1 + max({', '.join(kids)}, -1)" if kids else "0"
        lines.append(f"{inner}height = {height}")
    lines += [
        "        done[key] = index = len(rows)",
        "        rows.append(row)",
        "        heights.append(height)",
        "        return index",
        "    roots = [visit(tree, 1) for tree in trees]",
        "    return rows, heights, roots",
    ]
    namespace = dict(names)
    exec(compile("\n".join(lines) + "\n", f"<janus tree walk {plan.rf.name}>", "exec"), namespace)  # noqa: S102
    return namespace["walk"]


def _read_lines(plan, i: int, r, indent: str, names: dict) -> list[str]:
    """``v<i> = node.<attr>`` as the graph's read makes it, checked and in its column's form."""
    v, attr = f"v{i}", repr(r.attr)
    lines = [
        f"{v} = M if local is None else local.get((key, {attr}), M)",
        f"if {v} is M:",
        f"    {v} = d.get({attr}, M)",
        f"    if {v} is M:",
        f"        raise WalkFailed('batching', {plan.cls.__name__ + ' has no attribute ' + r.attr + ' of its own'!r})",
    ]
    if r.child:
        lines += [
            f"if type({v}) is not cls:",
            f"    raise WalkFailed('batching', {r.attr + ' holds no ' + plan.cls.__name__!r})",
        ]
        return [indent + line for line in lines]
    expectation = pyheap._expectations[r.expect]  # noqa: SLF001 - the read's own check
    failed = f"raise WalkFailed({expectation.assumption_id}, {f'{r.attr} is not the expected {expectation}'!r})"
    if expectation.kind == "object":  # a test of the pointer (`node.left is None`): 0 for None
        names[f"cls{i}"] = expectation.cls
        none = f"{v} = 0" if expectation.optional else failed
        lines += [
            f"if {v} is None:",
            f"    {none}",
            f"elif type({v}) is not cls{i}:",
            f"    {failed}",
            "else:",
            f"    {v} = 1",
        ]
    else:
        kind = {"int": "int", "float": "float", "bool": "bool"}[expectation.kind]
        bad = f"type({v}) is not {kind}"
        if kind == "int":
            bad += f" or not -9223372036854775808 <= {v} < 9223372036854775808"
        if expectation.optional:
            lines += [
                f"if {v} is None:",
                f"    {v} = (0, 0)",
                f"elif {bad}:",
                f"    {failed}",
                "else:",
                f"    {v} = (1, {v})",
            ]
        else:
            lines += [f"if {bad}:", f"    {failed}"]
    return [indent + line for line in lines]


def _test_expression(plan, not_batchable: type) -> str:
    """The forward graph's branch test as a Python expression of the reads ``v<i>``."""
    exprs: dict = {}
    casts = {tf.bool: "bool", tf.int64: "int", tf.int32: "int", tf.float64: "float", tf.float32: "float"}
    for op in plan.test_ops:
        kind = op.type
        ins = [exprs[t.ref()] for t in op.inputs] if kind != "JanusPyGetAttr" else []
        if kind == "JanusPyGetAttr":
            outs = ["None", f"v{plan.read_index(op)}"]
        elif kind == "Const":
            value = tensor_util.MakeNdarray(op.get_attr("value"))
            if value.ndim:
                raise not_batchable("its branch test compares with an array")
            outs = [repr(value.item())]
        elif kind == "Identity":
            outs = [ins[0]]
        elif kind == "Unpack":
            if op.get_attr("axis") != 0 or op.inputs[0].shape.rank != 1:
                raise not_batchable("its branch test unpacks an array")
            outs = [f"{ins[0]}[{k}]" for k in range(op.get_attr("num"))]
        elif kind == "Cast":
            cast = casts.get(op.get_attr("DstT"))
            if cast is None:
                raise not_batchable("its branch test casts to another type")
            outs = [f"{cast}({ins[0]})"]
        elif kind in ("Equal", "NotEqual"):
            outs = [f"({ins[0]} {'==' if kind == 'Equal' else '!='} {ins[1]})"]
        else:  # LogicalNot
            outs = [f"(not {ins[0]})"]
        if kind not in ("JanusPyGetAttr", "Unpack") and any(t.shape.rank != 0 for t in op.outputs):
            raise not_batchable("its branch test computes an array")
        for t, e in zip(op.outputs, outs):
            exprs[t.ref()] = e
    return exprs[plan.if_op.inputs[0].ref()]
