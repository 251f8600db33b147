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

``forward_backward`` times the same chain with a weight read at every node and its gradient taken
(``tape.gradient`` inside the timed function): a node's cost forward and backward, eager and janus.

``executor_bound`` shows what bounds janus on the tree models (issue #19): TensorFlow's executor
spends a roughly fixed time on every node it runs, however small the kernel, so a tree node costs
at least (graph nodes run for it) × (cost of one executor node). It measures the cost of one
node (a ``tf.function`` running a chain of ``Tanh`` on a [1, 64] tensor, long minus short), counts
the nodes janus's recursive functions for TreeRNN and TreeLSTM run for a leaf and for an inner
node, forward and backward (their FunctionDefs pruned as TF prunes them, with the ``_Arg`` and
``_Retval`` nodes of the function and of the branch its ``if`` takes), and sets the product
against the measured time per tree node of a training step under janus.

``function_runs`` measures what one function run costs, the likely floor under a tree node's
four (its ``JanusInvoke`` and the ``If`` in its body, forward and backward): chains of 20 and 420
calls of an ``_Arg``-to-``_Retval`` function, long minus short, each call waiting for the one
before, through ``JanusInvoke``, through TF's own function-call op (a ``tf.function`` marked
``_noinline``, so that TF does not inline it), and through an ``If`` left as a function
call (``_lower_using_switch_merge`` off), against a chain of ``Tanh``.

``executor_effect`` times TreeRNN and TreeLSTM training and the chain forward and backward with
the recursive functions under TF's single-threaded executor (janus's default: a recursion runs inline
on one thread) and under TF's default executor, interleaved (``config.single_threaded_recursion``).

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
from tensorflow.python.eager import context
from tensorflow.python.framework import op_def_registry

import janus
from benchmarks import ablation, table3
from benchmarks.harness import measure, write_json

DEPTH = 200


class Node:
    def __init__(self, left: Node | None = None) -> None:
        self.left = left
        self.is_leaf = left is None


# What the per-node measurements below run under: one invocation a tree node (no level batching).
PER_NODE = {"batch_trees": False}


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


def weighted_depth(node: Node, w: tf.Variable) -> tf.Tensor:
    if node.is_leaf:
        return w * 1.0
    return weighted_depth(node.left, w) * 0.5 + w


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
        "forward_backward": forward_backward(quick),
        "parallel_subtrees": parallel_subtrees(quick),
        "executor_bound": executor_bound(quick),
        "trim_effect": trim_effect(quick),
        "executor_effect": executor_effect(quick),
        "function_runs": function_runs(quick),
        "batching_effect": batching_effect(quick),
    }


def forward_backward(quick: bool = False) -> dict:
    """Microseconds per node of the chain, forward and backward (a weight read at every node)."""
    depth = 50 if quick else DEPTH
    w = tf.Variable([[0.5]])
    trees = [chain(depth), chain(depth)]

    def step(tree: Node) -> tf.Tensor:
        with tf.GradientTape() as tape:
            y = weighted_depth(tree, w)
        return tape.gradient(y, w)

    jit_step = janus.jit(step)
    variants = {"eager": lambda: step(trees[0]), "janus": lambda: jit_step(trees[1])}
    expected = float(step(trees[0])[0, 0])
    for run in variants.values():
        for _ in range(janus.config.profile_calls + 1):
            assert abs(float(run()[0, 0]) - expected) <= 1e-5 * abs(expected)
    m = measure("recursion_forward_backward", variants, unit="us/node", warmup=2, repeats=5 if quick else 9, steps=3)
    graph_calls = janus.stats(jit_step)["graph_calls"]
    assert graph_calls > 0
    per_node = {k: v / depth * 1e6 for k, v in m.per_step.items()}
    return {"depth": depth, "us_per_node": per_node, "eager_over_janus": per_node["eager"] / per_node["janus"]}


def executor_node_us(quick: bool = False) -> float:
    """Microseconds TensorFlow's executor spends on one small node (a chain of ``Tanh``, long minus short)."""
    short, long = 20, 220 if quick else 420

    def tanh_chain(n: int):
        @tf.function
        def run(x):
            for _ in range(n):
                x = tf.tanh(x)
            return x

        return run

    x = tf.ones([1, 64])
    runs = {"short": tanh_chain(short), "long": tanh_chain(long)}
    m = measure("executor_node", {k: (lambda f=f: f(x)) for k, f in runs.items()}, unit="us", repeats=9, steps=20)
    return (m.per_step["long"] - m.per_step["short"]) / (long - short) * 1e6


def executor_bound(quick: bool = False) -> dict:
    """Per tree model: graph nodes run per tree node, their executor cost, and the measured cost."""
    node_us = executor_node_us(quick)
    models = {}
    for name in ("treernn", "treelstm"):
        mod = table3.module(name)
        program = mod.build(quick, 0)
        recorder = table3._Recorder()
        step = ablation._under(PER_NODE, mod.imperative(program, recorder))
        for _ in range(janus.config.profile_calls + 2):
            float(step())
        assert recorder.total("graph_calls") > 0
        counts = _nodes_run_per_tree_node()
        times = []
        for _ in range(3 if quick else 7):
            start = time.perf_counter()
            float(step())
            times.append(time.perf_counter() - start)
        tree_nodes = statistics.mean(sum(_size(t) for t in b) for b in program.batches)
        leaves = statistics.mean(sum(_leaves(t) for t in b) for b in program.batches)
        inner = tree_nodes - leaves
        nodes_per_tree_node = (
            leaves * (counts["forward"]["leaf"] + counts["backward"]["leaf"])
            + inner * (counts["forward"]["inner"] + counts["backward"]["inner"])
        ) / tree_nodes
        models[name] = {
            "trees_per_batch": len(program.batches[0]),
            "tree_nodes_per_batch": tree_nodes,
            "graph_nodes_run": counts,
            "graph_nodes_per_tree_node": nodes_per_tree_node,
            "executor_us_per_tree_node": nodes_per_tree_node * node_us,
            "measured_us_per_tree_node": statistics.median(times) / tree_nodes * 1e6,
        }
    return {"executor_node_us": node_us, "models": models}


def trim_effect(quick: bool = False) -> dict:
    """Per tree model: graph nodes a tree node and ms a batch with forwarding nodes trimmed and not (interleaved).

    ``janus.config.trim_functions`` drops the ``Identity``/``NoOp`` nodes of the recursive
    functions; the time saved per node removed says what such a node costs the executor.
    """
    models = {}
    for name in ("treernn", "treelstm"):
        mod = table3.module(name)
        program = mod.build(quick, 0)
        tree_nodes = statistics.mean(sum(_size(t) for t in b) for b in program.batches)
        leaves = statistics.mean(sum(_leaves(t) for t in b) for b in program.batches)
        steps, nodes = {}, {}
        for trim in (True, False):
            recorder = table3._Recorder()
            prog = program if trim else mod.build(quick, 0)
            step = ablation._under(PER_NODE | {"trim_functions": trim}, mod.imperative(prog, recorder))
            for _ in range(janus.config.profile_calls + 2):
                float(step())
            assert recorder.total("graph_calls") > 0
            counts = _nodes_run_per_tree_node()
            per_leaf = counts["forward"]["leaf"] + counts["backward"]["leaf"]
            per_inner = counts["forward"]["inner"] + counts["backward"]["inner"]
            nodes[trim] = (leaves * per_leaf + (tree_nodes - leaves) * per_inner) / tree_nodes
            steps["trimmed" if trim else "untrimmed"] = lambda step=step: float(step())
        m = measure(f"trim_{name}", steps, unit="ms", warmup=2, repeats=3 if quick else 9, steps=2)
        saved_us = (m.per_step["untrimmed"] - m.per_step["trimmed"]) / tree_nodes * 1e6
        models[name] = {
            "graph_nodes_per_tree_node": {"trimmed": nodes[True], "untrimmed": nodes[False]},
            "ms_per_batch": {k: v * 1e3 for k, v in m.per_step.items()},
            "us_saved_per_node_removed": saved_us / max(nodes[False] - nodes[True], 1e-9),
        }
    return models


def batching_effect(quick: bool = False) -> dict:
    """Per tree model: janus's ms a batch with the batch loop's recursive calls run level by level,
    all trees at once (``janus.config.batch_trees``), and invoked node by node, interleaved."""
    result = {}
    for name in ("treernn", "treelstm"):
        mod = table3.module(name)
        steps = {}
        for label, on in (("per_node", False), ("batched", True)):
            recorder = table3._Recorder()
            step = ablation._under({"batch_trees": on}, mod.imperative(mod.build(quick, 0), recorder))
            for _ in range(janus.config.profile_calls + 2):
                float(step())
            assert recorder.total("graph_calls") > 0
            steps[label] = lambda step=step: float(step())
        m = measure(f"batching_{name}", steps, unit="ms", warmup=2, repeats=3 if quick else 11, steps=3)
        result[name] = {
            "ms_per_batch": {k: v * 1e3 for k, v in m.per_step.items()},
            "speedup": m.per_step["per_node"] / m.per_step["batched"],
        }
    return result


def executor_effect(quick: bool = False) -> dict:
    """Per tree model and for the chain: janus with its recursive functions under TF's single-threaded
    executor and under the default one (``janus.config.single_threaded_recursion``), interleaved.

    The tree models report ms a batch and the process's CPU seconds a wall second; the chain reports
    µs a node, forward and backward.
    """
    result = {}
    settings = {"single_threaded": True, "default": False}
    for name in ("treernn", "treelstm"):
        mod = table3.module(name)
        steps, recorders = {}, []
        for label, on in settings.items():
            recorder = table3._Recorder()
            setting = PER_NODE | {"single_threaded_recursion": on}
            step = ablation._under(setting, mod.imperative(mod.build(quick, 0), recorder))
            for _ in range(janus.config.profile_calls + 2):
                float(step())
            assert recorder.total("graph_calls") > 0
            recorders.append(recorder)
            steps[label] = _CpuTimed(lambda step=step: float(step()))
        m = measure(f"executor_{name}", steps, unit="ms", warmup=2, repeats=3 if quick else 9, steps=2)
        result[name] = {
            "ms_per_batch": {k: v * 1e3 for k, v in m.per_step.items()},
            "cpu_seconds_per_wall_second": {k: steps[k].cpu_per_wall() for k in steps},
        }
    depth = 50 if quick else DEPTH
    w = tf.Variable([[0.5]])
    tree = chain(depth)

    def step(node: Node) -> tf.Tensor:
        with tf.GradientTape() as tape:
            y = weighted_depth(node, w)
        return tape.gradient(y, w)

    variants = {}
    for label, on in settings.items():
        jitted = janus.jit(step)
        run = ablation._under({"single_threaded_recursion": on}, lambda jitted=jitted: jitted(tree))
        for _ in range(janus.config.profile_calls + 1):
            run()
        assert janus.stats(jitted)["graph_calls"] > 0
        variants[label] = run
    m = measure("executor_chain", variants, unit="us/node", warmup=2, repeats=5 if quick else 9, steps=3)
    result["chain_forward_backward_us_per_node"] = {k: v / depth * 1e6 for k, v in m.per_step.items()}
    return result


class _CpuTimed:
    """Wraps a step: calls it, and sums the process's CPU seconds and the wall seconds it took."""

    def __init__(self, step) -> None:
        self.step, self.cpu, self.wall = step, 0.0, 0.0

    def __call__(self):
        wall, cpu = time.perf_counter(), time.process_time()
        out = self.step()
        self.cpu += time.process_time() - cpu
        self.wall += time.perf_counter() - wall
        return out

    def cpu_per_wall(self) -> float:
        return self.cpu / self.wall if self.wall else 0.0


def function_runs(quick: bool = False) -> dict:
    """Microseconds per call in a chain of calls of a function that returns its argument, by kind of call."""
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.eager.polymorphic_function import atomic_function
    from tensorflow.python.framework import func_graph as func_graph_module

    from janus.graphgen import recursion_grad
    from janus.ops.assert_op import _ops

    short, long = 20, 220 if quick else 420
    x, pred = tf.ones([1, 64]), tf.constant(True)
    specs = [tf.TensorSpec([], tf.int64), tf.TensorSpec([1, 64], tf.float32)]  # a JanusInvoke callee: budget, x
    name = "janus_bench_returns_argument"
    graph = func_graph_module.func_graph_from_py_func(
        name, lambda budget, x: x, specs, {}, func_graph=func_graph_module.FuncGraph(name)
    )
    callee = atomic_function.from_func_graph(name, graph, {})
    budget = tf.constant(10**9, tf.int64)
    returns_argument = tf.function(lambda x: x, autograph=False, experimental_attributes={"_noinline": True})

    def invoke(x):
        recursion_grad.add_to_graphs(callee)
        (y,), _frame = _ops().janus_invoke(
            budget, [x], Tout=[tf.float32], output_shapes=[[1, 64]], f=name, depth_assumption=0
        )
        return y

    def if_call(x):
        y = tf.cond(pred, lambda: x, lambda: x * 2.0)
        op = y.op if y.op.type in ("If", "StatelessIf") else y.op.inputs[0].op  # cond_v2 returns an Identity of it
        op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))  # noqa: SLF001
        return y

    kinds = {"janus_invoke": invoke, "tf_call": returns_argument, "if_call": if_call, "tanh": tf.tanh}

    def chain(call, n: int):
        @tf.function(autograph=False)
        def run(x):
            for _ in range(n):
                x = call(x)
            return x

        return lambda: run(x)

    variants = {f"{kind}_{n}": chain(call, n) for kind, call in kinds.items() for n in (short, long)}
    m = measure("function_runs", variants, unit="us", warmup=2, repeats=5 if quick else 9, steps=10)
    return {
        kind: (m.per_step[f"{kind}_{long}"] - m.per_step[f"{kind}_{short}"]) / (long - short) * 1e6 for kind in kinds
    }


def _size(node) -> int:
    return 1 if node.is_leaf else 1 + _size(node.left) + _size(node.right)


def _leaves(node) -> int:
    return 1 if node.is_leaf else _leaves(node.left) + _leaves(node.right)


def _nodes_run_per_tree_node() -> dict:
    """Graph nodes the newest recursive function runs for a leaf and for an inner node, forward and backward.

    Counts a function's nodes as TF's pruning keeps them (reached back from its outputs, its control
    outputs and its stateful nodes), plus an ``_Arg`` per input and a ``_Retval`` per output; an
    ``If`` adds the nodes of the branch taken: the one that invokes the function again for an inner
    node, the other for a leaf.
    """
    from janus.graphgen import recursion_grad

    rf = list(recursion_grad.registry.values())[-1]
    ctx = context.context()
    counts = {}
    for direction, name in (("forward", rf.name), ("backward", rf.bwd_name)):
        fdef = ctx.get_function_def(name)
        base, branches = _count(fdef), []
        for node in fdef.node_def:
            if node.op in ("If", "StatelessIf"):
                base -= 1
                pair = [ctx.get_function_def(node.attr[b].func.name) for b in ("then_branch", "else_branch")]
                branches = sorted(pair, key=lambda f: any(n.op.startswith("JanusInvoke") for n in f.node_def))
        leaf, inner = (_count(branches[0]), _count(branches[1])) if branches else (0, 0)
        counts[direction] = {"leaf": base + leaf, "inner": base + inner}
    return counts


def _count(fdef) -> int:
    nodes = {n.name: n for n in fdef.node_def}

    def stateful(n) -> bool:
        op = op_def_registry.get(n.op)
        return op is None or op.is_stateful

    todo = [ref.split(":", 1)[0] for ref in fdef.ret.values()] + list(fdef.control_ret.values())
    todo += [n.name for n in fdef.node_def if stateful(n)]
    kept: set[str] = set()
    while todo:
        name = todo.pop()
        if name in kept or name not in nodes:
            continue
        kept.add(name)
        todo += [i.lstrip("^").split(":", 1)[0] for i in nodes[name].input]
    return len(kept) + len(fdef.signature.input_arg) + len(fdef.signature.output_arg)


def parallel_subtrees(quick: bool = False) -> dict:
    """TreeRNN under janus, subtrees invoked in parallel vs chained: ms per batch and cores used."""
    mod = table3.module("treernn")
    steps = {}
    for parallel in (True, False):
        program = mod.build(quick, 0)
        recorder = table3._Recorder()
        steps[parallel] = ablation._under(PER_NODE | {"parallel_calls": parallel}, mod.imperative(program, recorder))
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
