"""[generalize] ``for batch in dataset:`` inside a jitted step (janus/graphgen/datasets.py).

Eager makes a fresh iterator each time the loop runs and visits every element in order; the
graph iterates the same dataset (fed by its variant tensor, guarded on its element spec) in a
tf.while_loop. Each test compares every call with eager and requires graphs to serve calls,
or, for what janus refuses, that the refusal says why.
"""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus

keras = tf.keras


def floats(n, offset=0.0):
    return np.arange(n, dtype=np.float32) + np.float32(offset)


def served(jitted):
    return janus.stats(jitted)["graph_calls"]


# ---------------------------------------------------------------- sums and means over batches


def test_sum_and_mean_over_batches_of_a_fresh_dataset_each_call():
    def make():
        def epoch_stats(ds):
            total = 0.0  # a Python float that becomes a tensor in the first iteration
            n = 0  # a Python int counted per batch: still a Python int after the loop
            for batch in ds:
                total += tf.reduce_sum(batch)
                n += 1
            return total, n, total / n

        return epoch_stats, lambda: None

    sizes = [7, 8, 9, 3, 10, 7, 12, 1]
    calls = [(tf.data.Dataset.from_tensor_slices(floats(k, i)).batch(3),) for i, k in enumerate(sizes)]
    run_differential(make, calls, min_graph_calls=4)


def test_enumerate_over_a_dataset_gives_python_int_indices():
    def make():
        def weighted(ds):
            acc = tf.constant(0.0)
            last = -1
            for i, batch in enumerate(ds, start=1):
                acc += i * tf.reduce_sum(batch)
                last = i
            return acc, last

        return weighted, lambda: None

    calls = [(tf.data.Dataset.from_tensor_slices(floats(4 + i)).batch(2),) for i in range(7)]
    run_differential(make, calls, min_graph_calls=3)


def test_a_dataset_with_map_and_batch_and_tuple_elements():
    def make():
        def pairs(ds, w):
            loss = tf.constant(0.0)
            for x, y in ds:
                loss += tf.reduce_sum((x * w - y) ** 2)
            return loss

        return pairs, lambda: None

    def dataset(i):
        xs, ys = floats(10, i), floats(10) * 2.0
        return tf.data.Dataset.from_tensor_slices((xs, ys)).map(lambda a, b: (a * 0.5, b + 1.0)).batch(4)

    run_differential(make, [(dataset(i), tf.constant(0.1 * i)) for i in range(7)], min_graph_calls=3)


def test_a_dataset_made_inside_the_step_from_its_arguments():
    def make():
        def step(x):
            ds = tf.data.Dataset.from_tensor_slices(x).map(tf.square).batch(2)
            parts = []
            for b in ds:
                parts.append(tf.reduce_sum(b))
            return tf.stack(parts)

        return step, lambda: None

    run_differential(make, [(tf.constant(floats(5, i)),) for i in range(7)], min_graph_calls=3)


def test_a_dict_element_dataset_held_by_a_closure():
    def make():
        ds = tf.data.Dataset.from_tensor_slices({"x": floats(6), "y": floats(6) * 3.0}).batch(4)

        def step(scale):
            total = tf.constant(0.0)
            for batch in ds:
                total += tf.reduce_sum(batch["x"] * scale + batch["y"])
            return total

        return step, lambda: None

    run_differential(make, [(tf.constant(float(i)),) for i in range(7)], min_graph_calls=3)


# ---------------------------------------------------------------- empty datasets


def test_an_empty_dataset_leaves_the_python_float_as_eager_does():
    def make():
        def epoch_sum(ds):
            total = 0.0
            for batch in ds:
                total += tf.reduce_sum(batch)
            return total

        return epoch_sum, lambda: None

    sizes = [5, 6, 7, 0, 8, 0, 9, 4]  # eager returns the Python float 0.0 for the empty ones
    calls = [(tf.data.Dataset.from_tensor_slices(floats(k)).batch(2),) for k in sizes]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["assumption_failures"] >= 1


def test_an_empty_dataset_with_a_tensor_accumulator_and_a_counter():
    def make():
        def epoch(ds):
            total = tf.constant(0.0)
            n = 0
            for batch in ds.batch(2):
                total += tf.reduce_sum(batch)
                n += 1
            return total, n

        return epoch, lambda: None

    sizes = [5, 6, 2, 7, 0, 8, 3, 9]  # filter: cardinality unknown; some epochs are empty
    calls = [(tf.data.Dataset.from_tensor_slices(floats(k)).filter(lambda v: v > 2.0),) for k in sizes]
    run_differential(make, calls, min_graph_calls=4)


# ---------------------------------------------------------------- shuffling


def epoch_order(ds):
    order = tf.constant(0, tf.int64)
    for x in ds:
        order = order * 10 + x
    return order


def test_a_held_dataset_shuffled_with_an_op_seed_reshuffles_each_epoch_as_eager():
    def make():
        ds = tf.data.Dataset.range(7).shuffle(7, seed=11)  # both programs: the same seed, the same epochs

        def epoch():
            return epoch_order(ds)

        return epoch, lambda: None

    jitted = run_differential(make, [()] * 8, min_graph_calls=4)
    graph = janus.explain(jitted)
    assert "reshuffles every epoch" in graph


def test_a_shuffled_dataset_argument_with_an_op_seed():
    # Each program iterates its own dataset (run_differential would hand both the same one).
    eager_ds, jit_ds = (tf.data.Dataset.range(6).shuffle(6, seed=3) for _ in range(2))
    jitted = janus.jit(epoch_order)
    for n in range(8):
        assert int(jitted(jit_ds)) == int(epoch_order(eager_ds)), f"epoch {n}"
    assert served(jitted) >= 4


def test_a_dataset_shuffled_inside_the_step_with_an_op_seed():
    def make():
        def step(x):
            ds = tf.data.Dataset.from_tensor_slices(x).shuffle(8, seed=5).batch(3)
            sums = []
            for b in ds:
                sums.append(tf.reduce_sum(b))
            return tf.stack(sums)

        return step, lambda: None

    run_differential(make, [(tf.range(8.0) * (i + 1),) for i in range(7)], min_graph_calls=3)


def test_an_assumption_after_a_reshuffling_epoch_is_refused():
    def make():
        ds = tf.data.Dataset.range(5).shuffle(5, seed=2)

        def epoch(scale):
            n = 0
            for _ in ds:
                n += 1
            return n / scale  # Python's ZeroDivisionError: a JanusAssert after the epoch began

        return epoch, lambda: None

    jitted = run_differential(make, [(float(i + 1),) for i in range(6)], min_graph_calls=0)
    assert served(jitted) == 0
    assert "a failure would re-run the call eagerly" in janus.explain(jitted)


# ---------------------------------------------------------------- a training loop inside the step


@pytest.mark.keras
def test_a_training_epoch_over_a_dataset_inside_the_step():
    def make():
        keras.utils.set_random_seed(4)
        model = keras.Sequential(
            [keras.layers.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)]
        )
        opt = keras.optimizers.SGD(0.05)
        rng = np.random.default_rng(0)
        xs = rng.normal(size=(10, 3)).astype("float32")
        ys = rng.normal(size=(10, 1)).astype("float32")
        ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(4)

        def train_epoch():
            losses = []
            for x, y in ds:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
                grads = tape.gradient(loss, model.trainable_variables)
                opt.apply_gradients(zip(grads, model.trainable_variables))
                losses.append(loss)
            return tf.reduce_mean(tf.stack(losses))

        return train_epoch, lambda: [v.numpy() for v in model.trainable_variables]

    run_differential(make, [()] * 6, min_graph_calls=3)


def test_a_variable_updated_per_batch_then_an_assumption_that_fails_after_the_epoch():
    def make():
        v = tf.Variable(0.0)

        def step(ds):
            n = 0
            for x in ds:
                v.assign_add(tf.reduce_sum(x))
                n += 1
            if n > 2:  # profiled: never; a longer epoch fails the assumption after the updates ran
                return v * 2.0
            return v + 0.0

        return step, lambda: v

    sizes = [4, 4, 3, 4, 4, 7, 4, 8]
    calls = [(tf.data.Dataset.range(k).map(lambda t: tf.cast(t, tf.float32)).batch(2),) for k in sizes]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["assumption_failures"] >= 1


# ---------------------------------------------------------------- refusals


def test_from_generator_is_refused_with_its_reason():
    def make():
        def gen():
            yield from (1.0, 2.0, 3.0)

        ds = tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.float32))

        def step(w):
            total = tf.constant(0.0)
            for x in ds:
                total += x * w
            return total

        return step, lambda: None

    jitted = run_differential(make, [(tf.constant(float(i)),) for i in range(5)], min_graph_calls=0)
    assert served(jitted) == 0
    assert "runs Python code" in janus.explain(jitted)


def test_appending_to_a_python_list_outside_the_step_is_refused():
    def make():
        history = []

        def step(ds):
            for batch in ds:
                history.append(tf.reduce_sum(batch))
            return len(history)

        return step, lambda: [float(h) for h in history]

    calls = [(tf.data.Dataset.from_tensor_slices(floats(4 + i)).batch(2),) for i in range(5)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert served(jitted) == 0
    assert "heap write inside tensor-dependent control flow" in janus.explain(jitted)


def test_a_local_list_of_python_floats_is_refused():
    def make():
        def step(ds):
            losses = []
            for batch in ds:
                losses.append(float(tf.reduce_sum(batch)))
            return losses

        return step, lambda: None

    calls = [(tf.data.Dataset.from_tensor_slices(floats(4 + i)).batch(2),) for i in range(5)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert served(jitted) == 0


def test_print_inside_the_loop_body():
    def make():
        def step(ds):
            total = tf.constant(0.0)
            for batch in ds:
                print("batch")
                total += tf.reduce_sum(batch)
            return total

        return step, lambda: None

    calls = [(tf.data.Dataset.from_tensor_slices(floats(4 + i)).batch(2),) for i in range(5)]
    run_differential(make, calls, min_graph_calls=0)  # refused or exact: never a print too few


def test_a_comprehension_over_a_dataset_is_refused():
    def make():
        def step(ds):
            return tf.add_n([tf.reduce_sum(b) for b in ds])

        return step, lambda: None

    calls = [(tf.data.Dataset.from_tensor_slices(floats(4 + i)).batch(2),) for i in range(5)]
    jitted = run_differential(make, calls, min_graph_calls=0)
    assert served(jitted) == 0
    assert "other than by a `for` statement" in janus.explain(jitted)


def test_len_of_a_dataset_argument():
    def make():
        def per_batch(ds):
            total = tf.constant(0.0)
            for batch in ds:
                total += tf.reduce_sum(batch)
            return total / len(ds), len(ds)

        return per_batch, lambda: None

    sizes = [5, 6, 7, 8, 9, 4, 6]
    calls = [(tf.data.Dataset.from_tensor_slices(floats(k)).batch(2),) for k in sizes]
    calls.append((tf.data.Dataset.from_tensor_slices(floats(6)).filter(lambda v: v > 1.0),))  # eager: TypeError
    run_differential(make, calls, min_graph_calls=4)


def test_a_gradient_through_the_epoch_then_one_update():
    def make():
        w = tf.Variable(0.5)

        def step(ds):
            with tf.GradientTape() as tape:
                loss = tf.constant(0.0)
                for x in ds:
                    loss += tf.reduce_sum((x * w - 1.0) ** 2)
            grad = tape.gradient(loss, w)
            w.assign_sub(0.01 * grad)
            return loss, grad

        return step, lambda: w

    calls = [(tf.data.Dataset.from_tensor_slices(floats(5 + k)).batch(2),) for k in range(7)]
    run_differential(make, calls, min_graph_calls=3)


def test_a_user_lambda_filtering_a_dataset_made_in_the_step():
    # While profiling, tf.data traces the lambda with symbolic tensors: the profiler must not read
    # the bool it returns (it used to call .numpy() on it, and the user's program raised).
    def make():
        def step(x):
            total = tf.constant(0.0)
            for b in tf.data.Dataset.from_tensor_slices(x).filter(lambda v: v > 1.0).batch(2):
                total += tf.reduce_sum(b)
            return total

        return step, lambda: None

    jitted = run_differential(make, [(tf.constant(floats(5, i)),) for i in range(5)], min_graph_calls=0)
    assert "filter()" in janus.explain(jitted)  # a function handed to tf.data: refused, named
