"""Whether a gradient source was connected on the path a call took: eager's ``None`` gradients, kept.

In eager, ``tape.gradient(target, w)`` is ``None`` when no op this call ran connects ``w`` to
``target`` through ops that pass a gradient: ``w`` was never read (the branch not taken, a loop
that ran zero times, a single-leaf tree), or only through ``tf.stop_gradient``, an integer cast,
``tf.argmax`` or ``tf.shape``, or into a value the target does not use. A graph differentiates a
``tf.cond``, a ``tf.while_loop`` or a recursive invocation as a whole: where the branch that ran
does not connect ``w`` but the other one does, its gradient is zeros.

So at ``tape.gradient`` janus walks the graph back from the target (``plan``), per source:

* no path reaches the source even through every branch of every region (an over-approximation):
  its gradient is ``None`` on every call, and janus returns ``None`` itself (``NONE``);
* a path reaches it through ops that certainly pass a gradient, outside any region: the graph's
  gradient is eager's (``TRUSTED``);
* else each path that certainly passes a gradient once the regions on it ran names those regions
  (a witness): a ``tf.cond`` of the gradient's graph by its predicate, a ``tf.while_loop`` of it by
  its trip count, a region nested deeper by its run counter (an ``AssignAddVariableOp`` on a
  janus-owned counter, ``TouchCounters``). A JanusAssert checks that every region of one witness
  ran, or the call re-runs eagerly. No witness at all: the graph is refused.

The counters' values before the call are read by ``prepare()``; graphs with counters take the heap
lock (one call at a time), so two calls never mix their counts.
"""

from __future__ import annotations

import heapq
import itertools
import weakref
from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.eager import backprop_util, record
from tensorflow.python.framework import ops
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops

from janus.graphgen import recursion_grad

# Ops that pass a variable's handle on to a region (its reads are counted there), not read it.
_REGION_OPS = frozenset(
    {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase", "PartitionedCall",
     "StatefulPartitionedCall", "JanusInvoke", "JanusInvokeGrad"}
)  # fmt: skip
_IFS = frozenset({"If", "StatelessIf"})
_WHILES = frozenset({"While", "StatelessWhile"})
_CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
# Registered gradients that are None for every input (tensorflow/python/ops/math_grad.py).
_NONE_GRADIENTS = frozenset({"ArgMax", "ArgMin", "Floor", "Ceil", "Round", "Rint", "FloorDiv", "TruncateDiv"})
SCOPE = "janus_touch"
_INVOCATIONS = frozenset({"JanusInvoke", "JanusInvokeGrad"})
_MAX_STATES = 200_000  # a walk that grows past this vouches for nothing (the graph is refused)

TRUSTED = "trusted"  # plan: the graph's gradient is eager's
NONE = "none"  # plan: eager's gradient is None on every call


def is_touch_op(op: tf.Operation) -> bool:
    """A counter update of this module: bookkeeping, not the program's state."""
    return SCOPE in op.name


def eager_handle(tensor: tf.Tensor) -> object:
    """The eager resource handle a graph placeholder stands for (through enclosing graphs)."""
    graph = tensor.graph
    while not isinstance(tensor, ops.EagerTensor):
        external = next((ext for ext, internal in getattr(graph, "captures", ()) if internal is tensor), None)
        if external is None:
            return None
        tensor, graph = external, getattr(graph, "outer_graph", None)
    return tensor


def read_directly(graph: tf.Graph) -> set[int]:
    """Ids of the eager handles of the variables that ops of ``graph`` itself read (not its regions)."""
    handles: set[int] = set()
    for op in graph.get_operations():
        if op.type in _REGION_OPS or is_touch_op(op):
            continue
        for tensor in op.inputs:
            if tensor.dtype == tf.resource and tensor.op.type == "Placeholder":
                handle = eager_handle(tensor)
                if handle is not None:
                    handles.add(id(handle))
    return handles


def users(graph: tf.Graph, handle: object) -> list[tf.Operation]:
    """The ops of ``graph`` that take the eager resource ``handle`` (through a placeholder)."""
    return [
        op
        for op in graph.get_operations()
        if any(t.dtype == tf.resource and t.op.type == "Placeholder" and eager_handle(t) is handle for t in op.inputs)
    ]


_counter_handles: set[int] = set()  # ids of the eager handles of live counters (and other bookkeeping)


def mark_bookkeeping(handle: object) -> None:
    """A resource janus owns (``row_saves``): graphs' ops on it are not the program's state."""
    _counter_handles.add(id(handle))


def unmark_bookkeeping(handle_id: int) -> None:
    _counter_handles.discard(handle_id)


def is_counter(tensor: tf.Tensor) -> bool:
    """A graph's resource input that is one of these counters (janus's bookkeeping)."""
    if tensor.op.type != "Placeholder" and not isinstance(tensor, ops.EagerTensor):
        return False
    return id(eager_handle(tensor)) in _counter_handles


class Counter:
    """An int64 resource counting regions that ran: a raw handle, not a ``tf.Variable`` (one made
    while tf.function traces would make it trace again)."""

    def __init__(self) -> None:
        with tf.init_scope():
            self.handle = resource_variable_ops.eager_safe_variable_handle(
                initial_value=tf.constant(0, tf.int64), shape=[], shared_name=None,
                name=SCOPE, graph_mode=False,
            )  # fmt: skip
            self._deleter = resource_variable_ops.EagerResourceDeleter(self.handle, self.handle.device)
            gen_resource_variable_ops.assign_variable_op(self.handle, tf.constant(0, tf.int64))
        _counter_handles.add(id(self.handle))
        weakref.finalize(self, _counter_handles.discard, id(self.handle))

    def add_one(self) -> None:
        with tf.name_scope(SCOPE):
            gen_resource_variable_ops.assign_add_variable_op(self.handle, tf.constant(1, tf.int64))

    def read(self) -> tf.Tensor:
        return gen_resource_variable_ops.read_variable_op(self.handle, tf.int64)


class TouchCounters:
    """A run counter per region nested in another region (a branch in a loop body, the body of a
    recursive function, a branch within it) that may matter to a gradient; created while generating.
    Regions of the graph that asks for a gradient need none: their predicate or trip count tells."""

    def __init__(self) -> None:
        self.counters: dict[int, tuple[tf.Graph, Counter]] = {}  # id(region graph) -> (graph, counter)
        self._traced: dict[int, list[Counter]] = {}  # id(recursive function) -> its regions' counters, in order
        self._next: dict[int, int] = {}

    def begin_trace(self, owner: object) -> None:
        """A trace of recursive function ``owner`` begins: its regions count with the counters of its
        previous trace, region for region (every trace of it must capture the same tensors)."""
        self._next[id(owner)] = 0

    def count_region(self, graph: tf.Graph, depth: int, owner: object = None) -> None:
        """Counts the runs of the region ``graph`` (nested ``depth`` regions deep, within the body of
        recursive function ``owner`` if any) where a gradient may ask whether it ran: it reads a
        trainable variable itself, or a tape records it. Makes the region's invocations that count
        (a recursive function) part of what the region waits for: ACD skips invocations
        (``janus.graphgen.recursion``), and a lowered ``If`` hands its control successors on once its
        control outputs ran, not its data."""
        if hasattr(graph, "control_outputs"):
            counting = [
                op for op in graph.get_operations() if op.type in _INVOCATIONS and any(map(is_counter, op.inputs))
            ]
            graph.control_outputs.extend(op for op in counting if op not in graph.control_outputs)
        if depth < 2 or graph.name == getattr(owner, "name", None):  # a recursive body runs when invoked
            return
        watched = {id(v.handle) for v in getattr(graph, "_watched_variables", ()) if v.trainable}
        if not (read_directly(graph) & watched or record.could_possibly_record()):
            return
        counter = Counter()
        if owner is not None:
            traced, index = self._traced.setdefault(id(owner), []), self._next.get(id(owner), 0)
            self._next[id(owner)] = index + 1
            if index < len(traced):
                counter = traced[index]
            else:
                traced.append(counter)
        self.counters[id(graph)] = (graph, counter)
        counter.add_one()

    def counter_of(self, graph: tf.Graph) -> Counter | None:
        entry = self.counters.get(id(graph))
        return None if entry is None or entry[0] is not graph else entry[1]


# ------------------------------------------------------------------ walking back from the target
def _key(tensor: tf.Tensor) -> tuple[int, int]:
    return (id(tensor.op), tensor.value_index)


def _passes(op: tf.Operation, *, surely: bool) -> bool:
    """Whether ``op`` passes a gradient from its outputs to its (trainable) inputs: certainly
    (``surely``), or possibly."""
    if op.type in _NONE_GRADIENTS:
        return False
    try:
        return ops.get_gradient_function(op) is not None
    except LookupError:  # no gradient registered: eager raises if a gradient must pass
        return not surely


def _region_graphs(op: tf.Operation) -> list[tf.Graph] | None:
    """The function graphs of a region op whose outputs are theirs, index for index."""
    if op.type in _IFS:
        graphs = [getattr(op, "_true_graph", None), getattr(op, "_false_graph", None)]
    elif op.type in _WHILES:
        graphs = [getattr(op, "_body_graph", None)]
    elif op.type == "JanusInvoke":
        rf = recursion_grad.registry.get(op.get_attr("f").name)
        graphs = [getattr(getattr(rf, "forward", None), "graph", None)]
    elif op.type in _CALLS:  # a function call (TF wraps control flow in one under a persistent tape)
        graphs = [_called_graph(op)]
    else:
        return None
    return graphs if all(g is not None for g in graphs) else None


def _called_graph(op: tf.Operation) -> tf.Graph | None:
    name = op.get_attr("f").name
    graph = op.graph
    while graph is not None:
        function = graph._get_function(name)  # noqa: SLF001 - the FuncGraph a call op runs
        if function is not None:
            return getattr(function, "graph", None)
        graph = getattr(graph, "outer_graph", None)
    return None


def _output(graph: tf.Graph, index: int) -> tf.Tensor | None:
    return graph.outputs[index] if index < len(graph.outputs) else None


def _variable_handle(source: object) -> object:
    """The eager resource handle of a variable source: a ``tf.Variable``, or a Keras 3 variable (which
    is not one, but holds one)."""
    if isinstance(source, tf.Variable) or hasattr(type(source), "handle"):
        handle = getattr(source, "handle", None)
        if isinstance(handle, ops.EagerTensor) and handle.dtype == tf.resource:
            return handle
    return None


def _calls_within(top: tf.Graph) -> dict[int, tf.Operation | None]:
    """The call op of each function graph called within ``top`` and its regions (None: called twice)."""
    calls: dict[int, tf.Operation | None] = {}
    pending, seen = [top], {id(top)}
    while pending:
        for op in pending.pop().get_operations():
            if op.type not in _REGION_OPS:
                continue
            for graph in _region_graphs(op) or ():
                if op.type in _CALLS:
                    calls[id(graph)] = op if calls.get(id(graph), op) is op else None
                if id(graph) not in seen:
                    seen.add(id(graph))
                    pending.append(graph)
    return calls


class _Walk:
    """Backward walks from the targets in ``top`` to the sources (variables, and tensors of ``top``)."""

    def __init__(self, top: tf.Graph, sources: list[object], counters: TouchCounters, nested: bool) -> None:
        self.top, self.counters, self.nested = top, counters, nested
        self.by_handle: dict[int, list[int]] = {}
        self.by_tensor: dict[tuple[int, int], list[int]] = {}
        for position, source in enumerate(sources):
            handle = _variable_handle(source)
            if handle is not None:
                self.by_handle.setdefault(id(handle), []).append(position)
            elif isinstance(source, tf.Tensor) and not isinstance(source, ops.EagerTensor) and source.graph is top:
                self.by_tensor.setdefault(_key(source), []).append(position)
        self._handles: dict[tuple[int, int], int | None] = {}
        self._calls: dict[int, tf.Operation | None] | None = None  # id(function graph) -> its one call op
        self._inputs: dict[int, dict[int, int]] = {}  # id(graph) -> id(placeholder op) -> input index
        self._exits: dict[tuple[int, int], set[int]] = {}
        self._loop_bodies: set[int] = set()

    def _handle_id(self, tensor: tf.Tensor) -> int | None:
        """The id of the eager resource a graph's resource tensor is: through captures, and through
        the arguments of function calls (the one call of a function, as TF wraps control flow)."""
        key = _key(tensor)
        if key not in self._handles:
            if self._calls is None:
                self._calls = _calls_within(self.top)
            while tensor is not None and not isinstance(tensor, ops.EagerTensor):
                graph = tensor.graph
                if tensor.op.type != "Placeholder":
                    tensor = None
                    break
                external = next((ext for ext, internal in getattr(graph, "captures", ()) if internal is tensor), None)
                if external is None:
                    call = self._calls.get(id(graph))
                    position = self._input_index(graph, tensor) if call is not None else None
                    external = call.inputs[position] if position is not None and position < len(call.inputs) else None
                tensor = external
            self._handles[key] = None if tensor is None else id(tensor)
        return self._handles[key]

    def _reads(self, op: tf.Operation) -> tuple[list[int], bool]:
        """Positions of the variable sources ``op`` reads (taking their handle), and whether it takes a
        resource janus cannot name (which may be any of them)."""
        found: list[int] = []
        unknown = False
        for tensor in op.inputs:
            if tensor.dtype == tf.resource:
                handle = self._handle_id(tensor)
                unknown |= handle is None
                found.extend(self.by_handle.get(handle, ()))
        return found, unknown

    def _input_index(self, graph: tf.Graph, tensor: tf.Tensor) -> int | None:
        table = self._inputs.get(id(graph))
        if table is None:
            table = self._inputs[id(graph)] = {id(t.op): i for i, t in enumerate(graph.inputs)}
        return table.get(id(tensor.op))

    def _sure_inputs(self, graph: tf.Graph, index: int) -> set[int]:
        """The inputs of region ``graph`` its output ``index`` surely passes a gradient to, through its
        own ops (not its regions)."""
        cache = (id(graph), index)
        if cache in self._exits:
            return self._exits[cache]
        found: set[int] = set()
        start = _output(graph, index)
        stack, seen = ([start] if start is not None else []), set()
        while stack:
            tensor = stack.pop()
            if _key(tensor) in seen or not backprop_util.IsTrainable(tensor.dtype):
                continue
            seen.add(_key(tensor))
            op = tensor.op
            if op.type == "Placeholder":
                position = self._input_index(graph, tensor)
                if position is not None:
                    found.add(position)
            elif op.type not in _REGION_OPS and _passes(op, surely=True):
                stack.extend(op.inputs)
        self._exits[cache] = found
        return found

    # ---------------------------------------------------------------- possibly: over-approximated
    def possibly(self, targets: list[tf.Tensor]) -> set[int] | None:
        """Positions of the sources some path from the targets may reach, whichever branches run;
        None when a path leaves for what janus cannot follow (any source may be reached)."""
        found: set[int] = set()
        stack, seen, descended = list(targets), set(), set()
        while stack:
            tensor = stack.pop()
            key = _key(tensor)
            if key in seen or not backprop_util.IsTrainable(tensor.dtype):
                continue
            seen.add(key)
            found.update(self.by_tensor.get(key, ()))
            op = tensor.op
            if op.type == "Placeholder":
                graph = tensor.graph
                if graph is self.top and self.nested:
                    return None  # a value from around a region the gradient is taken in: a tape there may see more
                if id(graph) in self._loop_bodies:  # a loop variable: the previous trip's value too
                    index = self._input_index(graph, tensor)
                    if index is not None and _output(graph, index) is not None:
                        stack.append(_output(graph, index))
                continue
            if op.type in _REGION_OPS:
                stack.extend(op.inputs)  # what the region takes, whichever branch runs
                graphs = _region_graphs(op)
                if graphs is None:
                    positions, unknown = self._reads(op)
                    if unknown:
                        return None
                    found.update(positions)
                    continue
                for graph in graphs:
                    if op.type in _WHILES:
                        self._loop_bodies.add(id(graph))
                    if (id(graph), tensor.value_index) in descended:
                        continue
                    descended.add((id(graph), tensor.value_index))
                    start = _output(graph, tensor.value_index)
                    if start is None:  # an output janus cannot place: all of the region
                        stack.extend(t for inner in graph.get_operations() for t in inner.outputs)
                    else:
                        stack.append(start)
                continue
            if not _passes(op, surely=False):
                continue
            positions, unknown = self._reads(op)
            if unknown:
                return None
            found.update(positions)
            stack.extend(op.inputs)
        return found

    # ---------------------------------------------------------------- witnesses: certain paths
    # A walk within a graph knows how it got there (``via``): () in the gradient's own graph, the
    # function calls passed through from there (a call runs its function whenever the call runs, so
    # a tensor there is one of the call's inputs or outputs), or None inside a branch, a loop body or
    # a recursive function (what its regions did is known from their run counters only).
    def witnesses(self, targets: list[tf.Tensor]) -> dict[int, set[frozenset]] | None:
        """Per source position, the sets of conditions (``("pred", tensor ref, branch)``, ``("ran",
        tensor ref)``, ``("counter", graph)``) under which a path surely passes it a gradient; None when
        the walk grows past its limit."""
        self._budget = _MAX_STATES
        self._summaries: dict[tuple, _Summary | None] = {}
        try:
            summary = self._walk_graph(self.top, [(t, frozenset()) for t in targets], ())
        except _TooLarge:
            return None
        return summary.reads

    def _summary(self, graph: tf.Graph, index: int, via: tuple | None) -> _Summary | None:
        """What output ``index`` of region ``graph`` surely passes a gradient to: reads and inputs of
        the region, each under conditions within it. None while being computed (a recursion)."""
        key = (id(graph), index, None if via is None else tuple(id(call) for call, _ in via))
        if key not in self._summaries:
            self._summaries[key] = None
            start = _output(graph, index)
            self._summaries[key] = self._walk_graph(graph, [(start, frozenset())] if start is not None else [], via)
        return self._summaries[key]

    def _walk_graph(self, graph: tf.Graph, starts: list[tuple[tf.Tensor, frozenset]], via: tuple | None) -> _Summary:
        """Walks back within ``graph`` from ``starts``; regions inside by their summaries. Smaller sets
        of conditions first: a state whose conditions include those of a visited one adds nothing."""
        summary = _Summary()
        heap = [(len(q), i, t, q) for i, (t, q) in enumerate(starts)]
        heapq.heapify(heap)
        order = itertools.count(len(heap))
        visited: dict[tuple[int, int], list[frozenset]] = {}
        while heap:
            _size, _n, tensor, conditions = heapq.heappop(heap)
            key = _key(tensor)
            if not backprop_util.IsTrainable(tensor.dtype):
                continue
            known = visited.setdefault(key, [])
            if any(q <= conditions for q in known):
                continue
            known.append(conditions)
            self._budget -= 1
            if self._budget < 0:
                raise _TooLarge
            if graph is self.top:
                for position in self.by_tensor.get(key, ()):
                    summary.add_read(position, conditions)
            op = tensor.op
            follow: list[tuple[tf.Tensor, frozenset]] = []
            if op.type == "Placeholder":
                position = self._input_index(graph, tensor)
                if position is not None:
                    summary.exits.setdefault(position, set()).add(conditions)
            elif op.type in _REGION_OPS:
                follow = self._through(graph, via, op, tensor.value_index, conditions, summary)
            elif _passes(op, surely=True):
                for position in self._reads(op)[0]:
                    summary.add_read(position, conditions)
                follow = [(t, conditions) for t in op.inputs]
            for t, q in follow:
                heapq.heappush(heap, (len(q), next(order), t, q))
        return summary

    def _through(self, graph, via, op, index: int, conditions: frozenset, summary: _Summary) -> list:
        """From output ``index`` of region ``op`` (in ``graph``): the reads within it go to ``summary``,
        the inputs of ``op`` it passes a gradient to are returned (with their conditions)."""
        graphs = _region_graphs(op)
        if graphs is None:
            return []
        follow: list[tuple[tf.Tensor, frozenset]] = []
        if op.type in _IFS:  # an input both branches surely pass a gradient to: whichever ran
            shared = self._sure_inputs(graphs[0], index) & self._sure_inputs(graphs[1], index)
            follow.extend((op.inputs[i + 1], conditions) for i in shared)
        elif op.type in _WHILES and index in self._sure_inputs(graphs[0], index):  # zero trips or any number
            follow.append((op.inputs[index], conditions))
        for branch, region in enumerate(graphs):
            condition = self._condition(op, region, branch, graph, via)
            if condition is False:
                continue
            inner_via = (*via, (op, graph)) if op.type in _CALLS and via is not None else None
            inner = self._summary(region, index, inner_via)
            if inner is None:
                continue
            base = conditions if condition is None else conditions | {condition}
            for position, sets in inner.reads.items():
                for q in sets:
                    summary.add_read(position, base | q)
            for position, sets in inner.exits.items():
                outer = position + 1 if op.type in _IFS else position  # an If's predicate comes first
                if op.type in _WHILES and _output(region, position) is not region.inputs[position]:
                    continue  # a loop variable is the previous trip's value: only loop-invariant inputs
                if outer < len(op.inputs):
                    follow.extend((op.inputs[outer], base | q) for q in sets)
        return follow

    def _condition(self, op: tf.Operation, region: tf.Graph, branch: int, graph: tf.Graph, via: tuple | None):
        """What says that ``region`` of ``op`` (in ``graph``) ran: None when it runs whenever ``op``
        does, False when nothing can tell."""
        if op.type == "JanusInvoke" or op.type in _CALLS:
            return None
        if via is not None:  # a tensor of the gradient's graph can tell
            if op.type in _IFS:
                predicate = self._lift(op.inputs[0], graph, via)
                if predicate is not None:
                    return ("pred", predicate.ref(), branch == 0)
            else:
                trips = self._lift(op.outputs[0], graph, via)  # a while_v2 loop's first output counts trips
                if trips is not None:
                    return ("ran", trips.ref())
        return ("counter", region) if self.counters.counter_of(region) is not None else False

    def _lift(self, tensor: tf.Tensor, graph: tf.Graph, via: tuple) -> tf.Tensor | None:
        """``tensor`` of ``graph`` as the tensor of the gradient's graph it is (through function calls)."""
        for call, outer in reversed(via):
            if tensor.op.type == "Placeholder":
                position = self._input_index(graph, tensor)
                tensor = call.inputs[position] if position is not None and position < len(call.inputs) else None
            else:
                position = next(
                    (i for i, out in enumerate(graph.outputs)
                     if out is tensor or (out.op.type == "Identity" and out.op.inputs[0] is tensor)),
                    None,
                )  # fmt: skip
                tensor = call.outputs[position] if position is not None and position < len(call.outputs) else None
            if tensor is None:
                return None
            graph = outer
        return tensor


class _TooLarge(Exception):
    pass


class _Summary:
    """Reads (source position -> sets of conditions) and inputs (index -> sets of conditions) a walk
    within one graph surely passes a gradient to."""

    def __init__(self) -> None:
        self.reads: dict[int, set[frozenset]] = {}
        self.exits: dict[int, set[frozenset]] = {}

    def add_read(self, position: int, conditions: frozenset) -> None:
        self.reads.setdefault(position, set()).add(conditions)


def plan(
    graph: tf.Graph, targets: list[tf.Tensor], sources: list[object], counters: TouchCounters, nested: bool
) -> list[object]:
    """Per source: ``TRUSTED``, ``NONE``, or the witnesses (tuples of conditions), one of which must
    hold for eager's gradient not to be None (none at all: nothing can vouch for it). ``nested``: the
    gradient is taken inside a region."""
    walk = _Walk(graph, sources, counters, nested)
    followed = {p for positions in (*walk.by_handle.values(), *walk.by_tensor.values()) for p in positions}
    possible = walk.possibly(targets)
    witnesses = walk.witnesses(targets)
    plans: list[object] = []
    for position in range(len(sources)):
        found = set() if witnesses is None else witnesses.get(position, set())
        if position not in followed or frozenset() in found:
            plans.append(TRUSTED)  # a source janus cannot follow, or one a path surely reaches
        elif possible is not None and position not in possible:
            plans.append(NONE)
        else:
            plans.append([tuple(w) for w in found if not any(other < w for other in found)])
    return plans


def holds(graph: tf.Graph, witnesses: list[tuple], counters: TouchCounters, before: Callable) -> tf.Tensor:
    """Whether every condition of one of ``witnesses`` held on this call; ``before(counter)`` is the
    counter's value as the call began."""

    def held(condition: tuple) -> tf.Tensor:
        kind, subject = condition[0], condition[1]
        if kind == "pred":
            predicate = tf.cast(subject.deref(), tf.bool)
            return predicate if condition[2] else tf.logical_not(predicate)
        if kind == "ran":
            return subject.deref() > 0
        counter = counters.counter_of(subject)
        with tf.control_dependencies(users(graph, counter.handle)):  # after every region that counts
            return counter.read() > before(counter)

    return tf.reduce_any(tf.stack([tf.reduce_all(tf.stack([held(c) for c in w])) for w in witnesses]))
