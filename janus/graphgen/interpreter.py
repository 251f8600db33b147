"""The converter: evaluates a user function's gast AST symbolically inside a FuncGraph.

Each AST node is given its meaning here, never by running the user's code. Values
known while generating (Python numbers, objects, modules) are folded; tensors are
graph tensors. Only library callables (TensorFlow, Keras, a few builtins) are called,
on symbolic tensors. User functions are inlined by converting their own AST.

Every specialisation on runtime state adds a guard (checked before the call) or a
JanusAssert (checked inside the graph), both through the ``GenerationContext``.
"""

from __future__ import annotations

import builtins
import collections.abc
import contextlib
import dataclasses
import functools
import inspect
import operator
import sys
import types
import weakref
from collections.abc import Callable, Iterator

import gast
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

from janus import distributed
from janus.assumptions.guards import GuardKind
from janus.assumptions.sources import CallSource, CellSource, ConstSource, DefaultSource, GlobalSource
from janus.config import config
from janus.executor.replay import CallSite
from janus.graphgen import (
    batch_lists,
    caught_try,
    control_flow,
    datasets,
    effects,
    handed,
    keras_layers,
    later,
    numpy_values,
    pynumber,
    recursion,
    sandbox,
    shown,
    tensor_arrays,
    tree_batching,
)
from janus.graphgen.batch_lists import BatchList
from janus.graphgen.context import NOT_LOGGED, READ_ONLY_METHODS, GenerationContext, LateRead, snapshot
from janus.graphgen.control_flow import SymbolicRange, TensorList, escapes
from janus.graphgen.errors import TF_PRINTS_IN_GRAPH, GenerationError, NeedsStaticShape, NotConvertible, RaisesHere
from janus.graphgen.formatted import Formatted, formatted_trial, join_fstring
from janus.graphgen.heap import MISSING, HeapList, PyObjectRef
from janus.graphgen.numpy_values import NumpyArray, NumpyMethod, NumpyScalar
from janus.graphgen.pynumber import OptionalNumber, PyNumber
from janus.graphgen.source import function_ast, location
from janus.graphgen.values import is_plain, is_safe_operand, is_symbolic, is_user_object, truth_tensor
from janus.ops import assert_op
from janus.profiler.heapreads import chain_of
from janus.profiler.observe import is_plain_namedtuple
from janus.source import purity
from janus.source.library import is_library_code, is_library_object, is_user_function
from janus.source.purity import Effect

MAX_INLINE_DEPTH = 64
MAX_STATIC_ITERATIONS = 100_000

_BINOPS: dict[type, Callable] = {
    gast.Add: operator.add,
    gast.Sub: operator.sub,
    gast.Mult: operator.mul,
    gast.Div: operator.truediv,
    gast.FloorDiv: operator.floordiv,
    gast.Mod: operator.mod,
    gast.Pow: operator.pow,
    gast.MatMult: operator.matmul,
    gast.BitAnd: operator.and_,
    gast.BitOr: operator.or_,
    gast.BitXor: operator.xor,
    gast.LShift: operator.lshift,
    gast.RShift: operator.rshift,
}
_INPLACE: dict[type, Callable] = {
    gast.Add: operator.iadd,
    gast.Sub: operator.isub,
    gast.Mult: operator.imul,
    gast.Div: operator.itruediv,
    gast.FloorDiv: operator.ifloordiv,
    gast.Mod: operator.imod,
    gast.Pow: operator.ipow,
    gast.MatMult: operator.imatmul,
    gast.BitAnd: operator.iand,
    gast.BitOr: operator.ior,
    gast.BitXor: operator.ixor,
    gast.LShift: operator.ilshift,
    gast.RShift: operator.irshift,
}
_UNARY: dict[type, Callable] = {
    gast.USub: operator.neg,
    gast.UAdd: operator.pos,
    gast.Invert: operator.invert,
}
_COMPARE: dict[type, Callable] = {
    gast.Eq: operator.eq,
    gast.NotEq: operator.ne,
    gast.Lt: operator.lt,
    gast.LtE: operator.le,
    gast.Gt: operator.gt,
    gast.GtE: operator.ge,
    gast.Is: operator.is_,
    gast.IsNot: operator.is_not,
    gast.In: lambda a, b: a in b,
    gast.NotIn: lambda a, b: a not in b,
}

# Builtins the converter evaluates itself; anything else from builtins is not converted.
_PURE_BUILTINS = frozenset(
    {
        abs, all, any, bool, dict, divmod, enumerate, float, frozenset, int, isinstance,
        issubclass, len, list, max, min, range, reversed, round, set, slice, sorted, str,
        sum, tuple, zip, type, hasattr, getattr, callable, repr, id, iter, next, map, filter,
    }
)  # fmt: skip
# Builtins that only look at an object's type or identity.
_IDENTITY_BUILTINS = frozenset({isinstance, issubclass, type, callable, hasattr, getattr})
# Builtins that make text: of a value known only at run time, the text is made after the graph ran.
_TEXT_BUILTINS = frozenset({str, repr, format, ascii})
# Builtins returning an iterator over what they were given (next() on it is the function's own).
_ITERATOR_BUILTINS = frozenset({iter, enumerate, zip, map, filter, reversed})
# Builtins that may see symbolic tensors: they only use tensor operators or identity.
_TENSOR_SAFE_BUILTINS = frozenset(
    {abs, all, any, dict, enumerate, isinstance, len, list, tuple, sum, zip, reversed, iter, next, callable}
)


_NO_DEFAULT = object()  # a keyword-only parameter without a default


class _Return(Exception):
    def __init__(self, value: object) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclasses.dataclass
class Frame:
    """One activation of converted user code, or a scope copied from one for a branch or loop body.

    A local function's frame holds only the names it binds: its free variables (and the names it
    declares ``nonlocal``) are looked up when read, in the enclosing function's activation where
    it is at that moment (``Interpreter.binder``).
    """

    code: types.CodeType
    func_globals: dict
    cells: dict[str, types.CellType]
    locals: dict[str, object]
    declared: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> "global"/"nonlocal"
    function: LocalFunction | None = None  # the local function whose body runs here
    region: int = 0  # ctx.region_depth where the activation began: `nonlocal` writes come only from there
    activation: object = dataclasses.field(default_factory=object)  # shared by the scopes copied from it


@dataclasses.dataclass(eq=False)
class LocalFunction:
    """A ``def`` or ``lambda`` evaluated inside converted code: callable by inlining."""

    node: gast.AST
    frame: Frame = dataclasses.field(repr=False)
    defaults: list = dataclasses.field(repr=False)
    kw_defaults: list = dataclasses.field(repr=False)

    def __repr__(self) -> str:  # not the frame's globals: it ends up in refusal messages
        name = getattr(self.node, "name", "<lambda>")
        return f"<local function {name} at {location(self.frame.code, self.node)}>"


class Interpreter:
    def __init__(self, ctx: GenerationContext) -> None:
        self.ctx = ctx
        self.stack: list[types.CodeType] = []
        self._local_iterators: set[int] = set()  # iterators made by this conversion: next() is safe
        self._keep: list[object] = []  # keeps them alive so their ids stay unique
        self._live: dict[int, Frame] = {}  # id(activation) -> the branch or loop scope it runs in now

    # ----------------------------------------------------------------- entry points
    def call_function(self, func: types.FunctionType, args: list, kwargs: dict) -> object:
        """Converts a call of user function ``func`` (inlining its body)."""
        func = unrouted(func)
        try:
            bound = inspect.signature(func).bind(*args, **kwargs)
        except TypeError as err:
            raise NotConvertible(f"call does not match signature: {err}", location(func.__code__)) from None
        given = set(bound.arguments)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for name in arguments.keys() - given:
            if type(arguments[name]) in (list, dict, set):
                arguments[name] = self._mutable_default(func, name, arguments[name])
        return self.run(func, arguments)

    def _mutable_default(self, func: types.FunctionType, name: str, value: object) -> object:
        """A list, dict or set default lives on the function, from one call to the next: read from
        the heap, so changes to it are logged and replayed as eager makes them (not once, while
        generating)."""
        code = func.__code__
        positional = code.co_varnames[: code.co_argcount]
        index = positional.index(name) - (code.co_argcount - len(func.__defaults__)) if name in positional else None
        return self.ctx.read_heap(value, DefaultSource(self.ctx.const(func), name, index), location(code))

    def run(self, func: types.FunctionType, arguments: dict[str, object], recursive_entry: bool = False) -> object:
        """Converts the body of ``func`` with its parameters bound to ``arguments``.

        A function the profile saw in a call cycle becomes a recursive graph function
        (``recursion.call``) instead of being inlined; ``recursive_entry`` is that function's body.
        """
        code = func.__code__
        if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
            raise NotConvertible("generators and coroutines run imperatively", location(code))
        if not recursive_entry and self.ctx.is_recursive(code):
            building = self.ctx.building[-1] if self.ctx.building else None
            closes_cycle = building is not None and code is not building.code
            if not (closes_cycle and recursion.same_cycle(self.ctx.profile, code, building.code)):
                return recursion.call(self, func, arguments)  # else: inlined into the function being built
        if code in self.stack:
            raise NotConvertible(f"recursive call of {func.__qualname__}", location(code))
        if len(self.stack) >= MAX_INLINE_DEPTH:
            raise NotConvertible("call chain too deep to inline", location(code))
        node = function_ast(code)
        cells = dict(zip(code.co_freevars, func.__closure__ or ()))
        frame = Frame(code, func.__globals__, cells, dict(arguments), region=self.ctx.region_depth)
        return self._run_body(frame, node.body)

    def _run_body(self, frame: Frame, body: list) -> object:
        self.stack.append(frame.code)
        try:
            self.exec_block(frame, body, tail=True)
        except _Return as ret:
            return ret.value
        finally:
            self.stack.pop()
        return None

    # ----------------------------------------------------------------- statements
    def exec_block(self, frame: Frame, body: list, tail: bool = False) -> None:
        """Runs ``body``; ``tail`` says nothing follows it in the function (falling off returns None)."""
        for i, stmt in enumerate(body):
            if isinstance(stmt, gast.If):
                if self._stmt_If(frame, stmt, body[i + 1 :], tail):
                    return
            else:
                self.exec_stmt(frame, stmt)

    def scope(self, frame: Frame) -> Frame:
        """A copy of ``frame`` for a branch or loop body traced into its own graph."""
        return dataclasses.replace(frame, locals=dict(frame.locals))

    @contextlib.contextmanager
    def live(self, scope: Frame) -> Iterator[Frame]:
        """Runs code in ``scope``: local functions of its activation read their free variables there."""
        key = id(scope.activation)
        previous = self._live.get(key)
        self._live[key] = scope
        try:
            yield scope
        finally:
            if previous is None:
                del self._live[key]
            else:
                self._live[key] = previous

    def _enclosing(self, frame: Frame) -> Frame | None:
        """Where the function that ``frame``'s local function was defined in is running now."""
        if frame.function is None:
            return None
        defined_in = frame.function.frame
        return self._live.get(id(defined_in.activation), defined_in)

    def binder(self, frame: Frame, name: str) -> Frame:
        """The frame whose variable ``name`` is: ``frame``, or for a free variable (or one declared
        ``nonlocal``) of a local function, the innermost enclosing function's that binds it."""
        while frame.function is not None:
            declared = frame.declared.get(name)
            if declared == "global":
                return frame
            if declared is None and (name in frame.locals or name in bound_names(frame.function.node)):
                return frame
            frame = self._enclosing(frame)
        return frame

    def visible_values(self, frame: Frame) -> Iterator[object]:
        """The values of the variables ``frame``'s code can see by name (enclosing functions' too)."""
        scope: Frame | None = frame
        while scope is not None:
            yield from scope.locals.values()
            scope = self._enclosing(scope)

    def run_block_for_return(self, frame: Frame, body: list, tail: bool, loc: str) -> object:
        """Runs a block that must end the function; its return value (None at the function's end)."""
        try:
            self.exec_block(frame, body, tail)
        except _Return as ret:
            return ret.value
        if tail:
            return None
        raise NotConvertible("a tensor-dependent `if` returns on one path only", loc)

    def raise_return(self, value: object) -> None:
        raise _Return(value)

    def exec_stmt(self, frame: Frame, node: gast.stmt) -> None:
        if self.ctx.stop_line is not None and later.stops(self, frame, node):
            later.stop_here(self, frame, node)  # raises: the prefix graph ends here
        if (self.ctx.later_lines or self.ctx.later_count) and later.wanted(self, frame, node):
            later.run_later(self, frame, node)  # runs in Python after the graph
            return
        method = getattr(self, f"_stmt_{type(node).__name__}", None)
        if method is None:
            raise NotConvertible(f"statement `{type(node).__name__}` is not converted", self.loc(frame, node))
        method(frame, node)

    def _stmt_Expr(self, frame: Frame, node: gast.Expr) -> None:
        if isinstance(node.value, gast.Constant):
            return  # docstring or bare literal
        if isinstance(node.value, gast.Call):
            self._expr_Call(frame, node.value, statement=True)  # its result is unused: it may be deferred
            return
        self.eval(frame, node.value)

    def _stmt_Pass(self, frame: Frame, node: gast.Pass) -> None:
        pass

    def _stmt_Return(self, frame: Frame, node: gast.Return) -> None:
        raise _Return(None if node.value is None else self.eval(frame, node.value))

    def _stmt_Assign(self, frame: Frame, node: gast.Assign) -> None:
        local = all(isinstance(t, gast.Name) for t in node.targets)
        value = self.eval(frame, node.value, optional_ok=local)
        for target in node.targets:
            self.assign(frame, target, value)

    def _stmt_AnnAssign(self, frame: Frame, node: gast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(frame, node.target, self.eval(frame, node.value))

    def _stmt_AugAssign(self, frame: Frame, node: gast.AugAssign) -> None:
        loc = self.loc(frame, node)
        target = node.target
        if isinstance(target, gast.Name):
            current = self.eval(frame, gast.copy_location(gast.Name(target.id, gast.Load(), None, None), target))
        elif isinstance(target, gast.Attribute):
            base = self.eval(frame, target.value)
            profiled = (frame.code, target.lineno, chain_of(target, load=False))
            current = self.ctx.read_attribute(base, _mangled(frame.code, target.attr), loc, profiled)
        elif isinstance(target, gast.Subscript):
            base, key = self.eval(frame, target.value), self.eval(frame, target.slice)
            current = self._subscript(base, key, loc)
        else:
            raise NotConvertible("augmented assignment to this target", loc)
        value = self.eval(frame, node.value)
        if isinstance(current, HeapList) and isinstance(node.op, gast.Add):
            current.extend(value)  # `self.outputs += [x]` extends the heap list in place
            return
        in_place = {(list, gast.Add): "extend", (dict, gast.BitOr): "update"}.get((type(current), type(node.op)))
        if in_place and self.ctx.mutate_container(current, in_place, (value,), loc) is not NOT_LOGGED:
            return
        result = self.operate(frame, node, _INPLACE[type(node.op)], current, value)
        if isinstance(target, gast.Name):
            self.assign(frame, target, result)
        elif isinstance(target, gast.Attribute):
            self.ctx.write_attribute(base, _mangled(frame.code, target.attr), result, loc)
        else:
            self._store_item(base, key, result, loc)

    def _stmt_Delete(self, frame: Frame, node: gast.Delete) -> None:
        loc = self.loc(frame, node)
        for target in node.targets:
            if isinstance(target, gast.Subscript):  # del d[k]: logged for a container on the heap
                container, key = self.eval(frame, target.value), self.eval(frame, target.slice)
                if type(container) is dict and is_plain(key):
                    if self.ctx.mutate_container(container, "__delitem__", (key,), loc) is NOT_LOGGED:
                        del container[key]
                    continue
            if not isinstance(target, gast.Name) or target.id not in frame.locals:
                raise NotConvertible("`del` of something other than a local or a dict item", loc)
            del frame.locals[target.id]

    def _stmt_FunctionDef(self, frame: Frame, node: gast.FunctionDef) -> None:
        if node.decorator_list:
            raise NotConvertible("decorated local function", self.loc(frame, node))
        frame.locals[node.name] = self._local_function(frame, node)

    def _stmt_If(self, frame: Frame, node: gast.If, rest: list = (), tail: bool = False) -> bool:
        """Folds, speculates or converts an ``if``; True when it consumed ``rest`` (see convert_cond)."""
        value = self._truth_value(self.eval(frame, node.test, optional_ok=True), frame, node)
        position = self.ctx.branch_position(frame.code, node)
        branch_tail = tail and not rest
        if not is_symbolic(value):
            self.exec_block(frame, node.body if self.static_truth(frame, node, value) else node.orelse, branch_tail)
            return False
        taken = self.ctx.profiled_branch(frame.code, node, position) if config.speculate_branches else None
        if taken is None and _always_raises(node.body) != _always_raises(node.orelse):
            taken = not _always_raises(node.body)  # `if t: raise ...`: the raising side re-runs eagerly
        if taken is None:
            saved = dict(frame.locals)
            try:
                with self.ctx.attempt():
                    return control_flow.convert_cond(self, frame, node, value, list(rest), tail)
            except NotConvertible as err:  # `if step % 100 == 0: history.append(loss)`: effects in a branch
                taken = self.ctx.majority_branch(frame.code, node) if err.kind in _SPECULABLE else None
                if taken is None or self.ctx.runtime_flags:  # flags fed at run time: retried as constants
                    raise
                frame.locals.clear()
                frame.locals.update(saved)
                self.ctx.note(f"branch at {self.loc(frame, node)} speculated {taken}: a tf.cond cannot hold it "
                              f"({err.reason}); calls that take the other side run eagerly")  # fmt: skip
        self.ctx.speculate(value, taken, frame.code, node, f"branch is {'taken' if taken else 'not taken'}")
        self.exec_block(frame, node.body if taken else node.orelse, branch_tail)
        return False

    def _stmt_For(self, frame: Frame, node: gast.For) -> None:
        iterable = self.eval(frame, node.iter)
        loc = self.loc(frame, node)
        if datasets.is_dataset(iterable) or isinstance(iterable, DatasetItems):
            self._dataset_loop(frame, node, iterable, loc)
            return
        if isinstance(iterable, PyObjectRef) and iterable.cls is list and iterable.argument:
            self._bounded_loop(frame, node, iterable, loc)
            return
        if isinstance(iterable, BatchItems):  # `for i, tree in enumerate(batch)`
            self._bounded_loop(frame, node, iterable.batch, loc, iterable.start)
            return
        items = self._for_items(frame, node, iterable, loc)
        if isinstance(items, control_flow.LoopPlan):
            if type(iterable) is not range:
                control_flow.convert_loop(self, frame, node, items)
                return
            # A static range past max_unroll (or with unrolling switched off): a loop op if
            # the body allows one, else unrolled as Python would run it.
            try:
                with self.ctx.attempt():
                    control_flow.convert_loop(self, frame, node, items)
                return
            except NotConvertible as err:
                self.ctx.note(f"loop unrolled instead of tf.while_loop: {err}")
                items = iter(iterable)
        self._unrolled(frame, node, items, loc)

    def _dataset_loop(self, frame: Frame, node: gast.For, iterable: tf.data.Dataset | DatasetItems, loc: str) -> None:
        """``for x in ds`` (or ``enumerate(ds)``): the call's own iterator in a tf.while_loop."""
        start = iterable.start if isinstance(iterable, DatasetItems) else None
        dataset = iterable.dataset if isinstance(iterable, DatasetItems) else iterable
        if not is_symbolic(datasets.variant_of(dataset)):
            raise NotConvertible("iteration over a tf.data.Dataset janus cannot re-read each call", loc)
        kind = self.ctx.dataset_kind(dataset)
        reason = datasets.refusal(kind) or datasets.element_refusal(dataset)
        if reason:
            raise NotConvertible(reason, loc)
        source = datasets.DatasetSource(self.ctx, dataset, kind, loc, start)
        control_flow.convert_loop(self, frame, node, control_flow.LoopPlan(None, None, node.target, source=source))

    def _bounded_loop(
        self, frame: Frame, node: gast.For, batch: PyObjectRef, loc: str, enumerated: int | None = None
    ) -> None:
        """``for tree in batch`` over a list passed by pointer (any length up to a bound): the first
        iteration runs unconditionally, each further one under ``tf.cond(i < len(batch))``, the
        bound doubling whenever a longer list comes. Gradients keep eager's types (``tf.cond``
        passes a gather's ``IndexedSlices`` through, a ``tf.while_loop`` makes them dense).
        ``enumerated``: the start of ``enumerate(batch, start)``; indices are Python ints, as eager's."""
        if escapes(node.body, loop_exits=True) or node.orelse:
            raise NotConvertible("`break`/`continue`/`return`/`else` in a loop over a list passed by pointer", loc)
        count = self.ctx.heap_len(batch, loc).tensor
        bound_key, once_key = f"list loop bound@{loc}", f"list loop runs at least once@{loc}"
        bound = max(len(sample) for sample in batch.samples) * 2 ** self.ctx.failures(bound_key)
        if bound > config.max_unroll:
            raise NotConvertible(
                f"a loop over a list passed by pointer longer than config.max_unroll={config.max_unroll}", loc
            )
        self.ctx.check(lambda: count <= bound, bound_key, f"the list has at most {bound} items", loc)
        if self.ctx.failed(once_key):  # an empty list came: every iteration under its tf.cond, if it can be
            saved = dict(frame.locals)
            try:
                with self.ctx.attempt():
                    self._loop_iterations(frame, node, batch, count, range(bound), loc, enumerated)
                return
            except NotConvertible:  # `loss = 0.0; loss += t`: a Python float after no iteration
                frame.locals.clear()
                frame.locals.update(saved)
        # `loss = 0.0; loss += t` becomes a tensor in the first iteration: it runs unconditionally
        self.ctx.check(lambda: count >= 1, once_key, "the list is not empty", loc)
        not_empty = self.ctx.assert_ops[-1]
        with self._batching_loop(batch, loc) as loop:
            with tf.control_dependencies([not_empty]):  # an empty list fails the check, not the read
                first = self.ctx.heap_get_item(batch, PyNumber(tf.constant(0, tf.int64), int), loc)
            if loop is not None:
                loop.element(first, 0)
            self.assign(frame, node.target, first if enumerated is None else (enumerated, first))
            self.exec_block(frame, node.body)
            self._loop_iterations(frame, node, batch, count, range(1, bound), loc, enumerated, loop)

    @contextlib.contextmanager
    def _batching_loop(self, batch: PyObjectRef, loc: str) -> Iterator[tree_batching.BatchingLoop | None]:
        """A loop over a batch whose calls of a recursive function on the item may run level by
        level (``tree_batching``), unless that was refused or failed before."""
        key = f"{tree_batching.BATCHING_KEY}@{loc}"
        if not config.batch_trees or self.ctx.building or self.ctx.failed(key) or assert_op.exporting():
            yield None
            return
        graph = tf.compat.v1.get_default_graph()
        loop = tree_batching.BatchingLoop(
            batch, key, loc, graph, len(graph.get_operations()), len(self.ctx.heap.writes)
        )
        self.ctx.batching_loops.append(loop)
        try:
            yield loop
        finally:
            self.ctx.batching_loops.remove(loop)
        loop.finish(self.ctx)

    def _loop_iterations(
        self, frame: Frame, node: gast.For, batch: PyObjectRef, count: tf.Tensor, indices: range, loc: str,
        enumerated: int | None = None, loop: tree_batching.BatchingLoop | None = None,
    ) -> None:  # fmt: skip
        for i in indices:
            index = PyNumber(tf.constant(i, tf.int64), int)
            read = functools.partial(self.ctx.heap_get_item, batch, index, loc)
            if loop is not None:
                read = functools.partial(lambda read, i: loop.element(read(), i), read, i)
            element = read if enumerated is None else (lambda read=read, i=i: (enumerated + i, read()))
            item = LoopItem(node.target, element)
            guarded = gast.copy_location(
                gast.If(test=gast.Constant(True, None), body=[item, *node.body], orelse=[]), node
            )
            control_flow.convert_cond(self, frame, guarded, tf.constant(i, tf.int64) < count, [], False)

    def _stmt_LoopItem(self, frame: Frame, node: LoopItem) -> None:
        self.assign(frame, node.target, node.element())

    def _unrolled(self, frame: Frame, node: gast.For, items: Iterator[object], loc: str) -> None:
        for count, item in enumerate(items):
            if count >= MAX_STATIC_ITERATIONS:
                raise NotConvertible("loop too long to unroll", loc)
            self.assign(frame, node.target, item)
            if self._iteration_breaks(frame, node):
                return
        self.exec_block(frame, node.orelse)

    def _iteration_breaks(self, frame: Frame, node: gast.For | gast.While) -> bool:
        """Runs one iteration of an unrolled loop body; True if it hit ``break``."""
        try:
            self.exec_block(frame, node.body)
        except _Break:
            return True
        except _Continue:
            pass
        return False

    def _for_items(self, frame: Frame, node: gast.For, iterable: object, loc: str):
        """Static items to unroll over, or a LoopPlan for tf.while_loop."""
        if isinstance(iterable, SymbolicRange):
            return self._range_items(frame, node, iterable, loc)
        if isinstance(iterable, PyObjectRef) and iterable.cls is list:  # a node's children: tf.while_loop
            count = self.ctx.heap_len(iterable, loc).tensor
            return control_flow.LoopPlan(
                tf.cast(count, tf.int32),
                lambda i: self.ctx.heap_get_item(iterable, PyNumber(tf.cast(i, tf.int64), int), loc),
                node.target,
            )
        if type(iterable) is range and (not config.unroll_loops or len(iterable) > config.max_unroll):
            start, step = iterable.start, iterable.step
            return control_flow.LoopPlan(
                tf.constant(len(iterable), tf.int32),
                lambda i: PyNumber(tf.cast(i, tf.int64) * step + start, int),
                node.target,
                static_count=len(iterable),
            )
        if not is_symbolic(iterable):
            return self.iterate(frame, node, iterable)
        x = iterable
        if x.shape.rank == 0:
            raise NotConvertible("iteration over a scalar tensor", loc)
        static_count = x.shape[0] if x.shape.rank is not None else None
        if static_count is not None and config.unroll_loops and static_count <= config.max_unroll:
            return iter(self.ctx.record_call("unstack", tf.unstack, (x,), {}, loc))
        count = tf.shape(x, out_type=tf.int32)[0]
        profiled = self.ctx.profile.fixed_trip_count(frame.code, node.lineno)
        if static_count is None and self._may_unroll(profiled, frame, node):
            self.ctx.check(lambda: tf.equal(count, profiled), self._trip_key(frame, node),
                           f"loop runs {profiled} times", loc)  # fmt: skip
            return iter([x[i] for i in range(profiled)])
        return control_flow.LoopPlan(count, lambda i: tf.gather(x, i), node.target)

    def _range_items(self, frame: Frame, node: gast.For, r: SymbolicRange, loc: str):
        count = r.length()
        profiled = self.ctx.profile.fixed_trip_count(frame.code, node.lineno)
        if self._may_unroll(profiled, frame, node):
            self.ctx.check(lambda: tf.equal(count, profiled), self._trip_key(frame, node),
                           f"loop runs {profiled} times", loc)  # fmt: skip
            return iter([r.item(i) for i in range(profiled)])
        return control_flow.LoopPlan(tf.cast(count, tf.int32), r.item, node.target)

    def _may_unroll(self, profiled: int | None, frame: Frame, node: gast.AST) -> bool:
        return (
            profiled is not None
            and config.unroll_loops
            and profiled <= config.max_unroll
            and not self.ctx.failed(self._trip_key(frame, node))
        )

    def _trip_key(self, frame: Frame, node: gast.AST) -> str:
        return f"loop trip count@{self.loc(frame, node)}"

    def _stmt_While(self, frame: Frame, node: gast.While) -> None:
        loc = self.loc(frame, node)
        count = 0
        planned: int | None = None
        while True:
            value = self.eval(frame, node.test)
            if isinstance(value, PyNumber):
                value = value.tensor
            if is_symbolic(value):
                if planned is None:
                    profiled = self.ctx.profile.fixed_trip_count(frame.code, node.lineno)
                    if count > 0 or not self._may_unroll(profiled, frame, node):
                        if count > 0:
                            raise NotConvertible("a `while` test that becomes a tensor mid-loop", loc)
                        control_flow.convert_loop(self, frame, node, control_flow.LoopPlan(None, None, None))
                        return
                    planned = profiled
                go_on = count < planned
                self.ctx.speculate(value, go_on, frame.code, node, f"loop runs {planned} times")
            else:
                go_on = self.static_truth(frame, node, value)
            if not go_on:
                break
            count += 1
            if count > MAX_STATIC_ITERATIONS:
                raise NotConvertible("loop too long to unroll", loc)
            if self._iteration_breaks(frame, node):
                return
        self.exec_block(frame, node.orelse)

    def _stmt_Break(self, frame: Frame, node: gast.Break) -> None:
        raise _Break()

    def _stmt_Continue(self, frame: Frame, node: gast.Continue) -> None:
        raise _Continue()

    def _stmt_Assert(self, frame: Frame, node: gast.Assert) -> None:
        test = self.eval(frame, node.test)
        if is_symbolic(test):
            self.ctx.speculate(test, True, frame.code, node, "assert statement holds")
        elif not self.static_truth(frame, node, test):
            raise NotConvertible("assert statement fails while generating", self.loc(frame, node))

    def _stmt_With(self, frame: Frame, node: gast.With) -> None:
        managers = []
        try:
            for item in node.items:
                manager = self.eval(frame, item.context_expr)
                _no_eager_tape(manager, "`with`", self.loc(frame, node))
                if not purity.is_graph_scope(manager):
                    raise NotConvertible(
                        f"context manager {type(manager).__qualname__} is not known to scope only the graph",
                        self.loc(frame, node),
                    )
                entered = manager.__enter__()
                managers.append(manager)
                if item.optional_vars is not None:
                    self.assign(frame, item.optional_vars, entered)
            self.exec_block(frame, node.body)
        except (_Return, _Break, _Continue):
            for manager in reversed(managers):
                manager.__exit__(None, None, None)
            raise
        except BaseException as exc:
            for manager in reversed(managers):
                manager.__exit__(type(exc), exc, exc.__traceback__)
            raise
        for manager in reversed(managers):
            manager.__exit__(None, None, None)

    # ----------------------------------------------------------------- assignment
    def assign(self, frame: Frame, target: gast.expr, value: object) -> None:
        if isinstance(target, gast.Name):
            self._store_name(frame, target.id, value, self.loc(frame, target))
        elif isinstance(target, (gast.Tuple, gast.List)):
            items = list(self.iterate(frame, target, value))
            starred = [i for i, t in enumerate(target.elts) if isinstance(t, gast.Starred)]
            if starred:
                i = starred[0]
                after = len(target.elts) - i - 1
                if len(items) < len(target.elts) - 1:
                    raise NotConvertible("not enough values to unpack", self.loc(frame, target))
                parts = items[:i] + [items[i : len(items) - after]] + items[len(items) - after :]
                elts = [t.value if isinstance(t, gast.Starred) else t for t in target.elts]
            else:
                if len(items) != len(target.elts):
                    raise NotConvertible("unpacking count mismatch", self.loc(frame, target))
                parts, elts = items, target.elts
            for elt, part in zip(elts, parts):
                self.assign(frame, elt, part)
        elif isinstance(target, gast.Subscript):
            self._store_item(
                self.eval(frame, target.value), self.eval(frame, target.slice), value, self.loc(frame, target)
            )
        elif isinstance(target, gast.Attribute):
            name = _mangled(frame.code, target.attr)
            self.ctx.write_attribute(self.eval(frame, target.value), name, value, self.loc(frame, target))
        else:
            raise NotConvertible(f"assignment to {type(target).__name__}", self.loc(frame, target))

    def _store_name(self, frame: Frame, name: str, value: object, loc: str) -> None:
        if name not in frame.declared:
            frame.locals[name] = value
            return
        binder = self.binder(frame, name)
        scope = binder.declared.get(name)
        if scope == "global":
            self.ctx.write_global(frame.func_globals, name, value, loc)
        elif scope == "nonlocal":
            self.ctx.write_cell(frame.cells[name], value, loc)
        elif binder.region != self.ctx.region_depth:  # eager writes once, as the branch or iteration runs
            raise NotConvertible(f"`nonlocal {name}` written inside tensor-dependent control flow", loc)
        else:
            binder.locals[name] = value  # a local function's `nonlocal`: the enclosing function's variable

    def _store_item(self, container: object, key: object, value: object, loc: str) -> None:
        if isinstance(container, HeapList) and isinstance(key, PyNumber) and key.type is int:
            self.ctx.heap_set(container, key, value, loc)
            return
        if not (type(container) in (list, dict) or isinstance(container, HeapList)) or not is_plain(key):
            raise NotConvertible("item assignment outside a list or dict with a constant key", loc)
        self.ctx.write_item(container, key, value, loc)

    def _stmt_Global(self, frame: Frame, node: gast.Global) -> None:
        frame.declared.update(dict.fromkeys(node.names, "global"))

    def _stmt_Nonlocal(self, frame: Frame, node: gast.Nonlocal) -> None:
        frame.declared.update(dict.fromkeys(node.names, "nonlocal"))

    def _stmt_Raise(self, frame: Frame, node: gast.Raise) -> None:
        raise RaisesHere("raises on this path (a `raise` under a tensor `if` is speculated)", self.loc(frame, node))

    def _stmt_Try(self, frame: Frame, node: gast.Try) -> None:
        # In a graph no Python exception can occur: a failing assertion re-runs the whole call eagerly.
        before = len(self.ctx.heap.writes)
        if node.handlers or node.orelse:
            caught_try.speculate(self, frame, node)  # the body is speculated not to raise
        else:
            self.exec_block(frame, node.body)
        if node.finalbody and any(w.kind == "statement" for w in self.ctx.heap.writes[before:]):
            raise NotConvertible(  # where it raises, eager runs the `finally` block: janus is past it
                "a statement run after the graph inside a `try` with a `finally` block", self.loc(frame, node),
                later.KIND,
            )  # fmt: skip
        self.exec_block(frame, node.finalbody)

    # ----------------------------------------------------------------- expressions
    def eval(self, frame: Frame, node: gast.expr, optional_ok: bool = False) -> object:
        """The value of ``node``. A number that may be None (``OptionalNumber``) is kept as such
        only where ``optional_ok`` (an ``is None`` test, a truth test, a local name); any other use
        asserts that it is present."""
        method = getattr(self, f"_expr_{type(node).__name__}", None)
        if method is None:
            raise NotConvertible(f"expression `{type(node).__name__}` is not converted", self.loc(frame, node))
        value = method(frame, node)
        if isinstance(value, OptionalNumber) and not optional_ok:
            return self.ctx.unwrap_optional(value, self.loc(frame, node))
        return value

    def _expr_Constant(self, frame: Frame, node: gast.Constant) -> object:
        return node.value

    def _expr_Name(self, frame: Frame, node: gast.Name) -> object:
        name = node.id
        if name in frame.locals and name not in frame.declared:
            value = frame.locals[name]
            if type(value) is later.Withheld:
                raise value.refuse(self.loc(frame, node))
            return value
        loc = self.loc(frame, node)
        frame = self.binder(frame, name)
        if name in frame.locals and name not in frame.declared:
            value = frame.locals[name]
            if type(value) is later.Withheld:
                raise value.refuse(loc)
            return value
        if frame.function is not None and name not in frame.declared:
            raise NotConvertible(f"local {name!r} of a local function may be read before assignment", loc)
        if (name in frame.code.co_varnames or name in frame.code.co_cellvars) and name not in frame.declared:
            raise NotConvertible(f"local {name!r} may be read before assignment", loc)
        if name in frame.cells:
            cell = frame.cells[name]
            written = self.ctx.heap_value(cell, "cell_contents")
            if written is not MISSING:
                return written
            try:
                value = cell.cell_contents
            except ValueError:
                raise NotConvertible(f"free variable {name!r} is unbound", loc) from None
            source = CellSource(self.ctx.const(cell), name)
            return self.ctx.read_heap(value, source, loc, (frame.code, node.lineno, (name, ())))
        g = self.ctx.const(frame.func_globals)
        written = self.ctx.heap_value(frame.func_globals, name)
        if written is not MISSING:
            return written
        if name in frame.func_globals:
            value = frame.func_globals[name]
            profiled = (frame.code, node.lineno, (name, ()))
            return self.ctx.read_heap(value, GlobalSource(g, name), loc, profiled)
        if hasattr(builtins, name):
            described = f"{name} is the builtin"
            self.ctx.guard(GuardKind.KEY_ABSENT, ConstSource(g, "globals"), name, f"builtin {name}", loc, described)
            return getattr(builtins, name)
        raise NotConvertible(f"name {name!r} is not defined", loc)

    def _expr_Attribute(self, frame: Frame, node: gast.Attribute) -> object:
        base = self.eval(frame, node.value)
        chain = chain_of(node)
        profiled = (frame.code, node.lineno, chain) if chain is not None else None
        return self.ctx.read_attribute(base, _mangled(frame.code, node.attr), self.loc(frame, node), profiled)

    def _expr_Subscript(self, frame: Frame, node: gast.Subscript) -> object:
        return self._subscript(self.eval(frame, node.value), self.eval(frame, node.slice), self.loc(frame, node))

    def _subscript(self, base: object, key: object, loc: str) -> object:
        if isinstance(base, (HeapList, PyObjectRef)) and isinstance(key, PyNumber) and key.type is int:
            return self.ctx.heap_get_item(base, key, loc)  # index known only at run time: the heap ops
        if isinstance(base, HeapList):
            base = base.materialize()
        if isinstance(base, TensorList):
            if type(key) is int and key == -1:
                return base.last()
            raise NotConvertible("indexing a list built in a converted loop (other than [-1])", loc)
        if is_symbolic(base) or isinstance(base, (tf.Variable, EagerTensor)):
            key = self._tensor_index(key, loc)
            if not is_safe_operand(key):
                raise NotConvertible("tensor indexed by a user object", loc)
            return self.ctx.record_call("getitem", operator.getitem, (base, key), {}, loc)
        if is_symbolic(key) or isinstance(key, PyNumber):
            raise NotConvertible("Python container indexed by a tensor", loc)
        if is_user_object(base):
            raise NotConvertible(f"subscript of user object {type(base).__name__}", loc)
        if not _iterable_now(base) or isinstance(base, Formatted):
            raise NotConvertible(f"subscript of a {type(base).__qualname__}, whose contents janus cannot guard", loc)
        try:
            return base[key]
        except (KeyError, IndexError) as err:  # guarded contents: every call that comes here raises it
            raise RaisesHere(f"raises {type(err).__name__} on this path", loc) from None

    def _tensor_index(self, key: object, loc: str) -> object:
        """A tensor index with loop indices (int PyNumbers) made int64 tensors."""
        if isinstance(key, PyNumber):
            return pynumber.as_index(key, loc)
        if type(key) is tuple:
            return tuple(self._tensor_index(k, loc) for k in key)
        if type(key) is slice:
            return slice(*(self._tensor_index(k, loc) for k in (key.start, key.stop, key.step)))
        return key

    def _expr_Slice(self, frame: Frame, node: gast.Slice) -> object:
        parts = [None if p is None else self.eval(frame, p) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def _expr_Tuple(self, frame: Frame, node: gast.Tuple) -> object:
        return tuple(self._elements(frame, node.elts))

    def _expr_List(self, frame: Frame, node: gast.List) -> object:
        return list(self._elements(frame, node.elts))

    def _expr_Set(self, frame: Frame, node: gast.Set) -> object:
        items = list(self._elements(frame, node.elts))
        if any(_holds_user_object(v) or is_symbolic(v) for v in items):
            raise NotConvertible("set of user objects or tensors (their __hash__ would run)", self.loc(frame, node))
        return set(items)

    def _expr_Dict(self, frame: Frame, node: gast.Dict) -> object:
        result = {}
        for key_node, value_node in zip(node.keys, node.values):
            if key_node is None:
                result.update(self.eval(frame, value_node))
            else:
                key = self.eval(frame, key_node)
                if is_symbolic(key) or isinstance(key, PyNumber):
                    raise NotConvertible("tensor used as a dict key", self.loc(frame, node))
                if _holds_user_object(key):
                    raise NotConvertible(
                        "user object used as a dict key (its __hash__ would run)", self.loc(frame, node)
                    )
                result[key] = self.eval(frame, value_node)
        return result

    def _elements(self, frame: Frame, elts: list) -> Iterator[object]:
        for elt in elts:
            if isinstance(elt, gast.Starred):
                yield from self.iterate(frame, elt, self.eval(frame, elt.value))
            else:
                yield self.eval(frame, elt)

    def _expr_BinOp(self, frame: Frame, node: gast.BinOp) -> object:
        left = self.eval(frame, node.left)
        right = self.eval(frame, node.right)
        return self.operate(frame, node, _BINOPS[type(node.op)], left, right)

    def _expr_UnaryOp(self, frame: Frame, node: gast.UnaryOp) -> object:
        operand = self.eval(frame, node.operand, optional_ok=isinstance(node.op, gast.Not))
        if isinstance(operand, OptionalNumber):
            return PyNumber(tf.logical_not(operand.truth()), bool)
        if isinstance(node.op, gast.Not):
            if isinstance(operand, PyNumber) and operand.type is bool:
                return PyNumber(tf.logical_not(operand.tensor), bool)
            if is_symbolic(operand):
                return PyNumber(tf.logical_not(truth_tensor(operand)), bool)
            return not self.static_truth(frame, node, operand)
        return self.operate(frame, node, _UNARY[type(node.op)], operand)

    def _expr_BoolOp(self, frame: Frame, node: gast.BoolOp) -> object:
        return self._bool_op(frame, node, node.values)

    def _bool_op(self, frame: Frame, node: gast.BoolOp, operands: list) -> object:
        is_and = isinstance(node.op, gast.And)
        value = self.eval(frame, operands[0])
        if len(operands) == 1:
            return value
        if is_symbolic(value) or isinstance(value, PyNumber):
            truth = value.tensor if isinstance(value, PyNumber) else value

            def rest(scope: Frame) -> object:
                return self._bool_op(scope, node, operands[1:])

            def keep(scope: Frame) -> object:
                return value

            then, otherwise = (rest, keep) if is_and else (keep, rest)
            return control_flow.convert_select(self, frame, node, truth, then, otherwise)
        if self.static_truth(frame, node, value) != is_and:
            return value
        return self._bool_op(frame, node, operands[1:])

    def _expr_Compare(self, frame: Frame, node: gast.Compare) -> object:
        return self._compare_chain(frame, node, self.eval(frame, node.left, optional_ok=True), 0)

    def _compare_chain(self, frame: Frame, node: gast.Compare, left: object, i: int) -> object:
        """``a < b < c`` is ``a < b and b < c`` with ``b`` evaluated once: every link that Python
        would test is tested, at run time where a link's outcome is only known then."""
        right = self.eval(frame, node.comparators[i], optional_ok=True)
        result = self._compare(frame, node, node.ops[i], left, right)
        if i + 1 == len(node.ops):
            return result
        if is_symbolic(result) or isinstance(result, PyNumber):
            truth = result.tensor if isinstance(result, PyNumber) else result
            return control_flow.convert_select(
                self, frame, node, truth, lambda scope: self._compare_chain(scope, node, right, i + 1), lambda _: result
            )
        if not self.static_truth(frame, node, result):
            return result
        return self._compare_chain(frame, node, right, i + 1)

    def _compare(self, frame: Frame, node: gast.Compare, op: gast.cmpop, left: object, right: object) -> object:
        loc = self.loc(frame, node)
        if isinstance(op, (gast.In, gast.NotIn)) and (is_symbolic(left) or is_symbolic(right)):
            raise NotConvertible("`in` with a tensor", loc)
        is_op = isinstance(op, (gast.Is, gast.IsNot))
        optional = next((v for v in (left, right) if isinstance(v, OptionalNumber)), None)
        if optional is not None and is_op and (left is None or right is None):
            return PyNumber(optional.present if isinstance(op, gast.IsNot) else tf.logical_not(optional.present), bool)
        if optional is not None and is_op:  # `word is 0`, `flag is True`: a present number
            present = optional.present
            same = self._number_identity(optional.number, right if optional is left else left, loc)
            both = tf.logical_and(present, same.tensor)
            return PyNumber(both if isinstance(op, gast.Is) else tf.logical_not(both), bool)
        left, right = (self.ctx.unwrap_optional(v, loc) if isinstance(v, OptionalNumber) else v for v in (left, right))
        if is_op and (isinstance(left, PyNumber) or isinstance(right, PyNumber)):
            number, other = (left, right) if isinstance(left, PyNumber) else (right, left)
            same = self._number_identity(number, other, loc)
            return same if isinstance(op, gast.Is) else PyNumber(tf.logical_not(same.tensor), bool)
        if not is_op:
            return self.operate(frame, node, _COMPARE[type(op)], left, right)
        if _optional_ref_vs_none(left, right):
            ref = left if isinstance(left, PyObjectRef) else right
            return PyNumber((tf.equal if isinstance(op, gast.Is) else tf.not_equal)(ref.pointer, 0), bool)
        if _has_identity_at_run_time(left) and _has_identity_at_run_time(right):
            same = self.ctx.identity(left, right, loc)  # which objects they are is known only at run time
            if isinstance(same, PyNumber) and isinstance(op, gast.IsNot):
                return PyNumber(tf.logical_not(same.tensor), bool)
            if not isinstance(same, PyNumber):
                return same if isinstance(op, gast.Is) else not same
            return same
        return _COMPARE[type(op)](left, right)

    def _number_identity(self, number: PyNumber, other: object, loc: str) -> PyNumber:
        """``number is other`` for a Python number known only at run time, as CPython answers it:
        ``True``/``False`` and small ints (-5..256) are single objects, so identity is equality of
        the same type; ``None`` is never a number. Other identities depend on objects: refused."""
        if other is None or type(other) is not number.type and type(other) in (bool, int, float):
            return PyNumber(tf.constant(False), bool)
        if type(other) is bool or type(other) is int and -5 <= other <= 256:
            return PyNumber(tf.equal(number.tensor, tf.constant(other, number.tensor.dtype)), bool)
        raise NotConvertible(f"`is` between a Python {number.type.__name__} known only at run time and {other!r}", loc)

    def _expr_IfExp(self, frame: Frame, node: gast.IfExp) -> object:
        test = self._truth_value(self.eval(frame, node.test, optional_ok=True), frame, node)
        if is_symbolic(test):
            return control_flow.convert_select(
                self,
                frame,
                node,
                test,
                lambda scope: self.eval(scope, node.body),
                lambda scope: self.eval(scope, node.orelse),
            )
        return self.eval(frame, node.body if self.static_truth(frame, node, test) else node.orelse)

    def _expr_NamedExpr(self, frame: Frame, node: gast.NamedExpr) -> object:
        value = self.eval(frame, node.value)
        self.assign(frame, node.target, value)
        return value

    def _expr_Lambda(self, frame: Frame, node: gast.Lambda) -> object:
        return self._local_function(frame, node)

    def _expr_JoinedStr(self, frame: Frame, node: gast.JoinedStr) -> object:
        layout: list = []
        values: list = []
        for value in node.values:
            if isinstance(value, gast.Constant):
                layout.append(value.value)
                continue
            item = self.eval(frame, value.value)
            spec = self.eval(frame, value.format_spec) if value.format_spec is not None else ""
            if not isinstance(spec, str):
                raise NotConvertible("f-string format spec known only at run time", self.loc(frame, node))
            layout.append(({-1: None, 115: str, 114: repr, 97: ascii}[value.conversion], spec))
            values.append(item)
        if all(_known(v) for v in values):
            return join_fstring(tuple(layout), *values)
        return self._formatted(functools.partial(join_fstring, tuple(layout)), values, {}, self.loc(frame, node))

    def _comprehension(
        self, frame: Frame, node: gast.AST, produce: Callable[[Frame], None], scope: Frame | None = None,
        first: object = MISSING,
    ) -> None:  # fmt: skip
        """Unrolls the comprehension; ``scope`` and ``first`` (its first iterable) if already evaluated."""
        scope = scope or _comprehension_scope(frame, node)

        def loop(generators: list) -> None:
            if not generators:
                produce(scope)
                return
            gen = generators[0]
            iterable = first if gen is node.generators[0] and first is not MISSING else self.eval(scope, gen.iter)
            for item in self.iterate(scope, gen, iterable):
                self.assign(scope, gen.target, item)
                if all(self.static_truth(scope, gen, self._static(scope, cond)) for cond in gen.ifs):
                    loop(generators[1:])

        loop(node.generators)

    def _static(self, frame: Frame, node: gast.expr) -> object:
        value = self.eval(frame, node)
        if is_symbolic(value):
            raise NotConvertible("comprehension condition on a tensor", self.loc(frame, node))
        return value

    def _expr_ListComp(self, frame: Frame, node: gast.ListComp) -> object:
        generator = node.generators[0]
        if len(node.generators) == 1 and not generator.ifs:
            scope = _comprehension_scope(frame, node)
            iterable = self.eval(scope, generator.iter)
            batch = iterable.batch if isinstance(iterable, BatchItems) else iterable
            if isinstance(batch, PyObjectRef) and batch.cls is list and batch.argument:
                start = iterable.start if isinstance(iterable, BatchItems) else None
                return batch_lists.comprehension(self, scope, node, batch, start, self.loc(frame, node))
            out: list = []
            self._comprehension(frame, node, lambda s: out.append(self.eval(s, node.elt)), scope, iterable)
            return out
        out = []
        self._comprehension(frame, node, lambda s: out.append(self.eval(s, node.elt)))
        return out

    def loop_item(self, target: gast.expr, element: Callable[[], object]) -> gast.stmt:
        """A statement binding ``target`` to ``element()``: a loop iteration's first, made a branch."""
        return LoopItem(target, element)

    def _expr_SetComp(self, frame: Frame, node: gast.SetComp) -> object:
        out: set = set()
        self._comprehension(frame, node, lambda s: out.add(self.eval(s, node.elt)))
        return out

    def _expr_GeneratorExp(self, frame: Frame, node: gast.GeneratorExp) -> Iterator[object]:
        """Lazy, as in Python: each item is converted when the consumer asks for it, so ``any()``
        stops early and the side effects of the items it never reached do not happen."""
        scope = _comprehension_scope(frame, node)
        first = node.generators[0]
        outer = self.iterate(scope, first, self.eval(scope, first.iter))  # evaluated at once, as in Python

        def items(generators: list, source: Iterator[object] | None) -> Iterator[object]:
            if not generators:
                yield self.eval(scope, node.elt)
                return
            gen = generators[0]
            for item in source if source is not None else self.iterate(scope, gen, self.eval(scope, gen.iter)):
                self.assign(scope, gen.target, item)
                if all(self.static_truth(scope, gen, self._static(scope, cond)) for cond in gen.ifs):
                    yield from items(generators[1:], None)

        lazy = items(node.generators, outer)
        self._local_iterators.add(id(lazy))
        self._keep.append(lazy)
        return lazy

    def _expr_DictComp(self, frame: Frame, node: gast.DictComp) -> object:
        out: dict = {}
        self._comprehension(frame, node, lambda s: out.__setitem__(self.eval(s, node.key), self.eval(s, node.value)))
        return out

    def _expr_Call(self, frame: Frame, node: gast.Call, statement: bool = False) -> object:
        callee = self.eval(frame, node.func)
        args = list(self._elements(frame, node.args))
        kwargs = {}
        for kw in node.keywords:
            value = self.eval(frame, kw.value)
            if kw.arg is None:
                if not isinstance(value, dict):
                    raise NotConvertible("** of a non-dict", self.loc(frame, node))
                kwargs.update(value)
            else:
                kwargs[kw.arg] = value
        return self.call(frame, node, callee, args, kwargs, statement)

    # ----------------------------------------------------------------- calls
    def call(
        self, frame: Frame, node: gast.AST, callee: object, args: list, kwargs: dict, statement: bool = False
    ) -> object:
        """Converts a call: user code is inlined, library code is classified (``janus.source.purity``).

        ``statement``: the call's result is unused, so a call made only for its effect may be deferred.
        """
        loc = self.loc(frame, node)
        if isinstance(callee, LocalFunction):
            return self._call_local(callee, args, kwargs)
        if getattr(callee, "__name__", None) in _CONTEXT_PROTOCOL and not is_user_function(callee):
            # tape.__enter__() by hand: it would push a tape onto TF's global stack while generating
            raise NotConvertible(f"{callee.__name__}() called by hand (only `with` is converted)", loc)
        jitted = getattr(callee, "__janus_target__", None)
        if jitted is not None:  # a janus.jit function called from converted code: inline it
            callee = jitted
        if callee is functools.partial:  # building a partial runs nothing; calling it is inlined below
            return functools.partial(*args, **kwargs)
        if isinstance(callee, functools.partial):
            return self.call(frame, node, callee.func, [*callee.args, *args], {**callee.keywords, **kwargs}, statement)
        if isinstance(callee, NumpyMethod):  # array.sum() of an array fed by value: a graph reduction
            return callee.call(args, kwargs, lambda make, what: self.ctx.check(make, f"{what}@{loc}", what, loc), loc)
        if isinstance(callee, Formatted) or _is_value_kind(callee):
            raise NotConvertible(f"call of a {type(callee).__name__} value", loc)
        if callee is super:
            return self._super(frame, args, kwargs, loc)
        wrapped = getattr(callee, "__wrapped__", None)
        if wrapped is not None and is_user_function(inspect.unwrap(callee)) and not is_user_function(callee):
            raise NotConvertible(f"library wrapper around user function {wrapped.__qualname__}", loc)
        if is_user_function(callee):
            if isinstance(callee, types.MethodType):
                return self.call_function(callee.__func__, [callee.__self__, *args], kwargs)
            return self.call_function(callee, args, kwargs)
        if getattr(callee, "__self__", None) is builtins or (
            isinstance(callee, type) and callee.__module__ == "builtins"
        ):
            return self._call_builtin(frame, node, callee, args, kwargs, loc)
        if isinstance(getattr(callee, "__self__", None), HeapList):  # append/extend/pop/...: values as they are
            return callee(*args, **kwargs)
        container = callee.__self__ if isinstance(callee, types.BuiltinMethodType) else None
        if type(container) in (list, dict, set):
            result = self.ctx.mutate_container(container, callee.__name__, tuple(args), loc)
            if result is not NOT_LOGGED:
                return result
        call_impl = None if isinstance(callee, type) else inspect.getattr_static(type(callee), "__call__", None)
        if isinstance(call_impl, types.FunctionType) and not is_library_code(call_impl.__code__):
            self.ctx.guard_class_attribute(type(callee), "__call__", call_impl, loc)  # a user object with __call__
            return self.call_function(call_impl, [callee, *args], kwargs)
        if keras_layers.is_keras_layer(callee):
            return self._call_keras_layer(callee, args, kwargs, loc)
        if is_plain_namedtuple(callee):  # `Pair(mean, var)`: stores its arguments, nothing else runs
            self.ctx.guard_class_attribute(callee, "__new__", callee.__new__, loc)
            return callee(*args, **kwargs)
        if not is_library_object(callee) and not keras_layers.is_library_call_of_layer(callee):
            kind = "class" if isinstance(callee, type) else type(callee).__name__
            raise NotConvertible(f"call of user {kind} {getattr(callee, '__qualname__', '')}".rstrip(), loc)
        if callee is tf.print and statement and not self.ctx.region_depth:
            printed = self._deferred_tf_print(frame, node, args, kwargs)
            if printed:
                return None
        verdict = purity.classify(callee)
        if verdict.effect is Effect.REFUSED:
            raise NotConvertible(verdict.reason, loc, kind="library call")
        if verdict.effect is Effect.CONVERTED:
            return verdict.answer(*args, **kwargs)
        if verdict.effect is Effect.DEFERRED:
            return self._defer(frame, node, verdict, callee, args, kwargs, statement)
        if verdict.effect is Effect.PURE:
            return self._call_pure(verdict, callee, args, kwargs, loc)
        if handed.holds_function((args, kwargs)) or handed.must_hand(callee):  # tf.cond(p, lambda: ..., ...)
            return handed.call(self, frame, node, callee, args, kwargs, loc, statement)
        return self.call_graph_library(callee, args, kwargs, loc)

    def _super(self, frame: Frame, args: list, kwargs: dict, loc: str) -> super:
        """``super()`` in a method: its class (the ``__class__`` cell) and first argument, as Python finds them."""
        if not args and not kwargs:
            cell = frame.cells.get("__class__")
            first = frame.code.co_varnames[0] if frame.code.co_argcount else None
            if frame.function is not None or cell is None or first not in frame.locals:
                raise NotConvertible("super() without arguments outside the body of a method", loc)
            args = [cell.cell_contents, frame.locals[first]]
        if kwargs or len(args) != 2 or not isinstance(args[0], type) or not _holds_user_object(args[1]):
            raise NotConvertible("super() of other than a class and a user object", loc)
        try:
            return super(*args)
        except TypeError as err:  # eager raises it too
            raise NotConvertible(f"super() raises TypeError in eager: {err}", loc) from None

    def _defer(
        self, frame: Frame, node: gast.AST, verdict: purity.Verdict, callee: object, args: list, kwargs: dict,
        statement: bool,
    ) -> None:  # fmt: skip
        loc = self.loc(frame, node)
        if not statement:
            raise NotConvertible(f"the result of {verdict.name}() is used (janus defers that call)", loc)
        site = CallSite(frame.code.co_filename, node.lineno, frame.code.co_name, frame.func_globals)
        deferred = effects.deferred_call(callee, args, kwargs, site, loc)
        args = [self._runtime_value(v, loc, keep_variables=fn_sets_step(deferred)) for v in deferred.args]
        kwargs = {k: self._runtime_value(v, loc, text=k not in _STREAM_KEYWORDS) for k, v in deferred.kwargs.items()}
        for probe, expected, what in deferred.guards:
            probed = CallSource(self.ctx.const(probe), (), what)
            self.ctx.guard(GuardKind.EQUALS_MATCH, probed, expected, f"{what}@{loc}", loc, what)
        self.ctx.defer_call(deferred.fn, tuple(args), kwargs, loc)
        self.ctx.note(f"{verdict.name}() at {loc} is deferred: made after the graph ran, with its values")
        return None

    def _deferred_tf_print(self, frame: Frame, node: gast.AST, args: list, kwargs: dict) -> bool:
        """``tf.print`` as a statement outside tensor control flow: made after the graph ran, in
        program order with ``print`` and logging, and never twice when the call re-runs eagerly.
        Where it cannot be deferred (a variable's value, a region) it stays a graph op, and so does
        every ``tf.print`` of a function where a deferred one came before a graph print."""
        if self.ctx.failures(TF_PRINTS_IN_GRAPH) or not effects.tf_print_stream_known(kwargs):
            return False  # a stream object tf.print may refuse: as a graph op, its build says so
        if shown.reaches(args, _not_rebuilt_by_tf_nest):
            return False  # eager's tf.print may fail to rebuild it (a list subclass), or see it otherwise
        try:
            self._defer(frame, node, purity.Verdict(Effect.DEFERRED, "tf.print"), tf.print, args, kwargs, True)
        except NotConvertible:
            return False
        return True

    def _runtime_value(self, value: object, loc: str, keep_variables: bool = False, text: bool = True) -> object:
        """A value a deferred call or formatting may hold: materialised after the graph ran. Where it
        is ``text`` (not a stream to write to), its text must not show what the graph changes."""
        materialized = value.materialize() if isinstance(value, HeapList) else value  # with this call's writes
        if text and self._shows_a_copy(value):
            raise NotConvertible(
                "a ListWrapper or DictWrapper attribute handed to a deferred call: janus holds a plain copy, whose "
                "text differs",
                loc,
            )
        if text and not keep_variables and (_holds_variable(value) or _holds_variable(materialized)):
            raise NotConvertible(
                "a tf.Variable, or an object whose text may show one (a container of one, or text of code janus "
                "does not look into), handed to a deferred call: its text would show a later value",
                loc,
            )
        if isinstance(value, HeapList):
            return materialized
        if isinstance(value, NumpyArray):
            return value  # the argument's (attribute's) own array, re-read from its path
        if isinstance(value, LateRead):
            return value
        if isinstance(value, (TensorList, SymbolicRange, LocalFunction)) or _is_value_kind(value):
            raise NotConvertible(f"a {type(value).__name__} handed to a deferred call", loc)
        return value

    def _shows_a_copy(self, value: object) -> bool:
        """``value``'s text shows a heap container janus copied, whose own type's text differs."""
        return shown.reaches(value, lambda item: _text_shows_own_type(self.ctx.copied_type(item)), unknown=False)

    def _call_pure(self, verdict: purity.Verdict, callee: object, args: list, kwargs: dict, loc: str) -> object:
        """A call with no effect: run now on values known while generating."""
        owner = getattr(callee, "__self__", None)
        values = (*args, *kwargs.values())
        if id(owner) in self.ctx.foreign and callee.__name__ not in READ_ONLY_METHODS:
            raise NotConvertible(f"{verdict.name}() changes a container that a library object holds", loc)
        if isinstance(owner, (list, dict, set, tuple)) and not self.ctx.is_heap_container(owner):
            if any(isinstance(v, (TensorList, LocalFunction, PyNumber)) or _is_value_kind(v) for v in values):
                raise NotConvertible(f"{verdict.name}() of a value known only at run time", loc)
            if callee.__name__ in _COMPARING_METHODS and _holds_number(owner):
                raise NotConvertible(f"{verdict.name}() compares items known only at run time", loc)
            return callee(*args, **kwargs)  # a method of a local container: stores, never inspects, items
        if (
            type(owner) is dict
            and self.ctx.is_heap_container(owner)
            and callee.__name__ in _KEYED_READS
            and all(_known(v) for v in args[:1])
        ):
            return callee(*args, **kwargs)  # a heap dict's copy: its keys are guarded (constants), its values read
        if type(owner) in (str, bytes) and not all(_known(v) for v in values):
            if callee.__name__ not in ("format", "format_map", "join", "__mod__"):
                raise NotConvertible(f"{verdict.name}() of a value known only at run time", loc)
            return self._formatted(callee, args, kwargs, loc)
        receiver = None if isinstance(owner, types.ModuleType) else owner
        if not all(_known(v) for v in values) or not _known(receiver):
            raise NotConvertible(f"{verdict.name}() of a value known only at run time", loc)
        return callee(*args, **kwargs)

    def _formatted(self, make: Callable, args: list, kwargs: dict, loc: str) -> Formatted:
        if self.ctx.region_depth:
            raise NotConvertible("text formatted from tensors inside tf.cond/tf.while_loop", loc)
        args = [self._runtime_value(v, loc) for v in args]
        kwargs = {k: self._runtime_value(v, loc) for k, v in kwargs.items()}
        if any(_holds_user_object(v) for v in (*args, *kwargs.values())):
            raise NotConvertible("text formatted from a user object (its __format__ would run later)", loc)
        formatted = Formatted(make, snapshot(tuple(args)), snapshot(kwargs))  # containers as they are now
        try:  # whether eager's formatting raises depends on dtypes and shapes, known now
            formatted_trial(formatted)
        except (TypeError, ValueError) as err:
            raise NotConvertible(f"formatting raises {type(err).__name__} in eager: {err}", loc) from None
        return formatted

    def call_graph_library(self, callee: object, args: list, kwargs: dict, loc: str) -> object:
        """TensorFlow/Keras on symbolic tensors, in the sandbox that refuses user code."""
        if effects.is_tf_print(callee):
            if self.ctx.building:
                raise NotConvertible(
                    "a tf.print inside a recursive function: when a later node's check fails, the call runs "
                    "again in eager and would print its text twice",
                    loc,
                    kind="print order",
                )
            args, kwargs = _graph_print_arguments(args, kwargs, loc, self.ctx.copied_type)
        _no_eager_tape(getattr(callee, "__self__", None), f"{getattr(callee, '__name__', 'a method')}()", loc)
        self.ctx.guard_keras_state(getattr(callee, "__self__", callee), loc)  # opt.apply_gradients, loss_fn(...)
        if purity.implementation_module(callee).startswith(("keras.", "tf_keras.")):
            self.ctx.guard_keras_config(loc)
        if any(isinstance(v, TensorList) for v in (*args, *kwargs.values())):
            return self._tensor_list_call(callee, args, kwargs, loc)
        if any(isinstance(v, BatchList) for v in (*args, *kwargs.values())):
            callee, args, kwargs = batch_lists.library_call(callee, args, kwargs, loc)
        if callee is tf.constant and len(args) == 1 and not kwargs and pynumber.involves(tf.nest.flatten(args[0])):
            callee = tf.convert_to_tensor  # tf.constant(x) of numbers known at run time: the same tensor
        _no_run_time_switches(kwargs.values(), loc)  # keepdims=, training=: Python bools to TF
        _no_unhinted_float32_overflow(args, kwargs, loc)
        args = [self._library_value(v, loc) for v in args]
        kwargs = {k: self._library_value(v, loc) for k, v in kwargs.items()}
        if callee in (tf.pad, tf.compat.v1.pad):  # it reads a non-tensor's paddings in Python, row by row
            args, kwargs = [_array_tensor(v) for v in args], {k: _array_tensor(v) for k, v in kwargs.items()}
        if callee is tf.get_static_value and any(map(is_symbolic, (*args, *kwargs.values()))):
            raise NotConvertible("tf.get_static_value() needs a concrete value", loc, kind="tensor value")
        for value in (*args, *kwargs.values()):
            self.ctx.check_library_argument(value, loc)
        label = getattr(callee, "__qualname__", None) or type(callee).__qualname__
        tensor_arrays.check_call(callee, loc)
        unconnected = self._unconnected_sources(callee, args, kwargs, loc) if _is_tape_gradient(callee) else set()
        with sandbox.library_call(label, loc):
            result = self.ctx.record_call(label, callee, tuple(args), kwargs, loc)
        if unconnected:  # eager's gradient is None there, the graph's may be zeros
            flat = tf.nest.flatten(result)
            result = tf.nest.pack_sequence_as(result, [None if i in unconnected else g for i, g in enumerate(flat)])
        if isinstance(result, tf.GradientTape):
            _TAPES_MADE.add(result)
        if callee is tf.TensorArray:
            tensor_arrays.created(result, kwargs)
        elif isinstance(getattr(callee, "__self__", None), tf.TensorArray):
            tensor_arrays.derived(result, callee.__self__)
        hvd = distributed.horovod()
        if hvd is not None and distributed.is_plain_tape_gradient(callee):  # data-parallel: average here
            result = self.ctx.record_call("hvd.allreduce", distributed.average, (result, hvd), {}, loc)
        return result

    def _unconnected_sources(self, callee: object, args: list, kwargs: dict, loc: str) -> set[int]:
        """``tape.gradient(target, sources)``: the positions of the sources whose gradient is None on
        every call; the others are checked to be None exactly where eager's is (``ctx.check_touched``)."""
        names = ("target", "sources", "output_gradients", "unconnected_gradients")
        bound = dict(zip(names, args)) | kwargs
        if str(getattr(bound.get("unconnected_gradients"), "value", bound.get("unconnected_gradients"))) == "zero":
            return set()  # zeros in eager too
        graph = tf.compat.v1.get_default_graph()
        targets = [t for t in tf.nest.flatten(bound.get("target")) if not isinstance(t, EagerTensor)]
        if not all(is_symbolic(t) and t.graph is graph for t in targets):
            return set()  # a target janus cannot walk back from: the graph's gradients as they are
        return self.ctx.check_touched(targets, tf.nest.flatten(bound.get("sources")), loc)

    def _call_keras_layer(self, layer: object, args: list, kwargs: dict, loc: str) -> object:
        """Keras's ``__call__`` runs; the ``call`` of every user layer within is converted."""
        if handed.holds_function((args, kwargs)):
            raise NotConvertible(f"a function handed to Keras layer {type(layer).__name__}", loc)
        self.ctx.guard_keras_state(layer, loc)
        _no_run_time_switches((*args, *kwargs.values()), loc)  # a layer branches on its flags in Python
        args = [tf.convert_to_tensor(v) if isinstance(v, NumpyArray) else v for v in args]  # as Keras converts
        args = [self._library_value(v, loc) for v in args]
        kwargs = {k: self._library_value(v, loc) for k, v in kwargs.items()}
        for value in (*args, *kwargs.values()):
            self.ctx.check_library_argument(value, loc)
        with keras_layers.converted_calls(layer, self.call_function) as converted:
            for user_layer, fn in converted:  # the converted code stays right only while `call` is this one
                self.ctx.guard_class_attribute(type(user_layer), "call", fn, loc)
            with sandbox.library_call(type(layer).__name__, loc):
                return self.ctx.record_call(type(layer).__name__, layer, tuple(args), kwargs, loc)

    def _number_list(self, value: list | tuple, parts: tuple[list[PyNumber], list[object]], loc: str) -> object:
        """A (nested) list of Python numbers for a library call: eager converts it whole, so its constants
        decide its dtype as much as its run-time numbers do (``_no_unhinted_float32_overflow`` for floats)."""
        numbers, constants = parts
        kinds = {n.type for n in numbers} | {type(c) for c in constants}
        if kinds == {int} and numbers and not all(pynumber.fits_int32(c) for c in constants):
            return pynumber.map_numbers(value, lambda n: n.tensor)  # int64, as eager's whole list: nothing to narrow
        return type(value)(self._library_value(v, loc) for v in value)

    @staticmethod
    def _materialized(value: object) -> object:
        return value.materialize() if isinstance(value, HeapList) else value

    def _library_value(self, value: object, loc: str) -> object:
        """A Python number unknown while generating, as eager's convert_to_tensor would make it; a
        tensor janus feeds, as the graph's placeholder for it."""
        if isinstance(value, HeapList):
            value = value.materialize()
        if isinstance(value, PyNumber) and value.type is bool and self.ctx.runtime_flags:
            # a Keras `training=` or a `keepdims=` takes a Python bool, and a library may branch on it
            # in Python (tf_keras reads a tensor there as a constant): the build is retried with flags constant
            raise NotConvertible("a bool known only at run time passed to a library call", loc)
        if isinstance(value, PyNumber):
            return pynumber.as_default_tensor(
                value,
                lambda c: self.ctx.check(c, f"default dtype range@{loc}", "fits its default dtype", loc),
                lambda t: self.ctx.narrow_int32(t, loc),
            )
        if type(value) in (list, tuple):
            parts = pynumber.number_list_parts(value)
            if parts is not None:
                return self._number_list(value, parts, loc)
            return type(value)(self._library_value(v, loc) for v in value)
        if isinstance(value, EagerTensor) and id(value) in self.ctx.heap_tensors:
            return self.ctx.library_tensor(value)
        return value

    def _optional_attribute(self, callee: Callable, args: list, loc: str) -> object:
        """``getattr(obj, "name", default)`` or ``hasattr(obj, "name")`` of a library object read from
        the heap whose instance attributes are all there is to it (no ``__getattr__``, no class
        attribute of that name): a present attribute is read as ``obj.name`` is, an absent one is
        guarded to stay absent (an attribute set later, ``args.warmup``, was baked as missing)."""
        obj, name = args[0], args[1]
        path = self.ctx.path_of(obj)
        cls = type(obj)
        if path is None or type(name) is not str or is_user_object(obj) or hasattr(cls, "__getattr__"):
            return _NOT_LOOKED_UP
        instance_dict = object.__getattribute__(obj, "__dict__") if hasattr(obj, "__dict__") else None
        if type(instance_dict) is not dict:
            return _NOT_LOOKED_UP
        if inspect.getattr_static(cls, name, _NOT_LOOKED_UP) is not _NOT_LOOKED_UP:  # a property (Dense.kernel)
            try:
                with sandbox.library_call(f"{cls.__qualname__}.{name}", loc):  # as reading obj.name runs it
                    getattr(obj, name)
            except AttributeError:
                raise NotConvertible(
                    f"{callee.__name__}() of {cls.__name__}.{name}, which raises AttributeError now (janus cannot "
                    "guard that it still does)",
                    loc,
                ) from None
            return _NOT_LOOKED_UP if callee is getattr else True
        if name in instance_dict:
            value = self.ctx.read_attribute(obj, name, loc)
            return True if callee is hasattr else value
        described = f"{type(obj).__name__} has no attribute {name!r}"
        self.ctx.guard(GuardKind.KEY_ABSENT, path.attr("__dict__"), name, f"{name} absent@{loc}", loc, described)
        if callee is hasattr:
            return False
        if len(args) == 3:
            return args[2]
        raise RaisesHere(f"getattr() raises AttributeError on this path ({name!r} is absent)", loc)

    def _tensor_list_call(self, callee: object, args: list, kwargs: dict, loc: str) -> tf.Tensor:
        """``tf.stack``/``tf.concat`` (axis 0) of a list built in a converted loop read its TensorArray."""
        axis = kwargs.get("axis", args[1] if len(args) > 1 else 0)
        if callee in (tf.stack, tf.concat) and isinstance(args[0], TensorList) and axis == 0 and len(args) <= 2:
            tensor_list: TensorList = args[0]

            def nonempty(size: tf.Tensor) -> None:
                self.ctx.check(lambda: size > 0, f"list is not empty@{loc}", "stacked list is not empty", loc)

            stacked = tensor_list.stacked(nonempty)
            if callee is tf.concat:
                shape = tf.shape(stacked)
                stacked = tf.reshape(stacked, tf.concat([[shape[0] * shape[1]], shape[2:]], 0))
            return stacked
        raise NotConvertible("a list built in a converted loop passed to a library call other than stack/concat", loc)

    def _call_builtin(
        self, frame: Frame, node: gast.AST, callee: Callable, args: list, kwargs: dict, loc: str
    ) -> object:
        if any(isinstance(v, NumpyScalar) for v in (*args, *kwargs.values())):
            if callee in (max, min) and len(args) >= 2 and not kwargs:
                return numpy_values.extreme(callee, args, loc)
            raise NotConvertible(f"{callee.__name__}() of a NumPy scalar computed in the graph", loc, "numpy")
        if any(isinstance(v, BatchList) for v in (*args, *kwargs.values())):
            if callee is len and len(args) == 1 and not kwargs:
                return PyNumber(args[0].count, int)
            if callee is sum and len(args) == 1 and not kwargs:
                return args[0].total()
            raise NotConvertible(f"{callee.__name__}() of a list built over a batch passed by pointer", loc)
        if callee is enumerate and args and isinstance(args[0], PyObjectRef) and args[0].argument:
            start = kwargs.get("start", args[1] if len(args) > 1 else 0)
            if args[0].cls is not list or len(args) + len(kwargs) > 2 or type(start) is not int:
                raise NotConvertible(
                    "enumerate() of an object passed by pointer other than enumerate(batch, start)", loc
                )
            return BatchItems(args[0], start)
        if callee is enumerate and args and datasets.is_dataset(args[0]):
            return self._enumerate_dataset(args, kwargs, loc)
        if callee is len and len(args) == 1 and not kwargs and datasets.is_dataset(args[0]):
            return self._dataset_len(args[0], loc)
        if callee is len and len(args) == 1 and isinstance(args[0], PyObjectRef) and args[0].cls is list:
            return self.ctx.heap_len(args[0], loc)
        if callee in (getattr, hasattr) and not kwargs and 2 <= len(args) <= (3 if callee is getattr else 2):
            found = self._optional_attribute(callee, args, loc)
            if found is not _NOT_LOOKED_UP:
                return found
        if callee is print:  # returns None, as eager's does: deferred wherever it stands
            return self._defer(frame, node, purity.Verdict(Effect.DEFERRED, "print"), print, args, kwargs, True)
        args = [self._materialized(a) for a in args]
        values = (*args, *kwargs.values())
        if callee in _TEXT_BUILTINS and not all(_known(v) for v in values):
            return self._formatted(callee, args, kwargs, loc)  # str(t), repr(t), format(t, spec): after the run
        if isinstance(callee, type) and issubclass(callee, Warning) and all(_known(v) for v in values):
            return callee(*args, **kwargs)  # warnings.warn(UserWarning("...")): a plain value
        if callee not in _PURE_BUILTINS or callee is id:  # id(): janus may hold a local copy of a container
            raise NotConvertible(f"builtin {callee.__name__}() is not converted", loc)
        if callee not in (isinstance, issubclass, type, id, callable) and any(_holds_user_object(v) for v in values):
            raise NotConvertible(f"{callee.__name__}() of a user object (its methods would run)", loc)
        tensors = any(isinstance(v, (EagerTensor, tf.Variable)) for v in values)
        if tensors and callee not in _IDENTITY_BUILTINS and callee is not len:  # len() reads the guarded shape
            raise NotConvertible(
                f"{callee.__name__}() reads the value of a tensor known only at run time", loc, kind="tensor value"
            )
        if callee is isinstance and len(args) == 2 and is_symbolic(args[0]):
            return issubclass(EagerTensor, args[1])  # what the eager value would answer
        if len(args) == 1 and isinstance(args[0], NumpyArray) and callee in (len, type):
            return callee(args[0].sample)  # its type and shape are guarded
        if callee is isinstance and len(args) == 2 and isinstance(args[0], NumpyArray):
            return issubclass(np.ndarray, args[1])
        if any(isinstance(v, LocalFunction) for v in values):
            raise NotConvertible(f"{callee.__name__}() of a local function", loc)
        if callee is range and any(is_symbolic(v) or isinstance(v, PyNumber) for v in args) and not kwargs:
            bounds = [0, args[0], 1] if len(args) == 1 else [*args, 1][:3]
            return SymbolicRange(*bounds, loc=loc)
        if callee is len and len(args) == 1 and isinstance(args[0], TensorList):
            return PyNumber(tf.cast(args[0].size, tf.int64), int)
        if any(isinstance(v, TensorList) for v in values):
            raise NotConvertible(f"{callee.__name__}() of a list built in a converted loop", loc)
        if callee in (int, float, bool) and len(args) == 1 and not kwargs and isinstance(args[0], PyNumber):
            check = lambda condition: self.ctx.check(  # noqa: E731
                condition, f"{callee.__name__}() argument in range@{loc}", f"{callee.__name__}() argument in range", loc
            )
            return pynumber.convert_builtin(callee, args[0], check, loc)
        if callee is sum and not all(_known(v) for v in values):
            return self._sum(frame, node, args, kwargs, loc)
        if any(_holds_number(v) for v in values):
            raise NotConvertible(f"{callee.__name__}() of a Python number unknown while generating", loc)
        if any(isinstance(v, Formatted) or _is_value_kind(v) for v in values):
            raise NotConvertible(f"{callee.__name__}() of text or a value known only after the graph ran", loc)
        if any(is_symbolic(v) for v in values) and callee not in _TENSOR_SAFE_BUILTINS:
            raise NotConvertible(f"{callee.__name__}() of a tensor needs its value", loc, kind="tensor value")
        if callee is len and args and is_symbolic(args[0]):
            dim = args[0].shape[0] if args[0].shape.rank else None
            if dim is None:
                raise NeedsStaticShape("len() of a tensor with unknown first dimension", loc)
        if callee in (any, all) and len(args) == 1 and not kwargs and not is_symbolic(args[0]):
            return self._any_all(frame, node, callee is any, args[0], loc)
        if callee is next:
            if not args or id(args[0]) not in self._local_iterators:
                raise NotConvertible("next() of an iterator that lives outside the function (its position)", loc)
        elif callee not in _IDENTITY_BUILTINS and not all(_iterable_now(v) for v in args):
            culprit = next(type(v).__qualname__ for v in args if not _iterable_now(v))
            raise NotConvertible(f"{callee.__name__}() of a {culprit}, whose contents janus cannot guard", loc)
        try:
            result = callee(*args, **kwargs)
        except (NotConvertible, GenerationError):
            raise
        except Exception as err:  # noqa: BLE001 - what the builtin raises decides what janus does
            if all(_known(v) for v in values):  # eager raises it too, on every call that comes here
                raise RaisesHere(f"{callee.__name__}() raises {type(err).__name__} on this path", loc) from None
            raise NotConvertible(
                f"{callee.__name__}() of values known only at run time ({type(err).__name__}: {err})", loc
            ) from None
        if callee in _ITERATOR_BUILTINS:
            self._local_iterators.add(id(result))
            self._keep.append(result)
        return result

    def _sum(self, frame: Frame, node: gast.AST, args: list, kwargs: dict, loc: str) -> object:
        """``sum(iterable, start=0)`` of values known only at run time: ``start + item``, item after
        item, each ``+`` as the interpreter converts it (Python's promotion of ints to floats)."""
        if not args or len(args) > 2 or set(kwargs) - {"start"} or (len(args) == 2 and kwargs):
            raise NotConvertible("sum() with arguments other than (iterable, start)", loc)
        total = args[1] if len(args) == 2 else kwargs.get("start", 0)
        if isinstance(total, (str, bytes, bytearray)):
            raise RaisesHere("sum() of a str start raises TypeError on this path", loc)
        items = list(self.iterate(frame, node, args[0]))
        if sys.version_info >= (3, 12) and _compensated_additions(total, items) > 1:
            raise NotConvertible("sum() of Python floats known only at run time (CPython 3.12+ compensates)", loc)
        for item in items:
            total = self.operate(frame, node, operator.add, total, item)
        return total

    def _enumerate_dataset(self, args: list, kwargs: dict, loc: str) -> DatasetItems:
        start = kwargs.pop("start", args[1] if len(args) > 1 else 0)
        if len(args) > 2 or kwargs or type(start) is not int or abs(start) >= 2**31:
            raise NotConvertible("enumerate() of a tf.data.Dataset other than enumerate(ds, start=<int>)", loc)
        return DatasetItems(args[0], start)

    def _dataset_len(self, dataset: tf.data.Dataset, loc: str) -> PyNumber:
        """``len(ds)``: its cardinality; eager raises a TypeError where it is unknown or infinite."""
        if not is_symbolic(datasets.variant_of(dataset)):
            raise NotConvertible("len() of a tf.data.Dataset janus cannot re-read each call", loc)
        cardinality = tf.data.experimental.cardinality(dataset)
        self.ctx.check(lambda: cardinality >= 0, f"len() of a dataset@{loc}", "the dataset's length is known", loc)
        return PyNumber(cardinality, int)

    def _any_all(self, frame: Frame, node: gast.AST, is_any: bool, iterable: object, loc: str) -> bool:
        for item in self.iterate(frame, node, iterable):
            if is_symbolic(item) or isinstance(item, PyNumber):
                raise NotConvertible(f"{'any' if is_any else 'all'}() of values known only at run time", loc)
            if self.static_truth(frame, node, item) == is_any:
                return is_any
        return not is_any

    def _local_function(self, frame: Frame, node: gast.AST) -> LocalFunction:
        defaults = [self.eval(frame, d) for d in node.args.defaults]
        kw_defaults = [_NO_DEFAULT if d is None else self.eval(frame, d) for d in node.args.kw_defaults]
        return LocalFunction(node, frame, defaults, kw_defaults)

    def closure_values(self, target: object) -> Iterator[object]:
        """What a function can reach without reading the heap: its defaults, a partial's arguments,
        and for a local function the variables of the functions enclosing it, as they are now."""
        if isinstance(target, functools.partial):
            yield from (*target.args, *target.keywords.values())
            yield from self.closure_values(target.func)
        elif isinstance(target, LocalFunction):
            yield from (*target.defaults, *(d for d in target.kw_defaults if d is not _NO_DEFAULT))
            yield from self.visible_values(self._live.get(id(target.frame.activation), target.frame))
        else:
            func = getattr(target, "__func__", target)
            yield from (*(func.__defaults__ or ()), *(func.__kwdefaults__ or {}).values())

    def _call_local(self, fn: LocalFunction, args: list, kwargs: dict) -> object:
        """A nested ``def`` or ``lambda``: positional, keyword and keyword-only arguments, defaults."""
        spec = fn.node.args
        loc = self.loc(fn.frame, fn.node)
        if spec.posonlyargs or spec.vararg or spec.kwarg:
            raise NotConvertible("local function with *args, **kwargs or positional-only parameters", loc)
        names = [a.id for a in spec.args]
        if len(args) > len(names):
            raise NotConvertible("local function called with too many arguments", loc)
        bound = dict(zip(names, args))
        defaults = dict(zip(names[len(names) - len(fn.defaults) :], fn.defaults))
        kw_names = [a.id for a in spec.kwonlyargs]
        defaults.update((n, d) for n, d in zip(kw_names, fn.kw_defaults) if d is not _NO_DEFAULT)
        for name, value in kwargs.items():
            if name in bound or name not in names + kw_names:
                raise NotConvertible(f"local function called with an unexpected argument {name!r}", loc)
            bound[name] = value
        for name in names + kw_names:
            if name not in bound:
                if name not in defaults:
                    raise NotConvertible(f"local function called without argument {name!r}", loc)
                bound[name] = defaults[name]
        scope = Frame(fn.frame.code, fn.frame.func_globals, fn.frame.cells, bound, {}, fn, self.ctx.region_depth)
        if isinstance(fn.node, gast.Lambda):
            return self.eval(scope, fn.node.body)
        return self._run_body(scope, fn.node.body)

    # ----------------------------------------------------------------- helpers
    def operate(self, frame: Frame, node: gast.AST, op: Callable, *operands: object) -> object:
        loc = self.loc(frame, node)
        if any(isinstance(v, NumpyScalar) for v in operands):  # a NumPy scalar computed in the graph
            tensors = numpy_values.tensor_operands(operands, loc)
            if tensors is not None:
                return self.ctx.record_call(op.__name__, op, tensors, {}, loc)
            check = lambda make, what: self.ctx.check(make, f"{what}@{loc}", what, loc)  # noqa: E731
            return numpy_values.scalar_operate(op, operands, check, loc)
        if any(isinstance(v, NumpyArray) for v in operands) and not any(
            isinstance(v, (tf.Tensor, tf.Variable)) for v in operands
        ):
            raise NotConvertible("NumPy arithmetic on an array fed by value (its data is read at run time)", loc)
        if op in _INPLACE.values() and id(operands[0]) in self.ctx.foreign:
            raise NotConvertible("augmented assignment to a container that a library object holds", loc)
        if op in (operator.mod, operator.imod) and isinstance(operands[0], str) and not _known(operands[1]):
            return self._formatted(operator.mod, list(operands), {}, loc)  # "%s" % t: text after the run
        text = [v for v in operands if isinstance(v, (str, Formatted))]
        if op in (operator.add, operator.iadd) and len(text) == 2 and any(isinstance(v, Formatted) for v in text):
            return Formatted(operator.add, tuple(operands))  # "loss: " + str(loss)
        if any(isinstance(v, Formatted) or _is_value_kind(v) for v in operands):
            raise NotConvertible("an operator on text or a value known only after the graph ran", loc)
        if _joins_sequences(op, operands):
            return op(*operands)  # `[n] + [self.units, 2]`: Python's own, the items are not looked at
        if pynumber.involves(operands):
            check = lambda make, what: self.ctx.check(make, f"{what}@{loc}", what, loc)  # noqa: E731
            return pynumber.operate(op, operands, lambda d: self.ctx.assert_nonzero(d, loc), loc, check)
        if all(is_plain(v) for v in operands):
            try:
                return op(*operands)
            except (ArithmeticError, TypeError, ValueError) as err:  # guarded values: such calls all raise it
                raise RaisesHere(f"{op.__name__} raises {type(err).__name__} on this path", loc) from None
        if not all(is_safe_operand(v) for v in operands):
            raise NotConvertible("operator on a user object", loc)
        return self.ctx.record_call(op.__name__, op, operands, {}, loc)

    def iterate(self, frame: Frame, node: gast.AST, value: object) -> Iterator[object]:
        loc = self.loc(frame, node)
        if isinstance(value, HeapList):
            value = value.materialize()
        if isinstance(value, PyNumber):
            raise NotConvertible("iteration over a relaxed Python float", loc)
        if is_symbolic(value):
            if value.shape.rank is None or value.shape[0] is None:
                raise NeedsStaticShape("iteration over a tensor with unknown first dimension", loc)
            return iter(self.ctx.record_call("unstack", tf.unstack, (value,), {}, loc))
        if isinstance(value, LocalFunction) or (is_user_object(value) and not isinstance(value, types.ModuleType)):
            raise NotConvertible(f"iteration over user object {type(value).__name__}", loc)
        if isinstance(value, (EagerTensor, tf.Variable)):
            raise NotConvertible("iteration over an eager tensor read from the heap", loc)
        if datasets.is_dataset(value) or isinstance(value, DatasetItems):
            raise NotConvertible("a tf.data.Dataset iterated other than by a `for` statement", loc)
        if not _iterable_now(value):
            raise NotConvertible(f"iteration over a {type(value).__qualname__}, whose contents janus cannot guard", loc)
        return iter(value)

    def static_truth(self, frame: Frame, node: gast.AST, value: object) -> bool:
        if isinstance(value, PyNumber):
            raise NotConvertible("truth value of a relaxed Python float outside an `if`", self.loc(frame, node))
        if is_user_object(value) and (hasattr(value, "__bool__") or hasattr(value, "__len__")):
            raise NotConvertible("truth value of a user object", self.loc(frame, node))
        if isinstance(value, (EagerTensor, tf.Variable)):
            raise NotConvertible("truth value of a tensor read from the heap", self.loc(frame, node))
        if isinstance(value, Formatted) or _is_value_kind(value) or not _iterable_now(value):
            raise NotConvertible(f"truth value of a {type(value).__qualname__}", self.loc(frame, node))
        return bool(value)

    def loc(self, frame: Frame, node: gast.AST) -> str:
        return location(frame.code, node)

    def _truth_value(self, value: object, frame: Frame, node: gast.AST) -> object:
        """The value an ``if`` tests: a tensor where it is known only at run time."""
        if isinstance(value, PyObjectRef) and value.cls is list:  # `if batch:` of a list passed by pointer
            return tf.not_equal(self.ctx.heap_len(value, self.loc(frame, node)).tensor, 0)
        return _truth_value(value)


# Tapes converted code made while a graph was built: only theirs record the graph's ops.
_TAPES_MADE: weakref.WeakSet = weakref.WeakSet()


def _no_eager_tape(obj: object, use: str, loc: str) -> None:
    """A tape the caller made (an argument, an attribute) records eager ops: in a graph, its
    ``watch`` would watch nothing and its ``gradient`` would see none of the graph's ops."""
    if isinstance(obj, tf.GradientTape) and obj not in _TAPES_MADE:
        raise NotConvertible(f"{use} of a GradientTape made outside the function (it records eager ops)", loc)


def _is_tape_gradient(callee: object) -> bool:
    return getattr(callee, "__name__", None) == "gradient" and isinstance(
        getattr(callee, "__self__", None), tf.GradientTape
    )


@dataclasses.dataclass(frozen=True)
class DatasetItems:
    """``enumerate(ds, start)``: a ``for`` over it gets Python int indices, as eager does."""

    dataset: tf.data.Dataset
    start: int


# Refusals of a tf.cond whose branches hold what no graph region can (heap writes, deferred calls):
# such an `if` is speculated on its most common side instead (the other side's calls run eagerly).
def _no_run_time_switches(values: Iterator[object], loc: str) -> None:
    """A bool known only at run time where a library takes a Python switch (``training=``,
    ``keepdims=``): a library reads a tensor there as a constant (tf_keras) or fails to build."""
    if any(isinstance(v, PyNumber) and v.type is bool for v in values):
        raise NotConvertible("a bool known only at run time passed as a library's switch (training=, keepdims=)", loc)


# Methods of a list, tuple or dict that compare its items (or keys) with ==: a run-time number among
# them is a stand-in, equal to nothing (`[flag, True].count(True)`).
_COMPARING_METHODS = frozenset({"count", "index", "remove", "__contains__", "get", "pop", "setdefault", "__getitem__"})


_CONTEXT_PROTOCOL = frozenset({"__enter__", "__exit__", "__aenter__", "__aexit__"})
_SPECULABLE = frozenset({"heap write", "heap value", "deferred effect", "construct", "text"})


@dataclasses.dataclass(frozen=True)
class BatchItems:
    """``enumerate(batch, start)`` of a list passed by pointer: a ``for`` over it gets Python int
    indices (each iteration is unrolled) and the items."""

    batch: PyObjectRef
    start: int


class LoopItem(gast.stmt):
    """``target = <the loop's next item>``: the first statement of a loop iteration made a branch."""

    _fields = ("target",)

    def __init__(self, target: gast.expr, element: Callable[[], object]) -> None:
        super().__init__()
        self.target = target
        self.element = element


def _optional_ref_vs_none(left: object, right: object) -> bool:
    """``ref is None`` where ``ref`` is a run-time object that may be None: decided at run time."""
    return (isinstance(left, PyObjectRef) and left.optional and right is None) or (
        isinstance(right, PyObjectRef) and right.optional and left is None
    )


def _truth_value(value: object) -> object:
    """The value an ``if`` tests: tensors for Python numbers and may-be-None objects known at run time."""
    if isinstance(value, PyNumber):
        return value.tensor
    if isinstance(value, OptionalNumber):
        return value.truth()
    if isinstance(value, PyObjectRef) and value.optional:
        return tf.not_equal(value.pointer, 0)
    return value


def unrouted(func: types.FunctionType) -> types.FunctionType:
    """The user's own function behind a ``janus.enable()`` trampoline (its jitted copy's original)."""
    for const in func.__code__.co_consts:
        target = getattr(const, "__janus_target__", None)
        if target is not None and not isinstance(const, (str, bytes, tuple, int, float)):
            return target
    return func


def _holds_user_object(value: object) -> bool:
    """A user object, or a plain container holding one: builtins would run its methods."""
    if type(value) in (list, tuple, set, frozenset):
        return any(_holds_user_object(v) for v in value)
    if type(value) is dict:
        return any(_holds_user_object(k) or _holds_user_object(v) for k, v in value.items())
    return not isinstance(value, (LocalFunction, type)) and is_user_object(value)


def _joins_sequences(op: Callable, operands: tuple) -> bool:
    """``+`` of two lists (or two tuples), or one repeated a constant number of times."""
    kinds = [type(v) for v in operands]
    if op in (operator.add, operator.iadd):
        return kinds in ([list, list], [tuple, tuple])
    if op in (operator.mul, operator.imul):
        return kinds in ([list, int], [tuple, int]) or op is operator.mul and kinds in ([int, list], [int, tuple])
    return False


def _comprehension_scope(frame: Frame, node: gast.AST) -> Frame:
    """A comprehension's own scope: its targets are its own variables, whatever the function declares."""
    targets = control_flow.assigned_names([gen.target for gen in node.generators])
    declared = {name: scope for name, scope in frame.declared.items() if name not in targets}
    return dataclasses.replace(frame, locals=dict(frame.locals), declared=declared)


@functools.cache
def bound_names(node: gast.AST) -> frozenset[str]:
    """The variables of a ``def`` or ``lambda``: its parameters and the names it assigns, less the
    names it declares ``global`` or ``nonlocal``."""
    args = node.args
    params = {a.id for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    body = [node.body] if isinstance(node, gast.Lambda) else node.body
    declared = {
        name
        for stmt in body
        for child in _same_scope_nodes(stmt)
        if isinstance(child, (gast.Global, gast.Nonlocal))
        for name in child.names
    }
    return frozenset(params | (control_flow.assigned_names(body) - declared))


def _same_scope_nodes(node: gast.AST) -> Iterator[gast.AST]:
    """``node`` and the nodes within it that are not in a nested function, lambda or class."""
    yield node
    for child in gast.iter_child_nodes(node):
        if not isinstance(child, (gast.FunctionDef, gast.Lambda, gast.ClassDef)):
            yield from _same_scope_nodes(child)


def _mangled(code: types.CodeType, attr: str) -> str:
    """``self.__x`` in a class ``C`` is ``self._C__x``, as Python's compiler writes it."""
    if not attr.startswith("__") or attr.endswith("__"):
        return attr
    parts = code.co_qualname.split(".")
    i = len(parts) - 2  # the function's own name is last
    while i >= 0 and parts[i] == "<locals>":
        i -= 2  # a function's locals: the function before "<locals>" is no class
    owner = parts[i].lstrip("_") if i >= 0 else ""
    return f"_{owner}{attr}" if owner else attr


def _no_unhinted_float32_overflow(args: list, kwargs: dict, loc: str) -> None:
    """A float constant that float32 cannot hold (``1e300``), alone or in a list, in a library call
    with no graph tensor argument: eager's conversion raises (``tf.constant(1e300)``, ``tf.fill``) or
    gives inf (``dtype=tf.float32``, next to a variable), depending on the op, where a graph gives
    inf and NumPy warns. Next to a graph tensor (``tf.add(x, -1e39)``) eager converts to the tensor's
    dtype, as the graph does, whose NumPy warning ``context._quiet_conversions`` keeps quiet."""
    if any(is_symbolic(v) for v in (*args, *kwargs.values())):  # as ``context._quiet_conversions``: no warning
        return
    if any(type(v) is float and pynumber.overflows_float32(v) for v in _plain_leaves([*args, *kwargs.values()])):
        raise NotConvertible(
            "a float constant float32 cannot hold, in a library call with no graph tensor argument: eager's "
            "conversion raises or gives inf, depending on the op",
            loc,
        )


def _plain_leaves(value: object) -> Iterator[object]:
    """What plain lists, tuples and dicts (their values) hold, however nested."""
    if type(value) in (list, tuple):
        for item in value:
            yield from _plain_leaves(item)
    elif type(value) is dict:
        for item in value.values():
            yield from _plain_leaves(item)
    else:
        yield value


def _holds_number(value: object) -> bool:
    """A Python number known only at run time, or a plain container holding one."""
    if isinstance(value, (PyNumber, OptionalNumber)):
        return True
    if type(value) in (list, tuple, set, frozenset):
        return any(_holds_number(v) for v in value)
    if type(value) is dict:
        return any(_holds_number(k) or _holds_number(v) for k, v in value.items())
    return False


def _compensated_additions(start: object, items: list) -> int:
    """How many items CPython 3.12+'s ``sum`` adds to a float total with Neumaier's compensation:
    where there are two or more, its result may differ from adding them one after the other."""

    def kind(value: object) -> type | None:
        number = value.type if isinstance(value, PyNumber) else type(value)
        return number if number in (int, float, bool) else None

    total, count = kind(start), 0
    for item in items:
        if total is float and kind(item) is not None:
            count += 1
        elif total is not None and kind(item) is not None:
            total = float if float in (total, kind(item)) else int
        else:
            total = None  # a tensor or another type: Python's generic addition from here on
    return count


def _known(value: object) -> bool:
    """A value known while generating, whose text and arithmetic Python may compute now."""
    if value is None or is_plain(value):
        return True
    if type(value) in (list, tuple, set, frozenset):
        return all(_known(v) for v in value)
    if type(value) is dict:
        return all(_known(k) and _known(v) for k, v in value.items())
    return False


def _iterable_now(value: object) -> bool:
    """A value whose contents (length, items, truth) Python may read while generating: builtin
    containers and iterators over them, and TensorFlow's static descriptions (shapes, dtypes)."""
    if type(value).__module__ == "builtins" or is_plain(value):
        return True
    return isinstance(value, (tf.Tensor, tf.Variable, tf.TensorShape, tf.DType)) or is_user_object(value)


def fn_sets_step(deferred: effects.Deferred) -> bool:
    """``tf.summary.experimental.set_step(v)`` keeps the variable itself, as eager does."""
    return getattr(deferred.fn, "__name__", "") == "set_step"


def _graph_print_arguments(
    args: list, kwargs: dict, loc: str, copied_type: Callable[[object], type | None]
) -> tuple[list, dict]:
    """A graph ``tf.print``'s arguments: list attributes as their items, nested in plain lists,
    tuples, namedtuples and dicts too (rebuilt: a heap container's copy), and ``sys.stdout``/
    ``sys.stderr`` as the call finds them (tf.print takes either for its stream's name). Any other
    value whose text shows something (a set, a dataclass) would be formatted once, when the graph is
    built: refused."""

    def items(value: object, depth: int = 0) -> object:
        if depth > _MAX_DEPTH:
            raise NotConvertible("a tf.print of a structure nested too deep to look through", loc)
        if _text_shows_own_type(copied_type(value)):  # a tf.Module's ListWrapper, DictWrapper
            raise NotConvertible(f"a tf.print of a {copied_type(value).__name__} attribute", loc)
        if isinstance(value, HeapList):
            return [items(v, depth + 1) for v in value.materialize()]
        if type(value) in (list, tuple, dict) or _is_namedtuple(value):
            base_iter = list.__iter__ if type(value) is list else tuple.__iter__
            parts = list(dict.values(value)) if type(value) is dict else list(base_iter(value))
            new = [items(v, depth + 1) for v in parts]
            if all(a is b for a, b in zip(parts, new)):
                return value
            if type(value) is dict:
                return dict(zip(dict.keys(value), new))
            return type(value)(*new) if _is_namedtuple(value) else type(value)(new)
        if _is_variable(value):
            return value  # read by the graph
        if isinstance(value, PyNumber):
            if value.type is not int:  # a float or bool tensor prints otherwise than Python's
                raise NotConvertible(f"a tf.print of a Python {value.type.__name__} known only at run time", loc)
            return value.tensor
        if isinstance(value, (Formatted, TensorList, SymbolicRange, LocalFunction)) or _is_value_kind(value):
            raise NotConvertible(f"a tf.print of a {type(value).__name__} (a value known only at run time)", loc)
        inside = shown.shown(value)
        if inside is None:
            raise NotConvertible(
                f"a tf.print of a {type(value).__name__}: its text comes from code janus does not look into", loc
            )
        if inside:
            raise NotConvertible(
                f"a tf.print of a {type(value).__name__}: what its text shows would be read once, when the graph "
                "is built",
                loc,
            )
        return value

    if isinstance(kwargs.get("output_stream"), LateRead):
        kwargs = {**kwargs, "output_stream": kwargs["output_stream"].read()}
    return [items(v) for v in args], kwargs


def _not_rebuilt_by_tf_nest(value: object) -> bool:
    """A container ``tf.nest`` (in eager's ``tf.print``) may fail to rebuild or treat otherwise than
    its text shows: any but a list, tuple, dict or namedtuple of its own (a list attribute's view too)."""
    cls = type(value)
    if cls in (list, tuple, dict, HeapList) or _is_namedtuple(value):
        return False
    return issubclass(cls, (list, tuple, dict, set, frozenset, collections.abc.Collection)) and not issubclass(
        cls, (str, bytes, tf.Tensor, np.ndarray)
    )


def _text_shows_own_type(copied_type: type | None) -> bool:
    """A heap container's type whose text is not a plain list's or dict's (TF's ``ListWrapper`` and
    ``DictWrapper``; not Keras 3's ``TrackedList``): janus's plain copy would print differently."""
    if copied_type is None or copied_type in (list, dict):
        return False
    plain = list if issubclass(copied_type, list) else dict if issubclass(copied_type, dict) else None
    if plain is None:
        return True  # a proxy (``DictWrapper``), whose text names it
    return any(getattr(copied_type, m) is not getattr(plain, m) for m in ("__repr__", "__str__"))


def _is_namedtuple(value: object) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _holds_variable(value: object) -> bool:
    """``value``'s text may show a variable: it is one, or holds one where its text shows (a
    container's items, a dataclass's fields), or its text is code janus does not look into."""
    return shown.reaches(value, lambda item: _is_variable(item.real if isinstance(item, HeapList) else item))


_MAX_DEPTH = 32  # nesting a graph tf.print's arguments are rebuilt through
_STREAM_KEYWORDS = ("file", "output_stream")  # a deferred call's stream: written to, not shown
_NOT_LOOKED_UP = object()  # _optional_attribute leaves the builtin to the general path
_KEYED_READS = frozenset({"get", "keys", "values", "items", "__getitem__", "__contains__", "__len__"})


def _is_variable(value: object) -> bool:
    """A ``tf.Variable``, or a Keras 3 variable (which wraps one and is not a ``tf.Variable``)."""
    if isinstance(value, tf.Variable):
        return True
    return any(cls.__name__ == "Variable" and cls.__module__.startswith("keras.") for cls in type(value).__mro__)


def _has_identity_at_run_time(value: object) -> bool:
    """A tensor or array whose object, in eager, is whatever the caller or the heap holds."""
    return isinstance(value, (tf.Tensor, tf.Variable, NumpyArray))


def _is_value_kind(value: object) -> bool:
    """janus's own stand-ins for values known only at run time (a heap object, a loop's list)."""
    return isinstance(
        value, (PyObjectRef, TensorList, SymbolicRange, LateRead, DatasetItems, BatchItems, BatchList, NumpyScalar)
    )


def _always_raises(block: list) -> bool:
    return bool(block) and isinstance(block[-1], gast.Raise)


def is_convertible_entry(func: object) -> str | None:
    """Why ``func`` cannot be jitted at all, or None."""
    target = getattr(func, "__func__", func)
    if not isinstance(target, types.FunctionType):
        return f"{type(func).__name__} objects are not Python functions"
    if is_library_code(target.__code__):
        return "library code is never converted"
    return None


def _array_tensor(value: object) -> object:
    """A NumPy array fed by value, as the tensor TF's conversion makes of it without a dtype hint
    (in lists too)."""
    if isinstance(value, NumpyArray):
        return tf.convert_to_tensor(value)
    if type(value) in (list, tuple):
        return type(value)(_array_tensor(v) for v in value)
    return value
