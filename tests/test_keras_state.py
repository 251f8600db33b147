"""The guard on a Keras object's settings: ``StateCheck`` answers as the fingerprint comparison.

``StateCheck`` decides most calls from each layer's attribute layout and falls back to the
fingerprint where that changed; these tests drive attribute changes of the kinds users and Keras
make (a setting re-set to an equal or a different value, a value changing kind, an attribute
removed and re-added in another order, a tuple gaining a tensor) and compare its answer with
``state_fingerprint(obj) == expected`` after each.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import janus
from janus.assumptions import keras_state
from tests.differential import assert_same_call, outcome

keras = tf.keras
pytestmark = pytest.mark.keras


class Obj:
    """A plain object: ``objects_within`` gives it alone, so its own attributes are the fingerprint."""


def _user_fn(x):
    return x


_VALUES = [
    0.5,
    0.25,
    -0.0,
    0.0,
    float("nan"),
    1,
    True,
    None,
    "same",
    b"b",
    np.float32(0.5),
    (1, 2),
    (1, "x"),
    (1, [2]),
    [1, 2],
    {"k": 1},
    _user_fn,
    abs,
    functools.partial(_user_fn),
    Obj,
]
_NAMES = ["a", "b", "c", "d", "_e"]

_value = st.sampled_from(range(len(_VALUES)))
_fresh = st.sampled_from(["equal_copy", "same"])
_step = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(_NAMES), _value, _fresh),
    st.tuples(st.just("delete"), st.sampled_from(_NAMES)),
    st.tuples(st.just("readd"), st.sampled_from(_NAMES)),  # removed and set again: last in order
)


def _fresh_copy(value: object) -> object:
    """An equal value that is another object where Python allows one."""
    if isinstance(value, float):
        return float(repr(value))
    if isinstance(value, tuple):
        return tuple(list(value))
    if isinstance(value, (list, dict)):
        return type(value)(value)
    if isinstance(value, np.generic):
        return value.copy()
    return value


def _apply(obj: Obj, step: tuple) -> None:
    kind, name = step[0], step[1]
    if kind == "set":
        value = _VALUES[step[2]]
        setattr(obj, name, _fresh_copy(value) if step[3] == "equal_copy" else value)
    elif kind == "delete":
        vars(obj).pop(name, None)
    elif name in vars(obj):
        value = vars(obj).pop(name)
        setattr(obj, name, value)


@settings(max_examples=300, deadline=None)
@given(
    initial=st.dictionaries(st.sampled_from(_NAMES), _value, min_size=1),
    steps=st.lists(_step, max_size=6),
)
def test_check_answers_as_the_fingerprint_after_any_changes(initial, steps):
    obj = Obj()
    for name, index in initial.items():
        setattr(obj, name, _VALUES[index])
    check = keras_state.StateCheck(obj)
    assert check(obj)
    for step in steps:
        _apply(obj, step)
        assert check(obj) == (keras_state.state_fingerprint(obj) == check.expected), (step, vars(obj))


def test_a_tuple_that_gains_a_tensor_is_no_longer_a_setting():
    obj = Obj()
    obj.strides = (1, 1)
    obj.other = (tf.constant(1.0), 2)
    check = keras_state.StateCheck(obj)
    obj.strides = (tf.constant(1), 1)  # same types of attributes, not the same settings
    assert not check(obj)
    obj.strides = (1, 1)
    assert check(obj)
    obj.other = (1, 2)  # an ignored tuple became a setting: the fingerprint changed
    assert not check(obj)


def _model() -> keras.Model:
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.layers.Dense(8, activation="relu"), keras.layers.Dropout(0.25), keras.layers.Dense(1)]
    )
    model.build((None, 4))
    return model


def test_keras_model_check_follows_its_layers():
    model = _model()
    check = keras_state.StateCheck(model)
    assert check(model)
    dropout = model.layers[1]
    dropout.rate = float("0.25")  # an equal rate, another float object: still unchanged
    assert check(model)
    dropout.rate = 0.5
    assert not check(model)
    dropout.rate = 0.25
    assert check(model)
    model.layers[0].trainable = False
    assert check(model) == (keras_state.state_fingerprint(model) == check.expected)
    assert not check(model)
    model.layers[0].trainable = True
    model.add(keras.layers.Dense(1))  # a layer appended: another list of layers
    assert not check(model)


def _change(model: keras.Model, change: str) -> None:
    if change == "equal_rate":
        model.layers[1].rate = float("0.25")
    elif change == "new_rate":
        model.layers[1].rate = 0.5
    elif change == "activation":
        model.layers[0].activation = keras.activations.tanh
    else:
        model.layers[0].trainable = False


@pytest.mark.parametrize("change", ["equal_rate", "new_rate", "activation", "frozen"])
def test_training_step_after_a_layer_setting_changed_between_calls(change):
    """The user changes a layer between two training steps: janus gives eager's losses and weights,
    and its graphs serve the calls before and after the change."""

    def make():
        model = _model()
        opt = keras.optimizers.SGD(0.1)
        x = tf.reshape(tf.range(32, dtype=tf.float32), [8, 4]) / 32.0

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(x, training=False) ** 2)  # unseeded dropout differs run to run
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return model, step, lambda: [v.numpy() for v in model.variables]

    eager_model, eager_step, eager_state = make()
    jit_model, raw_step, jit_state = make()
    jitted = janus.jit(raw_step)
    for n in range(12):
        if n == 6:
            _change(eager_model, change)
            _change(jit_model, change)
        assert_same_call(n, outcome(eager_step, ()), outcome(jitted, ()), eager_state, jit_state)
        if n == 5:
            before = janus.stats(jitted)["graph_calls"]
            assert before >= 1, janus.explain(jitted)
    assert janus.stats(jitted)["graph_calls"] >= before + 2, janus.explain(jitted)
