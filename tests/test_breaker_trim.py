"""Breaker probes for janus.graphgen.function_trim (d406eb0): recursive graph functions with their
Identity nodes bypassed and dead stateless nodes dropped must still answer as eager."""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from test_recursion import Node, random_tree

import janus

TRIM = pytest.mark.parametrize("trim", [True, False], ids=["trim", "notrim"])


def _trees(seed, n_calls, size=(2, 9)):
    rng = np.random.default_rng(seed)
    return [random_tree(rng, int(rng.integers(*size))) for _ in range(n_calls)]


def _with_bad_leaf(tree, word):
    leaf = tree
    while not leaf.is_leaf:
        leaf = leaf.right
    leaf.word = word
    return tree


def _weights():
    """An embedding table and a combining matrix, the same in eager and under janus."""
    emb = tf.Variable(tf.random.stateless_normal([20, 3], seed=[1, 2]))
    w = tf.Variable(tf.random.stateless_normal([6, 3], seed=[3, 4]) * 0.5)
    return emb, w


def _run_with_bad_leaf(make, trees, word):
    """Nine calls, the seventh on a tree with one leaf's word set to ``word``."""
    calls = [(t,) for t in trees[:6]] + [(_with_bad_leaf(trees[6], word),)] + [(t,) for t in trees[7:]]
    run_differential(make, calls, min_graph_calls=3)


def _setup(monkeypatch, trim):
    monkeypatch.setattr(janus.config, "trim_functions", trim)


# ------------------------------------------------------------------ control-dependency checks
@TRIM
def test_gather_check_under_control_dependencies_fails_mid_tree(trim, monkeypatch):
    """A bounds check (tf.gather) the output waits for only through tf.control_dependencies:
    a stateless op reachable only by a control edge of the returned Identity."""
    _setup(monkeypatch, trim)

    def make():
        emb, w = _weights()
        table = tf.range(20)

        def encode(node):
            if node.is_leaf:
                h = tf.nn.embedding_lookup(emb, [node.word % 20])
            else:
                h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            check = tf.gather(table, node.word if node.is_leaf else 0)
            with tf.control_dependencies([check]):
                return tf.identity(h)

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            return y, tape.gradient(y, [emb, w])[1]

        return step, lambda: None

    trees = _trees(1, 9)
    _run_with_bad_leaf(make, trees, 25)


@TRIM
def test_unused_gather_check_without_control_dependencies(trim, monkeypatch):
    """The same check, its result simply unused (eager raises; TF prunes an unread stateless op)."""
    _setup(monkeypatch, trim)

    def make():
        emb, w = _weights()
        table = tf.range(20)

        def encode(node):
            if node.is_leaf:
                tf.gather(table, node.word)
                return tf.nn.embedding_lookup(emb, [node.word % 20])
            return tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))

        def step(tree):
            return tf.reduce_sum(encode(tree))

        return step, lambda: None

    trees = _trees(2, 9)
    _run_with_bad_leaf(make, trees, 25)


@TRIM
def test_check_numerics_returned_from_the_recursion_fails_mid_tree(trim, monkeypatch):
    """tf.debugging.assert_all_finite returns Identity(h, ^CheckNumerics): read only by the output."""
    _setup(monkeypatch, trim)

    def make():
        emb, w = _weights()

        def encode(node):
            if node.is_leaf:
                h = tf.nn.embedding_lookup(emb, [node.word]) / tf.cast(node.word - 7, tf.float32)
            else:
                h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            return tf.debugging.assert_all_finite(h, "not finite")

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            return y, tape.gradient(y, w)

        return step, lambda: None

    trees = [t for t in _trees(3, 30) if not _has_word(t, 7)][:9]
    _run_with_bad_leaf(make, trees, 7)


def _has_word(node, word):
    if node.is_leaf:
        return node.word == word
    return _has_word(node.left, word) or _has_word(node.right, word)


@TRIM
def test_user_assert_less_inside_recursion_fails_mid_tree(trim, monkeypatch):
    _setup(monkeypatch, trim)

    def make():
        emb, w = _weights()

        def encode(node):
            if node.is_leaf:
                tf.debugging.assert_less(node.word, 18, message="word too large")
                return tf.nn.embedding_lookup(emb, [node.word])
            h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            tf.debugging.assert_less(tf.reduce_max(tf.abs(h)), 2.0)
            return h

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            return y, tape.gradient(y, [emb, w])[1]

        return step, lambda: None

    trees = [t for t in _trees(4, 30) if not (_has_word(t, 18) or _has_word(t, 19))][:9]
    _run_with_bad_leaf(make, trees, 19)


_PRINTS = []


def _printing_program(tmp_path, body_kind, outer_print=True):
    def make():
        path = tmp_path / f"out{len(_PRINTS)}.txt"
        path.write_text("")
        _PRINTS.append(path)
        stream = f"file://{path}"
        emb, w = _weights()

        def encode(node):
            if node.is_leaf:
                tf.print("leaf", node.word, output_stream=stream)
                return tf.nn.embedding_lookup(emb, [node.word])
            h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            if body_kind == "cond":
                s = tf.reduce_sum(h)
                if s > 0.0:
                    tf.print("pos", output_stream=stream)
                    h = h * 2.0
                else:
                    h = h - 1.0
            tf.print("node", output_stream=stream)
            return h

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            if outer_print:
                tf.print("done", y, output_stream=stream)
            return y, tape.gradient(y, w)

        return step, lambda: path.read_text()

    return make


@TRIM
@pytest.mark.parametrize("outer_print", [True, False], ids=["outer", "inner_only"])
@pytest.mark.parametrize("body_kind", ["plain", "cond"])
def test_tf_print_to_a_file_inside_the_recursion(trim, body_kind, outer_print, monkeypatch, tmp_path):
    """A node's print ran before another node's check: when that failed (a one-leaf tree), the call
    ran again in eager and the text was printed twice. Such a print is refused: eager's answers,
    the function runs as eager (a known loss; holding the graph's text back would keep the graph)."""
    _setup(monkeypatch, trim)
    calls = [(t,) for t in _trees(5, 8, size=(1, 6))]
    jitted = run_differential(_printing_program(tmp_path, body_kind, outer_print), calls, min_graph_calls=0)
    assert "a tf.print inside a recursive function" in janus.explain(jitted)


class _TreeLSTM:
    def __init__(self):
        tf.keras.utils.set_random_seed(3)
        self.embedding = tf.Variable(tf.random.stateless_uniform([20, 4], seed=[5, 6], minval=-0.5, maxval=0.5))
        self.gates = tf.keras.layers.Dense(5 * 4)
        self.gates.build((None, 8))

    def encode(self, node):
        if node.is_leaf:
            x = tf.nn.embedding_lookup(self.embedding, [node.word])
            return tf.tanh(x), x, 1
        h_l, c_l, n_l = self.encode(node.left)
        h_r, c_r, n_r = self.encode(node.right)
        i, f_l, f_r, o, u = tf.split(self.gates(tf.concat([h_l, h_r], 1)), 5, axis=1)
        c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(f_l) * c_l + tf.sigmoid(f_r) * c_r
        return tf.sigmoid(o) * tf.tanh(c), c, n_l + n_r + 1


@pytest.mark.keras
@TRIM
@pytest.mark.parametrize(
    "persistent",
    [
        pytest.param(
            True,
            marks=pytest.mark.xfail(
                reason="older limitation, not the trim (trim off too): with a persistent tape janus splits the "
                "step at the recursion ('a recursive function updates a TF variable'); answers stay eager's",
                strict=True,
            ),
        ),
        False,
    ],
    ids=["persistent", "plain_tape"],
)
def test_tree_lstm_tuple_python_number_keras_persistent_tape(trim, persistent, monkeypatch):
    _setup(monkeypatch, trim)

    def make():
        model = _TreeLSTM()
        variables = [model.embedding, *model.gates.trainable_variables]

        def step(tree):
            with tf.GradientTape(persistent=persistent) as tape:
                h, c, n = model.encode(tree)
                loss = tf.reduce_sum(h) + tf.reduce_sum(c)
                other = tf.reduce_sum(c * c)
            g1 = tape.gradient(loss, variables)
            g2 = tape.gradient(other, variables) if persistent else []
            del tape
            return loss, n, [tf.convert_to_tensor(g) for g in g1 + g2]

        return step, lambda: None

    run_differential(make, [(t,) for t in _trees(6, 8, size=(1, 10))], min_graph_calls=3)


@TRIM
def test_loop_and_nested_cond_inside_the_recursive_body(trim, monkeypatch):
    _setup(monkeypatch, trim)

    def make():
        emb = tf.Variable(tf.random.stateless_normal([20, 3], seed=[1, 2]))
        w = tf.Variable(tf.random.stateless_normal([3, 3], seed=[3, 4]) * 0.5)

        def encode(node):
            if node.is_leaf:
                h = tf.nn.embedding_lookup(emb, [node.word])
            else:
                h = encode(node.left) + encode(node.right)
            i = tf.constant(0)
            while i < 3:
                h = tf.tanh(tf.matmul(h, w))
                if tf.reduce_sum(h) > 0.5:
                    h = h * 0.5
                i += 1
            return h

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            return y, [tf.convert_to_tensor(g) for g in tape.gradient(y, [emb, w])]

        return step, lambda: None

    run_differential(make, [(t,) for t in _trees(7, 8, size=(1, 9))], min_graph_calls=3)


# ---------------------------------------------------------------- more stateless control-only checks
@TRIM
def test_ensure_shape_saturation_check_under_control_dependencies(trim, monkeypatch):
    """ "No unit saturates": tf.ensure_shape on a boolean_mask, waited for only by a control edge."""
    _setup(monkeypatch, trim)

    def make():
        rows = tf.random.stateless_normal([20, 3], seed=[1, 2]) * 0.3
        emb = tf.Variable(tf.tensor_scatter_nd_update(rows, [[19]], [[40.0, 40.0, 40.0]]))
        w = tf.Variable(tf.random.stateless_normal([6, 3], seed=[3, 4]) * 0.3)

        def encode(node):
            if node.is_leaf:
                h = tf.tanh(tf.nn.embedding_lookup(emb, [node.word]))
            else:
                h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            saturated = tf.boolean_mask(h, tf.abs(h) > 0.999)
            with tf.control_dependencies([tf.ensure_shape(saturated, [0])]):
                return tf.identity(h)

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            return y, tape.gradient(y, w)

        return step, lambda: None

    trees = [t for t in _trees(8, 30) if not _has_word(t, 19)][:9]
    _run_with_bad_leaf(make, trees, 19)


def test_the_claim_directly_a_trimmed_function_runs_a_check_its_output_waited_for():
    """function_trim.trim on a plain tf.function: its output Identity waits (control edge) for a
    stateless op that may raise. The check becomes a control output, and the trimmed and the
    untrimmed copy, called alike, answer alike."""
    from tensorflow.core.framework import attr_value_pb2, function_pb2
    from tensorflow.python.eager import context
    from tensorflow.python.ops import gen_functional_ops

    from janus.graphgen import function_trim

    table = tf.range(5)

    @tf.function(autograph=False)
    def f(x, i):
        y = x * 2.0
        with tf.control_dependencies([tf.gather(table, i)]):
            return tf.identity(y)

    concrete = f.get_concrete_function(tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.int32))
    original = context.context().get_function_def(concrete.function_def.signature.name)
    trimmed = function_trim.trim(original)
    assert trimmed is not None and not any(n.op == "Identity" for n in trimmed.node_def)
    assert "GatherV2" in trimmed.control_ret.values()  # nothing else would keep the check
    answers = {}
    for label, fdef in (("untrimmed", original), ("trimmed", trimmed)):
        copy = function_pb2.FunctionDef()
        copy.CopyFrom(fdef)
        copy.signature.name = f"janus_breaker_{label}_f"
        context.context().add_function_def(copy)

        @tf.function(autograph=False)
        def call(*a, name=copy.signature.name):
            return gen_functional_ops.stateful_partitioned_call(
                args=list(a), Tout=[tf.float32], f=attr_value_pb2.NameAttrList(name=name)
            )[0]

        for i in (2, 9):  # Grappler, on this call path, may drop the check in both copies alike
            try:
                answers[label, i] = float(call(tf.constant(1.0), tf.constant(i), *concrete.captured_inputs))
            except tf.errors.InvalidArgumentError:
                answers[label, i] = "raised"
    assert all(answers["untrimmed", i] == answers["trimmed", i] for i in (2, 9)), answers


# ---------------------------------------------------------------- checks with no control edge at all
@TRIM
def test_unused_gather_at_the_top_of_the_recursive_body(trim, monkeypatch):
    """A bounds check whose result is unused, outside any tensor `if` of the recursion (an older wrong
    answer, trimmed or not: TF pruned the unread op; the recursive body now keeps it as a control output)."""
    _setup(monkeypatch, trim)

    def make():
        emb, w = _weights()
        table = tf.range(20)

        def encode(node):
            tf.gather(table, node.word)
            if node.is_leaf:
                return tf.nn.embedding_lookup(emb, [node.word % 20])
            return tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))

        def step(tree):
            return tf.reduce_sum(encode(tree))

        return step, lambda: None

    def words(node, k=0):
        node.word = node.word if node.is_leaf else k % 20
        if not node.is_leaf:
            words(node.left, k + 1)
            words(node.right, k + 2)
        return node

    trees = [words(t) for t in _trees(9, 9)]
    _run_with_bad_leaf(make, trees, 25)


@TRIM
def test_a_tensor_if_whose_branch_only_checks(trim, monkeypatch):
    """`if tensor: tf.gather(...)` inside the recursion: the cond's outputs are read by nothing."""
    _setup(monkeypatch, trim)

    def make():
        emb, w = _weights()
        table = tf.range(3)

        def encode(node):
            if node.is_leaf:
                h = tf.nn.embedding_lookup(emb, [node.word])
            else:
                h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            if tf.reduce_sum(h) > 100.0:
                tf.gather(table, 7)
            return h

        def step(tree):
            return tf.reduce_sum(encode(tree))

        return step, lambda: None

    rows = _trees(10, 9)
    calls = [(t,) for t in rows[:6]] + [(Node(word=3),)] + [(t,) for t in rows[6:]]
    run_differential(make, calls, min_graph_calls=3)


@TRIM
@pytest.mark.parametrize("check", ["ensure_shape", "gather"])
def test_control_dependency_check_inside_a_tensor_if_branch(trim, check, monkeypatch):
    """The same control-edge check inside the leaf branch (a trimmed branch function of the If)."""
    _setup(monkeypatch, trim)

    def make():
        rows = tf.random.stateless_normal([20, 3], seed=[1, 2]) * 0.3
        emb = tf.Variable(tf.tensor_scatter_nd_update(rows, [[19]], [[40.0, 40.0, 40.0]]))
        w = tf.Variable(tf.random.stateless_normal([6, 3], seed=[3, 4]) * 0.3)
        table = tf.range(19)

        def encode(node):
            if node.is_leaf:
                h = tf.tanh(tf.nn.embedding_lookup(emb, [node.word]))
                with tf.control_dependencies(
                    [tf.gather(table, node.word)]
                    if check == "gather"
                    else [tf.ensure_shape(tf.boolean_mask(h, tf.abs(h) > 0.999), [0])]
                ):
                    h = tf.identity(h)
            else:
                h = tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))
            return h

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(encode(tree))
            return y, tape.gradient(y, w)

        return step, lambda: None

    trees = [t for t in _trees(8, 30) if not _has_word(t, 19)][:9]
    _run_with_bad_leaf(make, trees, 19)
