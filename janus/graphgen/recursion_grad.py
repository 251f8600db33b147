"""Gradients of recursive graph functions: a backward function that invokes itself.

The backward function is TF's symbolic gradient of the forward body (``_GradientsHelper`` with
the body as source graph). The gradient of each ``JanusInvoke`` inside the body is a
``JanusInvokeGrad`` of the same backward function, fed the invocation's frame: the forward
tensors the backward needs, which the forward function returns after its outputs and the
kernel packs, one frame per invocation. Variables' gradients are declared dense first; those
that come out as ``IndexedSlices`` (embedding tables) are then declared sparse.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import tensorflow as tf
from tensorflow.python.eager import backprop_util, context
from tensorflow.python.eager.polymorphic_function import atomic_function
from tensorflow.python.framework import func_graph as func_graph_module
from tensorflow.python.framework import ops
from tensorflow.python.ops import gradients_util, handle_data_util

from janus.config import config
from janus.graphgen import function_trim
from janus.graphgen.errors import NotConvertible
from janus.ops.assert_op import _ops

if TYPE_CHECKING:
    from janus.graphgen.recursion import RecursiveFunction

registry: dict[str, RecursiveFunction] = {}  # function name -> its RecursiveFunction (for _invoke_grad)


def shapes(shapes: list) -> list:
    return [tf.TensorShape(s) for s in shapes]


def add_to_graphs(function: object) -> None:
    graph = ops.get_default_graph()
    while graph is not None:
        if not graph._is_function(function.name):  # noqa: SLF001
            graph._add_function_recursive(function)  # noqa: SLF001
        graph = getattr(graph, "outer_graph", None)


def differentiate(rf: RecursiveFunction, graph, loc: str, kinds: list[str] | None = None) -> list[str] | None:
    """Builds the backward function and makes the forward ``graph`` output what it needs.

    ``kinds`` declares each trainable input's gradient (dense first where not given). Returns None
    when the backward is built (or nothing is differentiable), or the kinds the gradient really
    has (an embedding table's comes out sparse): the caller then traces a fresh ``graph`` and
    calls again with them, because an attempt leaves the intermediates it needed on the graph's
    conds.

    The conds hand their intermediates to the backward as plain tensors (``FakeParam``s from the
    branch that did not compute them), as TF builds cond gradients for XLA, not wrapped in
    optionals: an optional cost a variant allocation forward and a node each way, per value, per
    invocation. Only this thread's build takes that form (``_building_backward``).
    """
    n_out = len(rf.outputs.dtypes)
    rf.trainable_outputs = [i for i, t in enumerate(graph.outputs[:n_out]) if _trainable(t.dtype)]
    rf.trainable_inputs = [i for i, t in enumerate(graph.inputs) if _trainable(t.dtype)]
    if not rf.trainable_outputs or not rf.trainable_inputs:
        return None
    kinds = kinds or ["dense"] * len(rf.trainable_inputs)
    try:
        with _building_backward():
            actual = _build_backward(rf, graph, kinds, loc)
    except LookupError as err:  # a persistent tape open around the call records the backward's own ops
        why = str(err).split(". ")[0]
        raise NotConvertible(f"the gradient of a recursive function cannot be built here ({why})", loc) from None
    return None if actual == kinds else actual


_building = threading.local()  # .active: this thread builds a backward
_install_lock = threading.Lock()


@contextlib.contextmanager
def _building_backward():
    """While this thread builds a backward: frames carry no gradient, conds hand plain intermediates.

    TF would feed a ``JanusInvoke``'s frame output a ``ZerosLike`` per invocation that nothing
    reads (``_invoke_grad`` never reads the frame's gradient); TF asks
    ``backprop_util.IsTrainable``. TF's cond gradient wraps intermediates in optionals unless
    ``context.optionals_in_gradients_enabled()`` says no (its form for XLA). TF's own switch for
    that is process-wide, so a cond gradient another thread built meanwhile (janus's or the
    user's own ``tf.function``) would mix the two forms and fail; janus's wrappers of both
    functions answer for this thread's build only and defer to TF everywhere else.
    """
    with _install_lock:
        if not getattr(backprop_util.IsTrainable, "_janus", False):
            backprop_util.IsTrainable = _is_trainable_wrapper(backprop_util.IsTrainable)
        if not getattr(context.optionals_in_gradients_enabled, "_janus", False):
            context.optionals_in_gradients_enabled = _optionals_wrapper(context.optionals_in_gradients_enabled)
    outer = getattr(_building, "active", False)
    _building.active = True
    try:
        yield
    finally:
        _building.active = outer


def _is_trainable_wrapper(trainable: Callable[[object], bool]) -> Callable[[object], bool]:
    def is_trainable(tensor_or_dtype) -> bool:
        op = getattr(tensor_or_dtype, "op", None)
        building = getattr(_building, "active", False)
        if (
            building
            and op is not None
            and op.type == "JanusInvoke"
            and tensor_or_dtype.value_index == len(op.outputs) - 1
        ):
            return False
        return trainable(tensor_or_dtype)

    is_trainable._janus = True  # noqa: SLF001
    return is_trainable


def _optionals_wrapper(enabled: Callable[[], bool]) -> Callable[[], bool]:
    def optionals_in_gradients_enabled() -> bool:
        return False if getattr(_building, "active", False) else enabled()

    optionals_in_gradients_enabled._janus = True  # noqa: SLF001
    return optionals_in_gradients_enabled


def _trainable(dtype: tf.DType) -> bool:
    return dtype.is_floating or dtype.is_complex or dtype == tf.resource


def _build_backward(rf: RecursiveFunction, graph, kinds: list[str], loc: str) -> list[str]:
    """One attempt with ``kinds`` declared; returns the kinds the gradient really had."""
    rf.grad_kinds = kinds
    _declare_grad_outputs(rf, graph)
    n_out = len(rf.outputs.dtypes)
    ys = [graph.outputs[i] for i in rf.trainable_outputs]
    xs = [graph.inputs[i] for i in rf.trainable_inputs]
    dy_specs = [tf.TensorSpec(y.shape, y.dtype) for y in ys]
    actual: list[str] = []

    def backward(*dys):
        grads = gradients_util._GradientsHelper(ys, xs, grad_ys=list(dys), src_graph=graph)  # noqa: SLF001
        flat = []
        for kind, x, g in zip(kinds, xs, grads):
            actual.append("none" if g is None else "sparse" if isinstance(g, tf.IndexedSlices) else "dense")
            if kind == "none":
                continue
            if kind == "sparse":
                if not isinstance(g, tf.IndexedSlices):
                    g = _as_slices(g, x)
                flat += [g.values, tf.cast(g.indices, tf.int64)]
            else:
                if g is None:
                    g = _zeros_for(x)
                elif isinstance(g, tf.IndexedSlices):
                    g = tf.convert_to_tensor(g)
                flat.append(g)
        return flat

    with graph.as_default():
        grad_graph = func_graph_module.func_graph_from_py_func(
            rf.bwd_name,
            backward,
            dy_specs,
            {},
            func_graph=func_graph_module.FuncGraph(rf.bwd_name),
            add_control_dependencies=False,
        )
    if actual != kinds and not (len(actual) == len(kinds) and _compatible(kinds, actual)):
        return actual
    foreign = [t for t in grad_graph.external_captures if getattr(t, "graph", None) is not graph]
    if foreign:
        raise NotConvertible("the gradient of a recursive function needs values from outside it", loc)
    del graph.outputs[n_out:]
    graph.outputs.extend(grad_graph.external_captures)
    rf.backward = atomic_function.from_func_graph(rf.bwd_name, grad_graph, {})
    if config.trim_functions:
        function_trim.trim_registered(rf.bwd_name)
    return kinds


def _compatible(declared: list[str], actual: list[str]) -> bool:
    """A declaration works when only unused-gradient or sparse-vs-dense differences remain."""
    return all(d == a or (d == "dense" and a in ("none", "sparse")) for d, a in zip(declared, actual)) and not any(
        d == "dense" and a == "sparse" for d, a in zip(declared, actual)
    )


def _declare_grad_outputs(rf: RecursiveFunction, graph) -> None:
    dtypes, shapes = [], []
    for kind, i in zip(rf.grad_kinds, rf.trainable_inputs):
        x = graph.inputs[i]
        if kind == "none":
            continue
        if kind == "sparse":
            value_dtype, value_shape = _variable_dtype_shape(x)
            if value_shape is None:
                raise NotConvertible("a recursive function reads a variable of unknown rank", "")
            dtypes += [value_dtype, tf.int64]
            shapes += [(None, *value_shape[1:]), (None,)]
        else:
            dtype, shape = _variable_dtype_shape(x) if x.dtype == tf.resource else (x.dtype, tuple(x.shape))
            dtypes.append(dtype)
            shapes.append(shape)
    rf.grad_dtypes, rf.grad_shapes = dtypes, shapes


def _variable_dtype_shape(handle: tf.Tensor) -> tuple[tf.DType, tuple | None]:
    data = handle_data_util.get_resource_handle_data(handle)
    if data is None or not data.is_set or not data.shape_and_type:
        raise NotConvertible("a recursive function reads a variable of unknown shape", "")
    entry = data.shape_and_type[0]
    shape = None if entry.shape.unknown_rank else tuple(d.size if d.size >= 0 else None for d in entry.shape.dim)
    return tf.as_dtype(entry.dtype), shape


def _zeros_for(x: tf.Tensor) -> tf.Tensor:
    if x.dtype == tf.resource:
        dtype, shape = _variable_dtype_shape(x)
        return tf.zeros(shape, dtype)
    return tf.zeros_like(x)


def _as_slices(g: tf.Tensor | None, x: tf.Tensor) -> tf.IndexedSlices:
    if g is None:
        dtype, shape = _variable_dtype_shape(x)
        return tf.IndexedSlices(
            tf.zeros((0, *shape[1:]), dtype), tf.zeros((0,), tf.int64), tf.constant(shape, tf.int64)
        )
    return tf.IndexedSlices(g, tf.range(tf.shape(g, out_type=tf.int64)[0]), tf.shape(g, out_type=tf.int64))


@ops.RegisterGradient("JanusInvoke")
def _invoke_grad(op: tf.Operation, *grads) -> list:
    rf = registry[op.get_attr("f").name]
    if not rf.trainable_outputs or not rf.trainable_inputs:
        return [None] * len(op.inputs)
    dys = []
    for i in rf.trainable_outputs:
        g = grads[i]
        if g is None:
            g = tf.zeros_like(op.outputs[i])
        elif isinstance(g, tf.IndexedSlices):
            g = tf.convert_to_tensor(g)
        dys.append(g)
    if rf.backward is not None:
        add_to_graphs(rf.backward)
    flat = _ops().janus_invoke_grad(
        op.outputs[-1],
        dys,
        Tout=rf.grad_dtypes,
        output_shapes=shapes(rf.grad_shapes),
        f=rf.bwd_name,
        single_threaded=op.get_attr("single_threaded"),
    )
    flat = iter(flat)
    result: list = [None] * len(op.inputs)
    for kind, i in zip(rf.grad_kinds, rf.trainable_inputs):
        if kind == "dense":
            result[i] = next(flat)
        elif kind == "sparse":
            _, shape = _variable_dtype_shape(op.inputs[i])  # static int32, as TF's own gather gradient
            result[i] = tf.IndexedSlices(next(flat), next(flat), tf.constant(shape, tf.int32))
    return result
