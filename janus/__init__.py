"""janus: speculative graph generation for imperative TensorFlow 2 programs.

    import janus

    @janus.jit
    def train_step(x, y): ...

The first calls run imperatively under a profiler; then janus builds a TensorFlow
graph specialised on what it saw, guarded by runtime checks, and falls back to eager
execution (and relaxes its assumptions) whenever a check fails. Results never differ
from eager execution.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable

from janus import tfcheck

tfcheck.require()  # before anything imports TensorFlow: a clear message if it is missing or too old

from janus.config import Config, config  # noqa: E402
from janus.diagnostics.report import report  # noqa: E402
from janus.driver import BoundJit, JitFunction, PartialJit, all_functions, resolve  # noqa: E402
from janus.explain import explain  # noqa: E402
from janus.graphgen.errors import StrictModeError  # noqa: E402
from janus.partial import segment_calls  # noqa: E402
from janus.saved_model import ExportError, JitNotSavedWarning, export, install_save_hook  # noqa: E402
from janus.transparent import disable, enable, enabled  # noqa: E402

__all__ = [
    "Config",
    "ExportError",
    "JitNotSavedWarning",
    "StrictModeError",
    "config",
    "disable",
    "enable",
    "enabled",
    "explain",
    "export",
    "jit",
    "report",
    "reset",
    "stats",
]

install_save_hook()  # tf.saved_model.save warns about the @janus.jit methods a SavedModel leaves out


def jit(fn: Callable | None = None, *, profile_calls: int | None = None, strict: bool = False):
    """Serves calls of ``fn`` from speculatively generated TensorFlow graphs.

    Usable as ``@janus.jit``, ``@janus.jit(profile_calls=5)`` or ``janus.jit(f)``; on
    plain functions and on methods (each instance gets its own specialisation), and on a
    bound method (``janus.jit(model.step)``), a ``functools.partial`` or a callable object.
    ``strict=True`` raises ``janus.StrictModeError`` where the function would run
    imperatively for good, instead of falling back (and warning once).
    """
    if fn is None:
        return lambda f: jit(f, profile_calls=profile_calls, strict=strict)
    if isinstance(fn, (JitFunction, BoundJit, PartialJit)):
        return fn
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return BoundJit(JitFunction(fn.__func__, profile_calls=profile_calls, strict=strict), fn.__self__)
    if isinstance(fn, functools.partial):
        return PartialJit(jit(fn.func, profile_calls=profile_calls, strict=strict), fn.args, fn.keywords)
    call = inspect.getattr_static(type(fn), "__call__", None)
    if not isinstance(fn, (types.FunctionType, type)) and isinstance(call, JitFunction):
        return BoundJit(call, fn)  # a callable object whose class's __call__ is @janus.jit already
    if not isinstance(fn, (types.FunctionType, type)) and isinstance(call, types.FunctionType):
        return BoundJit(JitFunction(call, profile_calls=profile_calls, strict=strict), fn)  # a callable object
    return JitFunction(fn, profile_calls=profile_calls, strict=strict)


def stats(fn: object) -> dict[str, float]:
    """Counters of a jitted function (or a bound method of one).

    Keys include ``calls``, ``graph_calls``, ``imperative_calls``, ``fallbacks``,
    ``graphs_built`` and ``assumption_failures``; for a function that runs split
    (``janus.config.partial_graphs``), ``split_calls`` counts its calls and ``segment_calls``
    the calls of its segments that graphs served.
    """
    jf = resolve(fn)
    return {**jf.stats.as_dict(), "segment_calls": segment_calls(jf)}


def reset() -> None:
    """Forgets every profile, graph and counter; functions start profiling again."""
    for jf in all_functions():
        jf.reset()
