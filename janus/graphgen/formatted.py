"""Text formatted from values known only at run time, built after the graph ran.

``f"loss {loss}"``, ``"loss {}".format(loss)``, ``"%s" % loss`` and ``str(loss)`` on a graph
tensor must give what eager gives: the text of the *value*, an EagerTensor's ``repr``. While
generating, such text is a ``Formatted``: the formatting call and its arguments. The arguments
become graph outputs, and the text is made after the graph succeeded, from the materialised
values, where the text is printed, logged, stored or returned. Any other use of it (comparing,
slicing, truth) needs the text now: janus refuses it and the function runs imperatively.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(eq=False)
class Formatted:
    """``make(*args, **kwargs)`` evaluated with the materialised arguments."""

    make: Callable[..., str]
    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)


def formatted_trial(formatted: Formatted) -> str | None:
    """Formats with stand-ins of the run-time values (zeros of their dtypes and static shapes), so
    that formatting that raises in eager whatever the values (a float spec on a vector) is found
    while generating. None where a stand-in cannot be made (unknown shapes, user objects)."""
    try:
        args = tuple(_stand_in(v) for v in formatted.args)
        kwargs = {k: _stand_in(v) for k, v in formatted.kwargs.items()}
    except _NoStandIn:
        return None
    return formatted.make(*args, **kwargs)


class _NoStandIn(Exception):
    pass


def _stand_in(value: object) -> object:
    import numpy as np
    import tensorflow as tf

    from janus.graphgen.pynumber import PyNumber
    from janus.graphgen.values import is_plain

    if isinstance(value, PyNumber):
        return value.type(0)
    if isinstance(value, Formatted):
        text = formatted_trial(value)
        if text is None:
            raise _NoStandIn
        return text
    if isinstance(value, (tf.Tensor, tf.Variable)):
        if not value.shape.is_fully_defined() or value.dtype == tf.resource:
            raise _NoStandIn
        with tf.init_scope():
            return tf.zeros(value.shape, value.dtype)
    if type(value) in (list, tuple):
        return type(value)(_stand_in(v) for v in value)
    if type(value) is dict:
        return {k: _stand_in(v) for k, v in value.items()}
    if value is None or is_plain(value) or isinstance(value, np.ndarray):
        return value
    raise _NoStandIn


def join_fstring(layout: tuple, *values: object) -> str:
    """An f-string: ``layout`` holds literal text (str) and (conversion, spec) pairs for values."""
    parts, items = [], iter(values)
    for piece in layout:
        if isinstance(piece, str):
            parts.append(piece)
            continue
        conversion, spec = piece
        value = next(items)
        if conversion is not None:
            value = conversion(value)
        parts.append(format(value, spec))
    return "".join(parts)
