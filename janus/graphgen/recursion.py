"""Recursive user functions as recursive graph functions called through ``JanusInvoke``.

A function the profile saw in a call cycle is not inlined: it becomes a graph function of
its own (``RecursiveFunction``), generated once from its AST with abstract parameters, and
every call of it, including the ones in its own body, becomes a ``JanusInvoke`` op naming
it (``csrc/janus_invoke.cc``).

* **Parameters.** Tensors and Python numbers known only at run time become tensor
  parameters; tree nodes (user objects) become int64 pointers read through the heap ops,
  so a new tree costs no regeneration; anything else (the model, layers, constants) is
  baked in and must be the very same at every recursive call, or the parameter becomes a
  pointer (objects) or the function runs imperatively (other values).
* **Forward declaration.** The body's recursive calls need the function's outputs and
  captured inputs before the body exists: outputs come from the profiled return values
  (relaxed if the body disagrees), captures from a first, throwaway trace.
* **Gradients.** The backward function is the gradient of the body, built with TF's
  symbolic gradients; the gradient of each inner ``JanusInvoke`` is a ``JanusInvokeGrad``
  of the backward function itself. Forward tensors the backward function needs are extra
  outputs of the forward function, which the kernel packs into one frame per invocation.
* **Parallelism.** Invocations only wait on their data, so independent subtrees run in
  parallel on the inter-op pool (``config.parallel_calls = False`` chains them instead).
* **Depth.** Eager raises ``RecursionError`` where Python's stack runs out; a graph has no such
  limit (a cyclic list recursed until memory ran out). Each invocation takes the invocations left
  as its first input and passes one fewer on (``recursion_budget``, fed per call from the caller's
  stack depth and ``sys.getrecursionlimit()``); none left fails the call's depth assumption and the
  call runs in Python, which gives eager's answer, ``RecursionError`` included.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
import types

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.eager.polymorphic_function import atomic_function
from tensorflow.python.framework import auto_control_deps, ops
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework.ops import EagerTensor

from janus.assumptions.checks import Assumption
from janus.assumptions.specs import merge_shapes
from janus.config import config
from janus.graphgen import function_trim, recursion_grad, tree_batching
from janus.graphgen.errors import NotConvertible
from janus.graphgen.fallible import called_graphs
from janus.graphgen.heap import PyObjectRef
from janus.graphgen.ordering import STATE_READS, keep_fallible, outlives_call
from janus.graphgen.pynumber import PyNumber
from janus.graphgen.source import location
from janus.graphgen.values import is_symbolic, is_user_object
from janus.ops.assert_op import CHECK_OPS, _ops
from janus.profiler.observe import ScalarObs, SeqObs, TensorObs
from janus.source.library import is_library_class

_names = itertools.count(1)
MAX_SAMPLES = 20_000  # tree nodes scanned for attribute types while generating
# Frames that eager may need below the deepest level, for the ops it calls (a Keras layer's call
# takes about 36, tf.matmul 12), and the frames between janus's call and the user function.
SPARE_FRAMES = 100
RECURSION_DEPTH = "recursion depth"  # the key of the assumption that a call's recursion fits the budget

# Invocations read variables only; ACD must neither chain them nor force them to run.
auto_control_deps.SKIPPED_ORDER_INSENSITIVE_STATEFUL_OPS = auto_control_deps.SKIPPED_ORDER_INSENSITIVE_STATEFUL_OPS | {
    "JanusInvoke",
    "JanusInvokeGrad",
}
for _heap_op in ("JanusPyGetAttr", "JanusPyGetSubscr", "JanusPySetAttr", "JanusPySetSubscr", *sorted(CHECK_OPS)):
    ops.NotDifferentiable(_heap_op)


class _Restart(Exception):
    """A parameter must change kind (static object -> pointer, pointer -> optional pointer)."""

    def __init__(self, index: int, kind: str) -> None:
        self.index, self.kind = index, kind


# ---------------------------------------------------------------------------- signatures
@dataclasses.dataclass
class Param:
    """One flattened parameter: ``tensor``/``number`` (a tensor input), ``pointer`` or ``static``."""

    kind: str
    dtype: tf.DType | None = None
    shape: tuple | None = None
    number_type: type | None = None
    cls: type | None = None
    optional: bool = False
    samples: list = dataclasses.field(default_factory=list)
    value: object = None

    def key(self) -> tuple:
        static = id(self.value) if self.kind == "static" else None
        return (self.kind, self.dtype, self.shape, self.number_type, self.cls, self.optional, static)


def _flatten(value: object, leaves: list) -> object:
    """The structure of an argument value with its leaves moved into ``leaves``."""
    if type(value) in (tuple, list):
        return (type(value), [_flatten(v, leaves) for v in value])
    leaves.append(value)
    return None


def _unflatten(template: object, leaves) -> object:
    if template is None:
        return next(leaves)
    kind, items = template
    return kind(_unflatten(t, leaves) for t in items)


def _param_of(value: object) -> Param:
    if isinstance(value, PyObjectRef):
        return Param("pointer", cls=value.cls, optional=value.optional, samples=_closure(value.samples, value.cls))
    if isinstance(value, PyNumber):
        return Param("number", value.tensor.dtype, (), number_type=value.type)
    if is_symbolic(value) or isinstance(value, EagerTensor):
        return Param("tensor", value.dtype, tuple(value.shape) if value.shape.rank is not None else None)
    return Param("static", value=value)


def _closure(samples: list, cls: type) -> list:
    """Objects of ``cls`` reachable from ``samples`` through instance attributes and lists."""
    seen: dict[int, object] = {}
    todo = [s for s in samples if s is not None]
    while todo and len(seen) < MAX_SAMPLES:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen[id(obj)] = obj
        for attr in getattr(obj, "__dict__", {}).values():
            items = attr if type(attr) in (list, tuple) else (attr,)
            todo.extend(v for v in items if type(v) is cls and id(v) not in seen)
    return list(seen.values())


# ---------------------------------------------------------------------------- outputs
@dataclasses.dataclass
class OutputSpec:
    template: object  # ("tensor", i) / ("number", i, type) / ("const", value) / (kind, [templates])
    dtypes: list[tf.DType]
    shapes: list[tuple | None]


def _declare(observations: list, loc: str) -> OutputSpec:
    dtypes: list[tf.DType] = []
    shapes: list = []

    def walk(obs: list) -> object:
        first = obs[0]
        if any(type(o) is not type(first) for o in obs):
            raise NotConvertible("a recursive function returns values of different kinds", loc)
        if isinstance(first, TensorObs):
            if len({o.dtype for o in obs}) != 1:
                raise NotConvertible("a recursive function returns tensors of different dtypes", loc)
            dtypes.append(first.dtype)
            shapes.append(merge_shapes([o.shape for o in obs]))
            return ("tensor", len(dtypes) - 1)
        if isinstance(first, ScalarObs):
            types_ = {o.type for o in obs}
            if types_ == {type(None)}:
                return ("const", None)
            if len(types_) == 1 and first.type in (int, float, bool):
                dtypes.append({int: tf.int64, float: tf.float64, bool: tf.bool}[first.type])
                shapes.append(())
                return ("number", len(dtypes) - 1, first.type)
            raise NotConvertible("a recursive function returns Python values of different types", loc)
        if isinstance(first, SeqObs) and first.keys is None and first.type in (tuple, list):
            if len({(o.type, len(o.items)) for o in obs}) != 1:
                raise NotConvertible("a recursive function returns sequences of different lengths", loc)
            return (first.type, [walk([o.items[i] for o in obs]) for i in range(len(first.items))])
        raise NotConvertible("a recursive function returns a value janus cannot pass between graphs", loc)

    if not observations:
        raise NotConvertible("a recursive function that never returned while profiled", loc)
    return OutputSpec(walk(observations), dtypes, shapes)


def _output_tensors(value: object, spec: OutputSpec, loc: str) -> list[tf.Tensor]:
    """The body's return value as the declared flat outputs."""
    out: list = [None] * len(spec.dtypes)

    def walk(template: object, v: object) -> None:
        kind = template[0]
        if kind == "const":
            if v is not template[1]:
                raise NotConvertible("a recursive function returns different Python values", loc)
        elif kind in ("tensor", "number"):
            index = template[1]
            t = v.tensor if isinstance(v, PyNumber) else v
            if kind == "number" and not isinstance(v, PyNumber) and type(v) is template[2]:
                t = tf.constant(v, spec.dtypes[index])
            if not (is_symbolic(t) or isinstance(t, EagerTensor)) or t.dtype != spec.dtypes[index]:
                raise NotConvertible("a recursive function returns a value of another type than profiled", loc)
            out[index] = t
        else:
            if type(v) is not kind or len(v) != len(template[1]):
                raise NotConvertible("a recursive function returns another structure than profiled", loc)
            for t, item in zip(template[1], v):
                walk(t, item)

    walk(spec.template, value)
    return out


def _pack_outputs(template: object, outputs: list) -> object:
    kind = template[0]
    if kind == "const":
        return template[1]
    if kind == "tensor":
        return outputs[template[1]]
    if kind == "number":
        return PyNumber(outputs[template[1]], template[2])
    return kind(_pack_outputs(t, outputs) for t in template[1])


# ---------------------------------------------------------------------------- the function
@dataclasses.dataclass(eq=False)
class RecursiveFunction:
    """One recursive user function as a pair of graph functions (forward and backward)."""

    code: types.CodeType
    name: str
    bwd_name: str
    params: list[Param]
    template: object  # argument structure
    outputs: OutputSpec
    captures: list  # external tensors every invocation passes after the parameters
    has_asserts: bool = False
    writes_heap: bool = False  # its body writes Python objects: every invocation must run, used or not
    assumptions: dict = dataclasses.field(default_factory=dict)  # those its body plants (by id)
    trainable_inputs: list[int] = dataclasses.field(default_factory=list)  # indices into the flat inputs
    grad_kinds: list[str] = dataclasses.field(default_factory=list)  # per trainable input: none/dense/sparse
    grad_dtypes: list[tf.DType] = dataclasses.field(default_factory=list)  # the backward's flat outputs
    grad_shapes: list = dataclasses.field(default_factory=list)
    trainable_outputs: list[int] = dataclasses.field(default_factory=list)
    forward: object = None  # AtomicFunction
    backward: object = None

    def flat_inputs(self, leaves: list, ctx, loc: str) -> list[tf.Tensor]:
        """The tensors one invocation passes: parameters, then the captures."""
        tensors = []
        for i, (param, value) in enumerate(zip(self.params, leaves)):
            if param.kind == "static":
                if value is not param.value:
                    if isinstance(value, PyObjectRef) or (is_user_object(value) and ctx.path_of(value)):
                        raise _Restart(i, "pointer")
                    if type(param.value) in (int, float) and type(value) in (type(param.value), PyNumber):
                        raise _Restart(i, "number")  # a Python number that changes: a tensor parameter
                    raise NotConvertible("a recursive call passes a Python value that changes between calls", loc)
                continue
            if param.kind == "pointer":
                if isinstance(value, PyObjectRef):
                    if value.cls is not param.cls:
                        raise NotConvertible("a recursive call passes objects of different classes", loc)
                    if value.optional and not param.optional:
                        raise _Restart(i, "optional")
                    tensors.append(value.pointer)
                elif value is None:
                    if not param.optional:
                        raise _Restart(i, "optional")
                    tensors.append(tf.constant(0, tf.int64))
                elif type(value) is param.cls and ctx.path_of(value):
                    tensors.append(ctx.pointer_of(value))
                else:
                    raise NotConvertible("a recursive call passes an object janus cannot point to", loc)
                continue
            tensor = value.tensor if isinstance(value, PyNumber) else value
            if isinstance(value, (int, float, bool)) and param.kind == "number" and type(value) is param.number_type:
                tensor = tf.constant(value, param.dtype)
            if not (is_symbolic(tensor) or isinstance(tensor, EagerTensor)) or tensor.dtype != param.dtype:
                raise NotConvertible("a recursive call passes a value of another type", loc)
            if param.shape is not None and not tf.TensorShape(param.shape).is_compatible_with(tensor.shape):
                raise _Restart(i, "relax")
            tensors.append(tensor)
        # The external tensors even inside the body: a tf.cond branch there then captures the same
        # tensor as its sibling branch does, so cond_v2 makes one input of it (two inputs would each
        # get zero gradients from the other branch: full-size zero slices of an embedding table).
        return tensors + self.captures

    def invoke(self, inputs: list[tf.Tensor], ctx) -> tuple[list[tf.Tensor], tf.Operation]:
        graph = ops.get_default_graph()
        previous = ctx.last_invoke.get(graph) if not config.parallel_calls else None
        deps = ([previous] if previous is not None else []) + ctx.heap_order_for_invoke()
        budget, depth = _budget(ctx, self.code)
        with tf.control_dependencies(deps):
            outputs, _frame = _ops().janus_invoke(
                budget,
                inputs,
                Tout=self.outputs.dtypes,
                output_shapes=recursion_grad.shapes(self.outputs.shapes),
                f=self.name,
                depth_assumption=depth.id,
                single_threaded=config.single_threaded_recursion,
            )
        op = _frame.op
        resources = [i + 1 for i, t in enumerate(inputs) if t.dtype == tf.resource]  # after the budget
        op._set_attr(  # noqa: SLF001 - lets ACD treat the variables as read, not written
            "_read_only_resource_inputs", attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(i=resources))
        )
        ctx.last_invoke[graph] = op
        ctx.note_invoke(op)
        if self.writes_heap:  # ACD skips invocations (they only read variables): this one must run,
            ctx.must_run(op)  # and the heap ops after it see its writes
            ctx.heap_after(op)
        if self.forward is not None:
            recursion_grad.add_to_graphs(self.forward)
        return list(outputs), op


# ---------------------------------------------------------------------------- depth
def recursion_budget(step: int) -> tf.Tensor:
    """The invocations a call may make, one inside another: fewer than the levels eager could
    recurse from here before ``RecursionError`` (``step`` Python frames a level, ``SPARE_FRAMES``
    below the deepest, and a quarter less for frames a C function adds: ``map`` on Python 3.12)."""
    frame, depth = sys._getframe(1), 0  # noqa: SLF001 - the caller's stack, as eager will have it
    while frame is not None:
        depth += 1
        frame = frame.f_back
    left = max((sys.getrecursionlimit() - depth - SPARE_FRAMES) * 3 // 4 // step, 0)
    tensor = _budgets.get(left)
    if tensor is None:  # a call site's budget is the same every call: converting it cost 15-35 µs
        if len(_budgets) >= 256:
            _budgets.clear()
        with tf.init_scope():  # eager, whatever graph the caller builds: cached for every call
            tensor = _budgets[left] = tf.constant(np.int64(left))
    return tensor


_budgets: dict[int, tf.Tensor] = {}  # recursion_budget's tensors, by value


def _budget(ctx, code: types.CodeType) -> tuple[tf.Tensor, Assumption]:
    """The invocations left where a call is placed (the body's own parameter inside a recursive
    function, else the one fed per call) and the assumption that there are enough."""
    if ctx.recursion_depth is None:
        cycle, steps = cycle_codes(ctx.profile), ctx.profile.recursion_steps
        step = max([steps.get(code, len(cycle)) for code in cycle], default=1)  # unmeasured: every function a frame
        fed = ctx.computed_input(functools.partial(recursion_budget, step), tf.int64)
        what = f"the recursion stays within Python's recursion limit ({step} frame(s) a level)"
        ctx.recursion_depth = (fed, ctx.assumption(RECURSION_DEPTH, what, location(code), final=True))
    fed, depth = ctx.recursion_depth
    ctx.assumptions[depth.id] = depth  # again: an abandoned attempt may have dropped it
    return (ctx.recursion_budgets[-1] if ctx.recursion_budgets else fed), depth


# ---------------------------------------------------------------------------- the interpreter's entry
def cycle_codes(profile) -> set:
    """The code objects the profile saw in a call cycle."""
    edges: dict = {}
    for (caller, _line), callees in profile.callees.items():
        edges.setdefault(caller, set()).update(callees)
    cyclic = set()
    for start in edges:
        stack, seen = list(edges.get(start, ())), set()
        while stack:
            node = stack.pop()
            if node is start:
                cyclic.add(start)
                break
            if node not in seen:
                seen.add(node)
                stack.extend(edges.get(node, ()))
    return cyclic


def same_cycle(profile, a: types.CodeType, b: types.CodeType) -> bool:
    edges: dict = {}
    for (caller, _line), callees in profile.callees.items():
        edges.setdefault(caller, set()).update(callees)

    def reaches(x, y) -> bool:
        stack, seen = [x], set()
        while stack:
            node = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt is y:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    return reaches(a, b) and reaches(b, a)


def call(interp, func: types.FunctionType, arguments: dict[str, object]) -> object:
    """A call of recursive ``func``: a ``JanusInvoke`` of its graph function."""
    ctx = interp.ctx
    code = func.__code__
    loc = location(code)
    leaves: list = []
    template = _flatten(list(arguments.values()), leaves)
    building = ctx.building[-1] if ctx.building else None
    if building is not None and building.code is code:
        rf = building
        inputs = rf.flat_inputs(leaves, ctx, loc)
    else:
        if any(b.code is code for b in ctx.building):
            raise NotConvertible(f"mutual recursion of {func.__qualname__} through another recursive function", loc)
        rf = _build(interp, func, list(arguments), template, leaves, loc)
        inputs = rf.flat_inputs(leaves, ctx, loc)
        batched = _batched_item(ctx, rf, leaves)
        if batched is not None:
            rows = tree_batching.batched_call(ctx, rf, *batched, loc)
            if rows is not None:
                ctx.code.call(f"janus_batched[{rf.name}]", tuple(leaves), {}, None)
                return _pack_outputs(rf.outputs.template, rows)
    outputs, op = rf.invoke(inputs, ctx)
    if rf.has_asserts or not ctx.building:  # an outermost invocation fails where the recursion is too deep
        ctx.assert_ops.append(op)
    ctx.code.call(f"janus_invoke[{rf.name}]", tuple(leaves), {}, None)
    return _pack_outputs(rf.outputs.template, outputs)


def _batched_item(ctx, rf: RecursiveFunction, leaves: list) -> tuple | None:
    """(loop, iteration) where the call's one changing argument is the item of a loop whose trees
    may run level by level (``tree_batching``)."""
    if ctx.building or not ctx.batching_loops:
        return None
    dynamic = [value for param, value in zip(rf.params, leaves) if param.kind != "static"]
    return ctx.batched_item(dynamic[0]) if len(dynamic) == 1 else None


def _build(interp, func, names, template, leaves, loc) -> RecursiveFunction:
    ctx = interp.ctx
    params = [_param_of(v) for v in leaves]
    key = (func.__code__, tuple(p.key() for p in params))
    cached = ctx.recursive_functions.get(key)
    if cached is not None:
        ctx.assumptions.update(cached.assumptions)  # an abandoned attempt may have dropped them
        return cached
    for i, (p, value) in enumerate(zip(params, leaves)):
        if p.kind == "static" and _is_tree_node(value) and ctx.path_of(value):
            params[i] = _pointer_param(value)  # tree nodes known while generating: pointers too
    observations = ctx.profile.return_observations.get(func.__code__, [])
    outputs = _declare(list(observations), loc)
    for _attempt in range(6):
        try:
            rf = _trace_twice(interp, func, names, template, params, outputs, loc)
        except _Restart as restart:
            p = params[restart.index]
            if restart.kind == "pointer":
                value = p.value
                if not (is_user_object(value) and ctx.path_of(value)):
                    raise NotConvertible(
                        "a recursive call passes different objects janus cannot point to", loc
                    ) from None
                params[restart.index] = _pointer_param(value)
            elif restart.kind == "number":
                kind = type(p.value)
                params[restart.index] = Param("number", tf.int64 if kind is int else tf.float64, (), number_type=kind)
            elif restart.kind == "optional":
                p.optional = True
            else:
                p.shape = None if p.shape is None else tuple(None for _ in p.shape)
            continue
        if isinstance(rf, OutputSpec):
            outputs = rf  # the body's outputs are less specific than profiled: declare those
            continue
        ctx.recursive_functions[key] = rf
        return rf
    raise NotConvertible(f"could not settle the signature of recursive {func.__qualname__}", loc)


def _is_tree_node(value: object) -> bool:
    """A user object of a self-referential class (its attributes hold objects of its class)."""
    if isinstance(value, type) or callable(value) or not is_user_object(value) or is_library_class(type(value)):
        return False
    return len(_closure([value], type(value))) > 1


def _pointer_param(value: object) -> Param:
    return Param("pointer", cls=type(value), samples=_closure([value], type(value)))


# ---------------------------------------------------------------------------- tracing
def _trace_twice(interp, func, names, template, params, outputs, loc) -> RecursiveFunction | OutputSpec:
    """Traces the body once to learn its captures, then for real; relaxed outputs when the body disagrees.

    A gradient whose form differs from the one declared (a sparse table's) takes another real
    trace: building a gradient changes the conds of the graph it was built on.
    """
    uid = next(_names)
    base = f"janus_rec_{func.__name__}_{uid}"
    rf = RecursiveFunction(func.__code__, base, f"{base}_grad", params, template, outputs, captures=[])
    recursion_grad.registry[rf.name] = rf
    probe = _trace(interp, func, names, rf, loc, probe=True)
    rf.captures = list(probe.external_captures)
    rf.writes_heap = interp.ctx.wrote_heap_within(probe)
    assumptions = dict(interp.ctx.assumptions)
    kinds = None
    for _attempt in range(3):
        interp.ctx.assumptions.clear()
        interp.ctx.assumptions.update(assumptions)
        graph = _trace(interp, func, names, rf, loc, probe=False)
        keep_fallible(graph, graph.outputs)  # an unread tf.gather still raises, as in eager
        if _updates_tf_state(graph):
            raise NotConvertible(
                "a recursive function updates a TF variable (an invocation only reads them: its updates could "
                "not be ordered or put back)",
                loc,
            )
        extra = [t for t in graph.external_captures if all(t is not c for c in rf.captures)]
        if extra:
            raise NotConvertible("a recursive function captures different tensors on each trace", loc)
        actual = [tuple(t.shape) if t.shape.rank is not None else None for t in graph.outputs[: len(outputs.dtypes)]]
        relaxed = [
            merge_shapes([d, a]) if d is not None and a is not None else None for d, a in zip(outputs.shapes, actual)
        ]
        if relaxed != outputs.shapes:
            return OutputSpec(outputs.template, outputs.dtypes, relaxed)
        kinds = recursion_grad.differentiate(rf, graph, loc, kinds)
        if kinds is None:
            break
    else:
        raise NotConvertible("the gradient of a recursive function changes form each time it is built", loc)
    rf.forward = atomic_function.from_func_graph(rf.name, graph, {})
    if config.trim_functions:
        function_trim.trim_registered(rf.name)
    return rf


def _updates_tf_state(graph) -> bool:
    """An op of ``graph``, or of a region within it, updates a resource that outlives the call
    (a variable: ``scatter_add``, ``assign``); janus's heap ops and its bookkeeping do not count."""
    pending = [graph]
    while pending:
        for op in pending.pop().get_operations():
            if op.type in STATE_READS or op.type.startswith("JanusPy") or not op._is_stateful:  # noqa: SLF001
                continue
            bodies = called_graphs(op)
            if bodies:  # control flow or a function call: its ops tell
                pending += bodies
            elif bodies is None or any(outlives_call(t) for t in op.inputs):
                return True
    return False


def _trace(interp, func, names, rf: RecursiveFunction, loc: str, probe: bool):
    """The body of ``func`` as a FuncGraph with ``rf.params`` as its parameters."""
    ctx = interp.ctx
    assumptions = dict(ctx.assumptions)  # the probe's assertions are thrown away with its graph
    specs = [tf.TensorSpec([], tf.int64)] + [  # the invocations left, then the parameters
        tf.TensorSpec([], tf.int64) if p.kind == "pointer" else tf.TensorSpec(p.shape, p.dtype)
        for p in rf.params
        if p.kind != "static"
    ]
    asserts: list = []

    def body(budget, *placeholders):
        graph = ops.get_default_graph()
        if not probe:  # fixes the order of the captured inputs: the recursive calls pass them in this order
            for t in rf.captures:
                graph.capture(t)
        feed = iter(placeholders)
        values = []
        for p in rf.params:
            if p.kind == "tensor":
                values.append(next(feed))
            elif p.kind == "number":
                values.append(PyNumber(next(feed), p.number_type))
            elif p.kind == "pointer":
                values.append(PyObjectRef(next(feed), p.cls, p.samples, p.optional))
            else:
                values.append(p.value)
        arguments = dict(zip(names, _unflatten(rf.template, iter(values))))
        from janus.graphgen.interpreter import Interpreter  # the interpreter imports this module

        ctx.building.append(rf)
        ctx.recursion_budgets.append(budget)
        ctx.touches.begin_trace(rf)
        ctx.region_depth += 1
        ctx.code.muted += 1
        try:
            with ctx.nested_graph() as nested_asserts:
                result = Interpreter(ctx).run(func, arguments, recursive_entry=True)
                asserts.extend(nested_asserts)
        finally:
            ctx.code.muted -= 1
            ctx.region_depth -= 1
            ctx.recursion_budgets.pop()
            ctx.building.pop()
        flat = _output_tensors(result, rf.outputs, loc)
        if asserts:  # the outputs carry the assertions, so an invocation fails when one breaks
            with tf.control_dependencies(asserts):
                flat = [tf.identity(t) for t in flat]
        return flat

    graph = func_graph_module.func_graph_from_py_func(
        rf.name, body, specs, {}, func_graph=func_graph_module.FuncGraph(rf.name), add_control_dependencies=True
    )
    if probe:
        ctx.assumptions.clear()
        ctx.assumptions.update(assumptions)
    else:
        rf.has_asserts = bool(asserts)
        rf.assumptions = {k: v for k, v in ctx.assumptions.items() if k not in assumptions}
    return graph
