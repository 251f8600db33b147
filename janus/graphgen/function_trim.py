"""Fewer graph nodes in janus's recursive functions: ``Identity`` nodes bypassed, dead nodes dropped.

A recursive function runs once per tree node, forward and backward, and TensorFlow's executor
spends about the same time on every node it runs, however small its kernel (issue #19). TF's
tracing leaves many nodes that only forward a tensor: the ``Identity`` a ``tf.cond`` puts on each
branch output and each gradient, the ``Identity`` that ties a function's outputs to its side
effects, and the ``NoOp`` those wait for. TF removes such nodes only when it inlines functions,
which a ``JanusInvoke`` does not do.

The rewrite is exact. A consumer reads the same tensor from the ``Identity``'s input. An
``Identity`` that waits for other nodes (control inputs) is bypassed only where its sole readers
are the function's outputs: a function call returns only after every node of its body has
run, so its outputs wait for those nodes anyway, and an error in any of them still fails the
call. The nodes it waited for must still run, though: TF prunes a stateless node that nothing
reaches (a ``tf.gather`` kept only as a check under ``tf.control_dependencies``), so each of
them that nothing else keeps becomes a control output of the function. A node is dropped only
when nothing reads it and it is stateless (TF would prune it at instantiation anyway).
Inputs and outputs do not change, so callers and gradients are unaffected.
"""

from __future__ import annotations

from tensorflow.core.framework import function_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import op_def_registry

_BRANCH_ATTRS = ("then_branch", "else_branch", "branches")


def trim_registered(name: str | bytes) -> None:
    """Rewrites the function ``name`` registered in the eager context, and the branch functions of its conds."""
    ctx = context.context()
    todo, seen = [name.decode() if isinstance(name, bytes) else name], set()
    while todo:
        fname = todo.pop()
        if fname in seen or not ctx.has_function(fname):
            continue
        seen.add(fname)
        fdef = ctx.get_function_def(fname)
        todo += _branch_functions(fdef)
        trimmed = trim(fdef)
        if trimmed is not None:
            ctx.remove_function(fname)
            ctx.add_function_def(trimmed)


def _branch_functions(fdef: function_pb2.FunctionDef) -> list[str]:
    names = []
    for node in fdef.node_def:
        if node.op not in ("If", "StatelessIf", "Case", "StatelessCase"):
            continue
        for key in _BRANCH_ATTRS:
            attr = node.attr.get(key)
            if attr is None:
                continue
            names += [f.name for f in attr.list.func] if attr.HasField("list") else [attr.func.name]
    return [n for n in names if n]


def trim(fdef: function_pb2.FunctionDef) -> function_pb2.FunctionDef | None:
    """A copy of ``fdef`` with forwarding ``Identity`` nodes bypassed and unread stateless nodes dropped.

    Returns None when nothing changes.
    """
    out = function_pb2.FunctionDef()
    out.CopyFrom(fdef)
    changed = False
    while _bypass_one_identity(out) or _drop_dead_nodes(out):
        changed = True
    return out if changed else None


def _readers(fdef: function_pb2.FunctionDef) -> tuple[dict[str, list], set[str]]:
    """Per node name, the places that read its outputs as data; and the nodes something waits for."""
    data: dict[str, list] = {}
    control: set[str] = set(fdef.control_ret.values())
    for node in fdef.node_def:
        for i, ref in enumerate(node.input):
            if ref.startswith("^"):
                control.add(ref[1:])
            else:
                data.setdefault(ref.split(":", 1)[0], []).append((node, i))
    for key, ref in fdef.ret.items():
        data.setdefault(ref.split(":", 1)[0], []).append((None, key))
    return data, control


def _bypass_one_identity(fdef: function_pb2.FunctionDef) -> bool:
    data, control = _readers(fdef)
    for node in fdef.node_def:
        if node.op != "Identity" or node.name in control:
            continue
        inputs = [ref for ref in node.input if not ref.startswith("^")]
        readers = data.get(node.name, [])
        if len(inputs) != 1 or not readers:
            continue
        to_nodes = any(reader is not None for reader, _ in readers)
        to_outputs = any(reader is None for reader, _ in readers)
        if (len(inputs) != len(node.input) and to_nodes) or (":" not in inputs[0] and to_outputs):
            continue  # it waits for nodes before a node reads it; or it returns an argument
        for reader, slot in readers:
            if reader is None:
                fdef.ret[slot] = inputs[0]
            else:
                reader.input[slot] = inputs[0]
        nodes = {n.name: n for n in fdef.node_def}
        for ref in node.input:
            if ref.startswith("^") and not _kept_anyway(ref[1:], nodes, fdef):
                fdef.signature.control_output.append(ref[1:])
                fdef.control_ret[ref[1:]] = ref[1:]
        return True
    return False


def _kept_anyway(name: str, nodes: dict, fdef: function_pb2.FunctionDef) -> bool:
    """TF runs what node ``name`` waits for without anything waiting for it: the node is stateful
    or a control output, or a ``NoOp`` or ``Identity`` (which cannot fail) of such nodes and arguments."""
    node = nodes.get(name)
    if node is None or name in fdef.control_ret.values() or _stateful(node.op):
        return True
    return node.op in ("NoOp", "Identity") and all(
        _kept_anyway(ref.lstrip("^").split(":", 1)[0], nodes, fdef) for ref in node.input
    )


def _drop_dead_nodes(fdef: function_pb2.FunctionDef) -> bool:
    data, control = _readers(fdef)
    dead = [
        i
        for i, node in enumerate(fdef.node_def)
        if node.name not in data and node.name not in control and not _stateful(node.op)
    ]
    for i in reversed(dead):
        del fdef.node_def[i]
    return bool(dead)


def _stateful(op: str) -> bool:
    op_def = op_def_registry.get(op)
    return op_def is None or op_def.is_stateful
