"""Trying to break which ops count as unable to raise (``janus/graphgen/fallible.py``,
``static_values.py``) and the step error of recursive invocations (``csrc/janus_invoke.cc``).

Each program updates TF state, then runs an op that raises on a later call only (a slice, a
division, a power, a padding, a gather whose bounds come from a Python int, a NumPy array, an
attribute, a shape), then updates state again: the graph that served the earlier calls must
leave eager's state and exception on that call, and keep serving the calls after it.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same_call, outcome
from test_recursion import Node, random_tree, tree_program

import janus
from janus.graphgen.fallible import may_raise


def _differential(make, warm: list[tuple], bad: list[tuple], after: list[tuple] = ()) -> janus.JitFunction:
    """Runs ``warm``, then ``bad`` (calls that raise in eager), then ``after``, eagerly and under
    janus, comparing every call; graphs must serve a ``warm`` call, run each ``bad`` call (it
    falls back) and serve the ``after`` calls."""
    eager_fn, eager_state = make()
    raw_fn, jit_state = make()
    jitted = janus.jit(raw_fn)

    def run(calls: list[tuple], start: int) -> None:
        for n, args in enumerate(calls, start):
            assert_same_call(n, outcome(eager_fn, args), outcome(jitted, args), eager_state, jit_state)

    run(warm, 0)
    before = janus.stats(jitted)
    assert before["graph_calls"] > 0, janus.explain(jitted)
    run(bad, len(warm))
    middle = janus.stats(jitted)
    assert middle["fallbacks"] - before["fallbacks"] >= len(bad), f"a graph ran no bad call: {middle}"
    run(list(after), len(warm) + len(bad))
    assert janus.stats(jitted)["graph_calls"] - middle["graph_calls"] >= len(after), janus.explain(jitted)
    return jitted


def _between_updates(body):
    """``v += 1; y = body(...); w += 2``: eager leaves ``v`` updated and ``w`` not when body raises."""

    def make():
        v, w = tf.Variable(0), tf.Variable(0)

        def step(*args):
            v.assign_add(1)
            y = body(*args)
            w.assign_add(2)
            return y

        return step, lambda: (v, w)

    return make


X = tf.constant([1, 2, 3, 4])


def _cycle(values: list, n: int = 12) -> list:
    return [values[i % len(values)] for i in range(n)]


# --------------------------------------------------------------- Python values fed to the graph
FED = {
    "index": (lambda x, i: x[i], [0, 1, 2, 3], 4),
    "negative index": (lambda x, i: x[-i], [1, 2, 3, 4], 5),
    "slice": (lambda x, a: tf.slice(x, [a], [2]), [0, 1, 2], 3),
    "pad": (lambda x, p: tf.pad(x, [[p, 0]]), [0, 1, 2], -1),
    "floordiv": (lambda x, d: x // d, [1, 2, 3], 0),
    "mod": (lambda x, d: x % d, [1, 2, 3], 0),
    "power": (lambda x, n: x**n, [1, 2, 3], -1),
    "gather": (lambda x, i: tf.gather(x, i), [0, 1, 2, 3], 4),
    "list length": (lambda x, items: x // len(items), [[1], [1, 1], [1, 1, 1]], []),
    "sum of arguments": (lambda x, ab: x // (ab[0] + ab[1]), [(1, 0), (1, 1), (2, 1)], (1, -1)),
    "list items": (lambda x, bs: tf.slice(x, [bs[0]], [bs[1]]), [[0, 2], [1, 2], [2, 2]], [3, 2]),
}


@pytest.mark.parametrize("case", sorted(FED))
def test_a_python_value_that_varies_raises_after_an_update_as_in_eager(case):
    body, values, bad = FED[case]
    _differential(_between_updates(body), [(X, v) for v in _cycle(values)], [(X, bad)], [(X, values[0])])


def _ints(value: object) -> np.ndarray:
    return np.array(value, np.int32)


@pytest.mark.parametrize(
    "case",
    [
        ("begin", lambda x, b: tf.slice(x, b, [2]), [_ints([k]) for k in (0, 1, 2)], _ints([3])),
        ("paddings", lambda x, p: tf.pad(x, p), [_ints([[k, 0]]) for k in (0, 1, 2)], _ints([[-1, 0]])),
        ("divisor", lambda x, d: x // d, [_ints(k) for k in (1, 2, 3)], _ints(0)),
        ("tensor begin", lambda x, b: tf.slice(x, b, [2]), [tf.constant([k]) for k in (0, 1, 2)], tf.constant([3])),
        ("shape", lambda x, y: x[tf.shape(y)[0] // 2], [tf.zeros([k]) for k in (1, 2, 3)], tf.zeros([8])),
    ],
    ids=lambda case: case[0],
)  # fmt: skip
def test_arrays_tensors_and_shapes_that_vary_raise_after_an_update_as_in_eager(case):
    _, body, values, bad = case
    _differential(_between_updates(body), [(X, v) for v in _cycle(values)], [(X, bad)], [(X, values[0])])


class Sliced:
    """Bounds read from attributes (heap reads): a Python int and a small eager tensor."""

    def __init__(self):
        self.v, self.w = tf.Variable(0), tf.Variable(0)
        self.k, self.t = 0, tf.constant([1])

    def step(self, x):
        self.v.assign_add(1)
        y = tf.pad(tf.slice(x, [self.k], [2]), [[self.k, 0]]) // self.t[0]
        self.w.assign_add(2)
        return y


@pytest.mark.parametrize("attribute, values, bad", [("k", [0, 1, 2], 3), ("t", [[1], [2], [3]], [0])])
def test_attributes_that_vary_raise_after_an_update_as_in_eager(attribute, values, bad):
    eager, jitted_object = Sliced(), Sliced()
    jitted = janus.jit(jitted_object.step)
    state = (lambda: (eager.v, eager.w)), (lambda: (jitted_object.v, jitted_object.w))
    as_value = (lambda v: tf.constant(v)) if attribute == "t" else (lambda v: v)
    for n, value in enumerate([*_cycle(values), bad, values[0]]):
        setattr(eager, attribute, as_value(value))
        setattr(jitted_object, attribute, as_value(value))
        assert_same_call(n, outcome(eager.step, (X,)), outcome(jitted, (X,)), *state)
    stats = janus.stats(jitted)
    assert stats["graph_calls"] >= 10 and stats["fallbacks"] == 1, stats


# --------------------------------------------------------------- tf.cond branches
COND = {
    "index": (lambda x, i: x[i] if tf.reduce_sum(x) > 0 else x[0], [0, 1, 2, 3], 4),
    "slice": (lambda x, i: tf.slice(x, [i], [1]) if tf.reduce_sum(x) > 0 else x[:1], [0, 1, 2, 3], 4),
    "power": (lambda x, n: x**n if tf.reduce_sum(x) > 0 else x, [1, 2, 3], -1),
    "floordiv": (lambda x, d: x // d if tf.reduce_sum(x) > 0 else x, [1, 2, 3], 0),
    "tf.cond index": (lambda x, i: tf.cond(tf.reduce_sum(x) > 0, lambda: x[i], lambda: x[0]), [0, 1, 2, 3], 4),
    "tf.cond slice": (
        lambda x, i: tf.cond(tf.reduce_sum(x) > 0, lambda: tf.slice(x, [i], [1]), lambda: x[:1]),
        [0, 1, 2, 3],
        4,
    ),
}


@pytest.mark.parametrize("case", sorted(COND))
def test_a_cond_branch_that_raises_holds_back_the_updates_that_wait_for_it(case):
    """TF lowers the If to Switch/Merge: what waits on it waited only for the branch's stateful
    ops and its outputs, so ``w += 2`` (and ``v += 1``, which waits on the branch's assertion)
    ran in the graph although the branch raised, and the eager re-run applied them again. The
    same for the user's own tf.cond (its branches handed to janus, ``handed.py``)."""
    body, values, bad = COND[case]
    _differential(_between_updates(body), [(X, v) for v in _cycle(values)], [(X, bad)], [(X, values[0])])


def test_an_update_inside_a_cond_branch_that_raises_later():
    def make():
        v, w = tf.Variable(0), tf.Variable(0)

        def step(x, i):
            if tf.reduce_sum(x) > 0:
                v.assign_add(1)
                y = x[i]
                w.assign_add(2)
            else:
                y = x[0]
            return y

        return step, lambda: (v, w)

    _differential(make, [(X, i) for i in _cycle([0, 1, 2, 3])], [(X, 4)], [(X, 0)])


@pytest.mark.xfail(strict=True, reason="Grappler prunes a while body's stateless op that no loop variable needs")
def test_a_while_body_op_whose_result_is_unused_raises_as_in_eager():
    """``_ = x[i + k]`` in a tf.while_loop body: eager raises; the graph's body never runs the
    slice (a control dependency of ``k + 1`` on it does not survive Grappler either; it does
    with the meta optimizer off)."""

    def body(x, n, i):
        r, k = x[0], tf.constant(0)
        while k < n:
            _ = x[i + k]
            r = r + 1
            k += 1
        return r

    warm = [(X, tf.constant(n), i) for n, i in _cycle([(1, 0), (2, 1), (1, 2), (2, 0)])]
    _differential(_between_updates(body), warm, [(X, tf.constant(2), 3)], [(X, tf.constant(1), 0)])


# --------------------------------------------------------------- bounds known only to janus
def _graph_of(fn, *specs) -> tf.Graph:
    return tf.function(fn, autograph=False).get_concrete_function(*specs).graph


def _strided_slice(graph: tf.Graph) -> tf.Operation:
    (op,) = [op for op in graph.get_operations() if op.type == "StridedSlice"]
    return op


@pytest.mark.parametrize("length, raises", [(5, True), (3, False)])
def test_a_strided_slice_whose_bounds_only_janus_knows_is_checked_against_them(length, raises):
    """``ShapeN``'s values are known to ``static_value`` but not to TF's shape function, which
    therefore built ``x[5]`` of a length-4 ``x`` unchecked: it was counted unable to raise."""

    def index_by_length(x, y):
        b = tf.shape_n([y])[0]
        return tf.strided_slice(x, b, b + 1, [1], shrink_axis_mask=1)

    specs = tf.TensorSpec([4]), tf.TensorSpec([length])
    assert may_raise(_strided_slice(_graph_of(index_by_length, *specs))) == raises
    try:
        tf.function(index_by_length, autograph=False)(tf.zeros([4]), tf.zeros([length]))
        raised = False
    except tf.errors.InvalidArgumentError:
        raised = True
    assert raised == raises


def test_a_strided_slice_gradient_with_known_bounds_still_cannot_raise():
    w = tf.Variable(tf.ones([3, 4]))

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.matmul(x, w)[1, 1:3])
        return tape.gradient(loss, w)

    graph = _graph_of(step, tf.TensorSpec([2, 3]))
    grads = [op for op in graph.get_operations() if op.type == "StridedSliceGrad"]
    assert grads and not any(may_raise(op) for op in grads)
    assert not may_raise(_strided_slice(graph))


# --------------------------------------------------------------- Keras
@pytest.mark.keras
def test_a_keras_training_step_with_labels_out_of_range_on_a_later_call():
    """Cropping, zero padding, concatenation, leaky ReLU: their gradients count as unable to
    raise; the sparse cross entropy's labels do not, and one call has a label out of range."""

    def make():
        keras.utils.set_random_seed(1)
        inputs = keras.Input((6, 6, 2))
        cropped = keras.layers.ZeroPadding2D(1)(keras.layers.Cropping2D(1)(inputs))
        both = keras.layers.Concatenate()([cropped, keras.layers.Conv2D(2, 3, padding="same")(inputs)])
        pooled = keras.layers.GlobalAveragePooling2D()(keras.layers.LeakyReLU(0.2)(both))
        model = keras.Model(inputs, keras.layers.Dense(3)(pooled))
        optimizer = keras.optimizers.SGD(0.1)

        def step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, lambda: [v.numpy() for v in model.trainable_variables] + [optimizer.iterations.numpy()]

    rng = np.random.default_rng(0)
    xs = [tf.constant(rng.normal(size=(4, 6, 6, 2)).astype(np.float32)) for _ in range(7)]
    labels = tf.constant([0, 1, 2, 1])
    bad = [(xs[0], tf.constant([0, 1, 3, 1])), (xs[1], tf.constant([0, -1, 2, 1]))]
    _differential(make, [(x, labels) for x in xs[:5]], bad, [(x, labels) for x in xs[5:]])


# --------------------------------------------------------------- recursion: errors in a forest
def _leaves(node: Node) -> list[Node]:
    return [node] if node.is_leaf else _leaves(node.left) + _leaves(node.right)


@pytest.mark.parametrize("words", [(25,), (25, -1), (25, 3.0)], ids=["gather", "two gathers", "gather and type"])
@pytest.mark.slow
def test_errors_in_subtrees_of_a_forest_leave_eagers_exception_and_state(words):
    """One or two leaves of a forest of training trees hold a word out of the embedding's range
    (tf.gather raises: no assumption) or a float word (a heap read's type check fails): eager's
    exception and variables, and graphs serve the calls after it (csrc/janus_invoke.cc)."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        eager_fn, eager_state = tree_program(train=True)()
        raw_fn, jit_state = tree_program(train=True)()
        jitted = janus.jit(raw_fn)

        def call(n, forest, eager_fn=eager_fn, eager_state=eager_state, jitted=jitted, jit_state=jit_state):
            assert_same_call(n, outcome(eager_fn, (forest,)), outcome(jitted, (forest,)), eager_state, jit_state)

        for n in range(4):
            call(n, [random_tree(rng, 16) for _ in range(8)])
        forest = [random_tree(rng, 24) for _ in range(8)]
        for tree, word in zip(rng.choice(8, len(words), replace=False), words):
            leaves = _leaves(forest[int(tree)])
            leaves[int(rng.integers(len(leaves)))].word = word
        before = janus.stats(jitted)["graph_calls"]
        call(4, forest)
        for n in range(5, 8):
            call(n, [random_tree(rng, 16) for _ in range(8)])
        stats = janus.stats(jitted)
        assert stats["graph_calls"] - before >= 3 and stats["fallbacks"] + stats["assumption_failures"] >= 1, stats


@pytest.mark.slow
def test_a_gather_error_in_a_subtree_after_a_rebuild_keeps_graphs_serving():
    """A word out of range, a float word (an assumption: the graph is rebuilt), a word out of
    range again: the last error's message names the callee's ``cond/embedding_lookup`` in
    ``{{node}}`` and the graph's own ``JanusInvoke_3`` only as ``[[JanusInvoke_3]]``. It was taken
    as raised after a state update and the function ran imperatively from then on (the first
    error passed only because the callee's ``cond`` prefix matched an op of the graph)."""
    rng = np.random.default_rng(0)
    eager_fn, eager_state = tree_program(train=True)()
    raw_fn, jit_state = tree_program(train=True)()
    jitted = janus.jit(raw_fn)
    words = (None, None, None, None, 25, None, None, 3.0, None, None, 25, None, None)
    for n, word in enumerate(words):
        forest = [random_tree(rng, 24 if word is not None else 16) for _ in range(8)]
        if word is not None:
            _leaves(forest[3])[0].word = word
        assert_same_call(n, outcome(eager_fn, (forest,)), outcome(jitted, (forest,)), eager_state, jit_state)
    stats = janus.stats(jitted)
    assert stats["imperative_calls"] == 0, janus.explain(jitted)
