"""State of one graph generation: guards, in-graph assumptions, heap reads and the code dump.

The interpreter asks this object every time it specialises on something: reading
the heap (globals, closures, attributes) adds a guard; a speculated tensor decision
adds a ``JanusAssert``. The executor later counts failures per assumption *key*
(stable across regenerations) to decide what to stop speculating on.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import itertools
import types
from collections.abc import Callable, Iterator

import gast
import numpy as np
import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

from janus.assumptions import keras_state
from janus.assumptions.checks import Assumption
from janus.assumptions.guards import GuardBuilder, GuardKind, describe_object
from janus.assumptions.sources import CallSource, Source
from janus.assumptions.specs import merge_shapes
from janus.config import config
from janus.graphgen import datasets, keras_layers, numpy_values, sandbox, touches
from janus.graphgen.codedump import CodeRecorder
from janus.graphgen.errors import GenerationError, NeedsStaticShape, NotConvertible
from janus.graphgen.formatted import Formatted
from janus.graphgen.heap import MISSING, HeapList, HeapLog, PyObjectRef, Write
from janus.graphgen.numpy_values import NumpyArray
from janus.graphgen.ordering import changes_state, order_prints, order_region, order_state_writes
from janus.graphgen.pynumber import OptionalNumber, PyNumber
from janus.graphgen.source import location
from janus.graphgen.static_values import static_value
from janus.graphgen.touches import TouchCounters
from janus.graphgen.values import is_plain, is_symbolic, is_user_object, truth_tensor
from janus.ops import heap_ops, janus_assert, pyheap
from janus.ops.assert_op import janus_narrow_int32, janus_unwrap
from janus.profiler.profile import Profile
from janus.source import purity
from janus.source.library import is_library_class, is_library_code, is_library_object

_assumption_ids = itertools.count(1)


# Ops that run a graph of their own (a region): ``If`` and ``While`` of converted control flow.
_REGION_OPS = frozenset(
    {"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase", "PartitionedCall",
     "StatefulPartitionedCall"}
)  # fmt: skip


class GenerationContext:
    def __init__(
        self, profile: Profile, code_name: str, params: list[str], failures: Callable[[str], int] = lambda key: 0
    ) -> None:
        self.profile = profile
        self.failures = failures
        self.guards = GuardBuilder()
        self.assumptions: dict[int, Assumption] = {}
        self.assert_ops: list[tf.Operation] = []
        self.runtime_flags: list[str] = []  # keys of bools fed at run time (their ifs become tf.cond)
        self.heap_tensors: dict[int, Source | str] = {}  # id(eager tensor) -> its source, or its feed in prepare()
        self._heap_containers: set[int] = set()
        self._paths: dict[int, Source] = {}  # id(guarded object) -> a source that re-reads it
        self.heap = HeapLog()
        self.top_code: types.CodeType | None = None  # the function being built (not those it inlines)
        self.later_lines: dict[int, str] = {}  # its statements the driver asks to run later: why
        self.later_count = 0  # statements logged to run after the graph (janus.graphgen.later)
        self.later_bound: set[str] = set()  # the locals they bind
        self.stop_line: int | None = None  # a prefix graph ends at this statement (janus.partial.recompute)
        self.initial_args: dict[str, object] = {}  # the function's arguments as the graph received them
        self.later_marks: list[int] = []  # the graph's op count at each of them
        self.later_mutables: set[int] = set()  # ids of the containers they can reach
        self.read_ids: set[int] = set()  # ids of the heap objects and argument containers the graph read
        self.later_arrays: set[int] = set()  # ids of the argument/attribute arrays statements run later read
        self.arrays_read_later: set[int] = set()  # ids of the arrays whose contents the graph reads after one
        self._origins: dict[int, Source] = {}  # id(heap snapshot or argument container) -> its source
        self._origin_types: dict[int, type] = {}  # id(heap snapshot) -> the type of what it copies
        self._reading: set[int] = set()  # the heap lists and dicts read_heap is copying now
        self._views: dict[int, object] = {}  # id(heap list/dict) -> its local view in this generation
        self.store_factory: pyheap.StoreFactory | None = None  # set when the graph uses the heap ops
        self._store_inputs: dict[object, tf.Tensor] = {}
        self._tokens: dict[tf.Graph, tf.Tensor] = {}
        # Heap writes and recursive invocations in program order (per graph): an invocation reads the
        # heap from its own graph function, off the token chain. A write waits for the invocations
        # before it (their reads see the heap before it, as eager's do) and an invocation after a
        # write waits for the heap ops before it (its reads see the write).
        self._invokes_unordered: dict[tf.Graph, list[tf.Operation]] = {}
        self._written: set[tf.Graph] = set()
        # Across regions (a cond branch, a loop body: graphs of their own), the chain goes on: a
        # region's heap ops wait for the heap ops before it, and those after it for the region op.
        self._region_outer: dict[tf.Graph, tuple[tf.Graph, int, tf.Tensor | None]] = {}
        self._regions_pending: dict[tf.Graph, int] = {}  # graph -> its op count when such a region began
        # what the graph sets on run-time objects (an attribute, an item) and where: made after it succeeds
        self.store_writes: list[tuple[str, str]] = []
        self.notes: list[str] = []  # decisions worth showing in explain()
        self.caught_tries: list[str] = []  # locations of `try`s with handlers, speculated not to raise
        self.region_depth = 0  # > 0 while tracing a cond branch or loop body
        self._site_positions: dict[tuple, int] = {}
        self._invalid_sites: set[tuple] = set()
        self._keep: list[object] = []
        self.code = CodeRecorder(code_name, params)
        # recursion (janus.graphgen.recursion): functions built for this graph, the ones being traced
        self.recursive_functions: dict[tuple, object] = {}
        self.building: list = []
        self.last_invoke: dict[tf.Graph, tf.Operation] = {}
        self.recursion_depth: tuple | None = None  # (the budget fed per call, its assumption)
        self.recursion_budgets: list[tf.Tensor] = []  # the budget parameter of each body being traced
        self.batching_loops: list = []  # loops whose trees' calls may run level by level (tree_batching)
        self._cycle_codes: set | None = None
        self._keras_guarded: set[int] = set()
        self._keras_config_guarded = False
        self._tensor_paths: dict[int, Source] = {}  # id(argument placeholder) -> the argument's source
        self._argument_containers: list[tuple[Source, object]] = []  # (source, local view) of list/dict arguments
        self.foreign: set[int] = set()  # ids of library-owned containers: never mutated while generating
        self.touches = TouchCounters()  # variables read only inside regions (janus.graphgen.touches)
        self._dataset_kinds: dict[int, datasets.DatasetKind] = {}  # id(graph dataset of an input) -> its kind
        self._shared_iteration: tuple[int, str, str] | None = None  # (assumption watermark, what, where)

    def is_recursive(self, code: types.CodeType) -> bool:
        """Whether the profile saw ``code`` in a call cycle (it becomes a recursive graph function)."""
        if self._cycle_codes is None:
            from janus.graphgen import recursion

            self._cycle_codes = recursion.cycle_codes(self.profile)
        return code in self._cycle_codes

    def path_of(self, value: object) -> Source | None:
        """A source that re-reads ``value`` before each call, if it was read from one."""
        return self._paths.get(id(value))

    def pointer_of(self, value: object) -> tf.Tensor:
        """``value`` (read from a path) as an int64 pointer its call's store resolves."""
        return self._pointer_input(self._paths[id(value)])

    def pointer_input(self, source: Source) -> tf.Tensor:
        """The object at ``source`` as an int64 pointer its call's store resolves."""
        return self._pointer_input(source)

    # ------------------------------------------------------------- guards and constants
    def const(self, obj: object) -> str:
        return self.guards.const(obj)

    def guard(
        self, kind: GuardKind, source: Source, expected: object, key: str, loc: str, description: str | None = None
    ) -> None:
        """Re-checks ``source`` before each call (``janus.assumptions.guards``)."""
        self.guards.add(kind, source, expected, key, loc, description)

    def guard_keras_state(self, obj: object, loc: str) -> None:
        """A Keras object (or v1 optimizer) read from a path: the layers within it and their settings
        are re-checked."""
        if not (keras_layers.is_keras_object(obj) or purity.is_v1_optimizer(obj)) or id(obj) in self._keras_guarded:
            return
        source = self._paths.get(id(obj))
        if source is None:
            return
        self._keras_guarded.update(id(sub) for sub in keras_layers.objects_within(obj))
        self.guard_keras_config(loc)  # what its ops depend on besides its own settings
        described = f"the settings of {describe_object(obj)} and of the layers within it"
        unchanged = CallSource(self.const(keras_state.StateCheck(obj)), (source,), described)
        self.guard(GuardKind.PREDICATE, unchanged, True, f"keras state of {source}@{loc}", loc, described)

    def guard_keras_config(self, loc: str) -> None:
        """Keras code ran while generating: it may have read ``epsilon()``, ``floatx()`` and friends."""
        if self._keras_config_guarded:
            return
        self._keras_config_guarded = True
        described = "Keras's global settings (epsilon, floatx, data format)"
        settings = CallSource(self.const(keras_state.config), (), described)
        self.guard(GuardKind.EQUALS_MATCH, settings, keras_state.config(), f"keras config@{loc}", loc, described)

    def guard_class_attribute(self, cls: type, name: str, value: object, loc: str) -> None:
        """Code converted from ``cls.name`` stays right only while the class still has that function."""
        source = self.guards.source_of(cls, cls.__qualname__).attr(name)
        described = f"{cls.__qualname__}.{name} is unchanged"
        self.guard(GuardKind.ID_MATCH, source, value, f"{cls.__qualname__}.{name}@{loc}", loc, described)

    def read_heap(
        self, value: object, source: Source, loc: str, profiled: tuple | None = None, materialize: bool = False
    ) -> object:
        """Specialises on a value read from ``source`` (re-read and checked before every call).

        ``profiled`` is the profile's key for this read (code, line, chain): a Python
        scalar that kept changing while profiled is not specialised on.
        """
        self.read_ids.add(id(value))
        what = source.describe()
        key = f"{what}@{loc}"
        keeps_changing = profiled is not None and self._varied(profiled) or self.failures(key) >= config.max_failures
        if type(value) is bool and self._flipped(profiled, key) and not self.failures(f"{key}:constant"):
            return self.runtime_flag(source, key, loc)
        if is_plain(value) and keeps_changing and type(value) is not bool:  # a flag, as a constant: a graph per value
            if type(value) in (float, int):
                self.guard(GuardKind.NUMBER_TYPE, source, type(value), key, loc)
                return self.number_input(source, type(value))
            raise NotConvertible(f"{what} keeps changing value between calls", loc)
        if type(value) is np.ndarray and value.dtype != object:
            return self.read_array(value, source, loc)
        if datasets.is_dataset(value):
            return self.read_dataset(value, source, loc)
        if isinstance(value, EagerTensor):
            other = self.heap_tensors.get(id(value))
            if other is not None and str(other) != str(source):
                self.guard(GuardKind.SAME_OBJECT, source, other, key, loc)
                return value
            self.heap_tensors[id(value)] = source
            self._keep.append(value)
            self.guard(GuardKind.TENSOR_MATCH, source, (value.dtype, tuple(value.shape)), key, loc)
            return value
        if is_plain(value) and type(value) not in (list, dict, set):
            self.guard(GuardKind.EQUALS_MATCH, source, value, key, loc)
            return value
        if type(value) is tuple:  # immutable: read item by item (a fresh tuple of tensors each call is fine)
            self.guard(GuardKind.SEQUENCE_MATCH, source, (tuple, len(value), None), key, loc)
            return tuple(self.read_heap(v, source.item(i), loc) for i, v in enumerate(value))
        if not materialize:
            self.guard(GuardKind.ID_MATCH, source, value, key, loc)
            self._paths.setdefault(id(value), source)
            if id(value) in self._views:  # one local view per heap container: reads see this call's writes
                return self._views[id(value)]
            aliased = self._argument_alias(value, source, loc)
            if aliased is not None:
                self._views[id(value)] = aliased
                return aliased
        if (_is_list(value) or _is_dict(value)) and id(value) in self._reading:
            raise NotConvertible(f"{what} holds itself", loc)
        if _is_list(value) or _is_dict(value):
            self._reading.add(id(value))
            try:
                return self._read_container(value, source, loc, key, what, materialize)
            finally:
                self._reading.discard(id(value))
        if type(value) is set:
            raise NotConvertible(f"{what} is a set read from the heap", loc)
        return value

    def _read_container(
        self, value: object, source: Source, loc: str, key: str, what: str, materialize: bool
    ) -> object:
        """``read_heap`` of a list or dict: a lazy view, or a guarded copy read item by item."""
        if _is_list(value):
            if not materialize:
                self._views[id(value)] = HeapList(
                    value, source, loc, self.heap, self.read_heap, self._check_straight_line
                )
                return self._views[id(value)]
            self.guard(GuardKind.LENGTH_MATCH, source, len(value), key, loc)
            snapshot = [self.read_heap(v, source.item(i), loc) for i, v in enumerate(value)]
            self._origin_types[id(snapshot)] = type(value)
            return self.mark_heap_container(snapshot, source)
        if _is_dict(value):
            keys = tuple(value)
            if not all(is_plain(k) for k in keys):
                raise NotConvertible(f"{what} is a dict with non-constant keys", loc)
            self.guard(GuardKind.KEYS_MATCH, source, keys, key, loc)
            snapshot = {k: self.read_heap(value[k], source.item(k, self.const), loc) for k in keys}
            self._origin_types[id(snapshot)] = type(value)
            self._views[id(value)] = self.mark_heap_container(snapshot, source)
            return snapshot
        return value

    def array_input(self, source: Source, sample: np.ndarray) -> tf.Tensor:
        """An eager placeholder, captured into the graph, that prepare() fills with the array at ``source``."""
        with tf.init_scope():
            placeholder_value = tf.zeros(sample.shape, tf.as_dtype(sample.dtype))
        self.heap_tensors[id(placeholder_value)] = f"{self.const(numpy_values.array_to_tensor)}({source})"
        self._keep.append(placeholder_value)
        return placeholder_value

    def read_array(self, value: np.ndarray, source: Source, loc: str) -> NumpyArray:
        """An ndarray read from ``source``: guarded by type, dtype and shape, fed by value."""
        self.guard(GuardKind.NDARRAY_MATCH, source, (value.dtype, value.shape), f"{source.describe()}@{loc}", loc)
        return NumpyArray(source, value, self.array_input, self._array_read)

    def library_tensor(self, value: EagerTensor) -> tf.Tensor:
        """A tensor read from the heap, as a library call gets it: the placeholder janus feeds it by,
        never its value now (``tf.zeros([t])`` reads a list's eager tensors in Python). An integer
        one may be a shape: behind an ``Identity``, since TF's shape helpers (``tf.reshape``,
        ``tf.fill``, ``tf.random``) look through a captured placeholder to its trace-time value."""
        captured = tf.compat.v1.get_default_graph().capture(value)
        return tf.identity(captured) if value.dtype.is_integer else captured

    def _array_read(self, sample: np.ndarray) -> None:
        """The graph reads an array's contents: after a statement run later (``janus.graphgen.later``),
        which may have written into it in eager, that read is noted (the build then refuses)."""
        if self.later_count:
            self.arrays_read_later.add(id(sample))

    # ------------------------------------------------------------- tf.data datasets
    def read_dataset(self, value: tf.data.Dataset, source: Source, loc: str) -> tf.data.Dataset:
        """A dataset read from ``source``: guarded on its element spec and kind, fed by its variant tensor."""
        spec, kind = datasets.spec_of(value), datasets.kind_of(value)
        self.dataset_guard(source, spec, kind, f"{source.describe()}@{loc}", loc)
        with tf.init_scope():  # an eager placeholder of its own, captured as an input prepare() feeds
            placeholder_value = tf.identity(datasets.variant_of(value))
        self.heap_tensors[id(placeholder_value)] = f"{self.const(datasets.variant_of)}({source})"
        self._keep.append(placeholder_value)
        return self.input_dataset(tf.identity(placeholder_value), spec, kind)

    def dataset_guard(
        self, source: Source, spec: tf.data.DatasetSpec, kind: datasets.DatasetKind, key: str, loc: str
    ) -> None:
        described = f"{source.describe()} is a tf.data.Dataset of {spec.element_spec}"
        if kind.shared_state:
            described += f" ({kind.shared_state})"
        fits = CallSource(self.const(datasets.fits), (source, self.const(spec), self.const(kind)), described)
        self.guard(GuardKind.PREDICATE, fits, True, key, loc, described)

    def input_dataset(
        self, variant: tf.Tensor, spec: tf.data.DatasetSpec, kind: datasets.DatasetKind
    ) -> tf.data.Dataset:
        """The graph's dataset for an input's variant tensor (an argument, or read from the heap)."""
        dataset = datasets.from_variant(variant, spec)
        self._dataset_kinds[id(dataset)] = kind
        self._keep.append(dataset)
        return dataset

    def dataset_kind(self, dataset: tf.data.Dataset) -> datasets.DatasetKind:
        """The kind of a graph dataset: its inputs' kinds, and what the datasets made from them hold."""
        return datasets.kind_of(dataset, self._dataset_kinds)

    def began_shared_iteration(self, what: str, loc: str) -> None:
        """Iterating a dataset whose state outlives the call begins: no assumption may follow."""
        if self._shared_iteration is None:
            self._shared_iteration = (max(self.assumptions, default=0), what, loc)

    def check_shared_iteration(self) -> None:
        """Refuses a graph that checks an assumption after a shared dataset state began to move: a
        failure would re-run the call eagerly, and eager's iteration would move it once more."""
        if self._shared_iteration is None:
            return
        watermark, what, loc = self._shared_iteration
        later = sorted(a for a in self.assumptions if a > watermark)
        if later:
            assumption = self.assumptions[later[0]]
            raise NotConvertible(
                f"an assumption ({assumption.description}, {assumption.location}) is checked after the iteration "
                f"of a dataset began, and {what}: a failure would re-run the call eagerly, a second epoch",
                loc,
            )

    def register_argument_tensor(self, tensor: tf.Tensor, source: Source) -> None:
        """A tensor the graph receives from argument ``source``: its object is the caller's."""
        self._tensor_paths[id(tensor)] = source
        self._keep.append(tensor)

    def identity(self, left: object, right: object, loc: str) -> bool | PyNumber:
        """``left is right`` for tensors and arrays: which objects they are is known only at run time.

        Two values read from paths (arguments, the heap) are compared by ``prepare()`` before each
        call and fed as a bool; a tensor computed by the graph is a new object, never one of those.
        """
        left_path, right_path = self.source_path(left), self.source_path(right)
        if left_path is None or right_path is None:
            return left is right  # at least one is made by this call: the same only if the same value
        if str(left_path) == str(right_path):
            return True
        with tf.init_scope():
            placeholder_value = tf.constant(False)
        self.heap_tensors[id(placeholder_value)] = f"{self.const(_to_bool)}({left_path} is {right_path})"
        self._keep.append(placeholder_value)
        return PyNumber(tf.identity(placeholder_value), bool)

    def source_path(self, value: object) -> Source | str | None:
        """Where the very object ``value`` stands for is read from before the call, if anywhere."""
        if isinstance(value, NumpyArray):
            return value.source
        path = self._tensor_paths.get(id(value))
        if path is None and isinstance(value, (EagerTensor, tf.Variable)):
            path = self.heap_tensors.get(id(value)) or self._paths.get(id(value))
        return path

    def origin_of(self, container: object) -> Source | None:
        """Where the heap list or dict that ``container`` is janus's copy of is read from."""
        return self._origins.get(id(container)) if self.is_heap_container(container) else None

    def runtime_flag(self, source: Source, key: str, loc: str) -> PyNumber:
        """A bool that flips between calls (train/eval), fed at run time: an ``if`` on it becomes a
        ``tf.cond``, one graph for both values. If the code uses it where a run-time bool cannot go
        (a library's Python ``if``), the build is retried with the bool as a constant (``key:constant``)."""
        self.runtime_flags.append(key)
        self.guard(GuardKind.NUMBER_TYPE, source, bool, key, loc)
        return self.number_input(source, bool)

    def computed_input(self, feed: Callable[[], tf.Tensor], dtype: tf.DType) -> tf.Tensor:
        """A scalar that ``prepare()`` computes with ``feed()`` before each call: an eager tensor
        that any graph of this build captures as an input."""
        with tf.init_scope():
            placeholder_value = tf.zeros([], dtype)
        self.heap_tensors[id(placeholder_value)] = f"{self.const(feed)}()"
        self._keep.append(placeholder_value)
        return placeholder_value

    def number_input(self, source: Source, kind: type = float) -> PyNumber:
        """A Python float (int, bool) re-read from ``source`` every call and fed to the graph as a
        float64 (int64, bool) scalar."""
        dtype, feed = _FEEDS[kind]
        with tf.init_scope():  # an eager tensor, captured as an input that prepare() feeds
            placeholder_value = tf.constant(False) if kind is bool else tf.constant(0, dtype)
        self.heap_tensors[id(placeholder_value)] = f"{self.const(feed)}({source})"
        self._keep.append(placeholder_value)
        return PyNumber(tf.identity(placeholder_value), kind)

    def _flipped(self, profiled: tuple | None, key: str) -> bool:
        """A bool read that had both values while profiled, or whose value guard failed."""
        seen = {repr(o) for o in self.profile.heap_reads.get(profiled, ())} if profiled is not None else set()
        return len(seen) > 1 or self.failures(key) > 0

    def _varied(self, profiled: tuple) -> bool:
        """The read changed value at least twice while profiled: it keeps changing."""
        seen = [repr(o) for o in self.profile.heap_reads.get(profiled, ())]
        return sum(a != b for a, b in zip(seen, seen[1:])) >= 2

    def register_argument_container(self, container: object, source: Source) -> None:
        """A list or dict argument: a container on the heap may be this very object (aliasing)."""
        self.read_ids.add(id(container))
        self._argument_containers.append((source, container))

    def _argument_alias(self, value: object, source: Source, loc: str) -> object | None:
        """The argument container that ``value`` (read from ``source``) is at run time, if any.

        Each list or dict read from the heap is guarded not to be an argument container of its
        type; once such a guard has failed, the next graph takes them as one object instead."""
        for argument, container in self._argument_containers:
            is_list = type(container) is list or isinstance(container, HeapList)
            if not (_is_list(value) and is_list or _is_dict(value) and type(container) is dict):
                continue
            key = f"{source.describe()} is {argument.describe()}@{loc}"
            if self.failures(key) > 0:
                self.guard(GuardKind.SAME_OBJECT, source, argument, key, loc)
                return container
            self.guard(GuardKind.DISTINCT_OBJECT, source, argument, key, loc)
        return None

    def unread_list(self, source: Source, loc: str) -> HeapList:
        """A list argument taken whole: appends are logged; reading its contents is refused."""
        what = source.describe()

        def contents_needed(*_args: object, **_kwargs: object) -> list:
            raise NotConvertible(f"the contents of {what}, a list whose length changes between calls", loc)

        view = HeapList([], source, loc, self.heap, contents_needed, self._check_straight_line)
        self.register_argument_container(view, source)
        return view

    def mark_heap_container(self, snapshot: object, source: Source) -> object:
        """A local copy of a container that lives on the heap at ``source`` (writes go to the log)."""
        self._heap_containers.add(id(snapshot))
        self._origins[id(snapshot)] = source
        self._keep.append(snapshot)
        return snapshot

    # ------------------------------------------------------------- heap ops (general path)
    def _store_input(self, expr: str, cache_key: object) -> tf.Tensor:
        """An int64 scalar computed by ``expr`` in prepare() each call, captured into the graph."""
        cached = self._store_inputs.get(cache_key)
        if cached is None:
            with tf.init_scope():
                cached = tf.constant(0, tf.int64)
            self.heap_tensors[id(cached)] = expr
            self._keep.append(cached)
            self._store_inputs[cache_key] = cached
        return cached

    def _heap_token(self) -> tf.Tensor:
        graph = tf.compat.v1.get_default_graph()
        token = self._token_of(graph)
        return token if token is not None else tf.constant(0, tf.int64)

    def _token_of(self, graph: tf.Graph) -> tf.Tensor | None:
        """The last heap op of ``graph`` (its token), after the regions made since, which read or
        wrote the heap or invoked a recursive function."""
        start = self._regions_pending.get(graph)
        regions = [] if start is None else [op for op in graph.get_operations()[start:] if op.type in _REGION_OPS]
        if regions:  # none yet: the region op is made once its branches are traced (a sibling's trace asks)
            del self._regions_pending[graph]
            with graph.as_default(), tf.control_dependencies(regions):
                token = self._tokens.get(graph)
                self._tokens[graph] = tf.identity(token if token is not None else tf.constant(0, tf.int64))
        return self._tokens.get(graph)

    def _enter_region(self, region: tf.Graph) -> None:
        """A cond branch or loop body begins: its heap ops come after the enclosing graph's."""
        outer = getattr(region, "outer_graph", None)
        if outer is None or self.building:
            # the top graph, or in a recursive function's body: its branch on the node keeps the form
            # the invocation's forward shortcut runs (csrc/janus_invoke.cc), its reads their own chains
            return
        invocations = self._invokes_unordered.pop(outer, [])
        token = self._token_of(outer)
        if invocations:  # a write in the region must wait for the reads of the invocations before it
            with outer.as_default(), tf.control_dependencies(invocations):
                token = self._tokens[outer] = tf.identity(token if token is not None else tf.constant(0, tf.int64))
        if token is not None:
            self._tokens[region] = token
        if outer in self._written:
            self._written.add(region)
        self._region_outer[region] = (outer, len(outer.get_operations()), token)

    def _leave_region(self, region: tf.Graph) -> None:
        """A region that read or wrote the heap, or invoked: the enclosing graph's next heap op and
        invocation wait for the region op."""
        entry = self._region_outer.pop(region, None)
        if entry is None:
            return
        outer, start, inherited = entry
        nested = region in self._regions_pending  # a region within it did (`if t: if u: node.x = 1`)
        if self._tokens.get(region) is not inherited or self._invokes_unordered.get(region) or nested:
            self._regions_pending[outer] = min(start, self._regions_pending.get(outer, start))
        if region in self._written:
            self._written.add(outer)

    def _heap_op(self, make: Callable[[tf.Tensor, tf.Tensor], tuple]) -> tuple:
        if self.store_factory is None:
            self.store_factory = pyheap.StoreFactory()
        store = self._store_input(f"{self.const(self.store_factory)}.handle()", "store")
        token, *rest = make(self._heap_token(), store)
        self._tokens[tf.compat.v1.get_default_graph()] = token  # program order for the next heap op
        return tuple(rest)

    def _expectation(self, values: list, what: str, loc: str) -> tuple[pyheap.Expectation, tf.DType, object]:
        assumption = Assumption(next(_assumption_ids), f"type of {what}@{loc}", f"{what} keeps its type", loc)
        self.assumptions[assumption.id] = assumption
        # None next to tensors types the location as the tensors: a None read at run time breaks the
        # assumption and the call re-runs eagerly. None next to numbers (a leaf's word, None on inner
        # nodes) is an optional number: a presence flag read with the value.
        present = [v for v in values if v is not None]
        if present and all(isinstance(v, EagerTensor) for v in present) and len({v.dtype for v in present}) == 1:
            shape = merge_shapes([tuple(v.shape) for v in present])
            spec = pyheap.Expectation("tensor", assumption.id, present[0].dtype, shape)
            return spec, present[0].dtype, shape
        for kind, dtype in ((float, tf.float64), (int, tf.int64), (bool, tf.bool)):
            if present and all(type(v) is kind for v in present):
                if len(present) < len(values):
                    return pyheap.Expectation(kind.__name__, assumption.id, optional=True), dtype, (2,)
                return pyheap.Expectation(kind.__name__, assumption.id), dtype, ()
        if present and all(type(v) is list for v in present):  # lists of child nodes: a pointer to the list
            items = [x for v in present for x in v]
            if len({type(x) for x in items}) <= 1 and (not items or is_user_object(items[0])):
                optional = len(present) < len(values)
                return pyheap.Expectation("object", assumption.id, cls=list, optional=optional), tf.int64, ()
        if present and len({type(v) for v in present}) == 1 and is_user_object(present[0]):
            optional = len(present) < len(values)
            return pyheap.Expectation("object", assumption.id, cls=type(present[0]), optional=optional), tf.int64, ()
        raise NotConvertible(f"{what} holds values of mixed or unsupported types", loc)

    def _from_heap(self, value: tf.Tensor, spec: pyheap.Expectation, samples: list) -> object:
        if spec.kind == "object":
            return PyObjectRef(value, spec.cls, [s for s in samples if s is not None], spec.optional)
        if spec.kind in ("float", "int", "bool"):
            kind = {"float": float, "int": int, "bool": bool}[spec.kind]
            if spec.optional:  # [present, number]
                return OptionalNumber(value, kind)
            return PyNumber(value, kind)
        return value

    def heap_get_item(self, heap_list: HeapList | PyObjectRef, index: PyNumber, loc: str) -> object:
        """``lst[i]`` of a list on the heap (or known only at run time) at an index known only at run time."""
        if isinstance(heap_list, PyObjectRef):  # a list held by a run-time object (a node's children)
            samples = [x for lst in heap_list.samples for x in lst]
            what, pointer = "list", heap_list.pointer
        else:
            samples, what, pointer = list(heap_list.real), heap_list.what, self._pointer_input(heap_list.source)
        spec, dtype, shape = self._expectation(samples, f"{what}[i]", loc)
        expect = pyheap.expect(spec)
        (value,) = self._heap_op(
            lambda token, store: heap_ops.get_item(token, store, pointer, index.tensor, expect, dtype, shape)
        )
        self._checked_read(value.op)
        return self._from_heap(value, spec, samples)

    def heap_len(self, ref: PyObjectRef, loc: str) -> PyNumber:
        """``len(lst)`` of a list known only at run time."""
        assumption = Assumption(next(_assumption_ids), f"len@{loc}", "len() is an int", loc)
        self.assumptions[assumption.id] = assumption
        expect = pyheap.expect(pyheap.Expectation("int", assumption.id))
        (value,) = self._heap_op(
            lambda token, store: heap_ops.get_attr(token, store, ref.pointer, "__len__", expect, tf.int64, ())
        )
        self._checked_read(value.op)
        return PyNumber(value, int)

    def heap_get_attr(self, ref: PyObjectRef, attr: str, loc: str) -> object:
        if not ref.samples:
            raise NotConvertible(f"attribute {attr} of an object janus never saw while profiling", loc)
        descriptor = inspect.getattr_static(ref.cls, attr, _MISSING)
        if descriptor is not _MISSING and hasattr(type(descriptor), "__get__"):
            raise NotConvertible(f"{ref.cls.__name__}.{attr} is a method or property of a run-time object", loc)
        samples = [getattr(s, attr) for s in ref.samples if attr in getattr(s, "__dict__", {})]
        if len(samples) != len(ref.samples):
            raise NotConvertible(f"{ref.cls.__name__}.{attr} is missing on some objects", loc)
        spec, dtype, shape = self._expectation(samples, f"{ref.cls.__name__}.{attr}", loc)
        expect = pyheap.expect(spec)
        (value,) = self._heap_op(
            lambda token, store: heap_ops.get_attr(token, store, ref.pointer, attr, expect, dtype, shape)
        )
        self._checked_read(value.op)
        return self._from_heap(value, spec, samples)

    def heap_call(self, make: Callable[[tf.Tensor, tf.Tensor], tuple]) -> tuple:
        """An op of janus's that reads the heap in program order (the tree walk): ``make(token,
        store)`` returns the token to pass on, then its outputs."""
        return self._heap_op(make)

    def batched_item(self, value: object) -> tuple | None:
        """(loop, iteration) where ``value`` is the item of a loop whose trees may be batched."""
        for loop in reversed(self.batching_loops):
            found = loop.items.get(id(value))
            if found is not None and found[1] is value:
                return loop, found[0]
        return None

    def heap_order_for_invoke(self) -> list[tf.Operation]:
        """What an invocation made now in the current graph must wait for: its heap ops so far, where
        one of them wrote (the invocation's reads must see the write)."""
        graph = tf.compat.v1.get_default_graph()
        token = self._token_of(graph)
        return [token.op] if graph in self._written and token is not None else []

    def wrote_heap_within(self, graph: tf.Graph) -> bool:
        """Whether a heap write was made in ``graph`` or in a region nested in it."""
        for written in self._written:
            while written is not None:
                if written is graph:
                    return True
                written = getattr(written, "outer_graph", None)
        return False

    def heap_after(self, op: tf.Operation) -> None:
        """The heap ops made next in ``op``'s graph wait for ``op`` (an invocation that writes)."""
        graph = op.graph
        with graph.as_default(), tf.control_dependencies([op]):
            token = self._token_of(graph)
            self._tokens[graph] = tf.identity(token if token is not None else tf.constant(0, tf.int64))
        self._written.add(graph)

    @staticmethod
    def must_run(op: tf.Operation) -> None:
        """``op`` runs whether or not its outputs are used: one of its graph's control outputs."""
        outputs = getattr(op.graph, "control_outputs", None)
        if outputs is not None and op not in outputs:
            outputs.append(op)

    def note_invoke(self, op: tf.Operation) -> None:
        """An invocation made in the current graph: the next heap write there waits for it."""
        self._invokes_unordered.setdefault(tf.compat.v1.get_default_graph(), []).append(op)

    def _checked_read(self, read: tf.Operation) -> None:
        """A heap read fails its type assumption at run time: outside a recursive function's body
        (whose outputs wait for its assertions, a cost at every node), it is one of the graph's
        assertions, which every update and print waits for (``order_state_writes``)."""
        if not self.building:
            self.assert_ops.append(read)

    def _heap_write(self, make: Callable[[tf.Tensor, tf.Tensor], tuple]) -> None:
        graph = tf.compat.v1.get_default_graph()
        with tf.control_dependencies(self._invokes_unordered.pop(graph, [])):
            self._heap_op(make)
        self._written.add(graph)

    def heap_set(self, target: object, key: object, value: object, loc: str) -> None:
        """``ref.attr = value`` / ``lst[i] = value`` through the store (replayed after success)."""
        if isinstance(value, PyObjectRef):
            spec, payload = pyheap.Expectation("object", 0, cls=value.cls), value.pointer
        elif isinstance(value, PyNumber) and value.type in (float, int):
            spec, payload = pyheap.Expectation(value.type.__name__, 0), value.tensor
        elif is_symbolic(value) or isinstance(value, EagerTensor):
            spec, payload = pyheap.Expectation("tensor", 0, value.dtype, None), value
        else:
            raise NotConvertible(f"storing a {type(value).__name__} into a run-time object", loc)
        expect = pyheap.expect(spec)
        what = "attribute" if isinstance(target, PyObjectRef) else "item"
        self.store_writes.append((f"{what} {key} of a run-time object is set ({loc})", loc))
        if isinstance(target, PyObjectRef):
            self._heap_write(
                lambda token, store: (heap_ops.set_attr(token, store, target.pointer, key, payload, expect),)
            )
            return
        pointer = self._pointer_input(target.source)
        self._heap_write(lambda token, store: (heap_ops.set_item(token, store, pointer, key.tensor, payload, expect),))

    def _pointer_input(self, source: Source) -> tf.Tensor:
        """The pointer of the object at ``source``, registered with this call's store in prepare()."""
        if self.store_factory is None:
            self.store_factory = pyheap.StoreFactory()
        return self._store_input(f"{self.const(self.store_factory)}.pointer({source})", ("pointer", str(source)))

    # ------------------------------------------------------------- heap writes
    def _check_straight_line(self, loc: str) -> None:
        """Logged writes replay once per call: not from a tf.cond branch or tf.while_loop body."""
        if self.region_depth:
            raise NotConvertible("heap write inside tensor-dependent control flow (tf.cond/tf.while_loop)", loc)

    def write_attribute(self, base: object, attr: str, value: object, loc: str) -> None:
        if isinstance(base, PyObjectRef):
            if attr in getattr(base.cls, "__dict__", {}) and hasattr(type(base.cls.__dict__[attr]), "__set__"):
                raise NotConvertible(f"assignment to {base.cls.__name__}.{attr}, a property or descriptor", loc)
            self.heap_set(base, attr, value, loc)
            return
        path = self._paths.get(id(base))
        if path is None or is_plain(base) or is_symbolic(base):
            raise NotConvertible(f"attribute assignment to an object janus cannot re-read (.{attr})", loc)
        cls = type(base)
        if is_library_class(cls):
            raise NotConvertible(f"attribute assignment on library object {cls.__name__}.{attr}", loc)
        setter = getattr(cls, "__setattr__", object.__setattr__)
        if setter is not object.__setattr__ and not is_library_code(getattr(setter, "__code__", _LIB_CODE)):
            raise NotConvertible(f"{cls.__name__} defines __setattr__", loc)
        descriptor = inspect.getattr_static(cls, attr, _MISSING)
        if hasattr(type(descriptor), "__set__"):
            raise NotConvertible(f"assignment to {cls.__name__}.{attr}, a property or descriptor", loc)
        self._check_storable(value, loc)
        self._check_straight_line(loc)
        self.heap.log(Write("setattr", base, path, attr, value, loc))

    def write_item(self, container: object, key: object, value: object, loc: str) -> None:
        """``container[key] = value`` for a container from the heap (logged) or a local one (done)."""
        if isinstance(container, HeapList):
            self._check_storable(value, loc)
            container.setitem(key, value)
            return
        if id(container) in self.foreign:
            raise NotConvertible("item assignment to a container that a library object holds", loc)
        path = self._origins.get(id(container))
        if path is not None:
            self._check_straight_line(loc)
        container[key] = value
        if path is not None:
            self._check_storable(value, loc)
            self.heap.log(Write("setitem", container, path, key, value, loc))

    def write_global(self, namespace: dict, name: str, value: object, loc: str) -> None:
        self._check_straight_line(loc)
        self._check_storable(value, loc)
        self.heap.log(Write("setitem", namespace, self.guards.source_of(namespace, "globals"), name, value, loc))

    def write_cell(self, cell: types.CellType, value: object, loc: str) -> None:
        self._check_straight_line(loc)
        self._check_storable(value, loc)
        self.heap.log(
            Write("setattr", cell, self.guards.source_of(cell, "a closure cell"), "cell_contents", value, loc)
        )

    def defer_call(self, fn: Callable, args: tuple, kwargs: dict, loc: str) -> None:
        """Logs ``fn(*args, **kwargs)``, made after the graph succeeded with the materialised values.

        Containers are copied now: eager would have read them at this point of the program.
        """
        self._check_straight_line(loc)
        args, kwargs = snapshot(tuple(args)), snapshot(dict(kwargs))
        for value in (*args, *kwargs.values()):
            self._check_storable(value, loc)
        self.heap.log(Write("call", fn, None, None, (args, kwargs), loc))

    def log_later(self, fn: Callable, values: tuple, loc: str, mutables: set[int]) -> None:
        """Logs a statement that runs after the graph (``janus.graphgen.later``): ``fn(D, *values)``
        with the values materialised, in program order with the heap writes."""
        self._check_straight_line(loc)
        for value in values:
            self._check_storable(value, loc)
        self.later_marks.append(len(tf.compat.v1.get_default_graph().get_operations()))
        self.later_count += 1
        self.later_mutables |= mutables
        self.heap.log(Write("statement", fn, None, None, (values, {}), loc))

    def _check_storable(self, value: object, loc: str, _seen: set[int] | None = None) -> None:
        seen = set() if _seen is None else _seen
        if id(value) in seen:
            return  # a container that holds itself: checked once
        seen.add(id(value))
        if isinstance(value, (list, tuple)):
            for item in value:
                self._check_storable(item, loc, seen)
        elif isinstance(value, dict):
            for item in value.values():
                self._check_storable(item, loc, seen)
        elif isinstance(value, Formatted):
            self._check_storable(value.args, loc, seen)
            self._check_storable(value.kwargs, loc, seen)
        elif type(value).__name__ in ("TensorList", "SymbolicRange", "LocalFunction", "NumpyScalar") or (
            isinstance(value, tf.Tensor) and not is_symbolic(value) and not isinstance(value, EagerTensor)
        ):
            raise NotConvertible(f"a {type(value).__name__} stored on the heap", loc)

    def heap_value(self, target: object, key: object) -> object:
        """The value this call already wrote to ``target``'s ``key``, or heap.MISSING."""
        return self.heap.local(target, key)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def is_heap_container(self, container: object) -> bool:
        return id(container) in self._heap_containers

    def copied_type(self, value: object) -> type | None:
        """The type of the heap container that ``value`` is a local copy of (a dict, a TF
        ``DictWrapper``, a Keras ``TrackedList``), or a list attribute's view (``HeapList``) stands
        for; None for any other value."""
        if isinstance(value, HeapList):
            return type(value.real)
        return self._origin_types.get(id(value))

    def failed(self, key: str) -> bool:
        """Whether an assumption with this key has failed before (then it is not made again)."""
        return self.failures(key) > 0

    def mutate_container(self, container: object, method: str, args: tuple, loc: str) -> object:
        """A method call on a list/dict: logged when the container lives on the heap.

        Returns the method's result when the call was logged (and applied to the local copy)
        here, or ``NOT_LOGGED`` for a container of this call's own.
        """
        path = self._origins.get(id(container))
        if path is None or method in READ_ONLY_METHODS:
            return NOT_LOGGED
        if method not in _LOGGED_METHODS or (method == "update" and len(args) != 1):
            raise NotConvertible(f"{type(container).__name__}.{method}() on a container that lives on the heap", loc)
        if method in ("setdefault", "pop", "insert", "__delitem__") and args and not is_plain(args[0]):
            raise NotConvertible(f"{type(container).__name__}.{method}() with a key known only at run time", loc)
        for value in args:
            self._check_storable(value, loc)
        self._check_straight_line(loc)
        if method == "update":
            container.update(args[0])
            for key, value in dict(args[0]).items():
                self.heap.log(Write("setitem", container, path, key, value, loc))
            return None
        if method == "setdefault":
            if args[0] in container:
                return container[args[0]]
            default = args[1] if len(args) > 1 else None
            container[args[0]] = default
            self.heap.log(Write("setitem", container, path, args[0], default, loc))
            return default
        if method == "pop" and isinstance(container, dict) and args[0] not in container and len(args) > 1:
            return args[1]  # the default: nothing changes
        try:
            result = getattr(container, method)(*args)
        except (KeyError, IndexError) as err:  # the contents are guarded: eager raises this too
            raise NotConvertible(
                f"{type(container).__name__}.{method}() raises {type(err).__name__} here", loc
            ) from None
        if method in ("append", "extend"):
            self.heap.log(Write(method, container, path, None, list(args[0]) if method == "extend" else args[0], loc))
        else:
            key = args[0] if args else None
            self.heap.log(Write(method, container, path, key, args[1] if method == "insert" else None, loc))
        return result

    def check_library_argument(self, value: object, loc: str) -> None:
        """Library calls must not be handed user code they could run while generating."""
        if isinstance(value, (list, tuple)):
            for item in value:
                self.check_library_argument(item, loc)
            return
        if isinstance(value, dict):
            for item in value.values():
                self.check_library_argument(item, loc)
            return
        if callable(value) and is_user_object(value):
            raise NotConvertible(f"user code {describe_object(value)} passed to a library call", loc)

    # ------------------------------------------------------------- attributes
    def read_attribute(self, base: object, attr: str, loc: str, profiled: tuple | None = None) -> object:
        if isinstance(base, PyObjectRef):
            return self.heap_get_attr(base, attr, loc)
        if type(base) is super:
            return self._read_super_attribute(base, attr, loc)
        if is_symbolic(base):
            if attr == "numpy":
                raise NotConvertible("Tensor.numpy() needs a concrete value", loc, kind="tensor value")
            if attr == "shape" and not base.shape.is_fully_defined():
                raise NeedsStaticShape("code reads the shape of a tensor whose shape was relaxed", loc)
            return getattr(base, attr)
        path = self._paths.get(id(base))
        if isinstance(base, types.ModuleType):
            value = getattr(base, attr)
            if is_library_object(base) or path is None:
                if not isinstance(value, _STABLE_MODULE_ATTRIBUTES):  # sys.stderr, a module-level setting
                    key = f"{base.__name__}.{attr}@{loc}"
                    if self.failed(key):  # rebound between calls: read where a deferred call needs it
                        return LateRead(base, attr)
                    if type(value) in (list, dict, set) and not is_plain(value):
                        raise NotConvertible(f"{base.__name__}.{attr} is a container janus cannot guard", loc)
                    source = self.guards.source_of(base, base.__name__).attr(attr)
                    described = f"{base.__name__}.{attr} is unchanged"
                    self.guard(GuardKind.ID_MATCH, source, value, key, loc, described)
                    if type(value) in (list, dict, set):  # sys.argv: changed in place too
                        self.guard(GuardKind.EQUALS_MATCH, source, snapshot(value), key, loc, described)
                return value
            return self.read_heap(value, path.attr(attr), loc, profiled)
        if isinstance(base, Formatted):
            raise NotConvertible("attribute of text made only after the graph ran", loc)
        if isinstance(base, HeapList):
            if attr in ("append", "extend", "pop", "insert", "clear"):
                return getattr(base, attr)  # logged, replayed after the graph
            if attr in READ_ONLY_METHODS:
                return getattr(base.materialize(), attr)
            raise NotConvertible(f"list.{attr}() on a list that lives on the heap", loc)
        if isinstance(base, NumpyArray):
            if attr in ("shape", "dtype", "ndim"):
                return getattr(base, attr)  # guarded
            if attr in ("sum", "mean"):
                return numpy_values.NumpyMethod(base, attr)  # a graph reduction when called
            raise NotConvertible(f"ndarray.{attr} of a NumPy array fed by value (its data is read at run time)", loc)
        if isinstance(base, numpy_values.NumpyScalar):
            if attr == "dtype":
                return np.dtype(base.type)  # NumPy's dtype, as eager's scalar has (not the tensor's)
            raise NotConvertible(f"{base.type.__name__}.{attr} of a NumPy scalar computed in the graph", loc, "numpy")
        cls = base if isinstance(base, type) else type(base)
        self.guard_keras_state(base, loc)
        if is_library_class(cls) or is_plain(base):
            if attr == "__dict__" and type(base) in _NAMESPACES:
                raise NotConvertible(f"the __dict__ of a {cls.__name__} (its contents are not guarded)", loc)
            with sandbox.library_call(f"{cls.__qualname__}.{attr}", loc):
                value = getattr(base, attr)
            instance_dict = getattr(base, "__dict__", None)
            holds_data = is_plain(value) or type(base) in _NAMESPACES  # a namespace's attributes are the user's
            if path and isinstance(instance_dict, dict) and attr in instance_dict and holds_data:
                return self.read_heap(value, path.attr(attr), loc, profiled)
            if isinstance(value, (list, dict, set)) and not is_plain(base):
                self.foreign.add(id(value))  # held by a library object: janus cannot log writes to it
                self._keep.append(value)
            return value
        return self._read_user_attribute(base, cls, attr, path, loc, profiled)

    def _read_super_attribute(self, proxy: super, attr: str, loc: str) -> object:
        """``super().attr``: the method of the next class in the MRO that defines ``attr``, guarded
        to stay the one found there."""
        owner, found = super_lookup(proxy.__thisclass__, proxy.__self_class__, attr)
        if not isinstance(found, types.FunctionType):
            raise NotConvertible(f"super().{attr} is not a plain method", loc)
        classes = (self.const(proxy.__thisclass__), self.const(proxy.__self_class__), repr(attr))
        lookup = CallSource(self.const(super_lookup), classes, f"super().{attr}").item(1)
        described = f"super().{attr} is {owner.__qualname__}.{attr}"
        self.guard(GuardKind.ID_MATCH, lookup, found, f"super().{attr}@{loc}", loc, described)
        return types.MethodType(found, proxy.__self__)

    def _read_user_attribute(
        self, base: object, cls: type, attr: str, path: str | None, loc: str, profiled: tuple | None
    ) -> object:
        for hook in ("__getattr__", "__getattribute__"):
            impl = getattr(cls, hook, None)
            func = getattr(impl, "__func__", impl)
            if isinstance(func, types.FunctionType) and not is_library_code(func.__code__):
                raise NotConvertible(f"{cls.__name__} defines {hook}", loc)
        class_attr = inspect.getattr_static(cls, attr, _MISSING) if not isinstance(base, type) else _MISSING
        is_data_descriptor = hasattr(type(class_attr), "__set__") or hasattr(type(class_attr), "__delete__")
        if is_data_descriptor:
            getter = getattr(class_attr, "fget", None)
            if getter is None and isinstance(class_attr, types.MemberDescriptorType):
                value = getattr(base, attr)
                return self._heap_or_value(value, path, attr, loc, profiled)
            if getter is not None and is_library_code(getattr(getter, "__code__", None) or _LIB_CODE):
                return getattr(base, attr)
            raise NotConvertible(f"property {cls.__name__}.{attr} runs user code", loc)
        written = self.heap.local(base, attr)
        if written is not MISSING:
            return written
        instance_dict = getattr(base, "__dict__", None)
        if isinstance(instance_dict, dict) and attr in instance_dict:
            return self._heap_or_value(instance_dict[attr], path, attr, loc, profiled)
        descriptor_get = getattr(type(class_attr), "__get__", None)
        if isinstance(descriptor_get, types.FunctionType) and not is_library_code(descriptor_get.__code__):
            raise NotConvertible(f"{cls.__name__}.{attr} is a descriptor whose __get__ is user code", loc)
        value = getattr(base, attr)
        if isinstance(class_attr, types.FunctionType) and path is not None and isinstance(instance_dict, dict):
            key = f"attribute {attr}@{loc}"
            self.guard(GuardKind.KEY_ABSENT, path.attr("__dict__"), attr, key, loc, f"{attr} is a method")
            self.guard_class_attribute(type(base), attr, class_attr, loc)
            return value
        if isinstance(value, types.MethodType):
            return value
        return self._heap_or_value(value, path, attr, loc, profiled)

    def _heap_or_value(self, value: object, path: str | None, attr: str, loc: str, profiled: tuple | None) -> object:
        if path is None:
            raise NotConvertible(f"attribute {attr} of an object janus cannot re-read", loc)
        return self.read_heap(value, path.attr(attr), loc, profiled)

    # ------------------------------------------------------------- nested graphs
    @contextlib.contextmanager
    def nested_graph(self) -> Iterator[list[tf.Operation]]:
        """Inside a cond branch or loop body: its assertions order its own state updates."""
        outer, inner = self.assert_ops, []
        self.assert_ops = inner
        self.region_depth += 1
        region = tf.compat.v1.get_default_graph()
        self._enter_region(region)
        try:
            yield inner
            self.touches.count_region(
                tf.compat.v1.get_default_graph(), self.region_depth, self.building[-1] if self.building else None
            )
            order_state_writes(region, inner)
            order_prints(region)
            order_region(region, inner)
        finally:
            self._leave_region(region)
            self.assert_ops = outer
            self.region_depth -= 1

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        """A conversion that may be abandoned: on failure, forget the assertions it planted.

        TF keeps the ops an abandoned conversion made, and a function runs every stateful op of
        its graph: where one of them changes state (a variable update, a heap write, a print, in a
        cond or loop it made), the build fails rather than let it run beside its replacement."""
        known, planted = set(self.assumptions), len(self.assert_ops)
        graph = tf.compat.v1.get_default_graph()
        made = len(graph.get_operations())
        try:
            yield
        except NotConvertible as err:
            for key in set(self.assumptions) - known:
                del self.assumptions[key]
            del self.assert_ops[planted:]
            left = next((op for op in graph.get_operations()[made:] if changes_state(op)), None)
            if left is not None:
                raise GenerationError(
                    f"{err.reason}; the {left.type} op made before janus gave up on this conversion changes "
                    "state and would still run",
                    err.location,
                ) from err
            raise

    @contextlib.contextmanager
    def trial(self) -> Iterator[None]:
        """A throwaway trace (to learn shapes before building a loop): leaves no assertions behind."""
        outer_asserts, known = self.assert_ops, set(self.assumptions)
        self.assert_ops = []
        self.code.muted += 1
        self.region_depth += 1
        try:
            yield
        finally:
            self.assert_ops = outer_asserts
            self.code.muted -= 1
            self.region_depth -= 1
            for key in set(self.assumptions) - known:
                del self.assumptions[key]

    # ------------------------------------------------------------- in-graph speculation
    def branch_position(self, code: types.CodeType, node: gast.AST) -> int | None:
        """Counts an evaluation of the ``if`` at ``node``: its index in the profiled outcome sequences.

        Inside a converted region (a cond branch or loop body traced once for many runs)
        positions stop meaning anything, so that site only uses always-the-same outcomes.
        """
        site = (code, node.lineno)
        if self.region_depth:
            self._invalid_sites.add(site)
        if site in self._invalid_sites:
            return None
        position = self._site_positions.get(site, 0)
        self._site_positions[site] = position + 1
        return position

    def profiled_branch(self, code: types.CodeType, node: gast.AST, position: int | None) -> bool | None:
        """The outcome to speculate for this evaluation of an ``if``, or None for a real tf.cond.

        A branch that went the same way every time is speculated; so is one whose sequence
        of outcomes was identical in every profiled call (e.g. an ``if`` in an unrolled
        loop that breaks at the same iteration), position by position.
        """
        sequences = self.profile.branch_sequences(code, node.lineno)
        outcomes = {o for seq in sequences for o in seq}
        taken = None
        if len(outcomes) == 1:
            taken = outcomes.pop()
        elif position is not None and outcomes and len(set(sequences)) == 1 and position < len(sequences[0]):
            taken = sequences[0][position]
        if taken is not None and self.failed(f"branch is {'taken' if taken else 'not taken'}@{location(code, node)}"):
            return None  # given up (``ordering.refuse_printing_speculative_loops``): a real tf.cond
        return taken

    def majority_branch(self, code: types.CodeType, node: gast.AST) -> bool | None:
        """The outcome this ``if`` had most often while profiling (None if never evaluated)."""
        outcomes = [o for seq in self.profile.branch_sequences(code, node.lineno) for o in seq]
        if not outcomes:
            return None
        return sum(outcomes) * 2 > len(outcomes)

    def assumption(self, key: str, what: str, loc: str, final: bool = False) -> Assumption:
        """A new assumption of this graph, for an op of janus's that checks it."""
        assumption = Assumption(next(_assumption_ids), key, what, loc, final)
        self.assumptions[assumption.id] = assumption
        return assumption

    def check(
        self, make_condition: Callable[[], tf.Tensor], key: str, what: str, loc: str, final: bool = False
    ) -> None:
        """Plants a JanusAssert on the scalar boolean ``make_condition()`` (``final``: see ``Assumption``)."""
        assumption = self.assumption(key, what, loc, final)
        with tf.name_scope("janus_assert"):
            condition = make_condition()
            self.assert_ops.append(janus_assert(condition, assumption.id, f"{what} ({loc})"))
        self.code.call("janus_assert", (condition, assumption.id), {}, None)

    def checked_value(
        self,
        make: Callable[[tf.Tensor, int, str], tuple[tf.Tensor, tf.Operation]],
        checked: tf.Tensor,
        key: str,
        what: str,
        loc: str,
    ) -> tf.Tensor:
        """A value computed from ``checked`` by one of janus's checks (``assert_op.janus_unwrap``,
        ``janus_narrow_int32``): ``make(checked, assumption_id, description)`` gives the value and the op
        that fails where ``what`` does not hold."""
        assumption = self.assumption(key, what, loc)
        with tf.name_scope("janus_assert"):
            value, check = make(checked, assumption.id, f"{what} ({loc})")
        self.assert_ops.append(check)
        self.code.call(make.__name__, (checked, assumption.id), {}, value)
        return value

    def speculate(self, value: tf.Tensor, expected: bool, code: types.CodeType, node: gast.AST, what: str) -> None:
        """Speculates that the truth value of the tensor ``value`` is ``expected``."""
        loc = location(code, node)

        def condition() -> tf.Tensor:
            truth = truth_tensor(value)
            return truth if expected else tf.logical_not(truth)

        self.check(condition, f"{what}@{loc}", what, loc)

    def check_touched(self, targets: list, sources: list, loc: str) -> set[int]:
        """Where the code asks for gradients: keeps eager's None gradients (``janus.graphgen.touches``).
        Returns the positions of the sources whose gradient is None on every call; checks that a path
        that ran connects each source only regions may connect to the targets."""
        graph = tf.compat.v1.get_default_graph()
        plans = touches.plan(graph, targets, sources, self.touches, nested=self.region_depth > 0)
        before = lambda c: self._store_input(f"{self.const(c)}.read()", ("touch", id(c)))  # noqa: E731
        none: set[int] = set()
        for position, (source, plan) in enumerate(zip(sources, plans)):
            if plan is touches.NONE:
                none.add(position)
            elif plan is not touches.TRUSTED:
                name = f"gradient source {position} ({getattr(source, 'name', 'a tensor')})"  # names repeat
                if not plan:
                    raise NotConvertible(f"janus cannot tell on which calls eager's gradient of {name} is None", loc)
                self.check(lambda p=plan: touches.holds(graph, p, self.touches, before), f"{name} is used@{loc}",
                           f"{name} is connected to the target on this call's path (else its gradient is None)",
                           loc)  # fmt: skip
        return none

    def unwrap_optional(self, value: OptionalNumber, loc: str) -> PyNumber:
        """The number of a may-be-None location used as a number: asserts it is not None."""
        number = self.checked_value(
            janus_unwrap, value.pair, f"value is not None@{loc}", "a value that may be None is not None", loc
        )
        return PyNumber(number, value.type)

    def narrow_int32(self, value: tf.Tensor, loc: str) -> tf.Tensor:
        """An int64 as the int32 eager's ``convert_to_tensor`` makes of a Python int: asserts it fits."""
        return self.checked_value(
            janus_narrow_int32, value, f"default dtype range@{loc}", "fits its default dtype", loc
        )

    def assert_nonzero(self, divisor: tf.Tensor, loc: str) -> None:
        """Division by a relaxed number: Python raises ZeroDivisionError, so check before."""
        static = static_value(divisor)
        if static is not None and np.all(static != 0):  # a constant divisor (a value guarded before the call)
            return
        zero = lambda: tf.zeros([], divisor.dtype)  # noqa: E731 - int64 divisors need an int64 zero
        self.check(lambda: tf.not_equal(divisor, zero()), f"divisor is not zero@{loc}", "divisor is not zero", loc)

    def assert_constant(self, tensor: tf.Tensor, value: np.ndarray, key: str, what: str, loc: str) -> tf.Tensor:
        """Speculates that ``tensor`` equals ``value``; returns the constant to build on."""
        constant = tf.constant(value, dtype=tensor.dtype)
        self.check(lambda: tf.reduce_all(tf.equal(tensor, constant)), key, what, loc)
        self.code.bind(constant, f"const_{len(self.assumptions)}")
        return constant

    # ------------------------------------------------------------- library calls
    def record_call(self, label: str, fn: Callable, args: tuple, kwargs: dict, loc: str) -> object:
        try:
            with _quiet_conversions(args, kwargs):
                result = fn(*args, **kwargs)
        except (NotConvertible, GenerationError):
            raise
        except Exception as err:
            raise GenerationError(
                f"{label}() failed while building the graph: {type(err).__name__}: {err}", loc
            ) from err
        if is_symbolic(result) or isinstance(result, (list, tuple)) and any(is_symbolic(r) for r in result):
            self.code.call(label, args, kwargs, result)
        return result


def _quiet_conversions(args: tuple, kwargs: dict) -> contextlib.AbstractContextManager:
    """An op built on graph tensors converts its Python numbers through NumPy, which warns where one
    overflows the dtype (``x * 1e39`` of a float32 ``x``); eager's conversion does not: neither may
    janus's graph build."""
    if any(is_symbolic(v) for v in (*args, *kwargs.values())):
        return np.errstate(over="ignore")
    return contextlib.nullcontext()


@dataclasses.dataclass(frozen=True)
class LateRead:
    """``module.attr`` that changes between calls (``sys.stderr`` under a redirect): read when the
    deferred call that receives it is made. Any other use needs it now and is refused."""

    module: types.ModuleType
    attr: str

    def read(self) -> object:
        return getattr(self.module, self.attr)


NOT_LOGGED = object()
_LOGGED_METHODS = frozenset({"append", "extend", "update", "setdefault", "pop", "insert", "clear", "__delitem__"})


_NAMESPACES = (types.SimpleNamespace, argparse.Namespace)  # library objects that only hold their attributes


def _is_list(value: object) -> bool:
    """A list, or a TF/Keras tracking list (Keras's ``TrackedList``, TF's ``ListWrapper``)."""
    return type(value) is list or isinstance(value, list) and _is_tracking(type(value))


def _is_dict(value: object) -> bool:
    """A dict, or a TF/Keras tracking dict. Not ``OrderedDict``/``defaultdict``: their type shows."""
    return type(value) is dict or isinstance(value, dict) and _is_tracking(type(value))


def _is_tracking(cls: type) -> bool:
    return (cls.__module__ or "").split(".")[0] in ("tensorflow", "keras", "tf_keras")


def super_lookup(start: type, cls: type, attr: str) -> tuple[type | None, object]:
    """The class after ``start`` in ``cls``'s MRO that defines ``attr``, and its raw value there."""
    mro = cls.__mro__
    for klass in mro[mro.index(start) + 1 :] if start in mro else ():
        if attr in vars(klass):
            return klass, vars(klass)[attr]
    return None, _MISSING


def snapshot(value: object, _copies: dict[int, object] | None = None) -> object:
    """A copy of the containers within ``value`` as they are now (tensors and objects shared; a
    list or dict that holds itself, copied once)."""
    copies = {} if _copies is None else _copies
    if isinstance(value, HeapList):
        value = value.materialize()
    if id(value) in copies:
        return copies[id(value)]
    if type(value) in (list, dict):
        copy = copies[id(value)] = type(value)()
        if type(value) is list:
            copy.extend(snapshot(v, copies) for v in value)
        else:
            copy.update((k, snapshot(v, copies)) for k, v in value.items())
        return copy
    if type(value) in (tuple, set, frozenset):
        return type(value)(snapshot(v, copies) for v in value)
    if isinstance(value, Formatted):
        return Formatted(value.make, snapshot(value.args, copies), snapshot(value.kwargs, copies))
    return value


# The feeders below convert through NumPy scalars: TensorFlow caches every distinct Python scalar
# it converts, so a counter fed as a Python int would grow that cache by about 0.7 KiB a call.
def _to_float64(value: float) -> tf.Tensor:
    return tf.constant(np.array(value, np.float64))  # np.float64 is a float: it would be cached


def _to_bool(value: bool) -> tf.Tensor:
    return tf.constant(np.bool_(value))


def _to_int64(value: int) -> tf.Tensor:
    return tf.constant(np.int64(value))


_FEEDS = {float: (tf.float64, _to_float64), int: (tf.int64, _to_int64), bool: (tf.bool, _to_bool)}


_MISSING = object()
# What a library module's attributes usually hold, never rebound in practice: not guarded.
_STABLE_MODULE_ATTRIBUTES = (
    types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, np.ufunc,
)  # fmt: skip
_LIB_CODE = tf.constant.__code__ if hasattr(tf.constant, "__code__") else None
READ_ONLY_METHODS = frozenset(
    {"copy", "count", "index", "get", "keys", "values", "items", "__getitem__", "__contains__", "__len__"}
)
