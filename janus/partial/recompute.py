"""A refused statement whose results the rest needs, between two graphs: the prefix is recomputed.

A detection step assigns its targets in NumPy from the predictions, inside the tape::

    with tf.GradientTape() as tape:
        deltas, logits = model(images, training=True)
        classes, boxes, positive = assign_targets(deltas.numpy(), gt_boxes, gt_classes)
        loss = ...(classes, boxes, positive, deltas, logits)
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

Split there (``janus.partial.split``), the eager tape stays open across the statement and every
segment is a graph call it records (a statement outside a tape's block is split: no tape, nothing
to gain by computing anything twice). A TF expert writes it as two graphs instead: predict, assign in
NumPy, then one graph for forward, loss, gradients and update, the forward computed again. janus
does the same where it can show that computing the code before the statement twice changes
nothing, and calls it a *recomputed prefix*:

1. **the prefix graph**: the function's own code, generated from its profile up to the statement
   (``generate(stop_line=...)``), returning the locals the statement reads. It must have no effect
   at all (``later.check_pure_prefix``): no Python writes or deferred calls, no TF state update, no
   random or other stateful op but variable reads. Arguments it does not read are not guarded;
2. **the statement**, in Python, on those values and on the arguments it reads as passed. What it
   can reach is walked as for statements run after the graph (``janus.graphgen.later``): no
   variable, no Keras object, no tape, and nothing the prefix read that it could change. An
   argument the prefix read must be one it cannot change (a tensor, a number, an array whose data
   the prefix did not read: not ``self``); one the prefix did not take is walked on every call
   (``later.StopAt.unsafe_arguments``), and where it reaches too much the function splits;
3. **the whole function** with the statement's results fed in its place: a ``janus.jit`` function
   of its own (``whole``), profiled, guarded and falling back like any other. Running its prefix
   again, eagerly or as a graph, reproduces the prefix graph's values and has no effect.

Where the statement returns a tensor (eager's tape would carry gradients through it), the call
runs the whole function eagerly with that tensor linked to the recomputed prefix by a custom
gradient that asks a tape recorded around the statement (``_connect``): eager's gradients.
When the prefix graph's guards or assumptions fail for a call, that call runs eagerly. Where a tape
records a gradient taken around the statement (nested tapes, a gradient penalty), that link would
miss eager's second-order gradient through the statement: such a function splits.
"""

from __future__ import annotations

import ast
import copy
import inspect
import logging
import types

import gast
import tensorflow as tf

from janus import distributed
from janus.assumptions.specs import UnusedArg, derive
from janus.config import config
from janus.executor.cache import GraphCache
from janus.executor.runner import AssumptionFailed
from janus.executor.stats import Stats
from janus.graphgen.errors import GenerationError, NotConvertible
from janus.graphgen.generate import generate
from janus.graphgen.source import function_ast, location, register_ast
from janus.partial import split
from janus.partial.segments import Segment, SplitVersion, split_function, statement_line

log = logging.getLogger("janus.breaks")
FED = "_janus_fed"
LINK = "_janus_link"
CONNECT = "_janus_connect"
MAX_LINKED_CALLS = 2  # calls whose statement returned tensors (run eagerly, linked) before giving up
_GRADIENTS = {"gradient", "jacobian", "batch_jacobian"}  # tape methods that take a gradient
_SIMPLE_AST = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)
_UNSUPPORTED_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_UNSUPPORTED_FLAGS |= inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


class Prefix:
    """The prefix graph's cache and counts (``explain()``'s line, ``janus.stats``' segment calls)."""

    def __init__(self) -> None:
        self.cache = GraphCache()
        self.stats = Stats()


class RecomputeVersion(SplitVersion):
    """How a function with a recomputed prefix runs: prefix graph, statement, whole graph."""

    def explain_lines(self, indent: str) -> list[str]:
        prefix, whole = self.prefix, self.segments[-1].jit
        s = whole.stats
        lines = [
            f"{indent}runs with a recomputed prefix: break at {self.where} [{self.kind}]: {self.reason}",
            f"{indent}  the statement at line {self.python_lines[0]} runs in Python between the prefix graph "
            "(the code before it, which has no effect) and the whole function's graph, fed its results",
            f"{indent}  prefix graph: calls={prefix.stats.calls} graph_calls={prefix.stats.graph_calls} "
            f"fallbacks={prefix.stats.fallbacks} (eager calls: its guards or assumptions failed), "
            f"linked={prefix.stats.imperative_calls} (eager calls: the statement returned tensors)",
            f"{indent}  whole graph: calls={s.calls} graph_calls={s.graph_calls} graphs_built={s.graphs_built}",
        ]
        if whole.split is not None:
            from janus.partial.segments import explain_lines

            lines += explain_lines(whole, indent + "    ")
        elif whole.imperative_reason:
            lines.append(f"{indent}    runs imperatively [{whole.imperative_kind}]: {whole.imperative_reason}")
        return lines


def recompute_function(jf, err: NotConvertible) -> RecomputeVersion | None:
    """The recomputed-prefix version of jitted function ``jf``, refused at ``err``, or None."""
    if not config.recompute_prefix or distributed.horovod() is not None:
        return None
    code = jf.fn.__code__
    if code.co_flags & _UNSUPPORTED_FLAGS or code.co_kwonlyargcount or "__class__" in code.co_freevars:
        return None
    try:
        line = statement_line(jf, err.location) if err.location else None
        if line is None:
            return None
        node = gast.gast_to_ast(copy.deepcopy(function_ast(code)))
        found = _statement_at(node.body, line)
        if found is None or split.observes_frame(node) or not _under_a_tape(found) or _gradients_recorded(found):
            return None
        prefix = _prefix_graph(jf, found, line)
        if prefix is None:
            return None
        return _build(jf, node, found, prefix, err)
    except Exception:  # a bug here must never change the user's result: split, as before
        log.debug("janus: could not recompute the prefix of %s", jf.fn.__qualname__, exc_info=True)
        return None


def _statement_at(body: list, line: int) -> list | None:
    """``[(block, index), ...]`` down to the simple statement at ``line``, through ``with`` blocks
    of the function's top level only (where it runs once per call, in program order)."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, _SIMPLE_AST) and stmt.lineno == line:
            return [(body, index)] if _binds_names_only(stmt) else None
        if isinstance(stmt, ast.With) and stmt.lineno < line <= stmt.end_lineno:
            inner = _statement_at(stmt.body, line)
            return None if inner is None else [(body, index), *inner]
    return None


def _under_a_tape(found: list) -> bool:
    """The statement is inside a ``with tf.GradientTape() as tape`` block: split there, the eager
    tape would record every segment; without a tape, splitting computes nothing twice."""
    return any(isinstance(block[index], ast.With) and any(split._is_tape(i) for i in block[index].items)  # noqa: SLF001
               for block, index in found[:-1])  # fmt: skip


def _gradients_recorded(found: list) -> bool:
    """A tape records a gradient taken around the statement (tapes nested around it, or a gradient
    computed in the block of a tape around it: a gradient penalty): eager's second-order gradient
    runs through the statement, which the custom gradient linking its tensors (``_connect``, first
    order only) would miss."""
    tapes = [block[index] for block, index in found[:-1] if isinstance(block[index], ast.With)]
    items = [item for with_ in tapes for item in with_.items if split._is_tape(item)]  # noqa: SLF001
    if len(items) > 1:
        return True
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _GRADIENTS
        for with_ in tapes
        if any(split._is_tape(item) for item in with_.items)  # noqa: SLF001
        for n in ast.walk(with_)
    )


def _binds_names_only(stmt: ast.stmt) -> bool:
    """Its targets are plain names (the whole function gets them fed): no attribute or item set."""
    targets = getattr(stmt, "targets", None) or ([stmt.target] if hasattr(stmt, "target") else [])
    return all(
        isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Load, ast.Store)) for t in targets for n in ast.walk(t)
    )


def _prefix_graph(jf, found: list, line: int) -> Prefix | None:
    """The prefix graph, from ``jf``'s profile, taking the arguments the code before ``line`` reads."""
    before: list = []
    for block, index in found:
        before += block[:index]
        if isinstance(block[index], ast.With):
            before += [item.context_expr for item in block[index].items]
    read = split.names(*before)
    reads = set(read.loads) | read.deferred
    code = jf.fn.__code__
    specs = []
    for name, history in zip(jf.params, jf._observations):  # noqa: SLF001 - the profile's arguments
        if name not in reads:
            specs.append(UnusedArg())
            continue
        key = f"argument {name}@{location(code)}"
        specs.append(derive(history, key, jf.failures.__getitem__, config.max_failures, jf._exact_shapes))  # noqa: SLF001
    try:
        graph = generate(jf.fn, jf.params, specs, jf.profile, jf.failures.__getitem__, stop_line=line)
    except (NotConvertible, GenerationError) as err:
        log.debug("janus: %s: no prefix graph to recompute: %s", jf.fn.__qualname__, err)
        return None
    prefix = Prefix()
    prefix.cache.add(graph)
    return prefix


def _build(jf, node, found: list, prefix: Prefix, err: NotConvertible) -> RecomputeVersion:
    from janus.driver import JitFunction  # the driver imports this package

    stop = prefix.cache.entries[0].graph.stop
    fn = jf.fn
    code = fn.__code__
    block, index = found[-1]
    statement = block[index]
    targets = f"({', '.join(stop.stores)},) = " if stop.stores else ""
    fed = ast.parse(f"{targets}{FED}" if stop.stores else "pass").body[0]
    read = [*stop.names, *stop.arguments]  # in the order the statement takes them (_Call)
    names = ", ".join(read) + ("," if len(read) == 1 else "")
    connected = ast.parse(f"{targets}{CONNECT}({FED}, {LINK}, ({names}))" if stop.stores else "pass").body[0]
    whole_node, params = _variant(node, found, fed, jf.params, [FED], "_janus_whole")
    connected_node, connected_params = _variant(node, found, connected, jf.params, [FED, LINK], "_janus_connected")
    plan = split.Plan(whole_node, [], [], split.class_of(code))
    module = compile(plan.module((*code.co_freevars, CONNECT)), code.co_filename, "exec")
    other = split.Plan(connected_node, [], [], split.class_of(code))
    module_connected = compile(other.module((*code.co_freevars, CONNECT)), code.co_filename, "exec")
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    cells[CONNECT] = types.CellType(_connect)
    whole_fn = _function(module, "_janus_whole", fn, cells)
    connected_fn = _function(module_connected, "_janus_connected", fn, cells)
    register_ast(whole_fn.__code__, gast.ast_to_gast(whole_node))
    whole = JitFunction(whole_fn, profile_calls=jf.profile_calls)
    whole._split_depth = getattr(jf, "_split_depth", 0) + 1  # noqa: SLF001
    whole._segment_of = jf  # noqa: SLF001
    seg_plan = split.SegmentPlan(1, node.body[0].lineno, node.body[-1].end_lineno, params[:-1], [], whole_node,
                                 False, "_janus_whole")  # fmt: skip
    version = RecomputeVersion(None, [Segment(seg_plan, whole)], err.location, err.kind, err.reason, [statement.lineno])
    version.prefix = prefix
    call = _Call(jf, prefix, stop, whole, connected_fn, params[:-1], connected_params[:-2])
    version.fn = call
    return version


class _Call:
    """One call of the recomputed-prefix version (see the module docstring)."""

    def __init__(self, jf, prefix: Prefix, stop, whole, connected, params: list, connected_params: list) -> None:
        self.jf, self.prefix, self.stop, self.whole, self.connected = jf, prefix, stop, whole, connected
        self.params, self.connected_params = params, connected_params
        self.__code__ = jf.fn.__code__  # SplitVersion reads its flags (not a generator)

    def __call__(self, *args: object, **kwargs: object) -> object:
        jf, stats = self.jf, self.prefix.stats
        bound = jf._bind(args, kwargs)  # noqa: SLF001
        stats.count("calls")
        runner, flat = (None, None) if bound is None else self.prefix.cache.lookup(bound)
        if runner is None:
            return self._eagerly(args, kwargs)
        unsafe = self.stop.unsafe_arguments(dict(zip(jf.params, bound)))
        if unsafe:  # eager's run, and split from now on
            self.give_up(unsafe)
            return self._eagerly(args, kwargs)
        try:
            values = runner(flat, bound)
        except (AssumptionFailed, tf.errors.OpError):  # it changed nothing: eager's own run (and error)
            return self._eagerly(args, kwargs)
        stats.count("graph_calls")
        arguments = dict(zip(jf.params, bound))
        stop = self.stop
        inputs = [*values, *(arguments[n] for n in stop.arguments)]
        sources = [v for v in inputs if _differentiable(v)]
        namespace: dict = {}
        with tf.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            tape.watch(sources)  # the statement's tensors, linked to the prefix's and arguments if it returns any
            stop.fn(namespace, *inputs)
        fed = tuple(namespace[n] for n in stop.stores)
        if not any(isinstance(v, tf.Tensor) for v in tf.nest.flatten(fed)):
            return self.whole(*(arguments[n] for n in self.params), fed)
        stats.count("imperative_calls")  # eager, the statement's tensors linked to the prefix's
        if stats.imperative_calls >= MAX_LINKED_CALLS:  # it returns tensors: splitting is faster
            self.give_up("its statement returns tensors")
        return self.connected(*(arguments[n] for n in self.connected_params), fed, (tape, sources))

    def give_up(self, why: str) -> None:
        """From the next call on, the function runs split (or eagerly), as without a recomputed prefix."""
        jf, version = self.jf, self.jf.split
        log.info("janus: %s: %s: it runs split from now on", jf.fn.__qualname__, why)
        jf.split = split_function(jf, version.reason, version.where, version.kind)

    def _eagerly(self, args: tuple, kwargs: dict) -> object:
        self.prefix.stats.count("fallbacks")
        return self.jf._eager(self.jf.fn, args, kwargs)  # noqa: SLF001


def _differentiable(value: object) -> bool:
    return isinstance(value, tf.Tensor) and (value.dtype.is_floating or value.dtype.is_complex)


def _connect(fed: tuple, link: tuple, recomputed: tuple) -> tuple:
    """``fed`` with its float tensors linked to ``recomputed`` (the prefix's locals computed again
    and the arguments, in the order the statement read them): their gradients are the recorded
    statement's."""
    tape, sources = link
    now = [v for v in recomputed if _differentiable(v)]
    flat = tf.nest.flatten(fed)
    positions = [i for i, v in enumerate(flat) if _differentiable(v)]
    if not positions or not now:
        return fed
    targets = [flat[i] for i in positions]

    @tf.custom_gradient
    def linked(*xs: tf.Tensor):
        def grad(*upstream: tf.Tensor) -> list:
            return tape.gradient(targets, sources, output_gradients=list(upstream), unconnected_gradients="zero")

        return [tf.identity(t) for t in targets], grad

    for i, value in zip(positions, linked(*now)):
        flat[i] = value
    return tf.nest.pack_sequence_as(fed, flat)


def _variant(node, found: list, replacement, params: list, extra: list, name: str):
    """The function with the statement replaced, taking the parameters its body reads plus ``extra``."""
    new = copy.deepcopy(node)
    blocks = new.body
    for depth, (_, index) in enumerate(found):
        if depth == len(found) - 1:
            ast.copy_location(replacement, blocks[index])
            for part in ast.walk(replacement):
                if "lineno" in part._attributes:
                    part.lineno = part.end_lineno = blocks[index].lineno
                    part.col_offset, part.end_col_offset = blocks[index].col_offset, blocks[index].col_offset
            blocks[index] = copy.deepcopy(replacement)
        else:
            blocks = blocks[index].body
    read = split.names(*new.body)
    used = [p for p in params if p in read.loads or p in read.deferred or p in read.stores]
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg(p) for p in [*used, *extra]], vararg=None, kwonlyargs=[], kw_defaults=[],
        kwarg=None, defaults=[],
    )  # fmt: skip
    function = ast.FunctionDef(name=name, args=args, body=new.body, decorator_list=[], returns=None)
    ast.copy_location(function, node)
    function.end_lineno = node.end_lineno
    return ast.fix_missing_locations(function), [*used, *extra]


def _function(module: types.CodeType, name: str, fn: types.FunctionType, cells: dict) -> types.FunctionType:
    from janus.partial.segments import _code_named

    factory = _code_named(module, split.FACTORY)
    inner = next(c for c in factory.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    inner = inner.replace(co_name=fn.__code__.co_name)  # log records and tracebacks name the user's function
    made = types.FunctionType(inner, fn.__globals__, fn.__name__, None, tuple(cells[n] for n in inner.co_freevars))
    made.__module__ = fn.__module__
    made.__qualname__ = fn.__qualname__
    return made
