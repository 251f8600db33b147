"""The forward shortcut of ``JanusInvoke`` (csrc/janus_invoke.cc): a recursive body that begins with
``if node.is_leaf:`` on a plain bool attribute has the invocation read the attribute itself and run
the branch, instead of running the forward function (the read and the ``If``).

The invocation reads only where its read is certain to give what ``JanusPyGetAttr`` would, and runs
none of the program's code: the attribute is in the instance's own dictionary, the call wrote
nothing to the heap yet, and it holds True or False. Every other case runs the forward function
whole. Each program here runs eagerly and under janus, compared after every call, with graphs
serving the calls; one test counts the ``If`` runs, so that a shortcut that is never taken fails.
"""

from __future__ import annotations

import glob

import numpy as np
import tensorflow as tf
from differential import run_differential
from tensorflow.python.eager import context
from test_recursion import Node, linear_tree, random_tree, tree_program

import janus
from janus.graphgen import recursion_grad


def _trees(rng, n, size=(1, 9)):
    return [random_tree(rng, int(rng.integers(*size))) for _ in range(n)]


def _calls(seed: int, n: int = 8) -> list:
    rng = np.random.default_rng(seed)
    return [(_trees(rng, 2),) for _ in range(n)] + [([Node(word=3)],), ([linear_tree(rng, 30)],)]


def _encoder_program(leaf_test):
    """A TreeRNN-shaped training step, leaves told by ``leaf_test``."""

    def make():
        gen = tf.random.Generator.from_seed(5)
        emb = tf.Variable(gen.normal([20, 4], dtype=tf.float64))
        w = tf.Variable(gen.normal([8, 4], dtype=tf.float64) * 0.4)

        def enc(node):
            if leaf_test(node):
                return tf.nn.embedding_lookup(emb, [node.word])
            return tf.tanh(tf.matmul(tf.concat([enc(node.left), enc(node.right)], 1), w))

        def step(trees):
            with tf.GradientTape() as tape:
                loss = tf.add_n([tf.reduce_sum(enc(t)) for t in trees])
            grads = tape.gradient(loss, [emb, w])
            return loss, [None if g is None else tf.convert_to_tensor(g) for g in grads]

        return step, lambda: None

    return make


def test_a_plain_leaf_flag_gives_eagers_values_and_gradients():
    """(A flag that is a property, a class attribute some instances override, or a ``__slots__``
    member gets no graph before the invocation could read it: the generator refuses it.)"""
    run_differential(_encoder_program(lambda node: node.is_leaf), _calls(1), min_graph_calls=3)


def test_a_call_that_wrote_to_the_heap_before_recursing_gives_eagers_values():
    """The call stores a tensor on its root before recursing: the store then holds a local copy, so
    the invocation leaves every flag to the op (which reads the call's copies before the heap's)."""

    def make():
        emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float64), [20, 2]))

        def enc(node):
            if node.is_leaf:
                return tf.nn.embedding_lookup(emb, [node.word])
            return enc(node.left) * 2.0 + enc(node.right)

        def step(tree):
            tree.summary = emb[0:1] * 3.0
            return enc(tree) + tree.summary

        return step, lambda: None

    rng = np.random.default_rng(3)
    run_differential(make, [(random_tree(rng, int(rng.integers(2, 9))),) for _ in range(8)], min_graph_calls=3)


def test_a_flag_that_is_sometimes_not_a_bool_gives_eagers_values():
    """``is_leaf`` set to 1/0 or a NumPy bool on some calls: the invocation leaves those to the op."""

    def make():
        emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float64), [20, 2]))

        def enc(node):
            if node.is_leaf:
                return tf.nn.embedding_lookup(emb, [node.word])
            return enc(node.left) - enc(node.right) * 0.5

        def step(tree):
            return enc(tree)

        return step, lambda: None

    rng = np.random.default_rng(4)
    calls = []
    for i in range(10):
        tree = random_tree(rng, int(rng.integers(2, 9)))
        if i in (6, 8):
            flag = int if i == 6 else np.bool_
            stack = [tree]
            while stack:
                node = stack.pop()
                node.is_leaf = flag(node.is_leaf)
                stack += [] if node.left is None else [node.left, node.right]
        calls.append((tree,))
    run_differential(make, calls, min_graph_calls=3)


def test_flags_flipped_between_calls_on_the_same_trees():
    rng = np.random.default_rng(6)
    trees = _trees(rng, 2, size=(3, 9))
    calls = []
    for i in range(8):
        if i == 4:  # every inner node's left child becomes a leaf (its word: 1)
            for tree in trees:
                stack = [tree]
                while stack:
                    node = stack.pop()
                    if node.left is not None and not node.is_leaf:
                        node.left.is_leaf, node.left.word = True, 1
                        stack.append(node.right)
        calls.append((list(trees),))
    run_differential(tree_program(train=True), calls, min_graph_calls=3)


def _if_runs(logdir, fn, *args) -> int:
    """How many ``If`` kernels run (their ``IfOp`` trace events) in one call of ``fn``."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3, python_tracer_level=0)
    tf.profiler.experimental.start(logdir, options=options)
    try:
        fn(*args)
    finally:
        tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1], "rb") as f:
        space.ParseFromString(f.read())
    runs = 0
    for plane in space.planes:
        names = {k: v.name for k, v in plane.event_metadata.items()}
        runs += sum(names.get(e.metadata_id) == "IfOp" for line in plane.lines for e in line.events)
    return runs


def test_the_forward_recursion_runs_no_if_kernel(tmp_path):
    """A forward-only tree recursion: with the shortcut no ``If`` kernel runs (without it, one a tree
    node), and the recursive function has the form the shortcut takes."""
    emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float32), [20, 2]))

    def enc(node):
        if node.is_leaf:
            return tf.nn.embedding_lookup(emb, [node.word])
        return tf.tanh(enc(node.left) - enc(node.right))

    def forward(trees):
        return tf.add_n([tf.reduce_sum(enc(t)) for t in trees])

    rng = np.random.default_rng(8)
    trees = _trees(rng, 3, size=(4, 12))
    jitted = janus.jit(forward)
    for _ in range(janus.config.profile_calls + 2):
        np.testing.assert_allclose(jitted(trees).numpy(), forward(trees).numpy(), rtol=1e-5)
    assert janus.stats(jitted)["graph_calls"] >= 2
    fdef = context.context().get_function_def(list(recursion_grad.registry.values())[-1].name)
    assert sorted(n.op for n in fdef.node_def) == ["Const", "If", "JanusPyGetAttr"]
    assert _if_runs(str(tmp_path), jitted, trees) == 0
