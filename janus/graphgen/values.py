"""How the generator classifies values: symbolic tensors, plain data, library and user objects."""

from __future__ import annotations

import types

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.ops import EagerTensor

from janus.graphgen.pynumber import PyNumber
from janus.source.library import is_library_class, is_library_object, is_user_function

PLAIN_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), slice)
PLAIN_CONTAINERS = (tuple, list, dict, set, frozenset, range)


def is_symbolic(value: object) -> bool:
    """A graph tensor produced while generating (not an eager value)."""
    return isinstance(value, tf.Tensor) and not isinstance(value, EagerTensor)


def truth_tensor(value: tf.Tensor) -> tf.Tensor:
    """The scalar boolean ``bool(value)`` gives in eager; fails at run time where ``value`` is not one element.

    A value already known to be a scalar is not reshaped: the node would run at every call, and
    at every tree node of a recursive function.
    """
    scalar = value if value.shape.rank == 0 else tf.reshape(value, [])
    return tf.cast(scalar, tf.bool)


_MAX_NESTING = 64  # containers nested deeper count as neither plain nor safe (no RecursionError)


def is_plain(value: object, _within: tuple[int, ...] = ()) -> bool:
    """Data whose operators are Python's own: safe to fold while generating. A container that
    holds itself is not (its operators would recurse)."""
    if isinstance(value, (*PLAIN_SCALARS, np.generic)):
        return True
    if type(value) in PLAIN_CONTAINERS:
        if isinstance(value, range):
            return True
        if id(value) in _within or len(_within) >= _MAX_NESTING:
            return False
        within = (*_within, id(value))
        if isinstance(value, dict):
            return all(is_plain(k, within) and is_plain(v, within) for k, v in value.items())
        return all(is_plain(v, within) for v in value)
    return False


def is_safe_operand(value: object, _within: tuple[int, ...] = ()) -> bool:
    """A value whose operator methods are library code (never user code)."""
    if isinstance(value, PyNumber):
        return False  # only janus.graphgen.pynumber may operate on it
    if is_symbolic(value) or is_plain(value):
        return True
    if type(value) in PLAIN_CONTAINERS:
        if isinstance(value, range):
            return True
        if id(value) in _within or len(_within) >= _MAX_NESTING:
            return False
        items = value.values() if isinstance(value, dict) else value
        return all(is_safe_operand(v, (*_within, id(value))) for v in items)
    return is_library_class(type(value))


def is_user_object(value: object) -> bool:
    """An instance (or function) whose behaviour is user code."""
    if is_user_function(value):
        return True
    if isinstance(value, (types.ModuleType, type)):
        return not is_library_object(value)
    return not is_library_class(type(value))
