"""Heap writes and recursive invocations keep program order (janus/graphgen/context.py).

A recursive function's invocation reads tree nodes from its own graph function, off the token
chain that orders the caller's heap reads and writes. A write after an invocation must not be seen
by it (eager's recursion finished before the write), and an invocation after a write must see it.
Each program runs eagerly and under janus on its own copy of the same trees, compared after every
call (results and every node's fields), with graphs serving the calls. (A breaker found the first
case: ``a = encode(tree); tree.left.word = ...`` gave the new word's embedding in 296 of 300 calls.)
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same_call, outcome
from test_recursion import random_tree

import janus


def _nodes(tree) -> list:
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        stack += [] if node.left is None else [node.right, node.left]
    return out


def _program(mutate):
    emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float64) / 10.0, [20, 2]))

    def enc(node):
        if node.is_leaf:
            return tf.nn.embedding_lookup(emb, [node.word])
        return enc(node.left) * 2.0 + enc(node.right)

    return lambda arg: mutate(arg, enc)


def _differential(mutate, seed: int, calls: int = 9) -> None:
    rng = np.random.default_rng(seed)
    trees = [random_tree(rng, int(rng.integers(3, 9))) for _ in range(calls)]
    for tree in trees:
        for node in _nodes(tree):
            node.word = 7 if node.word is None else node.word
    eager_trees, jit_trees = copy.deepcopy(trees), copy.deepcopy(trees)
    eager, jitted = _program(mutate), janus.jit(_program(mutate))

    def fields(ts):
        return [[(n.word, n.is_leaf) for n in _nodes(t)] for t in ts]

    for i in range(calls):
        assert_same_call(
            i,
            outcome(eager, (eager_trees[i],)),
            outcome(jitted, (jit_trees[i],)),
            lambda: fields(eager_trees),
            lambda: fields(jit_trees),
        )
    assert janus.stats(jitted)["graph_calls"] >= 2, janus.explain(jitted)


def test_a_write_after_the_recursion_is_not_seen_by_it():
    def mutate(tree, enc):
        a = enc(tree)
        tree.left.word = (tree.left.word + 3) % 20
        tree.right.word = (tree.right.word + 5) % 20
        return a

    _differential(mutate, 51)


def test_a_write_between_two_recursions_is_seen_by_the_second_only():
    def mutate(tree, enc):
        a = enc(tree)
        tree.left.word = (tree.left.word + 3) % 20
        return a, enc(tree)

    _differential(mutate, 50)


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel_calls", "chained_calls"])
def test_writes_after_sibling_recursions_then_a_recursion_over_both(parallel, monkeypatch):
    monkeypatch.setattr(janus.config, "parallel_calls", parallel)

    def mutate(tree, enc):
        a, b = enc(tree.left), enc(tree.right)
        tree.left.word = (tree.left.word + 3) % 20
        tree.right.word = (tree.right.word + 7) % 20
        return a, b, enc(tree)

    _differential(mutate, 54)


def test_a_write_before_the_recursion_of_a_sibling_is_seen_by_it():
    def mutate(tree, enc):
        tree.right.word = (tree.left.word + 1) % 20
        return enc(tree.left), enc(tree.right), enc(tree)

    _differential(mutate, 53)


def test_a_write_under_a_python_condition_after_the_recursion():
    def mutate(tree, enc):
        a = enc(tree)
        if tree.left.word > 5:
            tree.left.word = (tree.left.word + 3) % 20
        return a

    _differential(mutate, 60)


def _batch_differential(step, seed: int, batch_trees: bool, monkeypatch, calls: int = 12) -> None:
    """``step(batch, enc)`` over batches passed by pointer: each loop iteration is a region (a
    ``tf.cond``) of its own, whose heap ops are off the enclosing graph's token chain."""
    monkeypatch.setattr(janus.config, "batch_trees", batch_trees)
    rng = np.random.default_rng(seed)
    batches = [
        [random_tree(rng, int(rng.integers(1, 8))) for _ in range(int(rng.integers(2, 5)))] for _ in range(calls)
    ]
    for batch in batches:
        for tree in batch:
            for node in _nodes(tree):
                node.word = 7 if node.word is None else node.word
    eager_batches, jit_batches = copy.deepcopy(batches), copy.deepcopy(batches)
    eager, jitted = _program(step), janus.jit(_program(step))

    def fields(bs):
        return [[[(n.word, n.is_leaf) for n in _nodes(t)] for t in b] for b in bs]

    for i in range(calls):
        assert_same_call(
            i,
            outcome(eager, (eager_batches[i],)),
            outcome(jitted, (jit_batches[i],)),
            lambda: fields(eager_batches),
            lambda: fields(jit_batches),
        )
    assert janus.stats(jitted)["graph_calls"] >= 4, janus.explain(jitted)


@pytest.mark.parametrize("batch_trees", [False, True], ids=["invoked", "batched"])
def test_children_swapped_in_one_loop_are_seen_by_the_next(batch_trees, monkeypatch):
    """A breaker found it: the second loop's invocations raced the first loop's writes (about one
    call in eight wrong), as the regions' heap ops were ordered only within each region."""

    def step(batch, enc):
        for t in batch:
            if not t.is_leaf:
                t.left, t.right = t.right, t.left
        total = tf.zeros([1, 2], tf.float64)
        for t in batch:
            total += enc(t)
        return total

    _batch_differential(step, 70, batch_trees, monkeypatch)


@pytest.mark.parametrize("batch_trees", [False, True], ids=["invoked", "batched"])
def test_words_written_between_two_loops_of_recursions(batch_trees, monkeypatch):
    """The first loop's invocations must not see the writes after it; the last loop's must."""

    def step(batch, enc):
        total = tf.zeros([1, 2], tf.float64)
        for t in batch:
            total += enc(t)
        for t in batch:
            if t.is_leaf:
                t.word = (t.word + 1) % 20
        for t in batch:
            total += 3.0 * enc(t)
        return total

    _batch_differential(step, 71, batch_trees, monkeypatch)


def _bump(node):
    """A recursion that writes every node and returns nothing."""
    node.word = (node.word + 1) % 20
    if not node.is_leaf:
        _bump(node.left)
        _bump(node.right)


def _bump_count(node):
    """The same, returning a tensor its callers may leave unused."""
    node.word = (node.word + 1) % 20
    if node.is_leaf:
        return tf.constant(1)
    return _bump_count(node.left) + _bump_count(node.right)


@pytest.mark.parametrize(
    "step",
    [
        lambda tree: (_bump(tree), tf.constant(0))[1],
        lambda tree: (_bump_count(tree), tf.constant(0))[1],
        lambda tree: (_bump(tree), tf.constant(tree.word))[1],
        lambda tree: _bump_count(tree) * 2,
    ],
    ids=["returns_nothing", "result_unused", "then_the_root_read", "result_used"],
)
def test_a_recursion_that_writes_runs_and_its_writes_are_seen(step):
    """A breaker found an invocation whose result was unused never run (its writes lost), and a read
    after one not seeing its writes: invocations only read, janus assumed."""
    rng = np.random.default_rng(72)
    trees = [random_tree(rng, int(rng.integers(1, 8))) for _ in range(10)]
    for tree in trees:
        for node in _nodes(tree):
            node.word = 7 if node.word is None else node.word
    eager_trees, jit_trees = copy.deepcopy(trees), copy.deepcopy(trees)
    jitted = janus.jit(step)

    def fields(ts):
        return [[(n.word, n.is_leaf) for n in _nodes(t)] for t in ts]

    for i in range(len(trees)):
        assert_same_call(
            i, outcome(step, (eager_trees[i],)), outcome(jitted, (jit_trees[i],)),
            lambda: fields(eager_trees), lambda: fields(jit_trees),
        )  # fmt: skip
    assert janus.stats(jitted)["graph_calls"] >= 4, janus.explain(jitted)


def _waits_for(op, target) -> bool:
    """Whether ``op`` runs after ``target`` (a data or control path from it)."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        for parent in [t.op for t in current.inputs] + list(current.control_inputs):
            if parent is target:
                return True
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return False


def test_a_write_in_a_nested_tensor_branch_is_seen_by_the_next_recursion():
    """A breaker found it: ``if not t.is_leaf: if tf.reduce_sum(h) > 0: t.right.label += 1``, then
    ``enc(t)``. The inner branch's write made the outer branch a region with heap ops only through
    the region nested in it, which the outer graph's order did not count: the second recursion
    waited for the reads before the ``if``, not for it, and raced its write (about one call in ten
    wrong on this machine). Checked on the graph, as a race may pass by chance."""

    def mutate(tree, enc):
        h = enc(tree)
        if not tree.is_leaf:  # noqa: SIM102 (a run-time test, then a tensor one)
            if tf.reduce_sum(h) > 3.0:
                tree.right.word = (tree.right.word + 3) % 20
        return h + enc(tree)

    def step(tree):
        return mutate(tree, enc)

    emb = tf.Variable(tf.reshape(tf.range(40, dtype=tf.float64) / 10.0, [20, 2]))

    def enc(node):
        if node.is_leaf:
            return tf.nn.embedding_lookup(emb, [node.word])
        return enc(node.left) * 2.0 + enc(node.right)

    _differential(mutate, 72, calls=14)
    jitted = janus.jit(step)
    rng = np.random.default_rng(73)
    for size in (1, 5, 3, 1, 6, 4, 2, 7):
        tree = random_tree(rng, size)
        for node in _nodes(tree):
            node.word = 7 if node.word is None else node.word
        jitted(tree)
    assert janus.stats(jitted)["graph_calls"] >= 2, janus.explain(jitted)
    graph = jitted.cache.entries[0].graph.concrete.graph
    invokes = [op for op in graph.get_operations() if op.type == "JanusInvoke"]
    branch = next(op for op in graph.get_operations() if op.type in ("If", "StatelessIf"))
    assert len(invokes) == 2 and _waits_for(invokes[1], branch)
