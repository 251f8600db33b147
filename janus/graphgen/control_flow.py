"""General (non-speculative) conversion of dynamic control flow: ``tf.cond`` and ``tf.while_loop``.

The interpreter speculates when the profile says a branch always went one way or a loop
always ran the same number of times. Otherwise it comes here:

* ``if`` on a tensor → ``tf.cond``; the variables either branch assigns become outputs.
  A branch that returns takes the rest of the block with it, so ``if t: return a`` works.
* ``while`` on a tensor, and ``for`` over a tensor of unknown length, over ``range`` of a
  tensor, or past ``config.max_unroll`` → ``tf.while_loop``; the variables the body assigns
  are loop-carried, with shape invariants relaxed from a trial trace of the body.
* Python lists appended inside such a loop become ``TensorArray``s (``TensorList``).

Values that are not tensors (Python objects, numbers) must come out of both branches, or
every iteration, unchanged; otherwise the construct is not converted and the function runs
imperatively. A variable defined on only one path is refused the same way: eager would
raise or keep an old value, and the graph must never guess.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import gast
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework.ops import EagerTensor
from tensorflow.python.ops import tensor_array_ops

from janus.graphgen import tensor_arrays
from janus.graphgen.errors import GenerationError, NotConvertible
from janus.graphgen.heap import PyObjectRef
from janus.graphgen.ordering import branch_done, is_state_write
from janus.graphgen.pynumber import PyNumber
from janus.graphgen.values import is_plain, is_symbolic, truth_tensor

if TYPE_CHECKING:
    from janus.graphgen.interpreter import Frame, Interpreter


class _Undefined:
    def __repr__(self) -> str:
        return "<undefined>"


UNDEFINED = _Undefined()


# ------------------------------------------------------------------ syntax helpers
def assigned_names(stmts: list) -> set[str]:
    """Local names a block of statements may bind (nested scopes excluded)."""
    names: set[str] = set()

    def visit(node: gast.AST) -> None:
        if isinstance(node, (gast.FunctionDef, gast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, (gast.Lambda, gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)):
            return
        if isinstance(node, gast.Name) and isinstance(node.ctx, (gast.Store, gast.Del)):
            names.add(node.id)
        for child in gast.iter_child_nodes(node):
            visit(child)

    for stmt in stmts:
        visit(stmt)
    return names


def escapes(stmts: list, *, loop_exits: bool) -> bool:
    """Whether the block can ``return`` (or, with ``loop_exits``, ``break``/``continue`` out of it)."""

    def visit(node: gast.AST, in_loop: bool) -> bool:
        if isinstance(node, (gast.FunctionDef, gast.ClassDef, gast.Lambda)):
            return False
        if isinstance(node, gast.Return):
            return True
        if isinstance(node, (gast.Break, gast.Continue)) and loop_exits and not in_loop:
            return True
        nested = in_loop or isinstance(node, (gast.For, gast.While))
        return any(visit(child, nested) for child in gast.iter_child_nodes(node))

    return any(visit(stmt, False) for stmt in stmts)


def appended_lists(stmts: list) -> set[str]:
    """Names ``x`` with ``x.append(...)`` in the block."""
    found = set()
    for node in gast.walk(gast.Module(body=list(stmts), type_ignores=[])):
        if (
            isinstance(node, gast.Call)
            and isinstance(node.func, gast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, gast.Name)
        ):
            found.add(node.func.value.id)
    return found


# ------------------------------------------------------------------ values crossing a boundary
@dataclasses.dataclass(frozen=True)
class _Leaf:
    kind: str  # "tensor", "number" (PyNumber of .extra type), "list" (TensorList), "static"
    extra: object = None


def flatten(value: object, tensors: list) -> object:
    """A template of ``value`` with its tensors moved into ``tensors``."""
    if isinstance(value, PyNumber):
        tensors.append(value.tensor)
        return _Leaf("number", value.type)
    if isinstance(value, TensorList):
        tensors.extend([value.array.flow, value.size])
        return _Leaf("list", (value.array.dtype, value.element_shape))
    if isinstance(value, PyObjectRef):  # an object known only at run time: its pointer crosses
        tensors.append(value.pointer)
        return _Leaf("pointer", _PointerKind(value.cls, value.optional, value.argument, value.samples))
    if isinstance(value, tf.TensorArray):  # the user's own: `ta = ta.write(i, h)`, as tf.while_loop carries it
        tensor_arrays.check_made_in_graph(value, "")
        tensors.append(value.flow)
        return _Leaf("tensor_array", _ArrayKind(value.dtype, value))
    if is_symbolic(value) or isinstance(value, EagerTensor):
        tensors.append(value)
        return _Leaf("tensor")
    if type(value) in (tuple, list):
        return (type(value), tuple(flatten(v, tensors) for v in value))
    return _Leaf("static", value)


@dataclasses.dataclass(frozen=True)
class _ArrayKind:
    dtype: tf.DType
    array: tf.TensorArray = dataclasses.field(compare=False)  # its settings, for the one a new flow makes


@dataclasses.dataclass(frozen=True)
class _PointerKind:
    cls: type
    optional: bool
    argument: bool
    samples: list = dataclasses.field(compare=False)


def unflatten(template: object, tensors: list) -> object:
    feed = iter(tensors)

    def build(t: object) -> object:
        if isinstance(t, _Leaf):
            if t.kind == "tensor":
                return next(feed)
            if t.kind == "number":
                return PyNumber(next(feed), t.extra)
            if t.kind == "pointer":
                kind = t.extra
                return PyObjectRef(next(feed), kind.cls, kind.samples, kind.optional, kind.argument)
            if t.kind == "tensor_array":
                array = tensor_array_ops.build_ta_with_new_flow(t.extra.array, next(feed))
                tensor_arrays.derived(array, t.extra.array)
                return array
            if t.kind == "list":
                dtype, shape = t.extra
                flow, size = next(feed), next(feed)
                return TensorList(tf.TensorArray(dtype, dynamic_size=True, flow=flow), size, shape)
            return t.extra
        kind, items = t
        return kind(build(i) for i in items)

    return build(template)


def same_template(a: object, b: object) -> bool:
    if isinstance(a, _Leaf) and isinstance(b, _Leaf):
        if a.kind != b.kind:
            return False
        if a.kind != "static":
            return a.extra == b.extra
        return a.extra is b.extra or (is_plain(a.extra) and is_plain(b.extra) and _equal(a.extra, b.extra))
    if isinstance(a, tuple) and isinstance(b, tuple) and not isinstance(a, _Leaf) and not isinstance(b, _Leaf):
        return a[0] is b[0] and len(a[1]) == len(b[1]) and all(same_template(x, y) for x, y in zip(a[1], b[1]))
    return False


def _equal(a: object, b: object) -> bool:
    """The same Python value: ``-0.0`` and ``0.0`` are equal but not the same result, and two
    equal lists, dicts or sets are two objects (``d is d1``, what is added to one, a dict's order)."""
    if a is b:
        return True
    if type(a) in _MUTABLE:
        return False
    try:
        if type(a) is not type(b) or not bool(a == b):
            return False
    except Exception:
        return False
    if isinstance(a, (float, np.floating)):
        return math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, complex):
        return _equal(a.real, b.real) and _equal(a.imag, b.imag)
    if type(a) is tuple:
        return all(_equal(x, y) for x, y in zip(a, b))
    if type(a) is frozenset:
        return all(any(_equal(x, y) for y in b) for x in a)
    return True


_MUTABLE = (list, dict, set, bytearray)


# ------------------------------------------------------------------ TensorArray-backed lists
class TensorList:
    """A Python list appended to inside a converted loop, held as a TensorArray."""

    def __init__(self, array: tf.TensorArray, size: tf.Tensor, element_shape: tf.TensorShape) -> None:
        self.array = array
        self.size = size
        self.element_shape = element_shape

    @classmethod
    def empty(cls, dtype: tf.DType, element_shape: tf.TensorShape) -> TensorList:
        array = tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=element_shape)
        return cls(array, tf.constant(0, tf.int32), element_shape)

    def append(self, value: object) -> None:
        if isinstance(value, PyNumber) or not isinstance(value, tf.Tensor):
            raise NotConvertible("a list appended in a converted loop holds something other than tensors")
        if value.dtype != self.array.dtype:
            raise NotConvertible("a list appended in a converted loop mixes dtypes")
        self.array = self.array.write(self.size, value)
        self.size = self.size + 1

    def stacked(self, check_nonempty: Callable[[tf.Tensor], None]) -> tf.Tensor:
        check_nonempty(self.size)  # eager's tf.stack([]) raises: let the eager re-run raise it
        stacked = self.array.stack()
        stacked.set_shape(tf.TensorShape([None]).concatenate(self.element_shape))
        return stacked

    def last(self) -> tf.Tensor:
        value = self.array.read(self.size - 1)
        value.set_shape(self.element_shape)
        return value


# ------------------------------------------------------------------ conditionals
class _BranchesDiffer(NotConvertible):
    """The second branch traced leaves other Python values or types than the first: raised before
    ``tf.cond`` makes its ``If`` op, which would otherwise stay in the graph and run (its state
    updates included) beside the ``If`` of a second trace. ``retry``: tracing again with every
    number a tensor may make them agree."""

    def __init__(self, retry: bool, reason: str = "produce different types or Python values") -> None:
        super().__init__(reason)
        self.retry = retry


def _same_as_first(templates: list, left: list, existing: set[int], interp: Interpreter, per_name: bool) -> None:
    """Raises ``_BranchesDiffer`` once both branches are traced, if their templates differ or they
    leave two different lists or dicts, one of which existed before (``p = a`` against ``p = [1, 2]``:
    after the ``if``, ``p is a`` and what ``p.append`` changes depend on the branch). ``per_name``:
    what each branch left is the list of the assigned names' values."""
    if len(templates) != 2:
        return
    pairs = zip(left[0], left[1]) if per_name else [(left[0], left[1])]
    if any(_other_containers(first, second, existing, interp) for first, second in pairs):
        raise _BranchesDiffer(retry=False, reason="leave different lists or dicts, one made before the `if`")
    if not same_template(templates[0], templates[1]):
        raise _BranchesDiffer(retry=True)


def _existing_containers(interp: Interpreter, frame: Frame) -> set[int]:
    """The ids of the lists, dicts and sets the code could reach by name before a branch ran."""
    found: set[int] = set()
    pending = list(interp.visible_values(frame))
    budget = 10_000  # items looked at: a local list of a million floats is not walked whole
    while pending and budget > 0:
        value = pending.pop()
        budget -= 1
        if type(value) in _MUTABLE and id(value) not in found:
            found.add(id(value))
            pending.extend(value.values() if type(value) is dict else value)
        elif type(value) is tuple:
            pending.extend(value)
    return found


def _other_containers(first: object, second: object, existing: set[int], interp: Interpreter) -> bool:
    """Whether the branches leave two different mutable containers where one existed before."""
    if first is second:
        return False
    if type(first) in _MUTABLE or type(second) in _MUTABLE:
        return any(
            type(c) in _MUTABLE and (id(c) in existing or interp.ctx.path_of(c) is not None) for c in (first, second)
        )
    if type(first) in (list, tuple) and type(second) is type(first) and len(first) == len(second):
        return any(_other_containers(a, b, existing, interp) for a, b in zip(first, second))
    return False


def convert_cond(
    interp: Interpreter, frame: Frame, node: gast.If, predicate: tf.Tensor, rest: list, tail: bool
) -> bool:
    """Converts ``if predicate: body else: orelse`` to ``tf.cond``.

    When a branch returns, both branches take ``rest`` (the statements after the ``if``)
    with them, the function's result comes out of the cond and ``_Return`` is raised.
    ``tail`` says nothing follows ``rest`` in the function.
    """
    loc = interp.loc(frame, node)
    body, orelse = node.body, node.orelse
    if escapes(body + orelse, loop_exits=True) and not escapes(body + orelse, loop_exits=False):
        raise NotConvertible("`break`/`continue` under a tensor-dependent `if`", loc)
    returns = escapes(body + orelse, loop_exits=False)
    if returns and escapes(rest, loop_exits=True) and not escapes(rest, loop_exits=False):
        raise NotConvertible("`break`/`continue` after a returning tensor-dependent `if`", loc)
    names = sorted(assigned_names(body + orelse))
    if not returns:  # `if ok: grads = tape.gradient(...)`: a name new in one branch is not defined after the `if`
        one_sided = (assigned_names(body) ^ assigned_names(orelse)) - set(frame.locals)
        names = [n for n in names if n not in one_sided]
    truth = truth_tensor(predicate)
    templates: list[object] = []
    had_assertions: list[bool] = []
    saved = _snapshot_containers(interp, frame)
    left: list[object] = []  # what each branch leaves, before its Python numbers become tensors
    before = [UNDEFINED if returns else frame.locals.get(n, UNDEFINED) for n in names]
    existing = _existing_containers(interp, frame)
    every = False  # set for a second trace: every number becomes a tensor, in lists the branches keep too

    def branch(block: list) -> Callable[[], list]:
        def run() -> list:
            scope = interp.scope(frame)
            tensors: list = []
            with interp.live(scope), interp.ctx.nested_graph() as asserts:
                if returns:
                    result = interp.run_block_for_return(scope, block + rest, tail, loc)
                    promoted = _promoted(result, None, every, existing)
                else:
                    interp.exec_block(scope, block)
                    result = [scope.locals.get(n, UNDEFINED) for n in names]
                    promoted = [_promoted(v, b, every, existing) for v, b in zip(result, before)]
                left.append(result)
                templates.append(flatten(promoted, tensors))
                _restore_containers(saved, loc)
                had_assertions.append(bool(asserts))
            _same_as_first(templates, left, existing, interp, not returns)
            tensors.append(branch_done(tf.compat.v1.get_default_graph()))  # every cond has an output: a handle
            return tensors

        return run

    for every in (False, True):
        templates.clear()
        left.clear()
        try:
            with interp.ctx.attempt():
                outputs = tf.cond(truth, branch(body), branch(orelse))
            break
        except _BranchesDiffer as err:
            if not every and err.retry:
                continue
            raise NotConvertible(f"the branches of a tensor-dependent `if` {err.reason}", loc) from None
        except (NotConvertible, GenerationError):
            raise
        except (ValueError, TypeError, AssertionError) as err:  # cond_v2 asserts on output count mismatches
            raise NotConvertible(
                f"the branches of a tensor-dependent `if` produce different types: {err}", loc
            ) from None
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if any(had_assertions):
        interp.ctx.assert_ops.append(outputs[-1].op)
    value = _kept_static(unflatten(templates[0], outputs[:-1]), *left)
    if returns:
        interp.raise_return(value)
    for name, item in zip(names, value):
        if item is UNDEFINED:
            frame.locals.pop(name, None)
        else:
            frame.locals[name] = item
    return False


def convert_select(
    interp: Interpreter,
    frame: Frame,
    node: gast.AST,
    predicate: tf.Tensor,
    then: Callable[[Frame], object],
    otherwise: Callable[[Frame], object],
) -> object:
    """An expression-level conditional (``a if t else b``, ``t and u``) as ``tf.cond``."""
    loc = interp.loc(frame, node)
    templates: list[object] = []
    had_assertions: list[bool] = []
    left: list[object] = []  # `1.0 if t else 0.0`: a Python number known only at run time
    existing = _existing_containers(interp, frame)
    every = False

    def branch(make: Callable[[Frame], object]) -> Callable[[], list]:
        def run() -> list:
            tensors: list = []
            with interp.live(interp.scope(frame)) as scope, interp.ctx.nested_graph() as asserts:
                value = make(scope)
                left.append(value)
                templates.append(flatten(_promoted(value, None, every, existing), tensors))
                had_assertions.append(bool(asserts))
            _same_as_first(templates, left, existing, interp, False)
            tensors.append(branch_done(tf.compat.v1.get_default_graph()))
            return tensors

        return run

    for every in (False, True):
        templates.clear()
        left.clear()
        try:
            with interp.ctx.attempt():
                outputs = tf.cond(truth_tensor(predicate), branch(then), branch(otherwise))
            break
        except _BranchesDiffer as err:
            if not every and err.retry:
                continue
            raise NotConvertible(f"the two sides of a tensor-dependent expression {err.reason}", loc) from None
        except (NotConvertible, GenerationError):
            raise
        except (ValueError, TypeError, AssertionError) as err:
            raise NotConvertible(f"the two sides of a tensor-dependent expression differ in type: {err}", loc) from None
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if any(had_assertions):
        interp.ctx.assert_ops.append(outputs[-1].op)
    return _kept_static(unflatten(templates[0], outputs[:-1]), *left)


_NUMBER_DTYPES = {bool: tf.bool, int: tf.int64, float: tf.float64}


def _promoted(value: object, before: object, every: bool, existing: set[int]) -> object:
    """Plain Python numbers in ``value`` as PyNumbers (``2 ** 62`` and beyond stay Python ints).
    A list made before the ``if`` (in ``existing``) keeps them: the other branch leaves it too, or
    the ``if`` is refused (``_other_containers``). Unless ``every``, so does a tuple that is
    ``before`` (the name's value before the ``if``) and a long list or tuple: a cond output each
    would cost more to build than the rare second trace where the other branch changed it."""
    if type(value) in _NUMBER_DTYPES and not (type(value) is int and abs(value) >= 2**62):
        return PyNumber(tf.constant(value, _NUMBER_DTYPES[type(value)]), type(value))
    if type(value) in (list, tuple):
        if id(value) in existing or not every and (value is before or len(value) > _MAX_PROMOTED_ITEMS):
            return value
        return type(value)(_promoted(v, None, every, existing) for v in value)
    return value


_MAX_PROMOTED_ITEMS = 16  # a longer list or tuple keeps its numbers on the first trace


def _kept_static(value: object, first: object, second: object) -> object:
    """A cond's result (``value``), where both branches left the same list or dict, or the same
    plain Python value (``first``, ``second``): that object, as eager would have it, not a copy or
    the tensor its numbers became."""
    if first is second and type(first) in _MUTABLE:
        return first
    if is_plain(first) and is_plain(second) and _equal(first, second):
        return first
    kind = type(first)
    if kind in (list, tuple) and type(second) is kind and type(value) is kind and len(first) == len(second):
        return kind(_kept_static(v, a, b) for v, a, b in zip(value, first, second))
    return value


def _snapshot_containers(interp: Interpreter, frame: Frame) -> list[tuple[object, object]]:
    saved = []
    for value in interp.visible_values(frame):  # a local function's free variables too
        if type(value) is list:
            saved.append((value, list(value)))
        elif type(value) is dict:
            saved.append((value, dict(value)))
    return saved


def _restore_containers(saved: list, loc: str) -> None:
    changed = False
    for container, contents in saved:
        if type(container) is list:
            changed |= len(container) != len(contents) or any(a is not b for a, b in zip(container, contents))
            container[:] = contents
        else:
            changed |= container.keys() != contents.keys() or any(container[k] is not contents[k] for k in contents)
            container.clear()
            container.update(contents)
    if changed:
        raise NotConvertible("a list or dict is mutated inside tensor-dependent control flow", loc)


# ------------------------------------------------------------------ loops
class SymbolicRange:
    """``range(...)`` whose bounds are tensors or Python ints unknown while generating."""

    def __init__(self, start: object, stop: object, step: object, loc: str) -> None:
        if type(step) is not int or step == 0:
            raise NotConvertible("range() with a step that is not a nonzero constant", loc)
        self.start, self.stop, self.step = (_as_int(v, loc) for v in (start, stop, step))
        self._static_start = start if type(start) is int else None
        self.step_value = step

    def length(self) -> tf.Tensor:
        step = self.step_value
        span = self.stop - self.start if step > 0 else self.start - self.stop
        return tf.maximum(tf.constant(0, tf.int64), (span + abs(step) - 1) // abs(step))

    def item(self, index: object) -> object:
        if type(index) is int and self._static_start is not None:
            return self._static_start + index * self.step_value  # unrolled: plain Python ints, as eager
        return PyNumber(self.start + tf.cast(index, tf.int64) * self.step_value, int)


def _as_int(value: object, loc: str) -> tf.Tensor:
    if isinstance(value, PyNumber):
        if value.type is not int:
            raise NotConvertible("range() of a Python float", loc)
        return value.tensor
    if isinstance(value, tf.Tensor):
        if not value.dtype.is_integer or value.shape.rank != 0:
            raise NotConvertible("range() of a tensor that is not an integer scalar", loc)
        return tf.cast(value, tf.int64)
    if type(value) is not int:
        raise NotConvertible(f"range() of {type(value).__name__}", loc)
    return tf.constant(value, tf.int64)


class LoopSource(Protocol):
    """Items that come from run-time state rather than an index (a dataset's iterator): the loop
    carries ``state`` (scalar tensors) next to its variables."""

    def trial_state(self) -> list[tf.Tensor]:
        """Placeholders standing for the state in the trial trace."""

    def start(self, needs_an_item: bool) -> list[tf.Tensor]:
        """The state before the first iteration; ``needs_an_item``: assert there is one."""

    def has_next(self, state: list[tf.Tensor]) -> tf.Tensor: ...

    def element(self, index: tf.Tensor, state: list[tf.Tensor]) -> object: ...

    def advance(self, state: list[tf.Tensor]) -> list[tf.Tensor]: ...


@dataclasses.dataclass
class LoopPlan:
    """How a converted loop gets its next element: ``count`` iterations of ``element(i)``, or
    the items of ``source`` while it has one."""

    count: tf.Tensor | None  # None for `while` (the test decides) and for a source
    element: Callable[[tf.Tensor], object] | None
    target: gast.AST | None
    static_count: int | None = None  # the count when known while generating
    source: LoopSource | None = None


def convert_loop(interp: Interpreter, frame: Frame, node: gast.For | gast.While, plan: LoopPlan) -> None:
    """Converts a loop to ``tf.while_loop`` with the body's assigned locals as loop variables.

    A Python number the body changes (``n += 1``) is carried as a number known only at run
    time (``PyNumber``), so after the loop it is still a Python number, as in eager.
    """
    loc = interp.loc(frame, node)
    if escapes(node.body, loop_exits=True):
        raise NotConvertible("`break`/`continue`/`return` inside a loop converted to tf.while_loop", loc)
    source = plan.source
    assigned = assigned_names(node.body) | (assigned_names([node.target]) if plan.target is not None else set())
    carried = sorted(n for n in assigned if n in frame.locals)
    lists = sorted(
        n for n in appended_lists(node.body) if n not in assigned and type(frame.locals.get(n)) is list
    )  # fmt: skip
    for name in lists:
        if frame.locals[name] or interp.ctx.is_heap_container(frame.locals[name]):
            raise NotConvertible(f"list {name!r} appended in a converted loop is not a new empty local list", loc)

    def make_scope(index: tf.Tensor, state: list, carried_values: list, list_values: list) -> Frame:
        scope = interp.scope(frame)
        scope.locals.update(zip(carried, carried_values))
        scope.locals.update(zip(lists, list_values))
        if plan.target is not None:
            item = source.element(index, state) if source is not None else plan.element(index)
            interp.assign(scope, plan.target, item)
        return scope

    def body_results(scope: Frame) -> tuple[list, list]:
        return [scope.locals.get(n, UNDEFINED) for n in carried], [scope.locals[n] for n in lists]

    initial = [frame.locals[n] for n in carried]
    entry_tensors: list = []
    entry_template = flatten(initial, entry_tensors)

    # A trial trace of one iteration: element types of appended lists and shapes that change.
    with interp.ctx.trial(), func_graph_module.FuncGraph("janus_trial").as_default():
        trial_index = tf.compat.v1.placeholder(tf.int32, [])
        trial_state = source.trial_state() if source is not None else []
        trial_vars = [tf.compat.v1.placeholder(t.dtype, t.shape) for t in entry_tensors]
        recorders = [_ListRecorder() for _ in lists]
        scope = make_scope(trial_index, trial_state, unflatten(entry_template, trial_vars), recorders)
        with interp.live(scope):
            interp.exec_block(scope, node.body)
        trial_after, trial_lists = body_results(scope)
        # With at least one iteration, `total = 0.0; total += t` carries a tensor of t's dtype (where
        # the count is known only at run time, a JanusAssert checks that there is one).
        counted = plan.count is not None or source is not None
        promotions = [_promotion(v, a) if counted else None for v, a in zip(initial, trial_after)]
        numbers = [_number_promotion(v, a) for v, a in zip(initial, trial_after)]
        after_tensors: list = []
        after_template = flatten(_promoted_numbers(trial_after, numbers), after_tensors)
        after_shapes = [t.shape for t in after_tensors]
        element_specs = [r.spec(loc) for r in trial_lists]

    if any(promotions) and source is None and not plan.static_count:
        count = plan.count
        interp.ctx.check(lambda: count > 0, f"loop runs at least once@{loc}", "loop runs at least once", loc)
    if any(promotions) or any(numbers):
        initial = [_promote_entry(v, p, k) for v, p, k in zip(initial, promotions, numbers)]
        entry_tensors = []
        entry_template = flatten(initial, entry_tensors)
    if not same_template(entry_template, after_template):
        raise NotConvertible("a loop variable changes its Python value or type across iterations", loc)
    invariants = [_relaxed(a.shape, b) for a, b in zip(entry_tensors, after_shapes)]
    state = _after_writes(lambda: source.start(any(promotions))) if source is not None else []

    initial_lists = [TensorList.empty(dtype, shape) for dtype, shape in element_specs]
    list_template = flatten(initial_lists, [])
    index0 = tf.constant(0, tf.int32)
    flat_lists: list = []
    flatten(initial_lists, flat_lists)
    holds_assertions: list[bool] = []
    n_state, n_vars = len(state), len(entry_tensors)

    def split(flat: tuple) -> tuple[list, list, list]:
        return list(flat[:n_state]), list(flat[n_state : n_state + n_vars]), list(flat[n_state + n_vars :])

    def cond(index: tf.Tensor, *flat: tf.Tensor) -> tf.Tensor:
        if plan.count is not None:
            return index < plan.count
        state_flat, vars_flat, lists_flat = split(flat)
        if source is not None:
            return source.has_next(state_flat)
        scope = make_scope(index, [], unflatten(entry_template, vars_flat), unflatten(list_template, lists_flat))
        with interp.live(scope), interp.ctx.nested_graph() as asserts:
            test = interp.eval(scope, node.test)
            if isinstance(test, PyNumber):
                test = test.tensor
            if not is_symbolic(test) and not isinstance(test, EagerTensor):
                raise NotConvertible("a `while` test that stops being a tensor", loc)
            holds_assertions.append(bool(asserts))
            return truth_tensor(test)

    def body(index: tf.Tensor, *flat: tf.Tensor) -> list:
        state_flat, vars_flat, lists_flat = split(flat)
        scope = make_scope(
            index, state_flat, unflatten(entry_template, vars_flat), unflatten(list_template, lists_flat)
        )  # fmt: skip
        with interp.live(scope), interp.ctx.nested_graph() as asserts:
            interp.exec_block(scope, node.body)
            values, list_values = body_results(scope)
            out: list = []
            if not same_template(entry_template, flatten(values, out)):
                raise NotConvertible("a loop variable changes its Python value or type across iterations", loc)
            flatten(list_values, out)
            holds_assertions.append(bool(asserts))
        following = _after_writes(lambda: source.advance(state_flat)) if source is not None else []
        return [index + 1, *following, *out]

    shape_invariants = [
        tf.TensorShape([]), *[tf.TensorShape([]) for _ in state], *invariants, *[_list_invariant(t) for t in flat_lists]
    ]  # fmt: skip
    try:
        results = tf.while_loop(
            cond,
            body,
            [index0, *state, *entry_tensors, *flat_lists],
            shape_invariants=shape_invariants,
            parallel_iterations=1,
        )
    except (NotConvertible, GenerationError):
        raise
    except (ValueError, TypeError) as err:
        raise NotConvertible(f"loop variables cannot be carried through tf.while_loop: {err}", loc) from None
    results = list(results)
    if any(holds_assertions):
        interp.ctx.assert_ops.append(results[0].op)
        results[0].op._janus_loc = loc  # where a refusal of the loop points (ordering)
    _, final_vars, final_lists = split(results[1:])
    values = unflatten(entry_template, final_vars)
    final_lists = unflatten(list_template, final_lists)
    frame.locals.update(zip(carried, values))
    frame.locals.update(zip(lists, final_lists))
    for name in assigned - set(carried):
        frame.locals.pop(name, None)  # loop-local temporaries: reading them later is refused
    interp.exec_block(frame, node.orelse)


def _after_writes(make: Callable[[], list]) -> list:
    """``make()`` (the next item of a source) after the state updates made so far in this graph,
    as eager reads it after them: a pipeline may read a variable the loop body updates."""
    graph = tf.compat.v1.get_default_graph()
    with tf.control_dependencies([op for op in graph.get_operations() if is_state_write(op)]):
        return make()


def _number_promotion(entry: object, after: object) -> type | None:
    """The Python type of a number the body changes (``n += 1``): carried as a run-time number."""
    kind = type(entry)
    if kind not in (int, float) or (kind is int and abs(entry) >= 2**31):
        return None
    if isinstance(after, PyNumber):
        return kind if after.type is kind else None
    return kind if type(after) is kind and not (after == entry or after != after and entry != entry) else None


def _promote_entry(value: object, dtype: tf.DType | None, number: type | None) -> object:
    if dtype is not None:
        return tf.constant(value, dtype)
    if number is not None:
        return PyNumber(tf.constant(value, _NUMBER_DTYPES[number]), number)
    return value


def _promoted_numbers(values: list, numbers: list) -> list:
    """The trial's values with the promoted numbers as run-time numbers."""
    return [
        PyNumber(tf.constant(v, _NUMBER_DTYPES[k]), k) if k is not None and not isinstance(v, PyNumber) else v
        for v, k in zip(values, numbers)
    ]


def _promotion(entry: object, after: object) -> tf.DType | None:
    """The dtype a Python number enters the loop as, when the first iteration makes it a scalar tensor."""
    scalar = type(entry) in (int, float) and isinstance(after, tf.Tensor) and after.shape.rank == 0
    if scalar and (after.dtype.is_floating or (after.dtype.is_integer and type(entry) is int)):
        return after.dtype
    return None


def _relaxed(before: tf.TensorShape, after: tf.TensorShape) -> tf.TensorShape:
    if before.rank is None or after.rank is None or before.rank != after.rank:
        return tf.TensorShape(None)
    return tf.TensorShape([a if a == b else None for a, b in zip(before.as_list(), after.as_list())])


def _list_invariant(tensor: tf.Tensor) -> tf.TensorShape:
    return tensor.shape if tensor.dtype != tf.variant else tf.TensorShape([])


class _ListRecorder:
    """Stands in for a converted list during the trial trace, to learn its element type."""

    def __init__(self) -> None:
        self.values: list = []

    def append(self, value: object) -> None:
        self.values.append(value)

    def spec(self, loc: str) -> tuple[tf.DType, tf.TensorShape]:
        tensors = [v for v in self.values if isinstance(v, tf.Tensor)]
        if not tensors or len(tensors) != len(self.values):
            raise NotConvertible("a list appended in a converted loop holds something other than tensors", loc)
        shape = tensors[0].shape
        for t in tensors[1:]:
            shape = _relaxed(shape, t.shape)
        return tensors[0].dtype, shape
