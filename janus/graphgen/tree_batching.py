"""Level batching: a loop's calls of a recursive function over a batch of trees, run level by level.

``for tree in batch: ... self.encode(tree) ...`` runs ``encode`` once per tree node through
``JanusInvoke``: a tree node's arithmetic (a ``[1, 2h] x [2h, h]`` product) is tiny, so its cost
is the invocation, a few µs a node forward and backward. Here the loop's first call instead runs
every tree of the batch at once, one tree level at a time, as TF Fold does:

1. **Plan** (``plan_of``, once per recursive function). The function's forward graph must be one
   ``If`` on the node's attributes whose branches read the node's attributes, invoke the function
   on some of them (its children) and otherwise use only ops of ``_ROW_OPS``, which act row by row.
   Anything else (a second parameter, a nested branch, a loop, an op not on the list, a tensor held
   by a node) leaves the function to ``JanusInvoke``, with the reason in ``explain()``.
2. **Walk** (``_walk``, run in the graph by ``tf.numpy_function``, once per call). It reads each
   node's attributes the way the function would, through the call's heap store and its checks
   (``pyheap``), from the node's ``__dict__`` only (no user code runs), and orders the nodes by
   height: a node's children come in earlier levels. A node of another class, a missing attribute,
   a child that is not a node or a cycle fail the batching assumption (the call re-runs eagerly and
   the next graph invokes the function per node); a tree deeper than Python's recursion limit
   fails the recursion-depth assumption, as an invocation does.
3. **Rows** (``_Vectorizer``). The forward graph, evaluated on all nodes of a level at once: each
   heap read becomes a gather from the walk's column, each invocation a gather from the states of
   earlier levels, the ``If`` a partition of the level's rows and a stitch of both branches'
   results; janus's own checks and touch counters run as the per-node function would run them.
4. **Validity** (``BatchingLoop.finish``). The batch's rows are computed where the loop's first
   call is, before the later iterations run. That is eager's answer only if no iteration changes
   what the function reads: a loop whose body updates a variable or a heap object refuses batching
   (``TreeBatchingRefused``), and the driver builds again without it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import execute
from tensorflow.python.framework import ops, tensor_util
from tensorflow.python.ops import handle_data_util

from janus.graphgen import touches, tree_walk
from janus.graphgen.errors import TreeBatchingRefused
from janus.graphgen.fallible import called_graphs
from janus.graphgen.ordering import STATE_READS, outlives_call
from janus.ops import pyheap
from janus.ops.assert_op import ASSUMPTION_MARKER, janus_assert

BATCHING_KEY = "tree batching"  # the assumption key (with the loop's location) that the trees batch

# Ops that act on each row alone, applied to a level's rows unchanged (their first input stacked).
_SAME_OPS = frozenset(
    {
        "Identity", "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign", "LeakyRelu",
        "Neg", "Exp", "Log", "Log1p", "Square", "Sqrt", "Rsqrt", "Abs", "Sign", "Floor", "Ceil", "Round",
        "Cast", "JanusNarrowInt32", "Reciprocal", "Erf", "LogicalNot", "Softmax", "LogSoftmax", "ZerosLike",
        "OnesLike",
    }
)  # fmt: skip
_REDUCTIONS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "All", "Any"})
_BINARY_OPS = frozenset(
    {
        "AddV2",
        "Add",
        "Sub",
        "Mul",
        "RealDiv",
        "Maximum",
        "Minimum",
        "SquaredDifference",
        "Equal",
        "NotEqual",
        "Greater",
        "GreaterEqual",
        "Less",
        "LessEqual",
        "LogicalAnd",
        "LogicalOr",
        "FloorDiv",
        "FloorMod",
        "Pow",
    }  # fmt: skip
)
_ROW_OPS = _SAME_OPS | _BINARY_OPS | {
    "Const", "NoOp", "FakeParam", "Placeholder", "ReadVariableOp", "JanusPyGetAttr", "JanusInvoke", "JanusUnwrap",
    "JanusAssert", "Pack", "Unpack", "ConcatV2", "Split", "Reshape", "ExpandDims", "Squeeze", "GatherV2", "Transpose",
    *_REDUCTIONS, "ResourceGather", "MatMul", "BiasAdd", "AssignAddVariableOp",
}  # fmt: skip
# Ops of the function's graph that run for their effect (janus's checks and touch counters, the If).
_SIDE_OPS = frozenset({"AssignAddVariableOp", "JanusAssert", "JanusUnwrap", "JanusNarrowInt32", "If", "StatelessIf"})
# Ops whose only effect is their value: nothing to run when one is a control input.
_PURE_READS = frozenset({"JanusPyGetAttr", "ReadVariableOp", "JanusInvoke", "Const", "Placeholder", "FakeParam"})
# Ops that compute the branch test from the node's attributes, evaluated by the walk in Python.
_TEST_OPS = frozenset({"JanusPyGetAttr", "Const", "Identity", "Unpack", "Cast", "Equal", "NotEqual", "LogicalNot"})


class NotBatchable(Exception):
    """The recursive function's graph is not of the form level batching runs."""


# ---------------------------------------------------------------------------- the plan
@dataclasses.dataclass(frozen=True)
class _Read:
    """One heap read of the node in the forward graph: a column of the walk."""

    graph: int  # id() of the graph holding the op
    op_name: str
    attr: str
    expect: int  # the pyheap expectation the read checks
    dtype: tf.DType
    shape: tuple
    branch: bool | None  # None: before the If (the test); True/False: in that branch
    child: bool  # the node argument of an invocation: the column holds the child's row index

    @property
    def zero(self) -> object:
        """The column's entry for a node that does not make this read."""
        return (0,) * self.shape[0] if self.shape else 0


@dataclasses.dataclass(eq=False)
class Plan:
    """How level batching runs one recursive function."""

    rf: object  # RecursiveFunction
    cls: type
    graph: object  # the forward FuncGraph
    if_op: tf.Operation
    reads: list[_Read]
    test_ops: list[tf.Operation]  # in topological order
    leaf_branch: bool  # the branch without recursive calls (then: True)
    id: int = 0

    def read_index(self, op: tf.Operation) -> int:
        """The read's position among all of them (the walk's values)."""
        return self._index[(id(op.graph), op.name)]

    def column_index(self, op: tf.Operation) -> int:
        """The read's position among the branches' reads (the walk's columns)."""
        return self._columns[(id(op.graph), op.name)]

    @property
    def columns(self) -> list[_Read]:
        """The reads the graph uses: the branches' (the test's only choose the branch)."""
        return [r for r in self.reads if r.branch is not None]

    def __post_init__(self) -> None:
        self._index = {(r.graph, r.op_name): i for i, r in enumerate(self.reads)}
        self._columns = {(r.graph, r.op_name): i for i, r in enumerate(self.columns)}
        self.walk = tree_walk.compile_walk(self)


_plans: dict[int, Plan] = {}
_plan_ids = itertools.count(1)
_plan_lock = threading.Lock()


def plan_of(rf) -> Plan | str:
    """The level-batching plan of ``rf``, or why it has none (cached on ``rf``)."""
    cached = getattr(rf, "batch_plan", None)
    if cached is None:
        try:
            cached = _make_plan(rf)
        except NotBatchable as err:
            cached = str(err)
        except (ValueError, TypeError, KeyError, tf.errors.OpError) as err:  # a graph of a form not foreseen
            cached = f"its graph could not be batched ({type(err).__name__}: {err})"
        rf.batch_plan = cached
    return cached


def _make_plan(rf) -> Plan:
    if rf.forward is None:
        raise NotBatchable("its graph has no forward function")
    dynamic = [p for p in rf.params if p.kind != "static"]
    if len(dynamic) != 1 or dynamic[0].kind != "pointer":
        raise NotBatchable("it takes more than one tree node (or a value) that changes between calls")
    template = rf.outputs.template
    if template != ("tensor", 0) and not (
        template[0] in (tuple, list) and [t[:1] for t in template[1]] == [("tensor",)] * len(template[1])
    ):
        raise NotBatchable("it returns something other than a tensor or a tuple of tensors")
    if any(shape is None for shape in rf.outputs.shapes):
        raise NotBatchable("the rank of what it returns is not known")
    cls = dynamic[0].cls
    if cls.__getattribute__ is not object.__getattribute__ or not all(
        hasattr(s, "__dict__") for s in dynamic[0].samples
    ):
        raise NotBatchable(f"{cls.__name__} reads its attributes through its own code")
    graph = rf.forward.graph
    node = graph.inputs[1]
    ifs = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    if len(ifs) != 1 or any(_runs_graphs(op) for op in graph.get_operations() if op not in ifs):
        raise NotBatchable("its body is not one branch on the node")
    if_op = ifs[0]
    reads: list[_Read] = []
    test_ops = _slice(if_op.inputs[0])
    for op in graph.get_operations():
        if op.type not in _ROW_OPS and op.type not in _TEST_OPS and op is not if_op and op._is_stateful:  # noqa: SLF001
            raise NotBatchable(f"its body runs {op.type}")
    for op in test_ops:
        if op.type not in _TEST_OPS:
            raise NotBatchable(f"its branch test runs {op.type}")
        if op.type == "JanusPyGetAttr":
            reads.append(_read_of(op, node, None, child=False))
    node_input = [i for i, t in enumerate(if_op.inputs) if t is node]
    if len(node_input) != 1:
        raise NotBatchable("its branches do not take the node")
    outer = list(graph.inputs[1:])  # the node, then the store and the captures, as every invocation passes them
    recursing: list[bool] = []  # the branches that recurse
    for taken, attr in ((True, "then_branch"), (False, "else_branch")):
        branch = _branch_graph(graph, if_op, attr)
        inner_node = branch.inputs[node_input[0] - 1]
        passed = {id(branch.inputs[i - 1]): t for i, t in enumerate(if_op.inputs) if i > 0}
        for op in branch.get_operations():
            if _runs_graphs(op):  # a cond, a loop or a call in a branch: each row would need its own
                raise NotBatchable(f"a branch of its body runs {op.type}")
            if op.type not in _ROW_OPS and op._is_stateful:  # noqa: SLF001 - pure ops: on shared values only
                raise NotBatchable(f"its body runs {op.type}")
            if op.type == "AssignAddVariableOp" and not touches.is_touch_op(op):
                raise NotBatchable("its body updates a variable")
            if op.type == "JanusInvoke":
                _check_invoke(op, rf, inner_node, passed, outer)
        child_reads = {id(op.inputs[1].op) for op in branch.get_operations() if op.type == "JanusInvoke"}
        if child_reads:
            recursing.append(taken)
            if any(op.type.startswith("ResourceGather") for op in branch.get_operations()):
                # run inside the levels' tf.while_loop, its table's gradient would come out dense
                raise NotBatchable("a node with children looks up a table")
        for op in branch.get_operations():
            if op.type == "JanusPyGetAttr":
                reads.append(_read_of(op, inner_node, taken, child=id(op) in child_reads))
    if len(recursing) != 1:
        raise NotBatchable("both of its branches recurse" if recursing else "its branches do not recurse")
    plan = Plan(rf, cls, graph, if_op, reads, test_ops, leaf_branch=not recursing[0])
    _trial(plan)
    with _plan_lock:
        plan.id = next(_plan_ids)
        _plans[plan.id] = plan
    return plan


def _runs_graphs(op: tf.Operation) -> bool:
    """A control-flow op or a function call (not an invocation of the recursion: a gather of rows)."""
    return op.type != "JanusInvoke" and called_graphs(op) != []


def _slice(tensor: tf.Tensor) -> list[tf.Operation]:
    """The ops ``tensor`` is computed from within its graph, in topological order."""
    order: list[tf.Operation] = []
    seen: set[int] = set()

    def visit(op: tf.Operation) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.inputs:
            if t.op.type != "Placeholder":
                visit(t.op)
        order.append(op)

    visit(tensor.op)
    return order


def _read_of(op: tf.Operation, node: tf.Tensor, branch: bool | None, child: bool) -> _Read:
    if op.inputs[2] is not node:
        raise NotBatchable("its body reads an object other than the node")
    expectation = pyheap._expectations[op.get_attr("expect")]  # noqa: SLF001 - the op's own check
    shape = tuple(tf.TensorShape(op.get_attr("shape")).as_list())
    if expectation.kind == "tensor" or None in shape:
        raise NotBatchable("a node holds a tensor")
    if child and expectation.kind != "object":
        raise NotBatchable("it recurses on something other than a node")
    attr = op.get_attr("attr_name")
    attr = attr.decode() if isinstance(attr, bytes) else attr
    return _Read(id(op.graph), op.name, attr, op.get_attr("expect"), op.get_attr("dtype"), shape, branch, child)


def _check_invoke(op: tf.Operation, rf, node: tf.Tensor, passed: dict, outer: list) -> None:
    name = op.get_attr("f")
    name = name.decode() if isinstance(name, bytes) else getattr(name, "name", name)
    if name != rf.name:
        raise NotBatchable("its body invokes another recursive function")
    child = op.inputs[1].op
    if child.type != "JanusPyGetAttr" or child.inputs[2] is not node:
        raise NotBatchable("it recurses on something other than an attribute of the node")
    rest = [passed.get(id(t), t) for t in op.inputs[2:]]
    if len(rest) != len(outer) - 1 or any(a is not b for a, b in zip(rest, outer[1:])):
        raise NotBatchable("its recursive calls pass other values than its own")


def _branch_graph(graph, op: tf.Operation, attr: str):
    return graph._functions[op.node_def.attr[attr].func.name].graph  # noqa: SLF001 - the If's own branch


def _trial(plan: Plan) -> None:
    """Vectorizes the function once in a throwaway graph: an op it cannot run fails here, not
    halfway through a real build."""
    with tf.Graph().as_default():
        columns = [tf.compat.v1.placeholder(r.dtype, [None, *r.shape]) for r in plan.columns]
        states = [
            tf.compat.v1.placeholder(d, [None, *s]) for d, s in zip(plan.rf.outputs.dtypes, plan.rf.outputs.shapes)
        ]
        captures = []
        for t in plan.graph.inputs[2:]:
            captures.append(tf.compat.v1.placeholder(t.dtype, t.shape))
            handle_data_util.copy_handle_data(t, captures[-1])  # a variable's dtype and shape
        for branch in (True, False):
            _Vectorizer(plan, columns, states, branch).level(tf.range(tf.constant(2, tf.int64)), captures)


# ---------------------------------------------------------------------------- the walk
class _Refused(Exception):
    """A walk that breaks an assumption: its message carries the marker the runner looks for."""


def _fail(assumption_id: int, why: str) -> _Refused:
    return _Refused(f"{ASSUMPTION_MARKER}{assumption_id}: {why}")


def _walk(plan_id, batching_id, depth_id, store_id, batch_pointer, budget):
    """The batch's nodes, in order of height: one column per read, the level bounds, the roots."""
    plan = _plans[int(plan_id)]
    store = pyheap._stores[int(store_id)]  # noqa: SLF001 - the call's own store
    trees = store.resolve(int(batch_pointer))
    local = store.local or None  # the heap as this call wrote it so far
    if type(trees) is not list or (local and any(key[0] == id(trees) for key in local)):
        raise _fail(int(batching_id), "the batch is not a list janus can read directly")
    try:
        rows, heights, roots = plan.walk(trees, local, int(budget))
    except tree_walk.WalkFailed as err:
        which = {"batching": batching_id, "depth": depth_id}.get(err.assumption, err.assumption)
        raise _fail(int(which), str(err)) from None
    except Exception as err:  # noqa: BLE001 - a tree janus did not foresee: the call runs eagerly
        raise _fail(int(batching_id), f"the walk failed: {type(err).__name__}: {err}") from None
    order = np.argsort(np.array(heights, np.int64), kind="stable")  # post-order indices by position
    position = np.empty_like(order)
    position[order] = np.arange(len(order))
    columns = []
    for r, values in zip(plan.reads, zip(*rows) if rows else [()] * len(plan.reads)):
        if r.branch is not None:
            column = np.array(values, r.dtype.as_numpy_dtype).reshape([len(rows), *r.shape])
            columns.append(position[column][order] if r.child else column[order])
    bounds = np.concatenate([[0], np.cumsum(np.bincount(np.array(heights, np.int64)))]).astype(np.int64)
    roots = position[np.array(roots, np.int64)] if roots else np.zeros([0], np.int64)
    return [*columns, bounds, roots]


# ---------------------------------------------------------------------------- the rows
class _Vectorizer:
    """The forward graph on a level's rows: every tensor as (value, stacked), where a stacked
    value has the level's rows as a new first dimension and an unstacked one is the same for all."""

    def __init__(self, plan: Plan, columns: list[tf.Tensor], states: list[tf.Tensor], branch: bool) -> None:
        self.plan, self.columns, self.states, self.branch = plan, columns, states, branch
        self.side: list[tf.Operation] = []  # checks and counters the level must run

    def level(self, rows: tf.Tensor, captures: list[tf.Tensor]) -> list[tf.Tensor]:
        """The function's outputs for each of ``rows`` (node positions): ``[len(rows), *row shape]`` each."""
        graph = self.plan.graph
        memo = {
            t.ref(): v for t, v in zip(graph.inputs, [(None, False), (rows, True)] + [(c, False) for c in captures])
        }
        scope = _Scope(graph, memo, tf.size(rows))
        for op in graph.control_outputs:
            if op.type in _SIDE_OPS:
                self._run(op, scope)
        values = []
        for output in graph.outputs[: len(self.states)]:
            value, stacked = self.ev(output, scope)
            if not stacked:
                raise NotBatchable("its output does not depend on the node")
            values.append(value)
        with tf.control_dependencies(self.side):
            return [tf.identity(v) for v in values]

    def ev(self, t: tf.Tensor, scope: _Scope) -> tuple:
        key = t.ref()
        if key not in scope.memo:
            lazy = scope.lazy.pop(key, None)
            if lazy is not None:
                scope.memo[key] = lazy()
            elif t.op is self.plan.if_op:
                scope.memo[key] = self._if_output(t.op, t.value_index, scope)
            else:
                self._run(t.op, scope)
        value = scope.memo[key]
        if value is None:
            raise NotBatchable(f"it uses {t.op.type}'s output {t.value_index}")
        return value

    def _run(self, op: tf.Operation, scope: _Scope) -> None:
        if ("op", op.name) in scope.memo:
            return
        scope.memo[("op", op.name)] = True
        if op.type in ("If", "StatelessIf"):
            if op is not self.plan.if_op:
                raise NotBatchable(f"its body runs a {op.type} of its own")
            self._branch(op, scope)
            return
        controls = []
        for c in op.control_inputs:
            self._run_for_effect(c, scope)
            controls.extend(scope.memo.get(("made", c.name), []))
        with tf.control_dependencies(controls):
            outputs = self._op(op, scope)
        made = [v[0].op for v in outputs if v is not None and v[0] is not None and hasattr(v[0], "op")]
        scope.memo[("made", op.name)] = made
        for t, v in zip(op.outputs, outputs):
            scope.memo[t.ref()] = v

    def _run_for_effect(self, op: tf.Operation, scope: _Scope) -> None:
        """``op`` as a control input: what it makes run, not its value (cond_v2 gathers a
        branch's effects in an ``Identity`` of an ``If`` output that no branch computes per node)."""
        if op.type in ("Identity", "IdentityN", "NoOp"):
            if ("effect", op.name) in scope.memo:
                return
            scope.memo[("effect", op.name)] = True
            for t in op.inputs:
                self._run_for_effect(t.op, scope)
            for c in op.control_inputs:
                self._run_for_effect(c, scope)
        elif op.type not in _PURE_READS:  # a check, a counter, an op that may raise
            self._run(op, scope)

    def _in(self, op: tf.Operation, i: int, scope: _Scope) -> tuple:
        return self.ev(op.inputs[i], scope)

    def _op(self, op: tf.Operation, scope: _Scope) -> list:  # noqa: C901 - one case per op type
        kind = op.type
        if kind in ("NoOp", "Placeholder", "FakeParam"):
            return [None] * len(op.outputs)
        if kind == "Const":
            return [(tf.constant(tensor_util.MakeNdarray(op.get_attr("value")), op.outputs[0].dtype), False)]
        if op.inputs and not op._is_stateful:  # noqa: SLF001
            inputs = [self._in(op, i, scope) for i in range(len(op.inputs))]
            if not any(stacked for _, stacked in inputs):  # the same for every row: made once
                return [(t, False) for t in _same(op, [v for v, _ in inputs])]
        if kind == "AssignAddVariableOp":  # a touch counter: counted once per row, as the nodes would
            (resource, _), (value, _) = self._in(op, 0, scope), self._in(op, 1, scope)
            self.side.append(
                tf.raw_ops.AssignAddVariableOp(resource=resource, value=value * tf.cast(scope.size, value.dtype))
            )
            return []
        if kind == "JanusAssert":
            condition, stacked = self._in(op, 0, scope)
            condition = tf.reduce_all(condition) if stacked else condition
            self.side.append(janus_assert(condition, op.get_attr("assumption_id")))
            return []
        if kind == "ReadVariableOp":
            resource, stacked = self._in(op, 0, scope)
            if stacked:
                raise NotBatchable("it reads a variable chosen per node")
            return [(tf.raw_ops.ReadVariableOp(resource=resource, dtype=op.get_attr("dtype")), False)]
        if kind == "JanusPyGetAttr":
            rows, stacked = self._in(op, 2, scope)
            if not stacked:
                raise NotBatchable("it reads an object other than the node")
            return [(None, False), (tf.gather(self.columns[self.plan.column_index(op)], rows), True)]
        if kind == "JanusInvoke":
            child, _ = self._in(op, 1, scope)
            rows = [(tf.gather(s, child), True) for s in self.states]
            return rows + [None] * (len(op.outputs) - len(rows))
        if kind == "JanusUnwrap":
            pair, stacked = self._in(op, 0, scope)
            present = tf.cast(pair[..., 0], tf.bool)
            check = janus_assert(tf.reduce_all(present), op.get_attr("assumption_id"))
            self.side.append(check)
            with tf.control_dependencies([check]):
                return [(tf.identity(pair[..., 1]), stacked)]
        if kind == "Pack":
            values = [self._in(op, i, scope) for i in range(len(op.inputs))]
            axis = op.get_attr("axis")
            if not all(s for _, s in values) or axis < 0:
                raise NotBatchable("it packs values of the node with others")
            return [(tf.stack([v for v, _ in values], axis=axis + 1), True)]
        if kind == "Unpack":
            value, stacked = self._in(op, 0, scope)
            axis = op.get_attr("axis")
            if not stacked or axis < 0:
                raise NotBatchable("it unpacks a value that does not depend on the node")
            return [(t, True) for t in tf.unstack(value, num=op.get_attr("num"), axis=axis + 1)]
        if kind in _REDUCTIONS or kind == "ExpandDims":  # over per-row axes, given as constants
            (value, stacked), (axes, sa) = self._in(op, 0, scope), self._in(op, 1, scope)
            static = tf.get_static_value(axes)
            if not stacked or sa or static is None:
                raise NotBatchable(f"{kind} over axes that depend on the node")
            shifted = np.where(np.asarray(static) >= 0, np.asarray(static) + 1, static).astype(static.dtype)
            return [(_same(op, [value, tf.constant(shifted)])[0], True)]
        if kind == "Squeeze":
            value, stacked = self._in(op, 0, scope)
            dims = list(op.get_attr("squeeze_dims"))
            if not stacked or not dims:  # squeezing every size-1 axis could squeeze the rows
                raise NotBatchable("it squeezes every axis of size 1")
            return [(tf.squeeze(value, [d + 1 if d >= 0 else d for d in dims]), True)]
        if kind == "Reshape":
            (value, stacked), (shape, ss) = self._in(op, 0, scope), self._in(op, 1, scope)
            static = tf.get_static_value(shape)
            if not stacked or ss or static is None:
                raise NotBatchable("it reshapes to a shape that depends on the node")
            rows = tf.shape(value, out_type=shape.dtype)[:1]
            return [(tf.reshape(value, tf.concat([rows, tf.constant(static, shape.dtype)], 0)), True)]
        if kind == "Transpose":
            (value, stacked), (perm, sp) = self._in(op, 0, scope), self._in(op, 1, scope)
            static = tf.get_static_value(perm)
            static = tf.get_static_value(op.inputs[1]) if static is None else static
            if not stacked or sp or static is None or (np.asarray(static) < 0).any():
                raise NotBatchable("it transposes by a permutation that depends on the node")
            return [(tf.transpose(value, [0, *(int(p) + 1 for p in static)]), True)]
        if kind == "GatherV2":
            (params, sp), (indices, si), (axis, sa) = (self._in(op, i, scope) for i in range(3))
            static = tf.get_static_value(axis)
            if not sp or si or sa or static is None or static < 0 or op.get_attr("batch_dims") != 0:
                raise NotBatchable("it gathers with indices or an axis that depend on the node")
            return [(tf.gather(params, indices, axis=int(static) + 1), True)]
        if kind == "Split":
            (axis, sa), (value, stacked) = self._in(op, 0, scope), self._in(op, 1, scope)
            static = tf.get_static_value(axis)
            if sa or static is None or not stacked:
                raise NotBatchable("it splits a value that does not depend on the node")
            static = int(static)
            parts = tf.split(value, op.get_attr("num_split"), axis=static + 1 if static >= 0 else static)
            return [(t, True) for t in parts]
        if kind == "ConcatV2":
            values = [self._in(op, i, scope) for i in range(len(op.inputs) - 1)]
            axis, stacked = self._in(op, len(op.inputs) - 1, scope)
            static = tf.get_static_value(axis)
            if stacked or static is None or not all(s for _, s in values):
                raise NotBatchable("it concatenates values of the node with others")
            static = int(static)
            return [(tf.concat([v for v, _ in values], axis=static + 1 if static >= 0 else static), True)]
        if kind == "ResourceGather":
            (resource, rs), (indices, stacked) = self._in(op, 0, scope), self._in(op, 1, scope)
            if rs or op.get_attr("batch_dims") != 0:
                raise NotBatchable("it gathers from a table chosen per node")
            gathered = tf.raw_ops.ResourceGather(
                resource=resource, indices=indices, dtype=op.get_attr("dtype"),
                validate_indices=op.get_attr("validate_indices"),
            )  # fmt: skip
            return [(gathered, stacked)]
        if kind == "MatMul":
            (a, sa), (b, sb) = self._in(op, 0, scope), self._in(op, 1, scope)
            if sb or op.get_attr("transpose_a"):
                raise NotBatchable("it multiplies by a matrix of the node")
            transpose_b = op.get_attr("transpose_b")
            if not sa:
                return [(tf.linalg.matmul(a, b, transpose_b=transpose_b), False)]
            shape = tf.shape(a)  # the rows' [r, k] products as one [n * r, k] product
            product = tf.linalg.matmul(tf.reshape(a, [-1, shape[-1]]), b, transpose_b=transpose_b)
            rows = tf.reshape(product, tf.concat([shape[:-1], tf.shape(product)[-1:]], 0))
            rows.set_shape(a.shape[:-1].concatenate(product.shape[-1:]))
            return [(rows, True)]
        if kind == "BiasAdd":
            (value, stacked), (bias, sb) = self._in(op, 0, scope), self._in(op, 1, scope)
            if sb or op.get_attr("data_format") not in (b"NHWC", "NHWC"):
                raise NotBatchable("it adds a bias of the node")
            return [(tf.nn.bias_add(value, bias), stacked)]
        if kind in _BINARY_OPS:
            (x, sx), (y, sy) = self._in(op, 0, scope), self._in(op, 1, scope)
            x, y = _align(op, x, sx, y, sy)
            return [(_same(op, [x, y])[0], sx or sy)]
        if kind in _SAME_OPS:
            value, stacked = self._in(op, 0, scope)
            return [(_same(op, [value])[0], stacked)]
        raise NotBatchable(f"its body runs {kind} on values of the node")

    def _if_output(self, op: tf.Operation, index: int, scope: _Scope) -> tuple:
        value, stacked = self.ev(self._branch(op, scope).graph.outputs[index], self._branch(op, scope))
        if not stacked:
            raise NotBatchable("a branch returns a value that does not depend on the node")
        return (value, True)

    def _branch(self, op: tf.Operation, scope: _Scope) -> _Scope:
        """The ``If``'s branch that every row of this level takes (its checks and counters made):
        a level's nodes all have children or none, so one branch serves it whole."""
        sub = scope.memo.get(("if", op.name))
        if sub is None:
            graph = _branch_graph(scope.graph, op, "then_branch" if self.branch else "else_branch")
            sub = scope.memo[("if", op.name)] = _Scope(graph, {}, scope.size)
            for i, t in enumerate(graph.inputs):
                sub.lazy[t.ref()] = functools.partial(self._in, op, i + 1, scope)
            for side in graph.control_outputs:
                if side.type in _SIDE_OPS:
                    self._run(side, sub)
        return sub


@dataclasses.dataclass(eq=False)
class _Scope:
    graph: object
    memo: dict
    size: tf.Tensor  # the rows this scope runs on
    lazy: dict = dataclasses.field(default_factory=dict)


def _same(op: tf.Operation, inputs: list[tf.Tensor]) -> list[tf.Tensor]:
    """``op`` again on new inputs, with its attributes, recorded on the tapes as TF's own op
    functions record theirs (the leaves run outside any region: a tape differentiates them)."""
    names = [k for k in op.node_def.attr if not k.startswith("_")]
    made = ops.get_default_graph().create_op(
        op.type, inputs, [o.dtype for o in op.outputs], attrs={k: op.node_def.attr[k] for k in names}
    )
    if execute.must_record_gradient():
        flat = tuple(item for k in names for item in (k, made.get_attr(k)))
        execute.record_gradient(op.type, made.inputs, flat, made.outputs)
    return list(made.outputs)


def _align(op: tf.Operation, x: tf.Tensor, sx: bool, y: tf.Tensor, sy: bool) -> tuple:
    """Broadcasts stay row by row: an operand without the rows dimension must not reach it."""
    if sx == sy:
        if not sx or x.shape.rank == y.shape.rank:
            return x, y
        if x.shape.rank is None or y.shape.rank is None:
            raise NotBatchable(f"{op.type} of row values of unknown ranks")
        # Per row, the lower-rank value broadcasts from the right: its new axes go after the rows.
        low, high = (x, y) if x.shape.rank < y.shape.rank else (y, x)
        for _ in range(high.shape.rank - low.shape.rank):
            low = tf.expand_dims(low, 1)
        return (low, high) if x.shape.rank < y.shape.rank else (high, low)
    stacked, other = (x, y) if sx else (y, x)
    if other.shape.rank is None or stacked.shape.rank is None or other.shape.rank >= stacked.shape.rank:
        raise NotBatchable(f"{op.type} broadcasts a value over the rows")
    return x, y


# ---------------------------------------------------------------------------- the loop
@dataclasses.dataclass(eq=False)
class BatchingLoop:
    """One ``for tree in batch`` loop whose calls may be batched."""

    batch: object  # the PyObjectRef of the list
    key: str
    loc: str
    graph: object
    first_op: int  # the loop's first op in ``graph``
    heap_writes: int  # the heap log's length when the loop began
    items: dict = dataclasses.field(default_factory=dict)  # id(element ref) -> (iteration, ref)
    rows: dict = dataclasses.field(default_factory=dict)  # RecursiveFunction name -> [count, *row] tensors
    refused: set = dataclasses.field(default_factory=set)  # names of those that do not batch (noted once)

    def element(self, ref: object, index: int) -> object:
        self.items[id(ref)] = (index, ref)
        return ref

    def finish(self, ctx) -> None:
        """Refuses the batching where the loop changes what the batched function reads."""
        if not self.rows:
            return
        why = None
        if len(ctx.heap.writes) != self.heap_writes:
            why = "the loop writes to Python objects"
        elif _updates_state(self.graph.get_operations()[self.first_op :]):
            why = "the loop updates a variable or a Python object"
        if why:
            raise TreeBatchingRefused(
                f"{why}: the trees' calls cannot run before it, batched; building again with one call per node",
                self.loc,
                [self.key],
            )


def _updates_state(new_ops: list[tf.Operation]) -> bool:
    pending = [new_ops]
    while pending:
        for op in pending.pop():
            if op.type.startswith("JanusPySet"):
                return True
            if op.type in STATE_READS or op.type.startswith("JanusPy") or touches.is_touch_op(op):
                continue
            if not op._is_stateful:  # noqa: SLF001
                continue
            bodies = called_graphs(op)
            if bodies:
                pending += [g.get_operations() for g in bodies]
            elif bodies is None or any(outlives_call(t) for t in op.inputs):
                return True
    return False


def batched_call(ctx, rf, loop: BatchingLoop, index: int, loc: str) -> list[tf.Tensor] | None:
    """The outputs of ``rf`` on iteration ``index``'s tree, from the batch's rows; None where the
    function does not batch (it is invoked per node then)."""
    plan = plan_of(rf)
    if isinstance(plan, str):
        if rf.name in loop.refused:
            return None
        loop.refused.add(rf.name)
        ctx.note(f"the calls of recursive {rf.code.co_name} at {loc} run one invocation a node: {plan}")
        return None
    rows = loop.rows.get(rf.name)
    if rows is None:
        if tf.compat.v1.get_default_graph() is not loop.graph:
            return None  # the first call sits in a branch: the later iterations could not see its rows
        rows = loop.rows[rf.name] = _emit(ctx, plan, loop)
        ctx.note(
            f"the calls of recursive {rf.code.co_name} in the loop at {loop.loc} run level by level, all trees at once"
        )
    return [tf.gather(r, index) for r in rows]


def _emit(ctx, plan: Plan, loop: BatchingLoop) -> list[tf.Tensor]:
    """The walk, then the leaves at once and each further level in a ``tf.while_loop``: the rows
    of the batch's trees, ``[len(batch), *row shape]`` for each output of the function."""
    from janus.graphgen.recursion import _budget  # recursion imports this module

    budget, depth = _budget(ctx, plan.rf.code)
    batching = ctx.assumption(loop.key, "the trees of the batch can be run level by level", loop.loc)
    reads = plan.columns
    ids = [tf.constant(plan.id, tf.int64), tf.constant(batching.id, tf.int64), tf.constant(depth.id, tf.int64)]

    def walk(token: tf.Tensor, store: tf.Tensor) -> tuple:
        with tf.control_dependencies([token]):  # after the heap ops before it, which it may read
            outputs = tf.numpy_function(
                _walk, [*ids, store, loop.batch.pointer, budget], [r.dtype for r in reads] + [tf.int64, tf.int64],
                stateful=True, name="janus_tree_walk",
            )  # fmt: skip
        for t, r in zip(outputs, reads):
            t.set_shape([None, *r.shape])
        for t in outputs[len(reads) :]:
            t.set_shape([None])
        with tf.control_dependencies([outputs[0].op]):
            return (tf.identity(token), *outputs)

    *columns, bounds, roots = ctx.heap_call(walk)
    ctx.assert_ops.append(bounds.op)  # it checks assumptions: updates and prints wait for it
    outputs = list(zip(plan.rf.outputs.dtypes, plan.rf.outputs.shapes))
    captured = list(plan.rf.captures)  # the store and the function's captures, as an invocation passes them
    nothing = [tf.zeros([0, *shape], dtype) for dtype, shape in outputs]
    # The leaves outside the loop: a table they look up gets sparse gradients, as eager's are.
    leaves = _Vectorizer(plan, columns, nothing, plan.leaf_branch).level(tf.range(bounds[0], bounds[1]), captured)

    def level(i: tf.Tensor, *states: tf.Tensor) -> tuple:
        rows = _Vectorizer(plan, columns, list(states), not plan.leaf_branch).level(
            tf.range(bounds[i], bounds[i + 1]), captured
        )
        return (i + 1, *(tf.concat([s, r], 0) for s, r in zip(states, rows)))

    levels = tf.size(bounds, out_type=tf.int64) - 1
    _, *states = tf.while_loop(
        lambda i, *_s: i < levels, level, (tf.constant(1, tf.int64), *leaves),
        shape_invariants=(tf.TensorShape([]), *(tf.TensorShape([None, *shape]) for _d, shape in outputs)),
    )  # fmt: skip
    return [tf.gather(s, roots) for s in states]
