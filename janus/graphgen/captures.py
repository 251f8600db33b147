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
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from tensorflow.core.function.capture import capture_container

_lock = threading.RLock()
_depth = 0
_saved_threshold = capture_container._EAGER_CONST_THRESHOLD  # noqa: SLF001 - TF has no option for it


@contextlib.contextmanager
def eager_tensors_as_placeholders() -> Iterator[None]:
    """While it is open, TF captures every eager tensor into a function graph as a placeholder.

    TF reads the threshold from a module global: the change is process-wide while any graph
    generation runs, so a ``tf.function`` traced meanwhile in another thread also takes its small
    eager tensors as inputs, which computes the same values."""
    global _depth, _saved_threshold
    with _lock:
        if _depth == 0:
            _saved_threshold = capture_container._EAGER_CONST_THRESHOLD  # noqa: SLF001
            capture_container._EAGER_CONST_THRESHOLD = -1  # noqa: SLF001
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                capture_container._EAGER_CONST_THRESHOLD = _saved_threshold  # noqa: SLF001
