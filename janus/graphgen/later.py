"""Statements run in Python after the graph: a refused statement whose work nothing later needs.

A training step often holds a statement no graph can hold whose result only Python uses:
``predicted = tf.argmax(logits, 1).numpy()`` then ``history.append(f1_score(labels, predicted))``
inside the tape. Splitting the function there keeps eager's structure (a graph before, the
statement, a graph after, the tape eager across them). When nothing the graph computes after the
statement depends on it, the statement can run *after* the whole graph instead, on the values it
would have seen: that is the hand split a TF expert writes ("graph first, metrics after").

The driver, given a refusal at a statement of the function's own body (``janus.partial``'s
``statement_line``), builds again with that line run later; a statement that reads a local bound
by a later statement runs later too. The interpreter then does not convert the statement:

* it becomes a ``statement`` entry of the heap log, in program order: the commit calls it after
  the graph ran, after the heap writes and deferred calls that come before it and before those
  that come after it, with the values of the locals it reads as they were at the statement
  (graph outputs, materialised; plain constants) and those later statements bound (a per-commit
  namespace). Its code is the user's statement, compiled in a function with the user's globals
  and closure cells, at the user's file and line (tracebacks, warnings and log records say so);
* the locals it binds become ``Withheld``: converted code that reads one is refused (kind
  ``later statement``), and the function then runs split, as before.

Why that is eager's answer, and what is checked:

* **What the statement can reach** is checked while generating, by an allow-list walk of the
  values of the names it reads (``reach``): plain values, NumPy arrays, eager tensors, library
  modules, functions and classes, loggers, streams, host random generators, dates and paths, the
  user's own functions (their globals, closure cells and defaults, walked in turn; none may rebind
  a global or nonlocal), and lists, tuples, dicts, sets and ``collections`` containers of these.
  A ``tf.Variable``, a Keras object, a tape or any other object is refused: the statement can
  then read no TF state the graph updates after it. The names are guarded, so a rebinding
  rebuilds.
* **Python state**: the mutable containers it can reach must be read nowhere by the graph
  (``GenerationContext.read_ids``): no converted code can see a change it makes too early or too
  late. A NumPy array argument (or attribute) it reads, which it may write into, is not read by
  the graph after it. Writes the graph logs after it are replayed after it. A statement in a
  ``try`` body is refused: its exception would escape the handler, or miss the ``finally`` block.
* **TF state**: the variables the graph updates after the statement (``tail_variables``) must not
  be updated before it. They are saved before each call; if the statement raises (Ctrl-C
  included: the commit lets SIGINT through while a statement runs), they are put back, the rest
  of the log is not replayed and the exception reaches the caller: eager's state at that raise.
* **Output order**: a ``tf.print`` op after it in the graph would print before it: refused.
"""

from __future__ import annotations

import ast
import collections
import copy
import datetime
import dis
import enum
import functools
import io
import logging
import pathlib
import random
import types
from collections.abc import Callable, Iterator

import gast
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

from janus.graphgen.errors import NotConvertible
from janus.graphgen.numpy_values import NumpyArray
from janus.graphgen.pynumber import PyNumber
from janus.graphgen.values import is_symbolic
from janus.ops.assert_op import CHECK_OPS
from janus.partial import split
from janus.source.library import is_library_code, is_library_object

KIND = "later statement"
MAX_REACH = 20_000  # objects walked for one statement; more is refused (a huge history list)
_SIMPLE = (gast.Assign, gast.AugAssign, gast.AnnAssign, gast.Expr)
_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes, range, type(Ellipsis))
_OPAQUE = (
    logging.Logger,
    logging.LoggerAdapter,
    io.IOBase,
    random.Random,
    np.random.Generator,
    np.random.RandomState,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    pathlib.PurePath,
    enum.Enum,
)
_CONTAINERS = (collections.OrderedDict, collections.defaultdict, collections.Counter, collections.deque)
_REBINDS = {"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_DEREF", "DELETE_DEREF"}


class Withheld:
    """A value converted code must not read: a local bound by a statement that runs after the
    graph, or an argument a prefix graph does not take (``janus.partial.recompute``)."""

    __slots__ = ("name", "why")

    def __init__(self, name: str, why: str) -> None:
        self.name = name
        self.why = why

    def refuse(self, where: str) -> NotConvertible:
        return NotConvertible(f"{self.name} is {self.why}", where, KIND)


def bound_later(name: str, loc: str) -> Withheld:
    return Withheld(repr(name), f"bound by the statement at {loc}, which runs after the graph")


def wanted(interp, frame, node: gast.stmt) -> bool:
    """Whether ``node`` (about to be converted) runs after the graph instead: a simple statement of
    the function being built (not of a function it calls), on a line the driver asked for, or
    reading a local that a later statement bound."""
    ctx = interp.ctx
    if not isinstance(node, _SIMPLE) or frame.code is not ctx.top_code or frame.function is not None:
        return False
    if len(interp.stack) != 1:
        return False
    if any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in ctx.later_lines):
        return True
    return any(n in ctx.later_bound and type(frame.locals.get(n)) is Withheld for n in _names(node).loads)


def may_run_later(code: types.CodeType, line: int) -> bool:
    """Whether the function of ``code`` has a simple statement at ``line`` (in its own body or a
    block of it, not in a function it defines) that could run after the graph."""
    from janus.graphgen.source import function_ast

    todo = list(function_ast(code).body)
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef)):
            continue
        if isinstance(stmt, _SIMPLE) and stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return True
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(stmt, field, ()))
    return False


def run_later(interp, frame, node: gast.stmt) -> None:
    """Logs ``node`` to run after the graph (see the module docstring), or NotConvertible."""
    ctx = interp.ctx
    loc = interp.loc(frame, node)
    ctx._check_straight_line(loc)  # noqa: SLF001 - once per call, as the heap writes
    reads, stores, mutables = _checked_names(interp, frame, node, loc)
    graph_inputs: list[str] = []
    values: list[object] = []
    from_later: list[str] = []
    for name in reads:
        value = frame.locals[name]
        if type(value) is Withheld:
            if name not in ctx.later_bound:
                raise value.refuse(loc)
            from_later.append(name)
            continue
        values.append(_local_value(interp, name, value, loc))
        graph_inputs.append(name)
    fn = _compile(frame, node, graph_inputs, from_later, stores)
    ctx.log_later(fn, tuple(values), loc, mutables)
    for name in stores:
        frame.locals[name] = bound_later(name, loc)
        ctx.later_bound.add(name)
    why = next((r for line, r in ctx.later_lines.items() if node.lineno <= line <= (node.end_lineno or node.lineno)),
               f"it reads {', '.join(from_later) or 'a local'} that a statement run after the graph binds")  # fmt: skip
    ctx.note(f"the statement at {loc} runs in Python after the graph, on the values it reads there: {why}")


class StopAt(BaseException):  # noqa: N818 - not an error: the prefix graph ends here
    """Raised where a prefix graph (``janus.partial.recompute``) reaches its statement: the values
    of the locals the statement reads that the prefix computed (``values``, for ``names``), the
    arguments it reads as the caller passed them (``arguments``), the statement compiled as
    ``fn(D, *names, *arguments)`` leaving ``stores`` in ``D``, and the containers it can reach.
    ``unread``: those arguments the prefix does not take (not guarded), walked on every call
    (``unsafe_arguments``); ``read_ids``: the heap objects the prefix read."""

    def __init__(self, loc: str, names: list, values: list, arguments: list, fn, stores: list, mutables: set):
        super().__init__(loc)
        self.loc, self.names, self.values, self.arguments = loc, names, values, arguments
        self.fn, self.stores, self.mutables = fn, stores, mutables
        self.unread: list[str] = []
        self.read_ids: frozenset[int] = frozenset()

    def unsafe_arguments(self, arguments: dict) -> str | None:
        """Why the statement may not run between the prefix graph and the whole graph on this
        call's ``arguments`` (it could reach TF state or change what the prefix read), or None."""
        for name in self.unread:
            mutables: set[int] = set()
            why = reach(arguments[name], mutables)
            if why:
                return f"the statement would reach {why} through argument {name!r}"
            if mutables & self.read_ids:
                return f"the statement can change, through argument {name!r}, a container the code before it reads"
        return None


def stops(interp, frame, node: gast.stmt) -> bool:
    """Whether ``node`` is the statement a prefix graph ends at."""
    ctx = interp.ctx
    return (
        ctx.stop_line is not None
        and isinstance(node, _SIMPLE)
        and node.lineno == ctx.stop_line
        and frame.code is ctx.top_code
        and frame.function is None
        and len(interp.stack) == 1
    )


def stop_here(interp, frame, node: gast.stmt) -> None:
    """Ends the prefix graph at ``node``: raises ``StopAt``, or NotConvertible."""
    ctx = interp.ctx
    loc = interp.loc(frame, node)
    if ctx.region_depth:
        raise NotConvertible("the statement is inside tensor control flow", loc, KIND)
    reads, stores, mutables = _checked_names(interp, frame, node, loc)
    names, values, arguments, unread = [], [], [], []
    for name in reads:
        value = frame.locals[name]
        if name in ctx.initial_args and value is ctx.initial_args[name]:
            if type(value) is Withheld:
                unread.append(name)  # the prefix does not take it: walked on every call
            elif not _unchangeable_argument(value):
                why = f"the statement reads argument {name!r}, which it could change after the code before it read it"
                raise NotConvertible(why, loc, KIND)
            arguments.append(name)  # an argument as passed: the caller's own object
            continue
        if type(value) is Withheld:
            raise value.refuse(loc)
        values.append(_local_value(interp, name, value, loc))
        names.append(name)
    fn = _compile(frame, node, names + arguments, [], stores)
    stop = StopAt(loc, names, values, arguments, fn, stores, mutables)
    stop.unread, stop.read_ids = unread, frozenset(ctx.read_ids)
    raise stop


def _unchangeable_argument(value: object) -> bool:
    """An argument the prefix read that the statement cannot change: a tensor, a Python number or
    other immutable value, or a NumPy array whose data the prefix did not read (its shape only)."""
    if isinstance(value, NumpyArray):
        return value._placeholder is None  # noqa: SLF001 - its data never became a graph input
    return is_symbolic(value) or isinstance(value, (PyNumber, EagerTensor)) or _immutable(value)


def _checked_names(interp, frame, node: gast.stmt, loc: str) -> tuple[list[str], list[str], set[int]]:
    """``(locals the statement reads, locals it binds, containers it can reach)``, once what it
    reads besides its locals is walked and guarded; NotConvertible where it may not run apart."""
    code = frame.code
    names = _names(node)
    owner = split.class_of(code)
    own = set(code.co_varnames) | set(code.co_cellvars)
    if any(n.startswith("__") and not n.endswith("__") for n in {*names.loads, *names.stores}) and owner:
        raise NotConvertible("a statement using a private (mangled) name cannot run apart", loc, KIND)
    if names.stores & (set(code.co_cellvars) | set(frame.declared)):
        raise NotConvertible("a statement binding a global, nonlocal or captured name cannot run apart", loc, KIND)
    reads = set(names.loads) | names.deferred
    reader = _frame_reader(_ast_of(node), reads)
    if reader:
        raise NotConvertible(f"a statement using {reader} reads its own frame: it cannot run apart", loc, KIND)
    mutables: set[int] = set()
    for name in sorted(reads & own):
        if name not in frame.locals:
            raise NotConvertible(f"{name!r} may be unbound at the statement", loc, KIND)
    for name in sorted(reads - own):
        _free_name(interp, frame, name, loc, mutables)
    return sorted(reads & own), sorted(names.stores & own), mutables


_FRAME_NAMES = {"_getframe", "currentframe", "f_back", "f_locals", "getouterframes", "stack", "locals", "vars"}
_FRAME_ATTRIBUTES = {("sys", "_getframe"), ("inspect", "currentframe"), ("inspect", "stack")}


def _frame_reader(stmt: ast.stmt, reads: set[str]) -> str | None:
    """What in ``stmt`` reads the running frame (``locals()``, ``vars()``, ``super()``,
    ``sys._getframe()``...): in the function janus runs it in, that frame is not the user's."""
    named = reads & split.INTROSPECTIVE
    if named:
        return f"{sorted(named)[0]}()"
    for n in ast.walk(stmt):
        if isinstance(n, ast.keyword) and n.arg == "stacklevel":
            return "a stacklevel (the frames above it are janus's)"
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (n.value.id, n.attr) in _FRAME_ATTRIBUTES:
            return f"{n.value.id}.{n.attr}()"
    return None


@functools.cache
def _ast_of(node: gast.stmt) -> ast.stmt:
    return gast.gast_to_ast(copy.deepcopy(node))


def _names(node: gast.stmt) -> split._Names:  # noqa: SLF001 - one reading of names for both rewrites
    return split.names(_ast_of(node))


def _local_value(interp, name: str, value: object, loc: str) -> object:
    """A local the statement reads, as the commit will hand it: a graph value or a constant."""
    if isinstance(value, NumpyArray):  # the argument's own array: the statement may write into it
        interp.ctx.later_arrays.add(id(value.sample))
    if is_symbolic(value) or isinstance(value, (PyNumber, NumpyArray)):
        return interp._runtime_value(value, loc)  # noqa: SLF001 - materialised as a deferred call's
    if isinstance(value, tf.Variable):
        raise NotConvertible(f"{name!r} is a tf.Variable: a statement run after the graph would see later updates",
                             loc, KIND)  # fmt: skip
    if isinstance(value, EagerTensor) or _immutable(value):
        return value
    raise NotConvertible(
        f"{name!r} holds a {type(value).__qualname__}: a statement run after the graph takes only tensors, "
        "NumPy arrays and plain values from the function's locals",
        loc,
        KIND,
    )


def _immutable(value: object) -> bool:
    if isinstance(value, (*_PLAIN_LEAVES, np.generic)):
        return True
    return type(value) in (tuple, frozenset) and all(_immutable(v) for v in value)


def _free_name(interp, frame, name: str, loc: str, mutables: set[int]) -> None:
    """Walks and guards a global, closure variable or builtin the statement reads when it runs."""
    from janus.assumptions.guards import GuardKind
    from janus.assumptions.sources import CellSource, ConstSource, GlobalSource

    ctx = interp.ctx
    g = ctx.const(frame.func_globals)
    if name in frame.cells:
        cell = frame.cells[name]
        try:
            value = cell.cell_contents
        except ValueError:
            raise NotConvertible(f"free variable {name!r} is unbound", loc, KIND) from None
        source = CellSource(ctx.const(cell), name)
    elif name in frame.func_globals:
        value = frame.func_globals[name]
        source = GlobalSource(g, name)
    else:
        import builtins

        if not hasattr(builtins, name):
            raise NotConvertible(f"name {name!r} is not defined", loc, KIND)
        ctx.guard(
            GuardKind.KEY_ABSENT, ConstSource(g, "globals"), name, f"builtin {name}", loc, f"{name} is the builtin"
        )
        return
    why = reach(value, mutables, functools.partial(_guard_name, ctx, loc))
    if why:
        raise NotConvertible(f"a statement run after the graph would reach {why} through {name!r}", loc, KIND)
    _guard_source(ctx, loc, source, name, value)


def _guard_name(ctx, loc: str, holder: dict | types.CellType, name: str, value: object) -> None:
    """Guards a global (``holder``: the globals dict) or closure cell of a user function the
    statement calls, as walked."""
    from janus.assumptions.sources import CellSource, GlobalSource

    source = GlobalSource(ctx.const(holder), name) if isinstance(holder, dict) else CellSource(ctx.const(holder), name)
    _guard_source(ctx, loc, source, name, value)


def _guard_source(ctx, loc: str, source, name: str, value: object) -> None:
    """Guards a name the statement (or a function it calls) reads, as walked: a rebinding rebuilds."""
    from janus.assumptions.guards import GuardKind

    key = f"{source.describe()}@{loc}:later"
    if _immutable(value):
        ctx.guard(GuardKind.TYPE_MATCH, source, type(value), key, loc, f"{name} is a {type(value).__name__}")
    else:
        ctx.guard(GuardKind.ID_MATCH, source, value, key, loc, f"{name} is the object walked")


def reach(value: object, mutables: set[int], guard: Callable | None = None) -> str | None:
    """What ``value`` lets code reach that a statement run after the graph must not (a variable, a
    Keras or other object), or None; adds the mutable containers it reaches to ``mutables``.
    ``guard(holder, name, value)`` guards the globals and closure cells of the user functions it
    walks (a helper's global rebound after the build, to a logger reading the model, rebuilds)."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        if len(seen) > MAX_REACH:
            return f"more than {MAX_REACH} objects"
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        why = _step(obj, todo, mutables, guard)
        if why:
            return why
    return None


def _step(obj: object, todo: list, mutables: set[int], guard: Callable | None) -> str | None:
    t = type(obj)
    if isinstance(obj, (*_PLAIN_LEAVES, np.generic, np.dtype)):
        return None
    if t is np.ndarray:
        if obj.dtype == object:
            return "a NumPy array of objects"
        mutables.add(id(obj))
        return None
    if isinstance(obj, tf.Variable) or (isinstance(obj, tf.Tensor) and not isinstance(obj, EagerTensor)):
        return f"a {t.__name__} (TF state the graph may update)"
    if isinstance(obj, EagerTensor):
        return None
    if t in (list, dict, set):
        mutables.add(id(obj))
    if t in (list, tuple, set, frozenset):
        todo.extend(obj)
        return None
    if t is slice:  # its bounds may be any objects (a variable)
        todo.extend((obj.start, obj.stop, obj.step))
        return None
    if t is dict:
        todo.extend(obj.keys())
        todo.extend(obj.values())
        return None
    if isinstance(obj, functools.partial):
        todo.extend([obj.func, *obj.args, *obj.keywords.values()])
        return None
    if isinstance(obj, types.FunctionType) and not is_library_code(obj.__code__):
        return _user_function(obj, todo, guard)
    if isinstance(obj, types.MethodType):
        todo.extend([obj.__func__, obj.__self__])
        return None
    if isinstance(obj, _OPAQUE):  # output streams, host randomness, dates: no TF state behind them
        return None
    if isinstance(obj, _CONTAINERS):
        mutables.add(id(obj))
        todo.extend(obj.items() if isinstance(obj, dict) else obj)
        return None
    if isinstance(obj, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, np.ufunc)):
        if is_library_object(obj):
            return None
        return f"user {t.__name__} {getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"
    return f"a {t.__qualname__} object"


def _user_function(fn: types.FunctionType, todo: list, guard: Callable | None) -> str | None:
    """A user function the statement calls: what its code can name (globals, cells, defaults)."""
    names: set[str] = set()
    for code in _codes(fn.__code__):
        for instruction in dis.get_instructions(code):
            if instruction.opname in _REBINDS:
                return f"function {fn.__qualname__}, which rebinds {instruction.argval!r}"
        if _FRAME_NAMES & set(code.co_names):
            return f"function {fn.__qualname__}, which reads frames ({sorted(_FRAME_NAMES & set(code.co_names))[0]})"
        names.update(n for n in code.co_names if n in fn.__globals__)
    cells = [(n, c) for n, c in zip(fn.__code__.co_freevars, fn.__closure__ or ()) if _bound(c)]
    todo.extend(fn.__globals__[n] for n in sorted(names))
    todo.extend(c.cell_contents for _, c in cells)
    if guard is not None:
        for n in sorted(names):
            guard(fn.__globals__, n, fn.__globals__[n])
        for n, c in cells:
            guard(c, n, c.cell_contents)
    todo.extend(fn.__defaults__ or ())
    todo.extend((fn.__kwdefaults__ or {}).values())
    return None


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _bound(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:
        return False
    return True


def _compile(frame, node: gast.stmt, graph_inputs: list[str], from_later: list[str], stores: list[str]):
    """``fn(D, *graph_inputs)``: the statement at its own file and line, with the user's globals and
    closure cells; it reads ``from_later`` from ``D`` and leaves ``stores`` there."""
    code = frame.code
    stmt = _ast_of(node)
    namespace = "_janus_D"
    prologue = [ast.parse(f"{n} = {namespace}[{n!r}]").body[0] for n in from_later]
    epilogue = [ast.parse(f"{namespace}[{n!r}] = {n}").body[0] for n in stores]
    for extra in (*prologue, *epilogue):
        for part in ast.walk(extra):
            if "lineno" in part._attributes:
                part.lineno = part.end_lineno = stmt.lineno
                part.col_offset = part.end_col_offset = stmt.col_offset
    args = [ast.arg(namespace), *(ast.arg(n) for n in graph_inputs)]
    inner = ast.FunctionDef(
        name=code.co_name,
        args=ast.arguments(posonlyargs=[], args=args, vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                           defaults=[]),
        body=[*prologue, copy.deepcopy(stmt), *epilogue],
        decorator_list=[],
        returns=None,
    )  # fmt: skip
    ast.copy_location(inner, stmt)
    freevars = list(frame.cells)
    factory = ast.FunctionDef(
        name=split.FACTORY,
        args=ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in freevars], vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        body=[inner, ast.Return(ast.Name(code.co_name, ast.Load()))],
        decorator_list=[],
        returns=None,
    )  # fmt: skip
    ast.copy_location(factory, stmt)
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    compiled = compile(module, code.co_filename, "exec")
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner_code = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType))
    closure = tuple(frame.cells[n] for n in inner_code.co_freevars)
    fn = types.FunctionType(inner_code, frame.func_globals, code.co_name, None, closure)
    fn.__module__ = frame.func_globals.get("__name__", fn.__module__)
    return fn


def tail_resources(graph: tf.Graph, ctx) -> list[tf.Tensor]:
    """The resources the graph updates after its statements run later (put back if one raises),
    once it is checked that no converted code sees their effects (the module docstring)."""
    from janus.graphgen.ordering import is_state_write, outlives_call, prints

    where = ctx.heap.writes[0].location if ctx.heap.writes else ""
    if ctx.store_factory is not None:
        raise NotConvertible("statements run after the graph, in a graph that reads objects at run time", where, KIND)
    shared = ctx.later_mutables & ctx.read_ids
    if shared:
        raise NotConvertible(
            "a container that a statement run after the graph can change is also read by the graph", where, KIND
        )
    if ctx.later_arrays & ctx.arrays_read_later:
        raise NotConvertible(
            "a NumPy array that a statement run after the graph can write into is read by the graph after it",
            where,
            KIND,
        )
    ops = graph.get_operations()
    first, last = ctx.later_marks[0], ctx.later_marks[-1]
    if any(prints(op) or op.type.startswith("Horovod") for op in ops[first:]):  # a branch or loop that prints too
        raise NotConvertible("a tf.print or collective op after a statement run after the graph", where, KIND)

    def written(part: list[tf.Operation]) -> dict[int, tf.Tensor]:
        return {id(_root(t)): t for op in part if is_state_write(op) for t in op.inputs if outlives_call(t)}

    if written(ops[first:last]):
        raise NotConvertible("TF state is updated between two statements run after the graph", where, KIND)
    before, after = written(ops[:first]), written(ops[last:])
    if before.keys() & after.keys():
        raise NotConvertible("a variable updated both before and after a statement run after the graph", where, KIND)
    _guard_summary_step(ctx, where)
    return list(after.values())


def _guard_summary_step(ctx, where: str) -> None:
    """The ``tf.summary`` step (``tf.summary.experimental.set_step``, often an optimizer's
    ``iterations``): library code a statement calls reads it (``tf.summary.scalar`` with no step)
    where the walk cannot see. Guarded: ``check_summary_step`` then refuses it among the updates."""
    from janus.assumptions.guards import GuardKind
    from janus.assumptions.sources import CallSource

    getter = tf.summary.experimental.get_step
    source = CallSource(ctx.const(getter), (), "tf.summary.experimental.get_step()")
    ctx.guard(
        GuardKind.ID_MATCH, source, getter(), f"summary step@{where}:later", where, "the tf.summary step is unchanged"
    )


def check_summary_step(tail_variables: tuple, where: str) -> None:
    """Refuses a tf.summary step among the variables the graph updates after a statement run later:
    a statement writing a summary (or reading the step) would see the later step, not eager's."""
    handle = getattr(tf.summary.experimental.get_step(), "handle", None)  # a Keras 3 variable's is its tf one's
    if handle is not None and any(variable.handle is handle for variable in tail_variables):
        raise NotConvertible(
            "the tf.summary step is updated after a statement run after the graph, which may read it", where, KIND
        )


def _root(tensor: tf.Tensor) -> tf.Tensor:
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor


# Stateful ops a prefix graph may hold: reads, and janus's own checks (a failed one changes nothing).
_PURE_STATEFUL = frozenset({"ReadVariableOp", "VarHandleOp", "Placeholder", "NoOp", "Const"}) | CHECK_OPS


def check_pure_prefix(graph: tf.Graph, ctx, stop: StopAt) -> None:
    """A prefix graph runs again inside the whole graph after its statement: it must have no effect
    (no Python writes or deferred calls, no TF state update, no random op, no print), and the
    statement must change nothing the prefix read."""
    if ctx.heap.writes or ctx.store_factory is not None or ctx.caught_tries:
        raise NotConvertible("the code before the statement has Python effects or reads objects at run time",
                             stop.loc, KIND)  # fmt: skip
    impure = sorted({op.type for op in graph.get_operations() if op._is_stateful and op.type not in _PURE_STATEFUL})
    if impure:
        raise NotConvertible(
            f"the code before the statement runs stateful ops ({', '.join(impure[:3])}): computed twice, they "
            "would differ",
            stop.loc,
            KIND,
        )
    if stop.mutables & ctx.read_ids:
        raise NotConvertible("the statement can change a container the code before it reads", stop.loc, KIND)
