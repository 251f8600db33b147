"""All-or-nothing for TF state: every state update waits for every JanusAssert of its graph, and
for every op that comes before it in the program, so an op that raises leaves eager's TF state."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.framework import auto_control_deps

from janus.graphgen import touches
from janus.graphgen.errors import NotConvertible, SpeculatesUnderPrint
from janus.graphgen.fallible import called_graphs, may_raise
from janus.ops.assert_op import CHECK_OPS

# Stateful ops that only read state: they may run before an assumption is checked.
STATE_READS = frozenset(
    {
        "ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape", "VarIsInitializedOp",
        "JanusInvoke", "JanusInvokeGrad",  # recursive functions only read variables (recursion.py refuses writes)
        "LookupTableFindV2", "LookupTableSizeV2", "LookupTableExportV2",  # a lookup table's reads
    }
) | CHECK_OPS  # fmt: skip
# Reads of run-time Python objects: each checks the value's type (an assumption), and the token
# they pass on orders them among janus's heap ops.
HEAP_READS = frozenset({"JanusPyGetAttr", "JanusPyGetSubscr"})
# janus's checks must run, but TF's automatic control dependencies must not chain them after the
# stateful op without a resource before them (a print, a branch that prints) as they chain such ops:
# every update and print waits for every check instead (``order_state_writes``), and a chained
# check made that impossible (a cycle), or left a branch that printed before a failed assumption.
ASSUMPTION_CHECKS = CHECK_OPS | HEAP_READS  # their failure is an assumption's: the call is always re-run
auto_control_deps.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = (
    auto_control_deps.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS | ASSUMPTION_CHECKS
)
# Control flow whose branches hold assertions is itself an assertion: its inner writes already wait for them.
_CONTROL_FLOW = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})


def mark_call_local(op: tf.Operation) -> None:
    """``op`` updates only state that its graph makes anew each call (the iterator of a dataset
    loop): no update of TF state that outlives the call, so nothing to wait for or to put back."""
    op._janus_call_local = True


def _call_local(op: tf.Operation) -> bool:
    return getattr(op, "_janus_call_local", False)


def is_control_flow(op: tf.Operation) -> bool:
    return op.type in _CONTROL_FLOW


def is_state_write(op: tf.Operation) -> bool:
    """TF state updates, prints (and control flow that may run one), and Horovod collectives: what
    must wait for every assertion."""
    if op.type.startswith("Horovod"):
        return True  # a rank whose assertion fails must not have joined a collective yet
    if op.type in STATE_READS or not op._is_stateful or _call_local(op) or touches.is_touch_op(op):
        return False
    return any(outlives_call(t) for t in op.inputs) or prints(op)


_HEAP_WRITES = frozenset({"JanusPySetAttr", "JanusPySetSubscr"})


def changes_state(op: tf.Operation) -> bool:
    """Whether running ``op`` may change what outlives the call: a state update or print
    (``is_state_write``), a write to a Python object through the heap store, a recursive function's
    invocation (which may write), or control flow or a call holding one of them."""
    if op.type in _HEAP_WRITES or op.type in _INVOCATIONS:
        return True
    bodies = called_graphs(op)
    if bodies is None:
        return op._is_stateful
    if bodies:
        return any(changes_state(inner) for body in bodies for inner in body.get_operations())
    return is_state_write(op)


def outlives_call(tensor: tf.Tensor) -> bool:
    """A resource that is not made anew by the call: a variable, a table, an iterator that is not
    the call's own. ``Anonymous*`` ops (an iterator, a seed generator) and tf.data's placeholders
    (``DummySeedGenerator``: a dataset made in the graph keeps its seeds itself) are new each run."""
    if tensor.dtype != tf.resource or touches.is_counter(tensor):  # janus's bookkeeping, not the program's
        return False
    op = tensor.op
    return not (_call_local(op) or op.type.startswith("Anonymous") or op.type in _DUMMY_RESOURCES)


_DUMMY_RESOURCES = frozenset({"DummySeedGenerator", "DummyMemoryCache"})


def order_state_writes(graph: tf.Graph, assert_ops: list[tf.Operation]) -> list[tf.Operation]:
    """Adds a control dependency from every assertion to every state update of ``graph``.

    ``assert_ops`` may include control-flow ops (If/While) whose branches hold assertions.
    An update that an assertion itself depends on cannot wait for it (a loop that trains, then
    an assertion on its result). Returns such updates, and control flow holding assertions (a
    loop's later iteration's may fail after an earlier one's updates): their updates may have
    run when an assertion fails, so the runner saves their variables and puts them back
    (``unordered_resources``). A print or collective an assertion depends on is refused.
    """
    if not assert_ops:
        return []
    earlier_users = _earlier_users(graph)
    ancestors: set[tf.Operation] = set()
    holding = {a: _control_flow_of(a) for a in assert_ops}  # a branch's or loop's output stands for it
    _after_earlier_writes(graph, [op for op in holding.values() if is_control_flow(op) and prints(op)])
    pending = list(holding.values())
    while pending:
        op = pending.pop()
        for parent in [t.op for t in op.inputs] + list(op.control_inputs) + earlier_users(op):
            if parent not in ancestors:
                ancestors.add(parent)
                pending.append(parent)
    unordered = []
    for op in graph.get_operations():
        if is_state_write(op):
            if op in ancestors:  # it runs first: what it updates is saved and put back on a failure
                if not any(outlives_call(t) for t in op.inputs):  # a print, a collective: nothing to put back
                    raise NotConvertible(
                        f"an assumption is checked after the {op.type}, which janus cannot take back (a print or "
                        "a collective): a failed check re-runs the call eagerly, which would make it twice"
                    )
                unordered.append(op)
                continue
            if op in holding.values() and op.type in _CONTROL_FLOW:
                unordered.append(op)  # a loop's later iteration; a branch's loop
            op._add_control_inputs([a for a, held in holding.items() if held is not op and a not in op.control_inputs])
    return unordered


def _after_earlier_writes(graph: tf.Graph, holders: list[tf.Operation]) -> None:
    """Makes each of ``holders`` (a loop or branch that holds assertions and prints) wait for every
    state update and print created before it. Its own error after it printed (a later turn's
    scatter) is not re-run: what eager made before the loop must then have been made. Those updates
    run before its assertions, so they are saved and put back when one fails; a print before it is
    refused (a failed check re-runs the call, which would print it twice)."""
    if not holders:
        return
    operations = graph.get_operations()
    position = {op: i for i, op in enumerate(operations)}
    for holder in holders:
        earlier = [op for op in operations[: position[holder]] if is_state_write(op)]
        holder._add_control_inputs([op for op in earlier if op not in holder.control_inputs])
        holder._janus_after_writes = True


def refuse_printing_speculative_loops(ctx) -> None:
    """A loop whose turns print and check an assumption: when a later turn's check fails, the call
    runs again in eager, which prints the earlier turns' text a second time. Where every such
    assumption can be given up, the graph is built again without them (``SpeculatesUnderPrint``);
    else the loop is refused (holding the graph's text back until the call succeeds would keep it)."""
    for op in map(_control_flow_of, ctx.assert_ops):
        if op.type not in ("While", "StatelessWhile") or not prints(op):
            continue
        reason = (
            "a loop that prints and checks an assumption in its turns: when a later turn's check fails, the call "
            "runs again in eager and would print the earlier turns' text twice"
        )
        loc = getattr(op, "_janus_loc", "")
        keys = _assumption_keys(op, ctx)
        if keys is None:
            raise NotConvertible(reason, loc, kind="print order")
        if keys:
            raise SpeculatesUnderPrint(f"{reason}; building again without its assumptions", loc, keys)


# A Python int's int64 range, checked at each `i += 1`: a loop would need 2**63 turns to break it.
# A known gap: an int that does overflow in a later turn (`x *= k`) re-runs the call, printing twice.
_KEPT_UNDER_PRINT = ("int does not overflow@",)


def _assumption_keys(loop: tf.Operation, ctx) -> list[str] | None:
    """The keys of the assumptions checked inside ``loop`` (but ``_KEPT_UNDER_PRINT``), or None where
    one cannot be given up (a final one, one given up before, a heap read's type check)."""
    keys, pending = [], [loop]
    while pending:
        bodies = called_graphs(pending.pop())
        if bodies is None:
            return None
        for body in bodies:
            for op in body.get_operations():
                if op.type in HEAP_READS:
                    return None
                if op.type in CHECK_OPS:
                    assumption = ctx.assumptions.get(op.get_attr("assumption_id"))
                    if assumption is not None and assumption.key.startswith(_KEPT_UNDER_PRINT):
                        continue
                    if assumption is None or assumption.final or ctx.failed(assumption.key):
                        return None
                    keys.append(assumption.key)
                pending.append(op)
    return keys


def _control_flow_of(op: tf.Operation) -> tf.Operation:
    """The ``If`` or ``While`` whose output ``op`` passes on (``tf.cond`` returns an ``Identity``
    of each), else ``op``: a branch that holds assertions and prints is not refused as an update
    its own assertion depends on."""
    if op.type == "Identity" and op.inputs and is_control_flow(op.inputs[0].op):
        return op.inputs[0].op
    return op


def unordered_resources(ops: list[tf.Operation]) -> list[tf.Tensor]:
    """The resources that ``ops`` (from ``order_state_writes``) may update before an assertion fails."""
    return [t for op in ops for t in op.inputs if outlives_call(t)]


def _earlier_users(graph: tf.Graph) -> Callable[[tf.Operation], list[tf.Operation]]:
    """The stateful ops created before ``op`` on a resource it uses, and the stateful op without
    one before ``op`` if it has none (a print, an assertion): TF's automatic control dependencies,
    added when the function is finished, will make ``op`` wait for them."""
    operations = graph.get_operations()
    position = {op: i for i, op in enumerate(operations)}
    users: dict[tuple, list[tf.Operation]] = {}
    previous_unkeyed: dict[tf.Operation, tf.Operation] = {}
    last_unkeyed = None
    for op in operations:
        if op._is_stateful:
            for t in op.inputs:
                if t.dtype == tf.resource:
                    users.setdefault((t.op.name, t.value_index), []).append(op)
        if _chained_without_resource(op):
            if last_unkeyed is not None:
                previous_unkeyed[op] = last_unkeyed
            last_unkeyed = op

    def earlier(op: tf.Operation) -> list[tf.Operation]:
        if not op._is_stateful or op not in position:
            return []
        here = position[op]
        keys = {(t.op.name, t.value_index) for t in op.inputs if t.dtype == tf.resource}
        found = [u for key in keys for u in users.get(key, ()) if position[u] < here]
        return found + ([previous_unkeyed[op]] if op in previous_unkeyed else [])

    return earlier


def order_prints(graph: tf.Graph) -> None:
    """Makes each op that prints (a ``tf.print``, or control flow that may run one) wait for the one
    before it in the program: TF chains only prints outside control flow, and a branch that reads a
    variable printed before a print above it. Not where the earlier one already waits for the later
    (a print waits for every assertion, and a branch may hold one)."""
    previous = None
    for op in graph.get_operations():
        if prints(op):
            if (
                previous is not None
                and previous not in op.control_inputs
                and op not in _ancestors_in_finished_function(graph, [previous])
            ):
                op._add_control_inputs([previous])
            previous = op


def _chained_without_resource(op: tf.Operation) -> bool:
    """Whether TF's automatic control dependencies chain ``op`` after the stateful op without a
    resource before it (``AutomaticControlDependencies``: "stateful ops with no inputs are ordered")."""
    return (
        _ordered_by_tf(op)
        and not any(True for _ in auto_control_deps._get_resource_inputs(op))  # noqa: SLF001
        and op._control_flow_context is None
    )


def _ordered_by_tf(op: tf.Operation) -> bool:
    """Whether TF's automatic control dependencies order ``op`` among the stateful ops."""
    return auto_control_deps.op_is_stateful(op) and op.type not in ASSUMPTION_CHECKS


def order_writes_after_earlier_ops(graph: tf.Graph) -> int | None:
    """Makes every state update wait for every op created before it (program order) that may raise,
    as eager would have run them first: an op that raises (``tf.gather`` out of range,
    ``check_numerics``, a user's assert) then leaves TF state as eager leaves it. Updates do not
    wait for each other, nor for ops that cannot raise.

    Returns the creation index of the first state update (None without one): an op that fails
    before it has left TF state untouched, so the call can be re-run eagerly.
    """
    operations = graph.get_operations()
    pending: list[tf.Operation] = []
    barrier: tf.Operation | None = None
    first_write = None
    for index, op in enumerate(operations):
        if not is_state_write(op):
            if may_raise(op):  # an op that cannot raise need not run first
                pending.append(op)
            continue
        if first_write is None:
            first_write = index
        barrier = _wait_for(op, pending, barrier, "janus_program_order")
        # an update that may raise (a scatter at a bad index, a loop in a later turn): those after it wait too
        pending = [op] if may_raise(op) and (is_control_flow(op) or op.type.startswith(_PARTIAL_UPDATES)) else []
    return first_write


def _wait_for(op: tf.Operation, pending: list, barrier: tf.Operation | None, name: str) -> tf.Operation | None:
    """Makes ``op`` wait for ``pending`` and the last ``barrier``; returns the barrier now last."""
    if pending:
        with op.graph.as_default(), tf.control_dependencies(pending + ([barrier] if barrier is not None else [])):
            barrier = tf.no_op(name=name)
    if barrier is not None and barrier not in op.control_inputs:
        op._add_control_inputs([barrier])
    return barrier


def keep_fallible(graph: tf.Graph, outputs: list[tf.Tensor]) -> None:
    """Makes the function run every op that may raise, even where nothing uses its result.

    TF prunes an op that neither a result nor a stateful op depends on: ``tf.gather(table, i)``
    kept only for its check would never raise in the graph, where eager raises (and a ``try``'s
    handler catches it). Such ops become control outputs of the function."""
    needed = _with_ancestors([t.op for t in outputs] + [op for op in graph.get_operations() if op._is_stateful])
    graph.control_outputs.extend(op for op in graph.get_operations() if op not in needed and may_raise(op))


def branch_done(branch: tf.Graph) -> tf.Tensor:
    """The last output of a tf.cond branch: a handle that is ready only once every op of the
    branch that may raise has run. Those ops become the branch's control outputs too.

    TF lowers an ``If`` to Switch/Merge before running it: an op waiting on one of its outputs
    (``order_state_writes``) waits only for what that output depends on, and an op waiting on the
    ``If`` itself (``order_writes_after_earlier_ops``'s barrier) only for the branch's control
    outputs, its stateful ops. Without both, a state update waiting on a branch whose
    ``tf.slice`` or JanusAssert failed ran anyway, and the eager re-run applied it again.
    Stateful ops are control outputs already (TF's automatic control dependencies)."""
    branch_outputs_fallible(branch)
    with tf.control_dependencies([op for op in branch.get_operations() if may_raise(op)]):
        return tf.constant(True)


def branch_outputs_fallible(branch: tf.Graph) -> None:
    """Makes a tf.cond branch's stateless ops that may raise its control outputs (``branch_done``):
    what waits on the lowered ``If`` then waits for them."""
    known = set(branch.control_outputs)
    branch.control_outputs.extend(
        op for op in branch.get_operations() if op not in known and not op._is_stateful and may_raise(op)
    )


def written_before_last_fallible(
    graph: tf.Graph, first_write: int | None, ordered: list[tf.Operation] = ()
) -> tuple[list[tf.Tensor], set[str]]:
    """The resources updated before the graph's last op that may raise (after its first update),
    and the names of the ops after the first update that may raise.

    If such an op raises, the updates before it may have run: the runner keeps a snapshot of those
    variables and puts them back, so the call can be re-run eagerly. An update that none of those
    ops depends on (BatchNormalization's moving statistics before the loss's
    ``SparseSoftmaxCrossEntropyWithLogits``) waits for them instead (``_wait_for_fallible``): it
    has not run when one raises, and nothing is saved. The ``ordered`` ops (assertions,
    ``order_state_writes``) and the ops they depend on run before every update that is not their
    ancestor, wherever they were created: those ancestors are saved as unordered, and no other
    update runs before one of them fails.
    """
    if first_write is None:
        return [], set()
    operations = graph.get_operations()
    fallible = [i for i in range(first_write, len(operations)) if may_raise(operations[i])]
    ordered = _with_ancestors(ordered)
    unordered_fallible = [operations[i] for i in fallible if operations[i] not in ordered]
    last = operations.index(unordered_fallible[-1]) if unordered_fallible else None
    updates = operations[first_write:last] if last is not None else []
    if last is not None and (
        operations[last].type.startswith(_PARTIAL_UPDATES) or is_control_flow(operations[last])
    ):  # it may raise after updating some rows, or in a later turn of a loop: they are put back too
        updates.append(operations[last])
    updates = [op for op in updates if is_state_write(op)]
    kept = [op for op in updates if op in ordered]  # saved as unordered already: left where they are
    updates = kept + _wait_for_fallible(
        graph, [op for op in updates if op not in ordered], unordered_fallible, {op.name for op in ordered}
    )
    resources = [t for op in updates for t in op.inputs if outlives_call(t)]
    return resources, {operations[i].name for i in fallible}


def _wait_for_fallible(
    graph: tf.Graph, updates: list[tf.Operation], fallible: list[tf.Operation], ordered: set[str]
) -> list[tf.Operation]:
    """Makes each of ``updates`` that none of ``fallible`` depends on wait for all of them; returns
    the rest, which may run before one of them raises (the runner saves their variables).

    Delaying an update changes no value: what reads its variable after it in program order waits
    for it (TF's automatic control dependencies), and what read before it still runs first. No
    cycle can form: a cycle would need a path from a delayed update to one of ``fallible`` without
    the new edges, and such an update is not delayed (``_ancestors_in_finished_function``). Nothing
    is delayed where an op that may raise would still come after a print that is not delayed: it
    waits for every update before it (``order_after_printed``), a delayed one included. The
    ``ordered`` ops (assertions, and what they read) wait for nothing of the kind.
    """
    if not fallible or not updates or any(op.type in _NOT_DELAYED for op in graph.get_operations()):
        return updates
    ancestors = _ancestors_in_finished_function(graph, fallible)
    if any(op in ancestors for op in graph.get_operations() if prints(op)):
        return updates  # a print that cannot wait (one of them reads it, or runs in it): as eager ran
    delayed = [op for op in updates if op not in ancestors and not op.type.startswith("Horovod")]
    if _printed_after(graph, set(delayed)) - ordered:
        return updates  # an op that may raise after a print that stays, waiting for what was delayed: a cycle
    if delayed:
        with graph.as_default(), tf.control_dependencies(fallible):
            barrier = tf.no_op(name="janus_fallible_done")
        for op in delayed:
            op._add_control_inputs([barrier])
            op._janus_delayed = True
    return [op for op in updates if op not in delayed]  # a collective stays where it is, as before


def _delayed(op: tf.Operation) -> bool:
    """Whether ``op`` waits for every op after the first update that may raise (``_wait_for_fallible``)."""
    return getattr(op, "_janus_delayed", False)


_PRINTED_ORDER = "janus_printed_order"
# TF1 control flow, whose automatic dependencies are not modelled.
_NOT_DELAYED = frozenset({"Merge"})
_INVOCATIONS = frozenset({"JanusInvoke", "JanusInvokeGrad"})


def prints(op: tf.Operation) -> bool:
    """Whether ``op`` is a ``tf.print`` or control flow (or a function call) that may run one."""
    if op.type == "PrintV2":
        return True
    if op.type in _INVOCATIONS:  # a recursive function holds no print (the interpreter refuses one)
        return False
    known = getattr(op, "_janus_prints", None)
    if known is None:
        bodies = called_graphs(op)
        known = bodies is None or any(prints(inner) for body in bodies for inner in body.get_operations())
        op._janus_prints = known
    return known


def order_after_printed(graph: tf.Graph, printed: set[str], ordered: list[tf.Operation] = ()) -> set[str]:
    """Makes each op of ``printed`` (``fallible_after_print``) wait for every state update and print
    before it in the program, except the ``ordered`` ops (assertions, and what they read), which
    every update waits for instead (``order_state_writes``). Such an op's error is not recoverable:
    when it raises, TF state and the printed text are then eager's, with nothing to put back.
    Returns the names of the ops it ordered, and of the assertion-holding loops and branches that
    print which ``_after_earlier_writes`` ordered so."""
    if not printed:
        return set()
    ordered = _with_ancestors(ordered)
    pending: list[tf.Operation] = []
    barrier: tf.Operation | None = None
    done = set()
    for op in graph.get_operations():
        if op.name in printed and op not in ordered:
            barrier = _wait_for(op, pending, barrier, _PRINTED_ORDER)
            pending = []
            done.add(op.name)
        elif op.name in printed and getattr(op, "_janus_after_writes", False):
            done.add(op.name)  # it waits for every update and print before it already (_after_earlier_writes)
        if is_state_write(op):
            pending.append(op)
    return done


def saved_for_rerun(graph: tf.Graph, resources: list[tf.Tensor], recoverable: set[str]) -> list[tf.Tensor]:
    """The ``resources`` (``written_before_last_fallible``) that an op of ``recoverable`` may have
    updated when one of those raises: updated at or before the last of them. An error after a
    print that stays is not re-run (``fallible_after_print``): nothing is put back for it, and a
    row save before a scatter there raised in its place, where eager's scatter applied its rows
    before the bad index."""
    operations = graph.get_operations()
    last = max((i for i, op in enumerate(operations) if op.name in recoverable), default=-1)
    updated = {id(t) for op in operations[: last + 1] if is_state_write(op) for t in op.inputs}
    return [t for t in resources if id(t) in updated]


def order_as(op: tf.Operation, like: tf.Operation) -> None:
    """Makes ``op`` wait for what ``order_after_printed`` made ``like`` wait for (a row save made
    after the ordering, which runs right before its scatter)."""
    op._add_control_inputs([c for c in like.control_inputs if c.name.startswith(_PRINTED_ORDER)])


def _ancestors_in_finished_function(graph: tf.Graph, ops: list[tf.Operation]) -> set[tf.Operation]:
    """``ops`` and every op they may depend on once the function is finished: through data and
    control edges, and through the edges TF adds then (``auto_control_deps``), over-approximated:
    each op that takes a resource (its inputs, and what TF's resolvers add: an ``Identity``'s input,
    an iterator's dataset's resources) waits for every earlier op taking the same one, each stateful
    op without one for every earlier such op, and a variable's read that feeds a ``GatherV2`` for
    the gather's indices (``gathered_reads`` may merge the two)."""
    operations = graph.get_operations()
    previous: dict[object, tf.Operation] = {}  # a chain per resource tensor, and one (None) for the rest
    extra: dict[tf.Operation, list[tf.Operation]] = {}
    for op in operations:
        resources = [t for t in op.inputs if t.dtype == tf.resource]
        resources += [t for t, _ in auto_control_deps._get_resource_inputs(op)]  # noqa: SLF001
        keys = {(t.op.name, t.value_index) for t in resources}
        if _ordered_by_tf(op) and not keys:
            keys = {None}
        extra[op] = [previous[key] for key in keys if key in previous]
        for key in keys:
            previous[key] = op
        if op.type == "GatherV2" and op.inputs[0].op.type == "ReadVariableOp":
            extra.setdefault(op.inputs[0].op, []).extend(t.op for t in op.inputs[1:])
    return _with_ancestors(ops, extra)


# Updates that raise at a bad index after applying the rows before it (TensorFlow's CPU kernels of
# scatters and of sparse optimizer steps): one that is a graph's last op that may raise must be put
# back like the updates before it, or the call re-run eagerly would apply those rows twice.
_PARTIAL_UPDATES = ("ResourceScatter", "ResourceSparseApply")


def fallible_after_print(graph: tf.Graph) -> set[str]:
    """The names of the ops created after the graph's first print (a ``tf.print``, or control flow
    that may run one) that may raise, where that print does not wait for them
    (``_wait_for_fallible`` delays prints none of them depends on), and of control flow that may
    raise after it printed (``_prints_then_may_raise``).

    The print may have run when one of them raises: re-running the call eagerly would print its
    text a second time, so such an error is not recoverable."""
    return _printed_after(graph, {op for op in graph.get_operations() if _delayed(op)})


def _printed_after(graph: tf.Graph, delayed: set[tf.Operation]) -> set[str]:
    """``fallible_after_print`` where the ``delayed`` ops wait for every op that may raise.

    An op that may raise counts where a print created before it does not wait for it: a print
    that waits for a loop holding an assertion (``order_state_writes``) has not run when the loop
    raises, and the call re-runs eagerly."""
    after, printers, waited = set(), [], None
    for op in graph.get_operations():
        if printers and may_raise(op):
            waited = waited or [_with_ancestors([p]) for p in printers]
            if any(op not in ancestors for ancestors in waited):
                after.add(op.name)
        if prints(op) and op not in delayed:
            printers.append(op)
            waited = None
    return after | {op.name for op in graph.get_operations() if _prints_then_may_raise(op)}


def _prints_then_may_raise(op: tf.Operation) -> bool:
    """Whether control flow ``op`` may raise after it printed: a loop whose body prints and may
    raise (a later turn's error comes after an earlier turn's text), or a branch with an op that
    may raise after a print of its own. In a region that prints, every print waits for the ops
    before it that may raise (``order_region``): an error before a print leaves no text."""
    if not is_control_flow(op) or not prints(op):
        return False
    if op.type in ("While", "StatelessWhile"):
        return may_raise(op)
    for body in called_graphs(op) or ():
        printed = False
        for inner in body.get_operations():
            if (printed and may_raise(inner)) or _prints_then_may_raise(inner):
                return True
            printed = printed or prints(inner)
    return False


def order_region(region: tf.Graph, assert_ops: list[tf.Operation]) -> None:
    """Orders a branch's or loop body's ops as eager runs them, where it prints: each update and
    print waits for every op before it that may raise, and each op that may raise for every update
    and print before it. An error after one of its prints is not re-run (``fallible_after_print``),
    so the text and the TF state it leaves must be eager's; the ``assert_ops`` are ordered
    before every update instead (``order_state_writes``)."""
    if not any(prints(op) for op in region.get_operations()):
        return
    order_writes_after_earlier_ops(region)
    order_after_printed(region, {op.name for op in region.get_operations() if may_raise(op)}, assert_ops)


def _with_ancestors(
    ops: list[tf.Operation], extra: dict[tf.Operation, list[tf.Operation]] | None = None
) -> set[tf.Operation]:
    """``ops`` and every op they depend on, through data and control edges (and ``extra``'s)."""
    found: set[tf.Operation] = set()
    pending = list(ops)
    while pending:
        op = pending.pop()
        if op not in found:
            found.add(op)
            pending += [t.op for t in op.inputs] + list(op.control_inputs) + (extra.get(op, []) if extra else [])
    return found
