"""[recursion] What one recursive call costs: the floor under janus's tree-model speed-ups.

In TreeRNN/TreeLSTM the arithmetic of a node is tiny (a [1, 2h] x [2h, h] product), so both
eager and janus spend a node's time on overhead: eager on dispatching a node's ops from
Python, janus on one ``JanusInvoke`` (a function-library call scheduled on the inter-op pool)
plus the heap reads of the node's attributes. Their ratio bounds janus ÷ eager on trees,
whatever the model. Three recursions over a linear chain of ``DEPTH`` nodes, forward only,
timed interleaved in one process:

* ``eager``: the recursion run eagerly (``node.is_leaf``, ``node.left``, one add a node);
* ``janus``: the same function under ``janus.jit`` (an invocation and two heap reads a node);
* ``janus_no_heap``: a recursion on a tensor counter under ``janus.jit`` (an invocation a node,
  no heap reads): the bare cost of an invocation.
"""

from __future__ import annotations

import tensorflow as tf

import janus
from benchmarks.harness import measure, write_json

DEPTH = 200


class Node:
    def __init__(self, left: Node | None = None) -> None:
        self.left = left
        self.is_leaf = left is None


def chain(depth: int) -> Node:
    node = Node()
    for _ in range(depth - 1):
        node = Node(node)
    return node


def depth_of(node: Node) -> tf.Tensor:
    if node.is_leaf:
        return tf.constant([[1.0]])
    return depth_of(node.left) + 1.0


def count_down(n: tf.Tensor, acc: tf.Tensor) -> tf.Tensor:
    if n <= 0:
        return acc
    return count_down(n - 1, acc + 1.0)


def recursion_overhead(quick: bool = False) -> dict:
    """Microseconds per node (per recursive call) for eager, janus, and janus without heap reads."""
    depth = 50 if quick else DEPTH
    trees = [chain(depth), chain(depth)]  # two trees: janus's graph serves new trees
    jit_tree = janus.jit(depth_of)
    jit_counter = janus.jit(lambda n: count_down(n, tf.constant([[1.0]])))  # depth calls: n = depth-1 .. 0
    n = tf.constant(depth - 1)
    variants = {
        "eager": lambda: depth_of(trees[0]),
        "janus": lambda: jit_tree(trees[1]),
        "janus_no_heap": lambda: jit_counter(n),
    }
    for step in variants.values():  # profile and build before timing
        for _ in range(janus.config.profile_calls + 1):
            assert float(step()[0, 0]) == depth
    m = measure("recursion_overhead", variants, unit="us/node", warmup=2, repeats=5 if quick else 9, steps=3)
    per_node = {k: v / depth * 1e6 for k, v in m.per_step.items()}
    graph_calls = {
        "janus": janus.stats(jit_tree)["graph_calls"],
        "janus_no_heap": janus.stats(jit_counter)["graph_calls"],
    }
    assert all(c > 0 for c in graph_calls.values()), graph_calls
    return {
        "name": "recursion_overhead",
        "unit": "us/node",
        "depth": depth,
        "us_per_node": per_node,
        "eager_over_janus": per_node["eager"] / per_node["janus"],
        "graph_calls": graph_calls,
    }


def main() -> None:
    result = recursion_overhead()
    print(result)
    print(f"wrote {write_json('recursion_overhead.json', result)}")


if __name__ == "__main__":
    main()
