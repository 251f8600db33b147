"""Recursive graph functions under TF's single-threaded executor (csrc/janus_invoke.cc).

janus instantiates the functions its ``JanusInvoke`` calls under ``SINGLE_THREADED_EXECUTOR``: a
recursion runs as C++ recursion on the invoking thread, and moves to a thread of janus's own pool,
whose stacks are large, where that thread's stack runs low. These tests run user-shaped recursions
in fresh interpreters (a C++ stack overflow would kill the process, not fail an assertion) and
compare every value with plain eager, with graphs serving the calls:

* a chain deep enough that its forward and backward recursions outgrow an 8 MiB thread stack
  (about 7 KB a level), so the move to the pool must happen, forward and backward;
* a batch of random trees (a TreeRNN-shaped training step: embedding, combine, loss, SGD), with the
  single-threaded executor on and off (``janus.config.single_threaded_recursion``), which must
  agree with eager.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from differential import ATOL, RTOL

ROOT = Path(__file__).parent.parent

_DEEP_CHAIN = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import janus

    class Link:
        def __init__(self, rest=None):
            self.rest = rest

    def chain(n):
        link = Link()
        for _ in range(n):
            link = Link(link)
        return link

    w = tf.Variable(0.999)

    def score(link):
        if link.rest is None:
            return w * 1.0
        return score(link.rest) * w + 1.0

    def step(link):
        with tf.GradientTape() as tape:
            y = score(link)
        return y, tape.gradient(y, w)

    sys.setrecursionlimit(8000)
    jitted = janus.jit(step)
    results = []
    for n in [3, 4, 5, 6, 7, 8, 2500, 9, 2600]:
        link = chain(n)
        expected = [float(v) for v in step(link)]
        before = janus.stats(jitted)["graph_calls"]
        got = [float(v) for v in jitted(link)]
        results.append([n, expected, got, janus.stats(jitted)["graph_calls"] - before])
    print(json.dumps(results))
    """
)

_TREES = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    import janus

    janus.config.single_threaded_recursion = sys.argv[1] == "on"

    class Node:
        def __init__(self, word=None, left=None, right=None):
            self.word, self.left, self.right = word, left, right

    def random_tree(rng, n):
        if n == 1:
            return Node(word=int(rng.integers(0, 30)))
        k = int(rng.integers(1, n))
        return Node(left=random_tree(rng, k), right=random_tree(rng, n - k))

    class Model:
        def __init__(self):
            self.embedding = tf.Variable(tf.random.stateless_normal([30, 8], [1, 2]) * 0.3)
            self.w = tf.Variable(tf.random.stateless_normal([16, 8], [3, 4]) * 0.3)
            self.out = tf.Variable(tf.random.stateless_normal([8, 3], [5, 6]) * 0.3)
            self.variables = [self.embedding, self.w, self.out]

        def encode(self, node):
            if node.left is None:
                return tf.nn.embedding_lookup(self.embedding, [node.word])
            children = tf.concat([self.encode(node.left), self.encode(node.right)], axis=1)
            return tf.tanh(tf.matmul(children, self.w))

    def make_step(model):
        optimizer = tf.keras.optimizers.SGD(0.1)

        def step(batch, labels):
            with tf.GradientTape() as tape:
                loss = 0.0
                for i, tree in enumerate(batch):
                    logits = tf.matmul(model.encode(tree), model.out)
                    loss += tf.reduce_sum(
                        tf.nn.sparse_softmax_cross_entropy_with_logits(labels[i : i + 1], logits))
            grads = tape.gradient(loss, model.variables)
            optimizer.apply_gradients(zip(grads, model.variables))
            return loss
        return step

    rng = np.random.default_rng(7)
    batches = [[random_tree(rng, int(rng.integers(1, 25))) for _ in range(6)] for _ in range(8)]
    labels = [tf.constant(rng.integers(0, 3, size=6), tf.int32) for _ in range(8)]
    eager_model, janus_model = Model(), Model()
    eager_step, janus_step = make_step(eager_model), janus.jit(make_step(janus_model))
    losses = [[float(eager_step(b, l)), float(janus_step(b, l))] for b, l in zip(batches, labels)]
    weights = [[v.numpy().tolist(), u.numpy().tolist()] for v, u in zip(eager_model.variables, janus_model.variables)]
    print(json.dumps({"losses": losses, "weights": weights, "graph_calls": janus.stats(janus_step)["graph_calls"]}))
    """
)

_BACKWARD_ERROR = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import tensorflow as tf
    import janus

    janus.config.single_threaded_recursion = sys.argv[1] == "on"

    class Node:
        def __init__(self, word=None, left=None, right=None):
            self.word, self.left, self.right = word, left, right

    def random_tree(rng, n, bad):
        if n == 1:
            word = int(rng.integers(0, 12))
            return Node(word=word if bad or word != 7 else 8)
        k = int(rng.integers(1, n))
        return Node(left=random_tree(rng, k, bad), right=random_tree(rng, n - k, bad))

    embedding = tf.Variable(tf.random.stateless_normal([12, 4], [1, 2]))
    w = tf.Variable(tf.random.stateless_normal([8, 4], [3, 4]) * 0.5)

    def encode(node):
        if node.left is None:  # word 7's leaf is sqrt(0): its gradient is inf, and check_numerics raises
            x = tf.abs(tf.gather(embedding, [node.word])) * tf.cast(tf.not_equal(node.word, 7), tf.float32)
            return tf.sqrt(tf.debugging.check_numerics(x, "leaf"))
        return tf.tanh(tf.matmul(tf.concat([encode(node.left), encode(node.right)], 1), w))

    def step(trees):
        with tf.GradientTape() as tape:
            loss = tf.add_n([tf.reduce_sum(encode(t)) for t in trees])
        grads = tape.gradient(loss, [embedding, w])
        embedding.assign_sub(0.01 * tf.convert_to_tensor(grads[0]))
        w.assign_sub(0.01 * grads[1])
        return loss

    def outcome(fn, trees):
        try:
            return ["ok", float(fn(trees))]
        except tf.errors.InvalidArgumentError:
            return ["InvalidArgumentError", None]

    rng = np.random.default_rng(3)
    jitted = janus.jit(step)
    results = []
    for call in range(16):  # word 7 from the 7th call on: a graph serves by then
        trees = [random_tree(rng, int(rng.integers(1, 6)), call >= 6) for _ in range(3)]
        saved = [v.numpy() for v in (embedding, w)]
        expected = outcome(step, trees)
        after_eager = [v.numpy() for v in (embedding, w)]
        for v, value in zip((embedding, w), saved):
            v.assign(value)
        got = outcome(jitted, trees)
        same_state = all(np.allclose(v.numpy(), e, rtol=1e-5, atol=1e-6) for v, e in zip((embedding, w), after_eager))
        results.append([expected, got, same_state, janus.stats(jitted)["graph_calls"]])
    print(json.dumps({"results": results}))
    """
)


def _run(tmp_path: Path, source: str, *args: str) -> object:
    script = tmp_path / "program.py"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # about 30 s; what it exercises does not depend on the Python version
def test_a_chain_deeper_than_a_thread_stack_holds_matches_eager_forward_and_backward(tmp_path):
    results = _run(tmp_path, _DEEP_CHAIN)
    for n, expected, got, _ in results:
        assert got == pytest.approx(expected, rel=1e-5), n
    served = {n: graph_calls for n, _, _, graph_calls in results}
    assert served[2500] == 1 and served[2600] == 1, served


@pytest.mark.parametrize("single_threaded", ["on", pytest.param("off", marks=pytest.mark.slow)])
def test_a_tree_batch_training_step_matches_eager(tmp_path, single_threaded):
    result = _run(tmp_path, _TREES, single_threaded)
    for eager_loss, janus_loss in result["losses"]:
        assert janus_loss == pytest.approx(eager_loss, rel=1e-5)
    for eager_weights, janus_weights in result["weights"]:
        np.testing.assert_allclose(janus_weights, eager_weights, rtol=1e-5, atol=1e-6)
    assert result["graph_calls"] >= 4, result["graph_calls"]


@pytest.mark.parametrize("single_threaded", ["on", pytest.param("off", marks=pytest.mark.slow)])
def test_an_error_in_a_recursive_backward_pass_keeps_the_graph_serving(tmp_path, single_threaded):
    # An op that raises inside the backward recursion (check_numerics on an infinite gradient) comes
    # before the step's updates: janus re-runs the call eagerly (eager's exception, eager's state)
    # and the graph keeps serving. Under the single-threaded executor TF names the failing node
    # inside its branch function, not under the step's op: that was once taken as "raised after
    # updating TF state", and the function ran imperatively for good.
    results = _run(tmp_path, _BACKWARD_ERROR, single_threaded)["results"]
    for expected, got, same_state, _ in results:
        assert got[0] == expected[0]
        if expected[0] == "ok":
            # the differential harness's tolerances: the loss is a sum of tanh outputs that nearly
            # cancel (about -0.0027), so rounding alone moves it by more than 1e-5 of itself
            assert got[1] == pytest.approx(expected[1], rel=RTOL, abs=ATOL)
        assert same_state
    raised = [i for i, (expected, *_) in enumerate(results) if expected[0] != "ok"]
    assert raised, "no call raised: the test proves nothing"
    graph_calls = [calls for *_, calls in results]
    assert graph_calls[raised[0] - 1] > 0, "the graph served no call before the first error: the test proves nothing"
    assert graph_calls[-1] > graph_calls[raised[0]], f"no graph served a call after the first error: {graph_calls}"
