"""[semantics] Cases a second reviewer found: Keras settings and global config read while a graph
is built, object identity across the graph boundary, NumPy scalars, dict subclasses, arrays."""

import collections

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, run_differential

import janus

keras = tf.keras


def make_train_step():
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.layers.Dense(4, activation="relu"), keras.layers.BatchNormalization(),
                              keras.layers.Dropout(0.0), keras.layers.Dense(2)])  # fmt: skip
    model.build((None, 3))
    opt = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.MeanSquaredError()

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step, (model, opt, loss_fn), lambda: [v.numpy() for v in model.variables]


@pytest.mark.keras
@pytest.mark.parametrize(
    "change",
    [
        lambda model, opt, loss_fn: setattr(model.layers[1], "momentum", 0.5),
        lambda model, opt, loss_fn: setattr(model.layers[1], "epsilon", 0.5),
        lambda model, opt, loss_fn: setattr(opt, "clipnorm", 1e-3),
        lambda model, opt, loss_fn: setattr(model.layers[0], "activation", tf.nn.tanh),
    ],
    ids=["bn-momentum", "bn-epsilon", "clipnorm", "activation"],
)
def test_settings_of_keras_objects_changed_between_calls(change):
    eager_step, eager_objects, eager_state = make_train_step()
    raw_step, janus_objects, janus_state = make_train_step()
    jitted = janus.jit(raw_step)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0
    y = np.ones((4, 2), np.float32)
    for n in range(9):
        if n == 5:  # the same edit on both programs, between calls
            change(*eager_objects)
            change(*janus_objects)
        assert_same(eager_step(x, y), jitted(x, y), f"call {n}")
        assert_same(eager_state(), janus_state(), f"call {n} weights")
    assert janus.stats(jitted)["graph_calls"] >= 4, janus.explain(jitted)


@pytest.mark.keras
def test_keras_global_epsilon_changed_between_calls():
    def make():
        def f(x):
            return x + keras.backend.epsilon() if hasattr(keras.backend, "epsilon") else x

        return f, lambda: None

    saved = keras.backend.epsilon()
    try:
        eager_fn, _ = make()
        raw, _ = make()
        jitted = janus.jit(raw)
        for n in range(8):
            if n == 5:
                keras.backend.set_epsilon(0.5)
            assert_same(eager_fn(tf.constant(1.0)), jitted(tf.constant(1.0)), f"call {n}")
        assert janus.stats(jitted)["graph_calls"] >= 2, janus.explain(jitted)
    finally:
        keras.backend.set_epsilon(saved)


class Cache:
    def __init__(self):
        self.last_x = None
        self.last_y = None
        self.hits = 0

    def f(self, x):
        if self.last_x is x:
            self.hits += 1
            return self.last_y
        y = tf.sin(x) * 2.0
        self.last_x, self.last_y = x, y
        return y


def test_tensors_keep_their_identity_across_the_graph_boundary():
    eager, graphed = Cache(), Cache()
    jitted = janus.jit(Cache.f)
    xs = [tf.constant([float(i), 1.0]) for i in range(6)]
    for x in xs[:4] + [xs[4], xs[4], xs[5], xs[5]]:
        expected, got = Cache.f(eager, x), jitted(graphed, x)
        assert_same(expected, got)
        assert (graphed.last_x is x) == (eager.last_x is x)
        assert (got is graphed.last_y) == (expected is eager.last_y)
    assert graphed.hits == eager.hits == 2
    assert janus.stats(jitted)["graph_calls"] >= 2, janus.explain(jitted)


class Scaled:
    def __init__(self):
        self.lr = np.float32(0.01)
        self.best = float("inf")
        self.table = collections.OrderedDict(a=1.0, b=2.0)

    def step(self, x):
        loss = tf.reduce_sum(x) * self.lr
        return loss, type(self.table).__name__


def test_numpy_scalars_inf_and_ordered_dicts_on_the_heap():
    def make():
        obj = Scaled()
        return (lambda x: Scaled.step(obj, x)), lambda: (float(obj.lr), obj.best)

    run_differential(make, [(tf.constant([float(i), 1.0]),) for i in range(7)], min_graph_calls=0)


def test_a_fresh_array_each_call_is_returned_and_stored_without_rebuilding():
    class Loader:
        def __init__(self):
            self.last_batch = None

        def step(self, batch):
            self.last_batch = batch
            return tf.reduce_sum(tf.convert_to_tensor(batch)), batch

    eager, graphed = Loader(), Loader()
    jitted = janus.jit(Loader.step)
    rng = np.random.default_rng(0)
    for _ in range(10):
        batch = rng.normal(size=(3, 2)).astype(np.float32)
        expected, got = Loader.step(eager, batch), jitted(graphed, batch)
        assert_same(expected[0], got[0])
        assert got[1] is batch and graphed.last_batch is batch
    stats = janus.stats(jitted)
    assert stats["graphs_built"] == 1 and stats["graph_calls"] == 7, janus.explain(jitted)


def test_a_library_module_list_changed_in_place_between_calls():
    import sys

    def f(x):
        return x + len(sys.argv), "--double" in sys.argv

    jitted = janus.jit(f)
    saved = list(sys.argv)
    try:
        for n in range(8):
            if n == 5:
                sys.argv.append("--double")
            assert_same(f(tf.constant(1.0)), jitted(tf.constant(1.0)), f"call {n}")
    finally:
        sys.argv[:] = saved
    assert janus.stats(jitted)["graph_calls"] >= 2, janus.explain(jitted)


def test_an_int_step_counter_argument_is_relaxed_to_a_run_time_int():
    def make():
        seen = []

        def step(x, logs):
            logs["step"] = logs["step"] + 1
            seen.append(logs["step"] % 3)
            return x * logs["step"]

        return step, lambda: list(seen)

    logs_eager, logs_janus = {"step": 0}, {"step": 0}
    eager_fn, eager_state = make()
    raw, janus_state = make()
    jitted = janus.jit(raw)
    for _ in range(12):
        assert_same(eager_fn(tf.constant(2.0), logs_eager), jitted(tf.constant(2.0), logs_janus))
        assert logs_eager == logs_janus and eager_state() == janus_state()
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= 5 and stats["imperative_calls"] == 0, janus.explain(jitted)


class Flagged:
    def __init__(self):
        self.training = True
        self.w = tf.Variable(1.0)

    def step(self, x):
        if self.training:
            self.w.assign_add(x)
        return x * self.w


def test_a_bool_flag_on_self_that_flips_gets_one_graph_for_both_values():
    """Seen both ways, the flag is fed at run time and its `if` (a variable update) becomes a tf.cond."""
    eager, graphed = Flagged(), Flagged()
    jitted = janus.jit(Flagged.step)
    for i in range(14):
        eager.training = graphed.training = (i // 2) % 2 == 0
        assert_same(Flagged.step(eager, tf.constant(1.0)), jitted(graphed, tf.constant(1.0)), f"call {i}")
        assert_same(eager.w, graphed.w)
    stats = janus.stats(jitted)
    assert stats["graphs_built"] == 1 and stats["graph_calls"] >= 10, janus.explain(jitted)
