"""[recursion] #19: the forms recursive graph functions take for speed keep eager's answers.

- A cond inside a recursive function hands its intermediates to the backward as plain tensors
  (``FakeParam`` on the branch that did not compute them), not wrapped in optionals; a sparse
  gradient (an embedding table's) is found on one trace and built on a fresh one.
- A leaf's may-be-None word used as an index runs one check to unwrap it and one to narrow it to
  eager's int32 (``JanusUnwrap``, ``JanusNarrowInt32``); a leaf without a word, or with one past
  int32, still gets eager's answer.
- Heap reads queue for the GIL in janus's ops; a Python thread that keeps the interpreter busy
  meanwhile delays them but neither deadlocks nor changes an answer.
"""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from tensorflow.python.eager import context
from test_recursion import random_tree, tree_program

from janus.graphgen import recursion_grad
from janus.ops import assert_op

_OPTIONAL_OPS = frozenset({"OptionalFromValue", "OptionalNone", "OptionalGetValue", "OptionalHasValue"})


def _ops_within(name: str, seen: set[str] | None = None) -> list[str]:
    """The op types of function ``name`` and of every function its conds and calls name."""
    seen = set() if seen is None else seen
    if name in seen:
        return []
    seen.add(name)
    fdef = context.context().get_function_def(name)
    found = []
    for node in fdef.node_def:
        found.append(node.op)
        for attr in node.attr.values():
            if attr.HasField("func") and attr.func.name != name:
                found += _ops_within(attr.func.name, seen)
    return found


def _tree_functions() -> list[recursion_grad.RecursiveFunction]:
    return [rf for rf in recursion_grad.registry.values() if rf.code.co_name == "encode" and rf.backward is not None]


def test_a_recursive_tree_step_passes_cond_intermediates_as_plain_tensors():
    before = set(recursion_grad.registry)
    rng = np.random.default_rng(11)
    run_differential(tree_program(train=True), [([random_tree(rng, 9), random_tree(rng, 5)],) for _ in range(6)],
                     min_graph_calls=2)  # fmt: skip
    built = [rf for rf in _tree_functions() if rf.name not in before]
    assert built, "no recursive function was built"
    for rf in built:
        assert "sparse" in rf.grad_kinds  # the embedding table's gradient: found on one trace, built on another
        forward, backward = _ops_within(rf.name), _ops_within(rf.bwd_name)
        assert "If" in forward and "FakeParam" in forward
        assert not _OPTIONAL_OPS & set(forward + backward), sorted(_OPTIONAL_OPS & set(forward + backward))
        assert "JanusInvokeGrad" in backward


def test_a_leafs_word_is_unwrapped_and_narrowed_by_one_op_each():
    before = set(recursion_grad.registry)
    rng = np.random.default_rng(15)
    run_differential(tree_program(train=False), [([random_tree(rng, 6)],) for _ in range(5)], min_graph_calls=2)
    built = [rf for rf in _tree_functions() if rf.name not in before]
    assert built, "no recursive function was built"
    for rf in built:
        forward = _ops_within(rf.name)
        assert "JanusUnwrap" in forward and "JanusNarrowInt32" in forward, sorted(set(forward))
        assert "Unpack" not in forward and "JanusAssert" not in forward, sorted(set(forward))


class _WordSum:
    """A leaf's word enters the math as a number: eager makes an int64 tensor of a word past int32."""

    def __init__(self) -> None:
        self.scale = tf.Variable(tf.constant(0.5, tf.float64))

    def encode(self, node):
        if node.is_leaf:
            return tf.reduce_sum(tf.cast([node.word], tf.float64)) * self.scale
        return self.encode(node.left) + tf.tanh(self.encode(node.right))


def test_a_leaf_without_a_word_or_with_one_past_int32_gets_eagers_answer():
    def make():
        model = _WordSum()

        def step(tree):
            with tf.GradientTape() as tape:
                y = model.encode(tree)
            return y, tape.gradient(y, model.scale)

        return step, lambda: model.scale.numpy()

    rng = np.random.default_rng(16)
    trees = [random_tree(rng, 7) for _ in range(9)]
    huge, missing = trees[5], trees[7]
    while not huge.is_leaf:  # the leftmost leaf: its value reaches the result without a tanh
        huge = huge.left
    while not missing.is_leaf:
        missing = missing.left
    huge.word, missing.word = 2**40 + 3, None  # int64 in eager; a TypeError-like error in eager
    jitted = run_differential(make, [(t,) for t in trees], min_graph_calls=3)
    assert jitted is not None


@pytest.mark.parametrize("portable", [False, True], ids=["janus_ops", "portable"])
def test_the_checks_that_compute_their_value_give_it_or_fail_with_their_assumption(portable):
    """``janus_unwrap`` / ``janus_narrow_int32``, as janus's ops and as the portable form ``janus.export`` uses."""
    form = assert_op.portable_asserts if portable else contextlib.nullcontext

    @tf.function(autograph=False)
    def unwrap(pair):
        with form():
            return assert_op.janus_unwrap(pair, 71)[0]

    @tf.function(autograph=False)
    def narrow(x):
        with form():
            return assert_op.janus_narrow_int32(x, 72)[0]

    assert unwrap(tf.constant([1, -5], tf.int64)).numpy() == -5
    assert unwrap(tf.constant([1.0, 2.5], tf.float64)).numpy() == 2.5
    got = narrow(tf.constant([-(2**31), 2**31 - 1], tf.int64))
    assert got.dtype == tf.int32 and got.numpy().tolist() == [-(2**31), 2**31 - 1]
    for run, bad, assumption in (
        (unwrap, tf.constant([0, 3], tf.int64), 71),
        (narrow, tf.constant([2**31], tf.int64), 72),
    ):
        with pytest.raises(tf.errors.OpError) as failed:
            run(bad)
        if portable:
            assert assert_op.PORTABLE_MESSAGE in failed.value.message
        else:
            assert assert_op.failed_assumption_id(failed.value) == assumption


def test_heap_reads_finish_while_a_python_thread_keeps_the_interpreter_busy():
    stop = threading.Event()

    def busy() -> None:
        count = 0
        while not stop.is_set():
            count += 1  # pure Python: holds the GIL but for the interpreter's switch interval

    spinner = threading.Thread(target=busy, daemon=True)
    outcome: dict = {}

    def run() -> None:
        rng = np.random.default_rng(12)
        try:
            run_differential(tree_program(train=False), [([random_tree(rng, 12)],) for _ in range(6)],
                             min_graph_calls=2)  # fmt: skip
        except BaseException as err:  # reported on the test's thread
            outcome["error"] = err
        outcome["done"] = True

    spinner.start()
    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(timeout=300)
    stop.set()
    spinner.join(timeout=10)
    assert outcome.get("done"), f"the calls did not finish in {time.monotonic() - started:.0f} s"
    if "error" in outcome:
        raise outcome["error"]


def test_a_users_tf_function_differentiating_a_cond_on_another_thread_keeps_working_during_builds():
    """The plain-intermediates form is this thread's build only: TF's own switch is process-wide."""
    stop = threading.Event()
    failures: list[str] = []
    built = [0]
    scale = tf.Variable(tf.constant([1.0, -2.0, 0.5], tf.float64))

    def users_thread() -> None:
        while not stop.is_set():

            @tf.function
            def grad_of_cond(x):
                with tf.GradientTape() as tape:
                    y = tf.cond(
                        tf.reduce_sum(x * scale) > 0, lambda: tf.sin(x * scale) * x, lambda: tf.square(x * scale)
                    )
                return tape.gradient(y, scale)

            try:
                got = grad_of_cond(tf.constant([0.3, 0.1, 2.0], tf.float64))
                want = tf.cos(tf.constant([0.3, 0.1, 2.0], tf.float64) * scale) * tf.constant(
                    [0.09, 0.01, 4.0], tf.float64
                )
                np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
                built[0] += 1
            except Exception as err:  # noqa: BLE001 - reported by the test
                failures.append(f"{type(err).__name__}: {str(err)[:200]}")

    other = threading.Thread(target=users_thread, daemon=True)
    tf_logger, level = tf.get_logger(), tf.get_logger().level
    tf_logger.setLevel("ERROR")  # the user's thread retraces on purpose; its warnings are not the calls'
    other.start()
    try:
        rng = np.random.default_rng(14)
        for _ in range(3):  # a new model each time: each builds its recursive functions again
            run_differential(tree_program(train=False), [([random_tree(rng, 7)],) for _ in range(4)], min_graph_calls=1)
    finally:
        stop.set()
        other.join(timeout=60)
        tf_logger.setLevel(level)
    assert built[0] > 0
    assert not failures, failures[:3]
    assert context.optionals_in_gradients_enabled()
