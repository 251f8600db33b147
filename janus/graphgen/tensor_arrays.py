"""A user's ``tf.TensorArray`` in a graph, with eager's read semantics.

Eager's TensorArray clears an element when it is read (``clear_after_read``, on by default): a later
``stack()`` shows zeros there, and a second ``read`` raises. A graph's TensorArray (a TensorList)
ignores the setting. So janus remembers, per array (and the arrays its writes return), whether reads
clear, and refuses a ``read`` of one that does: the fix is ``clear_after_read=False``, under which
eager and graphs agree.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

from janus.graphgen.errors import NotConvertible

_CLEARS = "_janus_clears_after_read"


def created(array: object, kwargs: dict) -> None:
    """``tf.TensorArray(...)`` returned ``array``: whether its reads clear, as eager's would."""
    if isinstance(array, tf.TensorArray):
        setattr(array, _CLEARS, kwargs.get("clear_after_read") is not False)


def derived(result: object, array: tf.TensorArray) -> None:
    """``array.write(...)`` (scatter, unstack, a loop's new flow) returned ``result``: the same array."""
    if isinstance(result, tf.TensorArray) and result is not array:
        setattr(result, _CLEARS, clears(array))


def clears(array: tf.TensorArray) -> bool:
    """Whether reads of ``array`` clear its elements in eager (unknown origin: assume they do)."""
    return getattr(array, _CLEARS, True)


def check_call(method: object, loc: str) -> None:
    """Refuses ``read`` of an array whose reads clear in eager, and any use of an array made outside
    the graph (eager's holds its elements in Python: a graph can neither read nor extend it)."""
    array = getattr(method, "__self__", None)
    if isinstance(array, tf.TensorArray):
        check_made_in_graph(array, loc)
    if isinstance(array, tf.TensorArray) and getattr(method, "__name__", "") == "read" and clears(array):
        raise NotConvertible(
            "TensorArray.read() clears the element in eager (clear_after_read=True, the default), not in a "
            "graph: create it with clear_after_read=False",
            loc,
        )


def check_made_in_graph(array: tf.TensorArray, loc: str) -> None:
    """Refuses an array made outside the graph: eager's holds its elements in Python, where a graph
    can neither read nor extend them."""
    if isinstance(array.flow, EagerTensor):
        raise NotConvertible("uses a tf.TensorArray made outside the graph, which holds its elements in Python", loc)
