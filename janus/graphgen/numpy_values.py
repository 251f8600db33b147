"""NumPy arrays read by converted code (arguments, attributes): fed by value on every call.

A data loader often refills one preallocated buffer in place and passes the same array to every
step. Eager reads the array's contents at each op that uses it; a graph that baked them in, or
that guarded the array by identity only, would train on stale data. So an array is a
``NumpyArray``: where TensorFlow converts it (an op argument, an operand of a tensor operator,
a Keras layer's input), the conversion yields a graph input that ``prepare()`` fills with the
array's current contents on every call, cast to the dtype the op asks for, as eager's conversion
would. Where the array itself is needed (returned, stored), it is re-read from its path, guarded
by identity. Anything else (NumPy arithmetic, indexing, printing) needs the data now: refused.
"""

from __future__ import annotations

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
