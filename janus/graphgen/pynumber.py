"""Python floats relaxed from value to type: ``PyNumber``, a float64 scalar with Python semantics.

When a Python float keeps changing (a learning rate schedule, a temperature), janus stops
specialising on its value and feeds it to the graph as a float64 scalar instead. Only
operations whose result is bit-for-bit what Python computes are converted:

* ``+ - * /`` and unary ``-``/``abs`` between PyNumbers and Python numbers (IEEE double
  arithmetic, as CPython's); division gets a ``JanusAssert`` that the divisor is not zero,
  so Python's ``ZeroDivisionError`` is raised by the eager re-run;
* comparisons, giving a PyNumber of Python type ``bool``;
* operators with a float32/float64 tensor, where the float is cast to the tensor's dtype
  exactly as eager's ``convert_to_tensor`` rounds it.

Anything else (``**``, ``//``, ``%``, library calls, indexing, ``range``) raises
``NotConvertible``, so a PyNumber can never be silently misused.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable

import tensorflow as tf

from janus.graphgen.errors import NotConvertible

_ARITHMETIC = {operator.add, operator.sub, operator.mul, operator.truediv, operator.iadd, operator.isub,
               operator.imul, operator.itruediv}  # fmt: skip
_COMPARISONS = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge}
_DIVISIONS = {operator.truediv, operator.itruediv}
_TENSOR_DTYPES = (tf.float32, tf.float64)


@dataclasses.dataclass(frozen=True, eq=False)
class PyNumber:
    """A Python ``float`` (or the ``bool`` of a comparison) held as a float64/bool scalar tensor."""

    tensor: tf.Tensor
    type: type


def involves(operands: tuple) -> bool:
    return any(isinstance(v, PyNumber) for v in operands)


def operate(op: Callable, operands: tuple, check_nonzero: Callable[[tf.Tensor], None], loc: str) -> object:
    """Applies ``op`` with Python semantics, or raises NotConvertible."""
    if len(operands) == 1:
        (value,) = operands
        if op in (operator.neg, abs) and value.type is float:
            return PyNumber(-value.tensor if op is operator.neg else tf.abs(value.tensor), float)
        raise NotConvertible(f"{op.__name__} of a relaxed Python float", loc)
    left, right = operands
    tensor_side = next((v for v in operands if isinstance(v, tf.Tensor)), None)
    if tensor_side is not None:
        return _with_tensor(op, left, right, tensor_side, loc)
    if not all(isinstance(v, PyNumber) and v.type is float or type(v) in (int, float) for v in operands):
        raise NotConvertible("a relaxed Python float combined with a non-number", loc)
    if op not in _ARITHMETIC and op not in _COMPARISONS:
        raise NotConvertible(f"{op.__name__} on a relaxed Python float", loc)
    a, b = (_as_float64(v, loc) for v in operands)
    if op in _DIVISIONS:
        check_nonzero(b)
    result = op(a, b)
    return PyNumber(result, bool if op in _COMPARISONS else float)


def _with_tensor(op: Callable, left: object, right: object, tensor: tf.Tensor, loc: str) -> object:
    if tensor.dtype not in _TENSOR_DTYPES:
        raise NotConvertible(f"a relaxed Python float combined with a {tensor.dtype.name} tensor", loc)
    cast = [
        tf.cast(v.tensor, tensor.dtype) if isinstance(v, PyNumber) and v.type is float else v for v in (left, right)
    ]
    if any(isinstance(v, PyNumber) for v in cast):
        raise NotConvertible("a relaxed Python bool combined with a tensor", loc)
    return op(*cast)


def _as_float64(value: object, loc: str) -> tf.Tensor:
    if isinstance(value, PyNumber):
        return value.tensor
    if type(value) is int and abs(value) > 2**53:
        raise NotConvertible("a large Python int combined with a relaxed Python float", loc)
    return tf.constant(float(value), tf.float64)


def to_python(value: tf.Tensor, kind: type) -> object:
    """Converts a graph output back to the Python value eager would have produced."""
    return kind(value.numpy())
