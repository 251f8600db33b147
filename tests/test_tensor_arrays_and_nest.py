"""[generalize] Shapes from public TF2 code that got no graph: a tf.TensorArray carried by a loop on
a tensor (`ta = ta.write(i, h)` in an RNN), `tf.nest.map_structure` with a lambda or nested def
(over dicts of tensors, several structures, effects in the function), and `tf.vectorized_map`."""

import collections

import tensorflow as tf
from differential import run_differential

import janus


def test_an_rnn_writing_a_tensor_array_in_a_tensor_loop_with_gradients():
    def make():
        gen = tf.random.Generator.from_seed(1)
        w_x = tf.Variable(gen.normal([3, 4]))
        w_h = tf.Variable(gen.normal([4, 4]) * 0.3)

        def step(xs, steps):
            with tf.GradientTape() as tape:
                outputs = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
                h = tf.zeros([2, 4])
                for t in tf.range(steps):
                    h = tf.tanh(tf.matmul(xs[t], w_x) + tf.matmul(h, w_h))
                    outputs = outputs.write(t, h)
                stacked = outputs.stack()
                loss = tf.reduce_mean(stacked**2)
            grads = tape.gradient(loss, [w_x, w_h])
            for v, g in zip([w_x, w_h], grads):
                v.assign_sub(0.1 * g)
            return loss, stacked

        return step, lambda: [w_x.numpy(), w_h.numpy()]

    xs = tf.reshape(tf.range(6 * 2 * 3, dtype=tf.float32) / 40.0, [6, 2, 3])
    calls = [(xs, tf.constant(n)) for n in (3, 5, 4, 6, 2, 5, 3)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert janus.stats(jitted)["graphs_built"] == 1


def tensor_array_recurrence(clear_after_read):
    def make():
        def step(x, n):
            ta = tf.TensorArray(tf.float32, size=n, element_shape=[2], clear_after_read=clear_after_read)
            ta = ta.write(0, x)
            i = tf.constant(1)
            while i < n:
                ta = ta.write(i, ta.read(i - 1) * 2.0 + 1.0)
                i += 1
            return ta.stack(), ta.size()

        return step, lambda: None

    return make


def test_a_fixed_size_tensor_array_read_back_in_the_loop():
    calls = [(tf.constant([1.0, -1.0]), tf.constant(n)) for n in (2, 4, 3, 5, 2)]
    run_differential(tensor_array_recurrence(clear_after_read=False), calls, min_graph_calls=2)


def test_a_tensor_array_whose_reads_clear_as_eager_clears_them():
    """Eager zeroes an element once read (the default clear_after_read=True); a graph's TensorArray
    does not: janus keeps eager's zeros by running such code eagerly, and says how to get a graph."""
    calls = [(tf.constant([1.0, -1.0]), tf.constant(n)) for n in (2, 4, 3, 5, 2)]
    jitted = run_differential(tensor_array_recurrence(clear_after_read=None), calls, min_graph_calls=0)
    assert "create it with clear_after_read=False" in janus.explain(jitted)


def test_map_structure_with_lambdas_over_dicts_lists_and_two_structures():
    Pair = collections.namedtuple("Pair", "mean var")

    def make():
        w = tf.Variable([0.5, 2.0])

        def step(batch, stats):
            scaled = tf.nest.map_structure(lambda t: t * w, {"image": batch["image"], "aux": [batch["aux"], w]})
            diffs = tf.nest.map_structure(lambda a, b: a - b, stats, Pair(batch["aux"], batch["image"]))
            return scaled, diffs, tf.nest.map_structure(tf.reduce_sum, scaled)

        return step, lambda: w.numpy()

    calls = [
        (
            {"image": tf.constant([1.0, float(i)]), "aux": tf.constant([2.0, 3.0])},
            Pair(tf.constant([0.1, 0.2]), tf.constant([1.0, 1.0])),
        )
        for i in range(6)
    ]
    run_differential(make, calls, min_graph_calls=3)


def test_map_structure_calls_the_function_leaf_by_leaf_in_eager_order():
    """The function prints and appends: eager's order (tf.nest sorts dict keys) and count."""

    def make():
        seen = []

        def step(grads):
            def clip(g):
                seen.append(g.shape.rank)
                print("clip", g.shape)
                return tf.clip_by_value(g, -1.0, 1.0)

            return tf.nest.map_structure(clip, grads)

        return step, lambda: list(seen)

    calls = [({"w": tf.constant([3.0, -0.5 * i]), "b": tf.constant(2.0 * i)},) for i in range(6)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_map_structure_of_mismatched_structures_raises_as_in_eager():
    def make():
        def step(a, b):
            return tf.nest.map_structure(lambda x, y: x + y, a, b)

        return step, lambda: None

    same, mismatched = ([tf.constant(1.0)], [tf.constant(2.0)]), ([tf.constant(1.0)], (tf.constant(2.0),))
    calls = [same] * 5 + [mismatched] * 2 + [same] * 3
    run_differential(make, calls, min_graph_calls=4)


def test_vectorized_map_of_a_lambda_over_rows(monkeypatch):
    # Eager's vectorized_map traces a new tf.function each call, and TF logs a retracing warning with
    # a process-wide count: a graph call traces nothing, as tf.function's would not (not a result).
    monkeypatch.setattr(tf.get_logger(), "level", 40)

    def make():
        w = tf.Variable([[1.0, -1.0], [0.5, 2.0]])

        def step(rows):
            per_row = tf.vectorized_map(lambda r: tf.reduce_sum(tf.linalg.matvec(w, r) ** 2), rows)
            return tf.reduce_mean(per_row), per_row

        return step, lambda: w.numpy()

    calls = [(tf.reshape(tf.range(8, dtype=tf.float32) * float(i + 1), [4, 2]),) for i in range(6)]
    run_differential(make, calls, min_graph_calls=3)
