"""[semantics] A list of Python numbers, some known only at run time, converts as eager's does.

Eager's ``tf.constant([n, 2**40])`` converts the list whole: int64, because one element lies outside
int32. janus converts a run-time number on its own (int32, checked) and TF's graph packing then
squeezed the constant into int32 (``[n, 0]``; a gather of ``[n, 2**32]`` read row 0 where eager
raises). A float list with a constant float32 cannot hold raises in eager, where the graph packed inf;
a lone such float raises or gives inf in eager depending on the op (``tf.constant(1e300)`` raises,
``tf.constant(1e300, tf.float32)`` gives inf), where the graph gave inf and NumPy warned: janus
leaves such calls to eager.
Found by a breaker helper (#19's tenth-session follow-up); both were wrong before the fused checks.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_recursion import Node

import janus

_SCALE = tf.Variable(2.0)
RUNTIME_INTS = [(n,) for n in (1, 2, 3, 4, 5, 6, 7, 8)]


def _program(fn):
    def make():
        return fn, lambda: None

    return make


@pytest.mark.parametrize(
    "convert",
    [
        lambda n: tf.constant([n, 2**40]),
        lambda n: tf.constant([2**40, n]),
        lambda n: tf.constant([[n], [2**33]]),
        lambda n: tf.convert_to_tensor([n, -(2**31) - 1]),
        lambda n: tf.stack([n, 2**40]),
        lambda n: tf.reduce_sum([n, 2**40]),
        lambda n: tf.one_hot([n % 4, 2**32], 4),
        lambda n: tf.constant([n, 5]),  # fits: int32, as eager
    ],
    ids=["after", "before", "nested", "below", "stack", "sum", "one_hot", "fits"],
)
def test_a_run_time_int_next_to_a_constant_takes_the_whole_lists_dtype(convert):
    run_differential(_program(convert), RUNTIME_INTS, min_graph_calls=2)


def test_an_index_list_with_a_constant_out_of_range_raises_as_eager():
    params = tf.reshape(tf.range(24, dtype=tf.float32), [6, 4])
    run_differential(_program(lambda n: tf.gather(params, [n % 6, 2**32])), RUNTIME_INTS, min_graph_calls=0)


def test_a_run_time_int_that_leaves_int32_later_widens_the_list_as_eager():
    calls = [*RUNTIME_INTS, (2**35,), (3,), (-(2**31) - 5,), (4,)]
    run_differential(_program(lambda n: tf.constant([n, 5])), calls, min_graph_calls=2)


def test_a_leafs_word_next_to_a_constant_past_int32_in_a_recursion():
    def make():
        def encode(node):
            if node.is_leaf:
                return tf.cast(tf.reduce_sum(tf.constant([node.word, 2**40])), tf.float64)
            return encode(node.left) + encode(node.right)

        return encode, lambda: None

    trees = [(Node(left=Node(word=i), right=Node(left=Node(word=i + 1), right=Node(word=2))),) for i in range(8)]
    run_differential(make, trees, min_graph_calls=2)


@pytest.mark.parametrize(
    "convert",
    [
        (lambda x: tf.constant(1e300) + x, 0),  # eager raises
        (lambda x: tf.fill([2], 1e300) + x, 0),  # eager raises
        (lambda x: tf.constant(1e300, tf.float32) + x, 0),  # eager gives inf
        (lambda x: x * 1e300, 2),  # eager gives inf: an operator, as the graph's (its NumPy warning kept quiet)
        (lambda x: tf.add(x, -1e39), 2),  # eager converts to the tensor's dtype: inf
        (lambda x: tf.maximum(_SCALE, {"y": [1e39]}["y"]) + x, 0),  # eager gives inf quietly; a graph warns
    ],
    ids=["constant", "fill", "constant_float32", "multiply", "add_tensor", "maximum_variable"],
)
def test_a_float_constant_float32_cannot_hold_gets_eagers_answer_and_warns_nothing(convert):
    convert, graph_calls = convert
    jitted = run_differential(
        _program(convert), [(tf.constant(x + 0.5),) for x in range(6)], min_graph_calls=graph_calls
    )
    if not graph_calls:
        assert "float32 cannot hold" in janus.explain(jitted)


def test_a_float_list_with_a_constant_float32_cannot_hold_raises_as_eager_and_warns_nothing():
    jitted = run_differential(
        _program(lambda x: tf.constant([x, 1e300])), [(x + 0.5,) for x in range(8)], min_graph_calls=0
    )
    assert "float32" in janus.explain(jitted)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    constants=st.lists(
        st.one_of(
            st.integers(-(2**40), 2**40), st.integers(-(2**31) - 2, -(2**31) + 1), st.integers(2**31 - 2, 2**31 + 1)
        ),
        min_size=1,
        max_size=3,
    ),
    position=st.integers(0, 3),
    values=st.lists(st.integers(-(2**33), 2**33), min_size=6, max_size=6),
)
def test_a_run_time_int_among_constants_of_any_size_matches_eager(constants, position, values):
    position = min(position, len(constants))
    before, after = tuple(constants[:position]), tuple(constants[position:])

    def convert(n):
        return tf.constant([*before, n, *after]) * 1

    calls = [(v,) for v in [1, 2, 3, 4, 5, 6, *values]]
    run_differential(_program(convert), calls, min_graph_calls=1)


def test_the_largest_float_float32_holds_and_the_first_it_does_not():
    from janus.graphgen import pynumber

    largest = float(np.finfo(np.float32).max)
    halfway = 2.0**128 - 2.0**103  # rounds to even: inf
    below = float(np.nextafter(halfway, 0.0))  # rounds to the largest float32
    with np.errstate(over="ignore"):
        assert np.float32(below) == largest and np.isinf(np.float32(halfway))
    for value, overflows in ((largest, False), (below, False), (halfway, True), (1e39, True), (float("inf"), False)):
        assert pynumber.overflows_float32(value) is overflows, value
        assert pynumber.overflows_float32(-value) is overflows, -value
    assert not pynumber.overflows_float32(float("nan"))
