"""janus.assumptions: typed sources and named guard kinds, compiled into one prepare()."""

import numpy as np
import tensorflow as tf
from differential import run_differential

import janus
from janus.assumptions.guards import GuardBuilder, GuardKind
from janus.assumptions.sources import ArgumentSource, CallSource, CellSource, GlobalSource


def test_sources_render_the_path_and_name_the_value():
    model = GlobalSource("K1", "model")
    weight = model.attr("layers").item(2).attr("w")
    assert str(weight) == "K1['model'].layers[2].w"
    assert weight.describe() == "attribute w"
    assert weight.display() == "G['model'].layers[2].w"
    batch = ArgumentSource(0, "batch").item("x")
    assert (str(batch), batch.describe(), batch.display()) == ("a0['x']", "argument batch['x']", "batch['x']")
    assert CellSource("K2", "scale").describe() == "closure scale"
    assert weight == GlobalSource("K1", "model").attr("layers").item(2).attr("w")  # structural: one key per path


def test_each_guard_kind_accepts_what_it_saw_and_rejects_a_change():
    builder = GuardBuilder()
    x, n, d, flag = (ArgumentSource(i, name) for i, name in enumerate(["x", "n", "d", "flag"]))
    builder.add(GuardKind.TENSOR_MATCH, x, (tf.float32, (None, 3)), "x", "here")
    builder.add(GuardKind.NUMBER_TYPE, n, int, "n", "here")
    builder.add(GuardKind.SEQUENCE_MATCH, d, (dict, 2, ("a", "b")), "d", "here")
    builder.add(GuardKind.EQUALS_MATCH, d.item("a"), float("nan"), "d[a]", "here")
    builder.add(GuardKind.NUMBER_TYPE, flag, bool, "flag", "here")
    prepare = builder.compile(4, [x])
    seen = (tf.zeros([5, 3]), 7, {"a": float("nan"), "b": 1}, True)
    assert prepare(*seen) is not None
    changes = [
        (tf.zeros([5, 4]), 7, seen[2], True),
        (seen[0], 2**40, seen[2], True),  # an int past the int32 feed range
        (seen[0], 7.0, seen[2], True),
        (seen[0], 7, {"b": 1, "a": float("nan")}, True),  # same keys, another order
        (seen[0], 7, {"a": 0.5, "b": 1}, True),
        (seen[0], 7, seen[2], 1),  # 1 == True, but not a bool
    ]
    for args in changes:
        assert prepare(*args) is None, args
        assert builder.failing(list(args)), args
    assert {g.kind for g in builder.failing(list(changes[0]))} == {GuardKind.TENSOR_MATCH}


def test_a_computed_source_is_called_once_per_check():
    """A Keras state fingerprint costs tens of µs: prepare() computes it once, not once per use."""
    calls = []

    def fingerprint(obj):
        calls.append(obj)
        return (1, ("units", 4))

    builder = GuardBuilder()
    source = CallSource(builder.const(fingerprint), (ArgumentSource(0, "layer"),), "the layer's settings")
    builder.add(GuardKind.EQUALS_MATCH, source, (1, ("units", 4)), "layer", "here")
    builder.add(GuardKind.EQUALS_MATCH, source, (1, ("units", 4)), "layer", "there")  # the same check: once
    prepare = builder.compile(1, [])
    assert prepare("layer") == [] and calls == ["layer"]
    fingerprint_changed = lambda obj: (1, ("units", 5))  # noqa: E731
    builder.namespace[source.function] = fingerprint_changed
    assert builder.compile(1, [])("layer") is None and builder.failing(["layer"])


def test_explain_names_guard_kinds_and_user_paths():
    class Model:
        def __init__(self):
            self.w = tf.Variable(2.0)
            self.scale = 3

    def make():
        model = Model()

        def step(x, arr):
            return x * model.w * model.scale + tf.reduce_sum(arr)

        return step, lambda: model.w.numpy()

    calls = [(tf.constant(float(i)), np.ones(3, np.float32)) for i in range(5)]
    jitted = run_differential(make, calls, min_graph_calls=2)
    report = janus.explain(jitted)
    for line in (
        "argument x is a float32 tensor of shape []  [TENSOR_MATCH x;",
        "argument arr is a float32 array of shape [3]  [NDARRAY_MATCH arr;",
        "closure model is <Model object>  [ID_MATCH C['model'];",
        "attribute scale == 3  [EQUALS_MATCH C['model'].scale;",
    ):
        assert line in report, report
