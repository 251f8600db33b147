"""Breaking ``try``/``except``/``else`` in a graph and the narrowed per-call snapshot as users would:
bodies whose ops raise only for some inputs, TF state updated before, inside and after the ``try``
(an optimizer, BatchNormalization, a ``tf.random.Generator``), loops, branches, nested ``try``,
prints, and hypothesis-drawn call sequences. Every call is compared with eager."""

import numpy as np
import tensorflow as tf
from differential import run_differential
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import janus

TABLE = tf.constant([1.0, 2.0, 3.0])
RAISES = tf.errors.InvalidArgumentError


def _indices(*ks: int) -> list[tuple]:
    return [(TABLE, tf.constant(k)) for k in ks]


def _numpy(variables) -> list[np.ndarray]:
    return [np.array(v.numpy() if hasattr(v, "numpy") else v) for v in variables]


def test_an_integer_power_with_a_negative_exponent_raises_in_a_try_after_an_update():
    """``Pow`` was listed as unable to raise: an integer to a negative power raised past the update,
    where eager's handler caught it (janus raised InvalidArgumentError)."""

    def make():
        v = tf.Variable(0)

        def power(x, n):
            v.assign_add(1)
            try:
                y = tf.pow(x, n)
            except RAISES:
                y = tf.constant(-7)
            return y

        return power, lambda: v

    calls = [(tf.constant(2), tf.constant(k)) for k in [1, 2, 3, 4, -1, 2, 3, 4, -2, 3]]
    run_differential(make, calls, min_graph_calls=3)


def test_an_op_kept_only_for_its_check_still_raises_in_the_graph():
    """TF pruned a ``tf.gather`` whose result nothing used: the graph never raised, and janus gave
    the ``else`` path's result where eager's handler ran."""

    def make():
        def checked(t, i):
            try:
                tf.gather(t, i)  # only checks that i is in range
                ok = 1.0
            except RAISES:
                ok = 0.0
            return tf.reduce_sum(t) * ok

        return checked, lambda: None

    run_differential(make, _indices(0, 1, 2, 0, 5, 1, 2, 7, 0), min_graph_calls=3)


def test_an_unused_op_that_raises_without_a_try_raises_as_in_eager():
    def make():
        def checked(t, i):
            tf.gather(t, i) + 1.0  # noqa: B018 - the check is the point
            return tf.reduce_sum(t)

        return checked, lambda: None

    run_differential(make, _indices(0, 1, 2, 0, 5, 1, 7, 2), min_graph_calls=3)


def _printed_lines(tmp_path, make_fn, calls) -> tuple[list[str], list[str], janus.JitFunction]:
    eager_path, janus_path = tmp_path / "eager.txt", tmp_path / "janus.txt"
    eager_fn = make_fn(f"file://{eager_path}")
    jitted = janus.jit(make_fn(f"file://{janus_path}"))
    for args in calls:
        outcomes = []
        for fn in (eager_fn, jitted):
            try:
                outcomes.append(("ok", float(fn(*args))))
            except RAISES:
                outcomes.append(("raised", None))
        assert outcomes[0] == outcomes[1], (args, outcomes)
    return eager_path.read_text().splitlines(), janus_path.read_text().splitlines(), jitted


def test_a_tf_print_before_a_caught_op_that_raises_prints_once(tmp_path):
    """The graph printed, then the gather raised and the call re-ran eagerly: printed twice."""

    def make_fn(stream):
        def look(t, i):
            try:
                tf.print("look", i, output_stream=stream)
                y = tf.gather(t, i)
            except RAISES:
                y = tf.constant(-1.0)
            return y

        return look

    eager, got, jitted = _printed_lines(tmp_path, make_fn, _indices(0, 1, 2, 0, 1, 5, 2, 1))
    assert got == eager
    assert janus.stats(jitted)["graph_calls"] + janus.stats(jitted)["split_calls"] > 0


def test_a_tf_print_before_an_op_that_raises_without_a_try_prints_once(tmp_path):
    def make_fn(stream):
        def look(t, i):
            tf.print("look", i, output_stream=stream)
            return tf.gather(t, i)

        return look

    eager, got, jitted = _printed_lines(tmp_path, make_fn, _indices(0, 1, 2, 0, 1, 5, 2, 1, 7, 0))
    assert got == eager
    assert janus.stats(jitted)["graph_calls"] > 0


def test_an_optimizer_step_before_a_caught_gather_is_put_back():
    import keras

    def make():
        w = tf.Variable([[1.0], [2.0], [3.0]])
        opt = keras.optimizers.Adam(0.1)

        def step(x, i):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(x @ w)
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            try:
                y = tf.gather(tf.reshape(w, [-1]), i)
            except RAISES:
                y = tf.constant(-1.0)
            return y

        return step, lambda: _numpy([w, *opt.variables])

    x = tf.ones((2, 3))
    run_differential(make, [(x, tf.constant(k)) for k in [0, 1, 2, 0, 1, 2, 5, 1, 2, 7, 0]], min_graph_calls=4)


def test_batch_norm_statistics_and_a_generator_before_a_caught_gather_are_put_back():
    import keras

    def make():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.layers.Dense(3), keras.layers.BatchNormalization()])
        model.build((None, 3))
        gen = tf.random.Generator.from_seed(3)

        def step(x, i):
            h = model(x, training=True) + gen.normal([3])
            try:
                y = tf.gather(h[0], i)
            except RAISES:
                y = tf.constant(0.0)
            return y

        return step, lambda: _numpy([*model.variables, gen.state])

    x = tf.constant(np.arange(12.0).reshape(4, 3), tf.float32)
    run_differential(make, [(x, tf.constant(k)) for k in [0, 1, 2, 0, 1, 2, 5, 1, 2, 7, 0]], min_graph_calls=4)


def test_updates_in_the_body_else_and_finally_of_a_caught_try():
    def make():
        v = tf.Variable(0.0)
        log = []

        def step(t, i):
            try:
                v.assign_add(1.0)
                log.append(1)
                y = tf.gather(t, i)
                v.assign_add(10.0)
            except RAISES:
                y = v * 1.0
            else:
                v.assign_add(100.0)
            finally:
                v.assign_add(1000.0)
            return y

        return step, lambda: (v, list(log))

    run_differential(make, _indices(0, 1, 2, 0, 1, 5, 1, 2, 7, 0), min_graph_calls=4)


def test_try_in_a_loop_a_branch_and_nested():
    def make():
        v = tf.Variable(0.0)

        def step(t, idx, flag):
            total = tf.constant(0.0)
            a = b = tf.constant(0.0)
            for k in tf.range(tf.size(idx)):
                try:
                    total += tf.gather(t, idx[k])
                except RAISES:
                    total -= 1.0
                v.assign_add(1.0)
            if flag > 0:
                try:
                    a = tf.gather(t, idx[0])
                    try:
                        b = tf.gather(t, idx[1])
                    except RAISES:
                        b = tf.constant(100.0)
                    v.assign_add(b)
                except RAISES:
                    a = tf.constant(1000.0)
                total += a
            return total

        return step, lambda: v

    pairs = [(0, 1), (1, 2), (2, 0), (0, 1), (1, 1), (9, 1), (1, 9), (0, 0), (9, 9), (1, 2)]
    calls = [(TABLE, tf.constant(p), tf.constant(n % 2)) for n, p in enumerate(pairs)]
    run_differential(make, calls, min_graph_calls=2)


def test_a_handler_that_does_not_match_or_raises_itself():
    def make():
        v = tf.Variable(0.0)

        def step(t, i, j):
            v.assign_add(1.0)
            try:
                y = tf.gather(t, i)
            except ValueError:  # eager's InvalidArgumentError passes through
                y = tf.constant(0.0)
            try:
                z = tf.gather(t, j)
            except RAISES as err:
                raise KeyError("bad index") from err
            return y + z

        return step, lambda: v

    pairs = [(0, 1), (1, 2), (2, 0), (0, 1), (5, 1), (1, 2), (1, 7), (2, 2), (0, 0)]
    run_differential(make, [(TABLE, tf.constant(i), tf.constant(j)) for i, j in pairs], min_graph_calls=4)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from([0, 1, 2, 3, -1, 9]), min_size=4, max_size=14))
def test_drawn_call_sequences_mixing_raising_and_plain_calls(indices):
    def make():
        v = tf.Variable(0.0)
        n = tf.Variable(0)
        history = []

        def step(t, i):
            n.assign_add(1)
            try:
                y = tf.debugging.check_numerics(tf.math.log(tf.gather(t, i % 4) - 1.0), "log")
                v.assign_add(y)
            except RAISES:
                y = tf.constant(-1.0)
                history.append(int(n))
            else:
                v.assign_sub(0.5)
            return y + tf.pow(2, i)

        return step, lambda: (v, n, list(history))

    table = tf.constant([1.0, 2.0, 3.0, 5.0])  # log(0) is -inf: check_numerics raises; i % 4 == 0
    run_differential(make, [(table, tf.constant(k)) for k in indices], min_graph_calls=0)
