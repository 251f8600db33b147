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

``parallel_subtrees`` shows what +PARL (independent subtrees invoked in parallel) can gain on
this machine: TreeRNN training under janus with ``config.parallel_calls`` on and off,
interleaved, reporting time per batch and the process's CPU seconds per wall second. When
the chained run already keeps every core busy, parallel invocations have no idle core to use.
"""

from __future__ import annotations

import os
import statistics
import time

import tensorflow as tf

import janus
from benchmarks import ablation, table3
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
        "parallel_subtrees": parallel_subtrees(quick),
    }


def parallel_subtrees(quick: bool = False) -> dict:
    """TreeRNN under janus, subtrees invoked in parallel vs chained: ms per batch and cores used."""
    mod = table3.module("treernn")
    steps = {}
    for parallel in (True, False):
        program = mod.build(quick, 0)
        recorder = table3._Recorder()
        steps[parallel] = ablation._under({"parallel_calls": parallel}, mod.imperative(program, recorder))
        for _ in range(janus.config.profile_calls + 2):
            steps[parallel]()
        assert recorder.total("graph_calls") > 0
    wall: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(3 if quick else 9):
        for parallel, step in steps.items():
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(2):
                float(step())
            wall[parallel].append((time.perf_counter() - w0) / 2)
            cpu[parallel].append((time.process_time() - c0) / 2)
    label = {True: "parallel", False: "chained"}
    return {
        "cores": os.cpu_count(),
        "ms_per_batch": {label[p]: statistics.median(wall[p]) * 1e3 for p in wall},
        "cpu_seconds_per_wall_second": {label[p]: statistics.median(cpu[p]) / statistics.median(wall[p]) for p in wall},
    }


def main() -> None:
    result = recursion_overhead()
    print(result)
    print(f"wrote {write_json('recursion_overhead.json', result)}")


if __name__ == "__main__":
    main()
