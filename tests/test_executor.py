"""The cache, guards, fallback and relaxation paths of the executor."""

import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, no_state, run_differential

import janus


def batch(rows, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=(rows, 8)).astype("float32"))


def test_shape_relaxation_builds_at_most_two_graphs():
    def f(x):
        return tf.reduce_sum(x * 2.0, axis=0) + tf.cast(tf.shape(x)[0], tf.float32)

    calls = [(batch(4, i),) for i in range(4)] + [(batch(r, 9),) for r in (3, 2, 6)]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=3)
    stats = janus.stats(jitted)
    assert stats["graphs_built"] <= 2, janus.explain(jitted)
    assert stats["graph_calls"] == 3  # (4,8) once after profiling, then (2,8) and (6,8) on the relaxed graph
    relaxed = jitted.cache.entries[0].graph.specs[0]
    assert relaxed.shape == (None, 8)


def test_rank_change_relaxes_to_unknown_rank():
    def f(x):
        return x * 2.0

    calls = [(tf.ones([2, 2]),)] * 4 + [(tf.ones([3]),), (tf.ones([2, 2, 2]),), (tf.ones([5]),)]
    jitted = run_differential(lambda: (f, no_state), calls)
    assert jitted.cache.entries[0].graph.specs[0].shape is None


def test_dtype_change_gets_its_own_graph():
    def f(x):
        return x + x

    calls = [(tf.ones([3]),)] * 4 + [(tf.ones([3], tf.int32),)] * 3 + [(tf.ones([3]),)]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=4)
    assert janus.stats(jitted)["graphs_built"] == 2


def test_small_constant_tensor_value_speculation_fails_and_relaxes():
    def f(x, flag):
        return x * tf.cast(flag, tf.float32) + 1.0

    on, off = tf.constant(1), tf.constant(0)
    calls = [(batch(2, i), on) for i in range(5)] + [(batch(2, 7), off)] + [(batch(2, i), on) for i in range(3)]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=4)
    stats = janus.stats(jitted)
    assert stats["assumption_failures"] == 1 and stats["fallbacks"] >= 1
    assert "JanusAssert failed" in janus.explain(jitted)
    assert jitted.cache.entries[0].graph.specs[1].value is None  # relaxed: value no longer speculated


def test_assumption_failure_leaves_variables_untouched():
    """A variable update and a failing assumption in the same call: no double update."""

    def make():
        v = tf.Variable(0.0)

        def f(x, flag):
            v.assign_add(1.0)
            return x + v * tf.cast(flag, tf.float32)

        return f, lambda: v.numpy()

    on, off = tf.constant(1), tf.constant(0)
    calls = [(tf.constant(1.0), on)] * 5 + [(tf.constant(1.0), off)] + [(tf.constant(1.0), on)] * 2
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["assumption_failures"] == 1


def test_state_updates_are_ordered_after_every_assertion():
    v = tf.Variable(0.0)

    def f(x, flag):
        v.assign_add(1.0)
        return x * tf.cast(flag, tf.float32)

    jitted = janus.jit(f)
    for _ in range(4):
        jitted(tf.constant(1.0), tf.constant(1))
    graph = jitted.cache.entries[0].graph.concrete.graph
    asserts = [op for op in graph.get_operations() if op.type == "JanusAssert"]
    updates = [op for op in graph.get_operations() if op.type == "AssignAddVariableOp"]
    assert asserts and updates
    for update in updates:
        assert set(asserts) <= set(update.control_inputs)


def test_tensor_branch_is_speculated_and_checked():
    def f(x):
        if tf.reduce_sum(x) > 0:
            y = x * 2.0
        else:
            y = -x
        return y

    pos = [(tf.constant([1.0, 2.0]) + i,) for i in range(5)]
    calls = pos + [(tf.constant([-5.0, -1.0]),)] + pos[:2]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=2)
    stats = janus.stats(jitted)
    assert stats["assumption_failures"] == 1
    report = janus.explain(jitted)
    assert "branch is" in report and "test_executor.py" in report


def test_python_int_that_keeps_changing_is_relaxed_to_its_type():
    def f(x, n):
        return x * n, n // 2, n % 3 == 0

    calls = [(tf.constant(1.0), 5)] * 4 + [(tf.constant(1.0), i) for i in range(1, 10)]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=5)
    assert "argument n is an int (value relaxed)" in janus.explain(jitted)


def test_python_string_that_keeps_changing_goes_imperative_with_reason():
    def f(x, mode):
        return x * 2.0 if mode.startswith("t") else x

    calls = [(tf.constant(1.0), "train")] * 4 + [(tf.constant(1.0), m) for m in ("a", "b", "c", "d", "e")]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=0)
    assert "keeps changing value" in janus.explain(jitted)


def test_python_float_that_keeps_changing_is_relaxed_to_its_type():
    def f(x, lr, temperature):
        scaled = lr * 2.0 - 0.25 / temperature
        if lr > 0.3:
            x = x + 1.0
        return x * scaled, scaled, lr < 1.0

    xs = [tf.constant([1.0, 2.0])] * 12
    lrs = [0.5] * 4 + [0.5 - 0.01 * i for i in range(8)]
    calls = [(x, lr, 2.0 + lr) for x, lr in zip(xs, lrs)]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=4)
    spec = jitted.cache.entries[0].graph.specs[1]
    assert type(spec).__name__ == "NumberArg", janus.explain(jitted)
    assert janus.stats(jitted)["graphs_built"] <= 4


def test_relaxed_float_division_by_zero_raises_like_python():
    def f(x, d):
        return x / d, 1.0 / d

    calls = [(tf.constant(1.0), 2.0 + i) for i in range(8)] + [(tf.constant(1.0), 0.0), (tf.constant(1.0), 4.0)]
    jitted = run_differential(lambda: (f, no_state), calls, min_graph_calls=2)
    assert janus.stats(jitted)["assumption_failures"] >= 1


class Schedule:
    def __init__(self):
        self.lr = 0.1


SCHEDULE = Schedule()


def scaled_by_schedule(x):
    return x * SCHEDULE.lr


def test_heap_float_that_keeps_changing_is_fed_each_call():
    jitted = janus.jit(scaled_by_schedule)
    for i in range(8):
        SCHEDULE.lr = 0.1 / (i + 1)
        assert_same(tf.constant([2.0]) * SCHEDULE.lr, jitted(tf.constant([2.0])))
    assert janus.stats(jitted)["graph_calls"] >= 4, janus.explain(jitted)
    assert "value relaxed" in janus.explain(jitted)


def test_graph_building_error_falls_back_with_logged_reason(monkeypatch, caplog):
    def boom(*args, **kwargs):
        raise RuntimeError("synthetic bug in the generator")

    monkeypatch.setattr("janus.driver.generate", boom)

    def f(x):
        return x + 1.0

    jitted = janus.jit(f)
    with caplog.at_level(logging.WARNING, logger="janus"):
        for t in [tf.constant(1.0)] * 5:
            assert float(jitted(t)) == 2.0
    assert "synthetic bug" in caplog.text
    assert "internal error" in janus.explain(jitted)
    assert janus.stats(jitted)["imperative_calls"] == 2


def test_library_call_failing_on_symbolic_tensors_falls_back():
    def f(x):
        return np.asarray(x) + 1  # needs a concrete value: refused, eager works

    jitted = janus.jit(f)
    for _ in range(5):
        np.testing.assert_array_equal(jitted(tf.constant([1, 2])), np.array([2, 3]))
    assert janus.stats(jitted)["imperative_calls"] >= 1
    assert "asarray() of a value known only at run time" in janus.explain(jitted)


def test_real_errors_raise_like_eager_and_do_not_count_against_the_graph():
    def f(x, i):
        return tf.gather(x, i)

    jitted = janus.jit(f)
    x = tf.constant([1.0, 2.0, 3.0])
    for _ in range(4):
        jitted(x, tf.constant(1))
    for _ in range(janus.config.max_failures + 1):  # eager raises too: the program's own error
        with pytest.raises(tf.errors.InvalidArgumentError):
            jitted(x, tf.constant(7))
    assert float(jitted(x, tf.constant(2))) == 3.0
    assert janus.stats(jitted)["graph_calls"] >= 2, janus.explain(jitted)


def test_max_graphs_limit():
    janus.config.max_graphs = 1

    def f(x):
        return x * 2.0

    calls = [(tf.ones([2]),)] * 4 + [(tf.ones([2], tf.float64),)] * 2 + [(tf.ones([2]),)]
    jitted = run_differential(lambda: (f, no_state), calls)
    assert "max_graphs" in janus.explain(jitted)


def test_profile_calls_option_and_decorator_forms():
    @janus.jit(profile_calls=1)
    def f(x):
        return x + 1

    f(tf.constant(1))
    f(tf.constant(1))
    assert janus.stats(f)["graph_calls"] == 1
    assert janus.jit(f) is f


def test_config_profile_calls_and_reset():
    janus.config.profile_calls = 2

    @janus.jit
    def f(x):
        return x + 1

    for _ in range(3):
        f(tf.constant(1))
    assert janus.stats(f)["graph_calls"] == 1
    janus.reset()
    assert janus.stats(f)["calls"] == 0
    f(tf.constant(1))
    assert janus.stats(f)["profiled_calls"] == 1


def test_config_rejects_unknown_settings():
    with pytest.raises(AttributeError):
        janus.config.profile_call = 3


def test_keyword_and_default_arguments_bind_like_python():
    def f(x, scale=2.0, *, shift=1.0):
        return x * scale + shift

    jitted = janus.jit(f)
    x = tf.constant([1.0, 2.0])
    for _ in range(4):
        assert_same(f(x, shift=3.0), jitted(x, shift=3.0))
    with pytest.raises(TypeError):
        jitted(x, 1.0, 2.0)
    assert janus.stats(jitted)["graph_calls"] >= 1


def test_janus_disable_environment_makes_jit_a_pass_through():
    script = (
        "import tensorflow as tf, janus\n"
        "f = janus.jit(lambda x: x + 1)\n"
        "[f(tf.constant(1)) for _ in range(5)]\n"
        "print(janus.stats(f)['calls'], janus.config.disabled)\n"
    )
    env = dict(os.environ, JANUS_DISABLE="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "True"]


def test_generation_never_runs_user_code():
    """User code must not run while a graph is built: side-effect counts equal eager's."""
    calls = []

    class Weird:
        def __add__(self, other):
            calls.append("add")
            return other

        @property
        def scale(self):
            calls.append("scale")
            return 2.0

    weird = Weird()

    def uses_operator(x):
        return weird + x

    def uses_property(x):
        return x * weird.scale

    def side_effect_helper(x):
        calls.append("helper")
        return x

    def uses_helper(x):
        return side_effect_helper(x) * 2.0

    for fn, converted in ((uses_operator, False), (uses_property, False), (uses_helper, True)):
        calls.clear()
        jitted = janus.jit(fn)
        for _ in range(6):
            jitted(tf.constant(1.0))
        assert len(calls) == 6, (fn.__name__, calls)  # exactly once per call, never while generating
        if converted:  # the helper's append is deferred and replayed after each graph call
            assert janus.stats(jitted)["graph_calls"] == 3, janus.explain(jitted)
        else:
            assert janus.stats(jitted)["imperative_calls"] == 3, janus.explain(jitted)
            assert "runs imperatively" in janus.explain(jitted)


class Counter:
    def __init__(self):
        self.step = 0


def test_heap_int_that_keeps_changing_is_detected_from_the_profile_and_fed():
    counter = Counter()

    def f(x):
        return x * counter.step

    jitted = janus.jit(f)
    for i in range(6):
        counter.step = i
        assert float(jitted(tf.constant(2.0))) == 2.0 * i
    report = janus.explain(jitted)
    assert "attribute step is an int (value relaxed)" in report, report
    assert janus.stats(jitted)["graphs_built"] == 1 and janus.stats(jitted)["graph_calls"] == 3
    recorded = [k for k in jitted.profile.heap_reads if k[2] == ("counter", ("step",))]
    assert recorded, jitted.profile.heap_reads.keys()


def test_library_wrappers_of_user_code_never_run_it_while_generating():
    import contextlib
    import functools

    ran = []

    @contextlib.contextmanager
    def scope():
        ran.append("enter")
        yield

    def uses_contextmanager(x):
        with scope():
            return x + 1.0

    def scale(x, k):
        return x * k

    def uses_partial(x):
        return functools.partial(scale, k=3.0)(x)

    lam = tf.keras.layers.Lambda(lambda t: t * 2.0)

    def uses_lambda_layer(x):
        return lam(x)

    # a Keras Lambda layer calls the user lambda it holds: converted through a shim, as Dense(activation=f)
    for fn, converted in ((uses_contextmanager, False), (uses_partial, True), (uses_lambda_layer, True)):
        ran.clear()
        jitted = janus.jit(fn)
        for _ in range(5):
            assert_same(fn(tf.constant([1.0])), jitted(tf.constant([1.0])))
        assert (janus.stats(jitted)["graph_calls"] > 0) == converted, janus.explain(jitted)
        if fn is uses_contextmanager:
            assert ran == ["enter"] * 10  # 5 eager calls and 5 janus calls: never while generating


def test_user_methods_reached_through_builtins_or_descriptors_never_run_while_generating():
    calls = []

    class Ordered:
        def __init__(self, v):
            self.v = v

        def __lt__(self, other):
            calls.append("lt")
            return self.v < other.v

        def __hash__(self):
            calls.append("hash")
            return hash(self.v)

    class Lazy:
        def __get__(self, obj, owner):
            calls.append("get")
            return 2.0

    class Holder:
        scale = Lazy()

    items, holder = [Ordered(2), Ordered(1)], Holder()

    def uses_sorted(x):
        return x * sorted(items)[0].v

    def uses_set(x):
        return x * len({items[0], items[1]})

    def uses_descriptor(x):
        return x * holder.scale

    for fn, per_call in ((uses_sorted, ["lt"]), (uses_set, ["hash", "hash"]), (uses_descriptor, ["get"])):
        calls.clear()
        jitted = janus.jit(fn)
        for _ in range(5):
            assert_same(fn(tf.constant(1.0)), jitted(tf.constant(1.0)))
        assert calls == per_call * 10, (fn.__name__, calls)  # 5 eager + 5 janus calls, none while generating
        assert "runs imperatively" in janus.explain(jitted)


def test_returning_indexed_slices_gradients():
    """An embedding table's gradient is an IndexedSlices in eager; janus returns one too."""
    table = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [6, 2]))

    def grad(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids) ** 2)
        return tape.gradient(loss, table)

    jitted = janus.jit(grad)
    for k in range(6):
        ids = tf.constant([k % 6, (k + 2) % 6])
        expected, actual = grad(ids), jitted(ids)
        assert isinstance(actual, tf.IndexedSlices)
        np.testing.assert_allclose(tf.convert_to_tensor(actual), tf.convert_to_tensor(expected))
    assert janus.stats(jitted)["graph_calls"] >= 2


def test_a_graph_that_errs_where_eager_does_not_is_dropped_with_the_reason(monkeypatch):
    """Such an error is janus's own: eager answers each call, and after config.max_failures of them the
    function runs imperatively instead of paying for a failing graph and eager on every call."""

    def f(x):
        return x * 2.0

    jitted = janus.jit(f)
    for _ in range(4):
        jitted(tf.constant(1.0))
    assert janus.stats(jitted)["graph_calls"] == 1

    def failing_graph(self, flat, bound):
        raise tf.errors.InternalError(None, None, "synthetic kernel failure")

    monkeypatch.setattr("janus.driver.GraphRunner.__call__", failing_graph)
    for i in range(5):
        assert float(jitted(tf.constant(float(i)))) == 2.0 * i
    stats = janus.stats(jitted)
    assert stats["fallbacks"] == janus.config.max_failures, stats
    assert stats["imperative_calls"] == 5 - janus.config.max_failures, stats
    explained = janus.explain(jitted)
    assert "synthetic kernel failure" in explained and "eager did not" in explained
