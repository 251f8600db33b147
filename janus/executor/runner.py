"""Calling a generated graph: a lean path straight into the runtime, and TF's path under a tape.

With no gradient tape watching, the graph's function is executed like a single op
(``TFE_Py_Execute`` with the function's name), skipping ``ConcreteFunction.__call__``'s
argument canonicalisation. When a tape could record, the ConcreteFunction's own
``_call_flat`` is used so gradients flow through the call exactly as for tf.function.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import context, record
from tensorflow.python.eager.context import FunctionCallOptions

from janus.executor import interrupts
from janus.executor.recovery import recoverable
from janus.graphgen.generate import GeneratedGraph
from janus.ops import failed_assumption_id


class AssumptionFailed(Exception):
    """A JanusAssert in the graph failed: nothing was committed; re-run imperatively."""

    def __init__(self, assumption_id: int) -> None:
        super().__init__(f"assumption {assumption_id} failed")
        self.assumption_id = assumption_id


class GraphRunner:
    __slots__ = (
        "graph", "_name", "_attrs", "_call_options", "_num_inputs", "_num_outputs", "_unpack", "_concrete", "_commit",
        "_stores", "_effects", "_snapshot", "_row_saves", "_later", "_saver", "warm",
    )  # fmt: skip

    def __init__(self, graph: GeneratedGraph) -> None:
        self.graph = graph
        self._name = graph.function_name
        ctx = context.context()
        self._call_options = _call_options(ctx.function_call_options, graph.recursive)
        attrs = self._call_options.as_attrs()
        self._attrs = tuple(item for pair in attrs.items() for item in pair)
        self._num_inputs = graph.num_inputs
        self._num_outputs = graph.num_outputs
        self._unpack = graph.unpack
        self._concrete = graph.concrete
        self._commit = graph.commit
        self._stores = graph.store_factory
        self._snapshot = graph.snapshot
        # put back when a statement run after the graph raises: their values come last in the
        # graph's outputs (presaved), or are read before each call
        self._later = graph.presaved or graph.later_snapshot
        self._row_saves = graph.row_saves
        self._saver = VariableSaver((*self._snapshot, *(() if graph.presaved else self._later)))
        self._effects = bool(graph.state_writes) or graph.commit is not None or graph.store_factory is not None
        self.warm = False  # the first call instantiates and optimises the function: part of its build

    def __call__(self, flat: list, args: tuple) -> object:
        """Runs the graph on ``flat`` inputs; commits its heap writes; returns the packed result.

        A graph with effects runs and commits as a whole: Ctrl-C is delivered after it.
        """
        if self._effects:
            return interrupts.run_whole(lambda: self._run(flat, args))
        return self._run(flat, args)

    def _run(self, flat: list, args: tuple) -> object:
        saved = self._saver.save()
        try:
            if record.could_possibly_record():
                ctx = context.context()
                previous, ctx.function_call_options = ctx.function_call_options, self._call_options
                try:
                    outputs = self._concrete._call_flat(flat[: self._num_inputs], flat[self._num_inputs :])
                finally:
                    ctx.function_call_options = previous
            else:
                ctx = context.context()
                outputs = pywrap_tfe.TFE_Py_Execute(ctx._handle, None, self._name, flat, self._attrs, self._num_outputs)
        except tf.errors.OpError as err:
            if self._stores is not None:
                self._stores.finish(commit=False)
            assumption = failed_assumption_id(err)
            if assumption is not None or recoverable(err, self.graph):  # the call is re-run eagerly
                for variable, value in zip(self._snapshot, saved):  # undo the updates that ran before the error
                    variable.assign(value)
                for rows in reversed(self._row_saves):  # the last scatter's rows first
                    rows.restore()
            else:
                for rows in self._row_saves:
                    rows.discard()
            if assumption is not None:  # a loop's earlier iterations may have updated variables
                raise AssumptionFailed(assumption) from None
            raise  # past updates eager made too (before a tf.print that ran): they stay, as in eager
        if self._stores is not None:  # every assumption held: the run-time objects' writes first
            self._stores.finish(commit=True)
        result, values = self._unpack(outputs, args)
        if self._commit is not None:  # then the heap writes of the fast path, in program order
            if self._later:
                later_saved = outputs[len(outputs) - len(self._later) :] if self.graph.presaved else (
                    saved[len(self._snapshot) :]
                )  # fmt: skip
                self._commit_or_restore(values, args, later_saved)
            else:
                self._commit(values, *args)
        return result

    def _commit_or_restore(self, values: list, args: tuple, saved: list) -> None:
        """The commit of a graph with statements run after it (janus.graphgen.later): where one
        raises, the variables the graph updated after it are put back, as eager never got there."""
        try:
            self._commit(values, *args)
        except BaseException:
            for variable, value in zip(self._later, saved):
                variable.assign(value)
            raise


class VariableSaver:
    """The values of some variables before a call, read in one function call (an eager
    ``read_value`` costs two ops each). The values share the variables' buffers until the graph
    updates them, which then copies them (copy-on-write): a variable the call does not update
    costs nothing more."""

    __slots__ = ("variables", "_reader", "_name", "_captures", "_count")

    def __init__(self, variables: tuple) -> None:
        self.variables = variables
        self._count = len(variables)
        if not variables:
            return
        reader = tf.function(
            lambda: [tf.raw_ops.ReadVariableOp(resource=v.handle, dtype=v.dtype) for v in variables],
            autograph=False,
        ).get_concrete_function()
        name = reader._inference_function.name  # noqa: SLF001 - the lean call path, as GraphRunner's
        self._name = name.decode() if isinstance(name, bytes) else name
        self._captures = list(reader.captured_inputs)
        self._reader = reader  # the eager context keeps the function only while it lives

    def save(self) -> list:
        if not self._count:
            return []
        ctx = context.context()
        return pywrap_tfe.TFE_Py_Execute(ctx._handle, None, self._name, self._captures, (), self._count)


def _call_options(options: FunctionCallOptions, recursive: bool) -> FunctionCallOptions:
    """The context's call options, without Grappler's arithmetic optimizer and constant folding, and
    for graphs with recursive calls also without its dependency optimizer.

    The arithmetic optimizer reassociates sums and products: on deep nets (ResNet50 at
    initialisation) that changed gradients by 1-3% against eager. Without it they agree to ~1e-7.

    Constant folding regroups constants too (``x * 1e30 * 1e10`` as ``x * (1e30 * 1e10)``: inf in
    float32 where eager gives 1e30 for x = 1e-10; ``x + 0.1 + 0.2`` as ``x + 0.3``) and drops ``x + 0``
    (``-0.0 + 0.0`` is ``0.0`` in eager) and ``x * 1``. A LeNet training step ran no slower without it.

    With it, a variable read whose consumer waits on an asynchronous JanusInvoke was seen to run
    after that variable's update in the same graph (the read->update control edge removed as
    implied by a path through an IdentityN that a later rewrite bypasses), so the forward pass
    used updated weights (tests/test_recursion.py, a Keras optimizer step).
    """
    config = config_pb2.ConfigProto()
    if options.config_proto_serialized:
        config.ParseFromString(options.config_proto_serialized)
    rewrites = config.graph_options.rewrite_options
    rewrites.arithmetic_optimization = rewriter_config_pb2.RewriterConfig.OFF
    rewrites.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    if recursive:
        rewrites.dependency_optimization = rewriter_config_pb2.RewriterConfig.OFF
    return FunctionCallOptions(executor_type=options.executor_type, config_proto=config)
