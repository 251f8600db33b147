"""``config.dump_dir`` (``JANUS_DUMP_DIR``): what janus really runs for each graph, written out.

janus generates no Python program: it converts a function by interpreting its AST and emitting TF
ops (the user's code never runs), so the generated program is the graph itself, an op trace. For
each graph (one cache entry) of each function, ``write`` puts into the dump directory:

- ``<function>.<n>.txt``: the guards (the compiled ``prepare()`` source), the function the runner
  executes, op by op as the TF runtime holds it, then every function it calls (``tf.cond``
  branches, loop bodies, recursive graph functions), with state updates, heap reads and writes,
  control flow and the in-graph assumptions (JanusAssert) marked, then the heap writes committed in
  Python after a successful run, and last the library calls the interpreter recorded;
- ``<function>.<n>.pbtxt``: the graph's GraphDef, with its function library;
- ``tensorboard/<function>.<n>/``: an event file with the graph, so TensorBoard lists one run per
  function and graph.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Iterator

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import function_pb2, types_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import op_def_registry

from janus.assumptions.guards import describe_object
from janus.graphgen.generate import GeneratedGraph
from janus.graphgen.ordering import STATE_READS
from janus.ops.assert_op import CHECK_OPS

_CONST_ITEMS = 8  # a constant with more elements is shown by its dtype and shape
_REPR_CHARS = 120
_names: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()  # owner -> its name in the dump
_names_lock = threading.Lock()
_HEADER = """\
# janus dump: {name}, graph {index} ({function})
#
# This is an op trace, not Python: janus converts {name} by interpreting its source and emitting TF
# ops (the code itself never runs while a graph is built). Below is what a call served by this graph
# runs: the guards in Python, then the graph's functions op by op as the TF runtime holds them
# (`node = Op(inputs) attrs`, `after=[...]`: the ops it waits for), then the writes committed to Python
# objects after a successful run. Grappler optimizes the functions when they are first run.
"""


def write(owner: object, qualname: str, index: int, graph: GeneratedGraph, directory: str) -> None:
    """Dumps ``graph``, the ``index``-th graph built for the function ``owner`` named ``qualname``."""
    os.makedirs(directory, exist_ok=True)
    stem = f"{_unique_name(owner, qualname)}.{index}"
    with open(os.path.join(directory, stem + ".txt"), "w") as out:
        out.write(program_text(qualname, index, graph))
    tf.io.write_graph(graph.concrete.graph.as_graph_def(), directory, stem + ".pbtxt")
    writer = tf.summary.create_file_writer(os.path.join(directory, "tensorboard", stem))
    with writer.as_default():
        tf.summary.graph(graph.concrete.graph)
    writer.close()


def _unique_name(owner: object, qualname: str) -> str:
    """``qualname``, or ``qualname~2``... when another function of that name dumped before."""
    with _names_lock:
        name = _names.get(owner)
        if name is None:
            taken = set(_names.values())
            name = qualname
            n = 1
            while name in taken:
                n += 1
                name = f"{qualname}~{n}"
            _names[owner] = name
        return name


def program_text(qualname: str, index: int, graph: GeneratedGraph) -> str:
    """The text of ``<function>.<n>.txt``: see the module docstring."""
    functions = _FunctionLibrary(graph)
    sections = [
        _HEADER.format(name=qualname, index=index, function=graph.function_name),
        _guards_text(graph),
        _assumptions_text(graph),
        *functions.render_all(),
        _after_text(graph),
        "# ---- the library calls janus's interpreter recorded while converting, in Python syntax (a partial\n"
        "# view, for finding your source lines in the ops above: the functions above are what runs)\n" + graph.code,
    ]
    return "\n\n".join(section.rstrip("\n") for section in sections if section) + "\n"


def _guards_text(graph: GeneratedGraph) -> str:
    lines = ["# ---- guards: run in Python before each call; None means a miss, and the call runs eagerly"]
    lines += [f"#   {g.description}  [{g.kind.name} {g.source.display()}; {g.location}]" for g in graph.guards.guards]
    constants = [(name, value) for name, value in graph.guards.namespace.items() if re.fullmatch(r"K\d+", name)]
    if constants:
        lines.append("# the objects the guards and the inputs refer to:")
        lines += [f"#   {name} = {_short_repr(value)}" for name, value in constants]
    return "\n".join(lines) + "\n" + graph.prepare.source


def _plain(value: object) -> bool:
    """Whether ``value``'s repr is Python's or NumPy's own: builtin scalars, arrays and small containers of them."""
    if (
        value is None
        or type(value) in (bool, int, float, complex, str, bytes)
        or isinstance(value, (np.ndarray, np.generic))
    ):
        return True
    if type(value) in (list, tuple, set, frozenset):
        return len(value) <= _CONST_ITEMS and all(_plain(v) for v in value)
    if type(value) is dict:
        return len(value) <= _CONST_ITEMS and all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def _short_repr(value: object) -> str:
    """What a guard constant is, without reading values out of tensors or walking big containers."""
    if isinstance(value, dict) and "__builtins__" in value and "__name__" in value:
        return f"<the globals of module {value['__name__']}>"
    if isinstance(value, (list, tuple, dict, set)) and len(value) > _CONST_ITEMS:
        return f"<{type(value).__name__} of {len(value)} items, id {id(value):#x}>"
    if isinstance(value, tf.Variable):
        return f"<tf.Variable {value.name!r} {value.dtype.name}{value.shape}>"
    if isinstance(value, tf.Tensor):
        return f"<tf.Tensor {value.dtype.name}{value.shape}>"
    # never a user object's own __repr__: it is user code, which janus does not run behind the user's back
    text = repr(value) if _plain(value) else describe_object(value)
    text = " ".join(text.split())
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _assumptions_text(graph: GeneratedGraph) -> str:
    lines = ["# ---- in-graph assumptions: a JanusAssert that fails stops the run before any state update,",
             "# and the call runs eagerly"]  # fmt: skip
    for assumption in sorted(graph.assumptions.values(), key=lambda a: a.id):
        lines.append(f"#   JanusAssert #{assumption.id}: {assumption.description}  [{assumption.location}]")
    if not graph.assumptions:
        lines.append("#   (none)")
    return "\n".join(lines)


def _after_text(graph: GeneratedGraph) -> str:
    lines = ["# ---- after a successful run: the writes to Python objects, committed in program order"]
    if graph.store_factory is not None:
        lines.append(
            "# (the graph reads run-time objects with JanusPy* ops: their JanusPySet* writes are applied first)"
        )
    if graph.commit is not None:
        lines.append("# V: the graph's outputs that hold the written values")
        lines.append(graph.commit.source.rstrip("\n"))
    elif graph.store_factory is None:
        lines.append("#   (none)")
    return "\n".join(lines)


class _FunctionLibrary:
    """The graph's functions as the runtime holds them, rendered from the executed one down."""

    def __init__(self, graph: GeneratedGraph) -> None:
        self.graph = graph
        self._library = {f.signature.name: f for f in graph.concrete.graph.as_graph_def().library.function}
        self._writes: dict[str, bool] = {}

    def function_def(self, name: str) -> function_pb2.FunctionDef | None:
        try:
            return context.context().get_function_def(name)
        except Exception:  # not registered in the runtime (or no eager context yet): the graph's copy
            return self._library.get(name)

    def render_all(self) -> Iterator[str]:
        seen: set[str] = set()
        queue = [self.graph.function_name]
        while queue:
            name = queue.pop(0)
            if name in seen:
                continue
            seen.add(name)
            fdef = self.function_def(name)
            if fdef is None:
                yield f"# ---- function {name}: not found in the runtime or the graph's library"
                continue
            yield self._render(fdef, top=name == self.graph.function_name)
            queue += [called for node in fdef.node_def for called in _called(node)]

    def _render(self, fdef: function_pb2.FunctionDef, top: bool) -> str:
        signature = fdef.signature
        title = "the function the runner executes for each call" if top else "called by the functions above"
        params = ", ".join(f"{arg.name}: {_dtype(arg.type)}" for arg in signature.input_arg)
        lines = [f"# ---- {title}", f"def {signature.name}({params}):"]
        if top:
            lines += [f"    # {arg.name} <- {feed}" for arg, feed in zip(signature.input_arg, self.graph.inputs)]
        lines += ["    " + self._node_line(node) for node in fdef.node_def]
        outputs = ", ".join(f"{name}={fdef.ret[name]}" for name in (a.name for a in signature.output_arg))
        lines.append(f"    return {outputs}" if outputs else "    return")
        if fdef.control_ret:
            lines.append(f"    # runs before returning: {', '.join(sorted(fdef.control_ret.values()))}")
        return "\n".join(lines)

    def _node_line(self, node: function_pb2.NodeDef) -> str:
        data = [i for i in node.input if not i.startswith("^")]
        after = [i[1:] for i in node.input if i.startswith("^")]
        text = f"{node.name} = {node.op}({', '.join(data)})"
        attrs = [f"{key}={value}" for key, value in _attrs(node)]
        if after:
            attrs.append(f"after=[{', '.join(after)}]")
        if attrs:
            text += "  " + " ".join(attrs)
        note = self._note(node)
        return f"{text}  # {note}" if note else text

    def _note(self, node: function_pb2.NodeDef) -> str:
        op = node.op
        if op in CHECK_OPS:
            assumption = self.graph.assumptions.get(node.attr["assumption_id"].i)
            what = f"{assumption.description} [{assumption.location}]" if assumption else "unknown assumption"
            return f"{op} #{node.attr['assumption_id'].i}: {what}"
        if op in ("If", "StatelessIf"):
            note = f"tf.cond: then {node.attr['then_branch'].func.name}, else {node.attr['else_branch'].func.name}"
        elif op in ("While", "StatelessWhile"):
            note = f"tf.while_loop: cond {node.attr['cond'].func.name}, body {node.attr['body'].func.name}"
        elif op in ("Case", "StatelessCase"):
            note = "tf.switch_case: " + ", ".join(f.name for f in node.attr["branches"].list.func)
        elif op == "JanusInvoke":
            return f"recursive graph function {node.attr['f'].func.name} (JanusInvoke)"
        elif op in ("JanusPySetAttr", "JanusPySetSubscr"):
            return "heap write in the graph (a run-time object)" + _attr_name(node)
        elif op in ("JanusPyGetAttr", "JanusPyGetSubscr"):
            return "heap read in the graph (a run-time object)" + _attr_name(node)
        elif op == "PrintV2":
            return "print (output)"
        elif _called(node):
            note = "call of " + ", ".join(_called(node))
        elif not _is_state_update(node):
            return ""
        elif "janus_touch" in node.name:
            return "state update: janus's own counter of the paths that ran (for eager's None gradients)"
        else:
            return "state update"
        return note + ("; holds state updates" if any(self._has_writes(f) for f in _called(node)) else "")

    def _has_writes(self, name: str) -> bool:
        """Whether the function ``name``, or one it calls, updates state."""
        if name not in self._writes:
            self._writes[name] = False  # a recursive function calls itself
            fdef = self.function_def(name)
            nodes = fdef.node_def if fdef is not None else []
            self._writes[name] = any(
                _is_state_update(n) or n.op == "PrintV2" or any(self._has_writes(f) for f in _called(n)) for n in nodes
            )
        return self._writes[name]


def _called(node: function_pb2.NodeDef) -> list[str]:
    """The functions a node calls: branches, loop bodies, a called or invoked function."""
    names = []
    for key in sorted(node.attr):
        value = node.attr[key]
        if value.HasField("func"):
            names.append(value.func.name)
        elif value.HasField("list"):
            names += [f.name for f in value.list.func]
    return names


def _is_state_update(node: function_pb2.NodeDef) -> bool:
    """A stateful op taking a resource (a variable, a table, an iterator) that it does not only read."""
    if node.op in STATE_READS:
        return False
    try:
        op_def = op_def_registry.get(node.op)
    except Exception:  # a function name used as an op, or an op whose library is not loaded
        op_def = None
    if op_def is None or not op_def.is_stateful:
        return False
    return any(arg.type == types_pb2.DT_RESOURCE for arg in op_def.input_arg)


def _attr_name(node: function_pb2.NodeDef) -> str:
    return f": .{node.attr['attr_name'].s.decode()}" if "attr_name" in node.attr else ""


def _attrs(node: function_pb2.NodeDef) -> Iterator[tuple[str, str]]:
    """The attributes worth reading: values, shapes, flags and functions, not dtypes or internals."""
    for key in sorted(node.attr):
        if key.startswith("_") or key == "output_shapes":
            continue
        value = node.attr[key]
        kind = value.WhichOneof("value")
        if kind == "tensor":
            yield key, _tensor(value.tensor)
        elif kind in ("i", "f", "b"):
            yield key, repr(getattr(value, kind))
        elif kind == "s":
            yield key, repr(value.s.decode(errors="replace"))
        elif kind == "shape":
            yield key, _shape(value.shape)
        elif kind == "func":
            yield key, value.func.name
        elif kind == "list" and value.list.func:
            yield key, "[" + ", ".join(f.name for f in value.list.func) + "]"


def _tensor(proto) -> str:
    try:
        array = tf.make_ndarray(proto)
    except Exception:  # a dtype numpy cannot hold (resource, variant)
        return f"<{_dtype(proto.dtype)}>"
    if array.size > _CONST_ITEMS:
        return f"<{array.dtype}{list(array.shape)}>"
    return np.array2string(array, separator=",").replace("\n", "") if array.ndim else repr(array.item())


def _shape(proto) -> str:
    if proto.unknown_rank:
        return "<unknown rank>"
    return "[" + ",".join("?" if d.size < 0 else str(d.size) for d in proto.dim) + "]"


def _dtype(enum: int) -> str:
    try:
        return tf.dtypes.as_dtype(enum).name
    except TypeError:
        return str(enum)
