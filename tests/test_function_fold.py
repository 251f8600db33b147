"""[perf] #19: janus's recursive functions compute shape arithmetic once, as constants, and answer as before."""

import numpy as np
import pytest
import tensorflow as tf
from differential import run_differential
from google.protobuf import text_format
from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.python.eager import context
from tensorflow.python.framework import tensor_util
from tensorflow.python.ops import gen_functional_ops
from test_recursion import random_tree, tree_program

import janus
from janus.graphgen import function_fold, function_trim, recursion_grad

_SIGNATURE = """
signature {
  name: "f"
  input_arg { name: "x" type: DT_FLOAT }
  output_arg { name: "y" type: DT_FLOAT }
  output_arg { name: "z" type: DT_INT32 }
}
"""


def _const(name: str, value, dtype=None) -> str:
    proto = tensor_util.make_tensor_proto(np.asarray(value, dtype=dtype))
    tensor = text_format.MessageToString(proto, as_one_line=True)
    dtype_attr = f'attr {{ key: "dtype" value {{ type: {proto.dtype} }} }}'
    value_attr = f'attr {{ key: "value" value {{ tensor {{ {tensor} }} }} }}'
    return f'node_def {{ name: "{name}" op: "Const" {dtype_attr} {value_attr} }}'


def _node(name: str, op: str, *inputs: str, **attrs: str) -> str:
    refs = "".join(f' input: "{i}"' for i in inputs)
    body = "".join(f' attr {{ key: "{k}" value {{ {v} }} }}' for k, v in attrs.items())
    return f'node_def {{ name: "{name}" op: "{op}"{refs}{body} }}'


def _fdef(*parts: str) -> function_pb2.FunctionDef:
    return text_format.Parse(_SIGNATURE + "".join(parts), function_pb2.FunctionDef())


def _nodes(fdef: function_pb2.FunctionDef) -> dict:
    return {n.name: n for n in fdef.node_def}


def _value(node) -> np.ndarray:
    return tensor_util.MakeNdarray(node.attr["value"].tensor)


def test_shape_arithmetic_folds_to_constants_and_readers_follow_renamed_outputs():
    fdef = _fdef(
        _const("a", [2, 3], np.int32),
        _const("b", [4], np.int32),
        _const("axis", 0, np.int32),
        _node(
            "cat",
            "ConcatV2",
            "a:output:0",
            "b:output:0",
            "axis:output:0",
            T="type: DT_INT32",
            N="i: 2",
            Tidx="type: DT_INT32",
        ),
        _node("dim", "Const", dtype="type: DT_INT32", value="tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 }"),
        _node(
            "off",
            "ConcatOffset",
            "dim:output:0",
            "a:output:0",
            "a:output:0",
            N="i: 2",
        ),
        _node("r", "Reshape", "x", "cat:output:0", T="type: DT_FLOAT", Tshape="type: DT_INT32"),
        'ret { key: "y" value: "r:output:0" } ret { key: "z" value: "off:offset:1" }',
    )
    assert function_fold.fold_constants(fdef)
    nodes = _nodes(fdef)
    assert nodes["cat"].op == "Const" and list(_value(nodes["cat"])) == [2, 3, 4]
    assert list(nodes["r"].input) == ["x", "cat:output:0"]
    # a list output: one constant per element, the readers renamed
    assert fdef.ret["z"] == "off/folded_1:output:0"
    assert list(_value(nodes["off/folded_1"])) == [0, 3]
    assert "off" not in nodes


def test_a_zero_gradient_fill_folds_whatever_its_type():
    fdef = _fdef(
        _const("shape", [3, 2], np.int32),
        _const("zero", 0.0, np.float32),
        _node("zeros", "Fill", "shape:output:0", "zero:output:0", T="type: DT_FLOAT", index_type="type: DT_INT32"),
        _const("n", [6], np.int32),
        'ret { key: "y" value: "zeros:output:0" } ret { key: "z" value: "n:output:0" }',
    )
    assert function_fold.fold_constants(fdef)
    assert _nodes(fdef)["zeros"].op == "Const"
    assert _value(_nodes(fdef)["zeros"]).shape == (3, 2)


@pytest.mark.parametrize(
    "case",
    [
        "float arithmetic",
        "float to int",
        "waits for a node",
        "waited for",
        "fails as written",
        "too large",
        "reads an argument",
    ],
)
def test_what_does_not_fold(case):
    parts = [_const("one", 1.0, np.float32), _const("s", [2, 3], np.int32), _const("bad", [7], np.int32)]
    if case == "float arithmetic":  # rounding may differ by device: only exact values fold
        parts.append(_node("t", "AddV2", "one:output:0", "one:output:0", T="type: DT_FLOAT"))
    elif case == "float to int":  # NaN or out of range: the device's own answer
        parts.append(_node("t", "Cast", "one:output:0", SrcT="type: DT_FLOAT", DstT="type: DT_INT32"))
    elif case == "waits for a node":
        parts.append(_node("t", "Size", "s:output:0", "^one", T="type: DT_INT32", out_type="type: DT_INT32"))
    elif case == "waited for":
        parts.append(_node("t", "Size", "s:output:0", T="type: DT_INT32", out_type="type: DT_INT32"))
        parts.append(_node("n", "NoOp", "^t"))
        parts.append('control_ret { key: "n" value: "n" }')
    elif case == "fails as written":  # the run fails at the node, as it did before the rewrite
        parts.append(_node("t", "Reshape", "s:output:0", "bad:output:0", T="type: DT_INT32", Tshape="type: DT_INT32"))
    elif case == "too large":
        parts.append(_const("big", [1024, 1024], np.int32))
        parts.append(
            _node("t", "Fill", "big:output:0", "one:output:0", T="type: DT_FLOAT", index_type="type: DT_INT32")
        )
    else:
        parts.append(_node("t", "Shape", "x", T="type: DT_FLOAT", out_type="type: DT_INT32"))
    parts.append('ret { key: "y" value: "x" } ret { key: "z" value: "s:output:0" }')
    fdef = _fdef(*parts)
    assert not function_fold.fold_constants(fdef)
    assert _nodes(fdef)["t"].op != "Const"


def test_each_node_runs_at_most_once_and_large_fills_not_at_all(monkeypatch):
    """Nodes refused after evaluation are not evaluated again after each fold; a Fill over the size
    limit is refused from its shape, before it allocates."""
    runs = []
    evaluate = function_fold._evaluate
    monkeypatch.setattr(
        function_fold, "_evaluate", lambda node, inputs: runs.append(node.name) or evaluate(node, inputs)
    )
    parts = [_const("one", 1.0, np.float32), _const("big", [1 << 16, 1 << 16], np.int32), _const("s", [5], np.int32)]
    parts.append(_node("huge", "Fill", "big:output:0", "one:output:0", T="type: DT_FLOAT", index_type="type: DT_INT32"))
    parts.append(_node("float", "AddV2", "one:output:0", "one:output:0", T="type: DT_FLOAT"))
    parts += [
        _node(
            f"n{i}",
            "Size",
            "s:output:0" if i == 0 else f"n{i - 1}:output:0",
            T="type: DT_INT32",
            out_type="type: DT_INT32",
        )
        for i in range(6)
    ]
    parts.append('ret { key: "y" value: "float:z:0" } ret { key: "z" value: "n5:output:0" }')
    fdef = _fdef(*parts)
    assert function_fold.fold_constants(fdef)
    assert sorted(runs) == sorted(["float"] + [f"n{i}" for i in range(6)])
    assert _nodes(fdef)["n5"].op == "Const" and _nodes(fdef)["huge"].op == "Fill"


def test_a_folded_tf_function_answers_as_before():
    table = tf.Variable(tf.reshape(tf.range(12.0), [4, 3]))

    @tf.function(autograph=False)
    def f(ids):
        # the gradient of a gather and of a concat: shape arithmetic from constants
        with tf.GradientTape() as tape:
            rows = tf.gather(table, ids)
            y = tf.concat([rows, tf.tanh(rows)], axis=1)
            loss = tf.reduce_sum(y * y)
        grad = tape.gradient(loss, table)
        return tf.convert_to_tensor(grad) + tf.zeros([4, 3])

    concrete = f.get_concrete_function(tf.TensorSpec([2], tf.int32))
    original = context.context().get_function_def(concrete.function_def.signature.name)
    trimmed = function_trim.trim(original)
    assert trimmed is not None
    arithmetic = lambda fdef: sum(n.op in ("Fill", "ConcatOffset", "StridedSlice") for n in fdef.node_def)  # noqa: E731
    assert arithmetic(trimmed) < arithmetic(original)
    trimmed.signature.name = "janus_test_folded_f"
    context.context().add_function_def(trimmed)

    @tf.function(autograph=False)
    def call_folded(ids):
        return gen_functional_ops.stateful_partitioned_call(
            args=[ids, table.handle], Tout=[tf.float32], f=attr_value_pb2.NameAttrList(name=trimmed.signature.name)
        )[0]

    for ids in ([0, 3], [2, 2]):
        np.testing.assert_array_equal(call_folded(tf.constant(ids)).numpy(), f(tf.constant(ids)).numpy())


def test_recursive_gradients_run_without_shape_arithmetic_and_answer_as_eager():
    """A TreeRNN's backward function: the embedding gradient's shapes and the zero gradients are
    constants; values, gradients and trained weights as eager's, graphs serving the calls."""
    rng = np.random.default_rng(5)
    calls = [([random_tree(rng, int(rng.integers(1, 12))) for _ in range(3)],) for _ in range(9)]
    jitted = run_differential(tree_program(train=True), calls, min_graph_calls=5)
    assert janus.stats(jitted)["graph_calls"] >= 5
    ctx = context.context()
    rf = list(recursion_grad.registry.values())[-1]
    names, ops = [rf.bwd_name], []
    while names:
        fdef = ctx.get_function_def(names.pop())
        ops += [n.op for n in fdef.node_def]
        names += function_trim._branch_functions(fdef)
    assert not {"Fill", "StridedSlice", "ConcatOffset", "FloorMod"} & set(ops)
