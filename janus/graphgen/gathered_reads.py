"""Rows, not whole tables: a generated function's reads of variables that it only gathers from.

``tf.gather(variable, ids)`` in a TF2 program (Keras's ``Embedding``, ``tf.nn.sampled_softmax_loss``'s
weights under Keras 3, ``keras.ops.take``) traces as ``GatherV2(ReadVariableOp(v), ids)``: a read
of the whole variable, then the rows. Once an optimizer has scattered into the variable (sparse
updates of an embedding or of softmax weights), TensorFlow keeps it in copy-on-read mode, and each
``ReadVariableOp`` copies it whole: 25.6 MB for each of the LM benchmark's two 50,000 x 128 tables,
about 3 ms each a step on this machine, the first of them on the critical path (the LSTM waits for
its embedding). The LM's embedding trace also holds a read whose value nothing uses
(``embedding/Shape/ReadVariableOp``), which copies the table a third time.

The rewrite, on the function registered in the eager context (the call path without a tape; a
taped call runs TF's forward function, untouched):

- ``GatherV2(ReadVariableOp(v), ids, axis=0)`` becomes ``ResourceGather(v, ids)`` where every reader
  of the read is such a gather. The same rows, copied bit for bit, raising on the same ids. It
  waits for what the read waited for (earlier updates of ``v``), and what waited for the read
  (later updates, which TF's automatic control dependencies order after it) waits for the gather:
  no update of ``v`` can run between the read the program made and the rows it took.
- A read whose value nothing uses is dropped where another node of the function still reads the
  same variable (so a missing variable still fails the call); what waited for it waits for what
  it waited for.

Only top-level nodes are rewritten, only gathers placed where their read is, only floating-point
tables (``ResourceGather``'s kernels on every device), and never a read whose value the function
returns. A read that was a control output (TF lists every stateful node so) hands that over to
its gathers, or, dropped, to what it waited for.
"""

from __future__ import annotations

import collections

import numpy as np
from tensorflow.core.framework import function_pb2, types_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import tensor_util

_TABLE_DTYPES = frozenset({types_pb2.DT_HALF, types_pb2.DT_BFLOAT16, types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE})
_INDEX_DTYPES = frozenset({types_pb2.DT_INT32, types_pb2.DT_INT64})


def rewrite_registered(name: str | bytes) -> int:
    """Rewrites the function ``name`` registered in the eager context; returns how many reads changed."""
    name = name.decode() if isinstance(name, bytes) else name
    ctx = context.context()
    if not ctx.has_function(name):
        return 0
    rewritten, changed = rewrite(ctx.get_function_def(name))
    if changed:
        ctx.remove_function(name)
        ctx.add_function_def(rewritten)
    return changed


def rewrite(fdef: function_pb2.FunctionDef) -> tuple[function_pb2.FunctionDef, int]:
    """A copy of ``fdef`` with its gathered and unused variable reads rewritten, and how many changed."""
    out = function_pb2.FunctionDef()
    out.CopyFrom(fdef)
    index = _Index(out)
    changed = 0
    for rewrite_one in (_gathers_instead, _drop_unused):
        for name in [n.name for n in out.node_def if n.op == "ReadVariableOp"]:
            read = index.nodes.get(name)
            if read is not None and rewrite_one(out, index, read):
                changed += 1
                index = _Index(out)  # rare: a few reads a function
    return out, changed


class _Index:
    """Who reads and who waits for each node of a function, found in one pass over its nodes."""

    def __init__(self, fdef: function_pb2.FunctionDef) -> None:
        self.nodes = {node.name: node for node in fdef.node_def}
        self.data: dict[str, list] = collections.defaultdict(list)  # name -> [(reader, input slot)]
        self.waiting: dict[str, list] = collections.defaultdict(list)  # name -> nodes with ^name
        self.first_inputs = collections.Counter(node.input[0] for node in fdef.node_def if node.input)
        for node in fdef.node_def:
            for slot, ref in enumerate(node.input):
                if ref.startswith("^"):
                    self.waiting[ref[1:]].append(node)
                else:
                    self.data[ref.split(":", 1)[0]].append((node, slot))
        self.returned = {ref.split(":", 1)[0] for ref in fdef.ret.values()}


def _gathers_instead(fdef: function_pb2.FunctionDef, index: _Index, read) -> bool:
    data, waiting = index.data.get(read.name, []), index.waiting.get(read.name, [])
    if read.name in index.returned or not data or read.attr["dtype"].type not in _TABLE_DTYPES:
        return False
    nodes = index.nodes
    if not all(slot == 0 and _plain_gather(node, nodes) and node.device == read.device for node, slot in data):
        return False  # a gather placed apart from its read (tf.device) reads a copy where it runs
    gathers = [node for node, _ in data]
    if {w.name for w in waiting} & _ancestors(gathers, nodes, read.name):
        return False  # a node that waits for the read computes the ids: the gather cannot wait for it
    resource = read.input[0]
    read_waits = [ref for ref in read.input if ref.startswith("^")]
    for gather in gathers:
        ids = gather.input[1]
        waits = [ref for ref in gather.input if ref.startswith("^")]
        del gather.input[:]
        gather.input.extend([resource, ids, *dict.fromkeys(waits + read_waits)])
        index_type = gather.attr["Tindices"].type
        gather.op = "ResourceGather"
        for key in list(gather.attr):
            del gather.attr[key]
        gather.attr["dtype"].type = read.attr["dtype"].type
        gather.attr["Tindices"].type = index_type
        gather.attr["batch_dims"].i = 0
        gather.attr["validate_indices"].b = True
    for node in waiting:
        _replace_wait(node, read.name, [f"^{g.name}" for g in gathers])
    _replace_control_output(fdef, read.name, [g.name for g in gathers])
    _remove(fdef, read.name)
    return True


def _drop_unused(fdef: function_pb2.FunctionDef, index: _Index, read) -> bool:
    if read.name in index.returned or index.data.get(read.name):
        return False
    if index.first_inputs[read.input[0]] < 2:
        return False  # the only read of its variable: kept, so that a missing variable fails the call
    read_waits = [ref for ref in read.input if ref.startswith("^")]
    for node in index.waiting.get(read.name, []):
        _replace_wait(node, read.name, read_waits)
    _replace_control_output(fdef, read.name, [ref[1:] for ref in read_waits])
    _remove(fdef, read.name)
    return True


def _plain_gather(node, nodes: dict) -> bool:
    """``GatherV2(params, ids, 0)`` with no batch dimensions and int32/int64 ids."""
    if node.op != "GatherV2" or node.attr["batch_dims"].i != 0 or node.attr["Tindices"].type not in _INDEX_DTYPES:
        return False
    if len([ref for ref in node.input if not ref.startswith("^")]) != 3:
        return False
    axis = nodes.get(node.input[2].split(":", 1)[0])
    if axis is None or axis.op != "Const" or axis.input:
        return False
    value = tensor_util.MakeNdarray(axis.attr["value"].tensor)
    return value.shape == () and int(np.asarray(value)) == 0


def _ancestors(starts: list, nodes: dict, skip: str) -> set[str]:
    """Names of the nodes ``starts`` wait for or read, transitively (not through ``skip``)."""
    seen: set[str] = set()
    todo = [ref.lstrip("^").split(":", 1)[0] for node in starts for ref in node.input]
    while todo:
        name = todo.pop()
        if name in seen or name == skip or name not in nodes:
            continue
        seen.add(name)
        todo += [ref.lstrip("^").split(":", 1)[0] for ref in nodes[name].input]
    return seen


def _replace_wait(node, name: str, instead: list[str]) -> None:
    refs = [ref for ref in node.input if ref != f"^{name}"]
    data = [ref for ref in refs if not ref.startswith("^")]
    waits = [ref for ref in refs if ref.startswith("^")]
    del node.input[:]
    node.input.extend([*data, *dict.fromkeys(waits + instead)])


def _replace_control_output(fdef: function_pb2.FunctionDef, name: str, instead: list[str]) -> None:
    """A control output (TF lists every stateful node of a function) named ``name`` becomes ``instead``."""
    keys = [key for key, node in fdef.control_ret.items() if node == name]
    if not keys:
        return
    for key in keys:
        del fdef.control_ret[key]
    outputs = [key for key in fdef.signature.control_output if key not in keys]
    for other in instead:
        if other not in fdef.control_ret.values():
            fdef.control_ret[other] = other
            outputs.append(other)
    del fdef.signature.control_output[:]
    fdef.signature.control_output.extend(outputs)


def _remove(fdef: function_pb2.FunctionDef, name: str) -> None:
    for i, node in enumerate(fdef.node_def):
        if node.name == name:
            del fdef.node_def[i]
            return
