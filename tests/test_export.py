"""``janus.export``: the graph janus serves, saved as a SavedModel that TensorFlow serves without janus.

Round trips load the SavedModel in a fresh Python process where ``import janus`` fails (so neither
janus nor its C++ op library can be used) and compare what it serves with eager's results.
"""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import tensorflow as tf
from differential import assert_same

import janus

# Loads the SavedModel at argv[1] without janus; calls it with the inputs in argv[2] (an .npz of
# c<i>_<j>: argument j of call i; "signature" in argv[4] calls serving_default by name instead);
# writes each call's flat outputs (or its error) and the saved variables afterwards to argv[3].
SERVE_ELSEWHERE = textwrap.dedent(
    """
    import json, sys
    sys.modules["janus"] = None  # any import of janus fails here
    import numpy as np
    import tensorflow as tf

    loaded = tf.saved_model.load(sys.argv[1])
    inputs = np.load(sys.argv[2])
    mode = json.loads(sys.argv[4])
    results, out = [], {}
    for i, names in enumerate(mode["calls"]):
        args = [tf.constant(inputs[f"c{i}_{j}"]) for j in range(len(names))]
        try:
            if mode["signature"]:
                result = loaded.signatures["serving_default"](**dict(zip(names, args)))
                result = [result[k] for k in sorted(result)]
            else:
                result = tf.nest.flatten(loaded.serve(*args))
        except tf.errors.InvalidArgumentError as err:
            results.append(err.message)
            continue
        results.append(len(result))
        out.update({f"r{i}_{k}": r.numpy() for k, r in enumerate(result)})
    out.update({f"v{k}": v.numpy() for k, v in enumerate(loaded.janus_variables)})
    np.savez(sys.argv[3], **out)
    print(json.dumps({"results": results, "janus_loaded": "janus" in sys.modules and sys.modules["janus"] is not None}))
    """
)


def serve_elsewhere(path, calls, names, tmp_path, signature=False):
    """Each call's flat outputs (a list of arrays) or its error message, and the values of the saved
    variables afterwards (``janus_variables``, in order), from a fresh process without janus."""
    np.savez(
        tmp_path / "inputs.npz", **{f"c{i}_{j}": np.asarray(a) for i, c in enumerate(calls) for j, a in enumerate(c)}
    )
    mode = json.dumps({"calls": [names] * len(calls), "signature": signature})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [
        sys.executable,
        "-c",
        SERVE_ELSEWHERE,
        str(path),
        str(tmp_path / "inputs.npz"),
        str(tmp_path / "out.npz"),
    ]
    done = subprocess.run([*command, mode], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert not report["janus_loaded"]
    arrays = np.load(tmp_path / "out.npz")
    results = [
        r if isinstance(r, str) else [arrays[f"r{i}_{k}"] for k in range(r)] for i, r in enumerate(report["results"])
    ]
    return results, [arrays[f"v{k}"] for k in range(sum(f.startswith("v") for f in arrays.files))]


def flat(result):
    return [np.asarray(r) for r in tf.nest.flatten(result)]


def assert_flat_same(expected, actual, where):
    assert len(expected) == len(actual), where
    for n, (e, a) in enumerate(zip(expected, actual)):
        assert_same(tf.constant(e), tf.constant(a), f"{where} output {n}")


# ------------------------------------------------------------------ a module with variables, a round trip
class Scorer(tf.Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w = tf.Variable(rng.normal(size=(4, 3)).astype("float32"))
        self.calls = tf.Variable(0, name="calls")
        self.bias = tf.constant([0.5, -0.25, 0.0])  # a tensor on self: baked in
        self.scale = 0.5  # a Python value the graph is specialised on: baked in

    @janus.jit
    def score(self, x):
        self.calls.assign_add(1)
        h = tf.nn.relu(tf.matmul(x, self.w) + self.bias) * self.scale
        if tf.reduce_min(x) > -100.0:  # always true while profiled: speculated, behind an assertion
            h = h + 1.0
        return {"h": h, "total": tf.reduce_sum(h)}


@pytest.fixture
def scorer():
    """A new Scorer, its jitted method (shared by all instances) profiled afresh."""
    Scorer.score.reset()
    return Scorer()


def batch(n, seed=1):
    return tf.constant(np.random.default_rng(seed).normal(size=(n, 4)).astype("float32"))


def test_round_trip_in_a_process_without_janus_serves_eager_results(scorer, tmp_path):
    for n in (2, 5, 2, 7, 3):  # two batch sizes while profiled: janus relaxes the batch dimension
        scorer.score(batch(n, seed=n))
    assert janus.stats(scorer.score)["graph_calls"] > 0
    module = janus.export(scorer.score, batch(3), path=tmp_path / "scorer")
    assert module.serve.get_concrete_function().structured_input_signature[0][0].shape.as_list() == [None, 4]
    calls_at_export = int(scorer.calls.numpy())
    calls = [k for k, v in enumerate(module.janus_variables) if v is scorer.calls]

    inputs = [(batch(3, seed=10),), (batch(6, seed=11),), (batch(1, seed=12) - 1000.0,), (batch(4, seed=13),)]
    results, variables = serve_elsewhere(tmp_path / "scorer", inputs, ["x"], tmp_path)
    eager = Scorer.score.fn
    for n in (0, 1, 3):
        assert_flat_same(flat(eager(scorer, *inputs[n])), results[n], f"call {n}")
    # eager takes the other side of the `if`: the graph janus speculated with cannot serve it, and says so
    assert "branch" in results[2] and "test_export.py" in results[2] and "janus export" in results[2]
    assert [variables[k] for k in calls] == [calls_at_export + 3]  # the refused call updated nothing


def test_serving_default_signature_takes_the_arguments_by_name(scorer, tmp_path):
    for n in (2, 5, 2, 7):
        scorer.score(batch(n, seed=n))
    janus.export(scorer.score, batch(2), path=tmp_path / "scorer")
    results, _ = serve_elsewhere(tmp_path / "scorer", [(batch(9),)], ["x"], tmp_path, signature=True)
    expected = Scorer.score.fn(scorer, batch(9))
    assert_flat_same([expected["h"], expected["total"]], results[0], "serving_default")  # sorted: h, total


# ------------------------------------------------------------------ a Keras model and its training step
def keras_program():
    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.layers.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.BatchNormalization(),
         keras.layers.Dense(3)]
    )  # fmt: skip
    opt = keras.optimizers.SGD(0.1)

    def predict(x):
        return tf.nn.softmax(model(x, training=False))

    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return model, predict, train_step


def labelled(n, seed):
    rng = np.random.default_rng(seed)
    return tf.constant(rng.normal(size=(n, 8)).astype("float32")), tf.constant(rng.integers(0, 3, n).astype("int32"))


@pytest.mark.keras
def test_keras_model_forward_pass_round_trip(tmp_path):
    model, predict, train_step = keras_program()
    jitted_step, jitted_predict = janus.jit(train_step), janus.jit(predict)
    for seed in range(5):
        jitted_step(*labelled(16, seed))
        jitted_predict(labelled(16, seed)[0])
    assert janus.stats(jitted_step)["graph_calls"] > 0 and janus.stats(jitted_predict)["graph_calls"] > 0
    janus.export(jitted_predict, labelled(16, 0)[0], path=tmp_path / "predict")
    inputs = [(labelled(16, 7)[0],), (labelled(16, 8)[0],)]
    results, _ = serve_elsewhere(tmp_path / "predict", inputs, ["x"], tmp_path)
    for n, args in enumerate(inputs):
        assert_flat_same(flat(predict(*args)), results[n], f"call {n}")


@pytest.mark.keras
def test_keras_training_step_exports_its_variable_updates(tmp_path):
    model, _, train_step = keras_program()
    jitted = janus.jit(train_step)
    for seed in range(5):
        jitted(*labelled(16, seed))
    assert janus.stats(jitted)["graph_calls"] > 0
    module = janus.export(jitted, *labelled(16, 0), path=tmp_path / "step")
    steps = [labelled(16, seed) for seed in (20, 21, 22)]
    results, variables = serve_elsewhere(tmp_path / "step", steps, ["x", "y"], tmp_path)
    for n, args in enumerate(steps):  # eager steps from the same weights and optimizer state: the same losses
        assert_flat_same(flat(train_step(*args)), results[n], f"step {n}")
    assert len(variables) == len(module.janus_variables) > len(model.trainable_variables)  # and the optimizer's
    for k, (original, loaded) in enumerate(zip(module.janus_variables, variables)):  # updated by eager's steps
        assert_same(original.read_value(), tf.constant(loaded), f"variable {k} ({original.name}) after 3 steps")


# ------------------------------------------------------------------ shapes and values
def test_input_signature_asks_for_a_relaxed_batch_dimension(scorer, tmp_path):
    for _ in range(4):  # one batch size only: janus's graph takes exactly [3, 4]
        scorer.score(batch(3))
    janus.export(scorer.score, batch(3), path=tmp_path / "exact")
    exact = tf.saved_model.load(str(tmp_path / "exact"))
    assert exact.serve.concrete_functions[0].structured_input_signature[0][0].shape.as_list() == [3, 4]

    janus.export(scorer.score, batch(3), path=tmp_path / "any", input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    loaded = tf.saved_model.load(str(tmp_path / "any"))
    expected, served = Scorer.score.fn(scorer, batch(8)), loaded.serve(batch(8))
    assert_same(dict(sorted(expected.items())), dict(sorted(served.items())))  # a loaded dict's key order is TF's
    with pytest.raises(janus.ExportError, match="dtype int32, but it is float32"):
        janus.export(
            scorer.score, batch(3), path=tmp_path / "bad", input_signature=[tf.TensorSpec([None, 4], tf.int32)]
        )


table = tf.Variable(np.random.default_rng(3).normal(size=(10, 3)).astype("float32"))


@janus.jit
def embed(ids):
    return tf.reduce_sum(tf.gather(table, ids), axis=0)


def test_a_small_int_tensor_janus_specialised_on_its_value_is_exported_for_any_value(tmp_path):
    ids = tf.constant([1, 2, 3])
    for _ in range(5):
        embed(ids)
    assert janus.stats(embed)["graph_calls"] > 0
    assert janus.explain(embed).count("== constant") >= 1  # janus's own graph asserts the value
    janus.export(embed, ids, path=tmp_path / "embed")
    loaded = tf.saved_model.load(str(tmp_path / "embed"))
    other = tf.constant([7, 0, 9])
    assert_same(embed.fn(other), loaded.serve(other))


@janus.jit
def ramp(n):
    y = tf.zeros([n])
    total = 0.0
    for i in range(y.shape[0]):  # a Python loop over a static dimension: needs n's value
        total += float(i)
    return y + total


def test_a_value_the_code_needs_stays_speculated_and_the_export_says_which(tmp_path):
    three = tf.constant(3)
    for _ in range(5):
        ramp(three)
    assert janus.stats(ramp)["graph_calls"] > 0
    janus.export(ramp, three, path=tmp_path / "ramp")
    loaded = tf.saved_model.load(str(tmp_path / "ramp"))
    assert_same(ramp.fn(three), loaded.serve(three))
    with pytest.raises(tf.errors.InvalidArgumentError, match="janus export: .*argument n == constant"):
        loaded.serve(tf.constant(4))


@janus.jit
def double_or_negate(x):
    if tf.reduce_sum(x) > 0.0:
        return x * 2.0
    return -x


def test_speculate_false_exports_both_sides_of_a_tensor_if(tmp_path):
    positive = tf.constant([1.0, 2.0])
    for _ in range(5):
        double_or_negate(positive)
    assert janus.stats(double_or_negate)["graph_calls"] > 0
    janus.export(double_or_negate, positive, path=tmp_path / "speculated")
    janus.export(double_or_negate, positive, path=tmp_path / "general", speculate=False)
    negative = tf.constant([-1.0, -2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="janus export: .*branch"):
        tf.saved_model.load(str(tmp_path / "speculated")).serve(negative)
    general = tf.saved_model.load(str(tmp_path / "general"))
    for x in (positive, negative):
        assert_same(double_or_negate.fn(x), general.serve(x))


@janus.jit
def double_n_times(x, n):
    i = tf.constant(0)
    while i < n:
        x = x * 2.0
        i += 1
    return x


def test_speculate_false_exports_a_loop_janus_unrolled_as_a_while_loop(tmp_path):
    x, three = tf.ones([2]), tf.constant(3)
    for _ in range(5):  # n is a small int tensor with one value: janus unrolls the loop three times
        double_n_times(x, three)
    assert janus.stats(double_n_times)["graph_calls"] > 0
    janus.export(double_n_times, x, three, path=tmp_path / "unrolled")
    janus.export(double_n_times, x, three, path=tmp_path / "loop", speculate=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match="janus export: .*loop runs 3 times"):
        tf.saved_model.load(str(tmp_path / "unrolled")).serve(x, tf.constant(5))
    loop = tf.saved_model.load(str(tmp_path / "loop"))
    for n in (0, 3, 5):
        assert_same(double_n_times.fn(x, tf.constant(n)), loop.serve(x, tf.constant(n)))


@janus.jit
def combine(pair, named, scale):
    return pair[0] * named["b"] + pair[1] * named["a"] * scale


def test_tuple_and_dict_arguments_and_a_baked_python_number(tmp_path):
    args = ((tf.ones([2]), tf.fill([2], 3.0)), {"b": tf.constant([1.0, 2.0]), "a": tf.constant([5.0, 7.0])}, 2.0)
    for _ in range(5):
        combine(*args)
    assert janus.stats(combine)["graph_calls"] > 0
    janus.export(combine, *args, path=tmp_path / "combine")
    loaded = tf.saved_model.load(str(tmp_path / "combine"))
    pair, named = (tf.constant([1.0, -1.0]), tf.constant([0.5, 4.0])), {"b": tf.constant([3.0, 3.0]), "a": tf.ones([2])}
    assert_same(combine.fn(pair, named, 2.0), loaded.serve(pair, named))
    by_name = loaded.signatures["serving_default"](
        pair_0=pair[0], pair_1=pair[1], named_b=named["b"], named_a=named["a"]
    )
    assert_same(combine.fn(pair, named, 2.0), by_name["output_0"])


# ------------------------------------------------------------------ refusals
class Counter:
    def __init__(self):
        self.steps = 0

    @janus.jit
    def step(self, x):
        self.steps += 1
        return x * 2.0


@janus.jit
def noisy(x):
    print("called")
    return x + 1.0


class Node:
    def __init__(self, value):
        self.value = value


@janus.jit
def read_node(node, x):
    return x * node.value


def test_a_python_attribute_write_is_refused_with_its_reason(tmp_path):
    counter = Counter()
    for _ in range(5):
        counter.step(tf.ones([2]))
    assert janus.stats(counter.step)["graph_calls"] > 0
    with pytest.raises(
        janus.ExportError, match=r"cannot export .*attribute steps of argument self is set \(.*test_export"
    ):
        janus.export(counter.step, tf.ones([2]), path=tmp_path / "counter")
    assert not (tmp_path / "counter").exists()


def test_a_deferred_print_is_refused(tmp_path, capsys):
    for _ in range(5):
        noisy(tf.ones([2]))
    assert janus.stats(noisy)["graph_calls"] > 0
    with pytest.raises(janus.ExportError, match="a call of print made after the graph ran"):
        janus.export(noisy, tf.ones([2]), path=tmp_path / "noisy")


def test_objects_read_through_the_heap_ops_are_refused(tmp_path):
    for n in range(5):  # a new object every call: passed by pointer, read through janus's heap ops
        read_node(Node(float(n)), tf.ones([2]))
    assert janus.stats(read_node)["graph_calls"] > 0
    with pytest.raises(janus.ExportError, match="janus's heap ops"):
        janus.export(read_node, Node(3.0), tf.ones([2]), path=tmp_path / "node")


class Tree:
    def __init__(self, value, left=None, right=None):
        self.value, self.left, self.right = value, left, right


def tree(depth, seed):
    if depth == 0:
        return Tree(seed % 7)
    return Tree(0, tree(depth - 1, seed * 2), tree(depth - 1, seed * 2 + 1))


class TreeSum:
    def __init__(self):
        self.embedding = tf.Variable(np.random.default_rng(0).normal(size=(7, 2)))

    def total(self, node):
        if node.left is None:
            return tf.nn.embedding_lookup(self.embedding, [node.value])
        return tf.tanh(self.total(node.left) + self.total(node.right))

    @janus.jit
    def score(self, node):
        return self.total(node)


def test_a_recursive_function_is_refused(tmp_path):
    model = TreeSum()
    for seed in range(5):  # a new tree every call, of another shape
        model.score(tree(1 + seed % 3, seed))
    assert janus.stats(model.score)["graph_calls"] > 0
    with pytest.raises(janus.ExportError, match="recursive functions, through janus's JanusInvoke op"):
        janus.export(model.score, tree(2, 9), path=tmp_path / "tree")


def test_a_function_janus_runs_imperatively_is_refused_with_the_reason(tmp_path):
    @janus.jit
    def uses_numpy(x):
        return x + float(np.sum(x.numpy()))

    with pytest.raises(janus.ExportError, match="no graph to export"):
        janus.export(uses_numpy, tf.ones([2]), path=tmp_path / "numpy")


# ------------------------------------------------------------------ tf.saved_model.save
def test_tf_saved_model_save_warns_about_a_jitted_method_it_leaves_out(scorer, tmp_path):
    with pytest.warns(janus.JitNotSavedWarning, match=r"Scorer\.score is a @janus\.jit .*janus\.export\(obj\.score"):
        tf.saved_model.save(scorer, str(tmp_path / "scorer"))
    assert not hasattr(tf.saved_model.load(str(tmp_path / "scorer")), "score")  # what the warning says


def test_tf_saved_model_save_of_an_object_without_jitted_methods_does_not_warn(tmp_path):
    module = tf.Module()
    module.w = tf.Variable(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", janus.JitNotSavedWarning)
        tf.saved_model.save(module, str(tmp_path / "plain"))


def test_a_function_whose_graph_speculates_on_a_try_is_refused(tmp_path):
    w = tf.Variable([1.0, 2.0])

    @janus.jit
    def guarded(x):
        try:
            y = tf.debugging.check_numerics(x * w, "nan")
        except tf.errors.InvalidArgumentError:
            y = tf.zeros_like(x)
        return y

    for _ in range(5):
        guarded(tf.constant([1.0, 1.0]))
    assert janus.stats(guarded)["graph_calls"] > 0
    with pytest.raises(janus.ExportError, match="speculates that a `try` body does not raise"):
        janus.export(guarded, tf.constant([1.0, 1.0]), path=str(tmp_path / "m"))
