"""``for x in dataset``: a ``tf.data.Dataset`` iterated inside the graph, as eager iterates it.

Eager's ``for x in ds`` makes a fresh iterator (``iter(ds)``) each time the loop runs and visits
every element in order. The graph does the same with TF's own ops: ``iter(ds)`` in the graph, then
a ``tf.while_loop`` that carries the next element as an optional (``get_next_as_optional``) next
to the body's locals (``control_flow.convert_loop``, with a ``DatasetSource``). So a dataset held
across calls and iterated once per call sees the same epochs as in eager (a ``shuffle`` seeded
by the op reshuffles as eager does: its seed generator belongs to the dataset, not to the graph).

A dataset is never specialised on its contents: an argument, or one read from the heap, is fed
to the graph as its variant tensor, re-read every call and guarded on its element spec and on
its ``DatasetKind``:

* a pipeline that runs Python code (``from_generator``, ``tf.py_function``/``tf.numpy_function``
  in ``map``) is refused: janus cannot see that code, and a call re-run eagerly after a failed
  assumption would run it twice;
* a pipeline whose iteration advances state that outlives the call (``shuffle`` reshuffling each
  epoch, ``Dataset.random``, stateful ops such as random ones in its functions) is iterated only
  where no assumption is checked after the iteration begins (``GenerationContext.began_shared_iteration``):
  a failed one re-runs the call eagerly, whose second ``iter(ds)`` would reshuffle once more.

Iterator ops on the call's own iterator are marked call-local (``ordering.mark_call_local``): the
iterator is new each call, so they are not TF state updates the ordering must protect.
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from typing import TYPE_CHECKING

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from janus.graphgen.fallible import may_raise
from janus.graphgen.ordering import mark_call_local
from janus.graphgen.pynumber import PyNumber

if TYPE_CHECKING:
    from janus.graphgen.context import GenerationContext

# Ops through which a pipeline runs Python code at iteration time.
_PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
# Stateful ops that a pipeline's function may hold without carrying state from one epoch to the next.
_STATELESS_ENOUGH = frozenset({"ReadVariableOp", "VarHandleOp", "VariableShape"})
_ITERATOR_OPS = frozenset({"AnonymousIteratorV3", "MakeIterator", "IteratorGetNextAsOptional"})


@dataclasses.dataclass(frozen=True)
class DatasetKind:
    """What iterating a pipeline does besides producing its elements (None: nothing)."""

    runs_python: str | None = None
    shared_state: str | None = None


def is_dataset(value: object) -> bool:
    return isinstance(value, tf.data.Dataset)


def variant_of(dataset: tf.data.Dataset) -> tf.Tensor:
    """The scalar variant tensor that stands for the dataset (what a graph takes as its input)."""
    return dataset._variant_tensor


def spec_of(dataset: tf.data.Dataset) -> tf.data.DatasetSpec:
    return tf.data.DatasetSpec.from_value(dataset)


def fits(value: object, spec: tf.data.DatasetSpec, kind: DatasetKind) -> bool:
    """The guard of a dataset fed by value: a dataset of ``spec``'s elements, of the same kind."""
    return isinstance(value, tf.data.Dataset) and spec_of(value).is_subtype_of(spec) and kind_of(value) == kind


def common_spec(datasets: list[tf.data.Dataset]) -> tf.data.DatasetSpec:
    """The most specific spec admitting every one of ``datasets`` (the newest one's where they differ in structure)."""
    specs = [spec_of(d) for d in datasets]
    common = specs[-1].most_specific_common_supertype(specs[:-1]) if len(specs) > 1 else None
    return common if common is not None else specs[-1]


_kinds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_function_kinds: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def kind_of(dataset: tf.data.Dataset, roots: dict[int, DatasetKind] | None = None) -> DatasetKind:
    """The kind of a pipeline: walks its datasets and the functions they hold.

    ``roots`` gives the kinds of the graph's input datasets (janus's own ``from_variant``); a
    dataset made while generating is made anew each call, so its own state is the call's.
    """
    if roots is None:
        cached = _kinds.get(dataset)
        if cached is None:
            cached = _kinds[dataset] = _walk(dataset, None)
        return cached
    return _walk(dataset, roots)


def _walk(dataset: tf.data.Dataset, roots: dict[int, DatasetKind] | None) -> DatasetKind:
    runs_python = shared = None
    pending, seen = [dataset], set()
    while pending:
        ds = pending.pop()
        if id(ds) in seen:
            continue
        seen.add(id(ds))
        if roots is not None and id(ds) in roots:
            root = roots[id(ds)]
            runs_python, shared = runs_python or root.runs_python, shared or root.shared_state
            continue
        name = type(ds).__name__
        if name == "_VariantDataset":
            runs_python = runs_python or "a dataset made from a variant tensor, whose pipeline janus cannot see"
        if roots is None:  # a dataset that outlives the call: its state carries over between epochs
            shared = shared or _shared_state(ds)
        for wrapper in ds._functions():
            fn_kind = _function_kind(wrapper)
            runs_python = runs_python or fn_kind.runs_python
            if roots is None:
                shared = shared or fn_kind.shared_state
        pending.extend(ds._inputs())
    return DatasetKind(runs_python, shared)


def _shared_state(ds: tf.data.Dataset) -> str | None:
    name = type(ds).__name__
    if name == "_ShuffleDataset" and getattr(ds, "_reshuffle_each_iteration", True) is not False:
        return "shuffle() reshuffles every epoch (its seed generator outlives the call)"
    if name == "_RandomDataset":
        return "Dataset.random() draws anew every epoch"
    return None


def _function_kind(wrapper: object) -> DatasetKind:
    function = getattr(wrapper, "function", None)
    if getattr(function, "graph", None) is None:
        return DatasetKind("a pipeline function janus cannot inspect")
    try:
        cached = _function_kinds.get(function)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    graph_def = function.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    runs_python = shared = None
    for node in nodes:
        if node.op in _PYTHON_OPS:
            runs_python = f"a pipeline function calls Python ({node.op})"
        elif shared is None and _carries_state(node.op):
            shared = f"a pipeline function holds the stateful op {node.op}"
    kind = DatasetKind(runs_python, shared)
    with contextlib.suppress(TypeError):  # a function that cannot be weakly referenced: not cached
        _function_kinds[function] = kind
    return kind


def _carries_state(op_type: str) -> bool:
    """A stateful op in a pipeline function whose state may carry over from one epoch to the next.
    Datasets a function makes (``flat_map``, ``interleave``) are made anew, unless they draw seeds."""
    if op_type in _STATELESS_ENOUGH:
        return False
    if "Dataset" in op_type and not op_type.startswith(("Shuffle", "Random")):
        return False
    op_def = op_def_registry.get(op_type)
    return op_def is None or op_def.is_stateful


def refusal(kind: DatasetKind) -> str | None:
    """Why a pipeline of this kind is not iterated in a graph, or None."""
    if kind.runs_python:
        return (
            f"iteration over a tf.data.Dataset whose pipeline runs Python code ({kind.runs_python}): "
            "the graph would run it out of janus's sight, and twice where a call is re-run eagerly"
        )
    return None


def from_variant(variant: tf.Tensor, spec: tf.data.DatasetSpec) -> tf.data.Dataset:
    """The graph's dataset for an input variant tensor."""
    return tf.data.experimental.from_variant(variant, spec.element_spec)


def element_refusal(dataset: tf.data.Dataset) -> str | None:
    leaves = tf.nest.flatten(dataset.element_spec)
    odd = [type(s).__name__ for s in leaves if type(s) is not tf.TensorSpec]
    if odd:
        return f"iteration over a tf.data.Dataset whose elements hold {odd[0]} values (only tensors are converted)"
    return None


class DatasetSource:
    """The items of ``for x in dataset`` for ``control_flow.convert_loop``: the loop carries the
    optional next element (a variant scalar); ``start`` makes the call's iterator."""

    def __init__(
        self, ctx: GenerationContext, dataset: tf.data.Dataset, kind: DatasetKind, loc: str, enumerate_from: int | None
    ) -> None:
        self.ctx = ctx
        self.dataset = dataset
        self.kind = kind
        self.loc = loc
        self.enumerate_from = enumerate_from
        self._iterator = None

    def trial_state(self) -> list[tf.Tensor]:
        return [tf.compat.v1.placeholder(tf.variant, [])]

    def start(self, needs_an_item: bool) -> list[tf.Tensor]:
        """Makes the iterator and takes the first element. ``needs_an_item``: the loop must run
        at least once (``total = 0.0; total += t`` carries a tensor); a JanusAssert checks it."""
        ctx, loc = self.ctx, self.loc
        key, what = f"dataset loop runs at least once@{loc}", "the dataset is not empty"
        if needs_an_item and self.kind.shared_state:  # checked before the iteration begins
            ds = self.dataset
            ctx.check(lambda: tf.data.experimental.cardinality(ds) > 0, key, what + " (its cardinality)", loc)
        if self.kind.shared_state:
            ctx.began_shared_iteration(self.kind.shared_state, loc)
        graph = tf.compat.v1.get_default_graph()
        with tf.control_dependencies(self._before_shared_iteration(graph)):
            known = len(graph.get_operations())
            self._iterator = iter(self.dataset)
            first = self._iterator.get_next_as_optional()
        self._mark(graph, known)
        if needs_an_item and not self.kind.shared_state:
            ctx.check(first.has_value, key, what, loc)
        return tf.nest.flatten(first, expand_composites=True)

    def _before_shared_iteration(self, graph: tf.Graph) -> list[tf.Operation]:
        """For a pipeline with shared state: what must pass before its epoch begins (the assertions
        so far, and the ops before it that may raise), so a call that fails has not moved it."""
        if not self.kind.shared_state:
            return []
        earlier = [op for op in graph.get_operations() if may_raise(op)] + list(self.ctx.assert_ops)
        if not earlier:
            return []
        with tf.control_dependencies(earlier):
            return [tf.no_op(name="janus_before_epoch")]

    def has_next(self, state: list[tf.Tensor]) -> tf.Tensor:
        return self._optional(state).has_value()

    def element(self, index: tf.Tensor, state: list[tf.Tensor]) -> object:
        value = self._optional(state).get_value()
        if self.enumerate_from is None:
            return value
        return (PyNumber(tf.cast(index, tf.int64) + self.enumerate_from, int), value)

    def advance(self, state: list[tf.Tensor]) -> list[tf.Tensor]:
        graph = tf.compat.v1.get_default_graph()
        known = len(graph.get_operations())
        following = self._iterator.get_next_as_optional()
        self._mark(graph, known)
        return tf.nest.flatten(following, expand_composites=True)

    def _optional(self, state: list[tf.Tensor]) -> object:
        spec = tf.OptionalSpec(self.dataset.element_spec)
        return tf.nest.pack_sequence_as(spec, state, expand_composites=True)

    @staticmethod
    def _mark(graph: tf.Graph, known: int) -> None:
        for op in graph.get_operations()[known:]:
            if op.type in _ITERATOR_OPS:
                mark_call_local(op)
