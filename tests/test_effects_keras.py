"""Keras programs whose Python state changes between (or during) calls: janus must give eager's answer.

Each test runs one program eagerly and under janus and compares, call by call, the results, the
weights and the Python state the program reads or writes. The patterns are the usual TF2 ones:
GAN steps that freeze the discriminator, fine-tuning that freezes/unfreezes parts of a model,
freezing BatchNormalization, layers appended to a model between calls, user layers that override
``__call__``, layers that stash tensors on ``self`` in ``call()``, library layers that hold a user
activation, and op-seeded stateful random ops (``tf.random.uniform(seed=...)``, Keras ``Dropout``).

Runs under Keras 3 and (``TF_USE_LEGACY_KERAS=1``) Keras 2.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same, outcome, run_differential

import janus

pytestmark = pytest.mark.keras
keras = tf.keras
LEGACY_KERAS = keras.__name__.startswith("tf_keras")


# ---------------------------------------------------------------------------------------- helpers
def compare(n, expected, actual):
    assert actual[0] == expected[0], f"call {n}: eager {expected}, janus {actual}"
    assert_same(expected[1], actual[1], f"call {n} result")
    assert actual[2] == expected[2], f"call {n}: effects differ: eager {expected[2]}, janus {actual[2]}"


def lockstep(make, calls, before):
    """Like ``run_differential``, but the test changes each mode's program identically between calls.

    ``make()`` returns ``(fn, state, handle)``. Before call ``n``, ``before(n, handle)`` runs on the
    eager program's handle and the eager call is made; then it runs on janus's handle and the jitted
    call is made. Returns the jitted function and the graph calls made per call index.
    """
    eager_fn, eager_state, eager_handle = make()
    raw_fn, jit_state, jit_handle = make()
    jitted = janus.jit(raw_fn)
    served = []
    for n, args in enumerate(calls):
        before(n, eager_handle)
        expected = outcome(eager_fn, args)
        before(n, jit_handle)
        graph_calls = janus.stats(jitted)["graph_calls"]
        actual = outcome(jitted, args)
        served.append(janus.stats(jitted)["graph_calls"] - graph_calls)
        compare(n, expected, actual)
        assert_same(eager_state(), jit_state(), f"call {n} state")
    return jitted, served


def one_after_another(make, calls, seed=1):
    """Runs all of eager's calls, then all of janus's, each right after ``tf.random.set_seed(seed)``.

    For op-seeded stateful random ops: eager keeps one stream per (global seed, op seed) for the
    whole process, so the two modes can't interleave; each must see the stream from its start.
    """
    eager_fn, eager_state = make()
    tf.random.set_seed(seed)
    expected = []
    for args in calls:
        expected.append((outcome(eager_fn, args), eager_state()))
    raw_fn, jit_state = make()
    jitted = janus.jit(raw_fn)
    tf.random.set_seed(seed)
    for n, (args, (want, want_state)) in enumerate(zip(calls, expected)):
        got = outcome(jitted, args)
        compare(n, want, got)
        assert_same(want_state, jit_state(), f"call {n} state")
    return jitted


def weights(model):
    return [v.numpy() for v in model.weights]


def batches(n, x_shape, y_shape, seed=0):
    rng = np.random.default_rng(seed)
    return [
        (
            tf.constant(rng.normal(size=x_shape).astype("float32")),
            tf.constant(rng.normal(size=y_shape).astype("float32")),
        )
        for _ in range(n)
    ]


# -------------------------------------------------------- a user layer that overrides __call__
class CountingScale(keras.layers.Layer):
    """Counts its own calls in plain Python by overriding ``__call__`` (not ``call``)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = 0

    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(input_shape[-1],), initializer="ones")

    def call(self, x):
        return x * self.w + 1.0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return super().__call__(*args, **kwargs)


@pytest.mark.parametrize("where", ["direct", "in_sequential"])
def test_layer_overriding_dunder_call_counts_every_call(where):
    def make():
        layer = CountingScale()
        if where == "direct":
            layer.build((None, 3))
            outer = layer
        else:  # Keras's Sequential (library code) calls the user's __call__
            outer = keras.Sequential(
                [keras.layers.Input((3,)), keras.layers.Dense(3, kernel_initializer="ones"), layer]
            )

        def step(x):
            layer.w.assign(layer.w * 1.5)
            return outer(x) * 2.0

        return step, lambda: [layer.calls, layer.w.numpy()]

    rng = np.random.default_rng(0)
    calls = [(tf.constant(rng.normal(size=(2, 3)).astype("float32")),) for _ in range(8)]
    # janus may convert __call__ or run it imperatively, but the count must be eager's after every call
    run_differential(make, calls, min_graph_calls=0)


# ------------------------------------------------- trainable flipped between calls (GAN freeze)
class TinyGan(keras.Model):
    def __init__(self):
        super().__init__()
        self.generator = keras.Sequential([keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(4)])
        self.discriminator = keras.layers.Dense(1)

    def call(self, z):
        return self.discriminator(self.generator(z))


def make_gan_step():
    keras.utils.set_random_seed(0)
    gan = TinyGan()
    gan(tf.zeros([1, 2]))
    opt = keras.optimizers.SGD(0.1)

    def train_step(z, target):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(gan(z) - target))
        grads = tape.gradient(loss, gan.trainable_variables)
        opt.apply_gradients(zip(grads, gan.trainable_variables))
        return loss

    return train_step, lambda: weights(gan), gan


@pytest.mark.parametrize("frozen", ["discriminator_layer", "generator_model"])
def test_trainable_flipped_between_train_steps(frozen):
    snapshots = {}

    def before(n, gan):
        part = gan.discriminator if frozen == "discriminator_layer" else gan.generator
        if n == 4:
            snapshots[id(gan)] = weights(part)
        if n == 7:  # calls 4..6 left the frozen part exactly as it was
            assert_same(snapshots[id(gan)], weights(part), f"{frozen} after its frozen calls")
        part.trainable = not 4 <= n <= 6  # frozen for calls 4..6, then trained again

    jitted, served = lockstep(make_gan_step, batches(10, (5, 2), (5, 1)), before)
    assert sum(served) > 0, janus.explain(jitted)
    assert sum(served[4:]) > 0, f"no graph served a call after the flip: {served}\n{janus.explain(jitted)}"


# -------------------------------------------------------------- BatchNormalization frozen mid-run
def test_batchnorm_frozen_after_four_steps():
    def make():
        keras.utils.set_random_seed(0)
        bn = keras.layers.BatchNormalization()
        model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(6), bn, keras.layers.Dense(2)])
        opt = keras.optimizers.SGD(0.05)

        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        # model.weights includes BN's moving mean and variance
        return train_step, lambda: weights(model), bn

    def before(n, bn):
        if n == 4:
            bn.trainable = False  # frozen BN runs in inference mode: moving stats stop, gamma/beta too

    jitted, served = lockstep(make, batches(9, (8, 4), (8, 2), seed=1), before)
    assert sum(served[4:]) > 0, f"no graph served a call after the freeze: {served}\n{janus.explain(jitted)}"


# -------------------------------------------------- a block appended to a model's list of layers
class Stack(keras.Model):
    def __init__(self):
        super().__init__()
        self.blocks = [keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(4, activation="tanh")]
        # created (tracked) up front: Keras 3 refuses new sub-layers once a model is built
        self.spare = keras.layers.Dense(4, activation="tanh")

    def call(self, x):
        h = x
        for block in self.blocks:
            h = block(h)
        return h * 2.0


def test_block_appended_to_model_layer_list_between_calls():
    def make():
        keras.utils.set_random_seed(0)
        model = Stack()
        model.spare.build((None, 4))
        model.spare.set_weights([np.linspace(-1.0, 1.0, 16, dtype="float32").reshape(4, 4), np.full(4, 0.1, "float32")])
        model(tf.zeros([1, 4]))

        def predict(x):
            return model(x)

        return predict, lambda: [len(model.blocks), *weights(model)], model

    def before(n, model):
        if n == 4:
            model.blocks.append(model.spare)

    rng = np.random.default_rng(2)
    calls = [(tf.constant(rng.normal(size=(3, 4)).astype("float32")),) for _ in range(10)]
    jitted, served = lockstep(make, calls, before)
    assert sum(served[4:]) >= 2, f"graphs served too few calls after the append: {served}\n{janus.explain(jitted)}"


# --------------------------------------------- model.trainable_variables read inside the step
def test_trainable_variables_read_inside_step_while_a_layer_flips():
    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential(
            [keras.layers.Input((3,)), keras.layers.Dense(3, name="first"), keras.layers.Dense(2, name="second")]
        )

        def decay_step(x):
            total = tf.constant(0.0)
            for v in model.trainable_variables:  # decays only what is trainable now
                total += tf.reduce_sum(v)
                v.assign(v * 0.9)
            return len(model.trainable_variables), total + tf.reduce_sum(model(x))

        return decay_step, lambda: weights(model), model

    def before(n, model):
        model.get_layer("first").trainable = n not in (3, 4, 6)

    rng = np.random.default_rng(3)
    calls = [(tf.constant(rng.normal(size=(2, 3)).astype("float32")),) for _ in range(10)]
    jitted, served = lockstep(make, calls, before)
    assert sum(served) >= 2, f"graphs served too few calls: {served}\n{janus.explain(jitted)}"


# ---------------------------------------------- a layer that stashes its output on self in call()
class Recorder(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(3)
        self.activations = []

    def call(self, x):
        h = self.dense(x)
        self.activations.append(h)
        return tf.nn.relu(h)


def test_layer_appending_activations_to_python_list_keeps_eager_tensors():
    def make():
        keras.utils.set_random_seed(0)
        layer = Recorder()
        layer(tf.zeros([1, 3]))
        layer.activations.clear()

        def forward(x):
            return layer(x) * 2.0

        def state():
            stash = list(layer.activations)
            for i, t in enumerate(stash):
                assert isinstance(t, tf.Tensor) and hasattr(t, "numpy"), f"activations[{i}] is {t!r}"
                assert not tf.is_symbolic_tensor(t), f"activations[{i}] is a graph tensor: {t!r}"
            return [stash, *weights(layer)]

        return forward, state

    rng = np.random.default_rng(4)
    calls = [(tf.constant(rng.normal(size=(2, 3)).astype("float32")),) for _ in range(7)]
    run_differential(make, calls, min_graph_calls=2)


# ---------------------------------------------------- a library layer holding a user activation
ACTIVATION_CALLS = 0


def counting_gelu(x):
    global ACTIVATION_CALLS
    ACTIVATION_CALLS += 1
    return 0.5 * x * (1.0 + tf.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def test_dense_with_user_activation_runs_it_once_per_call():
    def make():
        keras.utils.set_random_seed(0)
        dense = keras.layers.Dense(4, activation=counting_gelu)
        dense.build((None, 3))

        def step(x):
            return dense(x) + 1.0

        return step, lambda: weights(dense)

    # the counter is module-level, shared by both modes: compare what each call adds to it
    eager_fn, eager_state = make()
    raw_fn, jit_state = make()
    jitted = janus.jit(raw_fn)
    rng = np.random.default_rng(5)
    for n in range(8):
        x = tf.constant(rng.normal(size=(2, 3)).astype("float32"))
        before = ACTIVATION_CALLS
        expected = outcome(eager_fn, (x,))
        eager_count = ACTIVATION_CALLS - before
        before = ACTIVATION_CALLS
        actual = outcome(jitted, (x,))
        jit_count = ACTIVATION_CALLS - before
        compare(n, expected, actual)
        assert jit_count == eager_count == 1, f"call {n}: activation ran {jit_count} times under janus"
        assert_same(eager_state(), jit_state(), f"call {n} state")
    # graphs may or may not serve these calls (min_graph_calls=0), but the count is eager's every call


# ----------------------------------------------------------- op-seeded stateful random ops
def test_op_seeded_random_uniform_continues_its_stream():
    # For reference, tf.function on the same step: after tf.random.set_seed(1), a tf.function
    # traced from fresh draws what eager draws. But a tf.function traced after eager calls have
    # drawn from the same op seed restarts the stream: its first calls repeat eager's first
    # draws (its graph op gets its own kernel, seeded (1, 42), state not shared with eager's).
    # janus is in that second situation: its profiled calls draw eagerly, then a graph would take
    # over. No graph op can continue eager's kernel, so janus refuses: the step runs imperatively
    # (eager's draws, every call) and explain() says why.
    def make():
        def noisy(x):
            return x + tf.random.uniform([3], seed=42)

        return noisy, lambda: None

    calls = [(tf.constant([float(i), 0.0, -1.0]),) for i in range(8)]
    jitted = one_after_another(make, calls)
    assert janus.stats(jitted)["imperative_calls"] > 0
    assert "op-seeded stateful random op" in janus.explain(jitted)


def test_seeded_dropout_in_training_mode():
    # Keras 2 (tf_keras): Dropout(seed=7) uses a legacy stateful op and a Python counter: eager's
    # call n uses op seed 7 + n (layer._random_generator._seed counts up). tf.function bakes the
    # seed read at trace time (7; the counter stops at 8) and its graph op continues its own stream
    # from there, so from the second call its masks differ from eager's.
    # Keras 3: Dropout's SeedGenerator keeps its state in a variable; tf.function matches eager.
    def make():
        layer = keras.layers.Dropout(0.5, seed=7)

        def drop(x):
            return layer(x, training=True)

        def state():
            generator = getattr(layer, "_random_generator", None)
            return [getattr(generator, "_seed", None), [v.numpy() for v in layer.variables]]

        return drop, state

    calls = [(tf.ones([2, 6]) * float(i + 1),) for i in range(8)]
    jitted = one_after_another(make, calls)
    if not LEGACY_KERAS:  # the seed lives in a variable: plainly convertible
        assert janus.stats(jitted)["graph_calls"] >= 1, janus.explain(jitted)
