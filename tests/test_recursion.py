"""[recursion]: recursive functions as recursive graph functions (JanusInvoke), values and gradients."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same_call, outcome, run_differential

import janus
from janus.graphgen import recursion_grad


class Node:
    def __init__(self, word=None, left=None, right=None):
        self.word, self.left, self.right = word, left, right
        self.is_leaf = left is None


def random_tree(rng, n):
    if n == 1:
        return Node(word=int(rng.integers(0, 20)))
    k = int(rng.integers(1, n))
    return Node(left=random_tree(rng, k), right=random_tree(rng, n - k))


def linear_tree(rng, depth):
    node = Node(word=int(rng.integers(0, 20)))
    for _ in range(depth - 1):
        node = Node(left=node, right=Node(word=int(rng.integers(0, 20))))
    return node


class TreeRNN:
    """In float64: gradients summed over many nodes in another order stay within rtol 1e-5."""

    def __init__(self, hidden=6):
        gen = tf.random.Generator.from_seed(7)
        self.embedding = tf.Variable(gen.normal([20, hidden], dtype=tf.float64))
        self.w = tf.Variable(gen.normal([2 * hidden, hidden], dtype=tf.float64) * 0.4)
        self.b = tf.Variable(tf.zeros([hidden], tf.float64))
        self.out = tf.Variable(gen.normal([hidden, 1], dtype=tf.float64))
        self.variables = [self.embedding, self.w, self.b, self.out]

    def encode(self, node):
        if node.is_leaf:
            return tf.nn.embedding_lookup(self.embedding, [node.word])
        left = self.encode(node.left)
        right = self.encode(node.right)
        return tf.tanh(tf.matmul(tf.concat([left, right], 1), self.w) + self.b)


def tree_program(train: bool):
    def make():
        model = TreeRNN()

        def step(trees):
            with tf.GradientTape() as tape:
                loss = 0.0
                for tree in trees:
                    loss += tf.reduce_sum(tf.matmul(model.encode(tree), model.out))
            grads = tape.gradient(loss, model.variables)
            if train:  # plain SGD; see the closing note of #8 on Keras optimizers in the same graph
                for variable, grad in zip(model.variables, grads):
                    variable.assign_sub(tf.constant(0.1, tf.float64) * tf.convert_to_tensor(grad))
            return loss, [tf.convert_to_tensor(g) for g in grads]

        return step, lambda: [v.numpy() for v in model.variables]

    return make


@pytest.mark.parametrize("batch_trees", [False, True])
def test_random_trees_values_and_gradients_one_graph_for_all_trees(batch_trees, monkeypatch):
    """Invoked node by node, or run level by level (``tree_batching``): one graph either way."""
    monkeypatch.setattr(janus.config, "batch_trees", batch_trees)
    rng = np.random.default_rng(0)
    calls = [([random_tree(rng, int(rng.integers(1, 16))) for _ in range(3)],) for _ in range(9)]
    jitted = run_differential(tree_program(train=True), calls, min_graph_calls=5)
    assert janus.stats(jitted)["graphs_built"] == 1  # new trees never regenerate
    kinds = {op.type for op in _graph_ops(jitted)}
    assert ("PyFunc" in kinds and "JanusInvoke" not in kinds) if batch_trees else "JanusInvoke" in kinds


def test_a_variable_read_only_by_later_trees_is_counted_before_its_gradient_is_asked():
    """The first tree of a batch is a leaf (no combiner weights); later trees, under the loop's
    tf.cond, read them inside recursive invocations. The touch check must wait for those
    invocations, or it reads the counter early (a race: 'gradient is None' falsely asserted)."""
    rng = np.random.default_rng(3)
    warm = [([random_tree(rng, 9) for _ in range(3)],) for _ in range(4)]
    leaf_first = [([Node(word=i % 20), random_tree(rng, 13), random_tree(rng, 13)],) for i in range(30)]
    jitted = run_differential(tree_program(train=False), warm + leaf_first, min_graph_calls=30)
    assert janus.stats(jitted)["assumption_failures"] == 0


def test_degenerate_linear_trees_200_deep():
    rng = np.random.default_rng(1)
    calls = [([linear_tree(rng, depth)],) for depth in (3, 7, 5, 200, 200, 120, 200)]
    jitted = run_differential(tree_program(train=False), calls, min_graph_calls=4)
    assert janus.stats(jitted)["graphs_built"] == 1


@pytest.mark.slow
def test_trees_deeper_than_pythons_default_recursion_limit():
    """Depth is bounded by eager (the Python recursion limit), not by janus: the invocations are
    asynchronous kernels, so 1,100 nested calls and their gradients hold no C++ stack."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)  # eager needs it for 1,100 levels
    try:
        rng = np.random.default_rng(5)
        calls = [([linear_tree(rng, 1100)],) for _ in range(5)]
        jitted = run_differential(tree_program(train=False), calls, min_graph_calls=2)
    finally:
        sys.setrecursionlimit(limit)
    assert janus.stats(jitted)["graphs_built"] == 1


@pytest.mark.parametrize("parallel", [True, False])
def test_parallel_and_chained_subtree_calls_agree(parallel, monkeypatch):
    monkeypatch.setattr(janus.config, "parallel_calls", parallel)
    rng = np.random.default_rng(2)
    calls = [([random_tree(rng, 9), random_tree(rng, 4)],) for _ in range(6)]
    run_differential(tree_program(train=True), calls, min_graph_calls=3)


@pytest.mark.keras
def test_tree_lstm_tuple_results_and_keras_layers():
    class TreeLSTM:
        def __init__(self):
            tf.keras.utils.set_random_seed(3)
            self.embedding = tf.Variable(tf.random.uniform([20, 4], -0.5, 0.5))
            self.gates = tf.keras.layers.Dense(5 * 4)
            self.gates.build((None, 8))

        def encode(self, node):
            if node.is_leaf:
                x = tf.nn.embedding_lookup(self.embedding, [node.word])
                return tf.tanh(x), x
            h_l, c_l = self.encode(node.left)
            h_r, c_r = self.encode(node.right)
            i, f_l, f_r, o, u = tf.split(self.gates(tf.concat([h_l, h_r], 1)), 5, axis=1)
            c = tf.sigmoid(i) * tf.tanh(u) + tf.sigmoid(f_l) * c_l + tf.sigmoid(f_r) * c_r
            return tf.sigmoid(o) * tf.tanh(c), c

    def make():
        model = TreeLSTM()
        variables = [model.embedding, *model.gates.trainable_variables]

        def step(tree):
            with tf.GradientTape() as tape:
                h, c = model.encode(tree)
                loss = tf.reduce_sum(h) + tf.reduce_sum(c)
            return loss, [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]

        return step, lambda: None

    rng = np.random.default_rng(3)
    run_differential(make, [(random_tree(rng, int(rng.integers(2, 12))),) for _ in range(7)], min_graph_calls=3)


def even(x, n):
    if n <= 0:
        return x
    return odd(x * 1.5, n - 1)


def odd(x, n):
    return even(tf.sin(x), n - 1) + 1.0


def test_mutual_recursion_with_a_tensor_dependent_base_case():
    def make():
        def f(x, n):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = even(x, n)
            return y, tape.gradient(y, x)

        return f, lambda: None

    x = tf.constant([0.3, -0.2])
    calls = [(x, tf.constant(n)) for n in (3, 5, 4, 0, 9, 1, 12)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert janus.stats(jitted)["graphs_built"] == 1


def test_tensor_base_case_with_a_python_number_argument():
    def halve(x, steps):
        if tf.reduce_max(tf.abs(x)) < 1.0:
            return x, steps
        return halve(x * 0.5, steps + 1)

    def make():
        return (lambda x: halve(x, 0)), lambda: None

    calls = [(tf.constant([v, 0.5]),) for v in (3.0, 40.0, 0.1, 1000.0, 7.5, 2.0)]
    run_differential(make, calls, min_graph_calls=3)


def test_a_node_of_another_type_breaks_the_assumption_and_falls_back():
    rng = np.random.default_rng(4)
    trees = [[random_tree(rng, 5)] for _ in range(6)]
    odd_tree = random_tree(rng, 5)
    leaf = odd_tree
    while not leaf.is_leaf:
        leaf = leaf.right
    leaf.word = 3.0  # a float word: embedding_lookup fails in eager too
    calls = [(t,) for t in trees[:4]] + [([odd_tree],)] + [(t,) for t in trees[4:]]
    jitted = run_differential(tree_program(train=True), calls, min_graph_calls=1)
    assert janus.stats(jitted)["assumption_failures"] == 1


def _graph_ops(jitted):
    """Every op of the graph, those of loop bodies and branches included."""
    entry = janus.driver.resolve(jitted)
    graph = entry.cache.entries[0].graph.concrete.graph
    ops = list(graph.get_operations())
    for function in graph.as_graph_def().library.function:
        ops.extend(_NodeOp(node.op) for node in function.node_def)
    return ops


class _NodeOp:
    def __init__(self, op_type: str) -> None:
        self.type = op_type


_SINGLE_THREADED_KERAS_STEP = """
import sys
import numpy as np, tensorflow as tf
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
sys.path.insert(0, "tests")
import janus
from differential import run_differential
from test_recursion import keras_optimizer_program, random_tree
for seed in range(3):
    rng = np.random.default_rng(seed)
    calls = [([random_tree(rng, int(rng.integers(1, 16))) for _ in range(3)],) for _ in range(6)]
    run_differential(keras_optimizer_program, calls, min_graph_calls=3)
print("agreed")
"""


def keras_optimizer_program():
    model = TreeRNN()
    opt = tf.keras.optimizers.SGD(0.1)

    def step(trees):
        with tf.GradientTape() as tape:
            losses = []
            for tree in trees:
                losses.append(tf.reduce_sum(tf.matmul(model.encode(tree), model.out)))
            loss = losses[0] + losses[1] + losses[2]
        opt.apply_gradients(zip(tape.gradient(loss, model.variables), model.variables))
        return losses

    return step, lambda: [v.numpy() for v in model.variables]


@pytest.mark.keras
@pytest.mark.slow
def test_keras_optimizer_step_in_the_same_graph_as_the_recursion():
    """The forward pass reads the weights before the optimizer's updates (see runner._call_options).

    Single-threaded execution made the wrong order deterministic, so this runs in a subprocess.
    """
    done = subprocess.run(
        [sys.executable, "-c", _SINGLE_THREADED_KERAS_STEP],
        capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    assert done.returncode == 0 and "agreed" in done.stdout, done.stderr[-3000:]


class NaryNode:
    def __init__(self, word=None, children=()):
        self.word, self.children = word, list(children)


def random_nary_tree(rng, n):
    if n == 1:
        return NaryNode(word=int(rng.integers(0, 20)))
    k = int(rng.integers(2, 4))
    sizes = np.maximum(1, rng.multinomial(n - 1, [1 / k] * k))
    return NaryNode(children=[random_nary_tree(rng, int(s)) for s in sizes])


def test_lists_of_children_values_and_gradients():
    """`for child in node.children` over a list held by a run-time node: a tf.while_loop of invocations."""

    class ChildSum:
        def __init__(self):
            gen = tf.random.Generator.from_seed(3)
            self.embedding = tf.Variable(gen.normal([20, 4], dtype=tf.float64))
            self.w = tf.Variable(gen.normal([4, 4], dtype=tf.float64) * 0.5)

        def encode(self, node):
            if len(node.children) == 0:
                return tf.nn.embedding_lookup(self.embedding, [node.word])
            h = tf.zeros([1, 4], tf.float64)
            for child in node.children:
                h = h + self.encode(child)
            return tf.tanh(tf.matmul(h, self.w))

    def make():
        model = ChildSum()

        def step(tree):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model.encode(tree))
            grads = tape.gradient(loss, [model.embedding, model.w])
            return loss, [tf.convert_to_tensor(g) for g in grads]

        return step, lambda: None

    rng = np.random.default_rng(6)
    calls = [(random_nary_tree(rng, int(rng.integers(2, 14))),) for _ in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=4)
    assert janus.stats(jitted)["graphs_built"] == 1


class ScoredNode:
    """A node holding a scalar tensor and a Python float: both read through the heap ops."""

    def __init__(self, score, weight, left=None, right=None):
        self.score, self.weight, self.left, self.right = score, weight, left, right
        self.is_leaf = left is None


def scored_tree(rng, n):
    score = tf.constant(float(rng.normal()), tf.float64)
    if n == 1:
        return ScoredNode(score, float(rng.uniform(0.5, 2.0)))
    k = int(rng.integers(1, n))
    return ScoredNode(score, float(rng.uniform(0.5, 2.0)), scored_tree(rng, k), scored_tree(rng, n - k))


def test_scalar_tensor_and_float_attributes_of_nodes_are_served_by_the_graph():
    """0-d tensors on run-time nodes once reached the kernel as 1-d arrays: every graph call failed."""

    def make():
        scale = tf.Variable(tf.constant(0.5, tf.float64))

        def total(node):
            if node.is_leaf:
                return node.score * node.weight * scale
            return tf.tanh(node.score * node.weight + total(node.left) - total(node.right))

        def step(trees):
            with tf.GradientTape() as tape:
                out = [total(tree) for tree in trees]
            return out, tf.convert_to_tensor(tape.gradient(out, scale))

        return step, lambda: scale.numpy()

    rng = np.random.default_rng(11)
    calls = [([scored_tree(rng, int(rng.integers(1, 12))) for _ in range(2)],) for _ in range(8)]
    jitted = run_differential(make, calls, min_graph_calls=5)
    assert janus.stats(jitted)["fallbacks"] == 0, janus.explain(jitted)


def test_sparse_gradients_build_a_backward_without_zero_gradients_for_intermediates():
    """The embedding's gradient is sparse, so the backward is built a second time, over conds that
    already output the first attempt's intermediates. Those (and invocation frames) get no
    gradient: no ZerosLike of a variant runs per backward invocation. Values and gradients stay eager's."""
    rng = np.random.default_rng(5)
    calls = [([random_tree(rng, int(rng.integers(2, 12))) for _ in range(2)],) for _ in range(6)]
    run_differential(tree_program(train=True), calls, min_graph_calls=3)
    built = [rf for rf in recursion_grad.registry.values() if rf.code is TreeRNN.encode.__code__ and rf.backward]
    assert built and built[-1].grad_kinds[0] == "sparse"  # the embedding: the retried build
    library = built[-1].backward.graph.as_graph_def()
    nodes = [n for f in library.library.function for n in f.node_def] + list(library.node)
    assert any(n.op == "JanusInvokeGrad" for n in nodes)
    zeros = [n.name for n in nodes if n.op == "ZerosLike" and n.attr["T"].type == tf.variant.as_datatype_enum]
    assert zeros == []


@pytest.mark.slow
def test_a_forest_with_one_node_of_another_type_reports_the_assumption_never_a_cancellation():
    """Many invocations run in parallel; one fails a heap read's type check deep in one tree and
    the step cancels the others. The failure, not a sibling's cancellation, must reach the runner
    (csrc/janus_invoke.cc, StepError): before, about one call in six saw CancelledError or an
    unrecognised error instead of the assumption failure."""
    for seed in range(6):
        rng = np.random.default_rng(seed)
        eager_fn, eager_state = tree_program(train=True)()
        raw_fn, jit_state = tree_program(train=True)()
        jitted = janus.jit(raw_fn)
        for _ in range(4):
            forest = [random_tree(rng, 16) for _ in range(8)]
            assert_same_call(0, outcome(eager_fn, (forest,)), outcome(jitted, (forest,)), eager_state, jit_state)
        forest = [random_tree(rng, 24) for _ in range(8)]
        leaf = forest[int(rng.integers(8))]
        while not leaf.is_leaf:
            leaf = leaf.right if rng.random() < 0.5 else leaf.left
        leaf.word = 3.0  # a float word: embedding_lookup fails in eager too
        assert_same_call(1, outcome(eager_fn, (forest,)), outcome(jitted, (forest,)), eager_state, jit_state)
        stats = janus.stats(jitted)
        assert stats["graph_calls"] >= 1 and stats["assumption_failures"] == 1, (seed, janus.explain(jitted))
