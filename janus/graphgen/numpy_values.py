"""NumPy arrays read by converted code (arguments, attributes): fed by value on every call.

A data loader often refills one preallocated buffer in place and passes the same array to every
step. Eager reads the array's contents at each op that uses it; a graph that baked them in, or
that guarded the array by identity only, would train on stale data. So an array is a
``NumpyArray``: where TensorFlow converts it (an op argument, an operand of a tensor operator,
a Keras layer's input), the conversion yields a graph input that ``prepare()`` fills with the
array's current contents on every call, cast to the dtype the op asks for, as eager's conversion
would. Where the array itself is needed (returned, stored), it is re-read from its path, guarded
by identity. ``array.sum()`` and ``array.mean()`` of a float array become graph reductions
(``NumpyScalar``, with NumPy's scalar arithmetic and ``max``/``min`` with Python numbers). Anything
else (NumPy arithmetic, indexing, printing) needs the data now: refused.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from janus.assumptions.sources import Source


class NumpyArray:
    """An ndarray at ``path``, of a guarded dtype and shape, known by value only at run time."""

    def __init__(
        self, source: Source, sample: np.ndarray, feed, on_read: Callable[[np.ndarray], None] | None = None
    ) -> None:
        self.source = source
        self.sample = sample  # the array seen while generating: gives dtype and shape only
        self._feed = feed  # ctx.array_input: an eager placeholder that prepare() fills from path
        self._on_read = on_read  # told of each read of the contents (statements run later may write them)
        self._placeholder: tf.Tensor | None = None

    @property
    def shape(self) -> tuple:
        return self.sample.shape

    @property
    def dtype(self) -> np.dtype:
        return self.sample.dtype

    @property
    def ndim(self) -> int:
        return self.sample.ndim

    def __len__(self) -> int:
        return len(self.sample)

    def tensor(self) -> tf.Tensor:
        if self._placeholder is None:
            self._placeholder = self._feed(self.source, self.sample)
        if self._on_read is not None:
            self._on_read(self.sample)
        return tf.identity(self._placeholder)


def _convert(value: NumpyArray, dtype: tf.DType | None = None, name: str | None = None, as_ref: bool = False):
    tensor = value.tensor()
    if dtype is None or dtype == tensor.dtype:
        return tensor
    source = tensor.dtype
    if (source.is_floating and not dtype.is_floating and not dtype.is_complex) or (source == tf.bool) != (
        dtype == tf.bool
    ):
        raise TypeError(f"cannot convert a NumPy {source.name} array to {dtype.name}")  # as eager's conversion
    return tf.cast(tensor, dtype)


tf.register_tensor_conversion_function(NumpyArray, _convert)


def array_to_tensor(array: np.ndarray) -> tf.Tensor:
    """The graph input for an array, made in ``prepare()`` before each call."""
    return tf.constant(array)


# ------------------------------------------------------------------ reductions of fed arrays
_REDUCTIONS = {"sum": tf.reduce_sum, "mean": tf.reduce_mean}
_SCALAR_OPS = {operator.add, operator.sub, operator.mul, operator.truediv}
_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv}  # fmt: skip


class NumpyMethod:
    """``array.sum``/``array.mean`` of an array fed by value, called next (``NumpyScalar``)."""

    def __init__(self, array: NumpyArray, name: str) -> None:
        self.array = array
        self.name = name

    def call(self, args: list, kwargs: dict, check, loc: str) -> NumpyScalar:
        """The reduction as a graph scalar; ``check(make_condition, what)`` plants a JanusAssert.
        NumPy warns where the data is not finite (overflow, ``inf - inf``): such calls run eagerly."""
        from janus.graphgen.errors import NotConvertible

        array, name = self.array, self.name
        if args or kwargs:
            raise NotConvertible(f"ndarray.{name}() with arguments of an array fed by value", loc)
        if array.dtype not in (np.float32, np.float64) or (name == "mean" and array.sample.size == 0):
            raise NotConvertible(f"ndarray.{name}() of a {array.dtype} array of shape {array.shape} fed by value", loc)
        data = array.tensor()
        result = _REDUCTIONS[name](data)
        check(lambda: tf.logical_and(tf.reduce_all(tf.math.is_finite(data)), tf.math.is_finite(result)),
              f"ndarray.{name}() of finite values is finite")  # fmt: skip
        check(lambda: tf.logical_and(_no_subnormals(data), tf.logical_or(tf.not_equal(result, 0.0), tf.reduce_all(
            tf.equal(data, 0.0)))), f"ndarray.{name}() of normal values is not flushed to zero")  # fmt: skip
        return NumpyScalar(result, array.dtype.type)


class NumpyScalar:
    """A NumPy float scalar (``np.float32``) computed in the graph: a reduction of an array fed by
    value, NumPy arithmetic on it (NEP 50: a Python number takes its type), or ``max``/``min`` of
    it and Python numbers (``either``: eager's result is that number or the scalar, so it may only
    be an operand of a tensor of its dtype, where both give the same tensor)."""

    def __init__(self, tensor: tf.Tensor, type_: type, either: bool = False) -> None:
        self.tensor = tensor
        self.type = type_
        self.either = either

    @property
    def dtype(self) -> tf.DType:
        return self.tensor.dtype


def _convert_scalar(value: NumpyScalar, dtype: tf.DType | None = None, name=None, as_ref: bool = False):
    if dtype is None or dtype == value.tensor.dtype:
        return value.tensor
    raise TypeError(f"janus converts a NumPy {value.tensor.dtype.name} scalar to that dtype only")


tf.register_tensor_conversion_function(NumpyScalar, _convert_scalar)


def tensor_operands(operands: tuple, loc: str) -> tuple | None:
    """``operands`` with their NumPy scalars as tensors, where the other is a tensor of their dtype
    (TF converts the scalar as eager does); None where none is a tensor."""
    from janus.graphgen.errors import NotConvertible

    tensors = [v for v in operands if isinstance(v, (tf.Tensor, tf.Variable))]
    if not tensors:
        return None
    scalars = [v for v in operands if isinstance(v, NumpyScalar)]
    if len(operands) != 2 or any(t.dtype != s.dtype for t in tensors for s in scalars):
        raise NotConvertible("a NumPy scalar computed in the graph with a tensor of another dtype", loc)
    return tuple(v.tensor if isinstance(v, NumpyScalar) else v for v in operands)


def scalar_operate(op, operands: tuple, check, loc: str) -> NumpyScalar:
    """``op`` on a ``NumpyScalar`` and a Python number or another scalar, as NumPy computes it
    (NEP 50: in the scalar's dtype); a non-finite result from finite operands (NumPy warns) is
    checked by a JanusAssert. NotConvertible otherwise."""
    from janus.graphgen.errors import NotConvertible

    op = _INPLACE.get(op, op)
    scalar = next(v for v in operands if isinstance(v, NumpyScalar))
    if op not in _SCALAR_OPS or len(operands) != 2:
        raise NotConvertible(f"operator {op.__name__} on a NumPy scalar computed in the graph", loc)
    other = operands[1] if operands[0] is scalar else operands[0]
    if scalar.either or any(isinstance(v, NumpyScalar) and v.either for v in operands):
        raise NotConvertible("arithmetic on max()/min() of a NumPy scalar and a Python number", loc)
    if isinstance(other, NumpyScalar):
        if other.dtype != scalar.dtype:
            raise NotConvertible("NumPy scalars of two dtypes", loc)
    elif type(other) not in (int, float):
        raise NotConvertible(f"a NumPy scalar computed in the graph with a {type(other).__name__}", loc)
    elif _cast(scalar.type, other) is None:
        raise NotConvertible(f"{other!r} overflows {scalar.type.__name__} or is subnormal in it", loc, "numpy")
    tensors = [v.tensor if isinstance(v, NumpyScalar) else tf.constant(v, scalar.dtype) for v in operands]
    result = op(*tensors)
    check(lambda: tf.logical_or(tf.math.is_finite(result), tf.logical_not(tf.reduce_all(
        [tf.math.is_finite(t) for t in tensors]))), "NumPy scalar arithmetic stays finite")  # fmt: skip
    check(lambda: tf.logical_or(tf.not_equal(result, 0.0), _exact_zero(op, *tensors)),
          "NumPy scalar arithmetic is not flushed to zero")  # fmt: skip
    return NumpyScalar(result, scalar.type)


def _exact_zero(op, a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """``op(a, b)`` is exactly zero in NumPy too: a result TF's kernels flushed to zero (a subnormal,
    which NumPy keeps) is not."""
    if op is operator.add:
        return tf.equal(a, -b)
    if op is operator.sub:
        return tf.equal(a, b)
    if op is operator.mul:
        return tf.logical_or(tf.equal(a, 0.0), tf.equal(b, 0.0))
    return tf.logical_or(tf.equal(a, 0.0), tf.math.is_inf(b))


_BITS = {tf.float32: (tf.int32, 0x7F800000, 0x007FFFFF), tf.float64: (tf.int64, 0x7FF0000000000000, 0xFFFFFFFFFFFFF)}


def _no_subnormals(tensor: tf.Tensor) -> tf.Tensor:
    """No subnormal number in ``tensor``, read bit by bit: TF's kernels treat subnormals as zero
    (flush to zero), where NumPy computes with them."""
    bits_type, exponent, mantissa = _BITS[tensor.dtype]
    bits = tf.bitcast(tensor, bits_type)
    zero = tf.constant(0, bits_type)
    subnormal = tf.logical_and(
        tf.equal(tf.bitwise.bitwise_and(bits, exponent), zero),
        tf.not_equal(tf.bitwise.bitwise_and(bits, mantissa), zero),
    )
    return tf.logical_not(tf.reduce_any(subnormal))


def extreme(callee, args: list, loc: str) -> NumpyScalar:
    """``max(...)``/``min(...)`` of NumPy scalars and Python numbers, as CPython compares them."""
    from janus.graphgen.errors import NotConvertible

    scalars = [a for a in args if isinstance(a, NumpyScalar)]
    dtype, type_ = scalars[0].dtype, scalars[0].type
    values = []
    for a in args:
        if isinstance(a, NumpyScalar):
            if a.dtype != dtype:
                raise NotConvertible(f"{callee.__name__}() of NumPy scalars of two dtypes", loc)
            values.append(a.tensor)
        elif type(a) in (int, float) and _cast(type_, a) == a:
            values.append(tf.constant(a, dtype))
        else:
            raise NotConvertible(f"{callee.__name__}() of a NumPy scalar and a {type(a).__name__}", loc)
    compare = tf.greater if callee is max else tf.less
    best = values[0]
    for value in values[1:]:  # `item > best` keeps the first of equals, and no NaN, as CPython does
        best = tf.where(compare(value, best), value, best)
    return NumpyScalar(best, type_, either=len(scalars) < len(args) or any(a.either for a in scalars))


def _cast(type_: type, number: int | float) -> np.generic | None:
    """``number`` in NumPy's ``type_`` (as NEP 50 converts it), without NumPy's warning; None
    where that conversion overflows (NumPy warns or raises) or is subnormal (TF flushes it)."""
    with np.errstate(all="ignore"):
        try:
            converted = type_(number)
        except OverflowError:
            return None
    if not np.isfinite(converted) and math.isfinite(number):
        return None
    return None if 0 < abs(converted) < np.finfo(type_).tiny else converted  # subnormal: TF reads it as zero
