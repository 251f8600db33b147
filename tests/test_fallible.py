"""[perf] Which ops may raise: shown while generating, so that state updates wait only for those.

Every TF state update of a graph waits for the ops before it that may raise
(``janus/graphgen/ordering.py``). Counting the shape arithmetic of gradients (a concatenation's
offsets and slices, a reduction's tiling divisions, a padding's slice) and elementwise gradients
as fallible made pix2pix's optimizer updates wait for its whole backward pass: 0.88x its symbolic
baseline, 0.99x without. ``janus/graphgen/fallible.py`` shows where they cannot raise; these tests
check that it is never wrong the other way (an op counted safe that raises).
"""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from hypothesis import given, settings
from hypothesis import strategies as st

import janus
from janus.graphgen.fallible import may_raise
from janus.graphgen.static_values import static_value


def _graph_of(fn, *specs) -> tf.Graph:
    return tf.function(fn, autograph=False).get_concrete_function(*specs).graph


def _ops(graph: tf.Graph, op_type: str) -> list[tf.Operation]:
    found = [op for op in graph.get_operations() if op.type == op_type]
    assert found, f"no {op_type} in {sorted({op.type for op in graph.get_operations()})}"
    return found


def _gradient_graph(body) -> tf.Graph:
    w = tf.Variable(tf.ones([3, 4]))

    def step(x):
        with tf.GradientTape() as tape:
            loss = body(x, w)
        return tape.gradient(loss, w)

    return _graph_of(step, tf.TensorSpec([2, 3]))


def test_the_shape_arithmetic_of_gradients_cannot_raise():
    def body(x, w):
        h = tf.matmul(x, w)
        both = tf.concat([h, tf.nn.leaky_relu(h)], axis=1)
        padded = tf.pad(both, [[1, 1], [0, 2]])
        return tf.reduce_mean(padded, axis=0)[3] + tf.reduce_sum(tf.nn.elu(h))

    graph = _gradient_graph(body)
    for op_type in ("ConcatOffset", "Slice", "FloorDiv", "LeakyReluGrad", "EluGrad", "Pad", "StridedSliceGrad"):
        assert not any(may_raise(op) for op in _ops(graph, op_type)), op_type


def test_slices_and_divisions_known_to_fail_may_raise():
    graph = _graph_of(lambda x: tf.slice(x, [2, 0], [3, 4]), tf.TensorSpec([3, 4]))  # TF builds it; it raises
    assert may_raise(_ops(graph, "Slice")[0])
    graph = _graph_of(lambda x, b: tf.slice(x, b, [1, 1]), tf.TensorSpec([3, 4]), tf.TensorSpec([2], tf.int32))
    assert may_raise(_ops(graph, "Slice")[0])  # a begin known only at run time
    empty = tf.TensorSpec([0, 2])
    graph = _graph_of(lambda y: tf.math.floordiv(tf.constant([7, 7]), tf.maximum(tf.shape(y), 0)), empty)
    assert may_raise(_ops(graph, "FloorDiv")[0])  # divides by the empty dimension
    graph = _graph_of(lambda y: tf.math.floordiv(tf.constant([7, 7]), tf.maximum(tf.shape(y), 1)), empty)
    assert not may_raise(_ops(graph, "FloorDiv")[0])
    graph = _graph_of(lambda x, k: tf.math.floordiv(x, k), tf.TensorSpec([2], tf.int32), tf.TensorSpec([], tf.int32))
    assert may_raise(_ops(graph, "FloorDiv")[0])


def test_static_values_of_shape_arithmetic():
    graph = _graph_of(lambda a, b: tf.raw_ops.ConcatOffset(concat_dim=1, shape=[tf.shape(a), tf.shape(b)]),
                      tf.TensorSpec([2, 3]), tf.TensorSpec([2, 5]))  # fmt: skip
    offsets = _ops(graph, "ConcatOffset")[0].outputs
    assert [static_value(t).tolist() for t in offsets] == [[0, 0], [0, 3]]
    graph = _graph_of(lambda a: tf.shape(a) * 2, tf.TensorSpec([None, 3]))
    assert static_value(_ops(graph, "Mul")[0].outputs[0]) is None  # a dimension known only at run time


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_property_a_slice_counted_safe_never_raises(shape, data):
    rank = len(shape)
    begin = data.draw(st.lists(st.integers(-1, 5), min_size=rank, max_size=rank))
    size = data.draw(st.lists(st.integers(-2, 5), min_size=rank, max_size=rank))
    try:
        graph = _graph_of(lambda x: tf.slice(x, begin, size), tf.TensorSpec(shape))
    except (ValueError, tf.errors.InvalidArgumentError):
        return  # refused while building: nothing runs
    safe = not may_raise(_ops(graph, "Slice")[0])
    try:
        tf.slice(tf.zeros(shape), begin, size)
        raised = False
    except tf.errors.InvalidArgumentError:
        raised = True
    assert not (safe and raised), (shape, begin, size)
    in_bounds = all(b >= 0 and (s == -1 or (s >= 0 and b + s <= d)) for b, s, d in zip(begin, size, shape))
    assert safe == in_bounds, (shape, begin, size)


class TwoNets:
    """A GAN-shaped step: two small nets, concatenations, leaky ReLUs, paddings, means, two
    plain SGD updates. Nothing in it may raise, so no update waits for another net's gradients."""

    def __init__(self):
        rng = np.random.default_rng(0)
        self.g = tf.Variable(rng.normal(size=(3, 4)).astype(np.float32))
        self.d = tf.Variable(rng.normal(size=(8, 1)).astype(np.float32))
        self.steps = 0

    def step(self, x):
        with tf.GradientTape(persistent=True) as tape:
            fake = tf.nn.leaky_relu(tf.matmul(x, self.g), 0.2)
            pair = tf.concat([fake, tf.nn.relu(fake)], axis=1)
            score = tf.matmul(tf.pad(pair, [[0, 1], [0, 0]]), self.d)
            g_loss = tf.reduce_mean(tf.square(score - 1.0))
            d_loss = tf.reduce_mean(tf.square(score))
        g_grad, d_grad = tape.gradient(g_loss, self.g), tape.gradient(d_loss, self.d)
        self.g.assign_sub(0.01 * g_grad)
        self.d.assign_sub(0.01 * d_grad)
        self.steps += 1
        return g_loss, d_loss


def test_a_gan_shaped_step_updates_without_waiting_and_agrees_with_eager():
    def make():
        nets = TwoNets()
        return nets.step, lambda: (nets.g, nets.d, nets.steps)

    calls = [(tf.constant(np.full((2, 3), 0.1 * n, np.float32)),) for n in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    (runner,) = janus.driver.resolve(jitted).cache.entries
    names = [op.name for op in runner.graph.concrete.graph.get_operations()]
    assert not any("janus_program_order" in name for name in names), "an update waits for an op counted fallible"
    assert runner.graph.snapshot == (), "variables saved before each call for an op counted fallible"


@pytest.mark.parametrize("late", [False, True])
def test_a_slice_out_of_range_after_an_update_leaves_eagers_state(late):
    """The slice's begin is a Python int (a constant of each graph): out of range on one call."""

    def make():
        v = tf.Variable(0.0)

        def step(x, i):
            v.assign_add(1.0)
            part = tf.slice(x, [i], [2])
            if late:
                v.assign_add(10.0)
            return part * v

        return step, lambda: v

    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    calls = [(x, i) for i in (0, 1, 2, 0, 1, 2, 0, 1, 2, 3)]  # the last one raises, after the update
    run_differential(make, calls, min_graph_calls=3)


@pytest.mark.parametrize("op", ["power", "floordiv", "slice"])
def test_a_python_int_fed_to_the_graph_is_not_known_while_generating(op):
    """A Python int that changes between calls is fed to the graph through a captured constant
    whose value while generating is a placeholder: an op taking it may raise (a negative integer
    power, a division by zero, a slice out of range) after an update on a later call."""

    def make():
        v = tf.Variable(0)

        def step(x, n):
            v.assign_add(1)
            if op == "power":
                y = x**n
            elif op == "floordiv":
                y = tf.math.floordiv(x, n)
            else:
                y = tf.slice(x, [n], [1])
            v.assign_add(10)
            return y + v

        return step, lambda: v

    x = tf.constant([2, 3, 4, 5])
    bad = {"power": -1, "floordiv": 0, "slice": 4}[op]
    calls = [(x, n) for n in (1, 2, 3, 1, 2, 3, 2, 1, 3, bad)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    assert janus.stats(jitted)["graphs_built"] >= 1


def test_a_generators_draws_after_an_update_need_no_snapshot():
    """An AN-shaped step: noise from a ``tf.random.Generator`` between two optimizer updates. Its
    read-and-skip (Philox) cannot raise, so the first update's variables are not saved every call;
    the draws match eager's stream."""

    def make():
        noise = tf.random.Generator.from_seed(7)
        d = tf.Variable(tf.ones([3, 1]))
        g = tf.Variable(tf.ones([2, 3]))

        def step(real):
            with tf.GradientTape() as tape:
                d_loss = tf.reduce_mean(tf.matmul(real + noise.normal(real.shape), d))
            d.assign_sub(0.1 * tape.gradient(d_loss, d))
            with tf.GradientTape() as tape:
                g_loss = tf.reduce_mean(tf.matmul(tf.matmul(noise.normal([4, 2]), g), d))
            g.assign_sub(0.1 * tape.gradient(g_loss, g))
            return d_loss, g_loss

        return step, lambda: (d, g, noise.state)

    calls = [(tf.fill([4, 3], 0.5 * n),) for n in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    (runner,) = janus.driver.resolve(jitted).cache.entries
    assert runner.graph.snapshot == (), "variables saved before each call for a generator's draw"


@pytest.mark.parametrize("op", ["sum", "argmax", "reshape", "transpose"])
def test_a_parameter_fed_from_a_python_int_is_not_trusted(op):
    """The axis, shape or permutation comes from a Python int that varies (so it is fed, not a
    constant): on the last call it is invalid, after an update. The graph's fixed output shape
    does not show it."""

    def make():
        v = tf.Variable(0.0)

        def step(x, n):
            v.assign_add(1.0)
            k = n // 100  # 0 on every call but the last
            if op == "sum":
                y = tf.reduce_sum(x[0], axis=k)  # a vector: a scalar whatever the axis
            elif op == "argmax":
                y = tf.cast(tf.argmax(x[0], axis=k), tf.float32)
            elif op == "reshape":
                y = tf.reshape(x, [k + 2, 2])
            else:
                y = tf.transpose(x, [k, 1 - k])
            v.assign_add(10.0)
            return tf.reduce_sum(y) + v

        return step, lambda: v

    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    calls = [(x, n) for n in (1, 7, 3, 12, 5, 9, 2, 8, 4, 150)]
    run_differential(make, calls, min_graph_calls=3)


def test_static_values_of_a_wrappers_shape_vectors():
    """TF's Python wrappers build shape vectors from fixed shapes with ops TF's own folding skips:
    ``tf.nn.sampled_softmax_loss``'s ``[-1, shape[1]]`` (a strided slice and a concatenation),
    ``tf.ones([n, 1])`` (a pack of a slice)."""
    graph = _graph_of(lambda x: tf.reshape(x, tf.concat([[-1], tf.shape(x)[1:2]], 0)), tf.TensorSpec([6, 4]))
    (reshape,) = _ops(graph, "Reshape")
    assert static_value(reshape.inputs[1]).tolist() == [-1, 4]
    assert not may_raise(reshape)
    graph = _graph_of(lambda x: tf.ones(tf.stack([tf.shape(x)[0] - 1, 1])), tf.TensorSpec([3, 2]))
    assert static_value(_ops(graph, "Pack")[0].outputs[0]).tolist() == [2, 1]
    graph = _graph_of(lambda x: tf.cast(tf.expand_dims(tf.size(x), 0), tf.int64), tf.TensorSpec([3, 2]))
    assert static_value(_ops(graph, "Cast")[0].outputs[0]).tolist() == [6]


def test_elementwise_ops_of_one_input_cannot_raise_whatever_the_shape():
    graph = _graph_of(lambda x: tf.identity(tf.cast(tf.exp(-x), tf.int32)), tf.TensorSpec([None, 3]))
    for op_type in ("Identity", "Cast", "Exp", "Neg"):
        assert not may_raise(_ops(graph, op_type)[0]), op_type
    graph = _graph_of(lambda x, y: x + y, tf.TensorSpec([None, 3]), tf.TensorSpec([None, 3]))
    assert may_raise(_ops(graph, "AddV2")[0])  # two dimensions known only at run time may differ


@settings(max_examples=80, deadline=None)
@given(
    known=st.lists(st.one_of(st.none(), st.integers(0, 4)), min_size=1, max_size=3),
    target=st.lists(st.integers(-1, 4), min_size=1, max_size=3),
    data=st.data(),
)
def test_property_a_reshape_of_a_partly_known_shape_counted_safe_never_raises(known, target, data):
    try:
        graph = _graph_of(lambda x: tf.reshape(x, target), tf.TensorSpec(known))
    except (ValueError, tf.errors.InvalidArgumentError):
        return  # refused while building: nothing runs
    safe = not may_raise(_ops(graph, "Reshape")[0])
    for _ in range(4):
        actual = [d if d is not None else data.draw(st.integers(0, 5)) for d in known]
        try:
            tf.reshape(tf.zeros(actual), target)
        except tf.errors.InvalidArgumentError:
            assert not safe, (known, target, actual)


@settings(max_examples=80, deadline=None)
@given(
    first=st.lists(st.one_of(st.none(), st.integers(1, 3)), min_size=1, max_size=3),
    second=st.lists(st.one_of(st.none(), st.integers(1, 3)), min_size=1, max_size=3),
    axis=st.integers(-3, 2),
    data=st.data(),
)
def test_property_a_concatenation_counted_safe_never_raises(first, second, axis, data):
    try:
        graph = _graph_of(lambda a, b: tf.concat([a, b], axis), tf.TensorSpec(first), tf.TensorSpec(second))
    except (ValueError, tf.errors.InvalidArgumentError):
        return
    safe = not may_raise(_ops(graph, "ConcatV2")[0])
    for _ in range(4):
        shapes = [[d if d is not None else data.draw(st.integers(1, 3)) for d in s] for s in (first, second)]
        try:
            tf.concat([tf.zeros(shapes[0]), tf.zeros(shapes[1])], axis)
        except tf.errors.InvalidArgumentError:
            assert not safe, (first, second, axis, shapes)


@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("columns", [1, 3])
def test_a_reshape_of_a_batch_known_only_at_run_time_between_updates(columns, scaled):
    """The batch size varies, so janus relaxes it: ``[-1, 1]`` fits every size and the second
    update need not wait for it; ``[-1, 3]`` does not fit a batch of 5 pairs, which raises after
    the first update on the last call, as in eager. The first update waits for the reshape, so
    nothing is saved, unless the reshaped value reads the variable after it (``scaled``): then it
    must run first, and the runner saves the variable and puts it back when the reshape raises
    (with ``[-1, 1]`` too: the product of a batch known only at run time counts as one that may raise)."""

    def make():
        v = tf.Variable(0.0)

        def step(x):
            v.assign_add(1.0)
            y = tf.reshape(x * v if scaled else x, [-1, columns])
            v.assign_add(tf.reduce_sum(y))
            return y

        return step, lambda: v

    calls = [(tf.ones([n, 2]),) for n in (3, 6, 9, 3, 6, 9, 3)] + [(tf.ones([5, 2]),)]
    jitted = run_differential(make, calls, min_graph_calls=3)
    runner = janus.driver.resolve(jitted).cache.entries[-1]
    assert (runner.graph.snapshot == ()) == (not scaled)


class _PerStepEmbedding:
    """An LSTM-LM-shaped step: one lookup per time step, a Keras SGD update (sparse for the table)."""

    def __init__(self, rows: int = 12):
        self.table = tf.Variable(np.linspace(-1.0, 1.0, rows * 4, dtype=np.float32).reshape(rows, 4))
        self.w = tf.Variable(np.ones((4, 1), np.float32))
        self.opt = tf.keras.optimizers.SGD(0.1)
        self.opt.build([self.table, self.w])

    def step(self, ids):
        with tf.GradientTape() as tape:
            outs = [tf.matmul(tf.nn.embedding_lookup(self.table, ids[:, t]), self.w) for t in range(ids.shape[1])]
            loss = tf.reduce_mean(tf.square(tf.concat(outs, axis=1)))
        grads = tape.gradient(loss, [self.table, self.w])
        self.opt.apply_gradients(zip(grads, [self.table, self.w]))
        return loss


def test_an_embeddings_sparse_update_is_vouched_for_by_its_lookups():
    """The table's scatter takes the lookups' ids (concatenated by the gradient): it cannot raise
    once they did not, so the dense update need not wait for it and nothing is saved. The last call
    looks up a row out of range, which raises before any update, as in eager."""

    def make():
        model = _PerStepEmbedding()
        return model.step, lambda: (model.table, model.w)

    rng = np.random.default_rng(5)
    calls = [(tf.constant(rng.integers(0, 12, size=(3, 4)), tf.int32),) for _ in range(6)]
    calls.append((tf.constant([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]], tf.int32),))
    jitted = run_differential(make, calls, min_graph_calls=3)
    (runner,) = janus.driver.resolve(jitted).cache.entries
    assert runner.graph.snapshot == () and not runner.graph.row_saves, "the table's rows are saved every call"
    (scatter,) = _ops(runner.graph.concrete.graph, "ResourceScatterSub")
    assert not may_raise(scatter), "an update waits for the scatter"


@pytest.mark.parametrize("case", ["larger_table", "other_ids"])
def test_a_scatter_no_gather_vouches_for_may_raise(case):
    """A gather from a larger table, or one of other ids, says nothing of the scatter's indices: on
    the last call the scatter raises after an update, and the update is put back before eager
    re-runs the call."""

    def make():
        big = tf.Variable(tf.zeros([10, 2]))
        small = tf.Variable(tf.zeros([5, 2]))
        count = tf.Variable(0.0)

        def step(ids, other):
            count.assign_add(1.0)
            looked = tf.gather(big, other if case == "other_ids" else ids)
            small.scatter_add(tf.IndexedSlices(tf.ones([3, 2]), ids))
            return tf.reduce_sum(looked) + count

        return step, lambda: (big, small, count)

    ok = [(tf.constant([0, 1, 4]), tf.constant([0, 0, 0])), (tf.constant([2, 3, 1]), tf.constant([1, 1, 1]))]
    bad = (tf.constant([0, 7, 1]), tf.constant([2, 2, 2]))
    run_differential(make, ok * 3 + [bad], min_graph_calls=3)
