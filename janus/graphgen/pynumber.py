"""Python numbers whose value is not known while generating: ``PyNumber``.

Two sources produce them:

* a Python ``float`` relaxed from value to type (a learning-rate schedule, a temperature):
  it is fed to the graph as a float64 scalar;
* the index of a loop converted to ``tf.while_loop`` (``for i in range(n)``) and the
  truth value of a tensor (``not t``): int64 and bool scalars.

Only operations whose result is exactly what Python computes are converted:

* ``+ - * /``, unary ``-`` and ``abs`` on floats (IEEE double arithmetic, as CPython's);
* ``+ -`` on ints, ``//`` and ``%`` on ints (floor semantics, as Python's), ``/`` of ints;
* comparisons, giving a PyNumber of Python type ``bool``;
* operators with a float32/float64 (or, for ints, int32/int64) tensor, where the number is
  cast to the tensor's dtype exactly as eager's ``convert_to_tensor`` would convert it;
* arguments of library calls, converted as ``convert_to_tensor`` converts a Python number
  with no dtype hint (float32, int32, bool); a call that hints another dtype then fails
  while generating, and the function runs imperatively.

Division and modulo get a ``JanusAssert`` that the divisor is not zero, so Python's
``ZeroDivisionError`` comes from the eager re-run. Anything else (``**``, int ``*``,
builtins, indexing Python lists) raises ``NotConvertible``, so a PyNumber is never
silently misused.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import struct
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from janus.graphgen.errors import NotConvertible

_COMPARISONS = {operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge}
_FLOAT_OPS = {operator.add, operator.sub, operator.mul, operator.truediv}
_INT_OPS = {operator.add, operator.sub, operator.truediv, operator.floordiv, operator.mod}
_DIVISIONS = {operator.truediv, operator.floordiv, operator.mod}
_INPLACE = {
    operator.iadd: operator.add,
    operator.isub: operator.sub,
    operator.imul: operator.mul,
    operator.itruediv: operator.truediv,
    operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod,
}
_TENSOR_DTYPES = {float: (tf.float32, tf.float64), int: (tf.float32, tf.float64, tf.int32, tf.int64)}
_INT_LIMIT = 2**31  # plain ints combined with int PyNumbers: sums stay far from int64 overflow


@dataclasses.dataclass(frozen=True, eq=False)
class PyNumber:
    """A Python ``float``/``int``/``bool`` held as a float64/int64/bool scalar tensor."""

    tensor: tf.Tensor
    type: type


class OptionalNumber:
    """A heap location that holds a Python number or ``None`` (a leaf's word; ``None`` on inner
    nodes): the read's ``[present, number]`` pair. ``x is None`` reads the flag; any other use of the
    number goes through a check that it is present (``GraphContext.unwrap_optional``: eager would
    raise a TypeError on ``None``). The flag and the number are split off only where used, once per
    graph (a branch built later captures the pair), so that a leaf that only uses the number runs
    the check alone."""

    def __init__(self, pair: tf.Tensor, kind: type) -> None:
        self.pair = pair
        self.type = kind
        self._parts: dict[tf.Graph, tuple[tf.Tensor, PyNumber]] = {}

    def _split(self) -> tuple[tf.Tensor, PyNumber]:
        graph = tf.compat.v1.get_default_graph()
        if graph not in self._parts:
            present, number = tf.unstack(self.pair)  # one Unpack node, where two slices take eight
            self._parts[graph] = (tf.cast(present, tf.bool), PyNumber(number, self.type))
        return self._parts[graph]

    @property
    def present(self) -> tf.Tensor:
        """The bool scalar: the location held a number."""
        return self._split()[0]

    @property
    def number(self) -> PyNumber:
        """The number, whether or not it is present (0 where absent)."""
        return self._split()[1]

    def truth(self) -> tf.Tensor:
        """``bool(x)``: ``None`` and zero are false."""
        value = self.number.tensor
        nonzero = value if value.dtype == tf.bool else tf.not_equal(value, tf.zeros([], value.dtype))
        return tf.logical_and(self.present, nonzero)


def convert_builtin(
    callee: type, value: PyNumber, check: Callable[[Callable[[], tf.Tensor]], None], loc: str
) -> PyNumber:
    """``int(x)``, ``float(x)``, ``bool(x)`` of a number known only at run time, as Python computes them.

    ``int`` of a float truncates toward zero (as the cast does); a float that is not finite or does
    not fit int64 makes Python raise or give a big int, so a JanusAssert sends such calls to eager.
    ``float`` of an int is exact below 2**53 (the cast rounds to nearest, as Python does).
    """
    t = value.tensor
    if callee is bool:
        return PyNumber(t if value.type is bool else tf.not_equal(t, tf.zeros([], t.dtype)), bool)
    if callee is int:
        if value.type is float:
            check(lambda: tf.logical_and(tf.math.is_finite(t), tf.abs(t) < 2.0**62))
        return PyNumber(tf.cast(t, tf.int64), int)
    if callee is float:
        if value.type is int:
            check(lambda: tf.abs(t) < 2**53)
        return PyNumber(tf.cast(t, tf.float64), float)
    raise NotConvertible(f"{callee.__name__}() of a Python number unknown while generating", loc)


def involves(operands: tuple) -> bool:
    return any(isinstance(v, PyNumber) for v in operands)


def operate(
    op: Callable,
    operands: tuple,
    check_nonzero: Callable[[tf.Tensor], None],
    loc: str,
    check: Callable[[Callable[[], tf.Tensor], str], None] | None = None,
) -> object:
    """Applies ``op`` with Python semantics, or raises NotConvertible.

    ``check(make, what)`` plants a run-time assertion (the call goes to eager where it fails): an int
    read at run time may be anywhere in int64 (a leaf's ``word`` of ``2**63 - 1``), where ``w + w``,
    ``-w`` or ``w // -1`` wrap while Python's ints grow; they are checked not to overflow."""
    op = _INPLACE.get(op, op)
    if len(operands) == 1:
        (value,) = operands
        if op in (operator.neg, abs) and value.type in (int, float):
            if value.type is int:
                _check_no_overflow(op, value.tensor, None, check, loc)
            return PyNumber(-value.tensor if op is operator.neg else tf.abs(value.tensor), value.type)
        raise NotConvertible(f"{op.__name__} of a Python number unknown while generating", loc)
    tensor_side = next((v for v in operands if isinstance(v, tf.Tensor)), None)
    if tensor_side is not None:
        return _with_tensor(op, operands, tensor_side, loc)
    kinds = [_kind(v, loc) for v in operands]
    if op in _COMPARISONS:
        a, b = _common(operands, kinds)
        return PyNumber(op(a, b), bool)
    if float in kinds:
        if op not in _FLOAT_OPS:
            raise NotConvertible(f"{op.__name__} on a Python float unknown while generating", loc)
        a, b = _common(operands, kinds, opaque=op is operator.truediv)
        if op in _DIVISIONS:
            check_nonzero(b)
        return PyNumber(op(a, b), float)
    if op not in _INT_OPS:
        raise NotConvertible(f"{op.__name__} on a Python int unknown while generating", loc)
    a, b = _common(operands, kinds, opaque=op is operator.truediv)
    if op in _DIVISIONS:
        check_nonzero(b)
    if op in (operator.add, operator.sub, operator.floordiv):
        _check_no_overflow(op, a, b, check, loc)
    if op is operator.truediv:
        return PyNumber(tf.cast(a, tf.float64) / tf.cast(b, tf.float64), float)
    if op is operator.floordiv:
        return PyNumber(tf.math.floordiv(a, b), int)
    if op is operator.mod:
        return PyNumber(tf.math.floormod(a, b), int)
    return PyNumber(op(a, b), int)


def _check_no_overflow(op: Callable, a: tf.Tensor, b: tf.Tensor | None, check, loc: str) -> None:
    """Asserts that an int64 ``op`` does not wrap, where Python's int would grow past int64."""
    if a.dtype != tf.int64 or (b is not None and b.dtype != tf.int64):
        return
    if check is None:
        raise NotConvertible(f"{op.__name__} on a Python int unknown while generating (it may overflow)", loc)
    least = lambda: tf.constant(-(2**63), tf.int64)  # noqa: E731
    if op in (operator.neg, abs):
        check(lambda: tf.not_equal(a, least()), "int does not overflow")
    elif op is operator.floordiv:
        check(lambda: tf.logical_not(tf.logical_and(tf.equal(a, least()), tf.equal(b, -1))), "int does not overflow")
    else:  # a sum wraps where both operands (a and -b for a difference) share a sign the result lacks

        def fits() -> tf.Tensor:
            same = tf.equal(a >= 0, b >= 0) if op is operator.add else tf.not_equal(a >= 0, b >= 0)
            return tf.logical_or(tf.logical_not(same), tf.equal(op(a, b) >= 0, a >= 0))

        check(fits, "int does not overflow")


def _kind(value: object, loc: str) -> type:
    if isinstance(value, PyNumber) and value.type in (int, float):
        return value.type
    if type(value) is float:
        return float
    if type(value) is int and abs(value) < _INT_LIMIT:
        return int
    raise NotConvertible(f"a Python number unknown while generating combined with {type(value).__name__}", loc)


def _common(operands: tuple, kinds: list[type], opaque: bool = False) -> list[tf.Tensor]:
    """The operands as float64 (int64) tensors. Float constants, and any constant of a division
    (``opaque``), become graph inputs: Grappler's constant folding does not compute as Python does.
    It turns ``x / c`` into ``x * (1 / c)`` (``49 / 49`` would give ``0.9999999999999999``), regroups
    ``x * c1 * c2`` as ``x * (c1 * c2)`` (``lr * 1e300 * 1e10`` overflows to inf) and ``x + c1 + c2`` as
    ``x + (c1 + c2)`` (rounds otherwise), and drops ``x + 0.0`` and ``0.0 - x`` for ``x`` and ``-x``
    (the sign of a zero result)."""
    dtype = tf.float64 if float in kinds else tf.int64
    return [
        tf.cast(v.tensor, dtype) if isinstance(v, PyNumber) else _constant(v, dtype, opaque or dtype == tf.float64)
        for v in operands  # fmt: skip
    ]


def _constant(value: object, dtype: tf.DType, opaque: bool) -> tf.Tensor:
    if not opaque:
        return tf.constant(value, dtype)
    return opaque_constant(value, dtype)


@functools.lru_cache(maxsize=256)
def _opaque(bits: object, value: object, dtype: tf.DType) -> tf.Tensor:
    with tf.init_scope():  # an eager tensor: captured as an input, invisible to constant folding
        # through NumPy: eager's cache of converted Python scalars takes -0.0 for a 0.0 seen before
        return tf.constant(np.array(value, dtype.as_numpy_dtype))


def opaque_constant(value: object, dtype: tf.DType) -> tf.Tensor:
    """``value`` as a graph input (an eager constant the graph captures): Grappler cannot fold it."""
    bits = struct.pack("<d", value) if isinstance(value, float) else value  # -0.0 is not 0.0
    return _opaque(bits, value, dtype)


def _with_tensor(op: Callable, operands: tuple, tensor: tf.Tensor, loc: str) -> object:
    cast = []
    for value in operands:
        if isinstance(value, PyNumber):
            if tensor.dtype not in _TENSOR_DTYPES.get(value.type, ()):
                raise NotConvertible(
                    f"a Python {value.type.__name__} unknown while generating combined with a "
                    f"{tensor.dtype.name} tensor",
                    loc,
                )
            value = tf.cast(value.tensor, tensor.dtype)
        cast.append(value)
    return op(*cast)


def as_index(value: PyNumber, loc: str) -> tf.Tensor:
    """An int PyNumber used to index a tensor."""
    if value.type is not int:
        raise NotConvertible(f"a Python {value.type.__name__} used as an index", loc)
    return value.tensor


def as_default_tensor(
    value: PyNumber, check: Callable[[Callable[[], tf.Tensor]], None], narrow_int32: Callable[[tf.Tensor], tf.Tensor]
) -> tf.Tensor:
    """What eager's ``convert_to_tensor`` makes of the number with no dtype hint.

    float → float32, bool → bool, int → int32 (eager makes int64 of an int outside int32:
    ``narrow_int32`` checks the range, and the eager re-run handles the rare large value).
    """
    if value.type is float:
        # eager raises ValueError on a finite float that float32 rounds to inf (``tf.constant(1e300)``),
        # where the cast gives inf: such calls go to eager
        t, single = value.tensor, tf.cast(value.tensor, tf.float32)
        check(lambda: tf.logical_or(tf.math.is_finite(single), tf.logical_not(tf.math.is_finite(t))))
        return single
    if value.type is bool:
        return value.tensor
    t = value.tensor
    if t.dtype == tf.int32:
        return t
    return narrow_int32(t)


def number_list_parts(value: list | tuple) -> tuple[list[PyNumber], list[object]] | None:
    """The run-time numbers and the constants of a (nested) list or tuple of Python numbers only, as
    eager's ``convert_to_tensor`` converts it whole; None where it holds anything else (a tensor, whose
    dtype a packed list takes)."""
    numbers: list[PyNumber] = []
    constants: list[object] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if type(item) in (list, tuple):
            todo.extend(item)
        elif isinstance(item, PyNumber):
            numbers.append(item)
        elif type(item) in (int, float, bool):
            constants.append(item)
        else:
            return None
    return numbers, constants


def fits_int32(number: int) -> bool:
    return -(2**31) <= number < 2**31


def overflows_float32(number: float) -> bool:
    """A finite float that float32 rounds to inf: eager's conversion raises a ValueError."""
    return math.isfinite(number) and abs(number) > _FLOAT32_LARGEST_BEFORE_INF


# The largest float64 that rounds to a finite float32 (halfway to the next power of two rounds to even, inf).
_FLOAT32_LARGEST_BEFORE_INF = float(np.nextafter(np.float64(2.0**128 - 2.0**103), 0.0))


def map_numbers(value: object, fn: Callable[[PyNumber], object]) -> object:
    """``value`` with ``fn`` applied to every ``PyNumber`` in its (nested) lists and tuples."""
    if type(value) in (list, tuple):
        return type(value)(map_numbers(v, fn) for v in value)
    return fn(value) if isinstance(value, PyNumber) else value


def to_python(value: tf.Tensor, kind: type) -> object:
    """Converts a graph output back to the Python value eager would have produced."""
    return kind(value.numpy())
