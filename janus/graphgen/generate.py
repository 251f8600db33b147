"""Builds one specialised graph for a jitted function: specs + profile → ConcreteFunction.

The user function is converted by the ``Interpreter`` inside a ``tf.function`` trace of
janus's own driver (``autograph=False``), so TensorFlow's machinery handles captures,
automatic control dependencies and gradients, while the user's code itself never runs.
"""

from __future__ import annotations

import dataclasses
import time
import types
from collections.abc import Callable

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context
from tensorflow.python.framework.ops import EagerTensor

from janus.assumptions.checks import Assumption
from janus.assumptions.guards import GuardBuilder, GuardKind
from janus.assumptions.sources import ArgumentSource, Source
from janus.assumptions.specs import (
    ArgSpec,
    ConstArg,
    DatasetArg,
    LazyListArg,
    NumberArg,
    ObjectArg,
    PointerArg,
    SeqArg,
    TensorArg,
    UnusedArg,
)
from janus.graphgen import datasets, effects, exact_rewrites, gathered_reads, later, row_saves, shown
from janus.graphgen.batch_lists import BatchList
from janus.graphgen.captures import eager_tensors_as_placeholders
from janus.graphgen.context import GenerationContext, LateRead
from janus.graphgen.control_flow import TensorList
from janus.graphgen.errors import TF_PRINTS_IN_GRAPH, DeferredPrintFirst, GenerationError, NotConvertible
from janus.graphgen.fallible import called_graphs
from janus.graphgen.formatted import Formatted
from janus.graphgen.heap import HeapList, PyObjectRef
from janus.graphgen.interpreter import Interpreter
from janus.graphgen.numpy_values import NumpyArray
from janus.graphgen.ordering import (
    ASSUMPTION_CHECKS,
    fallible_after_print,
    is_state_write,
    keep_fallible,
    order_after_printed,
    order_as,
    order_prints,
    order_state_writes,
    order_writes_after_earlier_ops,
    prints,
    refuse_printing_speculative_loops,
    saved_for_rerun,
    unordered_resources,
    written_before_last_fallible,
)
from janus.graphgen.pynumber import PyNumber, to_python
from janus.graphgen.source import location
from janus.graphgen.values import is_symbolic
from janus.profiler.observe import is_plain_namedtuple
from janus.profiler.profile import Profile


def _check_effects_kept(ctx: GenerationContext, graph: tf.Graph, unrecoverable: set[str]) -> None:
    """Refuses a graph whose deferred Python effects an error could drop.

    The call's Python effects (heap writes, deferred calls such as ``print``) are made after its
    graph succeeds, from values the graph computed. An error the call cannot be re-run eagerly
    after (``recovery.recoverable``: an op that may raise after a ``tf.print`` that could not wait
    for it, or after an update janus cannot put back) reaches the user without them, where eager
    had made those before the op that raised."""
    operations = graph.get_operations()
    # an assumption that fails (janus's checks, heap reads) always re-runs the call
    unrecoverable = {op.name for op in operations if op.name in unrecoverable and op.type not in ASSUMPTION_CHECKS}
    if not unrecoverable:
        return
    last = max(i for i, op in enumerate(operations) if op.name in unrecoverable)
    # a write logged after the last such op is not made by eager either when that op raises
    effects = [(w.describe(), w.location) for w in ctx.heap.writes if w.ops_before <= last] + ctx.store_writes
    if effects:
        op = next(op for op in operations if op.name in unrecoverable)
        what, where = effects[0]
        raise NotConvertible(
            f"{what} would be lost if the op {op.name} ({op.type}) raised: it may raise after a "
            "tf.print or a TF state update that janus cannot undo, so the call could not be re-run",
            where,
        )


def _check_deferred_prints_first(ctx: GenerationContext, graph: tf.Graph) -> None:
    """Refuses a graph where a call janus defers (made after the graph ran) writes text to a
    stream before a print the graph makes on it: eager's text would come out in the other order.
    A deferred ``tf.print`` is fixed by building again with the ``tf.print``s in the graph
    (``DeferredPrintFirst``); a ``print``, logging or warnings call cannot be a graph op."""
    printing = [(i, _graph_print_streams(op)) for i, op in enumerate(graph.get_operations()) if prints(op)]
    late = []
    for write in ctx.heap.writes:
        if write.kind != "call":
            continue
        streams = effects.text_streams(write.target, *write.value)
        if any(i >= write.ops_before and streams & printed for i, printed in printing):
            late.append(write)
    for write in late:
        if effects.is_tf_print(write.target) and not ctx.failures(TF_PRINTS_IN_GRAPH):
            raise DeferredPrintFirst(
                "a tf.print janus makes after the graph ran comes before a print the graph makes", write.location
            )
    if late:
        raise NotConvertible(
            f"{late[0].describe()} comes before a tf.print the graph makes: its text would come out second",
            late[0].location,
            "print order",
        )


def _graph_print_streams(op: tf.Operation) -> set[str]:
    """The streams a graph op that prints writes to: a ``tf.print``'s, or those of the prints inside
    a branch, loop or function (either stream where one of its calls is not known)."""
    if op.type == "PrintV2":
        stream = op.get_attr("output_stream")
        stream = stream.decode() if isinstance(stream, bytes) else stream
        if stream.startswith("file://"):
            return set()
        return {"stdout"} if stream == "stdout" else {"stderr"}
    bodies = called_graphs(op)
    if bodies is None:
        return {"stdout", "stderr"}
    return {
        s for body in bodies for inner in body.get_operations() if prints(inner) for s in _graph_print_streams(inner)
    }


def _functions_only_run_by(graph: tf.Graph, names: set[str]) -> frozenset[str]:
    """The functions the ops ``names`` of ``graph`` run (their func attributes, and the functions
    nested in those) that no other op of ``graph`` runs: an error inside one came from those ops."""
    callers = [op for op in graph.get_operations() if _runs_functions(op.type, op)]
    ours = [op.node_def for op in callers if op.name in names]
    others = [op.node_def for op in callers if op.name not in names]
    return _functions_run_by(ours) - _functions_run_by(others)


_TAKES_FUNCTIONS: dict[str, bool] = {}  # op type -> whether it has a func or list(func) attribute


def _runs_functions(op_type: str, op: tf.Operation) -> bool:
    takes = _TAKES_FUNCTIONS.get(op_type)
    if takes is None:
        takes = _TAKES_FUNCTIONS[op_type] = any(a.type in ("func", "list(func)") for a in op.op_def.attr)
    return takes


def _functions_run_by(node_defs: list) -> frozenset[str]:
    todo = [name for node_def in node_defs for name in _function_attrs(node_def)]
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found.add(name)
        try:
            fdef = context.context().get_function_def(name)
        except Exception:  # noqa: BLE001 - not registered: nothing nested to follow
            continue
        for node_def in fdef.node_def:
            todo += _function_attrs(node_def)
    return frozenset(found)


def _function_attrs(node_def) -> list[str]:
    """The names of the functions a node's attributes name (``If``'s branches, ``While``'s body)."""
    names = []
    for value in node_def.attr.values():
        if value.HasField("func") and value.func.name:
            names.append(value.func.name)
        names += [f.name for f in value.list.func if f.name]
    return names


@dataclasses.dataclass
class GeneratedGraph:
    """A specialised graph plus everything needed to call it and to explain it."""

    concrete: object  # ConcreteFunction
    function_name: str
    prepare: Callable[..., list | None]  # guards + flat inputs, compiled
    num_inputs: int
    num_outputs: int
    unpack: Callable[[list, tuple], tuple[object, list | None]]  # (outputs, args) -> (result, heap writes' values)
    commit: Callable[..., None] | None  # replays heap writes after success: commit(V, a0, a1, ...)
    store_factory: object  # pyheap.StoreFactory when the graph uses the heap ops, else None
    assumptions: dict[int, Assumption]
    guards: GuardBuilder
    specs: list[ArgSpec]
    code: str
    state_writes: int
    ops_before_writes: frozenset[str]  # an op among these that raises leaves TF state untouched (after a restore)
    # the functions those ops run (branches, loop bodies, nested): an error TF names inside one of them
    # (``{{function_node F}}{{node N}}``) also leaves TF state untouched
    functions_before_writes: frozenset[str]
    snapshot: tuple  # variables the runner saves before a call and puts back if an op raises
    row_saves: tuple  # scatter-updated variables the graph saves row by row; put back likewise (row_saves.py)
    later_snapshot: tuple  # variables it saves and puts back if a statement run after the graph raises
    stop: object  # a prefix graph's statement (later.StopAt), or None
    presaved: tuple  # later_snapshot's variables, in the order their values end the outputs (else read first)
    recursive: bool  # calls recursive graph functions (JanusInvoke)
    build_seconds: float
    notes: list[str]
    # assumption keys whose failure leaves this graph in place: the call runs eagerly, nothing is
    # rebuilt (regenerating after such a failure made this very graph again)
    tolerated: set[str] = dataclasses.field(default_factory=set)
    counts_touches: bool = False  # reads janus.graphgen.touches counters: one call at a time
    runtime_flags: tuple[str, ...] = ()  # keys of the bools it takes at run time (its ifs are tf.conds)
    caught_tries: tuple[str, ...] = ()  # `try`s with handlers it speculates do not raise (caught_try.py)
    result_template: tuple = ("const", None)  # how ``unpack`` rebuilds the result from the outputs
    python_effects: tuple[str, ...] = ()  # what ``commit`` replays (heap writes, deferred calls), described
    inputs: tuple[str, ...] = ()  # what each flat input of the graph is fed from (prepare()'s list), for dumps
    # variables an update may have changed when an assertion fails (the runner puts them back)
    updated_before_assumptions: tuple[str, ...] = ()
    # ops whose error is not re-run but leaves eager's TF state and printed text (``order_after_printed``;
    # the graph then has no Python effects): raised as they are, and the graph keeps serving
    exact_errors: frozenset[str] = frozenset()
    exact_error_functions: frozenset[str] = frozenset()

    def signature(self) -> tuple:
        """What makes two builds the same speculation: their assumptions, guards and interface."""
        assumptions = tuple(sorted({(a.key, a.description) for a in self.assumptions.values()}))
        guards = tuple(g.expr for g in self.guards.guards)
        return (assumptions, guards, self.num_inputs, self.num_outputs, self.state_writes)


def generate(
    func: types.FunctionType,
    params: list[str],
    specs: list[ArgSpec],
    profile: Profile,
    failures: Callable[[str], int] = lambda key: 0,
    later_lines: dict[int, str] | None = None,
    stop_line: int | None = None,
    presave: tuple = (),
) -> GeneratedGraph:
    """The graph of ``func`` specialised on ``specs``; ``later_lines``: statements of its body to
    run in Python after the graph (``janus.graphgen.later``); ``stop_line``: a prefix graph that
    ends at that statement and returns what it reads, with no effect (``janus.partial.recompute``);
    ``presave``: variables the graph reads first and returns last (their values before the call,
    which the runner puts back if a statement run after the graph raises)."""
    started = time.perf_counter()
    ctx = GenerationContext(profile, f"{func.__name__}__janus", [f"a{i}" for i in range(len(params))], failures)
    ctx.top_code, ctx.later_lines, ctx.stop_line = func.__code__, dict(later_lines or {}), stop_line
    stopped: list[later.StopAt] = []
    loc = location(func.__code__)
    signature: list[tf.TensorSpec] = []
    flat_inputs: list[Source | str] = []
    arguments = [ArgumentSource(i, name) for i, name in enumerate(params)]
    for source, spec in zip(arguments, specs):
        _add_input_guards(ctx, spec, source, loc, signature, flat_inputs)

    template: list = []
    write_templates: list = []
    before_writes: set[str] = set()  # ops created before the first TF state update
    fallible_after_writes: set[str] = set()  # ops after it that may raise
    printed_before: set[str] = set()  # ops that may raise after a tf.print that cannot wait for them
    exact_errors: set[str] = set()  # those of them whose error leaves eager's TF state and text
    snapshot_resources: list[tf.Tensor] = []  # resources updated before an op that may raise
    unordered: list[tf.Tensor] = []  # resources an update may have changed when an assertion fails
    tail: list[tf.Tensor] = []  # resources updated after a statement that runs later (later.py)
    saved_rows: list[row_saves.RowSave] = []  # scatter-updated variables the graph saves row by row

    def driver(*placeholders: tf.Tensor) -> list[tf.Tensor]:
        feed = iter(placeholders)
        values = {source.name: _argument_value(ctx, spec, source, loc, feed) for source, spec in zip(arguments, specs)}
        for i, ph in enumerate(placeholders):
            ctx.code.bind(ph, str(flat_inputs[i]))
        ctx.initial_args = dict(values)
        # read first: TF orders them before any update of their variables
        presaved = [tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype) for v in presave]
        try:
            result = Interpreter(ctx).run(func, values)
        except later.StopAt as stop:
            stopped.append(stop)
            result = tuple(stop.values)
        if stop_line is not None and not stopped:
            raise NotConvertible("the prefix graph does not reach its statement on this path", loc, later.KIND)
        outputs: list[tf.Tensor] = []
        flatten = _Flattener(outputs, ctx, len(params))
        write_templates.extend(flatten(w.value, w.location) for w in ctx.heap.writes)
        template.append(flatten(result, loc))
        outputs.extend(presaved)  # last: the unpacking reads outputs by index
        ctx.check_shared_iteration()
        graph = tf.compat.v1.get_default_graph()
        if ctx.later_count:
            tail.extend(later.tail_resources(graph, ctx))
        if stopped:
            later.check_pure_prefix(graph, ctx, stopped[0])
        exact_rewrites.hoist_scalar_ops_over_tilings(graph)
        keep_fallible(graph, outputs)
        unordered.extend(unordered_resources(order_state_writes(graph, ctx.assert_ops)))
        order_prints(graph)
        refuse_printing_speculative_loops(ctx)
        first_write = order_writes_after_earlier_ops(graph)
        if first_write is not None:
            before_writes.update(op.name for op in graph.get_operations()[:first_write])
        resources, fallible = written_before_last_fallible(graph, first_write, ctx.assert_ops)
        printed = fallible_after_print(graph)
        exact_errors.update(order_after_printed(graph, printed, ctx.assert_ops))
        _check_deferred_prints_first(ctx, graph)
        resources = saved_for_rerun(graph, resources, fallible - printed)
        resources, saves = row_saves.add(graph, resources, whole=unordered)  # made last: not program ops
        saved_rows.extend(saves)
        for save in saves:  # they raise where their scatter would, and wait for what it waits for
            fallible.add(save.gather)
            if save.scatter in printed:
                printed.add(save.gather)
                exact_errors.add(save.gather)
                order_as(graph.get_operation_by_name(save.gather), graph.get_operation_by_name(save.scatter))
        snapshot_resources.extend(resources)
        if printed and ctx.caught_tries:
            raise NotConvertible(
                "a `try` with a handler in a graph where a tf.print runs before an op that may raise (the "
                "call re-run eagerly would print twice)",
                ctx.caught_tries[0],
            )
        fallible_after_writes.update(fallible - printed)
        printed_before.update(printed)
        ctx.code.returns(outputs)
        return outputs

    driver.__name__ = f"{func.__name__}_janus"
    try:
        with eager_tensors_as_placeholders():
            concrete = tf.function(driver, input_signature=signature, autograph=False).get_concrete_function()
    except (NotConvertible, GenerationError) as err:
        err.runtime_flags = tuple(ctx.runtime_flags)  # the driver retries with them as constants
        raise
    gathered_reads.rewrite_registered(concrete._inference_function.name)
    heap_paths = ctx.heap_tensors
    captures = []
    variables = {id(v.handle): v for v in concrete.variables}
    described = []
    for captured in concrete.captured_inputs:
        path = heap_paths.get(id(captured))
        captures.append(path if path is not None else ctx.const(captured))
        described.append(_describe_capture(captures[-1], captured, variables))
    prepare = ctx.guards.compile(len(params), flat_inputs + captures)
    commit = ctx.heap.compile(len(params), ctx.guards.namespace, lambda i: f"V[{i}]", ctx.const)
    writes = sum(1 for op in concrete.graph.get_operations() if is_state_write(op))
    try:
        later_snapshot = _variables_of(concrete, tail)
    except _Unmapped:
        raise NotConvertible(
            "TF state janus cannot save and put back (not a variable) is updated after a statement run later",
            ctx.heap.writes[0].location,
            later.KIND,
        ) from None
    if later_snapshot:
        later.check_summary_step(later_snapshot, ctx.heap.writes[0].location)
    try:  # the updates before an op that may raise are saved and put back by the runner
        snapshot = _variables_of(concrete, snapshot_resources + unordered)
        updated_first = tuple(v.name for v in _variables_of(concrete, unordered))
        recoverable = before_writes | fallible_after_writes
    except _Unmapped:
        if ctx.caught_tries:  # a `try` body's error would reach the user past updates it cannot undo
            raise NotConvertible(
                "a `try` with a handler in a graph that updates TF state janus cannot save and put back "
                "(not a variable)",
                ctx.caught_tries[0],
            ) from None
        if unordered:  # an assertion may fail after updates janus cannot put back
            raise NotConvertible(
                "an assumption is checked after an update of TF state that janus cannot save and put "
                "back (not a variable)",
                loc,
            ) from None
        snapshot, recoverable, updated_first = (), set(before_writes), ()
        saved_rows.clear()  # an error past the updates is not recoverable: nothing is put back
    _check_effects_kept(ctx, concrete.graph, (fallible_after_writes | printed_before) - recoverable)
    return GeneratedGraph(
        concrete=concrete,
        function_name=concrete._inference_function.name.decode()
        if isinstance(concrete._inference_function.name, bytes)
        else concrete._inference_function.name,  # noqa: E501
        prepare=prepare,
        num_inputs=len(flat_inputs),
        num_outputs=len(concrete.outputs),
        unpack=_unpacker(template[0], write_templates),
        commit=commit,
        store_factory=ctx.store_factory,
        assumptions=dict(ctx.assumptions),
        guards=ctx.guards,
        specs=list(specs),
        code=ctx.code.render(),
        state_writes=writes,
        ops_before_writes=frozenset(recoverable),
        functions_before_writes=_functions_only_run_by(concrete.graph, recoverable),
        exact_errors=frozenset(exact_errors),
        exact_error_functions=_functions_only_run_by(concrete.graph, exact_errors),
        snapshot=snapshot,
        row_saves=tuple(saved_rows),
        later_snapshot=later_snapshot,
        presaved=tuple(presave) if {id(v) for v in presave} == {id(v) for v in later_snapshot} else (),
        stop=stopped[0] if stopped else None,
        recursive=bool(ctx.recursive_functions),
        build_seconds=time.perf_counter() - started,
        notes=list(ctx.notes),
        runtime_flags=tuple(ctx.runtime_flags),
        caught_tries=tuple(ctx.caught_tries),
        result_template=template[0],
        python_effects=tuple(w.describe() for w in ctx.heap.writes),
        updated_before_assumptions=updated_first,
        counts_touches=any(key[0] == "touch" for key in ctx._store_inputs if isinstance(key, tuple)),
        inputs=tuple(str(source) for source in flat_inputs) + tuple(described),
    )


def _describe_capture(feed: Source | str, captured: object, variables: dict[int, tf.Variable]) -> str:
    """A captured input, for dumps: its feed in prepare() and, for a variable's handle, the variable."""
    variable = variables.get(id(captured))
    if variable is not None:
        return f"{feed} (variable {variable.name!r})"
    if isinstance(captured, EagerTensor):
        return f"{feed} ({captured.dtype.name}{list(captured.shape)})"
    return str(feed)


def _variables_of(concrete: object, resources: list[tf.Tensor]) -> tuple:
    """The variables behind the graph's captured resource placeholders ``resources``."""
    if not resources:
        return ()
    external = {id(internal): outer for outer, internal in concrete.graph.captures}
    by_handle = {id(v.handle): v for v in concrete.variables}
    found = {}
    for tensor in resources:
        while tensor.op.type == "Identity" and id(tensor) not in external:
            tensor = tensor.op.inputs[0]
        variable = by_handle.get(id(external.get(id(tensor))))
        if variable is None:  # a resource janus cannot map back: do not claim the call recoverable
            raise _Unmapped
        found[id(variable)] = variable
    return tuple(found.values())


class _Unmapped(Exception):
    pass


# ------------------------------------------------------------------ arguments
def _add_input_guards(
    ctx: GenerationContext, spec: ArgSpec, source: Source, loc: str, signature: list, flat: list
) -> None:
    key = f"{source.describe()}@{loc}"
    if isinstance(spec, TensorArg):
        ctx.guard(GuardKind.TENSOR_MATCH, source, (spec.dtype, spec.shape), f"{key}:shape", loc)
        signature.append(tf.TensorSpec(spec.shape, spec.dtype))
        flat.append(source)
    elif isinstance(spec, ConstArg):
        ctx.guard(GuardKind.EQUALS_MATCH, source, spec.value, f"{key}:value", loc)
    elif isinstance(spec, NumberArg):
        ctx.guard(GuardKind.NUMBER_TYPE, source, spec.type, f"{key}:type", loc)
    elif isinstance(spec, PointerArg):
        described = f"{source.describe()} is a {spec.cls.__qualname__} (passed by pointer)"
        ctx.guard(GuardKind.TYPE_MATCH, source, spec.cls, f"{key}:type", loc, described)
    elif isinstance(spec, DatasetArg):
        ctx.dataset_guard(source, spec.spec, spec.kind, f"{key}:type", loc)
        signature.append(tf.TensorSpec([], tf.variant))
        flat.append(f"{ctx.const(datasets.variant_of)}({source})")
    elif isinstance(spec, LazyListArg):
        described = f"{source.describe()} is a list (its contents unread)"
        ctx.guard(GuardKind.TYPE_MATCH, source, list, f"{key}:type", loc, described)
    elif isinstance(spec, SeqArg):
        ctx.guard(GuardKind.SEQUENCE_MATCH, source, (spec.type, len(spec.items), spec.keys), f"{key}:type", loc)
        for label, item in zip(_labels(spec), spec.items):
            _add_input_guards(ctx, item, source.item(label, ctx.const), loc, signature, flat)


def _argument_value(ctx: GenerationContext, spec: ArgSpec, source: Source, loc: str, feed) -> object:
    if isinstance(spec, TensorArg):
        placeholder = next(feed)
        ctx.register_argument_tensor(placeholder, source)
        if spec.value is not None:
            what = source.describe()
            constant = ctx.assert_constant(placeholder, spec.value, f"{what}@{loc}:value", f"{what} == constant", loc)
            ctx.register_argument_tensor(constant, source)
            return constant
        return placeholder
    if isinstance(spec, ConstArg):
        return spec.value
    if isinstance(spec, UnusedArg):
        return later.Withheld(source.describe(), "an argument the prefix graph does not take")
    if isinstance(spec, NumberArg) and spec.type is bool:
        return ctx.runtime_flag(source, f"{source.describe()}@{loc}", loc)
    if isinstance(spec, NumberArg):
        return ctx.number_input(source, spec.type)
    if isinstance(spec, SeqArg):
        items = [
            _argument_value(ctx, s, source.item(label, ctx.const), loc, feed)
            for label, s in zip(_labels(spec), spec.items)
        ]
        if spec.type is tuple:
            return tuple(items)
        if is_plain_namedtuple(spec.type):  # a namedtuple argument stays one (its fields, tf.nest)
            return spec.type(*items)
        container = ctx.mark_heap_container(dict(zip(spec.keys, items)) if spec.type is dict else items, source)
        ctx.register_argument_container(container, source)
        return container
    if isinstance(spec, LazyListArg):
        return ctx.unread_list(source, loc)
    if isinstance(spec, DatasetArg):
        return ctx.input_dataset(next(feed), spec.spec, spec.kind)
    if isinstance(spec, PointerArg):
        return PyObjectRef(ctx.pointer_input(source), spec.cls, spec.samples, argument=True)
    assert isinstance(spec, ObjectArg)
    return ctx.read_heap(spec.obj, source, loc)


def _labels(spec: SeqArg) -> list:
    return list(spec.keys) if spec.keys is not None else list(range(len(spec.items)))


# ------------------------------------------------------------------ results
class _Flattener:
    """Turns the result and the heap writes' values into graph outputs plus templates to rebuild them.

    A container reached twice (returned and also stored on ``self``) is rebuilt once per call, so
    the caller gets the very object that was stored, as in eager. A NumPy array made while
    generating is copied per call (eager makes a fresh one); one read from the heap is returned
    as itself.
    """

    def __init__(self, outputs: list, ctx: GenerationContext, nargs: int) -> None:
        self.outputs = outputs
        self._ctx = ctx
        self._params = ", ".join(f"a{i}" for i in range(nargs))
        self._indices: dict[int, int] = {}  # id(graph tensor) -> its output: one object per call
        self._within: set[int] = set()  # the containers being flattened now

    def _source(self, source: Source | str) -> tuple:
        """The object at ``source`` when the call started: eager's very object (an argument tensor
        stored on ``self``, an attribute array returned), re-read from the call's arguments."""
        getter = eval(compile(f"lambda {self._params}: {source}", "<janus source>", "eval"), self._ctx.guards.namespace)  # noqa: S307
        return ("source", getter)

    def __call__(self, value: object, loc: str) -> tuple:
        if type(value) not in (list, tuple, dict) and not is_plain_namedtuple(type(value)):
            return self._flatten(value, loc)
        if id(value) in self._within:
            raise NotConvertible(f"returns or stores a {type(value).__name__} that holds itself", loc)
        self._within.add(id(value))
        try:
            return self._flatten(value, loc)
        finally:
            self._within.discard(id(value))

    def _flatten(self, value: object, loc: str) -> tuple:
        outputs = self.outputs
        if isinstance(value, PyNumber):
            outputs.append(value.tensor)
            return ("number", (len(outputs) - 1, value.type))
        source = self._ctx.source_path(value) if isinstance(value, (tf.Tensor, NumpyArray)) else None
        if source is not None:
            return self._source(source)
        if is_symbolic(value) or isinstance(value, EagerTensor):
            index = self._indices.get(id(value))
            if index is None:
                outputs.append(value if is_symbolic(value) else tf.identity(value))
                index = self._indices[id(value)] = len(outputs) - 1
            return ("out", index)
        if isinstance(value, tf.IndexedSlices):  # e.g. the gradient of an embedding table, as eager returns it
            parts = [value.values, value.indices] + ([] if value.dense_shape is None else [value.dense_shape])
            return ("indexed_slices", [self(p, loc) for p in parts])
        if isinstance(value, Formatted):
            return ("formatted", (value.make, self(value.args, loc), self(value.kwargs, loc)))
        if isinstance(value, LateRead):
            return ("late", value)
        origin = self._ctx.origin_of(value) if type(value) in (list, dict) else None
        if origin is not None:  # janus's copy of a heap list or dict: eager's very object (writes are committed to it)
            return self._source(origin)
        if type(value) in (list, tuple):
            return (type(value).__name__, (id(value), [self(v, loc) for v in value]))
        if is_plain_namedtuple(type(value)):
            return ("namedtuple", (id(value), (type(value), [self(v, loc) for v in value])))
        if type(value) is dict:
            return ("dict", (id(value), [(k, self(v, loc)) for k, v in value.items()]))
        if isinstance(value, np.ndarray) and self._ctx.path_of(value) is None:
            return ("copy", value.copy())
        if isinstance(value, (set, types.GeneratorType)) or type(value).__name__ in (
            "zip",
            "map",
            "filter",
            "enumerate",
            "dict_keys",  # a view of janus's copy of a dict: eager's shows the live dict
            "dict_values",
            "dict_items",
        ):
            raise NotConvertible(f"returns a {type(value).__name__}, which would be shared across calls", loc)
        if isinstance(value, tf.Variable) and self._ctx.path_of(value) is not None:
            return ("const", value)  # a variable read from the heap: the same object, as in eager
        if isinstance(value, (tf.Tensor, tf.__internal__.CompositeTensor)):
            raise NotConvertible(f"returns an unsupported tensor type {type(value).__name__}", loc)
        if isinstance(value, (TensorList, BatchList)):
            raise NotConvertible("returns a list whose length is only known at run time", loc)
        if isinstance(value, tf.TensorArray) and is_symbolic(value.flow):  # eager's holds its elements in Python
            raise NotConvertible("returns or stores a tf.TensorArray made by the graph", loc)
        if isinstance(value, HeapList):
            return ("const", value.real)  # the same list object eager returns (writes are committed to it)
        if isinstance(value, PyObjectRef):
            raise NotConvertible("returns an object known only at run time", loc)
        if isinstance(value, tf.GradientTape):  # the graph's tape recorded the graph's ops, not the caller's
            raise NotConvertible("returns or stores a GradientTape made in the function", loc)
        if shown.reaches(value, is_symbolic, shown.held):  # a graph tensor must not escape
            raise NotConvertible(
                f"returns or stores a {type(value).__name__} that may hold tensors made by the graph (or that "
                "janus cannot look into without running its code)",
                loc,
            )
        if type(value).__module__.startswith("janus."):  # a def or lambda made while generating, ...
            raise NotConvertible(f"returns or stores {value!r}, which only the graph's code can call", loc)
        return ("const", value)


def _unpacker(template: tuple, write_templates: list) -> Callable[[list, tuple], tuple[object, list | None]]:
    """``(outs, args) -> (result, values the heap writes store)``, one identity memo per call."""
    if not write_templates:
        if template[0] == "out":
            index = template[1]
            return lambda outs, args: (outs[index], None)
        if template[0] == "const":
            value = template[1]
            return lambda outs, args: (value, None)
        return lambda outs, args: (_pack(template, outs, {}, args), None)

    def unpack(outs: list, args: tuple) -> tuple[object, list]:
        memo: dict[int, object] = {}
        values = [_pack(t, outs, memo, args) for t in write_templates]
        return _pack(template, outs, memo, args), values

    return unpack


def _pack(template: tuple, outs: list, memo: dict, args: tuple) -> object:
    kind, body = template
    if kind == "out":
        return outs[body]
    if kind == "const":
        return body
    if kind == "number":
        return to_python(outs[body[0]], body[1])
    if kind == "copy":
        return body.copy()
    if kind == "late":
        return body.read()
    if kind == "source":
        return body(*args)
    if kind == "formatted":
        make, positional, keywords = body
        return make(*_pack(positional, outs, memo, args), **_pack(keywords, outs, memo, args))
    if kind == "indexed_slices":
        return tf.IndexedSlices(*(_pack(t, outs, memo, args) for t in body))
    key, items = body
    if key in memo:
        return memo[key]
    if kind == "dict":
        mapping: dict = {}
        memo[key] = mapping
        mapping.update((k, _pack(t, outs, memo, args)) for k, t in items)
        return mapping
    if kind == "namedtuple":
        cls, fields = items
        memo[key] = packed = cls(*(_pack(t, outs, memo, args) for t in fields))
        return packed
    if kind == "list":
        sequence: list = []
        memo[key] = sequence
        sequence.extend(_pack(t, outs, memo, args) for t in items)
        return sequence
    memo[key] = packed = tuple(_pack(t, outs, memo, args) for t in items)
    return packed
