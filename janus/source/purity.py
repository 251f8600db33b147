"""The rule for what may run while a graph is generated: one allow-list, in one place.

While janus generates a graph it may execute only calls whose whole effect becomes graph
ops or is checked by a guard. Every callable reached by converted code is classified here:

- ``GRAPH``: TensorFlow's op API and Keras internals. They run on symbolic tensors, inside
  the sandbox (``janus.graphgen.sandbox``) that refuses the generation if they reach user code.
- ``PURE``: Python computations with no effect (``math``, ``operator``, NumPy arithmetic,
  methods of builtin values). Run only on values known while generating.
- ``DEFERRED``: calls made only for their effect (``logging``, ``warnings.warn``, ``print``,
  ``tf.summary``): replayed after the graph succeeded, with the materialised values, in
  program order, exactly as eager calls them. Only where their result is unused.
- ``CONVERTED``: janus answers as eager would (``tf.executing_eagerly()`` is True).
- ``REFUSED``: everything else (host randomness, clocks, files, the environment, unknown
  libraries). The function runs imperatively and ``explain()`` names the call.

Anything not listed is refused: an unknown callable never runs while generating.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import logging
import types
import warnings
from collections.abc import Callable

import numpy as np


class Effect(enum.Enum):
    GRAPH = "graph"
    PURE = "pure"
    DEFERRED = "deferred"
    CONVERTED = "converted"
    REFUSED = "refused"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """How converted code may use a callable, and why."""

    effect: Effect
    name: str  # the callable as users know it, e.g. "random.random", "logging.info"
    reason: str = ""
    answer: Callable[..., object] | None = None  # CONVERTED: computes eager's result from the arguments


# TensorFlow modules whose callables only build ops (or describe values) on graph tensors.
_GRAPH_MODULES = (
    "tensorflow.python.ops.",
    "tensorflow.python.eager.backprop",
    "tensorflow.python.eager.forwardprop",
    "tensorflow.python.framework.constant_op",
    "tensorflow.python.framework.dtypes",
    "tensorflow.python.framework.indexed_slices",
    "tensorflow.python.framework.ops",
    "tensorflow.python.framework.sparse_tensor",
    "tensorflow.python.framework.tensor",
    "tensorflow.python.framework.tensor_conversion",
    "tensorflow.python.framework.tensor_shape",
    "tensorflow.python.framework.tensor_util",
    "tensorflow.python.util.nest",
    "tensorflow.python.data.ops.",  # tf.data pipelines: graph datasets (iterated by janus/graphgen/datasets.py)
    "keras.",
    "tf_keras.",
    "horovod.tensorflow",  # collectives (allreduce, broadcast) and DistributedGradientTape: graph ops
    "horovod.common",  # rank(), size(): fixed for the process
)
# Writers of TensorBoard summaries: effects on the default writer, replayed after the graph.
_SUMMARY_MODULES = (
    "tensorflow.python.ops.summary_ops_v2",
    "tensorflow.python.summary.",
    "tensorboard.",
)
_SUMMARY_WRITES = frozenset(
    {"scalar", "histogram", "text", "image", "audio", "write", "graph", "set_step", "flush"}
)  # fmt: skip
# In an allowed module but not graph-building: they touch process state while generating.
_HOST_STATE = frozenset(
    {
        "init_scope", "get_default_graph", "executing_eagerly_outside_functions", "inside_function",
        "enable_eager_execution", "disable_eager_execution", "reset_default_graph", "clear_session",
        "set_value", "get_value", "batch_get_value", "batch_set_value", "print_msg", "set_seed",
        "set_random_seed", "init", "shutdown",
    }
)  # fmt: skip
# tf.data methods that touch files or run the pipeline in Python while the graph is built.
_DATA_HOST = frozenset({"save", "load", "snapshot", "as_numpy_iterator"})
# Tensor and variable methods that read a value into Python: in a graph the value is not known yet.
MATERIALIZING = frozenset(
    {
        "numpy", "_numpy", "__array__", "item", "tolist", "__bool__", "__float__", "__int__",
        "__index__", "__complex__", "__format__", "__repr__", "__str__", "eval", "__reduce__",
    }
)  # fmt: skip
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "log"})
_PURE_MODULES = frozenset({"math", "cmath", "operator"})
_NUMPY_PURE = frozenset(
    {
        "array", "asarray", "zeros", "ones", "full", "arange", "linspace", "eye", "identity", "prod",
        "sum", "mean", "std", "var", "min", "max", "amin", "amax", "argmax", "argmin", "clip",
        "concatenate", "stack", "reshape", "transpose", "where", "cumsum", "cumprod", "dot", "matmul",
        "round", "shape", "ndim", "size", "finfo", "iinfo", "dtype", "broadcast_to", "expand_dims",
        "squeeze", "tile", "repeat", "outer", "allclose", "isclose", "array_equal", "zeros_like",
        "ones_like", "full_like", "sort", "argsort", "unique", "diag", "triu", "tril", "pad", "flip",
    }
)  # fmt: skip
_BUILTIN_VALUE_TYPES = (str, bytes, int, float, complex, bool, tuple, list, dict, set, frozenset, range, slice)
# tf.compat.v1.train optimizers whose minimize(loss_fn) is graph ops on the same path as eager's (a tape
# around loss_fn, then resource updates); their Python settings are guarded like a Keras object's.
_V1_OPTIMIZER_MODULES = frozenset(
    {"tensorflow.python.training.gradient_descent", "tensorflow.python.training.momentum"}
)


def qualified_name(callee: object) -> str:
    """``module.qualname`` of a callable, or of the method's owner class for bound methods."""
    owner = getattr(callee, "__self__", None)
    name = getattr(callee, "__name__", None) or type(callee).__name__
    if owner is not None and not isinstance(owner, types.ModuleType):
        cls = owner if isinstance(owner, type) else type(owner)
        return f"{_module_of(cls)}.{cls.__qualname__}.{name}".lstrip(".")
    if isinstance(owner, types.ModuleType):
        return f"{owner.__name__}.{name}"
    qualname = getattr(callee, "__qualname__", None) or name
    return f"{_module_of(callee)}.{qualname}".lstrip(".")


def _module_of(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str):
        module = getattr(type(obj), "__module__", None) or ""
    return module


def implementation_module(callee: object) -> str:
    """The module whose code a call of ``callee`` runs."""
    func = getattr(callee, "__func__", None)
    if func is not None:
        return _module_of(func)
    if isinstance(callee, type):
        return _module_of(callee)
    if isinstance(callee, (types.FunctionType, types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(callee, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType) and not isinstance(callee, types.FunctionType):
            return _module_of(type(owner) if not isinstance(owner, type) else owner)
        return _module_of(callee)
    call = inspect.getattr_static(type(callee), "__call__", None)
    return _module_of(call) if call is not None else _module_of(type(callee))


def _refused(name: str, why: str = "") -> Verdict:
    reason = why or f"{name}() is not known to be free of Python effects (janus would bake its result into the graph)"
    return Verdict(Effect.REFUSED, name, reason)


def classify(callee: object) -> Verdict:
    """The verdict for a library callable reached by converted code (user functions are converted)."""
    name = qualified_name(callee)
    if callee is print:
        return Verdict(Effect.DEFERRED, "print")
    if callee is warnings.warn:
        return Verdict(Effect.DEFERRED, "warnings.warn")
    if _is_logging_call(callee):
        return Verdict(Effect.DEFERRED, name)
    module = implementation_module(callee)
    short = getattr(callee, "__name__", "")
    if short == "executing_eagerly" and module.startswith("tensorflow.python.eager.context"):
        return Verdict(Effect.CONVERTED, name, answer=lambda *a, **k: True)  # eager's answer inside the function
    if module.startswith(_SUMMARY_MODULES):
        if short in _SUMMARY_WRITES:
            return Verdict(Effect.DEFERRED, name)
        return _refused(name, f"{name}() reads or changes TensorBoard summary state")
    if isinstance(callee, (types.FunctionType, types.MethodType, type)) or callable(callee):
        owner = getattr(callee, "__self__", None)
        if short in MATERIALIZING and _is_tensor_like(owner):
            return _refused(name, f"{name}() reads a tensor's value into Python")
    owner = getattr(callee, "__self__", None)
    if short == "minimize" and is_v1_optimizer(owner):
        return Verdict(Effect.GRAPH, name)  # only with a loss function, as a statement (janus.graphgen.handed)
    if isinstance(owner, (list, dict, set)) and not isinstance(owner, type):
        return Verdict(Effect.PURE, name)  # a container's method, library subclasses too (TrackedList)
    if module.startswith("janus."):
        return Verdict(Effect.GRAPH, name)  # janus's own stand-ins for run-time values
    if module.startswith(_GRAPH_MODULES):
        if short in _HOST_STATE:
            return _refused(name, f"{name}() touches process state while the graph is built")
        if short in _DATA_HOST and module.startswith("tensorflow.python.data."):
            return _refused(name, f"{name}() reads or writes files, or runs the pipeline, while the graph is built")
        if isinstance(callee, type) and _creates_state(callee):
            return _refused(name, f"constructing {name} creates new state on every eager call")
        return Verdict(Effect.GRAPH, name)
    if module in _PURE_MODULES or module.split(".")[0] in _PURE_MODULES:
        return Verdict(Effect.PURE, name)
    if _is_numpy_pure(callee, module, short):
        return Verdict(Effect.PURE, name)
    if logging.getLogger is callee:
        return Verdict(Effect.PURE, name)
    if isinstance(callee, types.BuiltinMethodType) and type(owner) in _BUILTIN_VALUE_TYPES:
        return Verdict(Effect.PURE, name)
    return _refused(name)


def is_v1_optimizer(obj: object) -> bool:
    """A ``tf.compat.v1.train`` optimizer of a class janus knows (not a user subclass)."""
    return type(obj).__module__ in _V1_OPTIMIZER_MODULES


def _is_logging_call(callee: object) -> bool:
    if getattr(callee, "__module__", None) == "logging" and isinstance(callee, types.FunctionType):
        return callee.__name__ in _LOG_METHODS and getattr(logging, callee.__name__, None) is callee
    owner = getattr(callee, "__self__", None)
    return isinstance(owner, logging.Logger) and getattr(callee, "__name__", "") in _LOG_METHODS


def _is_numpy_pure(callee: object, module: str, short: str) -> bool:
    if isinstance(callee, np.ufunc):
        return True  # element-wise arithmetic
    if module.startswith("numpy.random") or not module.startswith("numpy"):
        return False
    if isinstance(callee, type) and issubclass(callee, np.generic):
        return True  # np.float32(x) and friends
    return short in _NUMPY_PURE and getattr(np, short, None) is callee


def _is_tensor_like(value: object) -> bool:
    import tensorflow as tf

    return isinstance(value, (tf.Tensor, tf.Variable))


def _creates_state(cls: type) -> bool:
    """Classes whose every construction makes new variables or RNG state (eager makes them per call)."""
    import tensorflow as tf

    if issubclass(cls, tf.Variable):
        return True
    return any(k.__name__ in ("Layer", "Optimizer", "Metric", "Model") for k in cls.__mro__)


# Context managers converted code may enter while generating: they only scope the graph being built.
_MANAGERS = frozenset(
    {
        ("tensorflow.python.eager.backprop", "GradientTape"),
        ("tensorflow.python.framework.ops", "name_scope_v2"),
        ("tensorflow.python.framework.ops", "name_scope_v1"),
        ("tensorflow.python.framework.ops", "Graph._ControlDependenciesController"),
    }
)


def is_graph_scope(manager: object) -> bool:
    """A ``with`` manager whose whole effect is on the graph (tape, name scope, device, dependencies)."""
    cls = type(manager)
    if (cls.__module__, cls.__qualname__) in _MANAGERS:
        return True
    if cls.__module__.startswith(("keras.", "tf_keras.")) and cls.__qualname__ == "name_scope":
        return True
    func = getattr(manager, "func", None)  # contextlib: tf.device() inside a graph
    return (
        cls.__module__ == "contextlib"
        and getattr(func, "__module__", "") == "tensorflow.python.framework.ops"
        and getattr(func, "__qualname__", "").startswith(("device.", "Graph.device"))
    )
