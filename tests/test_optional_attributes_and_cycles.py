"""Config attributes read with a default, and containers that hold themselves.

``getattr(args, "warmup", 0.0)``, ``hasattr(cfg, "extra")`` on an ``argparse.Namespace``, a
``SimpleNamespace`` or a Keras layer: janus looked the attribute up once, while building, and baked
its absence, so an attribute set between calls was never seen. A list or dict that holds itself made
janus's own walks recurse without end: an internal error while building, or a ``RecursionError``
raised to the caller on the calls janus profiles.
"""

import argparse
import types

import pytest
import tensorflow as tf
from differential import run_differential

import janus

CALLS = [(tf.constant(float(i)),) for i in range(8)]


def _namespace(kind: str) -> object:
    if kind == "argparse":
        return argparse.Namespace(lr=0.5)
    if kind == "simple":
        return types.SimpleNamespace(lr=0.5)
    import keras

    layer = keras.layers.Dense(1)
    layer.lr = 0.5
    return layer


def _sets_extra_before_call_5(config: object) -> callable:
    calls = []

    def state() -> object:
        calls.append(1)
        if len(calls) == 5:
            config.extra = 5.0  # the caller sets it between calls
        return sorted(k for k in vars(config) if k in ("lr", "extra"))

    return state


@pytest.mark.parametrize("read", ["getattr_default", "hasattr", "dict_get"])
@pytest.mark.parametrize("kind", ["argparse", "simple", "keras_layer"])
def test_an_attribute_set_between_calls_is_seen(kind, read):
    def make():
        config = _namespace(kind)

        def step(x):
            if read == "getattr_default":
                extra = getattr(config, "extra", 0.0)
            elif read == "hasattr":
                extra = 5.0 if hasattr(config, "extra") else 0.0
            else:
                extra = config.__dict__.get("extra", 0.0)
            return x + extra

        return step, _sets_extra_before_call_5(config)

    jitted = run_differential(make, CALLS, min_graph_calls=0)
    if read == "dict_get" and kind != "keras_layer":
        assert "the __dict__ of a" in janus.explain(jitted)  # refused: its contents are not guarded
    else:
        assert janus.stats(jitted)["graph_calls"] >= 3


def test_getattr_of_a_present_attribute_follows_its_value():
    def make():
        config = argparse.Namespace(scale=2.0)
        calls = []

        def step(x):
            return x * getattr(config, "scale", 1.0)

        def state():
            calls.append(1)
            if len(calls) == 5:
                config.scale = 3.0  # reassigned between calls
            return config.scale

        return step, state

    run_differential(make, CALLS, min_graph_calls=3)


def test_a_dict_that_holds_itself_is_printed_from_a_graph_call():
    def make():
        v = tf.Variable(1.0)
        table = {"a": 1}
        table["self"] = table

        def step(x):
            print("A", table)
            v.assign_add(x)
            return v + 1.0

        return step, lambda: v

    jitted = run_differential(make, CALLS, min_graph_calls=3)
    assert "internal error" not in janus.explain(jitted)


def test_a_function_returning_a_list_that_holds_itself():
    """The profiler described the result item by item, for ever: the profiled calls raised
    RecursionError, after the update."""
    v = tf.Variable(1.0)
    loop = [1, 2]
    loop.append(loop)

    def step(x):
        v.assign_add(x)
        return v + 1.0, loop

    jitted = janus.jit(step)
    for n, (x,) in enumerate(CALLS):
        result, returned = jitted(x)
        assert returned is loop, f"call {n}"
        assert float(v.numpy()) == 1.0 + sum(range(n + 1)), f"call {n}"
        assert float(result) == float(v.numpy()) + 1.0
    assert janus.stats(jitted)["graph_calls"] >= 3


@pytest.mark.keras
@pytest.mark.parametrize("read", ["getattr", "hasattr"])
def test_a_layer_property_that_raises_until_the_layer_is_built(read):
    """``Dense.kernel`` is a property that raises AttributeError until the layer is built: its
    absence was baked, and a layer built between calls kept giving the unbuilt answer."""

    def make():
        import keras

        layer = keras.layers.Dense(2, kernel_initializer="ones")
        calls = []

        def step(x):
            if read == "getattr":
                kernel = getattr(layer, "kernel", None)
                return x + 1.0 if kernel is None else x + tf.reduce_sum(kernel)
            return x + (5.0 if hasattr(layer, "kernel") else 1.0)

        def state():
            calls.append(1)
            if len(calls) == 4:
                layer.build((None, 3))  # the caller builds it between calls
            return layer.built

        return step, state

    jitted = run_differential(make, CALLS, min_graph_calls=0)
    assert "which raises AttributeError now" in janus.explain(jitted)
