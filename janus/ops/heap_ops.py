"""Python wrappers of the heap ops: reads and writes of run-time objects through a per-call store."""

from __future__ import annotations

import tensorflow as tf

from janus.ops.assert_op import _ops


def get_attr(token, store, obj, name: str, expect: int, dtype: tf.DType, shape) -> tuple[tf.Tensor, tf.Tensor]:
    return _ops().janus_py_get_attr(token, store, obj, attr_name=name, expect=expect, dtype=dtype, shape=shape)


def get_item(token, store, obj, index, expect: int, dtype: tf.DType, shape) -> tuple[tf.Tensor, tf.Tensor]:
    return _ops().janus_py_get_subscr(token, store, obj, index, expect=expect, dtype=dtype, shape=shape)


def set_attr(token, store, obj, name: str, value, expect: int) -> tf.Tensor:
    return _ops().janus_py_set_attr(token, store, obj, value, attr_name=name, expect=expect)


def set_item(token, store, obj, index, value, expect: int) -> tf.Tensor:
    return _ops().janus_py_set_subscr(token, store, obj, index, value, expect=expect)
