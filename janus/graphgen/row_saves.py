"""Sparse updates put back row by row: what a graph saves before it scatters into a variable.

A graph that updates a variable before an op that may raise must be able to put the variable
back, so that the failing call can re-run eagerly (``GeneratedGraph.snapshot``: the runner reads
such variables before every call). For an embedding table or a sampled softmax's weights that an
optimizer updates with sparse scatters (Adagrad, SGD or Adam on ``IndexedSlices``), that read is a
copy of the whole table on every call (a variable that gathers read is in copy-on-read mode):
77 MB a step in the LM benchmark, which was the whole of its gap to ``tf.function``.

Where every update of a variable in the graph is a top-level ``ResourceScatter*`` op, the graph
saves instead, right before each scatter, the rows the scatter is about to change: a gather of its
indices, into resources janus owns (the rows, the indices, and a flag that they were saved in this
call). The flags are cleared by the graph's last ops, which wait for every op that may raise and
for the scatters. When an op raises, the runner writes the saved rows back, the last scatter's
first, and clears the flags (``RowSave.restore``).

The gather reads the variable through a handle tensor of its own (an eager ``Identity`` of the
variable's handle, captured): TensorFlow's automatic control dependencies order the ops on one
handle tensor in creation order, and the gather, created after the whole step, must run before
the scatter it saves for (explicit edges order it after the variable's previous scatter and
before this one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import weakref
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.ops import gen_resource_variable_ops, resource_variable_ops

from janus.graphgen import touches
from janus.graphgen.fallible import may_raise
from janus.graphgen.ordering import is_state_write

SCATTERS = frozenset(
    {
        "ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate", "ResourceScatterMul",
        "ResourceScatterDiv", "ResourceScatterMin", "ResourceScatterMax",
    }
)  # fmt: skip
SCOPE = "janus_row_save"
_off = threading.local()  # none_saved() in this thread


@contextlib.contextmanager
def none_saved() -> Iterator[None]:
    """Graphs built in this thread meanwhile save no rows (``janus.export``: a SavedModel holds
    variables only, and never re-runs a failed call)."""
    previous = getattr(_off, "on", False)
    _off.on = True
    try:
        yield
    finally:
        _off.on = previous


class _Slot:
    """A resource janus owns that a graph assigns a value of any shape to (raw handle, as touches.Counter)."""

    def __init__(self, dtype: tf.DType) -> None:
        with tf.init_scope():
            value = tf.zeros([], dtype)
            self.handle = resource_variable_ops.eager_safe_variable_handle(
                initial_value=value, shape=tf.TensorShape(None), shared_name=None, name=SCOPE, graph_mode=False
            )
            self._deleter = resource_variable_ops.EagerResourceDeleter(self.handle, self.handle.device)
            gen_resource_variable_ops.assign_variable_op(self.handle, value)
        self.dtype = dtype
        touches.mark_bookkeeping(self.handle)
        weakref.finalize(self, touches.unmark_bookkeeping, id(self.handle))

    def assign(self, value: tf.Tensor) -> tf.Operation:
        return gen_resource_variable_ops.assign_variable_op(self.handle, value)

    def read(self) -> tf.Tensor:
        return gen_resource_variable_ops.read_variable_op(self.handle, self.dtype)


@dataclasses.dataclass(eq=False)
class RowSave:
    """The rows one scatter of a graph changes, saved before it runs."""

    variable: object  # the eager resource handle the scatter updates
    rows: _Slot
    indices: _Slot
    saved: _Slot  # bool: the rows were saved in the call under way
    gather: str  # the name of the gather that saves them (it raises where the scatter would)
    scatter: str  # the name of the scatter

    def discard(self) -> None:
        """Forgets the rows the failed call saved: it is not re-run, and they stay as it left them."""
        self.saved.assign(tf.constant(False))

    def restore(self) -> None:
        """Puts the rows back if the failed call saved them; clears the flag."""
        if bool(self.saved.read()):
            gen_resource_variable_ops.resource_scatter_update(self.variable, self.indices.read(), self.rows.read())
            self.saved.assign(tf.constant(False))


def add(graph: tf.Graph, resources: list[tf.Tensor], whole: list[tf.Tensor]) -> tuple[list[tf.Tensor], list[RowSave]]:
    """Splits ``resources`` (updated before an op that may raise) into those the runner must save
    whole and those saved row by row by ops this adds to ``graph``; ``whole`` must be saved whole."""
    if getattr(_off, "on", False):
        return list(resources), []
    keep_whole = {id(_root(t)) for t in whole}
    candidates: dict[int, tf.Tensor] = {}
    for tensor in resources:
        root = _root(tensor)
        if root.op.type == "Placeholder" and id(root) not in keep_whole:
            candidates[id(root)] = root
    scatters: dict[int, list[tf.Operation]] = {key: [] for key in candidates}
    operations = graph.get_operations()
    for op in operations:
        if not is_state_write(op):
            continue
        for key in {id(_root(t)) for t in op.inputs if t.dtype == tf.resource} & candidates.keys():
            if _scatter_of(op, key):
                scatters[key].append(op)
            else:  # updated otherwise too (dense, in a region): saved whole
                candidates.pop(key)
                scatters.pop(key)
    handles = {key: touches.eager_handle(root) for key, root in candidates.items()}
    saved = {key for key in candidates if handles[key] is not None and scatters[key]}
    if not saved:
        return list(resources), []
    fallible = [op for op in operations if may_raise(op)]
    saves: list[RowSave] = []
    for key in saved:
        saves += _save_rows(graph, candidates[key], handles[key], scatters[key])
    last = fallible + [op for key in saved for op in scatters[key]]
    with graph.as_default(), tf.name_scope(SCOPE), tf.control_dependencies(last):
        for save in saves:  # the call got past every op that may raise: nothing to put back
            save.saved.assign(tf.constant(False))
    return [t for t in resources if id(_root(t)) not in saved], saves


def _save_rows(graph: tf.Graph, root: tf.Tensor, handle: object, scatters: list[tf.Operation]) -> list[RowSave]:
    saves = []
    previous: tf.Operation | None = None
    with tf.init_scope():
        alias_handle = tf.identity(handle)  # the same variable as another handle tensor
    with graph.as_default(), tf.name_scope(SCOPE):
        alias = graph.capture(alias_handle)  # one ACD does not order the variable's other ops by
        for scatter in scatters:
            indices, updates = scatter.inputs[1], scatter.inputs[2]
            with tf.control_dependencies([previous] if previous is not None else []):
                rows = gen_resource_variable_ops.resource_gather(alias, indices, dtype=updates.dtype)
            save = RowSave(
                variable=handle,
                rows=_Slot(updates.dtype),
                indices=_Slot(indices.dtype),
                saved=_Slot(tf.bool),
                gather=rows.op.name,
                scatter=scatter.name,
            )
            stored = [save.rows.assign(rows), save.indices.assign(indices)]
            with tf.control_dependencies(stored):
                flag = save.saved.assign(tf.constant(True))
            scatter._add_control_input(flag)  # noqa: SLF001 - the save runs before the scatter
            saves.append(save)
            previous = scatter
    return saves


def _root(tensor: tf.Tensor) -> tf.Tensor:
    while tensor.op.type == "Identity":
        tensor = tensor.op.inputs[0]
    return tensor


def _scatter_of(op: tf.Operation, key: int) -> bool:
    """A top-level sparse scatter into the resource ``key`` (its only resource input)."""
    resources = [t for t in op.inputs if t.dtype == tf.resource]
    return op.type in SCATTERS and len(resources) == 1 and id(_root(op.inputs[0])) == key
