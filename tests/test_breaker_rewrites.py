"""Trying to break two changes: more ops counted unable to raise (``janus/graphgen/fallible.py``,
``static_values.py``) and the scalar op hoisted over a tiling (``janus/graphgen/exact_rewrites.py``).

Found: ``tf.shape`` (int32) of an empty batch of 2**31 - 1 rows, and a tiling whose output size
overflows int64, raise at run time although counted unable to raise whatever the batch size: the
update before them was not put back, and the eager re-run applied it twice. The hoisting changed
bits that eager computes: a tensor's elements go partly through SIMD packets and partly one by
one, and the two paths disagree on signed zeros (``Maximum``), on the sign of NaNs (bfloat16,
float16, ``0 * inf``, two NaN operands). ``1 / tf.maximum(t, 0.0)`` gave -inf for eager's inf.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential

import janus
from janus.graphgen import exact_rewrites
from janus.graphgen.fallible import may_raise


def _between_updates(body):
    """``v += 1; y = body(...); w += 2``: eager leaves ``v`` updated and ``w`` not when body raises."""

    def make():
        v, w = tf.Variable(0.0), tf.Variable(0.0)

        def step(*args):
            v.assign_add(1.0)
            y = body(*args)
            w.assign_add(2.0)
            return y

        return step, lambda: (v, w)

    return make


# --------------------------------------------------------------- fallible: shapes known at run time
def _shape_of(x):
    return tf.shape(x)


def _tiled_rows(x):
    return tf.shape(tf.tile(x, [2**62, 1]), out_type=tf.int64)


def test_an_int32_shape_of_an_empty_batch_too_long_raises_after_an_update_as_in_eager():
    """The batch is relaxed; ``tf.shape`` (int32) raises "Shape output type is 32-bit but dim 0 is
    2147483647" for a batch of ``[2**31 - 1, 0]``: it was counted unable to raise whatever the
    shape, so ``w += 2`` was not put back and ran again in the eager re-run (18 for eager's 16)."""
    calls = [(tf.zeros([n, 0]),) for n in range(1, 9)] + [(tf.zeros([2**31 - 1, 0]),), (tf.zeros([3, 0]),)]
    run_differential(_between_updates(_shape_of), calls, min_graph_calls=4)


def test_a_tiling_of_an_empty_batch_whose_size_overflows_raises_after_an_update_as_in_eager():
    """``tf.tile(x, [2**62, 1])`` of an empty ``[n, 0]`` batch: 2 rows overflow int64 ("Expected a
    non-negative size"); a reduction-like rank-only check counted it unable to raise."""
    calls = [(tf.zeros([n % 2, 0]),) for n in range(8)] + [(tf.zeros([2, 0]),), (tf.zeros([1, 0]),)]
    run_differential(_between_updates(_tiled_rows), calls, min_graph_calls=4)


def _graph_of(fn, *specs) -> tf.Graph:
    return tf.function(fn, autograph=False).get_concrete_function(*specs).graph


def _ops(graph, op_type):
    return [op for op in graph.get_operations() if op.type == op_type]


def test_shape_reads_and_tilings_that_cannot_overflow_still_cannot_raise():
    """The fix keeps what cannot raise: an int64 shape, an int32 shape of fixed dimensions, a
    tiling by multiples of 1 of a batch known only at run time (the mean gradient's)."""
    graph = _graph_of(lambda x: (tf.shape(x, tf.int64), tf.size(x, tf.int64)), tf.TensorSpec([None, 3]))
    assert not any(may_raise(op) for op in _ops(graph, "Shape") + _ops(graph, "Size"))
    graph = _graph_of(lambda x: (tf.shape(x), tf.size(x), tf.shape_n([x])), tf.TensorSpec([4, 3]))
    assert not any(may_raise(op) for t in ("Shape", "Size", "ShapeN") for op in _ops(graph, t))
    graph = _graph_of(lambda x: (tf.shape(x), tf.size(x), tf.shape_n([x])), tf.TensorSpec([None, 3]))
    assert all(may_raise(op) for t in ("Shape", "Size", "ShapeN") for op in _ops(graph, t))
    graph = _graph_of(lambda x: tf.tile(x, [1, 1]), tf.TensorSpec([None, 3]))
    assert not may_raise(_ops(graph, "Tile")[0])
    graph = _graph_of(lambda x: tf.tile(x, [1, 2]), tf.TensorSpec([None, 3]))
    assert may_raise(_ops(graph, "Tile")[0])


def test_a_reduction_over_a_repeated_axis_may_raise():
    """``tf.reduce_sum(x, [1, -1])`` builds (TF's shape function ignores the repeat) and raises at
    run time; counted unable to raise before. (Not reachable through janus's graphs: it raises on
    every call, so no graph is built from calls that ran it.)"""
    for spec in (tf.TensorSpec([2, 3]), tf.TensorSpec([None, 3])):
        graph = _graph_of(lambda x: tf.reduce_sum(x, [1, -1]), spec)
        assert may_raise(_ops(graph, "Sum")[0])
        graph = _graph_of(lambda x: tf.reduce_sum(x, [0, -1]), spec)
        assert not may_raise(_ops(graph, "Sum")[0])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.reduce_sum(tf.ones([2, 3]), [1, -1])


@pytest.mark.keras
def test_a_keras_step_with_varying_batches_and_a_reshape_between_updates():
    """User-shaped: batch sizes vary (relaxed), a flatten-like reshape and concatenation between a
    BatchNormalization's statistic updates and the optimizer's; the last call's reshape does not
    fit and raises after the statistics moved, as in eager."""

    def make():
        keras.utils.set_random_seed(2)
        model = keras.Sequential([keras.layers.Dense(6), keras.layers.BatchNormalization(), keras.layers.Dense(1)])
        model.build((None, 4))
        opt = keras.optimizers.SGD(0.05)

        def step(x, cols):
            with tf.GradientTape() as tape:
                h = model(x, training=True)
                h = tf.concat([h, h], axis=0)
                loss = tf.reduce_mean(tf.reshape(h, [-1, cols]))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, lambda: [tf.convert_to_tensor(v) for v in model.variables]

    rng = np.random.default_rng(0)
    calls = [(tf.constant(rng.normal(size=(n, 4)), tf.float32), 2) for n in (3, 5, 4, 6, 3, 5, 4, 6)]
    calls += [(tf.constant(rng.normal(size=(3, 4)), tf.float32), 4), calls[0]]
    run_differential(make, calls, min_graph_calls=3)


# --------------------------------------------------------------- exact rewrites: bits
def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def _same_bits(fn, calls, min_graph_calls: int = 3) -> janus.JitFunction:
    """Every call's result of ``fn`` eagerly and jitted, bit for bit (NaN signs, -0.0 included)."""
    jitted = janus.jit(fn)
    for n, args in enumerate(calls):
        expected, actual = fn(*args).numpy(), jitted(*args).numpy()
        differ = np.nonzero(_bits(expected).ravel() != _bits(actual).ravel())[0]
        assert not differ.size, (n, expected.ravel()[differ[:4]], actual.ravel()[differ[:4]])
    assert janus.stats(jitted)["graph_calls"] >= min_graph_calls, janus.explain(jitted)
    return jitted


SPECIALS = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 3.0], np.float32)


def _relu_then_reciprocal(x):
    r = tf.maximum(tf.tile(x, [4, 3]), 0.0)
    return 1.0 / r


def test_a_maximum_of_a_tiling_keeps_eagers_signed_zeros():
    """Eager's vectorised Maximum gives 0.0 for max(-0.0, 0.0); on the few elements before the
    tiling it gave -0.0, and ``1 / r`` -inf where eager has inf: a difference rtol sees."""

    def make():
        return _relu_then_reciprocal, lambda: None

    calls = [(tf.constant(SPECIALS[None, :7] * k),) for k in (1.0, 2.0, 1.0, 3.0, 1.0, 2.0, 1.0)]
    run_differential(make, calls, min_graph_calls=3)


def _tile_divided_by_three(x):
    return tf.identity(tf.tile(x, [5, 3]) / tf.cast(3.0, x.dtype))


def _three_minus_broadcast(x):
    return tf.identity(tf.cast(3.0, x.dtype) - tf.broadcast_to(x, [5, 21]))


def _tile_times(x, s):
    return tf.identity(tf.tile(x, [5, 3]) * s)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float32, tf.float64])
@pytest.mark.parametrize("fn", [_tile_divided_by_three, _three_minus_broadcast])
def test_a_scalar_op_of_a_tiling_gives_eagers_bits_in_every_float_dtype(fn, dtype):
    """bfloat16 NaNs: eager's packets gave 0x7fc0 where one by one 0xffc0 (float16 held)."""
    width = 7 if fn is _tile_divided_by_three else 21
    x = np.resize(SPECIALS, width)[None]
    calls = [(tf.cast(tf.constant(x * k), dtype),) for k in (1.0, 2.0, 1.0, 0.5, 1.0, 2.0)]
    _same_bits(fn, calls)


def test_a_scalar_known_only_at_run_time_gives_eagers_nan_bits():
    """``inf * 0`` makes a NaN and ``-nan * nan`` keeps one of two: which depends on the path."""
    x = tf.constant(SPECIALS[None, :7])
    calls = [(x, tf.constant(s)) for s in (0.0, np.nan, 3.0, -0.0, np.nan, 0.0, np.inf)]
    _same_bits(_tile_times, calls)


def _live_rewrites(jitted) -> list[tf.Operation]:
    runner = janus.driver.resolve(jitted).cache.entries[-1]
    graph = runner.graph.concrete.graph
    return [op for op in graph.get_operations() if op.type == "Tile" and op.inputs[0].op.type == "RealDiv"]


def test_a_float32_division_by_a_known_count_is_still_hoisted_and_exact():
    """Guards the fix: the mean gradient's case (a known finite non-zero count, float32) is still
    rewritten, and its bits are eager's on NaN, inf and signed zeros."""
    x = SPECIALS[None, :7]
    jitted = _same_bits(_tile_divided_by_three, [(tf.constant(x * k),) for k in (1.0, 2.0, 1.0, 0.5, 1.0, 2.0, 1.0)])
    assert _live_rewrites(jitted), "the division by 3 was not hoisted over the tiling"


def test_the_rewrite_refuses_unknown_zero_and_half_precision_scalars():
    def rewritten(fn, *specs):
        graph = tf.function(fn, autograph=False).get_concrete_function(*specs).graph
        return exact_rewrites.hoist_scalar_ops_over_tilings(graph)

    spec = tf.TensorSpec([1, 7])
    assert rewritten(lambda x: tf.identity(tf.tile(x, [2, 1]) / 3.0), spec) == 1
    assert rewritten(lambda x: tf.identity(tf.tile(x, [2, 1]) * 0.0), spec) == 0
    assert rewritten(lambda x: tf.identity(tf.maximum(tf.tile(x, [2, 1]), 1.0)), spec) == 0
    assert rewritten(lambda x, s: tf.identity(tf.tile(x, [2, 1]) / s), spec, tf.TensorSpec([])) == 0
    assert rewritten(lambda x: tf.identity(tf.tile(x, [2, 1]) / 3.0), tf.TensorSpec([1, 7], tf.bfloat16)) == 0


# --------------------------------------------------------------- exact rewrites: user-shaped programs
def _normalised(y):
    mean, var = tf.nn.moments(y, axes=[0, 1], keepdims=True)
    return tf.reduce_sum((y - mean) * tf.math.rsqrt(var + 1e-3))


def _moments_step():
    w = tf.Variable(np.linspace(0.5, 1.5, 8, dtype=np.float32))

    def step(x, flag):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.tile(x * w, [1, 2, 1])
            if tf.reduce_sum(flag) > 0:
                loss = _normalised(y)
            else:
                loss = tf.reduce_sum(tf.reduce_mean(y, axis=[0, 1]) / 7.0)
        gx, gw = tape.gradient(loss, [x, w])
        w.assign_sub(0.1 * gw)
        return gx, tf.reduce_max(gx), y / 2.0

    return step, lambda: w


def test_moments_and_means_in_cond_branches_with_gradients_and_the_tiling_reused():
    rng = np.random.default_rng(5)
    calls = []
    for n in range(8):
        x = rng.normal(size=(2, 3, 8)).astype(np.float32)
        if n == 5:
            x[0, 0, 0] = np.nan
        calls.append((tf.constant(x), tf.constant(float(n % 3 - 1))))
    run_differential(_moments_step, calls, min_graph_calls=3)


@pytest.mark.keras
def test_a_keras_batch_normalization_training_step():
    """(Not bit for bit: the graph's convolution bias gradient differs from eager's in its last
    bits with the rewrite off too; compared within rtol.)"""

    def make():
        keras.utils.set_random_seed(4)
        model = keras.Sequential([keras.layers.Conv2D(4, 3), keras.layers.BatchNormalization(), keras.layers.ReLU()])
        model.build((None, 6, 6, 2))
        opt = keras.optimizers.SGD(0.1)

        def step(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, lambda: [tf.convert_to_tensor(v) for v in model.variables]

    rng = np.random.default_rng(6)
    calls = [(tf.constant(rng.normal(size=(3, 6, 6, 2)).astype(np.float32)),) for _ in range(6)]
    run_differential(make, calls, min_graph_calls=3)
