"""[perf] #19: janus's recursive functions run without the nodes that only forward a tensor, and answer as before."""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from google.protobuf import text_format
from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.python.eager import context
from tensorflow.python.ops import gen_functional_ops
from test_recursion import Node, random_tree, tree_program

import janus
from janus.graphgen import function_trim, recursion_grad


def _fdef(body: str) -> function_pb2.FunctionDef:
    return text_format.Parse(body, function_pb2.FunctionDef())


_SIGNATURE = """
signature {
  name: "f"
  input_arg { name: "x" type: DT_FLOAT }
  input_arg { name: "v" type: DT_RESOURCE }
  output_arg { name: "y" type: DT_FLOAT }
  output_arg { name: "z" type: DT_FLOAT }
}
"""


def _node(name: str, op: str, *inputs: str, dtype: bool = True) -> str:
    refs = "".join(f' input: "{i}"' for i in inputs)
    attr = ' attr { key: "T" value { type: DT_FLOAT } }' if dtype else ""
    return f'node_def {{ name: "{name}" op: "{op}"{refs}{attr} }}'


def _names(fdef: function_pb2.FunctionDef) -> set[str]:
    return {n.name for n in fdef.node_def}


def test_an_identity_is_bypassed_for_nodes_and_outputs_and_dropped():
    fdef = _fdef(
        _SIGNATURE
        + _node("t", "Tanh", "x")
        + _node("i", "Identity", "t:y:0")
        + _node("u", "Tanh", "i:output:0")
        + _node("dead", "Tanh", "x")
        + 'ret { key: "y" value: "i:output:0" } ret { key: "z" value: "u:y:0" }'
    )
    out = function_trim.trim(fdef)
    assert _names(out) == {"t", "u"}
    assert dict(out.ret) == {"y": "t:y:0", "z": "u:y:0"}
    assert list(next(n for n in out.node_def if n.name == "u").input) == ["t:y:0"]


def test_an_identity_that_waits_is_bypassed_only_where_outputs_read_it():
    waits_for_outputs = _fdef(
        _SIGNATURE
        + _node("w", "AssignVariableOp", "v", "x", dtype=False)
        + _node("n", "NoOp", "^w", dtype=False)
        + _node("i", "Identity", "x", "^n")
        + _node("t", "Tanh", "x")
        + _node("j", "Identity", "t:y:0", "^n")
        + 'ret { key: "y" value: "j:output:0" } ret { key: "z" value: "t:y:0" }'
        + 'control_ret { key: "w" value: "w" }'
    )
    out = function_trim.trim(waits_for_outputs)
    # j is bypassed (an output waits for the whole body anyway), the NoOp goes with it; the
    # stateful update stays though nothing reads it.
    assert _names(out) == {"w", "t"}
    assert dict(out.ret) == {"y": "t:y:0", "z": "t:y:0"}

    waits_for_a_node = _fdef(
        _SIGNATURE
        + _node("w", "AssignVariableOp", "v", "x", dtype=False)
        + _node("t", "Tanh", "x")
        + _node("j", "Identity", "t:y:0", "^w")
        + _node("u", "Tanh", "j:output:0")
        + 'ret { key: "y" value: "u:y:0" } ret { key: "z" value: "t:y:0" }'
    )
    assert function_trim.trim(waits_for_a_node) is None


def test_a_stateful_node_nothing_reads_stays():
    fdef = _fdef(
        _SIGNATURE
        + _node("w", "AssignVariableOp", "v", "x", dtype=False)
        + _node("t", "Tanh", "x")
        + 'ret { key: "y" value: "t:y:0" } ret { key: "z" value: "t:y:0" }'
    )
    assert function_trim.trim(fdef) is None


def test_what_a_bypassed_identity_waited_for_still_runs():
    """Its control inputs that nothing else keeps become control outputs.

    A ``tf.gather`` kept only as a check under ``tf.control_dependencies`` must still run."""
    fdef = _fdef(
        _SIGNATURE
        + _node("g", "GatherV2", "x", "x", "x")
        + _node("n", "NoOp", "^g", dtype=False)
        + _node("t", "Tanh", "x")
        + _node("j", "Identity", "t:y:0", "^n")
        + _node("w", "AssignVariableOp", "v", "x", dtype=False)
        + _node("k", "Identity", "t:y:0", "^w")
        + 'ret { key: "y" value: "j:output:0" } ret { key: "z" value: "k:output:0" }'
    )
    out = function_trim.trim(fdef)
    assert _names(out) == {"g", "n", "t", "w"}
    assert dict(out.control_ret) == {"n": "n"} and list(out.signature.control_output) == ["n"]


def test_an_identity_waited_for_or_returning_an_argument_stays():
    fdef = _fdef(
        _SIGNATURE
        + _node("i", "Identity", "x")
        + _node("k", "Identity", "x")
        + _node("t", "Tanh", "x", "^k")
        + 'ret { key: "y" value: "i:output:0" } ret { key: "z" value: "t:y:0" }'
    )
    assert function_trim.trim(fdef) is None


def test_a_trimmed_tf_function_answers_and_fails_as_before():
    counter = tf.Variable(0.0)

    @tf.function(autograph=False)
    def f(x):
        check = tf.debugging.assert_less(x, 10.0)  # nothing reads it: only the call waits for it
        counter.assign_add(1.0)
        with tf.control_dependencies([check]):
            y = tf.identity(tf.cond(x > 0, lambda: tf.identity(x * 2.0), lambda: tf.identity(-x)))
        return tf.identity(y), counter.handle

    concrete = f.get_concrete_function(tf.TensorSpec([], tf.float32))
    original = context.context().get_function_def(concrete.function_def.signature.name)
    trimmed = function_trim.trim(original)
    assert trimmed is not None
    count = lambda fdef: sum(n.op == "Identity" for n in fdef.node_def)  # noqa: E731
    assert count(trimmed) < count(original)
    trimmed.signature.name = "janus_test_trimmed_f"
    context.context().add_function_def(trimmed)

    @tf.function(autograph=False)
    def call_trimmed(x):
        return gen_functional_ops.stateful_partitioned_call(
            args=[x, counter.handle],
            Tout=[tf.float32, tf.resource],
            f=attr_value_pb2.NameAttrList(name=trimmed.signature.name),
        )[0]

    for x in (3.0, -2.0):
        assert float(call_trimmed(tf.constant(x))) == float(f(tf.constant(x))[0])
    assert float(counter) == 4.0
    with pytest.raises(tf.errors.InvalidArgumentError):
        call_trimmed(tf.constant(11.0))


def _registered_are_trimmed() -> bool:
    rf = list(recursion_grad.registry.values())[-1]
    todo = [rf.name, rf.bwd_name]
    names = set()
    while todo:
        name = todo.pop()
        if name not in names:
            names.add(name)
            todo += function_trim._branch_functions(context.context().get_function_def(name))  # noqa: SLF001
    return all(function_trim.trim(context.context().get_function_def(n)) is None for n in names)


@pytest.mark.parametrize("trim", [True, False])
def test_recursive_functions_are_trimmed_and_trees_answer_as_eager(trim, monkeypatch):
    monkeypatch.setattr(janus.config, "trim_functions", trim)
    rng = np.random.default_rng(11)
    calls = [([random_tree(rng, int(rng.integers(1, 9))) for _ in range(3)],) for _ in range(7)]
    run_differential(tree_program(train=True), calls, min_graph_calls=3)
    assert _registered_are_trimmed() is trim


def test_a_check_that_fails_inside_a_trimmed_leaf_fails_the_call_and_it_reruns_in_eager():
    """A leaf's word outside int32 breaks the check in the leaf branch, which nothing in the branch reads."""

    def make():
        w = tf.Variable([[0.5]])

        def leaf_sum(node):
            if node.is_leaf:
                return tf.matmul(tf.cast(tf.constant([[node.word]]), tf.float32), w)
            return leaf_sum(node.left) + leaf_sum(node.right)

        def step(tree):
            with tf.GradientTape() as tape:
                y = tf.reduce_sum(leaf_sum(tree))
            return y, tape.gradient(y, w)

        return step, lambda: w.numpy()

    rng = np.random.default_rng(5)
    trees = [random_tree(rng, 6) for _ in range(6)]
    big = Node(left=Node(word=3), right=Node(left=Node(word=2**40), right=Node(word=1)))
    calls = [(t,) for t in trees[:4]] + [(big,)] + [(t,) for t in trees[4:]]
    jitted = run_differential(make, calls, min_graph_calls=3)
    stats = janus.stats(jitted)
    assert stats["assumption_failures"] >= 1, janus.explain(jitted)
    assert _registered_are_trimmed()
