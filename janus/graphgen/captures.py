"""Eager tensors enter janus's graphs as placeholders, never as constants.

TF captures a small eager tensor (128 elements or fewer) into a function as a ``Const`` op
holding its value at trace time, turned into an input of the FunctionDef only when the function
is finalised. Shape inference and ``tf.get_static_value`` read that value while the graph is
built. janus feeds such tensors anew on every call: a Python number of a relaxed argument or
attribute (``GenerationContext.number_input``, whose trace-time value is a stand-in 0), a tensor
held on the heap (``self.scale``), a heap store's handle. Built on their trace-time values,
``tf.zeros([n, 2]).shape[0]`` read 0 while generating, baked into the graph for every ``n``, and
``tf.reshape(x, [n, -1])`` failed to build. So while janus builds a graph, every eager tensor is
captured as a placeholder: its shape and dtype are known, its value is not.

TF reads its threshold from a module global; janus puts there a number that reads as -1 only in
a thread generating a janus graph, so a ``tf.function`` another thread traces meanwhile keeps
TF's constants (and the static shapes computed from them).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from tensorflow.core.function.capture import capture_container

_lock = threading.Lock()
_depth = 0  # generations open, in every thread
_generating = threading.local()  # .depth: generations open in this thread


class _Threshold(int):
    """TF's threshold, compared as ``size <= threshold``: -1 in a thread generating a janus graph.

    An ``int`` subclass, so Python asks its reflected ``__ge__`` first."""

    def __ge__(self, size: object) -> bool:
        return size <= (-1 if getattr(_generating, "depth", 0) else int(self))


@contextlib.contextmanager
def eager_tensors_as_placeholders() -> Iterator[None]:
    """While it is open, TF captures every eager tensor into a function graph that this thread
    traces as a placeholder; other threads' ``tf.function`` traces are unchanged."""
    global _depth
    with _lock:
        if _depth == 0:
            capture_container._EAGER_CONST_THRESHOLD = _Threshold(capture_container._EAGER_CONST_THRESHOLD)  # noqa: SLF001 - TF has no option for it
        _depth += 1
    _generating.depth = getattr(_generating, "depth", 0) + 1
    try:
        yield
    finally:
        _generating.depth -= 1
        with _lock:
            _depth -= 1
            if _depth == 0:
                capture_container._EAGER_CONST_THRESHOLD = int(capture_container._EAGER_CONST_THRESHOLD)  # noqa: SLF001
