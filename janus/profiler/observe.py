"""Observations: what the profiler records about one runtime value."""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from janus.config import config

SCALAR_TYPES = (bool, int, float, complex, str, bytes, type(None))


@dataclasses.dataclass(frozen=True)
class TensorObs:
    dtype: tf.DType
    shape: tuple[int | None, ...] | None
    value: np.ndarray | None  # kept only for small tensors, for value specialisation

    def same_value(self, other: TensorObs) -> bool:
        return (
            self.value is not None
            and other.value is not None
            and self.value.shape == other.value.shape
            and self.value.tobytes() == other.value.tobytes()
        )


@dataclasses.dataclass(frozen=True)
class ScalarObs:
    type: type
    value: object


@dataclasses.dataclass(frozen=True, eq=False)
class ObjectObs:
    obj: object


@dataclasses.dataclass(frozen=True)
class SeqObs:
    """A list, tuple or dict (``keys`` set, plain constants only) observed item by item."""

    type: type
    items: tuple
    keys: tuple | None = None


Observation = TensorObs | ScalarObs | ObjectObs | SeqObs
_MAX_NESTING = 64


def observe(value: object, _within: tuple[int, ...] = ()) -> Observation:
    """Describes ``value`` at the granularity the generator specialises on. A list, tuple or dict
    that holds itself (or nests deeper than ``_MAX_NESTING``) is observed as an object there."""
    if type(value) in (tuple, list, dict) and (id(value) in _within or len(_within) >= _MAX_NESTING):
        return ObjectObs(value)
    within = (*_within, id(value))
    if isinstance(value, tf.Tensor) and not isinstance(value, tf.SparseTensor):
        small = value.shape.num_elements()
        # Only integer/bool tensors are value-specialised: a float constant would cut gradients.
        differentiable = value.dtype.is_floating or value.dtype.is_complex
        keep = not differentiable and small is not None and small <= config.small_tensor_elements
        keep = keep and tf.executing_eagerly()  # a function TF traces (a tf.data map/filter): symbolic
        return TensorObs(value.dtype, tuple(value.shape), value.numpy() if keep else None)
    if type(value) in SCALAR_TYPES:
        return ScalarObs(type(value), value)
    if type(value) in (tuple, list) or is_plain_namedtuple(type(value)):
        return SeqObs(type(value), tuple(observe(v, within) for v in value))
    if type(value) is dict and all(type(k) in SCALAR_TYPES for k in value):
        return SeqObs(dict, tuple(observe(v, within) for v in value.values()), tuple(value))
    return ObjectObs(value)


def observe_read(value: object) -> Observation | tuple[str, str, int]:
    """A heap read's observation: scalars and tensors in full, other objects by type and id only.

    Profiles live as long as their function, so they must not keep heap objects alive.
    """
    if type(value) in SCALAR_TYPES or isinstance(value, tf.Tensor):
        return observe(value)
    return ("object", type(value).__qualname__, id(value))


def is_plain_namedtuple(callee: object) -> bool:
    """A ``collections.namedtuple``/``typing.NamedTuple`` class whose construction runs only the
    generated ``__new__`` (no ``__init__`` or ``__new__`` of the user's own)."""
    if not (isinstance(callee, type) and issubclass(callee, tuple) and hasattr(callee, "_fields")):
        return False
    for cls in callee.__mro__[: callee.__mro__.index(tuple)]:
        if "__init__" in cls.__dict__:
            return False
        new = cls.__dict__.get("__new__")
        new = getattr(new, "__func__", new)  # a staticmethod in the class dict
        if new is not None and getattr(getattr(new, "__code__", None), "co_filename", None) != "<string>":
            return False
    return True
